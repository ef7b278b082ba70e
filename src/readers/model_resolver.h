// Resolves what a user names as a model into a ModelSpec: a config.json path or folder, a folder of
// *.safetensors, a Hugging Face repo id in the local cache, or a bundled preset (id or alias).
// Implemented by the estimate work (issue 3).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/result.h"
#include "model/model_spec.h"

namespace oomdoc {

// Order: an existing path (config.json file, or a folder with config.json and optional
// *.safetensors), a repo id in the Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub,
// ~/.cache/huggingface/hub), then a bundled preset. Errors say what is missing, not which flag
// to use instead: that depends on the command (only estimate has --params; Error::unknown_kind
// says when it applies). A path that does not exist here is sized as the bundled preset its last
// component names, with a warning in ModelSpec::warnings; without one it is "no such file or folder".
Result<ModelSpec> resolve_model(const std::string& name);

// Whether a model name is written as a path rather than a Hugging Face id: it starts with '/',
// './', '../' or '~', ends with '/', has a backslash, or more slashes than org/name's one.
// "meta-llama/Llama-2-7b-hf" is an id; "/data/x", "./x" and "models/org/x" are paths.
bool looks_like_path(const std::string& name);

// A folder holding config.json (and possibly *.safetensors, whose headers give exact counts).
Result<ModelSpec> model_from_folder(const std::string& folder);

// Where the Hugging Face cache keeps a repo's snapshot, if it is there: the one refs/main names
// (what the hub client would load), else the last by name of those with a config.json. An error
// when refs/main names a snapshot whose config.json is a broken link, or is missing beside weight
// files (an interrupted download): another revision would be sized silently.
Result<std::optional<std::string>> find_in_hf_cache(const std::string& repo_id);

// --params 7B with optional shape flags: a Llama-shaped model of that size. The shape is picked
// from the size (Llama-2 family widths) unless given; total_params stays exactly `params`.
struct ShapeHints {
  std::optional<uint64_t> hidden_size;
  std::optional<uint64_t> num_layers;
  std::optional<uint64_t> num_attention_heads;
  std::optional<uint64_t> num_kv_heads;
  std::optional<uint64_t> vocab_size;
  std::optional<uint64_t> intermediate_size;
};
Result<ModelSpec> model_from_param_count(uint64_t params, const ShapeHints& hints = {});

}  // namespace oomdoc
