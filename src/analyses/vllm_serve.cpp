// vLLM's startup sequence, step by step (vllm/v1/worker/gpu_worker.py, vllm/utils/mem_utils.py,
// vllm/v1/core/kv_cache_utils.py; V0: vllm/worker/worker.py). docs/serve.md explains each step.
#include "analyses/vllm_serve.h"

#include "analyses/estimator.h"
#include "core/text.h"
#include "core/units.h"
#include "model/architecture.h"
#include "model/quantized_names.h"
#include "readers/model_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <tuple>
#include <cmath>

namespace oomdoc {
namespace {

double gib(int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kGiB); }
double gib(uint64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kGiB); }

// vLLM prints token counts with thousands separators ({:,}).
std::string with_commas(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

const char* kConservingMemoryUrl = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/";

// EngineArgs defaults for the scheduler, which size the profile run.
void apply_scheduler_defaults(const ServeInputs& in, const VllmBehavior& b, ServeSettings& s) {
  const auto& c = in.config;
  bool big_gpu = in.target.total_bytes >= 70 * kGiB &&
                 in.target.name.find("A100") == std::string::npos;
  bool llm_class = c.launcher == "LLM(...)";
  if (b.v1_engine) {
    // arg_utils._set_default_args (v0.9+): larger defaults on >= 70 GiB GPUs other than A100.
    bool sized_by_gpu = b.version.at_least(0, 9, 0) && big_gpu;
    s.max_num_seqs = c.max_num_seqs.value_or(sized_by_gpu ? 1024 : 256);
    uint64_t batched = llm_class ? (sized_by_gpu ? 16384 : 8192) : (sized_by_gpu ? 8192 : 2048);
    s.chunked_prefill = b.always_chunked_prefill || c.enable_chunked_prefill.value_or(true);
    // Models without a KV cache cannot prefill in chunks: vLLM turns it off (vllm-project/vllm#21270).
    if (in.model.is_encoder_only) s.chunked_prefill = false;
    if (!s.chunked_prefill) batched = std::max<uint64_t>(s.max_model_len, batched);
    // Current releases fit the defaults to each other: a default token budget no larger than
    // max_num_seqs full-length requests, a default max_num_seqs no larger than the token budget.
    const bool fitted_defaults = b.fitted_scheduler_defaults;
    if (fitted_defaults && s.max_model_len) batched = std::min(batched, s.max_num_seqs * s.max_model_len);
    s.max_num_batched_tokens = c.max_num_batched_tokens.value_or(batched);
    if (fitted_defaults && !c.max_num_seqs) s.max_num_seqs = std::min(s.max_num_seqs, s.max_num_batched_tokens);
    return;
  }
  s.max_num_seqs = c.max_num_seqs.value_or(256);
  // V0 chunks prefills by itself above 32K of context unless LoRA or speculative decoding is on.
  bool auto_chunk = b.v0_long_context_chunking && s.max_model_len > 32768 && !c.enable_lora &&
                    !c.num_speculative_tokens && !c.speculative_method && !c.speculative_model;
  s.chunked_prefill = c.enable_chunked_prefill.value_or(auto_chunk);
  uint64_t batched = s.chunked_prefill ? b.v0_chunked_batched_tokens : std::max<uint64_t>(s.max_model_len, 2048);
  s.max_num_batched_tokens = c.max_num_batched_tokens.value_or(batched);
}

std::string graph_line(uint64_t bytes) {
  return fmt::format("Estimated CUDA graph memory: {:.2f} GiB total", gib(bytes));
}

// "Overriding num_gpu_blocks=%d with num_gpu_blocks_override=%d": V0's LLMEngine and V1's
// kv_cache_utils.get_num_blocks say it alike.
std::string override_line(const ServePrediction& p) {
  return fmt::format("Overriding num_gpu_blocks={} with num_gpu_blocks_override={}", p.blocks_from_memory,
                     p.capacity.num_blocks);
}

// Whether "Maximum concurrency" counts whole blocks per request (current V1) or divides the cache's
// tokens by max_model_len (V0, and V1 before v0.8).
bool concurrency_in_whole_blocks(const VllmBehavior& b) { return b.v1_engine && b.version.at_least(0, 8, 0); }

// The era's figure is in p.capacity.max_concurrency (capacity_for in predict_vllm_startup).
std::string concurrency_line(const ServePrediction& p) {
  const uint64_t len = p.settings.max_model_len;
  return fmt::format("Maximum concurrency for {} tokens per request: {:.2f}x",
                     concurrency_in_whole_blocks(p.behavior) ? with_commas(len) : std::to_string(len),
                     p.capacity.max_concurrency);
}

// The startup lines of each era, as vllm/worker/model_runner.py, vllm/worker/worker.py,
// vllm/executor/*_executor.py (V0) and vllm/v1/worker/gpu_worker.py, vllm/v1/core/kv_cache_utils.py
// (V1) printed them:
//  - "# GPU blocks: N, # CPU blocks: M": every V0 release (v0.2 on);
//  - "Loading model weights took X GB": from v0.4.0 (vllm-project/vllm#3120, merged March 2024);
//  - "Maximum concurrency for L tokens per request": V0 from v0.6.4 (seen in v0.6.4-format logs,
//    not yet logged in August 2024 when users asked for it in vllm-project/vllm#8031);
//  - the profiling summary ("the current vLLM instance can use ...", "model weights take ...") from
//    v0.6.5 (vllm-project/vllm#10511); v0.6.4's one-line "Memory profiling results" is not reproduced;
//  - V1 before v0.8 (VLLM_USE_V1=1): "Loading model weights took", "# GPU blocks: N" and, from
//    v0.7.1 (vllm-project/vllm#12569), the concurrency line; from v0.8 the current V1 lines.
// "rank" or "7 ranks": the tensor-parallel group's ranks besides its driver.
std::string other_ranks(uint64_t tp) {
  return tp == 2 ? std::string("rank") : fmt::format("{} ranks", tp - 1);
}

// vLLM's format_gib (vllm/utils/mem_utils.py): round(bytes / GiB, 2), printed as Python prints a
// float ("6.0", "93.95").
// A float as Python's repr prints it: shortest digits, "1.0" rather than "1".
std::string python_float(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".ein") == std::string::npos) text += ".0";
  return text;
}

std::string python_gib(uint64_t bytes) { return python_float(std::round(gib(bytes) * 100) / 100); }

std::vector<std::string> vllm_log_lines(const ServePrediction& p, bool blocks_overridden,
                                        const std::string& auto_fit_line, std::optional<uint64_t> kv_cache_memory_bytes) {
  const VllmBehavior& b = p.behavior;
  const ServeSettings& s = p.settings;
  std::vector<std::string> lines;
  const std::string loading_v0 = fmt::format("Loading model weights took {:.4f} GB", gib(p.weights.bytes));
  // A profile run that runs out of memory stops after the weights loaded: only their line.
  const bool profile_oom = p.error && p.error->kind == "profile_oom";
  if (!b.v1_engine) {
    if (b.version.at_least(0, 4, 0)) lines.push_back(loading_v0);
    if (profile_oom) return lines;
    if (b.version.at_least(0, 6, 5)) {
      lines.push_back(fmt::format("the current vLLM instance can use total_gpu_memory ({:.2f}GiB) x "
                                  "gpu_memory_utilization ({:.2f}) = {:.2f}GiB", gib(p.total_bytes),
                                  s.gpu_memory_utilization, gib(p.budget_bytes)));
      lines.push_back(fmt::format("model weights take {:.2f}GiB; non_torch_memory takes {:.2f}GiB; PyTorch "
                                  "activation peak memory takes {:.2f}GiB; the rest of the memory reserved for "
                                  "KV Cache is {:.2f}GiB.", gib(p.weights.bytes), gib(p.non_torch.bytes),
                                  gib(p.activation.bytes), gib(p.available_kv_bytes)));
      if (p.non_sampling_ranks) {
        lines.push_back(fmt::format(
            "(VllmWorkerProcess, the other {}) model weights take {:.2f}GiB; non_torch_memory takes {:.2f}GiB; "
            "PyTorch activation peak memory takes {:.2f}GiB; the rest of the memory reserved for KV Cache is {:.2f}GiB.",
            other_ranks(s.tensor_parallel_size), gib(p.weights.bytes), gib(p.non_torch.bytes),
            gib(p.non_sampling_ranks->activation_bytes), gib(p.non_sampling_ranks->available_kv_bytes)));
      }
    }
    if (blocks_overridden) lines.push_back(override_line(p));
    const uint64_t layers = p.kv.full_layers + p.kv.sliding_layers;
    // CPU blocks: the default 4 GiB of swap space in blocks of every layer.
    lines.push_back(fmt::format("# GPU blocks: {}, # CPU blocks: {}", p.capacity.num_blocks,
                                p.kv.page_bytes && layers ? 4 * kGiB / (p.kv.page_bytes * layers) : 0));
    if (b.version.at_least(0, 6, 4)) lines.push_back(concurrency_line(p));
    return lines;
  }
  if (!b.version.at_least(0, 8, 0)) {
    lines.push_back(loading_v0);
    if (profile_oom) return lines;
    if (blocks_overridden) lines.push_back(override_line(p));
    lines.push_back(fmt::format("# GPU blocks: {}", p.capacity.num_blocks));
    if (b.version.at_least(0, 7, 1) && p.capacity.num_blocks > 0) lines.push_back(concurrency_line(p));
    return lines;
  }
  lines.push_back(fmt::format("Model loading took {:.4f} GiB", gib(p.weights.bytes)));
  if (profile_oom) return lines;
  if (p.graphs_in_budget) lines.push_back(graph_line(p.cuda_graphs.bytes));
  if (p.no_kv_cache) return lines;   // no KV cache to size: the engine skips the profile's report
  if (kv_cache_memory_bytes) {
    // Worker.determine_available_memory (vllm/v1/worker/gpu_worker.py) returns the given size
    // without profiling: this line instead of "Available KV cache memory".
    lines.push_back(fmt::format("Initial free memory {} GiB, reserved {} GiB memory for KV Cache as specified by "
                                "kv_cache_memory_bytes config and skipped memory profiling. This does not respect the "
                                "gpu_memory_utilization config.", python_gib(p.free_at_startup_bytes),
                                python_gib(*kv_cache_memory_bytes)));
  } else {
    lines.push_back(fmt::format("Available KV cache memory: {:.2f} GiB", gib(p.available_kv_bytes)));
  }
  if (!auto_fit_line.empty()) lines.push_back(auto_fit_line);
  if (blocks_overridden) lines.push_back(override_line(p));
  if (p.capacity.num_blocks > 0) {
    lines.push_back(fmt::format("GPU KV cache size: {} tokens", with_commas(p.capacity.tokens)));
    lines.push_back(concurrency_line(p));
  }
  return lines;
}

// The length vLLM multiplies by the rope scaling factor: yarn scales the original context.
uint64_t rope_scaled_base(const ModelSpec& model, uint64_t positions) {
  return model.rope_scaling_type == "yarn" && model.rope_original_max_position ? model.rope_original_max_position
                                                                               : positions;
}

}  // namespace

VllmContextLimit vllm_context_limit(const ModelSpec& model, std::optional<uint64_t> max_position_override) {
  std::map<std::string, uint64_t> keys = model.context_keys;
  // --hf-overrides rewrites the config before vLLM reads it: the override joins the other keys.
  if (max_position_override) keys["max_position_embeddings"] = *max_position_override;
  // A model not read from a config.json (GGUF, --params) has only its own context.
  if (keys.empty() && model.max_position_embeddings) keys["max_position_embeddings"] = model.max_position_embeddings;
  VllmContextLimit limit;
  for (std::string_view name : context_key_names()) {   // vLLM's order: the first smallest names it
    auto it = keys.find(std::string(name));
    if (it == keys.end() || (limit.tokens && it->second >= limit.tokens)) continue;
    limit = {it->second, it->first};
  }
  return limit;
}

uint64_t vllm_derived_max_model_len(const ModelSpec& model, std::optional<uint64_t> max_position_override) {
  uint64_t derived = vllm_context_limit(model, max_position_override).tokens;
  const std::string& type = model.rope_scaling_type;
  if (type.empty() || type == "su" || type == "longrope" || type == "llama3" ||
      model.model_type.find("gemma3") != std::string::npos) {
    return derived;
  }
  derived = rope_scaled_base(model, derived);
  // At most 2^32 tokens, the bound every other context length is held to (hostile configs).
  return static_cast<uint64_t>(std::min(static_cast<double>(derived) * model.rope_scaling_factor, 4294967296.0));
}

int quantization_min_capability(const std::string& method, const std::string& asked) {
  if (asked.find("marlin") != std::string::npos || method == "fp8" || method == "mxfp4") return 80;
  if (method.rfind("awq", 0) == 0) return 75;
  if (method == "bitsandbytes") return 70;
  if (method.rfind("gptq", 0) == 0) return 60;
  return 0;
}

// CUDA's total sits below nvidia-smi's by the driver's reserve: 0.3-0.9 GiB on the cards the
// catalog has both figures for.
constexpr uint64_t kCudaTotalGapMax = kGiB * 9 / 10;

uint64_t cuda_total_at_least(const GpuSpec& gpu) {
  if (gpu.cuda_total_bytes) return *gpu.cuda_total_bytes;
  return gpu.total_bytes > kCudaTotalGapMax ? gpu.total_bytes - kCudaTotalGapMax : 0;
}

ServeTarget serve_target(const GpuSpec& gpu) {
  ServeTarget t;
  t.name = gpu.name;
  t.bf16 = gpu.bf16;
  t.fp8 = gpu.fp8;
  t.nvlink = gpu.nvlink;
  t.tensor_parallel_domain = gpu.tensor_parallel_domain;
  t.from_catalog = true;
  t.vendor = gpu.vendor;
  t.architecture = gpu.architecture;
  t.nvidia_smi_total_bytes = gpu.total_bytes;
  if (gpu.cuda_total_bytes) {
    t.total_bytes = *gpu.cuda_total_bytes;
    t.total_source = "catalog: total as CUDA reports it (" + gpu.cuda_total_source + ")";
  } else {
    t.total_bytes = gpu.total_bytes;
    t.total_source = "catalog: nvidia-smi total; CUDA usually reports 0.3-0.9 GiB less, so the "
                     "budget may be slightly smaller than shown";
  }
  return t;
}

ServeTarget serve_target_memory(uint64_t total_bytes) {
  ServeTarget t;
  t.name = "custom";
  t.total_bytes = total_bytes;
  t.total_source = "--memory (taken as the total CUDA reports, vLLM's total_gpu_memory)";
  return t;
}

// vLLM's own upper figure for captured CUDA graphs (V0's capture_model: "CUDA graphs can take
// additional 1~3 GiB memory per GPU").
constexpr uint64_t kGraphCaptureUpperBytes = 3 * kGiB;

Result<ServePrediction> predict_vllm_startup(const ServeInputs& in) {
  const ServeConfig& c = in.config;
  // The model as vLLM loads it: a rope scaling given with --hf-overrides (or --rope-scaling)
  // replaces the config's, and with it the derived max_model_len (Qwen's YaRN to 131072).
  ModelSpec overridden;
  if (c.rope_scaling_override) {
    overridden = in.model;
    apply_rope_scaling_json(*c.rope_scaling_override, overridden);
  }
  const ModelSpec& model = c.rope_scaling_override ? overridden : in.model;
  // T5 and mT5 (oomdoc's encoder-decoder families) have no vLLM implementation: its model registry
  // (vllm/model_executor/models/registry.py) lists no T5ForConditionalGeneration, so vLLM stops at
  // "Model architectures [...] are not supported"; a decoder-style sizing of them would mislead.
  if (model.is_encoder_decoder) {
    return Error{fmt::format("{} is an encoder-decoder model ({}): vLLM has no implementation of it (its model "
                             "registry lists no T5-style architecture), so it cannot be served or sized; "
                             "`oomdoc estimate --task inference` sizes it under Hugging Face transformers",
                             model.id, model.model_type)};
  }
  // vLLM's ModelConfig._init_multimodal_config refuses multimodal limits for a text-only model
  // (v0.6 to v0.10 at least; e.g. vllm-project/vllm#21120's log).
  if (!c.limit_mm_per_prompt.empty() && !model.has_vision_tower && !model.is_multimodal) {
    return Error{fmt::format("--limit-mm-per-prompt on {}, a text-only model: vLLM refuses it: \"`limit_mm_per_prompt` "
                             "is only supported for multimodal models.\"; drop the flag", model.id)};
  }
  ServePrediction p;
  auto env = [&](const char* name) -> std::optional<std::string> {
    auto it = c.env.find(name);
    if (it == c.env.end()) return std::nullopt;
    return it->second;
  };
  // V1 ran no encoder-only model before v0.10.1 (vllm-project/vllm#21270): vLLM fell back to V0 for them.
  const bool encoder_only_on_v0 = model.is_encoder_only && in.version.given && !in.version.at_least(0, 10, 1) &&
                                  !env("VLLM_USE_V1");
  p.behavior = vllm_behavior(in.version, encoder_only_on_v0 ? std::optional<std::string>("0") : env("VLLM_USE_V1"),
                             env("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"));
  if (encoder_only_on_v0) {   // the engine is vLLM's choice here, not a VLLM_USE_V1 the user set
    auto& notes = p.behavior.notes;
    notes.erase(std::remove_if(notes.begin(), notes.end(),
                               [](const std::string& n) { return n.rfind("VLLM_USE_V1=0 ", 0) == 0; }),
                notes.end());
  }
  // vLLM chose V0 by itself (not a VLLM_USE_V1 the user set): its behaviour, and why.
  auto fall_back_to_v0 = [&](std::string why) {
    p.behavior = vllm_behavior(in.version, std::string("0"), env("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"));
    std::erase_if(p.behavior.notes, [](const std::string& n) { return n.rfind("VLLM_USE_V1=", 0) == 0; });
    p.behavior.notes.push_back(std::move(why));
  };
  // v0.8-v0.10 fall back to V0 for what V1 did not run yet (older GPUs, some KV dtypes, fp32).
  if (!encoder_only_on_v0 && env("VLLM_USE_V1").value_or("") != "0") {
    if (auto feature = v1_oracle_fallback(in.version, in.target.architecture, to_lower(c.kv_cache_dtype.value_or("auto")),
                                          to_lower(c.dtype.value_or("auto")))) {
      if (env("VLLM_USE_V1")) {
        return Error{fmt::format("VLLM_USE_V1=1 with {}: vLLM {} refuses it: \"VLLM_USE_V1=1 is not supported with {}.\"",
                                 *feature, in.version.text, *feature)};
      }
      fall_back_to_v0(fmt::format("V0 engine: vLLM {} logs \"{} is not supported by the V1 Engine. Falling back "
                                  "to V0.\" (EngineArgs._is_v1_supported_oracle)", in.version.text, *feature));
    }
  }
  // Speculative decoding can decide the engine (V1 in v0.8-v0.10 fell back to V0 for draft models).
  const std::optional<SpeculativeChoice> speculative = speculative_choice(c);
  if (speculative) {
    auto engine = speculative_engine(*speculative, c, in.version, env("VLLM_USE_V1"));
    if (!engine) return engine.error();
    if (engine->falls_back_to_v0 && p.behavior.v1_engine) fall_back_to_v0(engine->note);
  }
  const VllmBehavior& b = p.behavior;
  p.assumptions = b.notes;
  p.warnings = b.warnings;
  // DeBERTa-v2 and ViT are not in vLLM's registry either; sized as an encoder they serve, but say so.
  if (model.model_type == "deberta-v2" || model.model_type == "vit") {
    p.warnings.push_back(fmt::format("vLLM's model registry lists no {} architecture: vLLM would refuse {} (\"not "
                                     "supported\"); the figures size it as if it served like BERT",
                                     model.model_type == "vit" ? "ViT" : "DeBERTa-v2", model.id));
  }
  // The image runs the vLLM it was built with; a --vllm-version that says otherwise is probably a
  // slip, and the two can size the cache differently (defaults, graph accounting).
  if (c.image_tag) {
    auto tagged = parse_vllm_version(*c.image_tag);
    if (tagged && tagged->given) {
      const bool same = std::tie(tagged->major, tagged->minor, tagged->patch) ==
                        std::tie(in.version.major, in.version.minor, in.version.patch);
      if (!in.version.given || !same) {
        p.warnings.push_back(fmt::format("the image vllm/vllm-openai:{} runs vLLM {}.{}.{}, but --vllm-version {} was "
                                         "given: sized for {}", *c.image_tag, tagged->major, tagged->minor,
                                         tagged->patch, in.version.text, in.version.text));
      }
    }
  }
  if (!in.model_note.empty()) p.assumptions.push_back(in.model_note);
  ServeSettings& s = p.settings;

  if (model.num_layers == 0 || model.hidden_size == 0) {
    return Error{fmt::format("{}: the model's config gives no layer count or hidden size", model.id)};
  }
  // Bounds well above any real model keep every product below 2^64 (configs can be hostile).
  struct Bound {
    const char* field;
    uint64_t value;
    uint64_t limit;
  };
  for (const Bound& bound : {Bound{"num_hidden_layers", model.num_layers, 10000},
                             Bound{"hidden_size", model.hidden_size, 1u << 20},
                             Bound{"intermediate_size", model.intermediate_size, 1u << 22},
                             Bound{"moe_intermediate_size", model.moe_intermediate_size, 1u << 22},
                             Bound{"vocab_size", model.vocab_size, 1u << 24},
                             Bound{"num_attention_heads", model.num_attention_heads, 1u << 16},
                             Bound{"num_key_value_heads", model.num_kv_heads, 1u << 16},
                             Bound{"head_dim", model.head_dim, 1u << 16},
                             Bound{"kv_lora_rank", model.kv_lora_rank + model.qk_rope_head_dim, 1u << 16},
                             Bound{"num_experts_per_tok", model.experts_per_token, 1u << 12},
                             Bound{"max_position_embeddings", model.max_position_embeddings, 1ull << 32},
                             Bound{"sliding_window", model.sliding_window.value_or(0), 1ull << 32}}) {
    if (bound.value > bound.limit) {
      return Error{fmt::format("{}: {} = {} is beyond any real model (at most {})", model.id, bound.field,
                               bound.value, bound.limit)};
    }
  }
  if (in.target.total_bytes == 0) return Error{"no GPU memory given: pass --gpu NAME or --memory SIZE"};
  if (in.target.total_bytes > (1ull << 50)) {
    return Error{fmt::format("GPU memory of {} bytes is beyond any GPU (1 PiB at most)", in.target.total_bytes)};
  }
  for (const auto& o : {in.overrides.weights_bytes, in.overrides.activation_bytes,
                        in.overrides.non_torch_bytes, in.overrides.cuda_graph_bytes}) {
    if (o && *o > (1ull << 50)) return Error{"a size override is beyond any GPU (1 PiB at most)"};
  }

  // vLLM's CUDA kernels are built for compute capability 7.0 (Volta) and newer.
  if (const int capability = min_compute_capability(in.target.architecture);
      in.target.vendor == "nvidia" && capability && capability < 70) {
    return Error{fmt::format("{} is a Pascal GPU (compute capability 6.x): vLLM needs compute capability 7.0 or newer "
                             "(Volta, Turing, Ampere and later); llama.cpp or transformers run there",
                             in.target.name)};
  }
  // --- Parallelism checks vLLM makes before anything is loaded.
  s.tensor_parallel_size = c.tensor_parallel_size;
  s.pipeline_parallel_size = c.pipeline_parallel_size;
  s.data_parallel_size = c.data_parallel_size;
  if (model.num_attention_heads && model.num_attention_heads % s.tensor_parallel_size != 0) {
    return Error{fmt::format("Total number of attention heads ({}) must be divisible by tensor "
                             "parallel size ({}).", model.num_attention_heads, s.tensor_parallel_size)};
  }
  // QKVParallelLinear: KV heads are split across the ranks, or replicated when there are fewer
  // heads than ranks; either way one must divide the other (vllm/distributed/utils.py divide()).
  const uint64_t kv_heads = model.num_kv_heads, tp_ranks = s.tensor_parallel_size;
  if (model.attention != AttentionKind::kMultiLatent && kv_heads && kv_heads != model.num_attention_heads &&
      (tp_ranks >= kv_heads ? tp_ranks % kv_heads : kv_heads % tp_ranks) != 0) {
    return Error{fmt::format("--tensor-parallel-size {}: the model's {} KV heads can be neither split nor replicated "
                             "evenly across {} ranks; vLLM stops with \"{} is not divisible by {}\" "
                             "(QKVParallelLinear)", tp_ranks, kv_heads, tp_ranks, tp_ranks >= kv_heads ? tp_ranks : kv_heads,
                             tp_ranks >= kv_heads ? kv_heads : tp_ranks)};
  }
  // Flags older releases do not have.
  if (s.pipeline_parallel_size > 1 && !b.pipeline_parallel) {
    return Error{fmt::format("--pipeline-parallel-size {}: vLLM {} refuses it: \"Pipeline parallelism is not supported "
                             "yet.\" (ParallelConfig; it came in v0.5.1)", s.pipeline_parallel_size, b.version.text)};
  }
  if (s.pipeline_parallel_size > 1 && c.launcher == "LLM(...)" && !b.v1_engine) {
    return Error{fmt::format("pipeline_parallel_size={}: the V0 engine behind LLM(...) fails at its first step: "
                             "\"Pipeline parallelism is only supported through AsyncLLMEngine as performance will be "
                             "severely degraded otherwise.\" (serve it with vllm serve, or use tensor_parallel_size)",
                             s.pipeline_parallel_size)};
  }
  if (c.chunked_prefill_value_given && !b.chunked_prefill_takes_value) {
    return Error{fmt::format("--enable-chunked-prefill {}: {} takes no value after the switch (a "
                             "BooleanOptionalAction from v0.10); argparse would exit with 'unrecognized arguments' "
                             "(use --enable-chunked-prefill or --no-enable-chunked-prefill)",
                             c.enable_chunked_prefill.value_or(false) ? "True" : "False",
                             b.version.given ? "vLLM " + b.version.text : std::string("a current vLLM"))};
  }
  if (c.enforce_eager && !b.cuda_graphs) {
    return Error{fmt::format("--enforce-eager: vLLM {} has no such flag (it came with CUDA graphs in v0.2.6, "
                             "vllm-project/vllm#1926; the model already runs eagerly); argparse would exit with "
                             "'unrecognized arguments'", b.version.text)};
  }
  if (c.cpu_offload_gb > 0 && !b.cpu_offload) {
    return Error{fmt::format("--cpu-offload-gb: vLLM {} has no such flag (it came in v0.5.3, vllm-project/vllm#6496); "
                             "argparse would exit with 'unrecognized arguments'", b.version.text)};
  }
  if (s.pipeline_parallel_size > model.num_layers) {
    return Error{fmt::format("--pipeline-parallel-size {} is larger than the model's {} layers",
                             s.pipeline_parallel_size, model.num_layers)};
  }
  // argparse's choices for --block-size (VllmBehavior::block_sizes).
  if (const uint64_t block = c.block_size.value_or(kVllmDefaultBlockSize);
      !b.block_sizes.empty() && std::find(b.block_sizes.begin(), b.block_sizes.end(), block) == b.block_sizes.end()) {
    std::string choices;
    for (uint64_t size : b.block_sizes) choices += (choices.empty() ? "" : ", ") + std::to_string(size);
    return Error{fmt::format("--block-size {}: {} refuses it: \"argument --block-size: invalid choice: {} "
                             "(choose from {})\"", block,
                             b.version.given ? "vLLM " + b.version.text : "current vLLM", block, choices)};
  }
  // Current vLLM takes any positive --block-size and looks for an attention backend that pages by it:
  // on CUDA every one (FlashAttention, FlashInfer, Triton, FlexAttention) takes multiples of 16
  // (MultipleOf(16), vllm-project/vllm#36241; a size under 16 is refused by each: #41363). MLA
  // models have backends of their own, not checked here.
  if (b.block_sizes.empty() && c.block_size && *c.block_size % 16 != 0 && in.target.vendor != "amd" &&
      model.attention != AttentionKind::kMultiLatent) {
    return Error{fmt::format("--block-size {}: {} refuses it: no CUDA attention backend pages by {} tokens (\"No valid "
                             "attention backend found ... block_size not supported\"); use a multiple of 16",
                             *c.block_size, b.version.given ? "vLLM " + b.version.text : "current vLLM", *c.block_size)};
  }
  // Models older releases cannot load (after argparse's refusals above, as vLLM parses its flags
  // before it reads the config): Gemma 2 came with v0.5.1 (vllm-project/vllm#5908, merged
  // 2024-06-27), Llama 3.1's "llama3" rope scaling with v0.5.3 (its release notes: "Llama 3.1 support").
  if (b.version.given && model.model_type == "gemma2" && !b.version.at_least(0, 5, 1)) {
    return Error{fmt::format("{}: vLLM {} has no Gemma 2 (Gemma2ForCausalLM came in v0.5.1, vllm-project/vllm#5908): "
                             "it stops with \"Model architectures ['Gemma2ForCausalLM'] are not supported for now\"",
                             model.id, b.version.text)};
  }
  if (b.version.given && model.rope_scaling_type == "llama3" && !b.version.at_least(0, 5, 3)) {
    return Error{fmt::format("{}: vLLM {} cannot read its rope_scaling (rope_type \"llama3\", Llama 3.1's, came in "
                             "v0.5.3 with Llama 3.1 support); it fails while loading the config", model.id, b.version.text)};
  }
  // A TP group wider than one NVLink domain (8 GPUs in an HGX server) runs every layer's
  // all-reduce over the network; vLLM's distributed-serving docs: TP = GPUs per node, PP = nodes.
  const uint64_t nvlink_domain = in.target.tensor_parallel_domain;
  if (in.target.from_catalog && s.tensor_parallel_size > nvlink_domain) {
    p.warnings.push_back(fmt::format(
        "--tensor-parallel-size {} spans more than one {}-GPU {} of {}: every layer's all-reduce crosses "
        "nodes; vLLM's docs set TP to the GPUs per node and PP to the nodes (--tensor-parallel-size {} "
        "--pipeline-parallel-size {}); memory per GPU is sized as given",
        s.tensor_parallel_size, nvlink_domain, in.target.nvlink ? "NVLink domain" : "server", in.target.name, nvlink_domain,
        (s.tensor_parallel_size + nvlink_domain - 1) / nvlink_domain * s.pipeline_parallel_size));
  }

  // --- max_model_len: the model's derived context unless the user overrides it.
  s.model_context = vllm_derived_max_model_len(model, c.max_position_override);
  std::string context_key = vllm_context_limit(model, c.max_position_override).key;
  if (b.gemma2_context_capped_to_window && model.model_type == "gemma2" && model.sliding_window &&
      *model.sliding_window < s.model_context) {
    // _get_and_verify_max_len with the window disabled: the window bounds the length.
    s.model_context = *model.sliding_window;
    context_key = "sliding_window";
    p.warnings.push_back(fmt::format(
        "vLLM {} serves Gemma 2 without its sliding window and caps the length at the window: \"Gemma 2 uses sliding "
        "window attention for every odd layer, which is currently not supported by vLLM. Disabling sliding window and "
        "capping the max length to the sliding window size ({})\" (full context from v0.6.5)",
        b.version.text, *model.sliding_window));
  }
  if (c.rope_scaling_override) {
    p.assumptions.push_back(fmt::format("rope scaling from the command line ({} x{:g}): vLLM's derived max_model_len is {}",
                                        model.rope_scaling_type.empty() ? "none" : model.rope_scaling_type,
                                        model.rope_scaling_factor, s.model_context));
  }
  if (c.max_model_len) {
    s.max_model_len = *c.max_model_len;
    s.max_model_len_source = c.launcher == "LLM(...)" ? "LLM's max_model_len" : "--max-model-len";
    // vLLM lets a length up to the config's model_max_length through (Command-R keeps its longer
    // context there); above both it refuses unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.
    const auto model_max_length = model.context_keys.find("model_max_length");
    const bool within_model_max_length =
        model_max_length != model.context_keys.end() && s.max_model_len <= model_max_length->second;
    if (s.model_context && s.max_model_len > s.model_context && !within_model_max_length &&
        env("VLLM_ALLOW_LONG_MAX_MODEL_LEN").value_or("0") != "1") {
      return Error{fmt::format(
          "--max-model-len {} is above {}'s context of {} tokens; vLLM refuses it: \"User-specified "
          "max_model_len ({}) is greater than the derived max_model_len ({}={} "
          "or model_max_length={} in model's config.json). This may lead to incorrect model "
          "outputs or CUDA errors. To allow overriding this maximum, set the env var "
          "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\"",
          s.max_model_len, model.id, s.model_context, s.max_model_len, context_key, s.model_context,
          model_max_length == model.context_keys.end() ? std::string("None")
                                                        : std::to_string(model_max_length->second))};
    }
  } else {
    if (s.model_context == 0) {
      // vLLM's fallback when the config has none of its context keys (_get_and_verify_max_len).
      s.model_context = kVllmFallbackMaxModelLen;
      p.warnings.push_back(fmt::format(
          "{}'s config gives none of the context-length keys vLLM reads ({}): vLLM assumes {} tokens, as sized "
          "here; pass --max-model-len if the model was trained for another length (vLLM takes it as given then)",
          model.id, fmt::join(context_key_names(), ", "), kVllmFallbackMaxModelLen));
    }
    if (c.max_model_len_auto && !b.v1_engine) {
      return Error{"--max-model-len -1 (auto-fit) is a V1 engine feature; this vLLM version runs V0: "
                   "give a length"};
    }
    // Auto-fit arrived with vllm-project/vllm#29431 (merged 2025-11-25, first in v0.12.0); before
    // it argparse refuses "auto", and -1 is no length.
    if (c.max_model_len_auto && b.version.given && !b.version.at_least(0, 12, 0)) {
      return Error{fmt::format("--max-model-len auto/-1: vLLM {} has no auto-fit (it came in v0.12.0, "
                               "vllm-project/vllm#29431); give a length", b.version.text)};
    }
    s.max_model_len = s.model_context;
    s.max_model_len_source = c.max_model_len_auto ? "auto-fit" : "model context";
    const uint64_t positions = vllm_context_limit(model, c.max_position_override).tokens;
    if (!c.max_model_len_auto && model.rope_scaling_type == "longrope" && model.rope_original_max_position &&
        model.rope_original_max_position < s.model_context && b.longrope_original_context_default) {
      // LongRoPE picks its short or long factors once, from max_model_len: the default is the
      // original context, where the short factors serve; a longer --max-model-len switches every
      // request to the long ones.
      s.max_model_len = model.rope_original_max_position;
      s.max_model_len_source = fmt::format("model context: LongRoPE's original_max_position_embeddings (from vLLM "
                                           "0.11.1; --max-model-len up to {} uses the long factors)", s.model_context);
    } else if (positions == 0) {
      s.max_model_len_source += ": vLLM's fallback (no context key in the config)";
    } else if (context_key == "sliding_window") {
      s.max_model_len_source += fmt::format(": {} positions capped at the {}-token sliding window", positions,
                                            s.model_context);
    } else if (s.model_context != positions) {
      s.max_model_len_source += fmt::format(": {} positions x {} rope scaling {:g}", rope_scaled_base(model, positions),
                                            model.rope_scaling_type, model.rope_scaling_factor);
    }
  }

  // --- Settings and their defaults for this version.
  s.utilization_is_default = !c.gpu_memory_utilization.has_value();
  s.gpu_memory_utilization = c.gpu_memory_utilization.value_or(b.default_gpu_memory_utilization);
  if (s.utilization_is_default) {
    p.assumptions.push_back(fmt::format(
        "gpu_memory_utilization {:.2f}: the default of {} ({:g} from v0.21, {:g} before)",
        s.gpu_memory_utilization, b.version.given ? "vLLM " + b.version.text : "current vLLM",
        kVllmDefaultGpuMemoryUtilization, kVllmDefaultGpuMemoryUtilizationBeforeV021));
  }
  s.block_size = c.block_size.value_or(kVllmDefaultBlockSize);
  // The cache vLLM lays out for an MLA model (the version table in VllmBehavior): the latent, or
  // per-head K and V, which VLLM_MLA_DISABLE=1 also brings back where the latent cache exists.
  ModelSpec kv_model = model;
  if (model.attention == AttentionKind::kMultiLatent) {
    // vLLM reads the variable as a boolean: "1"/"true" turn MLA off.
    const std::string mla_env = to_lower(env("VLLM_MLA_DISABLE").value_or(""));
    const bool mla_disabled = b.mla_latent_cache && (mla_env == "1" || mla_env == "true");
    if (!b.mla_latent_cache || mla_disabled) {
      const bool padded = b.mla_heads_padded_to_256;
      kv_model.attention = AttentionKind::kMultiHead;
      kv_model.num_kv_heads = model.num_attention_heads;
      kv_model.head_dim = padded ? 256 : model.qk_nope_head_dim + model.qk_rope_head_dim;
      const uint64_t heads_per_gpu = std::max<uint64_t>(1, model.num_attention_heads / std::max<uint64_t>(s.tensor_parallel_size, 1));
      p.assumptions.push_back(fmt::format(
          "{}: no MLA cache; K and V are cached per head ({} heads per GPU x {}{}), {:.1f}x the latent each GPU would hold",
          mla_disabled ? "VLLM_MLA_DISABLE=" + *env("VLLM_MLA_DISABLE") : fmt::format("vLLM {} predates MLA (v0.7.1)", b.version.text),
          heads_per_gpu, kv_model.head_dim, padded ? ", padded to 256" : "",
          2.0 * static_cast<double>(heads_per_gpu * kv_model.head_dim) /
              static_cast<double>(model.kv_lora_rank + model.qk_rope_head_dim)));
    }
  }
  // MLA backends page the latent cache in their own block sizes; CudaPlatform.check_and_update_config
  // forces them when no attention backend is chosen by hand: FlashMLA on Hopper (from v0.7.3,
  // vllm-project/vllm#13747) "Forcing kv cache block size to 64", CUTLASS MLA on datacenter
  // Blackwell (SM100: B200, GB200, B300; the default from v0.10.1, vllm-project/vllm#22738) to 128.
  if (kv_model.attention == AttentionKind::kMultiLatent && !env("VLLM_ATTENTION_BACKEND") &&
      !(c.block_size && b.user_block_size_kept)) {
    const std::string& gpu = in.target.name;
    const bool sm100 = in.target.architecture == "Blackwell" &&
                       (gpu.find("B200") != std::string::npos || gpu.find("B300") != std::string::npos);
    uint64_t forced = 0;
    if (in.target.architecture == "Hopper" && (!b.version.given || b.version.at_least(0, 7, 3))) forced = 64;
    if (sm100 && (!b.version.given || b.version.at_least(0, 10, 1))) forced = 128;
    if (forced && s.block_size % forced != 0) {
      p.assumptions.push_back(fmt::format("block size {} for MLA: vLLM logs \"Forcing kv cache block size to {} for {} "
                                          "backend\" on this GPU", forced, forced, forced == 64 ? "FlashMLA" : "CUTLASS_MLA"));
      s.block_size = forced;
    }
  }
  s.kv_cache_dtype = c.kv_cache_dtype.value_or("auto");
  // resolve_kv_cache_dtype_string (vllm/utils/torch_utils.py): "auto" takes a ModelOpt
  // checkpoint's own KV cache quantization.
  if (s.kv_cache_dtype == "auto" && in.checkpoint_kv_cache_dtype) {
    s.kv_cache_dtype = *in.checkpoint_kv_cache_dtype;
    p.assumptions.push_back(fmt::format(
        "KV cache {}: --kv-cache-dtype auto takes the checkpoint's kv_cache_quant_algo ({}); pass --kv-cache-dtype "
        "bfloat16 for a 16-bit cache", s.kv_cache_dtype, in.checkpoint_kv_cache_source));
  }
  s.enforce_eager = c.enforce_eager;
  if (!b.cuda_graphs) {
    s.enforce_eager = true;
    p.assumptions.push_back(fmt::format("vLLM {} captures no CUDA graphs (they came in v0.2.6, vllm-project/vllm#1926)",
                                        b.version.text));
  }
  // vLLM refuses a --quantization that contradicts the checkpoint's own (Marlin kernels of the
  // same format are allowed).
  auto base_method = [](std::string m) {
    for (const char* suffix : {"_marlin", "-marlin"}) {
      std::string_view sv(suffix);
      if (m.size() > sv.size() && m.compare(m.size() - sv.size(), sv.size(), sv) == 0) m.resize(m.size() - sv.size());
    }
    return m;
  };
  if (c.quantization && !model.quantization.empty() &&
      base_method(*c.quantization) != base_method(model.quantization)) {
    return Error{fmt::format("Quantization method specified in the model config ({}) does not match the "
                             "quantization method specified in the `quantization` argument ({}).",
                             model.quantization, *c.quantization)};
  }
  // Methods that read a checkpoint quantized offline (vLLM looks for its quantization config and
  // fails without one: "Cannot find the config file for awq"); fp8 and bitsandbytes quantize at load.
  // A quantized checkpoint's name over a config without quantization_config (the base model's):
  // the format the name says (model/quantized_names.h).
  const auto named = model.quantization.empty() ? split_quantized_name(c.model) : std::nullopt;
  const std::string named_method = named ? std::string(named->format->method) : std::string();
  if (c.quantization && model.quantization.empty()) {
    const std::string method = base_method(to_lower(*c.quantization));
    const bool prequantized = quantized_offline(to_lower(*c.quantization));
    if (named && base_method(named_method) != method &&
        !(method.rfind("compressed", 0) == 0 || named_method.rfind("compressed", 0) == 0)) {
      // The checkpoint the name says is quantized another way: its quantization_config decides, and
      // vLLM refuses any other --quantization, one that quantizes at load (fp8, bitsandbytes) too
      // (ModelConfig._verify_quantization). compressed-tensors can hold either format: not judged.
      return Error{fmt::format("--quantization {} on '{}', quantized with {} by its name (\"{}\"): vLLM refuses it: "
                               "\"Quantization method specified in the model config ({}) does not match the "
                               "quantization method specified in the `quantization` argument ({}).\"",
                               *c.quantization, c.model, named_method, named->format->suffix, named_method,
                               *c.quantization)};
    }
    if (prequantized && !(named && base_method(named_method) == method)) {
      return Error{fmt::format("--quantization {} needs a checkpoint quantized with {}: {}'s config has no "
                               "quantization_config (vLLM: \"Cannot find the config file for {}\"); use a checkpoint "
                               "quantized that way, or --quantization fp8 / bitsandbytes, which quantize at load",
                               *c.quantization, method, model.id, method)};
    }
  }
  // bfloat16 below compute capability 8.0: refused when asked for, and (before vLLM's float16
  // fallback) also when "auto" picks a bf16 checkpoint's dtype. vLLM's words (_check_if_gpu_supports_dtype).
  const std::string asked_dtype = to_lower(c.dtype.value_or("auto"));
  const std::string config_dtype = to_lower(model.torch_dtype);
  const std::string& mt = model.model_type;
  const bool gemma = mt == "gemma2" || mt == "gemma3" || mt == "gemma3_text";
  // "auto" picks bfloat16 for a bf16 checkpoint, and for a float32 Gemma 2/3 one.
  // (A config without torch_dtype is float32 to vLLM: auto serves it in float16 there.)
  const bool auto_bf16 = asked_dtype == "auto" && (config_dtype == "bfloat16" || (gemma && config_dtype == "float32"));
  if (!in.target.bf16 && (asked_dtype == "bfloat16" || (auto_bf16 && !b.auto_float16_without_bf16))) {
    const int capability = min_compute_capability(in.target.architecture);
    return Error{fmt::format(
        "--dtype {} on {}{}: vLLM refuses it: \"Bfloat16 is only supported on GPUs with compute capability of at "
        "least 8.0. Your {} GPU {}. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for "
        "example: --dtype=half.\"", asked_dtype, in.target.name,
        asked_dtype == "auto" ? fmt::format(" (the checkpoint is bfloat16; vLLM {} has no float16 fallback)",
                                            in.version.text)
                              : "",
        in.target.name,
        capability ? fmt::format("has compute capability {}.{}", capability / 10, capability % 10)
                   : std::string("does not have a compute capability"))};
  }
  // Models vLLM refuses float16 for; "auto" on a GPU without bfloat16 then falls back to float32
  // (_resolve_auto_dtype).
  std::optional<std::string> dtype_flag = c.dtype;
  const bool no_float16 = b.float16_refused_for_unstable_models && (gemma || mt == "glm4" || mt == "plamo2");
  if (no_float16 && (asked_dtype == "half" || asked_dtype == "float16")) {
    return Error{fmt::format("--dtype {} for {}: vLLM refuses it: \"The model type '{}' does not support float16. "
                             "Reason: Numerical instability. Please use bfloat16 or float32 instead.\"",
                             asked_dtype, model.id.empty() ? mt : model.id, mt)};
  }
  if (no_float16 && asked_dtype == "auto" && !in.target.bf16) {
    dtype_flag = "float32";
    p.assumptions.push_back(fmt::format("dtype float32: {} has no bfloat16 and vLLM refuses float16 for {} "
                                        "(numerical instability), so auto falls back to float32",
                                        in.target.name, mt));
  }
  std::optional<std::string> quantization = c.quantization;
  ModelSpec named_format;  // the model with the bits and groups its name says
  const bool use_named = named && (!quantization || base_method(to_lower(*quantization)) == base_method(named_method));
  if (use_named) {
    named_format = model;
    named_format.quantization_bits = named->format->bits;
    named_format.quantization_group_size = named->format->group_size;
  }
  if (!quantization && named) {
    quantization = named_method;
    p.assumptions.push_back(fmt::format(
        "'{}' ends in \"{}\" but its config has no quantization_config: weights sized as {} {}-bit, {}",
        c.model, named->format->suffix, named_method, named->format->bits,
        named->format->group_size ? fmt::format("groups of {}", named->format->group_size) : "per channel"));
  }
  auto format = weight_format(use_named ? named_format : model, dtype_flag, quantization, in.target.bf16);
  if (!format) return format.error();
  s.weights = format.value();
  if (const uint64_t kept = unquantized_linear_params(model, 0, model.num_layers);
      kept > 0 && static_cast<double>(s.weights.dense_bytes) > s.weights.linear_bytes && !s.weights.experts_only) {
    s.weights.description += fmt::format(", {} weights of the modules the checkpoint keeps in 16 bits at {} B",
                                         format_count(kept), s.weights.dense_bytes);
  }
  // VllmConfig._get_quantization_config refuses a method below its kernels' compute capability
  // (each QuantizationConfig.get_min_capability): fp8, bitsandbytes, Marlin kernels and AWQ's own.
  if (!s.weights.method.empty()) {
    const int capability = min_compute_capability(in.target.architecture);
    const std::string asked = c.quantization ? to_lower(*c.quantization) : s.weights.method;
    const std::string method = to_lower(s.weights.method);
    const int needed = quantization_min_capability(method, asked);
    if (capability > 0 && capability < needed && (capability == 70 || capability == 75 || capability == 60)) {
      return Error{fmt::format("{} weights on {}: vLLM refuses them: \"The quantization method {} is not supported "
                               "for the current GPU. Minimum capability: {}. Current capability: {}.\"",
                               asked, in.target.name, asked, needed, capability)};
    }
  }
  apply_scheduler_defaults(in, b, s);
  if (b.always_chunked_prefill && c.enable_chunked_prefill == false && !in.model.is_encoder_only) {
    p.warnings.push_back(fmt::format("--no-enable-chunked-prefill has no effect on {}: its V1 engine always chunks "
                                     "prefills (\"V1 always uses chunked prefills\"; the flag is respected from "
                                     "v0.11.1), so the profile run is {} tokens",
                                     b.version.given ? "vLLM " + b.version.text : std::string("this vLLM"),
                                     s.max_num_batched_tokens));
  }
  // Launches vLLM refuses before loading anything. SchedulerConfig._verify_args (vllm/config.py;
  // vllm/config/scheduler.py in current releases): without chunked prefill one batch must hold a
  // whole prompt.
  if (!s.chunked_prefill && s.max_num_batched_tokens < s.max_model_len) {
    return Error{fmt::format(
        "--max-num-batched-tokens {} with --max-model-len {} and chunked prefill off: vLLM refuses it: "
        "\"max_num_batched_tokens ({}) is smaller than max_model_len ({}). This effectively limits the "
        "maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. "
        "Please increase max_num_batched_tokens or decrease max_model_len.\"",
        s.max_num_batched_tokens, s.max_model_len, s.max_num_batched_tokens, s.max_model_len)};
  }
  // Every step schedules at least one token per running sequence (SchedulerConfig._verify_args).
  if (s.max_num_batched_tokens < s.max_num_seqs) {
    return Error{fmt::format(
        "--max-num-batched-tokens {} below --max-num-seqs {}{}: vLLM refuses it: \"max_num_batched_tokens ({}) must "
        "be greater than or equal to max_num_seqs ({}).\"", s.max_num_batched_tokens, s.max_num_seqs,
        c.max_num_seqs ? "" : " (this version's default for the GPU)", s.max_num_batched_tokens, s.max_num_seqs)};
  }
  uint64_t act_bytes = s.weights.dense_bytes;
  auto kv_storage = kv_cache_storage(s.kv_cache_dtype, s.weights.dense_bytes);
  if (!kv_storage) return kv_storage.error();
  // V0's CacheEngine pads MLA latent entries to 256 bytes on CUDA unless VLLM_CUDA_MEM_ALIGN_KV_CACHE
  // is off (vllm/worker/cache_engine.py, _align_cache; VllmBehavior says in which versions); V1's
  // MLA pages are unpadded.
  const std::string align_env = to_lower(env("VLLM_CUDA_MEM_ALIGN_KV_CACHE").value_or("1"));
  const bool align_latent = b.mla_entries_aligned_256 && !b.v1_engine && in.target.vendor == "nvidia" &&
                            kv_model.attention == AttentionKind::kMultiLatent && align_env != "0" &&
                            align_env != "false";
  if (speculative) {
    SpeculativeInputs spec;
    spec.choice = *speculative;
    spec.target = &model;
    spec.config = &c;
    spec.draft = in.draft_model ? &*in.draft_model : nullptr;
    spec.draft_note = in.draft_model_note;
    spec.target_mtp_layers = in.mtp_layers;
    spec.draft_vocab_size = in.draft_vocab_size;
    spec.behavior = b;
    spec.tensor_parallel_size = s.tensor_parallel_size;
    spec.pipeline_parallel_size = s.pipeline_parallel_size;
    spec.target_format = s.weights;
    spec.kv_storage = *kv_storage;
    spec.block_size = s.block_size;
    spec.gpu_has_bf16 = in.target.bf16;
    auto sized = size_speculative_decoding(spec);
    if (!sized) return sized.error();
    p.speculative = std::move(sized.value());
  }

  if (c.config_file) {
    p.assumptions.push_back(fmt::format("settings read from --config {}; the command line's own flags override them, as "
                                        "in vLLM", *c.config_file));
  }
  // --- Budget: a share of the total CUDA reports, measured after the CUDA context exists.
  p.total_bytes = in.target.total_bytes;
  p.budget_bytes = static_cast<uint64_t>(static_cast<double>(p.total_bytes) * s.gpu_memory_utilization);
  p.context_bytes = cuda_context_bytes();  // vLLM runs current PyTorch: lazy module loading
  p.free_at_startup_bytes = p.total_bytes > p.context_bytes ? p.total_bytes - p.context_bytes : 0;
  p.assumptions.push_back(fmt::format(
      "CUDA context {:.2f} GiB per GPU and nothing else running on it", gib(p.context_bytes)));

  // --- Per pipeline stage: weights, KV layout, blocks; the stage with the fewest blocks binds.
  // VLLM_PP_LAYER_PARTITION places the layers by hand (get_pp_indices in vllm/distributed/utils.py,
  // which refuses a list of another length or sum, in these words).
  std::vector<uint64_t> partition;
  if (auto text = env("VLLM_PP_LAYER_PARTITION")) {
    uint64_t sum = 0;
    for (size_t from = 0; from <= text->size();) {
      size_t comma = text->find(',', from);
      if (comma == std::string::npos) comma = text->size();
      std::string_view part = std::string_view(*text).substr(from, comma - from);
      while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
      while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
      from = comma + 1;
      auto n = parse_decimal<uint64_t>(part);
      if (!n) return Error{fmt::format("VLLM_PP_LAYER_PARTITION={}: vLLM refuses it: \"Invalid partition string: {}\"", *text, *text)};
      // (Each count at most the model's layers: the sum below cannot wrap.)
      if (*n > model.num_layers) {
        return Error{fmt::format("VLLM_PP_LAYER_PARTITION={}: a stage of {} layers, more than the model's {}", *text, *n,
                                 model.num_layers)};
      }
      if (*n == 0) {
        return Error{fmt::format("VLLM_PP_LAYER_PARTITION={}: a stage without layers holds no KV cache; oomdoc does not "
                                 "size such a pipeline", *text)};
      }
      partition.push_back(*n);
      sum += *n;
    }
    if (partition.size() != s.pipeline_parallel_size) {
      return Error{fmt::format("VLLM_PP_LAYER_PARTITION={}: vLLM refuses it: \"len(partitions)={} does not match "
                               "pp_size={}.\"", *text, partition.size(), s.pipeline_parallel_size)};
    }
    if (sum != model.num_layers) {
      return Error{fmt::format("VLLM_PP_LAYER_PARTITION={}: vLLM refuses it: \"sum(partitions)={} does not match "
                               "num_hidden_layers={}.\"", *text, sum, model.num_layers)};
    }
    p.assumptions.push_back(fmt::format("layers per pipeline stage from VLLM_PP_LAYER_PARTITION={}", *text));
  }
  auto stages = pipeline_stages(model, s.pipeline_parallel_size, partition);
  uint64_t offload = static_cast<uint64_t>(c.cpu_offload_gb * static_cast<double>(kGiB));
  // The rank that samples (the last stage's driver) peaks at the sampler; stages before the last
  // compute no logits, and in V0 the other ranks of a tensor-parallel group do not sample.
  // A pooling model runs its pooler where a generator samples (gpu_model_runner.profile_run:
  // `if self.is_pooling_model: self._dummy_pooler_run(hidden_states)`): the profile peak is the
  // forward's, with no logits or sort.
  const bool pooling = c.pooling_flag.has_value() || model.is_encoder_only;  // an encoder only pools
  if (pooling && !model.is_encoder_only) {
    p.assumptions.push_back(fmt::format(
        "{}: a pooling model; the profile run and warm-up pool hidden states instead of sampling (no "
        "logits), and its causal attention still caches keys and values", *c.pooling_flag));
  }
  const uint64_t sampling_activation = in.overrides.activation_bytes.value_or(
      pooling ? profile_forward_bytes(model, s.max_num_batched_tokens, s.tensor_parallel_size, act_bytes)
              : profile_activation_bytes(model, s.max_num_batched_tokens, s.max_num_seqs, s.tensor_parallel_size,
                                         act_bytes, b.v1_engine, b.sort_free_sampler,
                                         p.speculative ? p.speculative->sampler_extra_bytes_per_logit : 0));
  const uint64_t forward_activation = in.overrides.activation_bytes.value_or(
      std::min(sampling_activation,
               profile_forward_bytes(model, s.max_num_batched_tokens, s.tensor_parallel_size, act_bytes)));
  p.activation.bytes = sampling_activation;
  p.activation.from_log = in.overrides.activation_bytes.has_value();
  p.activation.detail = p.activation.from_log
      ? "from the log"
      : pooling ? fmt::format("profile run of {} tokens, pooled (no sampler)", s.max_num_batched_tokens)
                : fmt::format("profile run of {} tokens and {} sequences", s.max_num_batched_tokens,
                              std::min(s.max_num_seqs, s.max_num_batched_tokens));
  p.non_torch.bytes = in.overrides.non_torch_bytes.value_or(kVllmNonTorchBytes);
  p.non_torch.from_log = in.overrides.non_torch_bytes.has_value();
  p.non_torch.detail = p.non_torch.from_log ? "from the log"
                                            : "typical 0.03-0.4 GiB in real logs (cuBLAS, attention, NCCL)";
  if (b.context_counts_against_budget) {
    p.assumptions.push_back(b.v1_engine ? "vLLM 0.8 V1 counts the CUDA context as non-torch memory inside the budget"
                                        : fmt::format("vLLM {} takes the profile peak as total - free memory: the CUDA "
                                                      "context (and any other process) counts inside the budget",
                                                      b.version.text));
  }
  if (b.peak_from_used_memory && !in.overrides.activation_bytes) {
    p.warnings.push_back(fmt::format(
        "vLLM {} takes the profile run's peak from the device's free memory afterwards, so what the caching allocator "
        "keeps from that run and NCCL's buffers count too: its KV cache is likely smaller than sized here "
        "(v0.6.4 measured torch's own peak, vllm-project/vllm#9352)", b.version.text));
  }
  p.graphs_in_budget = b.graph_memory_in_budget && !s.enforce_eager;

  // A pre-quantized checkpoint read from disk gives its exact size: scale the format's estimate to it.
  double checkpoint_scale = 1.0;
  if (!s.weights.method.empty() && model.checkpoint_bytes > 0 && model.quantization == s.weights.method) {
    PipelineStage whole;
    whole.layers = model.num_layers;
    whole.first = whole.last = true;
    uint64_t estimated = stage_weight_bytes(model, whole, 1, 1, s.weights);
    if (estimated > 0) {
      checkpoint_scale = static_cast<double>(model.checkpoint_bytes) / static_cast<double>(estimated);
      s.weights.description += fmt::format(", scaled to the checkpoint's {:.2f} GiB", gib(model.checkpoint_bytes));
    }
  }
  // The blocks vLLM allocates: what the available memory holds, or --num-gpu-blocks-override's
  // count whatever the memory (tokens, concurrency and bytes then follow the override).
  const KvGrouping grouping{b.hybrid_kv_groups, b.hybrid_group_larger_kind_ratio_percent};
  // The whole model's layers of each kind (the drafter's with them) that current vLLM cuts its
  // groups over before projecting them onto each pipeline stage.
  KvLayout whole_model_kv;
  if (b.hybrid_groups_whole_model) {
    PipelineStage whole = pipeline_stages(kv_model, 1).front();
    whole_model_kv = kv_layout(kv_model, whole, s.tensor_parallel_size, *kv_storage, s.block_size);
    if (p.speculative) add_draft_kv(whole_model_kv, p.speculative->kv);
  }
  auto capacity_for = [&](const KvLayout& layout, int64_t available, uint64_t max_model_len) {
    KvCapacity capacity =
        c.num_gpu_blocks_override
            ? kv_capacity_for_blocks(layout, *c.num_gpu_blocks_override, max_model_len, s.max_num_batched_tokens,
                                     model.sliding_window, grouping)
            : kv_capacity(layout, available, max_model_len, s.max_num_batched_tokens, model.sliding_window, grouping);
    // V0 and V1 before v0.8 divide the cache's tokens by max_model_len (a fraction of a block
    // counts); current V1 counts whole blocks per request, as kv_capacity does.
    if (!concurrency_in_whole_blocks(b)) {
      capacity.max_concurrency = static_cast<double>(capacity.num_blocks * layout.block_size) /
                                 static_cast<double>(std::max<uint64_t>(max_model_len, 1));
    }
    // The logged token count (kv_cache_utils' report: int(max_model_len * max_concurrency)).
    if (b.kv_tokens_from_concurrency) {
      capacity.tokens = static_cast<uint64_t>(static_cast<double>(max_model_len) * capacity.max_concurrency);
    }
    return capacity;
  };
  const uint64_t expert_ranks = moe_expert_ranks(model, s.tensor_parallel_size, c.data_parallel_size);
  // MXFP4 experts as the MoE backend vLLM picks for this GPU allocates them (padded), on top of
  // the format's own size; not scaled to the checkpoint, which holds them unpadded.
  Mxfp4ExpertLayout mxfp4_layout;
  if (s.weights.experts_only && s.weights.method == "mxfp4") {
    mxfp4_layout = mxfp4_expert_layout(in.target.vendor, in.target.architecture, b.mxfp4_triton_on_hopper,
                                       env("VLLM_MXFP4_USE_MARLIN"));
  }
  bool first = true;
  uint64_t offloaded_first_stage = 0;   // what --cpu-offload-gb really took off the first stage's GPU
  for (size_t i = 0; i < stages.size(); ++i) {
    const PipelineStage& stage = stages[i];
    uint64_t weights = static_cast<uint64_t>(
        checkpoint_scale * static_cast<double>(stage_weight_bytes(model, stage, s.tensor_parallel_size,
                                                                  s.pipeline_parallel_size, s.weights,
                                                                  b.mla_dequantized_kv_b, expert_ranks)));
    weights += mxfp4_expert_padding_bytes(model, stage, s.tensor_parallel_size, expert_ranks, s.weights, mxfp4_layout);
    weights += rotary_cache_bytes(model, s.weights.dense_bytes);
    // The drafter sits with the last stage, which samples; "Model loading took" includes it
    // (gpu_model_runner.load_model loads it inside the same memory profiler).
    const bool drafter_here = p.speculative && stage.last;
    if (drafter_here) weights += p.speculative->weights_bytes;
    // --cpu-offload-gb takes parameters from the decoder layers only (make_layers wraps each in
    // maybe_offload_to_cpu): the embeddings, head, final norm and rotary cache stay on the GPU.
    PipelineStage blocks_only = stage;
    blocks_only.first = blocks_only.last = false;
    const uint64_t offloadable = static_cast<uint64_t>(
        checkpoint_scale * static_cast<double>(stage_weight_bytes(model, blocks_only, s.tensor_parallel_size,
                                                                  s.pipeline_parallel_size, s.weights,
                                                                  b.mla_dequantized_kv_b, expert_ranks)));
    if (offload > offloadable && first) {
      p.warnings.push_back(fmt::format("--cpu-offload-gb {:g}: only the decoder layers can be offloaded ({:.2f} GiB per "
                                       "GPU here); the embeddings, head and norms stay on the GPU",
                                       c.cpu_offload_gb, gib(offloadable)));
    }
    const uint64_t offloaded = std::min({offload, offloadable, weights});
    if (first) offloaded_first_stage = offloaded;
    weights -= offloaded;
    if (in.overrides.weights_bytes) weights = *in.overrides.weights_bytes;
    // --enforce-eager captures no graphs: a --cuda-graph figure is then ignored (a warning says so).
    uint64_t graphs = s.enforce_eager ? 0
                      : in.overrides.cuda_graph_bytes.value_or(
                            cuda_graph_bytes(model, stage, s.tensor_parallel_size, s.max_num_seqs, act_bytes));
    KvLayout layout = kv_layout(kv_model, stage, s.tensor_parallel_size, *kv_storage, s.block_size);
    if (align_latent) align_latent_entries_to_256_bytes(layout, act_bytes);
    if (drafter_here) add_draft_kv(layout, p.speculative->kv);
    layout.model_full_layers = whole_model_kv.full_layers;
    layout.model_sliding_layers = whole_model_kv.sliding_layers;
    const uint64_t activation = stage.last ? sampling_activation : forward_activation;
    int64_t available;
    if (c.kv_cache_memory_bytes) {
      available = static_cast<int64_t>(*c.kv_cache_memory_bytes);
    } else {
      available = static_cast<int64_t>(p.budget_bytes) - static_cast<int64_t>(weights) -
                  static_cast<int64_t>(activation) - static_cast<int64_t>(p.non_torch.bytes);
      if (b.context_counts_against_budget) available -= static_cast<int64_t>(p.context_bytes);
      if (p.graphs_in_budget) available -= static_cast<int64_t>(graphs);
    }
    if (c.num_gpu_blocks_override &&
        *c.num_gpu_blocks_override > (1ull << 50) / std::max<uint64_t>(1, layout.page_bytes * stage.layers)) {
      return Error{fmt::format("--num-gpu-blocks-override {}: {} blocks of {} are beyond any GPU (1 PiB at most)",
                               *c.num_gpu_blocks_override, *c.num_gpu_blocks_override,
                               format_bytes(layout.page_bytes * stage.layers))};
    }
    KvCapacity capacity = capacity_for(layout, available, s.max_model_len);
    // With the block count fixed, every stage holds as many blocks: the one with the most bytes binds.
    bool binds = c.num_gpu_blocks_override
        ? weights + capacity.bytes > p.weights.bytes + p.capacity.bytes
        : capacity.num_blocks < p.capacity.num_blocks;
    if (first || binds) {
      first = false;
      p.binding_stage = i;
      p.blocks_from_memory = kv_capacity(layout, available, s.max_model_len, s.max_num_batched_tokens,
                                         model.sliding_window, grouping).num_blocks;
      p.weights.bytes = weights;
      p.activation.bytes = activation;
      p.cuda_graphs.bytes = graphs;
      p.kv = layout;
      p.capacity = capacity;
      p.available_kv_bytes = available;
    }
  }
  if (!p.activation.from_log && !stages[p.binding_stage].last) {
    p.activation.detail = fmt::format("profile run of {} tokens, forward pass only (this pipeline stage computes "
                                      "no logits)", s.max_num_batched_tokens);
  }
  if (!b.v1_engine && s.tensor_parallel_size > 1 && !c.kv_cache_memory_bytes &&
      p.activation.bytes > forward_activation) {
    p.non_sampling_ranks = ServePrediction::OtherRanks{
        forward_activation,
        p.available_kv_bytes + static_cast<int64_t>(p.activation.bytes - forward_activation)};
    p.activation.detail += fmt::format(", on the driver rank, which samples (the other {}: {})",
                                       other_ranks(s.tensor_parallel_size), format_bytes(forward_activation));
  }
  p.weights.from_log = in.overrides.weights_bytes.has_value();
  p.weights.detail = p.weights.from_log ? "from the log" : s.weights.description;
  if (mxfp4_layout.padded() && !p.weights.from_log) p.weights.detail += ", padded for " + mxfp4_layout.backend;
  if (offload && !p.weights.from_log) {
    p.weights.detail += offloaded_first_stage < offload
                            ? fmt::format(", {:.2f} GiB offloaded to CPU (of the {:g} asked)", gib(offloaded_first_stage),
                                          c.cpu_offload_gb)
                            : fmt::format(", {:g} GiB offloaded to CPU", c.cpu_offload_gb);
  }
  if (p.speculative && p.speculative->weights_bytes && !p.weights.from_log) {
    p.weights.detail += fmt::format(", with the {} drafter's {}", p.speculative->method,
                                    format_bytes(p.speculative->weights_bytes));
  }
  p.cuda_graphs.from_log = in.overrides.cuda_graph_bytes.has_value() && !s.enforce_eager;
  if (in.overrides.cuda_graph_bytes && s.enforce_eager) {
    p.warnings.push_back("--cuda-graph is ignored: with --enforce-eager vLLM captures no CUDA graphs");
  }
  p.cuda_graphs.detail = s.enforce_eager ? "--enforce-eager: no CUDA graphs"
                         : p.cuda_graphs.from_log ? "from the log"
                         : "estimate; real logs show 0.1-5 GiB depending on model and capture sizes";

  // The longest request: what the memory holds, and with a --num-gpu-blocks-override what those
  // blocks hold. V0 checks the length against the overridden blocks (raise_if_cache_size_invalid);
  // V1 against the profiled memory before it applies the override (kv_cache_utils:
  // check_enough_kv_cache_memory, then may_override_num_blocks), and its error's estimate is the
  // memory's.
  const uint64_t longest_considered = std::max<uint64_t>(s.max_model_len, s.model_context);
  const uint64_t memory_holds = max_model_len_that_fits(p.kv, p.available_kv_bytes, s.max_num_batched_tokens,
                                                        model.sliding_window, grouping, longest_considered);
  p.max_model_len_that_fits =
      c.num_gpu_blocks_override
          ? max_model_len_that_fits(p.kv, static_cast<int64_t>(p.capacity.bytes), s.max_num_batched_tokens,
                                    model.sliding_window, grouping, longest_considered)
          : memory_holds;
  if (c.num_gpu_blocks_override && b.v1_engine) p.max_model_len_that_fits = std::min(p.max_model_len_that_fits, memory_holds);
  std::string auto_fit_line;
  if (c.max_model_len_auto && b.v1_engine) {
    uint64_t fitted = std::min(s.model_context, memory_holds);
    if (fitted > 0 && fitted != s.max_model_len) {
      auto_fit_line = (fmt::format(
          "Auto-fit max_model_len: reduced from {} to {} to fit in available GPU memory ({:.2f} GiB "
          "available for KV cache)", s.max_model_len, fitted, gib(p.available_kv_bytes)));
      s.max_model_len = fitted;
    } else if (fitted == s.max_model_len) {
      auto_fit_line = (fmt::format(
          "Auto-fit max_model_len: full model context length {} fits in available GPU memory", fitted));
    }
    p.capacity = capacity_for(p.kv, p.available_kv_bytes, s.max_model_len);
  }

  // --- Encoder-only models (BERT): served only as pooling models (embeddings, classification,
  // scores; --runner pooling, formerly --task embed). V1 gives encoder-only attention no KV cache
  // (EncoderOnlyAttention.get_kv_cache_spec returns None; vllm-project/vllm#21270, first released
  // in v0.10.1); V0 ran them from v0.6.4 (vllm-project/vllm#9056) with its paged cache still
  // carved from the budget.
  if (model.is_encoder_only) {
    if (b.version.given && !b.version.at_least(0, 6, 4)) {
      return Error{fmt::format("{} is an encoder-only model: vLLM {} cannot serve it (encoder-only pooling models "
                               "arrived in v0.6.4, vllm-project/vllm#9056)", model.id, b.version.text)};
    }
    p.no_kv_cache = b.v1_engine && (!b.version.given || b.version.at_least(0, 10, 1));
    if (p.no_kv_cache) {
      p.kv = KvLayout{};
      p.kv.dtype_bytes = 0;   // nothing cached: no KV-cache fix applies
      p.capacity = KvCapacity{};
      p.available_kv_bytes = 0;
      p.max_model_len_that_fits = 0;
      p.left_bytes = static_cast<int64_t>(p.total_bytes) -
                     static_cast<int64_t>(p.context_bytes + p.weights.bytes + p.activation.bytes + p.non_torch.bytes +
                                          (s.enforce_eager ? 0 : p.cuda_graphs.bytes));
      // Without chunked prefill a request's prompt is scheduled whole: a step holds as many
      // max-length prompts as the token budget allows, and at most max_num_seqs.
      p.requests_at_once = std::min(s.max_num_seqs, s.max_num_batched_tokens / std::max<uint64_t>(s.max_model_len, 1));
      p.assumptions.push_back(
          "encoder-only model: vLLM serves it as a pooling model (embeddings, classification, scores: --runner "
          "pooling; older releases: --task embed) and cannot generate with it; V1 allocates no KV cache for "
          "encoder-only attention (vllm-project/vllm#21270), so gpu_memory_utilization sizes nothing");
    } else {
      p.assumptions.push_back(fmt::format(
          "encoder-only model: vLLM {} serves it as a pooling model on the V0 engine (V1 took encoder-only models from "
          "v0.10.1), which still carves a paged KV "
          "cache out of the budget though encoder-only attention never reads it: the KV figures are memory held, not "
          "concurrency", b.version.given ? b.version.text : "current"));
    }
  }

  // --- The startup sequence and the first error vLLM would raise.
  const uint64_t tp = s.tensor_parallel_size;
  bool request_hangs = false;   // before v0.2.7: starts, but a max_model_len request hangs
  auto set_error = [&](std::string kind, std::string message) {
    if (!p.error) p.error = VllmStartupError{std::move(kind), std::move(message)};
  };
  if (b.startup_free_memory_check && p.free_at_startup_bytes < p.budget_bytes) {
    set_error("free_memory", fmt::format(
        "Free memory on device ({:.2f}/{:.2f} GiB) on startup is less than desired GPU memory "
        "utilization ({}, {:.2f} GiB). Decrease GPU memory utilization or reduce GPU memory used "
        "by other processes.", gib(p.free_at_startup_bytes), gib(p.total_bytes),
        python_float(s.gpu_memory_utilization), gib(p.budget_bytes)));
  }
  if (p.weights.bytes + p.context_bytes > p.total_bytes) {
    set_error("weights_oom", b.version.at_least(0, 11, 0)
        ? std::string("Failed to load model - not enough GPU memory. Try lowering "
                      "--gpu-memory-utilization to free memory for weights, increasing "
                      "--tensor-parallel-size, or using --quantization. See ") + kConservingMemoryUrl +
              " for more tips. (original error: CUDA out of memory)"
        : std::string("torch.OutOfMemoryError: CUDA out of memory while loading the weights"));
  }
  // The profile run (determine_available_memory -> profile_run) is a dummy forward pass of
  // max_num_batched_tokens before any KV cache exists: weights, its activation peak and the
  // non-torch memory must fit the card itself, whatever the budget, or it dies there with a CUDA
  // OOM and never reaches the KV-cache checks below.
  const uint64_t profile_needs = p.context_bytes + p.weights.bytes + p.activation.bytes + p.non_torch.bytes;
  if (!p.no_kv_cache && profile_needs > p.total_bytes) {
    set_error("profile_oom", fmt::format(
        "torch.OutOfMemoryError: CUDA out of memory in the profile run ({:.2f} GiB of weights and a {:.2f} GiB "
        "activation peak for {} batched tokens, with the CUDA context and non-torch memory, need {:.2f} GiB more "
        "than the {:.2f} GiB GPU)", gib(p.weights.bytes), gib(p.activation.bytes), s.max_num_batched_tokens,
        gib(profile_needs - p.total_bytes), gib(p.total_bytes)));
  }
  if (p.no_kv_cache) {
    if (p.left_bytes < 0 && !p.error) {
      set_error("forward_oom", fmt::format(
          "torch.OutOfMemoryError: CUDA out of memory in the forward pass ({:.2f} GiB of weights and a {:.2f} GiB "
          "activation peak, with the CUDA context, non-torch memory and CUDA graphs, need {:.2f} GiB more than the "
          "{:.2f} GiB GPU)", gib(p.weights.bytes), gib(p.activation.bytes), gib(-p.left_bytes), gib(p.total_bytes)));
    }
  } else if (p.capacity.num_blocks == 0) {
    if (c.max_model_len_auto && b.v1_engine) {
      set_error("auto_fit_failed", "Cannot auto-fit max_model_len: not enough GPU memory available "
                                   "to serve even a single token. Try increasing `gpu_memory_utilization`.");
    }
    set_error("no_cache_blocks", b.v1_engine
        ? std::string("No available memory for the cache blocks. Try increasing "
                      "`gpu_memory_utilization` when initializing the engine. See ") +
              kConservingMemoryUrl + " for more details."
        : std::string("No available memory for the cache blocks. Try increasing "
                      "`gpu_memory_utilization` when initializing the engine."));
  } else if (p.capacity.blocks_per_request > p.capacity.num_blocks && b.v1_engine && c.num_gpu_blocks_override &&
             p.capacity.bytes_per_request <= static_cast<uint64_t>(std::max<int64_t>(0, p.available_kv_bytes))) {
    // V1 checks one request against the profiled memory, then applies the override
    // (kv_cache_utils.get_kv_cache_config): it starts, but a request this long never gets its blocks.
    request_hangs = true;
    p.warnings.push_back(fmt::format(
        "--num-gpu-blocks-override {} holds {} tokens, fewer than one request of max_model_len {}: vLLM starts, "
        "but requests longer than {} tokens can never be scheduled (raise the override to at least {} or drop it)",
        *c.num_gpu_blocks_override, p.capacity.num_blocks * s.block_size, s.max_model_len,
        p.capacity.num_blocks * s.block_size, p.capacity.blocks_per_request));
  } else if (p.capacity.blocks_per_request > p.capacity.num_blocks) {
    if (b.v1_engine) {
      std::string estimate = memory_holds > 0
          ? fmt::format("Based on the available memory, the estimated maximum model length is {}. ", memory_holds)
          : "";
      set_error("max_len_too_long", fmt::format(
          "To serve at least one request with the models's max seq len ({}), ({:.2f} GiB KV cache "
          "is needed, which is larger than the available KV cache memory ({:.2f} GiB). {}Try "
          "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
          "the engine. See {} for more details.",
          s.max_model_len, gib(p.capacity.bytes_per_request), gib(p.available_kv_bytes), estimate,
          kConservingMemoryUrl));
    } else if (!b.max_len_startup_check) {
      request_hangs = true;
      p.warnings.push_back(fmt::format(
          "max_model_len {} is more than the KV cache holds ({} tokens), but vLLM {} does not check it at startup "
          "(the check came in v0.2.7, vllm-project/vllm#2163): it starts, and a request longer than {} tokens "
          "hangs waiting for blocks",
          s.max_model_len, p.capacity.num_blocks * s.block_size, b.version.text, p.capacity.num_blocks * s.block_size));
    } else {
      set_error("max_len_too_long", fmt::format(
          "The model's max seq len ({}) is larger than the maximum number of tokens that can be "
          "stored in KV cache ({}). Try increasing `gpu_memory_utilization` or decreasing "
          "`max_model_len` when initializing the engine.",
          s.max_model_len, p.capacity.num_blocks * s.block_size));
    }
  }
  // The KV tensors are allocated whatever the budget says: --kv-cache-memory-bytes and
  // --num-gpu-blocks-override size them outright (vllm/v1/worker/gpu_worker.py returns
  // kv_cache_memory_bytes as the available memory without profiling the budget), so what the card
  // must hold is the context, the weights, the non-torch memory and those tensors.
  const bool kv_sized_outright = c.kv_cache_memory_bytes || c.num_gpu_blocks_override;
  const uint64_t in_use_after_kv = p.context_bytes + p.weights.bytes + p.non_torch.bytes + p.capacity.bytes;
  if (in_use_after_kv > p.total_bytes) {
    set_error("kv_cache_oom", fmt::format(
        "torch.OutOfMemoryError: CUDA out of memory while allocating the KV cache ({:.2f} GiB of KV "
        "tensors; the {:.2f} GiB GPU has {:.2f} GiB left after the CUDA context, the weights and "
        "non-torch memory)", gib(p.capacity.bytes), gib(p.total_bytes),
        gib(p.total_bytes - std::min(p.total_bytes, in_use_after_kv - p.capacity.bytes))));
  }
  // Before v0.21 the graphs were captured after the KV cache took the budget: they need what is
  // left of the card after the context, the budget and the activation memory given back (or, with
  // the KV cache sized outright, after what is really in use).
  if ((!p.graphs_in_budget || kv_sized_outright) && !s.enforce_eager && !p.no_kv_cache) {
    uint64_t in_use = kv_sized_outright ? in_use_after_kv
                                        : p.context_bytes + p.budget_bytes - std::min(p.budget_bytes, p.activation.bytes);
    if (in_use + p.cuda_graphs.bytes > p.total_bytes) {
      set_error("graph_capture_oom", fmt::format(
          "torch.OutOfMemoryError: CUDA out of memory while capturing CUDA graphs (the KV cache "
          "already holds {}; {:.2f} GiB of graphs need more than the {:.2f} GiB left)",
          kv_sized_outright ? fmt::format("{:.2f} GiB", gib(p.capacity.bytes)) : std::string("the budget"),
          gib(p.cuda_graphs.bytes), gib(p.total_bytes > in_use ? p.total_bytes - in_use : 0)));
    } else if (in_use + p.cuda_graphs.bytes + kGiB / 4 > p.total_bytes) {
      p.warnings.push_back("CUDA graphs are captured after the KV cache is sized, and less than "
                           "0.25 GiB would be left afterwards: a capture OOM is likely");
    } else if (in_use + kGraphCaptureUpperBytes > p.total_bytes) {
      // The graph estimate is rough (capture sizes, MoE and compile buffers vary): below vLLM's own
      // upper figure, say what is left rather than a plain fit.
      p.warnings.push_back(fmt::format(
          "CUDA graphs are captured after the KV cache is sized, with {:.2f} GiB left for them (estimated {:.2f} GiB); "
          "vLLM warns they \"can take additional 1~3 GiB memory per GPU\": if the capture runs out of memory, use "
          "--enforce-eager or a lower --gpu-memory-utilization", gib(p.total_bytes - in_use), gib(p.cuda_graphs.bytes)));
    }
  }
  // V1 then warms the sampler up (gpu_worker.compile_or_warm_up_model: a dummy run of max_num_seqs
  // tokens and the sampler over as many rows, "called after capture_model on purpose"). Sized
  // through the budget, that peak was reserved by the profile; sized outright, nothing reserved it.
  const uint64_t warmup = kv_sized_outright && b.v1_engine && !p.no_kv_cache && !pooling
      ? profile_activation_bytes(model, s.max_num_seqs, s.max_num_seqs, tp, act_bytes, true, b.sort_free_sampler,
                                 p.speculative ? p.speculative->sampler_extra_bytes_per_logit : 0)
      : 0;
  const uint64_t graphs_captured = s.enforce_eager ? 0 : p.cuda_graphs.bytes;
  if (warmup > 0 && !p.error && in_use_after_kv <= p.total_bytes &&
      in_use_after_kv + graphs_captured + warmup > p.total_bytes) {
    set_error("sampler_warmup_oom", fmt::format(
        "torch.OutOfMemoryError: CUDA out of memory in the sampler warm-up after the KV cache{} ({} of "
        "{} sequences' logits and their sort need more than the {:.2f} GiB left)",
        s.enforce_eager ? "" : " and CUDA graphs", format_bytes(warmup), s.max_num_seqs,
        gib(p.total_bytes - std::min(p.total_bytes, in_use_after_kv + graphs_captured))));
  }
  // Before v0.2.7 vLLM starts, but a max_model_len request never gets its blocks: no fit either
  // (the fixes are re-predicted against this, so each holds one such request).
  p.fits = !p.error.has_value() && !request_hangs;
  p.request_hangs = request_hangs;

  // --- The lines vLLM logs, only those this version printed (docs/serve.md, "Log lines by version").
  p.blocks_overridden = c.num_gpu_blocks_override.has_value();
  // A launch whose weights do not load, or that fails the free-memory check made before loading,
  // stops before vLLM's memory accounting: it logs none of those lines.
  const bool stops_before_accounting = p.error && (p.error->kind == "weights_oom" || p.error->kind == "free_memory");
  if (!stops_before_accounting) p.log_lines = vllm_log_lines(p, p.blocks_overridden, auto_fit_line, c.kv_cache_memory_bytes);

  if (tp > 1 || s.pipeline_parallel_size > 1) {
    p.assumptions.push_back(fmt::format(
        "figures are per GPU ({} GPUs: TP {} x PP {}){}", tp * s.pipeline_parallel_size, tp,
        s.pipeline_parallel_size,
        s.pipeline_parallel_size > 1 ? fmt::format(", for pipeline stage {} which holds the fewest blocks", p.binding_stage) : ""));
  }
  if (in.target.vendor == "apple") {
    p.warnings.push_back("vLLM's CUDA engine does not run on Apple GPUs (unified memory, no CUDA); "
                         "these figures size a CUDA-like budget of the same memory");
  }
  if (p.speculative) {
    for (const std::string& a : p.speculative->assumptions) p.assumptions.push_back(a);
    if (s.pipeline_parallel_size > 1 && p.speculative->loads_model) {
      p.assumptions.push_back("speculative decoding with pipeline parallelism: the drafter is sized on the last stage");
    }
  }
  bool multimodal = std::any_of(c.limit_mm_per_prompt.begin(), c.limit_mm_per_prompt.end(),
                                [](const auto& item) { return item.second > 0; });
  // Every modality the model takes limited to 0: vLLM profiles no encoder. A modality left out of
  // the limits keeps its default (one item), so image=0 alone still profiles Qwen2-VL's video.
  std::vector<std::string> modalities = model.modalities;
  if (modalities.empty() && model.has_vision_tower) modalities.push_back("image");
  const bool text_only = !multimodal && !modalities.empty() &&
                         std::all_of(modalities.begin(), modalities.end(), [&](const std::string& m) {
                           auto limit = c.limit_mm_per_prompt.find(m);
                           return limit != c.limit_mm_per_prompt.end() && limit->second == 0;
                         });
  if ((model.has_vision_tower || multimodal) && !text_only) {
    // vLLM's profile run also runs the encoder on the largest dummy inputs the limits allow
    // (GPUModelRunner.profile_run: "Profile with multimodal encoder & encoder cache"), which can
    // be several GiB: a prediction without it may say "fits" where vLLM has no memory left.
    std::string zero;
    for (const std::string& m : modalities) zero += fmt::format("{}\"{}\": 0", zero.empty() ? "" : ", ", m);
    if (zero.empty()) zero = "\"image\": 0";
    p.warnings.push_back(fmt::format(
        "a multimodal model: vLLM's profile run also runs its encoder on the largest inputs "
        "--limit-mm-per-prompt allows, which oomdoc does not size, so the activation peak and the KV cache "
        "figures may be too optimistic; serving text only, --limit-mm-per-prompt '{{{}}}' skips it", zero));
  }
  if (multimodal) {
    p.assumptions.push_back("--limit-mm-per-prompt is read but the vision/audio encoder's profile run is not sized");
  }
  if (c.data_parallel_size > 1 && expert_ranks != tp) {
    p.assumptions.push_back(fmt::format(
        "--data-parallel-size {}: the routed experts are spread over DP x TP = {} GPUs (vLLM's expert layers form one "
        "group across the DP ranks); attention, dense layers and embeddings are whole on each DP rank, and each "
        "rank's KV cache and profile run are its own", c.data_parallel_size, expert_ranks));
  } else if (c.data_parallel_size > 1) {
    p.assumptions.push_back(fmt::format("--data-parallel-size {}: each replica is sized alone (same figures per GPU)",
                                        c.data_parallel_size));
  }
  if (model.sliding_window && !b.hybrid_kv_groups) {
    p.assumptions.push_back("sliding-window layers are sized as full attention (V0 and V1 before v0.10)");
  }
  if (s.weights.experts_only && !in.overrides.weights_bytes) {
    if (mxfp4_layout.padded()) {
      const uint64_t inter = model.moe_intermediate_size ? model.moe_intermediate_size : model.intermediate_size;
      const uint64_t per_rank = inter / std::max<uint64_t>(expert_ranks, 1);
      auto round_up = [](uint64_t x, uint64_t m) { return (x + m - 1) / m * m; };
      p.assumptions.push_back(fmt::format(
          "{} experts as vLLM's {} MoE backend allocates them ({}): Mxfp4MoEMethod.create_weights pads the "
          "intermediate size per GPU {} to {} and the hidden size {} to {}",
          s.weights.method, mxfp4_layout.backend, mxfp4_layout.why, per_rank,
          round_up(per_rank, mxfp4_layout.intermediate_multiple), model.hidden_size,
          round_up(model.hidden_size, mxfp4_layout.hidden_multiple)));
    } else {
      p.assumptions.push_back(fmt::format(
          "{} experts sized as stored ({:.5f} B per weight): {}; pass --weights with \"Model loading took\" "
          "from a log", s.weights.method, s.weights.linear_bytes, mxfp4_layout.why));
    }
  }
  return p;
}

namespace {

// An error about flags, spelled as LLM(...)'s keywords when that is what the user wrote:
// "--max-model-len 131072 is above ..." is "max_model_len=131072 is above ...", and every other
// flag it names is a keyword too ("below --max-num-seqs 128" is "below max_num_seqs=128").
std::string as_keyword_error(const std::string& message) {
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    const bool flag = message.compare(i, 2, "--") == 0 && (i == 0 || !std::isalnum(static_cast<unsigned char>(message[i - 1]))) &&
                      i + 2 < message.size() && std::islower(static_cast<unsigned char>(message[i + 2]));
    if (!flag) {
      out += message[i++];
      continue;
    }
    size_t end = i + 2;
    while (end < message.size() && (std::islower(static_cast<unsigned char>(message[end])) ||
                                     std::isdigit(static_cast<unsigned char>(message[end])) || message[end] == '-')) {
      ++end;
    }
    std::string keyword = message.substr(i + 2, end - i - 2);
    std::replace(keyword.begin(), keyword.end(), '-', '_');
    out += keyword;
    // "--flag 123" is "flag=123".
    size_t value_end = end + 1;
    while (value_end < message.size() && (std::isdigit(static_cast<unsigned char>(message[value_end])) ||
                                          message[value_end] == '.')) {
      ++value_end;
    }
    const bool number = end < message.size() && message[end] == ' ' && value_end > end + 1 &&
                        (value_end == message.size() || message[value_end] == ' ' || message[value_end] == ':' ||
                         message[value_end] == ',' || message[value_end] == ')');
    if (number) {
      out += "=" + message.substr(end + 1, value_end - end - 1);
      end = value_end;
    }
    i = end;
  }
  return out;
}

}  // namespace

Result<ServeReport> analyze_serve(const ServeInputs& inputs) {
  auto prediction = predict_vllm_startup(inputs);
  if (!prediction) {
    if (inputs.config.launcher != "LLM(...)") return prediction.error();
    Error e = prediction.error();
    e.message = as_keyword_error(e.message);
    return e;
  }
  ServeReport report;
  // The name as the user typed it; the source says which config stood behind it.
  report.model_id = inputs.config.model.empty() ? inputs.model.id : inputs.config.model;
  report.model_source = inputs.model.id == report.model_id
                            ? inputs.model.source
                            : inputs.model.id + " (" + inputs.model.source + ")";
  report.launcher = inputs.config.launcher;
  report.target = inputs.target;
  report.prediction = std::move(prediction.value());
  report.ignored_flags = inputs.config.ignored;
  report.not_modeled_flags = inputs.config.not_modeled;
  report.unknown_flags = inputs.config.unknown;
  if (!report.unknown_flags.empty()) {
    std::string list;
    for (const auto& f : report.unknown_flags) list += (list.empty() ? "" : ", ") + f;
    report.prediction.warnings.push_back(fmt::format(
        "unknown to oomdoc, not checked (vLLM may refuse or use them): {}", list));
  }
  if (!report.prediction.fits) report.fixes = serve_fixes(inputs, report.prediction);
  return report;
}

}  // namespace oomdoc
