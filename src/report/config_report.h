// What a training config contributed to a job, as `estimate` and `fit` show it above their
// report: its format, the keys used, ignored and unknown, and its warnings.
#pragma once

#include <string>

#include "readers/training_config.h"
#include "report/json_output.h"
#include "report/style.h"

namespace oomdoc {

// "config (axolotl): used 12; ignored 19; unknown 1", the used keys, then one line per warning.
std::string render_config_summary(const TrainingConfig& config, const Style& style);

// {"format", "used_keys", "ignored_keys", "unknown_keys"}; null without a config.
Json training_config_json(const TrainingConfig* config);

}  // namespace oomdoc
