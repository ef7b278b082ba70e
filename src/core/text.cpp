#include "core/text.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <vector>

namespace oomdoc {

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

namespace {

// Length of the valid UTF-8 sequence at s[i] (1-4), or 0 (a stray or overlong byte, a surrogate).
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  }
  if (n == 2 && c < 0xC2) return 0;                                    // overlong
  if (n == 3 && ((c == 0xE0 && b(i + 1) < 0xA0) || (c == 0xED && b(i + 1) >= 0xA0))) return 0;  // overlong, surrogate
  if (n == 4 && ((c == 0xF0 && b(i + 1) < 0x90) || c > 0xF4 || (c == 0xF4 && b(i + 1) >= 0x90))) return 0;
  return n;
}

}  // namespace

bool has_shape(std::string_view s, size_t at, std::string_view shape) {
  if (at > s.size() || s.size() - at < shape.size()) return false;
  for (char want : shape) {
    const char c = s[at++];
    if (want == '0' ? !(c >= '0' && c <= '9') : c != want) return false;
  }
  return true;
}

size_t timestamp_length(std::string_view s) {
  if (!has_shape(s, 0, "0000-00-00") || s.size() < 19 || (s[10] != 'T' && s[10] != ' ') || !has_shape(s, 11, "00:00:00")) {
    return 0;
  }
  size_t i = 19;
  if (i < s.size() && (s[i] == '.' || s[i] == ',')) {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  }
  if (i < s.size() && s[i] == 'Z') {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-') && (has_shape(s, i + 1, "00:00") || has_shape(s, i + 1, "0000"))) {
    i += s[i + 3] == ':' ? 6 : 5;
  }
  return i;
}

std::string printable(std::string_view text, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence(text, i);
    const unsigned char c = static_cast<unsigned char>(text[i]);
    std::string piece;
    static constexpr char kHex[] = "0123456789abcdef";
    // The C1 controls U+0080-U+009F (UTF-8 C2 80-C2 9F) act on terminals as ESC sequences do.
    const bool c1_control = n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if (n == 0 || (n == 1 && (c < 0x20 || c == 0x7F))) {
      piece = {'\\', 'x', kHex[c >> 4], kHex[c & 0xF]};
      i += 1;
    } else if (c1_control) {
      const unsigned char code = static_cast<unsigned char>(text[i + 1]);
      piece = {'\\', 'u', '0', '0', kHex[code >> 4], kHex[code & 0xF]};
      i += 2;
    } else {
      piece.assign(text.substr(i, n));
      i += n;
    }
    if (out.size() + piece.size() > max_bytes) return out + "...";
    out += piece;
  }
  return out;
}

std::string integer_ranges(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  std::string out;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    // values[j + 1] - values[j] == 1 without overflow: values are sorted and distinct.
    while (j + 1 < values.size() && values[j + 1] - 1 == values[j]) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(values[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(values[j]);
    }
    i = j + 1;
  }
  return out;
}

std::string count_noun(uint64_t count, std::string_view singular, std::string_view plural_form) {
  std::string out = std::to_string(count) + " ";
  if (count == 1) return out.append(singular);
  if (plural_form.empty()) return out.append(singular).append("s");
  return out.append(plural_form);
}

std::string with_article(std::string_view phrase) {
  // The integer part as printed ("8.00 GiB" -> "8"; thousands separators do not occur in sizes).
  size_t digits = 0;
  while (digits < phrase.size() && std::isdigit(static_cast<unsigned char>(phrase[digits]))) ++digits;
  const std::string_view number = phrase.substr(0, digits);
  // Read aloud, a number takes "an" when its first word starts with a vowel sound: eight, eighty,
  // eight hundred, eleven, eighteen (but "one hundred eighteen", "eleven hundred" never print here).
  const bool vowel = !number.empty() && (number[0] == '8' || number == "11" || number == "18");
  return std::string(vowel ? "an " : "a ").append(phrase);
}

size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: Levenshtein plus the swap of two neighbours as one edit, the
  // commonest typo in model numbers ("4900" for "4090"). Names are short: a full table is fine.
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::optional<std::string> closest_spelling(std::string_view name, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& candidate : candidates) {
    const size_t length = std::min(candidate.size(), name.size());
    const size_t allowed = length >= 12 ? 3 : length >= 8 ? 2 : 1;
    const size_t distance = edit_distance(name, candidate);
    if (distance <= allowed && distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace oomdoc
