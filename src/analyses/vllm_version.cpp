#include "analyses/vllm_version.h"

#include "model/gpu.h"

#include <fmt/format.h>

#include <cctype>
#include <tuple>

namespace oomdoc {

bool VllmVersion::at_least(int ma, int mi, int pa) const {
  if (!given) return true;  // "current" is newer than every threshold we know
  return std::tie(major, minor, patch) >= std::tie(ma, mi, pa);
}

Result<VllmVersion> parse_vllm_version(std::string_view text) {
  VllmVersion version;
  version.text = std::string(text);
  if (text.empty() || text == "current" || text == "latest") {
    version.text = "current";
    return version;
  }
  size_t i = 0;
  if (text[0] == 'v' || text[0] == 'V') ++i;
  version.text = std::string(text.substr(i));   // "v0.8.5" (a docker tag) is named as 0.8.5
  int parts[3] = {0, 0, 0};
  int count = 0;
  while (count < 3 && i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    int value = 0;
    size_t digits = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && digits < 6) {
      value = value * 10 + (text[i] - '0');
      ++i;
      ++digits;
    }
    parts[count++] = value;
    if (i < text.size() && text[i] == '.') ++i;
    else break;
  }
  if (count < 2) {
    return Error{fmt::format("--vllm-version: '{}' is not a version like 0.8.5 or 0.21.0", text)};
  }
  version.major = parts[0];
  version.minor = parts[1];
  version.patch = parts[2];
  version.given = true;
  if (!version.at_least(0, 1, 0)) {
    return Error{fmt::format("--vllm-version: '{}' is older than vLLM's first release (0.1.0)", text)};
  }
  return version;
}

VllmBehavior vllm_behavior(const VllmVersion& version, std::optional<std::string> use_v1_env,
                           std::optional<std::string> estimate_graphs_env) {
  VllmBehavior b;
  b.version = version;
  if (!version.given) {
    b.notes.push_back("no --vllm-version: assumed a current vLLM (v0.21 or newer)");
  } else if (version.at_least(kNewestKnownVllmMajor, kNewestKnownVllmMinor + 1, 0)) {
    b.warnings.push_back(fmt::format(
        "vLLM {} is newer than any release oomdoc knows: sized with v{}.{}'s accounting, which "
        "may have changed since",
        version.text, kNewestKnownVllmMajor, kNewestKnownVllmMinor));
  }
  // V1 became the default engine in v0.8.0; VLLM_USE_V1 switched between them until V0 was removed
  // in v0.11.0 ("[V0 Deprecation] Remove LLMEngine", vllm-project/vllm#25033, September 2025; the
  // variable went with it). A current vLLM runs V1 whatever the variable says.
  b.v1_engine = version.at_least(0, 8, 0);
  if (use_v1_env && !version.at_least(0, 11, 0)) {
    b.v1_engine = *use_v1_env != "0";
    b.notes.push_back(fmt::format("VLLM_USE_V1={} selects the {} engine", *use_v1_env,
                                  b.v1_engine ? "V1" : "V0"));
  } else if (use_v1_env && *use_v1_env == "0") {
    b.warnings.push_back(fmt::format(
        "VLLM_USE_V1=0 is ignored: vLLM removed the V0 engine in v0.11.0, so {} runs V1; give "
        "--vllm-version 0.10.2 (the last release with V0) to size a V0 launch",
        version.given ? "vLLM " + version.text : "a current vLLM"));
  }
  if (!version.at_least(0, 6, 0)) b.block_sizes = {8, 16, 32};
  else if (!version.at_least(0, 9, 0)) b.block_sizes = {8, 16, 32, 64, 128};
  else if (!version.at_least(0, 11, 0)) b.block_sizes = {1, 8, 16, 32, 64, 128};
  else if (!version.at_least(0, 17, 0)) b.block_sizes = {1, 8, 16, 32, 64, 128, 256};
  b.user_block_size_kept = version.at_least(0, 17, 0);
  b.default_gpu_memory_utilization = version.at_least(0, 21, 0) ? kVllmDefaultGpuMemoryUtilization
                                                                  : kVllmDefaultGpuMemoryUtilizationBeforeV021;
  b.graph_memory_in_budget = version.at_least(0, 21, 0);
  if (estimate_graphs_env && *estimate_graphs_env == "0") {
    b.graph_memory_in_budget = false;
    b.notes.push_back("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0: CUDA graphs are not charged to the budget");
  }
  b.cuda_graphs = version.at_least(0, 2, 6);
  b.peak_from_used_memory = !b.v1_engine && version.at_least(0, 2, 5) && !version.at_least(0, 6, 4);
  // V1 in 0.8 added every non-torch byte on the device to the peak; V0 from v0.2.5 to v0.3.0 took
  // total - free, the CUDA context (and any other process) included.
  b.context_counts_against_budget = (b.v1_engine && !version.at_least(0, 9, 0)) ||
                                    (version.at_least(0, 2, 5) && !version.at_least(0, 3, 1));
  b.hybrid_kv_groups = b.v1_engine && version.at_least(0, 10, 0);
  b.hybrid_group_larger_kind_ratio_percent = version.at_least(0, 18, 0) ? 150 : version.at_least(0, 12, 0) ? 125 : 0;
  b.hybrid_groups_whole_model = version.at_least(0, 11, 0);
  b.kv_tokens_from_concurrency = b.v1_engine && version.at_least(0, 20, 0);
  b.gemma2_context_capped_to_window = version.at_least(0, 5, 1) && !version.at_least(0, 6, 5);
  b.startup_free_memory_check = b.v1_engine && version.at_least(0, 9, 0);
  b.always_chunked_prefill = b.v1_engine && !version.at_least(0, 11, 1);
  b.v0_long_context_chunking = version.at_least(0, 5, 4);
  b.v0_chunked_batched_tokens = version.at_least(0, 6, 5) ? 2048 : 512;
  b.sort_free_sampler = b.v1_engine && version.at_least(0, 17, 0);
  b.mla_dequantized_kv_b = version.at_least(0, 8, 0);
  b.mxfp4_triton_on_hopper = version.at_least(0, 12, 0);
  b.auto_float16_without_bf16 = version.at_least(0, 9, 0);
  b.float16_refused_for_unstable_models = version.at_least(0, 9, 0);
  b.max_len_startup_check = version.at_least(0, 2, 7);
  b.mla_latent_cache = version.at_least(0, 7, 1);
  b.mla_heads_padded_to_256 = !version.at_least(0, 7, 0);
  b.mla_entries_aligned_256 = version.at_least(0, 7, 2) && !version.at_least(0, 8, 0);
  b.pipeline_parallel = version.at_least(0, 5, 1);
  b.cpu_offload = version.at_least(0, 5, 3);
  b.chunked_prefill_takes_value = !version.at_least(0, 10, 0);
  b.longrope_original_context_default = version.at_least(0, 11, 1);
  b.fitted_scheduler_defaults = version.at_least(0, 12, 0);
  return b;
}

std::optional<std::string> v1_oracle_fallback(const VllmVersion& version, std::string_view architecture,
                                              std::string_view kv_cache_dtype, std::string_view dtype) {
  if (!version.given || !version.at_least(0, 8, 0) || version.at_least(0, 11, 0)) return std::nullopt;
  const int capability = min_compute_capability(architecture);
  if (capability && capability < 80 && !version.at_least(0, 10, 2)) return "Compute Capability < 8.0";
  if (!kv_cache_dtype.empty() && kv_cache_dtype != "auto") {
    const bool fp8 = kv_cache_dtype.rfind("fp8", 0) == 0;
    const bool fa3_reads_fp8 = capability == 90 || (capability >= 100 && version.at_least(0, 10, 0));
    if (!version.at_least(0, 8, 2) || (capability && !(fp8 && fa3_reads_fp8))) return "--kv-cache-dtype";
  }
  if ((dtype == "float" || dtype == "float32") && !version.at_least(0, 9, 2)) return "--dtype torch.float32";
  return std::nullopt;
}

Result<VllmVersion> vllm_version_for(std::string_view flag, const std::optional<std::string>& image_tag) {
  auto version = parse_vllm_version(flag);
  if (!version) return version;
  if (!version->given && image_tag) {
    if (auto tagged = parse_vllm_version(*image_tag); tagged && tagged->given) return tagged;
  }
  return version;
}

}  // namespace oomdoc
