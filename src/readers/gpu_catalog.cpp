// Reads the bundled GPU catalog (data/gpus.json) once, and finds entries by the names users type:
// "4090", "h100-80", "a100 40gb", or nvidia-smi's own "NVIDIA A100-SXM4-80GB".
#include "readers/gpu_catalog.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <set>

#include "core/embedded.h"
#include "core/text.h"
#include "core/units.h"

namespace oomdoc {
namespace {

struct LoadedCatalog {
  std::vector<GpuSpec> gpus;
  std::string error;  // non-empty when the embedded file is broken (a build bug; tests catch it)
};

Result<GpuSpec> parse_entry(const nlohmann::json& entry) {
  GpuSpec gpu;
  gpu.name = entry.at("name").get<std::string>();
  gpu.aliases = entry.value("aliases", std::vector<std::string>{});
  gpu.vendor = entry.at("vendor").get<std::string>();
  gpu.architecture = entry.at("architecture").get<std::string>();
  gpu.total_bytes = entry.at("memory_mib").get<uint64_t>() * kMiB;
  gpu.source = entry.at("memory_source").get<std::string>();
  gpu.bf16 = entry.at("bf16").get<bool>();
  gpu.fp8 = entry.at("fp8").get<bool>();
  gpu.fp4 = entry.at("fp4").get<bool>();
  gpu.nvlink = entry.at("nvlink").get<bool>();
  gpu.interconnect = entry.at("interconnect").get<std::string>();
  gpu.tensor_parallel_domain = entry.value("tp_domain_gpus", gpu.tensor_parallel_domain);
  if (gpu.tensor_parallel_domain == 0) return Error{"gpus.json: " + gpu.name + ": tp_domain_gpus is 0"};
  if (entry.contains("cuda_total_gib")) {
    auto quantity = parse_quantity(entry["cuda_total_gib"].get<std::string>() + " GiB");
    if (!quantity) return Error{"gpus.json: " + gpu.name + ": cuda_total_gib is not a number"};
    gpu.cuda_total_bytes = quantity->bytes;
    gpu.cuda_total_source = entry.at("cuda_total_source").get<std::string>();
  }
  if (gpu.total_bytes == 0) return Error{"gpus.json: " + gpu.name + ": memory_mib is 0"};
  return gpu;
}

LoadedCatalog load_catalog() {
  LoadedCatalog catalog;
  auto text = embedded("gpus.json");
  if (!text) {
    catalog.error = "the GPU catalog (data/gpus.json) is not compiled in";
    return catalog;
  }
  try {
    auto doc = nlohmann::json::parse(text->begin(), text->end());
    for (const auto& entry : doc.at("gpus")) {
      auto gpu = parse_entry(entry);
      if (!gpu) {
        catalog.error = gpu.error().message;
        catalog.gpus.clear();
        return catalog;
      }
      catalog.gpus.push_back(std::move(gpu.value()));
    }
  } catch (const nlohmann::json::exception& e) {
    catalog.error = std::string("gpus.json: ") + e.what();
    catalog.gpus.clear();
  }
  return catalog;
}

const LoadedCatalog& loaded() {
  static const LoadedCatalog catalog = load_catalog();
  return catalog;
}

// Vendor words and memory units carry no information for telling catalog entries apart.
bool is_noise(const std::string& token) {
  static const std::set<std::string> kNoise = {"nvidia", "geforce", "tesla", "amd", "instinct",
                                               "radeon", "gb", "gib", "the"};
  return kNoise.count(token) > 0;
}

// "NVIDIA A100-SXM4-80GB" -> {a, 100, sxm, 4, 80}: lower-case runs of letters or of digits, so
// that "rtx4090" and "rtx 4090", "a100-80" and "a100 80gb" compare equal.
std::vector<std::string> name_tokens(std::string_view text) {
  std::vector<std::string> tokens;
  std::string current;
  auto flush = [&]() {
    if (!current.empty() && !is_noise(current)) tokens.push_back(current);
    current.clear();
  };
  for (char raw : text) {
    auto c = static_cast<unsigned char>(raw);
    if (!std::isalnum(c)) {
      flush();
      continue;
    }
    char lower = static_cast<char>(std::tolower(c));
    if (!current.empty() && (std::isdigit(static_cast<unsigned char>(current.back())) != 0) !=
                                (std::isdigit(c) != 0)) {
      flush();
    }
    current.push_back(lower);
  }
  flush();
  return tokens;
}

// Words the user wrote as one ("a40", "rtx4090"): {a, 40}, {rtx, 4090}. They must stay
// neighbours in a card's name, so that "a40" is not "A100 40GB" (whose a is followed by 100).
std::vector<std::pair<std::string, std::string>> glued_pairs(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> pairs;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = start;
    while (end < text.size() && std::isalnum(static_cast<unsigned char>(text[end])) != 0) ++end;
    const std::vector<std::string> word = name_tokens(text.substr(start, end - start));
    for (size_t i = 1; i < word.size(); ++i) pairs.emplace_back(word[i - 1], word[i]);
    start = end + 1;
  }
  return pairs;
}

// A card name or alias that has every word of the query, with the words typed as one adjacent.
bool names_card(const std::vector<std::string>& card, const std::vector<std::string>& query,
                const std::vector<std::pair<std::string, std::string>>& glued) {
  std::set<std::string> have(card.begin(), card.end());
  if (!std::all_of(query.begin(), query.end(), [&](const std::string& t) { return have.count(t) > 0; })) return false;
  return std::all_of(glued.begin(), glued.end(), [&](const auto& pair) {
    for (size_t i = 1; i < card.size(); ++i) {
      if (card[i - 1] == pair.first && card[i] == pair.second) return true;
    }
    return false;
  });
}

// A trailing memory size: "4090 24gb", "a100-40g", "4090-24", "3060 12 GB". The size must stand
// apart from the name (a space or dash before it), so "a10g" or "rtx4090" never split; `unit` says
// whether it was written as a size (a unit, or a dash), as opposed to a number after a space.
struct MemoryQualifier {
  std::string name;
  uint64_t gb = 0;
  bool unit = false;
};

std::optional<MemoryQualifier> trailing_memory(std::string_view text) {
  std::string s = to_lower(std::string(text));
  auto trim_end = [&](const char* chars) { s.erase(s.find_last_not_of(chars) + 1); };
  trim_end(" \t");
  MemoryQualifier q;
  for (const char* unit : {"gib", "gb", "g"}) {
    const std::string_view u(unit);
    if (s.size() <= u.size() || !s.ends_with(u)) continue;
    const char before = s[s.size() - u.size() - 1];
    if (std::isdigit(static_cast<unsigned char>(before)) != 0 || before == ' ') {
      s.resize(s.size() - u.size());
      trim_end(" \t");
      q.unit = true;
    }
    break;
  }
  size_t digits = s.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(s[digits - 1])) != 0) --digits;
  if (digits == s.size() || s.size() - digits > 4 || digits == 0) return std::nullopt;
  const char before = s[digits - 1];
  if (before != ' ' && before != '-' && before != '_') return std::nullopt;
  q.unit = q.unit || before == '-' || before == '_';
  q.gb = std::stoull(s.substr(digits));
  q.name = s.substr(0, digits - 1);
  if (name_tokens(q.name).empty()) return std::nullopt;
  return q;
}

// The memory a card's name states ("GeForce RTX 4090 24GB": 24), 0 when it states none.
uint64_t named_gb(const GpuSpec& gpu) {
  const std::string& n = gpu.name;
  for (size_t at = n.find("GB"); at != std::string::npos; at = n.find("GB", at + 1)) {
    size_t digits = at;
    while (digits > 0 && std::isdigit(static_cast<unsigned char>(n[digits - 1])) != 0) --digits;
    if (digits < at) return std::stoull(n.substr(digits, at - digits));
  }
  return 0;
}

std::string joined(const std::vector<std::string>& tokens) {
  std::string out;
  for (const auto& token : tokens) {
    if (!out.empty()) out.push_back(' ');
    out += token;
  }
  return out;
}

std::vector<std::vector<std::string>> candidate_tokens(const GpuSpec& gpu) {
  std::vector<std::vector<std::string>> out;
  out.push_back(name_tokens(gpu.name));
  for (const auto& alias : gpu.aliases) out.push_back(name_tokens(alias));
  return out;
}

}  // namespace

const std::vector<GpuSpec>& gpu_catalog() { return loaded().gpus; }

const GpuSpec& largest_catalog_gpu() {
  static const GpuSpec& largest = *std::max_element(
      gpu_catalog().begin(), gpu_catalog().end(),
      [](const GpuSpec& a, const GpuSpec& b) { return a.total_bytes < b.total_bytes; });
  return largest;
}

Result<GpuSpec> find_gpu(std::string_view name) {
  const LoadedCatalog& catalog = loaded();
  if (!catalog.error.empty()) return Error{catalog.error};
  std::vector<std::string> query = name_tokens(name);
  if (query.empty()) return Error{fmt::format("GPU name '{}' names no GPU", name)};
  // "4090,3090" or "4090+3090": cards of different kinds in one job, which oomdoc does not size.
  if (name.find(',') != std::string_view::npos || name.find('+') != std::string_view::npos) {
    return Error{fmt::format("GPU name '{}': one kind of card per job; mixed GPUs are not sized. Give the card with "
                             "the least memory: every GPU then gets at least what the prediction says", name)};
  }

  // A catalog name or alias matches when it contains every word of the query; the tightest match
  // (fewest words the user did not type) wins. The aliases spell out the names people use ("h100"
  // is the SXM card, "a100" the 80GB SXM4), so a query that is not one of them and fits several
  // cards equally well is ambiguous: "rtx" or "sxm" could be any of a dozen cards.
  // A size written after the name ("4090 24gb", "a100-40g") picks among the cards of that name.
  using Matches = std::vector<std::pair<size_t, const GpuSpec*>>;  // (words not typed, card), one per card
  auto match = [&](const std::vector<std::string>& words, std::string_view text, uint64_t gb) {
    const auto glued = glued_pairs(text);
    Matches found;
    for (const GpuSpec& gpu : catalog.gpus) {
      if (gb != 0 && named_gb(gpu) != gb) continue;
      size_t fewest_extra = std::numeric_limits<size_t>::max();
      for (const auto& tokens : candidate_tokens(gpu)) {
        if (names_card(tokens, words, glued)) {
          fewest_extra = std::min(fewest_extra, tokens.size() - std::min(tokens.size(), words.size()));
        }
      }
      if (fewest_extra != std::numeric_limits<size_t>::max()) found.emplace_back(fewest_extra, &gpu);
    }
    std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    return found;
  };
  Matches matches = match(query, name, 0);
  if (matches.empty() || matches.front().first != 0) {
    if (auto size = trailing_memory(name)) {
      const std::vector<std::string> base = name_tokens(size->name);
      Matches sized = match(base, size->name, size->gb);
      if (!sized.empty()) {
        matches = std::move(sized);
        query = base;
      } else if (size->unit) {
        Matches other = match(base, size->name, 0);
        if (!other.empty()) {
          std::string names;
          for (size_t i = 0; i < other.size() && i < 6; ++i) names += (i ? ", " : "") + other[i].second->name;
          return Error{fmt::format("unknown GPU '{}': no '{}' card in the catalog has {} GB ({}); `oomdoc gpus "
                                   "--catalog` lists the cards, or give --memory SIZE",
                                   name, size->name, size->gb, names)};
        }
      }
    }
  }
  auto list = [](const std::vector<const GpuSpec*>& gpus) {
    std::string out;
    for (size_t i = 0; i < gpus.size() && i < 6; ++i) out += (i ? ", " : "") + gpus[i]->name;
    if (gpus.size() > 6) out += fmt::format(" and {} more", gpus.size() - 6);
    return out;
  };
  if (!matches.empty()) {
    const bool exact = matches.front().first == 0;
    const bool only_numbers = std::all_of(query.begin(), query.end(), [](const std::string& t) {
      return std::all_of(t.begin(), t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
    });
    std::vector<const GpuSpec*> tied;
    for (const auto& [extra, gpu] : matches) {
      if (extra == matches.front().first) tied.push_back(gpu);
    }
    // A bare number is a model number only when an alias says so ("4090"); "16" or "100" could be
    // a memory size or part of several cards' names.
    if (!exact && only_numbers) {
      std::vector<const GpuSpec*> all;
      for (const auto& m : matches) all.push_back(m.second);
      const bool typed_only_a_number = std::none_of(name.begin(), name.end(), [](char c) {
        return std::isalpha(static_cast<unsigned char>(c)) != 0;
      });
      if (typed_only_a_number) {
        return Error{fmt::format("ambiguous GPU '{}': a number alone names no card ({}); give the card's name, "
                                 "or --memory SIZE",
                                 name, list(all))};
      }
      // "NVIDIA GB200": vendor words and memory units ("GB") are ignored, which leaves a number.
      return Error{fmt::format("unknown GPU '{}': no catalog card has that name, and the number {} alone names none "
                               "({}); `oomdoc gpus --catalog` lists the cards, or give --memory SIZE",
                               name, joined(query), list(all))};
    }
    if (tied.size() == 1) return *tied.front();
    return Error{fmt::format("ambiguous GPU '{}': it fits {} equally ({}); name one (`oomdoc gpus --catalog` "
                             "lists all)",
                             name, tied.size() == 2 ? "both" : fmt::format("{} cards", tied.size()), list(tied))};
  }

  // No match: suggest only names that are close: a small edit distance over the normalized words,
  // or most of the query's words in common.
  std::string wanted = joined(query);
  // A card with the query's model number comes first ("4090ti" is nearer the RTX 4090 than the
  // 4060 Ti, though one letter fewer separates it from the latter).
  struct Suggestion { bool shares_number; size_t shared_words, distance; const GpuSpec* gpu; };
  std::vector<Suggestion> close;
  auto is_number = [](const std::string& t) { return !t.empty() && std::isdigit(static_cast<unsigned char>(t[0])); };
  const auto glued = glued_pairs(name);
  // The model number is the first number typed; a later one is a memory size ("h20 80").
  const auto first_number = std::find_if(query.begin(), query.end(), is_number);
  const std::string model_number = first_number == query.end() ? std::string() : *first_number;
  for (const GpuSpec& gpu : catalog.gpus) {
    size_t distance = std::numeric_limits<size_t>::max();
    size_t shared = 0;
    bool shares_number = false;
    for (const auto& tokens : candidate_tokens(gpu)) {
      distance = std::min(distance, edit_distance(wanted, joined(tokens)));
      std::set<std::string> have(tokens.begin(), tokens.end());
      shared = std::max<size_t>(shared, std::count_if(query.begin(), query.end(),
                                                       [&](const std::string& t) { return have.count(t) > 0; }));
      // The number counts with the letters typed onto its front ("h300" is not the MI300X).
      if (!model_number.empty() && have.count(model_number) > 0) {
        shares_number = shares_number || std::all_of(glued.begin(), glued.end(), [&](const auto& pair) {
                          if (pair.second != model_number || is_number(pair.first)) return true;
                          for (size_t i = 1; i < tokens.size(); ++i) {
                            if (tokens[i - 1] == pair.first && tokens[i] == model_number) return true;
                          }
                          return false;
                        });
      }
    }
    const bool near_spelling = distance <= std::max<size_t>(1, wanted.size() / 3);
    const bool most_words = query.size() >= 2 && shared * 2 >= query.size() + 1;
    if (near_spelling || most_words || shares_number) close.push_back({shares_number, shared, distance, &gpu});
  }
  std::stable_sort(close.begin(), close.end(), [](const Suggestion& a, const Suggestion& b) {
    if (a.shares_number != b.shares_number) return a.shares_number;
    return a.distance != b.distance ? a.distance < b.distance : a.shared_words > b.shared_words;
  });
  if (close.empty()) {
    return Error{fmt::format("unknown GPU '{}'; no catalog entry is close (`oomdoc gpus --catalog` lists all, or "
                             "give --memory SIZE)",
                             name)};
  }
  std::string closest;
  for (size_t i = 0; i < close.size() && i < 3; ++i) closest += (i ? ", " : "") + close[i].gpu->name;
  return Error{fmt::format(
      "unknown GPU '{}'; closest catalog entries: {} (`oomdoc gpus --catalog` lists all, or give "
      "--memory SIZE)",
      name, closest)};
}

std::string card_names(const std::vector<const GpuSpec*>& cards, size_t at_most) {
  std::string names;
  for (size_t i = 0; i < cards.size() && i < at_most; ++i) names += (i ? ", " : "") + cards[i]->name;
  return names;
}

std::vector<const GpuSpec*> other_sizes_named(std::string_view name, const GpuSpec& chosen) {
  std::vector<const GpuSpec*> out;
  const std::vector<std::string> query = name_tokens(name);
  if (query.empty()) return out;
  const auto glued = glued_pairs(name);
  for (const GpuSpec& gpu : loaded().gpus) {
    if (gpu.total_bytes == chosen.total_bytes || gpu.vendor != chosen.vendor) continue;
    for (const auto& tokens : candidate_tokens(gpu)) {
      if (names_card(tokens, query, glued)) {
        out.push_back(&gpu);
        break;
      }
    }
  }
  return out;
}

}  // namespace oomdoc
