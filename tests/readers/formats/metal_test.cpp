// Apple Metal's "Insufficient Memory" command-buffer failure (readers/formats/metal.cpp), as MLX
// and llama.cpp print it in real threads (tests/fixtures/explain/real/README.md).
#include <gtest/gtest.h>

#include "readers/log_scanner.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

ScanResult scan_fixture(const std::string& name) {
  return scan_text(testing::read_file(testing::fixture_path("explain/real/" + name)));
}

TEST(MetalFormat, MlxRaisesItAsAMetalRuntimeError) {
  ScanResult scan = scan_fixture("metal_mlx.log");
  ASSERT_EQ(scan.events.size(), 1u);
  const OomEvent& e = scan.events[0];
  EXPECT_EQ(e.format, "metal_insufficient_memory");
  EXPECT_EQ(e.framework, "mlx");
  EXPECT_EQ(e.string_field("backend"), "Metal");
  EXPECT_TRUE(e.quantities.empty());   // the message prints no figure
}

TEST(MetalFormat, LlamaCppNamesItselfOnTheNextLineAndRepeats) {
  ScanResult scan = scan_fixture("metal_llama_cpp.log");
  ASSERT_EQ(scan.events.size(), 1u);
  const OomEvent& e = scan.events[0];
  EXPECT_EQ(e.framework, "llama.cpp");
  EXPECT_EQ(e.line, 1u);
  EXPECT_EQ(e.end_line, 2u);
  EXPECT_EQ(e.repeats, 2u);
  EXPECT_EQ(e.last_repeat_line, 3u);
}

// llama.cpp may name itself on the line before (its Metal backend's "command buffer N failed",
// ggml-org/llama.cpp#7010) or after through its scheduler (koboldcpp#1371); a bare error stays Metal's.
TEST(MetalFormat, LlamaCppNamesItselfBeforeOrThroughItsScheduler) {
  const std::string error = "error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)\n";
  ScanResult before = scan_text("ggml_metal_graph_compute: command buffer 6 failed with status 5\n" + error);
  ASSERT_EQ(before.events.size(), 1u);
  EXPECT_EQ(before.events[0].framework, "llama.cpp");
  EXPECT_EQ(before.events[0].line, 2u);
  ScanResult after = scan_text(error + "llama_graph_compute: ggml_backend_sched_graph_compute_async failed with error -1\n");
  ASSERT_EQ(after.events.size(), 1u);
  EXPECT_EQ(after.events[0].framework, "llama.cpp");
  ScanResult bare = scan_text("step 3\n" + error);
  ASSERT_EQ(bare.events.size(), 1u);
  EXPECT_EQ(bare.events[0].framework, "metal");
}

TEST(MetalFormat, SwiftErrorDomainForm) {
  ScanResult scan = scan_text(
      "Fatal error: MetalExecutionError: Error Domain=MTLCommandBufferErrorDomain Code=8 \"Insufficient Memory (IOAF "
      "code 8)\" UserInfo={NSLocalizedDescription=Insufficient Memory (IOAF code 8)}\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].framework, "metal");
}

TEST(MetalFormat, ProseAboutInsufficientMemoryIsNotAnEvent) {
  EXPECT_TRUE(scan_text("Insufficient Memory errors are rare on this machine\n").events.empty());
}

}  // namespace
}  // namespace oomdoc
