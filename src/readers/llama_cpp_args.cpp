#include "readers/llama_cpp_args.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/text.h"
#include "readers/vllm_args.h"

namespace oomdoc {
namespace {

// The programs of llama.cpp's tools/ (and the names they had before the llama- prefix).
bool is_llama_cpp_program(const std::string& word) {
  const std::string base = word.substr(word.find_last_of('/') == std::string::npos ? 0 : word.find_last_of('/') + 1);
  static const std::set<std::string> kPrograms = {"llama-server", "llama-cli", "llama-run", "server", "main"};
  return kPrograms.count(base) > 0;
}

// llama.cpp's cache types (-ctk/-ctv), as the job's kv_cache_dtype names them.
std::optional<std::string> cache_type(const std::string& value) {
  const std::string v = to_lower(value);
  if (v == "f16") return std::string("f16");
  if (v == "bf16") return std::string("bf16");
  if (v == "f32") return std::string("fp32");
  if (v == "q8_0") return std::string("q8_0");
  if (v == "q4_0") return std::string("q4_0");
  return std::nullopt;
}

}  // namespace

std::optional<Result<LlamaCppCommand>> parse_llama_cpp_command_line(const std::vector<std::string>& input) {
  std::vector<std::string> words = input;
  if (words.size() == 1) {
    auto split = split_shell_words(words[0]);
    if (!split) return std::nullopt;   // vLLM's reader reports the quoting error
    words = std::move(split.value());
  }
  if (words.empty() || !is_llama_cpp_program(words[0])) return std::nullopt;
  LlamaCppCommand c;
  c.launcher = words[0].substr(words[0].find_last_of('/') == std::string::npos ? 0 : words[0].find_last_of('/') + 1);
  c.job.implementation = "llama_cpp";
  c.job.task = "inference";
  c.job.max_new_tokens = 0;
  auto fail = [&](const std::string& what) -> Result<LlamaCppCommand> { return Error{c.launcher + ": " + what}; };
  auto count = [&](const std::string& flag, const std::string& value) -> Result<uint64_t> {
    auto n = parse_decimal<int64_t>(value);
    if (!n || *n < -1 || *n > (1ll << 24)) return Error{fmt::format("{}: {} '{}' is not a count", c.launcher, flag, value)};
    return static_cast<uint64_t>(*n < 0 ? UINT64_MAX : *n);   // -1: llama.cpp's "all" / "auto"
  };
  std::optional<std::string> cache_k, cache_v;
  for (size_t i = 1; i < words.size(); ++i) {
    std::string flag = words[i];
    std::string value;
    const bool inline_value = flag.rfind("--", 0) == 0 && flag.find('=') != std::string::npos;
    if (inline_value) {
      value = flag.substr(flag.find('=') + 1);
      flag = flag.substr(0, flag.find('='));
    }
    auto take = [&]() -> std::optional<std::string> {
      if (inline_value) return value;
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
      if (*v == "auto" || *v == "all") continue;   // every layer (auto: as many as fit; sized for all)
      auto n = count(flag, *v);
      if (!n) return n.error();
      if (*n != UINT64_MAX) c.job.gpu_layers = std::min<uint64_t>(*n, 1u << 16);
    } else if (flag == "-ub" || flag == "--ubatch-size") {
      if (!needs(v)) return fail(flag + " needs a size");
      auto n = count(flag, *v);
      if (!n || *n == 0 || *n == UINT64_MAX) return fail(fmt::format("{} '{}' is not a micro-batch size", flag, *v));
      c.job.prefill_chunk = *n;
    } else if (flag == "-np" || flag == "--parallel") {
      if (!needs(v)) return fail(flag + " needs a count");
      auto n = count(flag, *v);
      if (!n || *n == 0 || *n == UINT64_MAX) return fail(fmt::format("{} '{}' is not a number of slots", flag, *v));
      c.job.batch_size = *n;
    } else if (flag == "-fa" || flag == "--flash-attn") {
      // Newer builds take on/off/auto; older ones a bare switch.
      std::string mode = "on";
      if (inline_value) mode = value;
      else if (i + 1 < words.size() && (words[i + 1] == "on" || words[i + 1] == "off" || words[i + 1] == "auto")) mode = words[++i];
      if (mode == "auto") c.notes.push_back(flag + " auto: taken as on (CUDA builds turn it on where the GPU supports it)");
      c.job.attention_impl = mode == "off" ? "eager" : "flash";
    } else if (flag == "-ctk" || flag == "--cache-type-k" || flag == "-ctv" || flag == "--cache-type-v") {
      if (!needs(v)) return fail(flag + " needs a type");
      auto type = cache_type(*v);
      if (!type) return fail(fmt::format("{} {}: oomdoc sizes f16, bf16, f32, q8_0 and q4_0 caches", flag, *v));
      (flag == "-ctk" || flag == "--cache-type-k" ? cache_k : cache_v) = *type;
    } else if (flag == "-b" || flag == "--batch-size" || flag == "-t" || flag == "--threads" || flag == "--host" ||
               flag == "--port" || flag == "-a" || flag == "--alias" || flag == "--temp" || flag == "-n" ||
               flag == "--n-predict" || flag == "-p" || flag == "--prompt" || flag == "--seed" || flag == "-s" ||
               flag == "--chat-template" || flag == "--api-key" || flag == "-tb" || flag == "--threads-batch") {
      auto given = take();
      c.ignored.push_back(given ? flag + " " + *given : flag);
    } else if (flag == "-hf" || flag == "--hf-repo" || flag == "-hfr") {
      return fail(flag + ": oomdoc reads the GGUF file itself and never downloads: give -m PATH to the .gguf file");
    } else {
      c.ignored.push_back(flag);
    }
  }
  if (c.model_path.empty()) return fail("no model given (-m PATH to a .gguf file)");
  if (cache_k && cache_v && *cache_k != *cache_v) {
    c.notes.push_back(fmt::format("K cache {} and V cache {}: the cache is sized at {} for both", *cache_k, *cache_v, *cache_k));
  }
  if (cache_k || cache_v) c.job.kv_cache_dtype = cache_k ? *cache_k : *cache_v;
  return c;
}

Job llama_cpp_job_for(const LlamaCppCommand& command, uint64_t model_context) {
  Job job = command.job;
  const uint64_t context = command.context && *command.context > 0 ? *command.context : model_context;
  const uint64_t slots = std::max<uint64_t>(job.batch_size.value_or(1), 1);
  if (context > 0) job.prompt_len = std::max<uint64_t>(context / slots, 1);
  return job;
}

}  // namespace oomdoc
