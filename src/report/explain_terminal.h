// Human output of `oomdoc explain`: per error, what happened (the numbers), the cause with its
// evidence, and the fixes cheapest first. Informational events are summarised unless asked for.
#pragma once

#include <string>

#include "analyses/explain.h"
#include "report/style.h"

namespace oomdoc {

struct ExplainTerminalOptions {
  bool show_info = false;   // also list informational (is_error = false) events
  bool group_similar = true; // errors that say the same thing shown once (group_similar_events)
  size_t max_fixes = 6;
};

std::string render_explain(const ExplainReport& report, const Style& style, const ExplainTerminalOptions& options = {});

// "close to the limit" for "capacity_exhausted": the words shown to people for a cause label.
std::string cause_title(const std::string& cause);

}  // namespace oomdoc
