// What a dataset's token lengths mean for memory (fit --lengths): the distribution, the share of
// examples each candidate max length truncates, and how much the single longest example raises
// the peak when batches are padded to their longest member.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace oomdoc {

struct LengthStats {
  uint64_t count = 0;
  uint64_t empty = 0;   // examples with no tokens (an empty row, an empty prompt)
  uint64_t min = 0;
  uint64_t max = 0;
  double mean = 0;
  // Nearest-rank percentiles: the smallest length with at least p% of examples at or below it.
  uint64_t p50 = 0;
  uint64_t p90 = 0;
  uint64_t p95 = 0;
  uint64_t p99 = 0;
};

struct LengthCut {
  uint64_t seq_len = 0;
  uint64_t truncated = 0;         // examples longer than seq_len
  double truncated_share = 0;     // truncated / count
  std::optional<uint64_t> needed_bytes;   // predicted need at this length (fit's figure), when predictable
};

struct LengthAnalysis {
  LengthStats stats;
  std::vector<LengthCut> cuts;    // ascending seq_len
  // The peak with batches padded to the longest example, minus the peak at the 99th percentile.
  std::optional<uint64_t> outlier_extra_bytes;
  // Smallest candidate cut that truncates at most kAcceptableTruncation of the examples.
  std::optional<uint64_t> suggested_cut;
  std::vector<std::string> advice;
};

// A cut that truncates at most this share of examples is treated as costing little (1%).
inline constexpr double kAcceptableTruncation = 0.01;

// Predicted device peak (bytes) at a sequence length; nullopt when it cannot be predicted.
using PeakAtLength = std::function<std::optional<uint64_t>(uint64_t seq_len)>;

// What the job does with the lengths: the longest sequence it lets through (its max length, the
// model's context), which caps what an outlier can cost, and whether they are prompts.
struct LengthJob {
  uint64_t truncation = 0;       // 0: none known
  std::string truncated_by;      // names it: "the job's max length 2048", "the model's context (4096)"
  bool inference = false;        // prompts: batching advice instead of training's packing
  // Packing (padding_free: TRL packing/padding_free, Axolotl sample_packing, LLaMA-Factory
  // neat_packing) fills rows with whole examples: no example pads its batch.
  bool packed = false;
  // The longest the model can take (its context, less generated tokens): no cut above it is
  // offered, since a longer sequence cannot run at all. 0: unknown.
  uint64_t context = 0;
};

LengthStats length_stats(std::vector<uint64_t> lengths);

// current_seq_len: the job's max length (0 when unset), listed among the cuts.
LengthAnalysis analyze_lengths(std::vector<uint64_t> lengths, uint64_t current_seq_len,
                               const PeakAtLength& peak_at, const LengthJob& job = {});

}  // namespace oomdoc
