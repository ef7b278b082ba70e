// oomdoc estimate: predicted peak GPU memory of a job, by component. Flags map one to one onto
// the job file keys (docs/estimate.md); both go through readers/job_file.cpp.
#include <cctype>
#include <iostream>

#include <fmt/format.h>
#include <map>

#include <nlohmann/json.hpp>

#include "analyses/estimator.h"
#include "command.h"
#include "job_flags.h"
#include "job_input.h"
#include "core/exit_codes.h"
#include "core/file_input.h"
#include "core/units.h"
#include "readers/job_file.h"
#include "readers/model_resolver.h"
#include "readers/served_model.h"
#include "report/estimate_report.h"

namespace oomdoc::cli {
namespace {

constexpr const char* kShapeFlags[] = {"--hidden-size", "--layers", "--heads", "--kv-heads", "--vocab-size",
                                       "--intermediate-size"};

struct EstimateOptions {
  std::string input, model, job_file, params;
  bool json = false;
  JobFlags job;
  ShapeHints shape;
};

// --params N: a count with a unit, or an exact count of at least a million as a checkpoint states
// it; the shape flags are checked against the count where the shape is made (model_resolver).
Result<ModelSpec> params_flag(const EstimateOptions& o) {
  auto count = parse_count(o.params);
  if (!count) return make_error("--params: \"" + o.params + "\" is not a parameter count such as 7B or 350M");
  // A bare number is single parameters: "7" is a slip for 7B, as a bare --memory 24 is for 24GiB.
  const bool has_unit = std::isalpha(static_cast<unsigned char>(o.params.back()));
  if (!has_unit && *count < 1'000'000) {
    return make_error(fmt::format("--params: '{}' has no unit: write {}B (billions), {}M or {}K; a bare number is an "
                                  "exact count, at least 1000000", o.params, o.params, o.params, o.params));
  }
  return model_from_param_count(*count, o.shape);
}

int run(EstimateOptions& o, CLI::App& app) {
  auto input = read_job_input(o.input, o.model, o.job_file, job_flags_json(o.job, app));
  if (!input) return fail(input.error().message);
  const Job* job = &input->job;
  const TrainingConfig* config = input->config ? &*input->config : nullptr;
  if (auto valid = validate_job(*job, input->source); !valid) return fail(valid.error().message);

  Result<ModelSpec> model = make_error("");
  if (!o.params.empty()) {
    // A parameter count stands in for a model: with one named too, which was meant is a guess.
    if (!job->model.empty()) {
      return fail(fmt::format("--params {} and the model '{}' (from {}) both say what to estimate: give one", o.params,
                              job->model, input->source));
    }
    auto count = params_flag(o);
    if (!count) return fail(count.error().message);
    model = *count;
  } else {
    // The shape flags describe a bare parameter count; a real model's config gives its own.
    for (const char* flag : kShapeFlags) {
      if (app.count(flag)) return fail(std::string(flag) + " is only read with --params (the model's config gives its shape)");
    }
    if (job->model.empty()) {
      return fail(config ? o.input + ": names no model; add --model NAME"
                         : "estimate: no model (give MODEL, --model, --params, a job file with \"model\" or a training config)");
    }
    model = resolve_checkpoint_name(job->model);
    // Only estimate can stand in a parameter count for a model it cannot identify or does not
    // model; a malformed file is fixed in the file.
    if (!model && model.error().unknown_kind) {
      return fail(model_error(*input, model.error().message) +
                  "; or pass --params N (with --hidden-size and --layers) for a quick estimate");
    }
  }
  if (!model) return fail(model_error(*input, model.error().message));
  auto est = estimate_memory(*model, *job);
  if (!est) return fail(est.error().message);
  if (o.json) {
    std::cout << dump_json(estimate_to_json(*model, *job, *est, config));
  } else {
    std::cout << render_estimate_text(*model, *est, Style::for_fd(1), config);
  }
  return kExitOk;
}

void setup(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<EstimateOptions>();
  CLI::App* cmd = app.add_subcommand("estimate", "Predict the peak GPU memory of a training or inference job, by component");
  cmd->add_option("input", o->input,
                  "Model (HF id, alias, config.json, folder, cached repo, .gguf), a training config "
                  "(Axolotl or LLaMA-Factory YAML, TrainingArguments/TRL JSON or YAML), or a job file");
  cmd->add_option("--model", o->model, "Model id, alias, config.json or folder (overrides the config's)");
  cmd->add_option("--job", o->job_file, "Job file (flat JSON with the same keys as the flags)");
  cmd->add_option("--params", o->params, "Estimate from a parameter count (7B, 350M) instead of a model");
  cmd->add_option("--hidden-size", o->shape.hidden_size, "With --params: hidden size");
  cmd->add_option("--layers", o->shape.num_layers, "With --params: number of layers");
  cmd->add_option("--heads", o->shape.num_attention_heads, "With --params: attention heads");
  cmd->add_option("--kv-heads", o->shape.num_kv_heads, "With --params: key/value heads");
  cmd->add_option("--vocab-size", o->shape.vocab_size, "With --params: vocabulary size");
  cmd->add_option("--intermediate-size", o->shape.intermediate_size, "With --params: MLP width");
  add_job_flags(cmd, o->job, /*with_num_gpus=*/true);
  cmd->add_flag("--json", o->json, "One JSON document on stdout (docs/json.md)");
  cmd->callback([o, cmd, exit_code]() { *exit_code = run(*o, *cmd); });
}

CommandRegistration reg{20, "estimate", setup};

}  // namespace
}  // namespace oomdoc::cli
