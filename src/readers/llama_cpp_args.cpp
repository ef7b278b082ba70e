#include "readers/llama_cpp_args.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/text.h"
#include "model/gguf_types.h"
#include "readers/llama_cpp_flags.h"
#include "readers/vllm_args.h"

namespace oomdoc {
namespace {

// The programs of llama.cpp's tools/ (and the names they had before the llama- prefix).
bool is_llama_cpp_program(const std::string& word) {
  const std::string base = word.substr(word.find_last_of('/') == std::string::npos ? 0 : word.find_last_of('/') + 1);
  static const std::set<std::string> kPrograms = {"llama-server", "llama-cli", "llama-run", "server", "main"};
  return kPrograms.count(base) > 0;
}

// llama.cpp's cache type names (common/arg.cpp kv_cache_types, matched exactly by
// kv_cache_type_from_str) as the job's kv_cache_dtype names them (f32 is the job's fp32).
std::optional<std::string> cache_type(const std::string& value) {
  static const std::set<std::string> kNames = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"};
  if (!kNames.count(value)) return std::nullopt;
  return value == "f32" ? std::string("fp32") : value;
}

// Bytes per cached value, to size a K and V of different types at the larger.
double cache_bytes(const std::string& type) { return ggml_bytes(*llama_cache_type(type), 1); }

// common/arg.cpp's truthy / falsy / auto words for --flash-attn and similar.
std::optional<std::string> on_off_auto(const std::string& word) {
  const std::string w = to_lower(word);
  if (w == "on" || w == "1" || w == "true" || w == "enabled" || w == "yes") return std::string("on");
  if (w == "off" || w == "0" || w == "false" || w == "disabled" || w == "no") return std::string("off");
  if (w == "auto" || w == "-1") return std::string("auto");
  return std::nullopt;
}

}  // namespace

std::optional<Result<LlamaCppCommand>> parse_llama_cpp_command_line(const std::vector<std::string>& input) {
  std::vector<std::string> words = input;
  if (words.size() == 1) {
    auto commands = split_shell_commands(words[0]);
    if (!commands) return std::nullopt;   // vLLM's reader reports the quoting error
    // Shell text: the first command that runs llama.cpp (`cd ~/llama.cpp && ./llama-server ...`).
    words = commands->front();
    for (const std::vector<std::string>& command : *commands) {
      std::map<std::string, std::string> env;
      const size_t at = skip_command_wrappers(command, 0, env);
      if (at < command.size() && is_llama_cpp_program(command[at])) {
        words = command;
        break;
      }
    }
  }
  // Past `nohup`, `env VAR=...`, `sudo` and the like: the program itself.
  std::map<std::string, std::string> env;
  words.erase(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(skip_command_wrappers(words, 0, env)));
  if (words.empty() || !is_llama_cpp_program(words[0])) return std::nullopt;
  LlamaCppCommand c;
  c.launcher = words[0].substr(words[0].find_last_of('/') == std::string::npos ? 0 : words[0].find_last_of('/') + 1);
  c.job.implementation = "llama_cpp";
  c.job.task = "inference";
  c.job.max_new_tokens = 0;
  auto fail = [&](const std::string& what) -> Result<LlamaCppCommand> { return Error{c.launcher + ": " + what}; };
  auto count = [&](const std::string& flag, const std::string& value) -> Result<uint64_t> {
    auto n = parse_decimal<int64_t>(value);
    if (!n || *n < -1) return Error{fmt::format("{}: {} '{}' is not a count", c.launcher, flag, value)};
    // Contexts, batches and slots past 16M tokens are no launch anyone sizes (a typo's extra zeros).
    constexpr int64_t kMaxCount = int64_t{1} << 24;
    if (*n > kMaxCount) {
      return Error{fmt::format("{}: {} '{}' is out of range (at most {})", c.launcher, flag, value, kMaxCount)};
    }
    return static_cast<uint64_t>(*n < 0 ? UINT64_MAX : *n);   // -1: llama.cpp's "all" / "auto"
  };
  std::optional<std::string> cache_k, cache_v, flash;
  std::optional<uint64_t> n_batch;
  for (size_t i = 1; i < words.size(); ++i) {
    std::string flag = words[i];
    // common/arg.cpp reads --ctx_size as --ctx-size.
    if (flag.rfind("--", 0) == 0) std::replace(flag.begin(), flag.end(), '_', '-');
    // It looks each word up whole: --ctx-size=4096 is no flag to it.
    if (flag.find('=') != std::string::npos && find_llama_cpp_flag(flag.substr(0, flag.find('=')))) {
      return fail(fmt::format("{}: llama.cpp takes a value as the next word ({} {}); it exits with "
                              "\"error: invalid argument: {}\"", words[i], flag.substr(0, flag.find('=')),
                              flag.substr(flag.find('=') + 1), flag));
    }
    auto take = [&]() -> std::optional<std::string> {
      if (i + 1 >= words.size()) return std::nullopt;
      return words[++i];
    };
    auto needs = [&](std::optional<std::string>& v) { v = take(); return v.has_value(); };
    std::optional<std::string> v;
    if (flag == "-m" || flag == "--model") {
      if (!needs(v)) return fail(flag + " needs a path");
      c.model_path = *v;
    } else if (flag == "-c" || flag == "--ctx-size") {
      if (!needs(v)) return fail(flag + " needs a size");
      auto n = count(flag, *v);
      if (!n) return n.error();
      c.context = *n == UINT64_MAX ? 0 : *n;
    } else if (flag == "-ngl" || flag == "--gpu-layers" || flag == "--n-gpu-layers") {
      if (!needs(v)) return fail(flag + " needs a count");
      c.gpu_layers_given = true;
      if (*v == "auto" || *v == "all") continue;   // every layer (auto: as many as fit; sized for all)
      auto n = count(flag, *v);
      if (!n) return n.error();
      if (*n != UINT64_MAX) c.job.gpu_layers = std::min<uint64_t>(*n, 1u << 16);
    } else if (flag == "-ub" || flag == "--ubatch-size" || flag == "-b" || flag == "--batch-size") {
      if (!needs(v)) return fail(flag + " needs a size");
      auto n = count(flag, *v);
      if (!n || *n == 0 || *n == UINT64_MAX) return fail(fmt::format("{} '{}' is not a batch size", flag, *v));
      if (flag == "-b" || flag == "--batch-size") n_batch = *n;
      else c.job.prefill_chunk = *n;
    } else if (flag == "-np" || flag == "--parallel") {
      if (!needs(v)) return fail(flag + " needs a count");
      if (*v == "-1") {   // newer builds: chosen by the server
        c.notes.push_back(flag + " -1: one sequence assumed (the server picks the slots)");
        continue;
      }
      auto n = count(flag, *v);
      if (!n || *n == 0 || *n == UINT64_MAX) return fail(fmt::format("{} '{}' is not a number of slots", flag, *v));
      c.job.batch_size = *n;
    } else if (flag == "-fa" || flag == "--flash-attn") {
      // Newer builds take on/off/auto (and arg.cpp's truthy/falsy words); older ones a bare switch.
      std::optional<std::string> mode;
      if (i + 1 < words.size()) mode = on_off_auto(words[i + 1]);
      if (mode) ++i;
      flash = mode.value_or("on");
    } else if (flag == "-ctk" || flag == "--cache-type-k" || flag == "-ctv" || flag == "--cache-type-v") {
      if (!needs(v)) return fail(flag + " needs a type");
      auto type = cache_type(*v);
      if (!type) {
        return fail(fmt::format("{} {}: llama.cpp's cache types are f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, "
                                "q5_1; it exits with \"Unsupported cache type: {}\"", flag, *v, *v));
      }
      (flag == "-ctk" || flag == "--cache-type-k" ? cache_k : cache_v) = *type;
    } else if (flag == "-hf" || flag == "--hf-repo" || flag == "-hfr") {
      return fail(flag + ": oomdoc reads the GGUF file itself and never downloads: give -m PATH to the .gguf file");
    } else if (auto known = find_llama_cpp_flag(flag)) {
      std::string given = flag;
      if (known->values == -1) {   // an on/off/auto word when one follows (newer builds), else a switch
        if (i + 1 < words.size() && on_off_auto(words[i + 1])) given += " " + words[++i];
      }
      for (int n = 0; n < known->values; ++n) {
        if (i + 1 >= words.size()) return fail(flag + " needs a value");
        given += " " + words[++i];
      }
      (known->changes_memory ? c.not_modelled : c.ignored).push_back(given);
    } else if (flag.size() > 1 && flag[0] == '-') {
      // llama.cpp refuses any word it does not know: a typo must not size the default silently.
      auto meant = closest_spelling(flag, llama_cpp_flag_spellings());
      return fail(fmt::format("{}: not a llama.cpp flag{}; it exits with \"error: invalid argument: {}\"", flag,
                              meant ? fmt::format(" (did you mean {}?)", *meant) : "", flag));
    } else {
      return fail(fmt::format("'{}': llama.cpp takes no positional arguments (a flag's value is missing its flag?); "
                              "it exits with \"error: invalid argument: {}\"", flag, flag));
    }
  }
  if (c.model_path.empty()) return fail("no model given (-m PATH to a .gguf file)");
  // llama.cpp computes in micro-batches of min(-b, -ub) (defaults 2048 and 512).
  if (n_batch) c.job.prefill_chunk = std::min(*n_batch, c.job.prefill_chunk.value_or(512));
  // Flash attention: given, else current builds' -fa auto (on with CUDA where supported).
  if (!flash) {
    flash = "auto";
    c.notes.push_back("-fa not given: auto, taken as on (current builds turn it on with CUDA; 2024 builds had it off: give -fa off)");
  } else if (*flash == "auto") {
    c.notes.push_back("-fa auto: taken as on (CUDA builds turn it on where the GPU supports it)");
  }
  c.job.attention_impl = *flash == "off" ? "eager" : "flash";
  // One cache type for K and V: the larger of the two when they differ (llama.cpp's default is f16).
  if (cache_k || cache_v) {
    const std::string k = cache_k.value_or("f16"), v = cache_v.value_or("f16");
    const std::string larger = cache_bytes(k) >= cache_bytes(v) ? k : v;
    if (k != v) c.notes.push_back(fmt::format("K cache {} and V cache {}: both sized at {}", k, v, larger));
    c.job.kv_cache_dtype = larger;
    if (v != "f16" && v != "bf16" && v != "fp32" && *flash == "off") {
      return fail(fmt::format("-ctv {} needs flash attention: llama.cpp refuses a quantized V cache with -fa off", v));
    }
  }
  return c;
}

LlamaCppJob llama_cpp_job_for(const LlamaCppCommand& command, uint64_t model_context) {
  LlamaCppJob out{command.job, command.notes};
  const uint64_t context = command.context && *command.context > 0 ? *command.context : model_context;
  const uint64_t slots = std::max<uint64_t>(out.job.batch_size.value_or(1), 1);
  if (context > 0) out.job.prompt_len = std::max<uint64_t>(context / slots, 1);
  if (!command.context || *command.context == 0) {
    out.notes.push_back(fmt::format("-c {}: the model's trained context, {} tokens (current builds; 2024 builds used 4096)",
                                    command.context ? "0" : "not given", model_context));
  }
  if (!command.gpu_layers_given) {
    out.notes.push_back("-ngl not given: every layer sized on the GPU (current builds fit -ngl by themselves; 2024 "
                        "builds kept every layer on the CPU)");
  }
  auto join = [](const std::vector<std::string>& items) {
    std::string joined;
    for (const auto& i : items) joined += (joined.empty() ? "" : " ") + i;
    return joined;
  };
  if (!command.not_modelled.empty()) out.notes.push_back("not sized (they change GPU memory): " + join(command.not_modelled));
  if (!command.ignored.empty()) out.notes.push_back("ignored (no effect on GPU memory): " + join(command.ignored));
  return out;
}

}  // namespace oomdoc
