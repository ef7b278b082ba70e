// Byte counts that saturate at 2^64-1 instead of wrapping. A prediction for absurd sizes (a
// million sequences of 16M tokens) is beyond 64 bits; wrapped, it would read as a small,
// plausible number. Saturated, it stays "more than any GPU", and every total built from a
// saturated part is saturated too, so a larger job never predicts less.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace oomdoc {

inline constexpr uint64_t kSaturatedBytes = std::numeric_limits<uint64_t>::max();

inline constexpr bool is_saturated(uint64_t bytes) { return bytes == kSaturatedBytes; }

inline constexpr uint64_t saturating_add(uint64_t a, uint64_t b) {
  return a > kSaturatedBytes - b ? kSaturatedBytes : a + b;
}

// a - b, where a saturated stays saturated (more than any count, less anything, is still that).
inline constexpr uint64_t saturating_sub(uint64_t a, uint64_t b) {
  if (is_saturated(a)) return a;
  return a > b ? a - b : 0;
}

// A count computed in double, rounded to the byte: saturated at or above 2^64 (and for NaN or
// infinity), 0 below 0. (Casting a double >= 2^64 to uint64_t is undefined behaviour.)
inline uint64_t saturated_bytes(double bytes) {
  if (!(bytes < 18446744073709551616.0)) return kSaturatedBytes;  // also NaN
  if (!(bytes > 0)) return 0;
  const double rounded = std::round(bytes);
  return rounded >= 18446744073709551616.0 ? kSaturatedBytes : static_cast<uint64_t>(rounded);
}

}  // namespace oomdoc
