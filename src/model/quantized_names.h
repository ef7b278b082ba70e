// What a quantized checkpoint's name says about its weights: quantizers append a suffix to the
// base model's name ("unsloth/llama-3-8b-bnb-4bit", "TheBloke/Llama-2-7B-AWQ",
// "Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "RedHatAI/...-quantized.w8a8"). One table for every
// command: estimate and fit read a name that is not bundled as its base model with this format
// (readers/served_model.cpp), serve sizes a named checkpoint whose config has no
// quantization_config with it (analyses/vllm_serve.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace oomdoc {

struct QuantizedNameFormat {
  std::string_view suffix;      // as quantizers write it, compared case-insensitively
  std::string_view method;      // as quantization_config.quant_method names it (vLLM's --quantization)
  uint64_t bits = 0;
  uint64_t group_size = 0;      // 0: per output channel (no groups)
  bool double_quant = false;    // Unsloth's bnb-4bit uploads quantize the absmax again
};

struct QuantizedName {
  std::string base;                     // the name without every quantizer suffix
  const QuantizedNameFormat* format;    // the outermost suffix (the one nearest the end)
};

// The base name and format when `name` ends with one or more quantizer suffixes.
std::optional<QuantizedName> split_quantized_name(std::string_view name);

}  // namespace oomdoc
