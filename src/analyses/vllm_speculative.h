// Speculative decoding in vLLM's startup accounting, per GPU: what the drafter adds to "Model
// loading took" (its weights are loaded inside the same memory profiler as the target's), to
// every token's KV cache (its attention layers get KV cache spec entries of their own in the same
// pool and block tables), and to the profile run's sampler. The one place for these formulas;
// docs/serve.md ("Speculative decoding") gives the vLLM source of each.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyses/vllm_kv_cache.h"
#include "analyses/vllm_profile.h"
#include "analyses/vllm_version.h"
#include "core/result.h"
#include "model/model_spec.h"
#include "model/serve_config.h"

namespace oomdoc {

// The proposer SpeculativeConfig.__post_init__ (vllm/config/speculative.py) settles on: "method"
// when given (the per-model MTP names become "mtp"), else from "model": "ngram" / "[ngram]" is the
// n-gram proposer, a name containing "eagle-" an EAGLE head, "eagle3" an EAGLE-3 head, anything
// else a draft model.
struct SpeculativeChoice {
  std::string method;   // draft_model, eagle, eagle3, mtp, ngram, ngram_gpu, suffix, medusa, mlp_speculator, ...
  std::string model;    // the draft model or head as given ("" when the method loads none)
  // Whether the CLI should resolve `model` to a config (a draft model or an EAGLE head).
  bool needs_model_config() const { return method == "draft_model" || method == "eagle" || method == "eagle3"; }
};
// nullopt when the launch has no speculative decoding.
std::optional<SpeculativeChoice> speculative_choice(const ServeConfig& config);

// Which engine runs the launch. V1 in v0.8-v0.10 ran only some proposers (EngineArgs.
// _is_v1_supported_oracle, vllm/engine/arg_utils.py: a "method" of ngram, eagle, eagle3, medusa, mtp
// or deepseek_mtp, or the model "ngram") and fell back to V0 for the rest ("Speculative Decoding"),
// unless VLLM_USE_V1=1 asked for V1, which it then refused. V0 is gone from v0.11; draft models
// run in V1 from vllm-project/vllm#24322 (v0.14 assumed; v0.13.0 refuses them, vllm#31883).
struct SpeculativeEngine {
  bool falls_back_to_v0 = false;
  std::string note;
};
Result<SpeculativeEngine> speculative_engine(const SpeculativeChoice& choice, const ServeConfig& config,
                                             const VllmVersion& version, const std::optional<std::string>& use_v1_env);

struct SpeculativeSizing {
  std::string method;
  std::string model;                 // as given; "" for mtp (the target's own layers) and model-free methods
  std::string model_source;          // the config the draft was sized from
  uint64_t num_speculative_tokens = 0;
  uint64_t draft_tensor_parallel_size = 0;
  bool sized = false;                // false: read, but nothing of it is added (medusa, mlp_speculator, ...)
  bool loads_model = false;          // false for ngram / suffix: nothing to load, no KV
  uint64_t draft_layers = 0;         // decoder layers with KV cache of their own
  bool shares_embedding = false;     // uses the target's embed_tokens
  bool shares_lm_head = false;       // uses the target's lm_head
  uint64_t weights_bytes = 0;        // per GPU, inside "Model loading took"
  KvLayout kv;                       // the draft layers' KV cache on one GPU (kv.bytes_per_token)
  // Bytes per logit of the max_num_seqs dummy rows held beside the sampler's own peak while the
  // rejection sampler's dummy run samples (see sampler_extra_bytes_per_logit).
  uint64_t sampler_extra_bytes_per_logit = 0;
  std::string weights_detail;        // "1 decoder layer + fc 2H->H; embeddings and lm_head shared"
  std::vector<std::string> assumptions;
};

struct SpeculativeInputs {
  SpeculativeChoice choice;
  const ModelSpec* target = nullptr;
  const ServeConfig* config = nullptr;
  const ModelSpec* draft = nullptr;   // the resolved draft model / head config; null when not found
  std::string draft_note;             // how it was resolved (or why not)
  uint64_t target_mtp_layers = 0;     // the target's num_nextn_predict_layers
  uint64_t draft_vocab_size = 0;      // the EAGLE-3 head's draft_vocab_size (0: not given)
  VllmBehavior behavior;
  uint64_t tensor_parallel_size = 1;
  uint64_t pipeline_parallel_size = 1;
  WeightFormat target_format;
  KvCacheStorage kv_storage;
  uint64_t block_size = kVllmDefaultBlockSize;
  bool gpu_has_bf16 = true;
};

// Fails (exit 2) where vLLM refuses the launch before loading anything, in vLLM's words: a draft
// tensor-parallel size other than 1 or the target's, a draft model whose vocabulary differs from
// the target's, MTP on a model without MTP layers, a draft model on a release without draft-model
// speculative decoding in V1, a draft model with no config (the CLI names it first).
Result<SpeculativeSizing> size_speculative_decoding(const SpeculativeInputs& in);

// The rejection sampler's dummy run in V1 (gpu_model_runner.py, _dummy_sampler_run): one draft
// token per request whatever num_speculative_tokens is, on a fresh randn logits tensor of
// num_reqs + num_reqs rows in the model dtype, after the plain sampler's run; its bonus and target
// rows go through the same top-k/top-p sampling, so its peak is the sampler's plus the randn
// tensor: 2 x act_bytes per logit of the num_reqs rows. 0 for V0.
uint64_t sampler_extra_bytes_per_logit(uint64_t act_bytes, bool v1_engine);

// The draft's layers in the target's KV layout: vLLM v1 puts every attention layer, target's and
// draft's, in the KV cache config; layers whose page is the target's join its groups as more
// full-attention layers, others (a draft with another head size) add their page to every block
// (UniformTypeKVCacheSpecs: one group whose page is the sum of the layers' pages).
void add_draft_kv(KvLayout& target, const KvLayout& draft);

}  // namespace oomdoc
