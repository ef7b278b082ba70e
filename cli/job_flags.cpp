#include "job_flags.h"

#include <fmt/format.h>

#include <charconv>

#include <cctype>

#include "readers/job_file.h"

namespace oomdoc::cli {
namespace {

struct KeyHelp {
  const char* key;
  const char* help;
};

constexpr KeyHelp kTextKeys[] = {
    {"task", "train_full, train_lora, train_qlora, train_freeze, inference, load"},
    {"precision", "fp32, fp16_mixed, bf16_mixed, bf16, fp16"},
    {"weight_quantization", "nf4, fp4, int8, int4, fp8, gptq4, gptq8, awq4, nvfp4; with --implementation llama_cpp a GGUF type: f16, q8_0, q6_k, q5_k_m, q4_k_m, q4_0, ..."},
    {"optimizer", "adamw, adamw_8bit, paged_adamw_8bit, paged_adamw_32bit, adamw_4bit, adafactor, sgd, sgd_momentum, lion, none"},
    {"gradient_checkpointing", "none, full, selective"},
    {"attention_impl", "eager, sdpa, flash"},
    {"parallelism", "ddp, zero1, zero2, zero3, fsdp_full_shard, fsdp_shard_grad_op, hybrid_shard"},
    {"loss_impl", "standard, chunked, fused_linear"},
    {"objective", "sft (default); preference training as TRL runs it: dpo, ipo, orpo, simpo, cpo, reward (chosen and rejected in one batch), kto; dpo/ipo/kto keep a reference model"},
    {"kernels", "fused kernels patched into the model: none, liger (use_liger_kernel: RMSNorm, SwiGLU, RoPE and the fused linear cross-entropy), unsloth (Unsloth's kernels and fused LoRA; its offloaded checkpointing by default)"},
    {"kv_cache_dtype", "auto, fp32, bf16, fp16, fp8, int8; llama_cpp: f16, bf16, fp32, q8_0, q4_0"},
    {"kv_cache_impl", "generation's KV cache: dynamic (transformers >= 4.36; default), legacy (transformers < 4.36: the previous step's cache lives while the next is built), static (preallocated: StaticCache, LitGPT)"},
    {"implementation", "transformers (default), litgpt, llama_cpp (GGUF weights and llama.cpp's own buffers)"},
    {"optimizer_impl", "foreach (torch >= 2.0 default), fused, for_loop (torch 1.x, adamw_hf)"},
    {"adapter_dtype", "trained weights over a frozen 16-bit base (LoRA adapters, train_freeze's blocks): fp32 (PEFT, LLaMA-Factory), model (LitGPT, torchtune)"},
    {"reference_dtype", "dpo/ipo/kto's frozen reference under full or freeze tuning: model (a copy of the policy's weights, TRL; default), bf16, fp16, fp32 (LLaMA-Factory loads it in the compute dtype)"},
    {"kbit_upcast", "LoRA on a bitsandbytes base: all (PEFT prepare_model_for_kbit_training; the default except under FSDP/ZeRO-3), norms (TRL SFTTrainer with bf16, Dec 2023 to late 2025), none (today's TRL, LLaMA-Factory, Axolotl, Unsloth)"},
};
constexpr KeyHelp kCountKeys[] = {
    {"group_size", "quantization group size (gptq4, gptq8, awq4, int4)"},
    {"micro_batch_size", "sequences per GPU per step"},
    {"grad_accum_steps", "micro-batches per optimizer step"},
    {"seq_len", "tokens per sequence (training; the encoder's for T5)"},
    {"freeze_trainable_layers", "train_freeze: how many of the last blocks train (default 2, LLaMA-Factory's)"},
    {"zero3_sub_group_size", "ZeRO-3: fp32 elements stepped at a time (DeepSpeed's sub_group_size; 0 = one parameter; default 1e9)"},
    {"target_len", "decoder tokens per sequence, encoder-decoder models (T5); default seq_len"},
    {"num_gpus", "GPUs in the job"},
    {"tp", "tensor-parallel degree"},
    {"pp", "pipeline-parallel degree"},
    {"cp", "context-parallel degree"},
    {"batch_size", "sequences generated at once (inference)"},
    {"prompt_len", "prompt tokens (inference)"},
    {"max_new_tokens", "generated tokens; 0 = prefill only"},
    {"prefill_chunk", "prompt tokens per forward (llama.cpp n_ubatch)"},
    {"gpu_layers", "llama.cpp -ngl: blocks on the GPU (n_layer + 1 also the output layer; default all)"},
};
// Boolean keys: `--compile` alone is true, `--compile true|false` or `--compile=false` says which
// (a job file's true can be switched off from the command line).
constexpr KeyHelp kSwitchKeys[] = {
    {"double_quant", "true/false: bitsandbytes double quantization; default false (the checkpoint's for a pre-quantized one)"},
    {"fused_backward", "true/false: optimizer step inside backward; default false"},
    {"padding_free", "true/false: sequences packed without padding; default false"},
    {"compile", "true/false: torch.compile (fuses the chunked loss's upcast); default false"},
    {"loss_upcast", "true/false: loss computed in fp32; default true (false: LitGPT)"},
    {"zero_grad_to_none", "true/false: zero_grad() frees gradients; default true (false: torch 1.x)"},
    {"sync_each_batch", "true/false: FSDP reduce-scatters every micro-batch; default false (no_sync: unsharded gradients accumulate)"},
    {"lazy_module_loading", "true/false: CUDA lazy module loading; default true (false: CUDA < 11.7)"},
    {"autocast", "true/false: a bf16/fp16 model runs under autocast (Hugging Face Trainer with bf16=True); default false"},
    {"precompute_ref_log_probs", "true/false: dpo/ipo/kto score the reference once before training (TRL), keeping no reference model; default false"},
    {"bnb_saves_input", "true/false: bitsandbytes < 0.43.3 keeps each quantized Linear's input for backward; default false"},
};

std::string flag_name(std::string key) {
  for (char& c : key) if (c == '_') c = '-';
  return "--" + key;
}

}  // namespace

// One wording for a count out of range, whether CLI11 sees it ("-5") or the job reader ("0"):
// the job-file reader says the same ("seq_len: must be at least 1 (got 0)"). Keys that take 0
// (max_new_tokens, gpu_layers) only refuse a sign.
CLI::Validator count_range(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& value) -> std::string {
        const bool negative = value.rfind('-', 0) == 0;
        const bool zero = !negative && value.find_first_not_of('0') == std::string::npos && !value.empty();
        if (negative || (zero && !allow_zero)) {
          return fmt::format("must be {} (got {})", allow_zero ? "0 or more" : "at least 1", value);
        }
        // Beyond 64 bits CLI11 would clamp it and the message would show another number.
        uint64_t parsed = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
        if (ec == std::errc::result_out_of_range) return fmt::format("{} is implausibly large", value);
        (void)end;
        return std::string();
      },
      "");
}


// A boolean flag's optional value: a word CLI11 reads as true or false. Anything else was most
// likely the model, written after the flag: said so, rather than "not a valid value".
static CLI::Validator boolean_word() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        std::string lower;
        for (char c : value) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        for (const char* word : {"true", "false", "1", "0", "on", "off", "yes", "no"}) {
          if (lower == word) return std::string();
        }
        return fmt::format("takes true or false, not '{}' (alone it means true; give MODEL before the flags)", value);
      },
      "");
}

void add_job_flags(CLI::App* cmd, JobFlags& flags, bool with_num_gpus) {
  for (const auto& [key, help] : kTextKeys) {
    flags.text[key] = "";
    cmd->add_option(flag_name(key), flags.text[key], help);
  }
  for (const auto& [key, help] : kCountKeys) {
    if (!with_num_gpus && std::string(key) == "num_gpus") continue;
    flags.counts[key] = 0;
    // fit names its GPU count --gpus: both commands take both spellings.
    const std::string names = std::string(key) == "num_gpus" ? flag_name(key) + ",--gpus" : flag_name(key);
    cmd->add_option(names, flags.counts[key], help)->check(count_range(job_count_allows_zero(key)));
  }
  for (const auto& [key, help] : kSwitchKeys) {
    flags.switches[key] = false;
    // A flag that also takes one value: bare, CLI11 gives it "true" (flag_like); followed by a
    // word that is not an option, it reads that word as true/false (CLI11 App::_parse_arg).
    cmd->add_flag(flag_name(key), flags.switches[key], help)->expected(0, 1)->check(boolean_word());
  }
  cmd->add_option("--offload", flags.offload, "optimizer, params, activations (repeatable)");
  cmd->add_option("--lora-r", flags.lora_r, "LoRA rank");
  cmd->add_option("--lora-alpha", flags.lora_alpha, "LoRA alpha");
  cmd->add_option("--lora-dropout", flags.lora_dropout, "LoRA dropout (0 = none, the PEFT default)");
  // q_proj,v_proj as the config readers take it (and PEFT's target_modules list), or repeated.
  cmd->add_option("--lora-target-modules", flags.lora_targets, "Module names (comma-separated or repeated), or all-linear (all_linear)")
      ->delimiter(',');
  cmd->add_option("--lora-modules-to-save", flags.lora_modules_to_save,
                  "Modules trained whole beside the adapters (PEFT modules_to_save: embed_tokens, lm_head)")
      ->delimiter(',');
}

nlohmann::json job_flags_json(const JobFlags& flags, const CLI::App& cmd) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : flags.text) if (cmd.count(flag_name(k))) j[k] = v;
  for (const auto& [k, v] : flags.counts) if (cmd.count(flag_name(k))) j[k] = v;
  for (const auto& [k, v] : flags.switches) if (cmd.count(flag_name(k))) j[k] = v;
  if (!flags.offload.empty()) j["offload"] = flags.offload;
  if (flags.lora_r || flags.lora_alpha || flags.lora_dropout || !flags.lora_targets.empty() ||
      !flags.lora_modules_to_save.empty()) {
    nlohmann::json lora = nlohmann::json::object();
    if (flags.lora_r) lora["r"] = *flags.lora_r;
    if (flags.lora_alpha) lora["alpha"] = *flags.lora_alpha;
    if (flags.lora_dropout) lora["dropout"] = *flags.lora_dropout;
    // "q_proj, v_proj": the names without the spaces around them.
    std::vector<std::string> targets;
    for (std::string t : flags.lora_targets) {
      t.erase(0, t.find_first_not_of(" \t"));
      t.erase(t.find_last_not_of(" \t") + 1);
      if (!t.empty()) targets.push_back(t);
    }
    if (targets.size() == 1 && names_all_linear(targets[0])) {
      lora["target_modules"] = "all_linear";
    } else if (!targets.empty() || !flags.lora_targets.empty()) {
      // Given but empty ("" or ","): the job reader refuses it as it refuses an empty list.
      lora["target_modules"] = targets;
    }
    std::vector<std::string> saved;
    for (std::string t : flags.lora_modules_to_save) {
      t.erase(0, t.find_first_not_of(" \t"));
      t.erase(t.find_last_not_of(" \t") + 1);
      if (!t.empty()) saved.push_back(t);
    }
    if (!saved.empty()) lora["modules_to_save"] = saved;
    j["lora"] = lora;
  }
  return j;
}

}  // namespace oomdoc::cli
