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
// The CUDA context is the estimator's (cuda_context_bytes in analyses/estimator.h): one figure.

struct WeightFormat {
  std::string method;               // "" for unquantized, else awq, gptq, fp8, bitsandbytes, ...
  uint64_t dense_bytes = 2;         // bytes per unquantized parameter (the serving dtype)
  double linear_bytes = 2;          // bytes per parameter of the quantized Linear layers
  // Only the routed experts' weight matrices are quantized (MXFP4: quantizes_only_experts);
  // attention, routers, biases stay at dense_bytes.
  bool experts_only = false;
  std::string dtype;                // bfloat16, float16, float32
  std::string description;          // "AWQ 4-bit, group 128: 0.52 B per linear weight"
};

// dtype_flag: --dtype; quantization_flag: --quantization (else the checkpoint's own).
// gpu_has_bf16: vLLM serves bf16 checkpoints as fp16 on GPUs without bf16 (T4, V100).
// Methods whose weights come quantized in the checkpoint (vLLM reads their quantization config and
// fails without it), unlike fp8 and bitsandbytes, which quantize a 16-bit checkpoint at load.
bool quantized_offline(std::string_view method);

Result<WeightFormat> weight_format(const ModelSpec& model, const std::optional<std::string>& dtype_flag,
                                   const std::optional<std::string>& quantization_flag,
                                   bool gpu_has_bf16);

// "Model loading took X GiB" on the GPU holding `stage`: the sharded Linears, what every rank
// keeps whole (MLA down projections, MoE routers, KV heads above as many ranks as heads), and,
// with mla_dequantized_kv_b (VllmBehavior), MLA's 16-bit copies of a quantized kv_b_proj.
// expert_ranks: the GPUs the routed experts are spread over (0: tp); see moe_expert_ranks.
uint64_t stage_weight_bytes(const ModelSpec& model, const PipelineStage& stage, uint64_t tp,
                            uint64_t pp, const WeightFormat& format, bool mla_dequantized_kv_b = false,
                            uint64_t expert_ranks = 0);

// The cos/sin cache of vLLM's rotary embeddings on every GPU: one per distinct rope (get_rope
// keeps one instance per configuration), a row of rotary_dim values per position, registered as
// a buffer when the model is built, so inside "Model loading took". 0 for families without RoPE.
uint64_t rotary_cache_bytes(const ModelSpec& model, uint64_t dense_bytes);

// How vLLM allocates MXFP4 experts (vllm/model_executor/layers/quantization/mxfp4.py):
// get_mxfp4_backend picks a MoE backend for the GPU, and Mxfp4MoEMethod.create_weights pads the
// intermediate size per partition and the hidden size for it before creating w13/w2 (uint8
// blocks, e8m0 scales, bf16 biases). Multiples of 0: the allocation does not follow from the
// source (Triton's swizzle), so the experts are sized as stored.
struct Mxfp4ExpertLayout {
  std::string backend;                 // "Marlin", "Triton", "" when not known
  uint64_t intermediate_multiple = 0;  // round_up(intermediate_size_per_partition, this)
  uint64_t hidden_multiple = 0;        // round_up(hidden_size, this)
  std::string why;                     // how the backend was chosen, or why it is not known
  bool padded() const { return intermediate_multiple > 0 && hidden_multiple > 0; }
};

// architecture: the catalog's (Ampere, Ada, Hopper, Blackwell, CDNA3, ...; "" for --memory).
// triton_on_hopper: VllmBehavior::mxfp4_triton_on_hopper. use_marlin_env: VLLM_MXFP4_USE_MARLIN.
Mxfp4ExpertLayout mxfp4_expert_layout(std::string_view vendor, std::string_view architecture,
                                      bool triton_on_hopper, const std::optional<std::string>& use_marlin_env);

// What the padded expert tensors of `stage` take beyond what stage_weight_bytes charged them
// (blocks and scales at format.linear_bytes over expert_ranks, biases at dense_bytes over tp).
// The experts are split over expert_ranks by the intermediate size; vLLM keeps w2's bias
// [experts, hidden] whole on every rank. 0 unless layout.padded().
uint64_t mxfp4_expert_padding_bytes(const ModelSpec& model, const PipelineStage& stage, uint64_t tp,
                                    uint64_t expert_ranks, const WeightFormat& format,
                                    const Mxfp4ExpertLayout& layout);

// The GPUs one MoE layer's routed experts are spread over: with data parallelism "expert layers
// form a tensor parallel group of size DP x TP" (and --enable-expert-parallel places whole
// experts on as many ranks instead: the same bytes per GPU), while attention, dense layers and
// the embeddings are replicated on every DP rank. tp for dense models.
uint64_t moe_expert_ranks(const ModelSpec& model, uint64_t tp, uint64_t dp);

// The forward pass's share of the profile run's peak: one layer's live tensors for
// max_num_batched_tokens tokens (residual, normed input and output: 3 x hidden; fused gate/up and
// its product: 3 x intermediate / TP; MoE: the fused-MoE caches of every routed slot). It is the
// whole peak on a worker that does not sample: in V0 only the driver worker (the first rank of
// each tensor-parallel group) samples (vllm/worker/model_runner.py execute_model: "Only perform
// sampling in the driver worker"), and in both engines only the last pipeline stage computes
// logits at all.
uint64_t profile_forward_bytes(const ModelSpec& model, uint64_t batched_tokens, uint64_t tp, uint64_t act_bytes);

// PyTorch's peak increase during the profile run on the worker that samples. The forward pass and
// the sampler run one after the other, so the peak is the larger of the two:
// - forward: profile_forward_bytes;
// - sampler: sampler_peak_bytes for min(max_num_seqs, tokens) rows, plus, in V0, the forward's
//   hidden states, which execute_model still holds while it samples.
// speculative_extra_bytes_per_logit: what speculative decoding's rejection-sampler dummy run
// holds beside the sampler's peak, per logit of its rows (analyses/vllm_speculative.h).
uint64_t profile_activation_bytes(const ModelSpec& model, uint64_t batched_tokens,
                                  uint64_t num_seqs, uint64_t tp, uint64_t act_bytes, bool v1_engine,
                                  bool sort_free_sampler = false, uint64_t speculative_extra_bytes_per_logit = 0);

// The sampler's peak during the profile run, for `rows` dummy requests. Both engines sample the
// dummy batch with top-k and top-p on: V0 vllm/worker/model_runner.py profile_run
// (SamplingParams(top_p=0.99, top_k=self.vocab_size - 1)), V1 vllm/v1/worker/gpu_model_runner.py
// _dummy_sampler_run (top_p 0.9, top_k = logits.size(1) - 1; vLLM's default V1 runner, not the
// opt-in model runner V2 whose dummy run skips them). With top-p set, apply_top_k_top_p sorts the
// whole fp32 logits tensor (logits.sort(dim=-1)), and that sort is the peak. Per logit:
//   the model-dtype logits the caller still holds (compute_logits)          act_bytes
//   their fp32 copy (Sampler.forward: logits.to(torch.float))              4
//   the sort's outputs: fp32 values and int64 indices                      4 + 8
//   PyTorch's scratch for the sort (aten/src/ATen/native/cuda/SortStable.cu,
//   launch_stable_sort_kernel), which depends on the number of rows:
//     >= 128 rows  segmented_sort_pairs: int64 reverse indices, and cub's
//                  alternate key and value buffers (SortPairs cannot overwrite)  8 + 4 + 8
//     2..127 rows  segmented_sort_pairs_by_full_sort: two int2 index/segment
//                  arrays, the keys' output, cub's alternate buffers            8 + 8 + 4 + 4 + 8
//     1 row        segmented_sort_large_segments: cub's alternate buffers        4 + 8
// so 38, 50 and 30 bytes per logit with 2-byte logits. What comes after the sort (the top-k and
// top-p masks, the softmax, the scatter back: 28-32 bytes) stays below it.
// sort_free: newer V1 masks top-k/top-p with a Triton pivot search instead of sorting when there
// are at least 8 rows (vllm-project/vllm#33538, apply_top_k_top_p_triton; "does not use extra
// memory" beyond fixed ~80 MiB buffers): the logits (act_bytes), their fp32 copy (4), the
// softmax's probabilities (4) and random_sample's exponential draws (4) remain.
uint64_t sampler_bytes_per_logit(uint64_t rows, uint64_t act_bytes, bool sort_free = false);
uint64_t sampler_peak_bytes(uint64_t rows, uint64_t vocab_size, uint64_t act_bytes, bool sort_free = false);

// CUDA-graph pool estimate: each captured piece keeps its outputs for the largest capture size
// (min(2 x max_num_seqs, 512) tokens), for piecewise and full graphs.
uint64_t cuda_graph_bytes(const ModelSpec& model, const PipelineStage& stage, uint64_t tp,
                          uint64_t max_num_seqs, uint64_t act_bytes);

}  // namespace oomdoc
