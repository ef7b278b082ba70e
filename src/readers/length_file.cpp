#include "readers/length_file.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/file_input.h"
#include "core/text.h"

namespace oomdoc {
namespace {

// Longer than any context a model has been trained with; a larger number is a corrupt line.
constexpr uint64_t kMaxLength = 1ull << 32;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

Result<uint64_t> length_of_object(const nlohmann::json& obj, const std::string& where) {
  if (!obj.is_object()) return make_error(fmt::format("{}: expected a JSON object or a number", where));
  for (const char* key : {"length", "num_tokens"}) {
    auto it = obj.find(key);
    if (it == obj.end()) continue;
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
      return make_error(fmt::format("{}: \"{}\" is not a non-negative integer", where, key));
    }
    return it->get<uint64_t>();
  }
  if (auto it = obj.find("input_ids"); it != obj.end()) {
    if (!it->is_array()) return make_error(fmt::format("{}: \"input_ids\" is not a list", where));
    // A list of lists is a tokenized batch: its size would be the batch's, not a length.
    if (!it->empty() && it->front().is_array()) {
      return make_error(fmt::format("{}: \"input_ids\" is a list of lists (a batch); give one example per line",
                                    where));
    }
    return static_cast<uint64_t>(it->size());
  }
  return make_error(fmt::format("{}: no length, num_tokens or input_ids field", where));
}

}  // namespace

Result<std::vector<uint64_t>> parse_lengths(std::string_view text, const std::string& display_name) {
  std::vector<uint64_t> lengths;
  size_t line_number = 0;
  // A UTF-8 byte-order mark (editors and PowerShell's Out-File write one) is not part of the
  // first line.
  size_t start = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = trim(text.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty()) continue;
    const std::string where = fmt::format("{}: line {}", display_name, line_number);
    uint64_t length = 0;
    if (line.front() == '{') {
      auto obj = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (obj.is_discarded()) return make_error(fmt::format("{}: invalid JSON", where));
      auto value = length_of_object(obj, where);
      if (!value) return value.error();
      length = *value;
    } else {
      auto parsed = parse_decimal<uint64_t>(line);
      if (!parsed) {
        return make_error(fmt::format("{}: expected a token count, got '{}'", where,
                                      line.substr(0, 40)));
      }
      length = *parsed;
    }
    if (length > kMaxLength) {
      return make_error(fmt::format("{}: {} tokens is not a plausible length", where, length));
    }
    lengths.push_back(length);
  }
  if (lengths.empty()) return make_error(fmt::format("{}: no lengths in the file", display_name));
  return lengths;
}

Result<std::vector<uint64_t>> read_lengths(const std::string& path) {
  auto text = read_small_file(path, 1ull << 30);
  if (!text) return text.error();
  return parse_lengths(*text, path.empty() || path == "-" ? "<stdin>" : path);
}

}  // namespace oomdoc
