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
  EXPECT_EQ(c.devices[0].reserved_before, 6144);
  EXPECT_EQ(c.devices[0].reserved_after, 8704);
  EXPECT_EQ(c.devices[0].allocated_after - c.devices[0].allocated_before, 2048);
  EXPECT_EQ(c.devices[0].peak_live_before, 6000);  // no trace: all live memory is baseline
  EXPECT_EQ(c.devices[0].peak_live_after, 8000);
  ASSERT_EQ(c.stacks.size(), 1u);  // the model stack did not change
  EXPECT_EQ(c.stacks[0].key, "p/train.py:9 step");
  EXPECT_EQ(c.stacks[0].before_bytes, 2000);
  EXPECT_EQ(c.stacks[0].after_bytes, 4000);
  EXPECT_EQ(c.stacks[0].delta_bytes, 2000);
}

}  // namespace
}  // namespace oomdoc
