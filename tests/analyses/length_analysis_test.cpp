#include "analyses/length_analysis.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace oomdoc {
namespace {

using ::testing::HasSubstr;

// 100 examples: 1..99 tokens times 10, and one outlier of 5000.
std::vector<uint64_t> sample() {
  std::vector<uint64_t> v;
  for (uint64_t i = 1; i <= 99; ++i) v.push_back(i * 10);
  v.push_back(5000);
  return v;
}

TEST(LengthAnalysis, NearestRankPercentiles) {
  LengthStats s = length_stats(sample());
  EXPECT_EQ(s.count, 100u);
  EXPECT_EQ(s.min, 10u);
  EXPECT_EQ(s.max, 5000u);
  EXPECT_DOUBLE_EQ(s.mean, (4950.0 * 10 + 5000) / 100);
  EXPECT_EQ(s.p50, 500u);
  EXPECT_EQ(s.p90, 900u);
  EXPECT_EQ(s.p95, 950u);
  EXPECT_EQ(s.p99, 990u);
}

TEST(LengthAnalysis, CutsTruncationAndOutlierCost) {
  // A peak linear in the length: 1 MiB per token plus 1 GiB.
  PeakAtLength peak = [](uint64_t len) -> std::optional<uint64_t> {
    return (1ull << 30) + len * (1ull << 20);
  };
  LengthAnalysis a = analyze_lengths(sample(), 4096, peak);
  std::vector<uint64_t> cut_lengths;
  for (const auto& c : a.cuts) cut_lengths.push_back(c.seq_len);
  EXPECT_EQ(cut_lengths, (std::vector<uint64_t>{256, 512, 1024, 2048, 4096, 5000}));
  EXPECT_EQ(a.cuts[0].truncated, 75u);   // 260..990 and 5000
  EXPECT_EQ(a.cuts[2].truncated, 1u);    // only the outlier is longer than 1024
  EXPECT_DOUBLE_EQ(a.cuts[2].truncated_share, 0.01);
  EXPECT_EQ(a.cuts[5].truncated, 0u);
  EXPECT_EQ(*a.cuts[3].needed_bytes, (1ull << 30) + 2048 * (1ull << 20));
  EXPECT_EQ(a.suggested_cut, 1024u);
  ASSERT_TRUE(a.outlier_extra_bytes.has_value());
  EXPECT_EQ(*a.outlier_extra_bytes, (5000ull - 990) * (1ull << 20));
  ASSERT_EQ(a.advice.size(), 3u);
  EXPECT_THAT(a.advice[0], HasSubstr("the longest example (5000 tokens, 5.1x the 99th percentile of 990) raises the peak by 3.92 GiB"));
  EXPECT_THAT(a.advice[2], HasSubstr("max_length=1024 truncates 1 of 100 examples (1.00%)"));
}

// A job that truncates never sees the outlier whole: it costs what the truncation length costs over
// the 99th percentile, and the line says so; a cut below the 99th percentile leaves no outlier.
TEST(LengthAnalysis, OutlierCostStopsAtTheTruncation) {
  PeakAtLength peak = [](uint64_t len) -> std::optional<uint64_t> { return (1ull << 30) + len * (1ull << 20); };
  LengthJob job;
  job.truncation = 2048;
  job.truncated_by = "the job's max length (2048)";
  LengthAnalysis a = analyze_lengths(sample(), 2048, peak, job);
  ASSERT_TRUE(a.outlier_extra_bytes.has_value());
  EXPECT_EQ(*a.outlier_extra_bytes, (2048ull - 990) * (1ull << 20));
  ASSERT_FALSE(a.advice.empty());
  EXPECT_THAT(a.advice[0], HasSubstr("the longest example (5000 tokens, cut to 2048 by the job's max length (2048), "
                                     "2.1x the 99th percentile of 990) raises the peak by 1.03 GiB"));
  job.truncation = 512;
  job.truncated_by = "the job's max length (512)";
  EXPECT_FALSE(analyze_lengths(sample(), 512, peak, job).outlier_extra_bytes.has_value());
}

// Prompts get batching advice, not training's packing keys.
TEST(LengthAnalysis, InferenceAdviceIsAboutBatchingPrompts) {
  PeakAtLength peak = [](uint64_t len) -> std::optional<uint64_t> { return (1ull << 30) + len * (1ull << 20); };
  LengthJob job;
  job.inference = true;
  LengthAnalysis a = analyze_lengths(sample(), 4096, peak, job);
  ASSERT_EQ(a.advice.size(), 3u);
  EXPECT_THAT(a.advice[0], HasSubstr("the longest prompt (5000 tokens, 5.1x the 99th percentile of 990)"));
  EXPECT_THAT(a.advice[1], HasSubstr("batch prompts of similar length together"));
  EXPECT_THAT(a.advice[1], ::testing::Not(HasSubstr("packing")));
  EXPECT_THAT(a.advice[2], HasSubstr("prompts cut at 1024 tokens: that truncates 1 of 100 (1.00%)"));
}

TEST(LengthAnalysis, WithoutPredictionStillGivesDistribution) {
  LengthAnalysis a = analyze_lengths({100, 100, 100}, 0, nullptr);
  EXPECT_EQ(a.stats.p99, 100u);
  EXPECT_FALSE(a.outlier_extra_bytes.has_value());
  ASSERT_FALSE(a.cuts.empty());
  EXPECT_EQ(a.cuts.back().seq_len, 100u);
  EXPECT_FALSE(a.cuts.back().needed_bytes.has_value());
}

// Packing fills rows with whole examples: the longest example pads no batch, so no outlier cost and
// no packing advice, a line saying so instead.
TEST(LengthAnalysis, PackingLeavesNoOutlierCost) {
  PeakAtLength peak = [](uint64_t len) -> std::optional<uint64_t> { return (1ull << 30) + len * (1ull << 20); };
  LengthJob job;
  job.packed = true;
  job.truncation = 2048;
  LengthAnalysis a = analyze_lengths(sample(), 2048, peak, job);
  EXPECT_FALSE(a.outlier_extra_bytes.has_value());
  ASSERT_FALSE(a.advice.empty());
  EXPECT_EQ(a.advice[0], "packing is on: rows are filled with whole examples up to 2048 tokens, so the longest example "
                         "(5000 tokens) pads no batch and raises nothing");
  for (const auto& line : a.advice) EXPECT_EQ(line.find("sample_packing: true"), std::string::npos) << line;
}

// Examples with no tokens are counted and named as a data bug to drop; a file without them says nothing.
TEST(LengthAnalysis, EmptyExamplesAreCountedAndNamed) {
  LengthAnalysis a = analyze_lengths({0, 0, 100, 200, 300}, 0, nullptr);
  EXPECT_EQ(a.stats.count, 5u);
  EXPECT_EQ(a.stats.empty, 2u);
  EXPECT_EQ(a.stats.min, 0u);
  ASSERT_EQ(a.advice.size(), 1u);
  EXPECT_EQ(a.advice[0], "2 of 5 examples have no tokens: drop them before training (an empty example still takes "
                         "a batch slot padded to the batch's longest)");
  LengthJob prompts;
  prompts.inference = true;
  EXPECT_THAT(analyze_lengths({0, 10}, 0, nullptr, prompts).advice[0], HasSubstr("1 of 2 prompts have no tokens: drop them before serving"));
  EXPECT_EQ(length_stats(sample()).empty, 0u);
  EXPECT_TRUE(analyze_lengths({100, 100, 100}, 0, nullptr).advice.empty());
}

// No cut above the model's context is offered (a longer sequence cannot run), and the examples
// beyond it are counted.
TEST(LengthAnalysisQa5, CutsStopAtTheModelsContext) {
  std::vector<uint64_t> lengths;
  for (uint64_t i = 1; i <= 10; ++i) lengths.push_back(i * 200);   // 200 ... 2000
  LengthJob job;
  job.context = 1024;
  job.truncation = 1024;
  job.truncated_by = "the model's context (1024 positions)";
  auto a = analyze_lengths(lengths, 0, nullptr, job);
  ASSERT_FALSE(a.cuts.empty());
  EXPECT_EQ(a.cuts.back().seq_len, 1024u);
  EXPECT_EQ(a.cuts.back().truncated, 5u);
  ASSERT_FALSE(a.advice.empty());
  EXPECT_EQ(a.advice.front(), "5 of 10 examples (50.00%) are longer than the model's context of 1024 tokens: they must "
                              "be cut (or dropped) whatever the memory");
}

}  // namespace
}  // namespace oomdoc
