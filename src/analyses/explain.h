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

// Errors that say the same thing, to be told once: a retry loop, or eight ranks failing in the same
// step, print one failure hundreds of times with figures a few MiB apart. Members share the input,
// framework and format, the diagnosis (cause, secondary causes, fixes), the place (user frame and
// operation) and the card's size; each of their figures is within 10% (or 64 MiB) of the first
// member's, they list as many other processes, and their other fields (max_model_len, a memory
// cgroup, the process killed, a shape) are equal. Informational events each stand alone.
struct EventGroup {
  std::vector<size_t> members;   // indices into ExplainReport::events in input order
  size_t shown = 0;              // the member told in full: the one that misses most (request - free)
  uint64_t prints = 0;           // every print of every member (word-for-word repeats included)
};

struct ExplainReport {
  std::vector<std::string> inputs;        // the inputs scanned
  std::vector<InputError> errors;         // the inputs that could not be
  std::vector<ExplainedEvent> events;     // errors and informational events, in input order
  std::vector<ClimbFinding> climbing;     // per input where memory climbs
  std::vector<EventGroup> groups;         // group_similar_events(*this), kept current by add_to_report
  uint64_t bytes_scanned = 0;
  uint64_t lines = 0;
  bool truncated = false;
  uint64_t messages_beyond_cap = 0;       // ScanResult::messages_beyond_cap, over the inputs

  size_t error_count() const;
};

// Diagnoses every event of one scanned input, appends it to the report and regroups.
void add_to_report(ExplainReport& report, const ScanResult& scan);

// Every event in exactly one group; groups in the order of their first member.
std::vector<EventGroup> group_similar_events(const ExplainReport& report);

}  // namespace oomdoc
