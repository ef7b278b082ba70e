#include "readers/model_resolver.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "core/file_input.h"
#include "core/units.h"
#include "model/architecture.h"
#include "readers/model_config.h"
#include "readers/gguf_header.h"
#include "readers/model_presets.h"
#include "readers/safetensors_header.h"

namespace oomdoc {
namespace fs = std::filesystem;

namespace {

// The safetensors headers may hold fewer parameters than the config implies by this share before
// it is a warning: nothing a full unquantized checkpoint leaves out is that large (tied weights
// are stored once and counted once).
constexpr double kFewerParamsTolerance = 0.01;
// ... and more by this factor: multi-token-prediction layers (DeepSeek-V3: +2%), a vision tower
// the config reader does not count, a duplicated tied head or an MLM head stay below it; two
// copies of the weights in one folder (consolidated.safetensors beside the shards) do not.
constexpr double kMoreParamsFactor = 1.5;

// A local config's _name_or_path is often the path it was saved from, not a Hugging Face id.
bool is_path_like_id(const std::string& id) {
  return !id.empty() && (id[0] == '/' || id[0] == '.' || id[0] == '~' || id.find('\\') != std::string::npos);
}

// With tied embeddings the output head is the input embedding: some checkpoints still store a copy
// as lm_head.weight (Qwen3-0.6B: 155,582,464 elements of its 751,632,384), which from_pretrained
// ties away on load (PreTrainedModel.tie_weights). The copy is dropped from the count and the bytes,
// so the headers give the loaded model's parameters.
void drop_stored_copy_of_tied_head(ModelSpec& spec, SafetensorsSummary& headers) {
  if (!spec.tie_word_embeddings) return;
  for (auto it = headers.tensors.begin(); it != headers.tensors.end(); ++it) {
    if (it->name != "lm_head.weight") continue;
    headers.total_elements -= it->elements;
    headers.total_bytes -= it->bytes;
    if (auto dtype = headers.elements_by_dtype.find(it->dtype); dtype != headers.elements_by_dtype.end()) {
      dtype->second -= std::min(dtype->second, it->elements);
      if (dtype->second == 0) headers.elements_by_dtype.erase(dtype);
    }
    spec.notes.push_back(fmt::format("the checkpoint stores a copy of the tied output head (lm_head.weight, {} "
                                     "parameters); loading ties it to the embeddings, so it is not counted",
                                     format_exact_count(it->elements)));
    headers.tensors.erase(it);
    return;
  }
}

}  // namespace

bool looks_like_path(const std::string& name) {
  if (name.empty()) return false;
  if (name[0] == '/' || name[0] == '~' || name == "." || name == ".." || name.rfind("./", 0) == 0 ||
      name.rfind("../", 0) == 0 || name.back() == '/') {
    return true;
  }
  // A Windows path, or more than the one slash of org/name.
  const size_t slash = name.find('/');
  return name.find('\\') != std::string::npos ||
         (slash != std::string::npos && name.find('/', slash + 1) != std::string::npos);
}

Result<ModelSpec> model_from_folder(const std::string& folder) {
  fs::path config = fs::path(folder) / "config.json";
  if (!fs::exists(config)) {
    // Headers alone give the count but not the shape the activation formulas need.
    auto headers = read_safetensors_folder(folder);
    if (headers) {
      Error e = make_error(fmt::format(
          "{}: no config.json; the safetensors headers hold {} parameters but not the model's shape",
          folder, format_exact_count(headers->total_elements)));
      e.unknown_kind = true;
      return e;
    }
    return make_error(fmt::format("{}: no config.json and no *.safetensors", folder));
  }
  auto text = read_small_file(config.string());
  if (!text) return text.error();
  auto spec = parse_model_config(*text, config.string());
  if (!spec) return spec;
  spec->source = folder;
  if (is_path_like_id(spec->id)) spec->id.clear();  // named by its folder (ModelSpec::label)
  bool has_weights = false;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.path().extension() == ".safetensors") has_weights = true;
  }
  if (!has_weights) return spec;
  auto headers = read_safetensors_folder(folder);
  if (!headers) return headers.error();
  drop_stored_copy_of_tied_head(*spec, *headers);
  spec->params_by_dtype = headers->elements_by_dtype;
  spec->checkpoint_bytes = headers->total_bytes;
  if (!spec->quantization.empty()) {
    spec->notes.push_back(fmt::format("pre-quantized checkpoint ({}): {} bytes of tensors on disk",
                                      spec->quantization, headers->total_bytes));
    return spec;
  }
  // Unquantized: the headers count every parameter exactly (tied weights are stored once).
  const uint64_t config_count = spec->total_params, stored = headers->total_elements;
  if (stored == config_count) return spec;
  const std::string counts = fmt::format("{}: the config implies {} parameters, the safetensors headers hold {}",
                                         folder, format_exact_count(config_count), format_exact_count(stored));
  if (static_cast<double>(stored) < static_cast<double>(config_count) * (1 - kFewerParamsTolerance)) {
    // from_pretrained builds the config's model whatever the files hold, so that is what is sized.
    spec->warnings.push_back(fmt::format(
        "{} ({:.1f}% fewer): tensors are missing from the checkpoint (a partial download or a wrong config?); "
        "sized from the config, which is what loading it builds", counts,
        100.0 * static_cast<double>(config_count - stored) / static_cast<double>(config_count)));
    spec->checkpoint_bytes = 0;  // the files do not hold the model that is loaded
    return spec;
  }
  if (static_cast<double>(stored) > static_cast<double>(config_count) * kMoreParamsFactor) {
    // Loading builds the config's model and reads one copy: that is what is sized.
    spec->warnings.push_back(fmt::format(
        "{} ({:.2f}x): more than the model has (two copies of the weights in the folder?); sized from the config, "
        "which is what loading it builds", counts, static_cast<double>(stored) / static_cast<double>(config_count)));
    spec->checkpoint_bytes = 0;
    return spec;
  } else {
    spec->notes.push_back(fmt::format("config implies {} parameters, safetensors headers hold {}; using the headers",
                                      format_exact_count(config_count), format_exact_count(stored)));
  }
  spec->total_params = stored;
  return spec;
}

Result<std::optional<std::string>> find_in_hf_cache(const std::string& repo_id) {
  auto slash = repo_id.find('/');
  if (slash == std::string::npos || repo_id.find('/', slash + 1) != std::string::npos) return std::optional<std::string>{};
  std::vector<fs::path> roots;
  if (const char* hub = std::getenv("HF_HUB_CACHE"); hub && *hub) roots.emplace_back(hub);
  if (const char* home = std::getenv("HF_HOME"); home && *home) roots.push_back(fs::path(home) / "hub");
  if (const char* user = std::getenv("HOME"); user && *user) {
    roots.push_back(fs::path(user) / ".cache" / "huggingface" / "hub");
  }
  const std::string dir = "models--" + repo_id.substr(0, slash) + "--" + repo_id.substr(slash + 1);
  std::error_code ec;
  for (const fs::path& root : roots) {
    fs::path repo = root / dir;
    if (!fs::is_directory(repo, ec)) continue;
    // refs/main names the snapshot the hub client would use; otherwise any snapshot with a config.
    std::string ref;
    if (auto text = read_small_file((repo / "refs" / "main").string(), 1024)) {
      ref = *text;
      while (!ref.empty() && std::isspace(static_cast<unsigned char>(ref.back()))) ref.pop_back();
    }
    if (!ref.empty()) {
      const fs::path config = repo / "snapshots" / ref / "config.json";
      if (fs::exists(config, ec)) return std::optional<std::string>((repo / "snapshots" / ref).string());
      // A broken link, or weights without their config, is a download cut short; a snapshot of
      // other files only (a tokenizer fetched alone, `--include`) is no model: looked past.
      bool has_weights = false;
      for (const auto& entry : fs::directory_iterator(repo / "snapshots" / ref, ec)) {
        const std::string name = entry.path().filename().string();
        has_weights = has_weights || name.ends_with(".safetensors") || name.ends_with(".bin") || name.ends_with(".gguf");
      }
      // refs/main is written before the snapshot's files: a ref to no snapshot at all is a download
      // cut short too.
      const bool no_snapshot = !fs::exists(repo / "snapshots" / ref, ec);
      if (no_snapshot) {
        return make_error(fmt::format(
            "{}: the Hugging Face cache's refs/main names snapshot {}, which is not there: an interrupted download; "
            "fetch it again (huggingface-cli download {})", repo_id, ref, repo_id));
      }
      if (fs::is_symlink(config, ec) || has_weights) {
        return make_error(fmt::format(
            "{}: {} (the Hugging Face cache's current snapshot, refs/main) {}: an interrupted download; fetch it "
            "again (huggingface-cli download {})", repo_id, config.string(),
            fs::is_symlink(config, ec) ? "is a broken link, its blob missing" : "is missing", repo_id));
      }
    }
    std::vector<fs::path> snapshots;
    for (const auto& entry : fs::directory_iterator(repo / "snapshots", ec)) {
      if (fs::exists(entry.path() / "config.json", ec)) snapshots.push_back(entry.path());
    }
    if (!snapshots.empty()) {
      std::sort(snapshots.begin(), snapshots.end());
      return std::optional<std::string>(snapshots.back().string());
    }
  }
  return std::optional<std::string>{};
}

Result<ModelSpec> resolve_model(const std::string& name) {
  if (name.empty()) return make_error("no model given (a preset name, a Hugging Face repo id, or a path)");
  std::error_code ec;
  if (!fs::exists(name, ec) && is_gguf_file(name)) return make_error(fmt::format("{}: no such file", name));
  if (fs::exists(name, ec)) {
    if (fs::is_directory(name, ec)) return model_from_folder(name);
    if (is_gguf_file(name)) return model_from_gguf(name);
    if (name.size() > 12 && name.substr(name.size() - 12) == ".safetensors") {
      return model_from_folder(fs::path(name).parent_path().string().empty() ? "." : fs::path(name).parent_path().string());
    }
    auto text = read_small_file(name);
    if (!text) return text.error();
    auto spec = parse_model_config(*text, name);
    if (spec && is_path_like_id(spec->id)) spec->id.clear();
    return spec;
  }
  if (looks_like_path(name)) {
    // A path from another machine (a cluster's /models/Llama-3.1-8B-Instruct): its last component
    // may name a bundled preset, which is then sized, loudly.
    std::string last = name;
    while (last.size() > 1 && (last.back() == '/' || last.back() == '\\')) last.pop_back();
    if (auto cut = last.find_last_of("/\\"); cut != std::string::npos) last = last.substr(cut + 1);
    std::optional<Result<ModelSpec>> preset;
    if (!last.empty() && last != "." && last != "..") preset = find_preset(last);
    if (!preset) return make_error(fmt::format("{}: no such file or folder", name));
    if (*preset) {
      (*preset)->warnings.push_back(
          fmt::format("{}: no such folder here; sized as the bundled preset {}", name, (*preset)->id));
    }
    return *preset;
  }
  auto cached = find_in_hf_cache(name);
  if (!cached) return cached.error();
  if (const auto& snapshot = *cached) {
    auto spec = model_from_folder(*snapshot);
    if (spec) {
      spec->id = name;
      spec->source = "hf-cache:" + *snapshot;
    }
    return spec;
  }
  if (auto preset = find_preset(name)) return *preset;
  // "mistral 7b", "Llama 3.1 8B": what people type; preset names join words with '-'.
  if (name.find(' ') != std::string::npos) {
    std::string dashed = name;
    std::replace(dashed.begin(), dashed.end(), ' ', '-');
    if (auto preset = find_preset(dashed)) return *preset;
  }
  // A shell variable left in a command line (`vllm serve $MODEL`) is no name to look for.
  if (name.find_first_of("$`") != std::string::npos) {
    return make_error(fmt::format("{}: a shell expansion, not a model name: give the model it stands for", name));
  }
  std::string hint;
  for (const auto& id : closest_presets(name)) hint += (hint.empty() ? "" : ", ") + id;
  Error e = make_error(fmt::format(
      "{}: not a file or folder, not in the Hugging Face cache, and not a bundled preset (closest: {})",
      name, hint));
  e.unknown_kind = true;
  return e;
}

Result<ModelSpec> model_from_param_count(uint64_t params, const ShapeHints& hints) {
  if (params == 0) return make_error("--params: must be a positive count such as 7B");
  // Widths and depths of the Llama-2 / Llama-3 family by size (published configs); the layer
  // count then follows from ~12*h^2 parameters per layer unless given.
  struct Bucket { uint64_t max_params, hidden, heads, kv_heads; };
  static const Bucket kBuckets[] = {
      {600'000'000, 1024, 16, 16},  {2'000'000'000, 2048, 32, 8},  {5'000'000'000, 3072, 24, 8},
      {10'000'000'000, 4096, 32, 8}, {20'000'000'000, 5120, 40, 8}, {45'000'000'000, 6656, 52, 8},
      {150'000'000'000, 8192, 64, 8}, {UINT64_MAX, 16384, 128, 8}};
  const Bucket* b = &kBuckets[0];
  for (const auto& bucket : kBuckets) {
    if (params <= bucket.max_params) { b = &bucket; break; }
  }
  ModelSpec m;
  m.id = "custom";
  m.model_type = "llama";
  m.source = "--params";
  m.hidden_size = hints.hidden_size.value_or(b->hidden);
  m.num_attention_heads = hints.num_attention_heads.value_or(hints.hidden_size ? std::max<uint64_t>(1, m.hidden_size / 128) : b->heads);
  m.num_kv_heads = hints.num_kv_heads.value_or(std::min(b->kv_heads, m.num_attention_heads));
  m.vocab_size = hints.vocab_size.value_or(32000);
  m.intermediate_size = hints.intermediate_size.value_or(static_cast<uint64_t>(std::llround(m.hidden_size * 8.0 / 3 / 256)) * 256);
  m.num_layers = hints.num_layers.value_or(1);  // one layer stands in until the count is derived below
  // The flags given, as the user wrote them, for the messages below.
  const std::pair<const char*, const std::optional<uint64_t>*> kGiven[] = {
      {"--hidden-size", &hints.hidden_size}, {"--layers", &hints.num_layers},
      {"--heads", &hints.num_attention_heads}, {"--kv-heads", &hints.num_kv_heads},
      {"--vocab-size", &hints.vocab_size}, {"--intermediate-size", &hints.intermediate_size}};
  // Before anything divides by the shape (head_dim, the per-layer count below).
  if (auto ok = validate_shape(m, "--params", ShapeFieldNames::kFlags); !ok) {
    // A field the user left out is derived from the others: say so when the error is about it.
    std::string message = ok.error().message;
    for (const auto& [flag, value] : kGiven) {
      const std::string_view f = flag;
      if (value->has_value() || (f != "--heads" && f != "--kv-heads" && f != "--intermediate-size")) continue;
      if (message.find(flag) == std::string::npos) continue;
      message += fmt::format(" ({} was not given: derived from --params{}; pass {})", flag,
                             hints.hidden_size ? fmt::format(" and --hidden-size {}", *hints.hidden_size) : "", flag);
      break;
    }
    return make_error(message);
  }
  m.head_dim = m.hidden_size / m.num_attention_heads;
  if (!hints.num_layers) {
    ParamCount c1 = count_parameters(m);
    uint64_t per_layer = c1.linear + (c1.norms - m.hidden_size);
    uint64_t outside = c1.total - per_layer;
    m.num_layers = params > outside ? std::max<uint64_t>(1, (params - outside + per_layer / 2) / per_layer) : 1;
  }
  fill_parameter_counts(m);
  // Shape flags fix part of the count: every layer's attention projections and the embeddings
  // (and the MLP, when its width is given; otherwise the derived depth absorbs it). A count below
  // that cannot be this shape.
  std::string given;
  for (const auto& [flag, value] : kGiven) {
    if (value->has_value()) given += fmt::format("{}{} {}", given.empty() ? "" : ", ", flag, **value);
  }
  if (given.empty()) {
    // Without shape flags the smallest derived shape (hidden 1024, one layer, a 32,000-token
    // vocabulary) already holds about 78M parameters: a smaller count is no model it can stand for.
    const uint64_t derived = count_parameters(m).total;
    if (derived > 2 * params) {
      return make_error(fmt::format("--params {}: fewer parameters than the smallest shape oomdoc derives ({}: hidden {}, "
                                    "{} layer{}, vocab {}); give the shape too (--hidden-size, --layers, --vocab-size) "
                                    "or the model itself",
                                    format_count(params), format_exact_count(derived), m.hidden_size, m.num_layers,
                                    m.num_layers == 1 ? "" : "s", m.vocab_size));
    }
  } else {
    const ParamCount shape = count_parameters(m);
    uint64_t fixed = shape.embeddings + shape.lm_head;
    for (const LinearShape& l : linear_layers(m)) {
      const bool attention = l.role == "q" || l.role == "k" || l.role == "v" || l.role == "qkv" || l.role == "o";
      if (attention || hints.intermediate_size) fixed += l.params();
    }
    if (params < fixed) {
      return make_error(fmt::format("--params {}: the shape given ({}) holds {} parameters in {} alone, more than "
                                    "the count; raise --params or give a smaller shape",
                                    format_count(params), given, format_exact_count(fixed),
                                    hints.intermediate_size ? "its layers and embeddings" : "its attention and embeddings"));
    }
  }
  m.notes.push_back(fmt::format("shape from --params: hidden {}, {} layers, {} heads ({} kv), vocab {}, MLP {}; "
                                "the shape gives {} parameters, the estimate uses the {} given",
                                m.hidden_size, m.num_layers, m.num_attention_heads, m.num_kv_heads, m.vocab_size,
                                m.intermediate_size, format_exact_count(m.total_params), format_exact_count(params)));
  m.total_params = params;
  return m;
}

}  // namespace oomdoc
