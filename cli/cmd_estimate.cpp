// oomdoc estimate: predicted peak GPU memory of a job, by component. Flags map one to one onto
// the job file keys (docs/estimate.md); both go through readers/job_file.cpp.
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "analyses/estimator.h"
#include "command.h"
#include "core/exit_codes.h"
#include "core/file_input.h"
#include "core/units.h"
#include "readers/job_file.h"
#include "readers/model_resolver.h"
#include "report/estimate_report.h"

namespace oomdoc::cli {
namespace {

struct EstimateOptions {
  std::string model, job_file, params;
  bool json = false;
  std::map<std::string, std::string> text;       // string-valued job keys
  std::map<std::string, uint64_t> counts;        // integer job keys
  std::map<std::string, bool> flags;             // boolean job keys
  std::vector<std::string> offload, targets;
  std::optional<uint64_t> lora_r;
  std::optional<double> lora_alpha;
  ShapeHints shape;
};

int run(EstimateOptions& o, CLI::App& app) {
  nlohmann::json job_json = nlohmann::json::object();
  std::string source = "command line";
  if (!o.job_file.empty()) {
    auto text = read_small_file(o.job_file);
    if (!text) return fail(text.error().message);
    job_json = nlohmann::json::parse(*text, nullptr, false);
    if (job_json.is_discarded() || !job_json.is_object()) return fail(o.job_file + ": not a JSON object");
    source = o.job_file;
  }
  // Flags override the file.
  if (!o.model.empty()) job_json["model"] = o.model;
  for (const auto& [k, v] : o.text) {
    std::string flag = k;
    for (char& c : flag) if (c == '_') c = '-';
    if (app.count("--" + flag)) job_json[k] = v;
  }
  for (const auto& [k, v] : o.counts) {
    std::string flag = k;
    for (char& c : flag) if (c == '_') c = '-';
    if (app.count("--" + flag)) job_json[k] = v;
  }
  for (const auto& [k, v] : o.flags) {
    std::string flag = k;
    for (char& c : flag) if (c == '_') c = '-';
    if (app.count("--" + flag)) job_json[k] = v;
  }
  if (!o.offload.empty()) job_json["offload"] = o.offload;
  if (o.lora_r || o.lora_alpha || !o.targets.empty()) {
    nlohmann::json lora = job_json.value("lora", nlohmann::json::object());
    if (o.lora_r) lora["r"] = *o.lora_r;
    if (o.lora_alpha) lora["alpha"] = *o.lora_alpha;
    if (o.targets.size() == 1 && o.targets[0] == "all_linear") lora["target_modules"] = "all_linear";
    else if (!o.targets.empty()) lora["target_modules"] = o.targets;
    job_json["lora"] = lora;
  }
  auto job = parse_job_json(job_json.dump(), source);
  if (!job) return fail(job.error().message);

  Result<ModelSpec> model = make_error("");
  if (!o.params.empty()) {
    auto count = parse_count(o.params);
    if (!count) return fail("--params: \"" + o.params + "\" is not a parameter count such as 7B or 350M");
    model = model_from_param_count(*count, o.shape);
  } else {
    if (job->model.empty()) return fail("estimate: no model (give MODEL, --model, --params or a job file with \"model\")");
    model = resolve_model(job->model);
  }
  if (!model) return fail(model.error().message);
  auto est = estimate_memory(*model, *job);
  if (!est) return fail(est.error().message);
  if (o.json) {
    std::cout << dump_json(estimate_to_json(*model, *job, *est));
  } else {
    std::cout << render_estimate_text(*model, *est, Style::for_fd(1));
  }
  return kExitOk;
}

void setup(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<EstimateOptions>();
  CLI::App* cmd = app.add_subcommand("estimate", "Predict the peak GPU memory of a training or inference job, by component");
  cmd->add_option("model", o->model, "Model: HF id, alias, config.json, folder, or cached repo");
  cmd->add_option("--model", o->model, "Same as the positional MODEL");
  cmd->add_option("--job", o->job_file, "Job file (flat JSON with the same keys as the flags)");
  cmd->add_option("--params", o->params, "Estimate from a parameter count (7B, 350M) instead of a model");
  cmd->add_option("--hidden-size", o->shape.hidden_size, "With --params: hidden size");
  cmd->add_option("--layers", o->shape.num_layers, "With --params: number of layers");
  cmd->add_option("--heads", o->shape.num_attention_heads, "With --params: attention heads");
  cmd->add_option("--kv-heads", o->shape.num_kv_heads, "With --params: key/value heads");
  cmd->add_option("--vocab-size", o->shape.vocab_size, "With --params: vocabulary size");
  cmd->add_option("--intermediate-size", o->shape.intermediate_size, "With --params: MLP width");
  // Help for each job key (docs/estimate.md has the full table).
  static const std::map<std::string, std::string> kHelp = {
      {"task", "train_full, train_lora, train_qlora, train_freeze, inference, load"},
      {"precision", "fp32, fp16_mixed, bf16_mixed, bf16, fp16"},
      {"weight_quantization", "nf4, fp4, int8, int4, fp8, gptq4, awq4"},
      {"optimizer", "adamw, adamw_8bit, paged_adamw_8bit, adamw_4bit, adafactor, sgd, sgd_momentum, lion, none"},
      {"gradient_checkpointing", "none, full, selective"},
      {"attention_impl", "eager, sdpa, flash"},
      {"parallelism", "ddp, zero1, zero2, zero3, fsdp_full_shard, fsdp_shard_grad_op, hybrid_shard"},
      {"loss_impl", "standard, chunked, fused_linear"},
      {"kv_cache_dtype", "auto, fp32, bf16, fp16, fp8, int8"},
      {"group_size", "quantization group size (gptq4, awq4, int4)"},
      {"micro_batch_size", "sequences per GPU per step"},
      {"grad_accum_steps", "micro-batches per optimizer step"},
      {"seq_len", "tokens per sequence (training)"},
      {"num_gpus", "GPUs in the job"},
      {"tp", "tensor-parallel degree"},
      {"pp", "pipeline-parallel degree"},
      {"cp", "context-parallel degree"},
      {"batch_size", "sequences generated at once (inference)"},
      {"prompt_len", "prompt tokens (inference)"},
      {"max_new_tokens", "generated tokens; 0 = prefill only"},
      {"double_quant", "bitsandbytes double quantization"},
      {"fused_backward", "optimizer step inside backward"},
      {"padding_free", "sequences packed without padding"},
  };
  for (const char* key : {"task", "precision", "weight_quantization", "optimizer", "gradient_checkpointing",
                          "attention_impl", "parallelism", "loss_impl", "kv_cache_dtype"}) {
    std::string flag = std::string("--") + key;
    for (char& c : flag) if (c == '_') c = '-';
    o->text[key] = "";
    std::string names = flag == std::string("--") + key ? flag : flag + ",--" + key;
    cmd->add_option(names, o->text[key], kHelp.at(key));
  }
  for (const char* key : {"group_size", "micro_batch_size", "grad_accum_steps", "seq_len", "num_gpus", "tp", "pp",
                          "cp", "batch_size", "prompt_len", "max_new_tokens"}) {
    std::string flag = std::string("--") + key;
    for (char& c : flag) if (c == '_') c = '-';
    o->counts[key] = 0;
    cmd->add_option(flag, o->counts[key], kHelp.at(key));
  }
  for (const char* key : {"double_quant", "fused_backward", "padding_free"}) {
    std::string flag = std::string("--") + key;
    for (char& c : flag) if (c == '_') c = '-';
    o->flags[key] = false;
    cmd->add_flag(flag, o->flags[key], kHelp.at(key));
  }
  cmd->add_option("--offload", o->offload, "optimizer, params, activations (repeatable)");
  cmd->add_option("--lora-r", o->lora_r, "LoRA rank");
  cmd->add_option("--lora-alpha", o->lora_alpha, "LoRA alpha");
  cmd->add_option("--lora-target-modules", o->targets, "Module names, or all_linear");
  cmd->add_flag("--json", o->json, "One JSON document on stdout (docs/json.md)");
  cmd->callback([o, cmd, exit_code]() { *exit_code = run(*o, *cmd); });
}

CommandRegistration reg{20, "estimate", setup};

}  // namespace
}  // namespace oomdoc::cli
