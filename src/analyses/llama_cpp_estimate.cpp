#include "analyses/llama_cpp_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "analyses/estimator.h"
#include "core/saturating.h"
#include "core/units.h"
#include "model/architecture.h"
#include "model/gguf_types.h"

namespace oomdoc {
namespace {

// Which blocks a Linear of linear_layers() sits in: attention in every block, a dense MLP in all
// blocks or (DeepSeek's first_k_dense_replace) the first ones, routed and shared experts in the rest.
std::pair<uint64_t, uint64_t> layer_range(const ModelSpec& m, const LinearShape& l) {
  const bool mlp = l.role == "gate" || l.role == "up" || l.role == "down" || l.role == "gate_up" || l.role == "fc_in";
  if (l.layers == m.num_layers || !mlp) return {0, m.num_layers};
  if (l.expert || l.name.rfind("shared_expert.", 0) == 0) return {m.num_layers - l.layers, m.num_layers};
  return {0, l.layers};
}

Result<GgmlType> kv_type(const std::optional<std::string>& kv, std::vector<std::string>& assumptions) {
  if (!kv) assumptions.push_back("kv_cache_dtype: f16 (llama.cpp's default -ctk/-ctv)");
  if (auto type = llama_cache_type(kv.value_or("auto"))) return *type;
  return Error{fmt::format("kv_cache_dtype {}: llama.cpp's cache types are {}", *kv, kLlamaCacheTypeNames)};
}

// Where a model's weights go: GPU or host memory, and the GPU bytes by ggml type (for the detail).
struct Placement {
  double gpu = 0, host = 0;
  std::map<std::string, double> gpu_by_type;
  void add(const std::string& type, double bytes, bool on_gpu) {
    if (on_gpu) {
      gpu += bytes;
      gpu_by_type[type] += bytes;
    } else {
      host += bytes;
    }
  }
};

// From a GGUF file's tensor table, exactly: blocks by -ngl; the output layer (the embeddings'
// duplicate when tied) and the tensors outside the blocks with the output; the token embeddings
// in host memory.
Placement weights_from_file(const ModelSpec::GgufWeights& w, uint64_t n_layer, uint64_t first_gpu_layer,
                            bool output_on_gpu) {
  Placement p;
  for (uint64_t layer = 0; layer < n_layer && layer < w.layer_bytes.size(); ++layer) {
    p.add("as stored in the file", static_cast<double>(w.layer_bytes[layer]), layer >= first_gpu_layer);
  }
  // Tied: on the CPU the output layer is the embeddings themselves; on the GPU, their duplicate.
  const uint64_t output = (w.output_bytes ? w.output_bytes : (output_on_gpu ? w.token_embd_bytes : 0)) + w.other_bytes;
  p.add("as stored in the file", static_cast<double>(output), output_on_gpu);
  p.add("", static_cast<double>(w.token_embd_bytes + w.input_bytes), false);
  return p;
}

// Without a file: every matrix at the ggml type llama-quantize gives it for `file_type`.
Placement weights_by_quantize_rules(const ModelSpec& m, const std::string& file_type, uint64_t first_gpu_layer,
                                    bool output_on_gpu) {
  Placement p;
  const uint64_t n_layer = m.num_layers;
  auto place = [&](GgmlType t, double elements, bool on_gpu) {
    p.add(ggml_type_size(t).name, ggml_bytes(t, elements), on_gpu);
  };
  // A given parameter count (--params, safetensors) scales the structural split to it, as the
  // PyTorch estimate does.
  const ParamCount counts = count_parameters(m);
  const double scale = m.total_params && counts.total ? static_cast<double>(m.total_params) / static_cast<double>(counts.total) : 1;
  for (const LinearShape& l : linear_layers(m)) {
    const auto [begin, end] = layer_range(m, l);
    const double per_layer = static_cast<double>(l.in_features * l.out_features * l.copies) * scale;
    const double bias = l.bias ? static_cast<double>(l.out_features * l.copies) : 0;
    for (uint64_t layer = begin; layer < end; ++layer) {
      const bool on_gpu = layer >= first_gpu_layer;
      place(gguf_tensor_type(file_type, l.role, layer, n_layer, l.in_features, m), per_layer, on_gpu);
      if (bias > 0) place(GgmlType::kF32, bias, on_gpu);   // biases stay f32
    }
  }
  // Norms (f32) and routers (f32 in GGUF: 1-D or small tensors are not quantized); the final
  // norm goes with the output layer.
  const double final_norm = m.final_norm ? static_cast<double>(norm_params(m, m.hidden_size)) : 0;
  const double per_layer_small = (static_cast<double>(counts.norms + counts.other) - final_norm) /
                                 static_cast<double>(std::max<uint64_t>(n_layer, 1));
  place(GgmlType::kF32, per_layer_small * static_cast<double>(n_layer - first_gpu_layer), true);
  place(GgmlType::kF32, per_layer_small * static_cast<double>(first_gpu_layer), false);
  place(GgmlType::kF32, final_norm, output_on_gpu);
  // Token embeddings stay in host memory (llama.cpp keeps tok_embd on the CPU: its get_rows is
  // cheap there); the output matrix goes with -ngl > n_layer. A tied model has no output.weight:
  // llama-quantize gives token_embd the output's type, and llama.cpp loads a duplicate of it as
  // the output layer (TENSOR_DUPLICATED).
  const double vocab_matrix = static_cast<double>(m.vocab_size) * static_cast<double>(m.hidden_size);
  const GgmlType output_type = gguf_tensor_type(file_type, "output", 0, n_layer, m.hidden_size, m);
  place(m.tie_word_embeddings ? output_type : gguf_tensor_type(file_type, "token_embd", 0, n_layer, m.hidden_size, m),
        vocab_matrix * scale, false);
  // Tied: on the CPU the output layer is the embeddings themselves; on the GPU, their duplicate.
  if (output_on_gpu || !m.tie_word_embeddings) place(output_type, vocab_matrix * scale, output_on_gpu);
  return p;
}

}  // namespace

Result<Estimate> estimate_llama_cpp(const ModelSpec& m, const Job& job) {
  Estimate est;
  auto assume = [&](std::string text) { est.assumptions.push_back(std::move(text)); };
  const std::string task = job.task.value_or("inference");
  if (task != "inference" && task != "load") {
    return Error{fmt::format("implementation llama_cpp: task {} (llama.cpp runs inference; use task inference or load)", task)};
  }
  if (m.is_encoder_only || m.is_encoder_decoder) {
    return Error{fmt::format("implementation llama_cpp: {} is not a decoder-only model", m.id.empty() ? m.source : m.id)};
  }
  if ((job.tp && *job.tp > 1) || (job.pp && *job.pp > 1) || (job.num_gpus && *job.num_gpus > 1)) {
    return Error{"implementation llama_cpp: one GPU per estimate (llama.cpp splits layers across GPUs with "
                 "--tensor-split; estimate each GPU's share with gpu_layers)"};
  }

  // File type: the GGUF file's own, else a GGUF type, else the precision's unquantized type.
  // A GGUF model with another file type asked for ("what if I take the Q4_K_M file") is sized by
  // llama-quantize's rules from the file's shape; otherwise the file's tensors are used as stored.
  std::string file_type;
  const bool from_file = m.gguf && (!job.weight_quantization || *job.weight_quantization == m.gguf->file_type);
  if (from_file) {
    file_type = m.gguf->file_type;
  } else if (job.weight_quantization) {
    if (m.gguf) {
      assume(fmt::format("sized as a {} file by llama-quantize's rules, from the shape of the {} file given",
                         *job.weight_quantization, m.gguf->file_type));
    }
    if (!is_gguf_file_type(*job.weight_quantization)) {
      return Error{fmt::format("implementation llama_cpp: weight_quantization {} is not a GGUF file type "
                               "(q4_0, q4_k_m, q5_k_m, q6_k, q8_0, ...)", *job.weight_quantization)};
    }
    file_type = *job.weight_quantization;
  } else if (job.precision && *job.precision == "fp32") {
    file_type = "f32";
  } else if (job.precision && (*job.precision == "bf16" || *job.precision == "bf16_mixed")) {
    file_type = "bf16";
  } else {
    file_type = "f16";
    if (!job.precision) assume("GGUF file type: f16 (no weight_quantization given)");
  }

  const uint64_t n_layer = m.num_layers;
  const uint64_t gpu_layers = std::min<uint64_t>(job.gpu_layers.value_or(n_layer + 1), n_layer + 1);
  if (!job.gpu_layers) assume(fmt::format("gpu_layers: all {} blocks and the output layer (-ngl {})", n_layer, n_layer + 1));
  const uint64_t first_gpu_layer = n_layer - std::min(gpu_layers, n_layer);
  const bool output_on_gpu = gpu_layers > n_layer;

  // ---- weights: the file's tensors as stored, else each at the type llama-quantize gives it ----
  const Placement placed = from_file ? weights_from_file(*m.gguf, n_layer, first_gpu_layer, output_on_gpu)
                                     : weights_by_quantize_rules(m, file_type, first_gpu_layer, output_on_gpu);
  const double gpu_weights = placed.gpu, host_weights = placed.host;
  const auto& gpu_by_type = placed.gpu_by_type;

  std::string mix;
  for (const auto& [name, bytes] : gpu_by_type) {
    if (bytes <= 0) continue;
    mix += fmt::format("{}{} {}", mix.empty() ? "" : ", ", name, format_bytes(static_cast<uint64_t>(bytes)));
  }

  // ---- KV cache: n_ctx cells for every offloaded layer ----
  auto kv = kv_type(job.kv_cache_dtype, est.assumptions);
  if (!kv) return kv.error();
  const uint64_t sequences = job.batch_size.value_or(1);
  const uint64_t per_sequence = llama_cpp_context_per_sequence(job);
  if (!job.prompt_len && task != "load") {
    assume(per_sequence > kLlamaCppDefaultContext
               ? fmt::format("context: {} cells per sequence, the tokens to generate (more than llama.cpp's -c 4096 "
                             "of 2024 builds holds; give prompt_len for the prompt)", per_sequence)
               : fmt::format("context: {} cells per sequence, prompt and generated tokens together (llama.cpp's -c "
                             "4096 of 2024 builds; newer ones default to the model's trained context: give prompt_len)",
                             kLlamaCppDefaultContext));
  } else if (!job.max_new_tokens && task != "load") {
    assume("max_new_tokens: 0 (the context -c is prompt_len + max_new_tokens per sequence: give max_new_tokens to "
           "count the generated tokens)");
  }
  const uint64_t cells = task == "load" ? 0 : sequences * per_sequence;
  const uint64_t ubatch = std::min<uint64_t>(job.prefill_chunk.value_or(kLlamaCppDefaultUbatch), std::max<uint64_t>(cells, 1));
  if (!job.prefill_chunk && task != "load") assume(fmt::format("n_ubatch: {} (llama.cpp's default)", kLlamaCppDefaultUbatch));
  const uint64_t head_dim = m.head_dim_or_default();
  double kv_elements_per_cell = 0;   // per offloaded layer, k and v
  std::string kv_shape;
  if (m.attention == AttentionKind::kMultiLatent) {
    // llama.cpp's MLA cache: the compressed latent and the rope key, no separate values.
    kv_elements_per_cell = static_cast<double>(m.kv_lora_rank + m.qk_rope_head_dim);
    kv_shape = fmt::format("latent {} + rope {}", m.kv_lora_rank, m.qk_rope_head_dim);
  } else {
    // Keys and values of every KV head (value heads can be narrower: GGUF's value_length).
    const uint64_t v_dim = m.v_head_dim ? m.v_head_dim : head_dim;
    kv_elements_per_cell = static_cast<double>(m.num_kv_heads * (head_dim + v_dim));
    kv_shape = v_dim == head_dim ? fmt::format("2 x {} KV heads x {}", m.num_kv_heads, head_dim)
                                 : fmt::format("{} KV heads x ({} + {})", m.num_kv_heads, head_dim, v_dim);
  }
  // Sliding-window layers (those the model marks, as Gemma 2/3 do; llama.cpp runs Mistral and
  // Phi-3 with full attention) keep the window per sequence plus one micro-batch: llama.cpp's iSWA
  // cache, the default without --swa-full.
  double kv_bytes = 0;
  uint64_t sliding_layers = 0, sliding_cells = 0;
  for (uint64_t layer = first_gpu_layer; layer < n_layer; ++layer) {
    double layer_cells = static_cast<double>(cells);
    const bool sliding = m.sliding_window && layer < m.layer_is_sliding.size() && m.layer_is_sliding[layer];
    if (sliding) {
      sliding_cells = std::min<uint64_t>(cells, *m.sliding_window * sequences + ubatch);
      layer_cells = static_cast<double>(sliding_cells);
      ++sliding_layers;
    }
    kv_bytes += ggml_bytes(*kv, layer_cells * kv_elements_per_cell);
  }
  if (sliding_layers) assume("sliding-window layers cache window x sequences + n_ubatch cells (llama.cpp's SWA cache, no --swa-full)");
  if (kv_bytes > 1e18) return Error{fmt::format("a KV cache of {:.3g} bytes: the context is implausibly large", kv_bytes)};

  // ---- compute buffer: ggml-alloc's peak over one graph of n_ubatch tokens, activations in f32 ----
  // Reserved for the worst case: every cell of the context attended to, every position's logits.
  const double ub = static_cast<double>(ubatch), kv_cells = static_cast<double>(std::max<uint64_t>(cells, ubatch));
  const double n_embd = static_cast<double>(m.hidden_size);
  const double q_dim = static_cast<double>(m.num_attention_heads * head_dim);
  const double kv_dim = static_cast<double>(m.num_kv_heads * head_dim);
  const bool flash = job.attention_impl && *job.attention_impl == "flash";
  if (!job.attention_impl && task != "load") {
    assume("attention_impl: without flash attention (2024 builds; newer ones turn -fa on with CUDA: give "
           "attention_impl flash)");
  }
  // Attention: the residual, Q, K and V of the micro-batch, and, without flash attention, the f32
  // KQ scores of every head and the f32 mask (with it, only the f16 mask).
  double attention = ub * 4 * (n_embd + q_dim + 2 * kv_dim);
  attention += flash ? ub * kv_cells * 2 : ub * kv_cells * 4 * static_cast<double>(m.num_attention_heads + 1);
  // Feed-forward: the residual and its normed input, and the gate and up outputs (SiLU and the
  // product run in place).
  const double ff = static_cast<double>(m.num_experts ? m.moe_intermediate_size * m.experts_per_token : m.intermediate_size);
  const double ffn = ub * 4 * (2 * n_embd + 2 * ff);
  // Output: the last hidden state and the logits of every position of the micro-batch.
  const double output = output_on_gpu ? ub * 4 * (n_embd + static_cast<double>(m.vocab_size)) : 0;
  double compute = task == "load" ? 0 : std::max({attention, ffn, output});
  const char* widest = compute == attention ? "attention" : compute == output ? "output logits" : "feed-forward";

  // ---- components and totals ----
  auto add = [&](const char* name, double bytes, std::string detail) {
    if (bytes <= 0 && std::string_view(name) != "weights") return;   // weights shown even at -ngl 0
    est.components.push_back({name, saturated_bytes(bytes), std::move(detail)});
  };
  std::string host_parts = "token embeddings";
  if (first_gpu_layer > 0) host_parts += fmt::format(", {} blocks", first_gpu_layer);
  if (!output_on_gpu) host_parts += ", the output layer";
  add("weights", gpu_weights,
      fmt::format("GGUF {}: {}{}", file_type, mix.empty() ? "none on the GPU" : mix,
                  host_weights > 0 ? fmt::format("; {} in host memory ({})", format_bytes(saturated_bytes(host_weights)), host_parts)
                                   : ""));
  add("kv_cache", kv_bytes,
      fmt::format("{} cells x {} layers{} x ({}) x {}", cells, n_layer - first_gpu_layer,
                  sliding_layers ? fmt::format(" ({} sliding-window layers: {} cells)", sliding_layers, sliding_cells) : "",
                  kv_shape, ggml_type_size(*kv).name));
  add("compute_buffer", compute,
      fmt::format("n_ubatch {} x {} cells, f32; widest: {}{}", ubatch, static_cast<uint64_t>(kv_cells), widest,
                  flash ? " (flash attention)" : " (KQ scores materialised, no flash attention)"));
  uint64_t buffers = 0;
  for (const auto& c : est.components) buffers = saturating_add(buffers, c.bytes);
  const uint64_t context = cuda_context_bytes(job.lazy_module_loading.value_or(true));
  add("cuda_context", static_cast<double>(context), "CUDA context and kernels (outside llama.cpp's buffers)");

  est.breakdown = est.components;
  // llama.cpp's buffers are allocated once, at their logged sizes: no caching-allocator slack.
  est.peak_allocated_bytes = buffers;
  est.peak_reserved_bytes = buffers;
  est.device_used_bytes = saturating_add(buffers, context);
  est.peak_phase = task == "load" ? "load" : "generation";
  est.allocator = "llama_cpp";
  uint64_t best = 0;
  for (const auto& c : est.components) {
    if (c.bytes > best) { best = c.bytes; est.dominant_component = c.name; }
  }
  // The buffers are exact sums; what is open is the CUDA context and llama.cpp's CUDA memory pool
  // (dequantization scratch for cuBLAS), which nvidia-smi sees and the log does not.
  est.uncertainty_fraction = 0.05;
  assume("llama.cpp buffers: weights, KV cache and compute buffer as llama.cpp logs them; nvidia-smi adds the CUDA "
         "context and llama.cpp's CUDA pool (dequantization scratch), not sized");
  return est;
}

}  // namespace oomdoc
