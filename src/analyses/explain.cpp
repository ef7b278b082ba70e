#include "analyses/explain.h"

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
  LogContext context{&scan.events, &scan.readings, &scan.notices};
  for (const OomEvent& event : scan.events) {
    report.events.push_back({scan.input, event, diagnose_event(event, context)});
  }
  ClimbFinding climb = find_climbing(scan.events, scan.readings);
  if (climb.climbing) report.climbing.push_back(climb);
}

}  // namespace oomdoc
