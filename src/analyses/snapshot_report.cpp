#include "analyses/snapshot_report.h"

#include <algorithm>
#include <functional>
#include <future>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/text.h"
#include "core/units.h"

namespace oomdoc {

namespace {

std::string headline(const SnapshotReport& r) {
  // Every device that ran out of memory is named: each has its own verdict.
  std::string ooms;
  for (const DeviceReport& d : r.devices) {
    if (d.ooms.empty()) continue;
    const OomReport& o = d.ooms.front();
    if (!ooms.empty()) ooms += "; ";
    ooms += fmt::format("OOM on cuda:{} at trace event {}: {} ({} requested, {} free on the device, "
                        "{} reserved, largest free block {}){}",
                        d.memory.device, o.event_index, oom_verdict_name(o.verdict),
                        format_bytes(o.requested_bytes), format_bytes(o.device_free_bytes),
                        format_bytes(o.reserved_bytes), format_bytes(o.largest_free_block_bytes),
                        d.oom_count > 1 ? " and " + count_noun(d.oom_count - 1, "more OOM event") : "");
  }
  if (!ooms.empty()) return ooms;
  for (const DeviceReport& d : r.devices) {
    if (d.growth.leaks.empty()) continue;
    const LeakCandidate& l = d.growth.leaks.front();
    return fmt::format("No OOM recorded. Possible leak on cuda:{}: {} keeps {} in {} allocations "
                       "left behind by {} of {} steps ({})",
                       d.memory.device, l.stack_key, format_bytes(l.bytes), l.count, l.iterations,
                       d.growth.iterations, d.growth.iteration_source);
  }
  const DeviceReport* top = nullptr;
  for (const DeviceReport& d : r.devices) {
    if (!top || d.memory.reserved_bytes > top->memory.reserved_bytes) top = &d;
  }
  if (!top) return "The snapshot holds no segments and no trace events";
  if (top->timeline.events == 0 || top->timeline.truncated) {
    return fmt::format("No OOM recorded. cuda:{} holds {} reserved, {} allocated at dump time{}",
                       top->memory.device, format_bytes(top->memory.reserved_bytes),
                       format_bytes(top->memory.allocated_bytes),
                       top->timeline.events == 0 ? " (no trace recorded)" : " (trace truncated)");
  }
  return fmt::format("No OOM recorded. Peak live memory on cuda:{}: {} ({} before recording + {} "
                     "at the trace peak); {} reserved at dump time",
                     top->memory.device,
                     format_bytes(top->timeline.live_at_peak_bytes),
                     format_bytes(top->timeline.baseline_bytes),
                     format_bytes(uint64_t(top->timeline.peak_live_delta)),
                     format_bytes(top->memory.reserved_bytes));
}

}  // namespace

namespace {

// One device's analyses. The replay chain (timeline, stacks at the peak, OOMs) and the growth scan
// each read the whole trace: they run side by side, each with its own labeler (it caches).
DeviceReport analyze_device(const Snapshot& snapshot, int device, const SnapshotOptions& options) {
  DeviceReport d;
  auto growth = std::async(std::launch::async, [&] {
    StackLabeler labeler(snapshot, options.stack_depth);
    return analyze_growth(snapshot, device, labeler, options);
  });
  StackLabeler labeler(snapshot, options.stack_depth);
  d.memory = summarize_device(snapshot, device);
  d.timeline = replay_timeline(snapshot, device, options);
  for (TimelinePoint& p : d.timeline.points) p.stack_key = labeler.key(p.stack);
  if (d.timeline.peak_index) {
    d.top_stacks_when = "peak";
    d.top_stacks = live_stacks_at(snapshot, device, d.timeline, *d.timeline.peak_index, labeler, options.top);
  } else {
    d.top_stacks_when = "dump";
    d.top_stacks = live_stacks_at_dump(snapshot, device, labeler, options.top);
  }
  d.ooms = analyze_ooms(snapshot, device, d.timeline, labeler, options);
  d.fragmentation = analyze_fragmentation(
      snapshot, device, d.ooms.empty() ? std::nullopt : std::optional<uint64_t>(d.ooms.front().event_index));
  const auto trace = snapshot.trace(device);
  d.oom_count = static_cast<size_t>(std::count_if(trace.begin(), trace.end(), [](const TraceEvent& e) {
    return e.action == TraceAction::kOom;
  }));
  d.fragmentation.device_ooms = d.oom_count;
  d.growth = growth.get();
  if (d.growth.leaks.empty()) {  // only suggest dropping kept tensors when some were found
    for (OomReport& o : d.ooms) {
      std::erase_if(o.fixes, [](const OomFix& f) { return f.id == "release_references"; });
    }
  }
  return d;
}

}  // namespace

SnapshotReport analyze_snapshot(const Snapshot& snapshot, const SnapshotOptions& options) {
  SnapshotReport r;
  r.source_format = snapshot.source_format;
  r.layout = snapshot.layout;
  if (snapshot.allocator_settings) r.allocator_settings = explain_allocator_settings(*snapshot.allocator_settings);
  r.annotations = snapshot.annotations.size();
  r.distinct_stacks = snapshot.stack_count() - 1;
  r.distinct_frames = snapshot.frames.size();
  // Devices are independent: analysed in parallel, reported in order.
  std::vector<std::future<DeviceReport>> devices;
  for (int device : snapshot.devices()) {
    if (options.device && *options.device != device) continue;
    devices.push_back(std::async(std::launch::async, analyze_device, std::cref(snapshot), device,
                                 std::cref(options)));
  }
  for (auto& d : devices) r.devices.push_back(d.get());
  r.verdict = headline(r);
  if (snapshot.bytes_after_end > 0) {
    r.warnings.push_back(fmt::format("data follows the end of the pickle (STOP), {} bytes seen and not read: a second "
                                     "snapshot appended to this one, or a damaged file; only the first is analysed",
                                     snapshot.bytes_after_end));
  }
  if (auto wrong = first_segment_inconsistency(snapshot, options.device)) {
    r.warnings.push_back("the snapshot does not add up, so its figures may be wrong: " + *wrong);
  }
  return r;
}

Status check_device_present(const Snapshot& snapshot, const SnapshotOptions& options, const std::string& name) {
  if (!options.device) return Ok{};
  const std::vector<int> devices = snapshot.devices();
  if (std::find(devices.begin(), devices.end(), *options.device) != devices.end()) return Ok{};
  return make_error(fmt::format("{}: no device {} (devices in the file: {})", name, *options.device,
                                devices.empty() ? "none" : fmt::format("{}", fmt::join(devices, ", "))));
}

Status check_device_capacity(const SnapshotReport& report, uint64_t capacity_bytes, const std::string& name) {
  for (const DeviceReport& d : report.devices) {
    const uint64_t peak = d.timeline.events ? uint64_t(std::max<int64_t>(0, d.timeline.peak_reserved_bytes)) : 0;
    const uint64_t reserved = std::max(d.memory.reserved_bytes, peak);
    if (reserved > capacity_bytes) {
      return make_error(fmt::format("--gpu-memory: {} is less than the {} cuda:{} had reserved ({}) in {}",
                                    format_bytes(capacity_bytes), format_bytes(reserved), d.memory.device,
                                    reserved == d.memory.reserved_bytes ? "at dump time" : "at its trace's reserved peak",
                                    name));
    }
    // At an OOM, what PyTorch reserved and what CUDA still had free were both on the card.
    for (const OomReport& oom : d.ooms) {
      const uint64_t seen = oom.reserved_bytes > UINT64_MAX - oom.device_free_bytes ? UINT64_MAX
                                                                                     : oom.reserved_bytes + oom.device_free_bytes;
      if (seen <= capacity_bytes) continue;
      return make_error(fmt::format("--gpu-memory: {} is less than the {} cuda:{} held at its OOM (event {}) in {}: {} "
                                    "reserved by PyTorch and {} CUDA reported free",
                                    format_bytes(capacity_bytes), format_bytes(seen), d.memory.device, oom.event_index,
                                    name, format_bytes(oom.reserved_bytes), format_bytes(oom.device_free_bytes)));
    }
  }
  return Ok{};
}

Result<SnapshotReport> analyze_snapshot_file(const std::string& path, const SnapshotOptions& options,
                                             const SnapshotReadOptions& read_options) {
  auto snapshot = read_snapshot_file(path, read_options);
  if (!snapshot) return snapshot.error();
  if (auto present = check_device_present(*snapshot, options, path); !present) return present.error();
  SnapshotReport report = analyze_snapshot(*snapshot, options);
  report.file = path;
  return report;
}

}  // namespace oomdoc
