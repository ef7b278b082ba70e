#include "core/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace oomdoc {
namespace {

using u128 = unsigned __int128;
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A decimal number split into an exact integer mantissa and a count of fraction digits,
// so that bytes = mantissa * multiplier / 10^fraction_digits is computed without float error.
struct Decimal {
  u128 mantissa = 0;
  int fraction_digits = 0;
  bool too_long = false;
};

}  // namespace

bool Quantity::matches(uint64_t other_bytes, uint64_t extra_tolerance) const {
  uint64_t diff = bytes > other_bytes ? bytes - other_bytes : other_bytes - bytes;
  return diff <= tolerance_bytes + extra_tolerance;
}

std::optional<uint64_t> unit_multiplier(std::string_view label, LabelMeaning meaning) {
  const bool binary = meaning == LabelMeaning::kBinary;
  if (label == "B" || label == "bytes" || label == "Bytes" || label == "byte") return 1;
  if (label == "KiB") return kKiB;
  if (label == "MiB") return kMiB;
  if (label == "GiB") return kGiB;
  if (label == "TiB") return kTiB;
  if (label == "KB" || label == "kB") return binary ? kKiB : 1000ull;
  if (label == "MB") return binary ? kMiB : 1000ull * 1000;
  if (label == "GB") return binary ? kGiB : 1000ull * 1000 * 1000;
  if (label == "TB") return binary ? kTiB : 1000ull * 1000 * 1000 * 1000;
  // Bare suffixes as TensorFlow and ggml print them ("1.97G", "378.60M") are binary.
  if (label == "K" || label == "k") return kKiB;
  if (label == "M") return kMiB;
  if (label == "G") return kGiB;
  if (label == "T") return kTiB;
  return std::nullopt;
}

std::optional<Quantity> parse_quantity(std::string_view text, LabelMeaning meaning,
                                       bool decimal_comma) {
  size_t i = 0;
  while (i < text.size() && text[i] == ' ') ++i;
  const size_t start = i;
  Decimal number;
  size_t digits = 0;
  while (i < text.size() && is_digit(text[i])) {
    if (number.mantissa > (u128(1) << 100)) number.too_long = true;
    number.mantissa = number.mantissa * 10 + (text[i] - '0');
    ++i;
    ++digits;
  }
  const char fraction_mark = decimal_comma ? ',' : '.';
  if (i < text.size() && text[i] == fraction_mark && i + 1 < text.size() && is_digit(text[i + 1])) {
    ++i;
    while (i < text.size() && is_digit(text[i])) {
      if (number.mantissa > (u128(1) << 100)) number.too_long = true;
      number.mantissa = number.mantissa * 10 + (text[i] - '0');
      ++number.fraction_digits;
      ++i;
      ++digits;
    }
  }
  if (digits == 0 || number.too_long || number.fraction_digits > 18) return std::nullopt;
  const size_t number_end = i;
  while (i < text.size() && text[i] == ' ') ++i;
  size_t label_start = i;
  while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
  std::string_view label = text.substr(label_start, i - label_start);
  size_t end = i;
  while (i < text.size() && text[i] == ' ') ++i;
  if (i != text.size()) return std::nullopt;
  auto multiplier = unit_multiplier(label, meaning);
  if (!multiplier) return std::nullopt;

  u128 scale = 1;
  for (int d = 0; d < number.fraction_digits; ++d) scale *= 10;
  const u128 numerator = number.mantissa * *multiplier;
  const u128 rounded = (numerator + scale / 2) / scale;

  Quantity q;
  q.overflow = rounded > kMax;
  q.bytes = q.overflow ? kMax : static_cast<uint64_t>(rounded);
  // The printed number as a double, without a locale or an allocation (every memory reading of a
  // log passes here): from_chars on the digits, a decimal comma read as a point.
  std::string number_text(text.substr(start, number_end - start));
  if (decimal_comma) std::replace(number_text.begin(), number_text.end(), ',', '.');
  std::from_chars(number_text.data(), number_text.data() + number_text.size(), q.value);
  q.unit = std::string(label);
  q.text = std::string(text.substr(start, end - start));
  // Half a unit of the last printed digit: "2.00 GiB" is +-0.005 GiB; "123 bytes" is exact.
  const u128 half_ulp = (u128(*multiplier) * 5) / (scale * 10);
  q.tolerance_bytes = *multiplier == 1 ? 0 : static_cast<uint64_t>(half_ulp > kMax ? kMax : half_ulp);
  return q;
}

std::optional<uint64_t> parse_user_size(std::string_view text) {
  // Accept "24GiB", "24 GB", "80G", "24gb" (case-insensitive labels are common on command lines).
  std::string normalized;
  for (char c : text) normalized += c;
  size_t pos = normalized.find_first_not_of("0123456789.eE+ ");
  if (pos == std::string::npos) {
    char* end = nullptr;
    double v = std::strtod(normalized.c_str(), &end);
    if (end == normalized.c_str() || *end != '\0' || !(v >= 0) || v > 1.8e19) return std::nullopt;
    return static_cast<uint64_t>(std::llround(v));
  }
  std::string label = normalized.substr(pos);
  while (!label.empty() && label.back() == ' ') label.pop_back();
  std::string canonical;
  std::string lower;
  for (char c : label) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "kib" || lower == "ki") canonical = "KiB";
  else if (lower == "mib" || lower == "mi") canonical = "MiB";
  else if (lower == "gib" || lower == "gi") canonical = "GiB";
  else if (lower == "tib" || lower == "ti") canonical = "TiB";
  else if (lower == "kb") canonical = "KB";
  else if (lower == "mb") canonical = "MB";
  else if (lower == "gb") canonical = "GB";
  else if (lower == "tb") canonical = "TB";
  else if (lower == "k") canonical = "K";
  else if (lower == "m") canonical = "M";
  else if (lower == "g") canonical = "G";
  else if (lower == "t") canonical = "T";
  else if (lower == "b" || lower == "bytes") canonical = "B";
  else return std::nullopt;
  auto q = parse_quantity(normalized.substr(0, pos) + canonical);
  if (!q || q->overflow) return std::nullopt;
  return q->bytes;
}

std::string format_bytes(uint64_t bytes) {
  if (bytes == kMax) return "unlimited";
  if (bytes < kKiB) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / kKiB;
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  // Avoid printing "1024.00 MiB" when rounding carries over.
  if (value >= 1023.995 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, units[unit]);
}

std::string format_signed_bytes(int64_t bytes, bool show_plus) {
  std::string sign = bytes < 0 ? "-" : (show_plus ? "+" : "");
  const uint64_t magnitude = bytes < 0 ? static_cast<uint64_t>(-(bytes + 1)) + 1 : static_cast<uint64_t>(bytes);
  sign += format_bytes(magnitude);
  return sign;
}

std::string format_count(uint64_t count) {
  if (count >= 1'000'000'000'000ull) return fmt::format("{:.2f}T", count / 1e12);
  if (count >= 1'000'000'000ull) return fmt::format("{:.2f}B", count / 1e9);
  if (count >= 1'000'000ull) return fmt::format("{:.1f}M", count / 1e6);
  if (count >= 1'000ull) return fmt::format("{:.1f}K", count / 1e3);
  return fmt::format("{}", count);
}

std::string format_exact_count(uint64_t count) {
  std::string digits = fmt::format("{}", count);
  std::string out;
  int n = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (n > 0 && n % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++n;
  }
  return out;
}

std::optional<uint64_t> parse_count(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::string s(text);
  double multiplier = 1;
  char last = static_cast<char>(std::toupper(static_cast<unsigned char>(s.back())));
  if (last == 'K') multiplier = 1e3;
  else if (last == 'M') multiplier = 1e6;
  else if (last == 'B' || last == 'G') multiplier = 1e9;
  else if (last == 'T') multiplier = 1e12;
  if (multiplier != 1) s.pop_back();
  for (char& c : s) if (c == '_' || c == ',') c = ' ';
  std::string compact;
  for (char c : s) if (c != ' ') compact += c;
  if (compact.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(compact.c_str(), &end);
  if (end == compact.c_str() || *end != '\0' || !(v > 0) || v * multiplier > 1e16) return std::nullopt;
  return static_cast<uint64_t>(std::llround(v * multiplier));
}

}  // namespace oomdoc
