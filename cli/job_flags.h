// The job keys as command-line flags, shared by `estimate` and `fit`: each flag is named after its
// job-file key (--micro-batch-size for micro_batch_size, docs/estimate.md), and what was given goes
// through the job-file reader, so flags and --job files are checked by one piece of code.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/job.h"

namespace oomdoc::cli {

struct JobFlags {
  std::map<std::string, std::string> text;   // string-valued keys
  std::map<std::string, uint64_t> counts;    // integer keys
  std::map<std::string, bool> switches;      // boolean keys: --compile, --compile true, --compile=false
  std::vector<std::string> offload, lora_targets, lora_modules_to_save;
  std::optional<uint64_t> lora_r;
  std::optional<double> lora_alpha;
  std::optional<double> lora_dropout;
};

// Adds one flag per job key. `fit` has its own --gpus, so it leaves out --num-gpus.
void add_job_flags(CLI::App* cmd, JobFlags& flags, bool with_num_gpus);

// The flags the user gave (only those), as a job-file JSON object.
nlohmann::json job_flags_json(const JobFlags& flags, const CLI::App& cmd);

// The range check of the job's count flags, for other count flags (fit's --gpus): "must be at
// least 1 (got 0)", or with allow_zero "must be 0 or more (got -1)".
CLI::Validator count_range(bool allow_zero);


}  // namespace oomdoc::cli
