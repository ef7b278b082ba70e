#include <gtest/gtest.h>

#include "analyses/snapshot_analysis.h"
#include "analyses/snapshot_builder.h"

namespace oomdoc {
namespace {

using testing::SnapshotBuilder;
constexpr auto kA = BlockState::kActiveAllocated;
constexpr auto kI = BlockState::kInactive;
constexpr uint64_t MiB = 1 << 20;

std::vector<OomReport> ooms(Snapshot& s, std::optional<uint64_t> total = std::nullopt) {
  SnapshotOptions options;
  options.device_total_bytes = total;
  Timeline t = replay_timeline(s, 0, options);
  StackLabeler labeler(s, 2);
  return analyze_ooms(s, 0, t, labeler, options);
}

TEST(AnalyzeOoms, ExhaustionReplayedFromTheTraceNotTheFinalSegments) {
  SnapshotBuilder b;
  StackId big = b.stack({{"/p/model.py", 10, "forward"}});
  // During the run: two 20 MiB segments full of live tensors; after the OOM the program freed
  // everything and released one segment, so the dump alone would show an idle card.
  b.segment(0, 0x10000000, {{20 * MiB, kI, 0, kNoStack}});
  b.event(TraceAction::kSegmentAlloc, 0x10000000, 20 * MiB);
  b.event(TraceAction::kAlloc, 0x10000000, 20 * MiB, big);
  b.event(TraceAction::kSegmentAlloc, 0x20000000, 20 * MiB);
  b.event(TraceAction::kAlloc, 0x20000000, 20 * MiB, big);
  b.event(TraceAction::kOom, 1 * MiB, 30 * MiB, big);  // device_free 1 MiB
  b.event(TraceAction::kFreeCompleted, 0x10000000, 20 * MiB);
  b.event(TraceAction::kFreeCompleted, 0x20000000, 20 * MiB);
  b.event(TraceAction::kSegmentFree, 0x20000000, 20 * MiB);
  auto r = ooms(b.snapshot());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].event_index, 4u);
  EXPECT_EQ(r[0].requested_bytes, 30 * MiB);
  EXPECT_EQ(r[0].device_free_bytes, 1 * MiB);
  EXPECT_EQ(r[0].live_bytes, 40 * MiB);
  EXPECT_EQ(r[0].reserved_bytes, 40 * MiB);
  EXPECT_EQ(r[0].allocated_bytes, 40 * MiB);
  EXPECT_EQ(r[0].largest_free_block_bytes, 0u);
  EXPECT_EQ(r[0].verdict, OomVerdict::kExhaustion);
  EXPECT_EQ(r[0].stack, std::vector<std::string>{"p/model.py:10 forward"});
  ASSERT_EQ(r[0].biggest_live.size(), 2u);
  EXPECT_EQ(r[0].biggest_live[0].bytes, 20 * MiB);
  ASSERT_EQ(r[0].top_stacks.size(), 1u);
  EXPECT_EQ(r[0].top_stacks[0].bytes, 40 * MiB);
  ASSERT_GE(r[0].fixes.size(), 2u);
  EXPECT_EQ(r[0].fixes[0].id, "release_references");  // dropped later when no leak is found
  EXPECT_EQ(r[0].fixes[1].id, "smaller_batch");
}

TEST(AnalyzeOoms, FragmentationWhenFreeSpaceIsScatteredAndCacheReleasesAreListed) {
  SnapshotBuilder b;
  // A 64 MiB segment with 8 MiB tensors at every other 8 MiB: 32 MiB free, largest hole 8 MiB.
  b.segment(0, 0x40000000, {{8 * MiB, kA, 8 * MiB, kNoStack}, {8 * MiB, kI, 0, kNoStack},
                            {8 * MiB, kA, 8 * MiB, kNoStack}, {8 * MiB, kI, 0, kNoStack},
                            {8 * MiB, kA, 8 * MiB, kNoStack}, {8 * MiB, kI, 0, kNoStack},
                            {8 * MiB, kA, 8 * MiB, kNoStack}, {8 * MiB, kI, 0, kNoStack}});
  b.event(TraceAction::kAlloc, 0x40000000, 8 * MiB);
  b.event(TraceAction::kSegmentFree, 0x70000000, 4 * MiB);  // a cache release before the OOM
  b.event(TraceAction::kOom, 2 * MiB, 16 * MiB);
  auto r = ooms(b.snapshot());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].reserved_bytes, 64 * MiB + 0);  // the released segment is gone after its free
  EXPECT_EQ(r[0].allocated_bytes, 32 * MiB);
  EXPECT_EQ(r[0].largest_free_block_bytes, 8 * MiB);
  EXPECT_EQ(r[0].verdict, OomVerdict::kFragmentation);
  ASSERT_EQ(r[0].releases_before.size(), 1u);
  EXPECT_EQ(r[0].releases_before[0].bytes, 4 * MiB);
  EXPECT_EQ(r[0].fixes.front().id, "expandable_segments");
  // Ghost tensors (allocated before recording) count in live bytes through the baseline ...
  EXPECT_EQ(r[0].live_bytes, 32 * MiB);
  // ... and in what is listed as live, so the stacks add up to the live bytes.
  ASSERT_EQ(r[0].top_stacks.size(), 2u);
  EXPECT_EQ(r[0].top_stacks[0].key, "<allocated before recording started>");
  EXPECT_EQ(r[0].top_stacks[0].bytes, 24 * MiB);
  EXPECT_EQ(r[0].top_stacks[0].count, 3u);
  EXPECT_EQ(r[0].top_stacks[1].key, "<no stack recorded>");
  EXPECT_EQ(r[0].top_stacks[1].bytes, 8 * MiB);
  ASSERT_EQ(r[0].biggest_live.size(), 4u);
  EXPECT_EQ(r[0].biggest_live[0].address, 0x40000000u);  // equal sizes: by address
  EXPECT_EQ(r[0].biggest_live[1].address, 0x41000000u);
  EXPECT_EQ(r[0].biggest_live[1].stack_key, "<allocated before recording started>");
}

TEST(AnalyzeOoms, OutsidePytorchNeedsTheCapacity) {
  SnapshotBuilder b;
  b.segment(0, 0x1000000, {{10 * MiB, kA, 10 * MiB, kNoStack}});
  b.event(TraceAction::kOom, 1 * MiB, 4 * MiB);
  EXPECT_EQ(ooms(b.snapshot())[0].verdict, OomVerdict::kExhaustion);
  auto r = ooms(b.snapshot(), 100 * MiB);  // 100 MiB card: 89 MiB unaccounted for
  EXPECT_EQ(r[0].verdict, OomVerdict::kOutsidePytorch);
  EXPECT_EQ(r[0].outside_pytorch_bytes, 89 * MiB);
  EXPECT_EQ(oom_verdict_name(r[0].verdict), "outside_pytorch");
}

TEST(AnalyzeOoms, ARequestLargerThanAllPytorchHeldIsNotExhaustion) {
  // 8 MiB live in a 10 MiB segment, 2 MiB free on the device, a 1 GiB request: freeing every
  // tensor would not have made room, so the device is not "full of live tensors".
  SnapshotBuilder b;
  b.segment(0, 0x1000000, {{8 * MiB, kA, 8 * MiB, kNoStack}, {2 * MiB, kI, 0, kNoStack}});
  b.event(TraceAction::kOom, 2 * MiB, 1024 * MiB);
  auto r = ooms(b.snapshot());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, OomVerdict::kTooLargeOrOutsidePytorch);
  EXPECT_EQ(oom_verdict_name(r[0].verdict), "too_large_or_outside_pytorch");
  EXPECT_EQ(r[0].explanation,
            "the 1.00 GiB request is larger than all PyTorch held (10.00 MiB reserved, 8.00 MiB of it live) plus the "
            "2.00 MiB free on the device: freeing every tensor would not have made room. Either the request is larger "
            "than the device or memory is held outside PyTorch; the snapshot does not record the device's size (pass "
            "--gpu-memory to tell)");
  EXPECT_EQ(r[0].fixes.front().id, "find_failing_shape");
  // With the capacity: a 512 MiB device cannot take the request at all ...
  auto small = ooms(b.snapshot(), 512 * MiB);
  EXPECT_EQ(small[0].verdict, OomVerdict::kRequestLargerThanDevice);
  EXPECT_EQ(oom_verdict_name(small[0].verdict), "request_larger_than_device");
  // ... a 2 GiB one could have, were 2036 MiB not held outside PyTorch.
  auto big = ooms(b.snapshot(), 2048 * MiB);
  EXPECT_EQ(big[0].verdict, OomVerdict::kOutsidePytorch);
  EXPECT_EQ(big[0].outside_pytorch_bytes, 2036 * MiB);
}

TEST(AnalyzeOoms, RoomForANewSegmentIsNotFragmentation) {
  // A full 64 MiB segment, an 8 MiB request, 100 MiB free on the device: the allocator would have
  // taken a new 20 MiB segment, so something outside the cache (a memory fraction) refused it.
  SnapshotBuilder b;
  b.segment(0, 0x40000000, {{64 * MiB, kA, 64 * MiB, kNoStack}});
  b.event(TraceAction::kOom, 100 * MiB, 8 * MiB);
  auto r = ooms(b.snapshot());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, OomVerdict::kOutsidePytorch);
  EXPECT_EQ(r[0].explanation,
            "CUDA reported 100.00 MiB free, room for the new 20.00 MiB segment the 8.00 MiB request needed, yet it "
            "failed: a limit outside the cache refused it (torch.cuda.set_per_process_memory_fraction, or memory "
            "taken outside PyTorch's allocator)");
  // The segment table says the same: nothing free in the cache to blame.
  EXPECT_EQ(analyze_fragmentation(b.snapshot(), 0, 0).meaning, FragmentationMeaning::kNoFreeMemory);
}

TEST(AnalyzeOoms, RoomForTheBytesButNotTheSegmentIsAFullDeviceNotFragmentation) {
  // A full 20 MiB segment, a 5 MiB request, 6 MiB free on the device: the request's bytes were free
  // but not the 20 MiB segment it is rounded up to, and the cache held nothing free.
  SnapshotBuilder b;
  b.segment(0, 0x40000000, {{20 * MiB, kA, 20 * MiB, kNoStack}});
  b.event(TraceAction::kOom, 6 * MiB, 5 * MiB);
  auto r = ooms(b.snapshot());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, OomVerdict::kExhaustion);
  EXPECT_EQ(r[0].explanation,
            "CUDA reported 6.00 MiB free, enough for the 5.00 MiB request's bytes but not for the 20.00 MiB segment "
            "the caching allocator rounds it up to, and only 0 B was free in PyTorch's cache: the device is full of "
            "live tensors (with expandable_segments the request would map 6.00 MiB of 2 MiB pages, which was free, "
            "but the next allocation would meet the same wall)");
  EXPECT_EQ(analyze_fragmentation(b.snapshot(), 0, 0).meaning, FragmentationMeaning::kNoFreeMemory);
  // 1 MiB less free: not even the pages.
  SnapshotBuilder c;
  c.segment(0, 0x40000000, {{20 * MiB, kA, 20 * MiB, kNoStack}});
  c.event(TraceAction::kOom, 5 * MiB, 5 * MiB);
  r = ooms(c.snapshot());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, OomVerdict::kExhaustion);
  EXPECT_EQ(r[0].explanation.find("expandable"), std::string::npos);
}

TEST(AnalyzeOoms, AFreeBlockOnAnotherStreamIsNamedNotCalledFragmented) {
  // 32 MiB free on stream 7, a 16 MiB request on stream 0, 4 MiB free on the device.
  SnapshotBuilder b;
  SnapshotSegment& other = b.segment(0, 0x40000000, {{32 * MiB, kA, 32 * MiB, kNoStack}, {32 * MiB, kI, 0, kNoStack}});
  other.stream = 7;
  TraceEvent& oom = b.event(TraceAction::kOom, 4 * MiB, 16 * MiB);
  auto r = ooms(b.snapshot());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].largest_free_block_bytes, 32 * MiB);
  EXPECT_EQ(r[0].verdict, OomVerdict::kFragmentation);
  EXPECT_EQ(r[0].explanation,
            "a free block of 32.00 MiB could hold the 16.00 MiB request, but it is on stream 7, not the request's "
            "stream 0: the allocator takes a block only from the request's own pool and stream, and the 4.00 MiB "
            "free on the device is less than the 16.00 MiB segment a new block needs");
  EXPECT_EQ(analyze_fragmentation(b.snapshot(), 0, 0).meaning, FragmentationMeaning::kFitsElsewhere);
  // With room on the device for a new segment the verdict is no longer about the cache.
  oom.addr = 40 * MiB;
  EXPECT_EQ(ooms(b.snapshot())[0].verdict, OomVerdict::kOutsidePytorch);
}

TEST(AnalyzeOoms, LiveTensorsASmallShareOfAKnownDeviceMeanMemoryOutsidePytorch) {
  // 8 MiB live of a 100 MiB device, 10 MiB reserved, 1 MiB free, a 90 MiB request: the 89 MiB held
  // outside PyTorch is less than the request (the plain outside rule does not fire), but live
  // tensors are only 8% of the device, so they are not what filled it.
  SnapshotBuilder b;
  b.segment(0, 0x1000000, {{8 * MiB, kA, 8 * MiB, kNoStack}, {2 * MiB, kI, 0, kNoStack}});
  b.event(TraceAction::kOom, 1 * MiB, 90 * MiB);
  auto r = ooms(b.snapshot(), 100 * MiB);
  EXPECT_EQ(r[0].verdict, OomVerdict::kOutsidePytorch);
  EXPECT_EQ(r[0].explanation,
            "only 8.00 MiB of the 100.00 MiB device is live in tensors (10.00 MiB reserved, 1.00 MiB free): 89.00 MiB "
            "is held outside PyTorch's allocator, which the 90.00 MiB request needed");
}

TEST(AnalyzeOoms, UndoesExpandableSegmentMapping) {
  SnapshotBuilder b;
  b.segment(0, 0x1000000, {{6 * MiB, kA, 6 * MiB, kNoStack}});
  b.event(TraceAction::kOom, 0, 8 * MiB);
  b.event(TraceAction::kSegmentMap, 0x1000000 + 4 * MiB, 2 * MiB);  // grew after the OOM
  auto r = ooms(b.snapshot());
  EXPECT_EQ(r[0].reserved_bytes, 4 * MiB);
}

}  // namespace
}  // namespace oomdoc
