#include "readers/safetensors_header.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>

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

uint64_t safetensors_dtype_bytes(std::string_view dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2" ||
      dtype == "F8_E8M0")
    return 1;
  return 0;
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
  for (const auto& item : j.items()) {
    const std::string& name = item.key();  // plain names: the lambda below captures one
    const auto& info = item.value();
    if (name == "__metadata__") continue;
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
    if (begin > end || end > data_size) {
      return bad(fmt::format("data_offsets [{}, {}] outside the {} data bytes", begin, end, data_size));
    }
    t.bytes = end - begin;
    uint64_t width = safetensors_dtype_bytes(t.dtype);
    uint64_t expected = 0;
    if (width && (!multiply_checked(elements, width, expected) || expected != t.bytes)) {
      return bad(fmt::format("{} elements of {} need {} bytes, data_offsets give {}", elements, t.dtype,
                             expected, t.bytes));
    }
    out.elements_by_dtype[t.dtype] += elements;
    out.total_elements += elements;
    out.total_bytes += t.bytes;
    out.tensors.push_back(std::move(t));
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

Result<SafetensorsSummary> read_safetensors_folder(const std::string& folder) {
  namespace fs = std::filesystem;
  std::set<std::string> files;
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
    }
  } else {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(folder, ec)) {
      if (entry.path().extension() == ".safetensors") files.insert(entry.path().string());
    }
  }
  if (files.empty()) return make_error(fmt::format("{}: no *.safetensors files", folder));
  SafetensorsSummary merged;
  for (const std::string& file : files) {
    auto one = read_safetensors_header(file);
    if (!one) return one.error();
    for (auto& t : one->tensors) merged.tensors.push_back(std::move(t));
    for (const auto& [dtype, n] : one->elements_by_dtype) merged.elements_by_dtype[dtype] += n;
    merged.total_elements += one->total_elements;
    merged.total_bytes += one->total_bytes;
  }
  return merged;
}

}  // namespace oomdoc
