#include "readers/measured_memory.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "core/text.h"
#include "core/units.h"
#include "model/gguf_types.h"

namespace oomdoc {
namespace {

using nlohmann::json;

bool has(const std::string& haystack, std::string_view needle) {
  return to_lower(haystack).find(to_lower(std::string(needle))) != std::string::npos;
}
std::string str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}
std::optional<uint64_t> count(const json& j, const char* key) {
  if (j.contains(key) && j[key].is_number_integer() && j[key].get<int64_t>() > 0) return j[key].get<uint64_t>();
  return std::nullopt;
}

// The run of digits at `at` in t, as a number (nullopt beyond 64 bits).
std::optional<uint64_t> digits_at(const std::string& t, size_t at) {
  size_t end = at;
  while (end < t.size() && std::isdigit(static_cast<unsigned char>(t[end]))) ++end;
  return parse_decimal<uint64_t>(std::string_view(t).substr(at, end - at));
}

// The first number after `marker` in text ("max_new_tokens 100" -> 100).
std::optional<uint64_t> number_after(const std::string& text, std::string_view marker) {
  std::string t = to_lower(text);
  size_t at = t.find(to_lower(std::string(marker)));
  if (at == std::string::npos) return std::nullopt;
  at += marker.size();
  while (at < t.size() && !std::isdigit(static_cast<unsigned char>(t[at]))) {
    if (std::isalpha(static_cast<unsigned char>(t[at]))) return std::nullopt;
    ++at;
  }
  if (at >= t.size()) return std::nullopt;
  return digits_at(t, at);
}

// The minor version after `marker` ("CUDA 11.2" with marker "cuda 11." -> 2).
std::optional<uint64_t> minor_after(const std::string& text, std::string_view marker) {
  std::string t = to_lower(text);
  size_t at = t.find(marker);
  if (at == std::string::npos || at + marker.size() >= t.size()) return std::nullopt;
  if (!std::isdigit(static_cast<unsigned char>(t[at + marker.size()]))) return std::nullopt;
  return digits_at(t, at + marker.size());
}

// The latest year (20xx) the stack description names, if any: "(doc written 2022; ...)".
std::optional<int> latest_year(const std::string& text) {
  std::optional<int> year;
  for (size_t i = 0; i + 4 <= text.size(); ++i) {
    if (text[i] != '2' || text[i + 1] != '0' || !std::isdigit(static_cast<unsigned char>(text[i + 2])) ||
        !std::isdigit(static_cast<unsigned char>(text[i + 3])))
      continue;
    if ((i > 0 && std::isalnum(static_cast<unsigned char>(text[i - 1]))) ||
        (i + 4 < text.size() && std::isalnum(static_cast<unsigned char>(text[i + 4]))))
      continue;
    int y = *parse_decimal<int>(std::string_view(text).substr(i, 4));   // four digits, checked above
    if (y >= 2015 && y <= 2099 && (!year || y > *year)) year = y;
  }
  return year;
}

// The bitsandbytes version a stack names ("bitsandbytes 0.39", "bnb 0.41.1", "bnb>=0.43.3") as
// (minor, patch) of 0.x, and whether it is only a lower bound (">="); nullopt when it names none.
struct NamedVersion {
  std::pair<uint64_t, uint64_t> minor_patch;
  bool lower_bound = false;
};
std::optional<NamedVersion> bitsandbytes_version(const std::string& stack) {
  const std::string t = to_lower(stack);
  for (std::string_view name : {"bitsandbytes", "bnb"}) {
    for (size_t at = t.find(name); at != std::string::npos; at = t.find(name, at + 1)) {
      size_t i = at + name.size();
      bool lower_bound = false;
      while (i < t.size() && (t[i] == ' ' || t[i] == '~' || t[i] == '>' || t[i] == '=' || t[i] == 'v')) {
        lower_bound |= t[i] == '>';
        ++i;
      }
      if (t.compare(i, 2, "0.") != 0) continue;
      auto minor = digits_at(t, i + 2);
      if (!minor) continue;
      size_t j = i + 2;
      while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) ++j;
      uint64_t patch = 0;
      if (j + 1 < t.size() && t[j] == '.' && std::isdigit(static_cast<unsigned char>(t[j + 1]))) patch = digits_at(t, j + 1).value_or(0);
      return NamedVersion{{*minor, patch}, lower_bound};
    }
  }
  return std::nullopt;
}

// Version-dependent defaults of the stack a record names (framework and framework_version).
// - CUDA lazy module loading needs CUDA >= 11.7 and is switched on by PyTorch >= 1.13
//   (pytorch/pytorch#86509); a stack on CUDA < 11.7 loads every kernel at start-up.
// - PyTorch 2.0 (March 2023) made zero_grad() free gradients (set_to_none=True,
//   pytorch/pytorch#92731) and torch.optim use the foreach implementation on CUDA; a stack
//   on PyTorch 1.x, or dated 2022 or earlier, keeps gradients through the forward and updates
//   parameter by parameter.
void apply_stack_defaults(const std::string& framework, const std::string& version, Job& job,
                          std::vector<std::string>& mapping) {
  const std::string stack = framework + " " + version;
  auto cuda_minor = minor_after(stack, "cuda 11.");
  bool old_cuda = (cuda_minor && *cuda_minor < 7) || has(stack, "cuda 10.") || has(stack, "cuda 9.");
  std::optional<uint64_t> torch1_minor = minor_after(stack, "pytorch 1.");
  if (!torch1_minor) torch1_minor = minor_after(stack, "torch 1.");
  if (old_cuda || (torch1_minor && *torch1_minor < 13)) {
    job.lazy_module_loading = false;
    mapping.push_back("CUDA < 11.7 or PyTorch < 1.13 -> eager module loading (larger CUDA context)");
  }
  auto year = latest_year(version);
  // bitsandbytes before 0.43.3 (bitsandbytes#1270, July 2024) kept each 4-bit Linear's input for
  // backward: by the version named (a lower bound below 0.43.3 says nothing), else by a stack dated
  // 2023 or earlier, or "early 2024".
  const std::pair<uint64_t, uint64_t> fixed_in{43, 3};
  auto bnb = bitsandbytes_version(stack);
  if (bnb && !(bnb->lower_bound && bnb->minor_patch < fixed_in)) {
    if (bnb->minor_patch < fixed_in) job.bnb_saves_input = true;
  } else if (year && (*year <= 2023 || (*year == 2024 && has(version, "early")))) {
    job.bnb_saves_input = true;
  }
  if (job.bnb_saves_input) mapping.push_back("bitsandbytes < 0.43.3 -> quantized Linears keep their input for backward");
  if (torch1_minor || (year && *year <= 2022)) {
    job.zero_grad_to_none = false;
    job.optimizer_impl = "for_loop";
    mapping.push_back("PyTorch 1.x stack -> zero_grad keeps gradients, for-loop optimizer");
  }
}

// The transformers minor version a record names ("transformers ~4.30" in the version text, or
// a bare "~4.34" as the version of a framework named transformers); nullopt when it names none
// or a major version other than 4.
std::optional<uint64_t> transformers_minor(const std::string& framework, const std::string& version) {
  const std::string v = to_lower(version);
  for (size_t at = v.find("transformers"); at != std::string::npos; at = v.find("transformers", at + 1)) {
    size_t i = at + std::string_view("transformers").size();
    while (i < v.size() && (v[i] == ' ' || v[i] == '~' || v[i] == '>' || v[i] == '<' || v[i] == '=' || v[i] == 'v')) ++i;
    if (v.compare(i, 2, "4.") == 0) return minor_after(v.substr(i), "4.");
    if (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) return std::nullopt;  // 5.x and later
  }
  if (has(framework, "transformers")) {
    size_t i = 0;
    while (i < v.size() && (v[i] == ' ' || v[i] == '~')) ++i;
    if (v.compare(i, 2, "4.") == 0) return minor_after(v.substr(i), "4.");
  }
  return std::nullopt;
}

}  // namespace

Result<MeasuredRecord> parse_measured_record(std::string_view line, const std::string& source) {
  json r = json::parse(line.begin(), line.end(), nullptr, false);
  if (r.is_discarded() || !r.is_object()) return make_error(fmt::format("{}: not a JSON object", source));
  MeasuredRecord out;
  if (r.contains("id") && !r["id"].is_null()) {
    if (!r["id"].is_number_integer()) return make_error(fmt::format("{}: \"id\" must be an integer", source));
    out.id = r["id"].get<int64_t>();
  }
  const std::string where = fmt::format("{}: record {}", source, out.id);
  auto note = [&](const std::string& s) { out.mapping.push_back(s); };

  std::string model = str(r, "model");
  if (auto paren = model.find(" ("); paren != std::string::npos) model = model.substr(0, paren);
  out.model = model;
  std::string task = str(r, "task");
  out.runtime_baseline = task == "runtime_baseline";
  out.measurement_kind = str(r, "measurement_kind");
  out.framework = str(r, "framework");
  if (r.contains("value_gib") && r["value_gib"].is_number()) {
    out.measured_bytes = static_cast<uint64_t>(std::llround(r["value_gib"].get<double>() * kGiB));
  }
  if (r.contains("outcome") && r["outcome"].is_string()) out.outcome = r["outcome"].get<std::string>();
  if (auto mib = count(r, "gpu_memory_total_mib")) out.gpu_total_bytes = *mib * kMiB;
  else if (auto gb = count(r, "gpu_memory_nominal_gb")) out.gpu_total_bytes = *gb * 1000000000ull;
  Job& job = out.job;
  apply_stack_defaults(out.framework, str(r, "framework_version"), job, out.mapping);
  if (out.runtime_baseline) return out;

  job.model = model;
  // Task.
  if (task == "train_full" || task == "train_lora" || task == "train_qlora") job.task = task;
  else if (task == "train_peft_other") {
    // IA3, prompt tuning, VeRA, LLaMA-Adapter: a frozen base with a few trainable parameters,
    // closest to LoRA on the query and value projections.
    job.task = "train_lora";
    note("train_peft_other -> train_lora (frozen base, few trainable params)");
  } else if (task == "inference_generate") job.task = "inference";
  else if (task == "model_load" || task == "serving") job.task = "load";
  else return make_error(fmt::format("{}: task \"{}\" cannot be expressed as a job", where, task));

  // LitGPT runs its own GPT modules (lit_gpt/model.py), not the transformers implementation.
  const bool litgpt = has(out.framework, "lit-gpt") || has(out.framework, "litgpt");
  const bool torchtune = has(out.framework, "torchtune");
  if (litgpt) {
    job.implementation = "litgpt";
    note("LitGPT's own modules (untied head, fused qkv, single-op GELU)");
  }

  // Precision.
  std::string precision = str(r, "precision");
  const bool training = job.task->rfind("train_", 0) == 0;
  const std::string lp = to_lower(precision);
  if (lp.rfind("fp32", 0) == 0 || lp.rfind("32-true", 0) == 0) job.precision = "fp32";
  else if ((has(precision, "amp") && !has(precision, "use_amp=false") && !has(precision, "no amp")) || has(precision, "mixed")) job.precision = has(precision, "fp16") ? "fp16_mixed" : "bf16_mixed";
  else if (has(precision, "bf16")) job.precision = "bf16";
  else if (has(precision, "fp16") || has(precision, "16-true") || has(precision, "f16")) job.precision = "fp16";
  else if (has(precision, "fp32")) job.precision = "fp32";
  if (job.precision) note(fmt::format("precision '{}' -> {}", precision, *job.precision));
  // The Hugging Face Trainer (TRL, LLaMA-Factory, Axolotl build on it) runs a 16-bit model's
  // forward under autocast when bf16/fp16 is on; a "pure" or use_amp=false record says otherwise.
  const bool trainer_stack = (has(out.framework, "trainer") && !has(out.framework, "no_trainer")) || has(out.framework, "trl") ||
                             has(out.framework, "llama-factory") || has(out.framework, "axolotl");
  if (trainer_stack && (!job.precision || job.precision == "bf16" || job.precision == "fp16") && !has(precision, "pure") &&
      !has(precision, "use_amp=false")) {
    job.autocast = true;
    note("Trainer with 16-bit weights -> autocast");
  }

  // Weight quantization.
  std::string quant = str(r, "weight_quantization");
  // llama.cpp allocates its own buffers from a GGUF file ("GGUF Q4_0 (4.54 BPW, ...)").
  const bool llama_cpp = has(out.framework, "llama.cpp");
  if (llama_cpp) job.implementation = "llama_cpp";
  if (!quant.empty()) {
    const std::string gguf = to_lower(quant.substr(0, quant.find(' ', 5)));
    if (llama_cpp && gguf.rfind("gguf ", 0) == 0 && is_gguf_file_type(gguf.substr(5))) job.weight_quantization = gguf.substr(5);
    else if (has(quant, "nf4")) job.weight_quantization = "nf4";
    else if (has(quant, "4-bit") || has(quant, "4bit")) job.weight_quantization = has(quant, "fp4") ? "fp4" : "nf4";
    else if (has(quant, "int4")) { job.weight_quantization = "int4"; if (auto g = number_after(quant, "int4wo-")) job.group_size = *g; }
    else if (has(quant, "int8") || has(quant, "8-bit") || has(quant, "8bit")) job.weight_quantization = "int8";
    else return make_error(fmt::format("{}: weight_quantization \"{}\" cannot be expressed", where, quant));
    if ((has(quant, "double quant") && !has(quant, "no double quant")) || has(quant, "-dq")) job.double_quant = true;
    if (job.weight_quantization) note(fmt::format("weight_quantization '{}' -> {}", quant, *job.weight_quantization));
    if (job.task == "train_lora" && job.weight_quantization) job.task = "train_qlora";
  }

  if (training) {
    std::string opt = str(r, "optimizer");
    if (has(opt, "4bit")) job.optimizer = "adamw_4bit";
    else if (has(opt, "8-bit") || has(opt, "8bit")) job.optimizer = has(opt, "paged") ? "paged_adamw_8bit" : "adamw_8bit";
    else if (has(opt, "adafactor")) job.optimizer = "adafactor";
    else if (has(opt, "sgd")) job.optimizer = "sgd";
    else if (has(opt, "adam")) job.optimizer = "adamw";
    else if (opt.empty()) {
      // No optimizer named: the source measured forward and backward only (benchmark scripts).
      job.optimizer = "none";
      note("optimizer null -> none (forward and backward only)");
    }
    if ((has(opt, "in_bwd") || has(opt, "in backward") || has(opt, "into backward")) && !has(opt, "not in backward")) {
      job.fused_backward = true;
    } else if (has(opt, "foreach")) {
      job.optimizer_impl = "foreach";
    } else if (has(opt, "fused") && !has(opt, "fused: false") && !has(opt, "fused=false") && !has(opt, "not fused")) {
      job.optimizer_impl = "fused";  // torch AdamW(fused=True): one kernel, no temporaries
    }
    // transformers' own AdamW (Trainer optim "adamw_hf") loops over the parameters.
    if (has(opt, "adamw_hf")) job.optimizer_impl = "for_loop";
    // torchtune's shipped configs build torch.optim.AdamW with `fused: True` (recipes/configs,
    // e.g. llama3_2/3B_full.yaml and 3B_lora_single_device.yaml).
    if (torchtune && job.optimizer == "adamw" && !job.fused_backward && !job.optimizer_impl && !has(opt, "fused")) {
      job.optimizer_impl = "fused";
      note("torchtune: torch.optim.AdamW with fused: True (its configs)");
    }
    if (job.optimizer) note(fmt::format("optimizer '{}' -> {}", opt, *job.optimizer));
    job.micro_batch_size = count(r, "micro_batch_size");
    job.grad_accum_steps = count(r, "grad_accum_steps");
    job.seq_len = count(r, "seq_len");
    if (!job.seq_len) {
      // "typically < 100 tokens", "longest sample ~1.3k tokens": the stated bound.
      std::string kind = str(r, "seq_len_kind");
      for (const char* marker : {"< ", "~"}) {
        size_t at = kind.find(marker);
        if (at == std::string::npos) continue;
        at += std::string_view(marker).size();
        size_t end = at;
        while (end < kind.size() && (std::isdigit(static_cast<unsigned char>(kind[end])) || kind[end] == '.')) ++end;
        if (end == at) continue;
        auto parsed = parse_decimal<double>(std::string_view(kind).substr(at, end - at));  // "." alone: no
        if (!parsed) continue;
        double v = *parsed;
        if (end < kind.size() && (kind[end] == 'k' || kind[end] == 'K')) v *= 1000;
        if (!(v < 1e12)) continue;   // 40 digits: not a length any record means
        job.seq_len = static_cast<uint64_t>(std::llround(v));
        note(fmt::format("seq_len from '{}' -> {}", kind, *job.seq_len));
        break;
      }
    }
    // Text-to-text classification (PEFT's seq2seq examples: labels padded to the longest tokenized
    // class name): the decoder runs over a class name of a word or few plus the end-of-sequence
    // token, not over the input's length.
    if (const std::string kind = to_lower(str(r, "seq_len_kind")); has(kind, "class-label") || has(kind, "class label")) {
      constexpr uint64_t kClassLabelTokens = 4;
      job.target_len = kClassLabelTokens;
      note(fmt::format("target_len {}: labels are class names (a few tokens and the end-of-sequence token)", kClassLabelTokens));
    }
    const json& gc = r["gradient_checkpointing"];
    if (gc.is_boolean()) job.gradient_checkpointing = gc.get<bool>() ? "full" : "none";
    else if (gc.is_string()) {
      std::string g = gc.get<std::string>();
      job.gradient_checkpointing = has(g, "selective") ? "selective" : "full";
      if (has(g, "offload")) job.offload.push_back("activations");
    }
    // Unsloth's and Liger's kernels: the estimator knows their defaults (Unsloth's offloaded
    // checkpointing, its fused loss, no PEFT k-bit preparation; Liger's fused loss).
    if (has(out.framework, "unsloth")) {
      job.kernels = "unsloth";
      note("kernels: unsloth (" + out.framework + ")");
    } else if (has(out.framework, "liger")) {
      job.kernels = "liger";
      note("kernels: liger (" + out.framework + ")");
    }
    // Framework defaults for checkpointing when the record leaves it open: LLaMA-Factory turns
    // gradient checkpointing on unless disabled; QLoRA on
    // Hugging Face transformers goes through PEFT's prepare_model_for_kbit_training, whose
    // use_gradient_checkpointing defaults to True (peft/utils/other.py), as the QLoRA recipe
    // (artidoro/qlora, --gradient_checkpointing default True) does.
    if (!job.gradient_checkpointing) {
      if (has(out.framework, "llama-factory")) job.gradient_checkpointing = "full";
      if (job.task == "train_qlora" && (has(out.framework, "transformers") || has(out.framework, "peft")) &&
          job.kernels != "unsloth") {
        job.gradient_checkpointing = "full";
        note("gradient_checkpointing null -> full (PEFT prepare_model_for_kbit_training default)");
      }
    }
    // LoRA settings.
    if (r.contains("peft") && r["peft"].is_object()) {
      const json& peft = r["peft"];
      LoraSettings lora;
      if (auto rank = count(peft, "r")) lora.r = *rank;
      if (peft.contains("alpha") && peft["alpha"].is_number()) lora.alpha = peft["alpha"].get<double>();
      if (peft.contains("dropout") && peft["dropout"].is_number() && peft["dropout"].get<double>() > 0 &&
          peft["dropout"].get<double>() < 1) {
        lora.dropout = peft["dropout"].get<double>();
      }
      if (peft.contains("target_modules")) {
        const json& t = peft["target_modules"];
        if (t.is_string() && has(t.get<std::string>(), "all-linear")) lora.all_linear = true;
        else if (t.is_array()) {
          for (const auto& name : t) {
            if (!name.is_string()) continue;
            std::string n = name.get<std::string>();
            if (auto sp = n.find(' '); sp != std::string::npos) n = n.substr(0, sp);  // "mlp (w1,w2,w3)"
            lora.target_modules.push_back(n);
          }
        }
      }
      if (lora.all_linear || !lora.target_modules.empty() || peft.contains("r")) job.lora = lora;
    }
    // LitGPT and torchtune create LoRA weights in the model's dtype (LitGPT lora.py under
    // fabric.init_module; torchtune recipes instantiate the model under set_default_dtype);
    // PEFT keeps them in fp32.
    const bool adapters = job.lora || *job.task == "train_lora" || *job.task == "train_qlora";
    if (adapters && (torchtune || litgpt)) {
      job.adapter_dtype = "model";
      note("LoRA adapters in the model's dtype (" + out.framework + ")");
    }
    // Who prepares a bitsandbytes base: PEFT's prepare_model_for_kbit_training (the estimator's
    // default for transformers) upcasts embeddings, norms and head to fp32; torchtune (its own NF4
    // tensors), LLaMA-Factory (upcast_layernorm off by default) and Axolotl (casts them back "for
    // flash-attn compatibility") keep the model's dtype, as Unsloth does (the estimator's default
    // for its kernels).
    if (adapters && job.weight_quantization && (torchtune || has(out.framework, "llama-factory") || has(out.framework, "axolotl"))) {
      job.kbit_upcast = "none";
      note("non-quantized parameters in the model's dtype (" + out.framework + ": no PEFT k-bit preparation)");
    }
    // Loss implementation by framework: torchtune (CEWithChunkedOutputLoss) and LitGPT
    // (chunked_cross_entropy) chunk the loss (Unsloth's and Liger's fused loss: their kernels).
    if (torchtune || litgpt) job.loss_impl = "chunked";
    // LitGPT's chunked_cross_entropy runs cross_entropy on the bf16 chunks as they are.
    if (litgpt) job.loss_upcast = false;
    if (r.contains("compile") && r["compile"].is_boolean()) job.compile = r["compile"].get<bool>();
  } else if (job.task == "inference") {
    job.batch_size = count(r, "micro_batch_size");
    auto seq = count(r, "seq_len");
    std::string kind = str(r, "seq_len_kind");
    auto fresh = number_after(kind, "max_new_tokens");
    if (!fresh) fresh = number_after(kind, "+");
    if (has(kind, "n_ctx") && seq) { job.prompt_len = *seq; job.max_new_tokens = 0; }
    else if (seq && fresh && *fresh <= *seq) { job.max_new_tokens = *fresh; job.prompt_len = *seq - *fresh; }
    else if (seq) { job.prompt_len = *seq; job.max_new_tokens = 0; }
    else if (fresh) { job.max_new_tokens = *fresh; }
    if (job.prompt_len && *job.prompt_len == 0) job.prompt_len.reset();
    // llama.cpp evaluates the prompt n_ubatch tokens at a time.
    if (auto ubatch = number_after(kind, "n_ubatch")) job.prefill_chunk = *ubatch;
  }
  std::string attn = str(r, "attention_impl");
  if (to_lower(attn).rfind("eager", 0) == 0) job.attention_impl = "eager";
  else if (has(attn, "flash") && !has(attn, "non-flash")) job.attention_impl = "flash";
  else if (has(attn, "sdpa")) job.attention_impl = "sdpa";
  else if (has(attn, "eager") || has(attn, "ggml")) job.attention_impl = "eager";
  // transformers added SDPA attention (and made it the default) in v4.36; before, its models
  // ran their eager attention unless the record says otherwise.
  if (!job.attention_impl) {
    auto minor = transformers_minor(out.framework, str(r, "framework_version"));
    if (minor && *minor < 36) {
      job.attention_impl = "eager";
      note(fmt::format("transformers 4.{} (before SDPA, v4.36) -> eager attention", *minor));
    }
  }
  // transformers' generate() kept the cache as tuples of tensors before DynamicCache (v4.36).
  if (job.task == "inference" && !job.kv_cache_impl) {
    auto minor = transformers_minor(out.framework, str(r, "framework_version"));
    if (minor && *minor < 36) {
      job.kv_cache_impl = "legacy";
      note(fmt::format("transformers 4.{} (before DynamicCache, v4.36) -> legacy tuple KV cache", *minor));
    }
  }

  // Parallelism.
  auto gpus = count(r, "num_gpus");
  std::string par = str(r, "parallelism");
  if (gpus && *gpus > 1 && training) {
    job.num_gpus = *gpus;
    if (has(par, "zero-3") || has(par, "zero3")) job.parallelism = "zero3";
    else if (has(par, "zero-2") || has(par, "zero2")) job.parallelism = "zero2";
    else if (has(par, "fsdp") || has(par, "full_shard") || has(par, "dp_shard")) job.parallelism = "fsdp_full_shard";
    else if (has(par, "device_map") || has(par, "naive model parallel")) { job.pp = *gpus; }
    else job.parallelism = "ddp";
    if (auto tp = number_after(par, "TP ")) { if (*tp > 1 && *gpus % *tp == 0) job.tp = *tp; }
    if (has(par, "cpu_offload=true") || has(par, "cpu offload")) job.offload.push_back("params");
  } else if (gpus && *gpus > 1) {
    if (has(par, "device_map")) job.pp = *gpus;
  }
  std::string off = r.contains("offload") && r["offload"].is_string() ? r["offload"].get<std::string>() : "";
  if (training && !off.empty()) {
    // FSDP's cpu_offload moves parameters, gradients and optimizer state to the CPU.
    if (has(off, "optimizer") || has(off, "cpu_offload")) job.offload.push_back("optimizer");
    if (has(off, "param") || has(off, "cpu_offload")) job.offload.push_back("params");
    if (has(off, "activation") && std::find(job.offload.begin(), job.offload.end(), "activations") == job.offload.end()) {
      job.offload.push_back("activations");
    }
  }
  if (std::find(job.offload.begin(), job.offload.end(), "params") != job.offload.end() && !job.parallelism) {
    job.parallelism = "zero3";
  }
  if (job.parallelism && *job.parallelism != "zero3" && *job.parallelism != "fsdp_full_shard") {
    job.offload.erase(std::remove(job.offload.begin(), job.offload.end(), "params"), job.offload.end());
  }
  return out;
}

}  // namespace oomdoc
