// Renderers for `oomdoc fit`: the terminal text and the --json document (fields in docs/json.md).
// They only lay out a FitReport; every number comes from analyses/fit_search.
#pragma once

#include <optional>
#include <string>

#include "analyses/fit_search.h"
#include "readers/training_config.h"
#include "report/json_output.h"
#include "report/style.h"

namespace oomdoc {

// config: the training config the job came from, if any (its used/ignored/unknown keys).
std::string render_fit_text(const FitReport& report, const TrainingConfig* config, const Style& style);

Json fit_report_json(const FitReport& report, const TrainingConfig* config);

}  // namespace oomdoc
