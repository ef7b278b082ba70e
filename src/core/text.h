// Small text helpers shared by the readers that match names (models, GPUs, record fields).
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

namespace oomdoc {

// ASCII lower case (names and flags are ASCII; other bytes pass through).
std::string to_lower(std::string_view s);

inline bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// "1 line", "3 lines", "0 lines"; plural_form for irregular nouns ("1 process", "2 processes").
std::string count_noun(uint64_t count, std::string_view singular, std::string_view plural_form = {});

// The indefinite article for a phrase that starts with a number as it is read aloud: "an" before
// 8, 11, 18, 80-89, 800-899 ("an 8.00 GiB buffer", "an 11.50 MiB request"), "a" otherwise
// ("a 16.00 MiB request", "a 110 B block"). Returns "a PHRASE" or "an PHRASE".
std::string with_article(std::string_view phrase);

// `text` safe to print on one line: valid UTF-8 kept, every control byte (newlines included) and
// every byte that is not part of valid UTF-8 written as \xNN, the C1 controls U+0080-U+009F as
// \u00NN; longer than max_bytes, cut at a
// character boundary with "...". For names and values read from untrusted files (a corrupt key).
std::string printable(std::string_view text, size_t max_bytes = SIZE_MAX);

// Writes code point `cp` (at most U+10FFFF) as UTF-8 at `w` (room for 4 bytes); returns the end.
inline char* write_utf8(uint32_t cp, char* w) {
  if (cp < 0x80) {
    *w++ = static_cast<char>(cp);
  } else if (cp < 0x800) {
    *w++ = static_cast<char>(0xc0 | cp >> 6);
    *w++ = static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *w++ = static_cast<char>(0xe0 | cp >> 12);
    *w++ = static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    *w++ = static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    *w++ = static_cast<char>(0xf0 | cp >> 18);
    *w++ = static_cast<char>(0x80 | (cp >> 12 & 0x3f));
    *w++ = static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    *w++ = static_cast<char>(0x80 | (cp & 0x3f));
  }
  return w;
}

// Whether s[at...] has the fixed shape `shape`, where '0' stands for any digit and every other
// character for itself: "0000-00-00 00:00:00" for a timestamp.
bool has_shape(std::string_view s, size_t at, std::string_view shape);

// The length of the date and time at the start of `s` ("2024-05-01T10:00:00.123456789Z",
// "2024-05-01 10:00:00,123", with a "+02:00" or "+0200" offset), 0 without one: a log line's
// timestamp, as collectors and logging formatters write it.
size_t timestamp_length(std::string_view s);

// Integers as a short list with runs collapsed: {0,1,2,3,5,7,8} -> "0-3, 5, 7-8" (sorted, repeats
// dropped).
std::string integer_ranges(std::vector<int64_t> values);

// Edit distance for "did you mean" suggestions: insertions, deletions, substitutions, and the swap
// of two neighbouring characters, each counting one.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate that `name` most likely misspells, for "did you mean" on command-line flags: the
// nearest within 1 edit for short names, 2 from 8 characters, 3 from 12 (--max-model-length,
// --gpu-memory-utilisation, --ctx-sise); nullopt when none is that close. Ties go to the first.
std::optional<std::string> closest_spelling(std::string_view name, const std::vector<std::string>& candidates);

// The whole of `text` as a number of type T, or nullopt: the one way the readers turn matched
// digits into numbers. Integers: optional '-' (signed T only) and digits. Floating point: digits
// with an optional '.' fraction and exponent ("12", "1.5", ".5", "1e9"), finite only.
// nullopt for an empty string, any other character (spaces, '+', ','), "." alone, or a value T
// cannot hold: a log line can print 30 digits, and a number that does not fit is unknown, not an
// exception.
template <typename T>
std::optional<T> parse_decimal(std::string_view text) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
  T value{};
  const char* end = text.data() + text.size();
  std::from_chars_result r;
  if constexpr (std::is_floating_point_v<T>) {
    r = std::from_chars(text.data(), end, value, std::chars_format::general);
    if (r.ec == std::errc{} && !std::isfinite(value)) return std::nullopt;  // "inf", "nan"
  } else {
    r = std::from_chars(text.data(), end, value, 10);
  }
  if (r.ec != std::errc{} || r.ptr != end) return std::nullopt;
  return value;
}

}  // namespace oomdoc
