#include "analyses/estimate_accuracy.h"

#include <gtest/gtest.h>

#include "analyses/estimator.h"
#include "readers/model_resolver.h"

namespace oomdoc {
namespace {

TEST(EstimateAccuracy, MeasurementKindsReadTheMatchingTotal) {
  EXPECT_EQ(predicted_total_for("torch_max_memory_allocated"), "allocated");
  EXPECT_EQ(predicted_total_for("torch_peak_active"), "allocated");
  EXPECT_EQ(predicted_total_for("torch_max_memory_reserved"), "reserved");
  EXPECT_EQ(predicted_total_for("unspecified_peak"), "reserved");
  EXPECT_EQ(predicted_total_for("nvidia_smi_used"), "device");
  EXPECT_EQ(predicted_total_for("oom_outcome"), "device");
}

TEST(EstimateAccuracy, ErrorsMediansAndOutcomes) {
  // Three records of one job: measured at the prediction, 10% above it, 20% below it; one OOM
  // outcome on a GPU far too small, one "fits" on a large one.
  MeasuredRecord base;
  base.model = "meta-llama/Llama-2-7b-hf";
  base.job.model = base.model;
  base.job.task = "inference";
  base.job.batch_size = 1;
  base.job.prompt_len = 10;
  base.job.max_new_tokens = 10;
  base.measurement_kind = "torch_max_memory_allocated";
  auto model = resolve_model(base.model);
  ASSERT_TRUE(model);
  const uint64_t predicted = estimate_memory(*model, base.job)->peak_allocated_bytes;
  std::vector<MeasuredRecord> records(5, base);
  records[0].measured_bytes = predicted;
  records[1].measured_bytes = static_cast<uint64_t>(predicted / 1.1);  // prediction 10% above
  records[2].measured_bytes = static_cast<uint64_t>(predicted / 0.8);  // prediction 20% below
  records[3].measurement_kind = "oom_outcome";
  records[3].outcome = "oom";
  records[3].gpu_total_bytes = 8ull << 30;
  records[4].measurement_kind = "oom_outcome";
  records[4].outcome = "fits";
  records[4].gpu_total_bytes = 80ull << 30;
  AccuracyReport report = score_records(records);
  ASSERT_EQ(report.rows.size(), 5u);
  EXPECT_EQ(report.overall.count, 3u);
  EXPECT_NEAR(report.overall.median_abs_error, 0.10, 1e-6);
  EXPECT_NEAR(report.overall.p90_abs_error, 0.20, 1e-6);
  EXPECT_EQ(report.outcome_records, 2u);
  EXPECT_EQ(report.outcome_agreements, 2u);
  EXPECT_EQ(report.not_expressed, 0u);
}

}  // namespace
}  // namespace oomdoc
