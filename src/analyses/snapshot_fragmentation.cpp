// Fragmentation, segment by segment: where the free memory of PyTorch's cache lies, and at an OOM
// whether any single free block could have taken the failed request. The caching allocator serves
// a request from one free block of the same pool and stream (or a new segment from CUDA); free
// bytes split into pieces smaller than the request cannot serve it however many there are, which
// is why "reserved but unallocated" can be large at an OOM. Expandable segments (2.1+) grow a
// segment in place instead (PyTorch's CUDA notes, the link PyTorch's own OOM message gives).
#include <algorithm>

#include <fmt/format.h>

#include "analyses/snapshot_analysis.h"
#include "analyses/snapshot_layout.h"
#include "core/text.h"
#include "core/units.h"

namespace oomdoc {

namespace {

// Where PyTorch's OOM message points for PYTORCH_CUDA_ALLOC_CONF (expandable_segments, max_split_size_mb).
constexpr std::string_view kAllocatorDocs = "https://pytorch.org/docs/stable/notes/cuda.html#environment-variables";

void add_free_block(SegmentUse& s, uint64_t bytes) {
  s.free_bytes += bytes;
  s.largest_free_block_bytes = std::max(s.largest_free_block_bytes, bytes);
  ++s.free_blocks;
  ++s.blocks;
}

void describe_segment(SegmentUse& s, const SnapshotSegment& at_dump) {
  s.is_large = at_dump.is_large;
  s.private_pool = at_dump.private_pool();
  s.expandable = at_dump.is_expandable;
}

// At dump time: the segments' own blocks.
std::vector<SegmentUse> segments_at_dump(const Snapshot& snapshot, int device) {
  std::vector<SegmentUse> out;
  for (const SnapshotSegment& seg : snapshot.segments) {
    if (seg.device != device) continue;
    SegmentUse s;
    s.address = seg.address;
    s.size_bytes = seg.total_size;
    s.stream = seg.stream;
    describe_segment(s, seg);
    for (const SnapshotBlock& b : seg.blocks) {
      if (b.state == BlockState::kInactive) {
        add_free_block(s, b.size);
      } else {
        if (b.state == BlockState::kActiveAllocated) s.allocated_bytes += b.size;
        ++s.blocks;
      }
    }
    // Free memory beside live blocks is stranded; a wholly free segment can be given back.
    if (seg.active_size != 0) s.unusable_free_bytes = s.free_bytes;
    out.push_back(s);
  }
  return out;
}

// At an OOM: the layout replayed from the trace; free blocks are the gaps between live blocks.
std::vector<SegmentUse> segments_at(const detail::Layout& layout, uint64_t request) {
  std::vector<SegmentUse> out;
  for (const auto& [base, segment] : layout.segments) {
    SegmentUse s;
    s.address = base;
    s.size_bytes = segment.size;
    s.stream = segment.stream;
    if (segment.at_dump) describe_segment(s, *segment.at_dump);
    for (auto it = layout.blocks.lower_bound(base); it != layout.blocks.end() && it->first < base + segment.size; ++it) {
      s.allocated_bytes += it->second;
      ++s.blocks;
    }
    detail::for_each_gap(layout, base, segment.size, [&](uint64_t, uint64_t bytes) {
      add_free_block(s, bytes);
      if (bytes < request) s.unusable_free_bytes += bytes;
    });
    out.push_back(s);
  }
  return out;
}

std::string explain(const Fragmentation& f) {
  const std::string free = format_bytes(f.free_bytes);
  const std::string largest = format_bytes(f.largest_free_block_bytes);
  switch (f.meaning) {
    case FragmentationMeaning::kNoFreeMemory:
      return "nothing is free in PyTorch's cache: every reserved byte holds a live block, so fragmentation is not "
             "the issue";
    case FragmentationMeaning::kNothingStranded:
      return fmt::format("the {} free in PyTorch's cache is all in wholly free segments, which empty_cache() (or "
                         "the allocator itself, before failing) gives back: no fragmentation",
                         free);
    case FragmentationMeaning::kStranded:
      return fmt::format(
          "{} of the {} free in PyTorch's cache sits beside live blocks in partly used segments: empty_cache() "
          "cannot return it, and only requests that fit one of its pieces can use it (the largest free block is "
          "{}); if an OOM then reports much reserved-but-unallocated memory, set "
          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ({})",
          format_bytes(f.unusable_free_bytes), free, largest, kAllocatorDocs);
    case FragmentationMeaning::kFragmented: {
      // As the OOM verdict counts it: the device's free memory could have held a new segment.
      const std::string had = f.device_free_bytes.value_or(0)
                                  ? fmt::format("{} free in PyTorch's cache and {} on the device", free,
                                                format_bytes(*f.device_free_bytes))
                                  : fmt::format("{} free in PyTorch's cache", free);
      if (f.expandable_segments) {
        return fmt::format(
            "{} would have covered the {} request, but the cache's pieces are at most {}, between live blocks; "
            "expandable segments are already on, so lower the peak (smaller batch) or allocate the large buffers "
            "once, early",
            had, format_bytes(*f.requested_bytes), largest);
      }
      return fmt::format(
          "{} would have covered the {} request, but no segment had a free block that large (the largest was {}): "
          "the free memory is fragmented. Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so that segments "
          "grow in place instead of needing one free block as large as the request ({})",
          had, format_bytes(*f.requested_bytes), largest, kAllocatorDocs);
    }
    case FragmentationMeaning::kFitsElsewhere:
      return fmt::format(
          "{} had a free block of {} or more, but the allocator takes a block only from the request's "
          "own pool (small or large, private pools apart) and stream: that memory was not the request's to use",
          count_noun(*f.segments_fitting_request, "segment"),
          format_bytes(*f.requested_bytes));
    case FragmentationMeaning::kNewSegmentFits:
      return fmt::format(
          "no cached block fits the {} request (the largest is {}), but CUDA had {} free, room for the new {} "
          "segment it needed: the cache's layout is not why it failed (see the OOM's verdict)",
          format_bytes(*f.requested_bytes), largest, format_bytes(*f.device_free_bytes),
          format_bytes(detail::new_segment_bytes(*f.requested_bytes)));
    case FragmentationMeaning::kTooLittleFree:
      return fmt::format(
          "only {} was free in PyTorch's cache and {} on the device for the {} request (largest free block {}): "
          "even in one piece it would not have fit, so fragmentation is not the cause",
          free, format_bytes(f.device_free_bytes.value_or(0)), format_bytes(*f.requested_bytes), largest);
  }
  return {};
}

}  // namespace

std::string_view fragmentation_meaning_name(FragmentationMeaning meaning) {
  switch (meaning) {
    case FragmentationMeaning::kNoFreeMemory: return "no_free_memory";
    case FragmentationMeaning::kNothingStranded: return "nothing_stranded";
    case FragmentationMeaning::kStranded: return "stranded";
    case FragmentationMeaning::kFragmented: return "fragmented";
    case FragmentationMeaning::kFitsElsewhere: return "fits_elsewhere";
    case FragmentationMeaning::kTooLittleFree: return "too_little_free";
    case FragmentationMeaning::kNewSegmentFits: return "new_segment_fits";
  }
  return "no_free_memory";
}

Fragmentation analyze_fragmentation(const Snapshot& snapshot, int device, std::optional<uint64_t> oom_event_index) {
  Fragmentation f;
  const auto trace = snapshot.trace(device);
  if (oom_event_index && *oom_event_index < trace.size()) {
    f.oom_event_index = oom_event_index;
    f.requested_bytes = trace[*oom_event_index].size;
    f.device_free_bytes = trace[*oom_event_index].device_free();
    f.segments = segments_at(detail::layout_at(snapshot, device, *oom_event_index), *f.requested_bytes);
  } else {
    f.segments = segments_at_dump(snapshot, device);
  }
  uint64_t fitting = 0;
  for (const SegmentUse& s : f.segments) {
    f.free_bytes += s.free_bytes;
    f.unusable_free_bytes += s.unusable_free_bytes;
    f.largest_free_block_bytes = std::max(f.largest_free_block_bytes, s.largest_free_block_bytes);
    if (f.requested_bytes && s.largest_free_block_bytes >= *f.requested_bytes) ++fitting;
    if (s.expandable) f.expandable_segments = true;
  }
  if (snapshot.allocator_settings && snapshot.allocator_settings->expandable_segments.value_or(false)) {
    f.expandable_segments = true;
  }
  std::sort(f.segments.begin(), f.segments.end(), [](const SegmentUse& a, const SegmentUse& b) {
    if (a.unusable_free_bytes != b.unusable_free_bytes) return a.unusable_free_bytes > b.unusable_free_bytes;
    if (a.free_bytes != b.free_bytes) return a.free_bytes > b.free_bytes;
    return a.address < b.address;
  });
  if (f.free_bytes == 0) {
    f.meaning = FragmentationMeaning::kNoFreeMemory;
  } else if (!f.requested_bytes) {
    f.meaning = f.unusable_free_bytes ? FragmentationMeaning::kStranded : FragmentationMeaning::kNothingStranded;
  } else {
    f.segments_fitting_request = fitting;
    if (fitting > 0) {
      f.meaning = FragmentationMeaning::kFitsElsewhere;
    } else if (*f.device_free_bytes >= detail::new_segment_bytes(*f.requested_bytes)) {  // as the OOM verdict
      f.meaning = FragmentationMeaning::kNewSegmentFits;
    } else if (f.free_bytes + *f.device_free_bytes >= *f.requested_bytes) {  // the OOM verdict's rule
      f.meaning = FragmentationMeaning::kFragmented;
    } else {
      f.meaning = FragmentationMeaning::kTooLittleFree;
    }
  }
  if (f.requested_bytes && !f.segments_fitting_request) f.segments_fitting_request = fitting;
  f.explanation = explain(f);
  return f;
}

}  // namespace oomdoc
