#include "readers/measured_memory.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "core/units.h"

namespace oomdoc {
namespace {

using nlohmann::json;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool has(const std::string& haystack, std::string_view needle) {
  return lower(haystack).find(lower(std::string(needle))) != std::string::npos;
}
std::string str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}
std::optional<uint64_t> count(const json& j, const char* key) {
  if (j.contains(key) && j[key].is_number_integer() && j[key].get<int64_t>() > 0) return j[key].get<uint64_t>();
  return std::nullopt;
}

// The first number after `marker` in text ("max_new_tokens 100" -> 100).
std::optional<uint64_t> number_after(const std::string& text, std::string_view marker) {
  std::string t = lower(text);
  size_t at = t.find(lower(std::string(marker)));
  if (at == std::string::npos) return std::nullopt;
  at += marker.size();
  while (at < t.size() && !std::isdigit(static_cast<unsigned char>(t[at]))) {
    if (std::isalpha(static_cast<unsigned char>(t[at]))) return std::nullopt;
    ++at;
  }
  if (at >= t.size()) return std::nullopt;
  return std::stoull(t.substr(at));
}

}  // namespace

Result<MeasuredRecord> parse_measured_record(std::string_view line, const std::string& source) {
  json r = json::parse(line.begin(), line.end(), nullptr, false);
  if (r.is_discarded() || !r.is_object()) return make_error(fmt::format("{}: not a JSON object", source));
  MeasuredRecord out;
  out.id = r.value("id", 0);
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
  if (out.runtime_baseline) return out;

  Job& job = out.job;
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

  // Precision.
  std::string precision = str(r, "precision");
  const bool training = job.task->rfind("train_", 0) == 0;
  const std::string lp = lower(precision);
  if (lp.rfind("fp32", 0) == 0 || lp.rfind("32-true", 0) == 0) job.precision = "fp32";
  else if ((has(precision, "amp") && !has(precision, "use_amp=false") && !has(precision, "no amp")) || has(precision, "mixed")) job.precision = has(precision, "fp16") ? "fp16_mixed" : "bf16_mixed";
  else if (has(precision, "bf16")) job.precision = "bf16";
  else if (has(precision, "fp16") || has(precision, "16-true") || has(precision, "f16")) job.precision = "fp16";
  else if (has(precision, "fp32")) job.precision = "fp32";
  if (job.precision) note(fmt::format("precision '{}' -> {}", precision, *job.precision));

  // Weight quantization.
  std::string quant = str(r, "weight_quantization");
  if (!quant.empty()) {
    if (has(quant, "gguf f16")) { job.precision = "fp16"; }
    else if (has(quant, "q8_0")) job.weight_quantization = "int8";
    else if (has(quant, "q4_0")) { job.weight_quantization = "int4"; job.group_size = 32; }
    else if (has(quant, "nf4")) job.weight_quantization = "nf4";
    else if (has(quant, "4-bit") || has(quant, "4bit")) job.weight_quantization = has(quant, "fp4") ? "fp4" : "nf4";
    else if (has(quant, "int4")) { job.weight_quantization = "int4"; if (auto g = number_after(quant, "int4wo-")) job.group_size = *g; }
    else if (has(quant, "int8") || has(quant, "8-bit") || has(quant, "8bit")) job.weight_quantization = "int8";
    else return make_error(fmt::format("{}: weight_quantization \"{}\" cannot be expressed", where, quant));
    if (has(quant, "double quant") || has(quant, "-dq")) job.double_quant = true;
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
        double v = std::stod(kind.substr(at, end - at));
        if (end < kind.size() && (kind[end] == 'k' || kind[end] == 'K')) v *= 1000;
        job.seq_len = static_cast<uint64_t>(std::llround(v));
        note(fmt::format("seq_len from '{}' -> {}", kind, *job.seq_len));
        break;
      }
    }
    const json& gc = r["gradient_checkpointing"];
    if (gc.is_boolean()) job.gradient_checkpointing = gc.get<bool>() ? "full" : "none";
    else if (gc.is_string()) {
      std::string g = gc.get<std::string>();
      job.gradient_checkpointing = has(g, "selective") ? "selective" : "full";
      if (has(g, "offload")) job.offload.push_back("activations");
    }
    // Framework defaults for checkpointing when the record leaves it open: LLaMA-Factory turns
    // gradient checkpointing on unless disabled; Unsloth uses its offloaded variant; QLoRA on
    // Hugging Face transformers goes through PEFT's prepare_model_for_kbit_training, whose
    // use_gradient_checkpointing defaults to True (peft/utils/other.py), as the QLoRA recipe
    // (artidoro/qlora, --gradient_checkpointing default True) does.
    if (!job.gradient_checkpointing) {
      if (has(out.framework, "llama-factory")) job.gradient_checkpointing = "full";
      if (job.task == "train_qlora" && (has(out.framework, "transformers") || has(out.framework, "peft")) &&
          !has(out.framework, "unsloth")) {
        job.gradient_checkpointing = "full";
        note("gradient_checkpointing null -> full (PEFT prepare_model_for_kbit_training default)");
      }
      if (has(out.framework, "unsloth")) {
        job.gradient_checkpointing = "full";
        job.offload.push_back("activations");
      }
    }
    // LoRA settings.
    if (r.contains("peft") && r["peft"].is_object()) {
      const json& peft = r["peft"];
      LoraSettings lora;
      if (auto rank = count(peft, "r")) lora.r = *rank;
      if (peft.contains("alpha") && peft["alpha"].is_number()) lora.alpha = peft["alpha"].get<double>();
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
    // Loss implementation by framework: torchtune (CEWithChunkedOutputLoss) and LitGPT
    // (chunked_cross_entropy) chunk the loss; Unsloth fuses the head into the loss.
    if (has(out.framework, "torchtune") || has(out.framework, "lit-gpt") || has(out.framework, "litgpt")) {
      job.loss_impl = "chunked";
    } else if (has(out.framework, "unsloth")) {
      job.loss_impl = "fused_linear";
    }
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
  }
  std::string attn = str(r, "attention_impl");
  if (lower(attn).rfind("eager", 0) == 0) job.attention_impl = "eager";
  else if (has(attn, "flash")) job.attention_impl = "flash";
  else if (has(attn, "sdpa")) job.attention_impl = "sdpa";
  else if (has(attn, "eager") || has(attn, "ggml")) job.attention_impl = "eager";

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
