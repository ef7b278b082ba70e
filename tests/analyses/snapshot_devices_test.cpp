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

// Each rule of the allocator's arithmetic, as the warning names it; the first segment that breaks
// one (of the device asked for) is the one named.
TEST(SegmentInconsistency, NamesTheFirstSegmentThatDoesNotAddUp) {
  auto first = [](auto edit, std::optional<int> device = std::nullopt) {
    SnapshotBuilder b;
    b.segment(0, 0x1000, {{1024, kA, 1000, kNoStack}, {2048, kI, 0, kNoStack}, {512, kP, 300, kNoStack}});
    b.segment(1, 0x9000, {{4096, kA, 4096, kNoStack}});
    edit(b.snapshot().segments);
    return first_segment_inconsistency(b.snapshot(), device);
  };
  EXPECT_EQ(first([](auto&) {}), std::nullopt);
  EXPECT_EQ(first([](auto& s) { s[0].total_size = 8192; }),
            "segments[0] (cuda:0 at 0x1000): its blocks add up to 3.50 KiB, its total_size is 8.00 KiB");
  EXPECT_EQ(first([](auto& s) { s[0].allocated_size = 512; }),
            "segments[0] (cuda:0 at 0x1000): its active_allocated blocks add up to 1.00 KiB, its allocated_size is 512 B");
  EXPECT_EQ(first([](auto& s) { s[0].active_size = 1024; }),
            "segments[0] (cuda:0 at 0x1000): its active blocks add up to 1.50 KiB, its active_size is 1.00 KiB");
  EXPECT_EQ(first([](auto& s) { s[1].allocated_size = 5000; }),
            "segments[1] (cuda:1 at 0x9000): its allocated_size 4.88 KiB is more than its total_size 4.00 KiB");
  EXPECT_EQ(first([](auto& s) { s[0].allocated_size = 2048; }),
            "segments[0] (cuda:0 at 0x1000): its allocated_size 2.00 KiB is more than its active_size 1.50 KiB");
  EXPECT_EQ(first([](auto& s) { s[0].blocks[1].address += 512; }),
            "segments[0] (cuda:0 at 0x1000): block at 0x1600 should start at 0x1400, where the one before it ends");
  // Sizes that read alike are given in bytes.
  EXPECT_EQ(first([](auto& s) { s[1].total_size = 4097; }),
            "segments[1] (cuda:1 at 0x9000): its blocks add up to 4096 B, its total_size is 4097 B");
  // Only the device asked for.
  EXPECT_EQ(first([](auto& s) { s[1].total_size = 1; }, 0), std::nullopt);
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
