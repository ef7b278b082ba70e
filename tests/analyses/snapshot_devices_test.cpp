#include <gtest/gtest.h>

#include "analyses/snapshot_analysis.h"
#include "analyses/snapshot_builder.h"

namespace oomdoc {
namespace {

using testing::SnapshotBuilder;
constexpr auto kA = BlockState::kActiveAllocated;
constexpr auto kI = BlockState::kInactive;
constexpr auto kP = BlockState::kActivePendingFree;

TEST(SummarizeDevice, SplitsReleasableFromStrandedCache) {
  SnapshotBuilder b;
  // A partly used segment (a free block stranded in it), a wholly free one, another device.
  b.segment(0, 0x1000000, {{1024, kA, 1000, kNoStack}, {4096, kI, 0, kNoStack}, {512, kP, 300, kNoStack}});
  b.segment(0, 0x2000000, {{2 << 20, kI, 7, kNoStack}});
  b.segment(1, 0x3000000, {{8192, kA, 8000, kNoStack}});
  b.snapshot().segments[1].is_expandable = true;
  b.snapshot().segments[1].pool_id = {1, 0};
  DeviceMemory m = summarize_device(b.snapshot(), 0);
  EXPECT_EQ(m.segments, 2u);
  EXPECT_EQ(m.reserved_bytes, 1024u + 4096 + 512 + (2 << 20));
  EXPECT_EQ(m.allocated_bytes, 1024u);
  EXPECT_EQ(m.active_bytes, 1536u);
  EXPECT_EQ(m.requested_bytes, 1000u);
  EXPECT_EQ(m.rounding_waste_bytes, 24u);
  EXPECT_EQ(m.inactive_bytes, 4096u + (2 << 20));
  EXPECT_EQ(m.largest_free_block_bytes, uint64_t(2 << 20));
  EXPECT_EQ(m.releasable_bytes, uint64_t(2 << 20));
  EXPECT_EQ(m.stranded_bytes, 4096u);
  EXPECT_EQ(m.pending_free_bytes, 512u);
  EXPECT_EQ(m.expandable_segments, 1u);
  EXPECT_EQ(m.private_pool_segments, 1u);
  EXPECT_EQ(summarize_device(b.snapshot(), 1).reserved_bytes, 8192u);
  EXPECT_EQ(summarize_device(b.snapshot(), 5).segments, 0u);
}

TEST(SummarizeDevice, RequestedUnknownWithoutSegmentOrBlockFigures) {
  SnapshotBuilder b;
  b.segment(0, 0x1000, {{1024, kA, 0, kNoStack}});
  b.snapshot().segments[0].requested_size.reset();
  b.snapshot().segments[0].blocks[0].requested_size.reset();
  DeviceMemory m = summarize_device(b.snapshot(), 0);
  EXPECT_FALSE(m.requested_bytes.has_value());
  EXPECT_FALSE(m.rounding_waste_bytes.has_value());
}

TEST(AllocatorSettings, ExplainsKnownKeys) {
  AllocatorSettings s;
  s.alloc_conf = "expandable_segments:True";
  s.expandable_segments = true;
  s.max_split_size = -1;
  s.garbage_collection_threshold = 0.0;
  s.trace_alloc_overflowed = true;
  auto notes = explain_allocator_settings(s);
  ASSERT_EQ(notes.size(), 5u);
  EXPECT_EQ(notes[0].value, "expandable_segments:True");
  EXPECT_EQ(notes[1].key, "expandable_segments");
  EXPECT_NE(notes[1].meaning.find("avoids most fragmentation"), std::string::npos);
  EXPECT_NE(notes[2].meaning.find("no limit"), std::string::npos);
  EXPECT_NE(notes[4].meaning.find("oldest events are lost"), std::string::npos);
}

}  // namespace
}  // namespace oomdoc
