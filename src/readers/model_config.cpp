#include "readers/model_config.h"

#include "core/json_document.h"
#include "core/text.h"
#include "core/units.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "model/architecture.h"

namespace oomdoc {
namespace {

// A config that is well formed but describes an architecture (or a variant of one) oomdoc does not
// model: the one kind of error estimate's --params can stand in for.
Error unmodelled(std::string message) {
  Error e = make_error(std::move(message));
  e.unknown_kind = true;
  return e;
}

using nlohmann::json;

// Typed access to optional config keys; a present key of the wrong type is an error, not a default.
// count() returns the error; flag(), number() and text() return the fallback so the family readers
// stay one line per key, and record the first mistyped key in type_error(), which
// parse_model_config turns into the error. `prefix` names a nested object ("quantization_config.").
class ConfigView {
 public:
  ConfigView(const json& j, const std::string& source, std::string prefix = "")
      : j_(j), source_(source), prefix_(std::move(prefix)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  bool given_as_null(const char* key) const { return j_.contains(key) && j_.at(key).is_null(); }

  Result<uint64_t> count(const char* key, std::optional<uint64_t> fallback = std::nullopt) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      return make_error(fmt::format("{}: missing \"{}\"", source_, key));
    }
    const json& v = j_.at(key);
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer()) {
      int64_t i = v.get<int64_t>();
      if (i >= 0) return static_cast<uint64_t>(i);
    }
    if (v.is_number_float()) {
      double d = v.get<double>();
      if (d >= 0 && d < 1.8e19 && d == static_cast<double>(static_cast<uint64_t>(d))) return static_cast<uint64_t>(d);
    }
    return make_error(fmt::format("{}: \"{}{}\" must be a non-negative integer, got {}", source_, prefix_, key,
                                  shown(v)));
  }
  // A signed integer (DeBERTa's max_relative_positions is -1 for "use max_position_embeddings").
  Result<int64_t> integer(const char* key, int64_t fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (v.is_number_integer() && (!v.is_number_unsigned() || v.get<uint64_t>() <= INT64_MAX)) {
      return v.get<int64_t>();
    }
    return make_error(fmt::format("{}: \"{}{}\" must be an integer, got {}", source_, prefix_, key, shown(v)));
  }
  // First present key among several spellings (GPT-2's n_embd vs hidden_size).
  Result<uint64_t> count_any(std::initializer_list<const char*> keys,
                             std::optional<uint64_t> fallback = std::nullopt) const {
    for (const char* key : keys) {
      if (has(key)) return count(key);
    }
    if (fallback) return *fallback;
    return make_error(fmt::format("{}: missing \"{}\"", source_, *keys.begin()));
  }
  bool flag(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (v.is_boolean()) return v.get<bool>();
    note_type_error(key, "true or false", v);
    return fallback;
  }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (v.is_number()) return v.get<double>();
    note_type_error(key, "a number", v);
    return fallback;
  }
  std::string text(const char* key, const std::string& fallback = "") const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (v.is_string()) return v.get<std::string>();
    note_type_error(key, "a string", v);
    return fallback;
  }
  const json& raw() const { return j_; }
  // The first key flag()/number()/text() found with the wrong type.
  const std::optional<Error>& type_error() const { return type_error_; }

 private:
  // A value for an error message: short, one line.
  static std::string shown(const json& v) {
    std::string s = v.dump(-1, ' ', true, json::error_handler_t::replace);
    return s.size() > 40 ? s.substr(0, 37) + "..." : s;
  }
  void note_type_error(const char* key, const char* expected, const json& v) const {
    if (type_error_) return;
    type_error_ = Error{fmt::format("{}: \"{}{}\" must be {}, got {}", source_, prefix_, key, expected, shown(v))};
  }

  const json& j_;
  const std::string& source_;
  std::string prefix_;
  mutable std::optional<Error> type_error_;
};

#define TRY_ASSIGN(target, expr)            \
  do {                                      \
    auto _r = (expr);                       \
    if (!_r) return _r.error();             \
    target = *_r;                           \
  } while (0)

const std::vector<std::string> kModelTypes = {
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "deepseek_v2",
    "deepseek_v3", "gemma", "gemma2", "gemma3", "gemma3_text", "phi", "phi3", "gpt2", "gptj",
    "gpt_neox", "falcon", "opt", "bloom", "gpt_bigcode", "stablelm", "bert", "roberta",
    "deberta-v2", "t5", "mt5", "vit", "gpt_oss", "qwen2_vl", "qwen2_5_vl", "mllama"};

// Llama-style decoders: RMSNorm, gated MLP, RoPE, q/k/v/o projections.
Status read_llama_like(const ConfigView& c, ModelSpec& m) {
  TRY_ASSIGN(m.vocab_size, c.count("vocab_size"));
  TRY_ASSIGN(m.hidden_size, c.count("hidden_size"));
  TRY_ASSIGN(m.num_layers, c.count("num_hidden_layers"));
  TRY_ASSIGN(m.num_attention_heads, c.count("num_attention_heads"));
  TRY_ASSIGN(m.num_kv_heads, c.count("num_key_value_heads", m.num_attention_heads));
  TRY_ASSIGN(m.head_dim, c.count("head_dim", 0));
  TRY_ASSIGN(m.intermediate_size, c.count("intermediate_size", 0));
  TRY_ASSIGN(m.max_position_embeddings, c.count("max_position_embeddings", 0));
  m.qkv_bias = c.flag("attention_bias", false);
  m.attn_out_bias = m.qkv_bias;
  m.mlp_bias = c.flag("mlp_bias", false);
  m.hidden_act = c.text("hidden_act", c.text("hidden_activation", "silu"));
  m.attention_dropout = c.number("attention_dropout", 0);
  return Ok{};
}

Status read_sliding_window(const ConfigView& c, ModelSpec& m) {
  if (c.has("sliding_window") && c.flag("use_sliding_window", true)) {
    uint64_t w = 0;
    TRY_ASSIGN(w, c.count("sliding_window"));
    if (w) m.sliding_window = w;
  }
  return Ok{};
}

// transformers' layer_types ("sliding_attention" / "full_attention" per layer: Gemma 2/3, gpt-oss)
// into layer_is_sliding, the one list the KV formulas read. False when the config has none.
bool read_layer_types(const ConfigView& c, ModelSpec& m) {
  if (!c.has("layer_types") || !c.raw().at("layer_types").is_array()) return false;
  const json& types = c.raw().at("layer_types");
  m.layer_is_sliding.assign(m.num_layers, false);
  for (size_t i = 0; i < types.size() && i < m.num_layers; ++i) {
    m.layer_is_sliding[i] = types[i].is_string() && types[i].get<std::string>() == "sliding_attention";
  }
  return true;
}

Status read_family(const ConfigView& c, ModelSpec& m) {
  const std::string& t = m.model_type;
  if (t == "llama" || t == "mistral" || t == "mixtral" || t == "qwen2" || t == "qwen2_moe" ||
      t == "qwen3" || t == "qwen3_moe" || t == "stablelm") {
    if (auto s = read_llama_like(c, m); !s) return s;
    m.tie_word_embeddings = c.flag("tie_word_embeddings", false);
    if (t == "mistral" || t == "mixtral" || t == "qwen2" || t == "qwen2_moe" || t == "qwen3" ||
        t == "qwen3_moe") {
      if (auto s = read_sliding_window(c, m); !s) return s;
    }
    // Qwen's sliding window covers only the layers from max_window_layers on (Qwen2Config:
    // "sliding_attention" if i >= max_window_layers; vLLM's Qwen2Attention the same), unless the
    // config lists its layer_types.
    if (m.sliding_window && t != "mistral" && t != "mixtral" && !read_layer_types(c, m)) {
      uint64_t full_layers = 28;  // Qwen2Config / Qwen3Config default
      TRY_ASSIGN(full_layers, c.count("max_window_layers", 28));
      m.layer_is_sliding.assign(m.num_layers, false);
      for (uint64_t i = full_layers; i < m.num_layers; ++i) m.layer_is_sliding[i] = true;
    }
    if (t == "qwen2" || t == "qwen2_moe") {
      m.qkv_bias = true;  // Qwen2Attention: q/k/v with bias, o_proj without
      m.attn_out_bias = false;
    }
    if (t == "qwen3" || t == "qwen3_moe") {
      m.qk_norm = true;
      m.qkv_bias = c.flag("attention_bias", false);
      m.attn_out_bias = m.qkv_bias;
    }
    if (t == "stablelm") {
      m.norm = NormKind::kLayerNorm;
      m.qkv_bias = c.flag("use_qkv_bias", false);
      m.attn_out_bias = false;
      if (c.flag("qk_layernorm", false)) {
        return unmodelled(fmt::format("{}: stablelm with qk_layernorm is not supported", m.source));
      }
      if (c.flag("use_parallel_residual", false)) m.norms_per_layer = 1;
      m.hidden_dropout = c.number("hidden_dropout", 0);
    }
    if (t == "mixtral") {
      TRY_ASSIGN(m.num_experts, c.count("num_local_experts"));
      TRY_ASSIGN(m.experts_per_token, c.count("num_experts_per_tok"));
      m.moe_intermediate_size = m.intermediate_size;
    }
    if (t == "qwen2_moe" || t == "qwen3_moe") {
      TRY_ASSIGN(m.num_experts, c.count("num_experts"));
      TRY_ASSIGN(m.experts_per_token, c.count("num_experts_per_tok"));
      TRY_ASSIGN(m.moe_intermediate_size, c.count("moe_intermediate_size"));
      uint64_t step = 1;
      TRY_ASSIGN(step, c.count("decoder_sparse_step", 1));
      bool dense_layers = c.has("mlp_only_layers") && c.raw().at("mlp_only_layers").is_array() &&
                          !c.raw().at("mlp_only_layers").empty();
      if (step != 1 || dense_layers) {
        return unmodelled(fmt::format(
            "{}: MoE layers that are not every layer (decoder_sparse_step, mlp_only_layers) are not supported",
            m.source));
      }
      if (t == "qwen2_moe") {
        TRY_ASSIGN(m.shared_expert_intermediate_size, c.count("shared_expert_intermediate_size"));
        m.shared_expert_gate = true;
      }
    }
    return Ok{};
  }
  if (t == "deepseek_v2" || t == "deepseek_v3") {
    if (auto s = read_llama_like(c, m); !s) return s;
    m.tie_word_embeddings = c.flag("tie_word_embeddings", false);
    m.attention = AttentionKind::kMultiLatent;
    TRY_ASSIGN(m.q_lora_rank, c.count("q_lora_rank", 0));
    TRY_ASSIGN(m.kv_lora_rank, c.count("kv_lora_rank"));
    TRY_ASSIGN(m.qk_rope_head_dim, c.count("qk_rope_head_dim"));
    TRY_ASSIGN(m.qk_nope_head_dim, c.count("qk_nope_head_dim"));
    TRY_ASSIGN(m.v_head_dim, c.count("v_head_dim"));
    TRY_ASSIGN(m.num_experts, c.count("n_routed_experts", 0));
    TRY_ASSIGN(m.num_shared_experts, c.count("n_shared_experts", 0));
    TRY_ASSIGN(m.experts_per_token, c.count("num_experts_per_tok", 0));
    TRY_ASSIGN(m.moe_intermediate_size, c.count("moe_intermediate_size", 0));
    TRY_ASSIGN(m.first_dense_layers, c.count("first_k_dense_replace", 0));
    uint64_t freq = 1;
    TRY_ASSIGN(freq, c.count("moe_layer_freq", 1));
    if (freq != 1) {
      return unmodelled(fmt::format("{}: moe_layer_freq {} is not supported (only 1)", m.source, freq));
    }
    m.router_score_bias = c.text("topk_method") == "noaux_tc";
    m.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
    return Ok{};
  }
  if (t == "gemma" || t == "gemma2" || t == "gemma3_text") {
    if (auto s = read_llama_like(c, m); !s) return s;
    m.tie_word_embeddings = c.flag("tie_word_embeddings", true);
    m.hidden_act = c.text("hidden_activation", c.text("hidden_act", "gelu_pytorch_tanh"));
    if (t != "gemma") {
      m.norms_per_layer = 4;  // input, post_attention, pre_feedforward, post_feedforward
      if (auto s = read_sliding_window(c, m); !s) return s;
      if (!read_layer_types(c, m)) {
        // Gemma 2: sliding on even layers; Gemma 3: every sliding_window_pattern-th layer is full.
        uint64_t pattern = 2;
        if (t != "gemma2") TRY_ASSIGN(pattern, c.count("sliding_window_pattern", 6));
        m.layer_is_sliding.assign(m.num_layers, false);
        for (uint64_t i = 0; i < m.num_layers; ++i) m.layer_is_sliding[i] = pattern && (i + 1) % pattern != 0;
      }
    }
    if (t == "gemma3_text") m.qk_norm = true;
    // Gemma2Config's soft-capping defaults (30 for the logits, 50 for the scores); Gemma 3 has none
    // by default. An explicit null turns it off.
    const bool gemma2 = t == "gemma2";
    m.final_logit_softcapping = c.given_as_null("final_logit_softcapping") ? 0 : c.number("final_logit_softcapping", gemma2 ? 30 : 0);
    m.attn_logit_softcapping = c.given_as_null("attn_logit_softcapping") ? 0 : c.number("attn_logit_softcapping", gemma2 ? 50 : 0);
    return Ok{};
  }
  if (t == "gpt_oss") {
    // transformers modeling_gpt_oss.py: q/k/v/o with attention_bias, a per-head sink logit
    // (GptOssAttention.sinks), a router with a bias (GptOssTopKRouter), num_local_experts experts
    // whose fused gate_up_proj [E, hidden, 2 x intermediate] and down_proj carry biases
    // (GptOssExperts), no dense MLP; head_dim is given (64, not hidden / heads); layer_types
    // alternates sliding-window and full attention.
    if (auto s = read_llama_like(c, m); !s) return s;
    m.tie_word_embeddings = c.flag("tie_word_embeddings", false);
    m.qkv_bias = m.attn_out_bias = c.flag("attention_bias", true);
    m.attention_sinks = true;
    m.router_bias = true;
    m.mlp_bias = true;  // the experts' gate_up_proj_bias and down_proj_bias
    TRY_ASSIGN(m.num_experts, c.count("num_local_experts"));
    TRY_ASSIGN(m.experts_per_token, c.count_any({"num_experts_per_tok", "experts_per_token"}));
    m.moe_intermediate_size = m.intermediate_size;
    if (auto s = read_sliding_window(c, m); !s) return s;
    if (!read_layer_types(c, m)) {
      // GptOssConfig's default layer_types: sliding on even layers, full on odd ones.
      m.layer_is_sliding.assign(m.num_layers, false);
      for (uint64_t i = 0; i < m.num_layers; ++i) m.layer_is_sliding[i] = (i + 1) % 2 != 0;
    }
    return Ok{};
  }
  if (t == "phi") {
    if (auto s = read_llama_like(c, m); !s) return s;
    m.norm = NormKind::kLayerNorm;
    m.norms_per_layer = 1;
    m.parallel_attention = true;
    m.gated_mlp = false;
    m.qkv_bias = m.attn_out_bias = m.mlp_bias = true;
    m.lm_head_bias = true;
    m.tie_word_embeddings = c.flag("tie_word_embeddings", false);
    m.hidden_act = c.text("hidden_act", "gelu_new");
    m.hidden_dropout = c.number("resid_pdrop", 0);
    if (c.flag("qk_layernorm", false)) {
      return unmodelled(fmt::format("{}: phi with qk_layernorm is not supported", m.source));
    }
    return Ok{};
  }
  if (t == "phi3") {
    if (auto s = read_llama_like(c, m); !s) return s;
    m.tie_word_embeddings = c.flag("tie_word_embeddings", false);
    if (auto s = read_sliding_window(c, m); !s) return s;
    m.hidden_dropout = c.number("resid_pdrop", 0);
    return Ok{};
  }
  if (t == "gpt2" || t == "gpt_bigcode" || t == "gptj") {
    TRY_ASSIGN(m.vocab_size, c.count("vocab_size"));
    TRY_ASSIGN(m.hidden_size, c.count_any({"n_embd", "hidden_size"}));
    TRY_ASSIGN(m.num_layers, c.count_any({"n_layer", "num_hidden_layers"}));
    TRY_ASSIGN(m.num_attention_heads, c.count_any({"n_head", "num_attention_heads"}));
    TRY_ASSIGN(m.intermediate_size, c.count("n_inner", 4 * m.hidden_size));
    TRY_ASSIGN(m.max_position_embeddings, c.count_any({"n_positions", "max_position_embeddings"}, 0));
    m.num_kv_heads = m.num_attention_heads;
    m.norm = NormKind::kLayerNorm;
    m.gated_mlp = false;
    m.mlp_bias = true;
    m.hidden_act = c.text("activation_function", "gelu_new");
    m.attention_dropout = c.number("attn_pdrop", 0.1);
    m.hidden_dropout = c.number("resid_pdrop", 0.1);
    if (t == "gptj") {
      m.parallel_attention = true;
      m.norms_per_layer = 1;
      m.lm_head_bias = true;
      m.tie_word_embeddings = c.flag("tie_word_embeddings", false);
      m.attention_dropout = c.number("attn_pdrop", 0);
      m.hidden_dropout = c.number("resid_pdrop", 0);
    } else {
      m.qkv_bias = m.attn_out_bias = true;
      m.position_embeddings = m.max_position_embeddings;
      m.tie_word_embeddings = c.flag("tie_word_embeddings", true);
      if (t == "gpt_bigcode" && c.flag("multi_query", true)) m.num_kv_heads = 1;
    }
    return Ok{};
  }
  if (t == "gpt_neox") {
    TRY_ASSIGN(m.vocab_size, c.count("vocab_size"));
    TRY_ASSIGN(m.hidden_size, c.count("hidden_size"));
    TRY_ASSIGN(m.num_layers, c.count("num_hidden_layers"));
    TRY_ASSIGN(m.num_attention_heads, c.count("num_attention_heads"));
    TRY_ASSIGN(m.intermediate_size, c.count("intermediate_size", 4 * m.hidden_size));
    TRY_ASSIGN(m.max_position_embeddings, c.count("max_position_embeddings", 0));
    m.num_kv_heads = m.num_attention_heads;
    m.norm = NormKind::kLayerNorm;
    m.gated_mlp = false;
    m.qkv_bias = m.attn_out_bias = c.flag("attention_bias", true);
    m.mlp_bias = true;
    m.tie_word_embeddings = c.flag("tie_word_embeddings", false);
    m.hidden_act = c.text("hidden_act", "gelu");
    m.parallel_attention = c.flag("use_parallel_residual", true);
    m.attention_dropout = c.number("attention_dropout", 0);
    m.hidden_dropout = c.number("hidden_dropout", 0);
    return Ok{};
  }
  if (t == "falcon" || t == "RefinedWeb" || t == "RefinedWebModel") {
    m.model_type = "falcon";
    TRY_ASSIGN(m.vocab_size, c.count("vocab_size"));
    TRY_ASSIGN(m.hidden_size, c.count_any({"hidden_size", "n_embed"}));
    TRY_ASSIGN(m.num_layers, c.count_any({"num_hidden_layers", "n_layer"}));
    TRY_ASSIGN(m.num_attention_heads, c.count_any({"num_attention_heads", "n_head"}));
    TRY_ASSIGN(m.intermediate_size, c.count("ffn_hidden_size", 4 * m.hidden_size));
    TRY_ASSIGN(m.max_position_embeddings, c.count("max_position_embeddings", 2048));
    const bool new_arch = c.flag("new_decoder_architecture", t == "RefinedWeb");
    if (new_arch) {
      TRY_ASSIGN(m.num_kv_heads, c.count_any({"num_kv_heads", "n_head_kv"}, m.num_attention_heads));
      uint64_t ln = 2;
      TRY_ASSIGN(ln, c.count("num_ln_in_parallel_attn", 2));
      m.norms_per_layer = ln;
      m.parallel_attention = true;
    } else {
      m.num_kv_heads = c.flag("multi_query", true) ? 1 : m.num_attention_heads;
      m.parallel_attention = c.flag("parallel_attn", true);
      m.norms_per_layer = m.parallel_attention ? 1 : 2;
    }
    if (c.flag("alibi", false)) {
      // ALiBi has no parameters; only the attention kernel choice changes.
      m.notes.push_back("alibi attention (no positional parameters)");
    }
    m.norm = NormKind::kLayerNorm;
    m.gated_mlp = false;
    m.qkv_bias = m.attn_out_bias = m.mlp_bias = c.flag("bias", false);
    m.tie_word_embeddings = c.flag("tie_word_embeddings", true);
    m.hidden_act = c.text("activation", "gelu");
    m.attention_dropout = c.number("attention_dropout", 0);
    m.hidden_dropout = c.number("hidden_dropout", 0);
    return Ok{};
  }
  if (t == "opt") {
    TRY_ASSIGN(m.vocab_size, c.count("vocab_size"));
    TRY_ASSIGN(m.hidden_size, c.count("hidden_size"));
    TRY_ASSIGN(m.num_layers, c.count("num_hidden_layers"));
    TRY_ASSIGN(m.num_attention_heads, c.count("num_attention_heads"));
    TRY_ASSIGN(m.intermediate_size, c.count("ffn_dim"));
    TRY_ASSIGN(m.max_position_embeddings, c.count("max_position_embeddings"));
    TRY_ASSIGN(m.embedding_dim, c.count("word_embed_proj_dim", m.hidden_size));
    m.num_kv_heads = m.num_attention_heads;
    m.position_embeddings = m.max_position_embeddings + 2;  // OPTLearnedPositionalEmbedding offset 2
    m.norm = NormKind::kLayerNorm;
    m.gated_mlp = false;
    const bool bias = c.flag("enable_bias", true);
    m.qkv_bias = m.attn_out_bias = m.mlp_bias = bias;
    m.tie_word_embeddings = c.flag("tie_word_embeddings", true);
    m.final_norm = c.flag("do_layer_norm_before", true) && !c.flag("_remove_final_layer_norm", false);
    m.hidden_act = c.text("activation_function", "relu");
    m.attention_dropout = c.number("attention_dropout", 0);
    m.hidden_dropout = c.number("dropout", 0.1);
    return Ok{};
  }
  if (t == "bloom") {
    TRY_ASSIGN(m.vocab_size, c.count("vocab_size"));
    TRY_ASSIGN(m.hidden_size, c.count_any({"hidden_size", "n_embed"}));
    TRY_ASSIGN(m.num_layers, c.count_any({"n_layer", "num_hidden_layers"}));
    TRY_ASSIGN(m.num_attention_heads, c.count_any({"n_head", "num_attention_heads"}));
    m.num_kv_heads = m.num_attention_heads;
    m.intermediate_size = 4 * m.hidden_size;
    m.norm = NormKind::kLayerNorm;
    m.gated_mlp = false;
    m.qkv_bias = m.attn_out_bias = m.mlp_bias = true;
    m.embedding_norm = true;
    m.tie_word_embeddings = c.flag("tie_word_embeddings", true);
    m.hidden_act = "bloom_gelu";
    m.attention_dropout = c.number("attention_dropout", 0);
    m.hidden_dropout = c.number("hidden_dropout", 0);
    return Ok{};
  }
  if (t == "bert" || t == "roberta" || t == "deberta-v2" || t == "vit") {
    TRY_ASSIGN(m.hidden_size, c.count("hidden_size"));
    TRY_ASSIGN(m.num_layers, c.count("num_hidden_layers"));
    TRY_ASSIGN(m.num_attention_heads, c.count("num_attention_heads"));
    TRY_ASSIGN(m.intermediate_size, c.count("intermediate_size"));
    m.num_kv_heads = m.num_attention_heads;
    m.is_encoder_only = true;
    m.tie_word_embeddings = true;  // the base model has no output head
    m.norm = NormKind::kLayerNorm;
    m.gated_mlp = false;
    m.qkv_bias = m.attn_out_bias = m.mlp_bias = true;
    m.hidden_act = c.text("hidden_act", "gelu");
    m.attention_dropout = c.number("attention_probs_dropout_prob", 0.1);
    m.hidden_dropout = c.number("hidden_dropout_prob", 0.1);
    const uint64_t h = m.hidden_size;
    if (t == "vit") {
      TRY_ASSIGN(m.image_size, c.count("image_size", 224));
      TRY_ASSIGN(m.patch_size, c.count("patch_size", 16));
      uint64_t channels = 3;
      TRY_ASSIGN(channels, c.count("num_channels", 3));
      if (m.patch_size == 0 || m.image_size % m.patch_size) {
        return make_error(fmt::format("{}: image_size {} is not a multiple of patch_size {}",
                                      m.source, m.image_size, m.patch_size));
      }
      const uint64_t patches = (m.image_size / m.patch_size) * (m.image_size / m.patch_size);
      m.max_position_embeddings = patches + 1;
      m.qkv_bias = c.flag("qkv_bias", true);
      m.hidden_dropout = c.number("hidden_dropout_prob", 0);
      m.attention_dropout = c.number("attention_probs_dropout_prob", 0);
      // ViTModel: cls token, position table, patch Conv2d, final layernorm, pooler (dense h->h).
      m.extra_params = h + (patches + 1) * h + (channels * m.patch_size * m.patch_size * h + h) + (h * h + h);
      m.pooler_dense = true;
      return Ok{};
    }
    TRY_ASSIGN(m.vocab_size, c.count("vocab_size"));
    TRY_ASSIGN(m.max_position_embeddings, c.count("max_position_embeddings", 512));
    TRY_ASSIGN(m.token_type_embeddings, c.count("type_vocab_size", t == "deberta-v2" ? 0 : 2));
    m.embedding_norm = true;
    m.final_norm = false;
    if (t == "deberta-v2") {
      if (c.flag("position_biased_input", true)) m.position_embeddings = m.max_position_embeddings;
      uint64_t emb = 0;
      TRY_ASSIGN(emb, c.count("embedding_size", h));
      if (emb != h) {
        return unmodelled(fmt::format("{}: embedding_size {} different from hidden_size is not supported",
                                      m.source, emb));
      }
      // DebertaV2Encoder: relative position embeddings (2 * buckets rows), their LayerNorm and
      // the convolution layer of the first block (modeling_deberta_v2.py).
      if (c.flag("relative_attention", false)) {
        int64_t max_rel = -1;
        TRY_ASSIGN(max_rel, c.integer("max_relative_positions", -1));
        uint64_t buckets = 0;
        TRY_ASSIGN(buckets, c.count("position_buckets", 0));
        uint64_t span = buckets ? buckets : (max_rel < 1 ? m.max_position_embeddings : static_cast<uint64_t>(max_rel));
        m.extra_params += 2 * span * h;
        m.relative_attention_span = span;
        // pos_att_type is "p2c|c2p" in the released configs, a list in some re-saved ones.
        std::string pos_att;
        if (c.has("pos_att_type")) {
          const auto& v = c.raw().at("pos_att_type");
          if (v.is_string()) pos_att = v.get<std::string>();
          else if (v.is_array()) for (const auto& x : v) if (x.is_string()) pos_att += x.get<std::string>() + "|";
          if (!v.is_string() && !v.is_array()) {
            return make_error(fmt::format("{}: \"pos_att_type\" must be a string or a list, got {}", m.source,
                                          v.type_name()));
          }
        }
        m.content_to_position = pos_att.find("c2p") != std::string::npos;
        m.position_to_content = pos_att.find("p2c") != std::string::npos;
        if (c.text("norm_rel_ebd").find("layer_norm") != std::string::npos) m.extra_params += 2 * h;
        if (c.has("pos_att_type") && !c.flag("share_att_key", false)) {
          return unmodelled(fmt::format("{}: deberta-v2 with share_att_key false is not supported", m.source));
        }
      }
      uint64_t kernel = 0;
      TRY_ASSIGN(kernel, c.count("conv_kernel_size", 0));
      if (kernel) m.extra_params += h * h * kernel + h + 2 * h;
      m.conv_kernel_size = kernel;
      m.conv_act = c.text("conv_act", "tanh");
    } else {
      m.position_embeddings = m.max_position_embeddings;
      m.extra_params = h * h + h;  // BertPooler / RobertaPooler dense layer
      m.pooler_dense = true;
    }
    return Ok{};
  }
  if (t == "t5" || t == "mt5") {
    TRY_ASSIGN(m.vocab_size, c.count("vocab_size"));
    TRY_ASSIGN(m.hidden_size, c.count("d_model"));
    TRY_ASSIGN(m.num_encoder_layers, c.count("num_layers"));
    TRY_ASSIGN(m.num_layers, c.count("num_decoder_layers", m.num_encoder_layers));
    TRY_ASSIGN(m.num_attention_heads, c.count("num_heads"));
    TRY_ASSIGN(m.head_dim, c.count("d_kv"));
    TRY_ASSIGN(m.intermediate_size, c.count("d_ff"));
    TRY_ASSIGN(m.relative_attention_buckets, c.count("relative_attention_num_buckets", 32));
    m.num_kv_heads = m.num_attention_heads;
    m.is_encoder_decoder = true;
    m.norm = NormKind::kRmsNorm;
    std::string ff = c.text("feed_forward_proj", "relu");
    m.gated_mlp = ff.rfind("gated-", 0) == 0;
    m.hidden_act = m.gated_mlp ? ff.substr(6) : ff;
    if (m.hidden_act == "gelu") m.hidden_act = "gelu_new";  // T5Config maps gated-gelu to gelu_new
    m.tie_word_embeddings = c.flag("tie_word_embeddings", t == "t5");
    // One rate for attention, sublayer outputs, the feed-forward's inner activation
    // (T5DenseActDense / T5DenseGatedActDense) and each stack's embeddings and final norm.
    m.attention_dropout = m.hidden_dropout = m.mlp_dropout = c.number("dropout_rate", 0.1);
    return Ok{};
  }
  std::string known;
  for (const auto& k : kModelTypes) known += (known.empty() ? "" : ", ") + k;
  return unmodelled(fmt::format(
      "{}: unknown model_type \"{}\" (known: {})",
      m.source, t, known));
}

// The shape checks live in model/architecture.cpp (shared with --params); here only what a config
// file adds: head_dim derived from the width, and a note on an oversized sliding window.
Status validate(ModelSpec& m) {
  if (auto s = validate_shape(m, m.source); !s) return s.error();
  if (m.attention == AttentionKind::kMultiHead && m.head_dim == 0) m.head_dim = m.hidden_size / m.num_attention_heads;
  if (m.sliding_window && m.max_position_embeddings && *m.sliding_window > m.max_position_embeddings) {
    m.notes.push_back(fmt::format("sliding_window {} exceeds max_position_embeddings {}: every layer attends fully",
                                  *m.sliding_window, m.max_position_embeddings));
  }
  return Ok{};
}

// group_size: GPTQ writes -1 for one group per column, which is no grouping here (0).
Status read_group_size(const ConfigView& q, ModelSpec& m) {
  int64_t group = 0;
  TRY_ASSIGN(group, q.integer("group_size", 0));
  m.quantization_group_size = group > 0 ? static_cast<uint64_t>(group) : 0;
  if (group == -1) m.quantization_per_channel = true;  // GPTQ/AWQ: "-1" means one group per column
  return Ok{};
}

Status read_dtype_and_quantization(const ConfigView& c, ModelSpec& m) {
  m.torch_dtype = c.text("torch_dtype", c.text("dtype"));
  if (!c.has("quantization_config")) return Ok{};
  const json& q = c.raw().at("quantization_config");
  if (!q.is_object()) {
    return make_error(fmt::format("{}: \"quantization_config\" must be an object, got {}", m.source, q.type_name()));
  }
  ConfigView qc(q, m.source, "quantization_config.");
  m.quantization = qc.text("quant_method");
  // transformers reads a quantization_config without quant_method as bitsandbytes when it sets
  // load_in_4bit or load_in_8bit (configs saved before quant_method existed), and refuses any other
  // (AutoQuantizationConfig.from_dict: "has no `quant_method` attribute").
  const bool load_in_4bit = qc.flag("load_in_4bit", false), load_in_8bit = qc.flag("load_in_8bit", false);
  if (qc.type_error()) return *qc.type_error();
  if (m.quantization.empty() && !q.empty()) {
    if (!load_in_4bit && !load_in_8bit) {
      return make_error(fmt::format("{}: \"quantization_config\" has no \"quant_method\" (nor load_in_4bit or "
                                    "load_in_8bit): transformers refuses it as not correctly quantized",
                                    m.source));
    }
    m.quantization = "bitsandbytes";
  }
  if (m.quantization == "bitsandbytes" && load_in_4bit && load_in_8bit) {
    return make_error(fmt::format("{}: \"quantization_config\" sets both load_in_4bit and load_in_8bit; "
                                  "bitsandbytes uses one (BitsAndBytesConfig refuses both)",
                                  m.source));
  }
  // The modules left in 16 bits, under each format's key; compressed-tensors' "re:" patterns are
  // regular expressions and are not read.
  for (const char* key : {"modules_to_not_convert", "ignored_layers", "ignore", "llm_int8_skip_modules"}) {
    if (!q.contains(key) || !q.at(key).is_array()) continue;
    for (const auto& name : q.at(key)) {
      if (name.is_string() && name.get<std::string>().rfind("re:", 0) != 0) m.unquantized_modules.push_back(name.get<std::string>());
    }
  }
  TRY_ASSIGN(m.quantization_bits, qc.count("bits", 0));
  if (auto s = read_group_size(qc, m); !s) return s;
  if (m.quantization == "bitsandbytes") {
    if (load_in_4bit) m.quantization_bits = 4;
    else if (load_in_8bit) m.quantization_bits = 8;
    m.quantization_double_quant = m.quantization_bits == 4 && qc.flag("bnb_4bit_use_double_quant", false);
    m.quantization_fp4 = m.quantization_bits == 4 && qc.text("bnb_4bit_quant_type") == "fp4";
  } else if (m.quantization == "fp8" || m.quantization == "fbgemm_fp8") {
    m.quantization_bits = 8;
  } else if (m.quantization == "mxfp4") {
    m.quantization_bits = 4;  // e2m1 values with one e8m0 scale per 32 (quantizes_only_experts)
  } else if (m.quantization == "compressed-tensors" && m.quantization_bits == 0) {
    // compressed-tensors nests bits per config group; take the first weights entry.
    if (q.contains("config_groups") && q.at("config_groups").is_object()) {
      for (const auto& [name, group_cfg] : q.at("config_groups").items()) {
        if (group_cfg.contains("weights") && group_cfg.at("weights").is_object()) {
          ConfigView w(group_cfg.at("weights"), m.source,
                       fmt::format("quantization_config.config_groups.{}.weights.", name));
          TRY_ASSIGN(m.quantization_bits, w.count("num_bits", 0));
          // compressed-tensors' QuantizationArgs: type "int" unless it says "float"; strategy
          // "channel" (or "tensor") has no groups.
          m.quantization_integers = w.text("type", "int") != "float";
          const std::string strategy = w.text("strategy");
          if (strategy == "channel" || strategy == "tensor") m.quantization_per_channel = true;
          if (auto s = read_group_size(w, m); !s) return s;
          if (w.type_error()) return *w.type_error();
          break;
        }
      }
    }
  } else if (m.quantization == "torchao") {
    // torchao's weight-only configs: the quant_type name (transformers' TorchAoConfig
    // "int4_weight_only", "int8_weight_only" with quant_type_kwargs), or its serialized config
    // ({"default": {"_type": "Int4WeightOnlyConfig", "_data": {"group_size": 128}}}).
    std::string type = q.contains("quant_type") && q.at("quant_type").is_object() ? "" : qc.text("quant_type");
    if (q.contains("quant_type_kwargs") && q.at("quant_type_kwargs").is_object()) {
      if (auto s = read_group_size(ConfigView(q.at("quant_type_kwargs"), m.source, "quantization_config.quant_type_kwargs."), m); !s) {
        return s;
      }
    }
    if (q.contains("quant_type") && q.at("quant_type").is_object() && !q.at("quant_type").empty()) {
      const json& entry = q.at("quant_type").begin().value();
      if (entry.is_object()) {
        ConfigView serialized(entry, m.source, "quantization_config.quant_type.");
        type = serialized.text("_type");
        if (entry.contains("_data") && entry.at("_data").is_object()) {
          if (auto s = read_group_size(ConfigView(entry.at("_data"), m.source, "quantization_config.quant_type._data."), m); !s) {
            return s;
          }
        }
      }
    }
    std::string lower = to_lower(type);
    std::erase(lower, '_');
    if (lower.find("int4weightonly") != std::string::npos) m.quantization_bits = 4;
    else if (lower.find("int8weightonly") != std::string::npos) m.quantization_bits = 8;
  } else if (m.quantization == "awq" && m.quantization_bits == 0) {
    TRY_ASSIGN(m.quantization_bits, qc.count("w_bit", 0));   // AutoAWQ's own name for it
  }
  if (qc.type_error()) return *qc.type_error();
  // GPTQ packs 2, 3, 4 or 8 bits (auto-gptq's QuantLinear); AWQ 4.
  if (m.quantization == "gptq" && m.quantization_bits != 2 && m.quantization_bits != 3 && m.quantization_bits != 4 &&
      m.quantization_bits != 8) {
    return make_error(fmt::format("{}: quantization_config.bits: GPTQ packs 2, 3, 4 or 8 bits (got {})", m.source,
                                  m.quantization_bits));
  }
  if (m.quantization == "awq" && m.quantization_bits != 0 && m.quantization_bits != 4) {
    return make_error(fmt::format("{}: quantization_config.bits: AWQ packs 4 bits (got {})", m.source, m.quantization_bits));
  }
  // A format whose layout oomdoc does not know is sized as the 16-bit model: said, not hidden.
  if (!m.quantization.empty() && m.quantization_bits == 0) {
    m.notes.push_back(fmt::format("quantization_config quant_method \"{}\" is not sized: its weights are counted at the "
                                  "model's 16 bits, an upper bound", m.quantization));
  }
  return Ok{};
}

}  // namespace

// rope_scaling (transformers v5: rope_parameters): {"type"|"rope_type": ..., "factor": ...,
// "original_max_position_embeddings": ...}. Malformed entries are ignored: only vLLM's default
// context depends on them.
static void read_rope_object(const json* rope, ModelSpec& m);

// Qwen2-VL's and Qwen2.5-VL's rope_scaling names "mrope" (or, rewritten by later transformers,
// "default") with an mrope_section: rotary positions split over time, height and width, not a
// longer context. Either type scales nothing, so it reads as no rope scaling.
static void read_rope_scaling(const json& config, ModelSpec& m) {
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (config.contains(key) && config.at(key).is_object()) {
      read_rope_object(&config.at(key), m);
      if (m.rope_scaling_type == "mrope" || m.rope_scaling_type == "default") {
        if (config.at(key).contains("mrope_section")) {
          m.notes.push_back("rope_scaling with mrope_section: multimodal rotary positions (time, height, width), "
                            "no context scaling");
        }
        m.rope_scaling_type.clear();
        m.rope_scaling_factor = 1.0;
      }
      // Phi-3's LongRoPE configs keep original_max_position_embeddings beside rope_scaling.
      if (m.rope_scaling_type == "longrope" && !m.rope_original_max_position &&
          config.contains("original_max_position_embeddings") &&
          config.at("original_max_position_embeddings").is_number_unsigned()) {
        const uint64_t original = config.at("original_max_position_embeddings").get<uint64_t>();
        if (original <= (1ull << 26)) m.rope_original_max_position = original;
      }
      return;
    }
  }
}

bool apply_rope_scaling_json(std::string_view rope_object_json, ModelSpec& model) {
  json rope = json::parse(rope_object_json.begin(), rope_object_json.end(), nullptr, false);
  if (rope.is_discarded() || !rope.is_object()) return false;
  // An override replaces the whole object, as vLLM's hf_overrides replace the config's entry.
  model.rope_scaling_type.clear();
  model.rope_scaling_factor = 1.0;
  model.rope_original_max_position = 0;
  read_rope_object(&rope, model);
  return !model.rope_scaling_type.empty();
}

static void read_rope_object(const json* rope, ModelSpec& m) {
  for (const char* key : {"rope_type", "type"}) {
    if (rope->contains(key) && rope->at(key).is_string()) {
      m.rope_scaling_type = rope->at(key).get<std::string>();
      break;
    }
  }
  if (rope->contains("factor") && rope->at("factor").is_number()) {
    double factor = rope->at("factor").get<double>();
    if (factor > 0 && factor <= 1024) m.rope_scaling_factor = factor;
  }
  if (rope->contains("original_max_position_embeddings") &&
      rope->at("original_max_position_embeddings").is_number_unsigned()) {
    uint64_t original = rope->at("original_max_position_embeddings").get<uint64_t>();
    if (original <= (1ull << 26)) m.rope_original_max_position = original;
  }
}

namespace {

// The text model class of each multimodal wrapper, for a text_config saved without its model_type.
const std::pair<const char*, const char*> kWrapperTextTypes[] = {
    {"gemma3", "gemma3_text"}, {"mllama", "mllama_text_model"}, {"qwen2_vl", "qwen2_vl_text"},
    {"qwen2_5_vl", "qwen2_5_vl_text"}};

// transformers saves a composite config's sub-configs as their differences from the class
// defaults (PretrainedConfig.to_diff_dict), so a text_config leaves out every value equal to its
// class's default: Gemma 3's omits the vocabulary, heads and context, Llava's most of Llama's
// (or Mistral's, Qwen2's) shape. The defaults of those classes (configuration_gemma3.py
// Gemma3TextConfig, configuration_llama.py LlamaConfig, MistralConfig, Qwen2Config) fill them in.
void fill_text_config_defaults(json& config) {
  if (!config.contains("model_type") || !config.at("model_type").is_string()) return;
  const std::string type = config.at("model_type").get<std::string>();
  const char* defaults = nullptr;
  if (type == "gemma3_text") {
    defaults = R"({"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                   "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                   "max_position_embeddings": 131072, "query_pre_attn_scalar": 256, "sliding_window": 4096,
                   "sliding_window_pattern": 6})";
  } else if (type == "llama") {
    defaults = R"({"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                   "num_attention_heads": 32, "max_position_embeddings": 2048})";
  } else if (type == "mistral") {  // configuration_mistral.py MistralConfig
    defaults = R"({"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                   "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
                   "sliding_window": 4096})";
  } else if (type == "qwen2") {  // configuration_qwen2.py Qwen2Config
    defaults = R"({"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
                   "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 32768})";
  } else if (type == "qwen2_vl_text" || type == "qwen2_5_vl_text") {
    // configuration_qwen2_vl.py Qwen2VLTextConfig, configuration_qwen2_5_vl.py Qwen2_5_VLTextConfig
    defaults = R"({"vocab_size": 152064, "hidden_size": 8192, "intermediate_size": 29568, "num_hidden_layers": 80,
                   "num_attention_heads": 64, "num_key_value_heads": 8, "max_position_embeddings": 32768})";
  } else if (type == "mllama_text_model") {  // configuration_mllama.py MllamaTextConfig
    defaults = R"({"vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 40,
                   "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
                   "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38]})";
  }
  if (!defaults) return;
  const json filled = json::parse(defaults);  // named: items() does not keep a temporary alive
  for (const auto& [key, value] : filled.items()) {
    if (!config.contains(key)) config[key] = value;
  }
}

// A vision tower's parameters, as the note names it. The projector is apart when the wrapper owns
// it (Gemma 3, Llava, Mllama) and inside the tower when the tower owns it (Qwen's PatchMerger).
struct VisionTower {
  std::string name;       // "SigLIP", "Qwen2.5-VL", ...
  uint64_t blocks = 0;
  uint64_t params = 0;
};

struct VisionLimit {
  const char* name;
  uint64_t value, max;
};

// The text model's bounds (model/architecture.cpp validate_shape) for a tower's widths, depths and
// patch counts: far above any real tower, and every product below stays inside 64 bits.
Status check_vision_limits(const std::string& source, std::initializer_list<VisionLimit> limits) {
  for (const VisionLimit& l : limits) {
    if (l.value > l.max) {
      return make_error(fmt::format("{}: vision_config: {} {} is implausibly large (limit {})", source, l.name,
                                    l.value, l.max));
    }
  }
  return Ok{};
}

// SigLIP (Gemma 3, PaliGemma) and CLIP (Llava) encoders as transformers builds them
// (modeling_siglip.py SiglipVisionTransformer, modeling_clip.py CLIPVisionTransformer): a patch
// convolution, a learned position per patch (plus CLIP's class token), pre-norm blocks whose
// LayerNorms, attention projections and two-layer MLP all carry biases, a final LayerNorm, and
// SigLIP's attention-pooling head unless vision_use_head is false.
Result<VisionTower> siglip_or_clip_tower(const ConfigView& v, bool siglip, const std::string& source) {
  uint64_t h = 0, inter = 0, layers = 0, image = 0, patch = 0, channels = 0;
  TRY_ASSIGN(h, v.count("hidden_size", 768));
  TRY_ASSIGN(inter, v.count("intermediate_size", 3072));
  TRY_ASSIGN(layers, v.count("num_hidden_layers", 12));
  TRY_ASSIGN(image, v.count("image_size", 224));
  TRY_ASSIGN(patch, v.count("patch_size", siglip ? 16 : 32));
  TRY_ASSIGN(channels, v.count("num_channels", 3));
  if (patch == 0 || image < patch || h == 0) {
    return make_error(fmt::format("{}: vision_config: image_size {} and patch_size {} give no patches", source,
                                  image, patch));
  }
  if (auto s = check_vision_limits(source, {{"hidden_size", h, 1u << 18}, {"intermediate_size", inter, 1u << 20},
                                            {"num_hidden_layers", layers, 1u << 12}, {"num_channels", channels, 1u << 8},
                                            {"image_size / patch_size", image / patch, 1u << 12},
                                            {"patch_size", patch, 1u << 12}});
      !s) {
    return s.error();
  }
  const uint64_t patches = (image / patch) * (image / patch);
  const uint64_t block = 4 * (h * h + h) + (h * inter + inter) + (inter * h + h) + 4 * h;
  uint64_t params = layers * block + 2 * h;  // blocks + post_layernorm
  if (siglip) {
    params += channels * patch * patch * h + h + patches * h;  // patch conv with bias, positions
    if (v.flag("vision_use_head", true)) {
      // probe + nn.MultiheadAttention (in_proj 3h x h + 3h, out_proj) + LayerNorm + MLP
      params += h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * inter + inter) + (inter * h + h);
    }
  } else {
    params += h + channels * patch * patch * h + (patches + 1) * h + 2 * h;  // class token, conv, positions, pre-norm
  }
  return VisionTower{siglip ? "SigLIP" : "CLIP", layers, params};
}

// Qwen2-VL (modeling_qwen2_vl.py Qwen2VisionTransformerPretrainedModel) and Qwen2.5-VL
// (modeling_qwen2_5_vl.py Qwen2_5_VisionTransformerPretrainedModel): a bias-free Conv3d patch
// embedding (in_channels x temporal_patch_size x patch x patch to the tower's width), `depth`
// blocks of two norms, a fused qkv Linear and an output proj (both with bias) and an MLP, then the
// PatchMerger that joins spatial_merge_size^2 neighbours (ln_q, Linear(w m^2, w m^2) and
// Linear(w m^2, out), both with bias) into the language model's width. Qwen2-VL: width embed_dim,
// LayerNorms (weight and bias), a QuickGELU MLP fc1/fc2 of int(embed_dim x mlp_ratio) with biases,
// merger output hidden_size. Qwen2.5-VL: width hidden_size, RMSNorms (weight only), a SwiGLU MLP
// gate/up/down of intermediate_size all with biases, merger output out_hidden_size. Missing keys
// take Qwen2VLVisionConfig's / Qwen2_5_VLVisionConfig's defaults: checkpoints saved by recent
// transformers keep only what differs from them (Qwen2.5-VL-7B's vision_config gives hidden_size
// 1280 and little else; the class default is 3584).
Result<VisionTower> qwen_vl_tower(const ConfigView& v, bool qwen2_5, const std::string& source) {
  uint64_t width = 0, depth = 0, inter = 0, out = 0, channels = 0, patch = 0, temporal = 0, merge = 0;
  TRY_ASSIGN(depth, v.count("depth", 32));
  TRY_ASSIGN(channels, v.count_any({"in_channels", "in_chans"}, 3));
  TRY_ASSIGN(patch, v.count("patch_size", 14));
  TRY_ASSIGN(temporal, v.count("temporal_patch_size", 2));
  TRY_ASSIGN(merge, v.count("spatial_merge_size", 2));
  if (qwen2_5) {
    TRY_ASSIGN(width, v.count("hidden_size", 3584));
    TRY_ASSIGN(inter, v.count("intermediate_size", 3420));
    TRY_ASSIGN(out, v.count("out_hidden_size", 3584));
  } else {
    TRY_ASSIGN(width, v.count("embed_dim", 1280));
    TRY_ASSIGN(out, v.count("hidden_size", 3584));
    const double ratio = v.number("mlp_ratio", 4);
    if (!(ratio > 0 && ratio <= 64)) {
      return make_error(fmt::format("{}: vision_config: mlp_ratio {} must be above 0 and at most 64", source, ratio));
    }
    inter = static_cast<uint64_t>(static_cast<double>(width) * ratio);  // int(embed_dim * mlp_ratio)
  }
  if (auto s = check_vision_limits(source, {{qwen2_5 ? "hidden_size" : "embed_dim", width, 1u << 18},
                                            {"intermediate_size", inter, 1u << 20}, {"out hidden size", out, 1u << 18},
                                            {"depth", depth, 1u << 12}, {"in_channels", channels, 1u << 8},
                                            {"patch_size", patch, 1u << 12}, {"temporal_patch_size", temporal, 1u << 8},
                                            {"spatial_merge_size", merge, 1u << 4}});
      !s) {
    return s.error();
  }
  if (width == 0 || patch == 0 || temporal == 0 || merge == 0) {
    return make_error(fmt::format("{}: vision_config: the tower's width, patch_size, temporal_patch_size and "
                                  "spatial_merge_size must not be 0", source));
  }
  const uint64_t norm = qwen2_5 ? width : 2 * width;
  const uint64_t attention = (width * 3 * width + 3 * width) + (width * width + width);
  const uint64_t mlp = qwen2_5 ? 2 * (width * inter + inter) + (inter * width + width)
                               : (width * inter + inter) + (inter * width + width);
  const uint64_t merged = width * merge * merge;
  const uint64_t merger = norm + (merged * merged + merged) + (merged * out + out);
  const uint64_t params = channels * temporal * patch * patch * width + depth * (2 * norm + attention + mlp) + merger;
  return VisionTower{qwen2_5 ? "Qwen2.5-VL" : "Qwen2-VL", depth, params};
}

// Llama 3.2 Vision (modeling_mllama.py MllamaVisionModel): a bias-free patch Conv2d, a class
// embedding, the gated position embedding (a gate, one row per patch and class token, and a tile
// table of (max_aspect_ratio_id + 1) x max_num_tiles x positions x width: MllamaPrecomputedPosition-
// Embedding), the pre- and post-tile aspect-ratio embeddings ((max_aspect_ratio_id + 1) x
// max_num_tiles x width and a gate each), LayerNorms before and after the local encoder, then
// num_hidden_layers local blocks and num_global_layers global blocks with two tanh gates each; a
// block has bias-free q/k/v/o, fc1/fc2 with biases and two LayerNorms. max_aspect_ratio_id is the
// number of supported_aspect_ratios: 8 by default, which MllamaVisionConfig allows only with
// max_num_tiles 4.
Result<VisionTower> mllama_tower(const ConfigView& v, const std::string& source) {
  uint64_t h = 0, inter = 0, layers = 0, global = 0, image = 0, patch = 0, channels = 0, tiles = 0;
  TRY_ASSIGN(h, v.count("hidden_size", 1280));
  TRY_ASSIGN(inter, v.count("intermediate_size", 5120));
  TRY_ASSIGN(layers, v.count("num_hidden_layers", 32));
  TRY_ASSIGN(global, v.count("num_global_layers", 8));
  TRY_ASSIGN(image, v.count("image_size", 448));
  TRY_ASSIGN(patch, v.count("patch_size", 14));
  TRY_ASSIGN(channels, v.count("num_channels", 3));
  TRY_ASSIGN(tiles, v.count("max_num_tiles", 4));
  uint64_t aspect_ratios = 8;
  if (v.has("supported_aspect_ratios")) {
    const json& ratios = v.raw().at("supported_aspect_ratios");
    if (!ratios.is_array()) {
      return make_error(fmt::format("{}: vision_config.supported_aspect_ratios must be a list, got {}", source,
                                    ratios.type_name()));
    }
    aspect_ratios = ratios.size();
  } else if (tiles != 4) {
    return make_error(fmt::format("{}: vision_config: max_num_tiles {} needs supported_aspect_ratios (the default "
                                  "list is for 4 tiles)", source, tiles));
  }
  if (patch == 0 || image < patch || h == 0) {
    return make_error(fmt::format("{}: vision_config: image_size {} and patch_size {} give no patches", source,
                                  image, patch));
  }
  if (auto s = check_vision_limits(source, {{"hidden_size", h, 1u << 18}, {"intermediate_size", inter, 1u << 20},
                                            {"num_hidden_layers + num_global_layers", layers + global, 1u << 12},
                                            {"num_channels", channels, 1u << 8},
                                            {"image_size / patch_size", image / patch, 1u << 12},
                                            {"patch_size", patch, 1u << 12}, {"max_num_tiles", tiles, 1u << 8},
                                            {"supported_aspect_ratios", aspect_ratios, 1u << 8}});
      !s) {
    return s.error();
  }
  const uint64_t positions = (image / patch) * (image / patch) + 1;
  const uint64_t aspect_rows = aspect_ratios + 1;
  const uint64_t block = 4 * h * h + (h * inter + inter) + (inter * h + h) + 4 * h;
  uint64_t params = channels * patch * patch * h + h;                // patch conv, class embedding
  params += 1 + positions * h + aspect_rows * tiles * positions * h;  // gated position and tile embeddings
  params += 2 * (aspect_rows * tiles * h + 1);                        // pre/post tile embeddings and gates
  params += 2 * (2 * h);                                              // layernorm_pre, layernorm_post
  params += layers * block + global * (block + 2);
  return VisionTower{"Mllama", layers + global, params};
}

// The vision tower and projector a multimodal wrapper loads beside its language model, counted
// into extra_params (weights, and gradients and optimizer state when it trains): the towers above,
// and the projectors the wrappers own: Gemma 3's mm_input_projection_weight and mm_soft_emb_norm
// (modeling_gemma3.py Gemma3MultiModalProjector), Llava's two biased Linears (modeling_llava.py
// LlavaMultiModalProjector; LLaVA-NeXT adds its image_newline vector), Mllama's
// multi_modal_projector Linear(vision_output_dim, text hidden) with bias. Qwen's merger is inside
// its tower. Other towers are not counted, and a note says so. Images themselves are not sized:
// batches are taken as text.
Status read_vision_tower(const json& root, ModelSpec& m) {
  if (!root.contains("vision_config") || !root.at("vision_config").is_object()) return Ok{};
  const json& vision = root.at("vision_config");
  ConfigView v(vision, m.source, "vision_config.");
  m.has_vision_tower = true;
  const std::string wrapper = root.contains("model_type") && root.at("model_type").is_string()
                                  ? root.at("model_type").get<std::string>() : "";
  std::string tower = v.text("model_type");
  if (v.type_error()) return *v.type_error();
  // Qwen's and Mllama's saved vision_config may leave its model_type out: the wrapper names it.
  if (tower.empty() && (wrapper == "qwen2_vl" || wrapper == "qwen2_5_vl")) tower = wrapper;
  if (tower.empty() && wrapper == "mllama") tower = "mllama_vision_model";
  const bool qwen = tower == "qwen2_vl" || tower == "qwen2_5_vl";
  const bool mllama = tower == "mllama_vision_model";
  const bool siglip = tower == "siglip_vision_model";
  if (!qwen && !mllama && !siglip && tower != "clip_vision_model") {
    m.notes.push_back(fmt::format("vision tower \"{}\" not counted (SigLIP, CLIP, Qwen2-VL, Qwen2.5-VL and Mllama "
                                  "towers are): the parameter count is the language model's",
                                  tower.empty() ? "unnamed" : tower));
    return Ok{};
  }
  Result<VisionTower> counted = qwen     ? qwen_vl_tower(v, tower == "qwen2_5_vl", m.source)
                                : mllama ? mllama_tower(v, m.source)
                                         : siglip_or_clip_tower(v, siglip, m.source);
  if (!counted) return counted.error();
  uint64_t projector = 0;
  bool projector_known = true;
  if (qwen) {
    // The PatchMerger is the tower's own.
  } else if (mllama) {
    uint64_t vision_out = 0;
    TRY_ASSIGN(vision_out, v.count("vision_output_dim", 7680));
    if (auto s = check_vision_limits(m.source, {{"vision_output_dim", vision_out, 1u << 20}}); !s) return s.error();
    projector = vision_out * m.hidden_size + m.hidden_size;
  } else if (wrapper == "gemma3") {
    uint64_t h = 0;
    TRY_ASSIGN(h, v.count("hidden_size", 768));
    projector = h * m.hidden_size + h;
  } else if (wrapper == "llava" || wrapper == "llava_next") {
    uint64_t h = 0;
    TRY_ASSIGN(h, v.count("hidden_size", 768));
    projector = (h * m.hidden_size + m.hidden_size) + (m.hidden_size * m.hidden_size + m.hidden_size);
    if (wrapper == "llava_next") projector += m.hidden_size;  // LlavaNextModel.image_newline
  } else {
    projector_known = false;
    m.notes.push_back(fmt::format("the \"{}\" projector between vision tower and language model is not counted",
                                  wrapper));
  }
  if (v.type_error()) return *v.type_error();
  const uint64_t params = counted->params + projector;
  m.extra_params += params;
  m.notes.push_back(fmt::format("vision tower ({}, {} blocks){} counted: {} params; trained with the rest by "
                                "train_full, frozen under LoRA (not a LoRA target); images are not sized "
                                "(batches taken as text, no image-token activations)",
                                counted->name, counted->blocks, projector_known ? " and projector" : "",
                                format_exact_count(params)));
  return Ok{};
}

// MllamaTextModel (modeling_mllama.py): cross_attention_layers of its num_hidden_layers are
// MllamaCrossAttentionDecoderLayer, shaped as a self-attention decoder layer (q/k/v/o, MLP, two
// RMSNorms) plus a q_norm and a k_norm of head_dim and two tanh gates (cross_attn_attn_gate,
// cross_attn_mlp_gate); embed_tokens holds vocab_size + 8 rows. The blocks are counted as decoder
// blocks (their Linears are LoRA targets and quantized like the others); the extra norms, gates and
// rows go into extra_params.
Status read_mllama_cross_attention(const ConfigView& c, ModelSpec& m) {
  uint64_t cross = 0;
  if (c.has("cross_attention_layers")) {
    const json& layers = c.raw().at("cross_attention_layers");
    if (!layers.is_array()) {
      return make_error(fmt::format("{}: \"cross_attention_layers\" must be a list of layer indices, got {}",
                                    m.source, layers.type_name()));
    }
    // A set, not a table of num_hidden_layers flags: the layer count is not yet bounded here.
    std::set<uint64_t> indices;
    for (const json& index : layers) {
      if (!index.is_number_unsigned() || index.get<uint64_t>() >= m.num_layers) {
        return make_error(fmt::format("{}: \"cross_attention_layers\" holds {}, not a layer index below "
                                      "num_hidden_layers {}", m.source, index.dump(), m.num_layers));
      }
      indices.insert(index.get<uint64_t>());
    }
    cross = indices.size();
  }
  const uint64_t head_dim = m.num_attention_heads ? m.hidden_size / m.num_attention_heads : 0;
  m.extra_params += cross * (2 * head_dim + 2) + 8 * m.hidden_size;
  m.notes.push_back(fmt::format("Mllama: {} of the {} decoder layers are cross-attention layers, counted as decoder "
                                "blocks for activations and the KV cache (they run on every text token when the "
                                "batch has an image; transformers skips them without one, and {} blocks run)",
                                cross, m.num_layers, m.num_layers - cross));
  return Ok{};
}

}  // namespace

const std::vector<std::string>& supported_model_types() { return kModelTypes; }

const std::vector<std::string_view>& context_key_names() {
  // vllm/config.py _get_and_verify_max_len's possible_keys, in its order.
  static const std::vector<std::string_view> kKeys = {"max_position_embeddings", "n_positions", "max_seq_len",
                                                      "seq_length", "model_max_length", "max_target_positions",
                                                      "max_sequence_length", "max_seq_length", "seq_len"};
  return kKeys;
}

// transformers saves num_labels as id2label (PretrainedConfig.num_labels is its length; 2 when absent).
uint64_t num_labels(const json& root) {
  if (root.contains("id2label") && root.at("id2label").is_object() && !root.at("id2label").empty()) {
    return root.at("id2label").size();
  }
  return 2;
}

// A checkpoint saved as ...ForSequenceClassification (reward models, classifiers) has a score
// Linear of hidden x num_labels where a causal LM has its head.
// An encoder's classification head sits beside its pooled output (one vector per sequence), so it
// only adds parameters: BERT's classifier Linear(hidden, labels) with bias after its pooler;
// RoBERTa's RobertaClassificationHead (dense hidden x hidden and out_proj, both biased) in place of
// the pooler its model then leaves out, the same count; DeBERTa-v2's ContextPooler (dense
// pooler_hidden_size squared, biased) and classifier (modeling_bert.py, modeling_roberta.py,
// modeling_deberta_v2.py ...ForSequenceClassification).
// ViTForImageClassification builds its ViTModel without the pooler (add_pooling_layer=False) and
// classifies the class token with Linear(hidden, num_labels), biased (modeling_vit.py).
void read_score_head(const json& root, ModelSpec& m) {
  if (!root.contains("architectures") || !root.at("architectures").is_array()) return;
  constexpr std::string_view kSuffix = "ForSequenceClassification";
  for (const json& name : root.at("architectures")) {
    if (!name.is_string()) continue;
    const std::string& text = name.get_ref<const std::string&>();
    if (m.is_encoder_only && text.ends_with("ForMaskedLM")) {
      m.encoder_head = "masked_lm";
      continue;
    }
    if (text == "ViTForImageClassification" && m.model_type == "vit") {
      m.encoder_head = "classification";
      const uint64_t labels = num_labels(root);
      const uint64_t h = m.hidden_size;
      if (m.pooler_dense) m.extra_params -= std::min(m.extra_params, h * h + h);
      m.pooler_dense = false;
      m.extra_params += h * labels + labels;
      return;
    }
    if (text.size() < kSuffix.size() || text.compare(text.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) continue;
    const uint64_t labels = num_labels(root);
    if (m.is_encoder_only) m.encoder_head = "classification";
    if (!m.is_encoder_only) {
      m.score_labels = labels;
    } else if (m.model_type == "deberta-v2") {
      uint64_t pooled = m.hidden_size;
      if (root.contains("pooler_hidden_size") && root.at("pooler_hidden_size").is_number_unsigned()) {
        pooled = root.at("pooler_hidden_size").get<uint64_t>();
      }
      m.extra_params += pooled * pooled + pooled + pooled * labels + labels;
    } else if (m.model_type == "bert" || m.model_type == "roberta") {
      m.extra_params += m.hidden_size * labels + labels;
    }
    return;
  }
}

// The context-length keys vLLM reads (vllm_context_key_names(), vllm/config.py
// _get_and_verify_max_len) that config.json sets; when it leaves out its family's own key, the
// default the transformers config class gives it (LlamaConfig 2048, MistralConfig 4096 x 32,
// Qwen2Config 32768, GPT2Config's n_positions 1024, ...), as vLLM's getattr on the config object
// sees it. BLOOM's and T5's classes have none. Keys that are not whole numbers are left out.
void read_context_keys(const json& config, ModelSpec& m) {
  for (std::string_view key : context_key_names()) {
    const std::string name(key);
    if (config.contains(name) && config.at(name).is_number_unsigned() && config.at(name).get<uint64_t>() > 0) {
      m.context_keys[name] = config.at(name).get<uint64_t>();
    }
  }
  static const std::map<std::string, std::pair<const char*, uint64_t>> kClassDefaults = {
      {"llama", {"max_position_embeddings", 2048}},        {"mistral", {"max_position_embeddings", 131072}},
      {"mixtral", {"max_position_embeddings", 131072}},    {"qwen2", {"max_position_embeddings", 32768}},
      {"qwen2_moe", {"max_position_embeddings", 32768}},   {"qwen3", {"max_position_embeddings", 32768}},
      {"qwen3_moe", {"max_position_embeddings", 32768}},   {"deepseek_v2", {"max_position_embeddings", 2048}},
      {"deepseek_v3", {"max_position_embeddings", 4096}},  {"gemma", {"max_position_embeddings", 8192}},
      {"gemma2", {"max_position_embeddings", 8192}},       {"gemma3_text", {"max_position_embeddings", 131072}},
      {"phi", {"max_position_embeddings", 2048}},          {"phi3", {"max_position_embeddings", 4096}},
      {"gpt2", {"n_positions", 1024}},                     {"gptj", {"n_positions", 2048}},
      {"gpt_neox", {"max_position_embeddings", 2048}},     {"falcon", {"max_position_embeddings", 2048}},
      {"opt", {"max_position_embeddings", 2048}},          {"gpt_bigcode", {"n_positions", 1024}},
      {"stablelm", {"max_position_embeddings", 4096}},     {"bert", {"max_position_embeddings", 512}},
      {"roberta", {"max_position_embeddings", 512}},       {"deberta-v2", {"max_position_embeddings", 512}},
      {"gpt_oss", {"max_position_embeddings", 131072}}};
  if (auto d = kClassDefaults.find(m.model_type); d != kClassDefaults.end()) {
    m.context_keys.emplace(d->second.first, d->second.second);   // only when config.json did not set it
  }
}

Result<ModelSpec> parse_model_config(std::string_view text, const std::string& source) {
  auto parsed = parse_json_document(text, source);
  if (!parsed) return parsed.error();
  json root = std::move(parsed.value());
  if (!root.is_object()) return make_error(fmt::format("{}: expected a JSON object", source));
  // Multimodal wrappers (Gemma 3, Llava-style, Mllama) keep the language model in text_config;
  // Qwen2-VL's and Qwen2.5-VL's is the config itself, beside its vision_config.
  json config = root;
  const bool multimodal = root.contains("text_config") && root.at("text_config").is_object();
  if (multimodal) {
    config = root.at("text_config");
    for (const char* key : {"torch_dtype", "dtype", "quantization_config", "tie_word_embeddings"}) {
      if (!config.contains(key) && root.contains(key)) config[key] = root.at(key);
    }
    // The checkpoint is the wrapper's; the text model's own _name_or_path names its origin.
    config.erase("_name_or_path");
    if (root.contains("_name_or_path")) config["_name_or_path"] = root.at("_name_or_path");
    // A text_config without its model_type is the wrapper's own text model class.
    if (!config.contains("model_type") && root.contains("model_type") && root.at("model_type").is_string()) {
      const std::string wrapper = root.at("model_type").get<std::string>();
      for (const auto& [wrapper_type, text_type] : kWrapperTextTypes) {
        if (wrapper == wrapper_type) config["model_type"] = text_type;
      }
    }
    fill_text_config_defaults(config);
  }
  ModelSpec m;
  m.source = source;
  ConfigView c(config, source);
  m.model_type = c.text("model_type");
  if (c.type_error()) return *c.type_error();
  if (m.model_type.empty()) {
    return make_error(fmt::format("{}: no \"model_type\"; not a Hugging Face model config", source));
  }
  if (m.model_type == "gemma3") m.model_type = "gemma3_text";
  // Qwen2-VL's and Qwen2.5-VL's language model is Qwen2's (Qwen2VLDecoderLayer: q/k/v with bias,
  // Qwen2MLP, RMSNorm; their configs are flat, the text keys at the top); Mllama's is Llama's with
  // cross-attention layers among its decoder layers (read_mllama_cross_attention).
  const bool mllama_text = m.model_type == "mllama_text_model" || m.model_type == "mllama";
  if (m.model_type == "qwen2_vl" || m.model_type == "qwen2_5_vl" || m.model_type == "qwen2_vl_text" ||
      m.model_type == "qwen2_5_vl_text") {
    m.model_type = "qwen2";
  }
  if (mllama_text) m.model_type = "llama";
  m.id = c.text("_name_or_path");
  // A mistyped key is the first thing to say: a family reader's own error may come from the
  // fallback that key got ("share_att_key": "yes" read as false).
  if (auto s = read_family(c, m); !s || c.type_error()) return c.type_error() ? *c.type_error() : s.error();
  if (mllama_text) {
    if (auto s = read_mllama_cross_attention(c, m); !s) return s.error();
  }
  read_rope_scaling(config, m);
  read_context_keys(config, m);
  m.is_multimodal = multimodal || root.contains("vision_config") || root.contains("audio_config");
  auto declares = [&](std::initializer_list<const char*> keys) {
    return std::any_of(keys.begin(), keys.end(), [&](const char* key) {
      return root.contains(key) || (root.contains("text_config") && root["text_config"].is_object() &&
                                    root["text_config"].contains(key));
    });
  };
  if (declares({"vision_config", "image_token_id", "image_token_index"})) m.modalities.push_back("image");
  if (declares({"video_token_id", "video_token_index"})) m.modalities.push_back("video");
  if (declares({"audio_config", "audio_token_id", "audio_token_index"})) m.modalities.push_back("audio");
  if (auto s = read_vision_tower(root, m); !s) return s.error();
  if (auto s = validate(m); !s) return s.error();
  if (auto s = read_dtype_and_quantization(c, m); !s) return s.error();
  if (c.type_error()) return *c.type_error();
  read_score_head(root, m);
  fill_parameter_counts(m);
  return m;
}

}  // namespace oomdoc
