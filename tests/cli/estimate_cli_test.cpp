#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analyses/estimator.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

using testing::fixture_path;
using testing::run_cli;

const std::vector<std::string> kEmptyCache = {"HF_HUB_CACHE=/nonexistent-oomdoc-cache", "HOME=/nonexistent-oomdoc-home",
                                              "NO_COLOR=1"};

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

}  // namespace
}  // namespace oomdoc
