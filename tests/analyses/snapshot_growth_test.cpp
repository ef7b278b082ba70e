#include <gtest/gtest.h>

#include "analyses/snapshot_analysis.h"
#include "analyses/snapshot_builder.h"

namespace oomdoc {
namespace {

using testing::SnapshotBuilder;

TEST(AnalyzeGrowth, FindsAllocationsLeftBehindEveryStep) {
  SnapshotBuilder b;
  StackId work = b.stack({{"/p/model.py", 5, "forward"}});
  StackId leak = b.stack({{"/p/train.py", 40, "log_metrics"}});
  StackId once = b.stack({{"/p/train.py", 12, "setup"}});
  b.event(TraceAction::kAlloc, 0xf000, 999, once);  // survives, but from one iteration only
  for (int step = 0; step < 10; ++step) {
    uint64_t base = 0x100000 * (step + 1);
    b.event(TraceAction::kAlloc, base, 1000, work);
    b.event(TraceAction::kAlloc, base + 0x1000, 64, leak);
    b.event(TraceAction::kFreeCompleted, base, 1000, work);
  }
  StackLabeler labeler(b.snapshot(), 1);
  GrowthReport g = analyze_growth(b.snapshot(), 0, labeler, {});
  EXPECT_EQ(g.iteration_source, "10 equal windows of the trace");
  ASSERT_EQ(g.leaks.size(), 1u);
  EXPECT_EQ(g.leaks[0].stack_key, "p/train.py:40 log_metrics");
  EXPECT_EQ(g.leaks[0].bytes, 640u);
  EXPECT_EQ(g.leaks[0].count, 10u);
  EXPECT_EQ(g.leaks[0].iterations, 10u);
  EXPECT_EQ(g.leaks[0].first_event, 2u);
  EXPECT_EQ(g.leaks[0].last_event, 29u);
}

TEST(AnalyzeGrowth, UsesProfilerStepAnnotationsWhenPresent) {
  SnapshotBuilder b;
  StackId leak = b.stack({{"/p/train.py", 40, "log_metrics"}});
  for (int step = 0; step < 4; ++step) {
    TraceEvent& e = b.event(TraceAction::kAlloc, 0x1000 * (step + 1), 8, leak);
    e.has_time = true;
    e.time_us = 100 * step + 50;
    b.snapshot().annotations.push_back({b.str("ProfilerStep#" + std::to_string(step)), b.str("START"), 0, 100 * step});
  }
  StackLabeler labeler(b.snapshot(), 1);
  GrowthReport g = analyze_growth(b.snapshot(), 0, labeler, {});
  EXPECT_EQ(g.iteration_source, "ProfilerStep annotations");
  EXPECT_EQ(g.iterations, 4u);
  ASSERT_EQ(g.leaks.size(), 1u);
  EXPECT_EQ(g.leaks[0].iterations, 4u);
}

TEST(AnalyzeGrowth, NothingWhenEverythingIsFreed) {
  SnapshotBuilder b;
  for (int i = 0; i < 50; ++i) {
    b.event(TraceAction::kAlloc, 0x1000, 8);
    b.event(TraceAction::kFreeCompleted, 0x1000, 8);
  }
  StackLabeler labeler(b.snapshot(), 1);
  EXPECT_TRUE(analyze_growth(b.snapshot(), 0, labeler, {}).leaks.empty());
}

}  // namespace
}  // namespace oomdoc
