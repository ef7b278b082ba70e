#include <gtest/gtest.h>

#include "analyses/snapshot_builder.h"
#include "analyses/snapshot_report.h"

namespace oomdoc {
namespace {

using testing::SnapshotBuilder;
constexpr auto kA = BlockState::kActiveAllocated;
constexpr auto kI = BlockState::kInactive;

TEST(CompareSnapshots, PerStackDifferencesMatchedByKey) {
  SnapshotBuilder before, after;
  StackId b_model = before.stack({{"/p/model.py", 5, "forward"}});
  StackId b_opt = before.stack({{"/p/train.py", 9, "step"}});
  before.segment(0, 0x1000, {{4096, kA, 4000, b_model}, {2048, kA, 2000, b_opt}});
  // After: the optimizer state doubled; the model stack is a different id but the same key.
  StackId a_opt = after.stack({{"/p/train.py", 9, "step"}});
  StackId a_model = after.stack({{"/p/model.py", 5, "forward"}});
  after.segment(0, 0x1000, {{4096, kA, 4000, a_model}, {4096, kA, 4000, a_opt}, {512, kI, 0, kNoStack}});
  SnapshotOptions options;
  options.stack_depth = 1;
  SnapshotComparison c = compare_snapshots(before.snapshot(), after.snapshot(), options);
  ASSERT_EQ(c.devices.size(), 1u);
  EXPECT_EQ(c.devices[0].reserved_before, 6144u);
  EXPECT_EQ(c.devices[0].reserved_after, 8704u);
  EXPECT_EQ(c.devices[0].allocated_before, 6144u);
  EXPECT_EQ(c.devices[0].allocated_after, 8192u);
  // No trace in either file: no peak, rather than the live blocks at dump passed off as one.
  EXPECT_EQ(c.devices[0].peak_live_before, std::nullopt);
  EXPECT_EQ(c.devices[0].peak_live_after, std::nullopt);
  ASSERT_EQ(c.stacks.size(), 1u);  // the model stack did not change
  EXPECT_EQ(c.stacks[0].key, "p/train.py:9 step");
  EXPECT_EQ(c.stacks[0].before_bytes, 2000);
  EXPECT_EQ(c.stacks[0].after_bytes, 4000);
  EXPECT_EQ(c.stacks[0].delta_bytes, 2000);
}

// A device only one file holds is absent (nullopt) in the other, not "0 B reserved"; a device with a
// trace has its peak (baseline + trace peak), the same figure as the single-file live_at_peak_bytes.
TEST(CompareSnapshots, DeviceAbsentFromOneFileAndPeakOnlyWithATrace) {
  SnapshotBuilder before, after;
  StackId s = before.stack({{"/p/model.py", 5, "forward"}});
  before.segment(0, 0x1000, {{4096, kA, 4000, s}});
  after.stack({{"/p/model.py", 5, "forward"}});
  after.segment(0, 0x1000, {{4096, kA, 4000, s}});
  after.segment(1, 0x9000, {{2048, kA, 1000, kNoStack}, {2048, kI, 0, kNoStack}});
  after.event(TraceAction::kAlloc, 0x9000, 1000, kNoStack, 1);
  after.event(TraceAction::kAlloc, 0x9800, 1500, kNoStack, 1);
  after.event(TraceAction::kFreeCompleted, 0x9800, 1500, kNoStack, 1);
  SnapshotComparison c = compare_snapshots(before.snapshot(), after.snapshot());
  ASSERT_EQ(c.devices.size(), 2u);
  EXPECT_EQ(c.devices[1].device, 1);
  EXPECT_EQ(c.devices[1].reserved_before, std::nullopt);
  EXPECT_EQ(c.devices[1].allocated_before, std::nullopt);
  EXPECT_EQ(c.devices[1].peak_live_before, std::nullopt);
  EXPECT_EQ(c.devices[1].reserved_after, 4096u);
  EXPECT_EQ(c.devices[1].allocated_after, 2048u);
  EXPECT_EQ(c.devices[1].peak_live_after, 2500u);
  EXPECT_EQ(c.devices[0].peak_live_after, std::nullopt);  // device 0 has no trace in either file
}

}  // namespace
}  // namespace oomdoc
