#include "readers/training_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include "core/file_input.h"
#include "core/text.h"

namespace oomdoc {
namespace {

// Parser messages can quote the offending bytes; keep the one-line error printable and short.
std::string quoted_message(std::string_view text) { return printable(text, 200); }

bool is_null(const YAML::Node& node) {
  return !node || node.IsNull() || (node.IsScalar() && (node.Scalar() == "~" || node.Scalar().empty()));
}

// Reading state shared by every key handler.
struct Reader {
  std::string display_name;
  std::string base_dir;
  TrainingConfig out;
  // Set by keys whose meaning depends on others (resolved after every key is read).
  std::optional<std::string> adapter;   // lora, qlora, full, freeze
  std::optional<uint64_t> quant_bits;   // 4 or 8 (load_in_4bit / quantization_bit)
  std::string quant_method;             // LLaMA-Factory's quantization_method ("bnb", "hqq", "eetq")
  std::string quant_method_where;       // its file, line and key, for messages
  std::optional<uint64_t> load_in_bits;  // the load_in_4bit / load_in_8bit given as true
  std::optional<std::string> quant_type;  // nf4, fp4
  bool disable_checkpointing_llamafactory = false;
  bool upcast_layernorm = false;             // LLaMA-Factory upcast_layernorm
  bool checkpointing_given = false;
  bool gradient_checkpointing_true = false;   // the gradient_checkpointing key given as true
  bool fsdp_activation_checkpointing = false; // fsdp_config's activation_checkpointing given as true
  // Which LoRA keys the config gives: LLaMA-Factory fills the others with its own defaults.
  bool lora_r_given = false, lora_alpha_given = false, lora_targets_given = false, lora_dropout_given = false;
  std::optional<std::string> autocast;       // bf16 / fp16 from the bf16/fp16 flags
  std::optional<std::string> half_true;      // bf16 or fp16 given as true (not "auto")
  std::optional<std::string> pure;           // pure 16-bit training asked for explicitly
  std::optional<std::string> weights_dtype;  // torch_dtype the model is loaded in
  // A TrainingArguments-style file written for TRL (SFTConfig / ModelConfig keys), and which of
  // the settings whose TRL default differs from TrainingArguments' it gives (null included).
  bool trl = false;
  bool max_length_given = false, bf16_given = false, loss_type_given = false;
  std::optional<std::string> stage;      // LLaMA-Factory stage (sft, pt, dpo, kto, rm, ppo)
  std::optional<std::string> pref_loss;  // LLaMA-Factory pref_loss (sigmoid, orpo, simpo, ...)
  bool dpo_keys = false;                  // a TRL DPOConfig's reference-model keys are present
  bool preference_keys = false;           // keys of TRL's preference trainers (beta, max_prompt_length...)
  bool cpo_keys = false;                  // CPOConfig's own keys (cpo_alpha, simpo_gamma)
  bool online_rl = false;                 // GRPOConfig's loss_type (grpo, dr_grpo...): no preference pairs
  std::string preference_loss;            // the objective a preference trainer's loss_type names
  // The optimizer a DeepSpeed config's "optimizer" block names (its "type"), as oomdoc sizes it.
  std::optional<std::string> deepspeed_optimizer, deepspeed_optimizer_type;

  std::string where(const YAML::Node& node, std::string_view key) const {
    return fmt::format("{}: line {}: {}", display_name, node.Mark().line + 1, key);
  }
  void warn(std::string message) { out.warnings.push_back(std::move(message)); }
  LoraSettings& lora() {
    if (!out.job.lora) out.job.lora = LoraSettings{};
    return *out.job.lora;
  }
};

using Handler = std::function<Status(const YAML::Node&, std::string_view key, Reader&)>;

Result<bool> as_bool(const YAML::Node& node, std::string_view key, const Reader& r) {
  const std::string v = node.IsScalar() ? to_lower(node.Scalar()) : "";
  if (v == "true" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "no" || v == "off") return false;
  return make_error(fmt::format("{}: expected true or false, got '{}'", r.where(node, key),
                                node.IsScalar() ? node.Scalar() : "a list or map"));
}

Result<uint64_t> as_count(const YAML::Node& node, std::string_view key, const Reader& r) {
  const std::string v = node.IsScalar() ? node.Scalar() : "";
  // Digits only: a negative, fractional or huge value is a mistake, not something to round.
  const bool digits = !v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits && v.size() > 12) {
    return make_error(fmt::format("{}: {} is implausibly large (more than 12 digits)", r.where(node, key),
                                  printable(v, 40)));
  }
  if (!digits) {
    return make_error(fmt::format("{}: expected a whole number, got '{}'", r.where(node, key),
                                  node.IsScalar() ? v : "a list or map"));
  }
  return *parse_decimal<uint64_t>(v);   // at most 12 digits, checked above
}

Result<double> as_number(const YAML::Node& node, std::string_view key, const Reader& r) {
  try {
    return node.as<double>();
  } catch (const YAML::Exception&) {
    return make_error(fmt::format("{}: expected a number, got '{}'", r.where(node, key),
                                  node.IsScalar() ? node.Scalar() : "a list or map"));
  }
}

// Positive integers: a zero batch or length is as wrong as a negative one.
Handler set_count(std::optional<uint64_t> Job::*field) {
  return [field](const YAML::Node& n, std::string_view key, Reader& r) -> Status {
    auto v = as_count(n, key, r);
    if (!v) return v.error();
    if (*v == 0) return make_error(fmt::format("{}: must be at least 1", r.where(n, key)));
    r.out.job.*field = *v;
    return Ok{};
  };
}

Handler set_flag(std::optional<bool> Job::*field) {
  return [field](const YAML::Node& n, std::string_view key, Reader& r) -> Status {
    auto v = as_bool(n, key, r);
    if (!v) return v.error();
    r.out.job.*field = *v;
    return Ok{};
  };
}

Handler set_string(std::string Job::*field) {
  return [field](const YAML::Node& n, std::string_view key, Reader& r) -> Status {
    if (!n.IsScalar()) return make_error(fmt::format("{}: expected a name", r.where(n, key)));
    r.out.job.*field = n.Scalar();
    return Ok{};
  };
}

// HF OptimizerNames (transformers/training_args.py) and Axolotl's optimizer values, mapped onto
// the estimator's optimizer kinds and, where the name fixes it, the implementation: the fused
// kernels (torch's fused=True, apex FusedAdam, the NPU kernel) keep no state-sized temporary,
// transformers' own AdamW (adamw_hf) steps parameter by parameter. Paged 32-bit AdamW keeps fp32
// states in unified memory (the estimator's paged_adamw_32bit).
}  // namespace

std::optional<TrainerOptimizer> trainer_optimizer(std::string name) {
  name = to_lower(name);
  static const std::map<std::string, TrainerOptimizer> kNames = {
      {"adamw_torch", {"adamw", std::nullopt}}, {"adamw_torch_fused", {"adamw", "fused"}},
      {"adamw_hf", {"adamw", "for_loop"}}, {"adamw_apex_fused", {"adamw", "fused"}},
      {"adamw_torch_xla", {"adamw", std::nullopt}}, {"adamw_torch_npu_fused", {"adamw", "fused"}},
      {"adamw", {"adamw", std::nullopt}}, {"adam", {"adamw", std::nullopt}},
      {"paged_adamw_32bit", {"paged_adamw_32bit", std::nullopt}},
      {"adamw_bnb_8bit", {"adamw_8bit", std::nullopt}}, {"adamw_8bit", {"adamw_8bit", std::nullopt}},
      {"paged_adamw_8bit", {"paged_adamw_8bit", std::nullopt}}, {"paged_adamw", {"paged_adamw_32bit", std::nullopt}},  // bitsandbytes PagedAdamW: 32-bit
      {"adafactor", {"adafactor", std::nullopt}}, {"sgd", {"sgd", std::nullopt}},
      {"lion_32bit", {"lion", std::nullopt}}, {"lion", {"lion", std::nullopt}},
      // torchao's low-bit AdamW (transformers' adamw_torch_4bit / adamw_torch_8bit): AdamW4bit is
      // the estimator's adamw_4bit; AdamW8bit keeps two 8-bit states and a scale per block of 256
      // (torchao/optim/subclass_8bit.py, block_size 256), the same bytes as bitsandbytes' blockwise
      // 8-bit state, so it is sized as adamw_8bit.
      {"adamw_torch_4bit", {"adamw_4bit", std::nullopt}}, {"adamw_torch_8bit", {"adamw_8bit", std::nullopt}},
  };
  auto it = kNames.find(name);
  if (it == kNames.end()) return std::nullopt;
  return it->second;
}

namespace {

Status set_optimizer(const YAML::Node& n, std::string_view key, Reader& r) {
  if (!n.IsScalar()) return make_error(fmt::format("{}: expected an optimizer name", r.where(n, key)));
  if (auto name = trainer_optimizer(n.Scalar())) {
    r.out.job.optimizer = name->kind;
    if (name->impl) r.out.job.optimizer_impl = *name->impl;
  } else {
    r.warn(fmt::format("{}: optimizer '{}' is not modelled; the estimator's default is used",
                       r.where(n, key), n.Scalar()));
  }
  return Ok{};
}

// bf16 / fp16 flags of TrainingArguments and Axolotl turn on autocast. Whether that is "mixed"
// (fp32 weights kept) or 16-bit weights depends on the dtype the model is loaded in: resolve().
// Axolotl's "auto" picks bf16 where supported and "full" only adds bf16_full_eval.
Handler set_half_flag(std::string half) {
  return [half](const YAML::Node& n, std::string_view key, Reader& r) -> Status {
    if (n.IsScalar() && (to_lower(n.Scalar()) == "auto" || to_lower(n.Scalar()) == "full")) {
      r.autocast = half;
      if (half == "bf16" && to_lower(n.Scalar()) == "auto") r.out.bf16_auto = true;
      return Ok{};
    }
    auto v = as_bool(n, key, r);
    if (!v) return v.error();
    if (!*v) return Ok{};
    // transformers' TrainingArguments refuses the pair: "At most one of fp16 and bf16 can be True,
    // but not both" (training_args.py __post_init__); Axolotl's validation does too.
    if (r.half_true && *r.half_true != half) {
      return make_error(fmt::format("{}: {} and {} are both true; at most one can be (transformers refuses the pair)",
                                    r.where(n, key), *r.half_true, half));
    }
    r.half_true = half;
    r.autocast = half;
    return Ok{};
  };
}

// Pure 16-bit training: Axolotl's bfloat16/float16, LLaMA-Factory's pure_bf16.
Handler set_pure(std::string pure) {
  return [pure](const YAML::Node& n, std::string_view key, Reader& r) -> Status {
    auto v = as_bool(n, key, r);
    if (!v) return v.error();
    if (*v) r.pure = pure;
    return Ok{};
  };
}

Status set_gradient_checkpointing(const YAML::Node& n, std::string_view key, Reader& r) {
  r.checkpointing_given = true;
  if (n.IsScalar()) {
    const std::string v = to_lower(n.Scalar());
    // Axolotl: "offload" / "offload_disk" checkpoint to host memory (activations offloaded).
    if (v == "offload" || v == "offload_disk" || v == "unsloth") {
      r.out.job.gradient_checkpointing = "full";
      if (std::find(r.out.job.offload.begin(), r.out.job.offload.end(), "activations") ==
          r.out.job.offload.end()) {
        r.out.job.offload.push_back("activations");
      }
      return Ok{};
    }
  }
  auto b = as_bool(n, key, r);
  if (!b) return b.error();
  r.gradient_checkpointing_true = *b;
  r.out.job.gradient_checkpointing = *b ? "full" : "none";
  return Ok{};
}

// Module names as a YAML list, or LLaMA-Factory's comma-separated string ("q_proj,v_proj").
Result<std::vector<std::string>> module_names(const YAML::Node& n, std::string_view key, Reader& r) {
  std::vector<std::string> names;
  if (n.IsSequence()) {
    for (const auto& item : n) {
      if (!item.IsScalar()) return make_error(fmt::format("{}: expected module names", r.where(n, key)));
      names.push_back(item.Scalar());
    }
  } else if (n.IsScalar()) {
    std::string text = n.Scalar();
    // A number or a boolean names no module (PEFT would find no target): said where it is written.
    const std::string lower = to_lower(text);
    if (!text.empty() && (text.find_first_not_of("0123456789.-") == std::string::npos || lower == "true" ||
                          lower == "false")) {
      return make_error(fmt::format("{}: expected module names (q_proj,v_proj or a list), got {}", r.where(n, key),
                                    text));
    }
    size_t start = 0;
    while (start <= text.size()) {
      size_t comma = text.find(',', start);
      std::string name = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      name.erase(0, name.find_first_not_of(' '));
      name.erase(name.find_last_not_of(' ') + 1);
      if (!name.empty()) names.push_back(name);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else if (!n.IsNull()) {
    return make_error(fmt::format("{}: expected module names", r.where(n, key)));
  }
  return names;
}

// lora_modules_to_save (PEFT, Axolotl, TRL), additional_target (LLaMA-Factory).
Status set_modules_to_save(const YAML::Node& n, std::string_view key, Reader& r) {
  auto names = module_names(n, key, r);
  if (!names) return names.error();
  r.lora().modules_to_save = *names;
  return Ok{};
}

Status set_lora_targets(const YAML::Node& n, std::string_view key, Reader& r) {
  r.lora_targets_given = true;
  auto& lora = r.lora();
  lora.target_modules.clear();
  auto listed = module_names(n, key, r);
  if (!listed) return listed.error();
  std::vector<std::string> names = *listed;
  // LLaMA-Factory's "all" too. Axolotl's lora_target_linear adds every linear layer to the names
  // listed here (a union), whichever key comes first.
  if (names.size() == 1 && (to_lower(names[0]) == "all" || names_all_linear(to_lower(names[0])))) {
    lora.all_linear = true;
  } else {
    lora.target_modules = names;
  }
  return Ok{};
}

Status set_lora_all_linear(const YAML::Node& n, std::string_view key, Reader& r) {
  auto v = as_bool(n, key, r);
  if (!v) return v.error();
  if (*v) {
    r.lora_targets_given = true;
    r.lora().all_linear = true;
  }
  return Ok{};
}

Status set_lora_r(const YAML::Node& n, std::string_view key, Reader& r) {
  auto v = as_count(n, key, r);
  if (!v) return v.error();
  if (*v == 0) return make_error(fmt::format("{}: must be at least 1", r.where(n, key)));
  r.lora().r = *v;
  r.lora_r_given = true;
  return Ok{};
}

Status set_lora_alpha(const YAML::Node& n, std::string_view key, Reader& r) {
  auto v = as_number(n, key, r);
  if (!v) return v.error();
  r.lora().alpha = *v;
  r.lora_alpha_given = true;
  return Ok{};
}

Status set_lora_dropout(const YAML::Node& n, std::string_view key, Reader& r) {
  auto v = as_number(n, key, r);
  if (!v) return v.error();
  if (!(*v >= 0 && *v < 1)) return make_error(fmt::format("{}: expected a probability in [0, 1), got {}", r.where(n, key), *v));
  r.lora().dropout = *v;
  r.lora_dropout_given = true;
  return Ok{};
}

// load_in_4bit / load_in_8bit: both true is no one quantization (transformers' BitsAndBytesConfig
// refuses it: "load_in_4bit and load_in_8bit are both True, but only one can be used").
Handler set_quant_bits(uint64_t bits) {
  return [bits](const YAML::Node& n, std::string_view key, Reader& r) -> Status {
    auto v = as_bool(n, key, r);
    if (!v) return v.error();
    if (!*v) return Ok{};
    if (r.load_in_bits && *r.load_in_bits != bits) {
      return make_error(fmt::format("{}: load_in_4bit and load_in_8bit are both true; only one can be", r.where(n, key)));
    }
    r.load_in_bits = bits;
    r.quant_bits = bits;
    return Ok{};
  };
}

Status set_quantization_bit(const YAML::Node& n, std::string_view key, Reader& r) {
  auto v = as_count(n, key, r);
  if (!v) return v.error();
  if (*v != 4 && *v != 8) {
    r.warn(fmt::format("{}: {}-bit quantization is not modelled; the job is read unquantized",
                       r.where(n, key), *v));
    return Ok{};
  }
  r.quant_bits = *v;
  return Ok{};
}

// LLaMA-Factory's quantization_method for on-the-fly quantization (QuantizationMethod in
// src/llamafactory/extras/constants.py; model/model_utils/quantization.py): bitsandbytes by default,
// or HQQ or EETQ. Checked against quantization_bit once both are read.
Status set_quantization_method(const YAML::Node& n, std::string_view key, Reader& r) {
  if (!n.IsScalar()) return make_error(fmt::format("{}: expected a quantization method name", r.where(n, key)));
  r.quant_method = to_lower(n.Scalar());
  r.quant_method_where = r.where(n, key);
  return Ok{};
}

Status set_quant_type(const YAML::Node& n, std::string_view key, Reader& r) {
  const std::string v = n.IsScalar() ? to_lower(n.Scalar()) : "";
  if (v != "nf4" && v != "fp4") {
    return make_error(fmt::format("{}: expected nf4 or fp4, got '{}'", r.where(n, key), v));
  }
  r.quant_type = v;
  return Ok{};
}

Status set_double_quant(const YAML::Node& n, std::string_view key, Reader& r) {
  auto v = as_bool(n, key, r);
  if (!v) return v.error();
  r.out.job.double_quant = *v;
  return Ok{};
}

// Axolotl bnb_config_kwargs: {bnb_4bit_quant_type: nf4, bnb_4bit_use_double_quant: true}
Status set_bnb_kwargs(const YAML::Node& n, std::string_view key, Reader& r) {
  if (!n.IsMap()) return make_error(fmt::format("{}: expected a map", r.where(n, key)));
  if (auto t = n["bnb_4bit_quant_type"]; t && !is_null(t)) {
    if (auto s = set_quant_type(t, "bnb_4bit_quant_type", r); !s) return s;
  }
  if (auto d = n["bnb_4bit_use_double_quant"]; d && !is_null(d)) {
    if (auto s = set_double_quant(d, "bnb_4bit_use_double_quant", r); !s) return s;
  }
  return Ok{};
}

Status set_adapter(const YAML::Node& n, std::string_view key, Reader& r) {
  const std::string v = n.IsScalar() ? to_lower(n.Scalar()) : "";
  if (v == "lora" || v == "qlora" || v == "full" || v == "freeze") {
    r.adapter = v;
    return Ok{};
  }
  if (v == "oft" || v == "boft" || v == "vera" || v == "ia3" || v == "galore" || v == "badam" ||
      v == "apollo") {
    r.warn(fmt::format("{}: '{}' is not modelled; read as LoRA (a close upper bound for adapter "
                       "methods with few trainable parameters)", r.where(n, key), v));
    r.adapter = "lora";
    return Ok{};
  }
  return make_error(fmt::format("{}: unknown adapter '{}' (expected lora, qlora, full or freeze)",
                                r.where(n, key), v));
}

// Axolotl's rl: the preference trainer it runs (TRL's).
Status set_axolotl_rl(const YAML::Node& n, std::string_view key, Reader& r) {
  const std::string v = n.IsScalar() ? to_lower(n.Scalar()) : "";
  if (v.empty() || v == "false" || v == "null") return Ok{};
  if (v == "dpo" || v == "ipo" || v == "kto" || v == "orpo" || v == "simpo") {
    r.out.job.objective = v;
    return Ok{};
  }
  r.warn(fmt::format("{}: '{}' is not modelled (it generates completions or keeps more models); sized as "
                     "supervised fine-tuning, a lower bound", r.where(n, key), v));
  return Ok{};
}

Status set_text_of(std::optional<std::string> Reader::*field, const YAML::Node& n, std::string_view key, Reader& r) {
  if (!n.IsScalar()) return make_error(fmt::format("{}: expected a name", r.where(n, key)));
  r.*field = to_lower(n.Scalar());
  return Ok{};
}

Status set_use_peft(const YAML::Node& n, std::string_view key, Reader& r) {
  auto v = as_bool(n, key, r);
  if (!v) return v.error();
  if (*v && !r.adapter) r.adapter = "lora";
  return Ok{};
}

// attn_implementation (transformers), flash_attn (LLaMA-Factory), Axolotl's booleans.
Status set_attention_name(const YAML::Node& n, std::string_view key, Reader& r) {
  const std::string v = n.IsScalar() ? to_lower(n.Scalar()) : "";
  if (v == "flash_attention_2" || v == "flash_attention_3" || v == "fa2" || v == "fa3" ||
      v == "flash") {
    r.out.job.attention_impl = "flash";
  } else if (v == "flex" || v == "flex_attention" || v == "sage" || v == "s2" || v == "fp8") {
    // Axolotl's attn_implementation backends that, like FlashAttention, never hold the
    // seq x seq scores (FlexAttention, SageAttention, S2 shifted-sparse, FP8 flash).
    r.out.job.attention_impl = "flash";
  } else if (v == "sdpa" || v == "xformers") {
    r.out.job.attention_impl = "sdpa";
  } else if (v == "eager" || v == "disabled") {
    r.out.job.attention_impl = "eager";
  } else if (v == "auto") {
    // LLaMA-Factory's default: SDPA when available.
    r.out.job.attention_impl = "sdpa";
  } else {
    r.warn(fmt::format("{}: attention '{}' is not modelled; the estimator's default is used",
                       r.where(n, key), v));
  }
  return Ok{};
}

Handler set_attention_flag(std::string impl) {
  return [impl](const YAML::Node& n, std::string_view key, Reader& r) -> Status {
    auto v = as_bool(n, key, r);
    if (!v) return v.error();
    if (*v) r.out.job.attention_impl = impl;
    return Ok{};
  };
}

Handler set_loss(std::string impl) {
  return [impl](const YAML::Node& n, std::string_view key, Reader& r) -> Status {
    auto v = as_bool(n, key, r);
    if (!v) return v.error();
    if (*v) r.out.job.loss_impl = impl;
    return Ok{};
  };
}

// TRL SFTConfig.loss_type: "chunked_nll" drops the ignored tokens before the output head and
// computes the cross-entropy over 256-token chunks, each recomputed in backward, so no full
// [tokens x vocab] logits exist: the estimator's fused-linear loss (huggingface/trl#5575).
// "nll" and "dft" compute the full logits.
// Other TRL trainers name their own losses here, and those name the trainer: DPOConfig's
// ("sigmoid", "ipo", ... or a list of them, trl/trainer/dpo_config.py), CPOConfig's "simpo",
// KTOConfig's "kto" and "apo_zero_unpaired". GRPO's ("grpo", "dr_grpo"...) change nothing sized.
Status set_trl_loss_type(const YAML::Node& n, std::string_view, Reader& r) {
  static const std::set<std::string> kDpoLosses = {"sigmoid", "hinge", "exo_pair", "nca_pair", "robust", "bco_pair",
                                                   "sppo_hard", "aot", "aot_pair", "apo_zero", "apo_down", "discopop"};
  auto objective_of = [](const std::string& loss) -> std::string {
    if (loss == "ipo") return "ipo";
    if (kDpoLosses.count(loss)) return "dpo";
    if (loss == "simpo") return "simpo";
    if (loss == "kto" || loss == "apo_zero_unpaired") return "kto";
    return "";
  };
  if (n.IsSequence()) {
    // (DPOConfig's combined losses, e.g. MPO's [sigmoid, bco_pair, sft]: a DPO run.)
    for (const auto& item : n) {
      if (item.IsScalar() && !objective_of(to_lower(item.Scalar())).empty()) r.preference_loss = "dpo";
    }
    return Ok{};
  }
  const std::string v = n.IsScalar() ? to_lower(n.Scalar()) : "";
  if (v == "chunked_nll") r.out.job.loss_impl = "fused_linear";
  else if (v == "nll" || v == "dft") r.out.job.loss_impl = "standard";
  else if (v == "grpo" || v == "bnpo" || v == "dr_grpo" || v == "dapo") r.online_rl = true;
  else r.preference_loss = objective_of(v);
  return Ok{};
}

void add_offload(Job& job, const std::string& what) {
  if (std::find(job.offload.begin(), job.offload.end(), what) == job.offload.end()) {
    job.offload.push_back(what);
  }
}

// TRL SFTConfig.activation_offloading: the saved tensors of every block go to the CPU as they are
// made (trl/models/activation_offloading.py, torchtune's OffloadActivations).
Status set_activation_offloading(const YAML::Node& n, std::string_view key, Reader& r) {
  auto v = as_bool(n, key, r);
  if (!v) return v.error();
  if (*v) add_offload(r.out.job, "activations");
  return Ok{};
}

// Fused kernels: the Trainer's use_liger_kernel and LLaMA-Factory's enable_liger_kernel apply
// Liger's defaults (its fused linear cross-entropy included, the estimator's default for
// kernels "liger"); LLaMA-Factory's use_unsloth loads the model through Unsloth. Axolotl's
// Liger plugin switches each kernel on by its own key, the loss only with
// liger_fused_linear_cross_entropy: `loss_separately` keeps the standard loss until that key says
// otherwise.
Handler set_kernels(std::string kernels, bool loss_separately = false) {
  return [kernels, loss_separately](const YAML::Node& n, std::string_view key, Reader& r) -> Status {
    auto v = as_bool(n, key, r);
    if (!v) return v.error();
    if (!*v) return Ok{};
    r.out.job.kernels = kernels;
    if (loss_separately && !r.out.job.loss_impl) r.out.job.loss_impl = "standard";
    return Ok{};
  };
}

// LLaMA-Factory's use_unsloth_gc: Unsloth's checkpointing, which offloads each block's input.
Status set_unsloth_checkpointing(const YAML::Node& n, std::string_view key, Reader& r) {
  auto v = as_bool(n, key, r);
  if (!v) return v.error();
  if (!*v) return Ok{};
  r.checkpointing_given = true;
  r.out.job.gradient_checkpointing = "full";
  add_offload(r.out.job, "activations");
  return Ok{};
}

Status set_padding_free(const YAML::Node& n, std::string_view key, Reader& r) {
  auto v = as_bool(n, key, r);
  if (!v) return v.error();
  r.out.job.padding_free = *v;
  return Ok{};
}

// TrainingArguments.accelerator_config: gradient_accumulation_kwargs.sync_each_batch decides
// whether FSDP accumulates unsharded gradients under no_sync() (false, the default) or not.
Status set_accelerator_config(const YAML::Node& n, std::string_view key, Reader& r) {
  if (n.IsNull()) return Ok{};
  if (n.IsScalar()) {  // transformers also takes the path of a JSON file here
    r.warn(fmt::format("{}: the file '{}' is not read; sync_each_batch is taken as false (Accelerate's "
                       "default)", r.where(n, key), n.Scalar()));
    return Ok{};
  }
  if (!n.IsMap()) return make_error(fmt::format("{}: expected a map or a file path", r.where(n, key)));
  const YAML::Node kwargs = n["gradient_accumulation_kwargs"];
  if (!kwargs || kwargs.IsNull()) return Ok{};
  if (!kwargs.IsMap()) {
    return make_error(fmt::format("{}: expected a map", r.where(kwargs, "gradient_accumulation_kwargs")));
  }
  if (const YAML::Node sync = kwargs["sync_each_batch"]; sync && !sync.IsNull()) {
    auto v = as_bool(sync, "sync_each_batch", r);
    if (!v) return v.error();
    r.out.job.sync_each_batch = *v;
  }
  return Ok{};
}

Status set_upcast_layernorm(const YAML::Node& n, std::string_view key, Reader& r) {
  auto v = as_bool(n, key, r);
  if (!v) return v.error();
  r.upcast_layernorm = *v;
  return Ok{};
}

Status set_disable_gc(const YAML::Node& n, std::string_view key, Reader& r) {
  auto v = as_bool(n, key, r);
  if (!v) return v.error();
  r.disable_checkpointing_llamafactory = *v;
  return Ok{};
}

// A DeepSpeed config's "optimizer" block: DeepSpeed builds that optimizer itself and the Trainer
// passes it none (transformers' integrations/deepspeed.py deepspeed_optim_sched), so the config's
// `optim` has no effect. Adam, AdamW and their fused/CPU forms keep two fp32 states per parameter,
// as DeepSpeed's 1-bit and 0/1 Adam and LAMB do; Lion one.
void read_deepspeed_optimizer(const YAML::Node& ds, Reader& r) {
  const YAML::Node optimizer = ds["optimizer"];
  if (!optimizer || !optimizer.IsMap() || !optimizer["type"] || !optimizer["type"].IsScalar()) return;
  const std::string type = optimizer["type"].Scalar();
  const std::string t = to_lower(type);
  r.deepspeed_optimizer_type = type;
  r.deepspeed_optimizer = t == "lion" || t == "fusedlion" ? "lion" : "adamw";
}

// A DeepSpeed config: zero_optimization.stage and its offload_optimizer / offload_param devices.
// A stage that is not 0 to 3 ("three", 5) is an error: DeepSpeed's config model refuses it too.
Status apply_deepspeed_json(const YAML::Node& ds, const std::string& where, Reader& r) {
  const YAML::Node zero = ds["zero_optimization"];
  if (!zero || !zero.IsMap()) {
    r.out.job.parallelism = "ddp";
    return Ok{};
  }
  int stage = 0;
  if (zero["stage"]) {
    const YAML::Node& given = zero["stage"];
    bool valid = false;
    try {
      stage = given.as<int>();
      valid = stage >= 0 && stage <= 3;
    } catch (const YAML::Exception&) {
    }
    if (!valid) {
      return make_error(fmt::format("{}: zero_optimization.stage: '{}' is not a ZeRO stage (0, 1, 2 or 3)", where,
                                    given.IsScalar() ? printable(given.Scalar()) : "a list or map"));
    }
  }
  static const char* kStages[] = {"ddp", "zero1", "zero2", "zero3"};
  r.out.job.parallelism = kStages[stage];
  auto offloaded = [](const YAML::Node& n) {
    if (!n || !n.IsMap() || !n["device"]) return false;
    std::string device = to_lower(n["device"].Scalar());
    return device == "cpu" || device == "nvme";
  };
  if (offloaded(zero["offload_optimizer"])) add_offload(r.out.job, "optimizer");
  if (offloaded(zero["offload_param"])) add_offload(r.out.job, "params");
  // ZeRO-3 steps its fp32 partition sub-group by sub-group (Axolotl's stock zero3 configs set 0:
  // each parameter alone); "auto" and other words leave DeepSpeed's default.
  if (stage == 3 && zero["sub_group_size"] && zero["sub_group_size"].IsScalar()) {
    if (auto n = parse_decimal<double>(zero["sub_group_size"].Scalar()); n && *n >= 0 && *n < 1e15) {
      r.out.job.zero3_sub_group_size = static_cast<uint64_t>(*n);
    }
  }
  read_deepspeed_optimizer(ds, r);
  return Ok{};
}

// DeepSpeed file names as Axolotl and LLaMA-Factory ship them: zero3_bf16_cpuoffload_all.json,
// ds_z3_offload_config.json, zero2.json ...
void apply_deepspeed_name(const std::string& name, Reader& r) {
  const std::string n = to_lower(name);
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("zero3") || has("z3") || has("stage3")) r.out.job.parallelism = "zero3";
  else if (has("zero2") || has("z2") || has("stage2")) r.out.job.parallelism = "zero2";
  else if (has("zero1") || has("z1") || has("stage1")) r.out.job.parallelism = "zero1";
  else if (has("zero0") || has("z0")) r.out.job.parallelism = "ddp";
  if (has("offload_params") || has("cpuoffload_params")) {
    add_offload(r.out.job, "params");
  } else if (has("offload")) {
    add_offload(r.out.job, "optimizer");
    if (has("all") || (r.out.job.parallelism == std::string("zero3") && !has("optim"))) {
      add_offload(r.out.job, "params");
    }
  }
}

Status set_deepspeed(const YAML::Node& n, std::string_view key, Reader& r) {
  if (n.IsMap()) return apply_deepspeed_json(n, r.where(n, key), r);  // a TrainingArguments dump may inline the dict
  if (!n.IsScalar()) return make_error(fmt::format("{}: expected a path or a map", r.where(n, key)));
  const std::string path = n.Scalar();
  std::vector<std::string> candidates;
  if (!path.empty() && path[0] != '/' && !r.base_dir.empty()) candidates.push_back(r.base_dir + "/" + path);
  candidates.push_back(path);
  for (const auto& candidate : candidates) {
    // Only a path that is not there falls back to the name; a directory, an unreadable file or
    // one that is not a DeepSpeed config is reported as it is.
    std::error_code ec;
    if (!std::filesystem::exists(candidate, ec)) continue;
    auto text = read_small_file(candidate, 1 << 20);
    if (!text) return text.error();
    YAML::Node ds;
    try {
      ds = YAML::Load(*text);
    } catch (const YAML::Exception& e) {
      return make_error(fmt::format("{}: line {}: {}", candidate, e.mark.line + 1, quoted_message(e.msg)));
    }
    // DeepSpeed itself refuses an empty config, so it cannot mean "plain DDP".
    if (ds.IsNull()) return make_error(fmt::format("{}: the file is empty (expected a DeepSpeed config object)", candidate));
    if (!ds.IsMap()) return make_error(fmt::format("{}: not a DeepSpeed config (expected an object)", candidate));
    return apply_deepspeed_json(ds, candidate, r);
  }
  apply_deepspeed_name(path, r);
  r.warn(fmt::format("{}: '{}' was not found; ZeRO stage and offload read from its name ({}{})",
                     r.where(n, key), path, r.out.job.parallelism.value_or("no stage in the name"),
                     r.out.job.offload.empty() ? "" : ", offload"));
  return Ok{};
}

// fsdp: "full_shard auto_wrap" (TrainingArguments) or [full_shard, auto_wrap] (Axolotl).
Status set_fsdp(const YAML::Node& n, std::string_view key, Reader& r) {
  std::vector<std::string> tokens;
  if (n.IsSequence()) {
    for (const auto& item : n) tokens.push_back(to_lower(item.Scalar()));
  } else if (n.IsScalar()) {
    std::string text = to_lower(n.Scalar());
    size_t start = 0;
    while (start < text.size()) {
      size_t space = text.find(' ', start);
      if (space == std::string::npos) space = text.size();
      if (space > start) tokens.push_back(text.substr(start, space - start));
      start = space + 1;
    }
  } else {
    return make_error(fmt::format("{}: expected FSDP options", r.where(n, key)));
  }
  for (const auto& t : tokens) {
    if (t == "full_shard") r.out.job.parallelism = "fsdp_full_shard";
    else if (t == "shard_grad_op") r.out.job.parallelism = "fsdp_shard_grad_op";
    else if (t == "hybrid_shard" || t == "hybrid_shard_zero2") r.out.job.parallelism = "hybrid_shard";
    else if (t == "no_shard") r.out.job.parallelism = "ddp";
    else if (t == "offload") add_offload(r.out.job, "params");
  }
  return Ok{};
}

Status set_fsdp_config(const YAML::Node& n, std::string_view key, Reader& r) {
  if (!n.IsMap()) return make_error(fmt::format("{}: expected a map", r.where(n, key)));
  for (const auto& item : n) {
    const std::string k = to_lower(item.first.Scalar());
    const YAML::Node& v = item.second;
    if ((k == "fsdp_offload_params" || k == "offload_params") && v.IsScalar()) {
      auto b = as_bool(v, k, r);
      if (!b) return b.error();
      if (*b) add_offload(r.out.job, "params");
    } else if ((k == "fsdp_sharding_strategy" || k == "sharding_strategy") && v.IsScalar()) {
      std::string s = to_lower(v.Scalar());
      if (s == "full_shard" || s == "1") r.out.job.parallelism = "fsdp_full_shard";
      else if (s == "shard_grad_op" || s == "2") r.out.job.parallelism = "fsdp_shard_grad_op";
      else if (s == "hybrid_shard" || s == "4") r.out.job.parallelism = "hybrid_shard";
      else if (s == "no_shard" || s == "3") r.out.job.parallelism = "ddp";
    } else if (k == "reshard_after_forward" && v.IsScalar()) {
      // FSDP2: false keeps parameters gathered between forward and backward (SHARD_GRAD_OP).
      auto b = as_bool(v, k, r);
      if (!b) return b.error();
      r.out.job.parallelism = *b ? "fsdp_full_shard" : "fsdp_shard_grad_op";
    } else if ((k == "fsdp_activation_checkpointing" || k == "activation_checkpointing") &&
               v.IsScalar()) {
      auto b = as_bool(v, k, r);
      if (!b) return b.error();
      if (*b) r.fsdp_activation_checkpointing = true;   // applied once every key is read (FSDP on?)
    }
  }
  // Axolotl's FSDP2 configs name no strategy: full sharding is the default there. A
  // TrainingArguments dump always carries an fsdp_config, FSDP or not, so it implies nothing.
  if (!r.out.job.parallelism && r.out.format == TrainingConfigFormat::kAxolotl) {
    r.out.job.parallelism = "fsdp_full_shard";
  }
  return Ok{};
}

// TRL ModelConfig / SFTConfig.model_init_kwargs: torch_dtype and attn_implementation.
Status set_torch_dtype(const YAML::Node& n, std::string_view key, Reader& r) {
  const std::string v = n.IsScalar() ? to_lower(n.Scalar()) : "";
  if (v == "bfloat16" || v == "bf16") r.weights_dtype = "bf16";
  else if (v == "float16" || v == "fp16") r.weights_dtype = "fp16";
  else if (v == "float32" || v == "fp32") r.weights_dtype = "fp32";
  return Ok{};
}

Status set_model_init_kwargs(const YAML::Node& n, std::string_view key, Reader& r) {
  if (!n.IsMap()) return make_error(fmt::format("{}: expected a map", r.where(n, key)));
  if (auto a = n["attn_implementation"]; a && !is_null(a)) {
    if (auto s = set_attention_name(a, "attn_implementation", r); !s) return s;
  }
  if (auto d = n["torch_dtype"]; d && !is_null(d)) {
    if (auto s = set_torch_dtype(d, "torch_dtype", r); !s) return s;
  }
  return Ok{};
}

// ---- key tables per format ----

using Table = std::map<std::string, Handler>;

// TrainingArguments keys (transformers/training_args.py) that change memory.
void add_hf_keys(Table& t) {
  // TRL DPOConfig's reference-model keys: read together in resolve() (objective dpo).
  for (const char* key : {"ref_model_init_kwargs", "ref_adapter_name", "sync_ref_model"}) {
    t[key] = [](const YAML::Node&, std::string_view, Reader&) -> Status { return Ok{}; };
  }
  t["precompute_ref_log_probs"] = set_flag(&Job::precompute_ref_log_probs);
  t["per_device_train_batch_size"] = set_count(&Job::micro_batch_size);
  t["gradient_accumulation_steps"] = set_count(&Job::grad_accum_steps);
  t["bf16"] = set_half_flag("bf16");
  t["fp16"] = set_half_flag("fp16");
  t["optim"] = set_optimizer;
  t["gradient_checkpointing"] = set_gradient_checkpointing;
  t["deepspeed"] = set_deepspeed;
  t["fsdp"] = set_fsdp;
  t["fsdp_config"] = set_fsdp_config;
  t["accelerator_config"] = set_accelerator_config;
  t["use_liger_kernel"] = set_kernels("liger");
  // TRL SFTConfig.
  t["max_seq_length"] = set_count(&Job::seq_len);   // TRL < 0.20
  t["max_length"] = set_count(&Job::seq_len);       // TRL >= 0.20
  t["padding_free"] = set_padding_free;
  // Packing fills each row with whole examples to max_length: no example pads its batch, which is
  // what padding_free says of the job (LLaMA-Factory takes the same key).
  t["packing"] = set_padding_free;
  t["loss_type"] = set_trl_loss_type;
  t["activation_offloading"] = set_activation_offloading;
  t["model_init_kwargs"] = set_model_init_kwargs;
  // TRL ModelConfig (TRL's CLI YAML mixes it with SFTConfig).
  t["model_name_or_path"] = set_string(&Job::model);
  t["torch_dtype"] = set_torch_dtype;
  t["dtype"] = set_torch_dtype;
  t["attn_implementation"] = set_attention_name;
  t["use_peft"] = set_use_peft;
  t["lora_r"] = set_lora_r;
  t["lora_alpha"] = set_lora_alpha;
  t["lora_dropout"] = set_lora_dropout;
  t["lora_target_modules"] = set_lora_targets;
  t["lora_modules_to_save"] = set_modules_to_save;
  t["load_in_4bit"] = set_quant_bits(4);
  t["load_in_8bit"] = set_quant_bits(8);
  t["bnb_4bit_quant_type"] = set_quant_type;
  t["use_bnb_nested_quant"] = set_double_quant;
}

// A value that leaves the setting off changes nothing: null, or false as Python reads it (these
// keys are switches, or a list or mode name that is on when given).
bool leaves_default(const YAML::Node& value) {
  if (is_null(value) || !value.IsScalar()) return is_null(value);
  const std::string v = value.Scalar();
  return v == "false" || v == "False" || v == "no" || v == "off" || v == "0" || v.empty();
}

Status set_axolotl_activation_offloading(const YAML::Node& n, std::string_view key, Reader& r) {
  if (!leaves_default(n)) add_offload(r.out.job, "activations");
  (void)key;
  return Ok{};
}

Table axolotl_table() {
  Table t;
  t["base_model"] = set_string(&Job::model);
  t["adapter"] = set_adapter;
  t["load_in_4bit"] = set_quant_bits(4);
  t["load_in_8bit"] = set_quant_bits(8);
  t["bnb_config_kwargs"] = set_bnb_kwargs;
  t["lora_r"] = set_lora_r;
  t["lora_alpha"] = set_lora_alpha;
  t["lora_dropout"] = set_lora_dropout;
  t["lora_target_modules"] = set_lora_targets;
  t["lora_modules_to_save"] = set_modules_to_save;
  t["lora_target_linear"] = set_lora_all_linear;
  t["rl"] = set_axolotl_rl;
  t["sequence_len"] = set_count(&Job::seq_len);
  t["sample_packing"] = set_padding_free;
  t["micro_batch_size"] = set_count(&Job::micro_batch_size);
  t["gradient_accumulation_steps"] = set_count(&Job::grad_accum_steps);
  t["gradient_checkpointing"] = set_gradient_checkpointing;
  t["optimizer"] = set_optimizer;
  t["bf16"] = set_half_flag("bf16");
  t["fp16"] = set_half_flag("fp16");
  t["bfloat16"] = set_pure("bf16");
  t["float16"] = set_pure("fp16");
  t["flash_attention"] = set_attention_flag("flash");
  t["sdp_attention"] = set_attention_flag("sdpa");
  t["xformers_attention"] = set_attention_flag("sdpa");  // memory-efficient kernel, O(s) like SDPA
  t["eager_attention"] = set_attention_flag("eager");
  // Newer Axolotl: one backend name instead of the booleans (axolotl PR #3602, `attention: flash`
  // in its examples).
  t["attn_implementation"] = set_attention_name;
  t["attention"] = set_attention_name;
  t["deepspeed"] = set_deepspeed;
  t["fsdp"] = set_fsdp;
  t["fsdp_config"] = set_fsdp_config;
  t["liger_fused_linear_cross_entropy"] = set_loss("fused_linear");
  t["liger_rms_norm"] = set_kernels("liger", true);
  t["liger_glu_activation"] = set_kernels("liger", true);
  t["liger_swiglu"] = set_kernels("liger", true);
  t["cut_cross_entropy"] = set_loss("fused_linear");
  t["chunked_cross_entropy"] = set_loss("chunked");
  // Axolotl's parallelism degrees (context parallel is its ring attention over the sequence) and
  // activation offloading (true, or a mode name such as "legacy").
  t["context_parallel_size"] = set_count(&Job::cp);
  t["sequence_parallel_degree"] = set_count(&Job::cp);
  t["tensor_parallel_size"] = set_count(&Job::tp);
  t["activation_offloading"] = set_axolotl_activation_offloading;
  return t;
}

// LLaMA-Factory's freeze_trainable_layers: the last N blocks train; a negative value trains the
// first N (finetuning_args.py), which backward must reach through every frozen block above.
Status set_freeze_layers(const YAML::Node& n, std::string_view key, Reader& r) {
  std::string text = n.IsScalar() ? n.Scalar() : "";
  const bool first = text.rfind('-', 0) == 0;
  YAML::Node magnitude = first ? YAML::Node(text.substr(1)) : n;
  auto v = as_count(magnitude, key, r);
  if (!v) return v.error();
  if (*v == 0) return make_error(fmt::format("{}: must not be 0", r.where(n, key)));
  if (first) {
    r.warn(fmt::format("{}: {} trains the first {} blocks: sized as {} trainable blocks, without the "
                       "activations of the frozen blocks above them that backward runs through",
                       r.where(n, key), text, *v, *v));
  }
  r.out.job.freeze_trainable_layers = *v;
  return Ok{};
}

Table llama_factory_table() {
  Table t;
  add_hf_keys(t);
  t["finetuning_type"] = set_adapter;
  t["freeze_trainable_layers"] = set_freeze_layers;
  t["lora_rank"] = set_lora_r;
  t["lora_alpha"] = set_lora_alpha;
  t["lora_dropout"] = set_lora_dropout;
  t["lora_target"] = set_lora_targets;
  t["additional_target"] = set_modules_to_save;
  t["stage"] = [](const YAML::Node& n, std::string_view key, Reader& r) { return set_text_of(&Reader::stage, n, key, r); };
  t["pref_loss"] = [](const YAML::Node& n, std::string_view key, Reader& r) {
    return set_text_of(&Reader::pref_loss, n, key, r);
  };
  t["quantization_bit"] = set_quantization_bit;
  t["quantization_method"] = set_quantization_method;
  t["quantization_type"] = set_quant_type;
  t["double_quantization"] = set_double_quant;
  t["cutoff_len"] = set_count(&Job::seq_len);
  t["neat_packing"] = set_padding_free;
  t["flash_attn"] = set_attention_name;
  t["enable_liger_kernel"] = set_kernels("liger");
  t["use_unsloth"] = set_kernels("unsloth");
  t["use_unsloth_gc"] = set_unsloth_checkpointing;
  t["disable_gradient_checkpointing"] = set_disable_gc;
  t["pure_bf16"] = set_pure("bf16");
  t["upcast_layernorm"] = set_upcast_layernorm;
  return t;
}

Table hf_table() {
  Table t;
  add_hf_keys(t);
  return t;
}

// Known keys that do not change peak memory (logging, data, schedules, hub, evaluation).
// Keys not here and not in a handler table are reported as unknown.
const std::set<std::string>& no_effect_keys() {
  static const std::set<std::string> kKeys = {
      // shared / TrainingArguments
      "output_dir", "overwrite_output_dir", "do_train", "do_eval", "do_predict", "eval_strategy",
      "evaluation_strategy", "prediction_loss_only", "per_device_eval_batch_size",
      "per_gpu_train_batch_size", "per_gpu_eval_batch_size", "eval_accumulation_steps",
      "eval_delay", "torch_empty_cache_steps", "learning_rate", "weight_decay", "adam_beta1",
      "adam_beta2", "adam_epsilon", "max_grad_norm", "num_train_epochs", "max_steps",
      "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_ratio", "warmup_steps", "log_level",
      "log_level_replica", "log_on_each_node", "logging_dir", "logging_strategy",
      "logging_first_step", "logging_steps", "logging_nan_inf_filter", "save_strategy",
      "save_steps", "save_total_limit", "save_safetensors", "save_on_each_node",
      "save_only_model", "restore_callback_states_from_checkpoint", "no_cuda", "use_cpu",
      "use_mps_device", "seed", "data_seed", "jit_mode_eval", "use_ipex", "fp16_opt_level",
      "half_precision_backend", "fp16_backend", "bf16_full_eval", "fp16_full_eval", "tf32", "local_rank",
      "ddp_backend", "tpu_num_cores", "tpu_metrics_debug", "debug", "dataloader_drop_last",
      "eval_steps", "dataloader_num_workers", "dataloader_prefetch_factor", "past_index",
      "run_name", "disable_tqdm", "remove_unused_columns", "label_names",
      "load_best_model_at_end", "metric_for_best_model", "greater_is_better", "ignore_data_skip",
      "fsdp_min_num_params", "fsdp_transformer_layer_cls_to_wrap",
      "label_smoothing_factor", "optim_args", "adafactor", "group_by_length", "length_column_name",
      "report_to", "ddp_find_unused_parameters", "ddp_bucket_cap_mb", "ddp_broadcast_buffers",
      "dataloader_pin_memory", "dataloader_persistent_workers", "skip_memory_metrics",
      "use_legacy_prediction_loop", "push_to_hub", "resume_from_checkpoint", "hub_model_id",
      "hub_strategy", "hub_token", "hub_private_repo", "hub_always_push", "hub_revision",
      "gradient_checkpointing_kwargs", "include_inputs_for_metrics", "include_for_metrics",
      "eval_do_concat_batches", "auto_find_batch_size", "full_determinism",
      "ray_scope", "ddp_timeout",
      "include_tokens_per_second", "include_num_input_tokens_seen", "neftune_noise_alpha",
      "optim_target_modules", "batch_eval_metrics", "eval_on_start", "use_liger_kernel_config",
      "liger_kernel_config", "eval_use_gather_object", "average_tokens_across_devices",
      "push_to_hub_model_id", "push_to_hub_organization", "push_to_hub_token", "mp_parameters",
      "average_tokens_across_devices", "dispatch_batches", "split_batches", "parallelism_config",
      "project", "trackio_space_id", "hub_revision",
      // TRL SFTConfig / ModelConfig
      "dataset_text_field", "dataset_kwargs", "dataset_num_proc", "dataset_batch_size",
      "packing_strategy", "eval_packing", "completion_only_loss", "assistant_only_loss",
      "chat_template_path", "dataset_name", "dataset_config",
      "dataset_train_split", "dataset_test_split", "model_revision", "trust_remote_code",
      "lora_task_type", "use_rslora",
      // TRL DPOConfig: loss settings that do not change memory
      "beta", "label_smoothing", "rpo_alpha", "reference_free", "max_prompt_length", "max_completion_length",
      "truncation_mode", "generate_during_eval", "f_divergence_type", "use_weighting", "ld_alpha",
      "discopop_tau", "ref_model_mixup_alpha", "ref_model_sync_steps", "loss_weights", "disable_dropout",
      "label_pad_token_id", "padding_value", "use_logits_to_keep", "cpo_alpha", "simpo_gamma",
      "pad_token", "eos_token", "shuffle_dataset", "num_of_sequences",
      "chars_per_token", "pad_to_multiple_of",
      // Axolotl
      "base_model_config", "model_type", "tokenizer_type", "is_llama_derived_model",
      "trust_remote_code", "strict", "datasets", "dataset_prepared_path", "val_set_size",
      "output_dir", "eval_sample_packing", "pad_to_sequence_len",
      "lora_fan_in_fan_out", "wandb_project", "wandb_entity",
      "wandb_watch", "wandb_name", "wandb_log_model", "wandb_run_id", "num_epochs",
      "lr_scheduler", "train_on_inputs", "group_by_length", "early_stopping_patience",
      "resume_from_checkpoint", "local_rank", "logging_steps", "warmup_steps", "warmup_ratio",
      "evals_per_epoch", "eval_table_size", "eval_max_new_tokens", "saves_per_epoch",
      "save_steps", "debug", "weight_decay", "special_tokens", "tokens", "chat_template",
      "hub_model_id", "eval_batch_size", "gptq", "plugins", "load_best_model_at_end",
      "lora_model_dir", "auto_resume_from_checkpoints", "save_first_step", "dataset_processes",
      "shuffle_merged_datasets", "eval_causal_lm_metrics", "tokenizer_config", "processor_type",
      "embeddings_skip_upcast", "flash_attn_cross_entropy", "flash_attn_rms_norm",
      "flash_attn_fuse_qkv", "flash_attn_fuse_mlp", "liger_rope", "liger_layer_norm", "save_safetensors",
      "lora_on_cpu", "peft_use_rslora", "fsdp_version",
      "max_grad_norm", "seed", "gradient_checkpointing_kwargs",
      "hf_use_auth_token", "dataloader_num_workers", "dataloader_pin_memory",
      "dataloader_prefetch_factor", "remove_unused_columns",
      "deepspeed_config", "tf32", "learning_rate", "optim_args", "adam_beta1", "adam_beta2",
      "adam_epsilon", "cosine_min_lr_ratio", "bnb_4bit_compute_dtype",
      // LLaMA-Factory
      "template", "dataset", "dataset_dir", "eval_dataset", "max_samples",
      "overwrite_cache", "preprocessing_num_workers", "val_size", "plot_loss",
      "freeze_trainable_modules",
      "freeze_extra_modules", "trust_remote_code", "rope_scaling",
      "train_on_prompt", "mask_history", "tokenized_path", "use_fast_tokenizer", "resize_vocab",
      "split_special_tokens", "new_special_tokens", "image_max_pixels", "video_max_pixels",
      "model_revision", "adapter_name_or_path", "create_new_adapter", "pref_beta",
      "streaming", "buffer_size", "mix_strategy", "interleave_probs", "compute_accuracy",
      "predict_with_generate", "upcast_lmhead_output", "moe_aux_loss_coef",
      "ddp_timeout", "report_to", "save_steps", "use_rslora", "pissa_init",
      "loraplus_lr_ratio", "include_effective_tokens_per_second", "default_system",
      "enable_thinking", "cache_dir", "use_reentrant_gc", "print_param_status",
      // Axolotl
      "loss_watchdog_threshold", "loss_watchdog_patience", "dpo_beta",
      // how to compile, not whether (torch_compile is the switch); LLaMA-Factory's default
      "torch_compile_backend", "torch_compile_mode", "freeze_vision_tower",
  };
  return kKeys;
}

// Known keys that do change memory in ways oomdoc does not model: said in a warning, so that a
// prediction without them is not taken for one with them (compilation, partly frozen models,
// sequence-parallel degrees, DoRA's extra magnitude vectors and its un-merged weight norms,
// LLaMA-Factory's mixture-of-depths and shifted attention).
const std::set<std::string>& unmodeled_keys() {
  static const std::set<std::string> kKeys = {
      "torch_compile", "torchdynamo", "unfrozen_parameters", "peft_use_dora", "use_dora", "mixture_of_depths", "shift_attn", "s2_attention",
      "use_galore", "use_badam", "use_apollo", "use_adam_mini", "lora_mlp_kernel", "lora_qkv_kernel",
      "lora_o_kernel"};
  return kKeys;
}


bool has_any(const YAML::Node& root, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (root[k]) return true;
  }
  return false;
}

std::optional<TrainingConfigFormat> detect_format(const YAML::Node& root) {
  if (has_any(root, {"base_model", "sequence_len", "micro_batch_size", "lora_target_linear",
                     "adapter"})) {
    return TrainingConfigFormat::kAxolotl;
  }
  if (has_any(root, {"finetuning_type", "cutoff_len", "stage", "template", "quantization_bit",
                     "lora_target"})) {
    return TrainingConfigFormat::kLlamaFactory;
  }
  if (has_any(root, {"per_device_train_batch_size", "output_dir", "gradient_accumulation_steps",
                     "model_name_or_path", "max_seq_length", "max_length", "optim"})) {
    return TrainingConfigFormat::kHfTrainingArguments;
  }
  return std::nullopt;
}

// Decisions that need several keys at once.
Status resolve(Reader& r) {
  Job& job = r.out.job;
  if (r.deepspeed_optimizer) {
    if (job.optimizer && *job.optimizer != *r.deepspeed_optimizer) {
      r.warn(fmt::format("{}: the DeepSpeed config's optimizer ({}) is the one that runs, not {} (the Trainer lets "
                         "DeepSpeed build the optimizer its config names)", r.display_name, *r.deepspeed_optimizer_type,
                         *job.optimizer));
    }
    job.optimizer = *r.deepspeed_optimizer;
    r.out.framework_defaults.push_back(fmt::format("optimizer {}: the DeepSpeed config's \"optimizer\" block ({})",
                                                   *r.deepspeed_optimizer, *r.deepspeed_optimizer_type));
  }
  // TRL's defaults where the file is silent (trl/trainer/sft_config.py; DPO's and GRPO's configs
  // share them): max_length 1024 (max_seq_length before TRL 0.20 truncated to min(1024, the
  // tokenizer's limit)), and since TRL 0.20 gradient checkpointing (huggingface/trl#3510) and
  // bf16 = not fp16 (huggingface/trl#3629).
  if (r.out.format == TrainingConfigFormat::kHfTrainingArguments && r.trl) {
    if (!r.max_length_given && !job.seq_len) {
      job.seq_len = 1024;
      r.out.framework_defaults.push_back("max_length 1024: TRL's default");
    }
    if (!r.checkpointing_given && !job.gradient_checkpointing) {
      job.gradient_checkpointing = "full";
      r.out.framework_defaults.push_back(
          "gradient_checkpointing true: TRL's default since TRL 0.20 (set it false for older TRL)");
    }
    if (!r.bf16_given && !r.pure && !r.autocast) {
      r.autocast = "bf16";
      r.out.framework_defaults.push_back("bf16 true: TRL's default since TRL 0.20 (fp16 off)");
    }
    // TRL 1.7 made loss_type chunked_nll the default (huggingface/trl#5846). Older releases
    // compute the full logits; sized that way, the larger of the two, until the file says.
    if (!r.loss_type_given && !job.loss_impl && job.kernels != "liger") {
      r.out.framework_defaults.push_back(
          "loss_type nll (full logits): SFTConfig's default before TRL 1.7; from 1.7 it is chunked_nll, "
          "which keeps no full logits: write loss_type: chunked_nll to size that");
    }
  }
  const bool quantized = r.quant_bits.has_value();
  if (quantized) {
    job.weight_quantization = *r.quant_bits == 8 ? "int8" : r.quant_type.value_or("nf4");
  }
  if (quantized && r.out.format == TrainingConfigFormat::kLlamaFactory) {
    // LLaMA-Factory refuses what it cannot run (hparams/parser.py _verify_model_args,
    // model_utils/quantization.py): say so before sizing it.
    const std::string method = r.quant_method.empty() ? "bnb" : r.quant_method;
    const std::string finetuning = r.adapter.value_or("lora");
    if (finetuning != "lora" && finetuning != "qlora") {
      return make_error(fmt::format("{}: quantization_bit with finetuning_type {}: LLaMA-Factory refuses it "
                                    "(\"Quantization is only compatible with the LoRA method.\")",
                                    r.display_name, finetuning));
    }
    if (method == "eetq" && *r.quant_bits != 8) {
      return make_error(fmt::format("{}: eetq with quantization_bit {}: LLaMA-Factory refuses it "
                                    "(\"EETQ only accepts 8-bit quantization.\")",
                                    r.quant_method_where, *r.quant_bits));
    }
    if (method == "hqq") {
      r.warn(fmt::format("{}: HQQ is not modelled (group 64, a 16-bit scale and zero per group); sized as "
                         "bitsandbytes {}-bit, a little smaller", r.quant_method_where, *r.quant_bits));
    } else if (method == "eetq") {
      r.out.framework_defaults.push_back("quantization_method eetq: int8 weights with a per-channel scale, sized as "
                                         "bitsandbytes int8");
    } else if (method != "bnb" && method != "bitsandbytes") {
      return make_error(fmt::format("{}: quantization_method '{}' does not quantize on the fly (LLaMA-Factory's are "
                                    "bnb, hqq and eetq); a GPTQ/AWQ/FP8 model is loaded pre-quantized, without "
                                    "quantization_bit",
                                    r.quant_method_where, r.quant_method));
    }
  }
  // Without an explicit method, LLaMA-Factory fine-tunes with LoRA (FinetuningArguments'
  // finetuning_type default); Axolotl only with `adapter: lora|qlora`, a TrainingArguments/TRL
  // config only with use_peft: their lora_* keys alone change nothing.
  const bool lora_default = r.out.format == TrainingConfigFormat::kLlamaFactory;
  std::string adapter = r.adapter.value_or(lora_default ? "lora" : "full");
  if (!r.adapter && !lora_default && job.lora) {
    r.warn(fmt::format("{}: LoRA settings are given but LoRA is not turned on ({}): read as full "
                       "fine-tuning", r.display_name,
                       r.out.format == TrainingConfigFormat::kAxolotl ? "no `adapter: lora` or `adapter: qlora`"
                                                                       : "no `use_peft: true`"));
  }
  if (adapter == "qlora" || (adapter == "lora" && quantized)) {
    // QLoRA here means LoRA on any quantized base (int8 included), as the estimator's task does.
    job.task = "train_qlora";
    if (!quantized) job.weight_quantization = r.quant_type.value_or("nf4");
  } else if (adapter == "lora") {
    job.task = "train_lora";
  } else if (adapter == "freeze") {
    job.task = "train_freeze";
  } else {
    job.task = "train_full";
    if (quantized) {
      r.warn(fmt::format("{}: a quantized base without an adapter cannot be fully fine-tuned; "
                         "read as QLoRA", r.display_name));
      job.task = "train_qlora";
    }
  }
  // Precision. The frameworks load the model in the autocast dtype, except where a recipe keeps
  // fp32 trainable weights: LLaMA-Factory upcasts them for full and freeze tuning
  // (cast_trainable_params_to_fp32 unless pure_bf16), and DeepSpeed / FSDP mixed precision keep an
  // fp32 master copy. A TrainingArguments dump loads in fp32 unless torch_dtype says otherwise.
  if (r.pure) {
    job.precision = *r.pure;
    // bf16/fp16 set as well: the Trainer runs the 16-bit model's forward under autocast all the same.
    if (r.autocast) job.autocast = true;
  } else if (r.autocast) {
    bool weights_16bit = false;
    const bool sharded_amp = job.parallelism.has_value();
    switch (r.out.format) {
      case TrainingConfigFormat::kAxolotl: weights_16bit = !sharded_amp; break;
      case TrainingConfigFormat::kLlamaFactory:
        // Freeze tuning too: only the trainable blocks are upcast (adapter_dtype below).
        weights_16bit = !sharded_amp && job.task != "train_full";
        break;
      case TrainingConfigFormat::kHfTrainingArguments:
        weights_16bit = !sharded_amp && r.weights_dtype && *r.weights_dtype != "fp32";
        break;
    }
    job.precision = weights_16bit ? *r.autocast : *r.autocast + "_mixed";
    // The Trainer runs the 16-bit model's forward under autocast (Accelerate mixed precision).
    if (weights_16bit) job.autocast = true;
    // LLaMA-Factory's _setup_freeze_tuning upcasts the trainable blocks alone to fp32
    // (cast_trainable_params_to_fp32, src/llamafactory/model/adapter.py).
    if (weights_16bit && job.task == "train_freeze" && r.out.format == TrainingConfigFormat::kLlamaFactory) {
      job.adapter_dtype = "fp32";
    }
  } else if (r.weights_dtype) {
    job.precision = *r.weights_dtype;
  } else if (r.out.format == TrainingConfigFormat::kAxolotl && !job.precision && r.quant_bits == 8u) {
    // Axolotl's normalize_config loads an 8-bit base in float16 when neither bf16 nor fp16 is on
    // (torch_dtype float16 "elif cfg.load_in_8bit or cfg.fp16 or cfg.float16").
    job.precision = "fp16";
    r.out.framework_defaults.push_back(
        "precision fp16: neither bf16 nor fp16 is on, and Axolotl loads an 8-bit base in float16");
  } else if (r.out.format != TrainingConfigFormat::kLlamaFactory && !job.precision) {
    // Neither bf16 nor fp16 on: Axolotl loads the model in float32 (torch_dtype follows the
    // bf16/fp16 flags), and the Trainer trains a float32 model in float32 (transformers'
    // from_pretrained loads float32 unless torch_dtype says otherwise).
    job.precision = "fp32";
    r.out.framework_defaults.push_back(
        "precision fp32: neither bf16 nor fp16 is on, so the model is loaded and trained in float32");
  }
  if (job.task != "train_lora" && job.task != "train_qlora") job.lora.reset();
  else if (!job.lora) job.lora = LoraSettings{};
  // LLaMA-Factory's own LoRA defaults (hparams/finetuning_args.py LoraArguments): lora_rank 8,
  // lora_alpha lora_rank * 2, lora_target "all" (every linear layer), not PEFT's.
  if (r.out.format == TrainingConfigFormat::kLlamaFactory && job.lora) {
    if (!r.lora_r_given) job.lora->r = 8;
    if (!r.lora_alpha_given) job.lora->alpha = 2.0 * static_cast<double>(job.lora->r);
    if (!r.lora_targets_given) {
      job.lora->all_linear = true;
      job.lora->target_modules.clear();
    }
  }
  // LLaMA-Factory's stage: dpo runs a reference model unless pref_loss is orpo or simpo
  // (workflows/dpo: use_ref_model); rm trains on chosen/rejected pairs; ppo keeps a value head,
  // a reward model and a reference and generates, which oomdoc does not size.
  if (r.stage) {
    const std::string loss = r.pref_loss.value_or("sigmoid");
    if (*r.stage == "dpo") job.objective = loss == "orpo" || loss == "simpo" ? loss : "dpo";
    else if (*r.stage == "kto") job.objective = "kto";
    else if (*r.stage == "rm") job.objective = "reward";
    else if (*r.stage == "ppo") {
      r.warn(fmt::format("{}: stage ppo (generation, a value head, a reward and a reference model) is not modelled; "
                         "sized as supervised fine-tuning, a lower bound", r.display_name));
    } else if (*r.stage != "sft" && *r.stage != "pt") {
      r.warn(fmt::format("{}: stage {} is not modelled; sized as supervised fine-tuning", r.display_name, *r.stage));
    }
  }
  // LLaMA-Factory loads the reference on its own (create_ref_model -> load_model with
  // is_trainable=False, which casts fp32 parameters to the compute dtype), not as a copy of the
  // fp32 policy.
  if (r.out.format == TrainingConfigFormat::kLlamaFactory && job.objective && objective_has_reference(*job.objective) &&
      (job.task == "train_full" || job.task == "train_freeze") && r.autocast) {
    job.reference_dtype = *r.autocast;
    r.out.framework_defaults.push_back(fmt::format("reference_dtype {}: LLaMA-Factory loads the reference model in the "
                                                   "compute dtype", *r.autocast));
  }
  // TRL's DPOConfig (a dump of it): its reference-model keys.
  if (r.out.format == TrainingConfigFormat::kHfTrainingArguments && !job.objective && r.dpo_keys) {
    job.objective = "dpo";
    r.out.framework_defaults.push_back("objective dpo: the file carries DPOConfig's reference-model keys");
  }
  // A preference trainer's loss_type names its objective; its other keys (beta, max_prompt_length)
  // are shared by DPO, CPO, ORPO and KTO: read as DPO, the largest (pairs and a reference model).
  // CPOConfig shares DPO's loss names (its default is sigmoid) but has no reference model.
  if (r.cpo_keys && (r.preference_loss == "dpo" || r.preference_loss == "ipo")) r.preference_loss = "cpo";
  if (r.out.format == TrainingConfigFormat::kHfTrainingArguments && !job.objective && !r.preference_loss.empty()) {
    job.objective = r.preference_loss;
    r.out.framework_defaults.push_back(
        fmt::format("objective {}: loss_type is {}'s", r.preference_loss,
                    r.preference_loss == "simpo" || r.preference_loss == "cpo" ? "TRL CPOConfig"
                    : r.preference_loss == "kto"                               ? "TRL KTOConfig"
                                                                               : "TRL DPOConfig"));
  } else if (r.out.format == TrainingConfigFormat::kHfTrainingArguments && !job.objective && r.preference_keys &&
             !r.online_rl) {
    job.objective = "dpo";
    // The keys that told it are used, not ignored.
    for (const char* key : {"beta", "max_prompt_length", "max_completion_length", "rpo_alpha", "reference_free",
                            "ref_model_sync_steps", "ref_model_mixup_alpha"}) {
      auto& ignored = r.out.ignored_keys;
      if (auto it = std::find(ignored.begin(), ignored.end(), key); it != ignored.end()) {
        ignored.erase(it);
        r.out.used_keys.push_back(key);
      }
    }
    r.warn(fmt::format(
        "{}: keys of TRL's preference trainers (beta, max_prompt_length...) but no loss_type naming one; read as DPO "
        "(pairs and a reference model, the largest of them); pass --objective orpo, cpo or kto for those",
        r.display_name));
  }
  // TRL's ModelConfig builds the LoraConfig with its own lora_dropout default, 0.05
  // (trl/trainer/model_config.py), not PEFT's 0.0.
  if (r.out.format == TrainingConfigFormat::kHfTrainingArguments && r.trl && job.lora && !r.lora_dropout_given) {
    job.lora->dropout = 0.05;
    r.out.framework_defaults.push_back("lora_dropout 0.05: TRL ModelConfig's default");
  }
  // LLaMA-Factory turns gradient checkpointing on unless told not to.
  if (r.out.format == TrainingConfigFormat::kLlamaFactory && !r.checkpointing_given) {
    job.gradient_checkpointing = r.disable_checkpointing_llamafactory ? "none" : "full";
  }
  // LLaMA-Factory loads an Unsloth model with use_gradient_checkpointing="unsloth" whatever
  // use_unsloth_gc says (model_utils/unsloth.py _get_unsloth_kwargs): block inputs offloaded.
  if (r.out.format == TrainingConfigFormat::kLlamaFactory && job.kernels == "unsloth" &&
      job.gradient_checkpointing == "full") {
    add_offload(job, "activations");
  }
  // Who prepares a bitsandbytes base decides which non-quantized parameters run in fp32 (the
  // estimator's default is PEFT's prepare_model_for_kbit_training: all of them). Axolotl calls it
  // and then casts norms and embeddings back to the model's dtype ("LlamaRMSNorm layers are in
  // fp32 after kbit_training ... convert them back", its model loader); LLaMA-Factory does not
  // call it and upcasts only norms with upcast_layernorm (adapters in fp32); a TrainingArguments
  // or TRL config reaches a quantized base only through TRL, whose SFTTrainer no longer prepares
  // the model and casts the adapters to bf16 (trl/trainer/sft_trainer.py, 2026; TRL 0.7 to 0.2x
  // prepared it and cast embeddings back: kbit_upcast norms). A LoRA job may meet a bitsandbytes
  // base without asking for one (a pre-quantized checkpoint such as unsloth/...-bnb-4bit): the same
  // holds there (the estimator reads kbit_upcast only over a bitsandbytes base).
  if (job.task == "train_qlora" || job.task == "train_lora") {
    switch (r.out.format) {
      case TrainingConfigFormat::kAxolotl: job.kbit_upcast = "none"; break;
      case TrainingConfigFormat::kLlamaFactory:
        job.kbit_upcast = r.upcast_layernorm ? "norms" : "none";
        if (r.upcast_layernorm) job.adapter_dtype = "fp32";
        break;
      case TrainingConfigFormat::kHfTrainingArguments:
        job.kbit_upcast = "none";
        job.adapter_dtype = "model";
        break;
    }
  }
  if (job.weight_quantization && (*job.weight_quantization == "nf4" ||
                                  *job.weight_quantization == "fp4") && !job.double_quant) {
    // Axolotl and LLaMA-Factory both default to nested (double) quantization.
    if (r.out.format != TrainingConfigFormat::kHfTrainingArguments) job.double_quant = true;
  }
  return Ok{};
}

}  // namespace

std::string_view training_config_format_name(TrainingConfigFormat format) {
  switch (format) {
    case TrainingConfigFormat::kAxolotl: return "axolotl";
    case TrainingConfigFormat::kLlamaFactory: return "llama_factory";
    case TrainingConfigFormat::kHfTrainingArguments: return "hf_training_arguments";
  }
  return "unknown";
}

// The top-level map with YAML's merge keys applied, as PyYAML's safe_load applies them (Axolotl
// and LLaMA-Factory read their configs so; yaml-cpp leaves "<<" as a key): `<<: *defaults` or
// `<<: [*a, *b]` adds the keys the map does not set itself, the earlier source first.
YAML::Node with_merge_keys(const YAML::Node& root) {
  bool any = false;
  for (const auto& item : root) any = any || (item.first.IsScalar() && item.first.Scalar() == "<<");
  if (!any) return root;
  YAML::Node merged(YAML::NodeType::Map);
  std::set<std::string> have;
  for (const auto& item : root) {
    if (item.first.IsScalar() && item.first.Scalar() == "<<") continue;
    merged.force_insert(item.first, item.second);
    if (item.first.IsScalar()) have.insert(item.first.Scalar());
  }
  for (const auto& item : root) {
    if (!item.first.IsScalar() || item.first.Scalar() != "<<") continue;
    std::vector<YAML::Node> sources;
    if (item.second.IsMap()) sources.push_back(item.second);
    if (item.second.IsSequence()) {
      for (const auto& source : item.second) sources.push_back(source);
    }
    for (const YAML::Node& source : sources) {
      if (!source.IsMap()) continue;
      for (const auto& entry : source) {
        if (!entry.first.IsScalar() || !have.insert(entry.first.Scalar()).second) continue;
        merged.force_insert(entry.first, entry.second);
      }
    }
  }
  return merged;
}

// yaml-cpp reads a quoted scalar whose closing quote is missing up to the end of the document
// (`base_model: "meta-llama/Llama-3.1-8B` is a name with a trailing space), where PyYAML, which the
// frameworks use, stops with "found unexpected end of stream". The position of a quoted scalar's
// first quote is where its closing one is looked for.
// Each node once, by where it was written: an alias is the node its anchor names (a file can alias a
// node inside itself, `a: &x [1, *x]`, or nest aliases nine deep), so the walk remembers the places
// it has read. yaml-cpp's positions do not count a UTF-8 byte order mark.
Status check_quotes_close(const YAML::Node& node, std::string_view text, const std::string& display_name,
                          std::set<int>& visited) {
  const YAML::Mark at = node.Mark();
  if (!visited.insert(at.pos).second) return Ok{};
  if (node.IsMap()) {
    for (const auto& entry : node) {
      if (auto s = check_quotes_close(entry.first, text, display_name, visited); !s) return s;
      if (auto s = check_quotes_close(entry.second, text, display_name, visited); !s) return s;
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) {
      if (auto s = check_quotes_close(item, text, display_name, visited); !s) return s;
    }
  } else if (node.IsScalar() && node.Tag() == "!") {
    const YAML::Mark mark = node.Mark();
    if (text.starts_with("\xef\xbb\xbf")) text.remove_prefix(3);
    if (mark.pos < 0 || static_cast<size_t>(mark.pos) >= text.size()) return Ok{};
    const char quote = text[static_cast<size_t>(mark.pos)];
    if (quote != '"' && quote != '\'') return Ok{};
    for (size_t i = static_cast<size_t>(mark.pos) + 1; i < text.size(); ++i) {
      if (quote == '"' && text[i] == '\\') {
        ++i;  // an escape: the next character is the escaped one
      } else if (text[i] == quote) {
        if (quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
          ++i;  // '' inside single quotes is one quote
        } else {
          return Ok{};
        }
      }
    }
    return make_error(fmt::format("{}: line {}, column {}: invalid YAML: the {} quoted value starting here never "
                                  "closes (found the end of the file first)",
                                  display_name, mark.line + 1, mark.column + 1, quote == '"' ? "double" : "single"));
  }
  return Ok{};
}

Result<TrainingConfig> parse_training_config(std::string_view text, const std::string& display_name,
                                             const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return make_error(fmt::format("{}: line {}, column {}: invalid YAML: {}", display_name,
                                  e.mark.line + 1, e.mark.column + 1, quoted_message(e.msg)));
  }
  std::set<int> visited;
  if (auto closed = check_quotes_close(root, text, display_name, visited); !closed) return closed.error();
  if (!root.IsMap()) {
    return make_error(fmt::format("{}: not a training config (expected a map of settings at the "
                                  "top level)", display_name));
  }
  root = with_merge_keys(root);
  // torchtune's recipes name Python classes to build ({_component_: torchtune.models...}): another
  // trainer, whose keys (batch_size, enable_activation_checkpointing) would read as TrainingArguments'.
  for (const auto& item : root) {
    if (item.second.IsMap() && item.second["_component_"]) {
      return make_error(fmt::format("{}: a torchtune recipe config ('{}' names a _component_), which oomdoc does not "
                                    "read; give the job as flags or a --job file (docs/estimate.md)",
                                    display_name, item.first.IsScalar() ? item.first.Scalar() : std::string("?")));
    }
  }
  auto format = detect_format(root);
  if (!format) {
    return make_error(fmt::format("{}: not a recognised training config (no Axolotl, "
                                  "LLaMA-Factory or TrainingArguments keys)", display_name));
  }
  Reader r;
  r.display_name = display_name;
  // Keys only TRL's configs have (SFTConfig, ModelConfig): not TrainingArguments', nor those of
  // transformers' example scripts (run_clm.py and run_glue.py take model_name_or_path,
  // dataset_name, max_seq_length), whose Trainer keeps TrainingArguments' defaults. A file
  // without one is read with those: the larger figure when it is unclear.
  r.dpo_keys = has_any(root, {"precompute_ref_log_probs", "ref_model_init_kwargs", "ref_adapter_name", "sync_ref_model"});
  // (GRPOConfig shares beta and the length keys but generates online, GKD distils from a teacher,
  // PRM trains a step classifier: not read as DPO. CPOConfig: cpo, with no reference model.)
  r.preference_keys = has_any(root, {"beta", "max_prompt_length", "max_completion_length", "rpo_alpha",
                                     "reference_free", "ref_model_sync_steps", "ref_model_mixup_alpha"}) &&
                      !has_any(root, {"num_generations", "use_vllm", "vllm_mode", "reward_weights", "num_iterations",
                                      "lmbda", "teacher_model_name_or_path", "seq_kd", "step_separator", "epsilon",
                                      "scale_rewards"});
  r.cpo_keys = has_any(root, {"cpo_alpha", "simpo_gamma"});
  r.trl = has_any(root, {"max_length", "packing", "dataset_text_field", "completion_only_loss",
                         "assistant_only_loss", "padding_free", "use_peft", "model_init_kwargs", "lora_r",
                         "lora_target_modules", "load_in_4bit", "use_bnb_nested_quant", "eval_packing",
                         "activation_offloading", "chat_template_path", "dataset_kwargs"});
  r.max_length_given = has_any(root, {"max_length", "max_seq_length"});
  r.bf16_given = has_any(root, {"bf16"});
  r.loss_type_given = has_any(root, {"loss_type"});
  // JSON is YAML too: a document that opens with '{' was written as JSON (a TrainingArguments dump).
  const size_t first = text.find_first_not_of(" \t\r\n");
  r.out.yaml_syntax = first == std::string_view::npos || text[first] != '{';
  r.base_dir = base_dir;
  r.out.format = *format;
  const Table table = *format == TrainingConfigFormat::kAxolotl        ? axolotl_table()
                      : *format == TrainingConfigFormat::kLlamaFactory ? llama_factory_table()
                                                                       : hf_table();
  try {
    // A key given twice: YAML forbids it, but PyYAML (which Axolotl and LLaMA-Factory read with)
    // and Python's json (TrainingArguments dumps) keep the last value: so does oomdoc, and says so. Only the last occurrence is applied, as
    // handlers have effects beyond their own key (rl, adapter, bf16) that a later value must not inherit.
    std::map<std::string, int> first_line;
    std::map<std::string, size_t> last_index;
    size_t index = 0;
    for (const auto& item : root) {
      if (!item.first.IsScalar()) {
        return make_error(fmt::format("{}: line {}: a key must be a name", display_name,
                                      item.first.Mark().line + 1));
      }
      const std::string key = item.first.Scalar();
      const int line = item.first.Mark().line + 1;
      if (auto [it, fresh] = first_line.emplace(key, line); !fresh) {
        r.warn(fmt::format("{}: line {}: '{}' is given again (first on line {}); the last value is used, as {} does",
                           display_name, line, key, it->second,
                           r.out.yaml_syntax ? "PyYAML" : "Python's json module"));
      }
      last_index[key] = index++;
    }
    index = 0;
    for (const auto& item : root) {
      const std::string key = item.first.Scalar();
      if (last_index[key] != index++) continue;
      const YAML::Node& value = item.second;
      auto handler = table.find(key);
      if (handler != table.end()) {
        if (is_null(value)) {
          r.out.ignored_keys.push_back(key);
          continue;
        }
        if (auto status = handler->second(value, key, r); !status) return status.error();
        r.out.used_keys.push_back(key);
      } else if (no_effect_keys().count(key)) {
        r.out.ignored_keys.push_back(key);
      } else if (unmodeled_keys().count(key)) {
        if (leaves_default(value)) {
          r.out.ignored_keys.push_back(key);
        } else {
          r.out.unmodeled_keys.push_back(key);
          r.warn(fmt::format("{}: line {}: '{}' changes memory in a way oomdoc does not model; the prediction is "
                             "without it", display_name, item.first.Mark().line + 1, key));
        }
      } else {
        r.out.unknown_keys.push_back(key);
        r.warn(fmt::format("{}: line {}: unknown key '{}' ignored", display_name,
                           item.first.Mark().line + 1, key));
      }
    }
  } catch (const YAML::Exception& e) {
    return make_error(fmt::format("{}: line {}: {}", display_name, e.mark.line + 1, quoted_message(e.msg)));
  }
  // Axolotl's own validation of a QLoRA config (utils/schemas/config.py, its bitsandbytes path):
  // "Can't load qlora in 8bit", "Require cfg.load_in_4bit to be True for qlora".
  if (r.out.format == TrainingConfigFormat::kAxolotl && r.adapter == "qlora") {
    if (r.load_in_bits == 8u) {
      return make_error(fmt::format("{}: adapter: qlora with load_in_8bit: Axolotl refuses it (\"Can't load qlora in "
                                    "8bit\"); use adapter: lora for an 8-bit base", display_name));
    }
    if (r.load_in_bits != 4u) {
      return make_error(fmt::format("{}: adapter: qlora without load_in_4bit: true: Axolotl refuses it (\"Require "
                                    "cfg.load_in_4bit to be True for qlora\")", display_name));
    }
  }
  // FSDP's own activation checkpointing (fsdp_config.activation_checkpointing) checkpoints whatever
  // gradient_checkpointing says. The Trainer reads fsdp_config only with FSDP on, and then refuses
  // both checkpointings at once (create_accelerator_and_postprocess).
  if (r.fsdp_activation_checkpointing) {
    const bool hf = r.out.format == TrainingConfigFormat::kHfTrainingArguments;
    const auto& parallelism = r.out.job.parallelism;
    const bool fsdp_on = parallelism && (parallelism->rfind("fsdp", 0) == 0 || *parallelism == "hybrid_shard");
    if (hf && !fsdp_on) {
      r.warn(fmt::format("{}: fsdp_config's activation_checkpointing has no effect without fsdp (the Trainer reads "
                         "fsdp_config only with FSDP on)", display_name));
    } else {
      if (hf && r.gradient_checkpointing_true) {
        return make_error(fmt::format("{}: gradient_checkpointing with fsdp_config's activation_checkpointing: the Trainer "
                                      "refuses it (\"The activation_checkpointing in FSDP config and the gradient_checkpointing "
                                      "in training arg can't be set to True simultaneously. Please use FSDP's "
                                      "activation_checkpointing logic when using FSDP.\"); set gradient_checkpointing false",
                                      display_name));
      }
      r.out.job.gradient_checkpointing = "full";
      r.checkpointing_given = true;
    }
  }
  if (auto resolved = resolve(r); !resolved) return resolved.error();
  return std::move(r.out);
}

Result<TrainingConfig> read_training_config(const std::string& path) {
  auto text = read_small_file(path, 4ull << 20);
  if (!text) return text.error();
  std::string base_dir;
  if (auto slash = path.rfind('/'); slash != std::string::npos) base_dir = path.substr(0, slash);
  return parse_training_config(*text, path, base_dir);
}

std::optional<std::string> fp16_where_no_bf16(const TrainingConfig& config, Job& job, bool gpu_has_bf16,
                                              const std::string& gpu_name) {
  if (!config.bf16_auto || gpu_has_bf16 || !job.precision || job.precision->rfind("bf16", 0) != 0) return std::nullopt;
  job.precision = "fp16" + job.precision->substr(4);
  return fmt::format("bf16: auto on {} (no bfloat16): trained in fp16 as Axolotl falls back ({})", gpu_name,
                     *job.precision);
}

}  // namespace oomdoc
