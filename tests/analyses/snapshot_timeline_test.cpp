#include <gtest/gtest.h>

#include "analyses/snapshot_analysis.h"
#include "analyses/snapshot_builder.h"

namespace oomdoc {
namespace {

using testing::SnapshotBuilder;
constexpr auto kA = BlockState::kActiveAllocated;
constexpr auto kI = BlockState::kInactive;

TEST(ReplayTimeline, PeakIsADeltaAndBaselineCountsPreRecordingMemory) {
  SnapshotBuilder b;
  // At dump: 0x1000 (never allocated in the trace: a ghost) and 0x3000 (allocated in the trace).
  b.segment(0, 0x1000, {{4096, kA, 4000, kNoStack}, {4096, kI, 0, kNoStack}, {8192, kA, 8000, kNoStack}});
  b.event(TraceAction::kSegmentAlloc, 0x1000, 16384);
  b.event(TraceAction::kFreeCompleted, 0x9000, 700);  // allocated before recording
  b.event(TraceAction::kAlloc, 0x2000, 3000);
  b.event(TraceAction::kAlloc, 0x3000, 8000);
  b.event(TraceAction::kFreeRequested, 0x2000, 3000);  // intent only
  b.event(TraceAction::kFreeCompleted, 0x2000, 3000);
  b.event(TraceAction::kAlloc, 0x2000, 100);
  b.event(TraceAction::kFreeCompleted, 0x2000, 100);
  Timeline t = replay_timeline(b.snapshot(), 0, {});
  EXPECT_EQ(t.events, 8u);
  // Running sum: -700, +2300, +10300 (peak, event 3), 7300, 7400, 7300.
  EXPECT_EQ(t.peak_live_delta, 10300);
  EXPECT_EQ(t.peak_index, 3u);
  EXPECT_EQ(t.unmatched_frees, 1u);
  EXPECT_EQ(t.unmatched_free_bytes, 700u);
  EXPECT_EQ(t.ghost_bytes, 4000u);
  EXPECT_EQ(t.baseline_bytes, 4700u);
  EXPECT_EQ(t.reserved_at_start, 0);
  EXPECT_EQ(t.peak_reserved_bytes, 16384);
  EXPECT_FALSE(t.truncated);
  EXPECT_FALSE(t.has_time);
  // Absolute live at the end = baseline + delta = what is live at dump (4000 + 8000).
  ASSERT_FALSE(t.points.empty());
  EXPECT_EQ(t.points.back().live_bytes, 4700 + 7300);
}

// Without any segment figure (no segments, no segment events), the reserved line stays at or
// above the live line, whose baseline counts memory freed in the trace but allocated before it.
TEST(ReplayTimeline, WithoutSegmentsReservedCoversTheBaseline) {
  SnapshotBuilder b;
  b.event(TraceAction::kFreeCompleted, 0x1000, 1 << 30);   // allocated before recording
  b.event(TraceAction::kAlloc, 0x2000, 1 << 20);
  Timeline t = replay_timeline(b.snapshot(), 0, {});
  EXPECT_EQ(t.baseline_bytes, 1u << 30);
  EXPECT_EQ(t.live_at_peak_bytes, 1u << 30);
  EXPECT_EQ(t.reserved_at_start, 1 << 30);
  EXPECT_EQ(t.peak_reserved_bytes, 1 << 30);
}

TEST(ReplayTimeline, NeverBelowZeroAndNoPeakWithoutAllocations) {
  SnapshotBuilder b;
  b.event(TraceAction::kFreeCompleted, 0x10, 500);
  b.event(TraceAction::kFreeCompleted, 0x20, 500);
  Timeline t = replay_timeline(b.snapshot(), 0, {});
  EXPECT_EQ(t.peak_live_delta, 0);
  EXPECT_FALSE(t.peak_index.has_value());
  EXPECT_EQ(t.baseline_bytes, 1000u);
}

TEST(ReplayTimeline, DetectsTruncation) {
  SnapshotBuilder one;
  one.event(TraceAction::kSnapshot, 0, 123);
  Timeline t1 = replay_timeline(one.snapshot(), 0, {});
  EXPECT_TRUE(t1.truncated);
  EXPECT_NE(t1.truncation_reason.find("max_entries=1"), std::string::npos);

  SnapshotBuilder full;
  for (int i = 0; i < 4; ++i) full.event(TraceAction::kAlloc, 0x100 * (i + 1), 10);
  full.snapshot().allocator_settings = AllocatorSettings{};
  full.snapshot().allocator_settings->trace_alloc_max_entries = 4;
  EXPECT_NE(replay_timeline(full.snapshot(), 0, {}).truncation_reason.find("max_entries=4"), std::string::npos);
  full.snapshot().allocator_settings->trace_alloc_overflowed = true;
  EXPECT_NE(replay_timeline(full.snapshot(), 0, {}).truncation_reason.find("overflowed"), std::string::npos);
}

TEST(ReplayTimeline, DownsamplesKeepingEachBucketsHighestPoint) {
  SnapshotBuilder b;
  for (int i = 0; i < 100; ++i) {
    b.event(TraceAction::kAlloc, 0x1000 + i * 0x1000, 10 + i);
    b.event(TraceAction::kFreeCompleted, 0x1000 + i * 0x1000, 10 + i);
  }
  SnapshotOptions options;
  options.timeline_points = 10;
  Timeline t = replay_timeline(b.snapshot(), 0, options);
  ASSERT_EQ(t.points.size(), 10u);
  // Bucket 0 holds events 0..19: its highest point is the alloc of 19 bytes at event 18.
  EXPECT_EQ(t.points[0].event_index, 18u);
  EXPECT_EQ(t.points[0].live_bytes, 19);
  EXPECT_EQ(t.points[0].action, TraceAction::kAlloc);
  EXPECT_EQ(t.peak_live_delta, 109);
}

// A bucket keeps its live peak, its reserved peak and its OOMs: with one point per bucket an OOM
// after the live peak replaced it (the 1 GB benchmark file's plot topped at 300,076,505,893 bytes
// of a 300,115,143,041-byte peak) and the reserved peak was never plotted.
TEST(ReplayTimeline, DownsamplingKeepsBothPeaksAndEveryOom) {
  SnapshotBuilder b;
  b.event(TraceAction::kAlloc, 0x1000, 600);          // 0: live 600, the peak
  b.event(TraceAction::kFreeCompleted, 0x1000, 600);  // 1
  b.event(TraceAction::kSegmentAlloc, 0x9000, 1000);  // 2: reserved 1000, the peak
  b.event(TraceAction::kSegmentFree, 0x9000, 1000);   // 3: cache released before ...
  b.event(TraceAction::kOom, 0, 5000);                // 4: ... the OOM
  b.event(TraceAction::kAlloc, 0x2000, 100);          // 5
  SnapshotOptions options;
  options.timeline_points = 1;  // one bucket for all six events
  Timeline t = replay_timeline(b.snapshot(), 0, options);
  ASSERT_EQ(t.points.size(), 3u);
  EXPECT_EQ(t.points[0].event_index, 0u);  // the live peak
  EXPECT_EQ(t.points[0].live_bytes, 600);
  EXPECT_EQ(t.points[0].reserved_bytes, 600);  // no segment at dump: reserved starts at what event 0 needs
  EXPECT_EQ(t.points[1].event_index, 2u);  // the reserved peak
  EXPECT_EQ(t.points[1].live_bytes, 0);
  EXPECT_EQ(t.points[1].reserved_bytes, 1600);
  EXPECT_EQ(t.points[2].event_index, 4u);  // the OOM
  EXPECT_EQ(t.points[2].action, TraceAction::kOom);
  EXPECT_EQ(t.points[2].reserved_bytes, 600);
  EXPECT_EQ(t.peak_reserved_bytes, 1600);
  EXPECT_EQ(t.peak_live_delta, 600);
  // When the live peak already shows the highest reserved level, no second point is added.
  SnapshotBuilder same;
  same.event(TraceAction::kSegmentAlloc, 0x9000, 1000);
  same.event(TraceAction::kAlloc, 0x9000, 600);
  same.event(TraceAction::kFreeCompleted, 0x9000, 600);
  Timeline one = replay_timeline(same.snapshot(), 0, options);
  ASSERT_EQ(one.points.size(), 1u);
  EXPECT_EQ(one.points[0].event_index, 1u);
}

// With time_us on every entry the timeline is plotted against seconds from the first event; the
// peak and the OOMs carry their seconds too.
TEST(ReplayTimeline, SecondsFromTheFirstEventWhenEveryEntryIsTimed) {
  SnapshotBuilder b;
  const int64_t t0 = 1'717'000'000'000'000;
  auto timed = [&](TraceAction action, uint64_t addr, uint64_t size, int64_t time_us) {
    TraceEvent& e = b.event(action, addr, size);
    e.time_us = time_us;
    e.has_time = true;
  };
  timed(TraceAction::kAlloc, 0x1000, 100, t0);
  timed(TraceAction::kAlloc, 0x2000, 200, t0 + 1'500'000);
  timed(TraceAction::kFreeCompleted, 0x1000, 100, t0 + 1'500'000);  // the same clock tick
  timed(TraceAction::kOom, 0, 1 << 30, t0 + 2'250'000);
  Snapshot& s = b.snapshot();
  Timeline t = replay_timeline(s, 0, {});
  EXPECT_TRUE(t.has_time);
  EXPECT_TRUE(t.time_axis);
  EXPECT_EQ(t.start_time_us, t0);
  EXPECT_EQ(t.duration_seconds, 2.25);
  EXPECT_EQ(t.peak_index, 1u);
  EXPECT_EQ(t.peak_seconds, 1.5);
  ASSERT_EQ(t.points.size(), 4u);
  EXPECT_EQ(t.points[0].seconds, 0.0);
  EXPECT_EQ(t.points[2].seconds, 1.5);
  EXPECT_EQ(t.points[3].seconds, 2.25);
  StackLabeler labeler(s, 2);
  auto ooms = analyze_ooms(s, 0, t, labeler, {});
  ASSERT_EQ(ooms.size(), 1u);
  EXPECT_EQ(ooms[0].seconds, 2.25);
  EXPECT_EQ(ooms[0].time_us, t0 + 2'250'000);
}

// Without time_us (before ~2.2), with it on only some entries, or with a clock that goes back, the
// event index stays the time axis: nothing has seconds.
TEST(ReplayTimeline, EventIndexWhenTimeIsMissingOrGoesBack) {
  SnapshotBuilder b;
  b.event(TraceAction::kAlloc, 0x1000, 100);
  b.event(TraceAction::kAlloc, 0x2000, 200);
  b.event(TraceAction::kOom, 0, 1 << 30);
  Timeline none = replay_timeline(b.snapshot(), 0, {});
  EXPECT_FALSE(none.has_time);
  EXPECT_FALSE(none.time_axis);
  EXPECT_FALSE(none.start_time_us.has_value());
  EXPECT_FALSE(none.duration_seconds.has_value());
  EXPECT_FALSE(none.peak_seconds.has_value());
  for (const TimelinePoint& p : none.points) EXPECT_FALSE(p.seconds.has_value());

  Snapshot& partly = b.snapshot();
  partly.trace_events[0].has_time = true;
  partly.trace_events[0].time_us = 5;
  Timeline some = replay_timeline(partly, 0, {});
  EXPECT_TRUE(some.has_time);
  EXPECT_FALSE(some.time_axis);
  EXPECT_EQ(some.points[0].time_us, 5);
  EXPECT_FALSE(some.points[0].seconds.has_value());
  StackLabeler labeler(partly, 2);
  EXPECT_FALSE(analyze_ooms(partly, 0, some, labeler, {})[0].seconds.has_value());

  Snapshot& back = b.snapshot();
  int64_t times[] = {100, 300, 200};
  for (size_t i = 0; i < 3; ++i) {
    back.trace_events[i].has_time = true;
    back.trace_events[i].time_us = times[i];
  }
  Timeline backwards = replay_timeline(back, 0, {});
  EXPECT_TRUE(backwards.has_time);
  EXPECT_FALSE(backwards.time_axis);
}

TEST(ReservedTimeline, SegmentEventsAnchoredOnTheDump) {
  SnapshotBuilder b;
  b.segment(0, 0x100000, {{2 << 20, kI, 0, kNoStack}});
  b.event(TraceAction::kSegmentAlloc, 0x900000, 4 << 20);
  b.event(TraceAction::kSegmentMap, 0x100000, 2 << 20);
  b.event(TraceAction::kSegmentFree, 0x900000, 4 << 20);
  b.event(TraceAction::kSegmentUnmap, 0x100000, 1 << 20);
  Timeline t = replay_timeline(b.snapshot(), 0, {});
  // End reserved 2 MiB; net delta +1 MiB; so 1 MiB at start and 7 MiB at the highest.
  EXPECT_EQ(t.reserved_at_start, 1 << 20);
  EXPECT_EQ(t.peak_reserved_bytes, 7 << 20);
}

// A file without segments (MLX writes only the trace) has no dump figure to anchor on: reserved
// starts where the trace needs it, never below zero nor below what is live.
TEST(ReservedTimeline, WithoutSegmentsReservedIsNeverBelowLive) {
  SnapshotBuilder b;
  b.event(TraceAction::kSegmentAlloc, 0x900000, 48 << 20);
  b.event(TraceAction::kAlloc, 0x900000, 48 << 20);
  Timeline t = replay_timeline(b.snapshot(), 0, {});
  EXPECT_EQ(t.reserved_at_start, 0);
  EXPECT_EQ(t.peak_reserved_bytes, 48 << 20);
  EXPECT_EQ(t.live_at_peak_bytes, 48u << 20);
  // Allocations without any segment event: reserved covers them.
  SnapshotBuilder a;
  a.event(TraceAction::kAlloc, 0x900000, 8 << 20);
  a.event(TraceAction::kFreeCompleted, 0x900000, 8 << 20);
  Timeline only_allocs = replay_timeline(a.snapshot(), 0, {});
  EXPECT_EQ(only_allocs.reserved_at_start, 8 << 20);
  EXPECT_EQ(only_allocs.peak_reserved_bytes, 8 << 20);
}

}  // namespace
}  // namespace oomdoc
