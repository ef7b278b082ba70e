// The scanner's hot path: finds the few places in a log that can start an out-of-memory message,
// at memory-bandwidth speed. Every needle has a two-byte "pair" at a fixed offset inside it; a SIMD
// loop (AVX2 Teddy nibble lookups where the CPU has AVX2, else SSE2 compares, else a bigram table)
// finds positions where any pair may occur, and only those are compared with the full needles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace oomdoc {

class KeywordFilter {
 public:
  struct Needle {
    std::string_view text;
    size_t pair_offset;   // where the two filtering bytes sit inside `text`
  };

  // The needles every OOM message (and every memory figure line) in the formats contains at least one of.
  static const KeywordFilter& standard();

  explicit KeywordFilter(std::vector<Needle> needles);

  // Offset of the first needle occurrence starting at or after `from`, or npos. Needles are
  // found only when they lie entirely inside `text`.
  size_t find(std::string_view text, size_t from) const;

  const std::vector<Needle>& needles() const { return needles_; }

 private:
  bool verify(std::string_view text, size_t pair_pos, unsigned pair_index, size_t* start) const;
  size_t find_scalar(std::string_view text, size_t from, size_t min_start) const;
  size_t find_sse2(std::string_view text, size_t from) const;
  size_t find_avx2(std::string_view text, size_t from) const;

  std::vector<Needle> needles_;
  std::vector<unsigned char> first_, second_;       // distinct pairs
  std::vector<std::vector<size_t>> needles_of_pair_;
  std::vector<unsigned char> bigram_bits_;          // 65536 bits for the scalar fallback
  // Teddy nibble tables: bit b of [nibble] is set when a pair in bucket b has that nibble.
  unsigned char teddy_lo0_[16] = {}, teddy_hi0_[16] = {}, teddy_lo1_[16] = {}, teddy_hi1_[16] = {};
  bool use_avx2_ = false;
};

// Number of '\n' bytes in [data, data + size), vectorised: line numbers cost nearly nothing.
uint64_t count_newlines(const char* data, size_t size);

}  // namespace oomdoc
