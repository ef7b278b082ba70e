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

}  // namespace
}  // namespace oomdoc
