// The accuracy report: every measured-memory record predicted and compared with what was
// measured, per measurement kind (median and 90th percentile of the absolute relative error),
// and fit/no-fit agreement for outcome records.
//   build/bench/accuracy_bench ../shared/data/measured-memory/dev.jsonl
#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "analyses/estimate_accuracy.h"
#include "analyses/estimator.h"
#include "readers/model_resolver.h"
#include "core/units.h"

int main(int argc, char** argv) {
  using namespace oomdoc;
  std::string path = argc > 1 ? argv[1] : "../shared/data/measured-memory/dev.jsonl";
  // --show ID prints how record ID was read, then its breakdown via `oomdoc estimate`.
  int64_t show = argc > 3 && std::string(argv[2]) == "--show" ? std::stoll(argv[3]) : -1;
  std::ifstream in(path);
  if (!in) {
    std::cerr << path << ": cannot open\n";
    return 2;
  }
  std::vector<MeasuredRecord> records;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    auto rec = parse_measured_record(line, fmt::format("{}:{}", path, line_no));
    if (!rec) {
      std::cout << "NOT EXPRESSED " << rec.error().message << "\n";
      continue;
    }
    if (rec->id == show) {
      const Job& j = rec->job;
      fmt::print("record {}: model {} task {} precision {} quant {} optimizer {} mb {} seq {} gc {} attn {} gpus {} par {} loss {} batch {} prompt {} new {}\n",
                 rec->id, j.model, j.task.value_or("-"), j.precision.value_or("-"), j.weight_quantization.value_or("-"),
                 j.optimizer.value_or("-"), j.micro_batch_size.value_or(0), j.seq_len.value_or(0),
                 j.gradient_checkpointing.value_or("-"), j.attention_impl.value_or("-"), j.num_gpus.value_or(0),
                 j.parallelism.value_or("-"), j.loss_impl.value_or("-"), j.batch_size.value_or(0), j.prompt_len.value_or(0),
                 j.max_new_tokens.value_or(0));
      for (const auto& m : rec->mapping) fmt::print("  {}\n", m);
      for (const auto& o : j.offload) fmt::print("  offload {}\n", o);
      fmt::print("  fused_backward {}\n", j.fused_backward.value_or(false));
      // The estimate's components at the peak, as the record reads them.
      if (auto model = resolve_model(rec->model)) {
        if (auto est = estimate_memory(*model, j)) {
          for (const auto& c : est->components) fmt::print("  {:<22} {:>12}  {}\n", c.name, format_bytes(c.bytes), c.detail);
          fmt::print("  peak phase {}; allocated {}, reserved {}, device {}\n", est->peak_phase,
                     format_bytes(est->peak_allocated_bytes), format_bytes(est->peak_reserved_bytes),
                     format_bytes(est->device_used_bytes));
        }
      }
    }
    records.push_back(*rec);
  }
  AccuracyReport report = score_records(records);
  fmt::print("{:>4}  {:<42} {:<27} {:>10} {:>10} {:>8}\n", "id", "model", "kind", "measured", "predicted", "error");
  for (const auto& row : report.rows) {
    std::string measured = row.measured_bytes ? format_bytes(*row.measured_bytes) : "-";
    std::string predicted = row.predicted_bytes ? format_bytes(*row.predicted_bytes) : "-";
    std::string error = row.relative_error ? fmt::format("{:+.1f}%", *row.relative_error * 100) : "";
    if (row.agrees) error += *row.agrees ? " agree" : " DISAGREE";
    if (!row.error.empty()) error = "ERROR " + row.error;
    fmt::print("{:>4}  {:<42} {:<27} {:>10} {:>10} {}\n", row.id, row.model.substr(0, 42), row.kind, measured, predicted, error);
  }
  fmt::print("\n{:<28} {:>5} {:>12} {:>12}\n", "measurement_kind", "n", "median |err|", "p90 |err|");
  for (const auto& [kind, s] : report.by_kind) {
    fmt::print("{:<28} {:>5} {:>11.1f}% {:>11.1f}%\n", kind, s.count, s.median_abs_error * 100, s.p90_abs_error * 100);
  }
  fmt::print("{:<28} {:>5} {:>11.1f}% {:>11.1f}%\n", "all", report.overall.count, report.overall.median_abs_error * 100,
             report.overall.p90_abs_error * 100);
  fmt::print("fit/no-fit agreement: {}/{}; not expressed: {}\n", report.outcome_agreements, report.outcome_records,
             report.not_expressed);
  return 0;
}
