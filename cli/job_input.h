// What `estimate` and `fit` read a job from: a training config (Axolotl, LLaMA-Factory,
// TrainingArguments/TRL), a job file, or a model name, with --job and the job flags on top. One
// reader so that both commands accept the same inputs and say the same things about them.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "model/job.h"
#include "readers/training_config.h"

namespace oomdoc::cli {

// The source of a job given by flags alone, as validation errors name it.
inline constexpr const char* kCommandLineSource = "command line";

struct JobInput {
  Job job;
  std::optional<TrainingConfig> config;     // when the job came from a training config
  std::string source = kCommandLineSource;  // names the input in validation errors
  bool model_from_file = false;             // the model is the one the config or job file names
};

// A model that cannot be read, named with the file that named it (the config, or the job file).
std::string model_error(const JobInput& input, const std::string& message);

// input: the positional argument (may be empty); model_flag: --model (may be empty); job_file:
// --job (may be empty); flags: the job flags given, as job-file JSON (job_flags_json). The flags
// and --job apply over a training config field by field.
Result<JobInput> read_job_input(const std::string& input, const std::string& model_flag,
                                const std::string& job_file, const nlohmann::json& flags);

}  // namespace oomdoc::cli
