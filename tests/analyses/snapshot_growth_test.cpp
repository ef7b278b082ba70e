#include <gtest/gtest.h>

#include "analyses/snapshot_analysis.h"
#include "analyses/snapshot_builder.h"

namespace oomdoc {
namespace {

using testing::SnapshotBuilder;

// A timed allocation.
TraceEvent& timed(SnapshotBuilder& b, uint64_t addr, uint64_t size, StackId stack, int64_t time_us,
                  TraceAction action = TraceAction::kAlloc) {
  TraceEvent& e = b.event(action, addr, size, stack);
  e.has_time = true;
  e.time_us = time_us;
  return e;
}

void annotate(SnapshotBuilder& b, const std::string& name, const char* stage, int64_t time_us) {
  b.snapshot().annotations.push_back({b.str(name), b.str(stage), 0, time_us});
}

TEST(AnalyzeGrowth, FindsAllocationsLeftBehindByCompletedProfilerSteps) {
  SnapshotBuilder b;
  StackId work = b.stack({{"/p/model.py", 5, "forward"}});
  StackId leak = b.stack({{"/p/train.py", 40, "log_metrics"}});
  StackId once = b.stack({{"/p/train.py", 12, "setup"}});
  timed(b, 0xf000, 999, once, 1);  // before the first step: the model's setup, never growth
  for (int step = 0; step < 10; ++step) {
    annotate(b, "ProfilerStep#" + std::to_string(step), "START", 100 * step + 10);
    uint64_t base = 0x100000 * (step + 1);
    timed(b, base, 1000, work, 100 * step + 20);
    timed(b, base + 0x1000, 64, leak, 100 * step + 30);
    timed(b, base, 1000, work, 100 * step + 40, TraceAction::kFreeCompleted);
  }
  StackLabeler labeler(b.snapshot(), 1);
  GrowthReport g = analyze_growth(b.snapshot(), 0, labeler, {});
  EXPECT_EQ(g.iteration_source, "ProfilerStep annotations");
  EXPECT_EQ(g.iterations, 10u);
  ASSERT_EQ(g.leaks.size(), 1u);
  EXPECT_EQ(g.leaks[0].stack_key, "p/train.py:40 log_metrics");
  EXPECT_EQ(g.leaks[0].bytes, 640u);
  EXPECT_EQ(g.leaks[0].count, 10u);
  EXPECT_EQ(g.leaks[0].iterations, 10u);
  EXPECT_EQ(g.leaks[0].first_event, 2u);
  EXPECT_EQ(g.leaks[0].last_event, 29u);
}

// What the step the dump interrupted still holds (its activations) is not growth on its own: a
// stack needs leftovers from at least two completed steps.
TEST(AnalyzeGrowth, TheInterruptedStepAloneIsNotGrowth) {
  SnapshotBuilder b;
  StackId act = b.stack({{"/p/model.py", 5, "forward"}});
  StackId leak = b.stack({{"/p/train.py", 40, "log_metrics"}});
  for (int step = 0; step < 3; ++step) {
    annotate(b, "ProfilerStep#" + std::to_string(step), "START", 100 * step);
    timed(b, 0x1000 * (step + 1), 8, leak, 100 * step + 50);
  }
  for (int layer = 0; layer < 4; ++layer) timed(b, 0x100000 * (layer + 1), 64, act, 260 + layer);
  StackLabeler labeler(b.snapshot(), 1);
  GrowthReport g = analyze_growth(b.snapshot(), 0, labeler, {});
  EXPECT_EQ(g.iterations, 3u);
  ASSERT_EQ(g.leaks.size(), 1u);  // the activations of the last step are not a candidate
  EXPECT_EQ(g.leaks[0].stack_key, "p/train.py:40 log_metrics");
  EXPECT_EQ(g.leaks[0].iterations, 3u);
}

TEST(AnalyzeGrowth, NoLeakClaimedWithoutRealSteps) {
  // One forward pass of 32 layers: each layer's saved activations are live at the end, from the
  // same stacks, spread over the whole trace. Without step markers that is not growth.
  SnapshotBuilder b;
  StackId saved = b.stack({{"/p/transformer.py", 78, "forward"}});
  for (int layer = 0; layer < 32; ++layer) timed(b, 0x100000 * (layer + 1), 4096, saved, 10 * layer);
  annotate(b, "Optimizer.step#AdamW.step", "START", 400);
  annotate(b, "Optimizer.step#AdamW.step", "END", 410);
  StackLabeler labeler(b.snapshot(), 1);
  GrowthReport g = analyze_growth(b.snapshot(), 0, labeler, {});
  EXPECT_TRUE(g.leaks.empty());
  EXPECT_EQ(g.iteration_source, "");
  EXPECT_EQ(g.steps_marked, 1u);
}

TEST(AnalyzeGrowth, OptimizerStepsMarkStepsAndGradientsAreNotLeaks) {
  SnapshotBuilder b;
  StackId grad = b.stack({{"/p/train.py", 20, "backward"}});
  StackId leak = b.stack({{"/p/train.py", 40, "log_metrics"}});
  for (int step = 0; step < 4; ++step) {
    if (step == 0) timed(b, 0x9000, 512, grad, 5);  // gradients: allocated once, kept by design
    timed(b, 0x1000 * (step + 1), 8, leak, 100 * step + 50);
    annotate(b, "Optimizer.step#AdamW.step", "START", 100 * step + 80);
    annotate(b, "Optimizer.step#AdamW.step", "END", 100 * step + 90);
  }
  StackLabeler labeler(b.snapshot(), 1);
  GrowthReport g = analyze_growth(b.snapshot(), 0, labeler, {});
  EXPECT_EQ(g.iteration_source, "Optimizer.step annotations");
  EXPECT_EQ(g.iterations, 4u);
  ASSERT_EQ(g.leaks.size(), 1u);
  EXPECT_EQ(g.leaks[0].stack_key, "p/train.py:40 log_metrics");
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
