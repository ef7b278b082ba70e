// Reads the files users already describe their training jobs in, and turns them into a Job:
//   - Axolotl YAML (base_model, adapter, load_in_4bit, sequence_len, micro_batch_size, ...)
//   - LLaMA-Factory YAML (model_name_or_path, finetuning_type, quantization_bit, cutoff_len, ...)
//   - a Hugging Face TrainingArguments / TRL SFTConfig dump (JSON or YAML; TRL's CLI YAML also
//     carries ModelConfig keys such as model_name_or_path, load_in_4bit, lora_r)
// Parsed with yaml-cpp (JSON is YAML). Every key is sorted into used (it set a Job field),
// ignored (known, no effect on memory), not modelled (known, changes memory in a way oomdoc does
// not model: a warning) or unknown (a warning; reading continues).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "model/job.h"

namespace oomdoc {

enum class TrainingConfigFormat { kAxolotl, kLlamaFactory, kHfTrainingArguments };

std::string_view training_config_format_name(TrainingConfigFormat format);

struct TrainingConfig {
  Job job;                                // model is empty when the file does not name one
  TrainingConfigFormat format = TrainingConfigFormat::kAxolotl;
  std::vector<std::string> used_keys;     // in file order
  std::vector<std::string> ignored_keys;  // known keys that do not change memory
  std::vector<std::string> unmodeled_keys;  // known, change memory, not modelled; each has a warning
  std::vector<std::string> unknown_keys;  // not recognised; each also has a warning
  std::vector<std::string> warnings;      // one line each, starting with the file name
  // Settings the file leaves to its framework's defaults that change memory, each with the
  // default taken and its source ("max_length 1024: TRL SFTConfig's default").
  std::vector<std::string> framework_defaults;
  bool yaml_syntax = true;                // written as YAML (false: a JSON document)
  // bf16: auto (Axolotl): bf16 where the GPU has it, else fp16 (the reader reads bf16; the GPU,
  // known later, may turn it into fp16: fp16_where_no_bf16).
  bool bf16_auto = false;
};

// display_name names the input in messages; base_dir resolves relative paths the config points
// to (a DeepSpeed JSON); empty means the current directory.
Result<TrainingConfig> parse_training_config(std::string_view text,
                                             const std::string& display_name,
                                             const std::string& base_dir = "");

Result<TrainingConfig> read_training_config(const std::string& path);

// A training framework's optimizer name (HF TrainingArguments' `optim`, Axolotl's `optimizer`:
// adamw_torch_fused, adamw_bnb_8bit, ...) as the job's optimizer kind and, where the name fixes
// it, its implementation (fused, for_loop); nullopt for a name none of them uses.
struct TrainerOptimizer {
  std::string kind;
  std::optional<std::string> impl;
};
std::optional<TrainerOptimizer> trainer_optimizer(std::string name);

// A config's bf16: auto on a GPU without bf16: the job's bf16 precision becomes fp16, as Axolotl
// falls back (normalize_config: bf16 only where torch.cuda.is_bf16_supported()). Returns the note
// to show, or nothing when the job is left as it is.
std::optional<std::string> fp16_where_no_bf16(const TrainingConfig& config, Job& job, bool gpu_has_bf16,
                                              const std::string& gpu_name);

}  // namespace oomdoc
