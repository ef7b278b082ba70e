#include "analyses/explain.h"

#include <map>

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
  const ClimbFinding climb = find_climbing(scan.events, scan.readings);
  LogContext context{&scan.events, &scan.readings, &scan.notices, &climb};
  for (const OomEvent& event : scan.events) {
    report.events.push_back({scan.input, event, diagnose_event(event, context)});
  }
  if (climb.climbing) report.climbing.push_back(climb);
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

bool close_requests(const OomEvent& a, const OomEvent& b) {
  const auto ra = a.bytes("requested"), rb = b.bytes("requested");
  if (!ra || !rb) return ra.has_value() == rb.has_value();
  const uint64_t low = std::min(*ra, *rb), high = std::max(*ra, *rb);
  return high - low <= high / 10;
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
        if (close_requests(report.events[groups[candidates[k]].members.front()].event, item.event)) {
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
  }
  return groups;
}

}  // namespace oomdoc
