#include "model/architecture.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace oomdoc {
namespace {

bool is_one_of(const std::string& value, std::initializer_list<const char*> options) {
  for (const char* option : options) {
    if (value == option) return true;
  }
  return false;
}

// Attention projections of one block, named as the family's HF module names them.
std::vector<LinearShape> attention_linears(const ModelSpec& m, uint64_t layers) {
  const uint64_t h = m.hidden_size;
  const uint64_t hd = m.head_dim_or_default();
  const uint64_t q = m.num_attention_heads * hd;
  const uint64_t kv = m.num_kv_heads * hd;
  const bool qb = m.qkv_bias;
  const bool ob = m.attn_out_bias;
  const std::string& t = m.model_type;
  auto lin = [&](const char* name, uint64_t in, uint64_t out, bool bias) {
    LinearShape l{name, in, out, bias, 1, layers, false, ""};
    return l;
  };
  auto with_roles = [](std::vector<LinearShape> v, std::initializer_list<const char*> roles) {
    size_t i = 0;
    for (const char* r : roles) v[i++].role = r;
    return v;
  };
  if (m.attention == AttentionKind::kMultiLatent) {
    // DeepSeek-V2/V3 (modeling_deepseek.py DeepseekV3Attention): q through a low-rank pair
    // (or one q_proj when q_lora_rank is null), one down-projection to the latent plus the
    // shared rope key, and the up-projection of the latent to per-head k_nope and v.
    const uint64_t qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim;
    std::vector<LinearShape> out;
    if (m.q_lora_rank) {
      out = with_roles({lin("q_a_proj", h, m.q_lora_rank, qb),
                        lin("q_b_proj", m.q_lora_rank, m.num_attention_heads * qk_head, false)},
                       {"q", "q"});
    } else {
      out = with_roles({lin("q_proj", h, m.num_attention_heads * qk_head, false)}, {"q"});
    }
    auto kv_and_o = with_roles({lin("kv_a_proj_with_mqa", h, m.kv_lora_rank + m.qk_rope_head_dim, qb),
                                lin("kv_b_proj", m.kv_lora_rank,
                                    m.num_attention_heads * (m.qk_nope_head_dim + m.v_head_dim), false),
                                lin("o_proj", m.num_attention_heads * m.v_head_dim, h, ob)},
                               {"k", "v", "o"});
    out.insert(out.end(), kv_and_o.begin(), kv_and_o.end());
    return out;
  }
  if (is_one_of(t, {"gpt2", "gpt_bigcode"})) {
    return with_roles({lin("c_attn", h, q + 2 * kv, qb), lin("c_proj", q, h, ob)}, {"qkv", "o"});
  }
  if (is_one_of(t, {"gpt_neox", "falcon", "bloom"})) {
    return with_roles({lin("query_key_value", h, q + 2 * kv, qb), lin("dense", q, h, ob)}, {"qkv", "o"});
  }
  if (t == "phi3") return with_roles({lin("qkv_proj", h, q + 2 * kv, qb), lin("o_proj", q, h, ob)}, {"qkv", "o"});
  if (is_one_of(t, {"bert", "roberta", "vit"})) {
    return with_roles({lin("query", h, q, qb), lin("key", h, kv, qb), lin("value", h, kv, qb),
                       lin("dense", q, h, ob)}, {"q", "k", "v", "o"});
  }
  if (t == "deberta-v2") {
    return with_roles({lin("query_proj", h, q, qb), lin("key_proj", h, kv, qb), lin("value_proj", h, kv, qb),
                       lin("dense", q, h, ob)}, {"q", "k", "v", "o"});
  }
  if (is_one_of(t, {"t5", "mt5"})) {
    return with_roles({lin("q", h, q, false), lin("k", h, kv, false), lin("v", h, kv, false),
                       lin("o", q, h, false)}, {"q", "k", "v", "o"});
  }
  const char* out_name = is_one_of(t, {"gptj", "opt"}) ? "out_proj" : (t == "phi" ? "dense" : "o_proj");
  return with_roles({lin("q_proj", h, q, qb), lin("k_proj", h, kv, qb), lin("v_proj", h, kv, qb),
                     lin(out_name, q, h, ob)}, {"q", "k", "v", "o"});
}

// Dense MLP of one block with width `inter`.
std::vector<LinearShape> mlp_linears(const ModelSpec& m, uint64_t inter, uint64_t layers,
                                     uint64_t copies, bool expert) {
  const uint64_t h = m.hidden_size;
  const bool b = m.mlp_bias;
  const std::string& t = m.model_type;
  auto lin = [&](const char* name, uint64_t in, uint64_t out) {
    LinearShape l{name, in, out, b, copies, layers, expert, ""};
    return l;
  };
  // Roles follow the order of the returned layers: gated = gate, up, down; plain = fc_in, down.
  auto roles = [](std::vector<LinearShape> v) {
    if (v.size() == 3) { v[0].role = "gate"; v[1].role = "up"; v[2].role = "down"; }
    else if (v.size() == 2) { v[0].role = v[0].name == "gate_up_proj" ? "gate_up" : "fc_in"; v[1].role = "down"; }
    return v;
  };
  if (m.gated_mlp) {
    if (t == "phi3") return roles({lin("gate_up_proj", h, 2 * inter), lin("down_proj", inter, h)});
    if (t == "gpt_oss" && expert) {
      auto experts = roles({lin("gate_up_proj", h, 2 * inter), lin("down_proj", inter, h)});
      for (auto& l : experts) l.nn_linear = false;
      return experts;
    }
    if (t == "mixtral" && expert) return roles({lin("w1", h, inter), lin("w3", h, inter), lin("w2", inter, h)});
    if (is_one_of(t, {"t5", "mt5"})) return roles({lin("wi_0", h, inter), lin("wi_1", h, inter), lin("wo", inter, h)});
    return roles({lin("gate_proj", h, inter), lin("up_proj", h, inter), lin("down_proj", inter, h)});
  }
  if (is_one_of(t, {"gpt2", "gpt_bigcode"})) return roles({lin("c_fc", h, inter), lin("c_proj", inter, h)});
  if (is_one_of(t, {"gpt_neox", "falcon", "bloom"})) {
    return roles({lin("dense_h_to_4h", h, inter), lin("dense_4h_to_h", inter, h)});
  }
  if (t == "gptj") return roles({lin("fc_in", h, inter), lin("fc_out", inter, h)});
  if (is_one_of(t, {"opt", "phi"})) return roles({lin("fc1", h, inter), lin("fc2", inter, h)});
  if (is_one_of(t, {"t5", "mt5"})) return roles({lin("wi", h, inter), lin("wo", inter, h)});
  if (is_one_of(t, {"bert", "roberta", "vit", "deberta-v2"})) {
    return roles({lin("intermediate.dense", h, inter), lin("output.dense", inter, h)});
  }
  return roles({lin("up_proj", h, inter), lin("down_proj", inter, h)});
}

bool is_t5(const ModelSpec& m) { return is_one_of(m.model_type, {"t5", "mt5"}); }

uint64_t moe_layer_count(const ModelSpec& m) {
  if (!m.num_experts) return 0;
  return m.num_layers > m.first_dense_layers ? m.num_layers - m.first_dense_layers : 0;
}

}  // namespace

uint64_t norm_params(const ModelSpec& m, uint64_t width) {
  return m.norm == NormKind::kLayerNorm ? 2 * width : width;
}

std::vector<LinearShape> linear_layers(const ModelSpec& m) {
  std::vector<LinearShape> out;
  auto append = [&](std::vector<LinearShape> more) {
    for (auto& l : more) {
      if (l.layers) out.push_back(std::move(l));
    }
  };
  if (is_t5(m)) {
    // T5: encoder blocks (self-attention, MLP), decoder blocks (self-attention, cross-attention
    // over the encoder output, MLP); modeling_t5.py T5Block.
    append(attention_linears(m, m.num_encoder_layers));
    append(mlp_linears(m, m.intermediate_size, m.num_encoder_layers, 1, false));
    append(attention_linears(m, m.num_layers));
    std::vector<LinearShape> cross = attention_linears(m, m.num_layers);  // EncDecAttention
    for (auto& l : cross) l.cross_attention = true;
    append(std::move(cross));
    append(mlp_linears(m, m.intermediate_size, m.num_layers, 1, false));
    return out;
  }
  append(attention_linears(m, m.num_layers));
  const uint64_t moe_layers = moe_layer_count(m);
  const uint64_t dense_layers = m.num_layers - moe_layers;
  append(mlp_linears(m, m.intermediate_size, dense_layers, 1, false));
  if (moe_layers) {
    append(mlp_linears(m, m.moe_intermediate_size, moe_layers, m.num_experts, true));
    uint64_t shared = m.shared_expert_intermediate_size
                          ? m.shared_expert_intermediate_size
                          : m.num_shared_experts * m.moe_intermediate_size;
    if (shared) {
      auto shared_mlp = mlp_linears(m, shared, moe_layers, 1, false);
      for (auto& l : shared_mlp) l.name.insert(0, "shared_expert.");
      append(std::move(shared_mlp));
    }
  }
  return out;
}

ParamCount count_parameters(const ModelSpec& m) {
  ParamCount c;
  const uint64_t h = m.hidden_size;
  const uint64_t hd = m.head_dim_or_default();
  const uint64_t emb_dim = m.embedding_dim ? m.embedding_dim : h;

  // Embeddings (and OPT's projection between word_embed_proj_dim and hidden).
  c.embeddings = m.vocab_size * emb_dim + m.position_embeddings * h + m.token_type_embeddings * h;
  if (m.embedding_norm) c.embeddings += norm_params(m, h);
  if (emb_dim != h) c.embeddings += 2 * emb_dim * h;  // project_in, project_out (no bias)
  if (m.score_labels && !m.is_encoder_only) {
    c.lm_head = m.score_labels * h;   // transformers' ...ForSequenceClassification: score, no bias
  } else if (!m.tie_word_embeddings && !m.is_encoder_only && m.vocab_size) {
    c.lm_head = m.vocab_size * emb_dim + (m.lm_head_bias ? m.vocab_size : 0);
  }

  std::vector<LinearShape> linears = linear_layers(m);
  for (const LinearShape& l : linears) c.linear += l.params();

  // Norms of each block, plus q/k norms and MLA's latent norms.
  uint64_t per_layer_norms = m.norms_per_layer * norm_params(m, h);
  if (m.qk_norm) per_layer_norms += 2 * hd;
  if (m.attention == AttentionKind::kMultiLatent) {
    per_layer_norms += m.kv_lora_rank + (m.q_lora_rank ? m.q_lora_rank : 0);
  }
  if (is_t5(m)) {
    // Encoder blocks: 2 norms; decoder blocks: 3; a final norm per stack.
    c.norms = m.num_encoder_layers * 2 * h + m.num_layers * 3 * h + 2 * h;
    c.other = 2 * m.relative_attention_buckets * m.num_attention_heads;
  } else {
    c.norms = m.num_layers * per_layer_norms + (m.final_norm ? norm_params(m, h) : 0);
  }

  // Routers: a Linear(hidden, experts) per MoE layer, bias-free but for gpt-oss's (+ Qwen2-MoE's
  // shared-expert gate, DeepSeek-V3's score correction bias).
  const uint64_t moe_layers = moe_layer_count(m);
  uint64_t router = h * m.num_experts;
  if (m.router_bias) router += m.num_experts;
  if (m.shared_expert_gate) router += h;
  if (m.router_score_bias) router += m.num_experts;
  // gpt-oss's attention sinks: one logit per query head in every block.
  const uint64_t sinks = m.attention_sinks ? m.num_attention_heads : 0;
  c.other += moe_layers * router + m.num_layers * sinks + m.extra_params;

  c.total = c.embeddings + c.lm_head + c.linear + c.norms + c.other;

  // Largest block: the unit FSDP / ZeRO-3 gathers at once.
  uint64_t dense_block = per_layer_norms + sinks, moe_block = per_layer_norms + sinks + router;
  for (const LinearShape& l : linears) {
    uint64_t one = l.params() / std::max<uint64_t>(l.layers, 1);
    bool in_moe_only = l.expert || l.name.rfind("shared_expert.", 0) == 0;
    if (!in_moe_only) {
      // Attention projections sit in every block; dense MLPs only in dense blocks.
      bool is_mlp = l.layers != m.num_layers || moe_layers == 0;
      if (moe_layers && l.layers == m.num_layers) {
        moe_block += one;
        dense_block += one;
      } else if (is_mlp) {
        dense_block += one;
      }
    } else {
      moe_block += one;
    }
  }
  c.largest_layer = std::max(moe_layers ? moe_block : 0, m.num_layers > moe_layers ? dense_block : 0);
  c.largest_layer = std::max({c.largest_layer, c.embeddings, c.lm_head});
  return c;
}

namespace {

std::set<std::string> roles_for_target(const std::string& target) {
  static const std::map<std::string, std::set<std::string>> kAliases = {
      {"q", {"q", "qkv"}},       {"query", {"q", "qkv"}},   {"wq", {"q", "qkv"}},
      {"k", {"k", "qkv"}},       {"key", {"k", "qkv"}},     {"wk", {"k", "qkv"}},
      {"v", {"v", "qkv"}},       {"value", {"v", "qkv"}},   {"wv", {"v", "qkv"}},
      {"o", {"o"}},              {"output_proj", {"o"}},    {"projection", {"o"}},
      {"out_proj", {"o"}},       {"attention", {"q", "k", "v", "qkv", "o"}},
      {"gate", {"gate", "gate_up"}}, {"w1", {"gate", "gate_up", "fc_in"}},
      {"up", {"up", "gate_up"}}, {"w3", {"up", "gate_up"}},
      {"down", {"down"}},        {"w2", {"down"}},
      {"mlp", {"gate", "up", "gate_up", "fc_in", "down"}},
  };
  auto it = kAliases.find(target);
  return it == kAliases.end() ? std::set<std::string>{} : it->second;
}

bool ends_with_component(std::string_view text, std::string_view tail) {
  return text.size() > tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0 &&
         text[text.size() - tail.size() - 1] == '.';
}

// PEFT's rule for one module name: the name equals the target or ends with "." + target. `name`
// is the module's path inside its block (BERT's "intermediate.dense"), so "dense" names every
// Linear called dense, and "intermediate.dense" only that one. A longer target ending in the name
// must have, before it, where that module lives: a layer index or the block's attention/MLP
// container ("attention.output.dense" is the attention's dense, not the MLP's "output.dense").
bool target_names(std::string_view target, std::string_view name, bool attention) {
  if (target == name || ends_with_component(name, target)) return true;
  if (!ends_with_component(target, name)) return false;
  const std::string_view rest = target.substr(0, target.size() - name.size() - 1);
  const size_t dot = rest.rfind('.');
  const std::string_view parent = dot == std::string_view::npos ? rest : rest.substr(dot + 1);
  static const std::set<std::string_view> kAttention = {"self_attn", "attn", "attention", "self_attention",
                                                        "self", "output", "SelfAttention", "EncDecAttention"};
  static const std::set<std::string_view> kMlp = {"mlp", "feed_forward", "ffn", "DenseReluDense", "block_sparse_moe",
                                                  "experts"};
  const bool numeric = !parent.empty() && std::all_of(parent.begin(), parent.end(), [](char c) { return c >= '0' && c <= '9'; });
  return numeric || (attention ? kAttention.count(parent) : kMlp.count(parent));
}

bool names_router(std::string_view target) { return target == "gate" || target.ends_with(".gate"); }

}  // namespace

bool lora_matches(const LinearShape& l, const LoraSettings& lora, bool router_is_gate) {
  if (!l.nn_linear) return false;  // PEFT's LoRA layers wrap nn.Linear modules only
  if (lora.all_linear) return true;
  if (lora.target_modules.empty()) return l.role == "q" || l.role == "v" || l.role == "qkv";
  const bool attention = l.role == "q" || l.role == "k" || l.role == "v" || l.role == "qkv" || l.role == "o";
  // oomdoc names a shared expert "shared_expert.*" (Qwen2-MoE's module); DeepSeek's is "shared_experts.*".
  const std::string plural = l.name.rfind("shared_expert.", 0) == 0 ? "shared_experts." + l.name.substr(14) : "";
  for (const auto& t : lora.target_modules) {
    if (target_names(t, l.name, attention) || (!plural.empty() && target_names(t, plural, attention))) return true;
    // A router called "gate" is what PEFT's "gate" names there, not the experts' gate projections.
    if (router_is_gate && names_router(t)) continue;
    if (roles_for_target(t).count(l.role)) return true;
  }
  return false;
}

// The output head and the input embeddings are not in linear_layers() (PEFT's all-linear leaves
// the head out) but can be named: PEFT wraps the head as a Linear (r x (hidden + vocab)) and the
// embeddings as lora.Embedding (lora_embedding_A r x vocab, lora_embedding_B hidden x r).
bool names_module(std::string_view target, std::initializer_list<std::string_view> names) {
  const size_t dot = target.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? target : target.substr(dot + 1);
  return std::find(names.begin(), names.end(), last) != names.end();
}

// Mixtral's (block_sparse_moe.gate) and Qwen2/3-MoE's (mlp.gate) routers are nn.Linear modules
// named "gate": PEFT's "gate" names them, not the experts (w1 / gate_proj). DeepSeek's MoEGate
// and gpt-oss's router are not named so.
bool router_is_linear_gate(const ModelSpec& m) {
  return m.num_experts && is_one_of(m.model_type, {"mixtral", "qwen2_moe", "qwen3_moe"});
}

uint64_t lora_parameter_count(const ModelSpec& m, const LoraSettings& lora) {
  uint64_t total = 0;
  const bool router_is_gate = router_is_linear_gate(m);
  // The router is an nn.Linear there: PEFT's all-linear (every nn.Linear but the output layer)
  // adapts it too, as naming "gate" does.
  if (router_is_gate && (lora.all_linear || std::any_of(lora.target_modules.begin(), lora.target_modules.end(),
                                                        [](const std::string& t) { return names_router(t); }))) {
    total += lora.r * (m.hidden_size + m.num_experts) * moe_layer_count(m);
  }
  // Qwen2-MoE's shared-expert gate is an nn.Linear(hidden, 1) too: all-linear adapts it, and so does
  // naming it.
  if (m.shared_expert_gate &&
      (lora.all_linear || std::any_of(lora.target_modules.begin(), lora.target_modules.end(), [](const std::string& t) {
         return target_names(t, "mlp.shared_expert_gate", false);
       }))) {
    total += lora.r * (m.hidden_size + 1) * moe_layer_count(m);
  }
  for (const LinearShape& l : linear_layers(m)) {
    if (lora_matches(l, lora, router_is_gate)) total += lora.r * (l.in_features + l.out_features) * l.copies * l.layers;
  }
  // The pooler's dense layer sits outside the blocks, so linear_layers() does not list it.
  if (m.pooler_dense && (lora.all_linear || std::any_of(lora.target_modules.begin(), lora.target_modules.end(),
                                                       [](const std::string& t) { return target_names(t, "pooler.dense", false); }))) {
    total += lora.r * 2 * m.hidden_size;
  }
  const uint64_t emb_dim = m.embedding_dim ? m.embedding_dim : m.hidden_size;
  bool head = false, embeddings = false;
  for (const std::string& t : lora.target_modules) {
    head |= names_module(t, {"lm_head", "embed_out", "output"});
    embeddings |= names_module(t, {"embed_tokens", "wte", "word_embeddings", "embed_in", "tok_embeddings"});
  }
  if (head && !m.is_encoder_only && m.vocab_size) total += lora.r * (emb_dim + m.vocab_size);
  if (embeddings && m.vocab_size) total += lora.r * (m.vocab_size + emb_dim);
  return total;
}

uint64_t unquantized_linear_params(const ModelSpec& m, uint64_t first_layer, uint64_t layer_count) {
  if (m.unquantized_modules.empty() || m.num_layers == 0) return 0;
  auto names = [&](const std::string& path) {
    for (const std::string& entry : m.unquantized_modules) {
      if (entry.empty()) continue;
      if (path == entry || path.starts_with(entry + ".")) return true;
      // A bare name ("down_proj", "mlp.gate") ends the path.
      if (entry.find("layers.") == std::string::npos && path.size() > entry.size() && path.ends_with(entry) &&
          path[path.size() - entry.size() - 1] == '.') {
        return true;
      }
      // A name without dots is any component of the path ("mlp" skips every MLP), as vLLM's
      // is_layer_skipped_bnb matches components.
      if (entry.find('.') == std::string::npos && ("." + path + ".").find("." + entry + ".") != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  uint64_t total = 0;
  const uint64_t last = std::min(m.num_layers, first_layer + layer_count);
  for (const LinearShape& l : linear_layers(m)) {
    // Only Linears every block holds have a known index; experts stay as the format stores them.
    if (l.expert || l.layers != m.num_layers) continue;
    const bool attention = l.role == "q" || l.role == "k" || l.role == "v" || l.role == "qkv" || l.role == "o";
    const std::string container = attention ? "self_attn" : "mlp";
    const uint64_t per_layer = l.params() / l.layers;
    for (uint64_t i = first_layer; i < last; ++i) {
      if (names(fmt::format("model.layers.{}.{}.{}", i, container, l.name))) total += per_layer;
    }
  }
  return total;
}

bool quantizes_only_experts(const std::string& method) { return method == "mxfp4"; }

uint64_t expert_weight_params(const ModelSpec& m) {
  uint64_t total = 0;
  for (const LinearShape& l : linear_layers(m)) {
    if (l.expert) total += l.in_features * l.out_features * l.copies * l.layers;
  }
  return total;
}

ModelSpec with_score_head(const ModelSpec& m, uint64_t labels) {
  ModelSpec scored = m;
  if (m.is_encoder_only || labels == 0) return scored;
  const uint64_t lm_head = count_parameters(m).lm_head;
  scored.score_labels = labels;
  const ParamCount c = count_parameters(scored);
  // A count read from safetensors or given keeps its exactness: only the head changes.
  scored.total_params = m.total_params ? m.total_params - std::min(m.total_params, lm_head) + c.lm_head : c.total;
  scored.lm_head_params = c.lm_head;
  scored.largest_layer_params = c.largest_layer;
  return scored;
}

void fill_parameter_counts(ModelSpec& m) {
  ParamCount c = count_parameters(m);
  m.total_params = c.total;
  m.embedding_params = c.embeddings;
  m.lm_head_params = c.lm_head;
  m.largest_layer_params = c.largest_layer;
}

Status validate_shape(const ModelSpec& m, const std::string& source, ShapeFieldNames names) {
  const bool flags = names == ShapeFieldNames::kFlags;
  // Each field as the input spells it: the config.json key, or the estimate flag.
  auto name = [&](const char* key, const char* flag) { return flags ? flag : key; };
  auto fail = [&](const std::string& what) { return make_error(fmt::format("{}: {}", source, what)); };
  const std::string heads = name("num_attention_heads", "--heads");
  const std::string kv_heads = name("num_key_value_heads", "--kv-heads");
  const std::string hidden = name("hidden_size", "--hidden-size");
  if (m.hidden_size == 0) return fail(hidden + " is 0");
  // Bounds far above any real model keep every parameter product inside 64 bits.
  struct Limit { std::string name; uint64_t value, max; };
  for (const Limit& l : {Limit{hidden, m.hidden_size, 1u << 18},
                         Limit{name("intermediate_size", "--intermediate-size"), m.intermediate_size, 1u << 20},
                         Limit{"moe_intermediate_size", m.moe_intermediate_size, 1u << 20},
                         Limit{name("number of layers", "--layers"), m.num_layers + m.num_encoder_layers, 1u << 12},
                         Limit{name("vocab_size", "--vocab-size"), m.vocab_size, 1u << 23},
                         Limit{heads, m.num_attention_heads, 1u << 12},
                         Limit{"head_dim", m.head_dim, 1u << 14}, Limit{"number of experts", m.num_experts, 1u << 12},
                         Limit{"max_position_embeddings", m.max_position_embeddings, 1u << 26},
                         Limit{"kv_lora_rank", m.kv_lora_rank + m.q_lora_rank, 1u << 16}}) {
    if (l.value > l.max) return fail(fmt::format("{} {} is implausibly large (limit {})", l.name, l.value, l.max));
  }
  if (m.num_layers == 0) return fail(name("number of layers", "--layers") + std::string(" is 0"));
  if (m.num_attention_heads == 0) return fail(heads + " is 0");
  if (m.num_kv_heads == 0) return fail(kv_heads + " is 0");
  if (m.attention == AttentionKind::kMultiHead) {
    if (m.num_attention_heads % m.num_kv_heads) {
      return fail(fmt::format("{} {} is not a multiple of {} {}", heads, m.num_attention_heads, kv_heads,
                              m.num_kv_heads));
    }
    if (m.num_kv_heads > m.num_attention_heads) {
      return fail(fmt::format("{} {} is larger than {} {}", kv_heads, m.num_kv_heads, heads, m.num_attention_heads));
    }
    if (m.head_dim == 0 && m.hidden_size % m.num_attention_heads) {
      return fail(fmt::format("{} {} is not a multiple of {} {}{}", hidden, m.hidden_size, heads,
                              m.num_attention_heads, flags ? "" : " and no head_dim is given"));
    }
  }
  if (!m.is_encoder_only && m.vocab_size == 0) return fail(name("vocab_size", "--vocab-size") + std::string(" is 0"));
  const bool has_dense_mlp = m.num_experts == 0 || m.first_dense_layers > 0;
  if (has_dense_mlp && m.intermediate_size == 0) {
    return fail(flags ? "--intermediate-size is 0" : "intermediate_size is missing or 0");
  }
  if (m.num_experts) {
    if (m.experts_per_token == 0 || m.experts_per_token > m.num_experts) {
      return fail(fmt::format("num_experts_per_tok {} must be between 1 and the {} experts",
                              m.experts_per_token, m.num_experts));
    }
    if (m.moe_intermediate_size == 0) return fail("moe_intermediate_size is 0");
    if (m.first_dense_layers > m.num_layers) {
      return fail(fmt::format("first_k_dense_replace {} is more than the {} layers", m.first_dense_layers,
                              m.num_layers));
    }
  }
  if (m.attention == AttentionKind::kMultiLatent && (m.kv_lora_rank == 0 || m.qk_rope_head_dim == 0)) {
    return fail("multi-latent attention needs kv_lora_rank and qk_rope_head_dim");
  }
  return Ok{};
}

std::string tensor_parallel_problem(const ModelSpec& m, uint64_t tp) {
  if (tp <= 1) return "";
  if (m.num_attention_heads == 0 || m.num_attention_heads % tp) {
    return fmt::format("tp {} does not divide the model's {} attention heads (each tensor-parallel rank "
                       "needs whole heads)", tp, m.num_attention_heads);
  }
  if (m.attention == AttentionKind::kMultiHead && m.num_kv_heads &&
      (tp <= m.num_kv_heads ? m.num_kv_heads % tp : tp % m.num_kv_heads)) {
    return fmt::format("tp {} does not fit the model's {} key/value heads (they must split evenly across "
                       "the tp ranks, or tp be a multiple of them)", tp, m.num_kv_heads);
  }
  return "";
}

}  // namespace oomdoc
