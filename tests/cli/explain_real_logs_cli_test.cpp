// End-to-end on real logs (tests/fixtures/explain/real/README.md): the JSON names the new figures
// and the program, and the terminal shows them.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace oomdoc {
namespace {

using testing::fixture_path;
using testing::run_cli;

TEST(ExplainRealLogsCli, MemoryFractionInJsonAndOnTheTerminal) {
  const std::string log = fixture_path("explain/real/rocm_memory_fraction.log");
  auto r = run_cli({"explain", "--json", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["events"].size(), 1u);
  const auto& e = doc["events"][0];
  EXPECT_EQ(e["pytorch_limit_bytes"], 1127428915);
  EXPECT_EQ(e["pytorch_limit_text"], "1.05 GiB");
  EXPECT_EQ(e["allocated_bytes"], 1066412278);
  EXPECT_EQ(e["private_pools_bytes"], 17825792);
  EXPECT_EQ(e["cause"], "memory_fraction_limit");
  auto t = run_cli({"explain", log});
  ASSERT_EQ(t.exit_code, 0);
  EXPECT_NE(t.out.find("allowed (memory fraction) 1.05 GiB"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("Cause: the per-process memory fraction, not the card, ran out"), std::string::npos) << t.out;
}

TEST(ExplainRealLogsCli, ApplicationAndOllamaFigures) {
  auto comfy = run_cli({"explain", "--json", fixture_path("explain/real/comfyui_exception.log")});
  ASSERT_EQ(comfy.exit_code, 0) << comfy.err;
  auto c = nlohmann::json::parse(comfy.out);
  ASSERT_EQ(c["events"].size(), 1u);
  EXPECT_EQ(c["events"][0]["application"], "comfyui");
  EXPECT_EQ(c["events"][0]["repeats"], 2);
  EXPECT_EQ(c["events"][0]["fixes"][0]["id"], "comfyui_lowvram");

  auto ollama = run_cli({"explain", "--json", fixture_path("explain/real/ollama_runner_terminated.log")});
  ASSERT_EQ(ollama.exit_code, 0) << ollama.err;
  auto o = nlohmann::json::parse(ollama.out);
  ASSERT_EQ(o["events"].size(), 1u);
  EXPECT_EQ(o["events"][0]["framework"], "ollama");
  EXPECT_EQ(o["events"][0]["requested_bytes"], 838447104);
  EXPECT_EQ(o["events"][0]["buffer_backend"], "CUDA0");
}

TEST(ExplainRealLogsCli, MetalMessageIsFoundAndExitsZero) {
  auto r = run_cli({"explain", fixture_path("explain/real/metal_mlx.log")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("MLX out of memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sudo sysctl iogpu.wired_limit_mb=N"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace oomdoc
