// Builds small Snapshot models by hand for the analysis tests.
#pragma once

#include <string>
#include <vector>

#include "model/snapshot.h"

namespace oomdoc::testing {

class SnapshotBuilder {
 public:
  SnapshotBuilder() { traces_.resize(1); }

  SnapshotStringId str(const std::string& text) {
    for (size_t i = 0; i < s_.strings.size(); ++i) {
      if (s_.strings[i] == text) return static_cast<SnapshotStringId>(i);
    }
    s_.strings.push_back(text);
    return static_cast<SnapshotStringId>(s_.strings.size() - 1);
  }
  // frames innermost first: {filename, line, name}
  StackId stack(const std::vector<std::tuple<std::string, uint64_t, std::string>>& frames) {
    for (const auto& [file, line, name] : frames) {
      s_.frames.push_back({str(file), str(name), line});
      s_.stack_frames.push_back(static_cast<FrameId>(s_.frames.size() - 1));
    }
    s_.stack_offsets.push_back(static_cast<uint32_t>(s_.stack_frames.size()));
    return static_cast<StackId>(s_.stack_offsets.size() - 2);
  }
  // A segment with blocks {size, state, requested, stack}; addresses are consecutive.
  SnapshotSegment& segment(int device, uint64_t address,
                           const std::vector<std::tuple<uint64_t, BlockState, uint64_t, StackId>>& blocks) {
    SnapshotSegment seg;
    seg.device = device;
    seg.address = address;
    uint64_t a = address;
    uint64_t requested = 0;
    for (const auto& [size, state, req, stack] : blocks) {
      seg.blocks.push_back({a, size, req, state, stack});
      a += size;
      seg.total_size += size;
      if (state != BlockState::kInactive) seg.active_size += size;
      if (state == BlockState::kActiveAllocated) {
        seg.allocated_size += size;
        requested += req;
      }
    }
    seg.requested_size = requested;
    s_.segments.push_back(seg);
    return s_.segments.back();
  }
  TraceEvent& event(TraceAction action, uint64_t addr, uint64_t size, StackId stack = kNoStack, int device = 0) {
    if (traces_.size() <= static_cast<size_t>(device)) traces_.resize(device + 1);
    TraceEvent e;
    e.action = action;
    e.addr = addr;
    e.size = size;
    e.stack = stack;
    traces_[device].push_back(e);
    return traces_[device].back();
  }
  // The snapshot with the traces laid out as the model keeps them (rebuilt on every call).
  Snapshot& snapshot() {
    s_.trace_events.clear();
    s_.trace_ranges.clear();
    for (const auto& t : traces_) {
      size_t begin = s_.trace_events.size();
      s_.trace_events.insert(s_.trace_events.end(), t.begin(), t.end());
      s_.trace_ranges.emplace_back(begin, s_.trace_events.size());
    }
    return s_;
  }

 private:
  Snapshot s_;
  std::vector<std::vector<TraceEvent>> traces_;
};

}  // namespace oomdoc::testing
