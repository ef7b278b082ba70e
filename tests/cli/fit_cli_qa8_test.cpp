// fit: what the eighth QA round found (2026-12-02): solvers asked of a load job, an error blamed on
// a job file for a flag's value, and short names in a prices file read silently.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "support/test_support.h"

namespace oomdoc {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;

TEST(FitCliQa8, SolversDoNotApplyToALoadJob) {
  for (const char* flag : {"--max-batch", "--max-seq"}) {
    auto r = run_cli({"fit", "llama-3.2-1b", "--gpu", "4090", "--task", "load", flag}, "", testing::kNoModelCache);
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_EQ(r.err, std::string("oomdoc: ") + flag +
                         " does not apply to --task load: loading the weights runs no batch and no sequence\n");
    EXPECT_TRUE(r.out.empty());
  }
}

class FitCliFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("oomdoc_fit_qa8_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

// The job file is checked as written, then with --gpus: the error names what caused it.
TEST_F(FitCliFiles, AGpuCountFromTheCommandLineIsBlamedOnTheFlag) {
  const std::string job = write("tp4.json", R"({"model": "meta-llama/Llama-3.1-8B", "task": "train_full", "tp": 4})");
  auto r = run_cli({"fit", "--job", job, "--gpu", "h100-80", "--gpus", "2"}, "", testing::kNoModelCache);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "oomdoc: --gpus 2 with " + job + ": num_gpus: 2 GPUs is not a multiple of tp*pp*cp = 4\n");
  auto flags = run_cli({"fit", "meta-llama/Llama-3.1-8B", "--tp", "4", "--gpu", "h100-80", "--gpus", "2"}, "",
                       testing::kNoModelCache);
  EXPECT_EQ(flags.err, "oomdoc: --gpus 2: num_gpus: 2 GPUs is not a multiple of tp*pp*cp = 4\n");
  // --gpus may also mend a file's count that the flags made wrong.
  const std::string two = write("two.json", R"({"model": "meta-llama/Llama-3.1-8B", "task": "train_full", "num_gpus": 2})");
  auto mended = run_cli({"fit", "--job", two, "--tp", "4", "--gpus", "4", "--gpu", "h100-80", "--json"}, "",
                        testing::kNoModelCache);
  EXPECT_NE(mended.exit_code, 2) << mended.err;
  // The file's own mistake is still the file's.
  const std::string bad = write("bad.json", R"({"model": "meta-llama/Llama-3.1-8B", "tp": 4, "num_gpus": 6})");
  auto own = run_cli({"fit", "--job", bad, "--gpu", "h100-80"}, "", testing::kNoModelCache);
  EXPECT_EQ(own.err, "oomdoc: " + bad + ": num_gpus: 6 GPUs is not a multiple of tp*pp*cp = 4\n");
}

// A short name in a prices file is read as --gpu reads it, and a note says which card it priced.
TEST_F(FitCliFiles, AShortNameInThePricesSaysWhichCardItPriced) {
  const std::string prices = write("prices.txt", "A100, 1.10\nL40S, 0.90\n");
  auto r = run_cli({"fit", "meta-llama/Llama-3.1-8B", "--task", "train_lora", "--gpu", "4090", "--prices", prices,
                    "--json"},
                   "", testing::kNoModelCache);
  ASSERT_NE(r.exit_code, 2) << r.err;
  const auto notes = nlohmann::json::parse(r.out)["notes"];
  EXPECT_NE(std::find(notes.begin(), notes.end(),
                      prices + ": line 1: 'A100' is priced as A100 SXM4 80GB; it also names A100 SXM4 40GB, A100 PCIe "
                               "40GB (give the size to price another)"),
            notes.end())
      << notes.dump();
  for (const auto& n : notes) EXPECT_EQ(n.get<std::string>().find("'L40S' is priced as"), std::string::npos);
}

}  // namespace
}  // namespace oomdoc
