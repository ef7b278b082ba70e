// QA's serve command lines end to end: the exact figures and ids they print.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "support/test_support.h"

namespace oomdoc {
namespace {

using testing::run_cli;

TEST(ServeQaCli, KvCacheMemoryBytesLargerThanThe4090DoesNotFit) {
  auto r = run_cli({"serve", "--gpu", "4090", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                    "--kv-cache-memory-bytes", "17179869184", "--max-model-len", "8192"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("Does not fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CUDA out of memory while allocating the KV cache (16.00 GiB of KV tensors;"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("drop --kv-cache-memory-bytes"), std::string::npos) << r.out;
}

TEST(ServeQaCli, NumGpuBlocksOverrideIsAppliedEverywhere) {
  auto r = run_cli({"serve", "--gpu", "4090", "--json", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                    "--num-gpu-blocks-override", "1000", "--max-model-len", "8192"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["kv_cache"]["num_blocks"], 1000);
  EXPECT_EQ(doc["kv_cache"]["tokens"], 16000);
  EXPECT_DOUBLE_EQ(doc["kv_cache"]["max_concurrency"].get<double>(), 1000.0 / 512.0);
  EXPECT_EQ(doc["kv_cache"]["allocated_bytes"], 1000ull * (2ull << 20));
}

TEST(ServeQaCli, InstructVariantsUseTheirOwnContext) {
  for (const char* id : {"Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-72B-Instruct"}) {
    auto r = run_cli({"serve", "--gpu", "h100", "--json", "--", "vllm", "serve", id});
    auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["settings"]["model_context"], 32768) << id;
    EXPECT_EQ(doc["settings"]["max_model_len"], 32768) << id;
  }
  auto base = run_cli({"serve", "--gpu", "h100", "--json", "--", "vllm", "serve", "Qwen/Qwen2.5-7B"});
  EXPECT_EQ(nlohmann::json::parse(base.out)["settings"]["model_context"], 131072);
}

TEST(ServeQaCli, MisspelledFlagsAreErrorsUnknownOnesAreListed) {
  auto typo = run_cli({"serve", "--gpu", "4090", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                       "--max-model-length", "8192", "--gpu-memory-utilisation", "0.5", "--tensor-paralel-size", "2"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_EQ(typo.err, "oomdoc: serve: --max-model-length: not a vLLM flag (did you mean --max-model-len?); vLLM would "
                      "exit with 'unrecognized arguments'\n");
  EXPECT_TRUE(typo.out.empty());
  auto unknown = run_cli({"serve", "--gpu", "4090", "--json", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                          "--max-model-len", "8192", "--port", "8000", "--my-plugin-flag", "on"});
  ASSERT_EQ(unknown.exit_code, 0) << unknown.err;
  auto doc = nlohmann::json::parse(unknown.out);
  EXPECT_EQ(doc["ignored_flags"], nlohmann::json::array({"--port 8000"}));
  EXPECT_EQ(doc["unknown_flags"], nlohmann::json::array({"--my-plugin-flag on"}));
  EXPECT_EQ(doc["warnings"], nlohmann::json::array({"unknown to oomdoc, not checked (vLLM may refuse or use them): "
                                                    "--my-plugin-flag on"}));
  auto text = run_cli({"serve", "--gpu", "4090", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                       "--max-model-len", "8192", "--my-plugin-flag", "on"});
  // Said once, as a warning.
  const std::string warning = "warning: unknown to oomdoc, not checked (vLLM may refuse or use them): --my-plugin-flag on\n";
  ASSERT_NE(text.out.find(warning), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("--my-plugin-flag", text.out.find(warning) + warning.size()), std::string::npos) << text.out;
}

TEST(ServeQaCli, PipelineParallelFixHasItsOwnId) {
  auto r = run_cli({"serve", "--gpu", "4090", "--json", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  int pipeline = 0;
  for (const auto& fix : doc["fixes"]) {
    const std::string flag = fix["flag"];
    if (flag.rfind("--pipeline-parallel-size", 0) == 0) {
      EXPECT_EQ(fix["fix_id"], "vllm_pipeline_parallel");
      ++pipeline;
    }
  }
  EXPECT_EQ(pipeline, 1) << r.out;
}

TEST(ServeQaCli, VllmErrorsGetVllmFixesNotTransformersCode) {
  const std::string log =
      "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that can be stored "
      "in KV cache (43920). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
      "the engine.\n";
  auto r = run_cli({"explain"}, log);
  EXPECT_EQ(r.out.find("from_pretrained"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("BitsAndBytesConfig"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--quantization"), std::string::npos) << r.out;
}

TEST(ServeQaCli, OldVersionsPrintOnlyTheirOwnLines) {
  auto r = run_cli({"serve", "--gpu", "h100", "--vllm-version", "0.2.0", "--", "vllm", "serve",
                    "meta-llama/Llama-2-7b-hf"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("the current vLLM instance can use"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("model weights take"), std::string::npos);
  EXPECT_EQ(r.out.find("Maximum concurrency"), std::string::npos);
  EXPECT_EQ(r.out.find("Loading model weights took"), std::string::npos);
  EXPECT_NE(r.out.find("# GPU blocks: "), std::string::npos);
}

TEST(ServeQaCli, VllmUseV1ZeroWithoutAVersionIsSaidToBeIgnored) {
  auto r = run_cli({"serve", "--gpu", "h100", "--", "VLLM_USE_V1=0", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                    "--max-model-len", "8192"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("V1 engine"), std::string::npos);
  EXPECT_NE(r.out.find("warning: VLLM_USE_V1=0 is ignored: vLLM removed the V0 engine in v0.11.0"), std::string::npos)
      << r.out;
}

// Round 2: abbreviations of memory flags, offline-quantized methods on a 16-bit checkpoint, and an
// override smaller than one request (V1 starts, with a warning).
TEST(ServeQaCli, AbbreviationsAndOfflineQuantizationAreRefused) {
  auto abbreviated = run_cli({"serve", "--gpu", "4090", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                              "--max-model-len", "8192", "--tensor-parallel", "2"});
  EXPECT_EQ(abbreviated.exit_code, 2);
  EXPECT_EQ(abbreviated.err, "oomdoc: serve: --tensor-parallel: an abbreviation of --tensor-parallel-size; write it "
                             "out (vLLM's argument parser expands or refuses abbreviations depending on its version)\n");
  auto awq = run_cli({"serve", "--gpu", "4090", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                      "--max-model-len", "8192", "--quantization", "awq"});
  EXPECT_EQ(awq.exit_code, 2);
  EXPECT_THAT(awq.err, ::testing::HasSubstr("--quantization awq needs a checkpoint quantized with awq"));
  auto fp8 = run_cli({"serve", "--gpu", "4090", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                      "--max-model-len", "8192", "--quantization", "fp8"});
  EXPECT_EQ(fp8.exit_code, 0) << fp8.err;
}

// V1 starts, but a full-length request never gets its blocks: no fit (exit 1), said in a warning.
TEST(ServeQaCli, OverrideSmallerThanOneRequestWarnsInV1) {
  auto r = run_cli({"serve", "--gpu", "4090", "--json", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                    "--max-model-len", "8192", "--num-gpu-blocks-override", "100"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["fits"], false);
  EXPECT_TRUE(doc["error"].is_null());
  bool warned = false;
  for (const auto& w : doc["warnings"]) {
    if (w.get<std::string>().find("requests longer than 1600 tokens can never be scheduled") != std::string::npos) warned = true;
  }
  EXPECT_TRUE(warned) << doc["warnings"].dump();
}

// QA: TP 16 on H100s spans two HGX boards. TP stops at the card's tensor-parallel domain (8) and
// the second node is a pipeline stage, as vLLM's distributed-serving guide lays a multi-node launch out.
TEST(ServeQaCli, TensorParallelNeverLeavesTheNvlinkDomain) {
  auto r = run_cli({"serve", "--gpu", "h100-80", "--json", "--", "vllm", "serve", "deepseek-ai/DeepSeek-V3", "-tp", "8"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_GE(doc["fixes"].size(), 1u);
  EXPECT_EQ(doc["fixes"][0]["flag"], "--pipeline-parallel-size 2");
  EXPECT_EQ(doc["fixes"][0]["fix_id"], "vllm_pipeline_parallel");
  EXPECT_EQ(doc["fixes"][0]["cost"], "16 GPUs: 2 nodes of 8, TP 8 inside each node's NVLink, PP 2 across nodes");
  EXPECT_EQ(doc["fixes"][0]["kv_tokens"], 886336);   // the last stage (it samples) binds; FlashMLA blocks of 64
  for (const auto& fix : doc["fixes"]) {
    EXPECT_EQ(fix["flag"].get<std::string>().find("--tensor-parallel-size"), std::string::npos) << fix["flag"];
  }
}

// A TP size the user gives beyond the NVLink domain is sized as given, with a warning that names
// the per-node layout (TP 8 x PP 2 for 16 H100s).
TEST(ServeQaCli, TensorParallelBeyondTheNvlinkDomainIsWarned) {
  auto r = run_cli({"serve", "--gpu", "h100-80", "--json", "--", "vllm", "serve", "deepseek-ai/DeepSeek-V3", "-tp", "16"});
  ASSERT_LE(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  std::vector<std::string> warnings = doc["warnings"];
  EXPECT_NE(std::find(warnings.begin(), warnings.end(),
                      "--tensor-parallel-size 16 spans more than one 8-GPU NVLink domain of H100 SXM 80GB: every "
                      "layer's all-reduce crosses nodes; vLLM's docs set TP to the GPUs per node and PP to the nodes "
                      "(--tensor-parallel-size 8 --pipeline-parallel-size 2); memory per GPU is sized as given"),
            warnings.end())
      << doc["warnings"].dump();
  auto inside = run_cli({"serve", "--gpu", "h100-80", "--json", "--", "vllm", "serve", "deepseek-ai/DeepSeek-V3", "-tp", "8"});
  EXPECT_EQ(nlohmann::json::parse(inside.out)["warnings"].dump().find("NVLink domain"), std::string::npos);
}

// More GPUs: fewest first, then the most KV tokens (PP 2 holds more than TP 2 for Llama 3.1 8B on
// a 4090: each stage keeps half the layers' KV but the whole budget).
TEST(ServeQaCli, MoreGpuFixesAreOrderedByGpusThenTokens) {
  auto r = run_cli({"serve", "--gpu", "4090", "--json", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                    "--max-model-len", "131072"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  std::vector<std::pair<std::string, uint64_t>> parallel;
  const auto doc = nlohmann::json::parse(r.out);
  for (const auto& fix : doc["fixes"]) {
    const std::string id = fix["fix_id"];
    if (id == "vllm_tensor_parallel" || id == "vllm_pipeline_parallel") parallel.emplace_back(fix["flag"], fix["kv_tokens"]);
  }
  EXPECT_EQ(parallel, (std::vector<std::pair<std::string, uint64_t>>{{"--pipeline-parallel-size 2", 214448},
                                                                       {"--tensor-parallel-size 2", 210352}}));
}

// QA: BERT is encoder-only. vLLM V1 serves it as a pooling model with no KV cache
// (vllm-project/vllm#21270): no KV figures, what is left of the card, and the requests one step
// schedules without chunked prefill: min(256, 2048 / 512) = 4.
TEST(ServeQaCli, EncoderOnlyModelsHaveNoKvCache) {
  auto r = run_cli({"serve", "--gpu", "4090", "--json", "--", "vllm", "serve", "google-bert/bert-large-uncased"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_TRUE(doc["no_kv_cache"].get<bool>());
  EXPECT_TRUE(doc["kv_cache"].is_null());
  EXPECT_TRUE(doc["available_kv_cache_bytes"].is_null());
  EXPECT_TRUE(doc["max_model_len_that_fits"].is_null());
  EXPECT_FALSE(doc["settings"]["chunked_prefill"].get<bool>());
  // 4090's CUDA total 25,393,994,138 B minus the context 512 MiB, weights 670,283,776, activation
  // 46,137,344 (the forward alone: an encoder pools, it samples nothing), non-torch 300 MiB and
  // graphs 240 MiB.
  EXPECT_EQ(doc["left_bytes"], 25393994138ll - 536870912 - 670283776 - 46137344 - 314572800 - 251658240);
  EXPECT_EQ(doc["requests_at_once"], 4);
  EXPECT_EQ(doc["log_lines"], nlohmann::json::array({"Model loading took 0.6243 GiB",
                                                     "Estimated CUDA graph memory: 0.23 GiB total"}));
  auto text = run_cli({"serve", "--gpu", "4090", "--", "vllm", "serve", "google-bert/bert-large-uncased"});
  EXPECT_NE(text.out.find("  KV cache                  none  encoder-only model: no KV cache (the budget sizes nothing)\n"
                          "  left                 21.96 GiB  of the card after all of the above\n"),
            std::string::npos) << text.out;
  EXPECT_NE(text.out.find("Fits: served as a pooling model, no KV cache; 21.96 GiB left; up to 4 requests of 512 tokens "
                          "at once (max_num_seqs 256, max_num_batched_tokens 2048 / 512).\n"),
            std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("tokens of KV cache"), std::string::npos) << text.out;
  // It does not fit only when the card cannot hold the forward pass: 1.5 GiB less the same parts.
  auto small = run_cli({"serve", "--memory", "1.5GiB", "--json", "--", "vllm", "serve", "google-bert/bert-large-uncased",
                        "--gpu-memory-utilization", "0.5"});
  EXPECT_EQ(small.exit_code, 1) << small.err;
  auto small_doc = nlohmann::json::parse(small.out);
  EXPECT_EQ(small_doc["left_bytes"], 1610612736ll - 536870912 - 670283776 - 46137344 - 314572800 - 251658240);
  EXPECT_EQ(small_doc["error"]["kind"], "forward_oom");
  EXPECT_EQ(small_doc["error"]["message"],
            "torch.OutOfMemoryError: CUDA out of memory in the forward pass (0.62 GiB of weights and a 0.04 GiB "
            "activation peak, with the CUDA context, non-torch memory and CUDA graphs, need 0.19 GiB more than the "
            "1.50 GiB GPU)");
  // vLLM 0.9 ran encoder-only models on V0, which carves its paged cache from the budget anyway.
  auto v0 = run_cli({"serve", "--gpu", "4090", "--json", "--vllm-version", "0.9.0", "--", "vllm", "serve",
                     "google-bert/bert-large-uncased"});
  ASSERT_EQ(v0.exit_code, 0) << v0.err;
  auto v0doc = nlohmann::json::parse(v0.out);
  EXPECT_EQ(v0doc["vllm"]["engine"], "V0");
  EXPECT_FALSE(v0doc["no_kv_cache"].get<bool>());
  // Before v0.6.4 (vllm-project/vllm#9056) vLLM served no encoder-only model at all.
  auto old = run_cli({"serve", "--gpu", "4090", "--vllm-version", "0.6.3", "--", "vllm", "serve",
                      "google-bert/bert-large-uncased"});
  EXPECT_EQ(old.exit_code, 2);
  EXPECT_EQ(old.err, "oomdoc: serve: google-bert/bert-large-uncased is an encoder-only model: vLLM 0.6.3 cannot serve "
                     "it (encoder-only pooling models arrived in v0.6.4, vllm-project/vllm#9056)\n");
}

// From v0.20 vLLM logs a hybrid model's tokens as max_model_len x concurrency, which is not what
// the pool holds: the KV line's equation is the pool's tokens (45,437 blocks over 6 groups, x 16,
// x 384 KiB = the 44.37 GiB), and vLLM's figure is named beside it.
TEST(ServeQaCli, HybridKvLineMultipliesOut) {
  auto r = run_cli({"serve", "--gpu", "H100 SXM 80GB", "--", "vllm", "serve", "google/gemma-3-12b-it",
                    "--limit-mm-per-prompt", R"({"image": 0})"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("  KV cache             44.37 GiB  = 121,152 tokens of 384.00 KiB (2 x 48 layers x 8 KV heads x "
                       "256 x 2 B); vLLM reports 537,647 tokens (max_model_len x concurrency)\n"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  GPU KV cache size: 537,647 tokens\n"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace oomdoc
