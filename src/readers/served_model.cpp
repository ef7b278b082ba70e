#include "readers/served_model.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>

#include "core/embedded.h"
#include "core/file_input.h"
#include "model/quantized_names.h"
#include "readers/model_resolver.h"

namespace oomdoc {
namespace {

// Families whose layers keep a recurrent state instead of (or besides) a KV cache: Mamba/SSM
// layers and linear attention. vLLM sizes that state per request (vllm/v1/kv_cache_interface.py
// MambaSpec, page sizes unified with the attention layers' by the hybrid KV cache manager).
constexpr const char* kStateSpaceModelTypes[] = {
    "mamba", "mamba2", "falcon_mamba", "jamba", "bamba", "zamba", "zamba2", "nemotron_h",
    "falcon_h1", "granitemoehybrid", "plamo2", "qwen3_next", "qwen3_5", "qwen3_5_moe",
    "minimax_text_01", "minimax_m1", "lfm2", "kimi_linear"};

// The config.json a name points at, when it is a path or a Hugging Face cache entry.
std::optional<std::string> config_path_for(const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(name, ec)) return name;
  if (fs::is_directory(name, ec) && fs::is_regular_file(fs::path(name) / "config.json", ec)) {
    return (fs::path(name) / "config.json").string();
  }
  if (auto snapshot = find_in_hf_cache(name); snapshot && *snapshot) {
    auto path = fs::path(**snapshot) / "config.json";
    if (fs::is_regular_file(path, ec)) return path.string();
  }
  return std::nullopt;
}

// "jamba mixes attention with Mamba layers" when the config names a model with state layers.
std::optional<std::string> state_layers_in(const nlohmann::json& config) {
  if (!config.is_object()) return std::nullopt;
  std::string type;
  if (config.contains("model_type") && config["model_type"].is_string()) type = config["model_type"].get<std::string>();
  for (const char* t : kStateSpaceModelTypes) {
    if (type == t) return fmt::format("model_type \"{}\" has Mamba or linear-attention layers", type);
  }
  for (const char* key : {"layers_block_type", "hybrid_override_pattern", "mamba_d_state", "ssm_cfg",
                          "linear_num_value_heads"}) {
    if (config.contains(key)) return fmt::format("its config has \"{}\" (Mamba or linear-attention layers)", key);
  }
  if (config.contains("layer_types") && config["layer_types"].is_array()) {
    for (const auto& kind : config["layer_types"]) {
      if (!kind.is_string()) continue;
      std::string k = kind.get<std::string>();
      if (k.find("linear") != std::string::npos || k.find("mamba") != std::string::npos) {
        return fmt::format("its layer_types include \"{}\"", k);
      }
    }
  }
  return std::nullopt;
}

struct QuantizedBase {
  ModelSpec spec;
  const QuantizedNameFormat* format = nullptr;  // the outermost suffix (the one nearest the end)
};

// The base model of a quantized checkpoint's name ("unsloth/llama-3-8b-bnb-4bit" -> llama-3-8b),
// when the name ends with a quantizer's suffix and the rest resolves.
std::optional<QuantizedBase> quantized_base(const std::string& name) {
  auto split = split_quantized_name(name);
  if (!split) return std::nullopt;
  auto spec = resolve_model(split->base);
  if (!spec) return std::nullopt;
  // A path's warning names what the user typed, not the base name cut from it.
  for (std::string& warning : spec->warnings) {
    if (warning.rfind(split->base + ": ", 0) == 0) warning = name + warning.substr(split->base.size());
  }
  return QuantizedBase{std::move(spec.value()), split->format};
}

// A string member, or "" when it is missing or not a string (configs can be hostile).
std::string text_of(const nlohmann::json& object, const char* key) {
  return object.contains(key) && object[key].is_string() ? object[key].get<std::string>() : std::string();
}

// The kv_cache_quant_algo / kv_cache_scheme of a ModelOpt quantization object.
std::optional<std::string> modelopt_kv_in(const nlohmann::json& quant) {
  if (!quant.is_object()) return std::nullopt;
  const nlohmann::json& inner = quant.contains("quantization") && quant["quantization"].is_object() ? quant["quantization"] : quant;
  for (const nlohmann::json* where : {&inner, &quant}) {
    for (const char* key : {"kv_cache_scheme", "kv_cache_quant_algo"}) {
      if (!where->contains(key)) continue;
      const nlohmann::json& algo = (*where)[key];
      if (algo.is_object()) {
        const bool has_bits = algo.contains("num_bits") && algo["num_bits"].is_number_integer();
        const int64_t bits = has_bits ? algo["num_bits"].get<int64_t>() : 0;
        const bool dynamic = !(algo.contains("dynamic") && algo["dynamic"].is_boolean() && !algo["dynamic"].get<bool>());
        const std::string type = text_of(algo, "type");
        if (bits == 8 && type == "float" && !dynamic) return "fp8_e4m3";
        if (bits == 4 && type == "float") return "nvfp4";
        return std::nullopt;
      }
      if (!algo.is_string()) continue;
      std::string name = algo.get<std::string>();
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      if (name == "fp8") return "fp8_e4m3";
      if (name == "nvfp4") return "nvfp4";
      return std::nullopt;   // vLLM: "Unknown kv_cache_quant_algo ... Falling back to 'auto'"
    }
  }
  return std::nullopt;
}

// A ModelOpt checkpoint's own KV cache dtype: config.json's quantization_config when ModelOpt made
// it, else the hf_quant_config.json ModelOpt writes next to it (which also gives the weight format
// when config.json does not).
void read_checkpoint_kv_cache_dtype(const std::string& config_path, ServedModel& served) {
  namespace fs = std::filesystem;
  if (auto text = read_small_file(config_path); text) {
    auto config = nlohmann::json::parse(text.value(), nullptr, false);
    if (config.is_object() && config.contains("quantization_config") && config["quantization_config"].is_object()) {
      const nlohmann::json& quant = config["quantization_config"];
      if (text_of(quant, "quant_method").rfind("modelopt", 0) == 0) {
        if (auto kv = modelopt_kv_in(quant)) {
          served.checkpoint_kv_cache_dtype = kv;
          served.checkpoint_kv_cache_source = config_path + " quantization_config";
          return;
        }
      }
    }
  }
  const std::string sidecar = (fs::path(config_path).parent_path() / "hf_quant_config.json").string();
  std::error_code ec;
  if (!fs::is_regular_file(sidecar, ec)) return;
  auto text = read_small_file(sidecar);
  if (!text) return;
  if (auto kv = modelopt_kv_cache_dtype(text.value())) {
    served.checkpoint_kv_cache_dtype = kv;
    served.checkpoint_kv_cache_source = sidecar;
  }
  // vLLM takes the weight format from the sidecar too when config.json has none
  // (ModelConfig._parse_quant_hf_config: producer modelopt, quant_algo FP8 -> "modelopt",
  // NVFP4 -> "modelopt_fp4").
  auto quant = nlohmann::json::parse(text.value(), nullptr, false);
  if (served.spec.quantization.empty() && quant.is_object() && quant.contains("producer") &&
      quant["producer"].is_object() && text_of(quant["producer"], "name") == "modelopt" &&
      quant.contains("quantization") && quant["quantization"].is_object()) {
    const std::string algo = text_of(quant["quantization"], "quant_algo");
    if (algo == "FP8") served.spec.quantization = "modelopt";
    if (algo == "NVFP4") served.spec.quantization = "modelopt_fp4";
  }
}

// The config.json a resolved model was read from: the file (a path or the Hugging Face cache),
// else the bundled preset's "config" object.
std::optional<nlohmann::json> config_json_of(const std::string& name, const ModelSpec& spec) {
  if (auto path = config_path_for(name)) {
    if (auto text = read_small_file(*path); text) {
      auto config = nlohmann::json::parse(text.value(), nullptr, false);
      if (config.is_object()) return config;
    }
    return std::nullopt;
  }
  const std::string prefix = "preset:";
  if (spec.source.rfind(prefix, 0) != 0) return std::nullopt;
  std::string file = spec.source.substr(prefix.size());
  file = file.substr(0, file.find('#'));
  auto content = embedded(file);
  if (!content) return std::nullopt;
  auto preset = nlohmann::json::parse(content->begin(), content->end(), nullptr, false);
  if (!preset.is_object() || !preset.contains("config") || !preset["config"].is_object()) return std::nullopt;
  return preset["config"];
}

void read_speculative_fields(const std::string& name, ServedModel& served) {
  auto config = config_json_of(name, served.spec);
  if (!config) return;
  auto count = [&](const char* key) -> uint64_t {
    // Bounded like every other count the reader takes (hostile configs).
    if (!config->contains(key) || !(*config)[key].is_number_unsigned()) return 0;
    const uint64_t value = (*config)[key].get<uint64_t>();
    return value <= (1u << 24) ? value : 0;
  };
  served.mtp_layers = std::min<uint64_t>(count("num_nextn_predict_layers"), 64);
  served.draft_vocab_size = count("draft_vocab_size");
}

}  // namespace

std::optional<std::string> modelopt_kv_cache_dtype(const std::string& quant_config_json) {
  auto quant = nlohmann::json::parse(quant_config_json, nullptr, false);
  if (quant.is_discarded() || !quant.is_object()) return std::nullopt;
  const bool modelopt = (quant.contains("producer") && quant["producer"].is_object() &&
                         text_of(quant["producer"], "name") == "modelopt") ||
                        text_of(quant, "quant_method").rfind("modelopt", 0) == 0;
  return modelopt ? modelopt_kv_in(quant) : std::nullopt;
}

std::optional<std::string> unsupported_state_layers(const std::string& config_text) {
  auto config = nlohmann::json::parse(config_text, nullptr, false);
  if (config.is_discarded()) return std::nullopt;   // the model reader reports bad JSON itself
  if (auto why = state_layers_in(config)) return why;
  // Multimodal wrappers keep the language model in text_config (one level, as the reader does).
  if (config.is_object() && config.contains("text_config")) return state_layers_in(config["text_config"]);
  return std::nullopt;
}

Result<ServedModel> resolve_served_model(const std::string& name) {
  // Refuse hybrid state-space / linear-attention models before the reader sizes them as plain
  // transformers (or calls their model_type unknown): a wrong KV figure is worse than none.
  if (auto path = config_path_for(name)) {
    if (auto text = read_small_file(*path); text) {
      if (auto why = unsupported_state_layers(text.value())) {
        return Error{fmt::format(
            "{}: {}; vLLM keeps a fixed-size recurrent state per request for those layers (MambaSpec, "
            "page size unified with the attention layers) and oomdoc serve does not size it yet", *path, *why)};
      }
    }
  }
  auto direct = resolve_model(name);
  if (direct) {
    // A local config without _name_or_path has no id: the path the user gave names it.
    if (direct->id.empty()) direct->id = name;
    ServedModel served{std::move(direct.value()), "", std::nullopt, ""};
    if (auto path = config_path_for(name)) read_checkpoint_kv_cache_dtype(*path, served);
    read_speculative_fields(name, served);
    return served;
  }
  auto base = quantized_base(name);
  if (!base) return direct.error();
  std::string id = base->spec.id;
  // The named checkpoint is quantized its own way; the base config's format does not apply.
  base->spec.quantization.clear();
  base->spec.quantization_bits = 0;
  base->spec.quantization_group_size = 0;
  base->spec.quantization_double_quant = false;
  ServedModel served{std::move(base->spec),
                     fmt::format("'{}' was not found; sized as its base model {} with the quantization its name says", name, id),
                     std::nullopt, ""};
  read_speculative_fields(id, served);
  return served;
}

Result<ModelSpec> resolve_checkpoint_name(const std::string& name) {
  auto direct = resolve_model(name);
  if (direct) return direct;
  auto base = quantized_base(name);
  if (!base) return direct.error();
  ModelSpec spec = std::move(base->spec);
  spec.quantization = base->format->method;
  spec.quantization_bits = base->format->bits;
  spec.quantization_group_size = base->format->group_size;
  spec.quantization_double_quant = base->format->double_quant;
  // The compressed-tensors suffixes (w8a8, w8a16, w4a16, int8) all name integer weights.
  spec.quantization_integers = base->format->method == "compressed-tensors";
  spec.notes.push_back(fmt::format("'{}' was not found: read as its base model {} with {}-bit {} weights, as the name's "
                                   "\"{}\" says (the checkpoint's own config.json is exact)",
                                   name, spec.id, base->format->bits, base->format->method, base->format->suffix));
  // The model is the checkpoint the user named; where its shape came from is the source.
  spec.base_model_id = spec.id;
  spec.id = name;
  return spec;
}

}  // namespace oomdoc
