// Renders an Estimate (with the model it was made for) as a terminal table or a JSON document.
// Computes nothing: the numbers come from analyses/estimator.cpp.
#pragma once

#include <string>

#include "model/estimate.h"
#include "model/job.h"
#include "model/model_spec.h"
#include "readers/training_config.h"
#include "report/json_output.h"
#include "report/style.h"

namespace oomdoc {

// A predicted byte count for people: format_bytes, or "over 16 EiB" for a count saturated beyond
// 64 bits (core/saturating.h), which format_bytes would call "unlimited".
std::string format_predicted_bytes(uint64_t bytes);

// config: the training config the job was read from, if any (its keys and warnings are shown).
std::string render_estimate_text(const ModelSpec& model, const Estimate& estimate, const Style& style,
                                 const TrainingConfig* config = nullptr);
Json estimate_to_json(const ModelSpec& model, const Job& job, const Estimate& estimate,
                      const TrainingConfig* config = nullptr);

}  // namespace oomdoc
