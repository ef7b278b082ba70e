#include "process/output_watcher.h"

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace oomdoc {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

TEST(OutputWatcher, FindsTheOomInStderrFedInOddChunks) {
  const std::string log = testing::read_file(testing::fixture_path("run/torch_oom.txt"));
  const std::string progress = "step 1 loss 2.30\nstep 2 loss 2.21\nstep 3 lo";
  OutputWatcher w;
  // Interleave the streams at points that are not line ends, like two pipes read as data arrives.
  for (size_t i = 0, j = 0; i < log.size() || j < progress.size(); i += 7, j += 5) {
    if (j < progress.size()) w.feed(std::string_view(progress).substr(j, 5), false);
    if (i < log.size()) w.feed(std::string_view(log).substr(i, 7), true);
  }
  EXPECT_EQ(w.total_bytes(), log.size() + progress.size());
  ExplainReport report = w.finish();
  ASSERT_EQ(report.error_count(), 1u);
  const ExplainedEvent& e = report.events[0];
  EXPECT_EQ(e.input, "stderr");
  EXPECT_EQ(e.event.line, 5u);
  EXPECT_EQ(e.event.bytes("requested"), 2 * kGiB);
  EXPECT_FALSE(e.diagnosis.cause.empty());
  EXPECT_FALSE(e.diagnosis.fixes.empty());
}

TEST(OutputWatcher, NothingWithoutAnOomMessage) {
  OutputWatcher w;
  w.feed("Traceback (most recent call last):\nValueError: bad shape\n", true);
  w.feed("out of memory is just a phrase here\n", false);
  EXPECT_EQ(w.finish().error_count(), 0u);
}

TEST(OutputWatcher, NoOutputAtAll) {
  OutputWatcher w;
  ExplainReport report = w.finish();
  EXPECT_EQ(report.error_count(), 0u);
  EXPECT_TRUE(report.inputs.empty());
}

}  // namespace
}  // namespace oomdoc
