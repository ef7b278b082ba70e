// `oomdoc explain` as a library call: scan inputs, diagnose each event, report.
#pragma once

#include <string>
#include <vector>

#include "analyses/diagnose.h"
#include "readers/log_scanner.h"

namespace oomdoc {

struct ExplainedEvent {
  std::string input;
  OomEvent event;
  Diagnosis diagnosis;
};

// An input that could not be scanned (missing, a directory, binary): the report covers the others.
struct InputError {
  std::string input;
  std::string message;   // one line naming the input
};

struct ExplainReport {
  std::vector<std::string> inputs;        // the inputs scanned
  std::vector<InputError> errors;         // the inputs that could not be
  std::vector<ExplainedEvent> events;     // errors and informational events, in input order
  std::vector<ClimbFinding> climbing;     // per input where memory climbs
  uint64_t bytes_scanned = 0;
  uint64_t lines = 0;
  bool truncated = false;

  size_t error_count() const;
};

// Diagnoses every event of one scanned input and appends it to the report.
void add_to_report(ExplainReport& report, const ScanResult& scan);

}  // namespace oomdoc
