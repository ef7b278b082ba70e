// End-to-end: the oomdoc binary with real command lines; exit status 0 fits, 1 does not, 2 bad input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "analyses/vllm_serve.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

using testing::run_cli;

TEST(ServeCli, FitsExitsZeroAndPrintsVllmsLines) {
  auto r = run_cli({"serve", "--gpu", "h100", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                    "--max-model-len", "32768", "--port", "8000"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("on H100 SXM 80GB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPU KV cache size: "), std::string::npos);
  EXPECT_NE(r.out.find("Maximum concurrency for 32,768 tokens per request: "), std::string::npos);
  EXPECT_NE(r.out.find("Ignored (no effect on GPU memory): --port 8000"), std::string::npos);
  EXPECT_EQ(r.out.find("\x1b["), std::string::npos);  // no colour when not a terminal
}

// The budget line shows the fraction as given: 0.925 is not 0.93, a tiny one is not 0.00.
TEST(ServeCli, BudgetLineShowsTheUtilizationAsGiven) {
  auto given = run_cli({"serve", "--memory", "80GiB", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                        "--max-model-len", "8192", "--gpu-memory-utilization", "0.925"});
  EXPECT_NE(given.out.find("Budget per GPU  80.00 GiB total x 0.925 = 74.00 GiB"), std::string::npos) << given.out;
  auto tiny = run_cli({"serve", "--memory", "80GiB", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                       "--gpu-memory-utilization", "1e-4"});
  EXPECT_NE(tiny.out.find("total x 0.0001 = 8.19 MiB"), std::string::npos) << tiny.out;
  auto by_default = run_cli({"serve", "--memory", "80GiB", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"});
  EXPECT_NE(by_default.out.find("total x 0.92 (default of current vLLM)"), std::string::npos) << by_default.out;
}

// Padded KV groups: Gemma 3 27B's 52 sliding and 10 full layers are 7 groups of 10 page slots, so a
// pool token costs 70 pages of 8 KiB, not the 62 layers' 496 KiB, and the line multiplies out
// (28,960 x 560 KiB = 15.47 GiB).
TEST(ServeCli, PaddedKvGroupsPriceThePoolToken) {
  auto r = run_cli({"serve", "--gpu", "H100 SXM 80GB", "--", "vllm", "serve", "google/gemma-3-27b-it", "--max-model-len",
                    "131072"});
  EXPECT_NE(r.out.find("KV cache             15.47 GiB  = 28,960 tokens of 560.00 KiB (7 groups x 10 layer pages for "
                       "62 layers; 2 x 62 layers x 16 KV heads x 128 x 2 B = 496.00 KiB)"),
            std::string::npos) << r.out;
}

// An LLM(...) call's error names the keyword as written, not the CLI flag.
TEST(ServeCli, LlmCallErrorsNameTheKeyword) {
  auto r = run_cli({"serve", "--gpu", "4090", "--", "LLM(model=\"Qwen/Qwen2.5-7B-Instruct\", max_model_len=131_072)"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("oomdoc: serve: max_model_len=131072 is above Qwen/Qwen2.5-7B-Instruct's context of 32768 "
                        "tokens; vLLM refuses it", 0), 0u) << r.err;
  auto cli = run_cli({"serve", "--gpu", "4090", "--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len",
                      "131072"});
  EXPECT_EQ(cli.err.rfind("oomdoc: serve: --max-model-len 131072 is above", 0), 0u) << cli.err;
  // Every flag the error names, not only the first.
  auto two = run_cli({"serve", "--gpu", "4090", "--",
                      "LLM(model=\"Qwen/Qwen2.5-7B-Instruct\", max_num_batched_tokens=64, max_num_seqs=128)"});
  EXPECT_EQ(two.err.rfind("oomdoc: serve: max_num_batched_tokens=64 below max_num_seqs=128: vLLM refuses it", 0), 0u)
      << two.err;
}

TEST(ServeCli, GptOssOnH100) {
  auto r = run_cli({"serve", "--gpu", "h100", "--", "vllm", "serve", "openai/gpt-oss-20b"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Model loading took 12.8474 GiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mxfp4: 0.53125 B per expert weight, the rest bfloat16"), std::string::npos) << r.out;
  auto big = run_cli({"serve", "--gpu", "h100", "--json", "--", "vllm", "serve", "openai/gpt-oss-120b",
                      "--tensor-parallel-size", "2"});
  ASSERT_EQ(big.exit_code, 0) << big.err;
  auto doc = nlohmann::json::parse(big.out);
  // per GPU with the 32 MiB rotary cache, tests/analyses/vllm_serve_test.cpp
  EXPECT_EQ(doc["components"]["weights"]["bytes"], 32637893760ull + 131072ull * 64 * 4);
  EXPECT_EQ(doc["kv_cache"]["full_layers"], 18);
  EXPECT_EQ(doc["kv_cache"]["sliding_layers"], 18);
  EXPECT_EQ(doc["kv_cache"]["num_groups"], 2);
}

TEST(ServeCli, DoesNotFitExitsOneWithTheErrorAndFixes) {
  auto r = run_cli({"serve", "--gpu", "4090", "--vllm-version", "0.8.5", "--",
                    "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 131072"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("To serve at least one request with the models's max seq len (131072)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Fixes, cheapest first"), std::string::npos);
  EXPECT_NE(r.out.find("--max-model-len "), std::string::npos);
  EXPECT_NE(r.out.find("gpu_memory_utilization 0.90: the default of vLLM 0.8.5"), std::string::npos);
}

TEST(ServeCli, ADockerImageTagNamesTheVersion) {
  // The tag's "v" is no part of the version's name.
  auto tagged = run_cli({"serve", "--gpu", "h100", "--", "docker", "run", "--gpus", "all",
                         "vllm/vllm-openai:v0.8.5", "--model", "Qwen/Qwen2.5-7B-Instruct"});
  EXPECT_EQ(tagged.exit_code, 0) << tagged.err;
  EXPECT_NE(tagged.out.find("gpu_memory_utilization 0.90: the default of vLLM 0.8.5 ("), std::string::npos)
      << tagged.out;
  // "latest" is no version: the current defaults, said as an assumption.
  auto latest = run_cli({"serve", "--gpu", "h100", "--", "docker", "run", "vllm/vllm-openai:latest",
                         "--model", "Qwen/Qwen2.5-7B-Instruct"});
  EXPECT_NE(latest.out.find("no --vllm-version: assumed a current vLLM"), std::string::npos) << latest.out;
  // --vllm-version wins over the tag.
  auto both = run_cli({"serve", "--gpu", "h100", "--vllm-version", "0.6.4", "--", "docker", "run",
                       "vllm/vllm-openai:v0.8.5", "--model", "Qwen/Qwen2.5-7B-Instruct"});
  EXPECT_NE(both.out.find("the default of vLLM 0.6.4"), std::string::npos) << both.out;
  // ... and the disagreement is said.
  EXPECT_NE(both.out.find("the image vllm/vllm-openai:v0.8.5 runs vLLM 0.8.5, but --vllm-version 0.6.4 was given: "
                          "sized for 0.6.4"), std::string::npos) << both.out;
  auto agree = run_cli({"serve", "--gpu", "h100", "--vllm-version", "0.8.5", "--", "docker", "run",
                        "vllm/vllm-openai:v0.8.5", "--model", "Qwen/Qwen2.5-7B-Instruct"});
  EXPECT_EQ(agree.out.find("runs vLLM"), std::string::npos) << agree.out;
}

TEST(ServeCli, JsonDocument) {
  auto r = run_cli({"serve", "--memory", "24GiB", "--json", "--", "python", "-m", "vllm.entrypoints.openai.api_server",
                    "--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", "--kv-cache-dtype", "fp8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["command"], "serve");
  EXPECT_EQ(doc["launcher"], "python -m vllm.entrypoints.openai.api_server");
  EXPECT_EQ(doc["gpu"]["total_bytes"], 24ull << 30);
  EXPECT_EQ(doc["kv_cache"]["bytes_per_token"], 28 * 1024);   // 2 x 28 x 4 x 128 x 1 B (fp8)
  EXPECT_EQ(doc["settings"]["kv_cache_dtype"], "fp8");
  EXPECT_EQ(doc["fits"], true);
  EXPECT_TRUE(doc["error"].is_null());
  EXPECT_TRUE(doc["components"]["weights"]["bytes"].is_number_unsigned());
  EXPECT_EQ(doc["kv_cache"]["tokens"].get<uint64_t>() % 16, 0u);
  EXPECT_TRUE(doc["vllm"]["version"].is_null());
  EXPECT_TRUE(doc["fixes"].is_array());
}

// An MoE model with data parallelism: the routed experts are spread over DP x TP GPUs, the rest is
// whole on each (vLLM's data parallel deployment: "expert layers form a tensor parallel group of
// size DP x TP"). Qwen3-30B-A3B: 48 layers x 128 experts x 3 x 2048 x 768 routed parameters.
TEST(ServeCli, MoeDataParallelSpreadsTheExperts) {
  auto one = run_cli({"serve", "--gpu", "h100", "--json", "--", "vllm", "serve", "Qwen/Qwen3-30B-A3B",
                      "--max-model-len", "32768"});
  auto four = run_cli({"serve", "--gpu", "h100", "--json", "--", "vllm", "serve", "Qwen/Qwen3-30B-A3B",
                       "--max-model-len", "32768", "-dp", "4", "--enable-expert-parallel"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_EQ(four.exit_code, 0) << four.err;
  auto a = nlohmann::json::parse(one.out), b = nlohmann::json::parse(four.out);
  const double routed_bytes = 48.0 * 128 * 3 * 2048 * 768 * 2;
  EXPECT_NEAR(a["components"]["weights"]["bytes"].get<double>() - b["components"]["weights"]["bytes"].get<double>(),
              routed_bytes * 3 / 4, 4.0);
  EXPECT_EQ(b["gpu"]["count"], 4);
  EXPECT_EQ(b["settings"]["data_parallel_size"], 4);
  // The KV layout is each rank's own: unchanged per GPU.
  EXPECT_EQ(a["kv_cache"]["bytes_per_token"], b["kv_cache"]["bytes_per_token"]);
}

TEST(ServeCli, WeightAndActivationOverridesFromALog) {
  auto r = run_cli({"serve", "--memory", "23.58GiB", "--vllm-version", "0.6.4", "--weights", "14.99GiB",
                    "--activation", "2.07GiB", "--non-torch", "0.35GiB", "--json", "--",
                    "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "20000",
                    "--gpu-memory-utilization", "0.9"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["components"]["weights"]["from_log"], true);
  // 23.58 GiB x 0.9 - 14.99 - 2.07 - 0.35 GiB = 3.812 GiB = 1951 blocks of 2 MiB.
  EXPECT_EQ(doc["kv_cache"]["num_blocks"], 1951);
  // v0.6.4's lines (vllm-logs record 1 logged 1952 blocks and 1.56x); its one-line profiling
  // summary is not reproduced.
  EXPECT_EQ(doc["log_lines"], nlohmann::json::array({"Loading model weights took 14.9900 GB",
                                                     "# GPU blocks: 1951, # CPU blocks: 2048",
                                                     "Maximum concurrency for 20000 tokens per request: 1.56x"}));
}

TEST(ServeCli, BadInputIsOneLineAndExitTwo) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"serve", "--gpu", "4090", "--", "python", "train.py"}, "oomdoc: serve: not a vLLM command line: 'python train.py'"},
           {{"serve", "--gpu", "4090", "--", "vllm", "serve", "acme/no-such-model-7b"}, "oomdoc: serve: acme/no-such-model-7b: "},
           {{"serve", "--gpu", "h300", "--", "vllm", "serve", "llama-3-8b"}, "oomdoc: serve: --gpu: unknown GPU 'h300'; closest catalog entries: "},
           {{"serve", "--", "vllm", "serve", "llama-3-8b"}, "oomdoc: serve: which GPU? pass --gpu NAME"},
           {{"serve", "--gpu", "4090"}, "oomdoc: serve: give the vLLM command after `--`"},
           {{"serve", "--gpu", "4090", "vllm", "serve", "llama-3-8b", "--max-model-len", "4096"},
            "oomdoc: serve: --max-model-len: not an oomdoc serve option; vLLM's flags go after `--`"},
           // A vLLM flag before `--`: the flag is named, not the words after `--`.
           {{"serve", "--gpu", "4090", "--enforce-eager", "--", "vllm", "serve", "llama-3-8b"},
            "oomdoc: serve: --enforce-eager: not an oomdoc serve option; vLLM's flags go after `--`"},
           {{"serve", "--gpus", "2", "--gpu", "4090", "--", "vllm", "serve", "llama-3-8b"},
            "oomdoc serve: --gpus: unknown option (see oomdoc serve --help)"},
           {{"serve", "--gpu", "4090", "--tp=2", "--", "vllm", "serve", "llama-3-8b"},
            "oomdoc: serve: --tp: not an oomdoc serve option; vLLM's flags go after `--`"},
           {{"serve", "--gpu", "4090", "--max-model-len", "8192", "--", "vllm", "serve", "llama-3-8b"},
            "oomdoc serve: --max-model-len: unknown option (see oomdoc serve --help)"},
           // oomdoc's own options after `--` are inside the vLLM command.
           {{"serve", "--gpu", "4090", "--", "vllm", "serve", "llama-3-8b", "--json"},
            "oomdoc: serve: --json is oomdoc's option, but it comes after `--`, inside the vLLM command: put it before `--`"},
           {{"serve", "--", "vllm", "serve", "llama-3-8b", "--max-model-len", "4096", "--gpu", "h100"},
            "oomdoc: serve: --gpu is oomdoc's option, but it comes after `--`, inside the vLLM command: put it before `--`"},
           {{"serve", "--memory", "lots", "--", "vllm", "serve", "llama-3-8b"}, "oomdoc: serve: --memory: 'lots' is not a size"},
           {{"serve", "--gpu", "4090", "--vllm-version", "new", "--", "vllm", "serve", "llama-3-8b"}, "oomdoc: serve: --vllm-version: 'new' is not a version"},
           {{"serve", "--gpu", "4090", "--", "vllm", "serve", "llama-3-8b", "--max-model-len", "32768"},
            "oomdoc: serve: --max-model-len 32768 is above meta-llama/Meta-Llama-3-8B's context of 8192 tokens"},
           {{"serve", "--gpu", "h100", "--", "vllm", "serve", testing::fixture_path("serve/jamba-v0.1")},
            "oomdoc: serve: " + testing::fixture_path("serve/jamba-v0.1") +
                "/config.json: model_type \"jamba\" has Mamba or linear-attention layers; vLLM keeps a fixed-size "
                "recurrent state per request"},
       }) {
    auto r = run_cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.message;
    EXPECT_EQ(r.err.rfind(c.message, 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// serve has no --params: the unknown-model error says what is missing and nothing more.
TEST(ServeCli, UnknownModelDoesNotSuggestParams) {
  auto r = run_cli({"serve", "--gpu", "h100", "--", "vllm", "serve", "no-such-model-xyz"}, "",
                   testing::kNoModelCache);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no-such-model-xyz: not a file or folder, not in the Hugging Face cache, and not a bundled "
                       "preset (closest: "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--params"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(ServeCli, ADotForATokenCountIsOneLineNamingTheFlag) {
  // "." passed the digit check and reached std::stod: an abort (exit 134) before.
  auto len = run_cli({"serve", "--gpu", "h100", "--", "vllm", "serve", "M", "--max-model-len", ".k"});
  EXPECT_EQ(len.exit_code, 2);
  EXPECT_EQ(len.out, "");
  EXPECT_EQ(len.err, "oomdoc: serve: --max-model-len: '.k' is not a positive whole number\n");
  auto mm = run_cli({"serve", "--gpu", "h100", "--", "vllm", "serve", "M", "--limit-mm-per-prompt", "image=.k"});
  EXPECT_EQ(mm.exit_code, 2);
  EXPECT_EQ(mm.err, "oomdoc: serve: --limit-mm-per-prompt: 'image=.k' is not MODALITY=COUNT\n");
}

TEST(ServeCli, VllmServesAGgufFileAsStored) {
  // vLLM keeps a GGUF file's quantized blocks: the weights are every tensor of the file
  // (tools/gen_gguf.py's tiny model: 2 blocks of 46,336 B, embeddings and head of 17,408 B, a
  // 256-byte norm), plus vLLM's rotary cache: 2,048 positions x head size 16 x 2 B.
  auto r = run_cli({"serve", "--json", "--gpu", "4090", "--", "vllm", "serve",
                    testing::fixture_path("gguf/tiny_llama_q8_0.gguf"), "--max-model-len", "1024"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["components"]["weights"]["bytes"].get<uint64_t>(), 2u * 46336 + 2 * 17408 + 256 + 2048u * 16 * 2);
}

TEST(ServeCli, LlamaServerCommandLinesAreSizedFromTheGgufFile) {
  const std::string gguf = testing::fixture_path("gguf/tiny_llama_q8_0.gguf");
  auto r = run_cli({"serve", "--gpu", "3060", "--", "llama-server", "-m", gguf, "-c", "8192", "-ngl", "99", "-fa",
                    "--port", "8080", "-np", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("in llama.cpp (llama-server)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FITS as given"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ignored (no effect on GPU memory): --port 8080"), std::string::npos) << r.out;
  // -c 8192 over 2 slots with -fa: 4096 cells per sequence in the JSON document's job.
  auto j = run_cli({"serve", "--json", "--gpu", "3060", "--", "llama-server -m " + gguf + " -c 8192 -np 2 -fa -ctk q8_0 -ctv q8_0"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["command"], "serve");
  EXPECT_EQ(doc["launcher"], "llama-server");
  EXPECT_TRUE(doc["fits"].get<bool>());
  // The tiny file's 110,336 B on the GPU; KV: 4096 cells x 2 slots x 2 layers x 64 values in q8_0
  // (34 B per 32); compute with -fa: the f16 mask over 8192 cells for 512 tokens, plus the
  // residual, Q, K and V in f32 (512 x 4 x 192).
  EXPECT_EQ(doc["peak_allocated_bytes"].get<uint64_t>(),
            110336u + 8192u * 2 * 64 * 34 / 32 + (512u * 8192 * 2 + 512u * 4 * 192));
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"serve", "--gpu", "3060", "--", "llama-server", "-hf", "org/model-GGUF"}, "oomdoc: serve: llama-server: -hf: oomdoc reads the GGUF file itself"},
           {{"serve", "--gpu", "3060", "--", "llama-server", "-c", "4096"}, "oomdoc: serve: llama-server: no model given"},
           {{"serve", "--gpu", "3060", "--", "llama-server", "-m", gguf, "-c", "lots"}, "oomdoc: serve: llama-server: -c 'lots' is not a count"},
           {{"serve", "--gpu", "3060", "--", "llama-server", "-m", gguf, "-c", "2000000000"},
            "oomdoc: serve: llama-server: -c '2000000000' is out of range (at most 16777216)"},
           {{"serve", "--gpu", "3060", "--", "llama-server", "-m", gguf, "-ctk", "fp32"},
            "oomdoc: serve: llama-server: -ctk fp32: llama.cpp's cache types are f32, f16, bf16, q8_0, q4_0, q4_1, "
            "iq4_nl, q5_0, q5_1; it exits with \"Unsupported cache type: fp32\"\n"},
           {{"serve", "--gpu", "4090", "--", "llama-server", "-m", gguf, "--ctx-sise", "65536"},
            "oomdoc: serve: llama-server: --ctx-sise: not a llama.cpp flag (did you mean --ctx-size?); it exits with "
            "\"error: invalid argument: --ctx-sise\"\n"},
           {{"serve", "--gpu", "4090", "--", "llama-server", "-m", gguf, "--n-gpu-layer", "5"},
            "oomdoc: serve: llama-server: --n-gpu-layer: not a llama.cpp flag (did you mean --n-gpu-layers?); it exits "
            "with \"error: invalid argument: --n-gpu-layer\"\n"},
           {{"serve", "--gpu", "3060", "--", "llama-server", "-m", testing::fixture_path("gguf/truncated.gguf")},
            "oomdoc: serve: " + testing::fixture_path("gguf/truncated.gguf") + ": truncated or corrupt GGUF header"},
       }) {
    auto bad = run_cli(c.args);
    EXPECT_EQ(bad.exit_code, 2) << c.message;
    EXPECT_EQ(bad.err.rfind(c.message, 0), 0u) << bad.err;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
    EXPECT_TRUE(bad.out.empty()) << bad.out;
  }
}

// serve says which card a short --gpu name was read as, as fit does, once the report is made.
TEST(ServeCli, ShortGpuNameSaysWhichSizeItRead) {
  auto r = run_cli({"serve", "--gpu", "a100", "--json", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                    "--max-model-len", "8192"},
                   "", testing::kNoModelCache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string note = "--gpu 'a100' is read as A100 SXM4 80GB; it also names A100 SXM4 40GB, "
                           "A100 PCIe 40GB (give the size, e.g. --gpu 'A100 SXM4 40GB')";
  // --json keeps it in the document's warnings; the text output says it on stderr.
  EXPECT_EQ(nlohmann::json::parse(r.out)["warnings"][0], note);
  EXPECT_EQ(r.err, "");
  auto text = run_cli({"serve", "--gpu", "a100", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                       "--max-model-len", "8192"},
                      "", testing::kNoModelCache);
  EXPECT_EQ(text.err, "oomdoc: note: " + note + "\n");
}

// Speculative decoding end to end (sizes in tests/analyses/vllm_speculative_test.cpp).
TEST(ServeCliSpeculative, DraftModelIsSizedAndInTheJson) {
  auto r = testing::run_cli({"serve", "--gpu", "h100", "--json", "--", "vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct",
                             "-tp", "4", "--max-model-len", "8192", "--speculative-config",
                             R"({"model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 5})"},
                            "", testing::kNoModelCache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["speculative"]["method"], "draft_model");
  EXPECT_EQ(doc["speculative"]["model"], "meta-llama/Llama-3.2-1B-Instruct");
  EXPECT_EQ(doc["speculative"]["draft_weights_bytes"], 634785792u);
  EXPECT_EQ(doc["speculative"]["draft_kv_bytes_per_token"], 8192u);
  EXPECT_EQ(doc["speculative"]["draft_tensor_parallel_size"], 4u);
  EXPECT_EQ(doc["kv_cache"]["bytes_per_token"], 90112u);
  auto text = testing::run_cli({"serve", "--gpu", "h100", "--", "vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct",
                                "-tp", "4", "--max-model-len", "8192", "--speculative-config",
                                R"({"model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 5})"},
                               "", testing::kNoModelCache);
  EXPECT_NE(text.out.find("drafter (draft_model)  605.38 MiB  in the weights above: meta-llama/Llama-3.2-1B-Instruct, "
                          "16 layers"), std::string::npos) << text.out;
}

TEST(ServeCliSpeculative, UnknownDraftModelIsNamed) {
  auto r = testing::run_cli({"serve", "--gpu", "h100", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                             "--speculative-config", R"({"model": "someone/no-such-draft-1b", "num_speculative_tokens": 5})"},
                            "", testing::kNoModelCache);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(r.err.rfind("oomdoc: serve: --speculative-config: draft model 'someone/no-such-draft-1b' cannot be resolved: ", 0),
            0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(ServeCliSpeculative, EagleHeadWithoutItsConfigIsSizedFromTheTarget) {
  auto r = testing::run_cli({"serve", "--gpu", "h100", "--json", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                             "--max-model-len", "8192", "--speculative-config",
                             R"({"model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3})"},
                            "", testing::kNoModelCache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["speculative"]["method"], "eagle");
  EXPECT_EQ(doc["speculative"]["model_source"], "the target's shape (assumed)");
  EXPECT_EQ(doc["speculative"]["draft_weights_bytes"], 503324672u);
  EXPECT_EQ(doc["speculative"]["shares_lm_head"], true);
}

TEST(ServeCliQa5, FixesForAnLlmCallAreItsKeywordArguments) {
  auto r = testing::run_cli({"serve", "--gpu", "a10g", "--",
                             "LLM(model=\"meta-llama/Llama-3.1-8B-Instruct\", max_model_len=131072)"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("max_model_len 131072 (LLM's max_model_len)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  max_model_len=29696 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  tensor_parallel_size=2 "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\n  --max-model-len"), std::string::npos) << r.out;
}

TEST(ServeCliQa5, LaunchesVllmRefusesBeforeLoading) {
  // KV heads neither split nor replicated evenly (QKVParallelLinear's divide()).
  auto tp = testing::run_cli({"serve", "--gpu", "h100-80", "--", "vllm", "serve", "Qwen/Qwen2.5-1.5B-Instruct", "-tp", "3"});
  EXPECT_EQ(tp.exit_code, 2);
  EXPECT_NE(tp.err.find("--tensor-parallel-size 3: the model's 2 KV heads can be neither split nor replicated evenly "
                        "across 3 ranks; vLLM stops with \"3 is not divisible by 2\""), std::string::npos) << tp.err;
  // Pascal: below vLLM's compute capability 7.0.
  auto pascal = testing::run_cli({"serve", "--gpu", "p100", "--", "vllm", "serve", "Qwen/Qwen2.5-0.5B-Instruct"});
  EXPECT_EQ(pascal.exit_code, 2);
  EXPECT_NE(pascal.err.find("is a Pascal GPU (compute capability 6.x): vLLM needs compute capability 7.0 or newer"),
            std::string::npos) << pascal.err;
  // A bf16 checkpoint on a T4 before v0.9's float16 fallback.
  auto t4 = testing::run_cli({"serve", "--gpu", "t4", "--vllm-version", "0.6.3", "--", "vllm", "serve",
                              "Qwen/Qwen2.5-1.5B-Instruct", "--max-model-len", "8192"});
  EXPECT_EQ(t4.exit_code, 2);
  EXPECT_NE(t4.err.find("(the checkpoint is bfloat16; vLLM 0.6.3 has no float16 fallback)"), std::string::npos) << t4.err;
  // A config without torch_dtype is float32 to vLLM: auto serves it in float16 on a T4.
  auto gpt2 = testing::run_cli({"serve", "--gpu", "t4", "--vllm-version", "0.8.5", "--", "vllm", "serve",
                                "openai-community/gpt2"});
  EXPECT_EQ(gpt2.exit_code, 0) << gpt2.err;
  auto t4_half = testing::run_cli({"serve", "--gpu", "t4", "--vllm-version", "0.6.3", "--", "vllm", "serve",
                                   "Qwen/Qwen2.5-1.5B-Instruct", "--max-model-len", "8192", "--dtype", "half"});
  EXPECT_EQ(t4_half.exit_code, 0) << t4_half.err;
  // --dtype takes vLLM's own choices only.
  auto bf16 = testing::run_cli({"serve", "--gpu", "h100-80", "--", "vllm", "serve", "Qwen/Qwen2.5-0.5B-Instruct",
                                "--dtype", "bf16"});
  EXPECT_EQ(bf16.exit_code, 2);
  EXPECT_NE(bf16.err.find("--dtype: 'bf16' is not one of auto, half, float16, bfloat16, float, float32 (write bfloat16); "
                          "vLLM would exit with 'invalid choice'"), std::string::npos) << bf16.err;
}

TEST(ServeCliQa5, CurrentDefaultsFitEachOther) {
  // The default max_num_seqs (1024 on an H100) shrinks to the token budget the user gave...
  auto fitted = testing::run_cli({"serve", "--gpu", "h100-80", "--json", "--", "vllm", "serve",
                                  "Qwen/Qwen2.5-0.5B-Instruct", "--max-num-batched-tokens", "512"});
  ASSERT_EQ(fitted.exit_code, 0) << fitted.err;
  auto doc = nlohmann::json::parse(fitted.out);
  EXPECT_EQ(doc["settings"]["max_num_seqs"], 512);
  // ... and the default token budget to max_num_seqs full-length requests.
  auto short_len = testing::run_cli({"serve", "--gpu", "h100-80", "--json", "--", "vllm", "serve",
                                     "Qwen/Qwen2.5-0.5B-Instruct", "--max-model-len", "64", "--max-num-seqs", "2"});
  ASSERT_EQ(short_len.exit_code, 0) << short_len.err;
  EXPECT_EQ(nlohmann::json::parse(short_len.out)["settings"]["max_num_batched_tokens"], 128);
  // Before (v0.10), vLLM refused the first launch.
  auto old = testing::run_cli({"serve", "--gpu", "h100-80", "--vllm-version", "0.10.0", "--", "vllm", "serve",
                               "Qwen/Qwen2.5-0.5B-Instruct", "--max-num-batched-tokens", "512"});
  EXPECT_EQ(old.exit_code, 2);
}

TEST(ServeCliQa5, AShorterLengthShrinksAProfileRunThatLeftNoRoom) {
  // V0 before v0.5.4 profiles max_model_len tokens at once: 131072 tokens leave a negative KV cache.
  auto r = testing::run_cli({"serve", "--gpu", "4090", "--vllm-version", "0.5.3", "--", "vllm", "serve",
                             "meta-llama/Llama-3.1-8B-Instruct"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const size_t fixes = r.out.find("Fixes, cheapest first");
  ASSERT_NE(fixes, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\n  --max-model-len ", fixes), r.out.find('\n', fixes)) << r.out;   // the first fix
}

TEST(ServeCliQa5, SpeculativeTokensWithoutADrafter) {
  auto r = testing::run_cli({"serve", "--gpu", "h100-80", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                             "--speculative-config", "{\"num_speculative_tokens\": 3}"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("num_speculative_tokens without a speculative \"model\" or \"method\" (in --speculative-config, "
                       "or --num-speculative-tokens without --speculative-model): vLLM refuses it: \"num_speculative_"
                       "tokens was provided but without speculative model.\""), std::string::npos) << r.err;
}

// LongRoPE (Phi-3.5-mini): from v0.11.1 the default max_model_len is the original context, where
// the short factors serve (vllm-project/vllm#27431); before, the whole 128K.
TEST(ServeCliQa5, LongRopeDefaultsToTheOriginalContext) {
  auto now = testing::run_cli({"serve", "--gpu", "4090", "--json", "--", "vllm", "serve", "microsoft/Phi-3.5-mini-instruct"});
  ASSERT_EQ(now.exit_code, 0) << now.err;
  EXPECT_EQ(nlohmann::json::parse(now.out)["settings"]["max_model_len"], 4096);
  auto old = testing::run_cli({"serve", "--gpu", "4090", "--json", "--vllm-version", "0.10.0", "--", "vllm", "serve",
                               "microsoft/Phi-3.5-mini-instruct"});
  EXPECT_EQ(nlohmann::json::parse(old.out)["settings"]["max_model_len"], 131072);
  auto asked = testing::run_cli({"serve", "--gpu", "h100-80", "--json", "--", "vllm", "serve",
                                 "microsoft/Phi-3.5-mini-instruct", "--max-model-len", "131072"});
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_EQ(nlohmann::json::parse(asked.out)["settings"]["max_model_len"], 131072);
}

TEST(ServeCliQa5, OlderReleasesLackPipelinesAndOffload) {
  auto pp = testing::run_cli({"serve", "--gpu", "a100-80", "--vllm-version", "0.4.0", "--", "vllm", "serve",
                              "meta-llama/Llama-2-70b-hf", "-tp", "2", "-pp", "2"});
  EXPECT_EQ(pp.exit_code, 2);
  EXPECT_NE(pp.err.find("\"Pipeline parallelism is not supported yet.\""), std::string::npos) << pp.err;
  auto offload = testing::run_cli({"serve", "--gpu", "4090", "--vllm-version", "0.5.0", "--", "vllm", "serve",
                                   "meta-llama/Llama-3.1-8B-Instruct", "--cpu-offload-gb", "4"});
  EXPECT_EQ(offload.exit_code, 2);
  EXPECT_NE(offload.err.find("--cpu-offload-gb: vLLM 0.5.0 has no such flag (it came in v0.5.3"), std::string::npos)
      << offload.err;
  // ... and are not offered as fixes there.
  auto fixes = testing::run_cli({"serve", "--gpu", "4090", "--vllm-version", "0.4.0", "--", "vllm", "serve",
                                 "meta-llama/Llama-2-13b-hf"});
  EXPECT_EQ(fixes.out.find("--pipeline-parallel-size"), std::string::npos) << fixes.out;
  EXPECT_EQ(fixes.out.find("--cpu-offload-gb"), std::string::npos) << fixes.out;
  // V0's LLM(...) cannot step with pipeline stages.
  auto llm = testing::run_cli({"serve", "--gpu", "4090", "--vllm-version", "0.6.3", "--",
                               "LLM(model=\"meta-llama/Llama-3.1-8B-Instruct\", max_model_len=65536)"});
  EXPECT_EQ(llm.out.find("pipeline_parallel_size="), std::string::npos) << llm.out;
}

TEST(ServeCliQa5, FlagsBecomeKeywords) {
  EXPECT_EQ(as_llm_keywords("--max-model-len 8192 --kv-cache-dtype fp8"), "max_model_len=8192, kv_cache_dtype=\"fp8\"");
  EXPECT_EQ(as_llm_keywords("--enforce-eager"), "enforce_eager=True");
  EXPECT_EQ(as_llm_keywords("--gpu-memory-utilization 0.95"), "gpu_memory_utilization=0.95");
  EXPECT_EQ(as_llm_keywords("--dtype float16 (instead of float32)"), "dtype=\"float16\" (instead of float32)");
  EXPECT_EQ(as_llm_keywords("--gpu \"A100 SXM4 40GB\""), "--gpu \"A100 SXM4 40GB\"");
}

}  // namespace
}  // namespace oomdoc
