// Speculative decoding's memory in vLLM: the drafter's weights, its KV cache, the rejection
// sampler's dummy run. Sources (docs/serve.md, "Speculative decoding"):
//   vllm/config/speculative.py          SpeculativeConfig.__post_init__ (method detection, MTP
//                                       n_predict), _verify_and_get_draft_tp, verify_equal_vocab_size_if_draft_model
//   vllm/v1/spec_decode/draft_model.py  DraftModelProposer (_raise_if_draft_tp_mismatch, load_model)
//   vllm/v1/spec_decode/llm_base_proposer.py / eagle.py  _maybe_share_embeddings, _maybe_share_lm_head
//   vllm/model_executor/models/llama_eagle.py, llama_eagle3.py, deepseek_mtp.py  the heads' modules
//   vllm/v1/worker/gpu_model_runner.py  load_model (drafter inside the memory profiler),
//                                       _dummy_sampler_run (the rejection sampler's dummy run)
#include "analyses/vllm_speculative.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/text.h"
#include "model/architecture.h"

namespace oomdoc {
namespace {

bool model_free(const std::string& method) {
  return method == "ngram" || method == "ngram_gpu" || method == "suffix";
}

// One pipeline stage's worth of a head's decoder layers: no embedding, no head, no final norm.
PipelineStage middle_layers(uint64_t layers) {
  PipelineStage stage;
  stage.layers = layers;
  return stage;
}

// The shape of a head's decoder layers alone: vocabulary 0, so the parameter count is the
// layers' (and the final norm's, which middle_layers does not charge).
ModelSpec layers_only(ModelSpec spec, uint64_t layers) {
  spec.num_layers = layers;
  spec.vocab_size = 0;
  spec.embedding_params = 0;
  spec.lm_head_params = 0;
  spec.position_embeddings = 0;
  spec.layer_is_sliding.clear();
  spec.sliding_window.reset();
  fill_parameter_counts(spec);
  return spec;
}

}  // namespace

std::optional<SpeculativeChoice> speculative_choice(const ServeConfig& c) {
  if (!c.speculative_method && !c.speculative_model && !c.num_speculative_tokens) return std::nullopt;
  SpeculativeChoice choice;
  choice.model = c.speculative_model.value_or("");
  std::string method = to_lower(c.speculative_method.value_or(""));
  const std::string model = to_lower(choice.model);
  if (method.empty() && !model.empty()) {
    if (model == "ngram" || model == "[ngram]") method = "ngram";
    else if (model.find("eagle-") != std::string::npos) method = "eagle";
    else if (model.find("eagle3") != std::string::npos) method = "eagle3";
    else method = "draft_model";
  }
  if (method == "[ngram]") method = "ngram";
  // deepseek_mtp, mimo_mtp, glm4_moe_mtp, qwen3_next_mtp...: "method `%s` is deprecated and replaced with mtp."
  if (method.size() > 4 && method.compare(method.size() - 4, 4, "_mtp") == 0) method = "mtp";
  if (model_free(method)) choice.model.clear();
  choice.method = method;
  return choice;
}

Result<SpeculativeEngine> speculative_engine(const SpeculativeChoice& choice, const ServeConfig& c,
                                             const VllmVersion& version, const std::optional<std::string>& use_v1_env) {
  SpeculativeEngine engine;
  const std::string label = version.given ? "vLLM " + version.text : "current vLLM";
  if (version.at_least(0, 8, 0) && !version.at_least(0, 11, 0) && use_v1_env.value_or("1") != "0") {
    const std::string method = to_lower(c.speculative_method.value_or(""));
    const bool v1_runs_it = method.empty()
        ? choice.method == "ngram"
        : (method == "ngram" || method == "[ngram]" || method == "eagle" || method == "eagle3" || method == "medusa" ||
           method == "mtp" || method == "deepseek_mtp");
    if (!v1_runs_it) {
      if (use_v1_env) {
        return Error{"VLLM_USE_V1=1 with this speculative decoding: vLLM refuses it: \"VLLM_USE_V1=1 is not supported "
                     "with Speculative Decoding.\""};
      }
      engine.falls_back_to_v0 = true;
      engine.note = fmt::format("{} runs this speculative decoding ({}) on the V0 engine: V1 did not support it yet and "
                                "falls back (EngineArgs._is_v1_supported_oracle)", label,
                                method.empty() ? "a model without \"method\"" : method);
    }
  }
  if (choice.method == "draft_model" && version.at_least(0, 11, 0) && !version.at_least(0, 14, 0)) {
    return Error{fmt::format("--speculative-config: draft model '{}': {} refuses it: \"Speculative decoding with "
                             "draft model is not supported yet. Please consider using other speculative decoding "
                             "methods such as ngram, medusa, eagle, or mtp.\" (V1 runs draft models from v0.14)",
                             choice.model, label)};
  }
  return engine;
}

uint64_t sampler_extra_bytes_per_logit(uint64_t act_bytes, bool v1_engine) {
  return v1_engine ? 2 * act_bytes : 0;
}

void add_draft_kv(KvLayout& target, const KvLayout& draft) {
  const uint64_t draft_layers = draft.full_layers + draft.sliding_layers;
  if (draft_layers == 0) return;
  if (draft.page_bytes == target.page_bytes) {
    target.full_layers += draft_layers;
  } else {
    target.extra_page_bytes += draft.page_bytes * draft_layers;
  }
  target.draft_layers += draft_layers;
  target.bytes_per_token += draft.bytes_per_token;
  target.formula += " + drafter " + draft.formula;
}

Result<SpeculativeSizing> size_speculative_decoding(const SpeculativeInputs& in) {
  const ServeConfig& c = *in.config;
  const ModelSpec& target = *in.target;
  const VllmBehavior& b = in.behavior;
  const uint64_t tp = std::max<uint64_t>(in.tensor_parallel_size, 1);
  SpeculativeSizing z;
  z.method = in.choice.method;
  z.model = in.choice.model;
  z.num_speculative_tokens = c.num_speculative_tokens.value_or(0);
  z.sampler_extra_bytes_per_logit = sampler_extra_bytes_per_logit(in.target_format.dense_bytes, b.v1_engine);
  if (b.v1_engine) {
    z.assumptions.push_back(fmt::format(
        "speculative decoding: the profile run's rejection sampler samples one draft token per request whatever "
        "num_speculative_tokens is, on dummy logits of 2 x max_num_seqs rows, after the sampler: {} B more per logit "
        "of max_num_seqs rows (gpu_model_runner.py, _dummy_sampler_run)", z.sampler_extra_bytes_per_logit));
  }
  if (z.method.empty()) {
    return Error{"num_speculative_tokens without a speculative \"model\" or \"method\" (in --speculative-config, or "
                 "--num-speculative-tokens without --speculative-model): vLLM refuses it: "
                 "\"num_speculative_tokens was provided but without speculative model.\""};
  }
  // SpeculativeConfig._verify_and_get_draft_tp.
  if (c.draft_tensor_parallel_size && *c.draft_tensor_parallel_size != 1 && *c.draft_tensor_parallel_size != tp) {
    return Error{fmt::format("--speculative-config: vLLM refuses it: \"speculative_draft_tensor_parallel_size={} "
                             "cannot be other value than 1 or target model tensor_parallel_size\" (here {})",
                             *c.draft_tensor_parallel_size, tp)};
  }
  if (model_free(z.method)) {
    z.sized = true;
    if (z.method == "suffix" && !z.num_speculative_tokens) z.num_speculative_tokens = 24;  // suffix_decoding_max_tree_depth
    z.assumptions.push_back(fmt::format("speculative decoding by {} proposes tokens from the request's own text: "
                                        "no draft weights or KV cache to add", z.method));
    return z;
  }
  z.loads_model = true;
  if (z.method != "draft_model" && z.method != "eagle" && z.method != "eagle3" && z.method != "mtp") {
    z.assumptions.push_back(fmt::format(
        "speculative decoding ({}{}) is read but not sized: its draft weights and KV cache come on top",
        z.model.empty() ? z.method : z.method + " " + z.model,
        z.num_speculative_tokens ? fmt::format(", {} tokens", z.num_speculative_tokens) : ""));
    return z;
  }
  z.sized = true;
  const WeightFormat& tf = in.target_format;
  const double dense = static_cast<double>(tf.dense_bytes);
  const double h = static_cast<double>(target.hidden_size);
  const bool pp = in.pipeline_parallel_size > 1;

  if (z.method == "draft_model") {
    if (!in.draft) {
      return Error{fmt::format("--speculative-config: draft model '{}' cannot be resolved{}", z.model,
                               in.draft_note.empty() ? "" : ": " + in.draft_note)};
    }
    const ModelSpec& draft = *in.draft;
    if (!z.num_speculative_tokens) {
      return Error{"--speculative-config: vLLM refuses it: \"A speculative model was provided, but "
                   "`num_speculative_tokens` was not provided\""};
    }
    if (draft.vocab_size != target.vocab_size) {
      return Error{fmt::format(
          "--speculative-config: draft model '{}': vLLM refuses it: \"Target and draft model should have the same "
          "vocabulary size. Target model vocab_size={}. Draft model vocab_size={}. Using models with different "
          "tokenizers can cause out-of-bounds errors during speculative decoding.\"",
          z.model, target.vocab_size, draft.vocab_size)};
    }
    uint64_t draft_tp = c.draft_tensor_parallel_size.value_or(tp);
    // V1's DraftModelProposer._raise_if_draft_tp_mismatch; V0's SmallerTpProposerWorker ran a draft
    // on fewer ranks (its weights whole on the first).
    if (b.v1_engine && draft_tp != tp) {
      return Error{fmt::format("--speculative-config: vLLM refuses it: \"Currently, 'draft_tensor_parallel_size' and "
                               "'tensor_parallel_size' must be the same. Got {} and {}. Please pass "
                               "'draft_tensor_parallel_size' in the speculative_config.\"", draft_tp, tp)};
    }
    if (draft.num_attention_heads && draft.num_attention_heads % draft_tp != 0) {
      return Error{fmt::format("--speculative-config: draft model '{}': \"Total number of attention heads ({}) must be "
                               "divisible by tensor parallel size ({}).\"", z.model, draft.num_attention_heads, draft_tp)};
    }
    z.draft_tensor_parallel_size = draft_tp;
    // ModelConfig(dtype=target's dtype, quantization=speculative_config.quantization): the draft's
    // own checkpoint format unless the config names one.
    auto format = weight_format(draft, tf.dtype, c.speculative_quantization, in.gpu_has_bf16);
    if (!format) return Error{fmt::format("--speculative-config: draft model '{}': {}", z.model, format.error().message)};
    PipelineStage whole;
    whole.layers = draft.num_layers;
    whole.first = whole.last = true;
    z.weights_bytes = stage_weight_bytes(draft, whole, draft_tp, 1, *format, b.mla_dequantized_kv_b,
                                         moe_expert_ranks(draft, draft_tp, 1)) +
                      rotary_cache_bytes(draft, format->dense_bytes);
    z.draft_layers = draft.num_layers;
    z.kv = kv_layout(draft, pipeline_stages(draft, 1).front(), draft_tp, in.kv_storage, in.block_size);
    z.model_source = draft.source;
    z.weights_detail = fmt::format("{} layers, its own embeddings and head ({}), TP {}", draft.num_layers,
                                   format->description, draft_tp);
    if (!b.v1_engine && draft_tp != tp) {
      z.assumptions.push_back(fmt::format("draft_tensor_parallel_size 1: the draft model runs whole on the first of "
                                          "the {} GPUs, which the figures are for", tp));
    }
    if (!b.v1_engine) {
      z.assumptions.push_back("V0 splits the profiled blocks between target and draft in proportion to their block "
                              "sizes (split_num_cache_blocks_evenly): the same tokens within one block");
    }
    return z;
  }

  if (c.draft_tensor_parallel_size && *c.draft_tensor_parallel_size != tp) {
    z.assumptions.push_back(fmt::format(
        "draft_tensor_parallel_size {} ignored: vLLM loads {} heads with the target's parallel config, split {} ways",
        *c.draft_tensor_parallel_size, z.method == "mtp" ? "MTP" : "EAGLE", tp));
  }
  z.draft_tensor_parallel_size = tp;

  if (z.method == "mtp") {
    const uint64_t n = in.target_mtp_layers;
    if (n == 0) {
      return Error{fmt::format("--speculative-config: method mtp needs the model's multi-token-prediction layers "
                               "(num_nextn_predict_layers in config.json); {} has none", target.id)};
    }
    if (!z.num_speculative_tokens) z.num_speculative_tokens = n;   // n_predict
    if (z.num_speculative_tokens > n && z.num_speculative_tokens % n != 0) {
      return Error{fmt::format("--speculative-config: vLLM refuses it: \"num_speculative_tokens:{} must be divisible "
                               "by n_predict={}\"", z.num_speculative_tokens, n)};
    }
    // DeepSeekMultiTokenPredictorLayer: the target's decoder block (MoE past first_k_dense_replace,
    // quantized like the target: "Align the quantization of draft model"), enorm, hnorm and
    // shared_head.norm, and eh_proj, an nn.Linear(2H, H) whole on every rank in the model dtype.
    ModelSpec block = target;
    block.first_dense_layers = 0;
    block = layers_only(block, n);
    z.weights_bytes = stage_weight_bytes(block, middle_layers(n), tp, 1, tf, b.mla_dequantized_kv_b,
                                         moe_expert_ranks(block, tp, 1)) +
                      static_cast<uint64_t>(static_cast<double>(n) * (3 * h + 2 * h * h) * dense);
    z.draft_layers = n;
    z.kv = kv_layout(block, middle_layers(n), tp, in.kv_storage, in.block_size);
    z.model_source = target.source;
    z.shares_embedding = !pp;
    z.shares_lm_head = true;
    if (pp) z.weights_bytes += static_cast<uint64_t>(static_cast<double>(target.vocab_size) * h * dense / static_cast<double>(tp));
    z.weights_detail = fmt::format("{} MTP layer{} (decoder block, eh_proj 2H x H, 3 norms){}", n, n == 1 ? "" : "s",
                                   pp ? "; its own embeddings (PP > 1), the target's lm_head"
                                      : "; the target's embeddings and lm_head");
    z.assumptions.push_back(fmt::format(
        "MTP: the checkpoint's {} layer{} past num_hidden_layers are skipped when the target loads and loaded once by "
        "the drafter (deepseek_mtp.py); the target's embed_tokens and lm_head are shared "
        "(_maybe_share_embeddings, _maybe_share_lm_head)", n, n == 1 ? "" : "s"));
    return z;
  }

  // EAGLE / EAGLE-3 heads (llama_eagle.py, llama_eagle3.py).
  if (!z.num_speculative_tokens) {
    return Error{"--speculative-config: vLLM refuses it: \"A speculative model was provided, but "
                 "`num_speculative_tokens` was not provided\""};
  }
  const bool eagle3 = z.method == "eagle3";
  ModelSpec head;
  uint64_t draft_vocab = target.vocab_size;
  if (in.draft) {
    head = *in.draft;
    if (in.draft_vocab_size) draft_vocab = in.draft_vocab_size;
    z.model_source = in.draft->source;
  } else {
    // vLLM's defaults for a head config that says nothing more: one Llama decoder layer of the
    // target's width (EAGLEConfig), draft_vocab_size = vocab_size (Eagle3LlamaForCausalLM).
    head = target;
    head.num_layers = 1;
    head.num_experts = 0;
    head.quantization.clear();
    z.model_source = "the target's shape (assumed)";
    z.assumptions.push_back(fmt::format(
        "{} head '{}' has no config here (not in the Hugging Face cache): sized as one decoder layer of {}'s shape{}; "
        "give its config.json path as \"model\" for its own", eagle3 ? "EAGLE-3" : "EAGLE", z.model, target.id,
        eagle3 ? fmt::format(" and its own lm_head over the full vocabulary ({}: vLLM's draft_vocab_size default)", draft_vocab)
               : ""));
  }
  if (head.num_layers == 0 || head.hidden_size == 0) {
    return Error{fmt::format("--speculative-config: {} head '{}': its config gives no layer count or hidden size",
                             z.method, z.model)};
  }
  auto format = weight_format(head, tf.dtype, c.speculative_quantization, in.gpu_has_bf16);
  if (!format) return Error{fmt::format("--speculative-config: {} head '{}': {}", z.method, z.model, format.error().message)};
  const uint64_t n = head.num_layers;
  const double hh = static_cast<double>(head.hidden_size);
  ModelSpec layers = layers_only(head, n);
  double bytes = static_cast<double>(stage_weight_bytes(layers, middle_layers(n), tp, 1, *format,
                                                        b.mla_dequantized_kv_b, moe_expert_ranks(layers, tp, 1)));
  const double hd = static_cast<double>(head.head_dim_or_default());
  const double qkv_out = (static_cast<double>(head.num_attention_heads) + 2 * static_cast<double>(head.kv_heads_or_default())) * hd;
  if (eagle3) {
    // Layer 0's qkv_proj reads [embeds, hidden] (2H), one H more than a plain layer; hidden_norm
    // and the final norm; fc, a ReplicatedLinear(3 x target hidden, H) in the draft's format; the
    // head's own ParallelLMHead over draft_vocab_size; draft_id_to_target_id (int64 per draft token).
    bytes += hh * qkv_out * format->linear_bytes / static_cast<double>(tp);
    bytes += 2 * hh * static_cast<double>(format->dense_bytes);
    bytes += 3 * h * hh * format->linear_bytes;
    bytes += static_cast<double>(draft_vocab) * hh * static_cast<double>(format->dense_bytes) / static_cast<double>(tp);
    bytes += static_cast<double>(draft_vocab) * 8;
    z.shares_lm_head = false;
    z.weights_detail = fmt::format("{} decoder layer{} (qkv from 2H), fc 3H x H, its own lm_head over {} tokens", n,
                                   n == 1 ? "" : "s", draft_vocab);
    z.assumptions.push_back(
        "EAGLE-3: the head keeps its own lm_head (draft vocabulary) and shares the target's embed_tokens, which its "
        "checkpoint lacks (_maybe_share_embeddings / _maybe_share_lm_head)");
  } else {
    // LlamaModel of llama_eagle.py: layer 0 without input_layernorm, fc an nn.Linear(2H, H)
    // without bias, whole on every rank in the model dtype; the target's lm_head.
    bytes -= hh * static_cast<double>(format->dense_bytes);
    bytes += 2 * hh * hh * dense;
    z.shares_lm_head = true;
    z.weights_detail = fmt::format("{} decoder layer{}, fc 2H x H; the target's lm_head", n, n == 1 ? "" : "s");
    z.assumptions.push_back(
        "EAGLE: the head uses the target's lm_head and embed_tokens (its checkpoint has no lm_head; its embed_tokens "
        "copy the target's)");
  }
  // With PP the embeddings live on the first stage: the head loads its own (llama_eagle.py).
  z.shares_embedding = !pp;
  if (pp) bytes += static_cast<double>(target.vocab_size) * hh * dense / static_cast<double>(tp);
  z.weights_bytes = static_cast<uint64_t>(bytes);
  z.draft_layers = n;
  z.kv = kv_layout(layers, middle_layers(n), tp, in.kv_storage, in.block_size);
  z.assumptions.push_back("the head's rotary embedding is the target's (get_rope keeps one table per configuration): "
                          "no cache of its own");
  return z;
}

}  // namespace oomdoc
