// The explain pipeline on an in-memory log, as the diagnosis tests drive it: scan, then diagnose.
#pragma once

#include <string>
#include <vector>

#include "analyses/explain.h"
#include "readers/log_scanner.h"

namespace oomdoc::testing {

// The ids of a diagnosis's fixes, in its order.
inline std::vector<std::string> fix_ids(const Diagnosis& d) {
  std::vector<std::string> ids;
  for (const auto& f : d.fixes) ids.push_back(f.id);
  return ids;
}

inline ExplainReport explain_text(const std::string& text) {
  ExplainReport report;
  ScanResult scan = scan_text(text);
  scan.input = "test.log";
  add_to_report(report, scan);
  return report;
}

}  // namespace oomdoc::testing
