#include "analyses/diagnose.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/text.h"
#include "analyses/vllm_kv_cache.h"
#include "analyses/vllm_version.h"
#include "core/saturating.h"
#include "core/units.h"
#include "model/gguf_types.h"
#include "readers/application.h"
#include "readers/gpu_catalog.h"

namespace oomdoc {
namespace {

std::string pct(uint64_t part, uint64_t whole) {
  if (whole == 0) return "?";
  return fmt::format("{:.0f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Numbers printed elsewhere in the log by vLLM's startup accounting (informational events).
struct VllmContext {
  std::optional<uint64_t> total_gpu_memory, usable_budget, weights, non_torch, activation_peak, kv_cache;
  std::optional<uint64_t> peak_torch_memory;   // vLLM 0.6's profile peak: the weights included
  std::optional<double> gpu_memory_utilization;
  std::optional<int64_t> kv_cache_tokens;
};

// TensorFlow's BFC pool as its allocator dump totals it ("Sum Total of in-use chunks" or the Stats
// block's InUse, memory_limit_ or Limit; the regions it grew to and its largest free block when printed).
struct BfcPool {
  uint64_t in_use = 0, limit = 0;
  std::optional<uint64_t> region_allocated, largest_free_block;
  bool full() const { return in_use * 10 >= limit * 9; }   // 90% or more of the limit
  // The pool stopped growing well short of its limit: the driver refused the next region.
  bool could_not_grow() const { return region_allocated && *region_allocated * 10 < limit * 9; }
};
std::optional<BfcPool> bfc_pool(const OomEvent& e) {
  auto in_use = e.bytes("in_use_chunks");
  auto limit = e.int_field("memory_limit_bytes");
  if (!in_use || !limit || *limit <= 0) return std::nullopt;
  BfcPool pool{*in_use, static_cast<uint64_t>(*limit), std::nullopt, e.bytes("largest_free_block")};
  if (auto region = e.int_field("region_allocated_bytes"); region && *region > 0) pool.region_allocated = *region;
  return pool;
}

// The headline for a BFC pool at its limit, `owner` naming whose allocator it is.
std::string pool_full_title(std::string_view owner, const BfcPool& pool) {
  return fmt::format("{}'s allocator pool was full ({} of its {} limit in use)", owner, format_bytes(pool.in_use),
                     format_bytes(pool.limit));
}

// A server setting in use when `event` was printed: the last value of notice `kind` the log stated
// before it, on the event's rank or on none.
std::optional<double> stated_setting(const LogContext& context, const OomEvent& event, std::string_view kind) {
  std::optional<double> value;
  if (context.notices == nullptr) return value;
  for (const LogNotice& n : *context.notices) {
    if (n.kind != kind || n.line > event.line || (n.rank && event.rank && n.rank != event.rank)) continue;
    value = n.value;
  }
  return value;
}

VllmContext vllm_context(const LogContext& context, const OomEvent& event) {
  VllmContext v;
  if (context.events == nullptr) return v;
  for (const OomEvent& e : *context.events) {
    if (e.framework != "vllm" || e.line > event.line) continue;
    if (auto b = e.bytes("total_gpu_memory")) v.total_gpu_memory = b;
    if (auto b = e.bytes("total"); b && e.format == "vllm_startup_free_memory") v.total_gpu_memory = b;
    if (auto b = e.bytes("usable_budget")) v.usable_budget = b;
    if (auto b = e.bytes("weights")) v.weights = b;
    if (auto b = e.bytes("model_loading"); b && !v.weights) v.weights = b;
    if (auto b = e.bytes("non_torch")) v.non_torch = b;
    if (auto b = e.bytes("activation_peak")) v.activation_peak = b;
    if (auto b = e.bytes("kv_cache")) v.kv_cache = b;
    if (auto b = e.bytes("peak_torch_memory")) v.peak_torch_memory = b;
    if (auto t = e.int_field("kv_cache_tokens")) v.kv_cache_tokens = t;
    if (const FieldValue* u = e.field("gpu_memory_utilization"); u && std::holds_alternative<double>(*u)) {
      v.gpu_memory_utilization = std::get<double>(*u);
    }
  }
  // Else the value the launch stated (its args dump or command line).
  if (!v.gpu_memory_utilization) v.gpu_memory_utilization = stated_setting(context, event, "vllm_gpu_memory_utilization");
  // vLLM 0.6's "Memory profiling results" line gives no budget or activation peak: the budget is
  // total x utilization, and its torch peak holds the weights and the activations
  // (worker.py: kv_cache_size = total_gpu_memory x gpu_memory_utilization - peak_memory).
  if (!v.usable_budget && v.total_gpu_memory && v.gpu_memory_utilization) {
    v.usable_budget = static_cast<uint64_t>(static_cast<double>(*v.total_gpu_memory) * *v.gpu_memory_utilization);
  }
  if (!v.activation_peak && v.peak_torch_memory && v.weights && *v.peak_torch_memory >= *v.weights) {
    v.activation_peak = *v.peak_torch_memory - *v.weights;
  }
  return v;
}

// Utilization rounded down to two decimals, the way users type it. The nudge keeps a difference
// that is exact in decimal exact in binary too (0.95 - 0.05 is 0.8999999999999999: 0.90, not 0.89).
std::string utilization_text(double u) { return fmt::format("{:.2f}", std::floor(u * 100.0 + 1e-6) / 100.0); }
std::string utilization_up(double u) { return fmt::format("{:.2f}", std::ceil(u * 100.0 - 1e-6) / 100.0); }
// A fraction as the log gave it: two decimals, or three when the third is not zero (SGLang's
// computed defaults, "0.828").
std::string fraction_as_given(double u) {
  const double thousandths = std::round(u * 1000.0);
  return std::fmod(thousandths, 10.0) != 0.0 ? fmt::format("{:.3f}", thousandths / 1000.0) : fmt::format("{:.2f}", u);
}

// SGLang's static-pool share (mem_fraction_static) in use when `event` was printed
// (readers/log_scanner.cpp reads its command line and server_args dump).
std::optional<double> sglang_mem_fraction_static(const LogContext& context, const OomEvent& event) {
  return stated_setting(context, event, "sglang_mem_fraction_static");
}

// The program the event comes from when the log says so (readers/application.h): the scanner's
// reading, else the traceback's frames (an event built without the scanner).
std::string application(const OomEvent& e) {
  if (auto app = e.string_field("application")) return *app;
  return e.traceback ? application_from_frames(*e.traceback) : std::string();
}

// The event comes from a vLLM process even when PyTorch printed it: vLLM's own message, a vLLM
// process tag on the line ("(VllmWorker rank=1 pid=4731)", "(EngineCore_DP0 pid=9)"), vLLM's
// code in the traceback or vLLM's lines just above. Its fixes are then vLLM flags, never
// TrainingArguments.
bool from_vllm(const OomEvent& e) {
  return e.framework == "vllm" || e.field("vllm_process") != nullptr || application(e) == kAppVllm;
}

// The event comes from an SGLang server: SGLang's own message, SGLang's frames, its log prefix or
// its wrapping of a failed CUDA-graph capture. Its fixes are then SGLang flags.
bool from_sglang(const OomEvent& e) { return e.framework == "sglang" || application(e) == kAppSglang; }

// A frame of PyTorch's own Python code ("site-packages/torch/...").
bool pytorch_frames(const OomEvent& e) {
  if (!e.traceback) return false;
  for (const TracebackFrame& f : e.traceback->frames) {
    if (f.file.find("/torch/") != std::string::npos || f.file.find("\\torch\\") != std::string::npos) return true;
  }
  return false;
}

// What the program was doing: the traceback's reading, else what the log lines just above said.
std::string operation_of(const OomEvent& e) {
  if (e.traceback && !e.traceback->operation.empty()) return e.traceback->operation;
  return e.string_field("log_operation").value_or("");
}

// A frame of library code that runs under torch.no_grad()/inference_mode: transformers' generate()
// (@torch.no_grad()), Trainer.prediction_step, Lightning's evaluation loops. Evaluation through them
// is no evidence of autograd left on; a generate() frame never is (there is no telling a custom
// generate loop from Hugging Face's when the traceback is cut).
// TRL's trainers (trl/trainer/*_trainer.py) subclass Trainer and run their own prediction_step
// under torch.no_grad() too (DPOTrainer, RewardTrainer, KTOTrainer).
bool in_library_trainer(const TracebackFrame& f) {
  for (std::string_view dir : {"transformers/trainer", "transformers\\trainer", "trl/trainer/", "trl\\trainer\\"}) {
    if (f.file.find(dir) != std::string::npos) return true;
  }
  return false;
}

// Trainer's evaluation loop: the model runs only inside prediction_step, under torch.no_grad(), so
// a failure in the loop itself (gathering or keeping predictions) is no evidence of autograd; a
// prediction_step of the user's own (a Trainer subclass) may be.
bool in_trainer_evaluation_loop(const Traceback& tb) {
  bool loop = false;
  for (const TracebackFrame& f : tb.frames) {
    if (f.function == "prediction_step" && !in_library_trainer(f)) return false;
    if ((f.function == "evaluation_loop" || f.function == "prediction_loop") && in_library_trainer(f)) loop = true;
  }
  return loop;
}

// Where Trainer's evaluation loop failed while keeping predictions on the GPU: appending this
// batch's logits to those of every earlier batch (EvalLoopContainer.add -> nested_concat ->
// torch.cat in trainer_pt_utils.py; `preds_host = nested_concat(...)` before transformers 4.42),
// "concatenating", or gathering them from every process ("gathering"); "" elsewhere.
std::string trainer_predictions_step(const Traceback& tb) {
  if (!in_trainer_evaluation_loop(tb)) return "";
  for (const TracebackFrame& f : tb.frames) {
    if (f.function == "nested_concat" || f.function == "torch_pad_and_concatenate" ||
        contains(f.code, "nested_concat(") || contains(f.code, "all_preds.add(") || contains(f.code, "all_logits.add(")) {
      return "concatenating";
    }
  }
  for (const TracebackFrame& f : tb.frames) {
    if (contains(f.code, "gather_function(") || contains(f.code, "gather_for_metrics(") ||
        contains(f.code, "_nested_gather(") || f.function == "gather_for_metrics" || f.function == "_nested_gather") {
      return "gathering";
    }
  }
  return "";
}

constexpr std::string_view kArgmaxDetail =
    "Keeps the predicted token ids (argmax) instead of the whole vocabulary's logits: vocabulary-size times less "
    "to gather and keep.";

bool grad_disabled_by_library(const Traceback& tb) {
  if (in_trainer_evaluation_loop(tb)) return true;
  for (const TracebackFrame& f : tb.frames) {
    if (f.file.find("transformers/generation/") != std::string::npos) return true;
    // The wrapper of a function decorated with @torch.no_grad() or @torch.inference_mode():
    // torch/utils/_contextlib.py (torch 2.x), torch/autograd/grad_mode.py (1.x). (@torch.enable_grad()
    // uses it too, but nobody decorates an evaluation with it.)
    if (f.function == "decorate_context" &&
        (f.file.find("_contextlib.py") != std::string::npos || f.file.find("grad_mode.py") != std::string::npos)) {
      return true;
    }
    if (f.function == "prediction_step" && in_library_trainer(f)) return true;
    if (f.file.find("lightning/") != std::string::npos &&
        (f.file.find("evaluation_loop") != std::string::npos || f.file.find("prediction_loop") != std::string::npos)) {
      return true;
    }
  }
  return false;
}

// The allocator setting the message's PyTorch accepts. The 1.x message form ("... reserved in total
// by PyTorch)", "... cached)") comes from PyTorch releases without expandable_segments (added in
// 2.1; unknown keys are rejected), and the "cached" form from 1.4 and older, which have no
// allocator settings at all: max_split_size_mb, or an upgrade.
// torch_npu (Ascend) prints the 1.x form on every version and reads PYTORCH_NPU_ALLOC_CONF.
Fix allocator_fix(const OomEvent& e, std::string detail) {
  if (e.framework == "pytorch-npu") {
    return make_fix("expandable_segments", std::move(detail),
                    std::string(fix_snippet("expandable_segments", FixVariant::kAscend)));
  }
  if (e.framework == "pytorch" || e.framework == "pytorch-rocm") {
    if (e.format == "pytorch_old_cached") {
      return make_fix("max_split_size", detail + " PyTorch 1.4 and older (this message's form) has no allocator "
                                                 "settings: upgrade PyTorch to use them.",
                      std::string(fix_snippet("max_split_size", FixVariant::kTorch14)));
    }
    // (A 1.x message cut short may have been either form: the reserved one is far more common.)
    if (e.format == "pytorch_old_reserved" || e.format == "pytorch_old_truncated") {
      return make_fix("max_split_size", std::move(detail));
    }
  }
  return make_fix("expandable_segments", std::move(detail));
}

// Fixes that change a training or transformers recipe: meaningless for a vLLM server.
bool is_recipe_fix(std::string_view id) {
  static constexpr std::string_view kRecipe[] = {
      "smaller_batch", "fsdp_sync_each_batch", "shorter_sequence", "smaller_input", "bf16_hidden_states",
      "mixed_precision", "eight_bit_optimizer", "gradient_checkpointing", "lora", "quantize_model", "offload",
      "no_grad_for_eval", "release_references", "bigger_gpu"};
  return std::find(std::begin(kRecipe), std::end(kRecipe), id) != std::end(kRecipe);
}

bool is_pytorch_numeric(const OomEvent& e) {
  return starts_with(e.format, "pytorch_new") || starts_with(e.format, "pytorch_old") ||
         e.format == "xpu_4gb_block_limit" || e.format == "pytorch_cudamallocasync";
}

// Frames of the libraries that run a training loop for the user.
constexpr const char* kTrainerLibraryFiles[] = {"transformers/trainer", "/accelerate/", "lightning/", "/trl/"};

// The traceback shows a training step: backward, the optimizer, or a trainer library's frames.
bool training_evident(const OomEvent& e, const std::string& operation) {
  if (operation == "backward" || operation == "optimizer_step") return true;
  if (!e.traceback) return false;
  for (const TracebackFrame& f : e.traceback->frames) {
    if (f.file.find("/deepspeed/") != std::string::npos) return true;
    for (const char* marker : kTrainerLibraryFiles) {
      if (f.file.find(marker) != std::string::npos) return true;
    }
  }
  return false;
}

// The traceback shows a language model run through an LLM stack (Hugging Face's transformers, PEFT,
// TRL; LitGPT, torchtune, Axolotl, Unsloth) or generate(): only then do a KV cache, generate() and
// from_pretrained's BitsAndBytesConfig apply. A torchvision or other own network evaluating gets the
// steps every model has (qa21 t36).
bool language_model_evident(const OomEvent& e, const std::string& operation) {
  if (operation == "generation") return true;
  if (!e.traceback) return false;
  for (const TracebackFrame& f : e.traceback->frames) {
    std::string file = f.file;
    std::replace(file.begin(), file.end(), '\\', '/');   // a Windows path's package directories too
    for (std::string_view dir : {"/transformers/", "/peft/", "/trl/", "/litgpt/", "/lit_gpt/", "/torchtune/",
                                 "/axolotl/", "/unsloth/"}) {
      if (file.find(dir) != std::string::npos) return true;
    }
    if (contains(f.code, ".generate(") || contains(f.code, "from_pretrained(")) return true;
  }
  return false;
}

// part * 2 >= whole without the doubling overflowing (both figures come from the log).
bool at_least_half(uint64_t part, uint64_t whole);

// One request larger than everything the device allows (`limit`: "23.65 GiB card"): a shape to
// find and shrink, not memory to free.
void add_shape_fixes(Diagnosis& d, uint64_t requested, const std::string& limit) {
  d.fixes.push_back(make_fix("smaller_input",
                             fmt::format("A single {} tensor is larger than the whole {}: find its shape (batch x seq x "
                                         "vocab for logits, image size for vision) and shrink the dimension that makes it.",
                                         format_bytes(requested), limit)));
  d.fixes.push_back(make_fix("shorter_sequence", "Logits and attention scores grow with sequence length."));
}

// DeepSpeed's engine in the traceback with no trainer library above it.
bool driven_by_deepspeed_engine(const OomEvent& e) {
  if (!e.traceback) return false;
  bool engine = false;
  for (const TracebackFrame& f : e.traceback->frames) {
    for (const char* trainer : kTrainerLibraryFiles) {
      if (f.file.find(trainer) != std::string::npos) return false;
    }
    if (f.file.find("/deepspeed/") != std::string::npos) engine = true;
  }
  return engine;
}

// A request of half the card or more is one tensor whose shape is worth finding, whatever the
// cause: the evidence and the fix that say so.
void add_one_tensor(Diagnosis& d, uint64_t requested, uint64_t total) {
  d.evidence.push_back(fmt::format("The one {} allocation is {} of the card: a single tensor (attention scores, logits, "
                                   "an image batch) far larger than the rest.", format_bytes(requested),
                                   pct(requested, total)));
  d.fixes.push_back(make_fix("smaller_input", fmt::format("Find the {} tensor's shape and shrink the dimension that "
                                                          "makes it (batch, sequence, resolution).",
                                                          format_bytes(requested))));
}

// The words for "capacity_exhausted" that the figures support: "filled the card (close to the
// limit)" needs this process to hold 90% of the card or more; one request of half the card or more
// is that tensor; without figures, only that the device ran out.
std::string capacity_title(const MemoryBreakdown& m) {
  const std::optional<uint64_t> held = m.this_process ? m.this_process : m.pytorch_reserved;
  if (m.total && held && *held >= *m.total - *m.total / 10) return "the process filled the card (close to the limit)";
  if (m.total && m.requested && at_least_half(*m.requested, *m.total)) {
    return "one allocation takes half the card or more (a single very large tensor)";
  }
  if (m.total && held) return "the card ran out: this process's memory and the request do not fit together";
  return "the device ran out of memory (no figures show how full it was)";
}

void add_training_ladder(Diagnosis& d, const OomEvent& e, const MemoryBreakdown& m, const std::string& operation) {
  // The recipe below is written for PyTorch (TrainingArguments, bitsandbytes, PEFT): a cuDNN,
  // cuBLAS, NCCL or driver failure from another program (Caffe, CNTK, Lua Torch, JCuda, TensorRT)
  // gets the step every framework has.
  if (!starts_with(e.framework, "pytorch")) {
    d.fixes.push_back(make_fix("smaller_input", "Smaller batches or inputs need smaller buffers and workspaces."));
    return;
  }
  const bool inference = operation == "generation" || operation == "evaluation";
  // DeepSpeed ZeRO-3 gathering parameters for the next modules (partitioned_param_coordinator's
  // fetch_sub_module): how many it keeps gathered and prefetches is its own setting.
  const bool zero3_fetch = e.traceback && std::any_of(e.traceback->frames.begin(), e.traceback->frames.end(),
                                                      [](const TracebackFrame& f) {
    return f.function == "fetch_sub_module" || contains(f.file, "partitioned_param_coordinator");
  });
  if (zero3_fetch) {
    d.fixes.push_back(make_fix("zero3_live_parameters", "It failed while ZeRO-3 gathered parameters ahead of use: fewer "
                                                        "kept gathered and a smaller prefetch lower that peak, at some "
                                                        "speed."));
  }
  std::string shortfall;
  if (m.requested && m.free && *m.requested > *m.free) {
    shortfall = fmt::format("The failed request is {} with {} free: the peak must drop by at least {}. ",
                            format_bytes(*m.requested), format_bytes(*m.free),
                            format_bytes(*m.requested - *m.free));
  }
  // Memory in CUDA-graph private pools means the process captures CUDA graphs: an inference engine
  // (vLLM, SGLang) or torch.compile's reduce-overhead mode, hardly ever a training recipe. Unless the
  // traceback shows training, the fixes are the engine-neutral ones (a named engine gets its own).
  if (auto pools = e.bytes("private_pools");
      pools && *pools > 0 && !training_evident(e, operation) && !from_vllm(e) && !from_sglang(e)) {
    d.fixes.push_back(make_fix("cuda_graphs", fmt::format(
        "{} sit in CUDA-graph private pools: the process captures CUDA graphs (an inference engine such as vLLM or "
        "SGLang, or torch.compile's reduce-overhead mode), memory outside its KV-cache or batch budget.",
        format_bytes(*pools))));
    d.fixes.push_back(make_fix("smaller_input", shortfall + "Fewer sequences at once or a shorter context shrink the "
                                                            "activations and the graphs captured for them."));
    d.fixes.push_back(make_fix("quantize_model", "Weights take half (8-bit) or a quarter (4-bit) of bf16."));
    d.fixes.push_back(make_fix("bigger_gpu", "Run `oomdoc fit` with the job to find the smallest GPU that fits."));
    return;
  }
  if (inference && !language_model_evident(e, operation)) {
    // No gradients, no accumulation, and no sign of a language model: its activations scale with
    // the inputs run at once.
    d.fixes.push_back(make_fix("smaller_input", shortfall + "Activations scale with the inputs run at once (batch, image "
                                                            "size, sequence length); halve the evaluation batch."));
    d.fixes.push_back(make_fix("bigger_gpu", "Run `oomdoc fit` with the job to find the smallest GPU that fits."));
    return;
  }
  if (inference) {
    // No gradients, no accumulation: what grows is the KV cache (batch x length) and the logits.
    d.fixes.push_back(make_fix("smaller_inference_batch",
                               shortfall + "The KV cache and the logits scale with the sequences run at once; halve them."));
    // New tokens and a KV cache only where something generates (an evaluation loop computes logits).
    if (operation == "generation") {
      d.fixes.push_back(make_fix("shorter_generation", "The KV cache grows with every prompt and generated token."));
      d.fixes.push_back(make_fix("quantized_kv_cache", "A 4-bit cache takes about a quarter of a 16-bit one."));
    }
    d.fixes.push_back(make_fix("quantize_model", "Weights take half (8-bit) or a quarter (4-bit) of bf16."));
    d.fixes.push_back(make_fix("bigger_gpu", "Run `oomdoc fit` with the job to find the smallest GPU that fits."));
    return;
  }
  // The optimizer step (or the optimizer creating its states, DeepSpeed's initialize_optimizer_states):
  // the activations are gone by then; the states, the gradients and the weights fill the card, so
  // a smaller batch frees nothing. What shrinks or moves the states comes first.
  if (operation == "optimizer_step") {
    d.fixes.push_back(make_fix("eight_bit_optimizer",
                               shortfall + "The failure is in the optimizer step: AdamW's states take 8 bytes per "
                                           "parameter in fp32, 8-bit ones 2; the micro-batch's activations are already freed."));
    d.fixes.push_back(make_fix("shard_model", "ZeRO stage 1 or 2 (FSDP SHARD_GRAD_OP) splits the optimizer states over "
                                              "the GPUs; stage 3 the weights too."));
    d.fixes.push_back(make_fix("offload", "ZeRO-Offload keeps the optimizer states in host memory and steps them on the CPU."));
  } else {
    d.fixes.push_back(make_fix("smaller_batch",
                               shortfall + "Activations scale with the micro-batch; halve it and double "
                                           "gradient_accumulation_steps to keep the effective batch."));
    d.fixes.push_back(make_fix("shorter_sequence", "Activations and logits grow with sequence length (logits with "
                                                   "batch x seq x vocab); cut max_seq_length or pack without padding."));
    d.fixes.push_back(make_fix("mixed_precision", "Halves activation memory relative to fp32."));
    d.fixes.push_back(make_fix("eight_bit_optimizer", "AdamW keeps 8 bytes per parameter in fp32; 8-bit keeps 2."));
    d.fixes.push_back(make_fix("gradient_checkpointing", "Keeps one activation per layer instead of all of them."));
    d.fixes.push_back(make_fix("offload", "Moves optimizer state (and parameters) to host memory."));
  }
  d.fixes.push_back(make_fix("lora", "Only the adapters get gradients and optimizer state."));
  d.fixes.push_back(make_fix("bigger_gpu", "Run `oomdoc fit` with the job to find the smallest GPU that fits."));
}

// part * 2 >= whole without the doubling overflowing (both figures come from the log).
bool at_least_half(uint64_t part, uint64_t whole) { return part >= whole - whole / 2; }

// One allocation larger than the catalog's largest GPU: no card's, a size computed wrong.
bool beyond_any_gpu(uint64_t bytes) { return bytes > largest_catalog_gpu().total_bytes; }

// A size no device has, as printed: a count that filled 64 bits is "at least 16 EiB", not the
// "unlimited" format_bytes gives a saturated total.
std::string impossible_size(uint64_t bytes) {
  return is_saturated(bytes) ? std::string("at least 16 EiB (more than 64 bits hold)") : format_bytes(bytes);
}

void diagnose_pytorch_numbers(Diagnosis& d, const OomEvent& e, const MemoryBreakdown& m) {
  const uint64_t total = m.total.value_or(0);
  const uint64_t requested = m.requested.value_or(0);
  // torch.cuda.set_per_process_memory_fraction() caps what the allocator may reserve: when the
  // cap, not the card, is what the reserve plus the request runs into, the cap is the cause (the
  // message then prints "<limit> allowed;" and free memory far above the request).
  if (const Quantity* limit = e.quantity("pytorch_limit"); limit && !limit->overflow && m.total && limit->bytes < *m.total) {
    const uint64_t reserved = m.pytorch_reserved.value_or(0);
    // 128 bits: the figures come from the log and may be near 2^64. When the reserve plus the request
    // is more than the whole card, no fraction would have helped: the card is the limit (below).
    const unsigned __int128 needs = static_cast<unsigned __int128>(reserved) + requested;
    if (needs <= *m.total && needs * 100 >= static_cast<unsigned __int128>(limit->bytes) * 95) {
      d.cause = "memory_fraction_limit";
      const double fraction = static_cast<double>(limit->bytes) / static_cast<double>(*m.total);
      // Three decimals, five under 0.01 (a 1 GiB cap on a 288 GiB card is 0.00365, not "0.004"),
      // so the fraction in use and the one needed never print alike.
      const int digits = fraction < 0.01 ? 5 : 3;
      const double scale = std::pow(10.0, digits);
      auto shown = [&](double f) { return fmt::format("{:.{}f}", f, digits); };
      d.evidence.push_back(fmt::format(
          "PyTorch may use only {} of this {} GPU (a per-process memory fraction of {}): it reserves {} and the {} "
          "request reaches the limit{}.",
          format_bytes(limit->bytes), format_bytes(*m.total), shown(fraction), format_bytes(reserved),
          format_bytes(requested),
          m.free ? fmt::format(", while {} of the card is free", format_bytes(*m.free)) : std::string()));
      double needed = std::ceil(scale * static_cast<double>(reserved + requested) / static_cast<double>(*m.total)) / scale;
      // Asked for, it must read above the fraction in use: one step past it where both round alike.
      if (needed > fraction && needed <= std::round(scale * fraction) / scale) needed = std::round(scale * fraction) / scale + 1 / scale;
      const std::string setter = e.string_field("backend") == "XPU" ? "torch.xpu.set_per_process_memory_fraction()"
                                                                      : "torch.cuda.set_per_process_memory_fraction()";
      d.fixes.push_back(make_fix("check_device_and_limits",
          needed > fraction
              ? fmt::format("Raise or remove {} (or the framework setting that calls it): the reserve plus this request "
                            "needs {}, a fraction of at least {}.", setter, format_bytes(reserved + requested), shown(needed))
              // The figures fit under the limit, yet it refused: the allocator rounds the request up to
              // its block size and counts what it is about to reserve, which the message does not print.
              : fmt::format("Raise or remove {} (or the framework setting that calls it): the printed reserve plus "
                            "request ({}) is just under the limit, but the allocator rounds the request up to its "
                            "blocks; give more than the {} in use.", setter, format_bytes(reserved + requested),
                            shown(fraction))));
      return;
    }
  }
  // A pebibyte or more (a negative size wrapped to 2^64, an overflowed shape): not a card to buy, a
  // size to find. (Below it a request can be real: eager attention over 128k tokens is a TiB.)
  if (m.requested && requested >= (1ull << 50)) {
    d.cause = "garbage_request_size";
    const Quantity* printed = e.quantity("requested");
    d.evidence.push_back(fmt::format("A request of {} is not a real tensor size (a pebibyte or more): an overflow, a "
                                     "negative dimension or a corrupted shape upstream.",
                                     printed != nullptr && !printed->text.empty() ? printed->text : impossible_size(requested)));
    d.fixes.push_back(make_fix("find_failing_shape", "The failing operation's inputs show where the size comes from."));
    return;
  }
  if (m.requested && m.total && requested > total) {
    d.cause = "request_exceeds_total_capacity";
    d.evidence.push_back(fmt::format("One allocation of {} is larger than the whole card ({}).",
                                     format_bytes(requested), format_bytes(total)));
    // Holding more than the card has at all is Windows' sysmem fallback: said whatever the cause.
    if (const uint64_t held = m.this_process.value_or(m.pytorch_reserved.value_or(0)); held > total) {
      d.evidence.push_back(fmt::format("This process already holds {}, more than the card's {}: the driver spilled {} "
                                       "into shared system memory (Windows' sysmem fallback, much slower than the card).",
                                       format_bytes(held), format_bytes(total), format_bytes(held - total)));
    }
    add_shape_fixes(d, requested, fmt::format("{} card", format_bytes(total)));
    d.fixes.push_back(make_fix("bigger_gpu", "Only if the shape is intended."));
    return;
  }
  if (m.requested && m.free && m.total && *m.free >= requested + std::max<uint64_t>(64 * kMiB, total / 50)) {
    d.cause = "free_exceeds_request_yet_failed";
    d.evidence.push_back(fmt::format("{} was free, more than the {} requested, yet the allocation failed.",
                                     format_bytes(*m.free), format_bytes(requested)));
    d.fixes.push_back(make_fix("check_device_and_limits",
                               "Free memory covers the request: the failure is on another device, under a "
                               "per-process memory fraction, or the free figure changed between the attempt and the report."));
    if (at_least_half(requested, total)) add_one_tensor(d, requested, total);
    if (e.string_field("backend") == "XPU") {
      d.fixes.push_back(make_fix("smaller_input", "Intel XPU drivers limit a single allocation (4 GB on many "
                                                  "platforms): split the tensor or shrink the batch."));
    }
    return;
  }
  // A 1.x message cut before PyTorch's reserve: its allocated figure is only part of what PyTorch
  // holds (the cache is not printed), so the rest of the card cannot be told apart either.
  const bool reserve_cut = (e.format == "pytorch_old_truncated" || e.field("message_cut") != nullptr) &&
                           !e.bytes("reserved_total") && !e.bytes("reserved_unallocated");
  if (reserve_cut && m.total && (m.this_process || e.bytes("allocated") || e.format == "pytorch_old_truncated")) {
    d.cause = "insufficient_information";
    const auto allocated = e.bytes("allocated");
    d.evidence.push_back(fmt::format(
        "The message was cut before PyTorch's reserve{}: {}{}so {} cannot be told; the full message (or `oomdoc "
        "snapshot`) can.",
        m.free ? "" : " and the free figure",
        m.this_process ? fmt::format("this process held {} of {} ({}), ", format_bytes(*m.this_process),
                                     format_bytes(total), pct(*m.this_process, total))
                       : std::string(),
        allocated ? fmt::format("PyTorch had {} of {} allocated ({}), ", format_bytes(*allocated), format_bytes(total),
                                pct(*allocated, total))
                  : m.this_process ? std::string()
                                   : fmt::format("{} total{}, ", format_bytes(total),
                                                 m.requested ? fmt::format(", {} requested", format_bytes(*m.requested))
                                                             : std::string()),
        m.this_process ? "how much of this process's memory is PyTorch's cache (fragmentation) and how much lies "
                         "outside PyTorch"
                       : "what holds the rest of the card (PyTorch's cache, other processes)"));
    if (m.requested && at_least_half(requested, total)) add_one_tensor(d, requested, total);
    add_training_ladder(d, e, m, operation_of(e));
    return;
  }
  if (!m.this_process && !m.pytorch_reserved && e.other_processes.empty()) {
    // The message stops after the free figure (an issue title, a cut log line): what holds the card
    // is unknown, so no cause may rest on it.
    d.cause = "insufficient_information";
    d.evidence.push_back(m.free
        ? fmt::format("The message was cut after the free figure ({} free of {}{}): it does not say what this process "
                      "or others hold, so the cause cannot be told; the full message (or `oomdoc snapshot`) can.",
                      format_bytes(*m.free), m.total ? format_bytes(*m.total) : "?",
                      m.requested ? fmt::format(", {} requested", format_bytes(*m.requested)) : std::string())
        : fmt::format("The message was cut before the free figure ({} total{}): it does not say how full the card was "
                      "or what holds it, so the cause cannot be told; the full message (or `oomdoc snapshot`) can.",
                      m.total ? format_bytes(*m.total) : "?",
                      m.requested ? fmt::format(", {} requested", format_bytes(*m.requested)) : std::string()));
    if (m.requested && m.total && at_least_half(requested, total)) add_one_tensor(d, requested, total);
    add_training_ladder(d, e, m, operation_of(e));
    return;
  }
  const uint64_t ru = m.reserved_unallocated.value_or(0);
  // PyTorch's caching allocator serves requests of up to 1 MiB (kSmallSize) from its own pool of
  // 2 MiB segments: memory reserved but unallocated in the large blocks never serves them, and
  // max_split_size_mb only limits how large blocks are split (c10/cuda/CUDACachingAllocator.cpp). A
  // small request that fails means the card is full, not fragmented (qa21 t32).
  constexpr uint64_t kSmallPoolRequest = 1ull << 20;
  // Past that, the cached memory is the cause from a twentieth of the card; as a minor cause it must
  // hold the request, alone or with the free memory (a real vLLM log: 118.89 MiB cached and 16 MiB
  // free for a 128 MiB request, qa7).
  const bool fragmentation_can_help = m.reserved_unallocated && m.requested && requested > kSmallPoolRequest;
  if (m.requested && requested <= kSmallPoolRequest && ru > 0 && ru >= requested) {
    // (Before raising, the allocator releases every wholly free cached segment and retries: what
    // stays reserved sits in partly used segments.)
    d.evidence.push_back(fmt::format("The {} reserved but unallocated sits in partly used cached segments with no room "
                                     "for it; a request of 1 MiB or less needs a new 2 MiB segment of PyTorch's small "
                                     "pool, which max_split_size_mb does not affect: no allocator setting helps.",
                                     format_bytes(ru)));
  }
  if (fragmentation_can_help && ru >= requested && m.total && ru >= total / 20) {
    d.cause = "fragmentation";
    d.evidence.push_back(fmt::format(
        "{} is reserved by PyTorch but unallocated, {} the {} request, yet no cached block fits it: the cache is "
        "fragmented.", format_bytes(ru), ru >= 2 * requested ? "far more than" : "more than", format_bytes(requested)));
    d.fixes.push_back(allocator_fix(e, fmt::format(
        "Lets the {} of reserved-but-unallocated memory be reused for the {} request.", format_bytes(ru),
        format_bytes(requested))));
    add_training_ladder(d, e, m, operation_of(e));
    return;
  }
  if (fragmentation_can_help && ru >= requested) {
    d.secondary_causes.push_back("fragmentation_minor");
    d.fixes.push_back(allocator_fix(e, fmt::format(
        "{} is reserved but unallocated, as much as the {} request: {} let it be reused.",
        format_bytes(ru), format_bytes(requested),
        starts_with(e.format, "pytorch_old") ? "smaller cached blocks (max_split_size_mb)" : "expandable segments")));
  } else if (fragmentation_can_help && ru > 0 && m.free && *m.free < requested && *m.free + ru >= requested) {
    // Neither the free memory nor the cache alone holds the request, together they do: the cached
    // blocks sit in segments still partly in use, which expandable segments can grow into the free
    // memory instead of asking for a new one.
    d.secondary_causes.push_back("fragmentation_minor");
    d.fixes.push_back(allocator_fix(e, fmt::format(
        "{} free plus {} reserved but unallocated would hold the {} request: {} let the cached pieces be used with "
        "the free memory.", format_bytes(*m.free), format_bytes(ru), format_bytes(requested),
        starts_with(e.format, "pytorch_old") ? "smaller cached blocks (max_split_size_mb)" : "expandable segments")));
  }

  std::vector<std::pair<std::string, uint64_t>> outside;
  if (m.total && m.other_processes * 10 > total) outside.emplace_back("other_processes", m.other_processes);
  if (m.total && m.unattributed && *m.unattributed > 0 && static_cast<uint64_t>(*m.unattributed) * 100 > total * 15) {
    outside.emplace_back("memory_outside_allocator", static_cast<uint64_t>(*m.unattributed));
  }
  if (m.total && m.non_pytorch_in_process && *m.non_pytorch_in_process > 0 &&
      static_cast<uint64_t>(*m.non_pytorch_in_process) * 100 > total * 15) {
    outside.emplace_back("non_pytorch_memory_in_process", static_cast<uint64_t>(*m.non_pytorch_in_process));
  }
  // What the memory held elsewhere explains, and the fixes for it.
  std::vector<std::string> outside_evidence;
  std::vector<Fix> outside_fixes;
  uint64_t outside_bytes = 0;
  for (const auto& [cause, bytes] : outside) {
    outside_bytes += bytes;   // disjoint: listed processes, the unlisted rest, this process outside PyTorch
    if (cause == "other_processes") {
      std::string list;
      for (const auto& p : e.other_processes) {
        if (m.likely_self_pid && p.pid == *m.likely_self_pid) continue;
        list += fmt::format("{}pid {} holds {}", list.empty() ? "" : ", ", p.pid ? std::to_string(*p.pid) : "?",
                            format_bytes(p.memory.bytes));
      }
      // The listed process that is this one (breakdown(): the figures only add up that way).
      std::string self_note;
      if (m.likely_self_pid && e.other_processes.size() > 1) {
        self_note = fmt::format(" (not pid {}: that is this process under its host PID)", *m.likely_self_pid);
        list += fmt::format("; pid {} holding {} is this process under its host PID", *m.likely_self_pid,
                            format_bytes(*m.this_process));
      }
      outside_evidence.push_back(fmt::format("Other processes hold {} ({} of the card): {}.", format_bytes(bytes),
                                             pct(bytes, total), list));
      outside_fixes.push_back(make_fix("end_other_processes", "Stale notebooks and finished runs often keep the card: "
                                                              "check the listed pids with nvidia-smi, end the stale ones" +
                                                                  self_note + "."));
    } else if (cause == "memory_outside_allocator") {
      outside_evidence.push_back(fmt::format(
          "{} ({} of the card) is held neither by this process's PyTorch allocator nor by a listed process: "
          "another container's processes, the display, or other CUDA contexts.", format_bytes(bytes), pct(bytes, total)));
      outside_fixes.push_back(make_fix("end_other_processes", "nvidia-smi on the host shows processes a container cannot "
                                                              "see; a desktop session also holds memory on small cards."));
    } else {
      outside_evidence.push_back(fmt::format(
          "This process holds {} outside PyTorch's allocator ({} of the card): the CUDA context, NCCL's buffers, "
          "other libraries' own allocations (cuBLAS and cuDNN workspaces are inside it).", format_bytes(bytes),
          pct(bytes, total)));
      outside_fixes.push_back(make_fix("outside_allocator_holder",
                                       "PyTorch's caching allocator does not hold this memory: another allocator in the "
                                       "process does, and only it can give it back."));
      // A rank of a distributed training job: NCCL's communicators are the usual holder. (A serving
      // engine's workers leave room for them by a lower memory share, among its own flags.)
      if (e.rank && !from_vllm(e) && !from_sglang(e)) {
        outside_fixes.push_back(make_fix("nccl_buffers", "NCCL's buffers are allocated outside PyTorch's cache, per "
                                                         "communicator and channel."));
        outside_fixes.push_back(make_fix("nccl_nvls_off", "NVLink SHARP's multicast buffers are the largest of NCCL's."));
      }
      if (e.bytes("private_pools")) {
        outside_fixes.push_back(make_fix(from_vllm(e) ? "vllm_enforce_eager" : from_sglang(e) ? "sglang_disable_cuda_graph" : "cuda_graphs",
                                         fmt::format("{} sit in CUDA-graph private pools.",
                                                     format_bytes(*e.bytes("private_pools")))));
      }
    }
  }
  // One allocation of half the card or more, and at least twice all the memory held elsewhere:
  // that tensor is the bulk of what did not fit (freeing the memory elsewhere would still leave it
  // taking most of the card), so its size is the cause to change first and the memory elsewhere a
  // secondary one. When the memory elsewhere is comparable to the tensor, freeing it is the fix.
  const bool one_tensor_dominates = m.requested && m.total && at_least_half(requested, total) &&
                                    !at_least_half(outside_bytes, requested);
  // A request of half the card or more is one tensor whose shape is worth finding, whatever else
  // holds memory.
  const bool one_tensor = m.requested && m.total && at_least_half(requested, total);
  if (!outside.empty() && !one_tensor_dominates) {
    d.cause = outside.front().first;
    for (size_t i = 1; i < outside.size(); ++i) d.secondary_causes.push_back(outside[i].first);
    d.evidence.insert(d.evidence.end(), outside_evidence.begin(), outside_evidence.end());
    d.fixes.insert(d.fixes.end(), outside_fixes.begin(), outside_fixes.end());
    if (one_tensor) add_one_tensor(d, requested, total);
    add_training_ladder(d, e, m, operation_of(e));
    return;
  }
  for (const auto& entry : outside) d.secondary_causes.push_back(entry.first);
  d.cause = "capacity_exhausted";
  if (m.total && (m.this_process || m.pytorch_reserved)) {
    uint64_t held = m.this_process.value_or(m.pytorch_reserved.value_or(0));
    if (held > total) {
      // Windows' CUDA driver lets allocations spill into shared system memory ("sysmem fallback")
      // once the card is full: the process then holds more than the card has.
      d.evidence.push_back(fmt::format("This process holds {}, more than the card's {}: the driver already spilled {} into "
                                       "shared system memory (Windows' sysmem fallback, much slower than the card), and "
                                       "the {}request found no room even there.",
                                       format_bytes(held), format_bytes(total), format_bytes(held - total),
                                       m.requested ? format_bytes(requested) + " " : std::string()));
    } else if (!m.requested || at_least_half(requested, total)) {
      // (Without a request size, as when the log printed one no number holds, there is no "last straw".)
      d.evidence.push_back(fmt::format("This process holds {} of {} ({}){}.", format_bytes(held), format_bytes(total),
                                       pct(held, total),
                                       m.free ? fmt::format("; {} was free", format_bytes(*m.free)) : std::string()));
    } else {
      d.evidence.push_back(fmt::format("This process holds {} of {} ({}); the {} request is the last straw.",
                                       format_bytes(held), format_bytes(total), pct(held, total), format_bytes(requested)));
    }
  } else if (m.requested) {
    d.evidence.push_back(fmt::format("The card could not provide {}.", format_bytes(requested)));
  }
  // Not the last straw but one tensor the size of half the card or more: its shape is the issue.
  if (one_tensor) add_one_tensor(d, requested, total);
  d.evidence.insert(d.evidence.end(), outside_evidence.begin(), outside_evidence.end());
  d.fixes.insert(d.fixes.end(), outside_fixes.begin(), outside_fixes.end());
  add_training_ladder(d, e, m, operation_of(e));
}

struct VllmWhere;
void add_vllm_runtime_ladder(Diagnosis& d, const OomEvent& e, const LogContext& context, const VllmWhere& where);

// When in vLLM's life a PyTorch allocation failed, from the traceback: the profile run (before the
// KV cache is sized), the warm-up after the KV cache took its budget (compile_or_warm_up_model),
// serving requests (the engine's busy loop with no dummy run under it). The sampler's dummy run
// (`sampling_metadata=dummy_metadata`) runs in both the profile (V1's profile_run calls it) and the
// warm-up: `sampler` says it was the sampler, `when` which of the two, if the frames show it.
enum class VllmPhase { kUnknown, kProfile, kWarmup, kServing };
struct VllmWhere {
  VllmPhase when = VllmPhase::kUnknown;
  bool sampler = false;
};
VllmWhere vllm_phase(const OomEvent& e) {
  const std::string from_lines = e.string_field("vllm_phase").value_or("");
  bool sampler = from_lines == "sampler", profile = false, warmup = false, serving = from_lines == "serving";
  const std::vector<TracebackFrame> none;
  for (const TracebackFrame& f : e.traceback ? e.traceback->frames : none) {
    // gpu_model_runner._dummy_sampler_run builds `dummy_metadata` for the sampler.
    if (f.function == "_dummy_sampler_run" || contains(f.code, "dummy_metadata")) sampler = true;
    if (f.function == "profile_run" || f.function == "determine_available_memory" ||
        f.function == "determine_num_available_blocks") {
      profile = true;
    }
    if (f.function == "compile_or_warm_up_model") warmup = true;
    if (f.function == "run_busy_loop" || f.function == "_process_engine_step" || f.function == "execute_model" ||
        f.function == "step" || f.function == "engine_step" || f.function == "_continuation_prefill" ||
        contains(f.file, "serving_chat") || contains(f.file, "serving_completion")) {
      serving = true;
    }
  }
  VllmWhere where{VllmPhase::kUnknown, sampler};
  if (profile) where.when = VllmPhase::kProfile;
  else if (warmup) where.when = VllmPhase::kWarmup;
  else if (serving && !sampler) where.when = VllmPhase::kServing;
  return where;
}

// The budget fix for a PyTorch allocation inside vLLM: the value in use (from its logs) 0.05 lower,
// or the defaults' 0.05 lower when the log does not say it.
Fix vllm_budget_fix(const VllmContext& v, std::string detail) {
  const bool known = v.gpu_memory_utilization && *v.gpu_memory_utilization > 0.15;
  return make_fix("vllm_gpu_memory_utilization", std::move(detail),
                  known ? "--gpu-memory-utilization " + utilization_text(*v.gpu_memory_utilization - 0.05)
                        : fmt::format("--gpu-memory-utilization {}  # {} with a vLLM before v0.21",
                                      utilization_text(kVllmDefaultGpuMemoryUtilization - 0.05),
                                      utilization_text(kVllmDefaultGpuMemoryUtilizationBeforeV021 - 0.05)));
}

// The ladder for a PyTorch allocation that failed inside a vLLM process (profiling run, CUDA-graph
// capture, sampler, a request's activations): memory outside the KV cache ran out, so give it room
// and shrink what uses it.
void add_vllm_ladder(Diagnosis& d, const OomEvent& e, const LogContext& context, bool graph_capture) {
  const VllmWhere where = graph_capture ? VllmWhere{} : vllm_phase(e);
  if (where.sampler || where.when == VllmPhase::kServing) {
    add_vllm_runtime_ladder(d, e, context, where);
    return;
  }
  const VllmContext v = vllm_context(context, e);
  const bool known = v.gpu_memory_utilization && *v.gpu_memory_utilization > 0.15;
  d.fixes.push_back(vllm_budget_fix(
      v, known ? fmt::format("vLLM's budget is {} of the card; lowering it by 0.05 leaves that much more for memory "
                             "outside the budget (activations, sampler, CUDA graphs, other processes).",
                             utilization_text(*v.gpu_memory_utilization))
               : fmt::format("Lower it by about 0.05 from the value in use (the default: {} from vLLM v0.21, {} before): "
                             "memory outside vLLM's budget (activations, sampler, CUDA graphs, other processes) ran out.",
                             utilization_text(kVllmDefaultGpuMemoryUtilization),
                             utilization_text(kVllmDefaultGpuMemoryUtilizationBeforeV021))));
  d.fixes.push_back(make_fix("vllm_max_num_seqs", "Fewer sequences at once shrink the activation peak, the sampler and "
                                                  "the CUDA-graph batch sizes."));
  d.fixes.push_back(make_fix("vllm_enforce_eager", "CUDA graphs take memory outside the KV cache (often 0.5-2 GiB)."));
  // During graph capture the KV cache is already allocated inside the budget: a shorter context
  // or an fp8 cache only gives more tokens, not room for the graphs.
  if (!graph_capture) {
    d.fixes.push_back(make_fix("vllm_max_model_len", "A shorter context shrinks the profiling run's activations."));
    d.fixes.push_back(make_fix("vllm_kv_cache_dtype", "fp8 halves the KV cache's bytes per token."));
  }
  d.fixes.push_back(make_fix("vllm_tensor_parallel", "Each GPU holds 1/N of the weights."));
  d.fixes.push_back(make_fix("vllm_quantized_weights", "An AWQ/GPTQ/FP8 checkpoint halves or quarters the weights."));
}

// A vLLM process that ran out while serving, or in the sampler's dummy run (the profile's or the
// warm-up's). Serving, the KV cache already holds gpu_memory_utilization of the card, so a shorter
// context or an fp8 cache only gives more tokens, not room: a smaller budget (room for the
// activations), smaller prefill chunks, fewer sequences at once. The sampler's dummy run takes the
// logits of max_num_seqs rows: fewer sequences first, as vLLM's own message says ("try lowering
// `max_num_seqs` or `gpu_memory_utilization`").
void add_vllm_runtime_ladder(Diagnosis& d, const OomEvent& e, const LogContext& context, const VllmWhere& where) {
  const VllmContext v = vllm_context(context, e);
  const bool known = v.gpu_memory_utilization && *v.gpu_memory_utilization > 0.15;
  const std::string share = known ? " (" + utilization_text(*v.gpu_memory_utilization) + " of the card)" : std::string();
  Fix budget = vllm_budget_fix(
      v, where.when == VllmPhase::kProfile
             ? "The profile run measures its peak before the KV cache is sized; a budget 0.05 lower leaves more of the "
               "card outside it."
             : fmt::format("The KV cache already took vLLM's budget{}; a budget 0.05 lower leaves that much of the card "
                           "to the activations.", share));
  Fix seqs = make_fix("vllm_max_num_seqs", where.sampler
                          ? "The sampler's dummy run takes the logits of max_num_seqs sequences (and their sort): fewer "
                            "sequences shrink it directly."
                          : "Fewer sequences at once shrink each step's activations and the sampler.");
  Fix chunks = make_fix("vllm_max_num_batched_tokens",
                        "The tokens scheduled in one step (a prefill chunk) bound its activations: fewer, smaller chunks.");
  // Their order here, whatever the catalogue's general one.
  std::vector<Fix> ladder = where.sampler ? std::vector<Fix>{seqs, budget} : std::vector<Fix>{budget, chunks, seqs};
  for (Fix& f : ladder) {
    f.cost_rank = 2;   // ahead of the catalogue's other vLLM flags, in this order (order_fixes is stable)
    d.fixes.push_back(std::move(f));
  }
  d.fixes.push_back(make_fix("vllm_enforce_eager", "CUDA graphs take memory outside the KV cache (often 0.5-2 GiB)."));
  d.fixes.push_back(make_fix("vllm_tensor_parallel", "Each GPU holds 1/N of the weights, leaving more for the rest."));
  if (!where.sampler) {
    d.evidence.push_back("The traceback is vLLM serving requests (the engine's step loop), not its startup profile: "
                         "the KV cache already holds its budget.");
  } else if (where.when == VllmPhase::kProfile) {
    d.evidence.push_back("The traceback is vLLM's sampler dummy run in its startup profile (the logits of max_num_seqs "
                         "sequences), before the KV cache is sized.");
  } else if (where.when == VllmPhase::kWarmup) {
    d.evidence.push_back("The traceback is vLLM's sampler warm-up (a dummy run over max_num_seqs sequences' logits), "
                         "after the KV cache was allocated.");
  } else {
    d.evidence.push_back("The traceback is vLLM's sampler dummy run (the logits of max_num_seqs sequences), in its "
                         "startup profile or the warm-up after it.");
  }
}

// text-generation-inference's own settings, cheapest first: fewer prefill tokens per batch (half
// the value in use when the log gives it), shorter requests, a quantized model, more shards.
void add_tgi_ladder(Diagnosis& d, std::optional<int64_t> prefill_tokens) {
  d.fixes.push_back(make_fix("tgi_max_batch_prefill_tokens",
                             "The prefill's activations grow with the tokens batched into one prefill.",
                             prefill_tokens && *prefill_tokens >= 4
                                 ? fmt::format("--max-batch-prefill-tokens {0} --max-input-tokens {1} --max-total-tokens {0}"
                                               "  # half of {2}; TGI needs prefill tokens >= input tokens < total tokens",
                                               *prefill_tokens / 2, *prefill_tokens / 2 - 1, *prefill_tokens)
                                 : std::string()));
  d.fixes.push_back(make_fix("tgi_max_total_tokens", "A shorter longest request needs less of the KV cache and of the prefill."));
  d.fixes.push_back(make_fix("tgi_quantize", "4-bit weights leave about three quarters of their memory to the KV cache."));
  d.fixes.push_back(make_fix("tgi_num_shard", "Each GPU then holds 1/N of the weights."));
}

// The ladder for a PyTorch allocation that failed inside an SGLang server, in SGLang's own flags and
// the order its troubleshooting page and its capture failure give them: while capturing CUDA
// graphs, a smaller static pool, graphs for smaller batches, no graphs; while serving, smaller
// prefill chunks (a prefill OOM), fewer running requests (a decode OOM), a smaller static pool.
// With the share in use known (`fraction`), the step is concrete: 0.05 lower, as for vLLM's
// --gpu-memory-utilization.
void add_sglang_ladder(Diagnosis& d, bool graph_capture, std::optional<double> fraction) {
  std::string why = graph_capture ? "The static pool (weights and KV cache) is allocated before the graphs are "
                                    "captured: a smaller share leaves them room."
                                  : "The static pool (weights and KV cache) takes its share of the card first: "
                                    "a smaller share leaves room for activations.";
  if (fraction && *fraction > 0.15) {
    const std::string lower = utilization_text(*fraction - 0.05);
    d.fixes.push_back(make_fix("sglang_lower_mem_fraction",
                               fmt::format("Lower --mem-fraction-static from {} (the value this server ran with) to {}. {}",
                                           fraction_as_given(*fraction), lower, why),
                               "--mem-fraction-static " + lower));
  } else {
    d.fixes.push_back(make_fix("sglang_lower_mem_fraction", why));
  }
  if (graph_capture) {
    d.fixes.push_back(make_fix("sglang_cuda_graph_max_bs", "Each captured batch size keeps its own buffers; the largest "
                                                           "ones take the most."));
    d.fixes.push_back(make_fix("sglang_disable_cuda_graph", "No capture at all, at a large cost in decoding speed."));
  } else {
    d.fixes.push_back(make_fix("sglang_chunked_prefill_size", "A long prompt's prefill activations grow with the chunk."));
    d.fixes.push_back(make_fix("sglang_max_running_requests", "Decoding activations grow with the requests running at once."));
  }
  d.fixes.push_back(make_fix("sglang_tensor_parallel", "Each GPU holds 1/N of the weights."));
}

// A process killed by SIGKILL (readers/formats/others.cpp): host RAM, told by the shell, a launcher,
// PyTorch's DataLoader or the kernel itself. The fixes are those for what the process was doing
// when the log says so (loading a checkpoint, a DataLoader worker), cheapest first.
// A kill while building software, not while running it: the compiler's own report, or a build
// step's exit status (BuildKit's `process "/bin/sh -c pip install flash-attn ..." did not complete
// successfully: exit code: 137`).
bool killed_while_building(const OomEvent& e, const std::string& operation) {
  if (e.string_field("kill_report") == "compiler" || operation == "building_package") return true;
  for (std::string_view step : {"pip install", "setup.py", "ninja", "cmake --build", "make -j"}) {
    if (e.message.find(step) != std::string::npos) return true;
  }
  return false;
}

void diagnose_killed(Diagnosis& d, const OomEvent& e, const std::string& operation, const LogContext& context) {
  d.cause = "killed_host_oom_suspected";
  const std::string report = e.string_field("kill_report").value_or("");
  const bool building = killed_while_building(e, operation);
  const bool kernel = report == "kernel_oom_killer" || e.field("kernel_report_line") != nullptr;
  const auto pid = e.int_field("pid");
  const auto anon = e.bytes("anon_rss");
  const auto shmem = e.bytes("shmem_rss");
  const bool dataloader = report == "dataloader_worker";
  const bool loading = operation == "model_loading";
  // A scheduler's own record: the job went over its memory limit, whatever the node has.
  // (The kernel's "Memory cgroup out of memory" is such a limit too: a container's or job's cgroup,
  // which the node's swap does not lift.)
  const bool scheduler_limit = report == "slurm" || report == "srun" || report == "kubernetes" || report == "docker" ||
                               e.field("memory_cgroup") != nullptr;
  if (scheduler_limit && e.field("memory_cgroup") == nullptr) {
    const auto exit_code = e.int_field("exit_code");
    const std::string who =
        report == "docker"
            ? "Docker reports the container OOMKilled: it went over its memory limit (docker run --memory) and the kernel "
              "ended it" + (exit_code ? fmt::format(" (exit code {}).", *exit_code) : std::string("."))
        : report == "kubernetes"
            ? "Kubernetes reports the container OOMKilled: it went over its memory limit (resources.limits.memory) and "
              "the kernel ended it" + (exit_code ? fmt::format(" (exit code {}).", *exit_code) : std::string("."))
            : e.bytes("job_memory_used") && e.bytes("job_memory_limit")
                ? fmt::format("Slurm killed the job: it used {} against its {} memory limit (--mem, --mem-per-cpu or "
                              "--mem-per-gpu).", format_bytes(*e.bytes("job_memory_used")),
                              format_bytes(*e.bytes("job_memory_limit")))
                : std::string("Slurm reports an OOM kill in the job step: a task went over the job's memory limit (--mem, "
                              "--mem-per-cpu or --mem-per-gpu) and the kernel ended it in the job's cgroup.");
    d.evidence.push_back(who + " Host (CPU) RAM ran out under that limit, not GPU memory.");
  } else if (kernel) {
    const std::string name = e.string_field("process_name").value_or("");
    std::string held;
    if (anon) {
      held = fmt::format(", which held {} of its own memory (anon-rss){}", format_bytes(*anon),
                         shmem && *shmem > 0 ? fmt::format(" and {} of shared memory (shmem-rss)", format_bytes(*shmem))
                                             : std::string());
    }
    d.evidence.push_back(fmt::format(
        "The kernel's OOM killer ended {}{}{}{}: host (CPU) RAM ran out{}, not GPU memory.",
        pid ? fmt::format("process {}", *pid) : std::string("a process"), name.empty() ? "" : " (" + name + ")", held,
        e.field("memory_cgroup") ? " in its memory cgroup" : "",
        e.field("memory_cgroup") ? " under the container's or job's limit" : ""));
  } else {
    std::string told;
    if (report == "shell") {
      told = "The shell reports the process Killed: it got SIGKILL and printed no error of its own.";
    } else if (dataloader) {
      told = fmt::format("A DataLoader worker{} was killed by SIGKILL: each worker is a process with memory of its own.",
                         pid ? fmt::format(" (pid {})", *pid) : std::string());
    } else if (report == "deepspeed_launcher") {
      told = "DeepSpeed's launcher reports its child exited with -9: killed by SIGKILL, with no error of its own.";
    } else if (report == "systemd") {
      told = fmt::format("systemd reports the kernel's OOM killer ended a process of {}.",
                         e.string_field("unit").value_or("the unit"));
    } else if (report == "exit_code") {
      told = e.int_field("exit_code") == -9
                 ? "Exit code -9: the process was killed by SIGKILL (signal 9), with no error of its own."
                 : "Exit code 137 is 128 + 9: the process was killed by SIGKILL, with no error of its own.";
    } else if (report == "compiler") {
      told = fmt::format("The compiler ({}) was killed by SIGKILL.", e.string_field("process_name").value_or("cc1plus"));
    } else if (report == "make") {
      told = "make reports a command it ran Killed: it got SIGKILL and printed no error of its own.";
    } else {
      told = "The process was killed with SIGKILL (signal 9) and printed no error of its own.";
    }
    d.evidence.push_back(
        told + (building ? " It happened building software: compiling CUDA extensions from source (flash-attn, "
                           "DeepSpeed's ops, xformers) runs a compiler per core, each taking several GB of host (CPU) "
                           "RAM, and the kernel's OOM killer ends one. `dmesg | grep -i 'killed process'` confirms it."
                         : " On Linux that is usually the kernel's OOM killer ending it for host (CPU) RAM (loading a "
                           "checkpoint, DataLoader workers, pinned buffers), or a scheduler's memory limit (Slurm, "
                           "Kubernetes OOMKilled). `dmesg | grep -i 'killed process'` (or the job's accounting) "
                           "confirms it."));
  }
  if (loading) d.evidence.push_back("It was killed while the checkpoint's shards were loading.");
  // A vLLM server killed after its V0 engine logged "# CPU blocks": it had just pinned --swap-space
  // GiB of host RAM per GPU for them; a transformers load or DataLoader is not what it runs. (V1 has
  // no swap space; a kill before that line is the load's.)
  const bool after_cpu_blocks = context.events != nullptr &&
      std::any_of(context.events->begin(), context.events->end(), [&](const OomEvent& x) {
        return x.framework == "vllm" && x.line < e.line && x.int_field("cpu_blocks").value_or(0) > 0;
      });
  if (e.string_field("application") == "vllm" && after_cpu_blocks) {
    d.fixes.push_back(make_fix("vllm_swap_space", "vLLM's V0 engine pins --swap-space GiB (default 4) of host RAM per "
                                                  "GPU for swapped KV blocks, the '# CPU blocks' it logs; V1 has no "
                                                  "swap space."));
    if (!scheduler_limit) {
      d.fixes.push_back(make_fix("add_swap", "A short peak (loading the weights) then pages out instead of ending "
                                             "the server."));
    }
    d.fixes.push_back(make_fix("more_host_memory", "vLLM's workers each hold their share of the weights in RAM while "
                                                   "they load, plus the swap space."));
    return;
  }
  if (building) {
    d.fixes.push_back(make_fix("build_max_jobs", "Fewer compiler jobs at once need less RAM at once."));
    d.fixes.push_back(make_fix("add_swap", "A build's peak then pages out instead of killing a compiler."));
    d.fixes.push_back(make_fix("more_host_memory", "Or build where there is more RAM (a prebuilt wheel needs none)."));
    return;
  }
  if (!dataloader) {
    d.fixes.push_back(make_fix("low_cpu_mem_usage",
                               loading ? "A plain load builds the model in RAM and reads the whole state dict beside it: "
                                         "about twice the weights at its peak, per process."
                                       : "Every process that loads the model holds its own copy in RAM while it loads "
                                         "(each rank under torchrun or DeepSpeed): load without the extra copy."));
  }
  if (!loading) {
    d.fixes.push_back(make_fix("fewer_dataloader_workers",
                               dataloader ? "The killed process was a DataLoader worker: each one holds its own copy of "
                                            "the dataset object and prefetch_factor batches."
                                          : "Each DataLoader worker is a process with its own copy of the dataset object "
                                            "and its prefetched batches."));
  }
  // Swap is not the job's to add under a scheduler's limit.
  if (!scheduler_limit) {
    d.fixes.push_back(make_fix("add_swap", "A short peak (loading, saving a checkpoint) then pages out instead of ending "
                                           "the run; a lasting one only gets slow."));
  }
  // Slurm's figures give the limit to ask for: a quarter above what the job used, in whole GiB
  // (Slurm's G is 1024^3).
  if (const auto used = e.bytes("job_memory_used"); used && report == "slurm") {
    const uint64_t gib = (*used / 4 * 5 + (1ull << 30) - 1) >> 30;
    d.fixes.push_back(make_fix("more_host_memory",
                               fmt::format("The job used {}: a limit a quarter above it leaves room for the peak.",
                                           format_bytes(*used)),
                               fmt::format("#SBATCH --mem={}G  # or srun --mem={}G; the job used {}", gib, gib,
                                           format_bytes(*used))));
    return;
  }
  const uint64_t resident = anon.value_or(0) + shmem.value_or(0);
  d.fixes.push_back(make_fix("more_host_memory",
                             resident > 0 ? fmt::format("The process held {} when it was killed: the machine, or the "
                                                        "job's memory limit, needs more than that beside everything "
                                                        "else it runs.", format_bytes(resident))
                                          : "When the peak is real: more RAM, or a higher limit for the job."));
}

// A CUDA call that failed outside PyTorch's caching allocator (`CUDA error: out of memory`, the
// driver's CUDA_ERROR_OUT_OF_MEMORY) in a PyTorch program: no figures, so the first steps find the
// call and who holds the card; then the step every program has.
void add_driver_oom_ladder(Diagnosis& d, const std::string& operation) {
  d.fixes.push_back(make_fix("end_other_processes",
                             operation.empty() || operation == "model_loading"
                                 ? "A full card at startup means other processes hold it."
                                 : fmt::format("It failed mid-run ({}): other processes' memory is missing here too.",
                                               operation)));
  d.fixes.push_back(make_fix("check_device_and_limits", "The call may have run on another device than intended, or "
                                                        "under a per-process memory fraction."));
  d.fixes.push_back(make_fix("cuda_launch_blocking", "CUDA reports errors asynchronously: without it the traceback can "
                                                     "point at a later call than the one that ran out of memory."));
  d.fixes.push_back(make_fix("no_caching_allocator_debug",
                             "Memory PyTorch keeps cached for reuse is not given to a CUDA call outside its allocator "
                             "(a library workspace, a kernel's launch, a new context): a run without the cache shows "
                             "whether that is the memory the call lacked."));
  d.fixes.push_back(make_fix("smaller_batch", "Smaller batches lower the peak everything on the card shares."));
}

// The catalogue's webui snippet (COMMANDLINE_ARGS=--medvram ...) with another flag in its place.
std::string webui_args_with(std::string_view flag) {
  std::string snippet(fix_snippet("webui_low_vram", FixVariant::kDefault));
  if (size_t at = snippet.find("--medvram"); at != std::string::npos) snippet.replace(at, 9, flag);
  return snippet;
}

// ComfyUI's and AUTOMATIC1111's webui's own settings, with the flag the card's size calls for.
void add_image_ui_ladder(Diagnosis& d, const OomEvent& e, const MemoryBreakdown& m, const std::string& app,
                         const std::string& size_detail) {
  // VAE decoding of the whole image at once is the usual last-step OOM; the tiled decoder bounds it.
  bool decoding = false;
  if (e.traceback) {
    for (const TracebackFrame& f : e.traceback->frames) {
      if (f.function.find("decode") != std::string::npos || f.code.find("decode") != std::string::npos) decoding = true;
    }
  }
  if (app == kAppComfyUi) {
    // One block over the runtime's per-allocation limit: loading models in parts does not split it;
    // the image (or batch) that makes that block does.
    const bool one_block_limit = d.cause == "allocation_size_limit";
    if (one_block_limit) {
      d.fixes.push_back(make_fix("smaller_image", size_detail.empty()
                                                      ? "One block is over the runtime's single-allocation limit: a "
                                                        "smaller image, batch or frame count shrinks it."
                                                      : size_detail));
    }
    // (Off NVIDIA the snippet is the catalogue's AMD/Intel variant, applied with the other vendor fixes.)
    if (!one_block_limit) d.fixes.push_back(make_fix("comfyui_lowvram", m.total ? fmt::format("ComfyUI keeps whole models on the {} card; "
                                                                        "low-VRAM mode loads them in parts.",
                                                                        format_bytes(*m.total))
                                                          : std::string("ComfyUI keeps whole models on the card; "
                                                                        "low-VRAM mode loads them in parts.")));
    if (decoding) d.fixes.push_back(make_fix("comfyui_tiled_vae", "It failed decoding the image: the tiled decoder bounds that peak."));
    if (!one_block_limit) {
      d.fixes.push_back(make_fix("smaller_image", size_detail.empty()
                                                      ? "Activations grow with the latent size, the batch and the frame count."
                                                      : size_detail));
    }
    d.fixes.push_back(make_fix("comfyui_fp8_weights", "fp8 weights take half of fp16/bf16."));
  } else {
    // The webui's wiki: --medvram for cards above 4 GB, --lowvram for 4 GB and smaller.
    const bool small_card = m.total && *m.total <= 4608 * kMiB;
    const std::string flag = small_card ? "--lowvram" : "--medvram";
    d.fixes.push_back(make_fix("webui_low_vram",
                               m.total ? fmt::format("On {} card: {} keeps only the part of the model in use on the GPU.",
                                                     with_article(format_bytes(*m.total)), flag)
                                       : flag + " keeps only the part of the model in use on the GPU.",
                               small_card ? webui_args_with("--lowvram") : std::string()));
    d.fixes.push_back(make_fix("smaller_image", !size_detail.empty() ? size_detail
                                                : decoding ? "It failed decoding the image: a smaller size or batch shrinks that peak."
                                                           : "Activations grow with the image size and the batch."));
  }
}

// PaddlePaddle (readers/formats/paddle.cpp): its message gives the request and what was available
// (and, from 2.x, what was allocated on the GPU), not what this process holds, so the first step is
// the one Paddle's own message asks for: whether another process uses the card. The fixes are
// Paddle's settings.
void diagnose_paddle(Diagnosis& d, const OomEvent& e, const MemoryBreakdown& m) {
  auto paddle_fix = [&](std::string_view id, std::string detail) {
    d.fixes.push_back(make_fix(id, std::move(detail), std::string(fix_snippet(id, FixVariant::kPaddle))));
  };
  const uint64_t requested = m.requested.value_or(0);
  const uint64_t free = m.free.value_or(0);
  std::string shortfall;
  if (m.requested && m.free && requested > free) {
    shortfall = fmt::format("The request is {} with {} available: the peak must drop by at least {}. ",
                            format_bytes(requested), format_bytes(free), format_bytes(requested - free));
  }
  if (e.format == "paddle_enforce_allocating") {
    // platform/gpu_info.cc GpuMaxChunkSize: at startup Paddle sizes its first chunk as
    // FLAGS_fraction_of_gpu_memory_to_use of the card and checks it against the free memory, before
    // this process has allocated anything: the memory missing is held by others.
    d.cause = "other_processes";
    d.secondary_causes.push_back("framework_preallocation");
    d.evidence.push_back(fmt::format(
        "At startup Paddle reserves a share of the card (FLAGS_fraction_of_gpu_memory_to_use) before it allocates "
        "anything: it wanted {} but only {} was available, so other processes already held the rest of the card.",
        format_bytes(requested), format_bytes(free)));
    d.fixes.push_back(make_fix("end_other_processes", "Another process (a second run, a notebook) holds the card."));
    paddle_fix("check_device_and_limits", "Start on a GPU nothing else uses.");
    d.fixes.push_back(make_fix("paddle_fraction",
                               fmt::format("To share the card, lower the share Paddle reserves until it fits in the {} "
                                           "available.", format_bytes(free)),
                               "export FLAGS_fraction_of_gpu_memory_to_use=0.1  # the share of the whole card reserved at "
                               "startup: lower than what is free"));
    return;
  }
  if (auto limit = e.int_field("gpu_memory_limit_mb")) {
    d.cause = "memory_fraction_limit";
    d.evidence.push_back(fmt::format("FLAGS_gpu_memory_limit_mb caps Paddle at {} MiB on this card: the {} request passed "
                                     "that cap with {} left under it.", *limit, format_bytes(requested), format_bytes(free)));
    d.fixes.push_back(make_fix("paddle_memory_limit", "The cap, not the card, ran out: raise it if the card has room."));
  } else if (m.requested && m.free && free >= requested + std::max<uint64_t>(64 * kMiB, requested / 10)) {
    d.cause = "free_exceeds_request_yet_failed";
    d.evidence.push_back(fmt::format("{} was available, more than the {} requested, yet the allocation failed.",
                                     format_bytes(free), format_bytes(requested)));
  } else {
    d.cause = "capacity_exhausted";
    d.capacity_title = m.free && free == 0 ? "the card was full (Paddle saw 0 B available)"
                                           : "the card had less available than the request";
    d.evidence.push_back(fmt::format("Paddle could not allocate {}{}: only {} was available{}.", format_bytes(requested),
                                     e.device ? fmt::format(" on GPU {}", *e.device) : std::string(), format_bytes(free),
                                     e.bytes("gpu_allocated")
                                         ? fmt::format(", with {} allocated", format_bytes(*e.bytes("gpu_allocated")))
                                         : std::string()));
  }
  d.evidence.push_back("Paddle's message does not say how much of the card this process holds: nvidia-smi shows whether "
                       "another process (a second worker or service process on the same GPU, a stale run) holds the rest.");
  d.fixes.push_back(make_fix("end_other_processes", "Paddle's own message asks for this first: several workers or "
                                                    "processes started on one GPU each take their share."));
  paddle_fix("check_device_and_limits", "Run on a GPU nothing else uses.");
  if (const FieldValue* f = e.field("fraction_of_gpu_memory_to_use"); f && std::holds_alternative<double>(*f)) {
    const double fraction = std::get<double>(*f);
    // naive_best_fit's pool: Paddle 1.x suggests a larger share; at 0.95 and above none is left to give.
    if (fraction < 0.95) {
      const std::string higher = fmt::format("{:.2f}", std::min(0.95, std::floor(fraction * 100.0 + 1e-6) / 100.0 + 0.05));
      d.fixes.push_back(make_fix("paddle_fraction",
                                 fmt::format("Paddle ran with {:.2f} of the card reserved: when nothing else uses the card, "
                                             "{} gives its pool more.", fraction, higher),
                                 "export FLAGS_fraction_of_gpu_memory_to_use=" + higher));
    } else {
      d.evidence.push_back(fmt::format("FLAGS_fraction_of_gpu_memory_to_use is already {:.2f}: a larger share has "
                                       "nothing more to give.", fraction));
    }
    d.fixes.push_back(make_fix("paddle_eager_delete", "Variables no later op needs are freed at once instead of "
                                                      "staying until the scope ends."));
  }
  d.fixes.push_back(make_fix("paddle_auto_growth", "With several processes on one card, each reserving a share up front "
                                                   "(naive_best_fit) leaves the others nothing; auto_growth takes only "
                                                   "what each needs."));
  paddle_fix("smaller_input", shortfall + "Activations scale with the batch; halve it.");
  d.fixes.push_back(make_fix("bigger_gpu", "When one process alone needs more than the card."));
}

// MXNet's pooled allocator could not get memory from cudaMalloc (no figures): who holds the card,
// then MXNet's own memory settings, then a smaller batch.
void diagnose_mxnet(Diagnosis& d, const OomEvent& e) {
  d.cause = "driver_oom_no_details";
  d.evidence.push_back(std::string("MXNet's GPU memory pool asked cudaMalloc for more memory and the driver refused") +
                       (e.field("retried") ? ", again after the pool released its cached buffers" : "") +
                       ": the card was full. The message gives no figures.");
  d.fixes.push_back(make_fix("end_other_processes", "Memory other processes hold is missing from MXNet's pool."));
  d.fixes.push_back(make_fix("mxnet_cudnn_autotune", "Autotuning runs every convolution algorithm once, some with large "
                                                     "workspaces, at the first batch."));
  d.fixes.push_back(make_fix("mxnet_pool_round", "The default pool reuses a cached buffer only for the exact same size."));
  d.fixes.push_back(make_fix("mxnet_pool_reserve", "When the failure comes from a kernel launch or a cuDNN handle rather "
                                                   "than an array, the memory outside the pool is what ran out."));
  d.fixes.push_back(make_fix("smaller_input", "Activations scale with the batch; halve it.",
                             std::string(fix_snippet("smaller_input", FixVariant::kMxnet))));
  d.fixes.push_back(make_fix("bigger_gpu", "When one batch alone needs more than the card."));
}

// TensorRT (readers/formats/tensorrt.cpp): the builder's tactic warning is no failure; a fatal
// "Error Code 2: OutOfMemory" or its allocator's CUDA error is, without figures.
void diagnose_tensorrt(Diagnosis& d, const OomEvent& e) {
  const auto requested = e.bytes("requested");
  const FixVariant variant = e.field("deepstream") ? FixVariant::kDeepStream : FixVariant::kDefault;
  auto trt_fix = [&](std::string_view id, std::string detail) {
    d.fixes.push_back(make_fix(id, std::move(detail), std::string(fix_snippet(id, variant))));
  };
  if (!e.is_error) {
    d.cause = "warning_non_fatal";
    d.evidence.push_back(fmt::format(
        "TensorRT's builder could not allocate {} for one tactic's workspace and skipped that tactic: it goes on with "
        "the others and the engine still builds (perhaps with a slower tactic). This is a warning, not a failure.",
        requested ? format_bytes(*requested) : std::string("the memory")));
    trt_fix("tensorrt_workspace",
            requested ? fmt::format("Only to stop the builder trying tactics the card cannot hold: a workspace limit "
                                    "below {} skips them without the warning.", format_bytes(*requested))
                      : std::string("Only to stop the builder trying tactics the card cannot hold."));
    return;
  }
  d.cause = "driver_oom_no_details";
  const std::string source = e.string_field("source").value_or(e.string_field("cuda_call").value_or(""));
  d.evidence.push_back(fmt::format(
      "TensorRT ran out of GPU memory{}{}: the builder's workspace and tactics, the engine's weights and activations, "
      "and other processes share the card. The message gives no figures.",
      source.empty() ? "" : " (" + source + ")", e.string_field("severity") == "F" ? ", a fatal error" : ""));
  d.fixes.push_back(make_fix("end_other_processes", "Memory other processes hold is missing to TensorRT too."));
  trt_fix("tensorrt_workspace", "A smaller workspace leaves the rest of the card to the engine.");
  trt_fix("tensorrt_smaller_shapes", "The engine's activation memory is sized for the profile's largest shapes.");
  d.fixes.push_back(make_fix("bigger_gpu", "When the engine alone needs more than the card."));
}

// DirectML (torch-directml): the GPU's video memory ran out; Windows' tools find who holds it.
void diagnose_directml(Diagnosis& d, const OomEvent& e, const MemoryBreakdown& m) {
  d.cause = "capacity_exhausted";
  if (e.format == "directml_alloc") {
    d.evidence.push_back(fmt::format("DirectML could not allocate {} tensor: the GPU's video memory was used up.",
                                     with_article(format_bytes(m.requested.value_or(0)))));
  } else {
    d.evidence.push_back(std::string("DirectML's heap allocator ran out of video memory") +
                         (e.field("hresult") ? "; the error raised after it, -2147024882, is HRESULT 0x8007000E, "
                                               "E_OUTOFMEMORY."
                                             : "."));
  }
  d.fixes.push_back(make_fix("end_other_processes", "Other programs' video memory is missing here.",
                             std::string(fix_snippet("end_other_processes", FixVariant::kDirectMl))));
  d.fixes.push_back(make_fix("smaller_input", "Smaller batches, images or sequences need smaller tensors."));
  d.fixes.push_back(make_fix("bigger_gpu", "When one step alone needs more than the card."));
}

// The runtime's words are the same under JAX, TensorFlow and PyTorch/XLA: unless PyTorch/XLA named
// itself, a TPU fix's snippet gives both.
std::string tpu_release_snippet(bool torch_xla) {
  return torch_xla ? "loss_sum += loss.item()  # host values, not XLA tensors kept across steps; del tensors no longer needed"
                   : "metrics.append(jax.device_get(m))  # JAX: host copies, not device arrays kept across steps; "
                     "PyTorch/XLA: loss.item(), t.cpu(); del arrays no longer needed";
}

std::string tpu_bf16_snippet(bool torch_xla) {
  return torch_xla ? "model.to(torch.bfloat16)  # and bf16 inputs; older torch_xla: XLA_USE_BF16=1"
                   : "dtype=jnp.bfloat16, param_dtype=jnp.bfloat16  # flax modules; PyTorch/XLA: model.to(torch.bfloat16)";
}

// The TPU runtime could not reserve a program's memory at the bottom of HBM (readers/formats/xla.cpp):
// with free memory above the request but too little of it reservable, buffers that outlive a step
// fragment HBM; with too little free, what is allocated plus the program does not fit.
void diagnose_tpu_reserve(Diagnosis& d, const OomEvent& e, const MemoryBreakdown& m) {
  const uint64_t requested = m.requested.value_or(0), free = m.free.value_or(0);
  const auto reservable = e.bytes("reservable");
  const bool torch_xla = e.framework == "torch_xla";
  if (m.requested && m.free && reservable && free >= requested && requested > *reservable) {
    d.cause = "fragmentation";
    d.evidence.push_back(fmt::format(
        "The TPU had {} free, more than the {} the program needs, but only {} of it reservable at the bottom of HBM, "
        "where the program's memory must go in one piece: buffers that live across steps sit in the way.",
        format_bytes(free), format_bytes(requested), format_bytes(*reservable)));
    d.fixes.push_back(make_fix("release_references", "Fewer buffers kept from step to step leave the bottom of HBM free.",
                               tpu_release_snippet(torch_xla)));
    d.fixes.push_back(make_fix("smaller_input", fmt::format("A smaller per-device batch shrinks the program's {} below "
                                                            "the {} reservable.", format_bytes(requested),
                                                            format_bytes(*reservable))));
    return;
  }
  d.cause = "capacity_exhausted";
  const auto allocated = e.bytes("hbm_allocated");
  d.capacity_title = "the TPU's HBM could not hold the program beside what was already allocated";
  d.evidence.push_back(fmt::format("The TPU runtime could not reserve {} for the program: {} was free{}{}.",
                                   format_bytes(requested), format_bytes(free),
                                   allocated ? fmt::format(", {} already allocated", format_bytes(*allocated)) : "",
                                   m.total ? fmt::format(" of {} HBM", format_bytes(*m.total)) : ""));
  d.fixes.push_back(make_fix("release_references", "Buffers kept from earlier steps (outputs, metrics, a second copy of "
                                                   "the weights) are what is allocated beside the program.",
                             tpu_release_snippet(torch_xla)));
  d.fixes.push_back(make_fix("smaller_input", "A smaller per-device batch shrinks the program's activations and temporaries."));
  d.fixes.push_back(make_fix("mixed_precision", "bf16 parameters and activations take half of fp32.", tpu_bf16_snippet(torch_xla)));
}

// The TPU runtime could not allocate one device buffer in an HBM (readers/formats/xla.cpp): less free
// than the buffer is a full HBM; as much free or more, yet refused, is free memory in pieces.
void diagnose_tpu_alloc(Diagnosis& d, const OomEvent& e, const MemoryBreakdown& m) {
  const bool torch_xla = e.framework == "torch_xla";
  const std::string where = e.string_field("device_string").value_or("the TPU");
  if (m.requested && m.free && *m.free >= *m.requested) {
    d.cause = "fragmentation";
    d.evidence.push_back(fmt::format(
        "{} had {} free, as much as the {} buffer, yet could not place it: the free HBM is in pieces, between buffers "
        "that live across steps.", where, format_bytes(*m.free), format_bytes(*m.requested)));
    d.fixes.push_back(make_fix("release_references", "Fewer buffers kept from step to step leave HBM in larger pieces.",
                               tpu_release_snippet(torch_xla)));
    d.fixes.push_back(make_fix("smaller_input", "A smaller per-device batch needs smaller buffers."));
    return;
  }
  d.cause = "capacity_exhausted";
  std::string batch = "A smaller per-device batch shrinks the activations and temporaries.";
  if (m.requested && m.free) {
    d.capacity_title = fmt::format("the TPU's HBM had less free than the buffer ({} requested, {} free)",
                                   format_bytes(*m.requested), format_bytes(*m.free));
    d.evidence.push_back(fmt::format("The TPU runtime could not allocate {} buffer on {}: only {} was free, {} short.",
                                     with_article(format_bytes(*m.requested)), where, format_bytes(*m.free),
                                     format_bytes(*m.requested - *m.free)));
    batch = fmt::format("The buffer is {} with {} free: the peak must drop by at least {}. {}", format_bytes(*m.requested),
                        format_bytes(*m.free), format_bytes(*m.requested - *m.free), batch);
  } else {
    d.evidence.push_back(fmt::format("The TPU runtime could not allocate a device buffer on {}.", where));
  }
  d.fixes.push_back(make_fix("release_references", "Buffers kept from earlier steps (outputs, metrics, a second copy of "
                                                   "the weights) hold HBM the next step needs.",
                             tpu_release_snippet(torch_xla)));
  d.fixes.push_back(make_fix("smaller_input", batch));
  d.fixes.push_back(make_fix("mixed_precision", "bf16 parameters and activations take half of fp32.", tpu_bf16_snippet(torch_xla)));
}

// vLLM's figures say no KV cache fits at all: its budget left nothing or less for it (printed as
// "-2.35 GiB" or 0), the cache holds 0 tokens, or vLLM estimates the longest request that fits at 0
// tokens. No shorter --max-model-len helps then: only more memory for the cache does.
bool no_kv_room(const OomEvent& e) {
  return e.int_field("kv_available_bytes").value_or(0) < 0 || e.bytes("kv_available") == 0u ||
         e.int_field("kv_cache_tokens") == 0 || e.int_field("estimated_max_model_len") == 0;
}

void diagnose_vllm(Diagnosis& d, const OomEvent& e, const LogContext& context) {
  const VllmContext v = vllm_context(context, e);
  auto common_tail = [&](void) {
    // V0 (the "max seq len ... stored in KV cache" wording) captures CUDA graphs after sizing the
    // KV cache (vllm/worker/worker.py: determine_num_available_blocks, then capture_model): eager
    // mode gives the cache no more room there. From v0.21 the graphs' estimate comes out of the
    // budget first (docs/serve.md).
    // The V0 engine's frames (vllm/worker/, not vllm/v1/) say the same as its wording.
    bool v0_frames = false;
    if (e.traceback) {
      for (const auto& frame : e.traceback->frames) {
        if (frame.file.find("/vllm/worker/") != std::string::npos) v0_frames = true;
        if (frame.file.find("/vllm/v1/") != std::string::npos) {
          v0_frames = false;
          break;
        }
      }
    }
    if (e.format != "vllm_max_seq_len_gt_kv_tokens" && !v0_frames) {
      d.fixes.push_back(make_fix("vllm_enforce_eager", "From vLLM v0.21 the CUDA graphs' memory is taken out of the budget "
                                                       "before the KV cache is sized (often 0.5-2 GiB)."));
    }
    d.fixes.push_back(make_fix("vllm_tensor_parallel", "Each GPU holds 1/N of the weights, leaving more for the KV cache."));
    // A vLLM fix shows vLLM flags, never transformers code.
    d.fixes.push_back(make_fix("vllm_quantized_weights", "An AWQ/GPTQ/FP8 checkpoint halves or quarters the weights."));
    d.fixes.push_back(make_fix("vllm_cpu_offload", "Moves part of the weights to host memory."));
  };
  const bool kv_error = e.format == "vllm_max_seq_len_gt_kv_tokens" || e.format == "vllm_kv_needed_gt_available";
  if (kv_error && !no_kv_room(e)) {
    d.cause = "kv_cache_insufficient";
    auto max_len = e.int_field("max_model_len");
    if (auto tokens = e.int_field("kv_cache_tokens")) {
      d.evidence.push_back(fmt::format("The KV cache holds {} tokens, less than one request of max_model_len {}.",
                                       *tokens, max_len.value_or(0)));
      d.fixes.push_back(make_fix("vllm_max_model_len", fmt::format("The largest length that fits the KV cache is {} tokens.", *tokens),
                                 fmt::format("--max-model-len {}", *tokens)));
      if (max_len && *tokens * 2 >= *max_len) {
        d.fixes.push_back(make_fix("vllm_kv_cache_dtype", fmt::format(
            "fp8 halves the bytes per token: about {} tokens, enough for {}.", *tokens * 2, *max_len)));
      } else {
        d.fixes.push_back(make_fix("vllm_kv_cache_dtype", "fp8 halves the bytes per token (about twice the tokens)."));
      }
      if (v.gpu_memory_utilization && v.total_gpu_memory && v.kv_cache && max_len && *tokens > 0) {
        const double per_token = static_cast<double>(*v.kv_cache) / static_cast<double>(*tokens);
        const double missing = per_token * static_cast<double>(*max_len - *tokens);
        const double u = *v.gpu_memory_utilization + missing / static_cast<double>(*v.total_gpu_memory);
        if (u <= 0.98) {
          d.fixes.push_back(make_fix("vllm_gpu_memory_utilization",
                                     fmt::format("About {} more KV cache is needed; only if nothing else uses the card.",
                                                 format_bytes(static_cast<uint64_t>(missing))),
                                     "--gpu-memory-utilization " + utilization_up(u)));
        }
      }
    }
    if (auto needed = e.bytes("kv_needed")) {
      auto available = e.bytes("kv_available");
      d.evidence.push_back(fmt::format("One request of {} tokens needs {} of KV cache; {} is available.",
                                       max_len.value_or(0), format_bytes(*needed),
                                       available ? format_bytes(*available) : std::string("none")));
      if (auto estimated = e.int_field("estimated_max_model_len")) {
        d.fixes.push_back(make_fix("vllm_max_model_len", fmt::format("vLLM's own estimate of the longest length that fits is {}.", *estimated),
                                   fmt::format("--max-model-len {}", *estimated)));
      } else if (available && *available > 0 && max_len && *max_len > 0) {
        // The KV cache grows linearly with the length: the share of it that is available, rounded
        // down to whole blocks of vLLM's default size.
        constexpr auto kBlock = static_cast<int64_t>(kVllmDefaultBlockSize);
        const auto fits = static_cast<int64_t>(static_cast<double>(*max_len) * static_cast<double>(*available) /
                                               static_cast<double>(*needed)) / kBlock * kBlock;
        if (fits > 0) {
          d.fixes.push_back(make_fix("vllm_max_model_len", fmt::format("{} of the {} needed is available: about {} tokens fit.",
                                                                       format_bytes(*available), format_bytes(*needed), fits),
                                     fmt::format("--max-model-len {}", fits)));
        }
      }
      if (available && *available * 2 >= *needed) {
        d.fixes.push_back(make_fix("vllm_kv_cache_dtype", fmt::format("fp8 needs about {}, which the {} available covers.",
                                                                      format_bytes(*needed / 2), format_bytes(*available))));
      } else {
        d.fixes.push_back(make_fix("vllm_kv_cache_dtype", "fp8 halves the KV cache per token."));
      }
      if (available && v.gpu_memory_utilization && v.total_gpu_memory) {
        const double u = *v.gpu_memory_utilization +
                         static_cast<double>(*needed - std::min(*needed, *available)) / static_cast<double>(*v.total_gpu_memory);
        if (u <= 0.98) {
          d.fixes.push_back(make_fix("vllm_gpu_memory_utilization", "Only if nothing else uses the card.",
                                     "--gpu-memory-utilization " + utilization_up(u)));
        }
      }
    }
    d.fixes.push_back(make_fix("vllm_gpu_memory_utilization", "Raise it only if nothing else uses the card."));
    common_tail();
  } else if (kv_error || e.format == "vllm_no_cache_blocks" || (e.format == "vllm_memory_info" && e.is_error)) {
    // The startup accounting's own figures that say no KV cache fits (readers/formats/vllm.cpp), or
    // an insufficient-KV error whose figures say the same (no_kv_room).
    d.cause = "no_kv_cache_memory";
    // What the budget left for the cache, as the accounting ("kv_cache") or the error ("kv_available") prints it.
    for (const std::string name : {"kv_cache", "kv_available"}) {
      if (auto kv = e.int_field(name + "_bytes"); kv && *kv < 0) {
        d.evidence.push_back(fmt::format("vLLM's budget minus weights and the profiling peak leaves {} for the KV cache: "
                                         "the budget is {} too small for even an empty cache.",
                                         format_signed_bytes(*kv), format_bytes(static_cast<uint64_t>(-*kv))));
        break;
      }
      if (const Quantity* q = e.quantity(name); q && q->bytes == 0) {
        d.evidence.push_back(fmt::format("vLLM's budget minus weights and the profiling peak leaves {} for the KV cache: "
                                         "nothing for even one block.", q->text));
        break;
      }
    }
    if (e.int_field("gpu_blocks") == 0) d.evidence.push_back("vLLM allocated 0 GPU blocks for the KV cache.");
    if (e.int_field("kv_cache_tokens") == 0) d.evidence.push_back("The KV cache holds 0 tokens.");
    if (auto needed = e.bytes("kv_needed")) {
      d.evidence.push_back(fmt::format("One request of {} tokens needs {} of KV cache.", e.int_field("max_model_len").value_or(0),
                                       format_bytes(*needed)));
    }
    if (e.int_field("estimated_max_model_len") == 0) {
      d.evidence.push_back("vLLM estimates the longest request that fits at 0 tokens: no shorter --max-model-len helps, "
                           "only more memory for the KV cache.");
    }
    if (const FieldValue* c = e.field("max_concurrency"); c && std::holds_alternative<double>(*c) && std::get<double>(*c) <= 0.0) {
      d.evidence.push_back(fmt::format("Maximum concurrency for {} tokens per request is {:.2f}x: not one request fits.",
                                       e.int_field("concurrency_tokens_per_request").value_or(0), std::get<double>(*c)));
    }
    if (v.usable_budget && v.weights) {
      uint64_t used = *v.weights + v.non_torch.value_or(0) + v.activation_peak.value_or(0);
      d.evidence.push_back(fmt::format("Weights {} + non-torch {} + activations {} = {} of {} budget leave nothing for the KV cache.",
                                       format_bytes(*v.weights), format_bytes(v.non_torch.value_or(0)),
                                       format_bytes(v.activation_peak.value_or(0)), format_bytes(used),
                                       with_article(format_bytes(*v.usable_budget))));
      if (v.total_gpu_memory) {
        // Room for at least a little cache: 1 GiB more than what is used.
        const double u = static_cast<double>(used + kGiB) / static_cast<double>(*v.total_gpu_memory);
        if (u <= 0.98) {
          d.fixes.push_back(make_fix("vllm_gpu_memory_utilization", "Leaves about 1 GiB for the KV cache; only if nothing else uses the card.",
                                     "--gpu-memory-utilization " + utilization_up(u)));
        }
      }
    } else {
      d.evidence.push_back("After weights and the profiling run, the memory budget left nothing for KV cache blocks.");
    }
    d.fixes.push_back(make_fix("vllm_gpu_memory_utilization", "A larger share of the card for this instance."));
    std::string fewer_seqs = "Fewer sequences and a smaller --max-num-batched-tokens shrink the profiling run's activation peak.";
    if (v.usable_budget && v.weights && v.activation_peak) {
      const uint64_t used = *v.weights + v.non_torch.value_or(0) + *v.activation_peak;
      if (used > *v.usable_budget && used - *v.usable_budget >= *v.activation_peak) {
        fewer_seqs = fmt::format("The profiling run's activation peak is {}, less than the {} missing: fewer sequences "
                                 "alone cannot make room; combine it with another fix.",
                                 format_bytes(*v.activation_peak), format_bytes(used - *v.usable_budget));
      }
    }
    d.fixes.push_back(make_fix("vllm_max_num_seqs", fewer_seqs));
    common_tail();
  } else if (e.format == "vllm_sampler_warmup_oom") {
    d.cause = "sampler_warmup_oom";
    auto n = e.int_field("dummy_requests").value_or(0);
    d.evidence.push_back(fmt::format("The sampler warm-up with {} dummy requests ran out of memory after the KV cache was allocated.", n));
    d.fixes.push_back(make_fix("vllm_max_num_seqs", "The warm-up samples max_num_seqs requests at once.",
                               fmt::format("--max-num-seqs {}", std::max<int64_t>(1, n / 2))));
    d.fixes.push_back(make_fix("vllm_gpu_memory_utilization",
                               v.gpu_memory_utilization
                                   ? "Lower, to leave room outside the KV cache for the sampler."
                                   : "Lower it by about 0.05, to leave room outside the KV cache for the sampler.",
                               v.gpu_memory_utilization ? "--gpu-memory-utilization " + utilization_text(*v.gpu_memory_utilization - 0.05)
                                                        : std::string()));
  } else if (e.format == "vllm_startup_free_memory") {
    auto free = e.bytes("free");
    auto total = e.bytes("total");
    auto desired = e.bytes("requested");
    if (!e.is_error) {
      d.cause = "not_an_error";
      if (free && desired) {
        d.evidence.push_back(fmt::format("{} free at startup covers the {} budget.", format_bytes(*free), format_bytes(*desired)));
      }
      return;
    }
    d.cause = "startup_free_memory_below_budget";
    if (free && total && desired) {
      d.evidence.push_back(fmt::format("Only {} of {} was free at startup, less than the {} budget: something else holds {}.",
                                       format_bytes(*free), format_bytes(*total), format_bytes(*desired),
                                       format_bytes(*total - std::min(*total, *free))));
      const double u = static_cast<double>(*free) / static_cast<double>(*total) - 0.01;
      d.fixes.push_back(make_fix("end_other_processes", "Another vLLM instance or a stale process holds the rest."));
      // Below a tenth of the card, a budget that fits what is free holds no model worth serving:
      // only freeing the card helps.
      constexpr double kSmallestUsefulUtilization = 0.1;
      if (u >= kSmallestUsefulUtilization) {
        d.fixes.push_back(make_fix("vllm_gpu_memory_utilization", "Fits what is free now (a per-instance fraction of the total).",
                                   "--gpu-memory-utilization " + utilization_text(u)));
      } else {
        d.evidence.push_back(fmt::format("{:.1f}% of the card is free: too little for any --gpu-memory-utilization, so the card "
                                         "must be freed first.", 100.0 * static_cast<double>(*free) / static_cast<double>(*total)));
      }
    }
  } else if (e.format == "vllm_memory_profiling_error") {
    d.cause = "other_processes";
    d.evidence.push_back("Free memory changed during vLLM's profiling: another process allocated or freed memory on the card.");
    d.fixes.push_back(make_fix("end_other_processes", "Start vLLM on a card nothing else is using."));
  } else {
    d.cause = "not_an_error";
  }
}

// llama.cpp's shorter context (-c) with the value the log allows: half the n_ctx it printed, and what
// that saves of the KV cache, which holds n_ctx cells of every layer (llama-kv-cache.cpp), so it
// halves with -c. Without n_ctx the catalogue's snippet says what N is.
Fix llama_context_fix(const OomEvent& e, std::string detail) {
  const auto n_ctx = e.int_field("llama_n_ctx");
  if (!n_ctx || *n_ctx < 512) return make_fix("ggml_smaller_context", std::move(detail));
  const int64_t half = *n_ctx / 2;
  std::optional<uint64_t> kv;
  if (auto bytes = e.int_field("llama_kv_cache_bytes"); bytes && *bytes > 0) kv = static_cast<uint64_t>(*bytes);
  if (!kv && e.string_field("llama_buffer") == "kv_cache") kv = e.bytes("requested");
  // Inside Ollama the setting is its num_ctx (fix_catalog's Ollama variant).
  const bool ollama = application(e) == kAppOllama;
  const std::string setting = fmt::format("{} {}", ollama ? "num_ctx" : "-c", half);
  detail += kv ? fmt::format(" The KV cache is {} at n_ctx {}: {} saves {} of it.", format_bytes(*kv), *n_ctx, setting,
                             format_bytes(*kv - *kv / 2))
               : fmt::format(" {} halves the KV cache of n_ctx {}.", setting, *n_ctx);
  return make_fix("ggml_smaller_context", std::move(detail),
                  *fix_snippet_with_value("ggml_smaller_context", ollama ? FixVariant::kOllama : FixVariant::kDefault,
                                          std::to_string(half), fmt::format("half the n_ctx {} the log shows", *n_ctx)));
}

// A smaller GGUF file: the next type down from the one the log shows (print_info's file type), none
// when it is already at the bottom of the ladder fit walks; a generic example when the log does not say.
std::optional<Fix> llama_quant_fix(const OomEvent& e, std::string_view room_for) {
  // Inside Ollama the file is a model tag (fix_catalog's Ollama variant; tags spell q4_K_M).
  const bool ollama = application(e) == kAppOllama;
  const auto current = e.string_field("llama_file_type");
  if (!current) {
    return make_fix("ggml_smaller_quant", fmt::format("A smaller quantization (Q4_K_M) leaves room for {}.", room_for),
                    ollama ? std::string(fix_snippet("ggml_smaller_quant", FixVariant::kOllama))
                           : std::string("a lower-bit GGUF (e.g. Q4_K_M); size any combination first: oomdoc fit MODEL "
                                         "--implementation llama_cpp --weight-quantization q4_k_m --prompt-len N --gpu NAME"));
  }
  const auto smaller = smaller_gguf_file_type(*current);
  if (!smaller) return std::nullopt;
  auto upper = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
  };
  std::string tag = *smaller == "f16" ? std::string("fp16") : *smaller;
  for (size_t i = tag.find('_'); i < tag.size(); ++i) tag[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(tag[i])));
  return make_fix("ggml_smaller_quant",
                  fmt::format("The model is {}; a {} file of it leaves room for {}.", upper(*current), upper(*smaller), room_for),
                  ollama ? fmt::format("ollama pull <model>:<tag>-{}  # the next quantization below {}", tag, upper(*current))
                         : fmt::format("a {} GGUF instead of {}; size it first: oomdoc fit MODEL --implementation llama_cpp "
                                       "--weight-quantization {} --prompt-len N --gpu NAME",
                                       upper(*smaller), upper(*current), *smaller));
}

}  // namespace

MemoryBreakdown breakdown(const OomEvent& e) {
  MemoryBreakdown m;
  m.total = e.bytes("total");
  m.free = e.bytes("free");
  m.requested = e.bytes("requested");
  auto allocated = e.bytes("allocated");
  auto reserved_total = e.bytes("reserved_total");
  m.reserved_unallocated = e.bytes("reserved_unallocated");
  if (!m.reserved_unallocated && reserved_total && allocated && *reserved_total >= *allocated) {
    m.reserved_unallocated = *reserved_total - *allocated;
  }
  if (reserved_total) {
    m.pytorch_reserved = reserved_total;
  } else if (allocated) {
    m.pytorch_reserved = *allocated + m.reserved_unallocated.value_or(0);
  }
  m.this_process = e.bytes("process");
  // Figures no card can show are left out of the sums, and said: a process holding more than the
  // whole card (NVML's "not available" placeholder prints as 17179869184.00 GiB, 2^64 bytes), or
  // "this process has 0 bytes" under what PyTorch itself reserves (a container that hides
  // per-process use). Printed figures are rounded: 1% of PyTorch's reserve is allowed.
  auto impossible_for_card = [&](uint64_t bytes) { return m.total && bytes > *m.total; };
  if (m.this_process && impossible_for_card(*m.this_process)) {
    m.ignored.push_back(fmt::format("\"This process has {}\" is more than the card's {}: a placeholder for a figure the "
                                    "driver could not read, so it is left out.", e.quantity("process")->text,
                                    format_bytes(*m.total)));
    m.this_process.reset();
  } else if (m.this_process && m.pytorch_reserved && *m.this_process + *m.pytorch_reserved / 100 < *m.pytorch_reserved) {
    m.ignored.push_back(fmt::format("\"This process has {}\" is less than the {} PyTorch itself reserves (a container "
                                    "that hides per-process use), so it is left out.", e.quantity("process")->text,
                                    format_bytes(*m.pytorch_reserved)));
    m.this_process.reset();
  }
  size_t impossible_listed = 0;
  for (const auto& p : e.other_processes) impossible_listed += impossible_for_card(p.memory.bytes) ? 1 : 0;
  if (impossible_listed > 0) {
    m.ignored.push_back(fmt::format("{} listed process{} more than the card's {}: placeholder{} for figures the driver could "
                                    "not read, left out.", impossible_listed, impossible_listed == 1 ? " holds" : "es hold",
                                    format_bytes(*m.total), impossible_listed == 1 ? "" : "s"));
  }
  // No "this process" line (a container: PyTorch does not know its own host PID) and one listed
  // process can be this one. With a single "Process P has M" line whose M is at least PyTorch's
  // reserve, it is. With several, when PyTorch's reserve and every listed process together exceed
  // what is used on the card (total - free), they cannot all be others: this process is the listed
  // one whose size is the closest above PyTorch's reserve.
  const OtherProcess* self = nullptr;
  if (!m.this_process && !e.other_processes.empty()) {
    if (e.other_processes.size() == 1) {
      if (!impossible_for_card(e.other_processes[0].memory.bytes) &&
          (!m.pytorch_reserved || e.other_processes[0].memory.bytes >= *m.pytorch_reserved)) {
        self = &e.other_processes[0];
      }
    } else if (m.pytorch_reserved && m.total && m.free && *m.total >= *m.free) {
      uint64_t listed = 0;
      for (const auto& p : e.other_processes) listed += impossible_for_card(p.memory.bytes) ? 0 : p.memory.bytes;
      if (*m.pytorch_reserved + listed > *m.total - *m.free) {
        for (const auto& p : e.other_processes) {
          if (impossible_for_card(p.memory.bytes)) continue;
          if (p.memory.bytes >= *m.pytorch_reserved && (self == nullptr || p.memory.bytes < self->memory.bytes)) self = &p;
        }
      }
    }
    if (self != nullptr) {
      m.likely_self_pid = self->pid;   // null when the printed pid did not fit
      m.this_process = self->memory.bytes;
    }
  }
  for (const auto& p : e.other_processes) {
    if (&p != self && !impossible_for_card(p.memory.bytes)) m.other_processes += p.memory.bytes;
  }
  // Only when the message says what this process holds: a message cut after "is free." leaves the
  // rest of the card unexplained, not held outside PyTorch.
  if (m.total && m.free && (m.this_process || m.pytorch_reserved)) {
    const uint64_t held = m.this_process.value_or(m.pytorch_reserved.value_or(0));
    // Printed figures are rounded (and a listed process may be this one): never below zero.
    m.unattributed = std::max<int64_t>(0, static_cast<int64_t>(*m.total) - static_cast<int64_t>(*m.free) -
                                              static_cast<int64_t>(held) - static_cast<int64_t>(m.other_processes));
  }
  if (m.this_process && m.pytorch_reserved) {
    m.non_pytorch_in_process =
        std::max<int64_t>(0, static_cast<int64_t>(*m.this_process) - static_cast<int64_t>(*m.pytorch_reserved));
  }
  return m;
}

ClimbFinding find_climbing(const std::vector<OomEvent>& events, const std::vector<MemoryReading>& readings) {
  ClimbFinding f;
  // Several OOMs on one device whose allocated memory grows each time.
  std::map<std::pair<int64_t, int64_t>, std::vector<const OomEvent*>> by_device;
  for (const auto& e : events) {
    if (e.is_error && e.bytes("allocated")) by_device[{e.device.value_or(-1), e.rank.value_or(-1)}].push_back(&e);
  }
  for (const auto& [key, series] : by_device) {
    if (series.size() < 2) continue;
    bool rising = true;
    for (size_t i = 1; i < series.size(); ++i) {
      if (*series[i]->bytes("allocated") < *series[i - 1]->bytes("allocated")) rising = false;
    }
    uint64_t first = *series.front()->bytes("allocated"), last = *series.back()->bytes("allocated");
    // A rise that could fill nothing is no leak: at least a twentieth of the card (256 MiB when the
    // message gives no total), as well as a tenth more than the first figure.
    const uint64_t total = series.back()->bytes("total").value_or(0);
    const uint64_t least_rise = total ? total / 20 : 256 * kMiB;
    if (rising && last > first + first / 10 && last - first >= least_rise) {
      f = {true, first, last, series.front()->line, series.back()->line, series.size(), "events"};
      return f;
    }
  }
  // Memory figures printed step after step: compare the first and last quarter of the series.
  std::map<std::pair<std::string, int64_t>, std::vector<const MemoryReading*>> by_label;
  for (const auto& r : readings) by_label[{r.label, r.rank.value_or(-1)}].push_back(&r);
  for (const auto& entry : by_label) {
    const auto& series = entry.second;  // a plain reference: lambdas below capture it
    if (series.size() < 5) continue;
    size_t q = std::max<size_t>(1, series.size() / 4);
    auto median = [&](size_t from, size_t to) {
      std::vector<uint64_t> v;
      for (size_t i = from; i < to; ++i) v.push_back(series[i]->bytes);
      std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
      return v[v.size() / 2];
    };
    uint64_t head = median(0, q), tail = median(series.size() - q, series.size());
    size_t non_decreasing = 0;
    for (size_t i = 1; i < series.size(); ++i) non_decreasing += series[i]->bytes >= series[i - 1]->bytes;
    if (tail > head + head / 10 && non_decreasing * 10 >= (series.size() - 1) * 7) {
      f = {true, series.front()->bytes, series.back()->bytes, series.front()->line, series.back()->line, series.size(),
           "readings"};
      return f;
    }
  }
  return f;
}

// Whether a TensorFlow graph node creates a variable or an optimizer slot: an initializer
// ("dense/kernel/Initializer/random_uniform"), a variable op, or Keras 2's slot zeros
// ("training/Adam/zeros_12").
bool names_tf_variable(std::string_view node) {
  const std::string n = to_lower(node);
  if (contains(n, "initializer") || contains(n, "variable") || contains(n, "varhandle")) return true;
  if (!contains(n, "/zeros")) return false;
  for (std::string_view optimizer : {"adam", "rmsprop", "momentum", "adagrad", "sgd"}) {
    if (contains(n, optimizer)) return true;
  }
  return false;
}

// A TensorFlow activation that did not fit: what halving the shape's first dimension (usually the
// batch) gives, the allocator hint and a 16-bit compute policy.
void add_tf_activation_fixes(Diagnosis& d, const OomEvent& e, const MemoryBreakdown& m) {
  // With the shape printed, say what halving its first dimension (usually the batch) gives.
  // Without a shape (BFC's own line), nothing about dimensions can be said.
  std::string batch_detail = e.field("shape") ? "The first dimension of the shape is usually the batch."
                                              : "Smaller batches or inputs need smaller tensors.";
  if (const FieldValue* shape = e.field("shape"); shape && std::holds_alternative<std::vector<int64_t>>(*shape)) {
    const auto& dims = std::get<std::vector<int64_t>>(*shape);
    if (!dims.empty() && dims[0] >= 2) {
      // The request is the product of the shape and the dtype size, so it divides by dims[0].
      const int64_t half = dims[0] / 2;
      // A 2-D activation is usually (batch x sequence, features): tokens, not sequences.
      batch_detail = fmt::format("The first dimension ({}) is usually the batch{}: at {} this tensor takes {}.", dims[0],
                                 dims.size() == 2 ? " (or batch x sequence length)" : "", half,
                                 m.requested ? fmt::format("{} instead of {}",
                                                           format_bytes(*m.requested / static_cast<uint64_t>(dims[0]) *
                                                                        static_cast<uint64_t>(half)),
                                                           format_bytes(*m.requested))
                                             : std::string("about half the memory"));
    }
  }
  d.fixes.push_back(make_fix("smaller_input", batch_detail));
  const bool has_async_fix = std::any_of(d.fixes.begin(), d.fixes.end(), [](const Fix& f) { return f.id == "tf_async_allocator"; });
  if (e.field("hint") && !has_async_fix) {
    d.fixes.push_back(make_fix("tf_async_allocator", "TensorFlow suggests it against BFC fragmentation."));
  }
  // A tensor already in 16 bits (type half or bfloat16) was computed under a 16-bit policy: there
  // is nothing left to halve. Integer tensors (indices, masks) do not follow the policy.
  const std::string type = e.string_field("dtype").value_or("");
  if (type.empty() || type == "float" || type == "double") {
    d.fixes.push_back(make_fix("mixed_precision",
                               type == "double" ? "The tensor is float64: float32 halves it, a 16-bit policy quarters it."
                                                : "A 16-bit compute policy halves activations.",
                               "tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')  # 'mixed_float16' on GPUs "
                               "before Ampere (Keras adds loss scaling)"));
  }
}

Diagnosis diagnose_event(const OomEvent& e, const LogContext& context) {
  Diagnosis d;
  const MemoryBreakdown m = breakdown(e);
  const std::string operation = operation_of(e);
  const bool vllm = from_vllm(e);

  if (e.framework == "vllm" && !is_pytorch_numeric(e)) {
    diagnose_vllm(d, e, context);
  } else if (e.format == "mps") {
    d.cause = "mps_high_watermark_exceeded";
    auto a = e.bytes("mps_allocated").value_or(0), o = e.bytes("other_allocations").value_or(0),
         mx = e.bytes("max_allowed").value_or(0), r = e.bytes("requested").value_or(0);
    d.evidence.push_back(fmt::format("MPS holds {} and other allocations {}; with the {} request that passes the {} limit{}.",
                                     format_bytes(a), format_bytes(o), format_bytes(r), format_bytes(mx),
                                     a + o + r > mx ? " by " + format_bytes(a + o + r - mx) : ""));
    if (mx && r > mx) {
      // One request above the whole limit: a shape far larger than intended, which no freed memory
      // makes room for; lifting the watermark would let it eat the system's unified memory.
      d.cause = "request_exceeds_total_capacity";
      d.cause_title = "one allocation is larger than MPS's whole limit (a shape far too large)";
      d.secondary_causes.push_back("mps_high_watermark_exceeded");
      add_shape_fixes(d, r, fmt::format("{} MPS limit", format_bytes(mx)));
    } else {
      add_training_ladder(d, e, m, operation);
      d.fixes.push_back(make_fix("mps_watermark", "The limit protects the rest of the system's unified memory."));
    }
  } else if (e.format == "metal_insufficient_memory") {
    d.cause = "metal_working_set_exceeded";
    d.evidence.push_back("The Metal GPU could not get the unified memory a command buffer needed: the model, its KV cache "
                         "and activations passed what macOS lets the GPU wire (about two thirds to three quarters of RAM), "
                         "or other applications hold the rest.");
    d.fixes.push_back(make_fix("metal_wired_limit", "Lets the GPU wire more of the unified memory; close other large "
                                                    "applications first."));
    if (e.framework == "llama.cpp") {
      d.fixes.push_back(llama_context_fix(e, "The KV cache and compute buffer grow with the context (-c)."));
      d.fixes.push_back(make_fix("ggml_kv_cache_type", "q8_0 halves the KV cache."));
      if (auto quant = llama_quant_fix(e, "the context")) d.fixes.push_back(*quant);
    } else if (e.framework == "mlx") {
      d.fixes.push_back(make_fix("shorter_sequence", "The KV cache grows with every token of the prompt and the answer.",
                                 std::string(fix_snippet("shorter_sequence", FixVariant::kMlx))));
      d.fixes.push_back(make_fix("quantize_model", "4-bit weights take a quarter of bf16.",
                                 std::string(fix_snippet("quantize_model", FixVariant::kMlx))));
    } else {
      d.fixes.push_back(make_fix("smaller_input", "Smaller batches, images or sequences need smaller buffers."));
    }
  } else if (e.format == "metal_max_buffer_size") {
    // One buffer over Metal's maxBufferLength: the wired limit and free memory are beside the point.
    d.cause = "allocation_size_limit";
    const uint64_t requested = m.requested.value_or(0), limit = e.bytes("max_buffer_size").value_or(0);
    d.evidence.push_back(fmt::format("One {} buffer is larger than the largest single buffer Metal allows on this GPU ({}, "
                                     "its maxBufferLength): no free or wired memory lifts that limit; the array must be "
                                     "smaller or split.", format_bytes(requested), format_bytes(limit)));
    d.fixes.push_back(make_fix("smaller_input", limit > 0 && requested > limit
        ? fmt::format("Split the work so no array reaches {}: fewer sequences batched at once, the prompt processed in "
                      "chunks; this one is {:.1f}x the limit.", format_bytes(limit),
                      static_cast<double>(requested) / static_cast<double>(limit))
        : std::string("Split the work so no single array reaches the limit: fewer sequences at once, chunks."),
        "fewer sequences (or images) per batch; process a long prompt in chunks"));
    d.fixes.push_back(make_fix("shorter_sequence", "The KV cache's arrays grow with the context.",
                               std::string(fix_snippet("shorter_sequence", FixVariant::kMlx))));
  } else if (e.format == "xpu_4gb_block_limit") {
    d.cause = "allocation_size_limit";
    d.evidence.push_back(fmt::format("The platform cannot allocate one block over {}; {} was requested.",
                                     e.string_field("allocation_limit_text").value_or("4GB"), format_bytes(m.requested.value_or(0))));
    d.fixes.push_back(make_fix("smaller_input", "Split the tensor or shrink the batch so no single allocation passes the limit."));
  } else if (e.format == "pytorch_old_reserved" && e.string_field("backend") == "XPU" && m.pytorch_reserved &&
             m.requested && m.total &&
             ((*m.pytorch_reserved == 0 && *m.requested < *m.total) ||
              *m.pytorch_reserved + *m.requested <= *m.total / 2)) {
    // The old-format XPU message prints no free figure: a reserve and request that together fill
    // at most half the card did not run out of it; the runtime's single-allocation limit refused it.
    d.cause = "allocation_size_limit";
    d.evidence.push_back(*m.pytorch_reserved == 0
        ? std::string("Nothing was allocated and the request is below the card's size: the XPU runtime limits single allocations.")
        : fmt::format("PyTorch reserves only {} of the card's {} and {} was requested: far from full, so the XPU runtime's "
                      "single-allocation limit refused it.", format_bytes(*m.pytorch_reserved), format_bytes(*m.total),
                      format_bytes(*m.requested)));
    d.fixes.push_back(make_fix("smaller_input", "Split the tensor or shrink the batch so no single allocation passes the limit."));
  } else if (is_pytorch_numeric(e) && (m.total || m.free)) {
    diagnose_pytorch_numbers(d, e, m);
  } else if (e.format == "pytorch_new_truncated" || e.format == "pytorch_old_truncated") {
    d.cause = "insufficient_information";
    d.evidence.push_back(m.requested ? fmt::format("The message was cut after the request ({}): it gives no "
                                                   "capacity, free or allocated figures.", format_bytes(*m.requested))
                                     : std::string("The message gives no figures (cut before the request): the cause "
                                                   "cannot be told; the full message (or `oomdoc snapshot`) can."));
    add_training_ladder(d, e, m, operation);
  } else if (e.format == "pytorch_cudamallocasync_short") {
    d.cause = "generic_no_details";
    d.evidence.push_back("The allocation failed on the device; the message gives no figures.");
    add_training_ladder(d, e, m, operation);
  } else if (e.format == "pytorch_garbage_size") {
    d.cause = "garbage_request_size";
    d.evidence.push_back(fmt::format("A request of {} is not a real tensor size: an overflow, a negative dimension or a "
                                     "corrupted shape upstream.", e.string_field("requested_text").value_or("?")));
    d.fixes.push_back(make_fix("find_failing_shape", "The failing operation's inputs show where the size comes from."));
  } else if (e.format == "library_status") {
    d.cause = "library_workspace_alloc";
    if (e.string_field("status") == "no valid cuDNN algorithm") {
      d.evidence.push_back("No cuDNN convolution algorithm could run: each one whose workspace fails to allocate is "
                           "skipped, so a (nearly) full card leaves none. If memory was not short, the cuDNN build "
                           "does not match this GPU or CUDA version.");
    } else {
      // (The library its status code names, as the reader says it.)
      d.evidence.push_back(fmt::format("{}: {} could not allocate its handle, plan or workspace, which happens when the "
                                       "card is (nearly) full.", e.string_field("status").value_or(""),
                                       e.string_field("library").value_or("the library")));
    }
    if (e.framework == "tensorflow") {
      // TensorFlow reserves nearly the whole card for its BFC allocator at startup, so the handle
      // cuDNN/cuBLAS create outside it finds nothing left.
      d.fixes.push_back(make_fix("tf_memory_growth", "TensorFlow reserved the card up front, leaving nothing for cuDNN/cuBLAS "
                                                     "handles: allocate as needed instead."));
    } else if (starts_with(e.framework, "pytorch")) {
      d.fixes.push_back(make_fix("library_workspace", "Handles and workspaces are created lazily at the first matmul or convolution."));
    }
    d.fixes.push_back(make_fix("end_other_processes", "Another process may hold the memory the library needs."));
    add_training_ladder(d, e, m, operation);
  } else if (e.format == "nccl_cuda_oom") {
    d.cause = "nccl_buffer_alloc";
    d.evidence.push_back(m.requested ? fmt::format("NCCL could not allocate {} communication buffer: the card was "
                                                   "already full when it set up a channel or peer connection.",
                                                   with_article(format_bytes(*m.requested)))
                                     : std::string("NCCL could not allocate its communication buffers."));
    if (e.field("nccl_error") != nullptr) {
      d.evidence.push_back("PyTorch raised NCCL's ncclUnhandledCudaError, whose last CUDA error was 'out of memory': NCCL "
                           "allocates its buffers itself, outside PyTorch's cache, when a communicator is set up (at a "
                           "process group's first collective), so memory PyTorch holds or caches is not available to it.");
    }
    d.fixes.push_back(make_fix("nccl_buffers", "Each channel and peer gets its own buffer."));
    d.fixes.push_back(make_fix("nccl_nvls_off", "NVLink SHARP allocates multicast buffers for each communicator on NVSwitch systems."));
    d.fixes.push_back(make_fix("nccl_headroom", "NCCL allocates outside PyTorch's caching allocator: what the cache holds is lost to it."));
    add_training_ladder(d, e, m, operation);
  } else if (e.format == "cuda_error_oom" || e.format == "pytorch_thc_cuda_runtime_oom" || e.format == "cuda_driver_oom" ||
             e.format == "cuda_driver_ctx_create" || e.format == "cuda_malloc_failed") {
    if (e.format == "cuda_driver_ctx_create") {
      // A context is the first thing a process puts on the card: when creating it runs out of
      // memory, this process held nothing there yet, so others (or another context of this
      // program) had filled the card.
      d.cause = "other_processes";
      d.secondary_causes.push_back("driver_oom_no_details");
      d.evidence.push_back("Creating the CUDA context failed: the process had nothing on the card yet, so the card was "
                           "already full, held by other processes (or another CUDA context of this program).");
    } else {
      d.cause = "driver_oom_no_details";
      d.evidence.push_back(fmt::format("The {} reported out of memory without figures (outside PyTorch's caching "
                                       "allocator, often at context creation or in a library).",
                                       e.framework == "hip"           ? "HIP runtime"
                                       : e.framework == "pytorch-xpu" ? "Intel GPU runtime (Unified Runtime)"
                                                                      : "CUDA runtime"));
    }
    // A PyTorch program (its message, or the driver's status under PyTorch's frames) that no named
    // program runs: the driver-level steps. A named program's own ladder replaces the recipe below.
    if (e.framework == "tensorrt-llm") {
      // TensorRT-LLM sizes its KV cache from the memory left after loading the engine: the runtime's
      // own buffers (and other processes) get what that share leaves.
      d.fixes.push_back(make_fix("trtllm_kv_cache_fraction", "The KV cache takes 0.9 of the memory free after loading "
                                                             "by default: a smaller share leaves room for the runtime's "
                                                             "own buffers."));
      d.fixes.push_back(make_fix("trtllm_max_num_tokens", "The runtime's activation buffers grow with the tokens and "
                                                          "requests it schedules per step."));
      d.fixes.push_back(make_fix("end_other_processes", "Memory other processes hold is missing from that share too."));
    } else if (e.format != "cuda_driver_ctx_create" && (starts_with(e.framework, "pytorch") || pytorch_frames(e)) &&
               application(e).empty()) {
      add_driver_oom_ladder(d, operation);
    } else {
      d.fixes.push_back(make_fix("end_other_processes",
                                 operation.empty() || operation == "model_loading"
                                     ? "A full card at startup means other processes hold it."
                                     : fmt::format("It failed mid-run ({}): other processes' memory is missing here too.",
                                                   operation)));
      add_training_ladder(d, e, m, operation);
    }
  } else if (e.framework == "paddle") {
    diagnose_paddle(d, e, m);
  } else if (e.format == "mxnet_cudamalloc") {
    diagnose_mxnet(d, e);
  } else if (e.framework == "tensorrt") {
    diagnose_tensorrt(d, e);
  } else if (e.framework == "directml") {
    diagnose_directml(d, e, m);
  } else if (e.format == "trtllm_executor_insufficient_memory") {
    // The KV cache is sized as a share (KvCacheConfig.free_gpu_memory_fraction, 0.9 by default) of
    // the memory free after the model loads; the runtime's buffers for max_num_tokens need the rest.
    d.cause = "capacity_exhausted";
    const std::string component = e.string_field("component").value_or("a component");
    if (m.total && m.free && *m.free <= *m.total) {
      d.capacity_title = fmt::format("TensorRT-LLM could not create its {} with {} of {} free", component,
                                     format_bytes(*m.free), format_bytes(*m.total));
      d.evidence.push_back(fmt::format(
          "TensorRT-LLM could not create the executor's {}: {} of the card's {} was free before it tried ({} already "
          "held by the weights, the runtime and any other process).", component, format_bytes(*m.free),
          format_bytes(*m.total), format_bytes(*m.total - *m.free)));
    } else {
      d.evidence.push_back(fmt::format("TensorRT-LLM could not create the executor's {} for lack of GPU memory.", component));
    }
    d.fixes.push_back(make_fix("trtllm_kv_cache_fraction",
                               m.free ? fmt::format("The KV cache takes 0.9 of the {} free by default; a smaller share "
                                                    "leaves the rest to the runtime's own buffers.", format_bytes(*m.free))
                                      : std::string("The KV cache takes 0.9 of the free memory by default; a smaller "
                                                    "share leaves the rest to the runtime's own buffers.")));
    d.fixes.push_back(make_fix("trtllm_max_num_tokens", "The runtime's activation buffers grow with the tokens and "
                                                        "requests it schedules per step."));
    d.fixes.push_back(make_fix("end_other_processes", "Memory other processes hold is missing from that share too."));
    d.fixes.push_back(make_fix("trtllm_tensor_parallel", "Each GPU then holds 1/N of the weights (MoE: of the experts)."));
  } else if (e.format == "xla_tpu_hbm_reserve") {
    diagnose_tpu_reserve(d, e, m);
  } else if (e.format == "xla_tpu_hbm_alloc") {
    diagnose_tpu_alloc(d, e, m);
  } else if (e.format == "process_killed") {
    // A SIGKILL is not proof of memory unless the kernel's line says so: the evidence says how to check.
    diagnose_killed(d, e, operation, context);
  } else if (e.format == "torch_th_host_oom" || e.format == "pytorch_cpu_allocator" || e.format == "host_or_unified_alloc" ||
             e.format == "numpy_array_alloc" || e.format == "python_memory_error" || e.format == "os_enomem" ||
             e.format == "dataloader_shm" ||
             e.format == "ggml_pinned_host" || e.format == "ggml_cpu_buffer" || e.format == "ollama_system_memory" ||
             e.format == "xla_host_oom" ||
             (e.format == "tf_oom_tensor" && e.string_field("device_kind") == "CPU") ||
             // TensorFlow's pinned host pool (cuda_host_bfc, gpu_host_bfc): host RAM the GPU copies from.
             ((e.format == "tf_oom_tensor" || e.format == "tf_bfc_oom") &&
              e.string_field("allocator").value_or("").find("host") != std::string::npos)) {
    d.cause = "host_memory";
    d.evidence.push_back(fmt::format("Host (CPU) memory ran out{}: system RAM, not GPU memory.",
                                     m.requested ? " allocating " + format_bytes(*m.requested) : std::string()));
    if (e.format == "ggml_pinned_host") {
      // llama.cpp falls back to ordinary (pageable) host memory when pinning fails
      // (ggml-cuda.cu ggml_cuda_host_malloc returns nullptr and the caller uses a CPU buffer).
      d.evidence.push_back("llama.cpp only warns here: it keeps going with ordinary host memory, which is slower to "
                           "copy to the GPU.");
      if (auto status = e.string_field("status"); status && status->find("out of memory") == std::string::npos) {
        d.secondary_causes.push_back("not_an_oom_status");
        d.evidence.push_back(fmt::format("The status is \"{}\", not out of memory: the platform refused to pin the "
                                         "buffer (WSL, a locked-memory limit), whatever RAM is free; nothing to "
                                         "free.", *status));
      } else {
        d.fixes.push_back(make_fix("host_memory", "Pinned (page-locked) memory is limited by the OS and RAM.",
                                   std::string(fix_snippet("host_memory", FixVariant::kLlamaCpp))));
      }
    } else if (e.format == "ollama_system_memory") {
      const auto free = e.bytes("free");
      d.evidence.push_back(fmt::format("Ollama checks before loading: the model needs more system RAM than is free{}; "
                                       "the layers it cannot put on a GPU are loaded into RAM.",
                                       m.requested && free && *m.requested > *free
                                           ? fmt::format(" ({} short)", format_bytes(*m.requested - *free)) : ""));
      d.fixes.push_back(make_fix("host_memory", "Free system RAM (close other programs), or use a smaller quantization "
                                                "or context so less of the model stays in RAM.",
                                 std::string(fix_snippet("host_memory", FixVariant::kOllama))));
    } else if (e.format == "xla_host_oom") {
      // The request against XLA's own cap (XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB, "the default 64 GB"):
      // a limit in whole GB that covers it, rounded up to 8.
      const auto limit = e.int_field("host_memory_limit_gb");
      d.evidence.push_back(fmt::format("XLA's GPU client keeps its pinned host memory (host offloading, transfers) under "
                                       "a limit of its own{}, whatever RAM the machine has.",
                                       limit ? fmt::format(" ({} GB by default)", *limit) : std::string()));
      if (m.requested) {
        const uint64_t gb = (*m.requested + 999999999) / 1000000000;
        const uint64_t value = (gb + 7) / 8 * 8;
        d.fixes.push_back(make_fix("xla_host_memory_limit", "The message names the setting itself.",
                                   *fix_snippet_with_value("xla_host_memory_limit", FixVariant::kDefault,
                                                           std::to_string(value),
                                                           fmt::format("the request is {} ({} GB)",
                                                                       format_bytes(*m.requested), gb))));
      } else {
        d.fixes.push_back(make_fix("xla_host_memory_limit", "The message names the setting itself."));
      }
      d.fixes.push_back(make_fix("more_host_memory", "A limit above the machine's free RAM only moves the failure."));
    } else if (e.format == "ggml_cpu_buffer") {
      d.evidence.push_back("llama.cpp reads the layers it keeps on the CPU into system RAM (with mmap off, as a copy "
                           "the OS cannot page back to the file).");
      d.fixes.push_back(make_fix("host_memory", "Free system RAM, keep mmap on (llama.cpp's default; Ollama: use_mmap), "
                                                "or offload more layers to the GPU so fewer stay in RAM.",
                                 std::string(fix_snippet("host_memory", FixVariant::kLlamaCppHostRam))));
    } else if (e.framework == "tensorflow" || e.framework == "jax" || e.message.find("device_host_allocator") != std::string::npos) {
      d.fixes.push_back(make_fix("host_memory", "This is system RAM, not GPU memory: the host allocator pins buffers for transfers.",
                                 std::string(fix_snippet("host_memory", FixVariant::kTensorFlowHost))));
    } else if (e.format == "dataloader_shm") {
      const bool bus_error = e.message.find("us error") != std::string::npos;
      d.evidence.push_back(bus_error
          ? std::string("A DataLoader worker died of a bus error writing a batch to shared memory (/dev/shm): workers "
                        "hand batches to the main process there, and a Docker container gets 64 MB of it by default.")
          : std::string("PyTorch could not put a tensor in shared memory (/dev/shm/torch_*): DataLoader workers hand "
                        "batches to the main process there, and /dev/shm was full (a Docker container gets 64 MB of it "
                        "by default)."));
      d.fixes.push_back(make_fix("shm_size", "Batches of several workers in flight need more than Docker's 64 MB default."));
      d.fixes.push_back(make_fix("fewer_dataloader_workers", "Fewer workers (and a smaller prefetch_factor) keep fewer "
                                                             "batches in shared memory at once."));
    } else if (e.format == "os_enomem" || e.format == "python_memory_error") {
      d.evidence.push_back(e.format == "os_enomem"
                               ? std::string("The kernel refused this process memory (ENOMEM, errno 12): the host's RAM, its "
                                             "overcommit limit or the job's memory limit, not the GPU.")
                               : std::string("Python could not allocate memory (MemoryError): the host's RAM or the job's "
                                             "memory limit, not the GPU."));
      // A worker is started by fork (multiprocessing's popen_fork): the kernel must be able to commit
      // a copy of the whole parent, however little of it the worker will write.
      bool fork = false;
      if (e.traceback) {
        for (const auto& f : e.traceback->frames) {
          fork = fork || f.file.find("popen_fork") != std::string::npos || f.code.find("os.fork()") != std::string::npos;
        }
      }
      if (fork) {
        d.evidence.push_back("It failed starting a process (fork): each DataLoader worker starts as a copy of the main "
                             "process, which the kernel must be able to hold whole.");
        d.fixes.push_back(make_fix("fewer_dataloader_workers", "Each worker is a copy of the main process, with the "
                                                               "dataset and whatever it holds."));
      }
      d.fixes.push_back(make_fix("host_memory", "Load or process the data in chunks (stream it, memory-map it) rather "
                                                "than whole in RAM."));
      d.fixes.push_back(make_fix("more_host_memory", "The process needs more RAM than the machine or the job allows."));
    } else if (e.format == "numpy_array_alloc") {
      d.evidence.push_back(fmt::format("NumPy could not allocate an array of shape {} ({}) in system RAM: data "
                                       "preparation or metrics, not the model on the GPU.",
                                       e.string_field("shape").value_or("?"), e.string_field("dtype").value_or("?")));
      d.fixes.push_back(make_fix("host_memory", "Process the array in chunks, a smaller dtype (float32 instead of "
                                                "float64), or a memory-mapped array (np.memmap), before adding RAM."));
    } else {
      d.fixes.push_back(make_fix("host_memory", "This is system RAM, not GPU memory."));
    }
  } else if (e.format == "tf_bfc_oom" && !e.is_error) {
    d.cause = "warning_non_fatal";
    d.evidence.push_back("TensorFlow says this is not a failure: it retried with less memory.");
  } else if (e.format == "tf_device_info") {
    d.cause = "not_an_error";
  } else if (e.format == "tf_bfc_stats") {
    const auto pool = bfc_pool(e);
    d.cause = pool && pool->full() ? "capacity_exhausted" : "not_an_error";
    if (pool) {
      d.evidence.push_back(fmt::format("The BFC allocator uses {} of its {} limit ({}).", format_bytes(pool->in_use),
                                       format_bytes(pool->limit), pct(pool->in_use, pool->limit)));
    }
  } else if ((e.format == "tf_cuda_driver_alloc" || e.format == "tf_rocm_driver_alloc") && !e.is_error) {
    d.cause = "warning_non_fatal";
    d.evidence.push_back(fmt::format("TensorFlow logged this at INFO: the driver refused {} more for its allocator's pool, "
                                     "and TensorFlow went on with what it holds (it retries smaller, or frees cached "
                                     "regions); not a failure.", format_bytes(m.requested.value_or(0))));
  } else if ((e.format == "tf_cuda_driver_alloc" || e.format == "tf_rocm_driver_alloc") && m.requested &&
             beyond_any_gpu(*m.requested)) {
    // TensorFlow sizes its first reservation from the memory the driver reports free: a size no GPU
    // has means that report was wrong (an unsupported GPU or APU, a driver that does not match the
    // runtime); it retries at 90% of each size, so the figure shrinks print after print.
    d.cause = "garbage_request_size";
    d.evidence.push_back(fmt::format(
        "TensorFlow tried to reserve {}, more than any GPU holds: it sizes that reservation from the free memory the "
        "{} driver reports, so the driver's figure is wrong (an unsupported GPU or APU, a driver that does not match "
        "the runtime).", impossible_size(*m.requested), e.format == "tf_rocm_driver_alloc" ? "ROCm" : "CUDA"));
    const bool rocm = e.format == "tf_rocm_driver_alloc";
    d.fixes.push_back(make_fix("check_device_and_limits",
                               rocm ? "Compare what the driver reports with the card; check that this GPU and ROCm "
                                      "release are supported together."
                                    : "Compare what the driver reports with the card; check that the driver matches the "
                                      "CUDA runtime TensorFlow was built with.",
                               rocm ? "rocm-smi --showmeminfo vram" : "nvidia-smi --query-gpu=name,memory.total,memory.free --format=csv"));
    d.fixes.push_back(make_fix("tf_memory_growth", "Allocate as needed instead of reserving from the reported figure."));
  } else if (e.format == "tf_cuda_driver_alloc" || e.format == "tf_rocm_driver_alloc") {
    d.cause = "framework_preallocation";
    d.evidence.push_back(fmt::format("TensorFlow could not reserve {} from the driver: it grabs most of the card at startup, "
                                     "so a second process or session finds it full.", format_bytes(m.requested.value_or(0))));
    if (auto smallest = e.bytes("smallest_retry")) {
      d.evidence.push_back(fmt::format("It retried {} times at 90% of the last size, down to {}, and the driver refused "
                                       "each: that much was not free on the card.", e.repeats - 1, format_bytes(*smallest)));
    }
    d.fixes.push_back(make_fix("tf_memory_growth", "Allocate as needed instead of reserving the card."));
    d.fixes.push_back(make_fix("end_other_processes", "Another TensorFlow process may already hold the card."));
  } else if (e.framework == "tensorflow") {
    d.cause = "capacity_exhausted";
    // The allocator dump's totals, when the warning before the error carried them.
    const auto pool = bfc_pool(e);
    if (pool) {
      d.evidence.push_back(fmt::format("The BFC allocator used {} of its {} limit ({}) when the request came.",
                                       format_bytes(pool->in_use), format_bytes(pool->limit), pct(pool->in_use, pool->limit)));
      if (pool->full()) {
        d.capacity_title = pool_full_title("TensorFlow", *pool);
      } else if (pool->could_not_grow()) {
        d.capacity_title = fmt::format("TensorFlow's allocator pool could grow only to {} of its {} limit: the driver "
                                       "refused more (another process may hold the card)",
                                       format_bytes(*pool->region_allocated), format_bytes(pool->limit));
      } else if (pool->largest_free_block && m.requested && *pool->largest_free_block < *m.requested) {
        // The pool has grown to its limit and much of it is free, but in pieces none of which fits.
        d.cause = "fragmentation";
        d.evidence.push_back(fmt::format("{} of the pool is free, but its largest free block is {}, smaller than the {} "
                                         "request: the pool is fragmented.", format_bytes(pool->limit - pool->in_use),
                                         format_bytes(*pool->largest_free_block), format_bytes(*m.requested)));
        d.fixes.push_back(make_fix("tf_async_allocator", "CUDA's own asynchronous allocator does not fragment a fixed pool "
                                                         "as BFC does."));
      } else {
        d.capacity_title = fmt::format("TensorFlow's allocator could not provide the request with {} of its {} limit in "
                                       "use (fragmented, or the pool could not grow: another process may hold the card)",
                                       format_bytes(pool->in_use), format_bytes(pool->limit));
      }
    }
    if (auto shape = e.field("shape")) {
      (void)shape;
      d.evidence.push_back(fmt::format("A tensor of {} could not be allocated.", m.requested ? format_bytes(*m.requested) : "unknown size"));
    } else if (m.requested) {
      d.evidence.push_back(fmt::format("The allocator could not provide {}.", format_bytes(*m.requested)));
    }
    // A variable's initializer or an optimizer slot (graph-mode node names, Keras' "training/Adam/
    // zeros"): the weights and their optimizer state do not fit, whatever the batch. Keras'
    // mixed-precision policy keeps variables in float32, so it does not help here either.
    const auto op = e.string_field("op");
    if (op && e.format == "tf_oom_tensor" && names_tf_variable(*op)) {
      d.evidence.push_back(fmt::format("The tensor is a model variable or optimizer slot being created (node {}): the model's "
                                       "weights and optimizer state do not fit, whatever the batch.", *op));
      d.fixes.push_back(make_fix("end_other_processes", "TensorFlow reserves most of the card at startup: a second process "
                                                        "or session on it leaves too little for the variables."));
      d.fixes.push_back(make_fix("shard_model", "Spread the variables over several GPUs instead of a full copy on each, or "
                                                "train a smaller model.",
                                 "tf.distribute.experimental.ParameterServerStrategy(...)  # or DTensor layouts"));
    } else {
      add_tf_activation_fixes(d, e, m);
    }
  } else if (e.format == "xla_tpu_hbm_compile") {
    // The compiled program's buffers do not fit the chip's HBM: known before any step runs.
    d.cause = "capacity_exhausted";
    d.capacity_title = "the compiled program needs more HBM than the TPU has";
    const auto needed = e.bytes("xla_memory_needed");
    const auto total = e.bytes("total");
    if (needed && total) {
      d.evidence.push_back(fmt::format("XLA's compiler needs {} of HBM for the program on a TPU with {}{}: it stopped at "
                                       "compile time, before any step ran.", format_bytes(*needed), format_bytes(*total),
                                       e.bytes("xla_memory_exceeded") ? ", " + format_bytes(*e.bytes("xla_memory_exceeded")) + " over"
                                                                      : std::string()));
    } else {
      d.evidence.push_back("XLA's compiler could not fit the program's buffers (parameters, optimizer state, activations "
                           "and temporaries) in the TPU's HBM: it stopped at compile time, before any step ran.");
    }
    // Activations scale with the per-device batch: the share that fits is total/needed.
    std::string batch = "A smaller per-device batch (or sequence) shrinks the activations and temporaries.";
    if (needed && total && *needed > *total) {
      batch = fmt::format("Activations scale with the per-device batch: {} fit where {} are needed, so try at most {:.0f}% "
                          "of the batch (less where weights and optimizer state are most of it).",
                          format_bytes(*total), format_bytes(*needed),
                          std::floor(100.0 * static_cast<double>(*total) / static_cast<double>(*needed)));
    }
    // Generation or evaluation (a sampler, generate() in the traceback) has no backward pass and no
    // optimizer state: remat cannot help, and what grows is the batch of sequences and their cache.
    const std::string op = operation_of(e);
    const bool no_backward = op == "generation" || op == "evaluation";
    if (no_backward) {
      d.evidence.push_back("The traceback is generation (no backward pass, no optimizer state): the weights, the batch "
                           "of sequences and their KV cache are what the program holds.");
      batch = "Fewer sequences at once, or a shorter context, shrink the KV cache and the activations.";
    }
    d.fixes.push_back(make_fix("smaller_input", batch, no_backward
                                                           ? "batch_size = ...; max_len = ...  # fewer sequences, a shorter context"
                                                           : "per_device_batch_size = ...  # the global batch over more steps or devices"));
    if (!no_backward) {
      d.fixes.push_back(make_fix("gradient_checkpointing", "Recomputes each block's activations in the backward pass "
                                                           "instead of keeping them in HBM.",
                                 "jax.checkpoint(block_fn)  # flax: nn.remat(Block); torch_xla: torch_xla.utils.checkpoint"));
    }
    d.fixes.push_back(make_fix("mixed_precision", "bf16 parameters and activations take half of fp32.",
                               "dtype=jnp.bfloat16, param_dtype=jnp.bfloat16  # flax modules"));
    d.fixes.push_back(make_fix("shard_model", no_backward ? "Shard the parameters (and the KV cache) over the TPU cores "
                                                            "instead of a replica on each."
                                                          : "Shard parameters and optimizer state over the TPU cores "
                                                            "(FSDP-style) instead of a replica on each.",
                               "jax.sharding.NamedSharding(mesh, P('fsdp'))  # on the parameters and optimizer state"));
    d.fixes.back().title = "Shard the model across the TPU cores instead of a full replica on each";
  } else if (e.format == "xla_tpu_vmem_compile") {
    d.cause = "compile_time_oom";
    d.evidence.push_back(fmt::format("The XLA compiler ran out of {} while compiling: the program's tiles do not fit the "
                                     "on-chip memory.", e.string_field("memory_space").value_or("on-chip memory")));
    d.fixes.push_back(make_fix("smaller_input", "Smaller per-device batch or sequence shrinks the compiled buffers."));
  } else if (e.framework == "jax" && m.requested &&
             ((m.total && *m.requested > *m.total) || beyond_any_gpu(*m.requested))) {
    // One buffer larger than the card (or than any card): a size computed wrong, an unintended
    // broadcast or outer product; no memory fraction or remat brings it under the card.
    const bool beyond_any = beyond_any_gpu(*m.requested);
    d.cause = beyond_any ? "garbage_request_size" : "request_exceeds_total_capacity";
    d.evidence.push_back(beyond_any
        ? fmt::format("XLA tried to allocate {} at once, more than any GPU holds (the largest, {}, has {}): a shape is "
                      "far larger than intended.", impossible_size(*m.requested), largest_catalog_gpu().name,
                      format_bytes(largest_catalog_gpu().total_bytes))
        : fmt::format("One allocation of {} is larger than the whole card ({}).", format_bytes(*m.requested),
                      format_bytes(*m.total)));
    d.fixes.push_back(make_fix("smaller_input", fmt::format(
        "A single {} buffer{}: find the array that makes it (jax.debug.print its .shape, or jax.make_jaxpr the step) "
        "and the dimension that blows up (batch x seq x vocab, an unintended broadcast or outer product); "
        "XLA_PYTHON_CLIENT_MEM_FRACTION cannot bring it under the card.",
        format_bytes(*m.requested), beyond_any ? " is larger than any GPU" : " is larger than the card")));
    if (!beyond_any) d.fixes.push_back(make_fix("bigger_gpu", "Only if the shape is intended."));
  } else if (e.framework == "jax") {
    d.cause = "capacity_exhausted";
    // The BFC allocator's dump before the error (its totals and Stats block): how full JAX's pool was.
    if (const auto pool = bfc_pool(e); pool && !(m.total && m.free)) {
      const uint64_t left = pool->limit > pool->in_use ? pool->limit - pool->in_use : 0;
      d.evidence.push_back(fmt::format("JAX's BFC pool held {} of its {} limit ({}) when the request came{}.",
                                       format_bytes(pool->in_use), format_bytes(pool->limit), pct(pool->in_use, pool->limit),
                                       m.requested && *m.requested > left
                                           ? fmt::format(": {} more does not fit in the {} left", format_bytes(*m.requested),
                                                         format_bytes(left))
                                           : std::string()));
      if (m.requested && *m.requested > left) {
        d.capacity_title = fmt::format("the request does not fit JAX's pool ({} in use + {} asked > its {} limit)",
                                       format_bytes(pool->in_use), format_bytes(*m.requested), format_bytes(pool->limit));
      } else if (pool->full()) {
        d.capacity_title = pool_full_title("JAX", *pool);
      }
    }
    // The driver's own free/total (XLA's cudaMallocAsync allocator prints them): how full the card was.
    if (m.total && m.free && *m.free <= *m.total) {
      if (m.requested && *m.requested > *m.free) {
        d.capacity_title = fmt::format("the card had less free than the request ({} of {} in use)",
                                       format_bytes(*m.total - *m.free), format_bytes(*m.total));
      }
      d.evidence.push_back(fmt::format("The driver reported {} free of {}{}.", format_bytes(*m.free), format_bytes(*m.total),
                                       m.requested ? fmt::format(" when {} was asked for", format_bytes(*m.requested))
                                                   : std::string()));
    }
    if (m.requested) {
      // BufferAssignment's total counts every buffer of the program, the temporaries it failed to
      // allocate included (record 88: 4.44 GiB temp of a 14.44 GiB total), so it is the program's
      // whole need, not what was already assigned.
      auto t = e.bytes("xla_total_allocation");
      auto temp = e.bytes("xla_preallocated_temp_allocation");
      if (t && temp && *m.requested <= *t) {
        auto params = e.bytes("xla_parameter_allocation");
        auto live_out = e.bytes("xla_maybe_live_out_allocation");
        d.evidence.push_back(fmt::format(
            "XLA could not allocate {}; the compiled program needs {} in all ({} temporaries{}{}).",
            format_bytes(*m.requested), format_bytes(*t), format_bytes(*temp),
            params ? ", " + format_bytes(*params) + " parameters" : std::string(),
            live_out ? ", " + format_bytes(*live_out) + " outputs" : std::string()));
      } else if (t) {
        d.evidence.push_back(fmt::format("XLA could not allocate {}; the compiled program's buffers total {}.",
                                         format_bytes(*m.requested), format_bytes(*t)));
      } else {
        d.evidence.push_back(fmt::format("XLA could not allocate {}.", format_bytes(*m.requested)));
      }
      if (auto devices = e.string_field("replica_devices")) {
        d.evidence.push_back(fmt::format("The replicas on devices {} each reported the same request (from line {}): "
                                         "every device ran out, not one.", *devices,
                                         e.int_field("replica_report_line").value_or(0)));
      }
    }
    // A program that needs a small part of any device cannot have filled it: the memory is held
    // elsewhere (arrays this process keeps from earlier steps, or another process's preallocation).
    // "Small": under a quarter of the card when the message gives it, else under 1 GiB (JAX's 75%
    // preallocation of the smallest cards in use, 2 GiB, holds it).
    const auto program = e.bytes("xla_total_allocation");
    const bool small_program = program && m.requested && *m.requested <= *program &&
                               (m.total ? *program < *m.total / 4 : *program < kGiB);
    if (small_program) {
      d.cause = "memory_held_elsewhere";
      d.evidence.push_back(fmt::format(
          "The whole program needs only {}, far less than any device: the memory is held elsewhere, by arrays this "
          "process keeps alive from earlier steps or by another process (each JAX process preallocates 75% of the "
          "card by default).", format_bytes(*program)));
      d.fixes.push_back(make_fix("end_other_processes", "Another JAX or PyTorch process on the same card holds its "
                                                        "memory: nvidia-smi lists it."));
      d.fixes.push_back(make_fix("xla_shared_card", "Two processes that each preallocate 75% of one card cannot both "
                                                    "get it."));
      d.fixes.push_back(make_fix("release_references", "Device arrays kept from earlier steps (outputs or metrics in a "
                                                       "list) stay on the device.",
                                 "metrics.append(jax.device_get(m))  # host copies, not device arrays; del big arrays"));
    } else {
    // Peak buffers of 64-bit floats (jax_enable_x64): float32 halves each of them.
    const auto wide = e.int_field("xla_f64_peak_buffer_bytes");
    if (wide && program && static_cast<uint64_t>(*wide) * 4 >= *program) {
      d.evidence.push_back(fmt::format("{} of the largest buffers are 64-bit floats (f64): float32 halves them.",
                                       format_bytes(static_cast<uint64_t>(*wide))));
      d.fixes.push_back(make_fix("jax_float32", fmt::format("The program's f64 peak buffers ({}) take half the bytes "
                                                            "in float32.", format_bytes(static_cast<uint64_t>(*wide)))));
    }
    d.fixes.push_back(make_fix("xla_preallocation", "By default JAX preallocates 75% of the card and the program "
                                                    "must fit in it; a larger fraction gives it more."));
    d.fixes.push_back(make_fix("smaller_input", "Smaller per-device batch."));
    // Without temporaries (no activations between ops) there is nothing for remat to recompute.
    const auto temp = e.bytes("xla_preallocated_temp_allocation");
    if (!temp || *temp > 0) {
      d.fixes.push_back(make_fix("gradient_checkpointing", "jax.checkpoint (remat) recomputes activations.", "jax.checkpoint / nn.remat"));
    } else {
      d.evidence.push_back("The program has no temporaries: its inputs and outputs alone do not fit, so recomputing "
                           "activations (remat) cannot help; chunk the operation or shrink its arrays.");
    }
    }
  } else if (e.framework == "llama.cpp") {
    if (e.format == "ggml_cuda_error") {
      // A CUDA call inside llama.cpp failed: the driver's status, with no size.
      d.cause = "driver_oom_no_details";
      const std::string function = e.string_field("cuda_function").value_or("");
      d.evidence.push_back(fmt::format("A {} call inside llama.cpp ran out of memory{}{}; no size is printed.",
                                       e.string_field("backend").value_or("CUDA"),
                                       function.empty() ? "" : " in " + function,
                                       e.device ? fmt::format(" on device {}", *e.device) : ""));
      if (function.find("pool_malloc") != std::string::npos) {
        d.evidence.push_back("That is llama.cpp's CUDA memory pool: temporary buffers of the matrix multiplications "
                             "(dequantized weights, converted inputs), allocated while it computes, outside the model, KV "
                             "cache and compute buffers sized at startup: a model that loaded can still run out here.");
      }
    } else if (m.requested && *m.requested >= 256 * kGiB) {
      d.cause = "garbage_request_size";
      d.evidence.push_back(fmt::format("A {} buffer is larger than any single GPU: the context or batch size is far larger than intended.",
                                       format_bytes(*m.requested)));
    } else {
      d.cause = "capacity_exhausted";
      // The backend when it is not CUDA's (ggml.cpp): Vulkan, Metal, SYCL, ROCm.
      const std::string backend = e.string_field("backend").value_or("");
      d.evidence.push_back(fmt::format("The {}device could not provide {} buffer{}.", backend.empty() ? "" : backend + " ",
                                       with_article(format_bytes(m.requested.value_or(0))),
                                       e.device ? fmt::format(" on device {}", *e.device) : ""));
      // What the device had free at load, less the buffers llama.cpp put there before this one.
      if (const auto free = e.int_field("llama_device_free_bytes"); free && *free > 0 && m.requested) {
        const int64_t model_buffer = e.int_field("llama_model_buffer_bytes").value_or(0);
        const int64_t kv_buffer = e.int_field("llama_kv_buffer_bytes").value_or(0);
        const int64_t left = *free - model_buffer - kv_buffer;
        std::string taken;
        if (model_buffer > 0) taken = fmt::format("the model's {}", format_bytes(static_cast<uint64_t>(model_buffer)));
        if (kv_buffer > 0) {
          taken += fmt::format("{}the KV cache's {}", taken.empty() ? "" : " and ", format_bytes(static_cast<uint64_t>(kv_buffer)));
        }
        d.capacity_title = "the card ran out: what llama.cpp had already put on it left too little for this buffer";
        d.evidence.push_back(fmt::format(
            "At load the device had {} free{}{}; the {} buffer needed {} more.", format_bytes(static_cast<uint64_t>(*free)),
            taken.empty() ? "" : ": " + taken + " left ",
            taken.empty() ? "" : format_signed_bytes(left), format_bytes(*m.requested),
            format_signed_bytes(static_cast<int64_t>(*m.requested) - std::max<int64_t>(left, 0))));
      }
    }
    // Only the fixes that shrink the buffer that failed (ggml.cpp reads which one it was); they are
    // then ordered by cost like every fix list.
    const std::string buffer = e.string_field("llama_buffer").value_or("");
    if (buffer == "compute") {
      d.evidence.push_back("It was the compute buffer: the graph of one micro-batch (-ub tokens) over the whole context (-c).");
    } else if (buffer == "kv_cache") {
      d.evidence.push_back("It was the KV cache: context cells (-c) x layers on the GPU x the cache type.");
    } else if (buffer == "model") {
      d.evidence.push_back("It was the model's weights: the offloaded layers (-ngl) at the file's quantization.");
    }
    Fix flash = make_fix("ggml_flash_attention", "Without it the compute buffer holds f32 scores of every head over the whole context.");
    Fix kv = make_fix("ggml_kv_cache_type", "The KV cache grows with the context (-c): q8_0 halves it.");
    Fix context = llama_context_fix(e, "The compute buffer grows with the context (-c) and micro-batch (-ub); the KV cache with -c.");
    Fix fewer = make_fix("ggml_fewer_layers", "The weights, KV cache and compute buffer on the GPU shrink with every layer left on the CPU.");
    std::vector<Fix> order = buffer == "kv_cache" ? std::vector<Fix>{kv, context, fewer}
                             : buffer == "model"  ? std::vector<Fix>{fewer}
                                                  : std::vector<Fix>{flash, kv, context, fewer};
    // A smaller file shrinks the weights: the buffer's own fix where they failed; where the KV cache
    // or the compute buffer failed it only frees the weights' share (a GiB of a 4.4 GiB Q4_K_M model
    // against a 16 GiB KV cache), after what shrinks that buffer itself (-c) and before -ngl.
    if (auto quant = llama_quant_fix(e, "layers and context")) {
      if (buffer == "kv_cache" || buffer == "compute") quant->cost_rank = fix_info("ggml_smaller_context").cost_rank;
      order.insert(order.end() - 1, std::move(*quant));
    }
    // Metal's buffers come out of unified memory, of which macOS lets the GPU wire only a part.
    if (e.string_field("backend") == "Metal") {
      order.insert(order.begin(), make_fix("metal_wired_limit", "Metal buffers come out of unified memory, of which macOS "
                                                                "lets the GPU wire only a part (about two thirds to three "
                                                                "quarters of RAM); close other large applications first."));
    }
    // llama.cpp inside Ollama: the same settings, as Ollama's parameters and environment variables.
    if (application(e) == kAppOllama) {
      d.evidence.push_back("Ollama runs llama.cpp here: its settings are Ollama's (num_ctx, num_gpu, OLLAMA_* variables).");
      for (Fix& fix : order) {
        // (A snippet written with the log's values, llama_context_fix's, is Ollama's already.)
        const bool generic = fix.snippet == fix_snippet(fix.id, FixVariant::kDefault);
        if (auto snippet = fix_variant_snippet(fix.id, FixVariant::kOllama); snippet && generic) fix.snippet = std::string(*snippet);
      }
    }
    d.fixes.insert(d.fixes.end(), order.begin(), order.end());
  } else if (e.format == "ollama_runner") {
    const std::string buffer = e.string_field("llama_buffer").value_or("");
    if (m.requested) {
      d.cause = "capacity_exhausted";
      d.evidence.push_back(fmt::format("Ollama's runner could not allocate {} {}buffer on {}: the model's layers and KV "
                                       "cache already on the GPU left less than that.",
                                       with_article(format_bytes(*m.requested)), buffer == "compute" ? "compute " : "",
                                       e.string_field("buffer_backend").value_or("the GPU")));
    } else {
      d.cause = "generic_no_details";
      // The runner's own error is quoted: "cudaMalloc failed: out of memory" says the GPU ran out;
      // no size is printed with it.
      const std::string runner = e.string_field("runner_error").value_or("");
      d.evidence.push_back(runner.empty() ? std::string("The runner exited; Ollama suspects memory but prints no figures.")
                                          : fmt::format("The runner exited with \"{}\": {} ran out while it loaded "
                                                        "or ran the model; no size is printed.", runner,
                                                        runner.find("cuda") != std::string::npos ||
                                                                runner.find("CUDA") != std::string::npos ||
                                                                runner.find("hip") != std::string::npos
                                                            ? "the GPU"
                                                            : "memory"));
    }
    auto ollama_fix = [&](std::string_view id, std::string detail) {
      d.fixes.push_back(make_fix(id, std::move(detail), std::string(fix_snippet(id, FixVariant::kOllama))));
    };
    ollama_fix("ggml_flash_attention", "The compute buffer holds f32 attention scores over the whole context without it.");
    ollama_fix("ggml_kv_cache_type", "q8_0 halves the KV cache.");
    ollama_fix("ggml_smaller_context", "The KV cache and the compute buffer grow with num_ctx.");
    ollama_fix("ggml_fewer_layers", "Every layer left on the CPU frees its weights and KV cache on the GPU.");
    ollama_fix("ggml_smaller_quant", "A smaller quantization leaves room for layers and context.");
  } else if (e.format == "tgi_warmup_prefill") {
    d.cause = "capacity_exhausted";
    const auto tokens = e.int_field("prefill_tokens");
    d.evidence.push_back(fmt::format(
        "text-generation-inference's warmup runs one prefill of {} tokens (--max-batch-prefill-tokens) to size its KV "
        "cache, and it did not fit beside the weights.", tokens ? std::to_string(*tokens) : std::string("the configured")));
    add_tgi_ladder(d, tokens);
  } else if (e.format == "wgpu_out_of_memory") {
    d.cause = "capacity_exhausted";
    d.evidence.push_back("wgpu could not allocate a GPU buffer (wgpu-core's DeviceError::OutOfMemory): the device's "
                         "memory, as the graphics driver gives it to this program, ran out; wgpu prints no sizes.");
    d.fixes.push_back(make_fix("smaller_input", "Smaller images, batches or sequences need smaller buffers."));
    d.fixes.push_back(make_fix("end_other_processes", "Other programs' GPU memory (a browser, a game, another model) is "
                                                      "missing here too."));
  } else if (e.format == "onnxruntime_arena") {
    if (m.requested && beyond_any_gpu(*m.requested)) {
      d.cause = "garbage_request_size";
      d.evidence.push_back(fmt::format("ONNX Runtime was asked for {}, more than any GPU holds: a shape in the model or "
                                       "its input is wrong (a dynamic dimension read as garbage, an overflowed size).",
                                       impossible_size(*m.requested)));
      d.fixes.push_back(make_fix("smaller_input", "Check the input's shape against the model's inputs "
                                                  "(session.get_inputs()) and the node the status names."));
    } else {
      d.cause = "capacity_exhausted";
      d.evidence.push_back(fmt::format("ONNX Runtime's arena could not grow by {}{}.",
                                       m.requested ? format_bytes(*m.requested) : std::string("the buffer a node needed"),
                                       " (by default it grows to the next power of two, so one growth can ask for far "
                                       "more than the node needs)"));
      if (e.message.find("CUDA") == std::string::npos && e.message.find("cuda") == std::string::npos) {
        d.evidence.push_back("The message names no device: under the CPU execution provider this arena is system "
                             "RAM, not GPU memory.");
      }
      d.fixes.push_back(make_fix("ort_arena_same_as_requested",
                                 "kSameAsRequested grows the arena by what a node needs; gpu_mem_limit keeps room for "
                                 "the rest of the process."));
      d.fixes.push_back(make_fix("smaller_input", "A smaller batch or input size shrinks every node's buffers."));
      d.fixes.push_back(make_fix("end_other_processes", "Memory other processes hold is missing from the arena's card."));
    }
  } else if (e.format == "sglang_not_enough_memory") {
    d.cause = "mem_fraction_static_too_low";
    d.evidence.push_back("SGLang's static pool (weights + KV cache) is too small for the model.");
    // A larger share, 0.05 above the value in use when the log states it; past 0.95 nothing is left
    // for activations and CUDA graphs, so more GPUs (below) are the way.
    const std::optional<double> fraction = sglang_mem_fraction_static(context, e);
    if (fraction && *fraction < 0.95) {
      const std::string higher = utilization_up(std::min(*fraction + 0.05, 0.95));
      d.fixes.push_back(make_fix("sglang_mem_fraction",
                                 fmt::format("Raise --mem-fraction-static from {} (the value this server ran with) to {}: "
                                             "the static pool gets a larger share of the card.",
                                             fraction_as_given(*fraction), higher),
                                 "--mem-fraction-static " + higher));
    } else if (fraction) {
      d.evidence.push_back(fmt::format("--mem-fraction-static is already {}: a larger share would leave too little for "
                                       "activations and CUDA graphs.", fraction_as_given(*fraction)));
    } else {
      // The value in use is not in the log: a fixed number could be a decrease (SGLang's default
      // depends on the card), so the step is said relative to it.
      d.fixes.push_back(make_fix("sglang_mem_fraction",
                                 "Gives the static pool a larger share of the card: 0.05 above the value in use, which "
                                 "SGLang logs as mem_fraction_static in its server_args line (its default depends on "
                                 "the GPU's memory).",
                                 "--mem-fraction-static <mem_fraction_static + 0.05>"));
    }
    d.fixes.push_back(make_fix("sglang_tensor_parallel", "Each GPU then holds 1/N of the weights, leaving more of the "
                                                         "pool for the KV cache."));
  } else {
    d.cause = "generic_no_details";
    add_training_ladder(d, e, m, operation);
  }

  // Context from the traceback and the rest of the log: what it says about GPU memory, so not for
  // a process killed for host RAM (diagnose_killed reads its own context).
  const bool gpu_error = e.is_error && e.format != "process_killed";
  if (gpu_error && !vllm) {
    const std::string predictions = operation == "evaluation" && e.traceback ? trainer_predictions_step(*e.traceback) : "";
    if (!predictions.empty()) {
      // The logits of every evaluation batch (batch x seq x vocab) stay on the GPU until the loop
      // ends unless eval_accumulation_steps moves them to the CPU ("If left unset, the whole
      // predictions are accumulated on the device before being moved to the CPU (faster but
      // requires more memory)", TrainingArguments); preprocess_logits_for_metrics shrinks what is kept.
      d.secondary_causes.push_back("eval_predictions_on_gpu");
      if (predictions == "concatenating") {
        d.evidence.push_back(fmt::format(
            "It failed in Trainer's evaluation loop while appending this batch's logits to the predictions it keeps on "
            "the GPU{}: without eval_accumulation_steps every evaluation batch's logits (batch x sequence x vocabulary) "
            "stay on the card until evaluation ends.",
            m.requested ? fmt::format(" (the {} request is the concatenated copy: the predictions so far and this batch's)",
                                      format_bytes(*m.requested))
                        : ""));
        // What is kept does not shrink with the batch: every batch's logits are kept either way.
        d.fixes.erase(std::remove_if(d.fixes.begin(), d.fixes.end(),
                                     [](const Fix& f) { return f.id == "smaller_inference_batch"; }),
                      d.fixes.end());
        d.fixes.insert(d.fixes.begin(), make_fix("eval_accumulation_steps",
                                                 "Moves the kept predictions to the CPU every few steps instead of "
                                                 "at the end; they then take host RAM instead."));
        d.fixes.insert(d.fixes.begin() + 1, make_fix("preprocess_logits_for_metrics", std::string(kArgmaxDetail)));
      } else {
        d.evidence.push_back(
            "It failed in Trainer's evaluation loop while gathering this batch's logits from every process: the "
            "gathered tensor holds every process's batch x sequence x vocabulary logits.");
        // The predictions gathered so far stay on the GPU beside it unless eval_accumulation_steps
        // moves them; the gathered batch itself shrinks only with argmax or a smaller batch.
        d.fixes.insert(d.fixes.begin(), make_fix("preprocess_logits_for_metrics", std::string(kArgmaxDetail)));
        d.fixes.insert(d.fixes.begin() + 1, make_fix("eval_accumulation_steps",
                                                     "Moves the predictions gathered so far to the CPU every few steps "
                                                     "instead of keeping them on the GPU beside this batch's."));
      }
      d.fixes.insert(d.fixes.begin() + 2,
                     make_fix("prediction_loss_only", "When the metrics need only the loss, no logits are kept at all."));
      // Trainer's evaluation batch is a TrainingArguments setting, not a generate() loop.
      for (Fix& f : d.fixes) {
        if (f.id != "smaller_inference_batch") continue;
        f.detail = (m.requested && m.free && *m.requested > *m.free
                        ? fmt::format("The failed request is {} with {} free. ", format_bytes(*m.requested),
                                      format_bytes(*m.free))
                        : std::string()) +
                   "The gathered logits scale with the evaluation batch; halve it.";
        f.snippet = "per_device_eval_batch_size=B/2  # TrainingArguments; B = the current value";
      }
      if (d.cause == "capacity_exhausted") std::swap(d.cause, d.secondary_causes.back());
    } else if (operation == "evaluation" && !grad_disabled_by_library(*e.traceback)) {
      d.secondary_causes.push_back("evaluation_with_grad");
      d.evidence.push_back("It failed during evaluation (traceback), where no gradients are needed; a torch.no_grad() "
                           "block does not show in a traceback, so check that the evaluation runs under one.");
      d.fixes.push_back(make_fix("no_grad_for_eval", "Without autograd, activations are freed layer by layer."));
      if (d.cause == "capacity_exhausted") std::swap(d.cause, d.secondary_causes.back());
    } else if (operation == "ddp_setup") {
      // The Reducer's buckets hold a gradient-sized copy of every trainable parameter, made when
      // DDP wraps the model, on top of the full replica each GPU already holds.
      // Nothing has run yet: batch, sequence and activation fixes do not apply, nor does the
      // "one huge tensor" reading of the request (it is the bucket).
      d.secondary_causes.push_back("ddp_replica_does_not_fit");
      if (d.evidence.size() > 1) d.evidence.resize(1);
      d.evidence.push_back(fmt::format(
          "It failed while DistributedDataParallel wrapped the model{}: DDP allocates gradient buckets as large as all "
          "trainable parameters' gradients, on top of the full model every GPU holds.",
          m.requested ? fmt::format(" (the {} request is the buckets)", format_bytes(*m.requested)) : ""));
      d.fixes.clear();
      d.fixes.push_back(make_fix("shard_model", "Each GPU then holds 1/N of the parameters, gradients and optimizer state "
                                                "instead of all of them."));
      d.fixes.push_back(make_fix("lora", "Only the adapters have gradients: the buckets shrink to their size."));
      d.fixes.push_back(make_fix("bigger_gpu", "A full replica and its gradients must fit on every GPU under DDP."));
      if (d.cause == "capacity_exhausted") std::swap(d.cause, d.secondary_causes.back());
    } else if (operation == "model_loading") {
      d.secondary_causes.push_back("model_does_not_fit");
      d.evidence.push_back("It failed while loading the model: the weights alone do not fit.");
      // Nothing has run yet: batch, sequence, precision-of-training and optimizer fixes cannot act;
      // only how the weights are loaded, and where, can.
      d.fixes.erase(std::remove_if(d.fixes.begin(), d.fixes.end(), [](const Fix& f) { return is_recipe_fix(f.id); }),
                    d.fixes.end());
      d.fixes.push_back(make_fix("load_in_bf16", "fp32 weights take 4 bytes per parameter, bf16 2."));
      if (d.cause == "host_memory") {
        // System RAM ran out while loading: what lowers the load's RAM peak, not the GPU's fixes
        // (offloading to CPU memory would need more of it; a bigger GPU changes nothing in RAM).
        d.fixes.push_back(make_fix("low_cpu_mem_usage",
                                   "A plain load builds the model in RAM and reads the whole state dict beside it: about "
                                   "twice the weights at its peak; device_map loads each tensor onto the GPU as it is read."));
      } else {
        d.fixes.push_back(make_fix("quantize_model", "8-bit weights take half of bf16, 4-bit a quarter."));
        d.fixes.push_back(make_fix("offload", "device_map=\"auto\" places the layers that do not fit in CPU memory.",
                                   "from_pretrained(..., device_map=\"auto\", max_memory={0: \"20GiB\", \"cpu\": \"64GiB\"})"));
        d.fixes.push_back(make_fix("bigger_gpu", "The weights must fit, with room for activations or the KV cache."));
      }
      if (d.cause == "capacity_exhausted") std::swap(d.cause, d.secondary_causes.back());
    }
  }
  if (gpu_error && context.events != nullptr && context.readings != nullptr) {
    const ClimbFinding climb = context.climb ? *context.climb : find_climbing(*context.events, *context.readings);
    if (climb.climbing && climb.last_line <= e.end_line + 1) {
      d.secondary_causes.push_back("memory_climbing");
      d.evidence.push_back(fmt::format("Memory climbed from {} (line {}) to {} (line {}) over {} {}: something is kept alive "
                                       "from step to step.", format_bytes(climb.first_bytes), climb.first_line,
                                       format_bytes(climb.last_bytes), climb.last_line, climb.samples,
                                       climb.source == "events" ? "errors" : "readings"));
      d.fixes.push_back(make_fix("release_references", "Accumulating loss tensors or outputs keeps every step's graph alive."));
    }
  }
  // A training OOM after transformers warned that flash attention got fp32 inputs: the embeddings
  // or norms were upcast (PEFT's prepare_model_for_kbit_training casts every non-quantized
  // parameter to fp32), so every hidden state between matmuls is fp32 (docs/estimator.md).
  if (gpu_error && e.framework.rfind("pytorch", 0) == 0 && operation != "evaluation" && operation != "generation" &&
      context.notices != nullptr) {
    for (const LogNotice& n : *context.notices) {
      if (n.kind != "fp32_hidden_states" || n.line > e.line || (n.rank && e.rank && n.rank != e.rank)) continue;
      d.secondary_causes.push_back("fp32_hidden_states");
      d.evidence.push_back(fmt::format("Line {}: transformers warns that the hidden states reached flash attention in "
                                       "fp32 (upcast embeddings or norms): every activation between matmuls takes twice "
                                       "the memory of bf16.", n.line));
      d.fixes.push_back(make_fix("bf16_hidden_states", "About halves the saved hidden states (each checkpointed layer "
                                                       "input, the MLP's intermediate tensors) and the fp32 copies of "
                                                       "embeddings and head."));
      break;
    }
  }
  if (vllm && e.is_error && operation == "cuda_graph_capture") d.cause = "cuda_graph_capture_oom";
  if (vllm) {
    // PyTorch's message from inside a vLLM process: its recipe fixes become vLLM flags.
    const size_t before = d.fixes.size();
    d.fixes.erase(std::remove_if(d.fixes.begin(), d.fixes.end(), [](const Fix& f) { return is_recipe_fix(f.id); }),
                  d.fixes.end());
    if (d.fixes.size() != before) add_vllm_ladder(d, e, context, operation == "cuda_graph_capture");
    // A server has no Python to edit: only the environment variable applies.
    for (Fix& f : d.fixes) {
      if (f.id == "library_workspace") f.snippet = fix_snippet(f.id, FixVariant::kVllmServer);
    }
  }
  const bool sglang = !vllm && from_sglang(e) && e.framework != "sglang";
  if (sglang && e.is_error && operation == "cuda_graph_capture") d.cause = "cuda_graph_capture_oom";
  if (sglang && e.is_error) {
    // PyTorch's message from inside an SGLang server: its recipe fixes become SGLang flags.
    const size_t before = d.fixes.size();
    d.fixes.erase(std::remove_if(d.fixes.begin(), d.fixes.end(), [](const Fix& f) { return is_recipe_fix(f.id); }),
                  d.fixes.end());
    if (d.fixes.size() != before || d.fixes.empty()) {
      add_sglang_ladder(d, operation == "cuda_graph_capture", sglang_mem_fraction_static(context, e));
    }
  }
  const std::string app = application(e);
  // A PyTorch error inside text-generation-inference's server: its launcher flags, not a training recipe.
  if (!vllm && app == kAppTgi && e.is_error && e.format != "tgi_warmup_prefill") {
    const size_t before = d.fixes.size();
    d.fixes.erase(std::remove_if(d.fixes.begin(), d.fixes.end(), [](const Fix& f) { return is_recipe_fix(f.id); }),
                  d.fixes.end());
    if (d.fixes.size() != before) add_tgi_ladder(d, std::nullopt);
  }
  if (!vllm && (app == kAppComfyUi || app == kAppSdWebui) && e.is_error) {
    // An image-generation front end: its own launch flags and nodes, not a training recipe.
    // A size-specific reason to shrink the input (a per-allocation limit, one huge tensor) stays,
    // said as the front end's own step.
    std::string size_detail;
    for (const Fix& f : d.fixes) {
      if (f.id == "smaller_input") size_detail = f.detail;
    }
    const size_t before = d.fixes.size();
    d.fixes.erase(std::remove_if(d.fixes.begin(), d.fixes.end(), [](const Fix& f) { return is_recipe_fix(f.id); }),
                  d.fixes.end());
    if (d.fixes.size() != before) add_image_ui_ladder(d, e, m, app, size_detail);
  }
  // The vendor's own tools: nvidia-smi and CUDA_VISIBLE_DEVICES do not exist on AMD or Intel GPUs.
  const bool amd = e.framework == "pytorch-rocm" || e.message.find("hipError") != std::string::npos ||
                   e.message.find("HIP out of memory") != std::string::npos;
  const bool intel = e.message.find("XPU out of memory") != std::string::npos || e.message.find("on device xpu:") != std::string::npos ||
                     e.message.find("_RESULT_ERROR_OUT_OF_DEVICE_MEMORY") != std::string::npos;
  for (Fix& f : d.fixes) {
    if (amd || intel) {
      const std::string tool = amd ? "rocm-smi" : "xpu-smi";
      for (size_t at = f.detail.find("nvidia-smi"); at != std::string::npos; at = f.detail.find("nvidia-smi", at + tool.size())) {
        f.detail.replace(at, 10, tool);
      }
    }
    // The allocator variable is PyTorch's own: only a PyTorch-on-ROCm message gets the HIP name.
    if (f.id == "expandable_segments" && e.framework != "pytorch-rocm") continue;
    if (!amd && !intel) continue;
    if (auto own = fix_variant_snippet(f.id, amd ? FixVariant::kAmd : FixVariant::kIntel)) f.snippet = *own;
  }
  // The launch already turned expandable segments on (its command line, an environment dump):
  // advising them again would change nothing.
  if (stated_setting(context, e, "expandable_segments_on")) {
    const size_t before = d.fixes.size();
    d.fixes.erase(std::remove_if(d.fixes.begin(), d.fixes.end(), [](const Fix& f) { return f.id == "expandable_segments"; }),
                  d.fixes.end());
    if (d.fixes.size() != before) {
      d.evidence.push_back("Expandable segments were already on for this run (the log sets "
                           "expandable_segments:True in the allocator's settings before the error).");
    }
  }
  // A script that drives DeepSpeed's engine itself (its frames, no Trainer, Accelerate, Lightning or
  // TRL above them) sets the batch, precision, ZeRO stage and offload in DeepSpeed's config, not in
  // TrainingArguments.
  if (driven_by_deepspeed_engine(e)) {
    for (Fix& f : d.fixes) {
      if (auto own = fix_variant_snippet(f.id, FixVariant::kDeepSpeed)) f.snippet = *own;
    }
  }
  // bitsandbytes on Apple Silicon: its docs list CUDA, ROCm, Intel XPU/CPU and Gaudi up to v0.48
  // ("Apple Silicon support is planned"); v0.50 adds Apple Silicon, but the paged optimizers page
  // through CUDA unified memory, which MPS does not have. So on MPS no paged 8-bit optimizer and no
  // bitsandbytes 4-bit base: LoRA on the model as loaded. (ROCm: supported since the multi-backend
  // release, experimental in v0.48, official in v0.50: the fixes stay.)
  if (e.framework == "pytorch-mps") {
    d.fixes.erase(std::remove_if(d.fixes.begin(), d.fixes.end(), [](const Fix& f) { return f.id == "eight_bit_optimizer"; }),
                  d.fixes.end());
    for (Fix& f : d.fixes) {
      if (f.id == "lora") {
        f.title = "Train LoRA adapters";
        f.snippet = "peft.LoraConfig(r=16, target_modules=\"all-linear\")  # no bitsandbytes 4-bit base on MPS";
      } else if (f.id == "quantize_model") {
        f.snippet = std::string(fix_snippet("quantize_model", FixVariant::kMlx)) + "  # not bitsandbytes on MPS";
      }
    }
  }
  d.evidence.insert(d.evidence.end(), m.ignored.begin(), m.ignored.end());
  order_fixes(d.fixes);
  // (A rule that knows better words, such as the TPU compiler's HBM figures, has set them already.)
  if (d.capacity_title.empty() &&
      (d.cause == "capacity_exhausted" ||
       std::find(d.secondary_causes.begin(), d.secondary_causes.end(), "capacity_exhausted") != d.secondary_causes.end())) {
    d.capacity_title = capacity_title(m);
  }
  return d;
}

}  // namespace oomdoc
