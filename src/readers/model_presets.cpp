#include "readers/model_presets.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <tuple>

#include "core/embedded.h"
#include "core/text.h"
#include "readers/model_config.h"

namespace oomdoc {
namespace {

// Name without organisation, lower case, instruct/chat/-hf suffixes removed: the key that lets
// "meta-llama/Llama-2-7b-chat-hf" and "llama-2-7b" find the same architecture.
std::string variant_key(const std::string& name) {
  std::string s = to_lower(name);
  if (auto slash = s.rfind('/'); slash != std::string::npos) s = s.substr(slash + 1);
  // A 16-bit re-upload ("llama-3-70b-fp16") is the same model in another dtype.
  static const char* kSuffixes[] = {"-hf", "-instruct", "-chat", "-it", "-base", "-pt", "-fp16", "-bf16"};
  bool changed = true;
  while (changed) {
    changed = false;
    for (const char* suffix : kSuffixes) {
      std::string_view sv(suffix);
      if (s.size() > sv.size() && s.compare(s.size() - sv.size(), sv.size(), sv) == 0) {
        s.resize(s.size() - sv.size());
        changed = true;
      }
    }
  }
  return s;
}

// The last path component, lower case: "Qwen/Qwen2.5-7B-Instruct", "/models/Qwen2.5-7B-Instruct/".
std::string without_organisation(const std::string& name) {
  std::string s = to_lower(name);
  while (!s.empty() && s.back() == '/') s.pop_back();
  if (auto slash = s.rfind('/'); slash != std::string::npos) s = s.substr(slash + 1);
  return s;
}

struct Match {
  const PresetInfo* preset = nullptr;
  const PresetVariant* variant = nullptr;
  std::string label;  // the id or alias that matched, as the preset file spells it
};

// The name a match is shown as: the preset file's own spelling of what the user named. An alias
// that is a Hugging Face id ("google/gemma-3-27b-pt") is shown as itself, not as the preset's id;
// a short alias ("llama-2-7b") or a name found through its variant key shows the preset's id,
// unless one of its ids ends with the same name ("/models/Llama-3.1-8B-Instruct" ->
// meta-llama/Llama-3.1-8B-Instruct).
std::string label_for(const std::string& wanted_name, const std::string& id, const std::vector<std::string>& aliases) {
  const std::string wanted = to_lower(wanted_name);
  const std::string short_name = without_organisation(wanted_name);
  auto is_hub_id = [](const std::string& name) { return name.find('/') != std::string::npos; };
  if (to_lower(id) == wanted) return id;
  for (const auto& a : aliases) {
    if (to_lower(a) == wanted) return is_hub_id(a) ? a : id;
  }
  if (without_organisation(id) == short_name) return id;
  for (const auto& a : aliases) {
    if (is_hub_id(a) && without_organisation(a) == short_name) return a;
  }
  return id;
}

// A variant is matched before the preset's aliases and variant keys: "Qwen2.5-7B-Instruct" must not
// fall back to the base model's config.
Match match_variant(const std::string& name) {
  const std::string wanted = to_lower(name);
  const std::string short_name = without_organisation(name);
  for (const auto& p : preset_index()) {
    for (const auto& v : p.variants) {
      if (to_lower(v.id) == wanted) return {&p, &v, label_for(name, v.id, v.aliases)};
      for (const auto& a : v.aliases) {
        if (to_lower(a) == wanted) return {&p, &v, label_for(name, v.id, v.aliases)};
      }
    }
  }
  // The same release under another organisation or in a local folder is the same config.
  for (const auto& p : preset_index()) {
    for (const auto& v : p.variants) {
      if (without_organisation(v.id) == short_name) return {&p, &v, label_for(name, v.id, v.aliases)};
      for (const auto& a : v.aliases) {
        if (without_organisation(a) == short_name) return {&p, &v, label_for(name, v.id, v.aliases)};
      }
    }
  }
  return {};
}

const PresetInfo* match(const std::string& name) {
  const auto& index = preset_index();
  const std::string wanted = to_lower(name);
  for (const auto& p : index) {
    if (to_lower(p.id) == wanted) return &p;
  }
  for (const auto& p : index) {
    for (const auto& a : p.aliases) {
      if (to_lower(a) == wanted) return &p;
    }
  }
  const std::string key = variant_key(name);
  for (const auto& p : index) {
    if (variant_key(p.id) == key) return &p;
    for (const auto& a : p.aliases) {
      if (variant_key(a) == key) return &p;
    }
  }
  return nullptr;
}

}  // namespace

const std::vector<PresetInfo>& preset_index() {
  static const std::vector<PresetInfo> index = [] {
    std::vector<PresetInfo> out;
    for (const EmbeddedFile& file : embedded_under("presets/")) {
      auto j = nlohmann::json::parse(file.content.begin(), file.content.end(), nullptr, false);
      if (j.is_discarded() || !j.is_object()) continue;  // tests check every preset parses
      PresetInfo p;
      p.file = std::string(file.path);
      p.id = j.value("id", "");
      if (j.contains("aliases") && j["aliases"].is_array()) {
        for (const auto& a : j["aliases"]) {
          if (a.is_string()) p.aliases.push_back(a.get<std::string>());
        }
      }
      p.source = j.value("source", "");
      if (j.contains("variants") && j["variants"].is_array()) {
        for (const auto& v : j["variants"]) {
          if (!v.is_object() || !v.contains("id") || !v["id"].is_string()) continue;
          PresetVariant variant;
          variant.id = v["id"].get<std::string>();
          variant.source = v.value("source", "");
          variant.note = v.value("note", "");
          if (v.contains("aliases") && v["aliases"].is_array()) {
            for (const auto& a : v["aliases"]) {
              if (a.is_string()) variant.aliases.push_back(a.get<std::string>());
            }
          }
          p.variants.push_back(std::move(variant));
        }
      }
      if (j.contains("reference_params") && j["reference_params"].is_number_unsigned()) {
        p.reference_params = j["reference_params"].get<uint64_t>();
      }
      if (j.contains("reference_params_source") && j["reference_params_source"].is_string()) {
        p.reference_params_source = j["reference_params_source"].get<std::string>();
      }
      out.push_back(std::move(p));
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.file < b.file; });
    return out;
  }();
  return index;
}

std::optional<Result<ModelSpec>> find_preset(const std::string& name) {
  Match found = match_variant(name);
  if (!found.preset) {
    found.preset = match(name);
    if (found.preset) found.label = label_for(name, found.preset->id, found.preset->aliases);
  }
  const PresetInfo* p = found.preset;
  if (!p) return std::nullopt;
  auto content = embedded(p->file);
  auto j = nlohmann::json::parse(content->begin(), content->end(), nullptr, false);
  if (j.is_discarded() || !j.contains("config")) {
    return Result<ModelSpec>(make_error(fmt::format("preset {}: no config object", p->file)));
  }
  nlohmann::json config = j["config"];
  std::string source = "preset:" + p->file;
  if (found.variant) {
    for (const auto& v : j["variants"]) {
      if (v.value("id", "") != found.variant->id) continue;
      if (!v.contains("config") || !v["config"].is_object()) {
        return Result<ModelSpec>(make_error(fmt::format("preset {}: variant {} has no config object", p->file,
                                                        found.variant->id)));
      }
      config.merge_patch(v["config"]);
    }
    source += "#" + found.variant->id;
  }
  auto spec = parse_model_config(config.dump(), source);
  if (!spec) return spec;
  spec->id = found.label;
  spec->reference_params = p->reference_params;
  return spec;
}

namespace {

// "llama3-70b" -> llama, 3, 70b: words, split also where letters turn into a version number.
std::vector<std::string> name_tokens(const std::string& key) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  };
  for (char c : key) {
    if (c == '-' || c == '_' || c == ' ' || c == '/') {
      flush();
      continue;
    }
    const bool digit = c >= '0' && c <= '9';
    if (digit && !cur.empty() && std::isalpha(static_cast<unsigned char>(cur.back()))) flush();
    cur += c;
  }
  flush();
  return out;
}

// How many of the query's words a preset name has ("3" matches a "3.1" version).
size_t shared_tokens(const std::vector<std::string>& query, const std::string& candidate_key) {
  const auto candidate = name_tokens(candidate_key);
  size_t n = 0;
  for (const auto& t : query) {
    for (const auto& c : candidate) {
      if (c == t || (c.size() > t.size() && c.compare(0, t.size(), t) == 0 && c[t.size()] == '.')) {
        ++n;
        break;
      }
    }
  }
  return n;
}

}  // namespace

std::vector<std::string> closest_presets(const std::string& name, size_t limit) {
  // Most shared words first (family, version, size: "llama-3-70b" -> Llama-3.1-70B before
  // Llama-2-70b), then the smallest edit distance.
  std::vector<std::tuple<size_t, size_t, std::string>> scored;
  const std::string key = variant_key(name);
  const auto query = name_tokens(key);
  for (const auto& p : preset_index()) {
    size_t distance = edit_distance(key, variant_key(p.id));
    size_t shared = shared_tokens(query, variant_key(p.id));
    for (const auto& a : p.aliases) {
      distance = std::min(distance, edit_distance(key, variant_key(a)));
      shared = std::max(shared, shared_tokens(query, variant_key(a)));
    }
    scored.emplace_back(query.size() - std::min(shared, query.size()), distance, p.id);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < limit; ++i) out.push_back(std::get<2>(scored[i]));
  return out;
}

}  // namespace oomdoc
