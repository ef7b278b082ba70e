// oomdoc serve [--gpu NAME | --memory SIZE] [--vllm-version V] [overrides] [--json] -- VLLM COMMAND
// (or a llama.cpp one: llama-server -m FILE.gguf ..., sized with the llama.cpp estimate and fit's ladder)
#include <fmt/format.h>
#include <unistd.h>

#include <functional>
#include <iostream>

#include "analyses/vllm_serve.h"
#include "command.h"
#include "gpu_flags.h"
#include "core/exit_codes.h"
#include "core/units.h"
#include "analyses/fit_search.h"
#include "analyses/llama_cpp_estimate.h"
#include "readers/gpu_catalog.h"
#include "readers/llama_cpp_args.h"
#include "readers/model_resolver.h"
#include "readers/served_model.h"
#include "readers/vllm_args.h"
#include "report/fit_report.h"
#include "report/serve_report.h"

namespace oomdoc::cli {
namespace {

struct ServeOptions {
  std::vector<std::string> command;
  GpuFlags card;
  std::string vllm_version;
  std::string weights, activation, non_torch, cuda_graph;
  bool json = false;
};

Result<std::optional<uint64_t>> size_option(const std::string& flag, const std::string& text) {
  if (text.empty()) return std::optional<uint64_t>{};
  auto bytes = parse_size_flag(flag, text, "14.96GiB");
  if (!bytes) return bytes.error();
  return std::optional<uint64_t>{*bytes};
}

// llama-server / llama-cli: the llama.cpp estimate of the model file, and fit's llama.cpp ladder
// when it does not fit the card.
int run_llama_cpp_serve(const ServeOptions& o, const LlamaCppCommand& command) {
  auto card = resolve_gpu_flags(o.card);
  if (!card) return fail("serve: " + card.error().message);
  auto model = resolve_model(command.model_path);
  if (!model) return fail("serve: " + model.error().message);
  if (!model->gguf) return fail("serve: " + command.model_path + ": not a GGUF file (llama.cpp loads .gguf files)");
  const uint64_t trained = model->max_position_embeddings ? model->max_position_embeddings : kLlamaCppDefaultContext;
  auto [job, notes] = llama_cpp_job_for(command, trained);
  job.model = command.model_path;
  FitOptions options;
  options.num_gpus = 1;
  set_fit_card(options, *card);
  auto report = fit_job(*model, job, options);
  if (!report) return fail("serve: " + report.error().message);
  if (o.json && !card->note.empty()) {
    report->notes.insert(report->notes.begin(), card->note);
  } else {
    note(card->note);
  }
  for (auto& n : notes) report->notes.push_back(command.launcher + ": " + n);
  for (const auto& [flag, text] : {std::pair{"--weights", &o.weights}, std::pair{"--activation", &o.activation},
                                   std::pair{"--non-torch", &o.non_torch}, std::pair{"--cuda-graph", &o.cuda_graph}}) {
    if (!text->empty()) report->notes.push_back(fmt::format("{} is ignored: the overrides size vLLM's profile, not llama.cpp's buffers", flag));
  }
  for (const auto& a : report->estimate.assumptions) report->notes.push_back("assumed: " + a);
  if (o.json) {
    Json doc = fit_report_json(*report, nullptr);
    doc["command"] = "serve";
    doc["launcher"] = command.launcher;
    std::cout << dump_json(doc);
  } else {
    std::cout << fmt::format("oomdoc serve: {} in llama.cpp ({})\n", command.model_path, command.launcher);
    std::cout << render_fit_text(*report, nullptr, Style::for_fd(STDOUT_FILENO));
  }
  return report->fits ? kExitOk : kExitNothingFound;
}

// `is_own_option("--json")`: whether a flag is one of oomdoc serve's own options.
int run_serve(const ServeOptions& o, const std::function<bool(const std::string&)>& is_own_option) {
  if (o.command.empty()) {
    return fail("serve: give the vLLM command after `--` (or llama.cpp's), e.g. oomdoc serve --gpu 4090 -- vllm serve "
                "meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768");
  }
  if (auto llama = parse_llama_cpp_command_line(o.command)) {
    if (!*llama) return fail("serve: " + llama->error().message);
    return run_llama_cpp_serve(o, llama->value());
  }
  auto config = parse_vllm_command_line(o.command);
  if (!config) return fail("serve: " + config.error().message);
  // oomdoc's own options typed after `--` land in the vLLM command, where vLLM would refuse them.
  for (const std::string& flag : config->unknown) {
    const std::string name = flag.substr(0, flag.find(' '));
    if (name.rfind("--", 0) == 0 && is_own_option(name)) {
      return fail(fmt::format("serve: {} is oomdoc's option, but it comes after `--`, inside the vLLM command: put it "
                              "before `--`", name));
    }
  }

  ServeInputs inputs;
  inputs.config = config.value();
  auto card = resolve_gpu_flags(o.card);
  if (!card) return fail("serve: " + card.error().message);
  inputs.target = card->gpu ? serve_target(*card->gpu) : serve_target_memory(card->memory_bytes);
  auto version = vllm_version_for(o.vllm_version, inputs.config.image_tag);
  if (!version) return fail("serve: " + version.error().message);
  inputs.version = version.value();

  struct SizeFlag {
    const char* flag;
    const std::string& text;
    std::optional<uint64_t>& into;
  };
  for (SizeFlag f : {SizeFlag{"--weights", o.weights, inputs.overrides.weights_bytes},
                     SizeFlag{"--activation", o.activation, inputs.overrides.activation_bytes},
                     SizeFlag{"--non-torch", o.non_torch, inputs.overrides.non_torch_bytes},
                     SizeFlag{"--cuda-graph", o.cuda_graph, inputs.overrides.cuda_graph_bytes}}) {
    auto size = size_option(f.flag, f.text);
    if (!size) return fail("serve: " + size.error().message);
    f.into = size.value();
  }

  auto model = resolve_served_model(inputs.config.model);
  if (!model) return fail("serve: " + model.error().message);
  const std::vector<std::string> model_warnings = model->spec.warnings;  // said with the prediction's
  inputs.model = std::move(model->spec);
  inputs.model_note = model->note;
  inputs.checkpoint_kv_cache_dtype = model->checkpoint_kv_cache_dtype;
  inputs.checkpoint_kv_cache_source = model->checkpoint_kv_cache_source;
  inputs.mtp_layers = model->mtp_layers;
  // A draft model or EAGLE head is resolved like the target. An EAGLE head that is not found is
  // sized from the target's shape (the analysis says so); a draft model must be found.
  if (auto speculative = speculative_choice(inputs.config); speculative && speculative->needs_model_config() &&
                                                             !speculative->model.empty()) {
    auto draft = resolve_served_model(speculative->model);
    if (draft) {
      inputs.draft_model = std::move(draft->spec);
      inputs.draft_model_note = draft->note;
      inputs.draft_vocab_size = draft->draft_vocab_size;
    } else if (speculative->method == "draft_model") {
      return fail(fmt::format("serve: --speculative-config: draft model '{}' cannot be resolved: {}", speculative->model,
                              draft.error().message));
    } else {
      inputs.draft_model_note = draft.error().message;
    }
  }

  auto report = analyze_serve(inputs);
  if (!report) return fail("serve: " + report.error().message);
  auto& warnings = report->prediction.warnings;
  warnings.insert(warnings.begin(), model_warnings.begin(), model_warnings.end());
  // --json keeps what the user should know in the document, not on stderr.
  if (o.json && !card->note.empty()) {
    warnings.insert(warnings.begin(), card->note);
  } else {
    note(card->note);
  }
  if (o.json) {
    std::cout << dump_json(serve_json(report.value()));
  } else {
    std::cout << render_serve_text(report.value(), Style::for_fd(STDOUT_FILENO));
  }
  return report->prediction.fits ? kExitOk : kExitNothingFound;
}

void setup(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Size a vLLM launch before it fails: KV cache tokens, vLLM's log lines and errors, fixes");
  cmd->footer(
      "Example: oomdoc serve --gpu 4090 -- vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768\n"
      "Also: python -m vllm.entrypoints.openai.api_server --model M ..., or 'LLM(model=\"M\", ...)';\n"
      "and llama.cpp: llama-server -m FILE.gguf -c 32768 -ngl 99 -fa (sized from the file's header).\n"
      "Exit status: 0 it fits, 1 vLLM would fail at startup (llama.cpp: does not fit), 2 bad input. See docs/serve.md.");
  cmd->add_option("command", options->command, "The vLLM (or llama.cpp) command line, after `--`");
  add_gpu_flags(cmd, options->card);
  cmd->add_option("--vllm-version", options->vllm_version,
                  "vLLM version whose accounting to mirror (default: current)");
  cmd->add_option("--weights", options->weights, "Use this weight size per GPU (from a log's \"Model loading took\")");
  cmd->add_option("--activation", options->activation, "Use this activation peak (from a log)");
  cmd->add_option("--non-torch", options->non_torch, "Use this non-torch memory (from a log)");
  cmd->add_option("--cuda-graph", options->cuda_graph, "Use this CUDA graph memory (from a log)");
  cmd->add_flag("--json", options->json, "One JSON document on stdout (docs/json.md)");
  // vLLM flags typed without `--` would otherwise be a generic "not expected" error.
  cmd->allow_extras();
  cmd->callback([options, exit_code, cmd]() {
    std::vector<std::string> extras = cmd->remaining();
    if (!extras.empty() && extras.front() == "--") {
      // With extras allowed, CLI11 hands back everything after `--` here.
      options->command.insert(options->command.end(), extras.begin() + 1, extras.end());
    } else if (!extras.empty()) {
      // A vLLM flag before `--`, or a command typed without `--`.
      *exit_code = fail("serve: " + extras.front().substr(0, extras.front().find('=')) +
                        ": not an oomdoc serve option; vLLM's flags go after `--`: "
                        "oomdoc serve --gpu NAME -- vllm serve MODEL ...");
      return;
    }
    *exit_code = run_serve(*options, [cmd](const std::string& name) { return cmd->get_option_no_throw(name) != nullptr; });
  });
}

CommandRegistration reg{40, "serve", setup};

}  // namespace
}  // namespace oomdoc::cli
