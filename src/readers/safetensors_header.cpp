#include "readers/safetensors_header.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "core/file_input.h"

namespace oomdoc {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit is 100 MB

bool multiply_checked(uint64_t a, uint64_t b, uint64_t& out) {
  if (a != 0 && b > UINT64_MAX / a) return false;
  out = a * b;
  return true;
}

}  // namespace

uint64_t safetensors_dtype_bits(std::string_view dtype) {
  // The safetensors format's Dtype enum (safetensors/src/tensor.rs, Dtype::bitsize): F4 and the
  // F6 formats are packed below a byte (MXFP4 / MX6); C64 is a pair of F32.
  struct Width { std::string_view name; uint64_t bits; };
  static constexpr Width kWidths[] = {
      {"BOOL", 8},  {"F4", 4},       {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8},   {"I8", 8},
      {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"I16", 16},   {"U16", 16}, {"F16", 16},
      {"BF16", 16}, {"I32", 32},     {"U32", 32},    {"F32", 32},    {"C64", 64}, {"F64", 64},
      {"I64", 64},  {"U64", 64}};
  for (const Width& w : kWidths) {
    if (w.name == dtype) return w.bits;
  }
  return 0;
}

std::string safetensors_dtype_names() {
  return "BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, I16, U16, F16, BF16, I32, U32, F32, "
         "C64, F64, I64, U64";
}

Result<SafetensorsSummary> parse_safetensors_header(std::string_view head, uint64_t file_size,
                                                    const std::string& source) {
  if (head.size() < 8 || file_size < 8) {
    return make_error(fmt::format("{}: too short for a safetensors file ({} bytes)", source, file_size));
  }
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(head[i]);
  if (length > file_size - 8) {
    return make_error(fmt::format("{}: header length {} is larger than the file ({} bytes)", source,
                                  length, file_size));
  }
  if (length > kMaxHeaderBytes) {
    return make_error(fmt::format("{}: header length {} exceeds the 100 MB safetensors limit", source, length));
  }
  if (head.size() < 8 + length) {
    return make_error(fmt::format("{}: truncated header ({} of {} bytes)", source, head.size() - 8, length));
  }
  std::string_view text = head.substr(8, length);
  auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return make_error(fmt::format("{}: header is not valid JSON", source));
  if (!j.is_object()) return make_error(fmt::format("{}: header is not a JSON object", source));
  const uint64_t data_size = file_size - 8 - length;
  SafetensorsSummary out;
  struct Extent {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Extent> extents;
  for (const auto& item : j.items()) {
    const std::string& name = item.key();  // plain names: the lambda below captures one
    const auto& info = item.value();
    if (name == "__metadata__") {
      // safetensors reads it as an optional map of strings to strings, and refuses anything else.
      const bool strings = info.is_null() || (info.is_object() && std::all_of(info.begin(), info.end(), [](const nlohmann::json& v) {
                                                return v.is_string();
                                              }));
      if (!strings) return make_error(fmt::format("{}: __metadata__ is not a map of strings", source));
      continue;
    }
    auto bad = [&](const std::string& what) {
      return make_error(fmt::format("{}: tensor \"{}\": {}", source, name, what));
    };
    if (!info.is_object()) return bad("entry is not an object");
    if (!info.contains("dtype") || !info["dtype"].is_string()) return bad("missing dtype");
    if (!info.contains("shape") || !info["shape"].is_array()) return bad("missing shape");
    if (!info.contains("data_offsets") || !info["data_offsets"].is_array() || info["data_offsets"].size() != 2) {
      return bad("missing data_offsets");
    }
    SafetensorsTensor t;
    t.name = name;
    t.dtype = info["dtype"].get<std::string>();
    uint64_t elements = 1;
    for (const auto& dim : info["shape"]) {
      if (!dim.is_number_integer() || dim.get<int64_t>() < 0) {
        return bad(fmt::format("invalid shape {}", info["shape"].dump()));
      }
      uint64_t d = dim.get<uint64_t>();
      t.shape.push_back(d);
      if (!multiply_checked(elements, d, elements)) return bad("shape overflows");
    }
    t.elements = elements;
    const auto& offsets = info["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) return bad("invalid data_offsets");
    uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end) return bad(fmt::format("data_offsets [{}, {}] end before they begin", begin, end));
    if (end > data_size) {
      return bad(fmt::format("data_offsets [{}, {}] outside the {} data bytes", begin, end, data_size));
    }
    t.bytes = end - begin;
    // An unknown dtype has no width: counting its elements as parameters would be a guess.
    const uint64_t bits = safetensors_dtype_bits(t.dtype);
    if (bits == 0) {
      return bad(fmt::format("unknown dtype \"{}\" (the safetensors dtypes: {})", t.dtype, safetensors_dtype_names()));
    }
    uint64_t expected_bits = 0;
    if (!multiply_checked(elements, bits, expected_bits)) return bad("shape overflows");
    // F4 / F6 pack below a byte, but a tensor ends on a byte: the library refuses one that does
    // not (safetensors/src/tensor.rs, SafeTensorError::MisalignedSlice).
    if (expected_bits % 8 != 0) {
      return bad(fmt::format("{} elements of {} are {} bits, not whole bytes (the safetensors library refuses it: "
                             "MisalignedSlice)", elements, t.dtype, expected_bits));
    }
    const uint64_t expected = expected_bits / 8;
    if (expected != t.bytes) {
      return bad(fmt::format("{} elements of {} need {} bytes, data_offsets give {}", elements, t.dtype,
                             expected, t.bytes));
    }
    out.elements_by_dtype[t.dtype] += elements;
    out.total_elements += elements;
    out.total_bytes += t.bytes;
    out.tensors.push_back(std::move(t));
    extents.push_back({begin, end, name});
  }
  // The tensors tile the data exactly, as the safetensors library checks on load (Metadata::validate:
  // InvalidOffset for a gap or an overlap, MetadataIncompleteBuffer for bytes after the last). A
  // duplicated name, whose first entry JSON parsing drops, leaves such a gap.
  std::sort(extents.begin(), extents.end(),
            [](const Extent& a, const Extent& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t covered = 0;
  for (const Extent& e : extents) {
    if (e.begin != covered) {
      return make_error(fmt::format("{}: tensor \"{}\" starts at data byte {} where the previous tensor ends at {} ({}); "
                                    "the safetensors library refuses it (InvalidOffset)", source, e.name, e.begin,
                                    covered, e.begin < covered ? "an overlap" : "a gap"));
    }
    covered = e.end;
  }
  if (covered != data_size) {
    return make_error(fmt::format("{}: the tensors end at data byte {} of {}; the safetensors library refuses the "
                                  "unused bytes (MetadataIncompleteBuffer)", source, covered, data_size));
  }
  return out;
}

Result<SafetensorsSummary> read_safetensors_header(const std::string& path) {
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return make_error(fmt::format("{}: cannot read ({})", path, ec.message()));
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("{}: cannot open", path));
  std::string head(8, '\0');
  in.read(head.data(), 8);
  if (in.gcount() != 8) return make_error(fmt::format("{}: too short for a safetensors file ({} bytes)", path, size));
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(head[i]);
  if (length <= size - 8 && length <= kMaxHeaderBytes) {
    head.resize(8 + length);
    in.read(head.data() + 8, static_cast<std::streamsize>(length));
    head.resize(8 + static_cast<size_t>(in.gcount()));
  }
  return parse_safetensors_header(head, size, path);
}

namespace {

// "model-00001-of-00004.safetensors" -> the shard set "model-*-of-00004" (the names of all four);
// nullopt for a name that is not a numbered shard.
struct ShardName {
  std::string prefix;      // "model"
  std::string count_text;  // "00004", as written
  size_t index_width = 0;  // digits of the shard number, as written
  uint64_t count = 0;
};
std::optional<ShardName> parse_shard_name(const std::string& file_name) {
  const std::string_view ext = ".safetensors";
  if (file_name.size() <= ext.size() || !file_name.ends_with(ext)) return std::nullopt;
  const std::string stem = file_name.substr(0, file_name.size() - ext.size());
  const size_t of = stem.rfind("-of-");
  if (of == std::string::npos) return std::nullopt;
  const std::string count_text = stem.substr(of + 4);
  const size_t dash = stem.rfind('-', of - 1);
  if (of == 0 || dash == std::string::npos) return std::nullopt;
  const std::string index_text = stem.substr(dash + 1, of - dash - 1);
  auto all_digits = [](const std::string& t) {
    return !t.empty() && t.size() <= 9 && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!all_digits(count_text) || !all_digits(index_text)) return std::nullopt;
  ShardName out{stem.substr(0, dash), count_text, index_text.size(), std::stoull(count_text)};
  if (out.count == 0) return std::nullopt;
  return out;
}

// The first shard the numbered names promise that is not in `files`, with how many of the set are.
Status check_numbered_shards(const std::set<std::string>& files, const std::string& folder) {
  namespace fs = std::filesystem;
  std::map<std::tuple<std::string, std::string, size_t>, std::pair<uint64_t, size_t>> sets;  // -> count, present
  for (const std::string& file : files) {
    if (auto shard = parse_shard_name(fs::path(file).filename().string())) {
      auto& entry = sets[{shard->prefix, shard->count_text, shard->index_width}];
      entry.first = shard->count;
      ++entry.second;
    }
  }
  for (const auto& [key, value] : sets) {
    const auto& [prefix, count_text, width] = key;
    const auto [count, present] = value;
    if (present >= count) continue;
    for (uint64_t k = 1; k <= count; ++k) {
      const std::string name = fmt::format("{}-{:0{}}-of-{}.safetensors", prefix, k, width, count_text);
      const std::string path = (fs::path(folder) / name).string();
      if (files.count(path)) continue;
      return make_error(fmt::format("{}: missing (the shard names say {} files, {} {} here): an incomplete download?",
                                    path, count, present, present == 1 ? "is" : "are"));
    }
  }
  return Ok{};
}

}  // namespace

Result<SafetensorsSummary> read_safetensors_folder(const std::string& folder) {
  namespace fs = std::filesystem;
  std::set<std::string> files;
  std::map<std::string, std::string> placed;   // tensor name -> the file the index puts it in
  fs::path index = fs::path(folder) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    auto text = read_small_file(index.string());
    if (!text) return text.error();
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      return make_error(fmt::format("{}: not a safetensors index (no weight_map object)", index.string()));
    }
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string()) return make_error(fmt::format("{}: weight_map entry for {} is not a file name", index.string(), tensor));
      std::string name = file.get<std::string>();
      if (name.find('/') != std::string::npos || name.find("..") != std::string::npos) {
        return make_error(fmt::format("{}: weight_map names a file outside the folder: {}", index.string(), name));
      }
      files.insert((fs::path(folder) / name).string());
      placed[tensor] = (fs::path(folder) / name).string();
    }
    // Every file the index lists must be here: a missing one is a download cut short.
    size_t present = 0;
    std::error_code ec;
    for (const std::string& file : files) present += fs::exists(file, ec);
    for (const std::string& file : files) {
      if (fs::exists(file, ec)) continue;
      return make_error(fmt::format("{}: missing ({} lists {} files, {} {} here): an incomplete download?", file,
                                    index.filename().string(), files.size(), present, present == 1 ? "is" : "are"));
    }
  } else {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(folder, ec)) {
      if (entry.path().extension() == ".safetensors") files.insert(entry.path().string());
    }
    // Without an index transformers loads `model.safetensors` (SAFE_WEIGHTS_NAME) and nothing
    // else: a Mistral-style consolidated.safetensors beside it is a second copy of the weights.
    const std::string single = (fs::path(folder) / "model.safetensors").string();
    if (files.count(single) && files.size() > 1) files = {single};
    // Without an index the numbered names say how many shards there are.
    if (auto complete = check_numbered_shards(files, folder); !complete) return complete.error();
  }
  if (files.empty()) return make_error(fmt::format("{}: no *.safetensors files", folder));
  // Each tensor name counts once (transformers loads a name once, into one parameter): from the
  // file the index puts it in when that file holds it, else from the first file that does. (An
  // index may list a name no file holds: the safetensors conversion keeps the original index and
  // drops tied copies such as lm_head.weight, which loading ties back.)
  std::vector<SafetensorsSummary> read;
  std::set<std::pair<std::string, std::string>> present;   // (tensor name, file)
  for (const std::string& file : files) {
    auto one = read_safetensors_header(file);
    if (!one) return one.error();
    for (const auto& t : one->tensors) present.emplace(t.name, file);
    read.push_back(std::move(*one));
  }
  SafetensorsSummary merged;
  std::set<std::string> counted;
  size_t at = 0;
  for (const std::string& file : files) {
    for (auto& t : read[at].tensors) {
      auto where = placed.find(t.name);
      if (where != placed.end() && where->second != file && present.count({t.name, where->second})) continue;
      if (!counted.insert(t.name).second) continue;   // a second copy
      merged.elements_by_dtype[t.dtype] += t.elements;
      merged.total_elements += t.elements;
      merged.total_bytes += t.bytes;
      merged.tensors.push_back(std::move(t));
    }
    ++at;
  }
  return merged;
}

}  // namespace oomdoc
