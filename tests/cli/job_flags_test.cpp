// Job flags are shared by estimate and fit (cli/job_flags.cpp): flags override a job file, LoRA
// settings key by key, and --model reaches fit's job.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "support/test_support.h"

namespace oomdoc {
namespace {

using testing::run_cli;

std::string write(const std::string& name, const std::string& text) {
  std::string path = std::string(OOMDOC_BINARY_DIR) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

uint64_t device_used(const std::vector<std::string>& args) {
  auto r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out)["device_used_bytes"].get<uint64_t>();
}

TEST(JobFlags, FlagsOverrideTheJobFileKeyByKey) {
  std::string r32 = write("job_r32.json", R"({"model": "llama-2-7b", "task": "train_lora", "lora": {"r": 32, "alpha": 64}})");
  std::string r8 = write("job_r8.json", R"({"model": "llama-2-7b", "task": "train_lora", "lora": {"r": 8, "alpha": 64}})");
  const uint64_t overridden = device_used({"estimate", "--job", r32, "--lora-r", "8", "--json"});
  EXPECT_EQ(overridden, device_used({"estimate", "--job", r8, "--json"}));
  EXPECT_NE(overridden, device_used({"estimate", "--job", r32, "--json"}));
  // A flag that was not given leaves the file's value.
  EXPECT_EQ(device_used({"estimate", "--job", r32, "--json"}),
            device_used({"estimate", "llama-2-7b", "--task", "train_lora", "--lora-r", "32", "--lora-alpha", "64", "--json"}));
}

TEST(JobFlags, FitTakesTheModelFlag) {
  auto r = run_cli({"fit", "--model", "llama-2-7b", "--task", "train_lora", "--gpu", "a100-80", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out)["fits"].get<bool>());
}

nlohmann::json estimate_json(const std::vector<std::string>& args) {
  auto r = run_cli(args, "", testing::kNoModelCache);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

// A model named with --job overrides the file's, as --model does; it is never dropped.
TEST(JobFlags, AModelWithAJobFileOverridesTheFilesModel) {
  std::string job = write("job_llama7b_lora.json", R"({"model": "llama-2-7b", "task": "train_lora", "seq_len": 512})");
  auto doc = estimate_json({"estimate", "llama-2-13b", "--job", job, "--json"});
  EXPECT_EQ(doc["model"]["id"], "meta-llama/Llama-2-13b-hf");
  EXPECT_EQ(doc["job"]["model"], "llama-2-13b");
  EXPECT_EQ(doc["job"]["seq_len"], 512);  // the rest from the file
  EXPECT_EQ(estimate_json({"estimate", "--job", job, "--json"})["model"]["id"], "meta-llama/Llama-2-7b-hf");
}

// Every boolean key is a flag that also takes true/false: a job file's true can be turned off.
TEST(JobFlags, BooleanFlagsTakeAnOptionalValue) {
  std::string job = write("job_qlora_dq.json",
                          R"({"model": "llama-2-7b", "task": "train_qlora", "weight_quantization": "nf4", "double_quant": true})");
  EXPECT_EQ(estimate_json({"estimate", "--job", job, "--double-quant", "false", "--json"})["job"]["double_quant"], false);
  EXPECT_EQ(estimate_json({"estimate", "--job", job, "--double-quant=false", "--json"})["job"]["double_quant"], false);
  EXPECT_EQ(estimate_json({"estimate", "--job", job, "--json"})["job"]["double_quant"], true);
  auto bare = estimate_json({"estimate", "llama-2-7b", "--task", "train_qlora", "--double-quant", "--padding-free",
                             "--fused-backward", "--compile", "--json"});
  EXPECT_EQ(bare["job"]["double_quant"], true);
  EXPECT_EQ(bare["job"]["padding_free"], true);
  EXPECT_EQ(bare["job"]["fused_backward"], true);
  EXPECT_EQ(bare["job"]["compile"], true);
  auto valued = estimate_json({"estimate", "llama-2-7b", "--compile", "true", "--autocast", "false", "--padding-free",
                               "true", "--json"});
  EXPECT_EQ(valued["job"]["compile"], true);
  EXPECT_EQ(valued["job"]["autocast"], false);
  EXPECT_EQ(valued["job"]["padding_free"], true);
  EXPECT_EQ(valued["model"]["id"], "meta-llama/Llama-2-7b-hf");
  // A word that is not true/false after a boolean flag is most likely the model, written late.
  auto late = run_cli({"estimate", "--double-quant", "llama-2-7b"}, "", testing::kNoModelCache);
  EXPECT_EQ(late.exit_code, 2);
  EXPECT_EQ(late.err, "oomdoc estimate: --double-quant: takes true or false, not 'llama-2-7b' (alone it means true; "
                      "give MODEL before the flags) (see oomdoc estimate --help)\n");
}

TEST(JobFlags, LoraTargetModulesSplitOnCommas) {
  auto doc = estimate_json({"estimate", "llama-2-7b", "--task", "train_lora", "--lora-target-modules", "q_proj,v_proj",
                            "--json"});
  EXPECT_EQ(doc["job"]["lora"]["target_modules"], nlohmann::json({"q_proj", "v_proj"}));
  auto repeated = estimate_json({"estimate", "llama-2-7b", "--task", "train_lora", "--lora-target-modules", "q_proj",
                                 "--lora-target-modules", "v_proj", "--json"});
  EXPECT_EQ(repeated["device_used_bytes"], doc["device_used_bytes"]);
  auto spaced = estimate_json({"estimate", "llama-2-7b", "--task", "train_lora", "--lora-target-modules",
                               "q_proj, v_proj", "--json"});
  EXPECT_EQ(spaced["job"]["lora"]["target_modules"], nlohmann::json({"q_proj", "v_proj"}));
}

// A count out of range reads the same whether CLI11 or the job reader sees it.
TEST(JobFlags, CountRangeMessagesAgree) {
  auto expect = [](const std::vector<std::string>& args, const std::string& line) {
    auto r = run_cli(args, "", testing::kNoModelCache);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, line + "\n");
  };
  expect({"estimate", "llama-2-7b", "--seq-len", "-5"}, "oomdoc estimate: --seq-len: must be at least 1 (got -5) (see oomdoc estimate --help)");
  expect({"estimate", "llama-2-7b", "--seq-len", "0"}, "oomdoc estimate: --seq-len: must be at least 1 (got 0) (see oomdoc estimate --help)");
  // Beyond 64 bits: the number given, not a clamped one.
  expect({"estimate", "llama-2-7b", "--seq-len", "18446744073709551616"},
         "oomdoc estimate: --seq-len: 18446744073709551616 is implausibly large (see oomdoc estimate --help)");
  expect({"estimate", "llama-2-7b", "--gpus", "0"}, "oomdoc estimate: --num-gpus: must be at least 1 (got 0) (see oomdoc estimate --help)");
  expect({"estimate", "llama-2-7b", "--task", "inference", "--max-new-tokens", "-1"},
         "oomdoc estimate: --max-new-tokens: must be 0 or more (got -1) (see oomdoc estimate --help)");
  expect({"fit", "llama-2-7b", "--gpu", "4090", "--gpus", "-2"}, "oomdoc fit: --gpus: must be at least 1 (got -2) (see oomdoc fit --help)");
  const std::string job = write("job_seq0.json", R"({"model": "llama-2-7b", "seq_len": 0})");
  expect({"estimate", "--job", job}, "oomdoc: " + job + ": seq_len: must be at least 1 (got 0)");
}

TEST(JobFlags, DuplicateKeysInAJobFileAreRefused) {
  const std::string job = write("job_two_models.json", R"({"model":"llama-2-7b","model":"gpt2"})");
  auto r = run_cli({"estimate", "--job", job}, "", testing::kNoModelCache);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "oomdoc: " + job + ": key \"model\" appears twice (give each key once)\n");
  r = run_cli({"estimate", job}, "", testing::kNoModelCache);
  EXPECT_EQ(r.err, "oomdoc: " + job + ": key \"model\" appears twice (give each key once)\n");
}

}  // namespace
}  // namespace oomdoc
