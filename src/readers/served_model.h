// The model a vLLM command line names, resolved for serve: first as resolve_model does (path,
// Hugging Face cache, bundled preset), then, for a quantized checkpoint's name
// ("...-AWQ", "...-FP8", "...-quantized.w8a8"), as its base model; the quantization itself is
// then taken from the name by the serve analysis.
#pragma once

#include <string>

#include "core/result.h"
#include "model/model_spec.h"

namespace oomdoc {

struct ServedModel {
  ModelSpec spec;
  std::string note;   // non-empty when the base model stood in for the named checkpoint
};

Result<ServedModel> resolve_served_model(const std::string& name);

}  // namespace oomdoc
