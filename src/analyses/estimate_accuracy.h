// Scores estimate_memory against measured records (readers/measured_memory.h): each record is
// compared with the predicted total its measurement_kind reads (allocated, reserved, or what
// nvidia-smi shows), and outcome records with fit / no-fit on the stated GPU.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "readers/measured_memory.h"

namespace oomdoc {

struct AccuracyRow {
  int64_t id = 0;
  std::string model;
  std::string kind;
  std::optional<uint64_t> predicted_bytes;
  std::optional<uint64_t> measured_bytes;
  std::optional<double> relative_error;     // (predicted - measured) / measured
  std::optional<bool> predicted_fits;       // outcome records: predicted device use <= capacity
  std::optional<bool> agrees;               // outcome records: prediction matches the outcome
  std::string error;                        // non-empty when the record could not be expressed
};

struct KindSummary {
  size_t count = 0;
  double median_abs_error = 0;
  double p90_abs_error = 0;
};

struct AccuracyReport {
  std::vector<AccuracyRow> rows;
  std::map<std::string, KindSummary> by_kind;
  KindSummary overall;                      // every record with a measured number
  size_t outcome_records = 0, outcome_agreements = 0;
  size_t not_expressed = 0;
};

AccuracyReport score_records(const std::vector<MeasuredRecord>& records);

// Which predicted total a measurement kind compares with: "allocated", "reserved", "device".
std::string predicted_total_for(const std::string& measurement_kind);

}  // namespace oomdoc
