// Bundled model presets (data/presets/*.json): the real config.json of popular models with its
// source, found by exact Hugging Face id (case-insensitive), short alias, or instruct/chat variant.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/model_spec.h"

namespace oomdoc {

// A released variant whose config.json differs from the preset's in a few values (an Instruct
// checkpoint with a shorter max_position_embeddings): its id, its own source, and the values that
// differ, applied over the preset's config (JSON merge patch). The preset file is the one place
// for both, so the shared architecture is written once.
struct PresetVariant {
  std::string id;                         // "Qwen/Qwen2.5-7B-Instruct"
  std::vector<std::string> aliases;
  std::string source;                     // URL of the variant's config.json
  std::string note;                       // why it differs, from the model card
};

struct PresetInfo {
  std::string file;                       // "presets/llama-2-7b.json"
  std::string id;                         // "meta-llama/Llama-2-7b-hf"
  std::vector<std::string> aliases;
  std::vector<PresetVariant> variants;
  std::string source;                     // URL of the config.json
  std::optional<uint64_t> reference_params;
  std::string reference_params_source;
};

const std::vector<PresetInfo>& preset_index();

// The preset matching name, parsed into a ModelSpec (source "preset:<file>", or
// "preset:<file>#<variant id>" for a variant); nullopt if none. Its id is what matched, as the
// preset file spells it: the preset's or variant's id, or an alias that is a Hugging Face id
// ("google/gemma-3-27b-pt" is not shown as google/gemma-3-27b-it).
std::optional<Result<ModelSpec>> find_preset(const std::string& name);

// Up to `limit` preset ids that look like name (for "did you mean" errors).
std::vector<std::string> closest_presets(const std::string& name, size_t limit = 3);

}  // namespace oomdoc
