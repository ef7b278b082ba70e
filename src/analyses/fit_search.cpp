#include "analyses/fit_search.h"

#include "analyses/llama_cpp_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "analyses/estimator.h"
#include "analyses/fix_catalog.h"
#include "core/text.h"
#include "model/architecture.h"
#include "model/gguf_types.h"
#include "core/units.h"
#include "readers/gpu_catalog.h"
#include "readers/job_file.h"

namespace oomdoc {
namespace {

// One way to make a change: what it does to a job, and how it reads in the plan.
struct Candidate {
  FitChange change;
  std::function<void(Job&)> apply;
  // Taken only when it makes the job fit, never as a partial improvement for later steps to build
  // on: a TP/PP layout changes the training program, and later steps (offload) do not combine
  // with it.
  bool only_if_fits = false;
};

// A change of the ladder: its ids (fit's own and the fix catalogue's), its step, what it is, what it
// costs, the settings that apply it, and its effect on the job.
Candidate candidate(std::string id, std::string fix_id, int step, std::string title, std::string cost,
                    std::vector<FitSetting> settings, std::function<void(Job&)> apply) {
  Candidate c;
  c.change.id = std::move(id);
  c.change.fix_id = std::move(fix_id);
  c.change.step = step;
  c.change.title = std::move(title);
  c.change.cost = std::move(cost);
  c.change.settings = std::move(settings);
  c.apply = std::move(apply);
  return c;
}

// A step of the cost order produces its candidates for a job, cheapest first.
using Generator = std::function<std::vector<Candidate>(const Job&)>;

struct Step {
  std::string id;
  Generator generate;
};

// The estimate's three totals, and what fits is judged on: what the job needs when memory is
// short, without the allocator's reclaimable cache (oom_view).
PredictedTotals totals_of(const Estimate& estimate) {
  return PredictedTotals{estimate.peak_allocated_bytes, estimate.peak_reserved_bytes, estimate.device_used_bytes,
                         oom_view(estimate).device_used_bytes};
}

// A combination the job reader would refuse (params offload under DDP, once the sharding change it
// was made for is pruned) is no plan: `oomdoc estimate --job` must accept every plan's job.
std::optional<PredictedTotals> predict(const EstimateFn& est, const ModelSpec& model, const Job& job) {
  if (!validate_job(job, "plan")) return std::nullopt;
  auto estimate = est(model, job);
  if (!estimate) return std::nullopt;
  return totals_of(*estimate);
}

bool is_training(const Job& job) {
  if (job.implementation && *job.implementation == "llama_cpp") return false;   // llama.cpp only serves
  return !job.task || job.task->rfind("train", 0) == 0;
}

bool has_offload(const Job& job, const std::string& what) {
  return std::find(job.offload.begin(), job.offload.end(), what) != job.offload.end();
}

bool is_sharded(const Job& job) {
  return job.parallelism && *job.parallelism != "ddp";
}

uint64_t model_parallel_degree(const Job& job) {
  return job.tp.value_or(1) * job.pp.value_or(1);
}

std::string precision_mixed(bool bf16) { return bf16 ? "bf16_mixed" : "fp16_mixed"; }

// ---- the steps, in cost order (docs/fit.md explains the order and each cost) ----

std::vector<Candidate> micro_batch_candidates(const Job& job) {
  std::vector<Candidate> out;
  if (job.implementation && *job.implementation == "llama_cpp") return out;   // its own --parallel step
  if (!is_training(job)) {
    // No effective batch to keep: the largest batch that reaches the goal, every size up to 32
    // and 10% steps above (the first candidate that fits is taken).
    const uint64_t batch = job.batch_size.value_or(1);
    for (uint64_t b = batch - 1; b >= 1 && batch > 1; b = b > 32 ? b * 9 / 10 : b - 1) {
      out.push_back(candidate("batch_size", "smaller_inference_batch", 2, fmt::format("batch {} -> {}", batch, b),
                              "fewer sequences at once: lower throughput",
                              {{"python", fmt::format("# {} prompt(s) per generate() call (pipeline(..., batch_size={}))", b, b), ""}},
                              [b](Job& j) { j.batch_size = b; }));
      if (b == 1) break;
    }
    return out;
  }
  const uint64_t micro = job.micro_batch_size.value_or(1);
  const uint64_t accum = job.grad_accum_steps.value_or(1);
  const uint64_t effective = micro * accum;
  // Data-parallel replicas multiply it: the global batch is what the alternatives on more cards keep.
  const uint64_t replicas = std::max<uint64_t>(
      1, job.num_gpus.value_or(1) / std::max<uint64_t>(1, job.tp.value_or(1) * job.pp.value_or(1) * job.cp.value_or(1)));
  const std::string kept = replicas > 1 ? fmt::format("global batch {} kept: {} per GPU x {} GPUs", effective * replicas,
                                                      effective, replicas)
                                        : fmt::format("effective batch {} kept", effective);
  for (uint64_t m = micro - (micro > 0 ? 1 : 0); m >= 1 && micro > 1; --m) {
    if (effective % m != 0) continue;  // keep the effective batch exactly
    const uint64_t a = effective / m;
    out.push_back(candidate("micro_batch", "smaller_batch", 2,
                            fmt::format("micro-batch {} -> {} with gradient accumulation {} -> {} ({})",
                                        micro, m, accum, a, kept),
                            "some throughput: smaller matrix multiplies use the GPU less well; the "
                            "optimisation is the same (same effective batch)",
                            {{"TrainingArguments", "per_device_train_batch_size", std::to_string(m)},
                             {"TrainingArguments", "gradient_accumulation_steps", std::to_string(a)}},
                            [m, a](Job& j) {
                              j.micro_batch_size = m;
                              j.grad_accum_steps = a;
                            }));
  }
  return out;
}

// FlashAttention-2 runs on Ampere and newer NVIDIA cards (compute capability 8.0+: "FlashAttention-2
// currently supports Ampere, Ada, or Hopper GPUs", Dao-AILab/flash-attention README) and on ROCm
// (MI200, MI300); not on Turing, Volta or Pascal, nor on Apple's GPUs, where SDPA is what runs.
// Unknown with --memory: not ruled out.
bool runs_flash_attention_2(const FitOptions& options) {
  static const std::set<std::string> kWithout = {"Pascal", "Volta", "Turing", "Apple M"};
  return kWithout.count(options.gpu_architecture) == 0;
}

// The flash kernel a plan may ask for on this GPU: the family's, except gpt-oss's kernels-hub FA3
// build, which runs on Hopper only (FlashAttention-3); "" when there is none to offer.
std::string usable_flash_attention(const ModelSpec& model, const FitOptions& options, const Job& job) {
  // FlashAttention has no fp32 kernels: an fp32 job is never offered one (validate_job refuses it).
  if (job.precision && *job.precision == "fp32") return "";
  if (!runs_flash_attention_2(options)) return "";
  std::string flash = flash_attention_setting(model);
  if (flash == "kernels-community/vllm-flash-attn3" && options.gpu_architecture != "Hopper") return "";
  return flash;
}

std::vector<Candidate> padding_free_candidates(const ModelSpec& model, const FitOptions& options, const Job& job) {
  const std::string flash = usable_flash_attention(model, options, job);
  if (!is_training(job) || job.padding_free.value_or(false) || flash.empty()) return {};
  return {candidate("padding_free", "shorter_sequence", 3,
                    "padding-free batches (examples concatenated, no pad tokens)",
                    flash == "flash_attention_2" ? "none on results; needs FlashAttention-2 (variable-length kernels)"
                                                 : "none on results; needs the flash kernel " + flash +
                                                       " (variable-length kernels; Hopper GPUs)",
                    {{"SFTConfig", "padding_free", "True"},
                     {"from_pretrained", "attn_implementation", "\"" + flash + "\""}},
                    [](Job& j) {
                      j.padding_free = true;
                      j.attention_impl = "flash";
                    })};
}

// Length cuts are part of a plan only when the data's lengths say what they truncate.
std::vector<Candidate> seq_len_candidates(const Job& job, const std::optional<LengthAnalysis>& lengths) {
  std::vector<Candidate> out;
  if (!lengths || !job.seq_len) return out;
  std::vector<LengthCut> cuts = lengths->cuts;
  std::sort(cuts.begin(), cuts.end(),
            [](const LengthCut& a, const LengthCut& b) { return a.seq_len > b.seq_len; });
  for (const auto& cut : cuts) {
    if (cut.seq_len >= *job.seq_len || cut.truncated_share > kAcceptableTruncation) continue;
    const uint64_t len = cut.seq_len;
    out.push_back(candidate(
        "seq_len", "shorter_sequence", 3, fmt::format("max sequence length {} -> {}", *job.seq_len, len),
        fmt::format("truncates {} of {} examples ({:.2f}%)", cut.truncated, lengths->stats.count,
                    100.0 * cut.truncated_share),
        {{"SFTConfig", "max_length", std::to_string(len)}}, [len](Job& j) { j.seq_len = len; }));
  }
  return out;
}

// PEFT's prepare_model_for_kbit_training casts embeddings, norms and head to fp32, which makes
// every hidden state fp32 (docs/estimator.md): keeping them in 16 bits, as TRL, Axolotl and
// LLaMA-Factory do, is a step-4 change. Without the preparation its gradient checkpointing must be
// asked for, and non-reentrant (peft#1142).
std::vector<Candidate> bf16_hidden_states_candidates(const EstimateFn& est, const ModelSpec& model, const Job& job,
                                                      bool bf16) {
  if (!is_training(job)) return {};
  // Whether (and how) the estimator prepares this job's base: one rule, the estimator's.
  auto estimate = est(model, job);
  if (!estimate || estimate->kbit_upcast == "none") return {};
  const std::string kbit = estimate->kbit_upcast;
  std::vector<FitSetting> settings = {{"python", half_hidden_states_snippet(bf16), ""}};
  // Checkpointing left open is on under the preparation (its default): kept on, stated.
  const bool ask_checkpointing = kbit == "all" && !job.gradient_checkpointing;
  if (ask_checkpointing) {
    settings.push_back({"TrainingArguments", "gradient_checkpointing", "True"});
    settings.push_back({"TrainingArguments", "gradient_checkpointing_kwargs", "{\"use_reentrant\": False}"});
  }
  return {candidate("bf16_hidden_states", "bf16_hidden_states", 4,
                   fmt::format("embeddings, norms and head kept in {} (no fp32 upcast of the hidden states)",
                               bf16 ? "bf16" : "fp16"),
                   fmt::format("small: norms computed from {} weights, as TRL, Axolotl and LLaMA-Factory train QLoRA",
                               bf16 ? "bf16" : "fp16"),
                   std::move(settings), [ask_checkpointing](Job& j) {
                     j.kbit_upcast = "none";
                     // The checkpointing the preparation turned on stays on (stated, not added).
                     if (ask_checkpointing) j.gradient_checkpointing = "full";
                   })};
}

std::vector<Candidate> precision_candidates(const Job& job, bool bf16) {
  if (!is_training(job)) return {};
  const std::string p = job.precision.value_or(default_training_precision(job));
  if (p == "bf16_mixed" || p == "fp16_mixed" || p == "bf16" || p == "fp16") return {};
  const std::string task = job.task.value_or("train_full");
  if (task == "train_lora" || task == "train_qlora") {
    // A frozen base needs no fp32 master: load it in 16 bits and let the Trainer autocast the
    // adapters (an fp32-loaded quantized base keeps fp32 embeddings, norms and hidden states).
    const std::string half = bf16 ? "bf16" : "fp16";
    return {candidate("mixed_precision", "mixed_precision", 4,
                      fmt::format("the frozen base loaded in {} and trained under {} autocast", half, half),
                      bf16 ? "small: the adapters and their optimizer state stay fp32"
                           : "small: fp16 needs loss scaling (the Trainer adds it); this GPU has no bf16",
                      {{"from_pretrained", "torch_dtype", bf16 ? "torch.bfloat16" : "torch.float16"},
                       {"TrainingArguments", half, "True"}},
                      [half](Job& j) {
                        j.precision = half;
                        j.autocast = true;
                      })};
  }
  const std::string mixed = precision_mixed(bf16);
  return {candidate(
      "mixed_precision", "mixed_precision", 4, fmt::format("{} mixed precision", bf16 ? "bf16" : "fp16"),
      bf16 ? "small: activations in bf16, fp32 master weights keep the updates exact"
           : "small: fp16 needs loss scaling (the Trainer adds it); this GPU has no bf16",
      {{"TrainingArguments", bf16 ? "bf16" : "fp16", "True"}}, [mixed](Job& j) { j.precision = mixed; })};
}

std::vector<Candidate> optimizer_candidates(const Job& job) {
  if (!is_training(job)) return {};
  const std::string o = job.optimizer.value_or("adamw");
  std::vector<Candidate> out;
  if (o == "adamw") {
    out.push_back(candidate("optimizer_8bit", "eight_bit_optimizer", 4, "8-bit AdamW (bitsandbytes)",
                            "small: block-wise 8-bit states track 32-bit Adam closely (Dettmers et al. "
                            "2021, arXiv:2110.02861); needs bitsandbytes",
                            {{"TrainingArguments", "optim", "\"adamw_bnb_8bit\""}},
                            [](Job& j) { j.optimizer = "adamw_8bit"; }));
  }
  if (o == "adamw" || o == "adamw_8bit") {
    out.push_back(candidate("paged_optimizer", "eight_bit_optimizer", 4, "paged 8-bit AdamW (bitsandbytes)",
                            "small: as 8-bit AdamW; states page to host memory under pressure instead of "
                            "failing",
                            {{"TrainingArguments", "optim", "\"paged_adamw_8bit\""}},
                            [](Job& j) { j.optimizer = "paged_adamw_8bit"; }));
  }
  return out;
}

// A bitsandbytes 4-bit base without double quantization: quantizing the fp32 absmax constants
// themselves (8-bit, one fp32 per 256 of them) saves about 0.37 bits per parameter, "3 GB for a 65B
// model" (Dettmers et al. 2023, QLoRA, arXiv:2305.14314, section 3), at a negligible cost in speed
// and none in quality: the QLoRA recipe's own setting.
std::vector<Candidate> double_quant_candidates(const Job& job) {
  // (train_qlora without a format is nf4, the estimator's default.)
  const std::string q = job.weight_quantization.value_or(job.task.value_or("") == "train_qlora" ? "nf4" : "");
  if ((q != "nf4" && q != "fp4") || job.double_quant.value_or(false)) return {};
  std::vector<Candidate> out;
  out.push_back(candidate("double_quant", "double_quant", 4, "double quantization of the 4-bit base's constants",
                          "negligible: the 4-bit base's absmax constants are quantized too (QLoRA's recipe)",
                          {{"BitsAndBytesConfig", "bnb_4bit_use_double_quant", "True"}},
                          [](Job& j) { j.double_quant = true; }));
  return out;
}

}  // namespace

bool is_model_parallel(const FitChange& change) {
  return change.id == "tensor_parallel" || change.id == "pipeline_parallel" || change.id == "tensor_pipeline_parallel";
}

namespace {

// A plan that trains differently: LoRA or QLoRA instead of the given method.
bool changes_method(const FitPlan& plan) {
  return std::any_of(plan.changes.begin(), plan.changes.end(),
                     [](const FitChange& c) { return c.id == "lora" || c.id == "qlora"; });
}

std::vector<Candidate> kernel_candidates(const ModelSpec& model, const FitOptions& options, const Job& job) {
  std::vector<Candidate> out;
  // Eager attention as given, or as the family's only default (gpt-oss): the kernel that keeps no
  // seq x seq scores, SDPA where transformers offers it, else the family's flash kernel where it runs.
  const bool eager = job.attention_impl ? *job.attention_impl == "eager" : !supports_sdpa(model);
  const std::string flash = usable_flash_attention(model, options, job);
  if (eager && (supports_sdpa(model) || !flash.empty())) {
    const bool sdpa = supports_sdpa(model);
    Candidate c;
    c.change.id = "attention_kernel";
    c.change.step = 4;
    c.change.title = sdpa ? "SDPA attention instead of eager (no seq x seq score matrices kept)"
                          : "flash attention (" + flash + ") instead of eager (no seq x seq score matrices kept)";
    c.change.cost = sdpa ? "none: same results, usually faster" : "none: same results, faster; needs a Hopper GPU";
    c.change.settings = {{"from_pretrained", "attn_implementation", "\"" + (sdpa ? std::string("sdpa") : flash) + "\""}};
    c.apply = [sdpa](Job& j) { j.attention_impl = sdpa ? "sdpa" : "flash"; };
    out.push_back(std::move(c));
  }
  // The Trainer's use_liger_kernel patches only the families Liger knows (elsewhere it warns and
  // changes nothing): its fused linear cross-entropy, RMSNorm and SwiGLU kernels. Also offered
  // to a job that has Liger's kernels without its loss (Axolotl's per-kernel keys).
  const bool transformers = !job.implementation || *job.implementation == "transformers";
  const std::string kernels = job.kernels.value_or("none");
  const std::string loss = job.loss_impl.value_or("standard");
  const bool fuses_loss = liger_fuses_loss(model);
  if (is_training(job) && transformers && kernels_patch(model, "liger") &&
      ((kernels == "none" && loss != "chunked") || (kernels == "liger" && loss == "standard" && fuses_loss))) {
    Candidate c;
    c.change.id = "fused_loss";
    c.change.fix_id = "fused_kernels";
    c.change.step = 4;
    c.change.title = "Liger kernels: fused linear cross-entropy (logits never materialised in full), "
                     "RMSNorm and SwiGLU kernels that keep less for backward";
    c.change.cost = "small: needs the liger-kernel package; same results";
    c.change.settings = {{"TrainingArguments", "use_liger_kernel", "True"}};
    c.apply = [fuses_loss](Job& j) {
      j.kernels = "liger";
      if (fuses_loss) j.loss_impl = "fused_linear";
    };
    out.push_back(std::move(c));
  }
  return out;
}

// ---- llama.cpp (implementation llama_cpp): its own knobs, cheapest first (the fix catalogue's
// order): flash attention, the 8-bit cache and fewer parallel sequences with the kernels and
// 8-bit states (4), a smaller GGUF with the quantized base (6), a shorter context (7), fewer GPU
// layers with offload (8: much slower) ----

bool is_llama_cpp(const Job& job) { return job.implementation && *job.implementation == "llama_cpp"; }

std::vector<Candidate> llama_flash_candidates(const Job& job) {
  if (!is_llama_cpp(job) || job.attention_impl.value_or("") == "flash") return {};
  return {candidate("llama_flash_attention", "ggml_flash_attention", 4,
                    "flash attention (-fa): the context's f32 score matrices are never built",
                    "none: same results, usually faster", {{"llama.cpp", "--flash-attn", "on"}},
                    [](Job& j) { j.attention_impl = "flash"; })};
}

std::vector<Candidate> llama_kv_candidates(const Job& job) {
  if (!is_llama_cpp(job)) return {};
  // Already quantized (or not a llama.cpp type): nothing cheaper to offer here.
  auto current = llama_cache_type(job.kv_cache_dtype.value_or("auto"));
  if (!current || ggml_bytes(*current, 1) <= ggml_bytes(GgmlType::kQ8_0, 1)) return {};
  return {candidate("llama_kv_cache_type", "ggml_kv_cache_type", 4, "KV cache in q8_0 (-ctk q8_0 -ctv q8_0, with -fa)",
                    "small quality loss", {{"llama.cpp", "--cache-type-k", "q8_0"}, {"llama.cpp", "--cache-type-v", "q8_0"},
                                           {"llama.cpp", "--flash-attn", "on"}},
                    [](Job& j) {
                      j.kv_cache_dtype = "q8_0";
                      j.attention_impl = "flash";
                    })};
}

// Fewer sequences served at once (llama-server --parallel), the context per sequence kept.
std::vector<Candidate> llama_parallel_candidates(const Job& job) {
  if (!is_llama_cpp(job)) return {};
  const uint64_t slots = job.batch_size.value_or(1);
  const uint64_t per_sequence = llama_cpp_context_per_sequence(job);
  std::vector<Candidate> out;
  for (uint64_t b = slots / 2; b >= 1 && slots > 1; b /= 2) {
    out.push_back(candidate("llama_parallel", "smaller_batch", 4, fmt::format("{} -> {} sequences at once", slots, b),
                            "lower throughput: fewer requests served at once",
                            {{"llama.cpp", "--parallel", std::to_string(b)},
                             {"llama.cpp", "--ctx-size", std::to_string(b * per_sequence)}},
                            [b](Job& j) { j.batch_size = b; }));
    if (b == 1) break;
  }
  return out;
}

// Smaller GGUF files, the next one down first. Like the shorter context, taken only where it
// makes the job fit: as a partial step it would pile a quality cut under the steps that follow.
std::vector<Candidate> llama_file_type_candidates(const Job& job, const ModelSpec& model) {
  if (!is_llama_cpp(job)) return {};
  const std::vector<std::string>& kLadder = gguf_file_type_ladder();
  const std::string current = job.weight_quantization.value_or(
      model.gguf ? model.gguf->file_type : job.precision.value_or("") == "fp32" ? "f32" : "f16");
  auto at = std::find(kLadder.begin(), kLadder.end(), current == "bf16" ? "f16" : current);
  std::vector<Candidate> out;
  if (at == kLadder.end()) return out;
  for (auto it = at + 1; it != kLadder.end(); ++it) {
    std::string type = *it;
    std::string upper = type;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    out.push_back(candidate("llama_file_type", "ggml_smaller_quant", 6, fmt::format("a {} GGUF instead of {}", upper, current),
                            "some quality: fewer bits per weight", {{"GGUF file", upper, ""}},
                            [type](Job& j) { j.weight_quantization = type; }));
    out.back().only_if_fits = true;
  }
  return out;
}

// A shorter context (-c), halving down to 512 tokens per sequence.
std::vector<Candidate> llama_context_candidates(const Job& job) {
  if (!is_llama_cpp(job)) return {};
  const uint64_t context = llama_cpp_context_per_sequence(job);
  const uint64_t sequences = job.batch_size.value_or(1);
  std::vector<Candidate> out;
  for (uint64_t c = context / 2; c >= 512; c /= 2) {
    const uint64_t fresh = std::min<uint64_t>(job.max_new_tokens.value_or(0), c / 2);
    out.push_back(candidate("llama_context", "ggml_smaller_context", 7,
                            fmt::format("context {} -> {} tokens per sequence", context, c),
                            "longer prompts are cut", {{"llama.cpp", "--ctx-size", std::to_string(c * sequences)}},
                            [c, fresh](Job& j) {
                              j.prompt_len = c - fresh;
                              j.max_new_tokens = fresh;
                            }));
    out.back().only_if_fits = true;
  }
  return out;
}

// Fewer layers on the GPU (-ngl), the most that fit first: the rest run on the CPU.
std::vector<Candidate> llama_gpu_layers_candidates(const Job& job, uint64_t n_layer) {
  if (!is_llama_cpp(job)) return {};
  const uint64_t current = std::min<uint64_t>(job.gpu_layers.value_or(n_layer + 1), n_layer + 1);
  std::vector<Candidate> out;
  for (uint64_t n = current; n-- > 0;) {
    out.push_back(candidate("llama_gpu_layers", "ggml_fewer_layers", 8,
                            fmt::format("{} of {} layers on the GPU (-ngl {}){}", std::min(n, n_layer), n_layer, n,
                                        n <= n_layer ? ", the output layer on the CPU" : ""),
                            "much slower: the other layers run on the CPU", {{"llama.cpp", "--n-gpu-layers", std::to_string(n)}},
                            [n](Job& j) { j.gpu_layers = n; }));
  }
  return out;
}

std::vector<Candidate> checkpointing_candidates(const Job& job) {
  if (!is_training(job) || job.gradient_checkpointing.value_or("none") == "full") return {};
  return {
      candidate("gradient_checkpointing", "gradient_checkpointing", 5,
                "gradient checkpointing (keep only each layer's input, recompute the rest)",
                fmt::format("about {:.0f}% more compute: one extra forward pass per step (Chen et al. 2016, "
                            "arXiv:1604.06174); Hugging Face's guide reports ~20% slower training",
                            100 * kCheckpointingComputeCost),
                {{"TrainingArguments", "gradient_checkpointing", "True"},
                 {"TrainingArguments", "gradient_checkpointing_kwargs", "{\"use_reentrant\": False}"}},
                [](Job& j) { j.gradient_checkpointing = "full"; })};
}

// Full fine-tuning in pure bf16: the weights, their gradients and the optimizer's states are bf16
// and no fp32 master copy is kept (4 + 4 + 8 bytes per parameter under AdamW become 2 + 2 + 4).
// torchtune fine-tunes this way by default (`dtype: bf16`), LLaMA-Factory with `pure_bf16`,
// Axolotl with `bfloat16`. The cost: an update below about 1/256 of a weight (half of bf16's
// spacing, 8 significant bits) is rounded away, which is why it comes after the steps that change
// nothing numerically (checkpointing only costs compute).
std::vector<Candidate> pure_bf16_candidates(const Job& job, bool bf16) {
  if (!is_training(job) || !bf16) return {};
  const std::string task = job.task.value_or("train_full");
  if (task != "train_full" && task != "train_freeze") return {};
  const std::string p = job.precision.value_or(default_training_precision(job));
  if (p != "bf16_mixed" && p != "fp32") return {};
  return {candidate("pure_bf16", "pure_bf16", 5,
                    "pure bf16: weights, gradients and optimizer states in bf16, no fp32 master copy",
                    "numerical: updates below bf16's resolution are lost (fine for most fine-tuning, torchtune's "
                    "default; riskier for long pre-training). LLaMA-Factory: pure_bf16: true; Axolotl: bfloat16: "
                    "true; torchtune: dtype: bf16",
                    {{"from_pretrained", "torch_dtype", "torch.bfloat16"}, {"TrainingArguments", "bf16", "True"}},
                    [](Job& j) {
                      j.precision = "bf16";
                      j.autocast = true;
                    })};
}

// Adapters over a frozen base: the base loads in 16 bits (no fp32 master for frozen weights) and
// the Trainer autocasts, whatever the full fine-tuning's precision was: bf16/fp16 mixed precision
// there means fp32 weights, which LoRA's prediction must not keep silently (nor assume away).
// An explicit fp32 job stays fp32.
void load_base_in_16_bits(Job& j, bool bf16) {
  const std::string p = j.precision.value_or("");
  if (p == "fp32" || p == "bf16" || p == "fp16") return;
  j.precision = bf16 ? "bf16" : "fp16";
  j.autocast = true;
}

std::vector<FitSetting> base_in_16_bits_settings(const Job& job, bool bf16) {
  if (job.precision.value_or("") == "fp32") return {};
  const std::string half = bf16 ? "bf16" : "fp16";
  return {{"from_pretrained", "torch_dtype", bf16 ? "torch.bfloat16" : "torch.float16"},
          {"TrainingArguments", half, "True"}};
}

std::vector<FitSetting> fsdp_full_shard_settings(const Job& job);
void add_quant_storage_for_sharding(const Job& job, std::vector<FitSetting>& settings);

// The Trainer's FSDP (Accelerate) over a 16-bit model run under autocast upcasts the parameters
// it wraps to fp32 ("FSDP upcast of low precision parameters", accelerator.py), as the training
// config readers size such a config: the job becomes *_mixed, with fp32 master weights.
// The fp16 counterpart of a bf16 precision, on a card without bf16, as the job can run it: a job
// that trains the model's own weights (full fine-tuning, freezing) keeps fp32 masters under fp16's
// loss scaling (the Trainer's GradScaler refuses fp16 gradients: "Attempting to unscale FP16
// gradients."); adapters (fp32 under PEFT), inference and loading run in pure fp16.
std::string fp16_counterpart(const std::string& bf16_precision, const Job& job) {
  const std::string task = job.task.value_or("");
  const bool trains_model_weights = is_training(job) && task != "train_lora" && task != "train_qlora";
  if (bf16_precision == "bf16" && trains_model_weights) return "fp16_mixed";
  return "fp16" + bf16_precision.substr(4);
}

void trainer_fsdp(Job& j) {
  j.parallelism = "fsdp_full_shard";
  const std::string precision = j.precision.value_or("");
  if (j.autocast.value_or(false) && (precision == "bf16" || precision == "fp16")) j.precision = precision + "_mixed";
}

// LoRA and QLoRA train under the Trainer (PEFT), which has no tensor or pipeline parallelism: a
// TP/PP job moving to adapters shards its GPUs with FSDP instead, as the FSDP change sets it.
bool has_model_parallel_layout(const Job& job) { return job.tp.value_or(1) * job.pp.value_or(1) > 1; }
void leave_model_parallel(Job& j) {
  if (!has_model_parallel_layout(j)) return;
  j.tp.reset();
  j.pp.reset();
  if (j.num_gpus.value_or(1) > 1) {
    trainer_fsdp(j);
    j.sync_each_batch = true;
  }
}
void add_fsdp_instead_of_layout(const Job& before, const std::string& task, Candidate& c) {
  if (!has_model_parallel_layout(before)) return;
  c.change.title += "; FSDP across the GPUs instead of tensor/pipeline parallel (PEFT trains under the Trainer)";
  if (before.num_gpus.value_or(1) > 1) {
    Job after = before;
    after.task = task;
    for (auto& s : fsdp_full_shard_settings(after)) c.change.settings.push_back(s);
  }
}

std::vector<Candidate> lora_candidates(const Job& job, bool bf16) {
  std::vector<Candidate> out;
  const std::string task = job.task.value_or("train_full");
  if (task == "train_full" || task == "train_freeze") {
    out.push_back(candidate("lora", "lora", 6,
                            "LoRA adapters (r=16 on every linear layer) instead of full fine-tuning",
                            "method change: only adapters train; quality can trail full fine-tuning on "
                            "large domain shifts",
                            [&] {
                              std::vector<FitSetting> settings = {{"LoraConfig", "r", "16"},
                                                                  {"LoraConfig", "lora_alpha", "32"},
                                                                  {"LoraConfig", "target_modules", "\"all-linear\""},
                                                                  {"LoraConfig", "task_type", "\"CAUSAL_LM\""}};
                              for (auto& s : base_in_16_bits_settings(job, bf16)) settings.push_back(s);
                              return settings;
                            }(),
                            [bf16](Job& j) {
                              load_base_in_16_bits(j, bf16);
                              leave_model_parallel(j);
                              j.task = "train_lora";
                              LoraSettings lora;
                              lora.r = 16;
                              lora.alpha = 32;
                              lora.all_linear = true;
                              j.lora = lora;
                            }));
    add_fsdp_instead_of_layout(job, "train_lora", out.back());
  }
  if (task == "train_full" || task == "train_freeze" || task == "train_lora") {
    Candidate c;
    c.change.id = "qlora";
    c.change.fix_id = "lora";
    c.change.step = 6;
    // The plan keeps embeddings, norms and head in the model's dtype, as TRL's SFTTrainer (2026),
    // Axolotl and LLaMA-Factory do; PEFT's prepare_model_for_kbit_training would cast them, and
    // with them every hidden state, to fp32 (docs/estimator.md, kbit_upcast).
    c.change.title = "QLoRA: LoRA on a 4-bit NF4 base (double quantization), the rest kept in 16 bits";
    c.change.cost = "quality and method change: the frozen base is 4-bit; a small quality loss "
                    "and slower steps (dequantization); skip peft's prepare_model_for_kbit_training, "
                    "whose fp32 upcast of embeddings, norms and head costs more memory";
    const std::string compute = bf16 ? "torch.bfloat16" : "torch.float16";
    c.change.settings = {{"BitsAndBytesConfig", "load_in_4bit", "True"},
                         {"BitsAndBytesConfig", "bnb_4bit_quant_type", "\"nf4\""},
                         {"BitsAndBytesConfig", "bnb_4bit_use_double_quant", "True"},
                         {"BitsAndBytesConfig", "bnb_4bit_compute_dtype", compute}};
    // Without prepare_model_for_kbit_training (which also calls enable_input_require_grads), a
    // frozen base under reentrant checkpointing would give the adapters no gradients (peft#1142).
    if (job.gradient_checkpointing.value_or("none") != "none") {
      c.change.settings.push_back({"TrainingArguments", "gradient_checkpointing_kwargs", "{\"use_reentrant\": False}"});
    }
    if (task != "train_lora") {
      c.change.settings.insert(c.change.settings.begin(),
                               {{"LoraConfig", "r", "16"},
                                {"LoraConfig", "lora_alpha", "32"},
                                {"LoraConfig", "target_modules", "\"all-linear\""},
                                {"LoraConfig", "task_type", "\"CAUSAL_LM\""}});
    } else if (!job.lora) {
      // A LoRA job with PEFT's default targets is sized with the all-linear adapters QLoRA's
      // recipe trains (below): the plan says so.
      c.change.settings.insert(c.change.settings.begin(), {"LoraConfig", "target_modules", "\"all-linear\""});
    }
    for (auto& setting : base_in_16_bits_settings(job, bf16)) {
      if (task != "train_lora" || job.precision.value_or("").find("_mixed") != std::string::npos) {
        c.change.settings.push_back(setting);
      }
    }
    add_fsdp_instead_of_layout(job, "train_qlora", c);
    // Already sharding its parameters (ZeRO-3, any FSDP strategy): the 4-bit base must flatten with them.
    const std::string sharding = job.parallelism.value_or("ddp");
    if (!has_model_parallel_layout(job) && job.num_gpus.value_or(1) > 1 &&
        (sharding == "zero3" || sharding.rfind("fsdp", 0) == 0 || sharding == "hybrid_shard")) {
      Job after = job;
      after.task = "train_qlora";
      add_quant_storage_for_sharding(after, c.change.settings);
    }
    c.apply = [bf16](Job& j) {
      load_base_in_16_bits(j, bf16);
      leave_model_parallel(j);
      j.task = "train_qlora";
      j.weight_quantization = "nf4";
      j.double_quant = true;
      j.kbit_upcast = "none";
      if (!j.lora) {
        LoraSettings lora;
        lora.r = 16;
        lora.alpha = 32;
        lora.all_linear = true;
        j.lora = lora;
      }
    };
    out.push_back(std::move(c));
  }
  return out;
}

// FSDP full sharding in TrainingArguments, reduce-scattering after every micro-batch (what the
// prediction assumes once the job shards: Job::sync_each_batch).
// Sharding a 4-bit base (FSDP or ZeRO-3) needs its packed weights stored in the dtype of the other
// parameters, so they flatten with them (PEFT "FSDP + QLoRA" and "DeepSpeed ZeRO-3 + QLoRA":
// bnb_4bit_quant_storage).
void add_quant_storage_for_sharding(const Job& job, std::vector<FitSetting>& settings) {
  if (job.task.value_or("") != "train_qlora") return;
  const bool fp16 = job.precision && job.precision->rfind("fp16", 0) == 0;
  settings.push_back({"BitsAndBytesConfig", "bnb_4bit_quant_storage", fp16 ? "torch.float16" : "torch.bfloat16"});
}

std::vector<FitSetting> fsdp_full_shard_settings(const Job& job) {
  std::vector<FitSetting> settings = {
      {"TrainingArguments", "fsdp", "\"full_shard auto_wrap\""},
      {"TrainingArguments", "accelerator_config", std::string(kSyncEachBatchAcceleratorConfig)}};
  add_quant_storage_for_sharding(job, settings);
  return settings;
}

// ZeRO-2 and FSDP: a setting, the model code unchanged.
std::vector<Candidate> data_sharding_candidates(const Job& job, uint64_t num_gpus) {
  std::vector<Candidate> out;
  if (num_gpus < 2 || !is_training(job)) return out;
  const std::string current = job.parallelism.value_or("ddp");
  if (current == "ddp" || current == "zero1") {
    Candidate c;
    c.change.id = "zero2";
    c.change.fix_id = "shard_model";
    c.change.step = 7;
    c.change.title = fmt::format("ZeRO-2 across the {} GPUs (optimizer state and gradients "
                                 "sharded)", num_gpus);
    c.change.cost = "communication about as DDP's (reduce-scatter instead of all-reduce; "
                    "Rajbhandari et al. 2020)";
    c.change.settings = {{"TrainingArguments", "deepspeed",
                          "{\"zero_optimization\": {\"stage\": 2}}"}};
    c.apply = [num_gpus](Job& j) {
      j.parallelism = "zero2";
      j.num_gpus = num_gpus;
    };
    out.push_back(std::move(c));
  }
  if (current != "fsdp_full_shard" && current != "zero3") {
    Candidate c;
    c.change.id = "fsdp_full_shard";
    c.change.fix_id = "shard_model";
    c.change.step = 7;
    c.change.title = fmt::format("FSDP full sharding (ZeRO-3) across the {} GPUs", num_gpus);
    c.change.cost = "about 1.5x DDP's communication (parameters gathered each step; "
                    "Rajbhandari et al. 2020); fast over NVLink, slower over PCIe";
    c.change.settings = fsdp_full_shard_settings(job);
    c.apply = [num_gpus](Job& j) {
      trainer_fsdp(j);
      j.num_gpus = num_gpus;
      j.sync_each_batch = true;  // without it, accumulation keeps unsharded gradients (no_sync)
    };
    out.push_back(std::move(c));
  }
  return out;
}

// FSDP accumulating under no_sync() holds the gradients unsharded (estimator.cpp): syncing every
// micro-batch keeps shards, for one reduce-scatter per micro-batch. As cheap as the micro-batch
// step, and tried right after it (which may itself have introduced the accumulation).
std::vector<Candidate> sync_each_batch_candidates(const Job& job) {
  const std::string parallelism = job.parallelism.value_or("ddp");
  if (!is_training(job) || !is_fsdp(parallelism) || job.num_gpus.value_or(1) < 2 || job.grad_accum_steps.value_or(1) < 2 ||
      job.sync_each_batch.value_or(false)) {
    return {};
  }
  return {candidate("sync_each_batch", "fsdp_sync_each_batch", 2,
                    "reduce-scatter the gradients after every micro-batch (FSDP without no_sync)",
                    "one gradient reduce-scatter per micro-batch instead of per optimizer step",
                    {{"TrainingArguments", "accelerator_config", std::string(kSyncEachBatchAcceleratorConfig)}},
                    [](Job& j) { j.sync_each_batch = true; })};
}

// ---- inference in PyTorch (transformers): the KV cache, then the weights ----

// A quantized KV cache (transformers' QuantizedCache, HQQ backend at 8 bits: one byte per element,
// as the estimator sizes int8): the precision step of inference.
std::vector<Candidate> inference_kv_cache_candidates(const Job& job) {
  if (is_training(job) || is_llama_cpp(job) || job.task.value_or("") == "load") return {};
  const std::string kv = job.kv_cache_dtype.value_or("auto");
  if (kv == "fp8" || kv == "int8") return {};
  return {candidate("kv_cache_int8", "quantized_kv_cache", 4, "KV cache in 8 bits (quantized cache)",
                    "slower decoding (the cache is dequantized at every step); a small accuracy risk",
                    {{"generate", "cache_implementation", "\"quantized\""},
                     {"generate", "cache_config", "{\"backend\": \"HQQ\", \"nbits\": 8}"}},
                    [](Job& j) { j.kv_cache_dtype = "int8"; })};
}

// Quantized weights at load (bitsandbytes). They cost quality, which splitting the model over GPUs
// the user already has does not: for inference this comes after the sharding step (7).
std::vector<Candidate> inference_quantization_candidates(const Job& job) {
  if (is_training(job) || is_llama_cpp(job) || job.weight_quantization) return {};
  return {candidate("quantize_int8", "quantize_model", 8, "load the weights in 8 bits (bitsandbytes LLM.int8())",
                    "slower matrix multiplies; a small quality loss",
                    {{"BitsAndBytesConfig", "load_in_8bit", "True"}},
                    [](Job& j) { j.weight_quantization = "int8"; }),
          candidate("quantize_nf4", "quantize_model", 8, "load the weights in 4 bits (bitsandbytes NF4)",
                    "some quality loss; slower matrix multiplies than 16-bit",
                    {{"BitsAndBytesConfig", "load_in_4bit", "True"},
                     {"BitsAndBytesConfig", "bnb_4bit_quant_type", "\"nf4\""},
                     {"BitsAndBytesConfig", "bnb_4bit_compute_dtype", "torch.bfloat16"}},
                    [](Job& j) { j.weight_quantization = "nf4"; })};
}

// Tensor and pipeline parallel degrees worth trying on n GPUs for this model: TP up to the GPU's
// tensor-parallel domain (one NVLink server, Narayanan et al. 2021, takeaway #1) that splits the heads as the estimator
// accepts (tensor_parallel_problem), PP up to the number of layers; tp x pp divides n, the rest is data parallel.
// Ordered by how much they cost: fewer model-parallel GPUs first; between equal products, TP first
// on an NVLink-class interconnect and PP first without one (TP all-reduces inside every layer, PP
// only sends activations between neighbouring stages).
std::vector<std::pair<uint64_t, uint64_t>> model_parallel_layouts(const ModelSpec& model, uint64_t n,
                                                                  bool fast_interconnect, uint64_t tp_domain,
                                                                  uint64_t min_tp, uint64_t min_pp) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (uint64_t tp = 1; tp <= std::min<uint64_t>(n, tp_domain); tp *= 2) {
    if (tp < min_tp || n % tp != 0) continue;
    if (!tensor_parallel_problem(model, tp).empty()) continue;
    for (uint64_t pp = 1; tp * pp <= n; pp *= 2) {
      if (pp < min_pp || (n / tp) % pp != 0 || tp * pp == 1) continue;
      if (tp == min_tp && pp == min_pp) continue;   // the layout the job already has
      if (pp > 1 && pp > model.num_layers) continue;
      out.emplace_back(tp, pp);
    }
  }
  std::stable_sort(out.begin(), out.end(), [&](const auto& a, const auto& b) {
    const bool slow_a = !fast_interconnect && a.first > 1, slow_b = !fast_interconnect && b.first > 1;
    if (slow_a != slow_b) return slow_b;
    if (a.first * a.second != b.first * b.second) return a.first * a.second < b.first * b.second;
    return fast_interconnect ? a.first > b.first : a.second > b.second;
  });
  return out;
}

// What TP costs on this GPU, from the catalog's interconnect note.
std::string tensor_parallel_cost(const FitOptions& o, uint64_t tp, bool training) {
  std::string where = o.gpu_interconnect.empty() ? "interconnect unknown (--memory)" : o.gpu_interconnect;
  return fmt::format("communication inside every layer ({}; Shoeybi et al. 2019{}): needs an "
                     "NVLink-class interconnect between the {} GPUs{}; {}",
                     training ? "all-gather/reduce-scatter of activations, forward and backward"
                              : "an all-reduce of activations after each split layer, every token",
                     training ? ", Korthikanti et al. 2022" : "", tp,
                     o.gpu_nvlink ? "" : ": NOT this one, expect a large slowdown", where);
}

// Pipeline bubble of GPipe / 1F1B: (pp - 1) / (m + pp - 1) of each step idle with m micro-batches
// per step (Huang et al. 2019, GPipe; Narayanan et al. 2021, Megatron-LM, section 2.2).
double pipeline_bubble(uint64_t pp, uint64_t micro_batches) {
  return static_cast<double>(pp - 1) / static_cast<double>(micro_batches + pp - 1);
}

// TP/PP (with FSDP over what is left) for full training, as torchtitan runs it (TP with sequence
// parallelism, the 1F1B schedule); the estimator models exactly that. The global batch is kept:
// fewer data-parallel replicas take more accumulation steps (micro-batches).
std::vector<Candidate> model_parallel_candidates(const Job& job, const ModelSpec& model,
                                                 const FitOptions& options) {
  std::vector<Candidate> out;
  const uint64_t n = options.num_gpus;
  if (n < 2) return out;
  const bool training = is_training(job);
  const std::string task = job.task.value_or("train_full");
  // torchtitan and Megatron-LM train full models; LoRA/QLoRA and quantized bases stay on FSDP.
  if (training && ((task != "train_full" && task != "train_freeze") || job.weight_quantization)) return out;
  // The offload recipes (DeepSpeed ZeRO) are not combined with a TP/PP layout, nor is a job run
  // through Unsloth (its own trainer, offloaded checkpointing by default).
  if (!job.offload.empty() || (training && job.kernels.value_or("none") == "unsloth")) return out;
  const uint64_t cur_tp = job.tp.value_or(1), cur_pp = job.pp.value_or(1), cur_cp = job.cp.value_or(1);
  for (auto [tp, pp] : model_parallel_layouts(model, n, options.gpu_nvlink, options.gpu_tensor_parallel_domain, cur_tp, cur_pp)) {
    if (n % (tp * pp * cur_cp) != 0) continue;
    const uint64_t dp = n / (tp * pp * cur_cp);
    Candidate c;
    // Training: a TP/PP layout is another training program, taken only when it fits by itself.
    // Inference on GPUs the user has: the split is a launch setting that later steps (quantized
    // weights: vLLM's quantized checkpoints, transformers' device_map with bitsandbytes) build on.
    c.only_if_fits = training;
    c.change.id = tp > 1 && pp > 1 ? "tensor_pipeline_parallel" : tp > 1 ? "tensor_parallel" : "pipeline_parallel";
    c.change.fix_id = "shard_model";
    c.change.step = 7;
    std::vector<std::string> costs;
    if (!training) {
      // Inference: vLLM's or transformers' own split; no accumulation to keep.
      c.change.title = tp > 1 && pp > 1
          ? fmt::format("tensor parallel {} x pipeline parallel {} across the {} GPUs", tp, pp, n)
          : tp > 1 ? fmt::format("tensor parallel across {} GPUs (every layer split)", tp)
                   : fmt::format("pipeline parallel across {} GPUs (layers split into {} stages)", pp, pp);
      if (tp > 1) costs.push_back(tensor_parallel_cost(options, tp, training));
      if (pp > 1) costs.push_back("stages run one after another for a single request: latency as one GPU, "
                                  "throughput only with several requests in flight");
      c.change.settings = {{"vllm serve", "--tensor-parallel-size", std::to_string(tp)},
                           {"vllm serve", "--pipeline-parallel-size", std::to_string(pp)}};
      if (pp == 1) {
        c.change.settings.push_back({"from_pretrained", "tp_plan", "\"auto\""});
        c.change.settings.push_back({"torchrun", "--nproc-per-node", std::to_string(tp)});
      } else if (tp == 1) {
        c.change.settings.push_back({"from_pretrained", "device_map", "\"auto\""});
      }
      c.change.cost = fmt::format("{}", fmt::join(costs, "; "));
      // Init-captures: clang < 16 cannot capture structured bindings (the fuzz build uses clang 14).
      c.apply = [tp = tp, pp = pp, n](Job& j) {
        j.tp = tp;
        j.pp = pp;
        j.num_gpus = n;
      };
      out.push_back(std::move(c));
      continue;
    }
    const uint64_t micro = job.micro_batch_size.value_or(1);
    const uint64_t accum = job.grad_accum_steps.value_or(1);
    const uint64_t dp_before = std::max<uint64_t>(1, job.num_gpus.value_or(1) / (cur_tp * cur_pp * cur_cp));
    const uint64_t samples = micro * accum * dp_before;     // global batch per optimizer step
    if (samples % (micro * dp) != 0) continue;              // cannot keep the global batch exactly
    const uint64_t micro_batches = samples / (micro * dp);  // per replica and step
    std::string layout;
    if (tp > 1) layout += fmt::format("tensor parallel {} (with sequence parallelism)", tp);
    if (pp > 1) layout += fmt::format("{}pipeline parallel {} (1F1B)", layout.empty() ? "" : " x ", pp);
    c.change.title = fmt::format("{}{} across the {} GPUs{}", layout,
                                 dp > 1 ? fmt::format(", FSDP over the {} data-parallel groups", dp) : "",
                                 n, micro_batches != accum
                                     ? fmt::format("; accumulation {} -> {} keeps the global batch {}",
                                                   accum, micro_batches, samples)
                                     : "");
    if (tp > 1) costs.push_back(tensor_parallel_cost(options, tp, training));
    if (pp > 1) {
      costs.push_back(fmt::format(
          "pipeline bubble: about {:.0f}% of each step idle, (pp-1)/(m+pp-1) with m = {} micro-batches "
          "(GPipe, Huang et al. 2019; 1F1B, Narayanan et al. 2021); more micro-batches shrink it",
          100 * pipeline_bubble(pp, micro_batches), micro_batches));
    }
    costs.push_back("changes the training program: torchtitan or Megatron-LM instead of the Trainer");
    // Earlier changes with no flag in either program: the training script must carry them.
    const std::string opt = job.optimizer.value_or("adamw");
    if (opt == "adamw_8bit" || opt == "paged_adamw_8bit") {
      costs.push_back("8-bit AdamW has no torchtitan or Megatron-LM flag: build it in the training "
                      "script (torchao.optim.AdamW8bit)");
    }
    if (job.precision.value_or("") == "bf16" && job.task.value_or("train_full") == "train_full") {
      costs.push_back("pure bf16 is not what either program's bf16 setting does (both keep fp32 master weights "
                      "and optimizer states): keep the model and the optimizer in bf16 in the training script");
    }
    if (job.kernels.value_or("none") == "liger") {
      costs.push_back("Liger's kernels have no torchtitan or Megatron-LM flag: use liger_kernel's "
                      "LigerRMSNorm, LigerSiLUMulFunction and LigerFusedLinearCrossEntropyLoss in the "
                      "training script");
    } else if (job.loss_impl.value_or("standard") == "fused_linear") {
      costs.push_back("the fused linear cross-entropy has no torchtitan or Megatron-LM flag: use "
                      "liger_kernel's LigerFusedLinearCrossEntropyLoss in the training script");
    }
    c.change.cost = fmt::format("{}", fmt::join(costs, "; "));
    const std::string shard = dp > 1 ? "-1" : "1";
    c.change.settings = {{"torchtitan", "--parallelism.data_parallel_shard_degree", shard},
                         {"torchtitan", "--parallelism.tensor_parallel_degree", std::to_string(tp)},
                         {"torchtitan", "--parallelism.pipeline_parallel_degree", std::to_string(pp)}};
    // torchtitan runs the local batch as one forward without PP (accumulating up to the global
    // batch), and splits it into micro-batches of pipeline_parallel_microbatch_size with PP.
    if (pp > 1) {
      c.change.settings.push_back({"torchtitan", "--parallelism.pipeline_parallel_schedule", "1F1B"});
      c.change.settings.push_back({"torchtitan", "--parallelism.pipeline_parallel_microbatch_size", std::to_string(micro)});
    }
    c.change.settings.push_back({"torchtitan", "--training.local_batch_size",
                                 std::to_string(pp > 1 ? micro * micro_batches : micro)});
    c.change.settings.push_back({"torchtitan", "--training.global_batch_size", std::to_string(samples)});
    const std::string checkpointing = job.gradient_checkpointing.value_or("none");
    c.change.settings.push_back({"torchtitan", "--activation_checkpoint.mode", checkpointing});
    // Megatron-LM: the same split; its distributed optimizer shards only the optimizer state over
    // the data-parallel groups (ZeRO-1), so with dp > 1 it holds more than this prediction.
    c.change.settings.push_back({"Megatron-LM", "--tensor-model-parallel-size", std::to_string(tp)});
    if (tp > 1) c.change.settings.push_back({"Megatron-LM", "--sequence-parallel", ""});
    c.change.settings.push_back({"Megatron-LM", "--pipeline-model-parallel-size", std::to_string(pp)});
    c.change.settings.push_back({"Megatron-LM", "--micro-batch-size", std::to_string(micro)});
    c.change.settings.push_back({"Megatron-LM", "--global-batch-size", std::to_string(samples)});
    const std::string precision = job.precision.value_or("bf16_mixed");
    if (precision.rfind("bf16", 0) == 0) c.change.settings.push_back({"Megatron-LM", "--bf16", ""});
    if (precision.rfind("fp16", 0) == 0) c.change.settings.push_back({"Megatron-LM", "--fp16", ""});
    if (checkpointing == "full") {
      c.change.settings.push_back({"Megatron-LM", "--recompute-granularity", "full"});
      c.change.settings.push_back({"Megatron-LM", "--recompute-method", "uniform"});
      c.change.settings.push_back({"Megatron-LM", "--recompute-num-layers", "1"});
    } else if (checkpointing == "selective") {
      c.change.settings.push_back({"Megatron-LM", "--recompute-granularity", "selective"});
    }
    // The accumulation is recomputed from the job it applies to, so that the global batch stays
    // whatever earlier steps (micro-batch) left it at when the search rebuilds combinations.
    c.apply = [tp = tp, pp = pp, n, dp](Job& j) {
      const uint64_t mb = j.micro_batch_size.value_or(1);
      const uint64_t replicas = std::max<uint64_t>(
          1, j.num_gpus.value_or(1) / (j.tp.value_or(1) * j.pp.value_or(1) * j.cp.value_or(1)));
      const uint64_t global = mb * j.grad_accum_steps.value_or(1) * replicas;
      j.grad_accum_steps = std::max<uint64_t>(1, global / (mb * dp));
      j.tp = tp;
      j.pp = pp;
      j.num_gpus = n;
      j.parallelism = "fsdp_full_shard";
      j.sync_each_batch = true;  // torchtitan's FSDP2 reduce-scatters every micro-batch
    };
    out.push_back(std::move(c));
  }
  return out;
}

// ZeRO-Offload steps the optimizer on the CPU with DeepSpeed's own CPU Adam (fp32 master weights,
// gradients and both states in host memory). It refuses a client optimizer such as bitsandbytes'
// 8-bit AdamW unless zero_force_ds_cpu_optimizer is false ("You are using ZeRO-Offload with a
// client provided optimizer ..."), and a GPU optimizer stepping host tensors is no saving: the
// plan names DeepSpeed's AdamW in the config and sizes its fp32 state.
bool gpu_only_optimizer(const Job& job) {
  const std::string o = job.optimizer.value_or("adamw");
  return o == "adamw_8bit" || o == "paged_adamw_8bit" || o == "adamw_4bit";
}
constexpr const char* kDeepSpeedAdamW = "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": \"auto\", "
                                        "\"weight_decay\": \"auto\"}}, ";
void use_deepspeed_cpu_adam(Job& j) {
  if (gpu_only_optimizer(j)) j.optimizer = "adamw";
}
std::string deepspeed_cpu_adam_cost(const Job& job) {
  return gpu_only_optimizer(job) ? fmt::format("; {} is replaced by DeepSpeed's CPU AdamW (fp32 states in host "
                                               "memory): DeepSpeed refuses a client optimizer with ZeRO-Offload",
                                               job.optimizer.value_or("adamw"))
                                 : std::string();
}

std::vector<FitSetting> zero3_offload_settings(const Job& job) {
  std::vector<FitSetting> settings = {
      {"TrainingArguments", "deepspeed",
       fmt::format("{{{}\"zero_optimization\": {{\"stage\": 3, \"offload_optimizer\": {{\"device\": \"cpu\"}}, "
                   "\"offload_param\": {{\"device\": \"cpu\"}}}}}}", gpu_only_optimizer(job) ? kDeepSpeedAdamW : "")}};
  add_quant_storage_for_sharding(job, settings);
  return settings;
}

std::vector<Candidate> offload_candidates(const Job& job) {
  std::vector<Candidate> out;
  // The offload recipes are DeepSpeed ZeRO's; they are not combined with a TP/PP layout.
  if (!is_training(job) || model_parallel_degree(job) > 1) return out;
  const std::string par = job.parallelism.value_or("ddp");
  if (is_fsdp(par)) {
    // An FSDP job keeps FSDP: its CPU offload takes parameters, gradients and the optimizer step
    // to the CPU together (there is no optimizer-only offload in FSDP). SHARD_GRAD_OP would keep
    // every gathered parameter on the GPU from forward to backward, so the offload recipe shards
    // them (full_shard), the layout the estimator sizes and validate_job accepts with params offload.
    if (!has_offload(job, "params")) {
      const bool shard_grad_op = par == "fsdp_shard_grad_op";
      const std::string strategy = par == "hybrid_shard" ? "hybrid_shard" : "full_shard";
      out.push_back(candidate("offload_params", "offload", 8,
                              shard_grad_op ? "FSDP full sharding with parameters, gradients and the optimizer step "
                                              "offloaded to CPU memory (FSDP CPU offload)"
                                            : "offload parameters, gradients and the optimizer step to CPU memory (FSDP CPU offload)",
                              "much slower: the optimizer step runs on the CPU, and every block's parameters and "
                              "gradients cross PCIe in forward and backward",
                              {{"TrainingArguments", "fsdp", fmt::format("\"{} offload auto_wrap\"", strategy)}},
                              [shard_grad_op](Job& j) {
                                if (shard_grad_op) j.parallelism = "fsdp_full_shard";
                                j.offload.push_back("params");
                              }));
    }
    return out;
  }
  if (!has_offload(job, "optimizer")) {
    Candidate c;
    c.change.id = "offload_optimizer";
    c.change.fix_id = "offload";
    c.change.step = 8;
    c.change.title = "offload the optimizer state to CPU memory (DeepSpeed ZeRO-Offload)";
    c.change.cost = "much slower: the optimizer step runs on the CPU and state crosses PCIe "
                    "every step (Ren et al. 2021, ZeRO-Offload)" + deepspeed_cpu_adam_cost(job);
    const bool keep_stage3 = par == "zero3";
    c.change.settings = {{"TrainingArguments", "deepspeed",
                          fmt::format("{{{}\"zero_optimization\": {{\"stage\": {}, "
                                      "\"offload_optimizer\": {{\"device\": \"cpu\", "
                                      "\"pin_memory\": True}}}}}}", gpu_only_optimizer(job) ? kDeepSpeedAdamW : "",
                                      keep_stage3 ? 3 : 2)}};
    if (keep_stage3) add_quant_storage_for_sharding(job, c.change.settings);
    c.apply = [keep_stage3](Job& j) {
      if (!keep_stage3) j.parallelism = "zero2";
      use_deepspeed_cpu_adam(j);
      j.offload.push_back("optimizer");
    };
    out.push_back(std::move(c));
  }
  if (!has_offload(job, "params")) {
    out.push_back(candidate("offload_params", "offload", 8,
                            "offload the optimizer state and parameters to CPU memory (ZeRO-3 Offload)",
                            "much slower still: every layer's parameters cross PCIe in forward and "
                            "backward" + deepspeed_cpu_adam_cost(job),
                            zero3_offload_settings(job),
                            [](Job& j) {
                              j.parallelism = "zero3";
                              use_deepspeed_cpu_adam(j);
                              if (!has_offload(j, "optimizer")) j.offload.push_back("optimizer");
                              j.offload.push_back("params");
                            }));
  }
  return out;
}

// Host memory an offload needs: what left the GPU (the estimator's components before and after),
// times DeepSpeed's buffer factor.
uint64_t host_bytes_moved(const EstimateFn& est, const ModelSpec& model, const Job& before,
                          const Job& after) {
  auto a = est(model, before);
  auto b = est(model, after);
  if (!a || !b) return 0;
  uint64_t moved = 0;
  for (const auto& ca : a->components) {
    if (ca.name != "weights" && ca.name != "master_weights" && ca.name != "optimizer_state" &&
        ca.name != "gradients") {
      continue;
    }
    uint64_t after_bytes = 0;
    for (const auto& cb : b->components) {
      if (cb.name == ca.name) after_bytes += cb.bytes;
    }
    if (ca.bytes > after_bytes) moved += ca.bytes - after_bytes;
  }
  return moved;
}

// Host memory an offload change needs per GPU: the changed job against itself without the
// offloads the change added, so a change that also shards (DDP -> ZeRO-3) counts each rank's shard.
uint64_t offload_host_bytes(const EstimateFn& est, const ModelSpec& model, const Job& before, const Job& after) {
  Job on_gpu = after;
  on_gpu.offload = before.offload;
  return static_cast<uint64_t>(std::llround(host_bytes_moved(est, model, on_gpu, after) * kHostBufferFactor));
}

// ---- GPUs from the catalog ----

// Catalog GPUs a recommendation may name: the user's platform (Apple unified memory only for
// someone already on Apple: the CUDA/ROCm recipes here do not run there), and bf16 where the job
// computes in bf16.
// `precision` is the estimator's resolved one: a job that leaves it open computes in the model's
// dtype (bf16 for most checkpoints).
bool usable_for(const GpuSpec& gpu, const std::string& precision, const std::string& user_vendor) {
  if ((gpu.vendor == "apple") != (user_vendor == "apple")) return false;
  const std::string& p = precision;
  if ((p == "bf16" || p == "bf16_mixed") && !gpu.bf16) return false;
  return true;
}

// The job as given, run on n GPUs of a card: training shards it (FSDP full shard, as the
// fsdp_full_shard change recommends) and keeps the global batch by lowering the accumulation where
// n divides it; inference splits the model by tensor parallelism up to the card's TP domain and
// what the heads allow, by pipeline stages beyond.
struct HardwareLayout {
  Job job;
  std::vector<FitSetting> settings;
  std::string note;   // what else changes: "accumulation 16 -> 2 keeps the global batch 32"
  std::string precision_note;   // a precision the layout changes (FSDP under the Trainer)
  // Everything the layout changes besides the cards, as one phrase.
  std::string notes() const {
    if (precision_note.empty()) return note;
    return note.empty() ? precision_note : precision_note + "; " + note;
  }
  // No micro-batch and accumulation on this count keeps the global batch (8 on 16 GPUs): a
  // different training run, no alternative for the job as given.
  bool global_batch_changed = false;
};
HardwareLayout layout_on(const Job& job, uint64_t n, const ModelSpec& model, const FitOptions& options) {
  HardwareLayout out{job, {}, ""};
  Job& j = out.job;
  const uint64_t before = job.num_gpus.value_or(1);
  j.num_gpus = n;
  if (is_training(j)) {
    if (!is_sharded(j)) {
      const auto precision_before = j.precision;
      trainer_fsdp(j);
      // Said where the layout is: FSDP under the Trainer keeps fp32 shards for a bf16 autocast model.
      if (j.precision != precision_before) {
        out.precision_note = fmt::format("precision {} -> {} (FSDP keeps fp32 shards under the Trainer's mixed "
                                         "precision)", precision_before.value_or("?"), j.precision.value_or("?"));
      }
      j.sync_each_batch = true;
      if (n > 1) {
        out.settings = fsdp_full_shard_settings(job);
        if (job.gradient_checkpointing.value_or("none") == "full") {
          out.settings.push_back({"TrainingArguments", "gradient_checkpointing", "True"});
        }
      }
    }
    // Data-parallel replicas before and after (a TP/PP layout keeps its degrees).
    const uint64_t mp = std::max<uint64_t>(1, model_parallel_degree(job) * job.cp.value_or(1));
    const uint64_t dp_before = std::max<uint64_t>(1, before / mp), dp_after = std::max<uint64_t>(1, n / mp);
    const uint64_t micro = job.micro_batch_size.value_or(1), accum = job.grad_accum_steps.value_or(1);
    const uint64_t global = micro * accum * dp_before;
    if (dp_after != dp_before) {
      if (global % (micro * dp_after) == 0) {
        const uint64_t kept = global / (micro * dp_after);
        if (kept != accum) {
          j.grad_accum_steps = kept;
          out.settings.push_back({"TrainingArguments", "gradient_accumulation_steps", std::to_string(kept)});
          out.note = fmt::format("accumulation {} -> {} keeps the global batch {}", accum, kept, global);
        }
      } else if (uint64_t m = micro; [&] {
                   while (m > 1 && global % (m * dp_after) != 0) --m;
                   return global % (m * dp_after) == 0;
                 }()) {
        // A smaller micro-batch keeps the global batch where the accumulation alone cannot.
        const uint64_t kept = global / (m * dp_after);
        j.micro_batch_size = m;
        j.grad_accum_steps = kept;
        out.settings.push_back({"TrainingArguments", "per_device_train_batch_size", std::to_string(m)});
        if (kept != accum) out.settings.push_back({"TrainingArguments", "gradient_accumulation_steps", std::to_string(kept)});
        out.note = fmt::format("micro-batch {} -> {}{} keeps the global batch {}", micro, m,
                               kept != accum ? fmt::format(", accumulation {} -> {}", accum, kept) : "", global);
      } else {
        // No micro-batch keeps it: micro-batch 1, the nearest global batch the count allows (and
        // the least memory), with the accumulation that comes closest.
        const uint64_t kept = std::max<uint64_t>(1, (global + dp_after / 2) / dp_after);
        out.global_batch_changed = true;
        j.micro_batch_size = 1;
        j.grad_accum_steps = kept;
        if (micro != 1) out.settings.push_back({"TrainingArguments", "per_device_train_batch_size", "1"});
        if (kept != accum) out.settings.push_back({"TrainingArguments", "gradient_accumulation_steps", std::to_string(kept)});
        out.note = fmt::format("the global batch goes from {} to {} (micro-batch 1 x accumulation {} x {} GPUs)", global,
                               kept * dp_after, kept, dp_after);
      }
    }
    return out;
  }
  if (is_llama_cpp(j)) {
    if (j.tp.value_or(1) < n) j.tp = n;
    return out;
  }
  if (model_parallel_degree(job) >= n) return out;
  // The widest TP the card's domain and the heads allow (vLLM and transformers split heads
  // evenly), then pipeline stages for the rest. (Fewest cards first: on cards without NVLink TP
  // is slower than stages, but it splits the whole model and its cache evenly.)
  uint64_t tp = 1;
  for (uint64_t t = 2; t <= std::min<uint64_t>(n, options.gpu_tensor_parallel_domain); t *= 2) {
    if (n % t == 0 && tensor_parallel_problem(model, t).empty()) tp = t;
  }
  const uint64_t pp = n / tp;
  j.tp = tp;
  j.pp = pp;
  if (pp == 1) {
    out.settings = {{"python", fmt::format("AutoModelForCausalLM.from_pretrained(..., tp_plan=\"auto\")  "
                                           "# launched with torchrun --nproc-per-node {}", n), ""}};
  } else if (tp == 1) {
    out.settings = {{"from_pretrained", "device_map", "\"auto\""},
                    {"vllm serve", "--pipeline-parallel-size", std::to_string(pp)}};
    out.note = fmt::format("pipeline parallel {}: the heads do not split for tensor parallelism", pp);
  } else {
    out.settings = {{"vllm serve", "--tensor-parallel-size", std::to_string(tp)},
                    {"vllm serve", "--pipeline-parallel-size", std::to_string(pp)}};
    out.note = fmt::format("tensor parallel {} x pipeline parallel {}", tp, pp);
  }
  return out;
}

// A layout and the same with smaller micro-batches, the global batch kept by more accumulation
// (step 2 on the new hardware), largest first: more cards shrink the weights' and optimizer's
// share, not the activations, so an activation-bound job may need both. Inference and jobs that
// cannot keep the global batch at a smaller micro-batch get the layout alone.
std::vector<HardwareLayout> with_smaller_micro_batches(HardwareLayout base, const Job& given, uint64_t given_gpus) {
  std::vector<HardwareLayout> out;
  const Job& j = base.job;
  if (!is_training(j)) {
    out.push_back(std::move(base));
    return out;
  }
  const uint64_t mp = std::max<uint64_t>(1, model_parallel_degree(j) * j.cp.value_or(1));
  const uint64_t dp = std::max<uint64_t>(1, j.num_gpus.value_or(1) / mp);
  const uint64_t dp_given = std::max<uint64_t>(1, given_gpus / mp);
  const uint64_t given_micro = given.micro_batch_size.value_or(1), given_accum = given.grad_accum_steps.value_or(1);
  const uint64_t global = given_micro * given_accum * dp_given;
  const uint64_t base_micro = j.micro_batch_size.value_or(1);
  out.push_back(base);
  for (uint64_t m = base_micro - 1; m >= 1 && base_micro > 1; --m) {
    if (global % (m * dp) != 0) continue;
    HardwareLayout smaller = base;
    smaller.job.micro_batch_size = m;
    smaller.job.grad_accum_steps = global / (m * dp);
    std::erase_if(smaller.settings, [](const FitSetting& s) {
      return s.name == "per_device_train_batch_size" || s.name == "gradient_accumulation_steps";
    });
    smaller.settings.push_back({"TrainingArguments", "per_device_train_batch_size", std::to_string(m)});
    if (*smaller.job.grad_accum_steps != given_accum) {
      smaller.settings.push_back(
          {"TrainingArguments", "gradient_accumulation_steps", std::to_string(*smaller.job.grad_accum_steps)});
    }
    smaller.note = fmt::format("micro-batch {} -> {}{} keeps the global batch {}", given_micro, m,
                               *smaller.job.grad_accum_steps != given_accum
                                   ? fmt::format(", accumulation {} -> {}", given_accum, *smaller.job.grad_accum_steps)
                                   : "",
                               global);
    out.push_back(std::move(smaller));
  }
  return out;
}

struct Search {
  const EstimateFn& est;
  const ModelSpec& model;
  const Job& original;
  const FitOptions& options;
  std::optional<LengthAnalysis> lengths;
  std::vector<Step> steps;

  Search(const EstimateFn& e, const ModelSpec& m, const Job& j, const FitOptions& o)
      : est(e), model(m), original(j), options(o) {}

  void build_steps() {
    const bool bf16 = options.gpu_has_bf16;
    const uint64_t n = options.num_gpus;
    steps = {
        {"micro_batch", micro_batch_candidates},
        {"llama_flash_attention", llama_flash_candidates},
        {"llama_kv_cache_type", llama_kv_candidates},
        {"llama_parallel", llama_parallel_candidates},
        {"llama_file_type", [this](const Job& j) { return llama_file_type_candidates(j, model); }},
        {"llama_context", llama_context_candidates},
        {"llama_gpu_layers", [this](const Job& j) { return llama_gpu_layers_candidates(j, model.num_layers); }},
        {"sync_each_batch", sync_each_batch_candidates},
        {"padding_free", [this](const Job& j) { return padding_free_candidates(model, options, j); }},
        {"seq_len", [this](const Job& j) { return seq_len_candidates(j, lengths); }},
        {"bf16_hidden_states", [this, bf16](const Job& j) { return bf16_hidden_states_candidates(est, model, j, bf16); }},
        {"mixed_precision", [bf16](const Job& j) { return precision_candidates(j, bf16); }},
        {"optimizer", optimizer_candidates},
        {"double_quant", double_quant_candidates},
        {"kv_cache", inference_kv_cache_candidates},
        {"attention_kernel", [this](const Job& j) {
           auto all = kernel_candidates(model, options, j);
           std::vector<Candidate> out;
           for (auto& c : all) if (c.change.id == "attention_kernel") out.push_back(std::move(c));
           return out;
         }},
        {"fused_loss", [this](const Job& j) {
           auto all = kernel_candidates(model, options, j);
           std::vector<Candidate> out;
           for (auto& c : all) if (c.change.id == "fused_loss") out.push_back(std::move(c));
           return out;
         }},
        {"gradient_checkpointing", checkpointing_candidates},
        {"pure_bf16", [bf16](const Job& j) { return pure_bf16_candidates(j, bf16); }},
        {"lora", [bf16](const Job& j) {
           auto all = lora_candidates(j, bf16);
           std::vector<Candidate> lora;
           for (auto& c : all) if (c.change.id == "lora") lora.push_back(std::move(c));
           return lora;
         }},
        {"qlora", [bf16](const Job& j) {
           auto all = lora_candidates(j, bf16);
           std::vector<Candidate> q;
           for (auto& c : all) if (c.change.id == "qlora") q.push_back(std::move(c));
           return q;
         }},
        {"sharding", [this, n](const Job& j) {
           // ZeRO/FSDP first (a setting), then TP/PP layouts (a different training program).
           auto out = data_sharding_candidates(j, n);
           auto mp = model_parallel_candidates(j, model, options);
           out.insert(out.end(), std::make_move_iterator(mp.begin()), std::make_move_iterator(mp.end()));
           return out;
         }},
        {"quantized_weights", inference_quantization_candidates},
        {"offload", offload_candidates},
    };
  }

  struct Applied {
    size_t step_index;
    Candidate candidate;
  };

  Job rebuild(const std::vector<Applied>& applied, std::optional<size_t> skip = std::nullopt) const {
    Job j = original;
    for (size_t i = 0; i < applied.size(); ++i) {
      if (skip && *skip == i) continue;
      applied[i].candidate.apply(j);
    }
    return j;
  }
  // The job as it stands before applied[k]: the changes of cheaper steps only.
  Job prefix(const std::vector<Applied>& applied, size_t k) const {
    Job j = original;
    for (size_t i = 0; i < k && i < applied.size(); ++i) applied[i].candidate.apply(j);
    return j;
  }

  // The cheapest candidate of a step that brings the job under limit; else the one that lowers the
  // prediction most (kept when it lowers it at all, so later steps build on it).
  struct Pick {
    Candidate candidate;
    PredictedTotals predicted;
    bool fits = false;
  };
  // generated_for: the job the step's options are made for, when it differs from `base` (a step
  // re-picked after later steps were applied: its options must suit the job as it stood at that
  // step, not one a later step changed, e.g. LoRA's frozen-base precision on a full fine-tuning).
  std::optional<Pick> pick(const Step& step, const Job& base, uint64_t base_used, uint64_t limit,
                           const Job* generated_for = nullptr) const {
    std::optional<Pick> best;
    for (auto& c : step.generate(generated_for ? *generated_for : base)) {
      // The plan lists its changes in step order, each predicted on the ones before it: an
      // option must also be a valid job there (padding-free batches need a 16-bit job's flash
      // attention, which a later precision step may be what provides).
      if (generated_for) {
        Job at_its_step = *generated_for;
        c.apply(at_its_step);
        if (!predict(est, model, at_its_step)) continue;
      }
      Job j = base;
      c.apply(j);
      auto p = predict(est, model, j);
      if (!p) continue;
      if (p->needed_bytes <= limit) return Pick{c, *p, true};
      if (c.only_if_fits) continue;
      if (p->needed_bytes < base_used &&
          (!best || p->needed_bytes < best->predicted.needed_bytes)) {
        best = Pick{c, *p, false};
      }
    }
    return best;
  }

  // skip: step ids left out (e.g. the method changes, for the "same method" alternative).
  std::optional<std::vector<Applied>> run(uint64_t limit,
                                          const std::vector<std::string>& skip = {}) const {
    std::vector<Applied> applied;
    Job current = original;
    auto current_pred = predict(est, model, current);
    if (!current_pred) return std::nullopt;
    bool fits = current_pred->needed_bytes <= limit;
    // Widen the allowed steps one at a time, cheapest first. At each width, go over the allowed
    // steps until none lowers the prediction: a change can start to help only after a later one
    // (checkpointing does nothing while the optimizer step is the peak, and a lot once LoRA has
    // removed the optimizer state), so one pass is not enough. Each application strictly lowers
    // the prediction, so this ends.
    for (size_t width = 0; width < steps.size() && !fits; ++width) {
      if (std::find(skip.begin(), skip.end(), steps[width].id) != skip.end()) continue;
      bool changed = true;
      while (changed && !fits) {
        changed = false;
        for (size_t s = 0; s <= width && !fits; ++s) {
          if (std::find(skip.begin(), skip.end(), steps[s].id) != skip.end()) continue;
          auto p = pick(steps[s], current, current_pred->needed_bytes, limit);
          if (!p) continue;
          p->candidate.apply(current);
          current_pred = p->predicted;
          fits = p->fits;
          changed = true;
          // A step's candidates set absolute values (micro-batch 1, not "smaller"), so a second
          // pick of the same step replaces the first.
          auto same = std::find_if(applied.begin(), applied.end(),
                                   [&](const Applied& a) { return a.step_index == s; });
          if (same != applied.end()) same->candidate = std::move(p->candidate);
          else applied.push_back({s, std::move(p->candidate)});
        }
      }
    }
    if (!fits) return std::nullopt;
    std::stable_sort(applied.begin(), applied.end(),
                     [](const Applied& a, const Applied& b) { return a.step_index < b.step_index; });
    // A change a later pass added may need what a dearer step set (padding-free batches need the
    // 16-bit precision of step 4 for flash attention): listed in step order, the job after it
    // would not be valid. Leave it out when the rest fits without it; else list it after the
    // change it needs.
    for (size_t i = 0; i < applied.size(); ++i) {
      if (predict(est, model, prefix(applied, i + 1))) continue;
      auto rest = predict(est, model, rebuild(applied, i));
      if (rest && rest->needed_bytes <= limit) {
        applied.erase(applied.begin() + static_cast<long>(i));
        --i;
        continue;
      }
      for (size_t k = i + 1; k < applied.size(); ++k) {
        std::swap(applied[k - 1], applied[k]);
        if (predict(est, model, prefix(applied, k + 1))) break;
      }
    }
    // Drop what the combination does not need, most expensive first (keeping the last step, which
    // made it fit), and re-pick the cheapest option of each step that stays.
    for (size_t i = applied.size(); i-- > 1;) {
      const size_t k = i - 1;
      Job without = rebuild(applied, k);
      auto p = predict(est, model, without);
      if (p && p->needed_bytes <= limit) {
        applied.erase(applied.begin() + static_cast<long>(k));
        continue;
      }
      if (p) {
        const Job before = prefix(applied, k);
        if (auto better = pick(steps[applied[k].step_index], without, p->needed_bytes, limit, &before);
            better && better->fits) {
          applied[k].candidate = std::move(better->candidate);
        }
      }
    }
    // The last change too, when the ones it was added after have gone: drop it while the rest fits.
    while (applied.size() > 1) {
      auto p = predict(est, model, rebuild(applied, applied.size() - 1));
      if (!p || p->needed_bytes > limit) break;
      applied.pop_back();
    }
    // The last step too may have a cheaper option now that others are settled.
    if (!applied.empty()) {
      const size_t k = applied.size() - 1;
      Job without = rebuild(applied, k);
      auto p = predict(est, model, without);
      if (p) {
        const Job before = prefix(applied, k);
        if (auto better = pick(steps[applied[k].step_index], without, p->needed_bytes, limit, &before);
            better && better->fits) {
          applied[k].candidate = std::move(better->candidate);
        }
      }
    }
    // Inference split over GPUs the user has: a wider split (TP 8 instead of TP 4) may fit alone
    // where the narrower one needed cuts as well (a smaller batch). The cuts cost the job itself;
    // the wider split only uses cards that are already there.
    if (applied.size() > 1 && !is_training(original) && is_model_parallel(applied.back().candidate.change)) {
      for (size_t k = 0; k + 1 < applied.size();) {
        std::vector<Applied> trial = applied;
        trial.erase(trial.begin() + static_cast<long>(k));
        const size_t last = trial.size() - 1;
        const Job without = rebuild(trial, last);
        if (auto p = predict(est, model, without)) {
          if (auto wider = pick(steps[trial[last].step_index], without, p->needed_bytes, limit); wider && wider->fits) {
            trial[last].candidate = std::move(wider->candidate);
            applied = std::move(trial);
            continue;
          }
        }
        ++k;
      }
    }
    // A batch cut that stays beside a split: the layout that keeps the largest batch, each layout
    // of the step with the batch re-picked on top of it (the widest split on the cards there,
    // usually), whatever else the plan holds (quantized weights).
    if (!is_training(original)) {
      const auto cut = std::find_if(applied.begin(), applied.end(),
                                    [&](const Applied& a) { return steps[a.step_index].id == "micro_batch"; });
      const auto split_change = std::find_if(applied.begin(), applied.end(),
                                             [](const Applied& a) { return is_model_parallel(a.candidate.change); });
      if (cut != applied.end() && split_change != applied.end()) {
        const size_t cut_index = static_cast<size_t>(cut - applied.begin());
        const size_t split_index = static_cast<size_t>(split_change - applied.begin());
        std::vector<Applied> rest = applied;
        rest.erase(rest.begin() + static_cast<long>(std::max(cut_index, split_index)));
        rest.erase(rest.begin() + static_cast<long>(std::min(cut_index, split_index)));
        const Job without = rebuild(rest);
        const uint64_t kept_now = rebuild(applied).batch_size.value_or(1);
        uint64_t best_batch = kept_now;
        std::optional<std::pair<Candidate, std::optional<Candidate>>> best;
        for (auto& layout : steps[applied[split_index].step_index].generate(without)) {
          if (!is_model_parallel(layout.change)) continue;
          Job split = without;
          layout.apply(split);
          auto p = predict(est, model, split);
          if (!p) continue;
          if (p->needed_bytes <= limit) {
            if (split.batch_size.value_or(1) > best_batch) {
              best_batch = split.batch_size.value_or(1);
              best = std::make_pair(layout, std::nullopt);
            }
            continue;
          }
          auto batch = pick(steps[applied[cut_index].step_index], split, p->needed_bytes, limit);
          if (!batch || !batch->fits) continue;
          Job cut_job = split;
          batch->candidate.apply(cut_job);
          if (cut_job.batch_size.value_or(1) > best_batch) {
            best_batch = cut_job.batch_size.value_or(1);
            best = std::make_pair(layout, std::optional<Candidate>(batch->candidate));
          }
        }
        if (best) {
          applied[split_index].candidate = best->first;
          if (best->second) applied[cut_index].candidate = *best->second;
          else applied.erase(applied.begin() + static_cast<long>(cut_index));
        }
      }
    }
    return applied;
  }

  FitPlan to_plan(const std::vector<Applied>& applied) const {
    FitPlan plan;
    Job j = original;
    std::optional<uint64_t> needed_before;
    if (auto p = predict(est, model, original)) needed_before = p->needed_bytes;
    for (const auto& a : applied) {
      Job before = j;
      a.candidate.apply(j);
      FitChange change = a.candidate.change;
      if (a.candidate.only_if_fits) {
        // A TP/PP layout's title, costs and flags describe the job it was picked for; the
        // pruning may have dropped earlier changes since: describe it for the final job.
        for (auto& fresh : model_parallel_candidates(before, model, options)) {
          Job k = before;
          fresh.apply(k);
          if (k.tp == j.tp && k.pp == j.pp) change = fresh.change;
        }
      }
      change.predicted = predict(est, model, j);
      if (change.predicted) {
        change.saves_nothing_here = needed_before && change.predicted->needed_bytes >= *needed_before;
        needed_before = change.predicted->needed_bytes;
      }
      if (change.id.rfind("offload", 0) == 0) change.host_ram_bytes = offload_host_bytes(est, model, before, j);
      plan.changes.push_back(std::move(change));
    }
    plan.job = j;
    plan.num_gpus = options.num_gpus;
    plan.total_bytes = options.total_bytes;
    if (auto p = predict(est, model, j)) plan.predicted = *p;
    return plan;
  }
};

// A budget's share of a card, never more than CUDA can allocate on it (a --budget near 1 on a card
// whose driver keeps a few hundred MiB).
uint64_t share_of(uint64_t total, double fraction, std::optional<uint64_t> allocatable = std::nullopt) {
  const auto share = static_cast<uint64_t>(std::floor(static_cast<double>(total) * fraction));
  return allocatable ? std::min(share, *allocatable) : share;
}

}  // namespace

std::optional<uint64_t> solve_largest(const ModelSpec& model, const Job& job,
                                      std::optional<uint64_t> Job::*field, uint64_t limit_bytes,
                                      uint64_t upper, const EstimateFn& est) {
  auto fits = [&](uint64_t v) {
    Job j = job;
    j.*field = v;
    auto p = predict(est, model, j);
    return p && p->needed_bytes <= limit_bytes;
  };
  if (upper == 0 || !fits(1)) return std::nullopt;
  // Exponential probe then bisection: the prediction grows with batch and length.
  uint64_t lo = 1, hi = 2;
  while (hi <= upper && fits(hi)) {
    lo = hi;
    hi *= 2;
  }
  if (hi > upper) {
    if (fits(upper)) return upper;
    hi = upper;
  }
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

// The model's context in positions: max_position_embeddings, or the rows of a learned position
// embedding (GPT-2's n_positions) where the config names no other.
uint64_t model_context_positions(const ModelSpec& model) {
  return model.max_position_embeddings ? model.max_position_embeddings : model.position_embeddings;
}

Result<std::map<std::string, double>> parse_prices(std::string_view text, const std::string& display_name,
                                                   std::vector<std::string>* notes) {
  std::map<std::string, double> prices;
  std::map<std::string, size_t> line_of;   // where each GPU was priced
  // A spreadsheet's UTF-8 export may begin with a byte-order mark: not part of the first name.
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  size_t start = 0, line_number = 0;
  bool seen_line = false;   // a non-comment line before this one
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    line = line.substr(first);
    size_t sep = line.find_last_of(",\t ");
    if (sep == std::string::npos) {
      return make_error(fmt::format("{}: line {}: expected 'GPU NAME, PRICE PER GPU-HOUR'",
                                    display_name, line_number));
    }
    std::string name = line.substr(0, sep);
    while (!name.empty() && (name.back() == ',' || name.back() == ' ' || name.back() == '\t')) name.pop_back();
    std::string number = line.substr(sep + 1);
    if (!number.empty() && number[0] == '$') number.erase(0, 1);
    for (std::string_view unit : {"/hour", "/hr", "/h"}) {
      if (number.size() > unit.size() && number.compare(number.size() - unit.size(), unit.size(), unit) == 0) {
        number.resize(number.size() - unit.size());
        break;
      }
    }
    auto parsed_price = parse_decimal<double>(number);
    const double price = parsed_price.value_or(-1);
    if (!parsed_price || !(price >= 0)) {
      // A header line ("gpu,price") is allowed before the first price, but not a GPU whose price
      // is wrong: that line would silently drop out of the comparison.
      const bool has_digit = line.find_first_of("0123456789") != std::string::npos;
      if (!seen_line && !has_digit && !find_gpu(name)) {
        seen_line = true;
        continue;
      }
      return make_error(fmt::format("{}: line {}: '{}' is not a price per GPU-hour (a number, 0 or more)",
                                    display_name, line_number, line.substr(sep + 1)));
    }
    seen_line = true;
    auto gpu = find_gpu(name);
    if (!gpu) return make_error(fmt::format("{}: line {}: {}", display_name, line_number,
                                            gpu.error().message));
    if (auto earlier = line_of.find(gpu->name); earlier != line_of.end()) {
      return make_error(fmt::format("{}: line {}: {} is priced twice (line {} too)", display_name, line_number,
                                    gpu->name, earlier->second));
    }
    line_of[gpu->name] = line_number;
    prices[gpu->name] = price;
    if (auto others = other_sizes_named(name, *gpu); notes && !others.empty()) {
      notes->push_back(fmt::format("{}: line {}: '{}' is priced as {}; it also names {} (give the size to price "
                                   "another)", display_name, line_number, name, gpu->name, card_names(others)));
    }
  }
  if (prices.empty()) {
    return make_error(fmt::format("{}: no prices: expected lines 'GPU NAME, PRICE PER GPU-HOUR' (e.g. 'H100 SXM, 2.49')",
                                  display_name));
  }
  return prices;
}

uint64_t fit_gpu_count(const Job& job, std::optional<uint64_t> gpus_flag) {
  if (gpus_flag) return *gpus_flag;
  return job.num_gpus.value_or(job.tp.value_or(1) * job.pp.value_or(1) * job.cp.value_or(1));
}

void set_fit_gpu(FitOptions& options, const GpuSpec& gpu) {
  options.gpu_name = gpu.name;
  options.total_bytes = gpu.total_bytes;
  options.allocatable_bytes = gpu.cuda_total_bytes;
  options.gpu_has_bf16 = gpu.bf16;
  options.gpu_vendor = gpu.vendor;
  options.gpu_architecture = gpu.architecture;
  options.gpu_nvlink = gpu.nvlink;
  options.gpu_interconnect = gpu.interconnect;
  options.gpu_tensor_parallel_domain = gpu.tensor_parallel_domain;
}

void set_fit_memory(FitOptions& options, uint64_t total_bytes) {
  options.total_bytes = total_bytes;
  options.gpu_name = format_bytes(total_bytes) + " GPU";
}

Result<FitReport> fit_job(const ModelSpec& model, const Job& job, const FitOptions& options,
                          const EstimateFn& est) {
  if (!(options.budget > 0 && options.budget <= 1)) {
    return make_error(fmt::format("--budget {} is outside (0, 1]: it is the share of the GPU's "
                                  "memory the job may use", options.budget));
  }
  if (!(options.target > 0 && options.target <= 1)) {
    return make_error(fmt::format("--target {} is outside (0, 1]", options.target));
  }
  if (options.total_bytes == 0) return make_error("no GPU memory size: give --gpu NAME or --memory SIZE");
  if (options.num_gpus == 0) return make_error("--gpus must be at least 1");
  if (job.task.value_or("") == "load" && (options.solve_max_batch || options.solve_max_seq)) {
    return make_error(fmt::format("{} does not apply to --task load: loading the weights runs no batch and no "
                                  "sequence", options.solve_max_batch ? "--max-batch" : "--max-seq"));
  }

  Job given = job;
  if (options.num_gpus > 1 && !given.num_gpus) given.num_gpus = options.num_gpus;
  // A GGUF file runs in llama.cpp: its ladder, not PyTorch's.
  if (model.gguf && !given.implementation) given.implementation = "llama_cpp";
  if (given.implementation && *given.implementation == "llama_cpp" && !given.task) given.task = "inference";
  auto estimate = est(model, given);
  if (!estimate) return estimate.error();
  // A precision left open defaults to bf16 where the model is bf16; a card without bf16 runs fp16.
  std::optional<std::string> precision_note;
  if (!given.precision && !options.gpu_has_bf16 && estimate->precision.rfind("bf16", 0) == 0) {
    given.precision = fp16_counterpart(estimate->precision, given);
    estimate = est(model, given);
    if (!estimate) return estimate.error();
    precision_note = fmt::format("precision {}: {} has no bfloat16 support", *given.precision, options.gpu_name);
  }

  // What the job asks for and this card cannot run, changed to what runs there and predicted so;
  // the plan starts with these changes. bf16 asked for on a card without it: fp16, as the Trainer
  // would need (it refuses bf16 there: "Your setup doesn't support bf16/gpu").
  std::vector<FitChange> runnable;
  const std::optional<std::string> asked_precision = given.precision;
  if (given.precision && !options.gpu_has_bf16 && given.precision->rfind("bf16", 0) == 0 && !is_llama_cpp(given)) {
    Job with_fp16 = given;
    with_fp16.precision = fp16_counterpart(*given.precision, given);
    if (auto runs = est(model, with_fp16)) {
      given = with_fp16;
      estimate = std::move(runs);
      FitChange c;
      c.id = "precision_fp16";
      c.fix_id = "mixed_precision";
      c.step = 1;
      c.title = fmt::format("precision {} -> {}: {} has no bfloat16", *asked_precision, *given.precision,
                            options.gpu_name);
      c.cost = "none here: what runs on this GPU (the prediction is fp16's); fp16 needs loss scaling, which the "
               "Trainer's fp16=True does";
      if (is_training(given)) {
        c.settings = {{"TrainingArguments", "bf16", "False"}, {"TrainingArguments", "fp16", "True"}};
      }
      // A model loaded in bf16 is loaded again in the dtype that now runs: fp16, or fp32 masters.
      if (*asked_precision == "bf16" || !is_training(given)) {
        c.settings.push_back({"from_pretrained", "torch_dtype", given.precision == "fp16_mixed" ? "torch.float32" : "torch.float16"});
      }
      c.predicted = totals_of(*estimate);
      runnable.push_back(std::move(c));
    }
  }
  // FlashAttention-2 asked for on a card that cannot run it: predict what runs there (SDPA).
  std::optional<FitChange> runnable_attention;
  if (!is_llama_cpp(given) && given.attention_impl == "flash" && !runs_flash_attention_2(options)) {
    Job with_sdpa = given;
    with_sdpa.attention_impl = "sdpa";
    if (auto runs = est(model, with_sdpa)) {
      given = with_sdpa;
      estimate = std::move(runs);
      FitChange c;
      c.id = "attention_sdpa";
      c.step = 1;
      c.title = fmt::format("attention flash_attention_2 -> sdpa: {} ({}) does not run FlashAttention-2", options.gpu_name,
                            options.gpu_architecture);
      c.cost = "none here: what runs on this GPU (the prediction is SDPA's)";
      c.settings = {{"from_pretrained", "attn_implementation", "\"sdpa\""}};
      c.predicted = totals_of(*estimate);
      runnable_attention = c;
      runnable.push_back(std::move(c));
    }
  }

  FitReport report;
  report.job = given;
  if (runnable_attention) report.job.attention_impl = "flash";   // the job as read; the prediction is SDPA's
  report.job.precision = asked_precision;                          // the same for fp16 on a card without bf16
  // The name as the user gave it; the config that stood behind it when that differs (an Instruct
  // name read with its base preset, a path).
  report.model_id = given.model.empty() ? model.label() : given.model;
  if (!model.base_model_id.empty()) report.model_config = "base model " + model.base_model_id + " (" + model.source + ")";
  else if (report.model_id != model.label() && !(model.id.empty() && report.model_id == model.source)) {
    // (a local config without an id, given by its path, is its own config: nothing to add)
    report.model_config = model.label() + " (" + model.source + ")";
  }
  report.estimate = *estimate;
  const uint64_t needed = oom_view(*estimate).device_used_bytes;
  report.needed_bytes = needed;
  report.gpu_name = options.gpu_name;
  report.num_gpus = options.num_gpus;
  report.total_bytes = options.total_bytes;
  report.budget = options.budget;
  report.target = std::min(options.target, options.budget);
  report.usable_bytes = share_of(options.total_bytes, options.budget, options.allocatable_bytes);
  report.usable_is_allocatable = report.usable_bytes < share_of(options.total_bytes, options.budget);
  report.target_bytes = share_of(options.total_bytes, report.target, options.allocatable_bytes);
  report.fits = needed <= report.usable_bytes;
  report.fits_target = needed <= report.target_bytes;
  if (precision_note) report.notes.push_back(*precision_note);
  report.will_not_run = estimate->will_not_run;
  const std::string precision_asked = asked_precision.value_or(report.estimate.precision);
  if (!options.gpu_has_bf16 && precision_asked.rfind("bf16", 0) == 0 && !precision_note) {
    report.notes.push_back(fmt::format("{} has no bfloat16 support (compute capability below 8.0): a {} job "
                                       "will not run as given; use fp16 mixed precision (fp16=True){}",
                                       options.gpu_name, precision_asked,
                                       given.precision != asked_precision ? ", which is what is predicted" : ""));
    report.will_not_run.push_back(fmt::format("{} has no bfloat16 (use fp16 mixed precision)", options.gpu_name));
  }
  if (runnable_attention || (!is_llama_cpp(given) && given.attention_impl == "flash" && !runs_flash_attention_2(options))) {
    report.notes.push_back(fmt::format("{} ({}) does not run FlashAttention-2 (it needs an Ampere or newer GPU, "
                                       "compute capability 8.0+): attn_implementation=\"flash_attention_2\" will not "
                                       "run as given; SDPA (attn_implementation=\"sdpa\") is what runs there{}",
                                       options.gpu_name, options.gpu_architecture,
                                       runnable_attention ? ", and what is predicted" : ""));
    report.will_not_run.push_back(fmt::format("{} does not run FlashAttention-2 (use SDPA)", options.gpu_name));
  }
  if (options.target > options.budget) {
    report.notes.push_back(fmt::format("--target {} is above --budget {}: plans aim at the budget",
                                       options.target, options.budget));
  }

  // Step 1: free, and not in the prediction (PyTorch's allocator and autograd; llama.cpp has neither).
  if (!is_llama_cpp(given)) {
    FitChange c;
    c.id = "expandable_segments";
    c.fix_id = "expandable_segments";
    c.step = 1;
    c.title = std::string(fix_info(c.fix_id).title);
    c.cost = std::string(fix_info(c.fix_id).cost);
    for (std::string_view variable : kAllocatorConfVariables) {
      c.settings.push_back({"environment", std::string(variable), "expandable_segments:True"});
    }
    c.advice_only = true;
    report.free_advice.push_back(c);
    FitChange r;
    r.id = "drop_references";
    r.step = 1;
    if (is_training(given)) {
      r.fix_id = "release_references";
      r.title = std::string(fix_info(r.fix_id).title) +
                " (log loss.item(), not loss; del outputs before the next step)";
    } else {
      r.fix_id = "no_grad_for_eval";
      r.title = std::string(fix_info(r.fix_id).title) +
                " (torch.inference_mode(); keep no outputs on the GPU across batches)";
    }
    r.cost = std::string(fix_info(r.fix_id).cost);
    r.advice_only = true;
    report.free_advice.push_back(r);
  }

  Search search(est, model, given, options);
  if (options.lengths) {
    const bool training = is_training(given);
    auto peak_at = [&](uint64_t len) -> std::optional<uint64_t> {
      Job j = given;
      if (training) j.seq_len = len;
      else j.prompt_len = len;
      auto p = predict(est, model, j);
      if (!p) return std::nullopt;
      return p->needed_bytes;
    };
    // The longest sequence the job lets through: its max length (training truncates there), and
    // the model's context (less the tokens generated after a prompt).
    const uint64_t context_positions = model_context_positions(model);
    LengthJob seen;
    seen.inference = !training;
    seen.packed = training && given.padding_free.value_or(false);
    if (context_positions) {
      const uint64_t generated = training || is_llama_cpp(given) ? 0 : new_tokens_of(given);
      seen.truncation = context_positions > generated ? context_positions - generated : 1;
      seen.context = seen.truncation;
      seen.truncated_by = fmt::format("the model's context ({} positions{})", context_positions,
                                      generated ? fmt::format(" less {} generated", generated) : "");
    }
    if (training && given.seq_len && (!seen.truncation || *given.seq_len < seen.truncation)) {
      seen.truncation = *given.seq_len;
      seen.truncated_by = fmt::format("the job's max length ({})", *given.seq_len);
    }
    search.lengths = analyze_lengths(*options.lengths,
                                     training ? given.seq_len.value_or(0) : given.prompt_len.value_or(0),
                                     peak_at, seen);
    report.lengths = search.lengths;
  }
  search.build_steps();

  std::optional<uint64_t> Job::*batch_field =
      is_training(given) ? &Job::micro_batch_size : &Job::batch_size;
  std::optional<uint64_t> Job::*length_field = is_training(given) ? &Job::seq_len : &Job::prompt_len;
  report.solved_max_micro_batch = options.solve_max_batch;
  report.solved_max_seq_len = options.solve_max_seq;
  if (options.solve_max_batch) {
    report.max_micro_batch = solve_largest(model, given, batch_field,
                                           report.usable_bytes, 1u << 16, est);
  }
  if (options.solve_max_seq) {
    // The model's context bounds the answer too: memory may allow more than it has positions for.
    const uint64_t context_positions = model_context_positions(model);
    uint64_t bound = 1u << 23;
    bool room = true;
    if (context_positions) {
      // A prompt leaves room for the tokens generated after it, the estimator's default included.
      const uint64_t generated = is_training(given) ? 0 : is_llama_cpp(given)
                                                             ? given.max_new_tokens.value_or(0)
                                                             : new_tokens_of(given);
      room = context_positions > generated;
      bound = room ? context_positions - generated : 1;
      if (!room) {
        report.max_seq_len_unanswered = fmt::format("max_new_tokens {} leaves no room for a prompt in the model's context "
                                                    "of {} positions", generated, context_positions);
        report.notes.push_back(report.max_seq_len_unanswered);
      }
    }
    if (room) report.max_seq_len = solve_largest(model, given, length_field, report.usable_bytes, bound, est);
    if (report.max_seq_len && *report.max_seq_len == bound && bound < (1u << 23)) {
      report.notes.push_back(fmt::format("the longest {} is the model's context ({} positions{}), not memory",
                                         is_training(given) ? "sequence" : "prompt", context_positions,
                                         is_training(given) ? "" : " less the tokens generated"));
    }
  }

  // Hardware, shared by the plan (step 9) and the alternatives. The estimator's prediction does
  // not depend on which GPU it runs on, only on how many: one prediction per count.
  std::map<uint64_t, std::optional<PredictedTotals>> by_count;
  // The job moved to other hardware keeps the checkpointing it was predicted with: PEFT's k-bit
  // preparation turns it on by itself on one GPU, but not once the model is sharded (TRL skips the
  // preparation there), where it must be asked for.
  Job for_hardware = given;
  if (is_training(given) && !given.gradient_checkpointing && report.estimate.kbit_upcast == "all") {
    for_hardware.gradient_checkpointing = "full";
  }
  auto predicted_on = [&](uint64_t n) {
    auto it = by_count.find(n);
    if (it != by_count.end()) return it->second;
    auto p = predict(est, model, n == options.num_gpus ? given : layout_on(for_hardware, n, model, options).job);
    by_count[n] = p;
    return p;
  };
  // Each count's layouts, the micro-batch lowered where that is what makes a count fit, and their
  // predictions (by count and micro-batch).
  std::map<std::pair<uint64_t, uint64_t>, std::optional<PredictedTotals>> by_layout;
  auto layouts_on = [&](uint64_t n) {
    HardwareLayout base = n == options.num_gpus ? HardwareLayout{given, {}, ""} : layout_on(for_hardware, n, model, options);
    // Checkpointing the job already asks for is no setting to add.
    if (given.gradient_checkpointing == "full") {
      std::erase_if(base.settings, [](const FitSetting& s) { return s.name == "gradient_checkpointing"; });
    }
    return with_smaller_micro_batches(std::move(base), given, options.num_gpus);
  };
  auto predicted_layout = [&](uint64_t n, const HardwareLayout& layout) {
    const std::pair<uint64_t, uint64_t> key{n, layout.job.micro_batch_size.value_or(0)};
    auto it = by_layout.find(key);
    if (it != by_layout.end()) return it->second;
    auto p = predict(est, model, layout.job);
    by_layout[key] = p;
    return p;
  };
  // A layout on more cards that fits only with a smaller micro-batch is no alternative when that
  // micro-batch alone fits the cards the user has.
  auto fits_with_own_cards = [&](const HardwareLayout& layout, uint64_t limit) {
    const uint64_t micro = layout.job.micro_batch_size.value_or(1);
    if (micro >= given.micro_batch_size.value_or(1)) return false;
    for (const HardwareLayout& own : layouts_on(options.num_gpus)) {
      if (own.job.micro_batch_size.value_or(1) != micro) continue;
      auto p = predicted_layout(options.num_gpus, own);
      return p && p->needed_bytes <= limit;
    }
    return false;
  };
  const std::vector<uint64_t> kCounts = {1, 2, 4, 8, 16};
  // A layout that changes the global batch is a different run: taken only for a job whose global
  // batch no larger count can keep (1 x 1 on one GPU is at least 2 on two).
  const uint64_t given_global = given.micro_batch_size.value_or(1) * given.grad_accum_steps.value_or(1) *
                                std::max<uint64_t>(1, options.num_gpus / std::max<uint64_t>(1, model_parallel_degree(given) *
                                                                                                   given.cp.value_or(1)));
  const auto next_count = std::find_if(kCounts.begin(), kCounts.end(), [&](uint64_t n) { return n > options.num_gpus; });
  const bool global_batch_may_change = next_count == kCounts.end() || given_global < *next_count;
  auto different_run = [&](const HardwareLayout& layout) { return layout.global_batch_changed && !global_batch_may_change; };
  // Another card takes the job as asked: a bf16 job this card runs in fp16 stays bf16 there, on a
  // card with bf16.
  const std::string card_precision = asked_precision.value_or(report.estimate.precision);
  std::map<uint64_t, std::optional<PredictedTotals>> asked_by_count;
  auto predicted_as_asked = [&](uint64_t n) -> std::optional<PredictedTotals> {
    if (asked_precision == given.precision) return predicted_on(n);
    auto it = asked_by_count.find(n);
    if (it != asked_by_count.end()) return it->second;
    Job job = n == options.num_gpus ? given : layout_on(for_hardware, n, model, options).job;
    job.precision = asked_precision;
    auto p = predict(est, model, job);
    asked_by_count[n] = p;
    return p;
  };
  auto fits_card = [&](const GpuSpec& gpu, uint64_t n, double fraction) {
    auto p = predicted_as_asked(n);
    return p && p->needed_bytes <= share_of(gpu.total_bytes, fraction, gpu.cuda_total_bytes);
  };
  // The smallest catalog card the job fits unchanged on: first of the user's vendor (their CUDA or
  // ROCm stack: bitsandbytes, flash-attn and the kernels they use run there), then, when another
  // vendor's card is smaller still, that one too (--memory alone reads as an NVIDIA card).
  const std::string own_vendor = options.gpu_vendor.empty() ? "nvidia" : options.gpu_vendor;
  // An inference job without tensor or pipeline parallelism runs whole on each GPU: one card is
  // the configuration, not the user's count of replicas.
  const uint64_t hw_count = !is_training(given) && given.tp.value_or(1) * given.pp.value_or(1) == 1 ? 1 : options.num_gpus;
  auto smallest_fitting = [&](bool own) -> std::optional<FitAlternative> {
    for (double fraction : {report.target, options.budget}) {
      const GpuSpec* best = nullptr;
      for (const auto& gpu : gpu_catalog()) {
        if ((gpu.vendor == own_vendor) != own) continue;
        if (!usable_for(gpu, card_precision, options.gpu_vendor) || !fits_card(gpu, hw_count, fraction)) continue;
        if (!best || gpu.total_bytes < best->total_bytes) best = &gpu;
      }
      if (!best) continue;
      if (best->total_bytes <= options.total_bytes) return std::nullopt;
      FitAlternative a;
      a.gpu_name = best->name;
      a.gpu_total_bytes = best->total_bytes;
      a.num_gpus = hw_count;
      a.predicted = *predicted_as_asked(hw_count);
      a.fits_target = a.predicted.needed_bytes <= share_of(best->total_bytes, report.target, best->cuda_total_bytes);
      // Another vendor's card is another software stack: said wherever the card is named.
      const std::string vendor_note = own ? "" : best->vendor == "amd" ? ", an AMD card (ROCm)"
                                              : best->vendor == "nvidia" ? ", an NVIDIA card (CUDA)" : "";
      a.description = fmt::format("fits unchanged on {}{}{}", hw_count > 1
                                      ? fmt::format("{} x ", hw_count) : "", best->name, vendor_note);
      a.change.id = "bigger_gpu";
      a.change.fix_id = "bigger_gpu";
      a.change.step = 9;
      a.change.title = fmt::format("move to {} ({}){}", best->name, format_bytes(best->total_bytes), vendor_note);
      a.change.cost = "hardware: a larger card";
      a.change.predicted = a.predicted;
      if (auto price = options.prices.find(best->name); price != options.prices.end()) {
        a.price_per_hour = price->second * static_cast<double>(hw_count);
      }
      return a;
    }
    return std::nullopt;
  };
  std::optional<FitAlternative> smallest_gpu = smallest_fitting(true), more_gpus, cheapest;
  std::optional<FitAlternative> smallest_other_vendor = smallest_fitting(false);
  if (!smallest_gpu) {
    smallest_gpu = std::move(smallest_other_vendor);
    smallest_other_vendor.reset();
  } else if (smallest_other_vendor && *smallest_other_vendor->gpu_total_bytes >= *smallest_gpu->gpu_total_bytes) {
    smallest_other_vendor.reset();
  }
  auto more_gpus_alternative = [&](uint64_t n, const HardwareLayout& layout, const PredictedTotals& predicted) {
    FitAlternative a;
    a.gpu_name = options.gpu_name;
    a.gpu_total_bytes = options.total_bytes;
    a.num_gpus = n;
    a.predicted = predicted;
    a.fits_target = predicted.needed_bytes <= report.target_bytes;
    const Job& sharded = layout.job;
    a.description = fmt::format("fits on {} x {}{}{}", n, options.gpu_name,
                                sharded.parallelism && sharded.parallelism != given.parallelism
                                    ? fmt::format(" with {}", *sharded.parallelism) : "",
                                layout.notes().empty() ? "" : "; " + layout.notes());
    a.change.id = "more_gpus";
    a.change.fix_id = "bigger_gpu";
    a.change.step = 9;
    a.change.title = fmt::format("{} GPUs instead of {}{}", n, options.num_gpus,
                                 layout.notes().empty() ? "" : " (" + layout.notes() + ")");
    a.change.cost = "hardware: more cards, and sharding's communication";
    a.change.settings = layout.settings;
    a.job = sharded;
    a.change.predicted = predicted;
    if (auto price = options.prices.find(options.gpu_name); price != options.prices.end()) {
      a.price_per_hour = price->second * static_cast<double>(n);
    }
    return a;
  };
  // A count that fits only by changing the global batch: offered when no count keeps it, at the
  // target or the budget.
  std::optional<FitAlternative> changes_the_batch;
  for (double fraction : {report.target, options.budget}) {
    if (more_gpus) break;
    const uint64_t limit = share_of(options.total_bytes, fraction, options.allocatable_bytes);
    for (uint64_t n : kCounts) {
      if (more_gpus) break;
      if (n <= options.num_gpus) continue;
      for (const HardwareLayout& layout : layouts_on(n)) {
        if (different_run(layout)) {
          if (auto p = predicted_layout(n, layout); !changes_the_batch && p && p->needed_bytes <= limit) {
            changes_the_batch = more_gpus_alternative(n, layout, *p);
          }
          break;
        }
        auto p = predicted_layout(n, layout);
        if (!p || p->needed_bytes > limit) continue;
        if (fits_with_own_cards(layout, limit)) break;
        more_gpus = more_gpus_alternative(n, layout, *p);
        break;
      }
    }
  }
  if (!more_gpus) more_gpus = std::move(changes_the_batch);
  if (!options.prices.empty()) {
    for (const auto& gpu : gpu_catalog()) {
      auto price = options.prices.find(gpu.name);
      if (price == options.prices.end() || !usable_for(gpu, card_precision, options.gpu_vendor)) continue;
      const uint64_t target = share_of(gpu.total_bytes, report.target, gpu.cuda_total_bytes);
      for (uint64_t n : kCounts) {
        if (n < options.num_gpus) continue;
        // The count's first layout that reaches the target, the micro-batch lowered if need be.
        std::optional<HardwareLayout> fitting;
        std::optional<PredictedTotals> predicted;
        for (HardwareLayout& layout : layouts_on(n)) {
          if (different_run(layout)) break;
          predicted = predicted_layout(n, layout);
          if (predicted && predicted->needed_bytes <= target) {
            fitting = std::move(layout);
            break;
          }
        }
        if (!fitting) continue;
        const double cost = price->second * static_cast<double>(n);
        if (!cheapest || cost < *cheapest->price_per_hour) {
          FitAlternative a;
          a.gpu_name = gpu.name;
          a.gpu_total_bytes = gpu.total_bytes;
          a.num_gpus = n;
          a.predicted = *predicted;
          a.fits_target = true;
          a.price_per_hour = cost;
          const HardwareLayout& layout = *fitting;
          a.description = fmt::format("cheapest that fits: {} x {} at {:.2f}/hour{}", n, gpu.name, cost,
                                      layout.notes().empty() ? "" : "; " + layout.notes());
          a.change.id = "cheapest_gpu";
          a.change.fix_id = "bigger_gpu";
          a.change.step = 9;
          a.change.title = fmt::format("{} x {}", n, gpu.name);
          if (n != options.num_gpus || !layout.notes().empty()) {
            a.change.settings = layout.settings;
            a.job = layout.job;
          }
          a.change.cost = fmt::format("{:.2f} per hour", cost);
          a.change.predicted = a.predicted;
          cheapest = a;
        }
        break;
      }
    }
    // Prices given but no priced card reaches the target at any count up to 16: say so, rather
    // than leave the prices unanswered.
    if (!cheapest && options.num_gpus <= kCounts.back()) {
      std::vector<std::string> names;
      for (const auto& [name, price] : options.prices) names.push_back(name);
      report.notes.push_back(fmt::format("no priced GPU ({}) fits the job as given at up to 16 cards; make it fit with "
                                         "the plan's changes instead", fmt::join(names, ", ")));
    }
  }

  if (!report.fits_target) {
    // The first combination under the limit, skipping some changes.
    auto find_plan = [&](uint64_t limit, const std::vector<std::string>& skip) -> std::optional<FitPlan> {
      auto applied = search.run(limit, skip);
      // No change at all: the job already fits this limit (the budget), so there is no plan.
      if (!applied || applied->empty()) return std::nullopt;
      FitPlan plan = search.to_plan(*applied);
      plan.fits_budget = plan.predicted.needed_bytes <= report.usable_bytes;
      plan.fits_target = plan.predicted.needed_bytes <= report.target_bytes;
      return plan;
    };
    // Keeping the method is no dearer than a method change when it needs an earlier step, or
    // the same step in a form that changes nothing else: a method change on top of the sharding
    // step needed anyway is pure cost, unless keeping the method takes a TP/PP layout across
    // GPUs without NVLink (a new training program, and slow).
    auto no_dearer = [&](const FitPlan& kept, const FitPlan& changed) {
      const FitChange& last = kept.changes.back();
      if (last.step != changed.changes.back().step) return last.step < changed.changes.back().step;
      return !is_model_parallel(last) || options.gpu_nvlink;
    };
    // The target first, then the budget. The search is greedy: once LoRA/QLoRA is in, the TP/PP
    // layouts (full training only) are out of reach, so each limit is also searched keeping the
    // method, and that plan is taken when the method change leads nowhere or it is no dearer.
    // A plan whose method change the pruning dropped again (QLoRA tried, then not needed once
    // sharding and offload were in) was still searched without the TP/PP layouts: the search
    // keeping the method is compared with it too, by its last step.
    for (uint64_t limit : {report.target_bytes, report.usable_bytes}) {
      report.plan = find_plan(limit, {});
      auto kept = find_plan(limit, {"lora", "qlora"});
      if (kept && (!report.plan || (changes_method(*report.plan)
                                        ? no_dearer(*kept, *report.plan)
                                        : kept->changes.back().step < report.plan->changes.back().step))) {
        report.plan = kept;
      }
      if (report.plan) break;
    }
    if (!report.plan) {
      // Step 9: nothing on this hardware fits; the job as given on more or bigger hardware.
      const FitAlternative* hw = smallest_gpu ? &*smallest_gpu : more_gpus ? &*more_gpus : nullptr;
      if (hw) {
        FitPlan plan;
        plan.changes.push_back(hw->change);
        plan.predicted = hw->predicted;
        plan.gpu_name = hw->gpu_name;
        plan.total_bytes = hw->gpu_total_bytes.value_or(options.total_bytes);
        plan.num_gpus = hw->num_gpus.value_or(options.num_gpus);
        // The job predicted_on() sized: as given on the user's count, else laid out on the plan's
        // (one card for an inference job that runs whole on each).
        plan.job = hw->job ? *hw->job
                   : plan.num_gpus == options.num_gpus ? given
                                                       : layout_on(for_hardware, plan.num_gpus, model, options).job;
        // Another card runs the job as asked (predicted_as_asked).
        if (hw == &*smallest_gpu) plan.job.precision = asked_precision;
        plan.fits_target = hw->fits_target;
        plan.fits_budget = true;
        report.plan = plan;
      } else {
        report.notes.push_back(fmt::format("no change searched makes this job fit, nor does {}, nor up to 16 x {}",
                                           hw_count > 1 ? fmt::format("any catalog GPU taken {} at a time", hw_count)
                                                        : std::string("any single catalog GPU"),
                                           options.gpu_name));
      }
    }
    // On this card, the plan runs fp16 and SDPA where bf16 and flash attention were asked for:
    // its first changes.
    if (report.plan && !report.plan->gpu_name) {
      report.plan->changes.insert(report.plan->changes.begin(), runnable.begin(), runnable.end());
    }
    if (report.plan && !report.plan->fits_target) {
      report.notes.push_back(fmt::format(
          "the plan fits the {:.0f}% budget but not the {:.0f}% target: a longer batch than "
          "predicted may still run out of memory", 100 * options.budget, 100 * report.target));
    }
  }

  // A job that fits but asks for what this card cannot run: the plan is those changes alone.
  if (!report.plan && !runnable.empty() && report.fits) {
    FitPlan plan;
    plan.changes = runnable;
    plan.job = given;
    plan.predicted = totals_of(report.estimate);
    plan.num_gpus = options.num_gpus;
    plan.total_bytes = options.total_bytes;
    plan.fits_budget = true;
    plan.fits_target = report.fits_target;
    report.plan = plan;
  }

  // Alternatives: each single change that fits alone (cheapest option of its step), then hardware.
  if (!report.fits_target) {
    std::vector<std::string> plan_ids;
    if (report.plan) {
      for (const auto& c : report.plan->changes) plan_ids.push_back(c.id);
    }
    const bool plan_is_single = report.plan && report.plan->changes.size() == 1;
    for (const auto& step : search.steps) {
      // The cheapest option of the step that reaches the target alone, else the budget.
      auto p = search.pick(step, given, needed, report.target_bytes);
      if (!p || !p->fits) p = search.pick(step, given, needed, report.usable_bytes);
      if (!p || !p->fits) continue;
      if (plan_is_single && p->candidate.change.id == plan_ids[0]) continue;
      // An alternative must do something: lower the need, and reach the target when the job
      // already fits the budget as given.
      if (p->predicted.needed_bytes >= needed || (report.fits && p->predicted.needed_bytes > report.target_bytes)) continue;
      FitAlternative a;
      a.change = p->candidate.change;
      a.change.predicted = p->predicted;
      Job changed = given;
      p->candidate.apply(changed);
      if (a.change.id.rfind("offload", 0) == 0) a.change.host_ram_bytes = offload_host_bytes(est, model, given, changed);
      a.job = changed;
      a.predicted = p->predicted;
      a.fits_target = p->predicted.needed_bytes <= report.target_bytes;
      a.description = fmt::format("fits with only: {}", a.change.title);
      report.alternatives.push_back(std::move(a));
    }
    // When the plan changes the method (LoRA, QLoRA), the cheapest way that keeps it, if any.
    if (report.plan && changes_method(*report.plan)) {
      for (uint64_t limit : {report.target_bytes, report.usable_bytes}) {
        auto same = search.run(limit, {"lora", "qlora"});
        if (!same) continue;
        FitPlan kept = search.to_plan(*same);
        FitAlternative a;
        a.change.id = "same_method";
        a.change.step = kept.changes.empty() ? 0 : kept.changes.back().step;
        std::vector<std::string> titles;
        // A TP/PP layout moves training to torchtitan or Megatron-LM: the Trainer's arguments of the
        // earlier changes do not apply there (the layout's flags carry the batch, accumulation and
        // checkpointing; its cost says what the training script must carry).
        const bool other_program = is_training(given) && std::any_of(kept.changes.begin(), kept.changes.end(),
                                                                     [](const FitChange& c) { return is_model_parallel(c); });
        for (const auto& c : kept.changes) {
          titles.push_back(c.title);
          // A later change's value for the same setting replaces the earlier one (FSDP, then FSDP
          // with CPU offload, is one fsdp= argument).
          for (const auto& setting : c.settings) {
            if (other_program && (setting.target == "TrainingArguments" || setting.target == "SFTConfig")) continue;
            auto same_key = std::find_if(a.change.settings.begin(), a.change.settings.end(), [&](const FitSetting& s) {
              return s.target == setting.target && s.name == setting.name && s.target != "python";
            });
            if (same_key != a.change.settings.end()) *same_key = setting;
            else a.change.settings.push_back(setting);
          }
          a.change.host_ram_bytes = c.host_ram_bytes ? c.host_ram_bytes : a.change.host_ram_bytes;
        }
        // One change that is already listed alone is not a second alternative.
        if (kept.changes.size() == 1 &&
            std::any_of(report.alternatives.begin(), report.alternatives.end(),
                        [&](const FitAlternative& listed) { return listed.change.id == kept.changes[0].id; })) {
          break;
        }
        a.change.title = fmt::format("{}", fmt::join(titles, "; "));
        a.change.cost = kept.changes.empty() ? "" : kept.changes.back().cost;
        a.change.predicted = kept.predicted;
        a.predicted = kept.predicted;
        a.fits_target = kept.predicted.needed_bytes <= report.target_bytes;
        a.description = "without changing the training method: " + a.change.title;
        a.job = kept.job;
        report.alternatives.push_back(std::move(a));
        break;
      }
    }
    // Without --lengths the plan never cuts the length; say which length would fit, unless it
    // keeps less than a quarter of the asked length: that truncates nearly every example and is
    // a different task, not an alternative ("fits at max length 98" for a 4096-token job).
    if (!options.lengths && is_training(given) && given.seq_len) {
      auto longest = solve_largest(model, given, &Job::seq_len, report.usable_bytes, *given.seq_len, est);
      if (longest && *longest < *given.seq_len && *longest * 4 >= *given.seq_len) {
        Job cut = given;
        cut.seq_len = *longest;
        if (auto p = predict(est, model, cut)) {
          FitAlternative a;
          a.change.id = "seq_len";
          a.change.fix_id = "shorter_sequence";
          a.change.step = 3;
          a.change.title = fmt::format("max sequence length {} -> {}", *given.seq_len, *longest);
          a.change.cost = "truncates every example longer than this (give --lengths to see how many)";
          a.change.settings = {{"SFTConfig", "max_length", std::to_string(*longest)}};
          a.change.predicted = *p;
          a.predicted = *p;
          a.fits_target = p->needed_bytes <= report.target_bytes;
          a.description = fmt::format("fits at max length {}", *longest);
          report.alternatives.push_back(std::move(a));
        }
      }
    }
    std::stable_sort(report.alternatives.begin(), report.alternatives.end(),
                     [](const FitAlternative& a, const FitAlternative& b) {
                       return a.change.step < b.change.step;
                     });
  }
  const bool plan_is_hardware = report.plan && !report.plan->changes.empty() &&
                                report.plan->changes.front().step == 9;
  // A plan that only splits the model over the cards there already fits without more of them.
  const bool plan_only_splits = report.plan && !report.plan->changes.empty() &&
                                std::all_of(report.plan->changes.begin(), report.plan->changes.end(),
                                            [](const FitChange& c) { return is_model_parallel(c); });
  for (auto* hw : {&smallest_gpu, &smallest_other_vendor, &more_gpus, &cheapest}) {
    if (!*hw || report.fits) continue;
    if (hw == &more_gpus && plan_only_splits) continue;
    if (plan_is_hardware && (*hw)->change.title == report.plan->changes.front().title) continue;
    report.alternatives.push_back(**hw);
  }
  return report;
}

}  // namespace oomdoc
