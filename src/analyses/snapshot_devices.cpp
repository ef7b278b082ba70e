// Per-device figures from the segments as they were at dump time (snapshot-format.md §2.2, §2.8).
#include "analyses/snapshot_analysis.h"

namespace oomdoc {

DeviceMemory summarize_device(const Snapshot& snapshot, int device) {
  DeviceMemory m;
  m.device = device;
  uint64_t requested = 0;
  bool requested_known = true;
  for (const SnapshotSegment& s : snapshot.segments) {
    if (s.device != device) continue;
    ++m.segments;
    m.reserved_bytes += s.total_size;
    m.allocated_bytes += s.allocated_size;
    m.active_bytes += s.active_size;
    if (s.requested_size) {
      requested += *s.requested_size;
    } else {
      // 1.13: no segment figure; the blocks' requested sizes (from history) when all are known.
      for (const SnapshotBlock& b : s.blocks) {
        if (b.state != BlockState::kActiveAllocated) continue;
        if (b.requested_size) {
          requested += *b.requested_size;
        } else {
          requested_known = false;
        }
      }
    }
    if (s.private_pool()) ++m.private_pool_segments;
    if (s.is_expandable) ++m.expandable_segments;
    uint64_t segment_inactive = 0;
    for (const SnapshotBlock& b : s.blocks) {
      if (b.state == BlockState::kInactive) {
        segment_inactive += b.size;
        if (b.size > m.largest_free_block_bytes) m.largest_free_block_bytes = b.size;
      } else if (b.state == BlockState::kActivePendingFree) {
        m.pending_free_bytes += b.size;
      }
    }
    m.inactive_bytes += segment_inactive;
    if (s.active_size == 0) {
      m.releasable_bytes += s.total_size;
    } else {
      m.stranded_bytes += segment_inactive;
    }
  }
  if (requested_known) {
    m.requested_bytes = requested;
    if (m.allocated_bytes >= requested) m.rounding_waste_bytes = m.allocated_bytes - requested;
  }
  return m;
}

}  // namespace oomdoc
