// A training or inference job, as flags, a job file (--job FILE.json) or a training config
// (Axolotl / LLaMA-Factory YAML, TrainingArguments JSON) describe it. Field names match the job
// file keys one to one (docs/estimate.md). Unset fields are nullopt: the estimator records every
// default it picks in Estimate::assumptions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomdoc {

struct LoraSettings {
  uint64_t r = 16;
  double alpha = 32;
  std::vector<std::string> target_modules;   // module names; empty with all_linear = true
  bool all_linear = false;
  // Dropout on the LoRA branch's input (PEFT lora_dropout, default 0.0; LitGPT 0.05): when > 0
  // every LoRA module keeps its own dropped copy of the input and a 1-byte mask for backward.
  double dropout = 0;
  // Whole modules trained beside the adapters (PEFT modules_to_save, LLaMA-Factory's
  // additional_target): PEFT keeps the original and a trainable copy of each, with its gradient
  // and optimizer state. Embeddings and output heads are sized; other names are noted.
  std::vector<std::string> modules_to_save;
};

// Every Linear as target_modules: PEFT's own spelling, "all-linear" (what fit's LoraConfig
// snippets print), or the job file's "all_linear".
inline bool names_all_linear(std::string_view target) { return target == "all-linear" || target == "all_linear"; }

// FSDP's strategies (full_shard, shard_grad_op, hybrid_shard), as opposed to DDP and DeepSpeed ZeRO.
inline bool is_fsdp(std::string_view parallelism) {
  return parallelism.starts_with("fsdp") || parallelism == "hybrid_shard";
}

struct Job {
  std::string model;                                // id, alias, path; resolved by readers
  std::optional<std::string> task;                  // train_full, train_lora, train_qlora, train_freeze, inference, load
  std::optional<std::string> precision;             // fp32, fp16_mixed, bf16_mixed, bf16, fp16
  std::optional<std::string> weight_quantization;   // nf4, fp4, int8, int4, fp8, gptq4, awq4; GGUF types (q4_k_m, ...) for llama_cpp
  std::optional<bool> double_quant;
  std::optional<uint64_t> group_size;
  std::optional<std::string> optimizer;             // adamw, adamw_8bit, paged_adamw_8bit, adafactor, sgd, sgd_momentum, lion
  std::optional<bool> fused_backward;
  std::optional<uint64_t> micro_batch_size;
  std::optional<uint64_t> grad_accum_steps;
  std::optional<uint64_t> seq_len;
  // Encoder-decoder models (T5): the decoder's length, the labels' (HF seq2seq examples'
  // max_target_length); seq_len is then the encoder's. Unset: seq_len.
  std::optional<uint64_t> target_len;
  std::optional<bool> padding_free;
  std::optional<std::string> gradient_checkpointing;  // none, full, selective
  std::optional<std::string> attention_impl;          // eager, sdpa, flash
  std::optional<LoraSettings> lora;
  std::optional<uint64_t> num_gpus;
  std::optional<std::string> parallelism;   // ddp, zero1, zero2, zero3, fsdp_full_shard, fsdp_shard_grad_op, hybrid_shard
  std::optional<uint64_t> tp;
  std::optional<uint64_t> pp;
  std::optional<uint64_t> cp;
  std::vector<std::string> offload;         // optimizer, params, activations
  // DeepSpeed ZeRO-3's zero_optimization.sub_group_size: the fp32 elements it steps at a time
  // (0: each parameter alone). Unset: DeepSpeed's default, 1e9.
  std::optional<uint64_t> zero3_sub_group_size;
  std::optional<std::string> loss_impl;     // standard, chunked, fused_linear
  // The training objective: sft (unset), or a preference objective as TRL's trainers run it:
  // dpo, ipo, orpo, simpo, cpo and reward run chosen and rejected as one batch of twice the
  // micro-batch (concatenated_forward); dpo, ipo and kto score a frozen reference model (for
  // full and freeze tuning a second copy of the weights; LoRA disables the adapters instead).
  std::optional<std::string> objective;
  // TRL's precompute_ref_log_probs: the reference's log-probabilities are computed once before
  // training, and DPOTrainer keeps no reference model (ref_model None) during it.
  std::optional<bool> precompute_ref_log_probs;
  // The frozen reference's weights: "model" (unset) as the policy's weights (TRL's
  // create_reference_model copies the policy), or a 16-bit dtype (LLaMA-Factory loads the
  // reference with is_trainable=False, which casts it to the compute dtype).
  std::optional<std::string> reference_dtype;
  // The software stack's defaults that changed between versions. Unset = today's defaults
  // (PyTorch >= 2.0 with CUDA >= 11.7, PEFT); readers set them when the job says otherwise.
  std::optional<std::string> optimizer_impl;  // foreach (torch >= 2.0 on CUDA), fused, for_loop
  std::optional<bool> zero_grad_to_none;      // false: torch < 2.0 zero_grad() keeps .grad allocated
  // FSDP with accumulation: false (unset) accumulates unsharded gradients under no_sync(), as
  // Accelerate and Lightning Fabric do by default; true reduce-scatters every micro-batch.
  std::optional<bool> sync_each_batch;
  std::optional<bool> lazy_module_loading;    // false: CUDA < 11.7 (or torch < 1.13) loads every kernel
  // The trained weights over a frozen 16-bit base: LoRA adapters, or freeze tuning's trainable
  // blocks: fp32 (PEFT; LLaMA-Factory upcasts the trainable blocks) or the model's dtype ("model").
  std::optional<std::string> adapter_dtype;
  std::optional<uint64_t> freeze_trainable_layers;  // train_freeze: the last N blocks train
  // LoRA over a bitsandbytes base (nf4, fp4, int8) on transformers: which non-quantized
  // parameters run in fp32. "all": PEFT's prepare_model_for_kbit_training (embeddings, norms,
  // head); "norms": TRL's SFTTrainer with bf16 casts embeddings, head and adapters back to bf16;
  // "none": no preparation (LLaMA-Factory, Axolotl, Unsloth, torchtune). Unset: "all" on one GPU
  // or DDP, "none" when FSDP or DeepSpeed shard the model.
  std::optional<std::string> kbit_upcast;
  // true: bitsandbytes < 0.43.3, whose 4-bit matmul keeps its input for backward (and LLM.int8 its
  // int8 transpose) although the quantized weight is frozen.
  std::optional<bool> bnb_saves_input;
  // true: a 16-bit model runs its forward under autocast (Hugging Face Trainer / Accelerate with
  // bf16=True or fp16=True); *_mixed precisions are autocast anyway.
  std::optional<bool> autocast;
  std::optional<bool> compile;                // torch.compile on (fuses the chunked loss's upcast)
  std::optional<bool> loss_upcast;            // false: the loss runs in the logits' dtype (LitGPT)
  // Fused Triton kernels patched into the transformers model: "liger" (liger-kernel, the
  // Trainer's use_liger_kernel: RMSNorm, SwiGLU/GeGLU and RoPE kernels plus the fused linear
  // cross-entropy), "unsloth" (Unsloth's kernels and its fused LoRA autograd functions), or
  // "none" (unset).
  std::optional<std::string> kernels;
  // Whose modules run the model: unset/"transformers" = the Hugging Face implementation the
  // architecture follows; "litgpt" = LitGPT's own GPT (one fused qkv Linear for every family,
  // grouped k/v expanded to every head, torch's single-op GELU); "llama_cpp" = llama.cpp's
  // buffers (GGUF weights, its KV cache and compute buffer; analyses/llama_cpp_estimate.h).
  std::optional<std::string> implementation;
  std::optional<uint64_t> gpu_layers;       // llama.cpp -ngl: blocks offloaded (n_layer + 1 adds the output layer)
  // Inference.
  std::optional<uint64_t> batch_size;
  std::optional<uint64_t> prompt_len;
  std::optional<uint64_t> max_new_tokens;   // 0 = prefill only
  std::optional<std::string> kv_cache_dtype;      // auto, fp32, bf16, fp16, fp8, int8; llama_cpp also q8_0, q4_0
  // How generation keeps its KV cache: "dynamic" (transformers >= 4.36 DynamicCache: each layer's
  // cache is replaced as it grows), "legacy" (transformers < 4.36 tuples: the previous step's
  // whole cache lives until the forward returns), "static" (preallocated: StaticCache, LitGPT).
  std::optional<std::string> kv_cache_impl;
  std::optional<uint64_t> prefill_chunk;    // prompt tokens per forward (llama.cpp n_ubatch); unset = whole prompt
};

// Objectives that forward chosen and rejected together, and those that need a reference model.
inline bool objective_is_paired(std::string_view o) {
  return o == "dpo" || o == "ipo" || o == "orpo" || o == "simpo" || o == "cpo" || o == "reward";
}
inline bool objective_has_reference(std::string_view o) { return o == "dpo" || o == "ipo" || o == "kto"; }

}  // namespace oomdoc
