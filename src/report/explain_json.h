// --json for `oomdoc explain`: {"events": [...]} with the oom-messages corpus field names (docs/json.md).
#pragma once

#include "analyses/explain.h"
#include "report/json_output.h"

namespace oomdoc {

Json event_to_json(const ExplainedEvent& item);
Json explain_to_json(const ExplainReport& report);

}  // namespace oomdoc
