// llama.cpp command lines (`llama-server -m model.gguf -c 32768 -ngl 99 -fa ...`, also
// llama-cli / the old `server` and `main`) as a job for the llama.cpp estimate. The flag names are
// llama.cpp's (common/arg.cpp); what each does to memory lives in analyses/llama_cpp_estimate.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/job.h"

namespace oomdoc {

struct LlamaCppCommand {
  std::string launcher;                 // "llama-server", "llama-cli", ...
  std::string model_path;               // -m / --model
  std::optional<uint64_t> context;      // -c / --ctx-size; 0 = the model's trained context
  Job job;                              // implementation llama_cpp; prompt_len set once the context is known
  bool gpu_layers_given = false;        // -ngl (any form, "auto" and "all" included)
  std::vector<std::string> notes;       // how a flag was read ("-fa auto: taken as on (CUDA)")
  std::vector<std::string> ignored;     // flags with no effect on GPU memory, as given
  std::vector<std::string> not_modelled;  // flags that change GPU memory but are not sized (-nkvo, -ot, --mmproj, ...)
};

// nullopt when `words` is not a llama.cpp command (the caller tries vLLM's reader next).
std::optional<Result<LlamaCppCommand>> parse_llama_cpp_command_line(const std::vector<std::string>& words);

// The job once the model's trained context is known (for -c 0 or no -c): -c is shared by the
// --parallel slots, so each sequence gets context / slots. The notes say how every flag (and
// every flag left out) was read, for the report.
struct LlamaCppJob {
  Job job;
  std::vector<std::string> notes;
};
LlamaCppJob llama_cpp_job_for(const LlamaCppCommand& command, uint64_t model_context);

}  // namespace oomdoc
