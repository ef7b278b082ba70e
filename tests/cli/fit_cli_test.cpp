// End-to-end: bad input to `oomdoc fit` is one line on stderr and exit 2, nothing on stdout.
#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
                   "--memory 'lots': expected a size");
  expect_bad_input(run_cli({"fit", "--model", "llama-2-7b", "--gpu", "4090", "--gpus", "0"}),
                   "--gpus must be at least 1");
}

TEST(FitCli, BadLengthsAndPricesFiles) {
  expect_bad_input(run_cli({"fit", "--model", "llama-2-7b", "--gpu", "4090", "--lengths",
                            fixture_path("fit/invalid.yml")}),
                   "invalid.yml: line 1: expected a token count");
  expect_bad_input(run_cli({"fit", "--model", "llama-2-7b", "--gpu", "4090", "--prices",
                            "/nonexistent/prices.csv"}),
                   "/nonexistent/prices.csv");
}

}  // namespace
}  // namespace oomdoc
