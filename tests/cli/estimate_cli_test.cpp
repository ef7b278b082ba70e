#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "analyses/estimator.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

using testing::fixture_path;
using testing::run_cli;

const std::vector<std::string> kEmptyCache = [] {
  auto env = testing::kNoModelCache;
  env.push_back("NO_COLOR=1");
  return env;
}();

TEST(EstimateCli, JsonHasComponentsTotalsAndAssumptions) {
  auto r = run_cli({"estimate", "meta-llama/Llama-2-7b-hf", "--task", "inference", "--precision", "bf16",
                    "--batch-size", "1", "--prompt-len", "100", "--max-new-tokens", "28", "--json"},
                   "", kEmptyCache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["command"], "estimate");
  EXPECT_EQ(doc["model"]["total_params"], 6738415616ull);
  EXPECT_EQ(doc["components"][0]["name"], "weights");
  EXPECT_EQ(doc["components"][0]["bytes"], 6738415616ull * 2);
  EXPECT_EQ(doc["components"][1]["name"], "kv_cache");
  EXPECT_EQ(doc["components"][1]["bytes"], 2ull * 32 * 128 * 2 * 32 * 128);
  EXPECT_TRUE(doc["peak_allocated_bytes"].is_number_unsigned());
  EXPECT_TRUE(doc["peak_reserved_bytes"].is_number_unsigned());
  EXPECT_TRUE(doc["device_used_bytes"].is_number_unsigned());
  EXPECT_EQ(doc["peak_phase"], "generation");
  EXPECT_EQ(doc["dominant_component"], "weights");
  EXPECT_TRUE(doc["assumptions"].is_array());
}

// openai/gpt-oss-20b's config.json: MXFP4 experts for inference, bf16 for training (the recipes
// dequantize). Byte counts derived in tests/analyses/vllm_serve_test.cpp.
TEST(EstimateCli, GptOssInferenceKeepsMxfp4ExpertsTrainingDequantizes) {
  const std::string dir = fixture_path("estimate/gpt-oss-20b");
  auto r = run_cli({"estimate", dir, "--task", "inference", "--json"}, "", kEmptyCache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["model"]["total_params"], 20914757184ull);
  EXPECT_EQ(doc["components"][0]["name"], "weights");
  EXPECT_EQ(doc["components"][0]["bytes"], 13761264768ull);
  // KV for 512 + 256 tokens: 2 x 8 heads x 64 x 2 B per layer and token, 12 full layers and 12
  // sliding ones holding 128 of the 768 tokens: 2,048 x (12 + 12 x 128 / 768) x 768.
  EXPECT_EQ(doc["components"][1]["name"], "kv_cache");
  EXPECT_EQ(doc["components"][1]["bytes"], 2048ull * 14 * 768);
  bool said = false;
  for (const auto& a : doc["assumptions"]) said |= a == "weight_quantization: mxfp4 (the checkpoint's format)";
  EXPECT_TRUE(said) << doc["assumptions"];

  auto train = run_cli({"estimate", dir, "--task", "train_lora", "--json"}, "", kEmptyCache);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  auto t = nlohmann::json::parse(train.out);
  EXPECT_EQ(t["components"][0]["bytes"], 20914757184ull * 2);
  said = false;
  for (const auto& a : t["assumptions"]) said |= a.get<std::string>().find("Mxfp4Config(dequantize=True)") != std::string::npos;
  EXPECT_TRUE(said) << t["assumptions"];
  // The short alias finds the bundled preset.
  auto alias = run_cli({"estimate", "gpt-oss-120b", "--task", "load", "--json"}, "", kEmptyCache);
  ASSERT_EQ(alias.exit_code, 0) << alias.err;
  EXPECT_EQ(nlohmann::json::parse(alias.out)["model"]["total_params"], 116829156672ull);
}

TEST(EstimateCli, JobFileAndFlagOverride) {
  auto r = run_cli({"estimate", "--job", fixture_path("estimate/qlora_70b_job.json"), "--json"}, "", kEmptyCache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["model"]["id"], "meta-llama/Llama-2-70b-hf");
  auto flags = run_cli({"estimate", "--job", fixture_path("estimate/qlora_70b_job.json"), "--micro-batch-size", "8", "--json"},
                       "", kEmptyCache);
  ASSERT_EQ(flags.exit_code, 0) << flags.err;
  EXPECT_GT(nlohmann::json::parse(flags.out)["peak_allocated_bytes"].get<uint64_t>(),
            doc["peak_allocated_bytes"].get<uint64_t>());
}

TEST(EstimateCli, StackFlagsOverrideTheAssumedStack) {
  auto component = [](const nlohmann::json& doc, const std::string& name) -> uint64_t {
    for (const auto& c : doc["components"]) if (c["name"] == name) return c["bytes"].get<uint64_t>();
    return 0;
  };
  auto run = [](std::vector<std::string> extra) {
    std::vector<std::string> args{"estimate", "llama-3.1-8b", "--task", "train_lora", "--seq-len", "512", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_cli(args, "", kEmptyCache);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  auto base = run({});
  auto old_stack = run({"--lazy-module-loading", "false", "--adapter-dtype", "model"});
  EXPECT_EQ(component(base, "cuda_context"), cuda_context_bytes(true));
  EXPECT_EQ(component(old_stack, "cuda_context"), cuda_context_bytes(false));
  // LoRA weights in the model's bf16 instead of PEFT's fp32: half the bytes.
  EXPECT_EQ(component(old_stack, "adapter_weights") * 2, component(base, "adapter_weights"));
  bool assumed_fp32 = false;
  for (const auto& a : old_stack["assumptions"]) assumed_fp32 |= a.get<std::string>().rfind("adapter_dtype", 0) == 0;
  EXPECT_FALSE(assumed_fp32);  // given, so no longer listed as assumed
}

TEST(EstimateCli, HumanTableNamesTheTotals) {
  auto r = run_cli({"estimate", "llama-3.1-8b", "--task", "train_lora", "--seq-len", "1024"}, "", kEmptyCache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("meta-llama/Llama-3.1-8B (8.03B params"), std::string::npos);
  EXPECT_NE(r.out.find("torch.cuda.max_memory_allocated()"), std::string::npos);
  EXPECT_NE(r.out.find("nvidia-smi"), std::string::npos);
  EXPECT_NE(r.out.find("Assumed:"), std::string::npos);
}

TEST(EstimateCli, ParamsWithShape) {
  auto r = run_cli({"estimate", "--params", "7B", "--task", "inference", "--json"}, "", kEmptyCache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["model"]["total_params"], 7000000000ull);
  EXPECT_EQ(doc["model"]["source"], "--params");
}

// --params stands in for a model: with a model named too, neither is silently dropped.
TEST(EstimateCli, ParamsAndAModelAreAnError) {
  auto r = run_cli({"estimate", "llama-2-7b", "--params", "7B"}, "", kEmptyCache);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("--params 7B and the model 'llama-2-7b' (from command line) both say what to estimate: give one"),
            std::string::npos) << r.err;
}

TEST(EstimateCli, BadInputIsOneLineAndExitTwo) {
  auto unknown = run_cli({"estimate", "no-such-model-anywhere"}, "", kEmptyCache);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(unknown.out, "");
  EXPECT_EQ(std::count(unknown.err.begin(), unknown.err.end(), '\n'), 1);
  EXPECT_NE(unknown.err.find("no-such-model-anywhere: not a file or folder"), std::string::npos);
  auto bad_value = run_cli({"estimate", "llama-2-7b", "--task", "finetune"}, "", kEmptyCache);
  EXPECT_EQ(bad_value.exit_code, 2);
  EXPECT_NE(bad_value.err.find("task: \"finetune\" is not one of"), std::string::npos);
  auto bad_params = run_cli({"estimate", "--params", "seven"}, "", kEmptyCache);
  EXPECT_EQ(bad_params.exit_code, 2);
  auto missing_job = run_cli({"estimate", "--job", "/nonexistent/job.json"}, "", kEmptyCache);
  EXPECT_EQ(missing_job.exit_code, 2);
  EXPECT_NE(missing_job.err.find("/nonexistent/job.json"), std::string::npos);
}

// A model file or folder as INPUT with --model names two models (not a missing file); a name the
// system refuses is an input error too.
TEST(EstimateCli, InputThatIsNoConfigIsAnInputError) {
  const std::string config = fixture_path("serve/gemma-3-27b-it/config.json");
  auto file = run_cli({"estimate", config, "--model", "llama-2-7b"}, "", kEmptyCache);
  EXPECT_EQ(file.exit_code, 2);
  EXPECT_EQ(file.err, "oomdoc: " + config + ": not a training config or job file, and --model already names the model; give one of them\n");
  const std::string folder = fixture_path("serve/gemma-3-27b-it");
  auto dir = run_cli({"fit", folder, "--model", "llama-2-7b", "--gpu", "4090"}, "", kEmptyCache);
  EXPECT_EQ(dir.exit_code, 2);
  EXPECT_EQ(dir.err, "oomdoc: " + folder + ": not a training config or job file, and --model already names the model; give one of them\n");
  auto missing = run_cli({"estimate", "/nonexistent/x.yaml", "--model", "llama-2-7b"}, "", kEmptyCache);
  EXPECT_EQ(missing.err, "oomdoc: /nonexistent/x.yaml: no such file (and --model is given)\n");
  // A model name and --model: the model given twice, not a missing file.
  auto twice = run_cli({"estimate", "llama-2-7b", "--model", "gpt2"}, "", kEmptyCache);
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_EQ(twice.err, "oomdoc: the model is given twice, as 'llama-2-7b' and as --model gpt2: give one\n");
  // A name the system refuses is the input's error, not an internal one.
  const std::string too_long = std::string(5000, 'a') + ".yaml";
  auto refused = run_cli({"estimate", too_long}, "", kEmptyCache);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_EQ(refused.err, "oomdoc: " + too_long + ": File name too long\n");
}

// Bad shape flags are one line and exit 2 (--heads 0 used to crash with SIGFPE, --layers 0 to
// print a made-up estimate).
TEST(EstimateCli, ZeroShapeFlagsAreBadInput) {
  for (const auto& [flag, message] : std::vector<std::pair<std::string, std::string>>{
           {"--heads", "oomdoc: --params: --heads is 0\n"},
           {"--kv-heads", "oomdoc: --params: --kv-heads is 0\n"},
           {"--hidden-size", "oomdoc: --params: --hidden-size is 0\n"},
           {"--layers", "oomdoc: --params: --layers is 0\n"},
           {"--vocab-size", "oomdoc: --params: --vocab-size is 0\n"},
           {"--intermediate-size", "oomdoc: --params: --intermediate-size is 0\n"}}) {
    auto r = run_cli({"estimate", "--params", "7B", flag, "0"}, "", kEmptyCache);
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_EQ(r.err, message) << flag;
    EXPECT_EQ(r.out, "") << flag;
  }
}

// Only estimate can stand in --params for a model it cannot find, so only estimate suggests it.
TEST(EstimateCli, UnknownModelSuggestsParams) {
  auto r = run_cli({"estimate", "no-such-model-xyz"}, "", kEmptyCache);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("oomdoc: no-such-model-xyz: not a file or folder, not in the Hugging Face cache, and not a "
                        "bundled preset (closest: ", 0), 0u) << r.err;
  const std::string hint = "); or pass --params N (with --hidden-size and --layers) for a quick estimate\n";
  ASSERT_GT(r.err.size(), hint.size());
  EXPECT_EQ(r.err.substr(r.err.size() - hint.size()), hint);
}

// A model a training config names but oomdoc cannot find: the error names the config too; a model
// the command line names instead is that one's error alone.
TEST(EstimateCli, UnknownModelInAConfigNamesTheConfig) {
  const auto dir = std::filesystem::temp_directory_path() / "oomdoc_estimate_unknown_in_config";
  std::filesystem::create_directories(dir);
  const std::string config = (dir / "qlora.yml").string();
  std::ofstream(config) << "base_model: acme/no-such-model-xyz\nadapter: qlora\nload_in_4bit: true\nsequence_len: 2048\n";
  auto r = run_cli({"estimate", config}, "", kEmptyCache);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("oomdoc: " + config + ": acme/no-such-model-xyz: not a file or folder", 0), 0u) << r.err;
  auto fit = run_cli({"fit", config, "--gpu", "4090"}, "", kEmptyCache);
  EXPECT_EQ(fit.exit_code, 2);
  EXPECT_EQ(fit.err.rfind("oomdoc: " + config + ": acme/no-such-model-xyz: not a file or folder", 0), 0u) << fit.err;
  auto named = run_cli({"estimate", config, "--model", "acme/other-xyz"}, "", kEmptyCache);
  EXPECT_EQ(named.err.rfind("oomdoc: acme/other-xyz: not a file or folder", 0), 0u) << named.err;
  std::filesystem::remove_all(dir);
}

// Tensor parallelism needs whole heads per rank; kv heads may instead be replicated (tp a multiple).
TEST(EstimateCli, TensorParallelMustSplitTheHeads) {
  auto r = run_cli({"estimate", "--params", "7B", "--tp", "3"}, "", kEmptyCache);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "oomdoc: tp 3 does not divide the model's 32 attention heads (each tensor-parallel rank needs "
                   "whole heads)\n");
  auto kv = run_cli({"estimate", "--params", "30B", "--hidden-size", "6144", "--heads", "48", "--kv-heads", "6",
                     "--tp", "4"}, "", kEmptyCache);
  EXPECT_EQ(kv.exit_code, 2);
  EXPECT_EQ(kv.err, "oomdoc: tp 4 does not fit the model's 6 key/value heads (they must split evenly across the tp "
                    "ranks, or tp be a multiple of them)\n");
  auto replicated = run_cli({"estimate", "--params", "30B", "--hidden-size", "6144", "--heads", "48", "--kv-heads",
                             "6", "--tp", "12", "--json"}, "", kEmptyCache);
  EXPECT_EQ(replicated.exit_code, 0) << replicated.err;
  EXPECT_EQ(nlohmann::json::parse(replicated.out)["model"]["hidden_size"], 6144);
}

// Option errors: one line naming the command and where its usage is.
TEST(EstimateCli, OptionErrorsAreOneLineNamingTheCommand) {
  auto r = run_cli({"estimate", "--params", "7B", "--tp", "abc"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "oomdoc estimate: --tp: 'abc' is not a number (see oomdoc estimate --help)\n");
  auto missing = run_cli({"estimate", "--params"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "oomdoc estimate: --params: needs a value (see oomdoc estimate --help)\n");
  auto unknown = run_cli({"oomdoc-no-such-command"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(unknown.err, "oomdoc: 'oomdoc-no-such-command': unknown command (see oomdoc --help)\n");
  auto none = run_cli({});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.err, "oomdoc: no command given (see oomdoc --help)\n");
}

TEST(EstimateCli, AMistypedConfigKeyIsOneLineNamingFileAndKey) {
  // "max_relative_positions": "512" in a deberta-v2 config was an uncaught nlohmann type_error.
  const std::string folder = fixture_path("estimate/deberta_max_relative_string");
  auto r = run_cli({"estimate", folder, "--task", "inference"}, "", kEmptyCache);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  // The fix is the file, so --params is not offered.
  EXPECT_EQ(r.err, "oomdoc: " + folder + "/config.json: \"max_relative_positions\" must be an integer, got \"512\"\n");
}

TEST(EstimateCli, WarnsOnLengthsBeyondTheContextAndRefusesShapeFlagsWithAModel) {
  auto r = run_cli({"estimate", "llama-2-7b", "--task", "inference", "--prompt-len", "16384", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["warnings"].size(), 1u);
  EXPECT_EQ(doc["warnings"][0], "16640 tokens per sequence is above the model's context of 4096 "
                                "(max_position_embeddings): it was not trained for that length");
  // Learned absolute positions (BERT's 512 rows) fail past their table, whatever the memory.
  auto bert = run_cli({"estimate", "bert-large-uncased", "--seq-len", "2048", "--json"});
  ASSERT_EQ(bert.exit_code, 0) << bert.err;
  EXPECT_EQ(nlohmann::json::parse(bert.out)["warnings"][0],
            "2048 tokens per sequence is above the model's 512 learned positions: its position embedding has no row "
            "past them, so the forward pass fails (an index error), whatever the memory");
  auto shape = run_cli({"estimate", "llama-2-7b", "--heads", "4"});
  EXPECT_EQ(shape.exit_code, 2);
  EXPECT_EQ(shape.err, "oomdoc: --heads is only read with --params (the model's config gives its shape)\n");
  auto gpus = run_cli({"estimate", "llama-2-7b", "--task", "train_lora", "--gpus", "2", "--json"});
  ASSERT_EQ(gpus.exit_code, 0) << gpus.err;
}

// estimate reads the training configs fit reads, says which keys it used, and prints the job it
// predicted; that job fed back as --job gives the same prediction.
TEST(EstimateCli, ReadsATrainingConfigAndPrintsTheJobItRead) {
  auto r = run_cli({"estimate", fixture_path("fit/axolotl_llama3_qlora.yml"), "--json"}, "", kEmptyCache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["config"]["format"], "axolotl");
  EXPECT_EQ(doc["config"]["used_keys"][0], "base_model");
  const auto& job = doc["job"];
  EXPECT_EQ(job["model"], "NousResearch/Meta-Llama-3-8B");
  EXPECT_EQ(job["task"], "train_qlora");
  EXPECT_EQ(job["weight_quantization"], "nf4");
  EXPECT_EQ(job["seq_len"], 4096);
  EXPECT_EQ(job["lora"]["r"], 32);
  EXPECT_EQ(job["lora"]["target_modules"], "all_linear");

  const auto dir = std::filesystem::temp_directory_path() / "oomdoc_estimate_job_roundtrip";
  std::filesystem::create_directories(dir);
  const auto job_path = (dir / "job.json").string();
  std::ofstream(job_path) << job.dump();
  auto again = run_cli({"estimate", "--job", job_path, "--json"}, "", kEmptyCache);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto doc2 = nlohmann::json::parse(again.out);
  EXPECT_EQ(doc2["job"], job);
  EXPECT_EQ(doc2["config"], nullptr);
  EXPECT_EQ(doc2["device_used_bytes"], doc["device_used_bytes"]);
  EXPECT_EQ(doc2["components"], doc["components"]);

  auto text = run_cli({"estimate", fixture_path("fit/axolotl_llama3_qlora.yml")}, "", kEmptyCache);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("config (axolotl): used 16; ignored"), std::string::npos) << text.out;
  // The ignored keys are named, as the used ones are.
  EXPECT_NE(text.out.find("\n  ignored (no effect on memory): model_type, tokenizer_type, strict, datasets,"),
            std::string::npos) << text.out;
}

// --lora-target-modules takes PEFT's "all-linear" (fit's LoraConfig snippets print it) as it takes
// "all_linear": the same job, the same prediction.
TEST(EstimateCli, LoraTargetAllLinearInPeftsSpelling) {
  auto peft = run_cli({"estimate", "llama-2-7b", "--task", "train_lora", "--lora-target-modules", "all-linear", "--json"});
  auto ours = run_cli({"estimate", "llama-2-7b", "--task", "train_lora", "--lora-target-modules", "all_linear", "--json"});
  ASSERT_EQ(peft.exit_code, 0) << peft.err;
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  auto a = nlohmann::json::parse(peft.out), b = nlohmann::json::parse(ours.out);
  EXPECT_EQ(a["job"]["lora"]["target_modules"], "all_linear");
  EXPECT_EQ(a["device_used_bytes"], b["device_used_bytes"]);
}

// A LoRA flag overrides the config's LoRA field by field: --lora-r 8 keeps the config's alpha,
// dropout and target modules (it used to replace the whole object: q and v only, alpha 32).
// Llama-3-8B, r 8 on every linear layer: 20,971,520 params x 4 B.
TEST(EstimateCli, LoraFlagsOverrideTheConfigFieldByField) {
  auto r = run_cli({"estimate", fixture_path("fit/axolotl_llama3_qlora.yml"), "--lora-r", "8", "--json"}, "", kEmptyCache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["job"]["lora"], nlohmann::json::parse(R"({"r": 8, "alpha": 64.0, "dropout": 0.05, "target_modules": "all_linear"})"));
  uint64_t adapter = 0;
  for (const auto& c : doc["components"]) {
    if (c["name"] == "adapter_weights") adapter = c["bytes"].get<uint64_t>();
  }
  EXPECT_EQ(adapter, 83886080u);

  // A job file's lora sits between the config's and the flags'.
  const auto dir = std::filesystem::temp_directory_path() / "oomdoc_estimate_lora_overlay";
  std::filesystem::create_directories(dir);
  const auto job_path = (dir / "job.json").string();
  std::ofstream(job_path) << R"({"model": "NousResearch/Meta-Llama-3-8B", "lora": {"alpha": 5, "r": 4}})";
  auto layered = run_cli({"estimate", fixture_path("fit/axolotl_llama3_qlora.yml"), "--job", job_path, "--lora-r", "8", "--json"},
                         "", kEmptyCache);
  ASSERT_EQ(layered.exit_code, 0) << layered.err;
  EXPECT_EQ(nlohmann::json::parse(layered.out)["job"]["lora"],
            nlohmann::json::parse(R"({"r": 8, "alpha": 5.0, "dropout": 0.05, "target_modules": "all_linear"})"));
}

TEST(EstimateCli, TrainingConfigErrorsNameTheFile) {
  auto missing = run_cli({"estimate", "no-such-dir/axolotl.yml"}, "", kEmptyCache);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "oomdoc: no-such-dir/axolotl.yml: no such file (a training config or job file was expected)\n");
  auto invalid = run_cli({"estimate", fixture_path("fit/invalid.yml")}, "", kEmptyCache);
  EXPECT_EQ(invalid.exit_code, 2);
  EXPECT_EQ(invalid.out, "");
  EXPECT_EQ(invalid.err, "oomdoc: " + fixture_path("fit/invalid.yml") +
                             ": line 4, column 8: invalid YAML: end of sequence flow not found\n");
}

// An encoder-only model generates nothing: its inference peak is the forward pass (peak_phase "forward").
TEST(EstimateCli, EncoderOnlyInferencePeaksInTheForwardPass) {
  auto r = run_cli({"estimate", "bert-large-uncased", "--task", "inference"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Peak per GPU during the forward pass: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("during generation"), std::string::npos) << r.out;
  auto j = run_cli({"estimate", "bert-large-uncased", "--task", "inference", "--json"});
  EXPECT_EQ(nlohmann::json::parse(j.out)["peak_phase"], "forward");
  auto llama = run_cli({"estimate", "llama-3.1-8b", "--task", "inference", "--json"});
  EXPECT_EQ(nlohmann::json::parse(llama.out)["peak_phase"], "generation");
}

// ---- the QA review's inputs (tests/fixtures none: each case is its command line) -------------

void expect_refused(const testing::CommandResult& r, const std::string& line) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, line + "\n");
}

// A million sequences of 16M tokens: beyond 64-bit byte counts. Said as such, never wrapped to
// a plausible number (it was "108.39 GiB").
TEST(EstimateCli, SizesBeyond64BitsAreSaidAsBeyondAnyGpu) {
  const std::vector<std::string> args = {"estimate", "meta-llama/Llama-3.1-8B", "--micro-batch-size", "1048576",
                                         "--seq-len", "16777216"};
  auto text = run_cli(args, "", kEmptyCache);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Peak per GPU during backward: over 16 EiB (beyond any GPU)\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  device           over 16 EiB  nvidia-smi\n"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("unlimited"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("warning: the prediction is beyond 64-bit byte counts (over 16 EiB; activations, logits): "
                          "no GPU holds this job; its sizes (micro_batch_size x seq_len, batch_size x prompt_len) "
                          "are far beyond any real run\n"),
            std::string::npos) << text.out;
  auto with_json = args;
  with_json.push_back("--json");
  auto r = run_cli(with_json, "", kEmptyCache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["saturated"], true);
  EXPECT_EQ(doc["device_used_bytes"], UINT64_MAX);
  EXPECT_EQ(doc["needed_bytes"], UINT64_MAX);
  EXPECT_EQ(doc["peak_allocated_bytes"], UINT64_MAX);
  EXPECT_EQ(doc["device_used_low_bytes"], UINT64_MAX);
  // Every total is at least each component.
  for (const auto& c : doc["components"]) EXPECT_LE(c["bytes"].get<uint64_t>(), doc["peak_reserved_bytes"].get<uint64_t>());
  auto normal = run_cli({"estimate", "llama-3.1-8b", "--json"}, "", kEmptyCache);
  ASSERT_EQ(normal.exit_code, 0) << normal.err;
  EXPECT_EQ(nlohmann::json::parse(normal.out)["saturated"], false);
}

TEST(EstimateCli, ParamsNeedAUnitAndRoomForTheShape) {
  expect_refused(run_cli({"estimate", "--params", "7"}, "", kEmptyCache),
                 "oomdoc: --params: '7' has no unit: write 7B (billions), 7M or 7K; a bare number is an exact count, "
                 "at least 1000000");
  // An exact count as a checkpoint states it is fine.
  EXPECT_EQ(run_cli({"estimate", "--params", "6738415616", "--json"}, "", kEmptyCache).exit_code, 0);
  EXPECT_EQ(run_cli({"estimate", "--params", "125K", "--hidden-size", "64", "--layers", "1", "--vocab-size", "100",
                     "--json"}, "", kEmptyCache).exit_code, 0);
  // 80 layers of 8192 wide attention (64 heads, 8 kv heads: 150,994,944 per layer) and two
  // 32,000 x 8,192 embeddings: 12,079,595,520 + 524,288,000 = 12,603,883,520 parameters, not 1B.
  expect_refused(run_cli({"estimate", "--params", "1B", "--hidden-size", "8192", "--layers", "80"}, "", kEmptyCache),
                 "oomdoc: --params 1.00B: the shape given (--hidden-size 8192, --layers 80) holds 12,603,883,520 "
                 "parameters in its attention and embeddings alone, more than the count; raise --params or give a "
                 "smaller shape");
  // The MLP width oomdoc derives from a 3-wide hidden state is 0: the error says it was derived.
  expect_refused(run_cli({"estimate", "--params", "7B", "--hidden-size", "3"}, "", kEmptyCache),
                 "oomdoc: --params: --intermediate-size is 0 (--intermediate-size was not given: derived from "
                 "--params and --hidden-size 3; pass --intermediate-size)");
}

TEST(EstimateCli, PipelineDegreeAboveTheLayersIsRefused) {
  expect_refused(run_cli({"estimate", "llama-2-7b", "--pp", "33"}, "", kEmptyCache),
                 "oomdoc: pp 33 is more than the model's 32 layers (each pipeline stage needs at least one block)");
  const std::string job = std::string(OOMDOC_BINARY_DIR) + "/job_pp64.json";
  std::ofstream(job) << R"({"model":"llama-2-7b","pp":64})";
  expect_refused(run_cli({"estimate", "--job", job}, "", kEmptyCache),
                 "oomdoc: pp 64 is more than the model's 32 layers (each pipeline stage needs at least one block)");
  auto ok = run_cli({"estimate", "llama-2-7b", "--pp", "4"}, "", kEmptyCache);
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find(", 1/3.85 on the most loaded GPU (tp 1 x pp 4: that stage's blocks and the embedding)"),
            std::string::npos) << ok.out;
}

TEST(EstimateCli, FlashAttentionInFp32IsRefused) {
  expect_refused(run_cli({"estimate", "llama-2-7b", "--precision", "fp32", "--attention-impl", "flash"}, "", kEmptyCache),
                 "oomdoc: command line: attention_impl: flash has no fp32 kernels (FlashAttention-2 runs fp16 and "
                 "bf16 only; transformers refuses: \"Flash Attention 2.0 only supports torch.float16 and "
                 "torch.bfloat16 dtypes\"): use sdpa, or precision bf16_mixed");
}

// An empty --lora-target-modules is refused as an empty list in a job file is, not sized as PEFT's
// defaults.
TEST(EstimateCli, EmptyLoraTargetsAreRefused) {
  expect_refused(run_cli({"estimate", "llama-2-7b", "--task", "train_lora", "--lora-target-modules", ""}, "", kEmptyCache),
                 "oomdoc: command line: lora.target_modules: must be \"all_linear\" (or PEFT's \"all-linear\") or a "
                 "non-empty list of module names");
}

// A training config given to --job is said to be one, with where it goes, instead of failing on its
// first key that a job file spells differently.
TEST(EstimateCli, TrainingConfigGivenAsJobFileIsNamed) {
  const std::string config = fixture_path("fit/hf_training_args.json");
  expect_refused(run_cli({"estimate", "--job", config, "--model", "llama-2-7b"}, "", kEmptyCache),
                 "oomdoc: " + config + ": a training config (hf_training_arguments), not a job file: give it as the "
                 "input (oomdoc estimate " + config + "), not with --job");
  // A job file judged with its flags: one a flag makes valid (lora with --task train_lora) is read.
  const std::string job = std::string(OOMDOC_BINARY_DIR) + "/job_lora_needs_task.json";
  std::ofstream(job) << R"({"model":"llama-2-7b","task":"train_full","lora":{"r":8}})";
  auto ok = run_cli({"estimate", "--job", job, "--task", "train_lora"}, "", kEmptyCache);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// A model's config.json saved under another name is still read as the model.
TEST(EstimateCliQa5, AModelConfigUnderAnotherNameIsTheModel) {
  const auto dir = std::filesystem::temp_directory_path() / "oomdoc_estimate_named_config";
  std::filesystem::create_directories(dir);
  const auto path = (dir / "qwen2.json").string();
  std::ofstream(path) << R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
    "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
    "vocab_size": 151936, "max_position_embeddings": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16"})";
  auto r = testing::run_cli({"estimate", path, "--task", "inference", "--json"}, "", testing::kNoModelCache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["model"]["total_params"], 494032768);   // Qwen2.5-0.5B's published count
}

// A relative model path in a job file is found beside the file first, whatever the current
// directory holds under the same name.
TEST(EstimateCli, AJobFilesRelativeModelPathIsTheFilesOwn) {
  const auto root = std::filesystem::temp_directory_path() / "oomdoc_estimate_relative_job";
  std::filesystem::remove_all(root);
  const auto jobs = root / "jobs", elsewhere = root / "elsewhere";
  std::filesystem::create_directories(jobs / "model");
  std::filesystem::create_directories(elsewhere / "model");
  std::filesystem::copy_file(fixture_path("models/unnamed_checkpoint/config.json"), jobs / "model" / "config.json");
  // The current directory's model of the same name is another one (a 1-layer GPT-2).
  std::ofstream(elsewhere / "model" / "config.json")
      << R"({"model_type": "gpt2", "vocab_size": 10, "n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 16})";
  const auto job_path = (jobs / "job.json").string();
  std::ofstream(job_path) << R"({"model": "model", "task": "load"})";
  auto r = testing::run_shell("cd '" + elsewhere.string() + "' && \"$OOMDOC\" estimate --job '" + job_path + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto direct = run_cli({"estimate", fixture_path("models/unnamed_checkpoint/config.json"), "--task", "load", "--json"}, "",
                        kEmptyCache);
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["model"]["total_params"], nlohmann::json::parse(direct.out)["model"]["total_params"]);
  std::filesystem::remove_all(root);
}

// --weight-quantization none turns a job file's quantization off, its double quantization with it.
TEST(EstimateCli, WeightQuantizationNoneTurnsTheFilesOff) {
  auto r = run_cli({"estimate", "--job", fixture_path("estimate/qlora_70b_job.json"), "--task", "train_lora",
                    "--weight-quantization", "none", "--json"},
                   "", kEmptyCache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto job = nlohmann::json::parse(r.out)["job"];
  EXPECT_EQ(job["task"], "train_lora");
  EXPECT_FALSE(job.contains("weight_quantization")) << job.dump();
  EXPECT_FALSE(job.contains("double_quant")) << job.dump();
}

}  // namespace
}  // namespace oomdoc
