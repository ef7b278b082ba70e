// The model a vLLM command line names, resolved for serve: first as resolve_model does (path,
// Hugging Face cache, bundled preset), then, for a quantized checkpoint's name
// ("...-AWQ", "...-FP8", "...-quantized.w8a8"), as its base model; the quantization itself is
// then taken from the name by the serve analysis.
#pragma once

#include <optional>
#include <string>

#include "core/result.h"
#include "model/model_spec.h"

namespace oomdoc {

struct ServedModel {
  ModelSpec spec;
  std::string note;   // non-empty when the base model stood in for the named checkpoint
};

// Fails for models with Mamba / linear-attention layers (Jamba, Nemotron-H, Qwen3-Next, Granite-4
// hybrids...), which serve does not size.
Result<ServedModel> resolve_served_model(const std::string& name);

// Why a config.json describes a model with recurrent-state layers, or nothing when it does not.
std::optional<std::string> unsupported_state_layers(const std::string& config_text);

}  // namespace oomdoc
