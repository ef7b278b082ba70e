// oomdoc fit: does the job fit the GPU, and what is the cheapest change that makes it fit.
#include <fmt/format.h>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "analyses/fit_config_keys.h"
#include "analyses/fit_search.h"
#include "command.h"
#include "gpu_flags.h"
#include "job_flags.h"
#include "core/exit_codes.h"
#include "core/file_input.h"
#include "core/units.h"
#include "readers/gguf_header.h"
#include "readers/gpu_catalog.h"
#include "readers/job_file.h"
#include "readers/length_file.h"
#include "readers/model_resolver.h"
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

bool is_regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A job file is a JSON object with a "model" key; training configs never have one.
bool looks_like_job_file(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return !j.is_discarded() && j.is_object() && j.contains("model");
}

// A name that can only be a file: a YAML or JSON file name. Model ids have no such suffix.
bool looks_like_config_path(const std::string& input) {
  for (std::string_view suffix : {".yml", ".yaml", ".json"}) {
    if (input.size() > suffix.size() && input.compare(input.size() - suffix.size(), suffix.size(), suffix) == 0) return true;
  }
  return false;
}

// A model's weights file (GGUF, or a .safetensors inside a model folder), not a training config.
bool is_model_file(const std::string& path) {
  const std::string_view suffix = ".safetensors";
  return is_gguf_file(path) ||
         (path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0);
}

int run_fit(const FitArgs& a) {
  if (!(a.budget > 0 && a.budget <= 1)) {
    return fail(fmt::format("--budget {} is outside (0, 1]: it is the share of the GPU's memory "
                            "the job may use ({:g} = {:g}%)", a.budget, kDefaultMemoryBudget,
                            kDefaultMemoryBudget * 100));
  }
  if (!(a.target > 0 && a.target <= 1)) {
    return fail(fmt::format("--target {} is outside (0, 1]", a.target));
  }
  if (a.gpus == 0) return fail("--gpus must be at least 1");

  std::optional<TrainingConfig> config;
  Job job;
  std::string source = "command line";
  std::string job_file = a.job_file;
  if (!a.input.empty()) {
    if (!is_regular_file(a.input) || is_model_file(a.input)) {
      if (!a.model.empty()) return fail(a.input + ": no such file (and --model is given)");
      if (looks_like_config_path(a.input) && !std::filesystem::exists(a.input)) {
        return fail(a.input + ": no such file (a training config or job file was expected)");
      }
      job.model = a.input;  // `oomdoc fit llama-2-7b --gpu 4090` or a .gguf file, as for estimate
    } else {
      auto text = read_small_file(a.input, 4ull << 20);
      if (!text) return fail(text.error().message);
      // A .json file that is not JSON: say where it breaks (YAML would only say "not a config").
      if (a.input.size() > 5 && a.input.compare(a.input.size() - 5, 5, ".json") == 0) {
        if (auto parsed = parse_json_document(*text, a.input); !parsed) return fail(parsed.error().message);
      }
      if (looks_like_job_file(*text)) {
        if (!job_file.empty()) return fail("give one job file, not " + a.input + " and --job");
        job_file = a.input;
      } else {
        auto read = read_training_config(a.input);
        if (!read) return fail(read.error().message);
        config = std::move(*read);
        job = config->job;
        source = a.input;
      }
    }
  }
  // The job file and the flags, read as estimate reads them, then over the training config's job
  // field by field (a LoRA block given here replaces the config's).
  nlohmann::json given = job_flags_json(a.job, *a.app);
  if (!a.model.empty()) given["model"] = a.model;
  auto given_job = read_job(job_file, given);
  if (!given_job) return fail(given_job.error().message);
  overlay_job(job, *given_job);
  if (!job_file.empty()) source = job_file;
  // --gpus on the command line wins over the job file's num_gpus; without it, the file's count
  // is the machine's.
  const bool gpus_given = a.app->count("--gpus") > 0;
  if (gpus_given) job.num_gpus = a.gpus;
  const uint64_t num_gpus = fit_gpu_count(job, gpus_given ? std::optional<uint64_t>(a.gpus) : std::nullopt);
  if (auto valid = validate_job(job, source); !valid) return fail(valid.error().message);
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
  if (!a.lengths_path.empty()) {
    auto lengths = read_lengths(a.lengths_path);
    if (!lengths) return fail(lengths.error().message);
    options.lengths = std::move(*lengths);
  }
  if (!a.prices_path.empty()) {
    auto text = read_small_file(a.prices_path, 1 << 20);
    if (!text) return fail(text.error().message);
    auto prices = parse_prices(*text, a.prices_path);
    if (!prices) return fail(prices.error().message);
    options.prices = std::move(*prices);
  }

  auto model = resolve_model(job.model);
  if (!model) return fail(model.error().message);
  auto report = fit_job(*model, job, options);
  if (!report) return fail(report.error().message);
  // Advice in the keys of the config the user gave (Axolotl, LLaMA-Factory).
  if (config) express_in_config_keys(*report, *config);

  const TrainingConfig* cfg = config ? &*config : nullptr;
  if (a.json) {
    std::cout << dump_json(fit_report_json(*report, cfg));
  } else {
    std::cout << render_fit_text(*report, cfg, Style::for_fd(1));
  }
  return report->fits ? kExitOk : kExitNothingFound;
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
  sub->add_option("--gpus,--num-gpus", args->gpus, "Number of GPUs the job may use (default 1, or the job file's num_gpus)");
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
