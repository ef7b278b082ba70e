// The one place that knows byte units: parsing sizes as frameworks print them ("2.00 GiB",
// "412.53 MiB", "16160MiB", "1.97G", "6727663616B", "1.5 GB") and formatting bytes for humans.
//
// A printed size keeps its precision: "2.00 GiB" means 2.00 ± 0.005 GiB, so Quantity carries the
// half-unit of the last printed digit (tolerance_bytes) for later reasoning and comparisons.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace oomdoc {

inline constexpr uint64_t kKiB = 1ull << 10;
inline constexpr uint64_t kMiB = 1ull << 20;
inline constexpr uint64_t kGiB = 1ull << 30;
inline constexpr uint64_t kTiB = 1ull << 40;

// How to read decimal-looking labels (KB, MB, GB, K, M, G). Several frameworks print binary
// quantities with decimal labels (PyTorch MPS "18.13 GB", TensorFlow "1.97G", vLLM "took X GB",
// SGLang "GB"), so each message format says which it means.
enum class LabelMeaning {
  kAsPrinted,  // KB/MB/GB are powers of 1000; bare K/M/G are powers of 1024
  kBinary,     // every label is a power of 1024
};

struct Quantity {
  uint64_t bytes = 0;           // value x unit, rounded to the nearest byte; saturated on overflow
  double value = 0;             // the number as printed
  std::string unit;             // the label exactly as printed: "GiB", "MB", "G", "B", "bytes"
  std::string text;             // the whole substring as printed, e.g. "12.50 MiB"
  uint64_t tolerance_bytes = 0; // half a unit of the last printed digit (0 for exact byte counts)
  bool overflow = false;        // the value exceeds 2^64-1 bytes (cudaMallocAsync's "no limit")

  // True when `other` lies within this printed value's precision (plus other's own).
  bool matches(uint64_t other_bytes, uint64_t extra_tolerance = 0) const;
};

// Multiplier for a unit label, or nullopt if the label is not a byte unit.
// Labels are case-sensitive except "bytes"/"Bytes"/"B"; "b" (bits) is rejected.
std::optional<uint64_t> unit_multiplier(std::string_view label, LabelMeaning meaning);

// Parses a whole string as a quantity: a number (digits, optional '.' fraction; ',' fraction when
// decimal_comma is set), optional spaces, a unit label. Returns nullopt if anything else is there.
std::optional<Quantity> parse_quantity(std::string_view text,
                                       LabelMeaning meaning = LabelMeaning::kAsPrinted,
                                       bool decimal_comma = false);

// Parses a size given by a user on the command line ("24GiB", "24 GB", "80G", "1.5e9", "16384MiB").
// Bare numbers are bytes. Decimal labels are decimal here (as printed).
std::optional<uint64_t> parse_user_size(std::string_view text);

// "14.45 GiB", "412.53 MiB", "512 B": binary units, two decimals, the largest unit >= 1.
std::string format_bytes(uint64_t bytes);

// Signed variant for differences ("-1.20 GiB", "+0.50 GiB" when show_plus).
std::string format_signed_bytes(int64_t bytes, bool show_plus = false);

// Parameter counts for humans: "6.74B", "125.0M", "7,241,732,096" (exact).
std::string format_count(uint64_t count);
std::string format_exact_count(uint64_t count);

// "7B", "1.5b", "350M", "6738415616" -> parameter count. nullopt if malformed.
std::optional<uint64_t> parse_count(std::string_view text);

}  // namespace oomdoc
