// Reads a Hugging Face config.json into a ModelSpec, family by family (Llama, Mistral, Mixtral,
// Qwen2/3(-MoE), DeepSeek-V2/V3, Gemma 1/2/3, Phi-1/2/3, GPT-2, GPT-J, GPT-NeoX, Falcon, OPT,
// BLOOM, GPT-BigCode, StableLM, BERT, RoBERTa, DeBERTa-v2, T5/mT5, ViT). The parameter count is
// computed from the shape (model/architecture.cpp).
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "model/model_spec.h"

namespace oomdoc {

// `text` is the config.json content; `source` names it in errors ("path/config.json").
Result<ModelSpec> parse_model_config(std::string_view text, const std::string& source);

// Model types parse_model_config understands, for error messages and docs.
const std::vector<std::string>& supported_model_types();

}  // namespace oomdoc
