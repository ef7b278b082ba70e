// vLLM command-line reader. The flag names and their meaning are vLLM's (vllm/engine/arg_utils.py,
// vllm/config/*.py); what each does to memory lives in analyses/vllm_*.cpp, not here.
#include "readers/vllm_args.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>

#include "core/text.h"
#include "model/vllm_kv_dtype.h"

namespace oomdoc {
namespace {

// Flags that take no value. Knowing them keeps `--trust-remote-code MODEL` from eating MODEL.
const std::set<std::string>& boolean_flags() {
  static const std::set<std::string> kFlags = {
      "enforce-eager", "no-enforce-eager", "enable-prefix-caching", "no-enable-prefix-caching",
      "enable-chunked-prefill", "no-enable-chunked-prefill", "enable-lora", "fully-sharded-loras",
      "trust-remote-code", "disable-log-requests", "disable-log-stats", "enable-log-requests",
      "disable-custom-all-reduce", "enable-auto-tool-choice", "enable-expert-parallel",
      "disable-sliding-window", "disable-cascade-attn", "skip-tokenizer-init", "enable-sleep-mode",
      "calculate-kv-scales", "disable-frontend-multiprocessing", "enable-reasoning",
      "enable-prompt-tokens-details", "enable-server-load-tracking", "async-scheduling",
      "headless", "enable-eplb", "no-enable-log-requests", "enable-force-include-usage",
      "use-v2-block-manager", "disable-fastapi-docs", "return-tokens-as-token-ids"};
  return kFlags;
}

// Flags whose value changes memory in a way oomdoc does not model; listed back to the user.
const std::set<std::string>& unmodeled_flags() {
  static const std::set<std::string> kFlags = {
      "enable-lora", "max-loras", "max-lora-rank", "max-cpu-loras", "fully-sharded-loras",
      "lora-modules", "max-seq-len-to-capture", "compilation-config", "cuda-graph-sizes",
      "kv-transfer-config", "rope-theta", "swap-space", "enable-expert-parallel",
      "mm-processor-kwargs", "long-lora-scaling-factors", "calculate-kv-scales",
      "disable-sliding-window", "enable-sleep-mode", "max-parallel-loading-workers",
      "kv-offloading-size", "mamba-ssm-cache-dtype", "async-scheduling", "max-cudagraph-capture-size",
      "cudagraph-capture-sizes", "decode-context-parallel-size",
      // EPLB's redundant experts are more expert weights on every GPU.
      "eplb-config", "num-redundant-experts"};
  return kFlags;
}

// vLLM flags known to leave GPU memory alone: server, tokenizer, logging, download and API
// settings (vllm/engine/arg_utils.py, vllm/entrypoints/openai/cli_args.py). A flag in none of the
// lists is unknown: listed back unchecked, or refused when it is a near miss of a memory flag.
const std::set<std::string>& no_memory_effect_flags() {
  static const std::set<std::string> kFlags = {
      "host", "port", "uds", "uvicorn-log-level", "disable-uvicorn-access-log", "allow-credentials",
      "allowed-origins", "allowed-methods", "allowed-headers", "api-key", "served-model-name",
      "chat-template", "chat-template-content-format", "response-role", "ssl-keyfile", "ssl-certfile",
      "ssl-ca-certs", "ssl-cert-reqs", "enable-ssl-refresh", "root-path", "middleware",
      "return-tokens-as-token-ids", "disable-frontend-multiprocessing", "enable-auto-tool-choice",
      "tool-call-parser", "tool-parser-plugin", "reasoning-parser", "enable-reasoning", "tokenizer",
      "tokenizer-mode", "tokenizer-revision", "revision", "code-revision", "trust-remote-code",
      "download-dir", "load-format", "config-format", "seed", "disable-log-stats", "disable-log-requests",
      "enable-log-requests", "no-enable-log-requests", "enable-log-outputs", "max-log-len",
      "worker-use-ray", "distributed-executor-backend", "ray-workers-use-nsight",
      "disable-custom-all-reduce", "tokenizer-pool-size", "tokenizer-pool-type",
      "tokenizer-pool-extra-config", "guided-decoding-backend", "structured-outputs-config",
      "max-logprobs", "logprobs-mode", "skip-tokenizer-init", "otlp-traces-endpoint",
      "collect-detailed-traces", "scheduling-policy", "disable-fastapi-docs",
      "enable-prompt-tokens-details", "enable-server-load-tracking", "enable-force-include-usage",
      "headless", "api-server-count", "data-parallel-address", "data-parallel-rpc-port",
      "data-parallel-size-local", "data-parallel-start-rank", "data-parallel-backend",
      "data-parallel-hybrid-lb", "model-impl", "generation-config", "override-generation-config",
      "logits-processor-pattern", "hf-token", "hf-config-path", "log-config-file", "use-v2-block-manager",
      "num-scheduler-steps", "multi-step-stream-outputs", "preemption-mode", "ignore-patterns",
      "pt-load-map-location", "override-pooler-config", "pooler-config",
      "kv-events-config", "worker-cls", "worker-extension-cls", "enable-request-id-headers",
      "disable-mm-preprocessor-cache", "mm-processor-cache-gb", "media-io-kwargs",
      "interleave-mm-strings", "allowed-local-media-path", "show-hidden-metrics-for-version",
      "prefix-caching-hash-algo", "disable-async-output-proc", "override-neuron-config",
      "scheduler-cls", "scheduler-delay-factor", "enable-prompt-embeds", "device",
      "quantization-param-path", "tool-server", "enable-tokenizer-info-endpoint", "chat-template-kwargs",
      "trust-request-chat-template", "exclude-tools-when-tool-choice-none", "disable-log-stats",
      "max-waiting-queue-length", "log-error-stack", "enable-prefix-caching-hash", "lora-dtype",
      "disable-cascade-attn", "enable-eplb",
      "expert-placement-strategy", "long-prefill-token-threshold", "max-num-partial-prefills",
      "max-long-partial-prefills", "disable-chunked-mm-input",
      "ngram-prompt-lookup-max", "ngram-prompt-lookup-min", "spec-decoding-acceptance-method",
      "enable-lora-bias", "max-prompt-adapters", "max-prompt-adapter-token", "enable-prompt-adapter",
      "prompt-adapters", "qlora-adapter-name-or-path", "kv-sharing-fast-prefill"};
  return kFlags;
}

// The flags apply_flag reads for memory: a near miss of one of these is a typo that changes the answer.
const std::vector<std::string>& memory_flags() {
  static const std::vector<std::string> kFlags = {
      "model", "gpu-memory-utilization", "max-model-len", "max-num-seqs", "max-num-batched-tokens",
      "block-size", "tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size",
      "num-gpu-blocks-override", "num-speculative-tokens", "kv-cache-dtype", "dtype", "quantization",
      "enforce-eager", "enable-prefix-caching", "enable-chunked-prefill", "cpu-offload-gb",
      "kv-cache-memory-bytes", "limit-mm-per-prompt", "speculative-config", "speculative-model",
      "speculative-draft-tensor-parallel-size", "hf-overrides"};
  return kFlags;
}

// The memory flag `name` most likely misspells (core/text.h closest_spelling), or the one it abbreviates.
std::optional<std::string> near_memory_flag(const std::string& name) {
  // An abbreviation ("--tensor-parallel"): argparse may expand it or refuse it depending on the
  // version; either way the flag meant is a memory flag, so it is spelled out or refused here.
  if (name.size() >= 4) {
    for (const std::string& flag : memory_flags()) {
      if (flag.size() > name.size() && flag.compare(0, name.size(), name) == 0) return flag;
    }
  }
  return closest_spelling(name, memory_flags());
}

// The short memory flag (-tp, -pp, -dp) that a single-dash word not vLLM's misspells: one with
// its value glued on (-tp2), or one letter more (-tpp). argparse has no such option and exits;
// read as an unknown flag, the sizing would quietly take one GPU. Returns what was meant.
std::optional<std::string> near_short_memory_flag(const std::string& body) {
  static const std::vector<std::string> kShort = {"tp", "pp", "dp"};
  // vLLM's own three-letter short flags near them that oomdoc does not read (data-parallel
  // addressing, prefill context parallelism; -dpl and -dcp are normalize_flag's): real, not typos.
  static const std::set<std::string> kReal = {"dpn", "dpr", "dpa", "dpp", "dpb", "dpe", "dph", "dpm", "pcp"};
  if (kReal.count(body)) return std::nullopt;
  for (const std::string& flag : kShort) {
    if (body.size() > flag.size() && body.compare(0, flag.size(), flag) == 0 &&
        std::all_of(body.begin() + static_cast<std::ptrdiff_t>(flag.size()), body.end(),
                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
      return fmt::format("-{} {}", flag, body.substr(flag.size()));
    }
  }
  if (body.size() != 3) return std::nullopt;
  if (auto meant = closest_spelling(body, kShort)) return "-" + *meant;
  return std::nullopt;
}

std::string normalize_flag(std::string_view flag) {
  std::string name(flag);
  std::replace(name.begin(), name.end(), '_', '-');
  static const std::map<std::string, std::string> kShort = {
      {"tp", "tensor-parallel-size"}, {"pp", "pipeline-parallel-size"},
      {"dp", "data-parallel-size"},   {"q", "quantization"},
      {"O", "compilation-config"},    {"kv-cache-memory", "kv-cache-memory-bytes"},
      {"dcp", "decode-context-parallel-size"}, {"dpl", "data-parallel-size-local"},
      // -O3: the optimization level glued to its flag (vllm/config/compilation.py levels 0-3).
      {"O0", "compilation-config"}, {"O1", "compilation-config"}, {"O2", "compilation-config"},
      {"O3", "compilation-config"}};
  auto it = kShort.find(name);
  return it == kShort.end() ? name : it->second;
}

// Limits far beyond any real launch keep the arithmetic downstream inside 64 bits.
constexpr uint64_t kMaxCount = 1ull << 32;        // tokens, sequences, blocks
constexpr uint64_t kMaxParallel = 4096;           // GPUs in one dimension
constexpr uint64_t kMaxKvBytes = 1ull << 50;      // 1 PiB

// Flags vLLM reads with human_readable_int (vllm/engine/arg_utils.py): the others are plain int.
bool takes_suffixes(std::string_view flag) {
  return flag == "max-model-len" || flag == "max-num-batched-tokens" || flag == "kv-cache-memory-bytes";
}

// Why a value with a `$` or a backquote is no number: the shell would have filled it in, and
// oomdoc does not run commands or know variables set outside the text.
std::string unexpanded_hint(const std::string& value) {
  if (value.find_first_of("$`") == std::string::npos) return "";
  return ": a shell expansion oomdoc cannot fill in (it runs no command and knows only the variables the "
         "command text sets); give its value";
}

Result<uint64_t> positive_count(const std::string& flag, const std::string& value,
                                uint64_t limit = kMaxCount) {
  if (auto hint = unexpanded_hint(value); !hint.empty()) return Error{fmt::format("--{}: '{}'{}", flag, value, hint)};
  // vLLM's human_readable_int: k/m/g/t are decimal and take decimals (25.6k); K/M/G/T are binary
  // and do not.
  const char last = value.empty() ? '\0' : value.back();
  const bool suffixed = std::isalpha(static_cast<unsigned char>(last)) != 0;
  if (suffixed && !takes_suffixes(flag)) {
    return Error{fmt::format("--{}: '{}' is not a whole number (vLLM reads it with int(); k/K suffixes are taken by "
                             "--max-model-len, --max-num-batched-tokens and --kv-cache-memory-bytes only)", flag, value)};
  }
  if ((last == 'K' || last == 'M' || last == 'G' || last == 'T') && value.find('.') != std::string::npos) {
    const std::string number = value.substr(0, value.size() - 1);
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(last)));
    return Error{fmt::format("--{}: '{}': vLLM refuses it: \"Decimals are not allowed with binary suffixes like {}. Did "
                             "you mean to use {}{} instead?\" ({}{} is {} x 10^{}; or a whole number of {})", flag, value,
                             last, number, lower, number, lower, number,
                             lower == 'k' ? 3 : lower == 'm' ? 6 : lower == 'g' ? 9 : 12, last)};
  }
  auto count = parse_vllm_token_count(value);
  if (!count && !value.empty() && value.find_first_not_of("0123456789") == std::string::npos) {
    return Error{fmt::format("--{}: {} is beyond any real launch (at most {})", flag, value, limit)};
  }
  if (!count || *count == 0) {
    return Error{fmt::format("--{}: '{}' is not a positive whole number", flag, value)};
  }
  if (*count > limit) return Error{fmt::format("--{}: {} is beyond any real launch (at most {})", flag, value, limit)};
  return *count;
}

Result<double> number(const std::string& flag, const std::string& value) {
  if (auto parsed = parse_decimal<double>(value)) return *parsed;
  return Error{fmt::format("--{}: '{}' is not a number{}", flag, value, unexpanded_hint(value))};
}

bool truthy(const std::string& value) {
  const std::string lower = to_lower(value);
  return !(lower == "false" || lower == "0" || lower == "no" || lower == "none");
}

std::string unquote(std::string value) {
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
      value.back() == value.front()) {
    return value.substr(1, value.size() - 2);
  }
  return value;
}

// --limit-mm-per-prompt: JSON '{"image": 2}' (current) or 'image=2,audio=0' (older).
Status read_mm_limits(const std::string& value, ServeConfig& config) {
  if (!value.empty() && value.front() == '{') {
    auto doc = nlohmann::json::parse(value, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
      return Error{fmt::format("--limit-mm-per-prompt: '{}' is not a JSON object", value)};
    }
    for (const auto& [modality, count] : doc.items()) {
      if (count.is_number_unsigned()) config.limit_mm_per_prompt[modality] = count.get<uint64_t>();
      else if (count.is_object() && count.contains("count") && count["count"].is_number_unsigned())
        config.limit_mm_per_prompt[modality] = count["count"].get<uint64_t>();
    }
    return Ok{};
  }
  size_t start = 0;
  while (start < value.size()) {
    size_t end = value.find(',', start);
    if (end == std::string::npos) end = value.size();
    std::string item = value.substr(start, end - start);
    auto eq = item.find('=');
    auto count = eq == std::string::npos ? std::nullopt : parse_vllm_token_count(item.substr(eq + 1));
    if (!count) return Error{fmt::format("--limit-mm-per-prompt: '{}' is not MODALITY=COUNT", item)};
    config.limit_mm_per_prompt[item.substr(0, eq)] = *count;
    start = end + 1;
  }
  return Ok{};
}

// --speculative-config '{"method": "mtp", "num_speculative_tokens": 3}' (or "model": "...",
// "draft_tensor_parallel_size": 1, "quantization": "..."): SpeculativeConfig's fields
// (vllm/config/speculative.py), which analyses/vllm_speculative.cpp sizes.
Status read_speculative_config(const std::string& value, ServeConfig& config) {
  auto doc = nlohmann::json::parse(value, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Error{fmt::format("--speculative-config: '{}' is not a JSON object", value)};
  }
  // SpeculativeConfig._verify_args refuses the target's name for the draft's parallelism.
  if (doc.contains("tensor_parallel_size")) {
    return Error{"--speculative-config: vLLM refuses it: \"'tensor_parallel_size' is not a valid argument in the "
                 "speculative_config. Please pass 'draft_tensor_parallel_size' instead.\""};
  }
  auto count = [&](const char* key, std::optional<uint64_t>& into) -> Status {
    if (!doc.contains(key) || doc[key].is_null()) return Ok{};
    if (!doc[key].is_number_unsigned() || doc[key].get<uint64_t>() == 0 || doc[key].get<uint64_t>() > kMaxCount) {
      return Error{fmt::format("--speculative-config: {}: '{}' is not a positive whole number", key, doc[key].dump())};
    }
    into = doc[key].get<uint64_t>();
    return Ok{};
  };
  if (auto s = count("num_speculative_tokens", config.num_speculative_tokens); !s) return s;
  if (auto s = count("draft_tensor_parallel_size", config.draft_tensor_parallel_size); !s) return s;
  auto text = [&](const char* key, std::optional<std::string>& into) {
    if (doc.contains(key) && doc[key].is_string() && !doc[key].get<std::string>().empty()) into = doc[key].get<std::string>();
  };
  text("method", config.speculative_method);
  text("model", config.speculative_model);
  text("quantization", config.speculative_quantization);
  return Ok{};
}

// Applies one flag. `value` is empty for boolean flags; `original` is the text for reports.
Status apply_flag(const std::string& name, const std::optional<std::string>& value,
                  const std::string& original, ServeConfig& config) {
  auto need = [&]() -> Result<std::string> {
    if (!value) return Error{fmt::format("--{} needs a value", name)};
    return unquote(*value);
  };
  auto bool_value = [&]() { return !value || truthy(*value); };
  // "--port 8111--gpu-memory-utilization 0.95": a missing space glues a flag onto the value before
  // it. vLLM's argparse then refuses the value (or takes it whole, losing the flag); either way the
  // memory flag is not what vLLM reads.
  // Flags whose values are names or paths ("--served-model-name my--max-model-len") are left out:
  // a double dash is plausible there.
  static const std::set<std::string> free_text = {"served-model-name", "tokenizer", "revision", "tokenizer-revision",
                                                  "code-revision", "download-dir", "chat-template", "api-key",
                                                  "root-path", "ssl-keyfile", "ssl-certfile", "lora-modules"};
  if (value && config.launcher != "LLM(...)" && !free_text.count(name)) {
    const size_t dashes = value->find("--");
    if (dashes != std::string::npos && dashes > 0) {
      std::string glued = value->substr(dashes + 2);
      glued = glued.substr(0, glued.find_first_of("= "));
      std::replace(glued.begin(), glued.end(), '_', '-');
      const auto& flags = memory_flags();
      // ("--model" is left out: "my--model" is a plausible name, not a lost flag.)
      if (glued != "model" && std::find(flags.begin(), flags.end(), glued) != flags.end()) {
        return Error{fmt::format("--{} {}: --{} is glued to the value before it (a missing space?); vLLM would not "
                                 "read it as a flag", name, *value, glued)};
      }
    }
  }

  if (name == "model") {
    auto v = need();
    if (!v) return v.error();
    config.model = *v;
  } else if (name == "gpu-memory-utilization") {
    auto v = need();
    if (!v) return v.error();
    auto u = number(name, *v);
    if (!u) return u.error();
    if (!(*u > 0 && *u <= 1)) {
      return Error{fmt::format("--gpu-memory-utilization: {} is outside (0, 1]", *v)};
    }
    config.gpu_memory_utilization = *u;
  } else if (name == "max-model-len") {
    auto v = need();
    if (!v) return v.error();
    if (*v == "-1" || *v == "auto") {
      config.max_model_len_auto = true;
    } else {
      auto n = positive_count(name, *v);
      if (!n) return n.error();
      config.max_model_len = *n;
    }
  } else if (name == "max-num-seqs" || name == "max-num-batched-tokens" || name == "block-size" ||
             name == "tensor-parallel-size" || name == "pipeline-parallel-size" ||
             name == "data-parallel-size" || name == "num-gpu-blocks-override" ||
             name == "num-speculative-tokens") {
    auto v = need();
    if (!v) return v.error();
    bool parallel = name.find("parallel") != std::string::npos;
    auto n = positive_count(name, *v, parallel ? kMaxParallel : kMaxCount);
    if (!n) return n.error();
    if (name == "block-size" && *n > 4096) return Error{fmt::format("--block-size: {} tokens per block is beyond vLLM's sizes", *n)};
    if (name == "max-num-seqs") config.max_num_seqs = *n;
    else if (name == "max-num-batched-tokens") config.max_num_batched_tokens = *n;
    else if (name == "block-size") config.block_size = *n;
    else if (name == "tensor-parallel-size") config.tensor_parallel_size = *n;
    else if (name == "pipeline-parallel-size") config.pipeline_parallel_size = *n;
    else if (name == "data-parallel-size") config.data_parallel_size = *n;
    else if (name == "num-gpu-blocks-override") config.num_gpu_blocks_override = *n;
    else config.num_speculative_tokens = *n;
  } else if (name == "kv-cache-dtype") {
    auto v = need();
    if (!v) return v.error();
    if (auto known = find_vllm_kv_cache_dtype(*v); !known) return known.error();
    config.kv_cache_dtype = *v;
  } else if (name == "dtype") {
    auto v = need();
    if (!v) return v.error();
    // vLLM's choices (ModelDType); argparse refuses the rest with "invalid choice".
    static const std::set<std::string> kKnown = {"auto", "half", "float16", "bfloat16", "float", "float32"};
    if (!kKnown.count(*v)) {
      const std::string meant = *v == "fp16" ? " (write float16 or half)" : *v == "bf16" ? " (write bfloat16)"
                                : *v == "fp32" ? " (write float32)" : "";
      return Error{fmt::format("--dtype: '{}' is not one of auto, half, float16, bfloat16, float, float32{}; vLLM "
                               "would exit with 'invalid choice'", *v, meant)};
    }
    config.dtype = *v;
  } else if (name == "quantization") {
    auto v = need();
    if (!v) return v.error();
    config.quantization = *v;
  } else if (name == "enforce-eager" || name == "no-enforce-eager") {
    // A bool field of vLLM's ModelConfig: argparse's BooleanOptionalAction gives it a --no- form.
    config.enforce_eager = name == "enforce-eager" && bool_value();
  } else if (name == "enable-prefix-caching" || name == "no-enable-prefix-caching") {
    config.enable_prefix_caching = (name == "enable-prefix-caching") && bool_value();
  } else if (name == "enable-chunked-prefill" || name == "no-enable-chunked-prefill") {
    config.enable_chunked_prefill = (name == "enable-chunked-prefill") && bool_value();
    config.chunked_prefill_value_given = value.has_value();
  } else if (name == "cpu-offload-gb") {
    auto v = need();
    if (!v) return v.error();
    auto gb = number(name, *v);
    if (!gb) return gb.error();
    if (*gb < 0 || *gb > 1e6) return Error{fmt::format("--cpu-offload-gb: {} is outside 0 to 1000000", *v)};
    config.cpu_offload_gb = *gb;
  } else if (name == "kv-cache-memory-bytes") {
    auto v = need();
    if (!v) return v.error();
    auto n = positive_count(name, *v, kMaxKvBytes);
    if (!n) return n.error();
    config.kv_cache_memory_bytes = *n;
  } else if (name == "limit-mm-per-prompt") {
    auto v = need();
    if (!v) return v.error();
    return read_mm_limits(*v, config);
  } else if (name == "speculative-config") {
    auto v = need();
    if (!v) return v.error();
    return read_speculative_config(*v, config);
  } else if (name == "speculative-model") {
    auto v = need();
    if (!v) return v.error();
    config.speculative_model = *v;
  } else if (name == "speculative-draft-tensor-parallel-size") {
    auto v = need();
    if (!v) return v.error();
    auto n = positive_count(name, *v, kMaxParallel);
    if (!n) return n.error();
    config.draft_tensor_parallel_size = *n;
  } else if (name == "hf-overrides") {
    auto v = need();
    if (!v) return v.error();
    auto doc = nlohmann::json::parse(*v, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
      return Error{fmt::format("--hf-overrides: '{}' is not a JSON object", *v)};
    }
    if (doc.contains("max_position_embeddings") && doc["max_position_embeddings"].is_number_unsigned()) {
      uint64_t positions = doc["max_position_embeddings"].get<uint64_t>();
      if (positions == 0 || positions > kMaxCount) {
        return Error{fmt::format("--hf-overrides: max_position_embeddings {} is outside 1 to {}", positions, kMaxCount)};
      }
      config.max_position_override = positions;
    }
    for (const char* key : {"rope_scaling", "rope_parameters"}) {
      if (!doc.contains(key)) continue;
      if (doc[key].is_object()) config.rope_scaling_override = doc[key].dump();
      else config.not_modeled.push_back(original);
      break;
    }
  } else if (name == "runner" || name == "convert" || name == "task") {
    // vLLM's model_config runner (v0.10+: --runner, --convert) or task (before: --task). A pooling
    // model runs the pooler where a generator samples: no sampler in the profile run or warm-up.
    auto v = need();
    if (!v) return v.error();
    static const std::set<std::string> kPooling = {"pooling", "embed", "embedding", "classify", "score", "reward"};
    if (kPooling.count(to_lower(*v))) config.pooling_flag = original;
    else config.ignored.push_back(original);
  } else if (name == "rope-scaling") {
    // Older vLLM's --rope-scaling '{"rope_type": "yarn", "factor": 4.0, ...}' (now --hf-overrides).
    auto v = need();
    if (!v) return v.error();
    auto doc = nlohmann::json::parse(*v, nullptr, false);
    if (!doc.is_discarded() && doc.is_object()) config.rope_scaling_override = doc.dump();
    else config.not_modeled.push_back(original);
  } else if (unmodeled_flags().count(name)) {
    if (name == "enable-lora") config.enable_lora = bool_value();
    config.not_modeled.push_back(original);
  } else if (no_memory_effect_flags().count(name) || boolean_flags().count(name)) {
    config.ignored.push_back(original);
  } else if (auto meant = near_memory_flag(name)) {
    // A typo of a flag that sizes memory would silently change the answer; vLLM itself refuses it.
    if (config.launcher == "LLM(...)") {
      std::string key = name, wanted = *meant;
      std::replace(key.begin(), key.end(), '-', '_');
      std::replace(wanted.begin(), wanted.end(), '-', '_');
      return Error{fmt::format("{}: not a vLLM argument (did you mean {}?); LLM(...) would raise "
                               "'TypeError: ... got an unexpected keyword argument '{}''", key, wanted, key)};
    }
    if (meant->compare(0, name.size(), name) == 0) {
      return Error{fmt::format("--{}: an abbreviation of --{}; write it out (vLLM's argument parser expands or "
                               "refuses abbreviations depending on its version)", name, *meant)};
    }
    return Error{fmt::format("--{}: not a vLLM flag (did you mean --{}?); vLLM would exit with "
                             "'unrecognized arguments'", name, *meant)};
  } else {
    config.unknown.push_back(original);
  }
  return Ok{};
}

// The flag as written (-O3, -p 8000, --port 8000), for the lists of ignored and unknown flags.
std::string describe(std::string_view dashes, const std::string& flag, const std::optional<std::string>& value) {
  return value ? fmt::format("{}{} {}", dashes, flag, *value) : std::string(dashes) + flag;
}

// A YAML scalar as PyYAML reads it: a boolean (true/false/yes/no/on/off in their three cases), or
// nullopt for anything else (a quoted scalar is always a string).
std::optional<bool> yaml_boolean(const YAML::Node& n) {
  if (!n.IsScalar() || n.Tag() == "!") return std::nullopt;
  const std::string& s = n.Scalar();
  for (const char* word : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"}) {
    if (s == word) return true;
  }
  for (const char* word : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"}) {
    if (s == word) return false;
  }
  return std::nullopt;
}

// The flags a `--config FILE` YAML stands for, as vLLM's FlexibleArgumentParser turns it into
// arguments (_load_config_file): `key: value` -> --key value, a boolean true -> --key and false
// left out (v0.5-v0.9 passed --enable-chunked-prefill False explicitly; left out here too, as the
// version is not known yet: its default stands), a list -> --key v1 v2 (an empty one left out), a
// mapping -> its JSON with the YAML's own types.
Result<std::vector<std::string>> config_file_words(const std::string& path) {
  YAML::Node root;
  try {
    if (std::filesystem::is_directory(path)) throw YAML::BadFile(path);
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return Error{fmt::format("--config {}: cannot read the file; oomdoc reads it to see the settings vLLM would take "
                             "from it (give its path on this machine)", path)};
  } catch (const YAML::Exception& e) {
    return Error{fmt::format("--config {}: not valid YAML (line {}, column {}: {})", path, e.mark.line + 1,
                             e.mark.column + 1, e.msg)};
  }
  if (!root.IsMap()) return Error{fmt::format("--config {}: expected a mapping of vLLM arguments (key: value)", path)};
  std::function<nlohmann::json(const YAML::Node&)> to_json = [&](const YAML::Node& n) -> nlohmann::json {
    if (n.IsMap()) {
      nlohmann::json j = nlohmann::json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = to_json(kv.second);
      return j;
    }
    if (n.IsSequence()) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& item : n) j.push_back(to_json(item));
      return j;
    }
    if (n.IsNull()) return nullptr;
    const std::string& s = n.Scalar();
    if (n.Tag() == "!") return s;   // quoted: a string whatever it looks like
    if (auto b = yaml_boolean(n)) return *b;
    if (auto i = parse_decimal<int64_t>(s)) return *i;
    try {
      size_t used = 0;
      const double d = std::stod(s, &used);
      if (used == s.size() && std::isfinite(d)) return d;
    } catch (const std::exception&) {
    }
    return s;
  };
  std::vector<std::string> out;
  for (const auto& kv : root) {
    const std::string name = kv.first.as<std::string>();
    const std::string key = "--" + name;
    const YAML::Node& v = kv.second;
    if (v.IsScalar()) {
      if (auto b = yaml_boolean(v)) {
        if (*b) out.push_back(key);
      } else {
        out.push_back(key);
        out.push_back(v.Scalar());
      }
    } else if (v.IsSequence()) {
      if (v.size() == 0) continue;
      out.push_back(key);
      for (const auto& item : v) out.push_back(item.IsScalar() ? item.Scalar() : to_json(item).dump());
    } else if (v.IsMap()) {
      out.push_back(key);
      out.push_back(to_json(v).dump());
    }
  }
  return out;
}

// Flags and one positional model from words[start...]. A `--config FILE`'s settings come first,
// so the command line's own flags override them, as in vLLM.
Status read_flags(const std::vector<std::string>& input, size_t start, bool model_positional,
                  ServeConfig& config) {
  std::vector<std::string> from_file, rest;
  for (size_t i = start; i < input.size(); ++i) {
    std::optional<std::string> path;
    if (input[i] == "--config") {
      // vLLM's own words (FlexibleArgumentParser._pull_args_from_config).
      if (i + 1 >= input.size() || input[i + 1].rfind("-", 0) == 0) return Error{"--config: vLLM refuses it: \"No config file specified!\""};
      path = input[++i];
    } else if (input[i].rfind("--config=", 0) == 0) {
      path = input[i].substr(9);
    }
    if (!path) {
      rest.push_back(input[i]);
      continue;
    }
    if (config.config_file) return Error{"--config: vLLM refuses it: \"More than one config file specified!\""};
    auto words = config_file_words(*path);
    if (!words) return words.error();
    from_file.insert(from_file.end(), words->begin(), words->end());
    config.config_file = *path;
  }
  std::vector<std::string> words = std::move(from_file);
  words.insert(words.end(), rest.begin(), rest.end());
  start = 0;
  std::optional<std::string> positional;
  for (size_t i = start; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word.size() < 2 || word[0] != '-') {
      if (model_positional && !positional) {
        positional = word;
        continue;
      }
      config.unknown.push_back(word);
      continue;
    }
    const std::string_view dashes = word[1] == '-' ? "--" : "-";
    std::string body = word.substr(dashes.size());
    std::optional<std::string> value;
    auto eq = body.find('=');
    if (eq != std::string::npos) {
      value = body.substr(eq + 1);
      body = body.substr(0, eq);
    }
    std::string name = normalize_flag(body);
    // vLLM's short forms take one dash only (-tp, -pp, -q, -O3): argparse refuses --tp.
    std::string dashed = body;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    if (dashes == "--" && name != dashed && name != "kv-cache-memory-bytes") {
      return Error{fmt::format("--{}: not a vLLM flag; its short form is -{} (or --{}); vLLM would exit with "
                               "'unrecognized arguments'", body, body, name)};
    }
    if (dashes == "-" && name == dashed) {
      if (auto meant = near_short_memory_flag(body)) {
        return Error{fmt::format("-{}: not a vLLM flag (did you mean {}?); vLLM would exit with 'unrecognized "
                                 "arguments'", body, *meant)};
      }
    }
    const bool glued_level = body.size() == 2 && body[0] == 'O' && std::isdigit(static_cast<unsigned char>(body[1]));
    // Only --enable-chunked-prefill takes an explicit True/False after it: vLLM declared it with
    // nargs="?" (StoreBoolean, v0.5-v0.9); the other switches are store_true or
    // BooleanOptionalAction, and argparse leaves the word as an unrecognized argument.
    if (!value && boolean_flags().count(name) && i + 1 < words.size()) {
      const std::string next = to_lower(words[i + 1]);
      if (next == "true" || next == "false") {
        if (name != "enable-chunked-prefill") {
          return Error{fmt::format("{}{} {}: the flag takes no value; vLLM would exit with 'unrecognized arguments: "
                                   "{}'{}", dashes, body, words[i + 1], words[i + 1],
                                   next == "false" && boolean_flags().count("no-" + name)
                                       ? fmt::format(" (to turn it off: --no-{})", name)
                                       : std::string())};
        }
        value = words[++i];
      }
    }
    if (!value && !glued_level && !boolean_flags().count(name) && i + 1 < words.size()) {
      const std::string& next = words[i + 1];
      // A value may itself start with '-' only as a number (--max-model-len -1).
      bool next_is_value = next.empty() || next[0] != '-' ||
                           (next.size() > 1 && std::isdigit(static_cast<unsigned char>(next[1])));
      if (next_is_value) value = words[++i];
      // A list flag takes every number after it (--cudagraph-capture-sizes 1 2 4 8).
      if (name == "cudagraph-capture-sizes") {
        while (i + 1 < words.size() && !words[i + 1].empty() &&
               std::all_of(words[i + 1].begin(), words[i + 1].end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
          *value += " " + words[++i];
        }
      }
    }
    auto status = apply_flag(name, value, describe(dashes, body, value), config);
    if (!status) return status;
  }
  // `vllm serve MODEL --model OTHER`: the positional MODEL wins (ServeSubcommand.cmd sets
  // args.model = args.model_tag).
  if (positional) {
    if (!config.model.empty() && config.model != *positional) {
      config.ignored.push_back(fmt::format("--model {} (the positional {} wins, as in vllm serve)", config.model, *positional));
    }
    config.model = *positional;
  }
  return Ok{};
}

// A Python literal: a string, number, True/False/None, or a dict or list. Anything else
// (torch.cuda.device_count(), MODEL_PATH, 32 * 1024) is an expression only Python can evaluate.
bool python_literal(std::string_view v) {
  if (v.empty()) return false;
  if (v.front() == '"' || v.front() == '\'' || v.front() == '{' || v.front() == '[') return true;
  if (v == "True" || v == "False" || v == "None") return true;
  if (!std::isdigit(static_cast<unsigned char>(v.front())) && v.front() != '-' && v.front() != '+' && v.front() != '.') {
    return false;
  }
  return std::all_of(v.begin(), v.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E' ||
           c == '_';
  });
}

// LLM(model="...", tensor_parallel_size=2, ...): split the argument list at top-level commas.
Status read_llm_call(std::string_view text, ServeConfig& config) {
  auto open = text.find("LLM(");
  auto close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return Error{"LLM(...): no closing parenthesis"};
  }
  std::string_view args = text.substr(open + 4, close - open - 4);
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  char quote = 0;
  for (char c : args) {
    if (quote) {
      current.push_back(c);
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
      continue;
    }
    current.push_back(c);
  }
  if (quote || depth != 0) return Error{"LLM(...): unbalanced quotes or brackets"};
  parts.push_back(current);
  auto trim = [](std::string s) {
    auto not_space = [](unsigned char c) { return !std::isspace(c); };
    s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
    s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
    return s;
  };
  // The keyword as the user wrote it, in messages that read-flags word as --flag-name.
  auto in_python_words = [](Status status, const std::string& name, const std::string& key) -> Status {
    if (status) return status;
    const std::string& message = status.error().message;
    const std::string flag = "--" + name;
    if (message.rfind(flag, 0) != 0) return status;   // already in the keyword's words
    return Error{"LLM(...): " + key + message.substr(flag.size())};
  };
  std::set<std::string> keywords_seen;
  for (auto& raw : parts) {
    std::string part = trim(raw);
    if (part.empty()) continue;
    auto eq = part.find('=');
    if (eq == std::string::npos) {
      if (!config.model.empty()) return Error{fmt::format("LLM(...): unexpected argument '{}'", part)};
      config.model = unquote(part);
      continue;
    }
    std::string key = trim(part.substr(0, eq));
    // What Python itself refuses: a keyword that is no identifier, or one given twice.
    const bool identifier = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0])) &&
                            std::all_of(key.begin(), key.end(), [](char c) {
                              return c == '_' || std::isalnum(static_cast<unsigned char>(c));
                            });
    if (!identifier) {
      return Error{fmt::format("LLM(...): '{}=' is no Python keyword (Python: SyntaxError); write it with "
                               "underscores", printable(key, 40))};
    }
    if (!keywords_seen.insert(key).second) {
      return Error{fmt::format("LLM(...): {} given twice (Python: SyntaxError: keyword argument repeated)", key)};
    }
    const std::string written = trim(part.substr(eq + 1));
    if (!python_literal(written)) {
      return Error{fmt::format("LLM(...): {}={} is a Python expression; oomdoc does not run Python: write the value "
                               "it stands for ({}={})", key, written, key,
                               key == "model" ? "\"org/name\" or a path" : "a number")};
    }
    std::string value = unquote(written);
    // Python's digit grouping (PEP 515: 8_192, 0.9_5): one underscore between two digits.
    if (value == written && value.find('_') != std::string::npos) {
      bool grouped = true;
      for (size_t k = 0; k < value.size(); ++k) {
        if (value[k] != '_') continue;
        auto digit = [&](size_t at) { return std::isdigit(static_cast<unsigned char>(value[at])) != 0; };
        grouped = grouped && k > 0 && k + 1 < value.size() && digit(k - 1) && digit(k + 1);
      }
      if (grouped) std::erase(value, '_');
    }
    std::string name = normalize_flag(key);
    if (value == "True") {
      auto status = in_python_words(apply_flag(name, std::nullopt, key + "=True", config), name, key);
      if (!status) return status;
      continue;
    }
    if (value == "False" && (boolean_flags().count(name))) {
      if (name == "enforce-eager") config.enforce_eager = false;
      else if (name == "enable-prefix-caching") config.enable_prefix_caching = false;
      else if (name == "enable-chunked-prefill") config.enable_chunked_prefill = false;
      else if (no_memory_effect_flags().count(name) || boolean_flags().count(name)) config.ignored.push_back(key + "=False");
      else config.unknown.push_back(key + "=False");
      continue;
    }
    if (value == "None") continue;
    // Python dict literals use single quotes; JSON needs double quotes.
    if (!value.empty() && value.front() == '{') std::replace(value.begin(), value.end(), '\'', '"');
    auto status = in_python_words(apply_flag(name, value, key + "=" + value, config), name, key);
    if (!status) return status;
  }
  return Ok{};
}

// The index of the image in `docker [container] run [options] IMAGE ...`, reading the options'
// environment (-e VAR=VALUE, --env=VAR=VALUE, -eVAR=VALUE) into config.env. docker's options
// that take a value (`docker run --help`) are skipped with it; the others are flags.
// `host_env`: the host's exports and assignments, which `-e NAME` (no value) passes into the container.
Result<size_t> docker_image(const std::vector<std::string>& words, size_t at, ServeConfig& config,
                            const std::map<std::string, std::string>& host_env) {
  static const std::set<std::string> kTakesValue = {
      "-e", "--env", "--env-file", "-p", "--publish", "-v", "--volume", "--name", "--gpus", "--ipc", "--shm-size",
      "--runtime", "-w", "--workdir", "--entrypoint", "--network", "--net", "-u", "--user", "--mount", "--device",
      "--ulimit", "-m", "--memory", "--memory-swap", "--cpus", "--cpuset-cpus", "--restart", "-l", "--label",
      "--platform", "--pull", "-h", "--hostname", "--add-host", "--log-driver", "--log-opt", "--cap-add",
      "--cap-drop", "--security-opt", "--tmpfs", "--group-add", "--pid", "--uts", "--userns", "--cgroupns",
      "--stop-signal", "--stop-timeout", "--health-cmd", "--health-interval", "--health-retries",
      "--health-timeout", "--health-start-period", "--dns", "--expose", "--link", "--volumes-from", "--cidfile",
      "--gpus-all", "--storage-opt", "--sysctl", "--label-file", "--attach", "-a", "--annotation"};
  if (at < words.size() && words[at] == "container") ++at;
  if (at >= words.size() || words[at] != "run") {
    return Error{"not a vLLM command line: a docker command other than `docker run`"};
  }
  auto set_env = [&](const std::string& assignment) {
    auto eq = assignment.find('=');
    if (eq != std::string::npos && eq > 0) {
      config.env[assignment.substr(0, eq)] = assignment.substr(eq + 1);
    } else if (auto it = host_env.find(assignment); eq == std::string::npos && it != host_env.end()) {
      config.env[assignment] = it->second;   // `-e NAME`: docker copies the host's value
    }
  };
  for (size_t i = at + 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.size() < 2 || w[0] != '-') {
      if (to_lower(w).find("vllm") == std::string::npos) {
        return Error{fmt::format("not a vLLM command line: docker runs '{}', not the vllm/vllm-openai image",
                                 printable(w, 80))};
      }
      return i;
    }
    const auto eq = w.find('=');
    const std::string option = w.substr(0, eq);
    if (option == "-e" || option == "--env") {
      if (eq != std::string::npos) set_env(w.substr(eq + 1));
      else if (i + 1 < words.size()) set_env(words[++i]);
    } else if (w.rfind("-e", 0) == 0 && w.size() > 2 && w[1] != '-') {
      set_env(w.substr(2));   // -eVAR=VALUE
    } else if (eq == std::string::npos && kTakesValue.count(option)) {
      ++i;
    }
  }
  return Error{"not a vLLM command line: a docker command without the vllm/vllm-openai image"};
}

// The program's name without its directory: "/opt/venv/bin/vllm" is vllm (systemd units and
// virtual environments name it by path).
std::string_view program_name(std::string_view word) {
  auto slash = word.rfind('/');
  return slash == std::string_view::npos ? word : word.substr(slash + 1);
}

bool is_python(std::string_view word) { return program_name(word).substr(0, 6) == "python"; }

// The index of `-m` in `python [options] -m MODULE`, past the interpreter's own options (-u, -O,
// -X dev, -W error); words.size() when there is none.
size_t python_module_flag(const std::vector<std::string>& words, size_t i) {
  for (; i < words.size() && words[i].size() > 1 && words[i][0] == '-'; ++i) {
    if (words[i] == "-m") return i;
    if (words[i] == "-c" || words[i] == "--") break;
    if ((words[i] == "-X" || words[i] == "-W") && i + 1 < words.size()) ++i;
  }
  return words.size();
}

}  // namespace

std::optional<uint64_t> parse_vllm_token_count(std::string_view text) {
  if (text.empty()) return std::nullopt;
  uint64_t multiplier = 1;
  char last = text.back();
  if (last == 'k') multiplier = 1000;
  else if (last == 'K') multiplier = 1024;
  else if (last == 'm') multiplier = 1000000;
  else if (last == 'M') multiplier = 1ull << 20;
  else if (last == 'g') multiplier = 1000000000;
  else if (last == 'G') multiplier = 1ull << 30;
  else if (last == 't') multiplier = 1000000000000ull;
  else if (last == 'T') multiplier = 1ull << 40;
  std::string_view digits = multiplier == 1 ? text : text.substr(0, text.size() - 1);
  if (digits.empty()) return std::nullopt;
  bool dot = false;
  for (char c : digits) {
    if (c == '.' && !dot && multiplier != 1) {
      dot = true;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  if (digits.size() > 24) return std::nullopt;  // far beyond any token count
  auto value = parse_decimal<double>(digits);    // nullopt for "." alone
  if (!value) return std::nullopt;
  double scaled = *value * static_cast<double>(multiplier);
  if (scaled >= 1.8e19) return std::nullopt;
  return static_cast<uint64_t>(scaled);   // int(float(number) * mult): truncated, as Python does
}

namespace {

bool is_shell_name_char(char c, bool first) {
  return c == '_' || std::isalpha(static_cast<unsigned char>(c)) || (!first && std::isdigit(static_cast<unsigned char>(c)));
}

// NAME=value with a shell variable name (any case: `model=...` is a variable as much as MODEL).
std::optional<std::pair<std::string, std::string>> shell_assignment(const std::string& word) {
  const size_t eq = word.find('=');
  if (eq == std::string::npos || eq == 0) return std::nullopt;
  for (size_t k = 0; k < eq; ++k) {
    if (!is_shell_name_char(word[k], k == 0)) return std::nullopt;
  }
  return std::pair{word.substr(0, eq), word.substr(eq + 1)};
}

// One past the bracket that closes the one at text[from] ('(' of `$(`, or '{' of `${`): quotes and
// backslashes respected, nested pairs counted (a brace only after a `$`: a plain `{` is text);
// npos when it never closes.
size_t closing_bracket(std::string_view text, size_t from) {
  const char open = text[from], close = open == '(' ? ')' : '}';
  int depth = 0;
  char quote = 0;
  for (size_t j = from; j < text.size(); ++j) {
    const char c = text[j];
    if (quote) {
      if (c == quote) quote = 0;
      else if (c == '\\' && quote == '"') ++j;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '\\') {
      ++j;
    } else if (c == open && (open == '(' || (j > 0 && text[j - 1] == '$'))) {
      ++depth;
    } else if (c == close && --depth == 0) {
      return j + 1;
    }
  }
  return std::string_view::npos;
}

// The end (one past) of a `$(...)`, `$((...))` or `` `...` `` starting at i; line.size() when it
// never closes.
size_t substitution_end(std::string_view line, size_t i) {
  if (line[i] != '`') return std::min(closing_bracket(line, i + 1), line.size());
  for (size_t j = i + 1; j < line.size(); ++j) {
    if (line[j] == '\\') ++j;
    else if (line[j] == '`') return j + 1;
  }
  return line.size();
}

// An expansion at text[i] ('$' or a backquote) as far as the text's own variables tell it:
// $NAME, ${NAME}, ${NAME:-word}, ${NAME-word}, ${NAME:=word}, ${NAME=word} (the word itself
// expanded and unquoted, nested ones included). `value` is empty when it stays as written, so an
// error can name it: a variable set elsewhere, $1/$@, ${#NAME} and the like, and command
// substitutions $(...) and `...`, which oomdoc never runs. `end` is one past it.
struct Expansion {
  std::optional<std::string> value;
  size_t end = 0;
};
std::string expand_word_text(std::string_view word, std::map<std::string, std::string>& variables, int depth);

// Defaults nest (${A:-${B:-8192}}); past this many levels the text stays as written (a hostile line
// cannot exhaust the stack).
constexpr int kMaxExpansionDepth = 32;

Expansion expand_at(std::string_view text, size_t i, std::map<std::string, std::string>& variables, int depth = 0) {
  if (text[i] == '`' || (i + 1 < text.size() && text[i + 1] == '(')) return {std::nullopt, substitution_end(text, i)};
  if (i + 1 < text.size() && text[i + 1] == '{') {
    const size_t past = closing_bracket(text, i + 1);
    if (past == std::string_view::npos) return {std::nullopt, text.size()};
    const size_t close = past - 1;
    const std::string_view inner = text.substr(i + 2, close - i - 2);
    size_t n = 0;
    while (n < inner.size() && is_shell_name_char(inner[n], n == 0)) ++n;
    const std::string name(inner.substr(0, n));
    std::string_view op = inner.substr(n);
    const bool colon = op.starts_with(":");
    if (colon) op.remove_prefix(1);
    if (n == 0 || !(op.empty() || op.front() == '-' || op.front() == '=') || (colon && op.empty())) {
      return {std::nullopt, close + 1};   // ${#NAME}, ${NAME%suffix}, ${NAME:?}: not worked out
    }
    auto known = variables.find(name);
    if (known != variables.end() && !(colon && known->second.empty())) return {known->second, close + 1};
    if (op.empty() || depth >= kMaxExpansionDepth) return {std::nullopt, close + 1};
    std::string fallback = expand_word_text(op.substr(1), variables, depth + 1);
    if (op.front() == '=') variables[name] = fallback;
    return {std::move(fallback), close + 1};
  }
  size_t end = i + 1;
  while (end < text.size() && is_shell_name_char(text[end], end == i + 1)) ++end;
  if (end == i + 1) return {std::nullopt, i + 1};   // a lone `$`, $1, $@, $?: kept as written
  auto known = variables.find(std::string(text.substr(i + 1, end - i - 1)));
  if (known == variables.end()) return {std::nullopt, end};
  return {known->second, end};
}

// A word such as a default's (${LEN:-"$DEF"}): quotes removed, expansions done, nothing split.
std::string expand_word_text(std::string_view word, std::map<std::string, std::string>& variables, int depth) {
  std::string out;
  char quote = 0;
  for (size_t i = 0; i < word.size(); ++i) {
    const char c = word[i];
    if (quote == '\'') {
      if (c == '\'') quote = 0;
      else out += c;
    } else if (c == '\\' && i + 1 < word.size()) {
      out += word[++i];
    } else if (c == '\'' && !quote) {
      quote = c;
    } else if (c == '"') {
      quote = quote ? 0 : '"';
    } else if (c == '$' || c == '`') {
      const Expansion x = expand_at(word, i, variables, depth);
      out += x.value ? *x.value : std::string(word.substr(i, x.end - i));
      i = x.end - 1;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Result<std::vector<std::vector<std::string>>> split_shell_commands(std::string_view line) {
  std::vector<std::vector<std::string>> commands(1);
  std::string current;
  bool in_word = false;
  char quote = 0;
  bool skip_target = false;   // the word after a redirection (`> log.txt`) is its file, not an argument
  // Shell variables the text sets (`MODEL=...`, `export TP=2`), for the expansions after them.
  std::map<std::string, std::string> variables;
  auto end_word = [&] {
    if (in_word && !skip_target) commands.back().push_back(current);
    if (in_word) skip_target = false;
    current.clear();
    in_word = false;
  };
  auto remember_assignments = [&](const std::vector<std::string>& words) {
    size_t k = 0;
    if (!words.empty() && (words[0] == "export" || words[0] == "declare" || words[0] == "readonly" ||
                           words[0] == "local" || words[0] == "typeset")) {
      for (k = 1; k < words.size() && words[k].size() > 1 && words[k][0] == '-';) ++k;   // export -n, declare -x
    }
    std::vector<std::pair<std::string, std::string>> assigned;
    for (size_t j = k; j < words.size(); ++j) {
      auto a = shell_assignment(words[j]);
      if (!a) {
        if (k == 0) return;   // `VAR=value program`: the value is the program's environment only
        continue;             // `export NAME`: no value to remember
      }
      assigned.push_back(std::move(*a));
    }
    for (auto& [name, value] : assigned) variables[name] = std::move(value);
  };
  auto end_command = [&] {
    end_word();
    remember_assignments(commands.back());
    if (!commands.back().empty()) commands.emplace_back();
  };
  // Appends an expansion's value: inside double quotes as is, unquoted split at blanks into words
  // (`ARGS="--max-model-len 8192 -tp 2"; vllm serve M $ARGS` is four arguments).
  auto append_value = [&](const std::string& value, bool quoted) {
    // NAME=value words are not split (bash expands an assignment's value whole).
    const size_t eq = current.find('=');
    const bool assignment = eq != std::string::npos && eq > 0 && shell_assignment(current).has_value();
    for (char v : value) {
      if (!quoted && !assignment && (v == ' ' || v == '\t' || v == '\n')) {
        end_word();
      } else {
        current.push_back(v);
        in_word = true;
      }
    }
  };
  // An expansion at line[i] ('$' or a backquote, expand_at): its value, split into words when
  // unquoted, or its text as written. i ends on the expansion's last character.
  auto expand = [&](size_t& i, bool quoted) {
    const Expansion x = expand_at(line, i, variables);
    if (x.value) {
      append_value(*x.value, quoted);
    } else {
      current.append(line.substr(i, x.end - i));
      in_word = true;
    }
    i = x.end - 1;
  };
  // Here-documents (`cat > f <<'EOF'` ... `EOF`): their bodies are data, skipped from the line after
  // the operator's to the delimiter's; `<<-` strips leading tabs from the delimiter line.
  std::vector<std::pair<std::string, bool>> heredocs;
  auto skip_heredoc_bodies = [&](size_t& i) {   // i: the newline that ends the operator's line
    for (const auto& [delimiter, strip_tabs] : heredocs) {
      while (i < line.size()) {
        const size_t start = i + 1;
        const size_t eol = std::min(line.find('\n', start), line.size());
        std::string_view body_line = line.substr(start, eol - start);
        if (!body_line.empty() && body_line.back() == '\r') body_line.remove_suffix(1);
        if (strip_tabs) {
          while (!body_line.empty() && body_line.front() == '\t') body_line.remove_prefix(1);
        }
        i = eol;
        if (body_line == delimiter) break;
      }
    }
    heredocs.clear();
  };
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < line.size()) {
        current.push_back(line[++i]);
      } else if (quote == '"' && (c == '$' || c == '`')) {
        expand(i, /*quoted=*/true);
      } else {
        current.push_back(c);
      }
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      // A backslash before a newline (also a Windows CR LF) continues the command.
      if (line[i + 1] == '\r' && i + 2 < line.size() && line[i + 2] == '\n') {
        i += 2;
        continue;
      }
      if (line[i + 1] != '\n') current.push_back(line[i + 1]), in_word = true;
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (c == '\n') {
        end_command();   // a newline ends a command, as ';' does
        if (!heredocs.empty()) skip_heredoc_bodies(i);
      } else {
        end_word();
      }
    } else if (c == '<' && i + 2 < line.size() && line[i + 1] == '<' && line[i + 2] != '<') {
      end_word();
      size_t j = i + 2;
      const bool strip_tabs = line[j] == '-';
      if (strip_tabs) ++j;
      while (j < line.size() && (line[j] == ' ' || line[j] == '\t')) ++j;
      std::string delimiter;
      for (; j < line.size() && !std::isspace(static_cast<unsigned char>(line[j])) && line[j] != ';' && line[j] != '&' &&
             line[j] != '|';
           ++j) {
        if (line[j] != '\'' && line[j] != '"' && line[j] != '\\') delimiter += line[j];   // quoting only stops expansion
      }
      if (!delimiter.empty()) heredocs.emplace_back(std::move(delimiter), strip_tabs);
      i = j - 1;
    } else if (c == '$' || c == '`') {
      expand(i, /*quoted=*/false);
    } else if (c == '#' && !in_word) {
      while (i + 1 < line.size() && line[i + 1] != '\n') ++i;   // a comment, to the end of the line
    } else if (c == ';' || c == '|' || (c == '&' && (i + 1 >= line.size() || line[i + 1] != '>'))) {
      end_command();
      if (i + 1 < line.size() && (line[i + 1] == c || (c == '|' && line[i + 1] == '&'))) ++i;   // && || |&
    } else if (c == '>' || c == '<' || c == '&') {
      // A redirection: an fd number before it ("2>") is part of it; "&>", ">>", ">&2", "2>&1".
      const bool fd_number = in_word && std::all_of(current.begin(), current.end(), [](char d) { return std::isdigit(static_cast<unsigned char>(d)); });
      if (!fd_number) end_word();
      current.clear();
      in_word = false;
      while (i + 1 < line.size() && (line[i + 1] == '>' || line[i + 1] == '<' || line[i + 1] == '&')) ++i;
      if (line[i] == '&' && i + 1 < line.size() && (std::isdigit(static_cast<unsigned char>(line[i + 1])) || line[i + 1] == '-')) {
        while (i + 1 < line.size() && (std::isdigit(static_cast<unsigned char>(line[i + 1])) || line[i + 1] == '-')) ++i;
      } else {
        skip_target = true;
      }
    } else {
      current.push_back(c);
      in_word = true;
    }
  }
  if (quote) return Error{fmt::format("unterminated {} quote in the command line", quote)};
  end_word();
  if (commands.size() > 1 && commands.back().empty()) commands.pop_back();
  return commands;
}

size_t skip_command_wrappers(const std::vector<std::string>& words, size_t i, std::map<std::string, std::string>& env) {
  auto read_env_assignments = [&] {
    while (i < words.size()) {
      auto assignment = shell_assignment(words[i]);
      if (!assignment) break;
      env[assignment->first] = assignment->second;
      ++i;
    }
  };
  // Each wrapper's options that take a value (the word after them is no program): sudo(8), env(1),
  // GNU time(1), bash's exec -a, and the run commands of uv, conda/mamba, pipx, pixi, poetry.
  struct Wrapper {
    std::string_view program, subcommand;
    std::set<std::string_view> valued;
  };
  static const std::vector<Wrapper> kWrappers = {
      {"sudo", "", {"-u", "--user", "-g", "--group", "-C", "--close-from", "-h", "--host", "-p", "--prompt", "-r",
                    "--role", "-t", "--type", "-U", "--other-user", "-D", "--chdir", "-R", "--chroot", "-T",
                    "--command-timeout"}},
      {"env", "", {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}},
      {"nohup", "", {}},
      {"exec", "", {"-a"}},
      {"time", "", {"-f", "--format", "-o", "--output"}},
      {"uv", "run", {"--with", "-w", "--with-requirements", "--with-editable", "--python", "-p", "--project",
                     "--directory", "--env-file", "--extra", "--group", "--only-group", "--index", "--package",
                     "--from", "--config-file", "--cache-dir"}},
      {"conda", "run", {"-n", "--name", "-p", "--prefix", "--cwd"}},
      {"mamba", "run", {"-n", "--name", "-p", "--prefix", "--cwd"}},
      {"micromamba", "run", {"-n", "--name", "-p", "--prefix", "--cwd"}},
      {"pipx", "run", {"--spec", "--python", "--pip-args", "--index-url"}},
      {"pixi", "run", {"-e", "--environment", "--manifest-path"}},
      {"poetry", "run", {"-C", "--directory", "-P", "--project"}},
  };
  for (bool again = true; again && i < words.size();) {
    again = false;
    read_env_assignments();
    if (i >= words.size()) break;
    const std::string_view program = program_name(words[i]);
    for (const Wrapper& w : kWrappers) {
      if (program != w.program) continue;
      if (!w.subcommand.empty() && (i + 1 >= words.size() || words[i + 1] != w.subcommand)) continue;
      i += w.subcommand.empty() ? 1 : 2;
      while (i < words.size() && words[i].size() > 1 && words[i][0] == '-') {
        const std::string& option = words[i++];
        if (option == "--") break;
        if (w.valued.count(option)) ++i;   // "--with=vllm" carries its value
      }
      again = true;
      break;
    }
  }
  return i;
}

Result<ServeConfig> parse_vllm_command_line(const std::vector<std::string>& input) {
  std::vector<std::string> words = input;
  std::map<std::string, std::string> exported;
  if (words.size() == 1) {
    if (words[0].find("LLM(") == std::string::npos) {
      // Shell text: the launch is the first command that runs vLLM (`export VAR=...; vllm serve
      // ... > log.txt 2>&1 &`); the exports and assignments before it are its environment.
      auto commands = split_shell_commands(words[0]);
      if (!commands) return commands.error();
      // A launch: `vllm serve`, `python -m vllm.entrypoints...`, `docker run ... <a vLLM image>`
      // (`python download.py && vllm serve ...`, `docker pull ... && docker run ...`).
      auto launches = [](const std::vector<std::string>& command, size_t at) {
        if (at >= command.size()) return false;
        const std::string_view program = program_name(command[at]);
        if (program == "vllm") return at + 1 < command.size() && command[at + 1] == "serve";
        if (is_python(program)) {
          const size_t m = python_module_flag(command, at + 1);
          return m + 1 < command.size() && command[m + 1].rfind("vllm.", 0) == 0;
        }
        if (program == "docker" || program == "podman") {
          ServeConfig scratch;
          return docker_image(command, at + 1, scratch, {}).ok();   // run with a vLLM image
        }
        return false;
      };
      std::optional<size_t> chosen, first_other;
      for (size_t k = 0; k < commands->size() && !chosen; ++k) {
        const std::vector<std::string>& command = (*commands)[k];
        std::map<std::string, std::string> env;
        const size_t at = skip_command_wrappers(command, 0, env);
        if (at < command.size() && command[at] == "export") {
          skip_command_wrappers(command, at + 1, exported);
        } else if (launches(command, at)) {
          chosen = k;
        } else if (!first_other) {
          first_other = k;
        }
      }
      const size_t k = chosen.value_or(first_other.value_or(0));
      words = (*commands)[k];
      // Flags on lines of their own after the launch lost their backslash (a command cannot start
      // with "--"): they are the launch's.
      for (size_t next = k + 1; chosen && next < commands->size() && !(*commands)[next].empty() &&
                                (*commands)[next].front().rfind("--", 0) == 0;
           ++next) {
        words.insert(words.end(), (*commands)[next].begin(), (*commands)[next].end());
      }
    }
  }
  ServeConfig config;
  // `sudo [options] [VAR=VALUE...] vllm serve ...`, `nohup`, `env`, `uv run` and the like run the
  // same command with the host's environment (a container's is only what `docker run -e` sets).
  config.env = exported;
  size_t i = skip_command_wrappers(words, 0, config.env);
  if (i >= words.size()) {
    return Error{"no vLLM command line given: expected `vllm serve MODEL [flags]`"};
  }
  std::string rest;
  for (size_t j = i; j < words.size(); ++j) rest += (j > i ? " " : "") + words[j];

  Status status = Ok{};
  if (rest.find("LLM(") != std::string::npos) {
    config.launcher = "LLM(...)";
    status = read_llm_call(rest, config);
  } else if (program_name(words[i]) == "vllm" && i + 1 < words.size() && words[i + 1] == "serve") {
    config.launcher = "vllm serve";
    status = read_flags(words, i + 2, /*model_positional=*/true, config);
  } else if (const size_t m = is_python(words[i]) ? python_module_flag(words, i + 1) : words.size();
             m + 1 < words.size() && words[m + 1].rfind("vllm.entrypoints.", 0) == 0 &&
             words[m + 1].find("api_server") != std::string::npos) {
    config.launcher = "python -m " + words[m + 1];
    status = read_flags(words, m + 2, /*model_positional=*/false, config);
  } else if (words[i] == "docker" || words[i] == "podman") {
    // The host's exports and VAR=value words reach the container only through `-e NAME`.
    const std::map<std::string, std::string> host_env = std::move(config.env);
    config.env.clear();
    // `docker run [options] vllm/vllm-openai[:tag] [api_server flags]`: the image is the first
    // word after docker run's options; -e/--env VAR=VALUE set the container's environment.
    // (Podman's `run` takes the same options.)
    auto image = docker_image(words, i + 1, config, host_env);
    if (!image) return image.error();
    config.launcher = words[i] + " " + words[*image];
    const std::string& name = words[*image];
    // The tag follows the last ':' after the last '/' (a registry host may carry a port).
    const size_t colon = name.rfind(':'), slash = name.rfind('/');
    if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
      config.image_tag = name.substr(colon + 1);
    }
    // With `--entrypoint vllm` (or a shell entrypoint) the command after the image is `serve
    // MODEL ...` or `vllm serve MODEL ...`: the model is the word after serve.
    size_t flags_at = *image + 1;
    if (flags_at < words.size() && words[flags_at] == "vllm") ++flags_at;
    if (flags_at < words.size() && words[flags_at] == "serve") ++flags_at;
    status = read_flags(words, flags_at, /*model_positional=*/true, config);
  } else {
    return Error{fmt::format(
        "not a vLLM command line: '{}'; expected `vllm serve MODEL [flags]`, `python -m "
        "vllm.entrypoints.openai.api_server --model MODEL [flags]` or `LLM(model=..., ...)`",
        rest.size() > 80 ? rest.substr(0, 77) + "..." : rest)};
  }
  if (!status) return status.error();
  if (config.model.empty()) {
    return Error{fmt::format("{}: no model given (the MODEL argument or --model)", config.launcher)};
  }
  // A word the shell would have filled in ($ARGS set elsewhere) may hold any flags: sizing without
  // them would mislead.
  for (const std::string& word : config.unknown) {
    if (word.find_first_of("$`") != std::string::npos) {
      return Error{fmt::format("'{}'{}", printable(word, 80), unexpanded_hint(word))};
    }
  }
  // Flags quoted into one word ("$ARGS" in double quotes): argparse takes a dashed word with a space
  // before any '=' for a positional, and vLLM exits with "unrecognized arguments".
  for (size_t j = i; j < words.size(); ++j) {
    const std::string& word = words[j];
    if (word.size() > 1 && word[0] == '-' && word.substr(0, word.find('=')).find(' ') != std::string::npos) {
      return Error{fmt::format("'{}': one argument holding several words (a quoted \"$ARGS\"?); vLLM's argparse "
                               "takes it for a positional and exits with 'unrecognized arguments': leave the expansion "
                               "unquoted so it splits", printable(word, 80))};
    }
  }
  return config;
}

}  // namespace oomdoc
