// The explain pipeline on an in-memory log, as the diagnosis tests drive it: scan, then diagnose.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analyses/explain.h"
#include "readers/log_scanner.h"
#include "support/test_support.h"

namespace oomdoc::testing {

// The ids of a diagnosis's fixes, in its order.
inline std::vector<std::string> fix_ids(const Diagnosis& d) {
  std::vector<std::string> ids;
  for (const auto& f : d.fixes) ids.push_back(f.id);
  return ids;
}

// The fix with `id`, or null.
inline const Fix* find_fix(const Diagnosis& d, const std::string& id) {
  for (const auto& f : d.fixes) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

inline bool has_fix(const Diagnosis& d, const std::string& id) { return find_fix(d, id) != nullptr; }

// The fix with `id`; a test failure (and an empty fix) when there is none.
inline const Fix& fix(const Diagnosis& d, const std::string& id) {
  if (const Fix* f = find_fix(d, id)) return *f;
  static const Fix none;
  ADD_FAILURE() << "no fix " << id;
  return none;
}

// The report on `text`, read as the log named `input`.
inline ExplainReport explain_text(const std::string& text, const std::string& input = "test.log") {
  ExplainReport report;
  ScanResult scan = scan_text(text);
  scan.input = input;
  add_to_report(report, scan);
  return report;
}

// The report on a real log kept in tests/fixtures/explain/real/.
inline ExplainReport explain_fixture(const std::string& fixture) {
  return explain_text(read_file(fixture_path("explain/real/" + fixture)), fixture);
}

// The report's only event (a test failure when it has another count).
inline ExplainedEvent only_event(const ExplainReport& report) {
  EXPECT_EQ(report.events.size(), 1u);
  return report.events.empty() ? ExplainedEvent{} : report.events.front();
}

// The report's first error event (a test failure when it has none).
inline ExplainedEvent first_error_event(const ExplainReport& report) {
  for (const auto& e : report.events) {
    if (e.event.is_error) return e;
  }
  ADD_FAILURE() << "no error event";
  return {};
}

}  // namespace oomdoc::testing
