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

// PyTorch's peak increase during the profile run. The forward pass and the sampler run one after
// the other, so the peak is the larger of the two:
// - forward: one layer's live tensors for max_num_batched_tokens tokens (residual, normed input
//   and output: 3 x hidden; fused gate/up and its product: 3 x intermediate / TP; MoE: the
//   fused-MoE caches of every routed slot);
// - sampler: min(max_num_seqs, tokens) rows of vocabulary logits at `sampler_bytes_per_logit`.
uint64_t profile_activation_bytes(const ModelSpec& model, uint64_t batched_tokens,
                                  uint64_t num_seqs, uint64_t tp, uint64_t act_bytes,
                                  uint64_t sampler_bytes_per_logit);

// Bytes per vocabulary logit at the sampler's peak. V0's profile samples with top_k = vocab - 1
// and top_p < 1 (vllm/worker/model_runner.py profile_run): the model-dtype logits (2), their fp32
// copy (4), sorted values (4) and int64 indices (8), softmax (4), cumulative sum (4), the top-p
// mask (1), the scatter back (4), masked probabilities (4) and the final softmax (4): 39, so 40.
// V1's dummy sampler run skips top-k/top-p ("the sampler may skip top_k, top_p, and logprobs"):
// logits in model dtype and fp32, probabilities and a working copy: 16.
inline constexpr uint64_t kV0SamplerBytesPerLogit = 40;
inline constexpr uint64_t kV1SamplerBytesPerLogit = 16;

// CUDA-graph pool estimate: each captured piece keeps its outputs for the largest capture size
// (min(2 x max_num_seqs, 512) tokens), for piecewise and full graphs.
uint64_t cuda_graph_bytes(const ModelSpec& model, const PipelineStage& stage, uint64_t tp,
                          uint64_t max_num_seqs, uint64_t act_bytes);

}  // namespace oomdoc
