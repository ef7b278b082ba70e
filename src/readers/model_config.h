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
// The config keys that give a context length, as vLLM reads them (vllm/config.py
// _get_and_verify_max_len), in its order; ModelSpec::context_keys holds those a config sets.
const std::vector<std::string_view>& context_key_names();

// A rope_scaling / rope_parameters object given apart from config.json (vLLM's --hf-overrides or
// the older --rope-scaling flag), read as config.json's is, replacing the model's own. False (and
// the model without rope scaling) when it is not a JSON object with a rope type.
bool apply_rope_scaling_json(std::string_view rope_object_json, ModelSpec& model);

}  // namespace oomdoc
