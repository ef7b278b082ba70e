// Growth: allocations made during the trace that are still live at its end, grouped by stack,
// and left behind by iteration after iteration (a leak: tensors kept across steps). Iterations are
// the `ProfilerStep#N` annotations when the file has them (with time_us), else ten equal windows
// of the trace. A stack is a candidate when at least three iterations left allocations behind.
#include <algorithm>
#include <unordered_map>

#include "analyses/snapshot_analysis.h"
#include "analyses/snapshot_replay.h"

namespace oomdoc {

namespace {
constexpr uint64_t kMinIterations = 3;
constexpr uint64_t kWindows = 10;
}  // namespace

GrowthReport analyze_growth(const Snapshot& snapshot, int device, StackLabeler& labeler,
                            const SnapshotOptions& options) {
  GrowthReport report;
  const auto trace = snapshot.trace(device);
  if (trace.size() < 2) return report;

  // Step starts, when the profiler annotated them on this device.
  std::vector<int64_t> step_starts;
  for (const SnapshotAnnotation& a : snapshot.annotations) {
    if (a.device != device || !a.time_us || snapshot.str(a.stage) != "START") continue;
    if (snapshot.str(a.name).rfind("ProfilerStep#", 0) == 0) step_starts.push_back(*a.time_us);
  }
  std::sort(step_starts.begin(), step_starts.end());
  bool by_steps = step_starts.size() >= kMinIterations && trace.front().has_time;
  report.iteration_source = by_steps ? "ProfilerStep annotations" : "10 equal windows of the trace";
  report.iterations = by_steps ? step_starts.size() : kWindows;
  auto iteration_of = [&](uint64_t index) -> uint64_t {
    if (by_steps) {
      auto it = std::upper_bound(step_starts.begin(), step_starts.end(), trace[index].time_us);
      return static_cast<uint64_t>(it - step_starts.begin());
    }
    return index * kWindows / trace.size();
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
    a.iterations.push_back(iteration_of(v.event_index));
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
