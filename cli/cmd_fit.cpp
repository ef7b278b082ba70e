// oomdoc fit: does the job fit the GPU, and what is the cheapest change that makes it fit.
#include <fmt/format.h>

#include <iostream>
#include <optional>

#include "analyses/fit_search.h"
#include "command.h"
#include "core/exit_codes.h"
#include "core/file_input.h"
#include "core/units.h"
#include "readers/gpu_catalog.h"
#include "readers/length_file.h"
#include "readers/model_resolver.h"
#include "readers/training_config.h"
#include "report/fit_report.h"

namespace oomdoc::cli {
namespace {

struct FitArgs {
  std::string config_path;
  std::string model;
  std::string gpu;
  std::string memory;
  uint64_t gpus = 1;
  double budget = kDefaultMemoryBudget;
  double target = kDefaultFitTarget;
  bool max_batch = false;
  bool max_seq = false;
  std::string lengths_path;
  std::string prices_path;
  bool json = false;
  // Job fields, named as the job file keys (docs/estimate.md).
  std::string task, precision, weight_quantization, optimizer, gradient_checkpointing,
      attention_impl, parallelism, loss_impl;
  std::optional<uint64_t> micro_batch_size, grad_accum_steps, seq_len, lora_r;
};

void apply_overrides(const FitArgs& a, Job& job) {
  if (!a.model.empty()) job.model = a.model;
  if (!a.task.empty()) job.task = a.task;
  if (!a.precision.empty()) job.precision = a.precision;
  if (!a.weight_quantization.empty()) job.weight_quantization = a.weight_quantization;
  if (!a.optimizer.empty()) job.optimizer = a.optimizer;
  if (!a.gradient_checkpointing.empty()) job.gradient_checkpointing = a.gradient_checkpointing;
  if (!a.attention_impl.empty()) job.attention_impl = a.attention_impl;
  if (!a.parallelism.empty()) job.parallelism = a.parallelism;
  if (!a.loss_impl.empty()) job.loss_impl = a.loss_impl;
  if (a.micro_batch_size) job.micro_batch_size = a.micro_batch_size;
  if (a.grad_accum_steps) job.grad_accum_steps = a.grad_accum_steps;
  if (a.seq_len) job.seq_len = a.seq_len;
  if (a.lora_r) {
    if (!job.lora) job.lora = LoraSettings{};
    job.lora->r = *a.lora_r;
  }
}

int run_fit(const FitArgs& a) {
  if (!(a.budget > 0 && a.budget <= 1)) {
    return fail(fmt::format("--budget {} is outside (0, 1]: it is the share of the GPU's memory "
                            "the job may use (0.92 = 92%)", a.budget));
  }
  if (!(a.target > 0 && a.target <= 1)) {
    return fail(fmt::format("--target {} is outside (0, 1]", a.target));
  }
  if (a.gpus == 0) return fail("--gpus must be at least 1");

  std::optional<TrainingConfig> config;
  Job job;
  if (!a.config_path.empty()) {
    auto read = read_training_config(a.config_path);
    if (!read) return fail(read.error().message);
    config = std::move(*read);
    job = config->job;
  }
  apply_overrides(a, job);
  if (job.model.empty()) {
    return fail(a.config_path.empty()
                    ? "no job: give a training config (Axolotl/LLaMA-Factory YAML, "
                      "TrainingArguments JSON) or --model"
                    : a.config_path + ": names no model; add --model NAME");
  }
  if (a.gpus > 1) job.num_gpus = a.gpus;

  FitOptions options;
  options.num_gpus = a.gpus;
  options.budget = a.budget;
  options.target = a.target;
  options.solve_max_batch = a.max_batch;
  options.solve_max_seq = a.max_seq;
  if (!a.gpu.empty() && !a.memory.empty()) return fail("give --gpu or --memory, not both");
  if (!a.gpu.empty()) {
    auto gpu = find_gpu(a.gpu);
    if (!gpu) return fail(gpu.error().message);
    options.gpu_name = gpu->name;
    options.total_bytes = gpu->total_bytes;
    options.gpu_has_bf16 = gpu->bf16;
  } else if (!a.memory.empty()) {
    auto bytes = parse_user_size(a.memory);
    if (!bytes || *bytes == 0) {
      return fail(fmt::format("--memory '{}': expected a size such as 24GiB or 80GB", a.memory));
    }
    options.total_bytes = *bytes;
    options.gpu_name = format_bytes(*bytes) + " GPU";
  } else {
    return fail("which GPU? give --gpu NAME (e.g. 4090, a100-80, h100) or --memory SIZE");
  }
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
  sub->add_option("config", args->config_path,
                  "Training config: Axolotl or LLaMA-Factory YAML, TrainingArguments/TRL JSON or YAML");
  sub->add_option("--model", args->model, "Model id, alias, config.json or folder (overrides the config's)");
  sub->add_option("--gpu", args->gpu, "GPU by name, fuzzy: 4090, h100-80, 'a100 40gb'");
  sub->add_option("--memory", args->memory, "GPU memory instead of a name: 24GiB, 80GB");
  sub->add_option("--gpus", args->gpus, "Number of GPUs the job may use (default 1)");
  sub->add_option("--budget", args->budget, "Usable share of GPU memory, in (0,1] (default 0.92)");
  sub->add_option("--target", args->target, "Share a plan aims at, in (0,1] (default 0.80)");
  sub->add_flag("--max-batch", args->max_batch, "Solve for the largest micro-batch that fits");
  sub->add_flag("--max-seq", args->max_seq, "Solve for the longest sequence that fits");
  sub->add_option("--lengths", args->lengths_path,
                  "Token lengths of the data: one per line, or JSON lines with length/num_tokens/input_ids");
  sub->add_option("--prices", args->prices_path, "GPU-hour prices: 'GPU NAME, PRICE' per line");
  sub->add_flag("--json", args->json, "One JSON document on stdout (docs/json.md)");
  sub->add_option("--task", args->task, "train_full, train_lora, train_qlora, train_freeze, inference");
  sub->add_option("--precision", args->precision, "fp32, fp16_mixed, bf16_mixed, bf16, fp16");
  sub->add_option("--weight-quantization", args->weight_quantization, "nf4, fp4, int8, ...");
  sub->add_option("--optimizer", args->optimizer, "adamw, adamw_8bit, paged_adamw_8bit, adafactor, sgd, lion");
  sub->add_option("--micro-batch-size", args->micro_batch_size, "Per-GPU micro-batch");
  sub->add_option("--grad-accum-steps", args->grad_accum_steps, "Gradient accumulation steps");
  sub->add_option("--seq-len", args->seq_len, "Sequence length (tokens)");
  sub->add_option("--gradient-checkpointing", args->gradient_checkpointing, "none, full, selective");
  sub->add_option("--attention-impl", args->attention_impl, "eager, sdpa, flash");
  sub->add_option("--parallelism", args->parallelism, "ddp, zero1, zero2, zero3, fsdp_full_shard, ...");
  sub->add_option("--loss-impl", args->loss_impl, "standard, chunked, fused_linear");
  sub->add_option("--lora-r", args->lora_r, "LoRA rank");
  sub->callback([args, exit_code]() { *exit_code = run_fit(*args); });
}

CommandRegistration reg{30, "fit", setup};

}  // namespace
}  // namespace oomdoc::cli
