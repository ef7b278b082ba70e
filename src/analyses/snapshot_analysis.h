// Analyses of a memory snapshot, one function per question; each returns a plain struct that the
// renderers (terminal, JSON, HTML) print without computing anything. Byte figures follow
// ../shared/docs/snapshot-format.md §2.8: trace sizes are requested bytes, segment/block sizes are
// rounded; the trace replay counts from 0 at the first event (a delta), and the memory allocated
// before recording started is reported apart as the baseline.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/snapshot.h"

namespace oomdoc {

struct SnapshotOptions {
  size_t stack_depth = 2;     // user frames in a stack group's key, from the first user frame out
  size_t top = 10;            // stacks listed at the peak / at an OOM
  std::optional<uint64_t> device_total_bytes;  // GPU capacity, for the outside_pytorch verdict
  std::optional<int> device;  // only this device
  // Buckets of trace events for plotting; each keeps its highest live point, its highest reserved
  // point and its OOMs (so at most 2 points per bucket plus the OOMs).
  size_t timeline_points = 2000;
};

// ---- per-device figures from the segments (state at dump time) ----
struct DeviceMemory {
  int device = 0;
  size_t segments = 0;
  uint64_t reserved_bytes = 0;   // sum(total_size)
  uint64_t allocated_bytes = 0;  // sum(allocated_size)
  uint64_t active_bytes = 0;     // sum(active_size): allocated + pending free
  std::optional<uint64_t> requested_bytes;  // sum(requested_size); absent in 1.13 files
  uint64_t inactive_bytes = 0;   // cached free blocks
  uint64_t largest_free_block_bytes = 0;
  uint64_t releasable_bytes = 0; // whole free segments (empty_cache would return them)
  uint64_t stranded_bytes = 0;   // free blocks inside partly used segments
  uint64_t pending_free_bytes = 0;
  std::optional<uint64_t> rounding_waste_bytes;  // allocated - requested
  size_t private_pool_segments = 0;
  size_t expandable_segments = 0;
};
DeviceMemory summarize_device(const Snapshot& snapshot, int device);
// The first segment (of `device`, when given) that breaks the allocator's own arithmetic, which
// every real file keeps (../shared/data/snapshots/SOURCES.md): allocated <= active <= total_size,
// blocks that add up to total_size, allocated_size and active_size, each block where the one before
// ended. One line naming the segment and the two numbers, for a warning: figures from such a file
// (damaged or edited by hand) may be wrong. nullopt when every segment adds up.
std::optional<std::string> first_segment_inconsistency(const Snapshot& snapshot, std::optional<int> device);

// ---- stacks: labels and grouping at the first user frame ----
class StackLabeler {
 public:
  StackLabeler(const Snapshot& snapshot, size_t depth);
  // "model.py:42 forward < train.py:88 train_step"; "<no stack recorded>" for kNoStack.
  const std::string& key(StackId stack);
  // The stack for reading: its Python frames innermost first (at most max, user frames beyond it up
  // to 2 * max, then "... N more Python frames"), then its C++ frames folded into one line,
  // "[41 C++ frames: BmmBackward0, aten::bmm]".
  // Noise frames (unwinder, interpreter) are dropped.
  std::vector<std::string> frames(StackId stack, size_t max = 12) const;
  std::string frame_text(FrameId frame) const;

 private:
  const Snapshot& snapshot_;
  size_t depth_;
  std::vector<std::string> keys_;
  std::vector<bool> done_;
};
bool is_noise_frame(std::string_view filename, std::string_view name);
bool is_user_frame(std::string_view filename, std::string_view name);
bool is_python_frame(std::string_view filename);

struct StackGroup {
  std::string key;
  StackId example_stack = kNoStack;
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::vector<std::string> frames;  // of the example stack
};

// ---- timeline replay ----
struct TimelinePoint {
  uint64_t event_index = 0;
  std::optional<int64_t> time_us;
  std::optional<double> seconds;  // from the trace's first event, when the timeline has a time axis
  int64_t live_bytes = 0;      // absolute: baseline + replay delta
  int64_t reserved_bytes = 0;  // absolute, anchored on the segments at dump time
  TraceAction action = TraceAction::kOther;
  uint64_t size = 0;
  StackId stack = kNoStack;
  std::string stack_key;  // filled by analyze_snapshot (the stack's label, for hover text)
};

// Memory allocated before recording started (the baseline), as the replay finds it: a block live at
// dump that the trace never allocated (live through the whole trace), or an allocation the trace
// frees without having allocated it (live until that free). Listings of what is live at a moment
// include them, so that their bytes add up to the live figure (baseline + delta).
struct PreRecordingAllocation {
  uint64_t address = 0;
  uint64_t bytes = 0;                // requested bytes (the block's size when the file has none)
  StackId stack = kNoStack;          // the block's own stack; a free's frames do not say who allocated
  std::optional<uint64_t> freed_at;  // event index of the free; none for a block still live at dump
};
// The group key of pre-recording allocations without a stack of their own.
inline constexpr std::string_view kBeforeRecordingKey = "<allocated before recording started>";

struct Timeline {
  uint64_t events = 0;
  bool has_time = false;   // some entries carry time_us
  // Every entry carries time_us, never decreasing: plot against seconds from the first event
  // (start_time_us); otherwise the event index is the time axis.
  bool time_axis = false;
  std::optional<int64_t> start_time_us;  // with time_axis
  std::optional<double> duration_seconds;  // with time_axis: first to last event
  int64_t peak_live_delta = 0;  // max running sum from 0 at the first event (never below 0)
  std::optional<uint64_t> peak_index;  // event index of the peak (absent with no trace growth)
  std::optional<int64_t> peak_time_us;
  std::optional<double> peak_seconds;  // with time_axis
  uint64_t baseline_bytes = 0;        // allocated before recording: unmatched frees + ghosts
  uint64_t live_at_peak_bytes = 0;    // baseline + peak_live_delta: all that was live at the peak
  uint64_t unmatched_free_bytes = 0;  // freed in the trace, allocated before it
  uint64_t unmatched_frees = 0;
  uint64_t ghost_bytes = 0;           // live at dump, never allocated in the trace
  int64_t reserved_at_start = 0;
  int64_t peak_reserved_bytes = 0;
  bool truncated = false;
  std::string truncation_reason;
  std::vector<TimelinePoint> points;  // downsampled: each bucket's highest live and reserved points and OOMs
  std::vector<PreRecordingAllocation> pre_recording;  // what baseline_bytes sums, one by one
};
Timeline replay_timeline(const Snapshot& snapshot, int device, const SnapshotOptions& options);

// The allocations live at event index `at` (inclusive), grouped by stack, largest first: those the
// trace allocated and the pre-recording ones of the timeline still live then (their groups sum to
// the timeline's live bytes at `at`).
std::vector<StackGroup> live_stacks_at(const Snapshot& snapshot, int device, const Timeline& timeline,
                                       uint64_t at, StackLabeler& labeler, size_t top);
// Groups of the active_allocated blocks at dump time (no trace needed).
std::vector<StackGroup> live_stacks_at_dump(const Snapshot& snapshot, int device,
                                            StackLabeler& labeler, size_t top);

// ---- OOM events ----
enum class OomVerdict { kExhaustion, kFragmentation, kOutsidePytorch, kRequestLargerThanDevice, kTooLargeOrOutsidePytorch };
std::string_view oom_verdict_name(OomVerdict verdict);

struct LiveAllocation {
  uint64_t address = 0;
  uint64_t bytes = 0;
  std::string stack_key;
};
struct CacheRelease {
  uint64_t event_index = 0;
  TraceAction action = TraceAction::kSegmentFree;
  uint64_t bytes = 0;
};
struct OomFix {
  std::string id;     // shared with `oomdoc explain`'s fix catalogue
  std::string title;
};

struct OomReport {
  uint64_t event_index = 0;
  std::optional<int64_t> time_us;
  std::optional<double> seconds;      // from the trace's first event, when the timeline has a time axis
  uint64_t requested_bytes = 0;
  uint64_t device_free_bytes = 0;
  uint64_t live_bytes = 0;            // requested bytes live at the OOM (baseline + replay)
  uint64_t allocated_bytes = 0;       // rounded block bytes live in the replayed layout
  uint64_t reserved_bytes = 0;        // replayed from the trace, not read from the final segments
  uint64_t largest_free_block_bytes = 0;
  std::optional<uint64_t> outside_pytorch_bytes;  // needs the device capacity
  OomVerdict verdict = OomVerdict::kExhaustion;
  std::string explanation;
  std::vector<std::string> stack;     // the failing allocation's stack (noise removed)
  std::string stack_key;
  std::vector<LiveAllocation> biggest_live;
  std::vector<CacheRelease> releases_before;
  std::vector<StackGroup> top_stacks;
  std::vector<OomFix> fixes;
};
// Each OOM costs a layout replay; past the first few they repeat one another.
constexpr size_t kMaxOomsAnalysed = 20;
std::vector<OomReport> analyze_ooms(const Snapshot& snapshot, int device, const Timeline& timeline,
                                    StackLabeler& labeler, const SnapshotOptions& options);

// ---- fragmentation: each segment at the first OOM (or at dump time without one) ----
// At an OOM the layout is replayed from the trace (as for the OOM's verdict); at dump time it is the
// segments' own blocks. "Unusable" free bytes are, at an OOM, those in free blocks smaller than the
// failed request (no piece of them could take it); at dump, the free blocks of segments that still
// hold live blocks (empty_cache cannot return them, and only requests that fit a piece can use them).
struct SegmentUse {
  uint64_t address = 0;
  uint64_t size_bytes = 0;
  std::optional<bool> is_large;    // segment_type; unknown for a segment freed between the OOM and the dump
  int64_t stream = 0;
  bool private_pool = false;
  bool expandable = false;
  uint64_t allocated_bytes = 0;    // live blocks (at dump: active_allocated; pending-free blocks are neither)
  uint64_t free_bytes = 0;         // free blocks (at dump: inactive)
  uint64_t largest_free_block_bytes = 0;
  uint64_t blocks = 0;             // live and free blocks
  uint64_t free_blocks = 0;
  uint64_t unusable_free_bytes = 0;
};
enum class FragmentationMeaning {
  kNoFreeMemory,       // nothing free in the cache
  kNothingStranded,    // at dump: all free memory is in whole free segments
  kStranded,           // at dump: free memory inside partly used segments
  kFragmented,         // at an OOM: cached plus device free memory would cover the request, no block fits it
  kFitsElsewhere,      // at an OOM: a free block fits, in another pool, stream or private pool
  kTooLittleFree,      // at an OOM: cached plus device free memory is less than the request anyway
  kNewSegmentFits,     // at an OOM: the device had room for a new segment for the request: not the cache
};
std::string_view fragmentation_meaning_name(FragmentationMeaning meaning);
struct Fragmentation {
  std::optional<uint64_t> oom_event_index;  // set: the segments at that OOM (the first); else at dump
  size_t device_ooms = 0;                   // OOMs on the device (the table is at the first of them)
  std::optional<uint64_t> requested_bytes;  // the failed request (at an OOM)
  std::optional<uint64_t> device_free_bytes;  // what CUDA had free then (at an OOM)
  uint64_t free_bytes = 0;                  // all segments' free blocks
  uint64_t unusable_free_bytes = 0;
  uint64_t largest_free_block_bytes = 0;    // over all segments
  std::optional<uint64_t> segments_fitting_request;  // with a free block >= the request (at an OOM)
  bool expandable_segments = false;         // already on (a segment is expandable, or the settings say so)
  FragmentationMeaning meaning = FragmentationMeaning::kNoFreeMemory;
  std::string explanation;                  // what that means for the user, one line
  std::vector<SegmentUse> segments;         // most unusable free bytes first, then most free, then by address
};
// oom_event_index: the OOM to look at (an index into the device's trace), none for the dump.
Fragmentation analyze_fragmentation(const Snapshot& snapshot, int device, std::optional<uint64_t> oom_event_index);

// ---- growth: allocations that survive iteration after iteration ----
struct LeakCandidate {
  std::string stack_key;
  std::vector<std::string> frames;
  uint64_t bytes = 0;      // still live at the end of the trace
  uint64_t count = 0;
  uint64_t iterations = 0; // distinct completed steps that left one behind
  uint64_t first_event = 0;
  uint64_t last_event = 0;
};
struct GrowthReport {
  // "ProfilerStep annotations" or "Optimizer.step annotations"; empty when the trace marks fewer
  // than three steps, and then no leak is claimed (leaks stays empty).
  std::string iteration_source;
  uint64_t iterations = 0;     // steps marked (when iteration_source is set)
  uint64_t steps_marked = 0;   // when it is not: the most steps either kind of annotation marks
  std::vector<LeakCandidate> leaks;
};
GrowthReport analyze_growth(const Snapshot& snapshot, int device, StackLabeler& labeler,
                            const SnapshotOptions& options);

// ---- allocator settings echoed and explained ----
struct SettingNote {
  std::string key;
  std::string value;
  std::string meaning;
};
std::vector<SettingNote> explain_allocator_settings(const AllocatorSettings& settings);

}  // namespace oomdoc
