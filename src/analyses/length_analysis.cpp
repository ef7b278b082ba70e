#include "analyses/length_analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/units.h"

namespace oomdoc {
namespace {

uint64_t nearest_rank(const std::vector<uint64_t>& sorted, double percent) {
  const double rank = std::ceil(percent / 100.0 * static_cast<double>(sorted.size()));
  const size_t index = static_cast<size_t>(std::max(1.0, rank)) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

uint64_t count_longer_than(const std::vector<uint64_t>& sorted, uint64_t cut) {
  return static_cast<uint64_t>(sorted.end() - std::upper_bound(sorted.begin(), sorted.end(), cut));
}

}  // namespace

LengthStats length_stats(std::vector<uint64_t> lengths) {
  LengthStats s;
  if (lengths.empty()) return s;
  std::sort(lengths.begin(), lengths.end());
  s.count = lengths.size();
  s.empty = s.count - count_longer_than(lengths, 0);
  s.min = lengths.front();
  s.max = lengths.back();
  long double sum = std::accumulate(lengths.begin(), lengths.end(), 0.0L);
  s.mean = static_cast<double>(sum / lengths.size());
  s.p50 = nearest_rank(lengths, 50);
  s.p90 = nearest_rank(lengths, 90);
  s.p95 = nearest_rank(lengths, 95);
  s.p99 = nearest_rank(lengths, 99);
  return s;
}

LengthAnalysis analyze_lengths(std::vector<uint64_t> lengths, uint64_t current_seq_len,
                               const PeakAtLength& peak_at, const LengthJob& job) {
  LengthAnalysis out;
  if (lengths.empty()) return out;
  std::sort(lengths.begin(), lengths.end());
  out.stats = length_stats(lengths);
  const LengthStats& s = out.stats;

  // Candidates: powers of two from just under the median to just over the longest example, the
  // job's own length and the longest example itself.
  std::vector<uint64_t> candidates;
  uint64_t p = 128;
  while (p * 2 <= std::max<uint64_t>(s.p50, 1)) p *= 2;
  for (; p < s.max * 2 && candidates.size() < 16; p *= 2) candidates.push_back(p);
  if (current_seq_len > 0) candidates.push_back(current_seq_len);
  candidates.push_back(std::max<uint64_t>(s.max, 1));
  // Nothing longer than the model's context runs: the context itself is the longest cut.
  if (job.context && s.max > job.context) {
    candidates.push_back(job.context);
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(), [&](uint64_t c) { return c > job.context; }),
                     candidates.end());
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  // Cuts above the longest example truncate nothing and cost memory for nothing: keep only one.
  candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                  [&](uint64_t c) { return c > s.max && c != current_seq_len; }),
                   candidates.end());

  for (uint64_t cut : candidates) {
    LengthCut c;
    c.seq_len = cut;
    c.truncated = count_longer_than(lengths, cut);
    c.truncated_share = static_cast<double>(c.truncated) / static_cast<double>(s.count);
    if (peak_at) c.needed_bytes = peak_at(cut);
    if (!out.suggested_cut && c.truncated_share <= kAcceptableTruncation) out.suggested_cut = cut;
    out.cuts.push_back(c);
  }

  // The job never sees more than it truncates to: an outlier beyond that costs what the cut costs.
  auto seen = [&](uint64_t len) { return job.truncation ? std::min(len, job.truncation) : len; };
  const uint64_t seen_max = seen(s.max), seen_p99 = seen(std::max<uint64_t>(s.p99, 1));
  if (peak_at && seen_max > seen_p99 && !job.packed) {
    auto at_max = peak_at(seen_max);
    auto at_p99 = peak_at(seen_p99);
    if (at_max && at_p99 && *at_max > *at_p99) out.outlier_extra_bytes = *at_max - *at_p99;
  }

  if (job.context && s.max > job.context) {
    const uint64_t over = count_longer_than(lengths, job.context);
    out.advice.push_back(fmt::format("{} of {} {} ({:.2f}%) are longer than the model's context of {} tokens: they "
                                     "must be cut (or dropped) whatever the memory",
                                     over, s.count, job.inference ? "prompts" : "examples",
                                     100.0 * static_cast<double>(over) / static_cast<double>(s.count), job.context));
  }
  // An empty row pads to its batch's longest member and trains on nothing (its labels are all
  // padding, a 0/0 loss where a batch holds only such rows); it is a data bug, not a length.
  if (s.empty) {
    out.advice.push_back(fmt::format("{} of {} {} have no tokens: drop them before {} ({})", s.empty, s.count,
                                     job.inference ? "prompts" : "examples", job.inference ? "serving" : "training",
                                     job.packed ? "packed, an empty example adds only its special tokens and trains on "
                                                  "nothing"
                                                : fmt::format("an empty {} still takes a batch slot padded to the "
                                                              "batch's longest", job.inference ? "prompt" : "example")));
  }
  if (job.packed && !job.inference && seen_max > seen_p99) {
    out.advice.push_back(fmt::format(
        "packing is on: rows are filled with whole examples{}, so the longest example ({} tokens) pads no batch and "
        "raises nothing", job.truncation ? fmt::format(" up to {} tokens", job.truncation) : std::string(), s.max));
  }
  if (out.outlier_extra_bytes) {
    const std::string cut = seen_max < s.max ? fmt::format(", cut to {} by {}", seen_max, job.truncated_by) : "";
    out.advice.push_back(fmt::format(
        "the longest {} ({} tokens{}, {:.1f}x the 99th percentile of {}) raises the peak by {} "
        "when its batch is padded to it",
        job.inference ? "prompt" : "example", s.max, cut, static_cast<double>(seen_max) / static_cast<double>(seen_p99),
        seen_p99, format_bytes(*out.outlier_extra_bytes)));
    out.advice.push_back(
        job.inference
            ? "batch prompts of similar length together, or serve with a token budget per step (vLLM's "
              "continuous batching), so one long prompt does not pad every sequence of its batch"
            : "bucket by length with a token budget per batch (TRL packing=True or padding_free=True, "
              "Axolotl sample_packing: true, LLaMA-Factory neat_packing: true) so a long example shares "
              "its batch's tokens instead of multiplying by the batch size; group_by_length=True only "
              "cuts padding on average, the batch holding the longest example still sets the peak");
  }
  if (out.suggested_cut && current_seq_len > *out.suggested_cut) {
    const auto& cut = *std::find_if(out.cuts.begin(), out.cuts.end(),
                                    [&](const LengthCut& c) { return c.seq_len == *out.suggested_cut; });
    out.advice.push_back(
        job.inference
            ? fmt::format("prompts cut at {} tokens: that truncates {} of {} ({:.2f}%), and is below the job's {}",
                          cut.seq_len, cut.truncated, s.count, 100.0 * cut.truncated_share, current_seq_len)
            : fmt::format("max_length={} truncates {} of {} examples ({:.2f}%) and is below the job's {}",
                          cut.seq_len, cut.truncated, s.count, 100.0 * cut.truncated_share, current_seq_len));
  }
  return out;
}

}  // namespace oomdoc
