// Internal to the snapshot analyses: the segment layout of one device at a trace event, rebuilt by
// undoing, from the dump-time segments backwards, every event after it (as MemoryViz's Allocator
// State History does). The OOM verdict and the per-segment fragmentation table both read it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>

#include "model/snapshot.h"

namespace oomdoc::detail {

struct LayoutSegment {
  uint64_t size = 0;
  // The dump-time segment at this address when the segment lived on to the dump; null for one
  // the trace freed (or unmapped) after the event, whose pool the trace does not record.
  const SnapshotSegment* at_dump = nullptr;
  int64_t stream = 0;  // at_dump's, else the stream of the trace event that freed it
};

struct Layout {
  std::map<uint64_t, LayoutSegment> segments;  // base address -> segment
  std::map<uint64_t, uint64_t> blocks;         // live block address -> rounded size
};

// The layout just after trace event `index` of `device` (index >= the trace's size: at dump).
Layout layout_at(const Snapshot& snapshot, int device, uint64_t index);

// The free gaps of one segment of a layout, in address order: fn(address, bytes) per gap.
template <typename Fn>
void for_each_gap(const Layout& layout, uint64_t base, uint64_t size, Fn&& fn) {
  uint64_t cursor = base;
  const uint64_t end = base + size;
  for (auto it = layout.blocks.lower_bound(base); it != layout.blocks.end() && it->first < end; ++it) {
    if (it->first > cursor) fn(cursor, it->first - cursor);
    cursor = std::max(cursor, it->first + it->second);
  }
  if (end > cursor) fn(cursor, end - cursor);
}

// The largest free gap over all segments of a layout.
uint64_t largest_gap(const Layout& layout);

// The segment cudaMalloc is asked for when no cached block takes a request (CUDACachingAllocator's
// get_allocation_size): 2 MiB up to 1 MiB, 20 MiB below 10 MiB, else the request in 2 MiB steps.
uint64_t new_segment_bytes(uint64_t request);

}  // namespace oomdoc::detail
