// Every record of the measured-memory corpus becomes a job; the estimator's prediction is
// compared with what was measured. Fails when a record cannot be expressed, when the median
// absolute error passes 6% (4.9% measured, docs/benchmarks.md) or the 90th percentile 22%
// (20.7% measured), or fewer than 7 in 10 fit/no-fit outcomes agree (14/20 measured).
// bench/accuracy_bench prints the per-record table.
#include <gtest/gtest.h>

#include <fstream>

#include "analyses/estimate_accuracy.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

std::vector<MeasuredRecord> load_records() {
  const std::string path = testing::corpus_path("measured-memory/dev.jsonl");
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path << " is missing";
  std::vector<MeasuredRecord> records;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    auto rec = parse_measured_record(line, path + ":" + std::to_string(n));
    EXPECT_TRUE(rec) << rec.error().message;
    if (rec) records.push_back(*rec);
  }
  return records;
}

TEST(EstimateAccuracy, EveryRecordIsExpressedAndTheMedianErrorIsUnderSixPercent) {
  auto records = load_records();
  ASSERT_GT(records.size(), 90u);
  AccuracyReport report = score_records(records);
  for (const auto& row : report.rows) EXPECT_TRUE(row.error.empty()) << "record " << row.id << ": " << row.error;
  EXPECT_EQ(report.not_expressed, 0u);
  ASSERT_GT(report.overall.count, 70u);
  EXPECT_LT(report.overall.median_abs_error, 0.06);
  EXPECT_LT(report.overall.p90_abs_error, 0.22);
  for (const auto& [kind, summary] : report.by_kind) {
    std::cout << kind << ": n " << summary.count << ", median " << summary.median_abs_error * 100 << "%, p90 "
              << summary.p90_abs_error * 100 << "%\n";
  }
  std::cout << "fit/no-fit agreement " << report.outcome_agreements << "/" << report.outcome_records << "\n";
  // Outcome records: most fit/no-fit calls agree with what happened.
  EXPECT_GE(report.outcome_agreements * 10, report.outcome_records * 7);
}

}  // namespace
}  // namespace oomdoc
