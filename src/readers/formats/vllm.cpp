// vLLM's memory errors (v0 and v1 engines) and the informational startup lines that carry its
// memory accounting (vllm/worker/worker.py, vllm/v1/worker/gpu_worker.py, vllm/v1/core/kv_cache_utils.py).
// Informational lines become events with is_error = false: they give the diagnosis the numbers
// (KV tokens, budget) that the error lines leave out.
#include <fmt/format.h>

#include "core/text.h"
#include "readers/formats/message_format.h"
#include "readers/formats/regex_search.h"

namespace oomdoc {
namespace {

const std::string kSize(kSizePattern);

// Integer fields ("131,072" -> 131072, thousands separators dropped) and decimal fields; a number
// that does not fit leaves the field out (null in JSON).
void set_int(OomEvent& e, std::string name, std::string_view digits) {
  std::string clean;
  for (char c : digits) if (c != ',') clean += c;
  if (auto v = parse_decimal<int64_t>(clean)) e.set_field(std::move(name), *v);
}

void set_double(OomEvent& e, std::string name, std::string_view text) {
  if (auto v = parse_decimal<double>(text)) e.set_field(std::move(name), *v);
}

// A KV budget as vLLM prints it, "-2.35 GiB" when weights and activations exceed the budget: a
// Quantity when it is not negative; a negative one cannot be, so it is kept as the fields
// <name>_bytes (negative), <name>_text and <name>_unit, which JSON shows in the quantity's place.
void set_signed_size(OomEvent& e, const std::string& name, std::string_view value) {
  const bool negative = !value.empty() && value.front() == '-';
  if (!negative) {
    set_printed_size(e, name, value, LabelMeaning::kBinary);
    return;
  }
  auto q = parse_printed_size(value.substr(1), LabelMeaning::kBinary);
  if (!q) return;
  if (!q->overflow && q->bytes <= static_cast<uint64_t>(INT64_MAX)) e.set_field(name + "_bytes", -static_cast<int64_t>(q->bytes));
  e.set_field(name + "_text", std::string(value));
  e.set_field(name + "_unit", q->unit);
}

std::optional<FormatMatch> match_max_seq_len(const MessageWindow& w) {
  static const RE2 re(R"(max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in KV cache \((\d+)\))");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  auto m = new_match("vllm", "vllm_max_seq_len_gt_kv_tokens");
  set_int(m.event, "max_model_len", (*g)[1]);
  set_int(m.event, "kv_cache_tokens", (*g)[2]);
  return m;
}

std::optional<FormatMatch> match_kv_needed(const MessageWindow& w) {
  static const RE2 re("To serve at least one request with the models?'s max seq len \\((\\d+)\\),\\s*\\(?(" + kSize +
                      ") KV cache is needed, which is larger than the available KV cache memory \\((-?" + kSize +
                      ")\\)\\.?(?:\\s*Based on the available memory,\\s*the estimated maximum model length is (\\d+))?");
  auto g = regex_search(re, w.flat);
  if (!g || w.line_of(offset_in(w, (*g)[0])) != 0) return std::nullopt;
  auto m = new_match("vllm", "vllm_kv_needed_gt_available");
  OomEvent& e = m.event;
  set_int(e, "max_model_len", (*g)[1]);
  set_printed_size(e, "kv_needed", (*g)[2], LabelMeaning::kBinary);
  set_signed_size(e, "kv_available", (*g)[3]);
  if (matched((*g)[4])) set_int(e, "estimated_max_model_len", (*g)[4]);
  m.lines_used = lines_through(w, (*g)[0]);
  return m;
}

std::optional<FormatMatch> match_no_cache_blocks(const MessageWindow& w) {
  if (w.lines[0].find("No available memory for the cache blocks") == std::string::npos) return std::nullopt;
  return new_match("vllm", "vllm_no_cache_blocks");
}

std::optional<FormatMatch> match_sampler_warmup(const MessageWindow& w) {
  static const RE2 re(R"(out of memory occurred when warming up sampler with (\d+) dummy requests)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  auto m = new_match("vllm", "vllm_sampler_warmup_oom");
  set_int(m.event, "dummy_requests", (*g)[1]);
  return m;
}

// "Free memory on device (110.37/121.69 GiB) on startup. Desired GPU memory utilization is (0.87, 105.87 GiB)."
// is informational; "... on startup is less than desired GPU memory utilization (0.9, 71.3 GiB)" is the
// startup error (vllm/v1/worker/utils.py request_memory).
std::optional<FormatMatch> match_startup_free_memory(const MessageWindow& w) {
  // Newer versions name the device: "Free memory on device cuda:0 (22.76/24.0 GiB)", "xpu:0".
  static const RE2 re("Free memory on device (?:[a-z]+:\\d+ )?\\((\\d+(?:\\.\\d+)?)/(" + kSize +
                      ")\\) on startup(\\.\\s*Desired GPU memory utilization is| is less than desired GPU memory utilization)"
                      "\\s*\\((\\d+(?:\\.\\d+)?),\\s*(" + kSize + ")\\)");
  auto g = regex_search(re, w.flat);
  if (!g || w.line_of(offset_in(w, (*g)[0])) != 0) return std::nullopt;
  const bool is_error = (*g)[3].find("less than") != std::string_view::npos;
  auto m = new_match("vllm", "vllm_startup_free_memory", is_error);
  OomEvent& e = m.event;
  static const RE2 device_re(R"(on device ([a-z]+):(\d+) )");
  if (auto d = regex_search(device_re, (*g)[0])) e.device = parse_decimal<int64_t>((*d)[2]);
  // Sizes beyond what parse_printed_size reads (40 digits) are left out.
  if (auto total = parse_printed_size((*g)[2], LabelMeaning::kBinary)) {
    // The free figure shares the total's unit: "(110.37/121.69 GiB)".
    if (auto free = parse_printed_size(std::string((*g)[1]) + " " + total->unit, LabelMeaning::kBinary)) {
      free->text = std::string((*g)[1]);
      e.set_quantity("free", *free);
    }
    e.set_quantity("total", *total);
  }
  set_double(e, "gpu_memory_utilization", (*g)[4]);
  set_printed_size(e, "requested", (*g)[5], LabelMeaning::kBinary);
  // Newer versions go on with the measured usage and the --kv-cache-memory values that would fit.
  const std::string& line = w.lines[w.line_of(offset_in(w, (*g)[0]))];
  static const std::vector<std::pair<std::string, std::string>> usage = {
      {"Actual usage is (" + kSize + ") for consumed memory", "consumed_weights_plus_non_torch"},
      {"(" + kSize + ") for weights", "weights"},
      {"(" + kSize + ") for peak activation", "activation_peak"},
      {"(" + kSize + ") for non-torch memory", "non_torch"},
      {"(" + kSize + ") for CUDAGraph memory", "cudagraph_memory"},
      {"(" + kSize + ") for NPU graph memory", "graph_memory"},
      {"Current kv cache memory in use is (" + kSize + ")", "kv_cache"},
  };
  for (const auto& [pattern, name] : usage) {
    RE2 re(pattern);
    if (auto u = regex_search(re, line)) set_printed_size(e, name, (*u)[1], LabelMeaning::kBinary);
  }
  static const RE2 fit(R"(--kv-cache-memory=(\d+)`? \((\d+(?:\.\d+)?) GiB\) to fit)");
  if (auto f = regex_search(fit, line)) set_int(e, "kv_cache_memory_fit_bytes", (*f)[1]);
  static const RE2 full(R"(--kv-cache-memory=(\d+)`? \((\d+(?:\.\d+)?) GiB\) to fully)");
  if (auto f = regex_search(full, line)) set_int(e, "kv_cache_memory_full_bytes", (*f)[1]);
  m.lines_used = lines_through(w, (*g)[0]);
  return m;
}

std::optional<FormatMatch> match_memory_profiling_error(const MessageWindow& w) {
  static const RE2 re("Error in memory profiling\\.\\s*Initial free memory (" + kSize +
                      ")?[^,]*,\\s*current free memory (" + kSize + ")?");
  auto g = regex_search(re, w.flat);
  if (!g || w.line_of(offset_in(w, (*g)[0])) != 0) return std::nullopt;
  auto m = new_match("vllm", "vllm_memory_profiling_error");
  if (matched((*g)[1])) set_printed_size(m.event, "initial_free", (*g)[1], LabelMeaning::kBinary);
  if (matched((*g)[2])) set_printed_size(m.event, "current_free", (*g)[2], LabelMeaning::kBinary);
  m.lines_used = lines_through(w, (*g)[0]);
  return m;
}

// ---- informational accounting lines (is_error = false) ----

struct InfoPattern {
  std::string regex;
  // For each capture group: the field it fills. "q:name" = a byte quantity (vLLM's "GB" is GiB),
  // "i:name" = an integer (thousands separators removed), "f:name" = a decimal.
  std::vector<std::string> targets;
};

const std::vector<InfoPattern>& info_patterns() {
  static const std::vector<InfoPattern> patterns = {
      {"Loading model weights took (\\d+(?:\\.\\d+)?\\s?GB)", {"q:model_loading"}},
      {"Model loading took (" + kSize + ")", {"q:model_loading"}},
      {"can use total_gpu_memory \\((" + kSize + ")\\) x gpu_memory_utilization \\((\\d+(?:\\.\\d+)?)\\) = (" + kSize + ")",
       {"q:total_gpu_memory", "f:gpu_memory_utilization", "q:usable_budget"}},
      {"model weights take (" + kSize + "); non_torch_memory takes (" + kSize +
           "); PyTorch activation peak memory takes (" + kSize + "); the rest of the memory reserved for KV Cache is (-?" + kSize + ")",
       {"q:weights", "q:non_torch", "q:activation_peak", "q:kv_cache"}},
      {"Memory profiling results: total_gpu_memory=(" + kSize + ") initial_memory_usage=(" + kSize +
           ") peak_torch_memory=(" + kSize + ") memory_usage_post_profile=(" + kSize + ") non_torch_memory=(" + kSize +
           ") kv_cache_size=(-?" + kSize + ") gpu_memory_utilization=(\\d+(?:\\.\\d+)?)",
       {"q:total_gpu_memory", "q:initial_memory_usage", "q:peak_torch_memory", "q:memory_usage_post_profile",
        "q:non_torch", "q:kv_cache", "f:gpu_memory_utilization"}},
      // The tab-separated table of one dev build ("total_gpu_memory     79.22GiB").
      {"(?:^|\\s)total_gpu_memory\\s+(" + kSize + ")\\s*$", {"q:total_gpu_memory"}},
      {"(?:^|\\s)gpu_memory_utilization\\s+(\\d+(?:\\.\\d+)?)\\s*$", {"f:gpu_memory_utilization"}},
      {"the current vLLM instance can use\\s+(" + kSize + ")\\s*$", {"q:usable_budget"}},
      {"(?:^|\\s)model weights take\\s+(" + kSize + ")\\s*$", {"q:weights"}},
      {"(?:^|\\s)non_torch_memory\\s+(" + kSize + ")\\s*$", {"q:non_torch"}},
      {"(?:^|\\s)PyTorch activation peak memory\\s+(" + kSize + ")\\s*$", {"q:activation_peak"}},
      {"available_kv_cache_memory\\s+(-?" + kSize + ")", {"q:kv_cache"}},
      {"Available KV cache memory: (-?" + kSize + ")", {"q:kv_cache"}},
      {"# (?:GPU|CUDA|cuda) blocks: (\\d+)(?:, # CPU blocks: (\\d+))?", {"i:gpu_blocks", "i:cpu_blocks"}},
      {"(?:^|\\]\\s)GPU blocks: (\\d+)(?:, # CPU blocks: (\\d+))?", {"i:gpu_blocks", "i:cpu_blocks"}},
      {"GPU KV cache size: ([\\d,]+) tokens", {"i:kv_cache_tokens"}},
      {"Maximum concurrency for ([\\d,]+) tokens per request: (\\d+(?:\\.\\d+)?)x",
       {"i:concurrency_tokens_per_request", "f:max_concurrency"}},
      {"Graph capturing finished in \\d+ secs?, took (" + kSize + ")", {"q:cudagraph_memory"}},
      {"CUDA graph pool memory: (" + kSize + ") \\(actual\\), (" + kSize + ") \\(estimated\\)",
       {"q:cudagraph_memory", "q:cudagraph_estimated"}},
  };
  return patterns;
}

std::optional<FormatMatch> match_info(const MessageWindow& w) {
  static const std::vector<std::unique_ptr<RE2>> compiled = [] {
    std::vector<std::unique_ptr<RE2>> out;
    for (const auto& p : info_patterns()) out.push_back(std::make_unique<RE2>(p.regex));
    return out;
  }();
  std::optional<FormatMatch> result;
  const std::string& line = w.lines[0];
  for (size_t i = 0; i < compiled.size(); ++i) {
    auto g = regex_search(*compiled[i], line);
    if (!g) continue;
    if (!result) result = new_match("vllm", "vllm_memory_info", /*is_error=*/false);
    OomEvent& e = result->event;
    const auto& targets = info_patterns()[i].targets;
    for (size_t t = 0; t < targets.size(); ++t) {
      std::string_view value = (*g)[t + 1];
      if (!matched(value)) continue;
      const std::string kind = targets[t].substr(0, 1);
      const std::string name = targets[t].substr(2);
      if (kind == "q") {
        set_signed_size(e, name, value);
      } else if (kind == "i") {
        set_int(e, name, value);
      } else {
        set_double(e, name, value);
      }
    }
  }
  // Figures that mean the engine cannot start: a KV budget of nothing or less (weights and
  // activations exceed the budget), no GPU blocks, no token of KV cache, room for no request at all.
  // vLLM raises "No available memory for the cache blocks" (or an insufficient-KV error) right after.
  if (result) {
    OomEvent& e = result->event;
    const bool no_cache = e.int_field("kv_cache_bytes").value_or(0) < 0 || e.bytes("kv_cache") == 0u ||
                          e.int_field("gpu_blocks") == 0 ||
                          e.int_field("kv_cache_tokens") == 0 ||
                          (e.field("max_concurrency") && std::get_if<double>(e.field("max_concurrency")) &&
                           *std::get_if<double>(e.field("max_concurrency")) <= 0.0);
    if (no_cache) e.is_error = true;
  }
  return result;
}

}  // namespace

void add_vllm_formats(std::vector<MessageFormat>& out) {
  out.push_back({"vllm_max_seq_len_gt_kv_tokens", {"max seq len"}, match_max_seq_len});
  out.push_back({"vllm_kv_needed_gt_available", {"To serve at least one request"}, match_kv_needed});
  out.push_back({"vllm_no_cache_blocks", {"No available memory for the cache blocks"}, match_no_cache_blocks});
  out.push_back({"vllm_sampler_warmup_oom", {"warming up sampler"}, match_sampler_warmup});
  out.push_back({"vllm_startup_free_memory", {"Free memory on device"}, match_startup_free_memory});
  out.push_back({"vllm_memory_profiling_error", {"Error in memory profiling"}, match_memory_profiling_error});
  out.push_back({"vllm_memory_info",
                 {"weights took", "Model loading took", "total_gpu_memory", "weights take", "non_torch_memory",
                  "activation peak", "available_kv_cache_memory", "Available KV cache memory", "blocks:",
                  "GPU KV cache size", "Maximum concurrency", "gpu_memory_utilization", "vLLM instance can use",
                  "Graph capturing finished", "CUDA graph pool memory"},
                 match_info});
}

}  // namespace oomdoc
