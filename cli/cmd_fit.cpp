// oomdoc fit: does the job fit the GPU, and what is the cheapest change that makes it fit.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <iostream>
#include <map>
#include <optional>

#include "analyses/fit_config_keys.h"
#include "analyses/fit_search.h"
#include "command.h"
#include "gpu_flags.h"
#include "job_flags.h"
#include "job_input.h"
#include "core/exit_codes.h"
#include "core/file_input.h"
#include "core/units.h"
#include "readers/gpu_catalog.h"
#include "readers/job_file.h"
#include "readers/length_file.h"
#include "readers/model_resolver.h"
#include "readers/served_model.h"
#include "readers/training_config.h"
#include "report/fit_report.h"

namespace oomdoc::cli {
namespace {

struct FitArgs {
  std::string input;       // a training config, a job file, or a model name
  std::string job_file;
  std::string model;
  GpuFlags card;
  uint64_t gpus = 1;
  double budget = kDefaultMemoryBudget;
  double target = kDefaultFitTarget;
  bool max_batch = false;
  bool max_seq = false;
  std::string lengths_path;
  std::string prices_path;
  bool json = false;
  JobFlags job;             // job keys as flags, the same names as `oomdoc estimate`
  CLI::App* app = nullptr;
};

int run_fit(const FitArgs& a) {
  if (!(a.budget > 0 && a.budget <= 1)) {
    return fail(fmt::format("--budget {} is outside (0, 1]: it is the share of the GPU's memory "
                            "the job may use ({:g} = {:g}%)", a.budget, kDefaultMemoryBudget,
                            kDefaultMemoryBudget * 100));
  }
  if (!(a.target > 0 && a.target <= 1)) {
    return fail(fmt::format("--target {} is outside (0, 1]", a.target));
  }
  // The default target sits under the budget; one given above it asks a plan to aim past what
  // `fits` allows, which cannot be meant (a lower --budget alone lowers the default target too).
  if (a.app->count("--target") && a.target > a.budget) {
    return fail(fmt::format("--target {:g} is above --budget {:g}: a plan aims at or under the usable budget",
                            a.target, a.budget));
  }

  // --gpus on the command line wins over the job file's num_gpus (without it, the file's count is
  // the machine's): it joins the job's flags, so the job is checked with it. An error that only
  // that count causes names the flag, not the file.
  const bool gpus_given = a.app->count("--gpus") > 0;
  nlohmann::json flags = job_flags_json(a.job, *a.app);
  if (gpus_given) flags["num_gpus"] = a.gpus;
  auto input = read_job_input(a.input, a.model, a.job_file, flags);
  if (!input && gpus_given) {
    if (auto as_given = read_job_input(a.input, a.model, a.job_file, job_flags_json(a.job, *a.app))) {
      Job with_flag = as_given->job;
      with_flag.num_gpus = a.gpus;
      const std::string flag = fmt::format("--gpus {}", a.gpus);
      auto valid = validate_job(with_flag, as_given->source == kCommandLineSource ? flag : flag + " with " + as_given->source);
      if (!valid) return fail(valid.error().message);
    }
  }
  if (!input) return fail(input.error().message);
  Job& job = input->job;
  const std::optional<TrainingConfig>& config = input->config;
  const std::string& source = input->source;
  if (auto valid = validate_job(job, source); !valid) return fail(valid.error().message);
  const uint64_t num_gpus = fit_gpu_count(job, gpus_given ? std::optional<uint64_t>(a.gpus) : std::nullopt);
  if (job.model.empty()) {
    return fail(config ? a.input + ": names no model; add --model NAME"
                       : "no job: give a training config (Axolotl/LLaMA-Factory YAML, "
                         "TrainingArguments JSON), a job file, or a model name");
  }

  FitOptions options;
  options.num_gpus = num_gpus;
  options.budget = a.budget;
  options.target = a.target;
  options.solve_max_batch = a.max_batch;
  options.solve_max_seq = a.max_seq;
  auto card = resolve_gpu_flags(a.card);
  if (!card) return fail(card.error().message);
  set_fit_card(options, *card);
  std::optional<std::string> precision_fallback;
  if (config && !a.app->count("--precision")) {
    precision_fallback = fp16_where_no_bf16(*config, job, options.gpu_has_bf16, options.gpu_name);
  }
  if (!a.lengths_path.empty()) {
    auto lengths = read_lengths(a.lengths_path);
    if (!lengths) return fail(lengths.error().message);
    options.lengths = std::move(*lengths);
  }
  std::vector<std::string> price_notes;   // short names in --prices that name several cards
  if (!a.prices_path.empty()) {
    auto text = read_small_file(a.prices_path, 1 << 20);
    if (!text) return fail(text.error().message);
    auto prices = parse_prices(*text, a.prices_path, &price_notes);
    if (!prices) return fail(prices.error().message);
    options.prices = std::move(*prices);
  }

  auto model = resolve_checkpoint_name(job.model);
  if (!model) return fail(model_error(*input, model.error().message));
  auto report = fit_job(*model, job, options);
  if (!report) return fail(report.error().message);
  if (a.json && !card->note.empty()) {
    report->notes.insert(report->notes.begin(), card->note);   // in the document, not on stderr
  } else {
    note(card->note);
  }
  report->notes.insert(report->notes.end(), price_notes.begin(), price_notes.end());
  if (precision_fallback) report->notes.insert(report->notes.begin(), *precision_fallback);
  // Advice in the keys of the config the user gave (Axolotl, LLaMA-Factory).
  if (config) express_in_config_keys(*report, *config);

  const TrainingConfig* cfg = config ? &*config : nullptr;
  if (a.json) {
    std::cout << dump_json(fit_report_json(*report, cfg));
  } else {
    std::cout << render_fit_text(*report, cfg, Style::for_fd(1));
  }
  return report->fits && report->will_not_run.empty() ? kExitOk : kExitNothingFound;
}

void setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<FitArgs>();
  CLI::App* sub = app.add_subcommand(
      "fit", "Does a training job fit a GPU? If not, the cheapest change that makes it fit");
  sub->footer(
      "Exit status: 0 the job fits as given, 1 it does not (a plan is printed), 2 bad input.\n"
      "Examples:\n"
      "  oomdoc fit axolotl.yml --gpu 4090\n"
      "  oomdoc fit --model meta-llama/Llama-2-7b-hf --task train_full --micro-batch-size 4 \\\n"
      "             --seq-len 2048 --gpu a100-80 --gpus 2 --json");
  sub->add_option("input", args->input,
                  "Training config (Axolotl or LLaMA-Factory YAML, TrainingArguments/TRL JSON or "
                  "YAML), a job file, or a model name");
  sub->add_option("--model", args->model, "Model id, alias, config.json or folder (overrides the config's)");
  sub->add_option("--job", args->job_file, "Job file (flat JSON, the keys of `oomdoc estimate`)");
  add_gpu_flags(sub, args->card);
  sub->add_option("--gpus,--num-gpus", args->gpus, "Number of GPUs the job may use (default 1, or the job file's num_gpus)")
      ->check(count_range(/*allow_zero=*/false));
  sub->add_option("--budget", args->budget,
                  fmt::format("Usable share of GPU memory, in (0,1] (default {:.2f})", kDefaultMemoryBudget));
  sub->add_option("--target", args->target,
                  fmt::format("Share a plan aims at, in (0,1] (default {:.2f})", kDefaultFitTarget));
  sub->add_flag("--max-batch", args->max_batch, "Solve for the largest micro-batch that fits");
  sub->add_flag("--max-seq", args->max_seq, "Solve for the longest sequence that fits");
  sub->add_option("--lengths", args->lengths_path,
                  "Token lengths of the data: one per line, or JSON lines with length/num_tokens/input_ids");
  sub->add_option("--prices", args->prices_path, "GPU-hour prices: 'GPU NAME, PRICE' per line");
  sub->add_flag("--json", args->json, "One JSON document on stdout (docs/json.md)");
  add_job_flags(sub, args->job, /*with_num_gpus=*/false);
  args->app = sub;
  sub->callback([args, exit_code]() { *exit_code = run_fit(*args); });
}

CommandRegistration reg{30, "fit", setup};

}  // namespace
}  // namespace oomdoc::cli
