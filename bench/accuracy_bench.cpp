// The accuracy report: every measured-memory record predicted and compared with what was
// measured, per measurement kind (median and 90th percentile of the absolute relative error),
// and fit/no-fit agreement for outcome records.
//   build/bench/accuracy_bench ../shared/data/measured-memory/dev.jsonl
#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "analyses/estimate_accuracy.h"
#include "core/units.h"

int main(int argc, char** argv) {
  using namespace oomdoc;
  std::string path = argc > 1 ? argv[1] : "../shared/data/measured-memory/dev.jsonl";
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
