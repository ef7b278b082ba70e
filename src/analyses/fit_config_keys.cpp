#include "analyses/fit_config_keys.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iterator>
#include <sstream>

#include <string_view>

namespace oomdoc {
namespace {

constexpr const char* kAxolotl = "Axolotl YAML";
constexpr const char* kLlamaFactory = "LLaMA-Factory YAML";
constexpr const char* kTrlYaml = "TRL YAML";

// A Python literal as YAML: True/False lower case, a quoted string bare, torch dtypes by name.
std::string yaml_value(std::string v) {
  auto replace_all = [&](std::string_view from, std::string_view to) {
    for (size_t at = v.find(from); at != std::string::npos; at = v.find(from, at + to.size())) {
      v.replace(at, from.size(), to);
    }
  };
  replace_all("True", "true");
  replace_all("False", "false");
  replace_all("torch.bfloat16", "bfloat16");
  replace_all("torch.float16", "float16");
  replace_all("torch.float32", "float32");
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"' && v.find('"', 1) == v.size() - 1) v = v.substr(1, v.size() - 2);
  return v;
}

// Axolotl's config keys (axolotl/utils/schemas/config.py).
std::vector<FitSetting> axolotl_keys(const FitSetting& s) {
  const std::string& t = s.target;
  const std::string& n = s.name;
  const std::string v = yaml_value(s.value);
  auto key = [&](std::string name, std::string value) { return FitSetting{kAxolotl, std::move(name), std::move(value)}; };
  if (t == "TrainingArguments") {
    if (n == "per_device_train_batch_size") return {key("micro_batch_size", v)};
    if (n == "gradient_accumulation_steps" || n == "gradient_checkpointing" || n == "gradient_checkpointing_kwargs" ||
        n == "bf16" || n == "fp16") {
      return {key(n, v)};
    }
    if (n == "optim") return {key("optimizer", v)};
    if (n == "fsdp") {
      // TrainingArguments' "full_shard offload auto_wrap" is Axolotl's list of the same words.
      std::istringstream words(v);
      std::vector<std::string> list{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
      return {key("fsdp", fmt::format("[{}]", fmt::join(list, ", ")))};
    }
    if (n == "deepspeed") return {key("deepspeed", "a JSON file holding " + v)};  // JSON: true, not True
    if (n == "use_liger_kernel") {
      return {key("plugins", "[axolotl.integrations.liger.LigerPlugin]"), key("liger_rms_norm", "true"),
              key("liger_glu_activation", "true"), key("liger_fused_linear_cross_entropy", "true")};
    }
  } else if (t == "SFTConfig") {
    if (n == "max_length") return {key("sequence_len", v)};
  } else if (t == "LoraConfig") {
    if (n == "r") return {key("adapter", "lora"), key("lora_r", v)};
    if (n == "lora_alpha") return {key("lora_alpha", v)};
    if (n == "target_modules" && v == "all-linear") return {key("lora_target_linear", "true")};
    if (n == "task_type") return {};
  } else if (t == "BitsAndBytesConfig") {
    if (n == "load_in_4bit") return {key("adapter", "qlora"), key("load_in_4bit", v)};
    if (n == "load_in_8bit") return {key("load_in_8bit", v)};
    if (n == "bnb_4bit_quant_type" || n == "bnb_4bit_use_double_quant" || n == "bnb_4bit_quant_storage") {
      return {key("bnb_config_kwargs", "{" + n + ": " + v + "}")};
    }
    if (n == "bnb_4bit_compute_dtype") return {};  // Axolotl computes in its bf16/fp16 setting
  } else if (t == "from_pretrained") {
    if (n == "attn_implementation" && v == "flash_attention_2") return {key("flash_attention", "true")};
    if (n == "attn_implementation" && v == "sdpa") return {key("sdp_attention", "true")};
    // Axolotl loads in its bf16/fp16 setting's dtype; fp32 masters are what its fp16 AMP keeps.
    if (n == "torch_dtype") return v == "float32" ? std::vector<FitSetting>{} : std::vector<FitSetting>{key(v == "float16" ? "fp16" : "bf16", "true")};
  }
  return {s};
}

// LLaMA-Factory's keys (src/llamafactory/hparams: model_args, finetuning_args, data_args), on top
// of the TrainingArguments keys it takes as they are.
std::vector<FitSetting> llama_factory_keys(const FitSetting& s) {
  const std::string& t = s.target;
  const std::string& n = s.name;
  const std::string v = yaml_value(s.value);
  auto key = [&](std::string name, std::string value) { return FitSetting{kLlamaFactory, std::move(name), std::move(value)}; };
  if (t == "TrainingArguments") {
    if (n == "per_device_train_batch_size" || n == "gradient_accumulation_steps" || n == "bf16" || n == "fp16" ||
        n == "optim") {
      return {key(n, v)};
    }
    if (n == "gradient_checkpointing") return {key("disable_gradient_checkpointing", v == "true" ? "false" : "true")};
    if (n == "deepspeed") return {key("deepspeed", "a JSON file holding " + v)};  // JSON: true, not True
    if (n == "use_liger_kernel") return {key("enable_liger_kernel", v)};
    // LLaMA-Factory sets use_reentrant itself from use_reentrant_gc (default true).
    if (n == "gradient_checkpointing_kwargs" && v.find("\"use_reentrant\": false") != std::string::npos) {
      return {key("use_reentrant_gc", "false")};
    }
  } else if (t == "SFTConfig") {
    if (n == "max_length") return {key("cutoff_len", v)};
  } else if (t == "LoraConfig") {
    if (n == "r") return {key("finetuning_type", "lora"), key("lora_rank", v)};
    if (n == "lora_alpha") return {key("lora_alpha", v)};
    if (n == "target_modules" && v == "all-linear") return {key("lora_target", "all")};
    if (n == "task_type") return {};
  } else if (t == "BitsAndBytesConfig") {
    // (The method said outright: a file set to HQQ or EETQ would otherwise keep it, and EETQ refuses 4 bits.)
    if (n == "load_in_4bit") return {key("quantization_bit", "4"), key("quantization_method", "bnb")};
    if (n == "load_in_8bit") return {key("quantization_bit", "8"), key("quantization_method", "bnb")};
    if (n == "bnb_4bit_quant_type") return {key("quantization_type", v)};
    if (n == "bnb_4bit_use_double_quant") return {key("double_quantization", v)};
    if (n == "bnb_4bit_compute_dtype") return {};  // LLaMA-Factory computes in its bf16/fp16 setting
  } else if (t == "from_pretrained") {
    if (n == "attn_implementation" && v == "flash_attention_2") return {key("flash_attn", "fa2")};
    if (n == "attn_implementation" && v == "sdpa") return {key("flash_attn", "sdpa")};
    // LLaMA-Factory loads the model in its compute dtype and upcasts the trainable weights to fp32
    // (cast_trainable_params_to_fp32) unless pure_bf16: bf16 weights are that key.
    if (n == "torch_dtype" && v == "bfloat16") return {key("pure_bf16", "true")};
    if (n == "torch_dtype") return {};   // LLaMA-Factory loads as its bf16/fp16 setting says
  }
  return {s};
}

// TRL's CLI YAML (`trl sft --config file.yaml`): SFTConfig/TrainingArguments keys as they are, plus
// ModelConfig's model, PEFT and quantization keys (trl/trainer/model_config.py).
std::vector<FitSetting> trl_yaml_keys(const FitSetting& s) {
  const std::string& t = s.target;
  const std::string& n = s.name;
  const std::string v = yaml_value(s.value);
  auto key = [&](std::string name, std::string value) { return FitSetting{kTrlYaml, std::move(name), std::move(value)}; };
  if (t == "TrainingArguments" || t == "SFTConfig") {
    if (n == "deepspeed") return {key("deepspeed", "a JSON file holding " + v)};
    return {key(n, v)};
  }
  if (t == "LoraConfig") {
    // lora_dropout 0 as sized (PEFT's LoraConfig default): TRL's ModelConfig would make it 0.05.
    if (n == "r") return {key("use_peft", "true"), key("lora_r", v), key("lora_dropout", "0")};
    if (n == "lora_alpha") return {key("lora_alpha", v)};
    if (n == "target_modules") return {key("lora_target_modules", v)};
    if (n == "task_type") return {key("lora_task_type", v)};
  } else if (t == "BitsAndBytesConfig") {
    if (n == "load_in_4bit" || n == "load_in_8bit" || n == "bnb_4bit_quant_type") return {key(n, v)};
    if (n == "bnb_4bit_use_double_quant") return {key("use_bnb_nested_quant", v)};
  } else if (t == "from_pretrained") {
    if (n == "attn_implementation" || n == "torch_dtype") return {key(n, v)};
  }
  return {s};
}

void rewrite(std::vector<FitSetting>& settings, TrainingConfigFormat format, bool yaml_file) {
  std::vector<FitSetting> out;
  for (const auto& s : settings) {
    auto keys = format == TrainingConfigFormat::kHfTrainingArguments && yaml_file ? trl_yaml_keys(s)
                                                                                 : config_keys_for(s, format);
    for (auto& k : keys) {
      // One key once (LoRA's r and a QLoRA's load_in_4bit both say which adapter).
      bool seen = false;
      for (auto& o : out) {
        if (o.target == k.target && o.name == k.name) {
          if (k.name == "adapter") o.value = (o.value == "qlora" || k.value == "qlora") ? "qlora" : k.value;
          // Axolotl's bnb_config_kwargs is one mapping: its entries join.
          if (k.name == "bnb_config_kwargs" && o.value.size() > 1 && k.value.size() > 1 &&
              o.value.find(k.value.substr(1, k.value.size() - 2)) == std::string::npos) {
            o.value = o.value.substr(0, o.value.size() - 1) + ", " + k.value.substr(1);
          }
          seen = true;
        }
      }
      if (!seen) out.push_back(std::move(k));
    }
  }
  settings = std::move(out);
}

}  // namespace

std::vector<FitSetting> config_keys_for(const FitSetting& setting, TrainingConfigFormat format) {
  switch (format) {
    case TrainingConfigFormat::kAxolotl: return axolotl_keys(setting);
    case TrainingConfigFormat::kLlamaFactory: return llama_factory_keys(setting);
    case TrainingConfigFormat::kHfTrainingArguments: return {setting};
  }
  return {setting};
}

void express_in_config_keys(FitReport& report, const TrainingConfig& config) {
  const TrainingConfigFormat format = config.format;
  const bool yaml_file = config.yaml_syntax;
  if (report.plan) {
    for (auto& c : report.plan->changes) rewrite(c.settings, format, yaml_file);
  }
  for (auto& a : report.alternatives) rewrite(a.change.settings, format, yaml_file);
}

}  // namespace oomdoc
