// Everything `oomdoc snapshot` says about one file, as plain data, plus the entry points other
// commands use (e.g. `oomdoc run --snapshot-on-oom` calls analyze_snapshot_file on the dump).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyses/snapshot_analysis.h"
#include "core/result.h"
#include "model/snapshot.h"
#include "readers/snapshot_reader.h"

namespace oomdoc {

struct DeviceReport {
  DeviceMemory memory;
  Timeline timeline;
  std::string top_stacks_when;        // "peak" (trace replay) or "dump" (segments only)
  std::vector<StackGroup> top_stacks;
  std::vector<OomReport> ooms;  // the first kMaxOomsAnalysed of the device's OOMs
  size_t oom_count = 0;         // every `oom` event of the device's trace, analysed or not
  Fragmentation fragmentation;  // at the first OOM, else at dump time
  GrowthReport growth;
};

struct SnapshotReport {
  std::string file;
  std::string source_format;  // "pickle protocol 4", "json"
  SnapshotLayout layout = SnapshotLayout::kDeviceTraces;
  std::vector<SettingNote> allocator_settings;  // empty when the file has none
  size_t annotations = 0;
  size_t distinct_stacks = 0;
  size_t distinct_frames = 0;
  std::vector<DeviceReport> devices;
  std::string verdict;  // one line, printed first
  std::vector<std::string> warnings;  // why the figures may be wrong (a snapshot that does not add up)
};

SnapshotReport analyze_snapshot(const Snapshot& snapshot, const SnapshotOptions& options = {});
// A device asked for (options.device) must be in the file: an empty report for a device that is
// not there would read as "nothing allocated". `name` is the file, for the message
// "x.pickle: no device 7 (devices in the file: 0, 1)".
Status check_device_present(const Snapshot& snapshot, const SnapshotOptions& options, const std::string& name);
// A capacity (--gpu-memory) below what a device of the report had reserved, at dump time or at its trace's
// reserved peak, cannot be the device's: the error names both numbers, the device and the file
// "--gpu-memory: 10.00 MiB is less than the 20.00 MiB cuda:0 had reserved (at dump time) in x.pickle".
Status check_device_capacity(const SnapshotReport& report, uint64_t capacity_bytes, const std::string& name);
// Reads and analyses; errors name the file ("x.pickle: offset 12: GLOBAL: refused: ...").
Result<SnapshotReport> analyze_snapshot_file(const std::string& path,
                                             const SnapshotOptions& options = {},
                                             const SnapshotReadOptions& read_options = {});

// ---- compare two snapshots (before / after a change) ----
struct StackDelta {
  std::string key;
  int64_t before_bytes = 0;
  int64_t after_bytes = 0;
  int64_t delta_bytes = 0;
};
// Absent values stay absent: a device one file does not hold has no reserved bytes "0 B" there, and
// a file without a trace has no peak (its live blocks at dump are not a peak).
struct DeviceDelta {
  int device = 0;
  std::optional<uint64_t> reserved_before, reserved_after;    // nullopt: the file does not hold the device
  std::optional<uint64_t> allocated_before, allocated_after;  // likewise
  std::optional<uint64_t> peak_live_before, peak_live_after;  // live_at_peak (baseline + trace peak); nullopt without a trace
};
struct SnapshotComparison {
  std::vector<DeviceDelta> devices;
  std::vector<StackDelta> stacks;  // live at dump, by stack key, largest change first (the first --top)
  size_t changed_stacks = 0;       // every stack whose live bytes changed, listed or not
};
SnapshotComparison compare_snapshots(const Snapshot& before, const Snapshot& after,
                                     const SnapshotOptions& options = {});

}  // namespace oomdoc
