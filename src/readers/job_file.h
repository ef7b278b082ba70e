// Reads a job file (--job FILE.json): flat JSON whose keys are the Job field names
// (docs/estimate.md). The CLI builds the same JSON object from its flags, so flags and files go
// through one parser and one validation.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/json_document.h"
#include "core/result.h"
#include "model/job.h"

namespace oomdoc {

// `source` names the input in errors ("job.json", "--flags").
Result<Job> parse_job_json(std::string_view text, const std::string& source);

// A job file (empty: none) with `overrides` on top, key by key, in the job file's keys (the CLI's
// flags): a "lora" object is merged into the file's one, every other key replaces the file's.
// Errors name the file, or "command line" when there is none.
Result<Job> read_job(const std::string& job_file, const nlohmann::json& overrides);

// Checks values and combinations (unknown names, zero sizes, tp*pp*cp not dividing num_gpus,
// quantization without a task that allows it, ...). The message names the field.
Status validate_job(const Job& job, const std::string& source);

// The job as a job file: the keys that are set, in the reader's names (parse_job_json reads it
// back to the same Job).
nlohmann::json job_to_json(const Job& job);

// Why a transformers/LitGPT job cannot run `attention` in `precision` (FlashAttention has no fp32
// kernels), or "" when it can. validate_job refuses the job as given; the estimator refuses the
// resolved job too, so that no fit plan ends with flash attention in fp32.
std::string flash_attention_dtype_problem(const std::string& precision, const std::string& attention);

// Whether a count key takes 0 (max_new_tokens: prefill only; gpu_layers: none on the GPU); the
// others must be at least 1.
bool job_count_allows_zero(const std::string& key);

// Fields set in `over` replace those of `base` (a job file or flags over a training config).
void overlay_job(Job& base, const Job& over);

}  // namespace oomdoc
