// What changes in vLLM's memory accounting from one version to the next, in one place: the
// default gpu_memory_utilization, the engine (V0 / V1), whether the CUDA context counts against
// the budget, whether CUDA-graph memory is estimated before the KV cache is sized, and the
// scheduler defaults the profile run uses. Sources are in docs/serve.md ("Version table").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace oomdoc {

struct VllmVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  bool given = false;    // false: "current" (the newest behaviour oomdoc knows)
  std::string text;      // as the user gave it

  bool at_least(int ma, int mi, int pa = 0) const;
};

// vLLM's default --gpu-memory-utilization: vllm/config/cache.py says 0.92 in current releases;
// older docs and releases say 0.9. The change is assumed to come with v0.21's CUDA-graph
// accounting (docs/serve.md). oomdoc's own training budget (kDefaultMemoryBudget,
// readers/gpu_catalog.h) was chosen equal to the current one but is a separate setting.
inline constexpr double kVllmDefaultGpuMemoryUtilization = 0.92;         // v0.21 and later
inline constexpr double kVllmDefaultGpuMemoryUtilizationBeforeV021 = 0.90;
// The max_model_len vLLM assumes when config.json has none of its context keys (vllm/config.py
// _get_and_verify_max_len: default_max_len = 2048, with a warning).
inline constexpr uint64_t kVllmFallbackMaxModelLen = 2048;

// The newest release whose logs oomdoc's accounting has been compared with (shared/data/vllm-logs):
// a later --vllm-version is sized as the newest behaviour, with a warning that it may have changed.
inline constexpr int kNewestKnownVllmMajor = 0;
inline constexpr int kNewestKnownVllmMinor = 24;

// "0.6.4.post1", "v0.8.3rc2.dev224+g49c0d11ec", "0.24", "current" / "" (newest). Versions before
// vLLM's first release (v0.1.0) are refused.
Result<VllmVersion> parse_vllm_version(std::string_view text);
// The version a prediction uses: `flag` (--vllm-version) when given, else a docker image tag that
// names a release (v0.8.5, not "latest"), else the current one. Errors come from the flag.
Result<VllmVersion> vllm_version_for(std::string_view flag, const std::optional<std::string>& image_tag);

// The feature for which a release that defaults to V1 but still has V0 (v0.8.0 to v0.10.x) falls
// back to V0 (EngineArgs._is_v1_supported_oracle), in vLLM's own name for it; nullopt when V1
// runs the launch. Compute capability below 8.0 until v0.10.2 (vllm-project/vllm#23614); a
// --kv-cache-dtype other than auto unless FlashAttention 3 can read fp8 (Hopper; Blackwell from
// v0.10.0), any value before v0.8.2 (#15191); --dtype float32 before v0.9.2 (#19754).
// architecture: the catalog's ("" when unknown: no capability check).
std::optional<std::string> v1_oracle_fallback(const VllmVersion& version, std::string_view architecture,
                                              std::string_view kv_cache_dtype, std::string_view dtype);

struct VllmBehavior {
  VllmVersion version;
  bool v1_engine = true;
  double default_gpu_memory_utilization = kVllmDefaultGpuMemoryUtilization;
  // 0.8-0.8.x V1 workers added every non-torch byte on the device (CUDA context included) to the
  // profiled peak; V0 and later V1 measure from a snapshot taken after the context exists.
  bool context_counts_against_budget = false;
  // From v0.21.0 vLLM estimates CUDA-graph memory before sizing the KV cache; before, the
  // graphs were captured afterwards, on top of the budget.
  bool graph_memory_in_budget = true;
  // The startup check that one max_model_len request fits the KV cache came with v0.2.7
  // (vllm-project/vllm#2163, "Currently, vLLM hangs when the length of a single sequence is
  // larger than the system's KV cache size"); before, vLLM started and such a request hung.
  bool max_len_startup_check = true;
  // CUDA graphs came with v0.2.6 ("Optimize model execution with CUDA graph", vllm-project/vllm#1926,
  // with --enforce-eager); before, the model ran eagerly.
  bool cuda_graphs = true;
  // From v0.2.5 ("Fix peak memory profiling", vllm-project/vllm#2031) to v0.6.3, V0 took the profile
  // peak as device memory in use after the profile run (total - free; from v0.3.1, #2863: the
  // memory in use at startup left out): the caching allocator's reserve and NCCL's buffers count.
  // v0.6.4 measured torch's own peak (vllm-project/vllm#9352).
  bool peak_from_used_memory = false;
  // MLA models (DeepSeek-V2/V3) cache one latent per token from v0.7.1 (vllm-project/vllm#12601,
  // "With vllm==0.7.1 we fully implement MLA"); before, K and V per head, each padded to a head size
  // of 256 until v0.7.0 (ModelConfig.get_head_size, #4650; #12067 "Remove hardcoded head_size=256
  // for Deepseek v2 and v3"), then qk_nope + qk_rope.
  bool mla_latent_cache = true;
  bool mla_heads_padded_to_256 = false;
  // V0's CacheEngine padded each MLA latent entry to 256 bytes on CUDA (576 elements -> 640, "This
  // increases the size of the cache by ~11%") from vllm-project/vllm#12676 (February 2025, v0.7.2)
  // until #14842 "Get rid of mla cache alignment" (March 2025; v0.8.0 assumed). V1 never padded.
  bool mla_entries_aligned_256 = false;
  // V1's hybrid KV cache manager (v0.10+) gives sliding-window layers their own block groups;
  // before it (and in V0), every layer is sized as full attention.
  bool hybrid_kv_groups = true;
  // How the hybrid manager sizes its groups (KvGrouping): always the smaller kind's layer count
  // until vllm-project/vllm#29303 (November 2025, v0.12 assumed) let the larger kind's count serve
  // when under 1.25 times it; #36684 (March 2026, v0.18 assumed) raised that to 1.5.
  uint32_t hybrid_group_larger_kind_ratio_percent = 150;
  // From v0.11 (vllm-project/vllm#23974, "[Hybrid Allocator] Support Pipeline Parallel") the groups
  // are cut over the whole model and projected onto each pipeline stage; before, from each
  // stage's own layers.
  bool hybrid_groups_whole_model = true;
  // "GPU KV cache size: N tokens" is int(max_model_len x max_concurrency) from v0.20 (vllm-project/
  // vllm#38364, "Fix incorrect KV cache log output": dividing the blocks evenly over the groups
  // misstates hybrid models); the v0.19.0 log of #40691 still prints blocks / groups x block size,
  // the corpus's v0.20.1 log the new figure. (Equal for models with one group, up to a block.)
  bool kv_tokens_from_concurrency = true;
  // Gemma 2 served with its sliding window disabled and the context capped at the window (4096),
  // from its first support in v0.5.1 (vllm-project/vllm#5908: "this PR temporarily truncates the
  // model's maximum length to 4K") until v0.6.5 (#10584, "gemma2 full context length support").
  bool gemma2_context_capped_to_window = false;
  // The "Free memory on device ... on startup is less than desired GPU memory utilization"
  // check (V1 workers with the startup memory snapshot, v0.9+).
  bool startup_free_memory_check = true;
  // V0 turned chunked prefill on by itself above 32K tokens of context (without LoRA or
  // speculative decoding) from v0.5.4 (vllm-project/vllm#6666, merged 2024-07-23, "to avoid
  // possible OOM errors during the initial memory profiling"); before, a long context meant a
  // profile run of max_model_len tokens. V1 chunks whatever --no-enable-chunked-prefill says up to
  // v0.11.0 (arg_utils._set_default_args: "V1 always uses chunked prefills", for every model but
  // pooling ones); from v0.11.1 the flag is respected
  // (_set_default_chunked_prefill_and_prefix_caching_args: only an unset flag takes the default).
  bool always_chunked_prefill = true;
  bool v0_long_context_chunking = true;
  // V0's default token budget with chunked prefill: 2048 from v0.6.5 (vllm-project/vllm#10544,
  // "We have seen that 512 is a very conservative value"), 512 before.
  uint64_t v0_chunked_batched_tokens = 2048;
  // V1's sampler masks top-k/top-p without sorting the logits (Triton pivot search, from
  // vllm-project/vllm#33538, opened 2026-02-02; v0.17 assumed): the profile run's sampler
  // peak drops from 38 to 14 bytes per logit (analyses/vllm_profile.h).
  bool sort_free_sampler = true;
  // MLA layers keep 16-bit copies of a quantized kv_b_proj (W_UK_T and W_UV: "we just store
  // fp16/bf16 copies and perform the bmm's in 16-bit") from vllm-project/vllm#14770 (March 2025,
  // v0.8.0 assumed). Before it, VLLM_MLA_PERFORM_MATRIX_ABSORPTION materialised absorbed
  // matrices instead; not modelled (the one 0.7.3 log in the corpus shows no such overhead).
  bool mla_dequantized_kv_b = true;
  // Hopper's MXFP4 MoE backend: Triton (OpenAI's triton_kernels) once vLLM bundles that package
  // (vllm-project/vllm#28788, November 2025; v0.12 assumed). Before, Hopper fell back to Marlin
  // without a separately installed triton_kernels (vllm-project/vllm#27370: "users have to install
  // triton_kernels manually"; get_mxfp4_backend in quantization/mxfp4.py takes Triton only with
  // it); the v0.10.1 H100 log of vllm-project/vllm#23278 matches Marlin's padding to 0.1%.
  bool mxfp4_triton_on_hopper = true;
  // --block-size values argparse accepts: [8, 16, 32] in vllm/engine/arg_utils.py up to v0.5;
  // [8, 16, 32, 64, 128] in v0.6-v0.8 (arg_utils.py); the CacheConfig Literal
  // [1, 8, 16, 32, 64, 128] from v0.9 and [1, 8, 16, 32, 64, 128, 256] from v0.11 (assumed); any
  // other value: "argument --block-size: invalid choice". Empty: any positive size, as current
  // vllm/config/cache.py takes it (`block_size: int = Field(default=None, gt=0)`), the attention
  // backend chosen to suit it (vllm-project/vllm#35122, February 2026: v0.17 assumed).
  std::vector<uint64_t> block_sizes = {};
  // A --block-size given by hand is kept from v0.17 (#35122): the selector picks an attention
  // backend that supports it instead of forcing the MLA backends' own size (64 on Hopper, 128 on
  // SM100) over it.
  bool user_block_size_kept = true;
  // dtype "auto" with a bfloat16 checkpoint on a GPU without bf16 serves float16 from v0.9.0
  // (vllm-project/vllm#17265, "Auto fallback to float16 for pre-Ampere GPUs"); before, vLLM refused.
  bool auto_float16_without_bf16 = true;
  // Gemma 2/3, GLM-4 and PLaMo2 refuse float16 from v0.9.0 (_FLOAT16_NOT_SUPPORTED_MODELS, with
  // the same change); "auto" on a GPU without bf16 then serves them in float32.
  bool float16_refused_for_unstable_models = true;
  // --pipeline-parallel-size from v0.5.1 ("Pipeline parallelism is not supported yet." before);
  // --cpu-offload-gb from v0.5.3 (vllm-project/vllm#6496).
  bool pipeline_parallel = true;
  bool cpu_offload = true;
  // --enable-chunked-prefill takes True/False (nargs="?", StoreBoolean) in v0.5-v0.9 only; from
  // v0.10 it is a BooleanOptionalAction switch and argparse refuses the word after it.
  bool chunked_prefill_takes_value = false;
  // LongRoPE models default to their original_max_position_embeddings (vllm-project/vllm#27431,
  // October 2025, first in v0.11.1).
  bool longrope_original_context_default = true;
  // The default max_num_seqs and token budget fitted to each other (EngineArgs.
  // _set_default_max_num_seqs_and_batched_tokens_args; v0.12.0 assumed).
  bool fitted_scheduler_defaults = true;
  std::vector<std::string> notes;   // what was assumed about the version
  std::vector<std::string> warnings;  // what the user should know: a setting this version ignores
};

// env: VLLM_USE_V1 chooses the engine up to v0.10.x (V0 was removed in v0.11.0: it is then ignored,
// with a warning); VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS changes the graph accounting.
VllmBehavior vllm_behavior(const VllmVersion& version, std::optional<std::string> use_v1_env,
                           std::optional<std::string> estimate_graphs_env);

}  // namespace oomdoc
