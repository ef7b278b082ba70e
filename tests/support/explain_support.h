// The explain pipeline on an in-memory log, as the diagnosis tests drive it: scan, then diagnose.
#pragma once

#include <string>

#include "analyses/explain.h"
#include "readers/log_scanner.h"

namespace oomdoc::testing {

inline ExplainReport explain_text(const std::string& text) {
  ExplainReport report;
  ScanResult scan = scan_text(text);
  scan.input = "test.log";
  add_to_report(report, scan);
  return report;
}

}  // namespace oomdoc::testing
