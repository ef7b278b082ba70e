#include "analyses/vllm_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <cctype>

#include "core/text.h"
#include "model/architecture.h"
#include "model/weight_formats.h"

namespace oomdoc {
namespace {

uint64_t embedding_params(const ModelSpec& model) {
  return model.embedding_params ? model.embedding_params : model.vocab_size * model.hidden_size;
}

uint64_t lm_head_params(const ModelSpec& model) {
  if (model.tie_word_embeddings) return 0;
  return model.lm_head_params ? model.lm_head_params : model.vocab_size * model.hidden_size;
}

// Norm weights stay in the serving dtype and are replicated (two per layer and a final one).
uint64_t norm_params_per_layer(const ModelSpec& model) { return 2 * model.hidden_size; }

// What vLLM keeps whole on every tensor-parallel rank, per layer, beyond its share of the
// sharded Linears (vllm/model_executor/models/deepseek_v2.py, mixtral.py, qwen2_moe.py,
// qwen3_moe.py; model_executor/layers/linear.py):
// - MLA's down projections, q_a_proj and kv_a_proj_with_mqa, are ReplicatedLinear (quantized
//   like the other Linears);
// - MoE routers are ReplicatedLinear with quant_config=None: whole and in the serving dtype;
// - QKVParallelLinear keeps whole KV heads: above as many ranks as KV heads, every rank holds
//   one (num_kv_head_replicas = tp / kv_heads);
// - from v0.8, MLA attention keeps 16-bit copies of a quantized kv_b_proj for its decode bmm's
//   (W_UK_T and W_UV, its heads on this rank: vllm-project/vllm#14770).
// Returns the bytes to add to the sharded estimate (which counted each of them as 1/tp).
double replicated_layer_bytes(const ModelSpec& model, uint64_t layer, uint64_t tp, const WeightFormat& format,
                              bool mla_dequantized_kv_b) {
  const double h = static_cast<double>(model.hidden_size);
  // What the sharded estimate charged these (non-expert) Linears per parameter.
  const double lb = format.experts_only ? static_cast<double>(format.dense_bytes) : format.linear_bytes;
  const double db = static_cast<double>(format.dense_bytes);
  const double ranks = static_cast<double>(tp);
  double bytes = 0;
  if (model.attention == AttentionKind::kMultiLatent) {
    const double down = h * static_cast<double>(model.q_lora_rank + model.kv_lora_rank + model.qk_rope_head_dim);
    bytes += down * lb * (1 - 1 / ranks);
    if (mla_dequantized_kv_b && !format.method.empty()) {
      const double heads = std::max(1.0, static_cast<double>(model.num_attention_heads) / ranks);
      bytes += static_cast<double>(model.kv_lora_rank) * heads *
               static_cast<double>(model.qk_nope_head_dim + model.v_head_dim) * db;
    }
  } else if (model.num_kv_heads > 0 && tp > model.num_kv_heads) {
    const double kv = static_cast<double>(model.num_kv_heads);
    bytes += 2 * static_cast<double>(model.head_dim_or_default()) * h * (1 - kv / ranks) * lb;
  }
  if (model.num_experts > 0 && layer >= model.first_dense_layers) {
    const double router_inputs = h + (model.router_bias ? 1 : 0);
    bytes += router_inputs * static_cast<double>(model.num_experts) * (db - lb / ranks);
  }
  return bytes;
}

}  // namespace

bool quantized_offline(std::string_view method) {
  static constexpr std::string_view kOffline[] = {
      "awq", "awq_marlin", "gptq", "gptq_marlin", "gptq_bitblas", "auto_round", "marlin", "compressed-tensors",
      "compressed_tensors", "modelopt", "modelopt_fp4", "gguf", "aqlm", "squeezellm", "exl2", "hqq"};
  return std::find(std::begin(kOffline), std::end(kOffline), method) != std::end(kOffline);
}

Result<WeightFormat> weight_format(const ModelSpec& model, const std::optional<std::string>& dtype_flag,
                                   const std::optional<std::string>& quantization_flag,
                                   bool gpu_has_bf16) {
  WeightFormat format;
  std::string dtype = to_lower(dtype_flag.value_or("auto"));
  std::string config_dtype = to_lower(model.torch_dtype);
  if (dtype == "auto") {
    // vLLM "auto": the checkpoint's dtype, except float32 checkpoints, which are served in 16 bits:
    // float16, but bfloat16 for Gemma 2 and 3 ("For Gemma 2 and 3, we downcast float32 to bfloat16
    // instead of float16 by default", vllm/config.py _get_and_verify_dtype).
    const bool gemma = model.model_type == "gemma2" || model.model_type == "gemma3" || model.model_type == "gemma3_text";
    dtype = config_dtype == "float16" ? "float16" : "bfloat16";
    if (config_dtype == "float32" || config_dtype.empty()) dtype = gemma && config_dtype == "float32" ? "bfloat16" : "float16";
    if (config_dtype == "bfloat16" || config_dtype.empty()) dtype = "bfloat16";
  }
  if (dtype == "half" || dtype == "fp16") dtype = "float16";
  if (dtype == "bf16") dtype = "bfloat16";
  if (dtype == "float") dtype = "float32";
  if (dtype == "bfloat16" && !gpu_has_bf16) dtype = "float16";
  format.dtype = dtype;
  format.dense_bytes = dtype == "float32" ? 4 : 2;
  format.linear_bytes = static_cast<double>(format.dense_bytes);

  std::string method = to_lower(quantization_flag.value_or(model.quantization));
  if (method.empty() || method == "none") {
    format.description = fmt::format("{}: {} B per parameter", dtype, format.dense_bytes);
    return format;
  }
  format.method = method;
  uint64_t bits = model.quantization_bits;
  const bool compressed_tensors = method == "compressed-tensors" || method == "compressed_tensors";
  if (compressed_tensors && model.quantization_group_size == 0) {
    // compressed-tensors without groups quantizes per output channel (W8A8's "strategy":
    // "channel"): one scale per row, negligible beside the row's weights.
    if (bits == 0) bits = 8;
    format.linear_bytes = static_cast<double>(bits) / 8;
    format.description = fmt::format("{} {}-bit, per channel: {:.3f} B per linear weight", method, bits,
                                      format.linear_bytes);
  } else if (compressed_tensors || method == "awq" || method == "awq_marlin" || method == "gptq" ||
             method == "gptq_marlin" || method == "auto_round" || method == "marlin" || method == "gptq_bitblas") {
    if (bits == 0) bits = 4;
    const uint64_t group = model.quantization_per_channel ? kPerChannelGroup
                           : model.quantization_group_size ? model.quantization_group_size : 128;
    format.linear_bytes = grouped_int_bytes_per_weight(bits, group);
    format.description = group == kPerChannelGroup
                             ? fmt::format("{} {}-bit, per channel: {:.3f} B per linear weight", method, bits, format.linear_bytes)
                             : fmt::format("{} {}-bit, group {}: {:.3f} B per linear weight", method, bits, group,
                                           format.linear_bytes);
  } else if (method == "fp8" || method == "fbgemm_fp8" || method == "modelopt" ||
             method == "w8a8" || method == "int8" || method == "experts_int8" || method == "ptpc_fp8") {
    format.linear_bytes = 1;
    format.description = fmt::format("{}: 1 B per linear weight", method);
  } else if (method == "bitsandbytes") {
    if (bits == 0) bits = 4;
    // NF4 with an fp32 absmax per 64 weights (8-bit: one scale per row, negligible).
    format.linear_bytes = bits == 8 ? 1.0 : kNf4BytesPerWeight;
    format.description = fmt::format("bitsandbytes {}-bit: {:.4f} B per linear weight", bits, format.linear_bytes);
  } else if (method == "modelopt_fp4" || method == "nvfp4" || method == "fp4") {
    format.linear_bytes = kNvfp4BytesPerWeight;
    format.description = fmt::format("{}: {:.4f} B per linear weight", method, format.linear_bytes);
  } else if (method == "gguf") {
    // vLLM serves a GGUF file's blocks as stored (its GGUF kernels dequantize on the fly): the
    // file's average bytes per weight, scaled to the exact file size by the caller.
    if (!model.checkpoint_bytes || !model.total_params) {
      return Error{"--quantization gguf: give the .gguf file as the model (its header holds the sizes)"};
    }
    format.linear_bytes = static_cast<double>(model.checkpoint_bytes) / static_cast<double>(model.total_params);
    format.description = fmt::format("gguf: the file's tensors as stored ({:.3f} B per weight on average)", format.linear_bytes);
  } else if (method == "mxfp4") {
    format.linear_bytes = kMxfp4BytesPerWeight;
    format.experts_only = quantizes_only_experts(method);
    format.description = fmt::format("mxfp4: {:.5f} B per expert weight, the rest {}", format.linear_bytes, dtype);
  } else {
    return Error{fmt::format("--quantization {}: oomdoc does not know this format's size; pass "
                             "--weights SIZE (\"Model loading took\" from a log)", method)};
  }
  return format;
}

uint64_t moe_expert_ranks(const ModelSpec& model, uint64_t tp, uint64_t dp) {
  tp = std::max<uint64_t>(tp, 1);
  return model.num_experts > 0 ? tp * std::max<uint64_t>(dp, 1) : tp;
}

uint64_t rotary_cache_bytes(const ModelSpec& model, uint64_t dense_bytes) {
  static const std::set<std::string> kRope = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3",
                                              "qwen3_moe", "deepseek_v2", "deepseek_v3", "gemma", "gemma2",
                                              "gemma3_text", "phi3", "stablelm", "gpt_oss"};
  if (!kRope.count(model.model_type) || model.max_position_embeddings == 0) return 0;
  // vllm/model_executor/layers/rotary_embedding: RotaryEmbedding._compute_cos_sin_cache makes
  // max_position rows; LinearScaling and DynamicNTKScaling make max_position x factor, YaRN
  // original_max_position x factor; Llama 3's keeps max_position; LongRoPE keeps a short table of
  // original_max_position rows and a long one of max_position (Phi3LongRoPEScaledRotaryEmbedding).
  // The cache is cast to the model dtype (gpt_oss.py builds its rope in fp32). partial_rotary_factor
  // is not in ModelSpec: the full head is taken (a few MiB high for Phi-4-mini, StableLM).
  const uint64_t rotary_dim = model.attention == AttentionKind::kMultiLatent ? model.qk_rope_head_dim
                                                                             : model.head_dim_or_default();
  const double factor = std::max(1.0, model.rope_scaling_factor);
  const std::string& type = model.rope_scaling_type;
  double rows = static_cast<double>(model.max_position_embeddings);
  if (type == "linear" || type == "dynamic") rows *= factor;
  if (type == "yarn" && model.rope_original_max_position) rows = static_cast<double>(model.rope_original_max_position) * factor;
  if (type == "longrope" || type == "su") {
    rows += model.rope_original_max_position ? static_cast<double>(model.rope_original_max_position) : rows;
  }
  const double bytes_per_value = model.model_type == "gpt_oss" ? 4.0 : static_cast<double>(dense_bytes);
  double bytes = rows * static_cast<double>(rotary_dim) * bytes_per_value;
  // Gemma 3's local (sliding) layers use a second rope of their own base, without the scaling.
  if (model.model_type == "gemma3_text") {
    bytes += static_cast<double>(model.max_position_embeddings) * static_cast<double>(rotary_dim) * bytes_per_value;
  }
  return static_cast<uint64_t>(std::min(bytes, 1e15));
}

uint64_t stage_weight_bytes(const ModelSpec& model, const PipelineStage& stage, uint64_t tp,
                            uint64_t pp, const WeightFormat& format, bool mla_dequantized_kv_b,
                            uint64_t expert_ranks) {
  tp = std::max<uint64_t>(tp, 1);
  if (expert_ranks == 0) expert_ranks = tp;
  uint64_t embed = embedding_params(model);
  uint64_t head = lm_head_params(model);
  uint64_t final_norm = model.hidden_size;
  uint64_t layer_total =
      model.total_params > embed + head + final_norm ? model.total_params - embed - head - final_norm : 0;
  uint64_t norms = norm_params_per_layer(model) * model.num_layers;
  uint64_t linear = layer_total > norms ? layer_total - norms : 0;
  double share = model.num_layers ? static_cast<double>(stage.layers) / static_cast<double>(model.num_layers) : 0;

  // Routed experts are split over expert_ranks GPUs, every other Linear over the TP ranks. A
  // format that quantizes only the experts' weight matrices leaves the rest (their biases too)
  // at the serving dtype.
  uint64_t routed = 0;
  if (format.experts_only) {
    routed = expert_weight_params(model);
  } else if (expert_ranks != tp) {
    for (const LinearShape& l : linear_layers(model)) {
      if (l.expert) routed += l.params();
    }
  }
  routed = std::min(routed, linear);
  const double other_linear_bytes = format.experts_only ? static_cast<double>(format.dense_bytes) : format.linear_bytes;
  double bytes = share * (other_linear_bytes * static_cast<double>(linear - routed) / static_cast<double>(tp) +
                          format.linear_bytes * static_cast<double>(routed) / static_cast<double>(expert_ranks));
  for (uint64_t layer = stage.first_layer; layer < stage.first_layer + stage.layers; ++layer) {
    bytes += replicated_layer_bytes(model, layer, tp, format, mla_dequantized_kv_b);
  }
  bytes += share * static_cast<double>(norms) * static_cast<double>(format.dense_bytes);
  // Modules the checkpoint keeps in 16 bits (quantization_config's modules_to_not_convert: Meta's
  // FP8 Llama 3.1 405B leaves every attention and the first and last MLPs unquantized; vLLM's
  // is_layer_skipped loads them unquantized): the serving dtype, not the format, for those.
  const double per_param_gap = static_cast<double>(format.dense_bytes) - format.linear_bytes;
  if (per_param_gap > 0 && !format.experts_only) {
    bytes += static_cast<double>(unquantized_linear_params(model, stage.first_layer, stage.layers)) * per_param_gap /
             static_cast<double>(tp);
  }
  // VocabParallelEmbedding / ParallelLMHead shard the vocabulary across TP ranks.
  if (stage.first) bytes += static_cast<double>(embed * format.dense_bytes) / static_cast<double>(tp);
  if (stage.last) {
    // A tied head is the embedding itself, unless another pipeline stage holds the embedding.
    uint64_t last_head = head ? head : (pp > 1 ? embed : 0);
    bytes += static_cast<double>(last_head * format.dense_bytes) / static_cast<double>(tp);
    bytes += static_cast<double>(final_norm * format.dense_bytes);
  }
  return static_cast<uint64_t>(bytes);
}

Mxfp4ExpertLayout mxfp4_expert_layout(std::string_view vendor, std::string_view architecture,
                                      bool triton_on_hopper, const std::optional<std::string>& use_marlin_env) {
  // Marlin's MoE kernel wants n % 256 == 0 and k % 128 == 0 for both GEMMs (create_weights'
  // comment): intermediate per partition to 128, hidden to 256.
  Mxfp4ExpertLayout marlin{"Marlin", 128, 256, ""};
  Mxfp4ExpertLayout stored;
  const std::string env = to_lower(use_marlin_env.value_or(""));
  const bool force_marlin = env == "1" || env == "true";
  const bool force_other = env == "0" || env == "false";
  if (vendor == "amd") {
    stored.backend = "Triton";
    stored.why = "ROCm's Triton backend pads to the platform's alignment (get_padding_alignment) and swizzles them";
    return stored;
  }
  if (vendor != "nvidia" || architecture.empty()) {
    stored.why = "the GPU's architecture is not known (give --gpu): Marlin (Ampere, Ada; Hopper before v0.12) "
                 "pads them to multiples of 128 and 256";
    return stored;
  }
  if (architecture == "Ampere" || architecture == "Ada") {
    // get_mxfp4_backend takes triton_kernels only on SM90-SM100 and FlashInfer only on SM90/SM100:
    // Ampere and Ada fall through to Marlin (the only MXFP4 MoE kernel below SM90).
    marlin.why = fmt::format("{} GPUs run Marlin in every release", architecture);
    return marlin;
  }
  if (architecture == "Hopper") {
    if (force_marlin || (!force_other && !triton_on_hopper)) {
      marlin.why = force_marlin ? "VLLM_MXFP4_USE_MARLIN=1"
                                : "Hopper before v0.12 runs Marlin without triton_kernels, which vLLM bundles "
                                  "from v0.12; if it is installed, VLLM_MXFP4_USE_MARLIN=0 sizes Triton's";
      return marlin;
    }
    stored.backend = "Triton";
    stored.why = fmt::format("{}Hopper runs the Triton backend, which swizzles them into triton_kernels' layout "
                             "(_swizzle_mxfp4); \"Model loading took\" runs ~6% higher (gpt-oss-120b on one H100: "
                             "64.38 GiB logged, vllm-project/vllm#33155)",
                             force_other ? "VLLM_MXFP4_USE_MARLIN=0: " : "");
    return stored;
  }
  if (architecture == "Blackwell") {
    stored.why = "on Blackwell FlashInfer (B200, SM100) pads both sizes to 256 and Marlin (RTX 50, RTX PRO 6000, "
                 "SM120) to 128 and 256; the catalog does not tell them apart";
    return stored;
  }
  stored.why = "vLLM's Mxfp4Config needs compute capability 8.0 (Ampere) or newer";
  return stored;
}

uint64_t mxfp4_expert_padding_bytes(const ModelSpec& model, const PipelineStage& stage, uint64_t tp,
                                    uint64_t expert_ranks, const WeightFormat& format,
                                    const Mxfp4ExpertLayout& layout) {
  if (!layout.padded() || model.num_experts == 0 || model.num_layers == 0) return 0;
  tp = std::max<uint64_t>(tp, 1);
  expert_ranks = std::max<uint64_t>(expert_ranks, 1);
  auto round_up = [](uint64_t x, uint64_t m) { return (x + m - 1) / m * m; };
  // What stage_weight_bytes charged the experts: its share of the model's expert tensors.
  double charged = 0;
  for (const LinearShape& l : linear_layers(model)) {
    if (!l.expert) continue;
    const double copies = static_cast<double>(l.copies * l.layers);
    charged += copies * static_cast<double>(l.in_features * l.out_features) * format.linear_bytes /
               static_cast<double>(expert_ranks);
    if (l.bias) {
      charged += copies * static_cast<double>(l.out_features * format.dense_bytes) / static_cast<double>(tp);
    }
  }
  charged *= static_cast<double>(stage.layers) / static_cast<double>(model.num_layers);
  // What create_weights allocates per MoE layer: w13 [E, 2I, H/2] blocks, [E, 2I, H/32] scales,
  // [E, 2I] bias; w2 [E, H, I/2], [E, H, I/32], [E, H]; biases always bf16.
  const uint64_t inter = model.moe_intermediate_size ? model.moe_intermediate_size : model.intermediate_size;
  const uint64_t i = round_up(inter / expert_ranks, layout.intermediate_multiple);
  const uint64_t h = round_up(model.hidden_size, layout.hidden_multiple);
  const uint64_t per_expert = 2 * i * (h / 2) + 2 * i * (h / 32) + 2 * i * 2 + h * (i / 2) + h * (i / 32) + h * 2;
  uint64_t moe_layers = 0;
  for (uint64_t layer = stage.first_layer; layer < stage.first_layer + stage.layers; ++layer) {
    if (layer >= model.first_dense_layers) ++moe_layers;
  }
  const double allocated = static_cast<double>(moe_layers * model.num_experts * per_expert);
  return allocated > charged ? static_cast<uint64_t>(allocated - charged) : 0;
}

uint64_t profile_forward_bytes(const ModelSpec& model, uint64_t batched_tokens, uint64_t tp, uint64_t act_bytes) {
  tp = std::max<uint64_t>(tp, 1);
  const uint64_t h = model.hidden_size;
  // Gated MLPs hold the fused gate/up output (2I) and its product (I); plain ones fc1's output
  // and its activation (2I).
  uint64_t dense_per_token = 3 * h + (model.gated_mlp ? 3 : 2) * (model.intermediate_size / tp);
  uint64_t forward = dense_per_token * batched_tokens;
  if (model.num_experts > 0 && model.experts_per_token > 0) {
    uint64_t moe_inter = model.moe_intermediate_size ? model.moe_intermediate_size : model.intermediate_size;
    // fused_moe: intermediate_cache1 (top-k x 2N), cache2 (top-k x N) and cache3 (top-k x hidden)
    // for chunks of at most VLLM_FUSED_MOE_CHUNK_SIZE (32768) tokens; dense layers before the
    // first MoE layer (DeepSeek's first_k_dense_replace) may peak higher.
    uint64_t moe_per_token = 3 * h + model.experts_per_token * (3 * (moe_inter / tp) + h);
    uint64_t moe_tokens = std::min<uint64_t>(batched_tokens, 32768);
    uint64_t moe = moe_per_token * moe_tokens + 3 * h * (batched_tokens - moe_tokens);
    forward = std::max(model.first_dense_layers ? forward : 0, moe);
  }
  return forward * act_bytes;
}

uint64_t profile_activation_bytes(const ModelSpec& model, uint64_t batched_tokens,
                                  uint64_t num_seqs, uint64_t tp, uint64_t act_bytes, bool v1_engine,
                                  bool sort_free_sampler, uint64_t speculative_extra_bytes_per_logit) {
  const uint64_t h = model.hidden_size;
  const uint64_t rows = std::min(num_seqs, batched_tokens);
  uint64_t sampler = sampler_peak_bytes(rows, model.vocab_size, act_bytes, sort_free_sampler);
  if (rows > 0) sampler += rows * model.vocab_size * speculative_extra_bytes_per_logit;
  // V0's execute_model keeps the forward's output (every token's hidden state) alive while it samples.
  if (!v1_engine) sampler += batched_tokens * h * act_bytes;
  return std::max(profile_forward_bytes(model, batched_tokens, tp, act_bytes), sampler);
}

uint64_t sampler_bytes_per_logit(uint64_t rows, uint64_t act_bytes, bool sort_free) {
  if (sort_free && rows >= 8) return act_bytes + 4 + 4 + 4;   // logits, fp32 copy, probs, draws
  const uint64_t held = act_bytes + 4 + 4 + 8;   // model-dtype logits, fp32 copy, sorted values, indices
  if (rows >= 128) return held + 8 + 4 + 8;      // segmented_sort_pairs
  if (rows >= 2) return held + 8 + 8 + 4 + 4 + 8;  // segmented_sort_pairs_by_full_sort
  return held + 4 + 8;                           // segmented_sort_large_segments
}

uint64_t sampler_peak_bytes(uint64_t rows, uint64_t vocab_size, uint64_t act_bytes, bool sort_free) {
  if (rows == 0) return 0;
  return rows * vocab_size * sampler_bytes_per_logit(rows, act_bytes, sort_free);
}

uint64_t cuda_graph_bytes(const ModelSpec& model, const PipelineStage& stage, uint64_t tp,
                          uint64_t max_num_seqs, uint64_t act_bytes) {
  tp = std::max<uint64_t>(tp, 1);
  uint64_t capture = std::min<uint64_t>(2 * max_num_seqs, 512);
  uint64_t head_dim = model.head_dim_or_default();
  uint64_t kv_heads = model.kv_heads_or_default();
  uint64_t q_dim = model.num_attention_heads * head_dim / tp;
  uint64_t kv_dim = std::max<uint64_t>(1, kv_heads / tp) * head_dim;
  uint64_t per_token_per_layer = q_dim + 2 * kv_dim + 2 * model.hidden_size;
  return 2 * stage.layers * capture * per_token_per_layer * act_bytes;
}

}  // namespace oomdoc
