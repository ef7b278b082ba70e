// End-to-end: bad input to `oomdoc fit` is one line on stderr and exit 2, nothing on stdout.
#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>
#include <fstream>

#include "readers/gpu_catalog.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

using ::testing::HasSubstr;
using testing::fixture_path;
using testing::run_cli;

void expect_bad_input(const testing::CommandResult& r, const std::string& message) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr(message));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(FitCli, UnknownGpuSuggestsClosestNames) {
  auto r = run_cli({"fit", "--model", "llama-2-7b", "--gpu", "rtx 4900"});
  expect_bad_input(r, "4090");
}

TEST(FitCli, BudgetOutsideZeroToOne) {
  expect_bad_input(run_cli({"fit", "--model", "llama-2-7b", "--gpu", "4090", "--budget", "1.2"}),
                   "--budget 1.2 is outside (0, 1]");
  expect_bad_input(run_cli({"fit", "--model", "llama-2-7b", "--gpu", "4090", "--budget", "0"}),
                   "--budget 0 is outside (0, 1]");
  expect_bad_input(run_cli({"fit", "--model", "llama-2-7b", "--gpu", "4090", "--target", "-1"}),
                   "--target -1 is outside (0, 1]");
  expect_bad_input(run_cli({"fit", "--model", "llama-2-7b", "--gpu", "4090", "--budget", "0.8", "--target", "0.9"}),
                   "--target 0.9 is above --budget 0.8: a plan aims at or under the usable budget");
  auto r = run_cli({"fit", "--model", "llama-2-7b", "--gpu", "4090", "--budget", "2"});
  EXPECT_EQ(r.err, "oomdoc: --budget 2 is outside (0, 1]: it is the share of the GPU's memory the job may use "
                   "(0.92 = 92%)\n");
}

TEST(FitCli, HelpGivesTheDefaultBudgetAndTarget) {
  auto r = run_cli({"fit", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Usable share of GPU memory, in (0,1] (default 0.92)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Share a plan aims at, in (0,1] (default 0.80)"), std::string::npos) << r.out;
}

TEST(FitCli, InvalidYamlNamesFileAndLine) {
  const std::string path = fixture_path("fit/invalid.yml");
  expect_bad_input(run_cli({"fit", path, "--gpu", "4090"}), path + ": line 4");
}

TEST(FitCli, ConfigWithoutModelNeedsModelFlag) {
  const std::string path = fixture_path("fit/hf_training_args.json");
  expect_bad_input(run_cli({"fit", path, "--gpu", "4090"}), path + ": names no model; add --model NAME");
}

TEST(FitCli, NoGpuAndBadMemory) {
  expect_bad_input(run_cli({"fit", "--model", "llama-2-7b"}), "which GPU?");
  expect_bad_input(run_cli({"fit", "--model", "llama-2-7b", "--memory", "lots"}),
                   "oomdoc: --memory: 'lots' is not a size (e.g. 24GiB)");
  expect_bad_input(run_cli({"fit", "--model", "llama-2-7b", "--gpu", "4090", "--gpus", "0"}),
                   "oomdoc fit: --gpus: must be at least 1 (got 0) (see oomdoc fit --help)");
}

TEST(FitCli, BadLengthsAndPricesFiles) {
  expect_bad_input(run_cli({"fit", "--model", "llama-2-7b", "--gpu", "4090", "--lengths",
                            fixture_path("fit/invalid.yml")}),
                   "invalid.yml: line 1: expected a token count");
  expect_bad_input(run_cli({"fit", "--model", "llama-2-7b", "--gpu", "4090", "--prices",
                            "/nonexistent/prices.csv"}),
                   "/nonexistent/prices.csv");
}

using testing::fixture_path;
using testing::run_cli;

// Prices given, none of the priced cards fits at any count: a note says so.
TEST(FitCli, PricesWithNoCardThatFitsSaySo) {
  auto r = run_cli({"fit", "llama-2-70b", "--task", "train_full", "--gpu", "4090", "--prices",
                    fixture_path("fit/prices_small_cards.csv"), "--json"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  const auto notes = doc["notes"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(notes.begin(), notes.end(),
                      "no priced GPU (L4 24GB, Tesla T4 16GB) fits the job as given at up to 16 cards; make it fit "
                      "with the plan's changes instead"), notes.end()) << r.out;
}

// The JSON document: what fit computes itself is exact; the estimator's numbers are checked for
// consistency (each plan total below the one before, the plan under the budget).
TEST(FitCli, JsonDocumentForAJobThatDoesNotFit) {
  auto r = run_cli({"fit", "llama-3-8b", "--task", "train_lora", "--lora-target-modules", "all_linear",
                    "--micro-batch-size", "8", "--grad-accum-steps", "1", "--seq-len", "4096",
                    "--gpu", "4090", "--lengths", fixture_path("fit/lengths_sft.txt"), "--prices",
                    fixture_path("fit/prices.csv"), "--max-batch", "--max-seq", "--json"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["command"], "fit");
  EXPECT_EQ(doc["gpu"], "GeForce RTX 4090 24GB");
  const uint64_t total = doc["total_bytes"].get<uint64_t>();
  EXPECT_EQ(total, 24564ull << 20);
  EXPECT_EQ(doc["usable_bytes"].get<uint64_t>(), static_cast<uint64_t>(total * 0.92));
  EXPECT_EQ(doc["target_bytes"].get<uint64_t>(), static_cast<uint64_t>(total * 0.80));
  EXPECT_FALSE(doc["fits"].get<bool>());
  EXPECT_GT(doc["needed_bytes"].get<uint64_t>(), doc["usable_bytes"].get<uint64_t>());
  EXPECT_GE(doc["device_used_bytes"].get<uint64_t>(), doc["needed_bytes"].get<uint64_t>());
  EXPECT_EQ(doc["headroom_bytes"].get<int64_t>(),
            static_cast<int64_t>(doc["usable_bytes"].get<uint64_t>()) - static_cast<int64_t>(doc["needed_bytes"].get<uint64_t>()));
  ASSERT_TRUE(doc["plan"].is_object());
  EXPECT_LE(doc["plan"]["needed_bytes"].get<uint64_t>(), doc["usable_bytes"].get<uint64_t>());
  uint64_t previous = doc["needed_bytes"].get<uint64_t>();
  for (const auto& change : doc["plan"]["changes"]) {
    EXPECT_LT(change["needed_bytes"].get<uint64_t>(), previous) << change["id"];
    previous = change["needed_bytes"].get<uint64_t>();
    EXPECT_FALSE(change["settings"].empty()) << change["id"];
  }
  ASSERT_EQ(doc["free_advice"].size(), 2u);
  EXPECT_EQ(doc["free_advice"][0]["fix_id"], "expandable_segments");
  EXPECT_TRUE(doc["free_advice"][0]["device_used_bytes"].is_null());
  EXPECT_TRUE(doc["free_advice"][0]["needed_bytes"].is_null());
  // The lengths file: 1000 examples, one of 15000 tokens.
  const auto& lengths = doc["lengths"];
  EXPECT_EQ(lengths["count"], 1000);
  EXPECT_EQ(lengths["max"], 15000);
  EXPECT_EQ(lengths["p50"], 356);
  EXPECT_EQ(lengths["p99"], 1547);
  EXPECT_EQ(lengths["suggested_cut"], 2048);
  EXPECT_GT(lengths["outlier_extra_bytes"].get<uint64_t>(), 0u);
  EXPECT_TRUE(doc["max_micro_batch"].is_number() || doc["max_micro_batch"].is_null());
  EXPECT_TRUE(doc["config"].is_null());
}

TEST(FitCli, TrainingConfigThatFitsExitsZero) {
  auto r = run_cli({"fit", fixture_path("fit/axolotl_llama3_qlora.yml"), "--gpu", "a100-80", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_TRUE(doc["fits"].get<bool>());
  EXPECT_TRUE(doc["plan"].is_null());
  EXPECT_EQ(doc["config"]["format"], "axolotl");
  EXPECT_EQ(doc["config"]["used_keys"].size(), 16u);
  EXPECT_TRUE(doc["alternatives"].empty());
}

TEST(FitCli, UnknownConfigKeysWarnOnStdoutAndContinue) {
  auto r = run_cli({"fit", fixture_path("fit/axolotl_full_zero3.yml"), "--gpu", "h100", "--gpus", "8"});
  EXPECT_NE(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("warning: "));
  EXPECT_THAT(r.out, ::testing::HasSubstr("unknown key 'my_custom_flag' ignored"));
}

// Long-context full fine-tuning on 4 PCIe cards (96k tokens: QLoRA on a 16-bit base no longer
// fits, nor pure bf16 with FSDP): the plan ends with a tensor x pipeline layout,
// printed as torchtitan and Megatron-LM command-line flags with the interconnect and bubble costs.
TEST(FitCli, TensorAndPipelineParallelPlanOnFourGpus) {
  const std::vector<std::string> args = {"fit", "meta-llama/Llama-3.1-8B", "--task", "train_full",
                                         "--micro-batch-size", "1", "--grad-accum-steps", "4",
                                         "--seq-len", "98304", "--attention-impl", "flash",
                                         "--gpu", "l40s", "--gpus", "4"};
  auto text = run_cli(args);
  EXPECT_EQ(text.exit_code, 1) << text.err;
  EXPECT_THAT(text.out, HasSubstr("5. tensor parallel 2 (with sequence parallelism) x pipeline parallel 2 "
                                  "(1F1B) across the 4 GPUs; accumulation 4 -> 16 keeps the global batch 16"));
  EXPECT_THAT(text.out, HasSubstr("needs an NVLink-class interconnect between the 2 GPUs: NOT this one, "
                                  "expect a large slowdown; PCIe Gen4 only; no NVLink"));
  EXPECT_THAT(text.out, HasSubstr("pipeline bubble: about 6% of each step idle, (pp-1)/(m+pp-1) with m = "
                                  "16 micro-batches"));
  EXPECT_THAT(text.out, HasSubstr(
      "set:  torchtitan: --parallelism.data_parallel_shard_degree 1 --parallelism.tensor_parallel_degree 2 "
      "--parallelism.pipeline_parallel_degree 2 --parallelism.pipeline_parallel_schedule 1F1B "
      "--parallelism.pipeline_parallel_microbatch_size 1 --training.local_batch_size 16 "
      "--training.global_batch_size 16 --activation_checkpoint.mode full\n"));
  EXPECT_THAT(text.out, HasSubstr("set:  Megatron-LM: --tensor-model-parallel-size 2 --sequence-parallel "
                                  "--pipeline-model-parallel-size 2 --micro-batch-size 1 --global-batch-size 16 "
                                  "--bf16 --recompute-granularity full --recompute-method uniform "
                                  "--recompute-num-layers 1\n"));

  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  auto json = run_cli(json_args);
  ASSERT_EQ(json.exit_code, 1) << json.err;
  auto doc = nlohmann::json::parse(json.out);
  const auto& plan = doc["plan"];
  const auto& last = plan["changes"].back();
  EXPECT_EQ(last["id"], "tensor_pipeline_parallel");
  EXPECT_EQ(last["step"], 7);
  EXPECT_EQ(last["needed_bytes"], plan["needed_bytes"]);
  EXPECT_LE(plan["needed_bytes"].get<uint64_t>(), doc["target_bytes"].get<uint64_t>());
  EXPECT_EQ(last["settings"][1], nlohmann::json({{"target", "torchtitan"},
                                                 {"name", "--parallelism.tensor_parallel_degree"},
                                                 {"value", "2"}}));
}

TEST(FitCli, UnknownOptionIsOneLineNamingTheCommand) {
  auto r = run_cli({"fit", "--model", "llama-2-7b", "--gpu", "4090", "--params", "7B"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "oomdoc fit: --params: unknown option (see oomdoc fit --help)\n");
}

// CLI11 alone would read -1 into an unsigned option as 2^64 - 1.
TEST(FitCli, NegativeCountIsRefusedAtParsing) {
  auto r = run_cli({"fit", "--model", "llama-2-7b", "--gpu", "4090", "--gpus", "-1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "oomdoc fit: --gpus: must be at least 1 (got -1) (see oomdoc fit --help)\n");
}

// fit has no --params: the resolver says what is missing and nothing more.
TEST(FitCli, UnknownModelDoesNotSuggestParams) {
  auto r = run_cli({"fit", "--model", "no-such-model-xyz", "--gpu", "4090"}, "",
                   testing::kNoModelCache);
  expect_bad_input(r, "no-such-model-xyz: not a file or folder, not in the Hugging Face cache, and not a bundled preset");
  EXPECT_EQ(r.err.find("--params"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.substr(r.err.size() - 2), ")\n");
}

TEST(FitCli, AmbiguousGpuListsTheCandidates) {
  auto r = run_cli({"fit", "--model", "llama-2-7b", "--gpu", "16"});
  expect_bad_input(r, "ambiguous GPU '16': a number alone names no card (");
  auto rtx = run_cli({"fit", "--model", "llama-2-7b", "--gpu", "rtx"});
  expect_bad_input(rtx, "ambiguous GPU 'rtx': it fits ");
}

TEST(FitCli, TensorParallelMustSplitTheHeads) {
  auto r = run_cli({"fit", "--model", "llama-2-7b", "--gpu", "h100", "--gpus", "3", "--tp", "3"});
  expect_bad_input(r, "tp 3 does not divide the model's 32 attention heads (each tensor-parallel rank needs whole heads)");
}

TEST(FitCli, DeepSpeedPathThatIsNotAConfig) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(OOMDOC_BINARY_DIR) / "fit_cli_ds";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "ds.json") << "\"zero3\"\n";
  std::ofstream(dir / "train.yaml") << "model_name_or_path: meta-llama/Llama-2-7b-hf\nfinetuning_type: lora\n"
                                       "deepspeed: ds.json\n";
  auto r = run_cli({"fit", (dir / "train.yaml").string(), "--gpu", "4090"});
  expect_bad_input(r, "");
  EXPECT_EQ(r.err, "oomdoc: " + (dir / "ds.json").string() + ": not a DeepSpeed config (expected an object)\n");
}

// fit's own needed figure, and its device total as estimate defines it (reclaimable cache included).
uint64_t fit_needed(const testing::CommandResult& r) {
  EXPECT_NE(r.exit_code, 2) << r.err;  // fit exits 1 when the job does not fit
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["needed_bytes"].get<uint64_t>(),
            doc["device_used_bytes"].get<uint64_t>() - doc["reclaimable_bytes"].get<uint64_t>());
  return doc["needed_bytes"].get<uint64_t>();
}

// What fit compares with the card: estimate's needed_bytes (its device total less the allocator's
// reclaimable cache).
uint64_t needed(const testing::CommandResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["needed_bytes"].get<uint64_t>(),
            doc["device_used_bytes"].get<uint64_t>() - doc["reclaimable_bytes"].get<uint64_t>());
  return doc["needed_bytes"].get<uint64_t>();
}

// estimate and fit read a job file and the flags over it the same way: a LoRA flag changes that
// key only (the file's all_linear targets stay), so both predict the job the merged file describes.
TEST(JobFromFileAndFlags, EstimateAndFitMergeLoraKeyByKey) {
  const std::string file = fixture_path("estimate/qlora_70b_job.json");
  auto job = nlohmann::json::parse(testing::read_file(file));
  job["lora"]["r"] = 8;
  const auto merged = std::filesystem::temp_directory_path() / "oomdoc_merged_job.json";
  std::ofstream(merged) << job.dump();
  const uint64_t expected = needed(run_cli({"estimate", "--job", merged.string(), "--json"}));
  EXPECT_EQ(needed(run_cli({"estimate", "--job", file, "--lora-r", "8", "--json"})), expected);
  EXPECT_EQ(fit_needed(run_cli({"fit", "--job", file, "--lora-r", "8", "--gpu", "h100", "--json"})), expected);
  EXPECT_NE(needed(run_cli({"estimate", "--job", file, "--json"})), expected);
  std::filesystem::remove(merged);
}

// Generation on a card too small: the plan tries the inference levers (an 8-bit KV cache, the
// model split over GPUs the user has, 8-/4-bit weights) before hardware, and the free advice is
// generation's (inference_mode), not training's.
TEST(FitCli, InferenceGetsInferenceLevers) {
  auto r = run_cli({"fit", "meta-llama/Llama-3.1-8B-Instruct", "--task", "inference", "--prompt-len", "32768",
                    "--max-new-tokens", "1024", "--gpu", "4090", "--json"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_TRUE(doc["plan"].is_object());
  EXPECT_EQ(doc["plan"]["changes"][0]["id"], "quantize_int8");
  EXPECT_EQ(doc["plan"]["changes"][0]["settings"][0],
            nlohmann::json({{"target", "BitsAndBytesConfig"}, {"name", "load_in_8bit"}, {"value", "True"}}));
  EXPECT_EQ(doc["free_advice"][1]["fix_id"], "no_grad_for_eval");
  bool kv = false, tp = false;
  for (const auto& a : doc["alternatives"]) {
    if (a["id"] == "kv_cache_int8") kv = true;
    if (a["id"] == "more_gpus") {
      tp = true;
      EXPECT_EQ(a["settings"][0]["name"],
                "AutoModelForCausalLM.from_pretrained(..., tp_plan=\"auto\")  # launched with torchrun --nproc-per-node 2");
    }
  }
  EXPECT_TRUE(kv);
  EXPECT_TRUE(tp);
}

// A precision left open on a card without bf16 is estimated in fp16, and said so.
TEST(FitCli, CardWithoutBf16RunsFp16) {
  auto r = run_cli({"fit", "llama-2-7b", "--task", "train_lora", "--gpu", "t4", "--json"});
  ASSERT_NE(r.exit_code, 2) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_FALSE(doc["notes"].empty());
  EXPECT_EQ(doc["notes"][0], "precision fp16: Tesla T4 16GB has no bfloat16 support");
}

// Every alternative lowers the need; a job that fits the budget only gets alternatives that reach
// the target; a LoRA job's QLoRA alternative appears once.
TEST(FitCli, AlternativesEachDoSomethingOnce) {
  auto r = run_cli({"fit", "llama-3.1-8b", "--task", "train_lora", "--seq-len", "2048", "--gradient-checkpointing",
                    "full", "--attention-impl", "flash", "--gpu", "4090", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_TRUE(doc["fits"].get<bool>());
  ASSERT_FALSE(doc["fits_target"].get<bool>());
  std::set<std::string> ids;
  for (const auto& a : doc["alternatives"]) {
    EXPECT_LT(a["needed_bytes"].get<uint64_t>(), doc["needed_bytes"].get<uint64_t>()) << a["id"];
    if (a["id"] != "bigger_gpu" && a["id"] != "more_gpus") {
      EXPECT_LE(a["needed_bytes"].get<uint64_t>(), doc["target_bytes"].get<uint64_t>()) << a["id"];
    }
    EXPECT_TRUE(ids.insert(a["id"].get<std::string>()).second) << "twice: " << a["id"];
  }
  EXPECT_EQ(ids.count("padding_free"), 0u);
}

TEST(FitCli, MemoryNeedsAUnitAndAGpuSize) {
  auto bare = run_cli({"fit", "llama-2-7b", "--memory", "24"});
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_EQ(bare.err, "oomdoc: --memory: '24' has no unit: write 24GiB (as CUDA and nvidia-smi count) or 24GB (decimal)\n");
  auto tiny = run_cli({"fit", "llama-2-7b", "--memory", "1KiB"});
  EXPECT_EQ(tiny.exit_code, 2);
  EXPECT_EQ(tiny.err, "oomdoc: --memory: 1.00 KiB is smaller than any GPU this sizes (1 GiB at least)\n");
}

TEST(FitCli, MissingConfigAndBrokenJsonAreNamed) {
  auto missing = run_cli({"fit", "/nonexistent/axolotl.yml", "--gpu", "4090"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "oomdoc: /nonexistent/axolotl.yml: no such file (a training config or job file was expected)\n");
  const auto broken = std::filesystem::temp_directory_path() / "oomdoc_broken_job.json";
  std::ofstream(broken) << "{\"model\": \"llama-2-7b\",}\n";
  auto r = run_cli({"fit", broken.string(), "--gpu", "4090"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "oomdoc: " + broken.string() +
                       ": invalid JSON: line 1, column 24: syntax error while parsing object key - unexpected '}'; "
                       "expected string literal\n");
  std::filesystem::remove(broken);
}

// A job read from an Axolotl config is advised in Axolotl's keys.
TEST(FitCli, AxolotlConfigGetsAxolotlKeys) {
  const auto path = std::filesystem::temp_directory_path() / "oomdoc_axolotl_keys.yml";
  std::ofstream(path) << "base_model: meta-llama/Meta-Llama-3-8B\nadapter: lora\nlora_r: 16\nlora_alpha: 32\n"
                         "lora_target_linear: true\nsequence_len: 4096\nmicro_batch_size: 8\n"
                         "gradient_accumulation_steps: 1\noptimizer: adamw_torch\nbf16: true\n";
  auto r = run_cli({"fit", path.string(), "--gpu", "4090", "--json"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_TRUE(doc["plan"].is_object());
  const auto& first = doc["plan"]["changes"][0];
  EXPECT_EQ(first["id"], "micro_batch");
  EXPECT_EQ(first["settings"][0], nlohmann::json({{"target", "Axolotl YAML"}, {"name", "micro_batch_size"}, {"value", "1"}}));
  EXPECT_EQ(first["settings"][1],
            nlohmann::json({{"target", "Axolotl YAML"}, {"name", "gradient_accumulation_steps"}, {"value", "8"}}));
  auto text = run_cli({"fit", path.string(), "--gpu", "4090"});
  EXPECT_THAT(text.out, ::testing::HasSubstr("set:  Axolotl YAML: micro_batch_size: 1; gradient_accumulation_steps: 8"));
  std::filesystem::remove(path);
}

// Round 2: host RAM of an offload that also shards counts each rank's shard; the DeepSpeed JSON
// for a YAML config is JSON (true); --tp without --gpus runs on tp GPUs; --max-seq stops at the
// model's context.
TEST(FitCli, OffloadHostRamIsEachRanksShard) {
  auto one = run_cli({"fit", "llama-2-7b", "--task", "train_full", "--micro-batch-size", "1", "--grad-accum-steps", "16",
                      "--seq-len", "1024", "--gradient-checkpointing", "full", "--gpu", "4090", "--json"});
  auto two = run_cli({"fit", "llama-2-7b", "--task", "train_full", "--micro-batch-size", "1", "--grad-accum-steps", "16",
                      "--seq-len", "1024", "--gradient-checkpointing", "full", "--gpu", "4090", "--gpus", "2", "--json"});
  auto host = [](const testing::CommandResult& r, const char* field) -> uint64_t {
    auto doc = nlohmann::json::parse(r.out);
    for (const auto& a : doc["alternatives"]) {
      if (a["id"] == "offload_optimizer" && a[field].is_number()) return a[field].get<uint64_t>();
    }
    return 0;
  };
  const uint64_t one_total = host(one, "host_ram_total_bytes");
  const uint64_t two_per_gpu = host(two, "host_ram_bytes");
  ASSERT_GT(one_total, 0u);
  ASSERT_GT(two_per_gpu, 0u);
  EXPECT_EQ(host(two, "host_ram_total_bytes"), 2 * two_per_gpu);
  // Sharded over 2, each rank keeps about half: the machine's total stays about the 1-GPU figure.
  EXPECT_NEAR(static_cast<double>(2 * two_per_gpu) / static_cast<double>(one_total), 1.0, 0.02);
}

TEST(FitCli, TensorParallelWithoutGpusRunsOnItsProduct) {
  auto r = run_cli({"fit", "llama-2-7b", "--tp", "2", "--gpu", "4090", "--json"});
  ASSERT_NE(r.exit_code, 2) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["num_gpus"], 2);
}

TEST(FitCli, LongestSequenceStopsAtTheContext) {
  auto r = run_cli({"fit", "gpt2", "--task", "train_full", "--gpu", "4090", "--max-seq", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["max_seq_len"], 1024);
  EXPECT_EQ(doc["notes"].back(), "the longest sequence is the model's context (1024 positions), not memory");
}

// FlashAttention-2 needs Ampere or newer: on a T4 (Turing) no plan offers it (padding_free, the
// flash kernel), and a job that asks for it gets a note that SDPA is what runs there.
TEST(FitCli, NoFlashAttention2BeforeAmpere) {
  auto r = run_cli({"fit", "llama-2-7b", "--task", "train_lora", "--seq-len", "4096", "--micro-batch-size", "4",
                    "--gpu", "t4", "--json"});
  ASSERT_NE(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out.find("flash_attention_2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("padding_free"), std::string::npos) << r.out;
  auto asked = run_cli({"fit", "llama-2-7b", "--task", "train_lora", "--attention-impl", "flash", "--gpu", "t4", "--json"});
  ASSERT_NE(asked.exit_code, 2) << asked.err;
  auto notes = nlohmann::json::parse(asked.out)["notes"];
  EXPECT_NE(std::find(notes.begin(), notes.end(),
                      "Tesla T4 16GB (Turing) does not run FlashAttention-2 (it needs an Ampere or newer GPU, compute "
                      "capability 8.0+): attn_implementation=\"flash_attention_2\" will not run as given; SDPA "
                      "(attn_implementation=\"sdpa\") is what runs there, and what is predicted"),
            notes.end()) << notes.dump();
  // On an Ampere card the same plan may use it.
  auto a10 = run_cli({"fit", "llama-2-7b", "--task", "train_lora", "--attention-impl", "flash", "--gpu", "a10", "--json"});
  ASSERT_NE(a10.exit_code, 2) << a10.err;
  EXPECT_EQ(a10.out.find("does not run FlashAttention-2"), std::string::npos);
}

// An option given twice, under one name or two, is named with both values (not CLI11's "At Most 1
// required but received 2").
TEST(FitCli, OptionGivenTwiceIsNamed) {
  auto aliases = run_cli({"fit", "llama-2-7b", "--gpu", "4090", "--gpus", "2", "--num-gpus", "4"});
  EXPECT_EQ(aliases.exit_code, 2);
  EXPECT_EQ(aliases.err, "oomdoc fit: --gpus 2 and --num-gpus 4 set the same option: give one (see oomdoc fit --help)\n");
  auto twice = run_cli({"fit", "llama-2-7b", "--gpu", "4090", "--seq-len", "2048", "--seq-len=4096"});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_EQ(twice.err, "oomdoc fit: --seq-len is given twice (--seq-len 2048, --seq-len 4096): give it once (see oomdoc fit --help)\n");
}

// A prompt leaves room for the tokens generated after it: the default max_new_tokens (256) as
// much as one given.
TEST(FitCli, LongestPromptLeavesRoomForTheDefaultNewTokens) {
  for (const auto& extra : std::vector<std::vector<std::string>>{{}, {"--max-new-tokens", "256"}}) {
    std::vector<std::string> args = {"fit", "llama-2-7b", "--task", "inference", "--gpu", "h100-80", "--max-seq", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["max_seq_len"], 4096 - 256);
    EXPECT_EQ(doc["notes"].back(), "the longest prompt is the model's context (4096 positions less the tokens generated), not memory");
  }
}

// The bigger card suggested first runs the user's own stack (an NVIDIA card for a 4090 user); a
// smaller card of another vendor follows, saying so.
TEST(FitCli, BiggerGpuOfTheUsersVendorFirst) {
  auto r = run_cli({"fit", "meta-llama/Llama-3.1-8B", "--task", "train_lora", "--seq-len", "2048", "--micro-batch-size", "2",
                    "--gpu", "4090", "--json"},
                   "", testing::kNoModelCache);
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  std::vector<std::string> hardware;
  for (const auto& a : doc["alternatives"]) {
    if (a["id"] == "bigger_gpu") hardware.push_back(a["description"].get<std::string>());
  }
  const std::vector<std::string> expected = {"fits unchanged on H100 SXM 80GB",
                                             "fits unchanged on Instinct MI250X 64GB (one GCD), an AMD card (ROCm)"};
  EXPECT_EQ(hardware, expected);
}

// An FSDP job is offered FSDP's own CPU offload (parameters, gradients and the optimizer step),
// not a move to DeepSpeed; its prediction has neither gradient shards nor optimizer state.
TEST(FitCli, FsdpJobGetsFsdpCpuOffload) {
  auto r = run_cli({"fit", "llama-3.1-8b", "--task", "train_full", "--parallelism", "fsdp_full_shard", "--gpus", "2",
                    "--gpu", "4090", "--seq-len", "2048", "--micro-batch-size", "1", "--gradient-checkpointing", "full",
                    "--json"},
                   "", testing::kNoModelCache);
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  const nlohmann::json* offload = nullptr;
  for (const auto& a : doc["alternatives"]) {
    if (a["id"] == "offload_params") offload = &a;
    EXPECT_NE(a["id"], "offload_optimizer");
  }
  ASSERT_NE(offload, nullptr) << doc["alternatives"].dump();
  EXPECT_EQ((*offload)["title"], "offload parameters, gradients and the optimizer step to CPU memory (FSDP CPU offload)");
  ASSERT_EQ((*offload)["settings"].size(), 1u);
  EXPECT_EQ((*offload)["settings"][0]["name"], "fsdp");
  EXPECT_EQ((*offload)["settings"][0]["value"], "\"full_shard offload auto_wrap\"");
}

// SHARD_GRAD_OP keeps gathered parameters from forward to backward, and estimate refuses params
// offload without parameter sharding: the FSDP offload offered to such a job shards the parameters
// too (full_shard offload), and its figures are estimate's for that job (was "shard_grad_op
// offload", sized as if sharded, a job estimate calls invalid).
TEST(FitCli, ShardGradOpJobGetsFullShardCpuOffload) {
  const std::vector<std::string>& env = testing::kNoModelCache;
  const std::vector<std::string> job = {"llama-3.1-8b", "--task", "train_full", "--gpus", "2", "--seq-len", "2048",
                                        "--micro-batch-size", "1", "--gradient-checkpointing", "full"};
  auto with = [&](std::vector<std::string> head, std::vector<std::string> tail) {
    head.insert(head.end(), job.begin(), job.end());
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  auto r = run_cli(with({"fit"}, {"--parallelism", "fsdp_shard_grad_op", "--gpu", "4090", "--json"}), "", env);
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  const nlohmann::json* offload = nullptr;
  for (const auto& a : doc["alternatives"]) {
    if (a["id"] == "offload_params") offload = &a;
  }
  ASSERT_NE(offload, nullptr) << doc["alternatives"].dump();
  EXPECT_EQ((*offload)["title"], "FSDP full sharding with parameters, gradients and the optimizer step offloaded to "
                                 "CPU memory (FSDP CPU offload)");
  ASSERT_EQ((*offload)["settings"].size(), 1u);
  EXPECT_EQ((*offload)["settings"][0]["value"], "\"full_shard offload auto_wrap\"");

  auto shard_grad_op = run_cli(with({"estimate"}, {"--parallelism", "fsdp_shard_grad_op", "--offload", "params"}), "", env);
  EXPECT_EQ(shard_grad_op.exit_code, 2);
  EXPECT_EQ(shard_grad_op.err, "oomdoc: command line: offload: params offload needs parameter sharding (zero3, "
                               "fsdp_full_shard or hybrid_shard)\n");
  auto est = run_cli(with({"estimate"}, {"--parallelism", "fsdp_full_shard", "--offload", "params", "--json"}), "", env);
  ASSERT_EQ(est.exit_code, 0) << est.err;
  auto e = nlohmann::json::parse(est.out);
  EXPECT_EQ((*offload)["device_used_bytes"], e["device_used_bytes"]);
  EXPECT_EQ((*offload)["needed_bytes"], e["needed_bytes"]);
}

// A short name that several sizes share is read as the common card, and stderr says which others
// it also names; a name with one size says nothing.
TEST(FitCli, ShortGpuNameSaysWhichSizeItRead) {
  const std::vector<std::string>& env = testing::kNoModelCache;
  auto a100 = run_cli({"fit", "llama-3.2-1b", "--task", "inference", "--gpu", "a100", "--json"}, "", env);
  ASSERT_EQ(a100.exit_code, 0) << a100.err;
  const std::string note = "--gpu 'a100' is read as A100 SXM4 80GB; it also names A100 SXM4 40GB, "
                           "A100 PCIe 40GB (give the size, e.g. --gpu 'A100 SXM4 40GB')";
  const auto doc = nlohmann::json::parse(a100.out);
  EXPECT_EQ(doc["gpu"], "A100 SXM4 80GB");
  // --json keeps it in the document's notes; the text output says it on stderr.
  EXPECT_EQ(doc["notes"][0], note);
  EXPECT_EQ(a100.err, "");
  auto text = run_cli({"fit", "llama-3.2-1b", "--task", "inference", "--gpu", "a100"}, "", env);
  EXPECT_EQ(text.err, "oomdoc: note: " + note + "\n");
  auto rtx = run_cli({"fit", "llama-3.2-1b", "--task", "inference", "--gpu", "4090", "--json"}, "", env);
  ASSERT_EQ(rtx.exit_code, 0) << rtx.err;
  EXPECT_EQ(rtx.err, "");
}

// A job beyond 64-bit byte counts does not fit, and no plan comes from a wrapped total: whatever
// the search proposes has its own prediction under the budget.
TEST(FitCli, SizesBeyond64BitsDoNotFit) {
  const std::vector<std::string> args = {"fit", "meta-llama/Llama-3.1-8B", "--micro-batch-size", "1048576",
                                         "--seq-len", "16777216", "--gpu", "h100"};
  auto text = run_cli(args, "", testing::kNoModelCache);
  EXPECT_EQ(text.exit_code, 1) << text.err;
  EXPECT_NE(text.out.find("predicted peak  over 16 EiB needed (? of the card"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("DOES NOT FIT as given: beyond any GPU (over 16 EiB)"), std::string::npos) << text.out;
  auto with_json = args;
  with_json.push_back("--json");
  auto r = run_cli(with_json, "", testing::kNoModelCache);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["fits"], false);
  EXPECT_EQ(doc["needed_bytes"], UINT64_MAX);
  EXPECT_TRUE(doc["headroom_bytes"].is_null());
  if (!doc["plan"].is_null()) {
    EXPECT_LE(doc["plan"]["needed_bytes"].get<uint64_t>(), doc["usable_bytes"].get<uint64_t>());
  }
  for (const auto& a : doc["alternatives"]) EXPECT_LT(a["needed_bytes"].get<uint64_t>(), UINT64_MAX);
}

// --max-batch / --max-seq when even 1 does not fit: said, not left out.
TEST(FitCli, SolversSayWhenEvenOneDoesNotFit) {
  auto r = run_cli({"fit", "meta-llama/Llama-3.1-405B", "--task", "train_full", "--gpu", "4090", "--max-batch",
                    "--max-seq"}, "", testing::kNoModelCache);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("\nlargest micro-batch that fits: none (even 1 sequence does not fit the 92% budget)\n"
                       "longest sequence that fits: none (even 1 token does not fit the 92% budget)\n"),
            std::string::npos) << r.out;
  auto j = run_cli({"fit", "meta-llama/Llama-3.1-405B", "--task", "train_full", "--gpu", "4090", "--max-batch",
                    "--max-seq", "--json"}, "", testing::kNoModelCache);
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_TRUE(doc["max_micro_batch"].is_null());
  EXPECT_TRUE(doc["max_seq_len"].is_null());
}

// FlashAttention has no fp32 kernels: an fp32 job is refused with flash, and a fit plan never
// ends with flash in fp32. gpt-oss (no SDPA path in transformers) at 16k tokens on an H100: a bf16
// job is offered its flash kernel as one change; an fp32 job only together with 16-bit compute
// (before, the search dropped the precision change as "not needed" and left flash in fp32).
TEST(FitCli, NoFlashAttentionForAnFp32Job) {
  expect_bad_input(run_cli({"fit", "llama-2-7b", "--precision", "fp32", "--attention-impl", "flash", "--gpu", "a100-80"}),
                   "oomdoc: command line: attention_impl: flash has no fp32 kernels");
  auto fit = [](const std::string& precision) {
    auto r = run_cli({"fit", "openai/gpt-oss-20b", "--task", "train_lora", "--seq-len", "16384", "--gpu", "h100 sxm",
                      "--precision", precision, "--json"}, "", testing::kNoModelCache);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    return nlohmann::json::parse(r.out);
  };
  auto sets_flash = [](const nlohmann::json& change) {
    for (const auto& s : change["settings"]) {
      if (s["value"].get<std::string>().find("flash") != std::string::npos) return true;
    }
    return false;
  };
  auto bf16 = fit("bf16");
  bool offered = false;
  for (const auto& c : bf16["plan"]["changes"]) offered |= sets_flash(c);
  EXPECT_TRUE(offered) << bf16["plan"].dump();
  auto fp32 = fit("fp32");
  bool precision_changed = false;
  for (const auto& c : fp32["plan"]["changes"]) {
    precision_changed |= c["id"] == "mixed_precision";
    if (sets_flash(c)) {
      EXPECT_TRUE(precision_changed) << fp32["plan"].dump();
    }
  }
  for (const auto& a : fp32["alternatives"]) {
    if (a["id"] != "same_method") {
      EXPECT_FALSE(sets_flash(a)) << a.dump();
    }
  }
}

// A QLoRA job without double quantization: the QLoRA recipe's own setting is a cheap step of the
// plan (0.37 bits per parameter of a 70B base: about 3 GiB), before offload or more GPUs.
TEST(FitCli, QloraWithoutDoubleQuantGetsItAsACheapStep) {
  auto r = run_cli({"fit", "llama-2-70b", "--task", "train_qlora", "--seq-len", "1024", "--gradient-checkpointing", "full",
                    "--optimizer", "paged_adamw_8bit", "--gpu", "a6000", "--json"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_TRUE(doc["plan"].is_object());
  std::vector<std::string> ids;
  uint64_t before = 0, after = 0;
  for (const auto& change : doc["plan"]["changes"]) {
    ids.push_back(change["id"]);
    if (change["id"] == "double_quant") {
      after = change["needed_bytes"].get<uint64_t>();
      EXPECT_EQ(change["settings"][0]["name"], "bnb_4bit_use_double_quant");
    } else if (after == 0) {
      before = change["needed_bytes"].get<uint64_t>();
    }
  }
  ASSERT_NE(std::find(ids.begin(), ids.end(), "double_quant"), ids.end()) << r.out;
  EXPECT_EQ(std::find(ids.begin(), ids.end(), "offload"), ids.end()) << r.out;
  // One fp32 absmax per 64 weights (0.5 bits) becomes an 8-bit one plus an fp32 per 256 of them
  // (0.127 bits): 0.373 bits x 68.4B quantized weights = 2.97 GiB, 3.12 GiB needed with the
  // allocator's 5% slack on it.
  ASSERT_GT(before, after);
  EXPECT_NEAR(static_cast<double>(before - after) / (1ull << 30), 2.97 * 1.05, 0.05);
}

// A budget of 1 on an RTX 4090 is what CUDA can allocate (23.65 GiB), not nvidia-smi's 23.99 GiB.
TEST(FitCli, TheBudgetStopsAtWhatCudaCanAllocate) {
  auto r = run_cli({"fit", "llama-2-7b", "--task", "train_lora", "--seq-len", "1790", "--gpu", "4090", "--budget", "1", "--json"});
  auto doc = nlohmann::json::parse(r.out);
  const auto cuda_total = find_gpu("4090")->cuda_total_bytes;
  ASSERT_TRUE(cuda_total.has_value());
  EXPECT_EQ(doc["usable_bytes"].get<uint64_t>(), *cuda_total);
  EXPECT_LT(doc["usable_bytes"].get<uint64_t>(), doc["total_bytes"].get<uint64_t>());
  EXPECT_EQ(doc["fits"].get<bool>(), doc["needed_bytes"].get<uint64_t>() <= *cuda_total);
  auto text = run_cli({"fit", "llama-2-7b", "--task", "train_lora", "--seq-len", "1790", "--gpu", "4090", "--budget", "1"});
  EXPECT_NE(text.out.find("(100% budget, all CUDA can allocate)"), std::string::npos) << text.out;
}

// Generating as many tokens as the context holds leaves no prompt: said, not "1".
TEST(FitCli, NoPromptFitsWhenTheNewTokensFillTheContext) {
  auto r = run_cli({"fit", "gpt2", "--task", "inference", "--gpu", "4090", "--max-seq", "--max-new-tokens", "2000"});
  EXPECT_NE(r.out.find("longest prompt that fits: none (max_new_tokens 2000 leaves no room for a prompt in the model's "
                       "context of 1024 positions)"), std::string::npos) << r.out;
  auto j = run_cli({"fit", "gpt2", "--task", "inference", "--gpu", "4090", "--max-seq", "--max-new-tokens", "2000", "--json"});
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_TRUE(doc["max_seq_len"].is_null());
}

// A job that fits in memory but cannot start (a sequence past GPT-2's 1024 learned positions) is
// not reported as fitting: exit 1, "runs": false, and the reason in the verdict.
// Checkpointing lowers the backward peak, not the optimizer step's: at its place in the plan it
// saves nothing, which the plan says, and LoRA then needs it.
TEST(FitCliQa5, AChangeThatSavesNothingYetIsSaidSo) {
  auto r = testing::run_cli({"fit", "llama-2-7b", "--task", "train_full", "--gpu", "4090"}, "", testing::kNoModelCache);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("; no saving yet, as the peak is at another moment: the changes after it need it"),
            std::string::npos) << r.out;
  auto j = testing::run_cli({"fit", "llama-2-7b", "--task", "train_full", "--gpu", "4090", "--json"}, "",
                            testing::kNoModelCache);
  const auto plan = nlohmann::json::parse(j.out)["plan"]["changes"];
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0]["id"], "gradient_checkpointing");
  EXPECT_EQ(plan[0]["saves_nothing_here"], true);
  EXPECT_EQ(plan[1]["saves_nothing_here"], false);
}

TEST(FitCliQa5, FitsInMemoryButWillNotRun) {
  auto r = testing::run_cli({"fit", "gpt2", "--gpu", "4090", "--seq-len", "2048"}, "", testing::kNoModelCache);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("but WILL NOT RUN: 2048 tokens per sequence is above the model's 1024 learned positions (an "
                       "index error)"), std::string::npos) << r.out;
  auto j = testing::run_cli({"fit", "gpt2", "--gpu", "4090", "--seq-len", "2048", "--json"}, "", testing::kNoModelCache);
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["fits"], true);
  EXPECT_EQ(doc["runs"], false);
  ASSERT_EQ(doc["will_not_run"].size(), 1u);
  auto ok = testing::run_cli({"fit", "gpt2", "--gpu", "4090", "--seq-len", "1024"}, "", testing::kNoModelCache);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// The same-method combination prints its cost: on a TP layout that is where it says the training
// script must carry what torchtitan's and Megatron-LM's flags cannot (8-bit AdamW, pure bf16).
TEST(FitCli, SameMethodAlternativeSaysWhatItsFlagsCannotCarry) {
  auto r = run_cli({"fit", "meta-llama/Llama-3.1-70B", "--task", "train_full", "--micro-batch-size", "4",
                    "--grad-accum-steps", "4", "--seq-len", "4096", "--gpu", "A100 SXM4 80GB", "--gpus", "8"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const size_t same = r.out.find("  - without changing the training method: ");
  ASSERT_NE(same, std::string::npos) << r.out;
  const size_t cost = r.out.find("\n      cost: ", same);
  ASSERT_NE(cost, std::string::npos) << r.out;
  const std::string line = r.out.substr(cost + 1, r.out.find('\n', cost + 1) - cost - 1);
  EXPECT_NE(line.find("8-bit AdamW has no torchtitan or Megatron-LM flag: build it in the training script "
                      "(torchao.optim.AdamW8bit)"), std::string::npos) << line;
  EXPECT_NE(line.find("pure bf16 is not what either program's bf16 setting does"), std::string::npos) << line;
}

}  // namespace
}  // namespace oomdoc
