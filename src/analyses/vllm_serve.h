// `oomdoc serve`: vLLM's startup memory accounting, offline. Given a model, a vLLM command line
// and a GPU, predicts each figure vLLM logs at startup, which startup error (if any) it raises, in
// vLLM's words, and the flags that make it fit, cheapest first, each re-predicted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyses/vllm_kv_cache.h"
#include "analyses/vllm_profile.h"
#include "analyses/vllm_speculative.h"
#include "analyses/vllm_version.h"
#include "core/result.h"
#include "model/gpu.h"
#include "model/model_spec.h"
#include "model/serve_config.h"

namespace oomdoc {

// The GPU vLLM runs on: total memory as CUDA reports it (vLLM's total_gpu_memory).
struct ServeTarget {
  std::string name = "custom";
  uint64_t total_bytes = 0;
  std::string total_source;
  uint64_t nvidia_smi_total_bytes = 0;   // a catalog card's nvidia-smi total (0 for --memory)
  bool bf16 = true;
  bool fp8 = true;
  bool nvlink = false;
  uint64_t tensor_parallel_domain = 8;   // the most GPUs TP spans (GpuSpec::tensor_parallel_domain)
  bool from_catalog = false;
  std::string vendor = "nvidia";
  std::string architecture;   // the catalog's (Ampere, Hopper, ...); "" for --memory. Picks MoE kernels.
};
// From a catalog entry: its CUDA-visible total when known, else nvidia-smi's total.
ServeTarget serve_target(const GpuSpec& gpu);
// The least total CUDA reports for `gpu`: the catalog's CUDA figure, or nvidia-smi's less the
// widest usual gap (0.9 GiB). For deciding that a card holds more than another.
uint64_t cuda_total_at_least(const GpuSpec& gpu);
// The compute capability (x10) a weight format's kernels need in vLLM (each QuantizationConfig's
// get_min_capability): `method` as the checkpoint names it, `asked` as --quantization does
// ("awq_marlin"); 0 for none.
int quantization_min_capability(const std::string& method, const std::string& asked);
// From --memory SIZE (taken as CUDA's total, as vLLM logs it).
ServeTarget serve_target_memory(uint64_t total_bytes);

// Figures a user can copy from a real startup log to replace oomdoc's estimates.
struct ServeOverrides {
  std::optional<uint64_t> weights_bytes;       // "Model loading took" / "model weights take"
  std::optional<uint64_t> activation_bytes;    // "PyTorch activation peak memory takes"
  std::optional<uint64_t> non_torch_bytes;     // "non_torch_memory takes"
  std::optional<uint64_t> cuda_graph_bytes;    // "Estimated CUDA graph memory"
};

struct ServeInputs {
  ModelSpec model;
  ServeConfig config;
  ServeTarget target;
  VllmVersion version;
  ServeOverrides overrides;
  std::string model_note;   // how the model was resolved, when not directly (readers/served_model.h)
  // The KV cache dtype the checkpoint asks for (ModelOpt's kv_cache_quant_algo), which
  // --kv-cache-dtype auto resolves to; and where it was read.
  std::optional<std::string> checkpoint_kv_cache_dtype;
  std::string checkpoint_kv_cache_source;
  // The speculative draft model or EAGLE head's config (--speculative-config "model"), resolved
  // like the target; nullopt when there is none or it was not found (draft_model_note says why).
  std::optional<ModelSpec> draft_model;
  std::string draft_model_note;
  // config.json fields ModelSpec does not carry (readers/served_model.h): the target's
  // num_nextn_predict_layers, the draft head's draft_vocab_size.
  uint64_t mtp_layers = 0;
  uint64_t draft_vocab_size = 0;
};

// Settings as vLLM will run them, with where each came from.
struct ServeSettings {
  double gpu_memory_utilization = kVllmDefaultGpuMemoryUtilization;
  bool utilization_is_default = true;
  uint64_t max_model_len = 0;
  std::string max_model_len_source;     // "--max-model-len", "model context", "auto-fit"
  uint64_t model_context = 0;           // the model's derived max_model_len
  uint64_t max_num_seqs = 256;
  uint64_t max_num_batched_tokens = 2048;
  bool chunked_prefill = true;
  uint64_t block_size = kVllmDefaultBlockSize;
  std::string kv_cache_dtype = "auto";
  WeightFormat weights;
  uint64_t tensor_parallel_size = 1;
  uint64_t pipeline_parallel_size = 1;
  uint64_t data_parallel_size = 1;      // replicas; an MoE model's experts are spread over them too
  bool enforce_eager = false;
};

struct VllmStartupError {
  std::string kind;     // free_memory, weights_oom, profile_oom, forward_oom, no_cache_blocks, max_len_too_long,
                        // auto_fit_failed, kv_cache_oom, graph_capture_oom, sampler_warmup_oom
  std::string message;  // as vLLM (or PyTorch) words it
};

struct ServeComponent {
  uint64_t bytes = 0;
  bool from_log = false;   // an override replaced oomdoc's estimate
  std::string detail;
};

struct ServePrediction {
  VllmBehavior behavior;
  ServeSettings settings;
  uint64_t total_bytes = 0;
  uint64_t budget_bytes = 0;          // total x gpu_memory_utilization (or --kv-cache-memory-bytes path)
  uint64_t context_bytes = 0;         // CUDA context, outside the budget except in early V1
  uint64_t free_at_startup_bytes = 0; // total - context (nothing else on the GPU assumed)
  ServeComponent weights;
  ServeComponent activation;
  ServeComponent non_torch;
  ServeComponent cuda_graphs;
  bool graphs_in_budget = false;      // charged before sizing the KV cache (v0.21+)
  int64_t available_kv_bytes = 0;     // can be negative, as vLLM logs it
  uint64_t binding_stage = 0;         // pipeline stage with the fewest blocks
  // V0 with tensor parallelism: only the driver (each group's first rank) samples, so the binding
  // stage's other ranks peak at the forward pass alone and each logs more memory left for the KV
  // cache than the driver ("(VllmWorkerProcess pid=N) ... the rest of the memory reserved for KV
  // Cache is"); the executor gives every rank the fewest blocks, the driver's.
  struct OtherRanks {
    uint64_t activation_bytes = 0;
    int64_t available_kv_bytes = 0;
  };
  std::optional<OtherRanks> non_sampling_ranks;
  KvLayout kv;
  KvCapacity capacity;
  uint64_t blocks_from_memory = 0;    // what the memory holds, before --num-gpu-blocks-override
  bool blocks_overridden = false;     // --num-gpu-blocks-override set num_blocks (capacity.bytes follows it)
  uint64_t max_model_len_that_fits = 0;
  // An encoder-only model (BERT) served as a pooling model by a V1 engine that allocates no KV
  // cache for it (vllm-project/vllm#21270): kv and capacity stay empty, available_kv_bytes is 0.
  bool no_kv_cache = false;
  int64_t left_bytes = 0;             // no_kv_cache: the card after context, weights, activation peak, non-torch, graphs
  uint64_t requests_at_once = 0;      // no_kv_cache: min(max_num_seqs, max_num_batched_tokens / max_model_len)
  std::optional<SpeculativeSizing> speculative;   // --speculative-config: what the drafter adds
  std::vector<std::string> log_lines; // what vLLM would log
  std::optional<VllmStartupError> error;
  std::vector<std::string> warnings;
  std::vector<std::string> assumptions;
  bool fits = false;
  // Before v0.2.7 (no startup check): vLLM starts, but a max_model_len request never gets its
  // blocks and hangs. Not fitting, without a startup error.
  bool request_hangs = false;
};

struct ServeFix {
  std::string id;            // the fix catalogue's id (analyses/fix_catalog.h): its place in the order
  std::string flag;          // "--max-model-len 20480"; prose where the change is no flag (another checkpoint)
  // The vLLM arguments the change adds, as the command line takes them (["--max-model-len", "20480"]);
  // empty when it adds none (another checkpoint, another GPU, dropping a flag).
  std::vector<std::string> vllm_args;
  std::string cost;          // what it costs
  bool fits = false;
  uint64_t kv_tokens = 0;
  double max_concurrency = 0;
  uint64_t max_model_len = 0;
  std::string note;
};

struct ServeReport {
  std::string model_id;
  std::string model_source;
  std::string launcher;
  ServeTarget target;
  ServePrediction prediction;
  std::vector<ServeFix> fixes;       // only when it does not fit; cheapest first
  std::vector<std::string> ignored_flags;      // known to vLLM, no effect on GPU memory
  std::vector<std::string> not_modeled_flags;
  std::vector<std::string> unknown_flags;      // unknown to oomdoc: not checked
};

// The smallest of the model's context keys (ModelSpec::context_keys, an --hf-overrides
// max_position_embeddings among them) and the key that gives it, as vLLM's _get_and_verify_max_len
// takes it; 0 tokens when the config has none (vLLM then assumes kVllmFallbackMaxModelLen).
struct VllmContextLimit {
  uint64_t tokens = 0;
  std::string key;
};
VllmContextLimit vllm_context_limit(const ModelSpec& model, std::optional<uint64_t> max_position_override);

// vLLM's default max_model_len (vllm/config: _get_and_verify_max_len): the context limit above,
// times the rope_scaling factor for every rope type but su,
// longrope and llama3 (yarn: original_max_position_embeddings x factor); Gemma 3's context is
// already scaled ("NOTE(woosuk): Gemma3's max_model_len (128K) is already scaled by RoPE
// scaling"). deepseek-coder-6.7b: 16384 x 4 (linear) = 65536.
uint64_t vllm_derived_max_model_len(const ModelSpec& model, std::optional<uint64_t> max_position_override);

// Fails (exit 2) on contradictory input: max_model_len above the model's context without
// VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, TP not dividing the heads, a --block-size outside the version's
// choices, a token budget below max_model_len without chunked prefill, a model without a layer
// count; each in vLLM's words where vLLM refuses it.
Result<ServePrediction> predict_vllm_startup(const ServeInputs& inputs);

// The prediction plus fixes when it does not fit.
Result<ServeReport> analyze_serve(const ServeInputs& inputs);

// The changes that make it fit, cheapest first, each re-predicted (analyses/vllm_fixes.cpp).
std::vector<ServeFix> serve_fixes(const ServeInputs& inputs, const ServePrediction& base);
// A fix's flags as LLM(...) keyword arguments, for a launch written that way:
// "--max-model-len 8192 --kv-cache-dtype fp8" -> "max_model_len=8192, kv_cache_dtype=\"fp8\"",
// "--enforce-eager" -> "enforce_eager=True". oomdoc's own --gpu is left as it is.
std::string as_llm_keywords(std::string_view flags);

}  // namespace oomdoc
