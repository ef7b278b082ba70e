// Growth: allocations made during the trace that are still live at its end, grouped by stack,
// and left behind by step after step (a leak: tensors kept across steps).
//
// Only real steps count: the `ProfilerStep#N` annotations, else the ends of `Optimizer.step`
// annotations (both need time_us). Without them there is no leak claim: a trace of one forward pass
// or one training step ends with activations saved for backward, gradients and optimizer state
// live, which is what that code is meant to keep, and equal slices of such a trace would make every
// layer look like an "iteration". A stack is a candidate when at least three steps left allocations
// behind (so at least two completed ones, whatever the step the dump interrupted still holds);
// what was allocated before the first step (the model, the optimizer's setup) is not growth.
#include <algorithm>
#include <unordered_map>

#include "analyses/snapshot_analysis.h"
#include "analyses/snapshot_replay.h"

namespace oomdoc {

namespace {
constexpr uint64_t kMinIterations = 3;
}  // namespace

GrowthReport analyze_growth(const Snapshot& snapshot, int device, StackLabeler& labeler,
                            const SnapshotOptions& options) {
  GrowthReport report;
  const auto trace = snapshot.trace(device);
  if (trace.size() < 2) return report;

  // Step boundaries: each profiler step's start, else each optimizer step's end, on this device.
  std::vector<int64_t> profiler_starts, optimizer_ends;
  for (const SnapshotAnnotation& a : snapshot.annotations) {
    if (a.device != device || !a.time_us) continue;
    const std::string_view name = snapshot.str(a.name);
    const std::string_view stage = snapshot.str(a.stage);
    if (stage == "START" && name.starts_with("ProfilerStep#")) profiler_starts.push_back(*a.time_us);
    if (stage == "END" && name.starts_with("Optimizer.step#")) optimizer_ends.push_back(*a.time_us);
  }
  const bool timed = trace.front().has_time;
  std::vector<int64_t> boundaries;
  if (timed && profiler_starts.size() >= kMinIterations) {
    boundaries = std::move(profiler_starts);
    report.iteration_source = "ProfilerStep annotations";
  } else if (timed && optimizer_ends.size() >= kMinIterations) {
    boundaries = std::move(optimizer_ends);
    report.iteration_source = "Optimizer.step annotations";
  } else {
    report.steps_marked = std::max(profiler_starts.size(), optimizer_ends.size());
    return report;  // no real steps: no claim about growth across them
  }
  std::sort(boundaries.begin(), boundaries.end());
  report.iterations = boundaries.size();
  // Region r holds the events after r boundaries. With ProfilerStep starts region 0 is before the
  // first step and the last region is the step in progress; with optimizer-step ends region 0 is
  // the first step (and what came before it), the last one again the step in progress.
  const bool by_profiler = report.iteration_source == "ProfilerStep annotations";
  const uint64_t first_step = by_profiler ? 1 : 0;
  auto iteration_of = [&](uint64_t index) -> uint64_t {
    auto it = std::upper_bound(boundaries.begin(), boundaries.end(), trace[index].time_us);
    return static_cast<uint64_t>(it - boundaries.begin());
  };

  detail::AddressMap live;
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceEvent& e = trace[i];
    if (e.action == TraceAction::kAlloc) live.put(e.addr, {e.size, i, e.stack});
    if (e.action == TraceAction::kFreeCompleted) live.erase(e.addr);
  }
  struct Acc {
    StackId stack = kNoStack;
    LeakCandidate c;
    std::vector<uint64_t> iterations;
  };
  std::unordered_map<std::string, Acc> groups;
  live.for_each([&](uint64_t, const detail::LiveEntry& v) {
    const std::string& key = labeler.key(v.stack);
    Acc& a = groups[key];
    if (a.c.count == 0) {
      a.stack = v.stack;
      a.c.stack_key = key;
      a.c.first_event = v.event_index;
    }
    a.c.bytes += v.size;
    ++a.c.count;
    a.c.first_event = std::min(a.c.first_event, v.event_index);
    a.c.last_event = std::max(a.c.last_event, v.event_index);
    const uint64_t it = iteration_of(v.event_index);
    if (it >= first_step) a.iterations.push_back(it);
  });
  for (auto& [key, a] : groups) {
    std::sort(a.iterations.begin(), a.iterations.end());
    a.c.iterations = static_cast<uint64_t>(
        std::unique(a.iterations.begin(), a.iterations.end()) - a.iterations.begin());
    if (a.c.iterations < kMinIterations) continue;
    a.c.frames = labeler.frames(a.stack);
    report.leaks.push_back(std::move(a.c));
  }
  std::sort(report.leaks.begin(), report.leaks.end(), [](const LeakCandidate& a, const LeakCandidate& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.stack_key < b.stack_key;
  });
  if (report.leaks.size() > options.top) report.leaks.resize(options.top);
  return report;
}

}  // namespace oomdoc
