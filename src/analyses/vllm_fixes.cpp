// The flags that make a vLLM launch fit, cheapest first. Every candidate is re-predicted with
// predict_vllm_startup, so a fix's numbers are the analysis's, never a rule of thumb.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "analyses/fix_catalog.h"
#include "analyses/vllm_serve.h"
#include "core/units.h"
#include "model/gpu.h"
#include "readers/gpu_catalog.h"

namespace oomdoc {
namespace {

// The prediction for a launch, nothing where the launch is refused.
std::optional<ServePrediction> prediction_of(const ServeInputs& inputs) {
  auto p = predict_vllm_startup(inputs);
  if (!p) return std::nullopt;
  return std::move(p.value());
}

// The vLLM arguments in a fix's text: each "--flag value" outside prose and parentheses, except
// oomdoc's own --gpu, and not the flag of a "drop --flag" (a removal).
std::vector<std::string> vllm_args_of(std::string_view id, const std::string& flag) {
  std::vector<std::string> args;
  if (id == "bigger_gpu") return args;
  std::vector<std::string> words;
  for (size_t at = 0; at < flag.size();) {
    const size_t end = std::min(flag.find(' ', at), flag.size());
    if (end > at) words.push_back(flag.substr(at, end - at));
    at = end + 1;
  }
  for (size_t i = flag.rfind("drop ", 0) == 0 ? 2 : 0; i < words.size(); ++i) {
    if (words[i].rfind("--", 0) != 0) continue;
    args.push_back(words[i]);
    if (i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0 && words[i + 1].front() != '(') args.push_back(words[++i]);
  }
  return args;
}

ServeFix fix_from(std::string_view id, std::string flag, std::string cost, const ServePrediction& p) {
  ServeFix fix;
  fix.id = std::string(fix_info(id).id);  // fix_info aborts on an id the catalogue lacks
  fix.vllm_args = vllm_args_of(id, flag);
  fix.flag = std::move(flag);
  fix.cost = std::move(cost);
  fix.fits = p.fits;
  fix.kv_tokens = p.capacity.tokens;
  fix.max_concurrency = p.capacity.max_concurrency;
  fix.max_model_len = p.settings.max_model_len;
  return fix;
}

// A round number a person would type: multiples of 1024 above 8K, of 256 above 1K.
// Below this a shortened context is no longer a useful answer on its own.
constexpr uint64_t kMinUsefulLength = 2048;
// A shorter context on fewer GPUs is offered beside the layouts that keep a model's whole context
// only when it keeps this much: what most serving asks (Qwen2.5's default context), while a
// model's 1M-token context is rarely what a launch needs.
constexpr uint64_t kLongContext = 32768;

uint64_t round_length_down(uint64_t len) {
  if (len >= 8192) return len / 1024 * 1024;
  if (len >= 1024) return len / 256 * 256;
  return len / 16 * 16;
}

// The largest n in [0, high] with fits(n), for a fits() that only turns false as n grows (0 when
// none does): bisection, about log2(high) predictions.
template <typename Fits>
uint64_t largest_fitting(uint64_t high, Fits fits) {
  if (fits(high)) return high;
  uint64_t low = 0;   // taken as fitting; returned only if nothing above it does
  while (high - low > 1) {
    const uint64_t mid = low + (high - low) / 2;
    (fits(mid) ? low : high) = mid;
  }
  return low;
}

}  // namespace

std::string as_llm_keywords(std::string_view flags) {
  // Words up to a parenthesised remark; oomdoc's own --gpu stays a flag of oomdoc.
  const size_t remark = flags.find(" (");
  std::string_view head = flags.substr(0, remark);
  const std::string tail = remark == std::string_view::npos ? "" : std::string(flags.substr(remark));
  if (head.rfind("--gpu ", 0) == 0) return std::string(flags);
  std::vector<std::string> words;
  for (size_t i = 0; i < head.size();) {
    const size_t end = std::min(head.find(' ', i), head.size());
    if (end > i) words.emplace_back(head.substr(i, end - i));
    i = end + 1;
  }
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i].rfind("--", 0) != 0) return std::string(flags);  // not a flag list: leave it as it is
    std::string key = words[i].substr(2);
    std::replace(key.begin(), key.end(), '-', '_');
    std::string value = "True";   // a switch
    if (i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0) {
      value = words[++i];
      const bool number = value.find_first_not_of("0123456789.") == std::string::npos;
      if (!number) value = fmt::format("\"{}\"", value);
    }
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", key, value);
  }
  return out + tail;
}

std::vector<ServeFix> serve_fixes(const ServeInputs& inputs, const ServePrediction& base) {
  std::vector<ServeFix> fixes;
  const ServeSettings& s = base.settings;
  // Figures from a log (--weights, --activation, ...) were measured for this launch. A change that
  // moves them (more GPUs split the weights, a 4-bit checkpoint shrinks them, a smaller token
  // budget shrinks the profile run) moves each by the change oomdoc computes, keeping the log's
  // correction: the weights in proportion (65.76 GiB logged at TP 2 where 65.74 is computed is
  // 32.88 at TP 4), the activation peak, non-torch memory and CUDA graphs by the difference (much
  // of a logged peak is buffers that do not grow with the token budget).
  const bool has_overrides = inputs.overrides.weights_bytes || inputs.overrides.activation_bytes ||
                             inputs.overrides.non_torch_bytes || inputs.overrides.cuda_graph_bytes;
  std::optional<ServePrediction> computed_base;
  if (has_overrides) {
    ServeInputs plain = inputs;
    plain.overrides = {};
    computed_base = prediction_of(plain);
  }
  // A changed launch predicted with the log's figures moved to it.
  auto try_predict = [&](ServeInputs changed) -> std::optional<ServePrediction> {
    if (computed_base) {
      ServeInputs plain = changed;
      plain.overrides = {};
      if (auto computed = prediction_of(plain)) {
        auto rescale = [](std::optional<uint64_t>& logged, uint64_t was, uint64_t now) {
          if (logged && was > 0 && now != was) {
            *logged = static_cast<uint64_t>(std::llround(static_cast<long double>(*logged) * now / was));
          }
        };
        auto shift = [](std::optional<uint64_t>& logged, uint64_t was, uint64_t now) {
          if (logged && now != was) {
            const int64_t moved = static_cast<int64_t>(*logged) + static_cast<int64_t>(now) - static_cast<int64_t>(was);
            *logged = static_cast<uint64_t>(std::max<int64_t>(0, moved));
          }
        };
        rescale(changed.overrides.weights_bytes, computed_base->weights.bytes, computed->weights.bytes);
        shift(changed.overrides.activation_bytes, computed_base->activation.bytes, computed->activation.bytes);
        shift(changed.overrides.non_torch_bytes, computed_base->non_torch.bytes, computed->non_torch.bytes);
        shift(changed.overrides.cuda_graph_bytes, computed_base->cuda_graphs.bytes, computed->cuda_graphs.bytes);
      }
    }
    return prediction_of(changed);
  };
  // When no single change is enough, a candidate that loads the weights but cannot hold one
  // full-length request is combined with the longest --max-model-len it can hold.
  bool combine_with_length = false;
  auto add_if_fits = [&](std::string_view id, ServeInputs changed, std::string flag, std::string cost,
                         std::string note = "") -> bool {
    auto p = try_predict(changed);
    if (p && !p->fits && combine_with_length && p->error && p->error->kind == "max_len_too_long" &&
        p->max_model_len_that_fits >= kMinUsefulLength) {
      uint64_t len = round_length_down(p->max_model_len_that_fits);
      changed.config.max_model_len = len;
      changed.config.max_model_len_auto = false;
      flag += fmt::format(" --max-model-len {}", len);
      cost += fmt::format("; requests longer than {} tokens are refused", len);
      p = try_predict(changed);
    }
    if (!p || !p->fits) return false;
    // An auto-fitted context (--max-model-len auto) far shorter than the model's is no answer (96
    // tokens "fit"): the floor a shorter --max-model-len has.
    if (changed.config.max_model_len_auto &&
        p->settings.max_model_len < std::min(kMinUsefulLength, p->settings.model_context / 2)) {
      return false;
    }
    ServeFix fix = fix_from(id, std::move(flag), std::move(cost), *p);
    fix.note = std::move(note);
    fixes.push_back(std::move(fix));
    return true;
  };

  // 0. Undo what the launch itself asked for, when that alone is the problem: free fixes first.
  //    a. A --gpu-memory-utilization below this version's default: back up to the default (only when
  //       nothing else shares the card, which is why the user may have lowered it).
  bool utilization_restored = false;
  const double default_utilization = base.behavior.default_gpu_memory_utilization;
  if (!s.utilization_is_default && s.gpu_memory_utilization + 0.005 < default_utilization) {
    for (double u = std::ceil(s.gpu_memory_utilization * 100 + 0.5) / 100; u <= default_utilization + 1e-9; u += 0.01) {
      ServeInputs changed = inputs;
      changed.config.gpu_memory_utilization = std::round(u * 100) / 100;
      const bool at_default = std::abs(*changed.config.gpu_memory_utilization - default_utilization) < 1e-9;
      if (add_if_fits("vllm_restore_gpu_memory_utilization", changed,
                      fmt::format("--gpu-memory-utilization {:.2f}", *changed.config.gpu_memory_utilization),
                      at_default ? fmt::format("free: vLLM's default of {:.2f}, only when nothing else shares this GPU",
                                               default_utilization)
                                 : "free, only when nothing else shares this GPU")) {
        utilization_restored = true;
        break;
      }
    }
    // Not enough alone: the default with the longest --max-model-len it holds, on the same card.
    if (!utilization_restored) {
      ServeInputs changed = inputs;
      changed.config.gpu_memory_utilization = default_utilization;
      combine_with_length = true;
      utilization_restored = add_if_fits(
          "vllm_restore_gpu_memory_utilization", changed, fmt::format("--gpu-memory-utilization {:.2f}", default_utilization),
          fmt::format("vLLM's default of {:.2f}, only when nothing else shares this GPU", default_utilization));
      combine_with_length = false;
    }
  }
  //    b. A utilization above what is free at startup (vLLM: "Free memory on device ... is less than
  //       desired GPU memory utilization ... Decrease GPU memory utilization or reduce GPU memory used
  //       by other processes"): the highest two-decimal share the free memory covers.
  if (base.error && base.error->kind == "free_memory" && base.total_bytes > 0) {
    const double covered = std::floor(static_cast<double>(base.free_at_startup_bytes) /
                                      static_cast<double>(base.total_bytes) * 100) / 100;
    for (double u = covered; u >= 0.5 - 1e-9; u -= 0.01) {
      ServeInputs changed = inputs;
      changed.config.gpu_memory_utilization = std::round(u * 100) / 100;
      if (add_if_fits("vllm_lower_gpu_memory_utilization", changed,
                      fmt::format("--gpu-memory-utilization {:.2f}", *changed.config.gpu_memory_utilization),
                      fmt::format("free: the most the {} free at startup covers", format_bytes(base.free_at_startup_bytes)))) {
        break;
      }
    }
  }
  //    c. A KV cache sized outright (--kv-cache-memory-bytes, --num-gpu-blocks-override) that the
  //       card cannot hold: the most it holds, or the budget's own sizing. It may fail at its own
  //       allocation, at the sampler's warm-up or at the graph capture after it.
  const bool kv_sized_outright = inputs.config.kv_cache_memory_bytes || inputs.config.num_gpu_blocks_override;
  // Too small is as wrong as too large: an outright size that holds less than one request.
  const bool kv_sized_too_small = kv_sized_outright && base.capacity.blocks_per_request > base.capacity.num_blocks;
  // Whether the card holds a cache sized outright, asked with a one-block max_model_len (and the
  // same token budget, so the same profile run): a cache too small for one full-length request
  // fails too, on the short side, and would break the bisection's "only turns false as it grows".
  auto holds = [&](ServeInputs changed) {
    changed.config.max_model_len = s.block_size;
    changed.config.max_model_len_auto = false;
    changed.config.max_num_batched_tokens = s.max_num_batched_tokens;
    auto p = try_predict(changed);
    return p && p->fits;
  };
  if (kv_sized_too_small ||
      (base.error && (base.error->kind == "kv_cache_oom" || base.error->kind == "sampler_warmup_oom" ||
                      (base.error->kind == "graph_capture_oom" && kv_sized_outright)))) {
    const ServeConfig& c = inputs.config;
    uint64_t reserve = base.context_bytes + base.weights.bytes + base.non_torch.bytes + kGiB / 4 +
                       (s.enforce_eager ? 0 : base.cuda_graphs.bytes);
    if (c.kv_cache_memory_bytes && base.total_bytes > reserve) {
      // The largest whole number of MiB that fits with the graphs and the sampler warm-up after
      // it, less a 0.25 GiB margin (fits(MiB) only turns false as the cache grows: bisection).
      const uint64_t low = largest_fitting((base.total_bytes - reserve) / kMiB + kGiB / 4 / kMiB, [&](uint64_t mib) {
        ServeInputs changed = inputs;
        changed.config.kv_cache_memory_bytes = mib * kMiB;
        return holds(changed);
      });
      const uint64_t bytes = low > kGiB / 4 / kMiB ? (low - kGiB / 4 / kMiB) * kMiB : 0;
      if (bytes > 0) {
        ServeInputs changed = inputs;
        changed.config.kv_cache_memory_bytes = bytes;
        add_if_fits("vllm_kv_cache_size", changed, fmt::format("--kv-cache-memory-bytes {}", bytes),
                    fmt::format("a {} KV cache, what the card holds next to the weights, the graphs and the "
                                "sampler warm-up, with 0.25 GiB to spare", format_bytes(bytes)));
      }
    }
    if (c.num_gpu_blocks_override && base.capacity.num_blocks && base.total_bytes > reserve) {
      // As many blocks as fit with the same 0.25 GiB to spare.
      const uint64_t block_bytes = base.capacity.bytes / base.capacity.num_blocks;
      const uint64_t spare = (kGiB / 4 + block_bytes - 1) / block_bytes;
      const uint64_t most = largest_fitting((base.total_bytes - reserve) / block_bytes + spare, [&](uint64_t n) {
        ServeInputs changed = inputs;
        changed.config.num_gpu_blocks_override = n;
        return n > 0 && holds(changed);
      });
      const uint64_t blocks = most > spare ? most - spare : 0;
      if (blocks > 0) {
        ServeInputs changed = inputs;
        changed.config.num_gpu_blocks_override = blocks;
        add_if_fits("vllm_kv_cache_size", changed, fmt::format("--num-gpu-blocks-override {}", blocks),
                    fmt::format("{} blocks, what the card holds next to the weights", blocks));
      }
    }
    ServeInputs changed = inputs;
    changed.config.kv_cache_memory_bytes.reset();
    changed.config.num_gpu_blocks_override.reset();
    // Sized by the budget, the cache may still hold less than one request: with the longest length it holds.
    combine_with_length = true;
    add_if_fits("vllm_kv_cache_size", changed,
                c.kv_cache_memory_bytes ? "drop --kv-cache-memory-bytes" : "drop --num-gpu-blocks-override",
                "free: gpu_memory_utilization sizes the cache to the budget");
    combine_with_length = false;
  }
  //    d. --dtype float32 doubles weights and KV cache: serve in the checkpoint's 16 bits.
  if (inputs.config.dtype && (*inputs.config.dtype == "float32" || *inputs.config.dtype == "float")) {
    ServeInputs changed = inputs;
    changed.config.dtype = inputs.target.bf16 ? "bfloat16" : "half";
    add_if_fits("vllm_dtype", changed, fmt::format("--dtype {} (instead of float32)", *changed.config.dtype),
                "half the bytes of weights and KV cache; float32's precision is rarely needed to serve");
  }
  // 1. A shorter --max-model-len, when the weights fit and only one long request does not.
  // Where the profile run itself is max_model_len tokens long (chunked prefill off, no token budget
  // given: V0 before v0.5.4), a shorter length also frees the activations that left no room at all.
  const bool profile_grows_with_length = !s.chunked_prefill && !inputs.config.max_num_batched_tokens;
  const bool kv_short = base.available_kv_bytes > 0 && base.max_model_len_that_fits > 0 &&
                        base.max_model_len_that_fits < s.max_model_len;
  if (kv_short || (base.available_kv_bytes <= 0 && profile_grows_with_length && !base.fits)) {
    // What fits at the length the launch asked for is a lower bound: where the profile run grows
    // with max_model_len (V0 without chunked prefill profiles that many tokens), a shorter length
    // also frees activation memory. Fitting only gets harder as the length grows: bisect.
    auto fits_at = [&](uint64_t len) {
      ServeInputs changed = inputs;
      changed.config.max_model_len = len;
      changed.config.max_model_len_auto = false;
      auto p = try_predict(changed);
      return p && p->fits;
    };
    uint64_t len = base.max_model_len_that_fits;
    if (!kv_short) {
      len = largest_fitting(s.max_model_len, fits_at);
    } else if (fits_at(len)) {
      len += largest_fitting(s.max_model_len - len, [&](uint64_t more) { return fits_at(len + more); });
    }
    // A context far shorter than asked (448 of 8192 tokens) is no answer on its own.
    const uint64_t shortest_useful = std::min(kMinUsefulLength, s.max_model_len / 2);
    for (uint64_t candidate : {round_length_down(len), len}) {
      if (candidate < shortest_useful) break;
      ServeInputs changed = inputs;
      changed.config.max_model_len = candidate;
      changed.config.max_model_len_auto = false;
      if (add_if_fits("vllm_max_model_len", changed, fmt::format("--max-model-len {}", candidate),
                      fmt::format("requests longer than {} tokens are refused", candidate))) {
        break;
      }
    }
  }
  // 2. An 8-bit KV cache halves the bytes per token.
  if (base.kv.dtype_bytes >= 2) {
    ServeInputs changed = inputs;
    changed.config.kv_cache_dtype = "fp8";
    add_if_fits("vllm_kv_cache_dtype", changed, "--kv-cache-dtype fp8",
                "small accuracy risk: without calibrated scales vLLM uses a scale of 1.0 "
                "(use a checkpoint with KV scales or --calculate-kv-scales)",
                inputs.target.fp8 ? "" : "this GPU has no fp8 tensor cores: vLLM stores fp8 and converts, slower attention");
  }
  // 3. A smaller profile run: fewer batched tokens, then fewer sequences.
  for (uint64_t batched : {4096ull, 2048ull, 1024ull, 512ull}) {
    if (batched >= s.max_num_batched_tokens || !s.chunked_prefill) continue;
    ServeInputs changed = inputs;
    changed.config.max_num_batched_tokens = batched;
    if (add_if_fits("vllm_max_num_batched_tokens", changed, fmt::format("--max-num-batched-tokens {}", batched),
                    "long prompts are prefilled in smaller chunks (slower time to first token)")) {
      break;
    }
  }
  for (uint64_t seqs : {128ull, 64ull, 32ull, 16ull, 8ull, 4ull, 1ull}) {
    if (seqs >= s.max_num_seqs) continue;
    ServeInputs changed = inputs;
    changed.config.max_num_seqs = seqs;
    if (add_if_fits("vllm_max_num_seqs", changed, fmt::format("--max-num-seqs {}", seqs),
                    fmt::format("at most {} requests run at once", seqs))) {
      break;
    }
  }
  // 4. No CUDA graphs: frees their memory (or avoids the capture OOM before v0.21).
  if (!s.enforce_eager) {
    ServeInputs changed = inputs;
    changed.config.enforce_eager = true;
    add_if_fits("vllm_enforce_eager", changed, "--enforce-eager", "slower decoding without CUDA graphs");
  }
  // 5. A larger share of the card, up to what the CUDA context leaves (and the graphs need,
  //    before v0.21), with a 0.25 GiB margin.
  {
    uint64_t reserve = base.context_bytes + kGiB / 4 + (base.graphs_in_budget ? 0 : base.cuda_graphs.bytes);
    if (base.total_bytes > reserve) {
      double highest = std::floor(static_cast<double>(base.total_bytes - reserve) /
                                  static_cast<double>(base.total_bytes) * 100) / 100;
      if (!utilization_restored && highest > s.gpu_memory_utilization + 0.005) {
        for (double u = std::ceil(s.gpu_memory_utilization * 100 + 0.5) / 100; u <= highest + 1e-9; u += 0.01) {
          ServeInputs changed = inputs;
          changed.config.gpu_memory_utilization = std::round(u * 100) / 100;
          if (add_if_fits("vllm_gpu_memory_utilization", changed, fmt::format("--gpu-memory-utilization {:.2f}", *changed.config.gpu_memory_utilization),
                          "only when no other process uses this GPU")) {
            break;
          }
        }
      }
    }
  }
  auto smaller_weights = [&]() {
  // 7. Smaller weights: fp8 online quantization where the GPU has fp8, else a 4-bit checkpoint.
  if (s.weights.method.empty()) {
    if (inputs.target.fp8) {
      ServeInputs changed = inputs;
      changed.config.quantization = "fp8";
      add_if_fits("vllm_quantized_weights", changed, "--quantization fp8", "weights quantized to fp8 at load time: small accuracy loss");
    }
    // A 4-bit AWQ checkpoint of the same model (the Hub's "-AWQ" repositories): the model as such a
    // checkpoint's config describes it (4 bits, groups of 128), the launch otherwise unchanged;
    // vLLM reads the method from the checkpoint and picks its Marlin kernel. Below compute
    // capability 7.5 (V100) AWQ's kernels are refused and GPTQ's (6.0) run: a GPTQ one, same size.
    ServeInputs changed = inputs;
    const int capability = min_compute_capability(inputs.target.architecture);
    changed.model.quantization = capability > 0 && capability < quantization_min_capability("awq", "awq") ? "gptq" : "awq";
    changed.model.quantization_bits = 4;
    changed.model.quantization_group_size = 128;
    changed.model.checkpoint_bytes = 0;
    changed.config.quantization.reset();
    // (Not every model has one on the Hub under a predictable name: none is named.)
    const std::string& id = inputs.config.model;
    add_if_fits("vllm_quantized_weights", changed,
                fmt::format("a 4-bit {} checkpoint of {} (published separately)",
                            changed.model.quantization == "gptq" ? "GPTQ" : "AWQ or GPTQ",
                            id.substr(id.find_last_of('/') == std::string::npos ? 0 : id.find_last_of('/') + 1)),
                "a different checkpoint; some accuracy loss");
  }
  };
  auto more_hardware = [&]() {
  // 6. More GPUs: tensor parallel inside the card's tensor-parallel domain (its NVLink domain, one
  //    server for PCIe cards), pipeline stages beyond it, one per node (vLLM's distributed serving
  //    guide: TP = GPUs per node, PP = nodes); and pipeline stages alone, the choice without NVLink.
  //    Each kind's smallest layout that fits, fewest GPUs first, then the most KV tokens.
  {
    const size_t first_parallel = fixes.size();
    // Nothing on this card fits (the weights do not load, or not with one request): each kind's
    // smallest layout that holds the weights is also offered with the longest --max-model-len it
    // holds when that keeps a long context (kLongContext), so that two GPUs at 110k tokens come
    // before sixteen for a million.
    const bool nothing_on_this_card = fixes.empty() && !combine_with_length;
    std::vector<uint64_t> gpu_counts;   // of the fixes from first_parallel on
    std::vector<std::pair<std::pair<uint64_t, uint64_t>, bool>> tried;   // layouts and whether they fitted
    const uint64_t domain = inputs.target.tensor_parallel_domain;
    for (bool pipeline : {false, true}) {
      bool shorter_offered = !nothing_on_this_card;
      // Up to 32 times the GPUs: a 405B or 671B model in 16 bits needs 16 H100s (TP 8 x PP 2).
      for (uint64_t factor : {2ull, 4ull, 8ull, 16ull, 32ull}) {
        uint64_t tp = s.tensor_parallel_size, pp = s.pipeline_parallel_size;
        if (pipeline) {
          pp *= factor;
        } else if (tp * factor <= domain) {
          tp *= factor;
        } else if (tp <= domain && tp * pp * factor % domain == 0) {
          pp = tp * pp * factor / domain;   // TP fills the domain, PP counts the nodes
          tp = domain;
        } else {
          continue;
        }
        // A layout the other kind already tried: done when it fitted, else a larger factor.
        auto seen = std::find_if(tried.begin(), tried.end(), [&](const auto& t) { return t.first == std::make_pair(tp, pp); });
        if (seen != tried.end()) {
          if (seen->second) break;
          continue;
        }
        ServeInputs changed = inputs;
        changed.config.tensor_parallel_size = tp;
        changed.config.pipeline_parallel_size = pp;
        std::string flag;
        if (tp != s.tensor_parallel_size) flag = fmt::format("--tensor-parallel-size {}", tp);
        if (pp != s.pipeline_parallel_size) {
          flag += fmt::format("{}--pipeline-parallel-size {}", flag.empty() ? "" : " ", pp);
        }
        const uint64_t gpus = tp * pp * changed.config.data_parallel_size;
        std::string cost;
        if (tp * pp > domain && pipeline) {
          cost = fmt::format("{} GPUs on {} nodes of {}; pipeline stages pass only activations (each stage adds latency)",
                             gpus, (tp * pp + domain - 1) / domain, domain);
        } else if (tp * pp > domain) {
          cost = fmt::format("{} GPUs: {} nodes of {}, TP {} inside each node{}, PP {} across nodes", gpus,
                             tp * pp / domain, domain, tp, inputs.target.nvlink ? "'s NVLink" : "", pp);
        } else if (pp != s.pipeline_parallel_size) {
          cost = inputs.target.nvlink
              ? fmt::format("{} GPUs; pipeline stages pass only activations, but each adds latency: over this card's "
                            "NVLink tensor parallel is usually faster", gpus)
              : fmt::format("{} GPUs; pipeline stages pass only activations, the choice for GPUs without NVLink", gpus);
        } else {
          cost = fmt::format("{} GPUs{}", gpus, inputs.target.nvlink ? " over NVLink"
                                                : "; without NVLink every layer's all-reduce crosses PCIe");
        }
        const char* id = pp != s.pipeline_parallel_size ? "vllm_pipeline_parallel" : "vllm_tensor_parallel";
        const bool fits = add_if_fits(id, changed, flag, cost);
        if (!fits && !shorter_offered) {
          combine_with_length = true;
          shorter_offered = add_if_fits(id, changed, flag, cost);
          combine_with_length = false;
          if (shorter_offered && fixes.back().max_model_len < std::min(s.max_model_len, kLongContext)) {
            fixes.pop_back();
            shorter_offered = false;
          }
          if (shorter_offered) gpu_counts.push_back(gpus);
        }
        tried.push_back({{tp, pp}, fits});
        if (fits) {
          gpu_counts.push_back(gpus);
          break;
        }
      }
    }
    std::vector<size_t> order(gpu_counts.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (gpu_counts[a] != gpu_counts[b]) return gpu_counts[a] < gpu_counts[b];
      // Equal counts: TP first over NVLink (lower latency per token), pipeline stages first without it.
      const bool tensor_a = fixes[first_parallel + a].id == "vllm_tensor_parallel";
      const bool tensor_b = fixes[first_parallel + b].id == "vllm_tensor_parallel";
      if (tensor_a != tensor_b) return inputs.target.nvlink ? tensor_a : tensor_b;
      return fixes[first_parallel + a].kv_tokens > fixes[first_parallel + b].kv_tokens;
    });
    std::vector<ServeFix> sorted;
    for (size_t i : order) sorted.push_back(std::move(fixes[first_parallel + i]));
    std::move(sorted.begin(), sorted.end(), fixes.begin() + static_cast<std::ptrdiff_t>(first_parallel));
  }
  smaller_weights();
  // 8. CPU offload of weights: as many GiB as the shortfall.
  {
    int64_t need = static_cast<int64_t>(base.capacity.bytes_per_request) - base.available_kv_bytes;
    // Only up to the card's own size: vLLM's example offloads 10 GiB next to a 24 GiB card; beyond
    // the card, every forward pass streams more weights over PCIe than the card holds, and more
    // GPUs (below) are the answer.
    if (need > 0 && static_cast<uint64_t>(need) <= base.total_bytes) {
      double gb = std::ceil(static_cast<double>(need) / static_cast<double>(kGiB) + 0.5);
      ServeInputs changed = inputs;
      changed.config.cpu_offload_gb = inputs.config.cpu_offload_gb + gb;
      add_if_fits("vllm_cpu_offload", changed, fmt::format("--cpu-offload-gb {:g}", changed.config.cpu_offload_gb),
                  "much slower: offloaded weights cross PCIe on every forward pass; needs that much pinned host RAM per GPU");
    }
  }
  // 9. The smallest catalog GPU on which the launch fits unchanged.
  {
    std::vector<const GpuSpec*> gpus;
    for (const GpuSpec& gpu : gpu_catalog()) {
      // vLLM needs compute capability 7.0+: Pascal cards are no answer. A bigger card holds more by
      // nvidia-smi's figure and by CUDA's (the catalog knows CUDA's for some cards only: an A5000's
      // nvidia-smi 23.99 GiB is no more than a 4090's 23.99, though above its CUDA 23.65; an A30's
      // nvidia-smi 24.00 GiB may be below it by CUDA's, unknown).
      const uint64_t smi_now = inputs.target.nvidia_smi_total_bytes ? inputs.target.nvidia_smi_total_bytes
                                                                    : inputs.target.total_bytes;
      if (gpu.vendor == "nvidia" && gpu.architecture != "Pascal" && gpu.total_bytes > smi_now &&
          cuda_total_at_least(gpu) > inputs.target.total_bytes) {
        gpus.push_back(&gpu);
      }
    }
    std::stable_sort(gpus.begin(), gpus.end(),
                     [](const GpuSpec* a, const GpuSpec* b) { return a->total_bytes < b->total_bytes; });
    for (const GpuSpec* gpu : gpus) {
      ServeInputs changed = inputs;
      changed.target = serve_target(*gpu);
      if (add_if_fits("bigger_gpu", changed, fmt::format("--gpu \"{}\"", gpu->name), "a bigger GPU")) break;
    }
  }
  };
  more_hardware();
  if (fixes.empty()) {
    combine_with_length = true;
    more_hardware();
  } else if (std::none_of(fixes.begin(), fixes.end(), [](const ServeFix& f) { return f.id == "vllm_quantized_weights"; }) &&
             std::none_of(fixes.begin(), fixes.end(), [](const ServeFix& f) {
               return f.id != "vllm_tensor_parallel" && f.id != "vllm_pipeline_parallel" && f.id != "bigger_gpu";
             })) {
    // Only more or bigger GPUs fit: smaller weights with a shorter context may fit the GPUs there
    // are (a 4-bit 70B on one 80 GB card at 90k tokens), listed after the layouts that keep the
    // model and its context whole.
    combine_with_length = true;
    const size_t before = fixes.size();
    smaller_weights();
    // Placed where the order puts them: after the more-GPU layouts, before CPU offload and a bigger GPU.
    auto first_after = std::find_if(fixes.begin(), fixes.begin() + static_cast<std::ptrdiff_t>(before), [](const ServeFix& f) {
      return f.id != "vllm_tensor_parallel" && f.id != "vllm_pipeline_parallel";
    });
    std::rotate(first_after, fixes.begin() + static_cast<std::ptrdiff_t>(before), fixes.end());
  }
  if (inputs.config.launcher == "LLM(...)") {
    for (ServeFix& fix : fixes) fix.flag = as_llm_keywords(fix.flag);
  }
  return fixes;
}

}  // namespace oomdoc
