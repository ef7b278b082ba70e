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
  // The KV cache dtype a ModelOpt checkpoint asks for (its kv_cache_quant_algo or kv_cache_scheme),
  // which vLLM's --kv-cache-dtype auto takes (vllm/utils/torch_utils.py,
  // resolve_kv_cache_dtype_string): "fp8_e4m3" or "nvfp4"; with where it was read.
  std::optional<std::string> checkpoint_kv_cache_dtype;
  std::string checkpoint_kv_cache_source;
};

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
