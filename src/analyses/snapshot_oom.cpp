// What the device looked like at each `oom` trace entry, and why the request failed.
//
// The state at the OOM is replayed from the trace, not read from the final segments: a program can
// survive an OOM (snapshot-format.md §2.8). The segment layout is rebuilt by undoing, from the
// dump-time segments backwards, every event after the OOM (as MemoryViz's Allocator State History
// does): the gaps between live blocks in each segment then give the largest free block.
//
// Verdict (the request, free device memory and the replayed cache decide):
//  - outside_pytorch: the device capacity is known and what PyTorch reserved plus what CUDA says is
//    free leaves a large part of the device unaccounted for (NCCL, cuBLAS workspaces, the CUDA
//    context, other processes);
//  - outside_pytorch also: CUDA had room for the new segment the request needed (a
//    per-process memory fraction or another limit refused it, not the cache's layout);
//  - fragmentation: cached free memory plus free device memory would cover the request, but no
//    free block of its pool and stream fits it and the device's free memory is less than a new
//    segment for it (a large enough block on another stream or pool is named as such);
//  - request_larger_than_device: with the capacity known, the request alone is larger than it;
//  - too_large_or_outside_pytorch: the request is larger than everything PyTorch held (live or
//    cached) plus what CUDA says is free, so freeing every tensor would not have made room: the
//    request is larger than the device, or memory is held outside PyTorch. Without the capacity
//    the snapshot cannot tell which; with it, and live tensors a small share of it (< 1/4), the
//    memory is outside PyTorch (outside_pytorch);
//  - exhaustion: live tensors fill the device.
#include <algorithm>

#include <fmt/format.h>

#include "analyses/fix_catalog.h"
#include "analyses/snapshot_analysis.h"
#include "analyses/snapshot_layout.h"
#include "analyses/snapshot_replay.h"
#include "core/text.h"
#include "core/units.h"

namespace oomdoc {

namespace {

// The fixes that follow from each verdict, from the catalogue `oomdoc explain` uses.
std::vector<OomFix> fixes_for(OomVerdict verdict) {
  std::vector<std::string_view> ids;
  switch (verdict) {
    case OomVerdict::kFragmentation:
      ids = {"expandable_segments", "smaller_batch"};
      break;
    case OomVerdict::kOutsidePytorch:
      ids = {"end_other_processes", "library_workspace", "nccl_buffers"};
      break;
    case OomVerdict::kExhaustion:
      ids = {"release_references", "smaller_batch", "mixed_precision", "gradient_checkpointing"};
      break;
    case OomVerdict::kRequestLargerThanDevice:
      ids = {"find_failing_shape", "smaller_input"};
      break;
    case OomVerdict::kTooLargeOrOutsidePytorch:
      ids = {"find_failing_shape", "end_other_processes", "smaller_input"};
      break;
  }
  std::vector<OomFix> fixes;
  for (std::string_view id : ids) {
    const FixInfo& info = fix_info(id);
    fixes.push_back({std::string(info.id), std::string(info.title)});
  }
  return fixes;
}

}  // namespace

std::string_view oom_verdict_name(OomVerdict verdict) {
  switch (verdict) {
    case OomVerdict::kExhaustion: return "exhaustion";
    case OomVerdict::kFragmentation: return "fragmentation";
    case OomVerdict::kOutsidePytorch: return "outside_pytorch";
    case OomVerdict::kRequestLargerThanDevice: return "request_larger_than_device";
    case OomVerdict::kTooLargeOrOutsidePytorch: return "too_large_or_outside_pytorch";
  }
  return "exhaustion";
}

std::vector<OomReport> analyze_ooms(const Snapshot& snapshot, int device, const Timeline& timeline,
                                    StackLabeler& labeler, const SnapshotOptions& options) {
  std::vector<OomReport> out;
  const auto trace = snapshot.trace(device);
  if (trace.empty()) return out;
  detail::LiveReplay replay(trace);  // one forward pass serves every OOM, in order
  int64_t delta = 0;
  uint64_t last_alloc_index = 0;
  for (size_t i = 0; i < trace.size() && out.size() < kMaxOomsAnalysed; ++i) {
    const TraceEvent& e = trace[i];
    delta += live_delta(e);
    if (e.action == TraceAction::kAlloc) last_alloc_index = i;
    if (e.action != TraceAction::kOom) continue;

    OomReport r;
    r.event_index = i;
    if (e.has_time) r.time_us = e.time_us;
    if (timeline.time_axis) r.seconds = detail::seconds_since(e.time_us, *timeline.start_time_us);
    r.requested_bytes = e.size;
    r.device_free_bytes = e.device_free();
    int64_t live = static_cast<int64_t>(timeline.baseline_bytes) + delta;
    r.live_bytes = live > 0 ? static_cast<uint64_t>(live) : 0;
    detail::Layout layout = detail::layout_at(snapshot, device, i);
    for (const auto& [base, segment] : layout.segments) r.reserved_bytes += segment.size;
    for (auto [addr, size] : layout.blocks) r.allocated_bytes += size;
    r.largest_free_block_bytes = detail::largest_gap(layout);
    uint64_t cached_free = r.reserved_bytes > r.allocated_bytes ? r.reserved_bytes - r.allocated_bytes : 0;

    if (options.device_total_bytes) {
      uint64_t accounted = r.reserved_bytes + r.device_free_bytes;
      r.outside_pytorch_bytes = *options.device_total_bytes > accounted ? *options.device_total_bytes - accounted : 0;
    }
    const uint64_t new_segment = detail::new_segment_bytes(r.requested_bytes);
    // A free block that could hold the request but on another stream: not the request's to take.
    const int64_t request_stream = snapshot.trace_extra(snapshot.trace_ranges[device].first + i).stream;
    std::optional<int64_t> other_stream_fit;
    for (const auto& [base, segment] : layout.segments) {
      detail::for_each_gap(layout, base, segment.size, [&](uint64_t, uint64_t bytes) {
        if (bytes >= r.requested_bytes && segment.stream != request_stream && !other_stream_fit) {
          other_stream_fit = segment.stream;
        }
      });
    }
    const std::optional<uint64_t> total = options.device_total_bytes;
    const uint64_t outside = r.outside_pytorch_bytes.value_or(0);
    // Everything PyTorch could have handed out had no tensor been live, plus what CUDA had free.
    const uint64_t reachable = r.reserved_bytes + r.device_free_bytes;
    if (total && r.requested_bytes > *total) {
      r.verdict = OomVerdict::kRequestLargerThanDevice;
      r.explanation = fmt::format(
          "the {} request alone is larger than the {} device: no batch size or cache setting makes it fit; "
          "check the shape that asks for it",
          format_bytes(r.requested_bytes), format_bytes(*total));
    } else if (total && outside >= r.requested_bytes && outside > *total / 10) {
      r.verdict = OomVerdict::kOutsidePytorch;
      r.explanation = fmt::format(
          "{} of the {} device is used outside PyTorch's allocator (reserved {}, free {}): more "
          "than the {} request",
          format_bytes(outside), format_bytes(*total), format_bytes(r.reserved_bytes),
          format_bytes(r.device_free_bytes), format_bytes(r.requested_bytes));
    } else if (r.device_free_bytes >= new_segment) {
      // The allocator would have taken a new segment from CUDA: its cache's layout is not the cause.
      r.verdict = OomVerdict::kOutsidePytorch;
      r.explanation = fmt::format(
          "CUDA reported {} free, room for the new {} segment the {} request needed, yet it failed: "
          "a limit outside the cache refused it (torch.cuda.set_per_process_memory_fraction, or "
          "memory taken outside PyTorch's allocator)",
          format_bytes(r.device_free_bytes), format_bytes(new_segment), format_bytes(r.requested_bytes));
    } else if (cached_free < r.requested_bytes && r.device_free_bytes >= r.requested_bytes) {
      // CUDA had the request's bytes but not the segment it is rounded up to, and the cache had
      // too little free to matter: the device is full, not fragmented.
      r.verdict = OomVerdict::kExhaustion;
      constexpr uint64_t kPage = 2ull << 20;   // expandable segments map 2 MiB pages
      const uint64_t paged = (r.requested_bytes + kPage - 1) / kPage * kPage;
      r.explanation = fmt::format(
          "CUDA reported {} free, enough for the {} request's bytes but not for the {} segment the caching "
          "allocator rounds it up to, and only {} was free in PyTorch's cache: the device is full of live "
          "tensors{}",
          format_bytes(r.device_free_bytes), format_bytes(r.requested_bytes), format_bytes(new_segment),
          format_bytes(cached_free),
          r.device_free_bytes >= paged
              ? fmt::format(" (with expandable_segments the request would map {} of 2 MiB pages, which was free, "
                            "but the next allocation would meet the same wall)",
                            format_bytes(paged))
              : std::string());
    } else if (cached_free + r.device_free_bytes >= r.requested_bytes) {
      r.verdict = OomVerdict::kFragmentation;
      if (r.largest_free_block_bytes >= r.requested_bytes) {
        // A block large enough was free, but not the request's to take (the segment table's
        // fits_elsewhere).
        const std::string where =
            other_stream_fit ? fmt::format("on stream {}, not the request's stream {}", *other_stream_fit, request_stream)
                             : std::string("in another pool (small or large, or a private pool)");
        r.explanation = fmt::format(
            "a free block of {} could hold the {} request, but it is {}: the allocator takes a block only "
            "from the request's own pool and stream, and the {} free on the device is less than the {} "
            "segment a new block needs",
            format_bytes(r.largest_free_block_bytes), format_bytes(r.requested_bytes), where,
            format_bytes(r.device_free_bytes), format_bytes(new_segment));
      } else {
        r.explanation = fmt::format(
            "{} free in PyTorch's cache plus {} free on the device would cover the {} request, but "
            "the largest free block is {}: the free memory is fragmented",
            format_bytes(cached_free), format_bytes(r.device_free_bytes), format_bytes(r.requested_bytes),
            format_bytes(r.largest_free_block_bytes));
      }
    } else if (total && (r.requested_bytes > reachable || r.live_bytes * 4 < *total)) {
      // Live tensors are not what filled the device.
      if (outside + cached_free + r.device_free_bytes >= r.requested_bytes) {
        r.verdict = OomVerdict::kOutsidePytorch;
        r.explanation = fmt::format(
            "only {} of the {} device is live in tensors ({} reserved, {} free): {} is held outside "
            "PyTorch's allocator, which the {} request needed",
            format_bytes(r.live_bytes), format_bytes(*total), format_bytes(r.reserved_bytes),
            format_bytes(r.device_free_bytes), format_bytes(outside), format_bytes(r.requested_bytes));
      } else {
        r.verdict = OomVerdict::kRequestLargerThanDevice;
        r.explanation = fmt::format(
            "the {} request is more than the {} device has besides its {} of live tensors: check the "
            "shape that asks for it",
            format_bytes(r.requested_bytes), format_bytes(*total), format_bytes(r.live_bytes));
      }
    } else if (!total && r.requested_bytes > reachable) {
      r.verdict = OomVerdict::kTooLargeOrOutsidePytorch;
      r.explanation = fmt::format(
          "the {} request is larger than all PyTorch held ({} reserved, {} of it live) plus the {} free "
          "on the device: freeing every tensor would not have made room. Either the request is larger "
          "than the device or memory is held outside PyTorch; the snapshot does not record the "
          "device's size (pass --gpu-memory to tell)",
          format_bytes(r.requested_bytes), format_bytes(r.reserved_bytes), format_bytes(r.live_bytes),
          format_bytes(r.device_free_bytes));
    } else {
      r.verdict = OomVerdict::kExhaustion;
      r.explanation = fmt::format(
          "{} live in tensors and {} reserved; only {} cached and {} free on the device for {} "
          "request: the device is full of live tensors",
          format_bytes(r.live_bytes), format_bytes(r.reserved_bytes), format_bytes(cached_free),
          format_bytes(r.device_free_bytes), with_article(format_bytes(r.requested_bytes)));
    }
    r.stack = labeler.frames(e.stack);
    r.stack_key = labeler.key(e.stack);
    // What was live at that moment: by stack, and the biggest allocations.
    const detail::AddressMap& live_map = replay.at(i);
    r.top_stacks = detail::live_stacks_in(live_map, timeline.pre_recording, i, labeler, options.top);
    std::vector<LiveAllocation> biggest;
    live_map.for_each([&](uint64_t addr, const detail::LiveEntry& v) {
      biggest.push_back({addr, v.size, labeler.key(v.stack)});
    });
    for (const PreRecordingAllocation& p : timeline.pre_recording) {
      if (p.freed_at && *p.freed_at <= i) continue;
      biggest.push_back({p.address, p.bytes, p.stack == kNoStack ? std::string(kBeforeRecordingKey) : labeler.key(p.stack)});
    }
    std::sort(biggest.begin(), biggest.end(), [](const LiveAllocation& a, const LiveAllocation& b) {
      return a.bytes != b.bytes ? a.bytes > b.bytes : a.address < b.address;
    });
    if (biggest.size() > 5) biggest.resize(5);
    r.biggest_live = std::move(biggest);

    // Cache released by the allocator while retrying, i.e. since the last allocation.
    for (size_t j = last_alloc_index; j < i; ++j) {
      const TraceEvent& x = trace[j];
      if (x.action == TraceAction::kSegmentFree || x.action == TraceAction::kSegmentUnmap) {
        r.releases_before.push_back({j, x.action, x.size});
      }
    }
    r.fixes = fixes_for(r.verdict);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace oomdoc
