#include "process/alloc_conf.h"

#include <array>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/text.h"

namespace oomdoc {

namespace {

// Every key PyTorch's CUDA allocator accepts, and the check of its value. Sources (pytorch/pytorch):
// c10/core/AllocatorConfig.{h,cpp} (AcceleratorAllocatorConfig::getKeys and its parsers) and
// c10/cuda/CUDAAllocatorConfig.{h,cpp} (CUDAAllocatorConfig::getKeys, parseArgs), as of 2.9; older
// versions know a subset and refuse the others just as PyTorch's own parser does ("Unrecognized
// CachingAllocator option"). User guide: docs/source/notes/cuda.rst, "Optimizing memory usage with
// PYTORCH_CUDA_ALLOC_CONF".
enum class ValueKind {
  kAny,             // accepted as written (PyTorch checks it; no rule we can state exactly)
  kBool,            // exactly True or False (PyTorch refuses "true", "1")
  kBackend,         // native or cudaMallocAsync
  kSplitMb,         // an integer number of MiB, at least 20 (kLargeBuffer: smaller is refused)
  kPositiveInt,     // an integer above 0
  kFraction,        // garbage_collection_threshold: a number strictly between 0 and 1
  kNumber,          // a number
  kPowerOfTwo,      // pinned_num_register_threads
  kRoundupDivisions,  // a power of two, or [size:divisions,...,>:divisions]
};

struct KnownSetting {
  std::string_view key;
  ValueKind kind;
};

constexpr std::array kKnownSettings = {
    KnownSetting{"backend", ValueKind::kBackend},
    KnownSetting{"expandable_segments", ValueKind::kBool},
    KnownSetting{"max_split_size_mb", ValueKind::kSplitMb},
    KnownSetting{"max_non_split_rounding_mb", ValueKind::kSplitMb},
    KnownSetting{"garbage_collection_threshold", ValueKind::kFraction},
    KnownSetting{"roundup_power2_divisions", ValueKind::kRoundupDivisions},
    KnownSetting{"large_segment_size_mb", ValueKind::kPositiveInt},
    KnownSetting{"release_lock_on_cudamalloc", ValueKind::kBool},
    KnownSetting{"release_lock_on_hipmalloc", ValueKind::kBool},
    KnownSetting{"pinned_use_cuda_host_register", ValueKind::kBool},
    KnownSetting{"pinned_use_hip_host_register", ValueKind::kBool},
    KnownSetting{"pinned_use_background_threads", ValueKind::kBool},
    KnownSetting{"pinned_num_register_threads", ValueKind::kPowerOfTwo},
    KnownSetting{"pinned_reserve_segment_size_mb", ValueKind::kPositiveInt},
    KnownSetting{"per_process_memory_fraction", ValueKind::kNumber},
    KnownSetting{"graph_capture_record_stream_reuse", ValueKind::kAny},
    KnownSetting{"pinned_free_catch_all", ValueKind::kAny},
    KnownSetting{"throw_on_cudamalloc_oom", ValueKind::kAny},
};

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// PyTorch's lexer: tokens split at ',', ':', '[' and ']', which are tokens themselves; spaces dropped.
std::vector<std::string> tokens_of(const std::string& settings) {
  std::vector<std::string> out;
  std::string word;
  for (char c : settings) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!word.empty()) out.push_back(std::move(word));
      word.clear();
      out.emplace_back(1, c);
    } else if (c != ' ') {
      word += c;
    }
  }
  if (!word.empty()) out.push_back(std::move(word));
  return out;
}

// What is wrong with `value` for a setting of this kind; empty when it is fine.
std::string value_problem(ValueKind kind, const std::string& value) {
  switch (kind) {
    case ValueKind::kAny:
      return {};
    case ValueKind::kBool:
      return value == "True" || value == "False" ? std::string() : "must be True or False (with capitals)";
    case ValueKind::kBackend:
      return value == "native" || value == "cudaMallocAsync" ? std::string() : "must be native or cudaMallocAsync";
    case ValueKind::kSplitMb: {
      auto mb = parse_decimal<uint64_t>(value);
      return mb && *mb >= 20 ? std::string() : "must be a whole number of MiB, 20 or more";
    }
    case ValueKind::kPositiveInt: {
      auto n = parse_decimal<uint64_t>(value);
      return n && *n > 0 ? std::string() : "must be a whole number above 0";
    }
    case ValueKind::kFraction: {
      auto x = parse_decimal<double>(value);
      return x && *x > 0 && *x < 1 ? std::string() : "must be a number between 0 and 1 (both excluded), e.g. 0.6";
    }
    case ValueKind::kNumber:
      return parse_decimal<double>(value) ? std::string() : "must be a number";
    case ValueKind::kPowerOfTwo:
    case ValueKind::kRoundupDivisions: {
      auto n = parse_decimal<uint64_t>(value);
      return n && is_power_of_two(*n) ? std::string() : "must be a power of two (1, 2, 4, 8, ...)";
    }
  }
  return {};
}

std::string known_keys() {
  std::string out;
  for (const KnownSetting& s : kKnownSettings) out += (out.empty() ? "" : ", ") + std::string(s.key);
  return out;
}

}  // namespace

Status check_alloc_conf(const std::string& settings) {
  const std::vector<std::string> t = tokens_of(settings);
  auto fail = [](const std::string& what) { return make_error("--alloc-conf: " + what); };
  if (t.empty()) return fail("no setting given (e.g. expandable_segments:True)");
  size_t i = 0;
  while (i < t.size()) {
    const std::string& key = t[i];
    if (key.size() == 1 && std::string_view(",:[]").find(key[0]) != std::string_view::npos) {
      return fail(fmt::format("'{}' where a setting name was expected in '{}'", key, settings));
    }
    const KnownSetting* known = nullptr;
    for (const KnownSetting& s : kKnownSettings) {
      if (s.key == key) known = &s;
    }
    if (known == nullptr) {
      std::vector<std::string> keys;
      for (const KnownSetting& s : kKnownSettings) keys.emplace_back(s.key);
      const std::optional<std::string> nearest = closest_spelling(to_lower(key), keys);
      return fail(fmt::format("unknown setting '{}'{}; PyTorch's CUDA allocator knows {}", key,
                              nearest ? fmt::format(" (did you mean {}?)", *nearest) : "", known_keys()));
    }
    if (i + 2 >= t.size() || t[i + 1] != ":" || t[i + 2] == ",") {
      return fail(fmt::format("'{}' has no value: write {}:VALUE", key, key));
    }
    i += 2;
    if (t[i] == "[") {
      // roundup_power2_divisions:[256:1,512:2,>:8]: per size interval (a power of two, '>' for the rest),
      // divisions that are a power of two or 0.
      if (known->kind != ValueKind::kRoundupDivisions) return fail(fmt::format("{}: a list is not a value for it", key));
      ++i;
      while (i < t.size() && t[i] != "]") {
        const std::string& size = t[i];
        if (i + 2 >= t.size() || t[i + 1] != ":") return fail(fmt::format("{}: expected SIZE:DIVISIONS in the list", key));
        const std::string& divisions = t[i + 2];
        auto s = parse_decimal<uint64_t>(size);
        if (size != ">" && !(s && is_power_of_two(*s))) {
          return fail(fmt::format("{}: '{}' must be a power of two (an interval start in MiB) or >", key, size));
        }
        auto d = parse_decimal<uint64_t>(divisions);
        if (!d || (*d != 0 && !is_power_of_two(*d))) {
          return fail(fmt::format("{}: '{}' must be a power of two, or 0 to disable rounding", key, divisions));
        }
        i += 3;
        if (i < t.size() && t[i] == ",") ++i;
      }
      if (i >= t.size()) return fail(fmt::format("{}: the list has no closing ]", key));
    } else if (std::string problem = value_problem(known->kind, t[i]); !problem.empty()) {
      return fail(fmt::format("{}:{}: {}", key, t[i], problem));
    }
    ++i;
    if (i < t.size()) {
      if (t[i] != ",") return fail(fmt::format("expected ',' after {}'s value, found '{}'", key, t[i]));
      ++i;
      if (i == t.size()) return fail("a ',' ends the settings");
    }
  }
  return Ok{};
}

}  // namespace oomdoc
