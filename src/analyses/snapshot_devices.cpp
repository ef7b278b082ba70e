// Per-device figures from the segments as they were at dump time (snapshot-format.md §2.2, §2.8).
#include "analyses/snapshot_analysis.h"

#include <fmt/format.h>

#include "core/saturating.h"
#include "core/units.h"

namespace oomdoc {

namespace {

// "48.00 MiB" and "64.00 MiB"; the exact bytes when the two would read alike.
std::pair<std::string, std::string> two_sizes(uint64_t a, uint64_t b) {
  if (format_bytes(a) == format_bytes(b)) return {fmt::format("{} B", a), fmt::format("{} B", b)};
  return {format_bytes(a), format_bytes(b)};
}

// What is wrong with one segment ("its blocks add up to 48.00 MiB, its total_size is 64.00 MiB"), if anything.
std::optional<std::string> segment_inconsistency(const SnapshotSegment& s) {
  auto differ = [](std::string_view what, uint64_t found, std::string_view field, uint64_t stated) {
    auto [a, b] = two_sizes(found, stated);
    return fmt::format("{} {}, its {} is {}", what, a, field, b);
  };
  auto exceeds = [](std::string_view field, uint64_t more, std::string_view other, uint64_t less) {
    auto [a, b] = two_sizes(more, less);
    return fmt::format("its {} {} is more than its {} {}", field, a, other, b);
  };
  if (s.allocated_size > s.total_size) return exceeds("allocated_size", s.allocated_size, "total_size", s.total_size);
  if (s.active_size > s.total_size) return exceeds("active_size", s.active_size, "total_size", s.total_size);
  if (s.allocated_size > s.active_size) return exceeds("allocated_size", s.allocated_size, "active_size", s.active_size);
  if (s.blocks.empty()) return std::nullopt;  // a cut-down file without blocks: nothing to add up
  uint64_t total = 0, allocated = 0, active = 0;
  bool states_known = true;
  uint64_t expected_address = s.address;
  for (const SnapshotBlock& b : s.blocks) {
    if (b.address != expected_address) {
      return fmt::format("block at 0x{:x} should start at 0x{:x}, where the one before it ends", b.address,
                         expected_address);
    }
    expected_address = b.address + b.size;
    total = saturating_add(total, b.size);
    if (b.state == BlockState::kActiveAllocated) allocated = saturating_add(allocated, b.size);
    if (b.state != BlockState::kInactive) active = saturating_add(active, b.size);
    if (b.state == BlockState::kUnknown) states_known = false;
  }
  if (total != s.total_size) return differ("its blocks add up to", total, "total_size", s.total_size);
  if (!states_known) return std::nullopt;  // a state this version does not know: allocated or not?
  if (allocated != s.allocated_size) {
    return differ("its active_allocated blocks add up to", allocated, "allocated_size", s.allocated_size);
  }
  if (active != s.active_size) return differ("its active blocks add up to", active, "active_size", s.active_size);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> first_segment_inconsistency(const Snapshot& snapshot, std::optional<int> device) {
  for (size_t i = 0; i < snapshot.segments.size(); ++i) {
    const SnapshotSegment& s = snapshot.segments[i];
    if (device && s.device != *device) continue;
    if (auto wrong = segment_inconsistency(s)) {
      return fmt::format("segments[{}] (cuda:{} at 0x{:x}): {}", i, s.device, s.address, *wrong);
    }
  }
  return std::nullopt;
}

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
