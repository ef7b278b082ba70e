#include "analyses/explain.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include "core/saturating.h"

namespace oomdoc {

size_t ExplainReport::error_count() const {
  size_t n = 0;
  for (const auto& e : events) n += e.event.is_error ? 1 : 0;
  return n;
}

void add_to_report(ExplainReport& report, const ScanResult& scan) {
  report.inputs.push_back(scan.input);
  report.bytes_scanned += scan.bytes_scanned;
  report.lines += scan.lines;
  report.truncated = report.truncated || scan.events_truncated;
  report.messages_beyond_cap = saturating_add(report.messages_beyond_cap, scan.messages_beyond_cap);
  const ClimbFinding climb = find_climbing(scan.events, scan.readings);
  LogContext context{&scan.events, &scan.readings, &scan.notices, &climb};
  for (const OomEvent& event : scan.events) {
    report.events.push_back({scan.input, event, diagnose_event(event, context)});
  }
  if (climb.climbing) report.climbing.push_back(climb);
  report.groups = group_similar_events(report);
}

namespace {

// What members of a group share exactly; the request is compared with a tolerance after.
std::string group_key(const ExplainedEvent& item) {
  const OomEvent& e = item.event;
  const Diagnosis& d = item.diagnosis;
  std::string key = item.input + '\x1f' + e.framework + '\x1f' + e.format + '\x1f' + d.cause;
  for (const auto& s : d.secondary_causes) key += '\x1f' + s;
  key += "\x1f|";
  for (const auto& f : d.fixes) key += '\x1f' + f.id;
  key += "\x1f|" + std::to_string(e.bytes("total").value_or(0));
  key += '\x1f' + e.string_field("device_kind").value_or("");
  if (e.traceback) {
    if (const auto& f = e.traceback->innermost_user_frame) {
      key += '\x1f' + f->file + ':' + (f->line ? std::to_string(*f->line) : "?");
    }
    key += '\x1f' + e.traceback->operation;
  }
  return key;
}

// Two figures a user would read as the same: within 10% of the larger, or 64 MiB apart at most
// (free memory moves by a few MiB from rank to rank).
bool close_figures(uint64_t a, uint64_t b) {
  const uint64_t low = std::min(a, b), high = std::max(a, b);
  return high - low <= std::max<uint64_t>(high / 10, uint64_t{64} << 20);
}

// Fields that name one print rather than what failed: they may differ within a group.
bool per_print_field(const std::string& name) {
  static const std::set<std::string> kPerPrint = {
      "pid", "worker_rank", "local_rank", "node", "device_string", "error_line", "requested_bytes_from_text", "requested_text", "requested_unit",
      "requested_rounded_bytes", "requested_lower_bound_bytes", "requested_bytes_if_float32",
      "after_progress_bar", "decimal_separator", "capacity_spelling"};
  return kPerPrint.count(name) > 0 || names_a_line(name);
}

// Whether `b` says what `a` says: every figure close (the request, the free memory, vLLM's KV
// sizes, a killed process's RSS, the HBM a TPU program needs...), the same other processes on the
// card, and every other field equal (max_model_len, a memory cgroup, the process killed, a shape).
bool alike(const OomEvent& a, const OomEvent& b) {
  if (a.quantities.size() != b.quantities.size() || a.other_processes.size() != b.other_processes.size()) return false;
  for (const auto& [name, q] : a.quantities) {
    const Quantity* other = b.quantity(name);
    if (other == nullptr || q.overflow != other->overflow || !close_figures(q.bytes, other->bytes)) return false;
  }
  for (size_t i = 0; i < a.other_processes.size(); ++i) {
    if (!close_figures(a.other_processes[i].memory.bytes, b.other_processes[i].memory.bytes)) return false;
  }
  auto decisive = [](const OomEvent& e) {
    std::vector<std::pair<std::string, FieldValue>> out;
    for (const auto& field : e.fields) {
      if (!per_print_field(field.first)) out.push_back(field);
    }
    std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    return out;
  };
  return decisive(a) == decisive(b);
}

// What the member still needs once the free memory is used: the group shows its largest.
int64_t shortfall(const OomEvent& e) {
  const auto requested = e.bytes("requested"), free = e.bytes("free");
  if (!requested || !free) return INT64_MIN;
  return static_cast<int64_t>(*requested / 2) - static_cast<int64_t>(*free / 2);   // halves: no overflow
}

}  // namespace

std::vector<EventGroup> group_similar_events(const ExplainReport& report) {
  std::vector<EventGroup> groups;
  std::map<std::string, std::vector<size_t>> open;   // key -> the groups with it
  for (size_t i = 0; i < report.events.size(); ++i) {
    const ExplainedEvent& item = report.events[i];
    EventGroup* joined = nullptr;
    std::string key;
    if (item.event.is_error) {
      key = group_key(item);
      // The latest few groups of this key: requests that drift (growing batches) make new groups
      // now and then, and an old one is not worth the search.
      const std::vector<size_t>& candidates = open[key];
      for (size_t k = candidates.size(); k-- > 0 && candidates.size() - k <= 16;) {
        if (alike(report.events[groups[candidates[k]].members.front()].event, item.event)) {
          joined = &groups[candidates[k]];
          break;
        }
      }
    }
    if (joined == nullptr) {
      if (item.event.is_error) open[key].push_back(groups.size());
      joined = &groups.emplace_back();
    }
    joined->members.push_back(i);
    joined->prints = saturating_add(joined->prints, item.event.repeats);
    if (shortfall(item.event) > shortfall(report.events[joined->shown].event)) joined->shown = i;
    if (joined->members.size() == 1) joined->shown = i;
  }
  return groups;
}

}  // namespace oomdoc
