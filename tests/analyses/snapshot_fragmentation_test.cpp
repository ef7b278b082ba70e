#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analyses/snapshot_analysis.h"
#include "analyses/snapshot_builder.h"
#include "analyses/snapshot_report.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

using testing::SnapshotBuilder;
constexpr auto kA = BlockState::kActiveAllocated;
constexpr auto kP = BlockState::kActivePendingFree;
constexpr auto kI = BlockState::kInactive;
constexpr uint64_t MiB = 1 << 20;

TEST(Fragmentation, AtDumpFromTheSegmentsOwnBlocks) {
  SnapshotBuilder b;
  // Partly used: 2 + 6 MiB free beside live blocks (stranded); a pending-free block is neither.
  b.segment(0, 0x10000000, {{4 * MiB, kA, 4 * MiB, kNoStack}, {2 * MiB, kI, 0, kNoStack},
                            {4 * MiB, kP, 4 * MiB, kNoStack}, {6 * MiB, kI, 0, kNoStack}});
  // Wholly free: empty_cache() returns it, nothing stranded.
  b.segment(0, 0x20000000, {{20 * MiB, kI, 0, kNoStack}});
  SnapshotSegment& small = b.segment(0, 0x30000000, {{512 * 1024, kA, 512 * 1024, kNoStack},
                                                     {1536 * 1024, kI, 0, kNoStack}});
  small.is_large = false;
  small.stream = 5;
  b.segment(1, 0x40000000, {{2 * MiB, kI, 0, kNoStack}});  // another device
  Fragmentation f = analyze_fragmentation(b.snapshot(), 0, std::nullopt);
  EXPECT_FALSE(f.oom_event_index.has_value());
  EXPECT_FALSE(f.requested_bytes.has_value());
  EXPECT_FALSE(f.segments_fitting_request.has_value());
  ASSERT_EQ(f.segments.size(), 3u);
  // Most stranded first.
  const SegmentUse& first = f.segments[0];
  EXPECT_EQ(first.address, 0x10000000u);
  EXPECT_EQ(first.size_bytes, 16 * MiB);
  EXPECT_EQ(first.is_large, true);
  EXPECT_EQ(first.allocated_bytes, 4 * MiB);
  EXPECT_EQ(first.free_bytes, 8 * MiB);
  EXPECT_EQ(first.largest_free_block_bytes, 6 * MiB);
  EXPECT_EQ(first.blocks, 4u);
  EXPECT_EQ(first.free_blocks, 2u);
  EXPECT_EQ(first.unusable_free_bytes, 8 * MiB);
  EXPECT_EQ(f.segments[1].address, 0x30000000u);
  EXPECT_EQ(f.segments[1].is_large, false);
  EXPECT_EQ(f.segments[1].stream, 5);
  EXPECT_EQ(f.segments[1].unusable_free_bytes, 1536 * 1024u);
  EXPECT_EQ(f.segments[2].address, 0x20000000u);
  EXPECT_EQ(f.segments[2].free_bytes, 20 * MiB);
  EXPECT_EQ(f.segments[2].unusable_free_bytes, 0u);
  EXPECT_EQ(f.free_bytes, 8 * MiB + 20 * MiB + 1536 * 1024);
  EXPECT_EQ(f.unusable_free_bytes, 8 * MiB + 1536 * 1024);
  // The same figure as the device's stranded bytes.
  EXPECT_EQ(f.unusable_free_bytes, summarize_device(b.snapshot(), 0).stranded_bytes);
  EXPECT_EQ(f.largest_free_block_bytes, 20 * MiB);
  EXPECT_EQ(f.meaning, FragmentationMeaning::kStranded);
  EXPECT_EQ(f.explanation,
            "9.50 MiB of the 29.50 MiB free in PyTorch's cache sits beside live blocks in partly used segments: "
            "empty_cache() cannot return it, and only requests that fit one of its pieces can use it (the largest "
            "free block is 20.00 MiB); if an OOM then reports much reserved-but-unallocated memory, set "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
}

TEST(Fragmentation, NothingFreeAndNothingStranded) {
  SnapshotBuilder full;
  full.segment(0, 0x1000000, {{2 * MiB, kA, 2 * MiB, kNoStack}});
  Fragmentation f = analyze_fragmentation(full.snapshot(), 0, std::nullopt);
  EXPECT_EQ(f.meaning, FragmentationMeaning::kNoFreeMemory);
  EXPECT_EQ(fragmentation_meaning_name(f.meaning), "no_free_memory");
  SnapshotBuilder idle;
  idle.segment(0, 0x1000000, {{2 * MiB, kA, 2 * MiB, kNoStack}});
  idle.segment(0, 0x2000000, {{4 * MiB, kI, 0, kNoStack}});
  f = analyze_fragmentation(idle.snapshot(), 0, std::nullopt);
  EXPECT_EQ(f.meaning, FragmentationMeaning::kNothingStranded);
  EXPECT_EQ(f.explanation,
            "the 4.00 MiB free in PyTorch's cache is all in wholly free segments, which empty_cache() (or the "
            "allocator itself, before failing) gives back: no fragmentation");
}

// At an OOM the layout is the one replayed from the trace: a segment released after the OOM is
// back (its stream from the trace, its pool unknown), one allocated after it is gone, a block freed
// after it is live again, and holes are the gaps between live blocks.
TEST(Fragmentation, AtAnOomNoSegmentHadABlockAsLargeAsTheRequest) {
  SnapshotBuilder b;
  // Dump: 32 MiB segment, live 8 MiB at 0 and 24 MiB, a 16 MiB hole between them.
  b.segment(0, 0x10000000, {{8 * MiB, kA, 8 * MiB, kNoStack}, {16 * MiB, kI, 0, kNoStack},
                            {8 * MiB, kA, 8 * MiB, kNoStack}});
  b.segment(0, 0x20000000, {{10 * MiB, kA, 10 * MiB, kNoStack}});
  b.event(TraceAction::kOom, 1 * MiB, 12 * MiB);                    // 0
  b.event(TraceAction::kFreeCompleted, 0x10000000 + 16 * MiB, 8 * MiB);  // 1: after the OOM
  b.event(TraceAction::kFreeCompleted, 0x30000000, 3 * MiB);       // 2
  b.event(TraceAction::kSegmentFree, 0x30000000, 4 * MiB);         // 3: stream 9 (below)
  b.event(TraceAction::kSegmentAlloc, 0x20000000, 10 * MiB);       // 4
  b.event(TraceAction::kAlloc, 0x20000000, 10 * MiB);              // 5
  Snapshot& s = b.snapshot();
  s.trace_extras.push_back({3, 9, kEmptyString, kEmptyString});
  Fragmentation f = analyze_fragmentation(s, 0, 0);
  EXPECT_EQ(f.oom_event_index, 0u);
  EXPECT_EQ(f.requested_bytes, 12 * MiB);
  ASSERT_EQ(f.segments.size(), 2u);
  const SegmentUse& big = f.segments[0];
  EXPECT_EQ(big.address, 0x10000000u);
  EXPECT_EQ(big.allocated_bytes, 24 * MiB);
  EXPECT_EQ(big.free_bytes, 8 * MiB);
  EXPECT_EQ(big.largest_free_block_bytes, 8 * MiB);
  EXPECT_EQ(big.blocks, 4u);  // live, hole, live, live
  EXPECT_EQ(big.free_blocks, 1u);
  EXPECT_EQ(big.unusable_free_bytes, 8 * MiB);
  const SegmentUse& revived = f.segments[1];
  EXPECT_EQ(revived.address, 0x30000000u);
  EXPECT_EQ(revived.size_bytes, 4 * MiB);
  EXPECT_FALSE(revived.is_large.has_value());
  EXPECT_EQ(revived.stream, 9);
  EXPECT_EQ(revived.allocated_bytes, 3 * MiB);
  EXPECT_EQ(revived.free_bytes, 1 * MiB);
  EXPECT_EQ(f.segments_fitting_request, 0u);
  EXPECT_EQ(f.free_bytes, 9 * MiB);
  EXPECT_EQ(f.largest_free_block_bytes, 8 * MiB);
  // 9 MiB free is less than the 12 MiB request: not fragmentation.
  EXPECT_EQ(f.meaning, FragmentationMeaning::kTooLittleFree);
  EXPECT_EQ(f.explanation,
            "only 9.00 MiB was free in PyTorch's cache and 1.00 MiB on the device for the 12.00 MiB request (largest "
            "free block 8.00 MiB): even in one piece it would not have fit, so fragmentation is not the cause");
  EXPECT_EQ(f.device_free_bytes, 1 * MiB);
  // 3 MiB more free on the device and the same pieces would have been fragmentation, as the verdict says.
  s.trace_events[0].addr = 4 * MiB;
  Fragmentation more = analyze_fragmentation(s, 0, 0);
  EXPECT_EQ(more.meaning, FragmentationMeaning::kFragmented);
  EXPECT_EQ(more.explanation,
            "9.00 MiB free in PyTorch's cache and 4.00 MiB on the device would have covered the 12.00 MiB request, "
            "but no segment had a free block that large (the largest was 8.00 MiB): the free memory is fragmented. "
            "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so that segments grow in place instead of needing "
            "one free block as large as the request (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
  s.trace_events[0].addr = 1 * MiB;
  // The OOM's own figures come from the same layout.
  Timeline t = replay_timeline(s, 0, {});
  StackLabeler labeler(s, 2);
  auto ooms = analyze_ooms(s, 0, t, labeler, {});
  ASSERT_EQ(ooms.size(), 1u);
  EXPECT_EQ(ooms[0].largest_free_block_bytes, f.largest_free_block_bytes);
  EXPECT_EQ(ooms[0].reserved_bytes, 36 * MiB);
}

TEST(Fragmentation, AFreeBlockLargeEnoughOnAnotherStreamOrExpandableAlreadyOn) {
  SnapshotBuilder b;
  SnapshotSegment& other = b.segment(0, 0x10000000, {{2 * MiB, kA, 2 * MiB, kNoStack}, {18 * MiB, kI, 0, kNoStack}});
  other.stream = 4;
  b.event(TraceAction::kOom, 0, 16 * MiB);
  Fragmentation f = analyze_fragmentation(b.snapshot(), 0, 0);
  EXPECT_EQ(f.segments_fitting_request, 1u);
  EXPECT_EQ(f.segments[0].unusable_free_bytes, 0u);  // a piece as large as the request
  EXPECT_EQ(f.meaning, FragmentationMeaning::kFitsElsewhere);
  EXPECT_EQ(fragmentation_meaning_name(f.meaning), "fits_elsewhere");

  SnapshotBuilder e;
  SnapshotSegment& grown = e.segment(0, 0x10000000, {{4 * MiB, kA, 4 * MiB, kNoStack}, {6 * MiB, kI, 0, kNoStack},
                                                     {4 * MiB, kA, 4 * MiB, kNoStack}, {6 * MiB, kI, 0, kNoStack}});
  grown.is_expandable = true;
  e.event(TraceAction::kOom, 0, 8 * MiB);
  f = analyze_fragmentation(e.snapshot(), 0, 0);
  EXPECT_TRUE(f.expandable_segments);
  EXPECT_EQ(f.meaning, FragmentationMeaning::kFragmented);
  EXPECT_EQ(f.explanation,
            "12.00 MiB free in PyTorch's cache would have covered the 8.00 MiB request, but the cache's pieces are at "
            "most 6.00 MiB, between live blocks; expandable segments are already on, so lower the peak (smaller "
            "batch) or allocate the large buffers once, early");
}

nlohmann::json as_json(const Fragmentation& f) {
  nlohmann::json rows = nlohmann::json::array();
  for (const SegmentUse& s : f.segments) {
    rows.push_back({{"address", s.address}, {"size_bytes", s.size_bytes},
                    {"segment_type", s.is_large ? nlohmann::json(*s.is_large ? "large" : "small") : nlohmann::json()},
                    {"stream", s.stream}, {"allocated_bytes", s.allocated_bytes}, {"free_bytes", s.free_bytes},
                    {"largest_free_block_bytes", s.largest_free_block_bytes}, {"blocks", s.blocks},
                    {"free_blocks", s.free_blocks}, {"unusable_free_bytes", s.unusable_free_bytes}});
  }
  return rows;
}

// Every fixture against tools/snapshot_segments.py (plain Python: pickle.load, then loops), which
// wrote tests/fixtures/snapshot/expected_segments.json.
TEST(Fragmentation, FixturesMatchThePythonReference) {
  const nlohmann::json expected =
      nlohmann::json::parse(testing::read_file(testing::fixture_path("snapshot/expected_segments.json")));
  const std::pair<const char*, const char*> files[] = {
      {"train", "train_p4.pickle"}, {"train", "train.json"}, {"expandable_p4.pickle", "expandable_p4.pickle"},
      {"list_1_13_p2.pickle", "list_1_13_p2.pickle"}, {"history_2_0_p4.pickle", "history_2_0_p4.pickle"},
      {"fragmented_p4.pickle", "fragmented_p4.pickle"}, {"fragmented_no_time.json", "fragmented_no_time.json"}};
  for (const auto& [key, file] : files) {
    auto report = analyze_snapshot_file(testing::fixture_path(std::string("snapshot/") + file));
    ASSERT_TRUE(report.ok()) << file;
    const nlohmann::json& devices = expected.at(key);
    ASSERT_EQ(report->devices.size(), devices.size()) << file;
    for (size_t i = 0; i < devices.size(); ++i) {
      const Fragmentation& f = report->devices[i].fragmentation;
      const nlohmann::json& want = devices[i];
      EXPECT_EQ(f.oom_event_index ? nlohmann::json(*f.oom_event_index) : nlohmann::json(), want["oom_event_index"]) << file;
      EXPECT_EQ(f.requested_bytes ? nlohmann::json(*f.requested_bytes) : nlohmann::json(), want["requested_bytes"]) << file;
      EXPECT_EQ(f.free_bytes, want["free_bytes"]) << file;
      EXPECT_EQ(f.unusable_free_bytes, want["unusable_free_bytes"]) << file;
      EXPECT_EQ(f.largest_free_block_bytes, want["largest_free_block_bytes"]) << file;
      EXPECT_EQ(f.segments_fitting_request ? nlohmann::json(*f.segments_fitting_request) : nlohmann::json(),
                want["segments_fitting_request"]) << file;
      EXPECT_EQ(as_json(f), want["segments"]) << file << " device " << i;
    }
  }
}

// The generated OOM of fragmented_p4.pickle, in figures worked out by hand (tools/gen_snapshot_fixtures.py):
// 48.5 MiB free at the OOM, the largest piece 14 MiB, a 16 MiB request.
TEST(Fragmentation, TheGeneratedFragmentedOom) {
  auto report = analyze_snapshot_file(testing::fixture_path("snapshot/fragmented_p4.pickle"));
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->devices.size(), 1u);
  const DeviceReport& d = report->devices[0];
  ASSERT_EQ(d.ooms.size(), 1u);
  EXPECT_EQ(d.ooms[0].verdict, OomVerdict::kFragmentation);
  const Fragmentation& f = d.fragmentation;
  EXPECT_EQ(f.oom_event_index, 23u);
  EXPECT_EQ(f.segments_fitting_request, 0u);
  EXPECT_EQ(f.free_bytes, 48 * MiB + 512 * 1024);
  EXPECT_EQ(f.largest_free_block_bytes, 14 * MiB);
  EXPECT_EQ(d.ooms[0].largest_free_block_bytes, 14 * MiB);
  ASSERT_EQ(f.segments.size(), 4u);
  EXPECT_EQ(f.segments[0].address, 0x7F0000000000u);  // 64 MiB cut into 8 MiB holes
  EXPECT_EQ(f.segments[0].blocks, 8u);
  EXPECT_EQ(f.segments[0].free_blocks, 4u);
  EXPECT_EQ(f.segments[0].largest_free_block_bytes, 8 * MiB);
  EXPECT_EQ(f.segments[0].unusable_free_bytes, 32 * MiB);
  EXPECT_EQ(f.segments[1].stream, 7);
  EXPECT_EQ(f.segments[3].address, 0x7F0040000000u);  // released after the OOM: pool unknown
  EXPECT_FALSE(f.segments[3].is_large.has_value());
  EXPECT_EQ(f.segments[3].stream, 3);
  EXPECT_EQ(f.meaning, FragmentationMeaning::kFragmented);
  EXPECT_EQ(f.explanation,
            "48.50 MiB free in PyTorch's cache and 2.00 MiB on the device would have covered the 16.00 MiB request, "
            "but no segment had a free block that large (the largest was 14.00 MiB): the free memory is fragmented. "
            "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so that segments grow in place instead of needing "
            "one free block as large as the request (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
}

}  // namespace
}  // namespace oomdoc
