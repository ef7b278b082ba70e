#include "readers/keyword_filter.h"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define OOMDOC_X86 1
#endif

namespace oomdoc {

#ifdef OOMDOC_X86
__attribute__((target("avx2"))) static uint64_t count_newlines_avx2(const char* data, size_t size) {
  uint64_t count = 0;
  size_t i = 0;
  const __m256i newline = _mm256_set1_epi8('\n');
  for (; i + 32 <= size; i += 32) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i));
    count += static_cast<uint64_t>(__builtin_popcount(static_cast<unsigned>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, newline)))));
  }
  for (; i < size; ++i) count += data[i] == '\n';
  return count;
}
#endif

uint64_t count_newlines(const char* data, size_t size) {
#ifdef OOMDOC_X86
  static const bool avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  if (avx2) return count_newlines_avx2(data, size);
#endif
  uint64_t count = 0;
  for (const char* p = data; (p = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(data + size - p)))) != nullptr; ++p) {
    ++count;
  }
  return count;
}

const KeywordFilter& KeywordFilter::standard() {
  // Pairs are chosen to be rare in ordinary training output ("em" of memory is the busiest). New
  // needles go last, so the busy pairs keep their buckets (find_avx2); measure before moving one.
  static const KeywordFilter filter({
      {"emory", 0},              // out of memory, Memory, totalMemory, gpu_memory_utilization
      {"mem", 1},                // memory figures in progress lines: "mem: 12.3G", "max_mem="
      {"EMORY", 0},              // CUDA_ERROR_OUT_OF_MEMORY
      {"llocat", 0},             // Tried to allocate, failed to allocate, Allocation on device
      {"ALLOC", 1},              // CUBLAS_STATUS_ALLOC_FAILED, CUDNN_STATUS_NOT_ALLOCATED
      {"xhausted", 0},           // Resource exhausted, ResourceExhaustedError
      {"XHAUSTED", 0},           // RESOURCE_EXHAUSTED
      {"OOM", 0},                // OOM when allocating tensor
      {"KV cache", 0},           // vLLM KV cache lines
      {"in-use chunks", 2},      // TensorFlow BFC stats
      {"Dst tensor", 0},         // TensorFlow's copy failure that hides an OOM
      {"CUDNN_STATUS", 3},       // cuDNN statuses that hide an OOM
      {"CUBLAS_STATUS", 2},      // cuBLAS statuses
      {"cuDNN algorithm", 2},    // "Unable to find a valid cuDNN algorithm to run convolution" ("DN")
      {"blocks:", 4},            // vLLM "# GPU blocks:"
      {"weights t", 4},          // vLLM "model weights take/took"
      {"Maximum concurrency", 2},// vLLM
      {"To serve at least", 0},  // vLLM, the error can wrap before "KV cache"
      {"Model loading took", 0}, // vLLM v1
      {"Graph capturing", 3},    // vLLM CUDA graph memory
      {"vLLM instance", 1},      // vLLM "the current vLLM instance can use" (shares ALLOC's pair)
      {"silently casted", 5},    // transformers: flash attention got fp32 states ("tl" is rare)
      {"for flash-attn compat", 9},  // its newer wording ("-a")
      {"SIGKILL", 2},            // torchrun's "Signal 9 (SIGKILL) received by PID", "<Signals.SIGKILL: 9>" ("GK")
      // A process the OOM killer ended, as the shell ("Killed"), the kernel ("Killed process N"),
      // PyTorch's DataLoader ("killed by signal: Killed") and launchers (exit status -9 or 137) report it.
      {"Killed", 0},             // "Ki"
      {"killed  ", 0},           // zsh pads its status word: "zsh: killed     python x.py", "[1]    26478 killed     python x.py" ("ki")
      {"exitcode: -9", 10},      // torchrun: "failed (exitcode: -9) local_rank: N (pid: P)" ("-9")
      {"code = -9", 7},          // DeepSpeed's launcher: "exits with return code = -9"
      {"status -9", 7},          // Python 2's subprocess: "returned non-zero exit status -9" ("-9")
      {"xit code 137", 0},       // an IDE's "Process finished with exit code 137" ("xi")
      {"xited with code 137", 0},// docker compose: "app-1 exited with code 137"
      // NCCL's CUDA failure as PyTorch raises it: "NCCL error in: ..., unhandled cuda error", then
      // "ncclUnhandledCudaError: Call to CUDA function failed." ("dl", "lU"). Last: a pair's Teddy
      // bucket is its index mod 8, and these two earlier in the list moved the busy pairs after them
      // into buckets that admit far more false candidates (bench/explain_vs_grep.sh: +25% time).
      {"unhandled cuda error", 5},
      {"ncclUnhandledCudaError", 3},
      {"xit code: 137", 0},      // docker build (BuildKit): "did not complete successfully: exit code: 137" ("xi", a pair already in)
      {"code: -9", 6},           // pip's error box: "exit code: -9" ("-9", a pair already in)
      {"signal 9 (Kill", 9},     // nvcc: "'cicc' died due to signal 9 (Kill signal)" ("(K")
      {"</torch_", 0},           // PyTorch's shared-memory file: "unable to write to file </torch_18_..._0>" ("</")
  });
  return filter;
}

KeywordFilter::KeywordFilter(std::vector<Needle> needles) : needles_(std::move(needles)) {
  bigram_bits_.assign(65536 / 8, 0);
  for (size_t i = 0; i < needles_.size(); ++i) {
    const auto& n = needles_[i];
    unsigned char a = static_cast<unsigned char>(n.text[n.pair_offset]);
    unsigned char b = static_cast<unsigned char>(n.text[n.pair_offset + 1]);
    size_t pair = first_.size();
    for (size_t p = 0; p < first_.size(); ++p) {
      if (first_[p] == a && second_[p] == b) pair = p;
    }
    if (pair == first_.size()) {
      first_.push_back(a);
      second_.push_back(b);
      needles_of_pair_.emplace_back();
    }
    needles_of_pair_[pair].push_back(i);
    unsigned bigram = (unsigned(a) << 8) | b;
    bigram_bits_[bigram >> 3] |= static_cast<unsigned char>(1u << (bigram & 7));
  }
  for (size_t p = 0; p < first_.size(); ++p) {
    const unsigned char bucket = static_cast<unsigned char>(1u << (p % 8));
    teddy_lo0_[first_[p] & 0x0f] |= bucket;
    teddy_hi0_[first_[p] >> 4] |= bucket;
    teddy_lo1_[second_[p] & 0x0f] |= bucket;
    teddy_hi1_[second_[p] >> 4] |= bucket;
  }
#ifdef OOMDOC_X86
  __builtin_cpu_init();
  use_avx2_ = __builtin_cpu_supports("avx2");
#endif
}

bool KeywordFilter::verify(std::string_view text, size_t pair_pos, unsigned pair_index, size_t* start) const {
  for (size_t needle_index : needles_of_pair_[pair_index]) {
    const Needle& n = needles_[needle_index];
    if (pair_pos < n.pair_offset) continue;
    size_t s = pair_pos - n.pair_offset;
    if (s + n.text.size() <= text.size() && std::memcmp(text.data() + s, n.text.data(), n.text.size()) == 0) {
      *start = s;
      return true;
    }
  }
  return false;
}

// Verifies the candidate positions block_start + (set bits of mask) against the needles.
size_t KeywordFilter::check_candidates(std::string_view text, size_t block_start, unsigned mask, size_t from) const {
  const auto* data = reinterpret_cast<const unsigned char*>(text.data());
  while (mask != 0) {
    const size_t pos = block_start + static_cast<unsigned>(__builtin_ctz(mask));
    // Teddy's nibble buckets admit false pairs (runs of one letter: "xxxx" shares nibbles with
    // "xh"/"xi" and others): the exact bigram table rejects them before the pairs are tried.
    const unsigned bigram = (unsigned(data[pos]) << 8) | data[pos + 1];
    if (!(bigram_bits_[bigram >> 3] & (1u << (bigram & 7)))) {
      mask &= mask - 1;
      continue;
    }
    for (unsigned p = 0; p < first_.size(); ++p) {
      size_t start;
      if (data[pos] == first_[p] && data[pos + 1] == second_[p] && verify(text, pos, p, &start) && start >= from) {
        return start;
      }
    }
    mask &= mask - 1;
  }
  return std::string_view::npos;
}

size_t KeywordFilter::find(std::string_view text, size_t from) const {
#ifdef OOMDOC_X86
  if (use_avx2_) return find_avx2(text, from);
  return find_sse2(text, from);
#else
  return find_scalar(text, from, from);
#endif
}

size_t KeywordFilter::find_scalar(std::string_view text, size_t from, size_t min_start) const {
  const auto* data = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = from; i + 1 < text.size(); ++i) {
    unsigned bigram = (unsigned(data[i]) << 8) | data[i + 1];
    if (!(bigram_bits_[bigram >> 3] & (1u << (bigram & 7)))) continue;
    for (unsigned p = 0; p < first_.size(); ++p) {
      size_t start;
      if (data[i] == first_[p] && data[i + 1] == second_[p] && verify(text, i, p, &start) && start >= min_start) return start;
    }
  }
  return std::string_view::npos;
}

#ifdef OOMDOC_X86
size_t KeywordFilter::find_sse2(std::string_view text, size_t from) const {
  const char* data = text.data();
  const size_t n = text.size();
  size_t i = from;
  const size_t pairs = first_.size();
  while (i + 17 <= n) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + i + 1));
    __m128i any = _mm_setzero_si128();
    for (size_t p = 0; p < pairs; ++p) {
      __m128i hit = _mm_and_si128(_mm_cmpeq_epi8(a, _mm_set1_epi8(static_cast<char>(first_[p]))),
                                  _mm_cmpeq_epi8(b, _mm_set1_epi8(static_cast<char>(second_[p]))));
      any = _mm_or_si128(any, hit);
    }
    unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(any));
    if (mask != 0) {
      size_t found = check_candidates(text, i, mask, from);
      if (found != std::string_view::npos) return found;
    }
    i += 16;
  }
  return find_scalar(text, i, from);
}

// Teddy-style filter (as in Hyperscan and Rust's aho-corasick): pairs are spread over 8 buckets;
// two nibble lookups (pshufb) per byte give, for each position, the buckets whose first byte could
// be here, and likewise for the next byte. Positions where both agree on a bucket are candidates.
// The cost per 32 bytes does not grow with the number of needles.
__attribute__((target("avx2"))) size_t KeywordFilter::find_avx2(std::string_view text, size_t from) const {
  const char* data = text.data();
  const size_t n = text.size();
  size_t i = from;
  const __m256i lo0 = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(teddy_lo0_)));
  const __m256i hi0 = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(teddy_hi0_)));
  const __m256i lo1 = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(teddy_lo1_)));
  const __m256i hi1 = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(teddy_hi1_)));
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i zero = _mm256_setzero_si256();
  while (i + 33 <= n) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i + 1));
    __m256i m0 = _mm256_and_si256(_mm256_shuffle_epi8(lo0, _mm256_and_si256(a, nibble)),
                                  _mm256_shuffle_epi8(hi0, _mm256_and_si256(_mm256_srli_epi16(a, 4), nibble)));
    __m256i m1 = _mm256_and_si256(_mm256_shuffle_epi8(lo1, _mm256_and_si256(b, nibble)),
                                  _mm256_shuffle_epi8(hi1, _mm256_and_si256(_mm256_srli_epi16(b, 4), nibble)));
    __m256i m = _mm256_and_si256(m0, m1);
    unsigned mask = ~static_cast<unsigned>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(m, zero)));
    if (mask != 0) {
      size_t found = check_candidates(text, i, mask, from);
      if (found != std::string_view::npos) return found;
    }
    i += 32;
  }
  return find_scalar(text, i, from);
}
#else
size_t KeywordFilter::find_sse2(std::string_view text, size_t from) const { return find_scalar(text, from, from); }
size_t KeywordFilter::find_avx2(std::string_view text, size_t from) const { return find_scalar(text, from, from); }
#endif

}  // namespace oomdoc
