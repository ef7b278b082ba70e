// The non-KV terms of vLLM's startup accounting, per GPU (vllm/utils/mem_utils.py:
// non_kv_cache_memory = weights + peak activation + non-torch, plus the CUDA-graph estimate from
// v0.21): what the weights take once loaded (TP/PP split, quantized formats), the profile run's
// activation peak at max_num_batched_tokens, and the constants oomdoc uses where vLLM measures.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "analyses/vllm_kv_cache.h"
#include "core/result.h"
#include "core/units.h"
#include "model/model_spec.h"

namespace oomdoc {

// Memory vLLM measures rather than computes; oomdoc's stand-ins, with the range seen in real
// startup logs (docs/serve.md lists them).
inline constexpr uint64_t kVllmNonTorchBytes = 300 * kMiB;   // cuBLAS/attention workspaces, NCCL
inline constexpr uint64_t kCudaContextBytes = 512 * kMiB;    // CUDA context + libraries, per process

struct WeightFormat {
  std::string method;               // "" for unquantized, else awq, gptq, fp8, bitsandbytes, ...
  uint64_t dense_bytes = 2;         // bytes per unquantized parameter (the serving dtype)
  double linear_bytes = 2;          // bytes per parameter of the quantized Linear layers
  std::string dtype;                // bfloat16, float16, float32
  std::string description;          // "AWQ 4-bit, group 128: 0.52 B per linear weight"
};

// dtype_flag: --dtype; quantization_flag: --quantization (else the checkpoint's own).
// gpu_has_bf16: vLLM serves bf16 checkpoints as fp16 on GPUs without bf16 (T4, V100).
Result<WeightFormat> weight_format(const ModelSpec& model, const std::optional<std::string>& dtype_flag,
                                   const std::optional<std::string>& quantization_flag,
                                   bool gpu_has_bf16);

// A quantized checkpoint's usual name suffix ("-AWQ", "-FP8", "-GPTQ-Int4", "-w8a8", "-bnb-4bit"),
// for names that resolve to the unquantized base model's config.
std::optional<std::string> quantization_from_name(std::string_view name);

// "Model loading took X GiB" on the GPU holding `stage`.
uint64_t stage_weight_bytes(const ModelSpec& model, const PipelineStage& stage, uint64_t tp,
                            uint64_t pp, const WeightFormat& format);

// PyTorch's peak increase during the profile run: one layer's live tensors for
// max_num_batched_tokens tokens (the MLP's gate/up and activation outputs dominate; MoE adds
// the fused-MoE caches of every routed expert slot), plus fp32 logits for the dummy sampler.
uint64_t profile_activation_bytes(const ModelSpec& model, uint64_t batched_tokens,
                                  uint64_t num_seqs, uint64_t tp, uint64_t act_bytes);

// CUDA-graph pool estimate: each captured piece keeps its outputs for the largest capture size
// (min(2 x max_num_seqs, 512) tokens), for piecewise and full graphs.
uint64_t cuda_graph_bytes(const ModelSpec& model, const PipelineStage& stage, uint64_t tp,
                          uint64_t max_num_seqs, uint64_t act_bytes);

}  // namespace oomdoc
