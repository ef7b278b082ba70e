// Compare two snapshots (before / after a change): per-device figures and, per stack key, the
// bytes live at dump time. Keys (first user frames) match across files; stack ids do not.
#include <algorithm>
#include <cstdlib>
#include <map>

#include "analyses/snapshot_report.h"

namespace oomdoc {

namespace {

std::map<std::string, int64_t> live_by_key(const Snapshot& s, const SnapshotOptions& options) {
  StackLabeler labeler(s, options.stack_depth);
  std::map<std::string, int64_t> out;
  for (const SnapshotSegment& seg : s.segments) {
    if (options.device && seg.device != *options.device) continue;
    for (const SnapshotBlock& b : seg.blocks) {
      if (b.state == BlockState::kActiveAllocated) {
        out[labeler.key(b.stack)] += static_cast<int64_t>(b.requested_size.value_or(b.size));
      }
    }
  }
  return out;
}

}  // namespace

SnapshotComparison compare_snapshots(const Snapshot& before, const Snapshot& after,
                                     const SnapshotOptions& options) {
  SnapshotComparison c;
  std::vector<int> devices = before.devices();
  for (int d : after.devices()) devices.push_back(d);
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  const std::vector<int> held_before = before.devices(), held_after = after.devices();
  auto holds = [](const std::vector<int>& held, int d) { return std::find(held.begin(), held.end(), d) != held.end(); };
  for (int d : devices) {
    if (options.device && *options.device != d) continue;
    DeviceDelta x;
    x.device = d;
    if (holds(held_before, d)) {
      const DeviceMemory m = summarize_device(before, d);
      x.reserved_before = m.reserved_bytes;
      x.allocated_before = m.allocated_bytes;
      if (const Timeline t = replay_timeline(before, d, options); t.events > 0) x.peak_live_before = t.live_at_peak_bytes;
    }
    if (holds(held_after, d)) {
      const DeviceMemory m = summarize_device(after, d);
      x.reserved_after = m.reserved_bytes;
      x.allocated_after = m.allocated_bytes;
      if (const Timeline t = replay_timeline(after, d, options); t.events > 0) x.peak_live_after = t.live_at_peak_bytes;
    }
    c.devices.push_back(x);
  }
  auto kb = live_by_key(before, options), ka = live_by_key(after, options);
  std::map<std::string, StackDelta> all;
  for (auto& [k, v] : kb) all[k].before_bytes = v;
  for (auto& [k, v] : ka) all[k].after_bytes = v;
  for (auto& [k, d] : all) {
    d.key = k;
    d.delta_bytes = d.after_bytes - d.before_bytes;
    if (d.delta_bytes != 0) c.stacks.push_back(d);
  }
  std::sort(c.stacks.begin(), c.stacks.end(), [](const StackDelta& x, const StackDelta& y) {
    return std::llabs(x.delta_bytes) != std::llabs(y.delta_bytes) ? std::llabs(x.delta_bytes) > std::llabs(y.delta_bytes)
                                                                  : x.key < y.key;
  });
  c.changed_stacks = c.stacks.size();
  if (c.stacks.size() > options.top) c.stacks.resize(options.top);
  return c;
}

}  // namespace oomdoc
