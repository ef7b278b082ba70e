#include "analyses/estimate_accuracy.h"

#include <algorithm>
#include <cmath>

#include "analyses/estimator.h"
#include "readers/model_resolver.h"

namespace oomdoc {
namespace {

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  // Nearest-rank on the sorted list; the median of an even count averages the middle two.
  if (q == 0.5) {
    size_t n = values.size();
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  }
  size_t rank = static_cast<size_t>(std::ceil(q * values.size()));
  return values[std::min(values.size(), std::max<size_t>(rank, 1)) - 1];
}

KindSummary summarise(const std::vector<double>& errors) {
  KindSummary s;
  s.count = errors.size();
  s.median_abs_error = percentile(errors, 0.5);
  s.p90_abs_error = percentile(errors, 0.9);
  return s;
}

}  // namespace

std::string predicted_total_for(const std::string& kind) {
  if (kind == "torch_max_memory_reserved" || kind == "unspecified_peak") return "reserved";
  if (kind == "nvidia_smi_used" || kind == "oom_outcome" || kind == "max_context_at_capacity" ||
      kind == "max_batch_at_capacity")
    return "device";
  return "allocated";  // torch_max_memory_allocated, torch_peak_active, torch_memory_allocated, framework logs
}

AccuracyReport score_records(const std::vector<MeasuredRecord>& records) {
  AccuracyReport report;
  std::map<std::string, std::vector<double>> errors;
  std::vector<double> all;
  for (const MeasuredRecord& rec : records) {
    AccuracyRow row;
    row.id = rec.id;
    row.model = rec.model;
    row.kind = rec.measurement_kind;
    row.measured_bytes = rec.measured_bytes;
    uint64_t predicted = 0;
    // Whether it fits is decided on what the job needs when memory is short (oom_view).
    uint64_t needed = 0;
    if (rec.runtime_baseline) {
      predicted = cuda_context_bytes(rec.job.lazy_module_loading.value_or(true));
    } else {
      auto model = resolve_model(rec.model);
      if (!model) {
        row.error = model.error().message;
      } else {
        auto est = estimate_memory(*model, rec.job);
        if (!est) {
          row.error = est.error().message;
        } else {
          std::string total = predicted_total_for(rec.measurement_kind);
          auto total_of = [&total](const Estimate& e) {
            return total == "reserved" ? e.peak_reserved_bytes
                   : total == "device" ? e.device_used_bytes
                                       : e.peak_allocated_bytes;
          };
          predicted = total_of(*est);
          needed = total_of(oom_view(*est));
        }
      }
    }
    if (!row.error.empty()) {
      ++report.not_expressed;
      report.rows.push_back(row);
      continue;
    }
    row.predicted_bytes = predicted;
    if (rec.measured_bytes && *rec.measured_bytes > 0 && rec.measurement_kind != "max_context_at_capacity" &&
        rec.measurement_kind != "max_batch_at_capacity") {
      double rel = (static_cast<double>(predicted) - static_cast<double>(*rec.measured_bytes)) /
                   static_cast<double>(*rec.measured_bytes);
      row.relative_error = rel;
      errors[rec.measurement_kind].push_back(std::fabs(rel));
      all.push_back(std::fabs(rel));
    }
    std::optional<uint64_t> capacity = rec.gpu_total_bytes;
    if (rec.measurement_kind == "max_context_at_capacity" && rec.measured_bytes) capacity = rec.measured_bytes;
    if (rec.outcome && capacity) {
      row.predicted_fits = (needed ? needed : predicted) <= *capacity;
      row.agrees = *row.predicted_fits == (*rec.outcome == "fits");
      ++report.outcome_records;
      if (*row.agrees) ++report.outcome_agreements;
    }
    report.rows.push_back(row);
  }
  for (const auto& [kind, list] : errors) report.by_kind[kind] = summarise(list);
  report.overall = summarise(all);
  return report;
}

}  // namespace oomdoc
