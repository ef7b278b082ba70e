// Reads records of the measured-memory corpus (one JSON object per line: a published, measured
// GPU-memory figure for a precisely described job; see ../shared/data/measured-memory/README.md)
// and turns each into a Job with general rules (precision words, quantization names, framework
// defaults), never per-record tweaks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "model/job.h"

namespace oomdoc {

struct MeasuredRecord {
  int64_t id = 0;
  std::string model;                      // the record's model with any "(...)" remark removed
  bool runtime_baseline = false;          // CUDA context only, no model
  Job job;
  std::string measurement_kind;           // torch_max_memory_allocated, nvidia_smi_used, oom_outcome, ...
  std::optional<uint64_t> measured_bytes; // value_gib in bytes; nullopt for outcome-only records
  std::optional<std::string> outcome;     // fits / oom
  std::optional<uint64_t> gpu_total_bytes;   // per-GPU capacity (total MiB, else nominal GB)
  std::string framework;
  std::vector<std::string> mapping;       // how fields were read ("precision 'bf16-true' -> bf16")
};

Result<MeasuredRecord> parse_measured_record(std::string_view line, const std::string& source);

}  // namespace oomdoc
