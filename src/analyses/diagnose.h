// Names the cause of each out-of-memory event from its numbers and context, with the evidence,
// and lists the fixes cheapest first with the values the numbers allow (never invented ones).
// Cause labels follow the oom-messages corpus vocabulary (../shared/data/oom-messages/README.md),
// plus evaluation_with_grad, model_does_not_fit, ddp_replica_does_not_fit and memory_climbing from
// the log context.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyses/fix_catalog.h"
#include "model/oom_event.h"
#include "readers/log_scanner.h"

namespace oomdoc {

// Memory figures derived from an event (what the corpus calls *_derived).
struct MemoryBreakdown {
  std::optional<uint64_t> total, free, requested;
  std::optional<uint64_t> pytorch_reserved;      // allocated + reserved-but-unallocated
  std::optional<uint64_t> reserved_unallocated;
  std::optional<uint64_t> this_process;          // "this process has", or the likely-self Process line
  std::optional<uint64_t> likely_self_pid;
  uint64_t other_processes = 0;                  // listed processes other than this one
  std::optional<int64_t> unattributed;           // total - free - this process (or reserved) - others
  std::optional<int64_t> non_pytorch_in_process; // this process - PyTorch reserved
  std::vector<std::string> ignored;              // figures no card can show, left out of the above, said why
};

MemoryBreakdown breakdown(const OomEvent& event);

struct Diagnosis {
  std::string cause;
  std::vector<std::string> secondary_causes;
  std::vector<std::string> evidence;   // sentences with the numbers that decided
  std::vector<Fix> fixes;              // cheapest first
  // How to word "capacity_exhausted" (primary or secondary) for this event: "the process filled the
  // card (close to the limit)" only when the figures show it holds nearly all of it.
  std::string capacity_title;
  // The primary cause in this event's words when the generic ones would be wrong (MPS has a limit,
  // not a card: "one allocation is larger than MPS's whole limit"); empty: the generic words.
  std::string cause_title;
};

// A climbing series: allocated memory growing event after event, or readings growing step after step.
struct ClimbFinding {
  bool climbing = false;
  uint64_t first_bytes = 0, last_bytes = 0;
  uint64_t first_line = 0, last_line = 0;
  size_t samples = 0;
  std::string source;   // "events" or "readings"
};
ClimbFinding find_climbing(const std::vector<OomEvent>& events, const std::vector<MemoryReading>& readings);

// Log-level context the per-event rules use: other events and memory readings.
struct LogContext {
  const std::vector<OomEvent>* events = nullptr;
  const std::vector<MemoryReading>* readings = nullptr;
  const std::vector<LogNotice>* notices = nullptr;
  // find_climbing(*events, *readings), computed once per log by whoever diagnoses all its events
  // (it reads the whole log: per event, a log of 10,000 errors took seconds); null: computed here.
  const ClimbFinding* climb = nullptr;
};

Diagnosis diagnose_event(const OomEvent& event, const LogContext& context);

}  // namespace oomdoc
