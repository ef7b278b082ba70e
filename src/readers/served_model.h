// Models named by a checkpoint that is not bundled: first as resolve_model does (path, Hugging
// Face cache, bundled preset), then, for a quantized checkpoint's name ("...-AWQ", "...-FP8",
// "...-quantized.w8a8", "...-bnb-4bit"), as its base model. serve takes the quantization from
// the name itself (vllm_profile); estimate and fit get it in the ModelSpec.
#pragma once

#include <optional>
#include <string>

#include "core/result.h"
#include "model/model_spec.h"

namespace oomdoc {

struct ServedModel {
  ModelSpec spec;
  std::string note;   // non-empty when the base model stood in for the named checkpoint
  // The KV cache dtype a ModelOpt checkpoint asks for (its kv_cache_quant_algo or kv_cache_scheme),
  // which vLLM's --kv-cache-dtype auto takes (vllm/utils/torch_utils.py,
  // resolve_kv_cache_dtype_string): "fp8_e4m3" or "nvfp4"; with where it was read.
  std::optional<std::string> checkpoint_kv_cache_dtype;
  std::string checkpoint_kv_cache_source;
  // What vLLM's speculative decoding reads from config.json beyond the shape: the
  // multi-token-prediction layers past num_hidden_layers (num_nextn_predict_layers, loaded by the
  // MTP drafter) and an EAGLE-3 head's own output vocabulary (draft_vocab_size); 0 when absent.
  uint64_t mtp_layers = 0;
  uint64_t draft_vocab_size = 0;
};

// For estimate and fit: resolve_model, else, for a quantized checkpoint's name, its base model
// carrying the quantization the name implies ("-bnb-4bit": 4-bit bitsandbytes, "-AWQ": 4-bit AWQ
// with groups of 128, "-FP8"...), with a note saying so in spec.notes.
Result<ModelSpec> resolve_checkpoint_name(const std::string& name);

// Fails for models with Mamba / linear-attention layers (Jamba, Nemotron-H, Qwen3-Next, Granite-4
// hybrids...), which serve does not size.
Result<ServedModel> resolve_served_model(const std::string& name);

// vLLM's get_kv_cache_quant_algo_string for a ModelOpt quantization config (config.json's
// quantization_config, or hf_quant_config.json): "fp8" -> "fp8_e4m3", "nvfp4" -> "nvfp4", a
// kv_cache_scheme of 8-bit static floats -> "fp8_e4m3", of 4-bit floats -> "nvfp4"; nothing for
// other producers or no KV directive.
std::optional<std::string> modelopt_kv_cache_dtype(const std::string& quant_config_json);

// Why a config.json describes a model with recurrent-state layers, or nothing when it does not.
std::optional<std::string> unsupported_state_layers(const std::string& config_text);

}  // namespace oomdoc
