#include "process/output_watcher.h"

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace oomdoc {
namespace {

TEST(OutputWatcher, KeepsEverythingBelowTheTailSize) {
  OutputWatcher w(100);
  w.feed("line one\n");
  w.feed("line two\n");
  EXPECT_EQ(w.tail(), "line one\nline two\n");
  EXPECT_EQ(w.total_bytes(), 18u);
}

TEST(OutputWatcher, KeepsTheLastBytesFromALineStart) {
  OutputWatcher w(20);
  for (int i = 0; i < 100; ++i) w.feed("line " + std::to_string(i) + "\n");
  // The last 20 bytes are "97\nline 98\nline 99\n" minus the partial first line.
  EXPECT_EQ(w.tail(), "line 98\nline 99\n");
  EXPECT_EQ(w.total_bytes(), 790u);
}

TEST(OutputWatcher, OneHugeChunkKeepsItsEnd) {
  OutputWatcher w(10);
  w.feed(std::string(1000, 'x') + "\nabc\n");
  EXPECT_EQ(w.tail(), "abc\n");
}

TEST(ExplainChildOutput, FindsTheTorchOomLine) {
  std::string text = testing::read_file(testing::fixture_path("run/torch_oom.txt"));
  auto report = explain_child_output(text);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->headline.rfind("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", 0), 0u);
  ASSERT_EQ(report->lines.size(), 3u);
  EXPECT_EQ(report->lines[0], "the command ran out of memory:");
}

TEST(ExplainChildOutput, NothingWithoutAnOomMessage) {
  EXPECT_FALSE(explain_child_output("Traceback (most recent call last):\nValueError: bad shape\n"));
  EXPECT_FALSE(explain_child_output(""));
}

TEST(ExplainChildOutput, OtherFrameworksAndCublas) {
  auto tf = explain_child_output("ResourceExhaustedError: OOM when allocating tensor\n"
                                 "2024 W allocator: Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.97GiB\n");
  ASSERT_TRUE(tf);
  EXPECT_EQ(tf->headline, "2024 W allocator: Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.97GiB");
  auto cublas = explain_child_output("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\r\n");
  ASSERT_TRUE(cublas);
  EXPECT_EQ(cublas->headline, "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`");
}

}  // namespace
}  // namespace oomdoc
