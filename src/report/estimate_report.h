// Renders an Estimate (with the model it was made for) as a terminal table or a JSON document.
// Computes nothing: the numbers come from analyses/estimator.cpp.
#pragma once

#include <string>

#include "model/estimate.h"
#include "model/job.h"
#include "model/model_spec.h"
#include "report/json_output.h"
#include "report/style.h"

namespace oomdoc {

std::string render_estimate_text(const ModelSpec& model, const Estimate& estimate, const Style& style);
Json estimate_to_json(const ModelSpec& model, const Job& job, const Estimate& estimate);

}  // namespace oomdoc
