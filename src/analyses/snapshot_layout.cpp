#include "analyses/snapshot_layout.h"

#include <algorithm>

namespace oomdoc::detail {

namespace {

uint64_t round_block(uint64_t requested) {
  // The allocator rounds requests to 512 bytes (kMinBlockSize); good enough to rebuild gaps.
  return std::max<uint64_t>(512, (requested + 511) / 512 * 512);
}

}  // namespace

Layout layout_at(const Snapshot& snapshot, int device, uint64_t index) {
  Layout l;
  for (const SnapshotSegment& s : snapshot.segments) {
    if (s.device != device) continue;
    l.segments[s.address] = {s.total_size, &s, s.stream};
    for (const SnapshotBlock& b : s.blocks) {
      if (b.state != BlockState::kInactive) l.blocks[b.address] = b.size;
    }
  }
  const auto trace = snapshot.trace(device);
  const size_t first_event = device >= 0 && static_cast<size_t>(device) < snapshot.trace_ranges.size()
                                 ? snapshot.trace_ranges[device].first
                                 : 0;
  // A segment the trace frees after `index` existed then; its stream is the free event's.
  auto revived = [&](size_t j, uint64_t size) {
    return LayoutSegment{size, nullptr, snapshot.trace_extra(first_event + j).stream};
  };
  for (size_t j = trace.size(); j-- > index + 1;) {
    const TraceEvent& e = trace[j];
    switch (e.action) {
      case TraceAction::kAlloc: l.blocks.erase(e.addr); break;
      case TraceAction::kFreeCompleted: l.blocks[e.addr] = round_block(e.size); break;
      case TraceAction::kSegmentAlloc: l.segments.erase(e.addr); break;
      case TraceAction::kSegmentFree: l.segments[e.addr] = revived(j, e.size); break;
      case TraceAction::kSegmentMap: {
        // Undo growth: shrink the segment that ends with this range (or drop a whole one).
        auto it = l.segments.upper_bound(e.addr);
        if (it != l.segments.begin()) {
          --it;
          if (it->first == e.addr && it->second.size <= e.size) {
            l.segments.erase(it);
          } else if (it->first + it->second.size >= e.addr + e.size && it->second.size > e.size) {
            it->second.size -= e.size;
          }
        }
        break;
      }
      case TraceAction::kSegmentUnmap: {
        // Undo a release: the range was mapped, joined to the segment it ends.
        auto it = l.segments.upper_bound(e.addr);
        if (it != l.segments.begin() && std::prev(it)->first + std::prev(it)->second.size == e.addr) {
          std::prev(it)->second.size += e.size;
        } else {
          l.segments[e.addr] = revived(j, e.size);
        }
        break;
      }
      default: break;
    }
  }
  return l;
}

uint64_t largest_gap(const Layout& layout) {
  uint64_t best = 0;
  for (const auto& [base, segment] : layout.segments) {
    for_each_gap(layout, base, segment.size, [&](uint64_t, uint64_t bytes) { best = std::max(best, bytes); });
  }
  return best;
}

uint64_t new_segment_bytes(uint64_t request) {
  constexpr uint64_t kMiB = 1ull << 20;
  if (request <= kMiB) return 2 * kMiB;          // kSmallBuffer
  if (request < 10 * kMiB) return 20 * kMiB;     // kLargeBuffer below kMinLargeAlloc
  return (request + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);  // kRoundLarge
}

}  // namespace oomdoc::detail
