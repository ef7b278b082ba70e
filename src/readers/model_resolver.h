// Resolves what a user names as a model into a ModelSpec: a config.json path or folder, a folder of
// *.safetensors, a Hugging Face repo id in the local cache, or a bundled preset (id or alias).
// Implemented by the estimate work (issue 3).
#pragma once

#include <string>

#include "core/result.h"
#include "model/model_spec.h"

namespace oomdoc {

Result<ModelSpec> resolve_model(const std::string& name);

}  // namespace oomdoc
