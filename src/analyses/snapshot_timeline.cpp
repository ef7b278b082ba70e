// Timeline replay of one device's trace: live (requested) bytes and reserved bytes over time.
// Live: +size at `alloc`, -size at `free_completed` (free_requested only marks intent), counted
// from 0 at the first event as the reference table in snapshot-format.md §6 does; the memory
// allocated before recording (frees with no alloc in the trace, and blocks live at dump that the
// trace never allocated) is the baseline, so live(t) = baseline + delta(t).
// Reserved: +size at segment_alloc/segment_map, -size at segment_free/segment_unmap, anchored on
// the segments at dump time.
#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "analyses/snapshot_analysis.h"
#include "analyses/snapshot_replay.h"

namespace oomdoc {

namespace {

std::span<const TraceEvent> trace_of(const Snapshot& s, int device) { return s.trace(device); }

}  // namespace

double detail::seconds_since(int64_t time_us, int64_t start_us) {
  // Unsigned: callers pass time_us >= start_us, and hostile extremes must not overflow.
  return static_cast<double>(static_cast<uint64_t>(time_us) - static_cast<uint64_t>(start_us)) / 1e6;
}


std::vector<StackGroup> detail::group_live(std::span<const std::pair<StackId, uint64_t>> live,
                                           std::span<const PreRecordingAllocation> pre_recording, uint64_t at,
                                           StackLabeler& labeler, size_t top) {
  std::unordered_map<std::string, StackGroup> groups;
  auto add = [&](const std::string& key, StackId stack, uint64_t bytes) {
    StackGroup& g = groups[key];
    if (g.count == 0) {
      g.key = key;
      g.example_stack = stack;
    }
    g.bytes += bytes;
    ++g.count;
  };
  for (auto [stack, bytes] : live) add(labeler.key(stack), stack, bytes);
  static const std::string kBefore(kBeforeRecordingKey);
  for (const PreRecordingAllocation& p : pre_recording) {
    if (p.freed_at && *p.freed_at <= at) continue;  // already freed then
    add(p.stack == kNoStack ? kBefore : labeler.key(p.stack), p.stack, p.bytes);
  }
  std::vector<StackGroup> out;
  out.reserve(groups.size());
  for (auto& [key, g] : groups) out.push_back(std::move(g));
  std::sort(out.begin(), out.end(), [](const StackGroup& a, const StackGroup& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.key < b.key;
  });
  if (out.size() > top) out.resize(top);
  for (auto& g : out) g.frames = labeler.frames(g.example_stack);
  return out;
}

Timeline replay_timeline(const Snapshot& snapshot, int device, const SnapshotOptions& options) {
  using detail::seconds_since;
  Timeline t;
  const auto trace = trace_of(snapshot, device);
  t.events = trace.size();
  detail::AddressMap live;
  int64_t delta = 0, reserved = 0, peak_reserved_delta = 0;
  // What the trace alone says was held: reserved never below zero, nor below what it allocated.
  int64_t lowest_reserved_delta = 0, widest_live_over_reserved = 0;
  // A time axis needs every entry timed and the clock never going back (uPlot's x must not).
  bool time_axis = !trace.empty();
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceEvent& e = trace[i];
    if (e.has_time) t.has_time = true;
    if (time_axis && (!e.has_time || (i > 0 && e.time_us < trace[i - 1].time_us))) time_axis = false;
    if (e.action == TraceAction::kAlloc) {
      delta += live_delta(e);
      live.put(e.addr, {e.size, i, e.stack});
      if (delta > t.peak_live_delta) {
        t.peak_live_delta = delta;
        t.peak_index = i;
        if (e.has_time) t.peak_time_us = e.time_us;
      }
    } else if (e.action == TraceAction::kFreeCompleted) {
      delta += live_delta(e);
      if (!live.erase(e.addr)) t.pre_recording.push_back({e.addr, e.size, kNoStack, i});
    } else {
      reserved += reserved_delta(e);
      peak_reserved_delta = std::max(peak_reserved_delta, reserved);
      lowest_reserved_delta = std::min(lowest_reserved_delta, reserved);
    }
    widest_live_over_reserved = std::max(widest_live_over_reserved, delta - reserved);  // the baseline aside: its
    // blocks may have been allocated during the trace, by entries the ring buffer dropped
  }
  // Ghosts: blocks live at dump that the trace never allocated (or whose alloc was dropped).
  DeviceMemory memory = summarize_device(snapshot, device);
  for (const SnapshotSegment& s : snapshot.segments) {
    if (s.device != device) continue;
    for (const SnapshotBlock& b : s.blocks) {
      if (b.state != BlockState::kActiveAllocated) continue;
      if (!live.find(b.address)) t.pre_recording.push_back({b.address, b.requested_size.value_or(b.size), b.stack, {}});
    }
  }
  for (const PreRecordingAllocation& p : t.pre_recording) {
    if (p.freed_at) {
      t.unmatched_free_bytes += p.bytes;
      ++t.unmatched_frees;
    } else {
      t.ghost_bytes += p.bytes;
    }
  }
  if (time_axis) {
    t.time_axis = true;
    t.start_time_us = trace.front().time_us;
    t.duration_seconds = seconds_since(trace.back().time_us, trace.front().time_us);
    if (t.peak_time_us) t.peak_seconds = seconds_since(*t.peak_time_us, trace.front().time_us);
  }
  t.baseline_bytes = t.unmatched_free_bytes + t.ghost_bytes;
  t.live_at_peak_bytes = t.baseline_bytes + static_cast<uint64_t>(t.peak_live_delta);
  // The dump's reserved bytes less the trace's changes, but never less than the trace shows was held:
  // a file without segments (as MLX writes) has no dump figure, and 0 there would make the reserved
  // peak 0 B while 48 MiB is live.
  // With no segment anywhere (no dump figure, no segment event: MLX's files, hand-made ones) nothing
  // but the live line says what was held: the reserved line is kept at or above it, baseline
  // included (1 GiB freed that was allocated before recording was held from the start).
  const bool no_segment_figures = memory.reserved_bytes == 0 && peak_reserved_delta == 0 && lowest_reserved_delta == 0;
  const int64_t held_by_trace =
      std::max(-lowest_reserved_delta,
               widest_live_over_reserved + (no_segment_figures ? static_cast<int64_t>(t.baseline_bytes) : 0));
  t.reserved_at_start = std::max(static_cast<int64_t>(memory.reserved_bytes) - reserved, held_by_trace);
  t.peak_reserved_bytes = t.reserved_at_start + peak_reserved_delta;

  // Truncation: the allocator's own flag when present, else the signs of a full ring buffer.
  const auto& settings = snapshot.allocator_settings;
  if (settings && settings->trace_alloc_overflowed.value_or(false)) {
    t.truncated = true;
    t.truncation_reason = "the allocator reports that its trace ring buffer overflowed: the oldest events are missing";
  } else if (settings && settings->trace_alloc_max_entries && *settings->trace_alloc_max_entries > 0 &&
             trace.size() >= *settings->trace_alloc_max_entries) {
    t.truncated = true;
    t.truncation_reason = fmt::format(
        "the trace holds max_entries={} events: older events were probably dropped",
        *settings->trace_alloc_max_entries);
  } else if (trace.size() == 1) {
    t.truncated = true;
    t.truncation_reason = "the trace holds a single event: history was recorded with max_entries=1 "
                          "(the legacy default), so there is no timeline";
  }

  // Points for plotting: the trace cut into equal buckets of events; each bucket keeps its highest
  // live point, its highest reserved point (when higher than at the live one) and its OOM events
  // (in event order, each event once),
  // so the plot reaches both peaks and marks every OOM (one "best" point per bucket lost the live
  // peak whenever an OOM followed it in the bucket, and never showed the reserved peak).
  if (!trace.empty()) {
    size_t buckets = std::max<size_t>(1, options.timeline_points);
    size_t per = (trace.size() + buckets - 1) / buckets;
    int64_t base = static_cast<int64_t>(t.baseline_bytes);
    delta = 0;
    reserved = 0;
    auto point_at = [&](size_t i) {
      const TraceEvent& e = trace[i];
      TimelinePoint p;
      p.event_index = i;
      p.time_us = e.has_time ? std::optional<int64_t>(e.time_us) : std::nullopt;
      if (t.time_axis) p.seconds = seconds_since(e.time_us, *t.start_time_us);
      p.live_bytes = base + delta;
      p.reserved_bytes = t.reserved_at_start + reserved;
      p.action = e.action;
      p.size = e.size;
      p.stack = e.stack;
      return p;
    };
    std::optional<TimelinePoint> top_live, top_reserved;
    std::vector<TimelinePoint> chosen;  // this bucket's OOMs, then its two tops
    for (size_t i = 0; i < trace.size(); ++i) {
      const TraceEvent& e = trace[i];
      delta += live_delta(e);
      reserved += reserved_delta(e);
      if (!top_live || base + delta > top_live->live_bytes) top_live = point_at(i);
      if (!top_reserved || t.reserved_at_start + reserved > top_reserved->reserved_bytes) top_reserved = point_at(i);
      if (e.action == TraceAction::kOom) chosen.push_back(point_at(i));
      if ((i + 1) % per == 0 || i + 1 == trace.size()) {
        // The reserved top only when the live top does not already show that level.
        if (top_reserved->reserved_bytes > top_live->reserved_bytes) chosen.push_back(std::move(*top_reserved));
        chosen.push_back(std::move(*top_live));
        std::stable_sort(chosen.begin(), chosen.end(), [](const TimelinePoint& a, const TimelinePoint& b) {
          return a.event_index < b.event_index;
        });
        for (TimelinePoint& p : chosen) {
          if (t.points.empty() || t.points.back().event_index != p.event_index) t.points.push_back(std::move(p));
        }
        chosen.clear();
        top_live.reset();
        top_reserved.reset();
      }
    }
  }
  return t;
}

std::vector<StackGroup> live_stacks_at(const Snapshot& snapshot, int device, const Timeline& timeline,
                                       uint64_t at, StackLabeler& labeler, size_t top) {
  detail::LiveReplay replay(trace_of(snapshot, device));
  return detail::live_stacks_in(replay.at(at), timeline.pre_recording, at, labeler, top);
}

std::vector<StackGroup> detail::live_stacks_in(const AddressMap& live,
                                               std::span<const PreRecordingAllocation> pre_recording, uint64_t at,
                                               StackLabeler& labeler, size_t top) {
  std::vector<std::pair<StackId, uint64_t>> items;
  items.reserve(live.size());
  live.for_each([&](uint64_t, const detail::LiveEntry& v) { items.emplace_back(v.stack, v.size); });
  return group_live(items, pre_recording, at, labeler, top);
}

std::vector<StackGroup> live_stacks_at_dump(const Snapshot& snapshot, int device,
                                            StackLabeler& labeler, size_t top) {
  std::vector<std::pair<StackId, uint64_t>> items;
  for (const SnapshotSegment& s : snapshot.segments) {
    if (s.device != device) continue;
    for (const SnapshotBlock& b : s.blocks) {
      if (b.state == BlockState::kActiveAllocated) {
        items.emplace_back(b.stack, b.requested_size.value_or(b.size));
      }
    }
  }
  return detail::group_live(items, {}, 0, labeler, top);
}

}  // namespace oomdoc
