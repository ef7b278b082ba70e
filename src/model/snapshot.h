// A PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot), whatever layout it came in:
// the 1.13 bare list of segments, 2.0 blocks with `history`, 2.1+ dicts with `device_traces`,
// `allocator_settings`, `external_annotations` and newer trace fields. Field meanings:
// ../shared/docs/snapshot-format.md §2. Frames and stacks are interned: a stack is an id into
// one table, shared by every block and trace event that points at it (never copied).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oomdoc {

using SnapshotStringId = uint32_t;
using FrameId = uint32_t;
using StackId = uint32_t;  // 0 = no stack recorded
inline constexpr StackId kNoStack = 0;
inline constexpr SnapshotStringId kEmptyString = 0;

struct SnapshotFrame {
  SnapshotStringId filename = kEmptyString;
  SnapshotStringId name = kEmptyString;
  uint64_t line = 0;  // may be 2^64-1 (unsigned -1 from symbolization)
};

enum class BlockState : uint8_t { kActiveAllocated, kActivePendingFree, kInactive, kUnknown };

struct SnapshotBlock {
  uint64_t address = 0;  // given (2.1+) or the running sum within its segment (older files)
  uint64_t size = 0;     // rounded size
  std::optional<uint64_t> requested_size;  // stale for inactive blocks: never sum those
  BlockState state = BlockState::kUnknown;
  StackId stack = kNoStack;  // allocation stack (2.0: history[0].frames)
};

struct SnapshotSegment {
  int device = 0;
  uint64_t address = 0;
  uint64_t total_size = 0;
  uint64_t allocated_size = 0;
  uint64_t active_size = 0;
  std::optional<uint64_t> requested_size;  // absent before 2.0
  int64_t stream = 0;
  bool is_large = true;  // segment_type "large" (vs "small", allocations <= 1 MiB)
  std::pair<int64_t, int64_t> pool_id{0, 0};  // (0,0) = default pool; else a private pool
  bool is_expandable = false;
  StackId stack = kNoStack;
  std::vector<SnapshotBlock> blocks;

  bool private_pool() const { return pool_id != std::pair<int64_t, int64_t>{0, 0}; }
};

enum class TraceAction : uint8_t {
  kAlloc,
  kFreeRequested,
  kFreeCompleted,
  kSegmentAlloc,
  kSegmentFree,
  kSegmentMap,
  kSegmentUnmap,
  kSnapshot,
  kOom,
  kUserDefined,
  kAnnotate,
  kOther,
};
std::string_view trace_action_name(TraceAction action);

// One trace entry, kept to 32 bytes: a multi-GB snapshot holds tens of millions of them, and on
// a virtual machine first-touching fresh pages costs as much as decoding them. The rarely set
// fields (a non-default stream, compile_context, user_metadata) live in Snapshot::trace_extras.
struct TraceEvent {
  uint64_t addr = 0;  // for kOom: device_free (the entry has device_free instead of addr)
  uint64_t size = 0;  // alloc/free: requested bytes; segment_*: bytes; oom: the rounded request
  int64_t time_us = 0;  // valid when has_time
  StackId stack = kNoStack;
  TraceAction action = TraceAction::kOther;
  bool has_time = false;

  uint64_t device_free() const { return addr; }
};
static_assert(sizeof(TraceEvent) == 32);

// What an entry changes, in bytes: the live allocations (alloc, free_completed; a free_requested is
// intent only) and the reserved segments (segment_alloc/map, segment_free/unmap). One place for
// the replay (analyses) and the reader's bound on the running sums.
constexpr int64_t live_delta(const TraceEvent& e) {
  return e.action == TraceAction::kAlloc          ? static_cast<int64_t>(e.size)
         : e.action == TraceAction::kFreeCompleted ? -static_cast<int64_t>(e.size)
                                                   : 0;
}
constexpr int64_t reserved_delta(const TraceEvent& e) {
  switch (e.action) {
    case TraceAction::kSegmentAlloc:
    case TraceAction::kSegmentMap: return static_cast<int64_t>(e.size);
    case TraceAction::kSegmentFree:
    case TraceAction::kSegmentUnmap: return -static_cast<int64_t>(e.size);
    default: return 0;
  }
}

// The fields of a trace entry that are usually absent or zero, for the entries where they are not.
struct TraceEventExtra {
  size_t event = 0;  // index into Snapshot::trace_events
  int64_t stream = 0;
  SnapshotStringId compile_context = kEmptyString;
  SnapshotStringId user_metadata = kEmptyString;

  bool empty() const {
    return stream == 0 && compile_context == kEmptyString && user_metadata == kEmptyString;
  }
};

// Known allocator settings, parsed; every key as it was written is kept in `entries`.
struct AllocatorSettings {
  std::vector<std::pair<std::string, std::string>> entries;  // key, value as text
  std::string alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF
  std::optional<int64_t> max_split_size;
  std::optional<double> garbage_collection_threshold;
  std::optional<bool> expandable_segments;
  std::optional<bool> trace_alloc_overflowed;
  std::optional<uint64_t> trace_alloc_max_entries;
};

struct SnapshotAnnotation {
  SnapshotStringId name = kEmptyString;
  SnapshotStringId stage = kEmptyString;  // "START" / "END"
  int device = 0;
  std::optional<int64_t> time_us;
};

enum class SnapshotLayout {
  kSegmentList,  // 1.13 `_snapshot()` / `torch.cuda.memory_snapshot()`: a bare list of segments
  kHistory,      // 2.0: blocks carry `history`
  kDeviceTraces, // 2.1+: dict with segments and device_traces
  kSegmentsDict, // a dict with segments but no device_traces (hand-made or cut down)
};
std::string_view snapshot_layout_name(SnapshotLayout layout);

class Snapshot {
 public:
  SnapshotLayout layout = SnapshotLayout::kDeviceTraces;
  std::string source_format;  // "pickle protocol 4", "json"
  // Bytes found after the pickle's STOP (at least so many when read from a stream): a second
  // snapshot appended, or a damaged file. Only the first pickle is read, as Python's pickle.load does.
  uint64_t bytes_after_end = 0;
  std::vector<SnapshotSegment> segments;
  // Every device's trace in one array, each device's entries contiguous and oldest first:
  // a reader can hand over the entries it decoded while streaming without copying them.
  std::vector<TraceEvent> trace_events;
  std::vector<std::pair<size_t, size_t>> trace_ranges;  // [begin, end) per device ordinal
  std::vector<TraceEventExtra> trace_extras;  // sorted by event; only entries with any field set
  std::optional<AllocatorSettings> allocator_settings;
  std::vector<SnapshotAnnotation> annotations;

  // Interned tables (filled by the reader).
  std::vector<std::string> strings{""};  // id 0 = ""
  std::vector<SnapshotFrame> frames;
  std::vector<uint32_t> stack_offsets{0, 0};  // stack s = stack_frames[offsets[s], offsets[s+1])
  std::vector<FrameId> stack_frames;          // innermost frame first

  std::string_view str(SnapshotStringId id) const { return strings[id]; }
  std::span<const FrameId> stack(StackId id) const {
    return {stack_frames.data() + stack_offsets[id], stack_offsets[id + 1] - stack_offsets[id]};
  }
  size_t stack_count() const { return stack_offsets.size() - 1; }
  // The trace of one device (empty when there is none).
  std::span<const TraceEvent> trace(int device) const {
    if (device < 0 || static_cast<size_t>(device) >= trace_ranges.size()) return {};
    auto [begin, end] = trace_ranges[device];
    return {trace_events.data() + begin, end - begin};
  }
  size_t trace_device_count() const { return trace_ranges.size(); }
  // Stream, compile_context and user_metadata of trace_events[event] (all empty when unset).
  TraceEventExtra trace_extra(size_t event) const;
  // Devices present: any segment's device, or a non-empty trace. Sorted.
  std::vector<int> devices() const;
};

}  // namespace oomdoc
