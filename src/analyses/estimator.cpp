// Every memory formula of oomdoc lives in this file, each with its source; docs/estimator.md
// explains them in prose. Units: bytes per GPU. "Per token" means per (micro-batch x sequence)
// position. llama.cpp, which allocates its own buffers, has its own file (llama_cpp_estimate.cpp).
#include "analyses/estimator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "analyses/llama_cpp_estimate.h"
#include "analyses/vllm_serve.h"
#include "core/saturating.h"
#include "core/text.h"
#include "core/units.h"
#include "model/architecture.h"
#include "model/weight_formats.h"
#include "readers/job_file.h"

namespace oomdoc {
namespace {

// ---- constants, each with its source ------------------------------------------------------

// CUDA context + kernels of PyTorch/cuBLAS/cuDNN with lazy module loading (CUDA >= 11.7, the
// default in PyTorch 2.x): 300 MiB-2 GiB per the calculators in ../shared/docs/estimators.md
// (asmirnov: "between 300 MiB and 2 GiB"; 1343 MiB measured with eager loading on CUDA 11.2).
constexpr uint64_t kCudaContextBytes = 512 * kMiB;
// Without lazy loading (CUDA < 11.7, or PyTorch < 1.13, which first set CUDA_MODULE_LOADING=LAZY:
// pytorch/pytorch#86509) every kernel of every library is loaded at start-up: "Before CUDA 11.7,
// all kernels were loaded into the context once the library was loaded, which took >1000MB"
// (ptrblck, pytorch/pytorch#107667). transformers' model_memory_anatomy doc measured 1343 MiB for
// `torch.ones((1, 1)).to("cuda")` on a V100 with CUDA 11.2.
constexpr uint64_t kCudaContextEagerLoadingBytes = 1343 * kMiB;
// cuBLAS workspaces PyTorch allocates through its caching allocator (CUBLAS_WORKSPACE_CONFIG
// default ":4096:2:16:8" = 2 x 4 MiB + 8 x 16 KiB; aten/src/ATen/cuda/CublasHandlePool.cpp).
constexpr uint64_t kCublasWorkspaceBytes = 8 * kMiB + 128 * kKiB;
// ZeRO-3 steps the optimizer one sub-group of its fp32 partition at a time and frees that
// sub-group's fp32 gradients after it (deepspeed/runtime/zero/stage3.py: _prepare_fp32_grad_for_sub_group,
// _optimizer_step, _release_sub_group); zero_optimization.sub_group_size defaults to 1e9 elements.
constexpr double kZero3SubGroupParams = 1e9;
// NCCL communicator buffers on multi-GPU jobs (NCCL_BUFFSIZE 4 MiB per channel and peer;
// a few hundred MiB in practice). Outside the PyTorch allocator.
constexpr uint64_t kNcclBytes = 256 * kMiB;
// Caching-allocator slack: reserved minus allocated at the peak. The allocator rounds blocks to
// 512 B / 2 MiB and keeps freed blocks cached (c10/cuda/CUDACachingAllocator.cpp); Megatron's
// theoretical_memory_usage applies a 1.05 overhead factor. We take 5% of the peak allocated.
constexpr double kAllocatorSlack = 0.05;
// PEFT's default targets when none are given: the query and value projections
// (peft/utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING).
// Defaults for jobs that leave sizes open.
constexpr uint64_t kDefaultSeqLen = 2048;
constexpr uint64_t kDefaultPromptLen = 512;
constexpr uint64_t kDefaultNewTokens = 256;
// LLaMA-Factory's freeze tuning trains the last freeze_trainable_layers (default 2) blocks
// (hparams/finetuning_args.py FreezeArguments); the job's default too.
constexpr uint64_t kFreezeTrainableLayers = 2;
// torchtune's CEWithChunkedOutputLoss splits the logits into 8 chunks.
constexpr double kLossChunks = 8;

// ---- the job with every default filled in ---------------------------------------------------

struct Plan {
  std::string task, precision, optimizer, checkpointing, attention, parallelism, loss_impl;
  std::optional<std::string> quantization;
  bool double_quant = false;
  uint64_t group_size = 128;
  bool fused_backward = false;
  uint64_t micro_batch = 1, accum = 1, seq = 0;
  uint64_t target = 0;   // decoder tokens per sequence (encoder-decoder models; else seq)
  uint64_t num_gpus = 1, tp = 1, pp = 1, cp = 1, dp = 1;
  // The share of the blocks on the most loaded pipeline stage: whole blocks, ceil(L/pp) of L
  // (11 of Llama-3.1-8B's 32 blocks at pp 3, not 10.67); 1 without pipeline parallelism.
  double stage_share = 1;
  bool offload_optimizer = false, offload_params = false, offload_activations = false;
  LoraSettings lora;
  bool router_is_gate = false;  // a "gate" LoRA target names the MoE router (router_is_linear_gate)
  bool use_lora = false;
  uint64_t batch = 1, prompt = 0, new_tokens = 0;
  double kv_bytes = 2;
  std::string kv_cache_impl = "dynamic";
  bool training = false, inference = false;

  double param_bytes = 2;      // storage dtype of the (16/32-bit) weights
  double act_bytes = 2;        // activation dtype: what the matmuls and attention kernels compute in
  // LoRA over a bitsandbytes base prepared by PEFT (kbit_upcast "all" or "norms"): fp32 norm
  // weights make every normalised tensor fp32, and bitsandbytes' Linear4bit/Linear8bitLt cast
  // their output back to the input's dtype, so the hidden states between matmuls are fp32.
  std::string kbit_upcast = "none";
  bool bnb = false;              // the quantized Linears are bitsandbytes' (Linear4bit, Linear8bitLt)
  bool communicates = false;     // the GPUs hold an NCCL communicator (not inference replicas)
  bool bnb_saves_input = false;  // bitsandbytes < 0.43.3: MatMul4Bit keeps its input (below)
  double hidden_bytes = 2;     // dtype of the hidden states between matmuls (elementwise ops, LoRA inputs)
  double residual_bytes = 2;   // dtype of the residual stream (each block's input)
  bool amp = false;            // autocast over fp32 parameters
  // Autocast on in the forward: amp, or a 16-bit model run under autocast (Hugging Face Trainer /
  // Accelerate with bf16=True or fp16=True over weights loaded in 16 bits: the job's `autocast`).
  bool autocast = false;
  bool mixed = false;          // fp16_mixed / bf16_mixed: fp32 masters, 16-bit compute
  double grad_bytes = 2;
  double state_bytes = 4;      // optimizer state dtype for 32/16-bit optimizers
  double adapter_bytes = 4;    // LoRA weights (and their grads and AdamW state): fp32 in PEFT
  uint64_t freeze_layers = 0;  // train_freeze: the trainable blocks (the last ones)
  double trainable_bytes = 2;  // train_freeze: the trainable blocks' weights (and grads, state)
  std::string optimizer_impl = "foreach";
  bool grads_kept_by_zero_grad = false;  // torch < 2.0 zero_grad() zeroes .grad in place
  bool sync_each_batch = false;  // FSDP accumulation without no_sync()
  bool lazy_module_loading = true;
  bool compile = false;
  double loss_bytes = 4;       // dtype the cross-entropy runs in: fp32 upcast unless the job says not
  bool litgpt = false;         // LitGPT's own modules instead of the transformers implementation
  // Fused kernels patched into the model ("liger", "unsloth"; "none" also for families they do
  // not patch) and which projection groups Unsloth's fused LoRA autograd functions run.
  std::string kernels = "none";
  bool unsloth_qkv = false, unsloth_o = false, unsloth_mlp = false;
};

// The groups of a block's Linears that share an input: "attn" (q, k, v), "o", "mlp" (gate, up)
// and "down".
std::string input_group(const LinearShape& l) {
  if (l.role == "o") return "o";
  if (l.role == "down") return "down";
  if (l.role == "gate" || l.role == "up" || l.role == "gate_up" || l.role == "fc_in") return "mlp";
  return "attn";
}

bool is_training_task(const std::string& task) { return task.rfind("train_", 0) == 0; }

// PEFT's k-bit preparation when the job does not say (kbit_upcast unset): "none" when FSDP or
// ZeRO-3 shard the model (TRL skips it there) or Unsloth prepares it, else "all"
// (docs/estimator.md).
std::string default_kbit_upcast(const Job& job) {
  if (job.kernels && *job.kernels == "unsloth" && job.implementation.value_or("transformers") == "transformers") return "none";
  // Sharded QLoRA here means flat parameters or partitioned ones (FSDP, ZeRO-3, whose init puts
  // the 4-bit parameters on the CPU or meta device): TRL's is_sharded_qlora; ZeRO-1/2 load the
  // model whole on each GPU and prepare it.
  const std::string parallelism = job.parallelism.value_or("ddp");
  const bool sharded_model = parallelism.rfind("fsdp", 0) == 0 || parallelism == "zero3" || parallelism == "hybrid_shard";
  return sharded_model ? "none" : "all";
}

// bitsandbytes' own layers (Linear4bit, Linear8bitLt): the formats PEFT's k-bit preparation upcasts
// around and whose autograd functions decide what a frozen base keeps for backward.
bool is_bitsandbytes(const std::optional<std::string>& q) {
  return q && (*q == "nf4" || *q == "fp4" || *q == "int8");
}

// Families whose transformers implementation has only its own eager attention (no SDPA or flash
// path): DebertaV2PreTrainedModel declares no attention implementation switch, and
// DisentangledSelfAttention.forward always runs bmm + XSoftmax + dropout + bmm.
bool eager_attention_only(const ModelSpec& m) { return m.model_type == "deberta-v2"; }

// Families whose transformers implementation has no SDPA path, so an unstated attention runs
// eager: GptOssPreTrainedModel sets _supports_sdpa = False (the sinks join the softmax, which
// SDPA cannot take); flash needs the kernels-hub "kernels-community/vllm-flash-attn3".
bool lacks_sdpa(const ModelSpec& m) { return m.model_type == "gpt_oss"; }

}  // namespace

bool supports_sdpa(const ModelSpec& m) { return !eager_attention_only(m) && !lacks_sdpa(m); }

std::string flash_attention_setting(const ModelSpec& m) {
  if (eager_attention_only(m)) return "";
  // GptOssPreTrainedModel: flash only through the kernels hub's FA3 build, which takes the sinks
  // (the model card's and TRL's gpt-oss examples; TRL's SFTTrainer counts it as flash attention
  // for padding-free batches).
  if (m.model_type == "gpt_oss") return "kernels-community/vllm-flash-attn3";
  return "flash_attention_2";
}

// Families whose modules Liger (liger_kernel/transformers/monkey_patch.py,
// MODEL_TYPE_TO_APPLY_LIGER_FN) and Unsloth (unsloth/models/) replace with their kernels: the
// RMSNorm, gated-MLP decoders. Others run unpatched (the Trainer warns and goes on).
bool liger_fuses_loss(const ModelSpec& m) { return m.model_type != "granite"; }

uint64_t new_tokens_of(const Job& job) {
  return job.max_new_tokens.value_or(job.task.value_or("") == "load" ? 0 : kDefaultNewTokens);
}

bool kernels_patch(const ModelSpec& m, const std::string& kernels) {
  static const std::set<std::string> kLiger = {"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe",
                                               "gemma", "gemma2", "gemma3_text", "phi3", "granite", "olmo2"};
  static const std::set<std::string> kUnsloth = {"llama", "mistral", "qwen2", "qwen3", "gemma",
                                                 "gemma2", "gemma3_text", "phi3", "granite"};
  return (kernels == "liger" && kLiger.count(m.model_type)) || (kernels == "unsloth" && kUnsloth.count(m.model_type));
}

namespace {


Result<Plan> make_plan(const ModelSpec& m, const Job& job, std::vector<std::string>& assumptions) {
  Plan p;
  auto assume = [&](const std::string& text) { assumptions.push_back(text); };
  if (job.task) {
    p.task = *job.task;
  } else if (job.batch_size || job.prompt_len || job.max_new_tokens) {
    p.task = "inference";
    assume("task: inference (inference fields given)");
  } else if (job.lora) {
    p.task = job.weight_quantization ? "train_qlora" : "train_lora";
    assume("task: " + p.task + " (lora settings given)");
  } else {
    p.task = "train_full";
    assume("task: train_full (not given)");
  }
  p.training = is_training_task(p.task);
  p.inference = !p.training;

  if (job.precision) {
    p.precision = *job.precision;
  } else if (p.training) {
    Job with_task = job;
    with_task.task = p.task;
    p.precision = default_training_precision(with_task);
    assume("precision: " + p.precision + " (not given)");
  } else {
    p.precision = m.torch_dtype == "float16" ? "fp16" : "bf16";
    assume("precision: " + p.precision + " (not given; from the model's torch_dtype or bf16)");
  }
  p.mixed = p.precision == "fp16_mixed" || p.precision == "bf16_mixed";
  // Offloading the optimizer is DeepSpeed's ZeRO-Offload (plain DDP has none): without a stated
  // parallelism, such a job runs under ZeRO-2.
  const bool offloads_optimizer = std::find(job.offload.begin(), job.offload.end(), "optimizer") != job.offload.end();
  p.parallelism = job.parallelism.value_or(offloads_optimizer ? "zero2" : "ddp");
  if (!job.parallelism && offloads_optimizer) assume("parallelism: zero2 (offload optimizer is ZeRO-Offload's; not given)");
  // DeepSpeed's ZeRO optimizers keep fp32 partitions of the parameters they step whatever the
  // 16-bit mode ("bf16"/"fp16" enabled in its config: stage_1_and_2.py's single_partition_of_fp32_groups,
  // stage3.py's fp32_partitioned_groups_flat): pure 16-bit training does not exist there.
  if (p.training && p.parallelism.rfind("zero", 0) == 0 && (p.precision == "bf16" || p.precision == "fp16")) {
    p.precision += "_mixed";
    p.mixed = true;
    assume("precision: " + p.precision + " (DeepSpeed ZeRO keeps fp32 master partitions; pure 16-bit is not an option there)");
  }
  const bool sharded = p.parallelism != "ddp" && job.num_gpus.value_or(1) > 1;
  // Mixed precision is autocast over fp32 parameters on one GPU or DDP; sharded engines
  // (FSDP MixedPrecision, DeepSpeed bf16/fp16) compute on 16-bit copies of the parameters, so
  // activations are plain 16-bit there while fp32 masters stay sharded.
  p.amp = p.mixed && !sharded;
  // DeepSpeed runs its own 16-bit engine without autocast (Accelerate sets native_amp off there).
  p.autocast = p.amp || (job.autocast.value_or(false) && (p.precision == "bf16" || p.precision == "fp16") &&
                         p.parallelism.rfind("zero", 0) != 0);
  p.param_bytes = p.precision == "fp32" || p.mixed ? 4 : 2;
  p.act_bytes = p.precision == "fp32" ? 4 : 2;
  p.grad_bytes = p.param_bytes;
  p.state_bytes = p.param_bytes;  // torch optimizers keep state in the parameter's dtype

  p.quantization = job.weight_quantization;
  // transformers keeps a pre-quantized checkpoint's own quantization_config and ignores one passed
  // to from_pretrained ("the `quantization_config` from the model will be used",
  // modeling_utils.py): the checkpoint's format is sized, and the request said to be ignored.
  // (An MXFP4 checkpoint is dequantized for training and may be quantized again: kept.)
  std::optional<std::string> ignored_request;
  if (p.quantization && !m.quantization.empty() && m.quantization_bits && m.quantization != "mxfp4") {
    ignored_request = p.quantization;
    p.quantization.reset();
  }
  const bool dequantized_mxfp4 = !p.quantization && m.quantization == "mxfp4" && p.training;
  bool kept_checkpoint_format = false;
  if (dequantized_mxfp4) {
    // The gpt-oss fine-tuning recipes load the MXFP4 checkpoint dequantized to bf16
    // (Mxfp4Config(dequantize=True) in OpenAI's cookbook; NVIDIA's and LMSYS's recipes upcast to
    // bf16 too: docs/estimator.md), so training holds 16-bit weights. (QLoRA then quantizes them
    // again, below: one assumption says both.)
    if (p.task != "train_qlora") {
      assume("weight_quantization: none (MXFP4 checkpoint dequantized to bf16 for training: Mxfp4Config(dequantize=True))");
    }
  } else if (!p.quantization && !m.quantization.empty() && m.quantization_bits) {
    // A pre-quantized checkpoint keeps its format.
    kept_checkpoint_format = true;
    if (m.quantization == "mxfp4") p.quantization = "mxfp4";
    else if (m.quantization == "gptq") p.quantization = fmt::format("gptq{}", m.quantization_bits);
    else if (m.quantization == "awq") p.quantization = "awq4";
    else if (m.quantization == "modelopt_fp4" || m.quantization == "nvfp4") p.quantization = "nvfp4";
    else if (m.quantization == "fp8" || m.quantization_bits == 8) {
      const bool integers = m.quantization == "bitsandbytes" || m.quantization == "torchao" || m.quantization_integers;
      p.quantization = integers ? "int8" : "fp8";
    }
    else if (m.quantization_bits == 4) {
      p.quantization = m.quantization != "bitsandbytes" ? "int4" : m.quantization_fp4 ? "fp4" : "nf4";
    }
    if (p.quantization) {
      assume("weight_quantization: " + *p.quantization + " (the checkpoint's format" +
             (ignored_request ? "; " + *ignored_request + " asked for is ignored: transformers keeps a pre-quantized "
                                "checkpoint's own quantization_config)"
                              : ")"));
    }
  }
  // transformers' FP8 quantizers are not trainable (FineGrainedFP8HfQuantizer and
  // FbgemmFp8HfQuantizer: is_trainable False), so the Trainer refuses adapters over an FP8
  // checkpoint: "The model you are trying to fine-tune is quantized with fp8 but that quantization
  // method do not support training".
  if (p.training && p.quantization == "fp8" && (m.quantization == "fp8" || m.quantization == "fbgemm_fp8")) {
    return make_error(fmt::format(
        "{}: an FP8 checkpoint ({}); transformers cannot train over it (the Trainer refuses: \"quantized with {} but "
        "that quantization method do not support training\"): {}start from the 16-bit model",
        m.id.empty() ? m.source : m.id, m.quantization, m.quantization,
        m.quantization == "fp8" ? "load it dequantized (FineGrainedFP8Config(dequantize=True)) or " : ""));
  }
  // LoRA on a quantized base: the checkpoint's own format above (PEFT trains adapters over GPTQ
  // and AWQ bases too), else bitsandbytes NF4.
  if (!p.quantization && p.task == "train_qlora") {
    p.quantization = "nf4";
    assume(dequantized_mxfp4 ? "weight_quantization: nf4 (train_qlora without a format: the MXFP4 checkpoint dequantized "
                               "to bf16 by Mxfp4Config(dequantize=True), then its nn.Linear layers quantized by bitsandbytes)"
                             : "weight_quantization: nf4 (train_qlora without a format)");
  }
  // A requested 8/4-bit format is bitsandbytes' (transformers' BitsAndBytesConfig); a checkpoint's
  // own int8 (compressed-tensors W8A8, torchao) runs its own layers, which TRL does not prepare.
  p.bnb = is_bitsandbytes(p.quantization) && (!kept_checkpoint_format || m.quantization == "bitsandbytes");
  if (p.task == "train_full" && p.quantization) {
    return make_error(fmt::format("{}: is quantized ({}); full fine-tuning needs unquantized weights (use train_qlora)",
                                  m.id.empty() ? m.source : m.id, *p.quantization));
  }
  // A pre-quantized bitsandbytes checkpoint says whether its absmax are quantized again.
  const bool checkpoint_double_quant = (!job.weight_quantization || ignored_request) && m.quantization_double_quant;
  p.double_quant = job.double_quant.value_or(checkpoint_double_quant);
  if (p.quantization && (*p.quantization == "nf4" || *p.quantization == "fp4") && !job.double_quant) {
    assume(checkpoint_double_quant ? "double_quant: true (the checkpoint's format)" : "double_quant: false (bitsandbytes default)");
  }
  p.group_size = job.group_size.value_or(m.quantization_per_channel ? kPerChannelGroup
                                         : m.quantization_group_size ? m.quantization_group_size : 128);
  // A grouped format quantizes each Linear's input features in whole groups (auto-gptq, AutoAWQ and
  // torchao refuse a group that does not divide them): a group size given that does not divide the
  // hidden size is a typo, not a layout.
  const bool grouped = p.quantization && (p.quantization->starts_with("gptq") || *p.quantization == "awq4" ||
                                          *p.quantization == "int4");
  if (grouped && job.group_size && m.hidden_size && m.hidden_size % *job.group_size != 0) {
    return make_error(fmt::format("group_size {} does not divide the model's hidden size {}: {} quantizes each "
                                  "Linear's input features in whole groups (128 is the usual size)",
                                  *job.group_size, m.hidden_size, *p.quantization));
  }

  if (p.training) {
    p.optimizer = job.optimizer.value_or("adamw");
    if (!job.optimizer) assume("optimizer: adamw (not given)");
    p.fused_backward = job.fused_backward.value_or(false);
    p.micro_batch = job.micro_batch_size.value_or(1);
    if (!job.micro_batch_size) assume("micro_batch_size: 1 (not given)");
    // Preference objectives forward chosen and rejected completions as one batch (TRL's
    // concatenated_forward): activations and logits of twice the pairs.
    if (job.objective && objective_is_paired(*job.objective) && p.training) {
      p.micro_batch *= 2;
      assume(fmt::format("objective {}: each pair's chosen and rejected completions run as one batch of {} sequences "
                         "(TRL concatenated_forward)", *job.objective, p.micro_batch));
    }
    p.accum = job.grad_accum_steps.value_or(1);
    if (!job.grad_accum_steps) assume("grad_accum_steps: 1 (not given)");
    uint64_t max_pos = m.max_position_embeddings ? m.max_position_embeddings : kDefaultSeqLen;
    p.seq = job.seq_len.value_or(std::min(kDefaultSeqLen, max_pos));
    if (!job.seq_len) assume(fmt::format("seq_len: {} (not given)", p.seq));
    p.target = job.target_len.value_or(p.seq);
    if (m.is_encoder_decoder && !job.target_len) assume(fmt::format("target_len: {} (seq_len; not given)", p.target));
    if (!m.is_encoder_decoder && job.target_len) {
      assume(fmt::format("target_len: ignored ({} is not an encoder-decoder model: seq_len is the whole sequence)", m.model_type));
      p.target = p.seq;
    }
    p.checkpointing = job.gradient_checkpointing.value_or("none");
    if (!job.gradient_checkpointing) assume("gradient_checkpointing: none (not given)");
  } else {
    p.batch = job.batch_size.value_or(1);
    if (!job.batch_size) assume("batch_size: 1 (not given)");
    // An encoder (BERT, ViT) reads its input in one forward pass, at most its learned positions
    // long (a ViT image is always its patches and the class token).
    const uint64_t max_pos = m.max_position_embeddings ? m.max_position_embeddings : kDefaultPromptLen;
    uint64_t default_prompt = m.is_encoder_only ? std::min(kDefaultPromptLen, max_pos) : kDefaultPromptLen;
    // The defaults stay inside a short context (512 positions): the prompt is what the context
    // leaves after the tokens to generate, rather than a length the model cannot take.
    const uint64_t context = m.is_encoder_only ? 0 : vllm_derived_max_model_len(m, std::nullopt);
    const uint64_t planned_new = m.score_labels ? 0 : new_tokens_of(job);
    const bool prompt_shortened = context && default_prompt + planned_new > context && context > planned_new;
    if (prompt_shortened) default_prompt = context - planned_new;
    p.prompt = job.prompt_len.value_or(p.task == "load" ? 0 : default_prompt);
    if (!job.prompt_len && p.task != "load") {
      assume(prompt_shortened ? fmt::format("prompt_len: {} (not given; the model's context of {} less {} new tokens)",
                                            p.prompt, context, planned_new)
                              : fmt::format("prompt_len: {} (not given)", p.prompt));
    }
    // A sequence classifier (reward model) scores the prompt in one forward pass, and an encoder
    // has no decoder to generate with: neither generates.
    const bool classifier = m.score_labels && !m.is_encoder_only;
    if (m.is_encoder_only && job.max_new_tokens.value_or(0) > 0) {
      return Error{fmt::format("max_new_tokens {}: {} is an encoder-only model; it embeds or classifies its input in "
                               "one forward pass and generates no tokens (give 0, or leave it out)",
                               *job.max_new_tokens, m.id)};
    }
    p.new_tokens = p.task == "load" || classifier || m.is_encoder_only ? job.max_new_tokens.value_or(0)
                                                                       : new_tokens_of(job);
    if (!job.max_new_tokens && p.task != "load") {
      assume(classifier ? "max_new_tokens: 0 (not given; a sequence classifier scores the prompt, it does not generate)"
             : m.is_encoder_only ? "max_new_tokens: 0 (an encoder-only model generates nothing)"
                                 : fmt::format("max_new_tokens: {} (not given)", p.new_tokens));
    }
    p.seq = p.prompt + p.new_tokens;
    p.target = p.seq;
    std::string kv = job.kv_cache_dtype.value_or("auto");
    p.kv_bytes = kv == "fp32" ? 4 : (kv == "fp8" || kv == "int8") ? 1 : (kv == "auto" ? p.act_bytes : 2);
    if (!job.kv_cache_dtype && p.task == "inference" && !m.is_encoder_only) {
      assume("kv_cache_dtype: the activation dtype (not given)");
    }
    // LitGPT preallocates its cache for the longest sequence (build_kv_cache); transformers grows it.
    const bool litgpt = job.implementation.value_or("") == "litgpt";
    p.kv_cache_impl = job.kv_cache_impl.value_or(litgpt ? "static" : "dynamic");
    if (!job.kv_cache_impl && p.task == "inference" && p.new_tokens > 0 && !m.is_encoder_only) {
      assume(litgpt ? "kv_cache_impl: static (LitGPT preallocates its KV cache)"
                    : "kv_cache_impl: dynamic (transformers >= 4.36; legacy before)");
    }
  }
  // Kernels patch a transformers model: LitGPT and llama.cpp run their own modules. Where they do
  // not apply (a family the library does not patch), neither do their defaults (flash attention,
  // the fused loss, Unsloth's checkpointing, LoRA targets and dtype): the model runs as plain
  // transformers and PEFT would run it.
  const bool transformers = job.implementation.value_or("transformers") == "transformers";
  p.kernels = job.kernels.value_or("none");
  if (p.kernels != "none" && !transformers) {
    assume(fmt::format("kernels: none ({} runs its own modules)", *job.implementation));
    p.kernels = "none";
  }
  if (p.kernels != "none" && !kernels_patch(m, p.kernels)) {
    assume(fmt::format("kernels: none ({} has no {} kernels for {}; it runs unpatched, without {}'s defaults)", p.kernels,
                       p.kernels, m.model_type, p.kernels));
    p.kernels = "none";
  }
  const bool unsloth = p.kernels == "unsloth";
  Job unpatched = job;  // what the defaults below read
  if (p.kernels == "none") unpatched.kernels.reset();
  // Unsloth runs flash-attn when it is installed (unsloth/utils/attention_dispatch.py: flash,
  // then xformers, then SDPA), and its get_peft_model defaults to its offloaded checkpointing
  // (use_gradient_checkpointing="unsloth"), set below with the offload list.
  // (Not in fp32: flash-attn has no fp32 kernels; validate_job refuses flash with fp32.)
  const bool unsloth_flash = unsloth && p.precision != "fp32";
  p.attention = job.attention_impl.value_or(unsloth_flash ? "flash" : "sdpa");
  if (eager_attention_only(m)) {
    if (p.attention != "eager") assume("attention: eager (transformers' " + m.model_type + " has no SDPA or flash path)");
    p.attention = "eager";
  } else if (p.attention == "sdpa" && lacks_sdpa(m)) {
    p.attention = "eager";
    assume("attention_impl: eager (transformers' " + m.model_type + " has no SDPA path: _supports_sdpa = False)");
  } else if (!job.attention_impl) {
    assume(unsloth_flash ? "attention_impl: flash (Unsloth runs flash-attn when installed)"
                   : "attention_impl: sdpa (not given; the transformers default)");
  }
  // (Every fit plan's job comes through here: one that would keep flash attention in fp32, e.g.
  // once the precision change it came with is dropped, cannot be predicted, so is never kept.)
  if (std::string problem = flash_attention_dtype_problem(p.precision, p.attention); !problem.empty()) {
    return make_error("attention_impl: " + problem);
  }
  // Liger's apply_liger_kernel_to_<family> turns on its fused linear cross-entropy by default
  // (not for Granite: cross_entropy=True, fused_linear_cross_entropy=False); Unsloth computes the
  // loss from the hidden states chunk by chunk as well.
  const bool fused_loss_default = unsloth || (p.kernels == "liger" && liger_fuses_loss(m));
  p.loss_impl = job.loss_impl.value_or(fused_loss_default ? "fused_linear" : "standard");
  // An encoder is sized as its encoder and pooler (plus a classification head's few parameters):
  // fine-tuning reads one vector per sequence. Masked-LM training adds vocabulary logits that are
  // not sized; say so where the config names such a head, or none.
  if (p.training && m.is_encoder_only && m.vocab_size > 0 && m.encoder_head != "classification") {
    assume(fmt::format("task head: {}; sized as the encoder and its pooler (a classification head adds only hidden x "
                       "labels): masked-LM training would add its batch x seq x {} logits, which are not sized",
                       m.encoder_head == "masked_lm" ? "the config's architectures name a masked-LM head"
                                                     : "none named by the config",
                       m.vocab_size));
  }
  if (!job.loss_impl && p.training && !m.is_encoder_only) {
    assume(fused_loss_default ? fmt::format("loss_impl: fused_linear ({}'s default)", unsloth ? "unsloth" : "liger")
                              : "loss_impl: standard (logits upcast to fp32)");
  }

  p.tp = job.tp.value_or(1);
  p.pp = job.pp.value_or(1);
  p.cp = job.cp.value_or(1);
  p.num_gpus = job.num_gpus.value_or(p.tp * p.pp * p.cp);
  if (!job.num_gpus && p.num_gpus > 1) assume(fmt::format("num_gpus: {} (tp x pp x cp; not given)", p.num_gpus));
  if (p.num_gpus % (p.tp * p.pp * p.cp)) {
    return make_error(fmt::format("num_gpus {} is not a multiple of tp*pp*cp = {}", p.num_gpus, p.tp * p.pp * p.cp));
  }
  p.dp = p.num_gpus / (p.tp * p.pp * p.cp);
  if (std::string problem = tensor_parallel_problem(m, p.tp); !problem.empty()) return make_error(problem);
  // A pipeline stage holds whole blocks, at least one: with more stages than blocks some stage
  // has nothing to run, and the per-stage share below would be a fraction of a block.
  const uint64_t blocks = m.num_layers + (m.is_encoder_decoder ? m.num_encoder_layers : 0);
  if (p.pp > blocks) {
    return make_error(fmt::format("pp {} is more than the model's {} layers (each pipeline stage needs at least "
                                  "one block)", p.pp, blocks));
  }
  if (blocks > 0) p.stage_share = static_cast<double>((blocks + p.pp - 1) / p.pp) / static_cast<double>(blocks);
  // Generation has no gradients to average: without a sharding parallelism, GPUs beyond tp x pp x cp
  // serve independent replicas, which share no communicator (sharded inference, ZeRO-3 or FSDP,
  // gathers every layer's weights over NCCL).
  const uint64_t layout = p.tp * p.pp * p.cp;
  p.communicates = p.num_gpus > 1 && (p.training || layout > 1 || (job.parallelism && *job.parallelism != "ddp"));
  if (!job.parallelism && p.dp > 1 && !offloads_optimizer) {
    assume(p.training  ? std::string("parallelism: ddp (not given)")
           : layout > 1 ? fmt::format("parallelism: {} independent replicas of the {}-GPU tp x pp x cp layout", p.dp, layout)
                        : fmt::format("parallelism: {} independent replicas, each GPU holding the whole model (give tp "
                                      "or pp to split it)", p.dp));
  }
  for (const auto& o : job.offload) {
    if (o == "optimizer") p.offload_optimizer = true;
    if (o == "params") p.offload_params = true;
    if (o == "activations") p.offload_activations = true;
  }
  p.use_lora = p.task == "train_lora" || p.task == "train_qlora";
  if (unsloth && p.training && !job.gradient_checkpointing) {
    p.checkpointing = "full";
    p.offload_activations = true;
    std::replace(assumptions.begin(), assumptions.end(), std::string("gradient_checkpointing: none (not given)"),
                 std::string("gradient_checkpointing: full, block inputs offloaded to the CPU (Unsloth's default \"unsloth\")"));
  }
  // PEFT keeps adapters in fp32 over a 16-bit base (LoraConfig autocast_adapter_dtype=True);
  // LitGPT and torchtune create them in the model's dtype.
  if (job.adapter_dtype) {
    const std::string& d = *job.adapter_dtype;
    p.adapter_bytes = d == "model" ? p.param_bytes : 4;  // "fp32" (PEFT) or the model's dtype
  }
  if (p.task == "train_freeze") {
    p.freeze_layers = std::min(job.freeze_trainable_layers.value_or(kFreezeTrainableLayers), m.num_layers);
    // A 16-bit model whose trainable blocks alone are upcast: LLaMA-Factory's
    // _setup_freeze_tuning casts only the parameters it leaves trainable to fp32
    // (cast_trainable_params_to_fp32, src/llamafactory/model/adapter.py); the frozen blocks keep
    // the load dtype. Their gradients and optimizer state follow the fp32 weights.
    p.trainable_bytes = job.adapter_dtype && *job.adapter_dtype == "fp32" ? 4 : p.param_bytes;
    p.grad_bytes = p.state_bytes = p.trainable_bytes;
  } else if (job.freeze_trainable_layers) {
    assume(fmt::format("freeze_trainable_layers: ignored ({} trains no block subset)", p.task));
  }
  // torch.optim defaults to the foreach implementation on CUDA since PyTorch 2.0
  // (torch/optim/optimizer.py _default_to_fused_or_foreach); before, and in transformers'
  // own AdamW ("adamw_hf"), the update runs parameter by parameter.
  p.optimizer_impl = job.optimizer_impl.value_or("foreach");
  if (!job.optimizer_impl && p.training && p.optimizer == "adamw" && !p.fused_backward) {
    assume("optimizer_impl: foreach (the torch.optim default on CUDA since PyTorch 2.0)");
  }
  // DeepSpeed's engine zeroes through its own optimizer wrappers, which have always set the 16-bit
  // gradients to None ("For speed, set model fp16 grad to None by default":
  // DeepSpeedZeroOptimizer.zero_grad(set_grads_to_None=True), FP16_Optimizer likewise), whatever
  // the PyTorch version.
  p.grads_kept_by_zero_grad = !job.zero_grad_to_none.value_or(true) && p.parallelism.rfind("zero", 0) != 0;
  p.sync_each_batch = job.sync_each_batch.value_or(false);
  p.lazy_module_loading = job.lazy_module_loading.value_or(true);
  p.compile = job.compile.value_or(false);
  p.loss_bytes = job.loss_upcast.value_or(true) ? 4 : p.act_bytes;
  p.litgpt = job.implementation && *job.implementation == "litgpt";
  // PEFT's prepare_model_for_kbit_training (peft/utils/other.py) casts every fp16/bf16 parameter
  // of a bitsandbytes-quantized model to fp32 ("cast all non INT8 parameters to fp32"; GPTQ, AWQ
  // and other formats are skipped). TRL's SFTTrainer runs it for a quantized model and, with
  // bf16, then casts adapters, embeddings and head back to bf16 but leaves norms in fp32
  // (trl/trainer/utils.py peft_module_casting_to_bf16); it skips both for sharded QLoRA (FSDP),
  // as FSDP and DeepSpeed need one dtype. Axolotl, LLaMA-Factory, Unsloth and torchtune keep the
  // model's dtype (Axolotl casts norms and embeddings back "for flash-attn compatibility").
  if (p.training && p.use_lora && p.bnb && !p.litgpt) {
    p.kbit_upcast = job.kbit_upcast.value_or(default_kbit_upcast(unpatched));
    if (!job.kbit_upcast) {
      assume(p.kbit_upcast == "all"
                 ? "kbit_upcast: all (PEFT prepare_model_for_kbit_training casts every non-quantized parameter to fp32)"
             : unsloth
                 ? "kbit_upcast: none (Unsloth keeps the model's dtype)"
                 : "kbit_upcast: none (a sharded quantized model keeps one dtype: TRL skips prepare_model_for_kbit_training)");
    }
    // The preparation also turns gradient checkpointing on (use_gradient_checkpointing=True by
    // default), whether it was assumed or stated.
    if (p.kbit_upcast == "all" && !job.gradient_checkpointing) {
      p.checkpointing = "full";
      std::replace(assumptions.begin(), assumptions.end(), std::string("gradient_checkpointing: none (not given)"),
                   std::string("gradient_checkpointing: full (prepare_model_for_kbit_training's default)"));
    }
    // TRL's casting puts the adapters in bf16 too.
    if (p.kbit_upcast == "norms" && !job.adapter_dtype) p.adapter_bytes = p.param_bytes;
  }
  p.bnb_saves_input = job.bnb_saves_input.value_or(false);
  // Gemma's RMSNorm returns `output.type_as(x)`: fp32 norm weights alone (TRL's casting) leave
  // the hidden states in the embeddings' dtype; Llama-style `weight * x.to(input_dtype)` promotes.
  // Liger's and Unsloth's RMSNorm kernels write their output in the input's dtype too.
  const bool norm_keeps_input_dtype = m.model_type.rfind("gemma", 0) == 0 || p.kernels != "none";
  // A bitsandbytes base loaded in fp32 (autocast over an fp32 model, *_mixed on one GPU) has fp32
  // embeddings and norms whoever prepares it, and Linear4bit returns its input's dtype.
  const bool fp32_loaded_bnb = p.amp && p.use_lora && p.bnb;
  const bool hidden_fp32 = p.kbit_upcast == "all" || (p.kbit_upcast == "norms" && !norm_keeps_input_dtype) ||
                           fp32_loaded_bnb;
  p.hidden_bytes = hidden_fp32 ? 4 : p.act_bytes;
  // The residual stream is fp32 under autocast (fp32 embeddings plus 16-bit Linear outputs) and
  // under PEFT's preparation (fp32 Linear outputs).
  p.residual_bytes = p.amp || hidden_fp32 ? 4 : p.act_bytes;
  if (p.use_lora) {
    if (job.lora) {
      p.lora = *job.lora;
    } else if (unsloth) {
      // Unsloth's FastLanguageModel.get_peft_model: r=16, lora_alpha=16, every projection.
      p.lora.alpha = 16;
      p.lora.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
      assume("lora: r 16, alpha 16, every projection (Unsloth's get_peft_model defaults)");
    } else {
      assume("lora: r 16, alpha 32, the query and value projections (PEFT defaults)");
    }
  }
  if (!job.adapter_dtype && p.use_lora) {
    assume(p.kbit_upcast == "norms" ? "adapter_dtype: the model's (TRL casts adapters to bf16)"
                                    : "adapter_dtype: fp32 (PEFT keeps adapters in fp32)");
  }
  // Unsloth's fused LoRA autograd functions (unsloth/kernels/fast_lora.py) replace PEFT's
  // layers group by group when LoRA has no dropout (unsloth/models/llama.py patch_peft_model):
  // LoRA_QKV when q, k and v are all adapted and have no bias, LoRA_W when o is, LoRA_MLP when
  // gate, up and down all are. They dequantize 4-bit weights themselves (fast_dequantize), so
  // bitsandbytes' matmul keeps nothing there; other groups run PEFT's layers.
  p.router_is_gate = router_is_linear_gate(m);
  if (p.kernels == "unsloth" && p.training && p.use_lora && p.lora.dropout == 0) {
    bool qkv = !m.qkv_bias, o = !m.attn_out_bias, mlp = m.gated_mlp && !m.mlp_bias;
    bool any_o = false, any_mlp = false;
    for (const LinearShape& l : linear_layers(m)) {
      if (l.expert) continue;
      const std::string group = input_group(l);
      const bool adapted = lora_matches(l, p.lora, p.router_is_gate);
      if (group == "attn") qkv = qkv && adapted;
      if (group == "o") { o = o && adapted; any_o = true; }
      if (group == "mlp" || group == "down") { mlp = mlp && adapted; any_mlp = true; }
    }
    p.unsloth_qkv = qkv;
    p.unsloth_o = o && any_o;
    p.unsloth_mlp = mlp && any_mlp;
  }
  if (p.micro_batch == 0 || (p.training && p.seq == 0)) return make_error("micro_batch_size and seq_len must be at least 1");
  return p;
}

// ---- which Linear layers train ----------------------------------------------------------

bool lora_targets(const Plan& p, const LinearShape& l) { return p.use_lora && lora_matches(l, p.lora, p.router_is_gate); }

// ---- activation formulas -------------------------------------------------------------------

// Bytes the activation function saves per element of the MLP hidden width, in activation-dtype
// units, beyond its output (which the down projection saves as its input).
// Sources: torch autograd derivatives (relu saves its result; gelu/silu save their input) and
// transformers/activations.py (NewGELUActivation is a Python composite: pow saves x, tanh saves
// its output, the final mul saves both 0.5*x and 1+tanh).
double activation_saved_units(const std::string& act) {
  if (act == "relu") return 0;  // relu's saved result is the tensor the next Linear saves anyway
  if (act == "gelu_new" || act == "gelu_fast" || act == "gelu_python") return 4;
  return 1;  // silu, gelu, gelu_pytorch_tanh, bloom_gelu (custom autograd saving its input)
}

// Families whose eager attention computes softmax in fp32 and casts back (LlamaAttention,
// OPT, T5, GPT-NeoX, Falcon, GPT-BigCode "attention_softmax_in_fp32"); BERT-style and GPT-2 keep
// the activation dtype.
bool upcasts_softmax(const ModelSpec& m) {
  static const std::set<std::string> kNoUpcast = {"bert", "roberta", "deberta-v2", "vit", "gpt2"};
  return !kNoUpcast.count(m.model_type);
}

struct LayerActivations {
  double per_token = 0;          // bytes saved per token by one block (excluding s^2 terms)
  double attention_scores = 0;   // bytes per token per key position (eager attention only)
  double per_sequence = 0;       // bytes per sequence of the micro-batch, whatever its length
  double per_position_pair = 0;  // bytes per (query, key) position pair, shared by the micro-batch
  double fixed = 0;              // bytes per block independent of the micro-batch
  double backward_working = 0;   // bytes per token the block's backward adds at its widest moment
  // A decoder block's cross-attention over the encoder output (T5): bytes per source token (its
  // k and v), and per (decoder token, source position) pair under eager attention.
  double per_source_token = 0;
  double source_scores = 0;
  // Bytes per source token kept once for the whole decoder stack: the encoder output itself,
  // which every block's trainable cross-attention k and v save (one tensor, shared).
  double shared_source = 0;
};


// Saved-for-backward bytes of one transformer block (Korthikanti et al. 2022, Table 2 style
// accounting, generalised to GQA, gated MLPs, fp32 norms and frozen weights).
LayerActivations block_activations(const ModelSpec& m, const Plan& p, const std::vector<LinearShape>& linears,
                                   bool cross_attention) {
  const double e = p.act_bytes;
  const double h = static_cast<double>(m.hidden_size);
  const double hd = static_cast<double>(m.head_dim);
  const double nh = static_cast<double>(m.num_attention_heads);
  const double nkv = m.attention == AttentionKind::kMultiLatent ? nh : static_cast<double>(m.num_kv_heads);
  const bool frozen_base = p.use_lora || p.task == "train_freeze";
  const double residual = p.residual_bytes;
  // Hidden states between matmuls (norm outputs, Linear outputs, the MLP's elementwise tensors):
  // the activation dtype, or fp32 under PEFT's k-bit preparation.
  const double hid = p.hidden_bytes;
  // What the attention kernel saves: flash-attention inputs are cast to the 16-bit dtype
  // (transformers _flash_attention_forward casts fp32 states back, "silently casted in float32");
  // SDPA and eager attention compute in the dtype they are given unless autocast casts them.
  const double kern = p.attention == "flash" || p.autocast ? e : hid;
  LayerActivations a;

  // Norms: HF RMSNorm upcasts to fp32 (LlamaRMSNorm.forward) and saves the fp32 input and the
  // normalised tensor; LayerNorm saves its input (plus per-row mean/rstd).
  // (per element, plus per-row statistics: rsqrt for RMSNorm, mean and rstd for LayerNorm.)
  // The normalised tensor is saved by `weight * x` for the weight's gradient only: autograd
  // saves an operand of mul only when the other operand needs a gradient (the same rule that
  // makes a frozen Linear keep nothing), so a frozen RMSNorm keeps its fp32 input and rsqrt.
  const double rms_normed_bytes = frozen_base ? 0 : (p.amp ? 4 : e);
  double norm_bytes = m.norm == NormKind::kRmsNorm ? 4 + rms_normed_bytes + 4 / h : residual + 8 / h;
  // Liger's and Unsloth's RMSNorm kernels (LigerRMSNormFunction, Fast_RMS_Layernorm) upcast in
  // registers and save their input as given plus one fp32 rstd per row, trainable weight or not.
  if (p.kernels != "none" && m.norm == NormKind::kRmsNorm) norm_bytes = residual + 4 / h;
  uint64_t norms = std::min<uint64_t>(m.norms_per_layer, 2) + (m.norms_per_layer > 2 ? 2 : 0);
  // A decoder block normalises before its cross-attention too (T5LayerCrossAttention).
  if (cross_attention) ++norms;
  a.per_token += norms * norm_bytes * h;
  // Parallel-residual blocks with two LayerNorms (GPT-NeoX) normalise the same input twice: the
  // input is saved once.
  if (m.parallel_attention && m.norms_per_layer == 2 && m.norm == NormKind::kLayerNorm) a.per_token -= residual * h;
  // Per-head q/k norms (Qwen3, Gemma 3): the same RMSNorm class, so the same kernels.
  if (m.qk_norm) {
    a.per_token += p.kernels != "none" ? e * (nh + nkv) * hd + 4 * (nh + nkv) : (4 + e) * (nh + nkv) * hd;
  }

  // Linear inputs: a trainable Linear saves its input; a frozen one does not (autograd saves
  // `self` of mm only when the weight needs a gradient). LoRA's branch saves lora_A's input:
  // PEFT casts x to lora_A.weight.dtype (fp32 adapters by default), a new tensor per adapted
  // Linear, and under autocast the cast back to 16 bits is again per Linear; adapters in the
  // model's dtype (LitGPT, torchtune) take x as it is, so Linears sharing an input share it.
  std::set<std::string> saved_inputs;
  // The Linears' input: the normalised hidden state (fp32 under amp: fp32 norm weights).
  const double linear_in = p.amp ? 4 : hid;
  // PEFT casts x to lora_A's dtype (`_cast_input_dtype`: a copy unless the dtypes match); under
  // autocast lora_A's F.linear then casts that to 16 bits and keeps the cast. PEFT's bitsandbytes
  // layers (lora/bnb.py) skip their cast under autocast (`requires_conversion = not
  // torch.is_autocast_enabled()`), so there only an input not already 16-bit is copied.
  // (PEFT's GPTQ and other quantized LoRA layers have the same line.)
  const bool peft_casts_under_autocast = !p.quantization || !frozen_base;
  const bool adapter_copy_per_linear =
      p.autocast ? linear_in != e || (peft_casts_under_autocast && p.adapter_bytes != e) : p.adapter_bytes != linear_in;
  const double adapter_copy_bytes = p.autocast ? e : p.adapter_bytes;
  // bitsandbytes' 4-bit matmul (autograd MatMul4Bit) saved its input A for backward whenever the
  // input needed a gradient, although the 4-bit weight is frozen (`ctx.tensors = (A, B)`), until
  // bitsandbytes 0.43.3 (bitsandbytes#1270, July 2024: `ctx.tensors = (None, B)`).
  const bool bnb_4bit_keeps_input = frozen_base && p.bnb_saves_input && p.quantization &&
                                    (*p.quantization == "nf4" || *p.quantization == "fp4");
  // Linear4bit casts its input to the compute dtype (`x.to(self.compute_dtype)`): with fp32
  // hidden states every Linear makes, and such a MatMul4Bit keeps, its own 16-bit copy; the LoRA
  // branch keeps the fp32 input itself.
  const bool cast_per_linear = bnb_4bit_keeps_input && hid != e;
  // LLM.int8 (MatMul8bitLt) keeps A as it was given (`ctx.tensors = (CAt, subA, A)` when the
  // input needs a gradient), so Linears sharing an input share it; before 0.43.3 (the same flag)
  // also its int8 transpose CAt, one byte per element and Linear.
  const bool bnb_int8_base = frozen_base && p.bnb && *p.quantization == "int8";
  std::set<std::string> lora_inputs;
  // LoRA dropout (lora_dropout > 0): nn.Dropout gives each LoRA module a new tensor, the one its
  // lora_A keeps, and native_dropout keeps a 1-byte mask for backward. The dropped tensor is in
  // the adapter's dtype (PEFT casts x to lora_A's dtype first); under autocast lora_A keeps its
  // own 16-bit cast instead. PEFT wraps each adapted Linear; LitGPT has one LoRA module for its
  // fused q/k/v projection (lit_gpt/lora.py LoRAQKVLinear: one lora_dropout for q, k and v).
  const bool lora_dropout = p.lora.dropout > 0;
  const double lora_dropped_bytes = (p.autocast ? e : p.adapter_bytes) + 1;
  std::set<std::string> lora_modules;
  for (const LinearShape& l : linears) {
    if (l.expert) continue;  // experts see only their routed tokens; handled below
    double in = static_cast<double>(l.in_features);
    bool lora = lora_targets(p, l);
    // Linears sharing an input (q/k/v, gate/up) see the same tensor.
    std::string key = input_group(l);
    const bool attention_projection = key == "attn";
    if (m.parallel_attention && m.norms_per_layer == 1 && key == "mlp") key = "attn";  // one normed input feeds both
    // Cross-attention (T5's EncDecAttention): q reads its own normed decoder state, o the cross
    // output; k and v read the encoder output, one tensor for every block, over the source tokens.
    const bool reads_source = l.cross_attention && (l.role == "k" || l.role == "v");
    if (l.cross_attention) key = reads_source ? "cross_kv" : "cross_" + key;
    double& per_unit = reads_source ? a.per_source_token : a.per_token;
    double& shared_unit = reads_source ? a.shared_source : a.per_token;
    // Unsloth's fused LoRA functions: LoRA_QKV and LoRA_MLP save their normalised input X once
    // (`ctx.save_for_backward(..., X, ...)`); LoRA_W (o_proj) saves the attention output, the
    // tensor the attention kernel keeps (counted below); LoRA_MLP recomputes the down
    // projection's input in backward.
    const bool fused = (key == "attn" && p.unsloth_qkv) || (key == "o" && p.unsloth_o) ||
                       ((key == "mlp" || key == "down") && p.unsloth_mlp);
    if (fused) {
      if ((key == "attn" || key == "mlp") && saved_inputs.insert(key).second) a.per_token += hid * in;
      continue;
    }
    if (!frozen_base || bnb_4bit_keeps_input) {
      if (cast_per_linear) {
        per_unit += e * in;
      } else if (saved_inputs.insert(key).second) {
        shared_unit += e * in;
      }
    }
    if (bnb_int8_base) {
      // (o_proj's input is the attention kernel's output, already counted below unless eager.)
      if ((key != "o" || p.attention == "eager") && saved_inputs.insert(key).second) shared_unit += (key == "o" ? kern : hid) * in;
      if (p.bnb_saves_input) per_unit += in;
    }
    if (frozen_base && lora) {
      if (lora_dropout) {
        const std::string module = p.litgpt && attention_projection ? "qkv" : l.name + (l.cross_attention ? "@cross" : "");
        if (lora_modules.insert(module).second) per_unit += lora_dropped_bytes * in;
      } else if (adapter_copy_per_linear) {
        per_unit += adapter_copy_bytes * in;
      } else if ((cast_per_linear ? lora_inputs : saved_inputs).insert(key).second) {
        shared_unit += hid * in;
      }
    }
  }

  // Attention core: q, k, v kept for the attention backward (all kernels); eager attention also
  // keeps the s x s probabilities (fp32 + cast copy where the family upcasts), dropout masks.
  // Llama-family eager and SDPA paths expand grouped k/v to every query head before the kernel
  // (transformers repeat_kv: expand + reshape copies), so those copies are what is saved;
  // flash-attention kernels take the grouped k/v as they are.
  static const std::set<std::string> kRepeatKv = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3",
                                                  "qwen3_moe", "gemma", "gemma2", "gemma3_text", "phi3", "stablelm"};
  // LitGPT expands grouped k/v to every head before SDPA in training (lit_gpt/model.py
  // CausalSelfAttention: "training: flash attention requires it"; expand + reshape copies).
  const double kv_heads_saved = p.litgpt || (p.attention != "flash" && kRepeatKv.count(m.model_type)) ? nh : nkv;
  double qkv_saved_heads = nh + 2 * kv_heads_saved;
  // A fused q/k/v projection whose v reaches the kernel as a view: rotary embeddings make q and
  // k new tensors (rotate + torch.cat), but the saved v still references the whole fused output,
  // so it stays alive: new q and k plus the fused tensor. transformers GPT-NeoX
  // (modeling_gpt_neox.py: `value = qkv[..., 2 * head_size:].permute(0, 2, 1, 3)`) and LitGPT
  // without grouped heads (`q, k, v = qkv.split(...)`, v only reshaped). SDPA and flash kernels
  // save v as given; eager attention's torch.matmul folds (batch, heads) with a reshape that
  // copies the strided v unless the micro-batch is 1, and saves the copy instead.
  const bool value_view_of_fused_qkv =
      m.attention != AttentionKind::kMultiLatent && !cross_attention && m.position_embeddings == 0 &&
      ((m.model_type == "gpt_neox" && !p.litgpt) || (p.litgpt && nkv == nh)) &&
      (p.attention != "eager" || p.micro_batch == 1);
  if (value_view_of_fused_qkv) qkv_saved_heads = (nh + nkv) + (nh + 2 * nkv);
  a.per_token += kern * qkv_saved_heads * hd;
  if (cross_attention) {
    // The cross-attention's q over the decoder tokens; its k and v, new tensors in every block,
    // over the source tokens.
    a.per_token += kern * nh * hd;
    a.per_source_token += kern * 2 * kv_heads_saved * hd;
  }
  if (m.attention == AttentionKind::kMultiLatent) {
    a.per_token += hid * (m.kv_lora_rank + m.qk_rope_head_dim + m.q_lora_rank);
  }
  if (p.attention == "eager") {
    double probs = (upcasts_softmax(m) || p.autocast) && kern < 4 ? 4 + kern : kern;
    if (m.attention_dropout > 0) probs += 1 + kern;
    // Soft-capped scores (Gemma 2's eager_attention_forward: scores / cap, tanh, * cap): tanh
    // keeps its output for backward, one more score matrix in the compute dtype.
    if (m.attn_logit_softcapping > 0) probs += kern;
    a.attention_scores = nh * probs;
    if (cross_attention) a.source_scores = nh * probs;
  } else {
    a.per_token += 4 * nh * (cross_attention ? 2 : 1);  // fp32 logsumexp per head
  }
  // DeBERTa-v2 disentangled attention (transformers modeling_deberta_v2.py,
  // DisentangledSelfAttention.forward and disentangled_attention_bias), per block, with
  // k = att_span: the relative embeddings' 2k rows go through pos_dropout (StableDropout:
  // XDropout saves a 1-byte mask) and query_proj/key_proj (share_att_key), whose trainable
  // weights keep that input; each projection is repeated for every sequence
  // (`.repeat(batch, 1, 1)`: 2k x h per sequence) and kept by its bmm against the content
  // query (c2p) or key (p2c); the bmm's (batch x heads, s, 2k) output is kept by torch.gather,
  // whose backward takes `self` (derivatives.yaml `gather_backward(grad, self, dim, index, ...)`),
  // with its index: an expanded view of one s x s int64 tensor (c2p_pos / p2c_pos) per term.
  // XSoftmax saves its output only, XDropout its mask: the eager probabilities rule above.
  // Checked against tools/deberta_replay.py (the layer replayed under saved_tensors_hooks).
  if (m.relative_attention_span > 0) {
    const double span2 = 2.0 * static_cast<double>(m.relative_attention_span);
    const double terms = (m.content_to_position ? 1 : 0) + (m.position_to_content ? 1 : 0);
    a.per_token += terms * e * nh * span2;
    a.per_sequence += terms * e * span2 * h;
    a.per_position_pair += terms * 8;
    if (terms > 0) {
      if (m.hidden_dropout > 0) a.fixed += span2 * h;
      if (!frozen_base) {
        a.fixed += e * span2 * h;  // one input shared by query_proj and key_proj
      } else {
        for (const LinearShape& l : linears) {
          const bool used = (l.role == "q" && m.position_to_content) || (l.role == "k" && m.content_to_position);
          if (used && lora_targets(p, l)) a.fixed += (lora_dropout ? lora_dropped_bytes : adapter_copy_bytes) * span2 * h;
        }
      }
    }
  }
  // Attention output feeds o_proj (saved above when trainable); with frozen o_proj the
  // attention kernel still keeps its output for its own backward.
  if (frozen_base && p.attention != "eager") {
    a.per_token += kern * nh * (m.attention == AttentionKind::kMultiLatent ? m.v_head_dim : hd) * (cross_attention ? 2 : 1);
  }

  // MLP elementwise tensors: gated = act(gate) * up keeps gate out, up out, act out;
  // plain keeps what the activation saves. Down/fc2 input counted with the Linears.
  const double inter = static_cast<double>(m.num_experts && m.first_dense_layers == 0 ? 0 : m.intermediate_size);
  // LitGPT's MLPs call torch's GELU as one op (lit_gpt/model.py GptNeoxMLP:
  // torch.nn.functional.gelu(x, approximate=config.gelu_approximate)), which saves its input only,
  // where transformers' gelu_new is a Python composite.
  double act_units = p.litgpt && m.hidden_act != "relu" ? 1 : activation_saved_units(m.hidden_act);
  // Liger's SwiGLU/GeGLU (LigerSiLUMulFunction, LigerGELUMulFunction) and Unsloth's LoRA_MLP save
  // the gate and up outputs only and recompute the activation in backward (without LoRA_MLP,
  // Unsloth's layers call the model's own MLP).
  if (m.gated_mlp && (p.kernels == "liger" || p.unsloth_mlp)) act_units = 0;
  if (m.gated_mlp) {
    a.per_token += hid * inter * (act_units + 2);
  } else {
    a.per_token += hid * inter * act_units;
    if (frozen_base && m.hidden_act == "relu") a.per_token += hid * inter;  // relu keeps its result
  }
  if (m.num_experts) {
    // Each token runs experts_per_token experts of moe_intermediate_size (+ shared experts).
    double moe = static_cast<double>(m.moe_intermediate_size);
    double k = static_cast<double>(m.experts_per_token);
    double shared = static_cast<double>(m.shared_expert_intermediate_size ? m.shared_expert_intermediate_size
                                                                          : m.num_shared_experts * m.moe_intermediate_size);
    a.per_token += hid * k * (h + moe * (act_units + 3)) + hid * (h + shared * (act_units + 3)) + 4 * m.num_experts;
    // MLP width a token runs through: the routed experts', or the shared one's, whose backward
    // runs after theirs.
    if (inter == 0) a.backward_working = hid * std::max(k * moe, shared);
  }
  // The block's backward adds gradients to what it saved. Its widest moment is the MLP's, first in
  // the block's backward, with all the block's saved tensors still live: the gradient of the down
  // projection's input and, for a gated MLP, the two operand gradients of act(gate) x up, which
  // one autograd node makes while it holds its input gradient (3 MLP-width tensors; 2 for a
  // one-op act(fc1), 3 when the activation is a Python composite such as transformers'
  // gelu_new, whose final multiply does the same). Liger's SwiGLU backward writes its operand
  // gradients over the saved gate and up, and Unsloth's LoRA_MLP into one reused buffer (1).
  // Measured on an H200 (calibration_cuda.json): Llama-3-8B's and Qwen2's gated blocks with LoRA
  // and checkpointing, GPT-2's gelu_new with full fine-tuning and checkpointing; the one-op,
  // fused and MoE widths follow from their code, unmeasured.
  const double mlp_width = inter > 0 ? inter : a.backward_working / std::max(hid, 1.0);
  const bool composite_activation = !p.litgpt && activation_saved_units(m.hidden_act) > 1;
  const double grad_units = (m.gated_mlp && p.kernels == "liger") || p.unsloth_mlp ? 1
                            : m.gated_mlp || composite_activation              ? 3
                                                                               : 2;
  a.backward_working = hid * mlp_width * grad_units;

  // Dropout masks (1 byte per element) after attention and MLP when the config trains with them,
  // and after the cross-attention; T5's feed-forward also drops out its activation (the output
  // projection then keeps the dropped tensor, counted with the Linears).
  if (m.hidden_dropout > 0) a.per_token += (cross_attention ? 3 : 2) * h;
  if (m.mlp_dropout > 0) a.per_token += inter;
  return a;
}

// ---- the estimate ----------------------------------------------------------------------------

struct Builder {
  std::vector<MemoryComponent> components;
  void add(const std::string& name, double bytes, const std::string& detail) {
    if (bytes <= 0) return;
    // Beyond 64 bits (a million sequences of 16M tokens): saturated, never wrapped (core/saturating.h).
    components.push_back({name, saturated_bytes(bytes), detail});
  }
};

double weight_bytes_per_param(const std::string& q, bool double_quant, uint64_t group_size) {
  if (q == "nf4" || q == "fp4") return double_quant ? kNf4DoubleQuantBytesPerWeight : kNf4BytesPerWeight;
  // GPTQ/AWQ: packed 4-bit weights + per group fp16 scale and packed 4-bit zero point
  // (auto-gptq / autoawq QuantLinear layouts).
  // (gptqN: N bits, 4 or 8 in a job, also 2 or 3 from a pre-quantized checkpoint's config.)
  if (q == "awq4") return grouped_int_bytes_per_weight(4, group_size);
  if (q.starts_with("gptq")) {
    if (auto bits = parse_decimal<uint64_t>(std::string_view(q).substr(4))) return grouped_int_bytes_per_weight(*bits, group_size);
  }
  if (q == "nvfp4") return kNvfp4BytesPerWeight;
  // torchao int4 weight-only: packed 4-bit + bf16 scale and zero per group (tinygemm layout).
  if (q == "int4") return group_size == kPerChannelGroup ? 0.5 : 0.5 + 4.0 / group_size;
  // LLM.int8 / int8 weight-only: 1 byte + one fp32 scale per output row (negligible).
  if (q == "int8") return 1.0;
  if (q == "fp8") return 1.0;
  if (q == "mxfp4") return kMxfp4BytesPerWeight;
  return 2.0;
}

}  // namespace


std::string default_training_precision(const Job& job) {
  const std::string task = job.task.value_or("train_full");
  return task == "train_qlora" || task == "train_lora" ? "bf16" : "bf16_mixed";
}

namespace {

// The largest component the job itself holds (the allocator's reclaimable cache is not one).
std::string dominant_component(const std::vector<MemoryComponent>& components) {
  std::string name;
  uint64_t best = 0;
  for (const auto& c : components) {
    if (c.name != "allocator_cache" && c.bytes > best) {
      best = c.bytes;
      name = c.name;
    }
  }
  return name;
}

}  // namespace

Estimate oom_view(Estimate e) {
  if (e.reclaimable_bytes == 0) return e;
  // A saturated total (beyond 64 bits) stays saturated: less the cache, it is still beyond any GPU.
  e.peak_reserved_bytes = saturating_sub(e.peak_reserved_bytes, e.reclaimable_bytes);
  e.device_used_bytes = saturating_sub(e.device_used_bytes, e.reclaimable_bytes);
  e.components.erase(std::remove_if(e.components.begin(), e.components.end(),
                                    [](const MemoryComponent& c) { return c.name == "allocator_cache"; }),
                     e.components.end());
  e.reclaimable_bytes = 0;
  e.dominant_component = dominant_component(e.components);
  return e;
}

namespace {

// Said once for both allocators: a saturated total is no number to compare with a card.
void warn_if_saturated(Estimate& est) {
  if (!is_saturated(est.device_used_bytes)) return;
  std::string parts;
  for (const auto& c : est.components) {
    // (The allocator's slack is 5% of the rest: saturated because they are, not a cause.)
    if (is_saturated(c.bytes) && c.name != "allocator_slack") parts += (parts.empty() ? "" : ", ") + c.name;
  }
  est.warnings.push_back(fmt::format("the prediction is beyond 64-bit byte counts (over 16 EiB{}): no GPU holds this "
                                     "job; its sizes (micro_batch_size x seq_len, batch_size x prompt_len) are far "
                                     "beyond any real run", parts.empty() ? "" : "; " + parts));
}

}  // namespace

uint64_t cuda_context_bytes(bool lazy_module_loading) {
  return lazy_module_loading ? kCudaContextBytes : kCudaContextEagerLoadingBytes;
}

Result<Estimate> estimate_memory(const ModelSpec& m, const Job& job) {
  // llama.cpp allocates its own buffers (no PyTorch allocator): its own model. A GGUF file is
  // llama.cpp's format, so it runs there unless the job says otherwise.
  if (m.gguf && job.implementation && *job.implementation != "llama_cpp") {
    return make_error(fmt::format("{}: a GGUF file runs in llama.cpp (implementation llama_cpp), not {}", m.source,
                                  *job.implementation));
  }
  if (m.gguf || (job.implementation && *job.implementation == "llama_cpp")) {
    auto est = estimate_llama_cpp(m, job);
    if (est) warn_if_saturated(*est);
    return est;
  }
  Estimate est;
  auto planned = make_plan(m, job, est.assumptions);
  if (!planned) return planned.error();
  const Plan& p = *planned;
  // A reward model is the causal LM with a one-output score head (TRL's RewardTrainer loads
  // AutoModelForSequenceClassification with num_labels=1): no LM head, no vocabulary logits.
  if (p.training && job.objective == "reward" && !m.is_encoder_only && m.score_labels == 0) {
    auto scored = estimate_memory(with_score_head(m, 1), job);
    if (scored) {
      std::erase_if(scored->assumptions,
                    [](const std::string& a) { return a.rfind("sequence classification checkpoint:", 0) == 0; });
      scored->assumptions.push_back("objective reward: sequence classification with one output (TRL RewardTrainer): "
                                    "a score head of hidden x 1 replaces the LM head, no vocabulary logits");
    }
    return scored;
  }
  if (m.score_labels && !m.is_encoder_only) {
    est.assumptions.push_back(fmt::format("sequence classification checkpoint: a score head of hidden x {} replaces "
                                          "the LM head, no vocabulary logits", m.score_labels));
  }
  if (!p.training && job.objective) {
    est.warnings.push_back(fmt::format("objective {}: a training objective; ignored for {}", *job.objective, p.task));
  }
  if (p.task != "train_lora" && p.task != "train_qlora" && job.lora && !job.lora->modules_to_save.empty()) {
    est.warnings.push_back(fmt::format("lora.modules_to_save: applies to LoRA; ignored for {}{}", p.task,
                                       p.task == "train_full" ? " (every module trains already)" : ""));
  }
  est.kbit_upcast = p.kbit_upcast;
  est.precision = p.precision;
  // Inputs that are legal but likely a mistake: said, not refused.
  // Learned absolute position embeddings (the config reader counts their rows) have no row past
  // the last position: an index error, not just an untrained length.
  if (m.position_embeddings && p.seq > m.position_embeddings) {
    est.warnings.push_back(fmt::format("{} tokens per sequence is above the model's {} learned positions: its "
                                       "position embedding has no row past them, so the forward pass fails "
                                       "(an index error), whatever the memory", p.seq, m.position_embeddings));
    est.will_not_run.push_back(fmt::format("{} tokens per sequence is above the model's {} learned positions (an "
                                           "index error)", p.seq, m.position_embeddings));
  } else if (const uint64_t context = vllm_derived_max_model_len(m, std::nullopt); context && p.seq > context) {
    // The context with rope scaling applied, as vLLM derives it (one place for that rule).
    const std::string how = m.rope_scaling_type.empty()
                                ? std::string("max_position_embeddings")
                                : fmt::format("max_position_embeddings {} with {} rope scaling {:g}",
                                              m.max_position_embeddings, m.rope_scaling_type, m.rope_scaling_factor);
    est.warnings.push_back(fmt::format("{} tokens per sequence is above the model's context of {} ({}): "
                                       "it was not trained for that length", p.seq, context, how));
  }
  // The model reader's warnings (a checkpoint missing tensors, a path sized as a preset).
  est.warnings.insert(est.warnings.end(), m.warnings.begin(), m.warnings.end());
  if (p.training && job.kv_cache_impl) {
    est.warnings.push_back("kv_cache_impl applies to generation: a training job keeps no KV cache, it is ignored");
  }
  if (p.training && job.kv_cache_dtype) {
    est.warnings.push_back("kv_cache_dtype applies to generation: a training job keeps no KV cache, it is ignored");
  }
  // The reference model's settings mean something only for an objective that scores one (DPO, IPO,
  // KTO); elsewhere they are said to be ignored, not silently dropped.
  const bool has_reference = p.training && job.objective && objective_has_reference(*job.objective);
  if (!has_reference && (job.precompute_ref_log_probs.value_or(false) || job.reference_dtype)) {
    est.warnings.push_back(fmt::format(
        "{} applies to a reference model (training with objectives dpo, ipo, kto); {} has none, it is ignored",
        job.precompute_ref_log_probs.value_or(false) ? "precompute_ref_log_probs" : "reference_dtype",
        !p.training ? std::string("inference") : job.objective ? "objective " + *job.objective : std::string("supervised training")));
  }
  for (const auto& note : m.notes) est.assumptions.push_back("model: " + note);

  const std::vector<LinearShape> linears = linear_layers(m);
  const ParamCount counts = count_parameters(m);
  // When total_params was given (--params or safetensors), scale the structural split to it.
  double total = static_cast<double>(m.total_params ? m.total_params : counts.total);
  const double scale = counts.total ? total / static_cast<double>(counts.total) : 1;
  const double linear_params = static_cast<double>(counts.linear) * scale;
  // LitGPT's GPT always creates lm_head and wte as two parameters (lit_gpt/model.py and
  // litgpt/model.py GPT.__init__: nn.Linear + nn.Embedding, no weight tying), so a model whose
  // config ties them holds the vocabulary matrix twice (the head kept in 16 bits like the
  // embeddings, as for the transformers implementation).
  const double untied_head = p.litgpt && m.tie_word_embeddings && !m.is_encoder_only
                                 ? static_cast<double>(m.vocab_size) * static_cast<double>(m.hidden_size)
                                 : 0;
  total += untied_head;
  // Weights split by tensor and pipeline parallel. The most loaded pipeline stage holds
  // ceil(L/pp) blocks and also the embedding (or output head; both when tied): Megatron-LM's
  // theoretical_memory_usage.py counts "transformer layers / pp + embedding" on the first stage.
  double stage_split = static_cast<double>(p.pp);
  if (p.pp > 1) {
    const double outer = static_cast<double>(std::max(m.embedding_params, m.lm_head_params)) * scale;
    const double blocks = std::max(0.0, total - static_cast<double>(m.embedding_params + m.lm_head_params) * scale);
    if (total > 0 && blocks * p.stage_share + outer > 0) stage_split = total / (blocks * p.stage_share + outer);
  }
  const double shard_mp = static_cast<double>(p.tp) * stage_split;

  // FSDP's SHARD_GRAD_OP shards parameters at rest as FULL_SHARD does, but keeps them unsharded
  // from the forward's all-gather to the end of backward (torch.distributed.fsdp.ShardingStrategy:
  // "parameters are sharded outside computation", no reshard after forward): every block's copy in
  // the compute dtype is live through forward and backward, none at the optimizer step.
  // The model states are sharded over the context-parallel ranks too, which hold the same weights
  // (torchtitan's FSDP mesh is dp_shard x cp, "dp_shard_cp"; Megatron's distributed optimizer uses
  // the data-parallel group with context parallelism; DeepSpeed-Ulysses partitions ZeRO over the
  // sequence-data-parallel group).
  const uint64_t shard_ranks = p.dp * p.cp;
  const bool unsharded_through_backward = shard_ranks > 1 && p.parallelism == "fsdp_shard_grad_op";
  const bool shard_params = shard_ranks > 1 && (p.parallelism == "zero3" || p.parallelism == "fsdp_full_shard" ||
                                                p.parallelism == "hybrid_shard" || unsharded_through_backward);
  const bool shard_grads =
      shard_ranks > 1 && (shard_params || p.parallelism == "zero2" || p.parallelism == "fsdp_shard_grad_op");
  const bool shard_states = shard_ranks > 1 && (shard_grads || p.parallelism == "zero1");
  // hybrid_shard shards within a node of 8 GPUs and replicates across nodes (FSDP HYBRID_SHARD).
  const double shard_group =
      p.parallelism == "hybrid_shard" ? std::min<double>(static_cast<double>(shard_ranks), 8) : static_cast<double>(shard_ranks);
  const double param_shards = shard_params ? shard_group : 1;
  const double grad_shards = shard_grads ? shard_group : 1;
  const double state_shards = shard_states ? shard_group : 1;
  const bool deepspeed = p.parallelism.rfind("zero", 0) == 0;

  Builder b;
  // ---- weights ----
  double weights = 0;
  std::string weights_detail;
  if (p.quantization) {
    double per = weight_bytes_per_param(*p.quantization, p.double_quant, p.group_size);
    // Embeddings, norms and the head stay unquantized: in the model's dtype, or fp32 after PEFT's
    // preparation (TRL's casting takes embeddings and head back to 16 bits, norms stay fp32).
    // (*_mixed loads the model in fp32: its unquantized parameters are fp32 whoever prepares it.)
    // (DeepSpeed and FSDP compute on 16-bit copies: there the unquantized parameters are 16-bit.)
    // MXFP4 quantizes only the experts' weight matrices; their biases and every other Linear stay
    // 16-bit. The other formats replace nn.Linear modules only: weights held as plain parameters
    // (gpt-oss's experts) stay 16-bit under bitsandbytes, GPTQ or AWQ.
    const bool experts_only = quantizes_only_experts(*p.quantization);
    double nn_linear_params = 0;
    for (const LinearShape& l : linears) {
      if (l.nn_linear) nn_linear_params += static_cast<double>(l.params());
    }
    // A pre-quantized checkpoint's modules_to_not_convert stay in 16 bits (model/architecture.h).
    const double kept = experts_only ? 0 : static_cast<double>(unquantized_linear_params(m, 0, m.num_layers)) * scale;
    const double quantized_params = experts_only ? static_cast<double>(expert_weight_params(m)) * scale
                                                 : std::max(0.0, std::min(linear_params, nn_linear_params * scale) - kept);
    const double unquantized = total - quantized_params;
    const bool fp32_model = p.precision == "fp32" || p.amp;
    double rest_bytes = fp32_model || p.kbit_upcast == "all" ? 4 : 2;
    double rest = unquantized * rest_bytes;
    if (p.kbit_upcast == "norms" && !fp32_model) {
      const double outer = static_cast<double>(m.embedding_params + m.lm_head_params) * scale;
      rest = std::min(outer, unquantized) * 2 + std::max(0.0, unquantized - outer) * 4;
    }
    weights = quantized_params * per + rest;
    weights_detail = fmt::format("{} {}weights x {:.4f} B ({}{}) + {} other x {}", format_count(quantized_params),
                                 experts_only ? "expert " : "linear ", per, *p.quantization,
                                 p.double_quant ? ", double quant" : "", format_count(unquantized),
                                 p.kbit_upcast == "norms" ? std::string("2 B (norms fp32)") : fmt::format("{} B", rest_bytes));
    if (m.checkpoint_bytes && !m.quantization.empty()) {
      // The file's bytes as stored, and then what PEFT's preparation (or an fp32 model) does to
      // its 16-bit unquantized parameters: cast to fp32, 2 B more each (the same count as above).
      uint64_t stored_16_bit = 0;
      for (const auto& [dtype, count] : m.params_by_dtype) {
        if (dtype == "BF16" || dtype == "F16") stored_16_bit += count;
      }
      const double upcast = std::min(static_cast<double>(stored_16_bit), std::max(0.0, rest - unquantized * 2) / 2);
      weights = static_cast<double>(m.checkpoint_bytes) + upcast * 2;
      weights_detail = upcast > 0 ? fmt::format("tensor bytes of the pre-quantized safetensors checkpoint + {} 16-bit "
                                                "params cast to fp32 x 2 B", format_count(upcast))
                                  : std::string("tensor bytes of the pre-quantized safetensors checkpoint");
    }
  } else {
    weights = total * p.param_bytes;
    weights_detail = fmt::format("{} params x {} B", format_count(total), p.param_bytes);
    if (p.task == "train_freeze" && p.trainable_bytes != p.param_bytes) {
      const double upcast = linear_params * p.freeze_layers / std::max<uint64_t>(m.num_layers, 1);
      weights = (total - upcast) * p.param_bytes + upcast * p.trainable_bytes;
      weights_detail = fmt::format("{} frozen params x {} B + {} trainable (last {} blocks) x {} B", format_count(total - upcast),
                                   p.param_bytes, format_count(upcast), p.freeze_layers, p.trainable_bytes);
    }
    // The file's own bytes when it is stored in 16 bits, as loaded: an fp32 file is cast to the
    // job's dtype on load (torch_dtype), so its bytes on disk say nothing about the GPU.
    uint64_t stored_elements = 0;
    for (const auto& [dtype, count] : m.params_by_dtype) stored_elements += count;
    // (An 8-bit or smaller tensor without a quantization_config is cast up to torch_dtype as
    // well: its bytes on disk are fewer than on the GPU.)
    const bool stored_16_bit = stored_elements && m.checkpoint_bytes >= stored_elements * 2 &&
                               m.checkpoint_bytes <= stored_elements * 2 + stored_elements / 100;
    if (m.checkpoint_bytes && m.quantization.empty() && p.param_bytes == 2 && p.inference && stored_16_bit) {
      weights = static_cast<double>(m.checkpoint_bytes);
      weights_detail = "tensor bytes of the safetensors checkpoint";
    }
  }
  if (p.training && p.mixed && deepspeed && !p.quantization) {
    // DeepSpeed keeps 16-bit params for compute and fp32 master + fp32 gradient partitions
    // (stage_1_and_2.py estimate_zero2_model_states_mem_needs: 2 + 18/N bytes per param).
    weights = total * 2;
    weights_detail = fmt::format("{} params x 2 B (16-bit copy)", format_count(total));
  }
  weights /= shard_mp;
  // The share of the most loaded rank: 1/tp, and with pipeline stages 1/stage_split of that (the
  // stage with the embedding holds more than 1/pp): a ratio, said as one with two decimals.
  const std::string model_split =
      p.pp > 1 ? fmt::format(", 1/{:.2f} on the most loaded GPU (tp {} x pp {}: that stage's blocks and the "
                             "embedding)", shard_mp, p.tp, p.pp)
      : p.tp > 1 ? fmt::format(", split over {} tensor-parallel ranks", p.tp)
                 : "";
  weights_detail += model_split;
  if (p.offload_params) {
    // Not on the GPU, but in host RAM: said, so the move is not mistaken for memory saved.
    est.assumptions.push_back(fmt::format("offload params: the weights ({} per GPU) live in host memory and are "
                                          "gathered onto the GPU a block at a time",
                                          format_bytes(saturated_bytes(weights / (shard_params ? param_shards : 1)))));
    weights = 0;
    weights_detail = "offloaded to CPU";
  } else if (shard_params) {
    weights /= param_shards;
    weights_detail += fmt::format(", sharded over {}", param_shards);
  }
  // SHARD_GRAD_OP's unsharded copy: in the compute dtype under mixed precision (FSDP
  // MixedPrecision param_dtype), as stored otherwise (a quantized base keeps its storage).
  const double unsharded_copy =
      unsharded_through_backward && !p.offload_params
          ? (p.quantization ? weights * param_shards : total * (p.mixed ? p.act_bytes : p.param_bytes) / shard_mp)
          : 0;
  b.add("weights", weights, weights_detail);
  // DPO/IPO/KTO score a frozen reference: for full and freeze tuning a second copy of the model,
  // loaded as the policy is and prepared (sharded) the same way; with LoRA the base with the
  // adapters disabled (TRL's null_ref_context), no copy.
  if (p.training && job.objective && objective_has_reference(*job.objective)) {
    if (job.precompute_ref_log_probs.value_or(false)) {
      est.assumptions.push_back(fmt::format("objective {}: reference log-probabilities precomputed before training "
                                            "(no reference model kept)", *job.objective));
    } else if (p.task == "train_full" || p.task == "train_freeze") {
      const std::string dtype = job.reference_dtype.value_or("model");
      if (dtype == "model" || p.quantization || p.offload_params) {
        b.add("reference_model", weights, fmt::format("frozen reference for {}: {}", *job.objective, weights_detail));
      } else {
        // Loaded on its own in the given dtype (LLaMA-Factory: is_trainable=False casts to the
        // compute dtype), split and sharded as the policy is.
        const double bytes = dtype == "fp32" ? 4 : 2;
        const double shards = shard_mp * (shard_params ? param_shards : 1);
        b.add("reference_model", total * bytes / shards,
              fmt::format("frozen reference for {}: {} params x {} B ({}){}{}", *job.objective, format_count(total), bytes,
                          dtype, model_split, shard_params ? fmt::format(", sharded over {}", param_shards) : ""));
      }
    } else {
      est.assumptions.push_back(fmt::format("objective {}: the reference is the base with the adapters disabled (no "
                                            "second copy)", *job.objective));
    }
  }

  Builder transient;  // live at the peak of forward/backward only
  double trainable = 0, trainable_linear = 0;
  if (p.training) {
    if (p.task == "train_full") {
      trainable = total;
      trainable_linear = linear_params;
    } else if (p.task == "train_freeze") {
      trainable_linear = linear_params * p.freeze_layers / std::max<uint64_t>(m.num_layers, 1);
      trainable = trainable_linear;
      est.assumptions.push_back(fmt::format("train_freeze: the last {} blocks train{}", p.freeze_layers,
                                            job.freeze_trainable_layers ? "" : " (freeze_trainable_layers not given: LLaMA-Factory's default)"));
    } else {
      trainable = static_cast<double>(lora_parameter_count(m, p.lora));
      if (trainable == 0) {
        return make_error(fmt::format("lora.target_modules matches no Linear layer of {} (its layers: {})",
                                      m.id.empty() ? m.source : m.id, [&] {
                                        std::set<std::string> names;
                                        for (const auto& l : linears) names.insert(l.name);
                                        std::string s;
                                        for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
                                        return s;
                                      }()));
      }
      trainable_linear = trainable;
      // A name that matches no layer (a typo: v_porj) adapts less than asked: said, since the
      // others still match. PEFT would refuse only when nothing matches.
      for (const std::string& target : p.lora.target_modules) {
        LoraSettings one = p.lora;
        one.target_modules = {target};
        one.all_linear = false;
        if (lora_parameter_count(m, one) == 0) {
          // An input that looks wrong: a warning (stderr, JSON warnings), not a default chosen.
          est.warnings.push_back(fmt::format("lora.target_modules: '{}' matches no Linear layer of {}: left out "
                                             "(is it misspelled?)", printable(target, 80), m.id.empty() ? m.source : m.id));
        }
      }
    }
  }
  // LoRA adapters live in fp32 (PEFT autocast_adapter_dtype=True) next to the frozen base, or in
  // the model's dtype (LitGPT, torchtune).
  // ZeRO-3 / FSDP full sharding shard them with the rest of the parameters.
  if (p.use_lora) {
    b.add("adapter_weights", trainable * p.adapter_bytes / shard_mp / param_shards,
          fmt::format("{} LoRA params x {} B{}", format_count(trainable), p.adapter_bytes,
                      shard_params ? fmt::format(", sharded over {}", param_shards) : ""));
  }
  // modules_to_save: PEFT's ModulesToSaveWrapper keeps the original module and trains a deep copy
  // of it, in the module's own dtype (fp32 after k-bit preparation), with its gradient and
  // optimizer state like a full fine-tuning of those parameters.
  double saved_modules = 0;
  const double saved_module_bytes = p.kbit_upcast == "all" ? 4 : p.param_bytes;
  if (p.training && p.use_lora) {
    std::vector<std::string> sized, unsized;
    for (const std::string& name : p.lora.modules_to_save) {
      const std::string n = to_lower(name);
      const bool embedding = n == "embed_tokens" || n == "wte" || n == "word_embeddings" || n == "embed_in" ||
                             n == "tok_embeddings" || n == "shared" || n == "embeddings";
      const bool head = n == "lm_head" || n == "embed_out" || n == "output";
      if (embedding) saved_modules += static_cast<double>(m.embedding_params);
      else if (head) saved_modules += static_cast<double>(m.lm_head_params ? m.lm_head_params : m.embedding_params);
      (embedding || head ? sized : unsized).push_back(name);
    }
    if (!unsized.empty()) {
      est.assumptions.push_back(fmt::format("modules_to_save {}: not sized (oomdoc sizes the embeddings and the output head; a "
                         "classification head is small)", fmt::join(unsized, ", ")));
    }
    if (saved_modules > 0) {
      b.add("modules_to_save", saved_modules * saved_module_bytes / shard_mp / param_shards,
            fmt::format("trainable copies of {}: {} params x {} B (PEFT modules_to_save){}", fmt::join(sized, ", "),
                        format_count(saved_modules), saved_module_bytes,
                        shard_params ? fmt::format(", sharded over {}", param_shards) : ""));
    }
  }

  // ---- master weights (16-bit params with an fp32 copy: DeepSpeed / FSDP mixed precision) ----
  if (p.training && p.mixed && deepspeed && !p.offload_optimizer) {
    b.add("master_weights", trainable * 4 / shard_mp / state_shards, "fp32 master copy (ZeRO)");
  }

  // The largest trained tensor (elements): an embedding, the head or a Linear's weight in full
  // fine-tuning, a LoRA factor otherwise.
  auto largest_trained_param = [&]() {
    double largest = p.task == "train_full" ? static_cast<double>(std::max(m.embedding_params, m.lm_head_params)) : 0;
    for (const auto& l : linears) {
      if (p.task == "train_full") largest = std::max(largest, static_cast<double>(l.in_features * l.out_features));
      else if (p.use_lora && lora_targets(p, l)) largest = std::max(largest, static_cast<double>(p.lora.r * std::max(l.in_features, l.out_features)));
    }
    return std::min(trainable, largest);
  };
  // ZeRO-3 steps its fp32 partition one sub-group at a time: sub_group_size elements (DeepSpeed's
  // _create_fp16_sub_groups gathers whole parameters up to it), or with 0 each parameter alone, the
  // largest then being the biggest parameter's partition on this rank.
  double zero3_sub_group = kZero3SubGroupParams;
  if (job.zero3_sub_group_size) {
    zero3_sub_group = *job.zero3_sub_group_size > 0 ? static_cast<double>(*job.zero3_sub_group_size)
                                                    : largest_trained_param() / shard_mp / state_shards;
  }
  const std::string zero3_sub_group_text =
      !job.zero3_sub_group_size ? std::string("one 1e9-element sub-group")
      : *job.zero3_sub_group_size == 0 ? "the largest parameter's partition (sub_group_size 0: one parameter at a time)"
                                       : fmt::format("one {}-element sub-group", *job.zero3_sub_group_size);

  // ---- gradients ----
  const bool fsdp_cpu_offload = p.training && p.offload_params && is_fsdp(p.parallelism);
  const double grad_dtype_bytes = p.use_lora ? p.adapter_bytes : p.grad_bytes;
  double grad_bytes = trainable * grad_dtype_bytes / shard_mp;
  const std::string grad_split =
      (grad_shards > 1 ? fmt::format(", sharded over {}", grad_shards) : std::string()) + model_split;
  std::string grad_detail = fmt::format("{} trainable x {} B{}", format_count(trainable), grad_dtype_bytes, grad_split);
  if (p.training && p.mixed && deepspeed && !p.offload_optimizer) {
    // 16-bit gradient partitions, and the fp32 gradients of the partition the optimizer steps:
    // all of it in ZeRO-1/2, one sub-group at a time in ZeRO-3.
    double fp32_partition = trainable / shard_mp / state_shards;
    const bool by_sub_group = p.parallelism == "zero3" && fp32_partition > zero3_sub_group;
    if (by_sub_group) fp32_partition = zero3_sub_group;
    grad_bytes = trainable * 2.0 / grad_shards / shard_mp + fp32_partition * 4;
    grad_detail = fmt::format("{} trainable x 2 B{} + fp32 gradients of {}{}", format_count(trainable), grad_split,
                              by_sub_group ? zero3_sub_group_text + " (ZeRO-3)" : "the optimizer's partition",
                              state_shards > 1 && !by_sub_group ? fmt::format(" (1/{})", state_shards) : "");
  } else {
    grad_bytes /= grad_shards;
  }
  if (p.offload_optimizer && deepspeed) {
    // ZeRO-Offload keeps the gradient partitions on the CPU with the optimizer (stage3.py: the
    // partition buffer lives on self.device, the CPU when the optimizer is offloaded; stage 1/2 copy
    // each reduced bucket to pinned host memory): the GPU holds the reduce bucket being filled,
    // reduce_bucket_size elements, which the Trainer's "auto" sets to hidden_size^2.
    const double bucket = static_cast<double>(m.hidden_size) * static_cast<double>(m.hidden_size);
    grad_bytes = std::min(trainable / shard_mp, bucket) * 2;
    grad_detail = fmt::format("one reduce bucket of {} elements x 2 B (reduce_bucket_size \"auto\" = hidden_size^2); "
                              "the gradient partitions live on the CPU", format_count(static_cast<uint64_t>(std::min(trainable / shard_mp, bucket))));
  }
  // FSDP's CPU offload moves the gradient shards and the optimizer step to the CPU with the
  // parameters (torch CPUOffload(offload_params=True): "this offloads gradients to CPU as well,
  // meaning that the optimizer step runs on CPU"; FSDP2's CPUOffloadPolicy likewise). The block
  // being reduce-scattered is counted with the gather buffers.
  if (fsdp_cpu_offload) {
    grad_bytes = 0;
    grad_detail = "gradient shards on the CPU (FSDP CPU offload); the block being reduced is in gathered_params";
  }
  if (p.fused_backward) {
    // Optimizer-in-backward frees each gradient right after its update: one tensor at a time,
    // the largest being the embedding (torchtune optimizer_in_bwd).
    grad_bytes = std::min(grad_bytes, static_cast<double>(std::max(m.embedding_params, m.lm_head_params)) * p.grad_bytes);
    grad_detail = "one parameter's gradient at a time (optimizer step in backward)";
  }
  // FSDP under no_sync() (how Accelerate and Lightning Fabric accumulate by default) keeps the
  // micro-batches' gradients unsharded until the last one reduce-scatters them: "FSDP will
  // accumulate the full model gradients (instead of gradient shards) until the eventual sync"
  // (torch FullyShardedDataParallel.no_sync). DeepSpeed ZeRO reduces every micro-batch.
  const bool unsharded_accumulation = p.training && is_fsdp(p.parallelism) && shard_grads && p.accum > 1 && !p.sync_each_batch &&
                                      !p.fused_backward;
  double accumulating_grad_bytes = grad_bytes;
  if (unsharded_accumulation) {
    accumulating_grad_bytes = trainable * (p.use_lora ? p.adapter_bytes : p.grad_bytes) / shard_mp;
    est.assumptions.push_back("sync_each_batch: false (FSDP accumulates unsharded gradients under no_sync(), "
                              "the Accelerate and Lightning default)");
  }

  // ---- optimizer state ----
  double state_per_param = 0;
  std::string state_detail;
  const std::string& opt = p.optimizer;
  if (opt == "adamw") { state_per_param = 2 * (p.use_lora ? p.adapter_bytes : p.state_bytes); state_detail = "exp_avg + exp_avg_sq"; }
  // bitsandbytes' 32-bit optimizers keep fp32 states whatever the parameter dtype
  // (Optimizer2State.init_state: optim_bits 32 -> torch.float32).
  else if (opt == "paged_adamw_32bit") { state_per_param = 2 * 4; state_detail = "exp_avg + exp_avg_sq in fp32 (bitsandbytes 32-bit)"; }
  else if (opt == "adamw_8bit" || opt == "paged_adamw_8bit") { state_per_param = 2 + 2 * 4.0 / 256; state_detail = "two 8-bit states + fp32 absmax per 256 (bitsandbytes blockwise)"; }
  else if (opt == "adamw_4bit") { state_per_param = 1 + 2 * 4.0 / 128; state_detail = "two 4-bit states + fp32 scale per 128 (torchao)"; }
  else if (opt == "sgd_momentum" || opt == "lion") { state_per_param = p.use_lora ? p.adapter_bytes : p.state_bytes; state_detail = "one momentum buffer"; }
  else if (opt == "adafactor") {
    // Factored second moment: rows + columns per matrix (Shazeer & Stern 2018); no first moment
    // (transformers Adafactor beta1=None).
    double factored = 0;
    for (const LinearShape& l : linears) factored += static_cast<double>((l.in_features + l.out_features) * l.copies * l.layers);
    factored += static_cast<double>(m.vocab_size + m.hidden_size);
    state_per_param = trainable > 0 ? factored * 4 / total : 0;
    state_detail = "factored second moment (rows + columns)";
    // DeepSpeed ZeRO hands a client optimizer flat 1-D fp32 partitions (single_partition_of_fp32_groups;
    // ZeRO-3's fp32_partitioned_groups_flat), and Adafactor factors only tensors of 2 or more
    // dimensions (Adafactor._get_options: factored = len(shape) >= 2): a full fp32 second moment.
    if (deepspeed && p.training) {
      state_per_param = 4;
      state_detail = "full fp32 second moment: ZeRO's flat 1-D partitions are not factored";
    }
  } else { state_per_param = 0; state_detail = "none"; }
  double optimizer_state = trainable * state_per_param / shard_mp / state_shards;
  if (saved_modules > 0) {
    // The saved modules' gradients and states in their own dtype (torch optimizers keep states in
    // the parameter's dtype; 8-bit and factored states as for the adapters).
    grad_bytes += saved_modules * saved_module_bytes / shard_mp / grad_shards;
    accumulating_grad_bytes += saved_modules * saved_module_bytes / shard_mp;
    grad_detail += fmt::format(" + {} modules_to_save x {} B", format_count(saved_modules), saved_module_bytes);
    const double saved_state = opt == "adamw" ? 2 * saved_module_bytes
                               : (opt == "sgd_momentum" || opt == "lion") ? saved_module_bytes
                                                                          : state_per_param;
    optimizer_state += saved_modules * saved_state / shard_mp / state_shards;
  }
  // Paged states live in CUDA unified memory (bitsandbytes get_paged: cudaMallocManaged): on the
  // device until evicted, but outside PyTorch's allocator and its counters.
  bool paged = opt == "paged_adamw_8bit" || opt == "paged_adamw_32bit";
  if ((p.offload_optimizer || fsdp_cpu_offload) && optimizer_state > 0) {
    // ZeRO-Offload keeps the fp32 master weights and gradient partitions beside the state.
    const bool ds_offload = p.offload_optimizer && deepspeed && p.training && p.mixed;
    const double masters_and_grads = ds_offload ? trainable * (4 + 4) / shard_mp / state_shards : 0;
    est.assumptions.push_back(fmt::format(
        "offload {}: the optimizer state ({} per GPU{}) lives in host memory and the optimizer step runs on the CPU",
        fsdp_cpu_offload ? "params" : "optimizer", format_bytes(saturated_bytes(optimizer_state)),
        ds_offload ? fmt::format(", with the fp32 master weights and gradient partitions {} in all",
                                 format_bytes(saturated_bytes(optimizer_state + masters_and_grads)))
                   : std::string()));
  }
  if (p.offload_optimizer || fsdp_cpu_offload) optimizer_state = 0;

  // AMP without DeepSpeed: fp32 params are the master; autocast caches a 16-bit copy of every
  // trainable weight for the step (torch autocast weight cast cache); so for freeze tuning's fp32
  // blocks over a 16-bit model under autocast.
  const bool fp32_trainable = p.amp || (p.autocast && p.task == "train_freeze" && p.trainable_bytes == 4);
  // The output head is a Linear too (linear() is on autocast's lower-precision list, and the
  // weight-cast cache keeps casts of leaves that require grad: autocast_mode.cpp cached_cast): a
  // full fine-tune casts it as well, the embedding matrix when a decoder's head is tied to it (an
  // encoder's fine-tune runs a task head of its own: lm_head_params).
  const uint64_t embedding_width = m.embedding_dim ? m.embedding_dim : m.hidden_size;   // OPT-350m's 512
  const uint64_t tied_head = m.tie_word_embeddings && !m.is_encoder_only ? m.vocab_size * embedding_width : 0;
  const double head_matrix =
      p.task == "train_full" ? static_cast<double>(m.lm_head_params ? m.lm_head_params : tied_head) * scale : 0;
  double amp_casts = p.training && fp32_trainable && !deepspeed && !p.use_lora
                         ? (trainable_linear + head_matrix) * 2 / shard_mp / param_shards
                         : 0;

  // ---- activations ----
  double activations = 0, logits = 0, layer_working = 0, temporary = 0, backward_working = 0;
  // The first block's backward, the last of the step, with every gradient live: all that block
  // saved (or recomputed) for it, whatever the checkpointing.
  double first_block_backward = 0;
  std::string act_detail, logits_detail;
  if (p.training) {
    const double tokens = static_cast<double>(p.micro_batch * p.seq) / static_cast<double>(p.cp);
    const double s_kv = static_cast<double>(p.seq) / p.cp;
    // The decoder's tokens: the labels' length under an encoder-decoder model, else the same.
    // The last blocks, the output head and the loss run over them.
    const double out_tokens = static_cast<double>(p.micro_batch * p.target) / static_cast<double>(p.cp);
    const double t_kv = static_cast<double>(p.target) / p.cp;
    // Encoder-decoder models (T5): linear_layers() lists the encoder block's Linears first
    // (self-attention 4 + MLP 2 or 3), then the decoder's.
    std::vector<LinearShape> decoder_linears, encoder_linears;
    if (m.is_encoder_decoder) {
      const size_t encoder_count = 4 + (m.gated_mlp ? 3 : 2);
      for (size_t i = 0; i < linears.size(); ++i) (i < encoder_count ? encoder_linears : decoder_linears).push_back(linears[i]);
    }
    LayerActivations dec = block_activations(m, p, m.is_encoder_decoder ? decoder_linears : linears, m.is_encoder_decoder);
    const double sequences = static_cast<double>(p.micro_batch);
    double per_layer = out_tokens * (dec.per_token + dec.attention_scores * t_kv) + sequences * dec.per_sequence +
                       t_kv * static_cast<double>(p.target) * dec.per_position_pair + dec.fixed +
                       tokens * dec.per_source_token + out_tokens * dec.source_scores * s_kv;
    backward_working = out_tokens * dec.backward_working / static_cast<double>(p.tp);
    first_block_backward = per_layer / static_cast<double>(p.tp);
    // Tensor parallel with sequence parallelism (Megatron --sequence-parallel, torchtitan):
    // every saved activation is split across the tp ranks (Korthikanti Table 2: sbh/t (34 + 5as/h)).
    per_layer /= static_cast<double>(p.tp);
    double layers = static_cast<double>(m.num_layers);
    if (p.task == "train_freeze") layers = static_cast<double>(p.freeze_layers);
    double stack = per_layer * layers;
    const double residual = p.residual_bytes;
    const double layer_input = out_tokens * residual * m.hidden_size / static_cast<double>(p.tp);
    double encoder_inputs = 0;   // full checkpointing: the encoder blocks' inputs
    if (m.is_encoder_decoder) {
      LayerActivations enc = block_activations(m, p, encoder_linears, false);
      stack += tokens * (enc.per_token + enc.attention_scores * s_kv) * m.num_encoder_layers + tokens * dec.shared_source;
      encoder_inputs = tokens * residual * m.hidden_size / static_cast<double>(p.tp) * m.num_encoder_layers;
    }
    double kept_per_layer = per_layer;   // what one block saves for backward
    if (p.checkpointing == "full") {
      // Only each block's input is kept; backward recomputes one block at a time.
      kept_per_layer = layer_input;
      layer_working = per_layer;
      activations = layer_input * layers + encoder_inputs;
      act_detail = "each block's input (full checkpointing)";
    } else if (p.checkpointing == "selective") {
      // Selective (op-level) recompute: each block keeps its input, the attention kernel's output
      // and logsumexp, and every second matmul output; elementwise ops, norms and the s^2
      // attention core are recomputed (torchtitan activation_checkpoint "op" policy, which also
      // drops what Korthikanti et al. 2022 recompute).
      double saved = residual * m.hidden_size + p.act_bytes * m.num_attention_heads * m.head_dim + 4 * m.num_attention_heads;
      uint64_t mm = 0;
      for (const auto& l : linears) {
        if (l.expert || l.layers != m.num_layers) continue;
        if (++mm % 2 == 1) saved += p.act_bytes * static_cast<double>(l.out_features);
      }
      // What one block keeps, at most what it would keep without checkpointing (LoRA's frozen
      // matmuls save less than the policy would).
      kept_per_layer = std::min(tokens * saved / static_cast<double>(p.tp), per_layer);
      activations = kept_per_layer * layers;
      // Backward recomputes only what the policy dropped, beside what the block kept.
      layer_working = per_layer - kept_per_layer;
      act_detail = "block input, attention output and every second matmul output (selective)";
    } else {
      activations = stack;
      act_detail = m.is_encoder_decoder
                       ? fmt::format("{} encoder blocks over {} tokens, {} decoder blocks over {} ({} each)", m.num_encoder_layers,
                                     p.seq, layers, p.target, format_bytes(saturated_bytes(per_layer)))
                       : fmt::format("{} blocks x {} per block", layers, format_bytes(saturated_bytes(per_layer)));
    }
    // Pipeline parallel, 1F1B schedule (Narayanan et al. 2021, section 2.2): a stage holds L/pp
    // blocks (ceil(L/pp) on the most loaded); the first stage keeps up to pp micro-batches in
    // flight, fewer when a step has fewer (m = grad_accum_steps): the stack x min(pp, m)/pp, as
    // Megatron-LM's theoretical_memory_usage.py discounts it. The last stage keeps one micro-batch of its blocks
    // plus the output head and the loss; the larger of the two stages is the peak (below).
    double last_stage_blocks = activations;
    if (p.pp > 1) {
      const double pp = static_cast<double>(p.pp);
      last_stage_blocks = activations * p.stage_share;
      activations *= std::min<double>(pp, static_cast<double>(p.accum)) * p.stage_share;
    }
    if (p.offload_activations) {
      // Saved tensors go to CPU as they are produced; about two blocks' worth stay on the GPU
      // (the one being computed and the one being copied). Under checkpointing what a block
      // saves is what the policy keeps: under full checkpointing its input, so two block inputs
      // stay (Unsloth's offloaded checkpointing, torchtune's OffloadActivations around
      // checkpointed blocks); the recomputed part is `layer_working`.
      const double resident = 2 * std::max(kept_per_layer, layer_input);
      activations = std::min(activations, resident);
      last_stage_blocks = std::min(last_stage_blocks, resident);
      act_detail = p.checkpointing == "full" ? "offloaded to CPU (two block inputs resident)"
                                             : "offloaded to CPU (two blocks resident)";
    }
    // Embedding output: its LayerNorm's saved input (BERT, BLOOM) and dropout mask.
    double first_stage_extra = tokens * (m.hidden_dropout > 0 ? 1 : 0) * m.hidden_size;
    if (m.is_encoder_decoder) {
      // T5Stack: the encoder ends in its own final norm and dropout (whose output every
      // cross-attention reads, counted with the blocks); the decoder drops out its embeddings.
      const double final_normed = p.use_lora ? 0 : p.act_bytes;
      first_stage_extra += tokens * ((4 + final_normed) * m.hidden_size + 4 + (m.hidden_dropout > 0 ? m.hidden_size : 0)) +
                           out_tokens * (m.hidden_dropout > 0 ? 1 : 0) * m.hidden_size;
    }
    if (m.embedding_norm) first_stage_extra += tokens * (residual * m.hidden_size + 8);
    if (m.conv_kernel_size > 0) {
      // DeBERTa-v2's ConvLayer after the first block (modeling_deberta_v2.py ConvLayer.forward):
      // Conv1d keeps its (permuted, contiguous) input whether or not its weight trains (one
      // convolution_backward formula for all inputs), masked_fill_ its [B, s] bool mask, XDropout
      // its mask, the activation its input (tanh: its output), LayerNorm its input and stats, and
      // `output * input_mask` the mask cast to the LayerNorm output's dtype.
      const double act_units = m.conv_act == "relu" ? 1 : activation_saved_units(m.conv_act);
      first_stage_extra += tokens * ((p.act_bytes * (1 + act_units) + residual + (m.hidden_dropout > 0 ? 1 : 0)) *
                                         m.hidden_size + 1 + 8 + residual);
    }
    double head = 0;
    // Encoder heads (pooler on the first token) keep the last hidden state's storage alive.
    if (m.is_encoder_only) head += tokens * residual * m.hidden_size;
    // Final norm and output head input.
    if (!m.is_encoder_only) {
      const double final_normed = p.use_lora ? 0 : p.act_bytes;  // frozen norm weight: see block_activations
      const bool fused_norm = p.kernels != "none" && m.norm == NormKind::kRmsNorm;  // block_activations
      head += out_tokens * (fused_norm ? residual * m.hidden_size + 4
                            : m.norm == NormKind::kRmsNorm ? (4 + final_normed) * m.hidden_size + 4
                                                           : residual * m.hidden_size + 8);
      if (!p.use_lora) head += out_tokens * p.act_bytes * m.hidden_size;
      // T5Stack drops out the final norm's output (the head's input) too.
      if (m.is_encoder_decoder && m.hidden_dropout > 0) head += out_tokens * m.hidden_size;
      if (m.score_labels) {
        // A score head (reward model): score_labels outputs per token, read at the last one.
        logits = 0;
        logits_detail = "score head: no vocabulary logits";
      } else {
        // An fp32 head (PEFT's preparation) under autocast is cast to 16 bits at every call and the
        // matmul keeps the copy for backward (autocast caches casts of trainable weights only).
        // (Liger's fused loss takes the fp32 weight as it is, chunk by chunk.)
        if (p.use_lora && p.kbit_upcast == "all" && p.autocast && p.loss_impl != "fused_linear") {
          head += static_cast<double>(m.vocab_size) * static_cast<double>(m.hidden_size) * p.act_bytes / p.tp;
        }
        // Logits and cross-entropy: logits (activation dtype), upcast to fp32, log-softmax output
        // and its gradient: 12 bytes per vocabulary entry per token at the start of backward
        // (transformers ForCausalLMLoss: logits.float(); torch log_softmax/nll_loss backward).
        const double v = static_cast<double>(m.vocab_size) / p.tp;
        // Chunked (torchtune CEWithChunkedOutputLoss, LitGPT chunked_cross_entropy): the head runs
        // chunk by chunk, then `cross_entropy(chunk.float())` per chunk (LitGPT: on the 16-bit
        // chunk). Per vocabulary entry and token, what stays saved until its chunk's backward:
        // uncompiled, the log-softmax output in the loss dtype (the `.float()` copy and the
        // 16-bit logits are not saved: torchtune deletes its logits before backward, "free logits
        // otherwise it peaks backward memory"; LitGPT's loop keeps them, + e); compiled (torchtune
        // compiles compute_cross_entropy, "the CE and upcasting have to be compiled together"), the
        // 16-bit input only. One chunk's backward works on: uncompiled, the log-softmax gradient in
        // and out in the loss dtype and its 16-bit cast; compiled, an fp32 gradient and its 16-bit
        // cast (measured on an H200, torch 2.11: tests/fixtures/estimate/calibration_cuda.json).
        logits_detail = fmt::format("{} loss: logits, fp32 upcast, log-softmax and its gradient", p.loss_impl);
        if (p.loss_impl == "chunked") {
          const double loop_keeps = p.litgpt ? p.act_bytes : 0;
          const double saved_per_cell = p.compile ? p.act_bytes : p.loss_bytes + loop_keeps;
          const double cast_back = p.loss_bytes != p.act_bytes ? p.act_bytes : 0;  // no cast when the loss runs in e
          const double working_per_cell = (p.compile ? 4 + p.act_bytes : 2 * p.loss_bytes + cast_back) / kLossChunks;
          logits_detail = p.compile ? "chunked loss, compiled: each chunk's 16-bit logits, one chunk's gradient"
                                    : "chunked loss: each chunk's log-softmax, one chunk's gradient";
          logits = out_tokens * v * (saved_per_cell + working_per_cell);
          // A trainable output head is used once per chunk: autograd sums the chunks' weight
          // gradients in the head's input buffer before accumulating them (torch/csrc/autograd
          // input_buffer.cpp), so from the second chunk's backward on the head's whole gradient and
          // that chunk's fresh one coexist with the later chunks' saved tensors (two chunks'
          // fewer). Under autocast the sum builds at the 16-bit cast's backward, in 16 bits.
          if (p.task == "train_full") {
            const double head_grad = v * static_cast<double>(m.hidden_size) * (p.autocast ? p.act_bytes : p.grad_bytes);
            const double summing = logits - 2.0 / kLossChunks * out_tokens * v * saved_per_cell + 2 * head_grad;
            if (summing > logits) {
              logits = summing;
              logits_detail += "; the head's gradient summed over the chunks and one chunk's";
            }
          }
        } else if (p.loss_impl == "fused_linear") {
          logits_detail = "fused linear cross-entropy: chunk by chunk, no full logits";
          logits = out_tokens * m.hidden_size * (4 + p.act_bytes);
        } else {
          logits = out_tokens * v * 12;
          // Soft-capped logits (Gemma2ForCausalLM.forward: logits / cap, tanh, * cap): tanh keeps
          // its output, a second copy of the logits in their dtype. (Liger's fused loss caps
          // inside its chunks.)
          if (m.final_logit_softcapping > 0) {
            logits += out_tokens * v * p.act_bytes;
            logits_detail += "; the soft-capping's tanh output";
          }
        }
      }
    } else {
      // Encoders: a small task head; the classifier logits are negligible.
      logits = 0;
    }
    if (p.pp > 1) {
      const double first_stage = activations + first_stage_extra;
      // Both stages pay the first block's backward at the start of backward (backward_working,
      // and a recomputed block under checkpointing); only the last one has the loss region, and
      // the larger of the two moments counts.
      const double block_backward = layer_working + backward_working;
      const double last_stage = last_stage_blocks + head + std::max(0.0, logits - block_backward);
      if (first_stage >= last_stage) {
        activations = first_stage;
        logits = 0;  // the output head lives on the last stage
        act_detail += fmt::format(", first of {} pipeline stages ({} micro-batches in flight)", p.pp,
                                  std::min(p.pp, p.accum));
      } else {
        activations = last_stage_blocks + head;
        act_detail += fmt::format(", last of {} pipeline stages (one micro-batch, output head and loss)", p.pp);
      }
    } else {
      activations += first_stage_extra + head;
    }
  } else {
    // Inference: no saved activations; the peak transient is one block's widest moment during
    // the prefill plus the last position's logits in fp32.
    // A prompt processed in chunks (llama.cpp n_ubatch, chunked prefill) holds one chunk's
    // queries at a time; eager attention still scores each against the whole prompt.
    const uint64_t chunk = job.prefill_chunk ? std::min(*job.prefill_chunk, std::max<uint64_t>(p.prompt, 1)) : p.prompt;
    const double tokens = static_cast<double>(p.batch * std::max<uint64_t>(chunk, 1));
    const double e = p.act_bytes;
    // Eager attention's widest moment is the softmax: families that upcast run
    // `softmax(scores, dtype=float32).to(dtype)` while `scores` is still referenced, so the 16-bit
    // scores, the fp32 probabilities and their 16-bit cast coexist (4 + 2e per score; e.g.
    // transformers OPTAttention/LlamaAttention eager paths); others hold scores and probabilities.
    const double score_bytes = upcasts_softmax(m) && e < 4 ? 4 + 2 * e : 2 * e;
    double attn = p.attention == "eager" ? m.num_attention_heads * score_bytes * static_cast<double>(std::max<uint64_t>(p.prompt, 1)) : 0;
    double inter = static_cast<double>(m.num_experts ? m.moe_intermediate_size * m.experts_per_token : m.intermediate_size);
    double mlp = e * inter * (m.gated_mlp ? 3 : 2);
    double qkv = e * (m.num_attention_heads + 2 * m.num_kv_heads) * m.head_dim;
    layer_working = p.task == "load" ? 0 : tokens * (2 * e * m.hidden_size + std::max(qkv + attn, mlp)) / p.tp;
    // A score head's outputs are labels per position (pooled at the last one afterwards).
    logits = p.task == "load"    ? 0
             : m.score_labels ? static_cast<double>(p.batch * std::max<uint64_t>(p.prompt, 1) * m.score_labels) * e
                              : static_cast<double>(p.batch) * m.vocab_size * (e + 4);
  }

  // ---- KV cache (generation) ----
  double kv_cache = 0;
  double kv_growth = 0;   // the previous step's cache (or one layer of it) while the next is built
  if (p.task == "inference" && !m.is_encoder_only) {
    double per_token_layer;
    if (m.attention == AttentionKind::kMultiLatent) {
      // HF DeepSeek modeling caches full per-head k and v; vLLM caches the latent. We follow HF here.
      per_token_layer = static_cast<double>(m.num_attention_heads) / p.tp *
                        (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim) * p.kv_bytes;
    } else {
      per_token_layer = 2.0 * std::max<double>(1, static_cast<double>(m.num_kv_heads) / p.tp) * m.head_dim * p.kv_bytes;
    }
    // Sliding-window layers cache at most `window` tokens (when the implementation trims).
    double cached_layers = 0;
    for (uint64_t i = 0; i < m.num_layers; ++i) {
      bool sliding = m.sliding_window && (m.layer_is_sliding.empty() || m.layer_is_sliding[i]);
      cached_layers += sliding ? std::min<double>(1, static_cast<double>(*m.sliding_window) / std::max<uint64_t>(p.seq, 1)) : 1;
    }
    kv_cache = per_token_layer * cached_layers * p.stage_share * p.batch * p.seq;
    // A decoding step grows the cache by one token with torch.cat, a new tensor beside the old:
    // DynamicCache (transformers >= 4.36) replaces one layer's at a time; the legacy tuple cache
    // builds a whole new tuple while generate() still holds the previous step's (its
    // model_kwargs["past_key_values"]), so at the last step both are live; a static cache is
    // written in place.
    if (p.new_tokens > 0 && cached_layers > 0) {
      const double previous = kv_cache * static_cast<double>(p.seq - 1) / static_cast<double>(p.seq);
      // (kv_cache is this stage's: its share of cached_layers.)
      const double stage_layers = cached_layers * p.stage_share;
      kv_growth = p.kv_cache_impl == "legacy" ? previous : p.kv_cache_impl == "dynamic" ? previous / stage_layers : 0;
    }
  }

  // ---- sharded-parameter gather buffers (ZeRO-3 / FSDP) ----
  double gather = 0;
  if (shard_params || p.offload_params) {
    // The current and the prefetched block unsharded in 16-bit, plus one block's gradients
    // (DeepSpeed estimate_zero3: largest_layer_memory = 4 * largest_layer_params).
    // A block is split by tensor parallelism, not by the pipeline (a stage holds whole blocks).
    gather = static_cast<double>(m.largest_layer_params) * (p.use_lora || !p.training ? 4 : 6) / p.tp;
  }
  if (unsharded_copy > 0) gather = unsharded_copy;
  // DDP keeps gradient buckets as a separate copy of the gradients
  // (torch DistributedDataParallel gradient_as_bucket_view=False, the default). The Reducer
  // allocates them when the model is wrapped (reducer.cpp initialize_buckets: at::empty per
  // bucket) and keeps them for the wrapper's life: live at every moment of the step.
  // (Context-parallel ranks all-reduce their gradients too.)
  double ddp_buckets = p.training && p.dp * p.cp > 1 && p.parallelism == "ddp" ? trainable * p.grad_bytes / shard_mp : 0;
  // Quantized layers are dequantized to 16 bits one at a time (bitsandbytes dequantize_4bit).
  if (p.quantization && p.task != "load") {
    double largest = 0;
    for (const auto& l : linears) largest = std::max(largest, static_cast<double>(l.in_features * l.out_features));
    temporary = largest * 2;
  }
  // Optimizer step temporaries of AdamW. foreach (torch >= 2.0 default on CUDA) allocates
  // sqrt(exp_avg_sq) for all params at once (torch/optim/adamw.py _multi_tensor_adamw:
  // torch._foreach_sqrt); the for-loop path (_single_tensor_adamw, transformers' AdamW) one
  // parameter's worth at a time, the largest being the embedding; fused (torch._fused_adamw_)
  // updates in place in one kernel.
  double step_temp = 0;
  if (p.training && opt == "adamw" && !p.fused_backward && !p.offload_optimizer && !fsdp_cpu_offload) {
    const double state_bytes = p.use_lora ? p.adapter_bytes : p.state_bytes;
    if (p.optimizer_impl == "foreach") {
      step_temp = trainable * state_bytes / shard_mp / state_shards;
      // ZeRO-3 steps a client optimizer on one sub-group's flat fp32 partition at a time.
      if (deepspeed && p.parallelism == "zero3" && p.mixed) {
        step_temp = std::min(step_temp, zero3_sub_group * state_bytes);
      }
    } else if (p.optimizer_impl == "for_loop") {
      step_temp = largest_trained_param() * state_bytes / shard_mp;
    }
  }
  // transformers' Adafactor steps one parameter at a time in fp32 (Adafactor.step): the gradient
  // and the parameter upcast when they are 16-bit (grad.float(), p.float()), grad**2 + eps, and
  // the factored estimate r_factor * c_factor made while that square is still referenced: two
  // fp32 tensors of the largest parameter, four when parameters and gradients are 16-bit.
  if (p.training && opt == "adafactor" && !p.fused_backward && !p.offload_optimizer && !fsdp_cpu_offload) {
    const double trained_bytes = p.use_lora ? p.adapter_bytes : p.param_bytes;
    const double fp32_copies = 2 + (trained_bytes < 4 ? 2 : 0);
    step_temp = largest_trained_param() * 4 * fp32_copies / shard_mp;
    // Under ZeRO the "parameter" is the rank's whole flat fp32 partition (ZeRO-3: one sub-group at
    // a time): grad**2 + eps, then its rsqrt made while the square is referenced, two copies.
    if (deepspeed) {
      double partition = trainable / shard_mp / state_shards;
      if (p.parallelism == "zero3") partition = std::min(partition, zero3_sub_group);
      step_temp = partition * 4 * 2;
    }
  }

  // ---- peak moment ----
  double base = 0;
  for (const auto& c : b.components) base += static_cast<double>(c.bytes);
  if (!paged) base += optimizer_state;
  base += ddp_buckets;
  base += kCublasWorkspaceBytes;
  // Gradients are live through the forward when they accumulate, and on PyTorch < 2.0 where
  // zero_grad() zeroes them in place instead of freeing them (set_to_none became the default in
  // PyTorch 2.0, pytorch/pytorch#92731; transformers' Trainer passes set_to_none=True from 4.28,
  // huggingface/transformers#22136).
  const bool grads_live_in_forward = (p.accum > 1 || p.grads_kept_by_zero_grad) && !p.fused_backward;
  // With checkpointing, backward starts with the loss and the head, whose saved tensors are
  // freed before the last block is recomputed: the loss region and the recomputed block are two
  // moments, not one (measured: Llama LoRA with checkpointing on an H200, within 3% as the larger
  // of the two, +21% as their sum; tests/fixtures/estimate/calibration_cuda.json).
  // The first block's backward (recomputed under checkpointing) comes after the loss's: the
  // larger of the two moments.
  const bool recompute_dominates = layer_working + backward_working > logits;
  double backward_start = base + (grads_live_in_forward ? accumulating_grad_bytes : 0) + amp_casts + activations +
                          std::max(layer_working + backward_working, logits) + gather + temporary;
  // Under no_sync the last micro-batch's backward adds its gradients to the unsharded ones before
  // the reduce-scatter leaves shards.
  double backward_end = base + accumulating_grad_bytes + gather + first_block_backward;
  double step = base + grad_bytes + step_temp;
  // The cache's growth happens in decoding steps, whose working set is one token per sequence:
  // the larger of the two moments, not their sum.
  double inference_peak = base + kv_cache + std::max(layer_working, kv_growth) + logits + temporary;

  std::string phase;
  double peak;
  if (p.training) {
    peak = backward_start;
    phase = "backward";
    if (backward_end > peak) { peak = backward_end; phase = "backward"; }
    if (step > peak) { peak = step; phase = "optimizer_step"; }
  } else {
    peak = inference_peak;
    // An encoder-only model (BERT) generates nothing: its peak is one forward pass.
    phase = p.task == "load" ? "load" : m.is_encoder_only || p.new_tokens == 0 ? "forward" : "generation";
  }

  // Components live at the peak.
  auto add_if = [&](const char* name, double bytes, const std::string& detail) { b.add(name, bytes, detail); };
  if (p.training) {
    add_if("optimizer_state", paged ? 0 : optimizer_state,
           fmt::format("{} trainable x {:.3f} B ({}){}{}", format_count(trainable), state_per_param, state_detail,
                       saved_modules > 0 ? fmt::format(" + {} modules_to_save", format_count(saved_modules)) : "",
                       state_shards > 1 ? fmt::format(", sharded over {}", state_shards) : ""));
    bool grads_now = phase == "optimizer_step" || peak == backward_end || grads_live_in_forward;
    if (grads_now) {
      const bool accumulating = phase != "optimizer_step" && unsharded_accumulation;
      add_if("gradients", accumulating ? accumulating_grad_bytes : grad_bytes,
             accumulating ? fmt::format("{} trainable x {} B{}, unsharded while accumulating (FSDP no_sync)",
                                        format_count(trainable), grad_dtype_bytes, model_split)
                          : grad_detail);
    }
    if (peak == backward_start && phase != "optimizer_step") {
      add_if("weight_casts", amp_casts, "16-bit copies of trainable weights cached by autocast");
      add_if("activations", activations, act_detail);
      if (recompute_dominates) {
        add_if("recompute", layer_working, "one block recomputed in backward");
        add_if("backward_working", backward_working, "the block's widest backward moment: MLP-width gradients");
      } else {
        add_if("logits", logits, logits_detail);
      }
      add_if("temporary", temporary, "largest dequantized weight");
    }
    add_if("gradient_buckets", ddp_buckets, "DDP all-reduce buckets: a copy of the gradients, allocated when DDP wraps the model");
    if (peak == backward_end && peak != backward_start && phase != "optimizer_step") {
      add_if("first_block_backward", first_block_backward,
             "the first block's backward: all it saved or recomputed, every other gradient already live");
    }
    // ZeRO-3 and FSDP release the gathered blocks after each use: none are live at the step.
    if (gather > 0 && phase != "optimizer_step") {
      add_if("gathered_params", gather, unsharded_copy > 0 ? "every block unsharded from forward to the end of backward (SHARD_GRAD_OP)"
                                                           : "unsharded blocks being used and prefetched");
    }
    if (phase == "optimizer_step") {
      add_if("temporary", step_temp, opt == "adafactor" ? "Adafactor's fp32 working copies of the largest parameter"
                                                        : "foreach AdamW sqrt(exp_avg_sq) buffer");
    }
  } else {
    add_if("kv_cache", kv_cache, fmt::format("{} tokens x {} sequences", p.seq, p.batch));
    if (kv_growth > layer_working) {
      add_if("kv_cache_growth", kv_growth, p.kv_cache_impl == "legacy"
                                               ? "the previous step's cache, live while the last token's is built (legacy tuple cache)"
                                               : "one layer's previous cache while torch.cat grows it");
    } else {
      add_if("activations", layer_working, "widest moment of one block in the prefill (no grad)");
    }
    add_if("logits", logits, m.score_labels ? "score head outputs" : "last position's logits, fp32");
    add_if("temporary", temporary, "largest dequantized weight");
  }
  b.add("workspace", kCublasWorkspaceBytes, "cuBLAS workspaces");

  // Saturating sums: one component beyond 64 bits makes every total beyond them too.
  uint64_t allocated = 0;
  for (const auto& c : b.components) allocated = saturating_add(allocated, c.bytes);
  // Under checkpointing the caching allocator keeps the loss region's blocks after they are
  // freed, and the recomputed block's tensors come mostly on top of them: reserved memory holds
  // both backward moments (measured on an H200: max_memory_reserved 19-30% above
  // max_memory_allocated with checkpointing). Reserved memory never shrinks within a step, so
  // that also bounds it from below when the optimizer step is the allocated peak. The allocator
  // frees these blocks and retries before it reports out of memory: reclaimable_bytes.
  double reserved_floor = 0;
  if (p.training && layer_working > 0) {
    reserved_floor = backward_start - std::max(layer_working + backward_working, logits) + layer_working +
                     backward_working + logits;
  }
  const uint64_t cached = reserved_floor > peak ? saturated_bytes(reserved_floor - peak) : 0;
  if (cached > 0) {
    b.add("allocator_cache", static_cast<double>(cached),
          "blocks of both backward moments (the loss region, the recomputed block), kept by the caching allocator");
  }
  // (5% of a saturated count is no number either: it stays saturated.)
  const uint64_t slack = is_saturated(allocated) ? kSaturatedBytes : saturated_bytes(static_cast<double>(allocated) * kAllocatorSlack);
  b.add("allocator_slack", static_cast<double>(slack), fmt::format("caching allocator: cached and fragmented blocks ({:.0f}%)", kAllocatorSlack * 100));
  if (paged && optimizer_state > 0) b.add("paged_optimizer_state", optimizer_state, "bitsandbytes paged state in CUDA unified memory (not in PyTorch's counters)");
  const uint64_t context = cuda_context_bytes(p.lazy_module_loading);
  b.add("cuda_context", static_cast<double>(context), p.lazy_module_loading ? "CUDA context and kernels (lazy loading)" : "CUDA context and every kernel (eager module loading)");
  const uint64_t nccl = p.communicates ? kNcclBytes : 0;   // (make_plan: replicas that only generate share none)
  if (nccl) b.add("nccl", static_cast<double>(nccl), "NCCL communicator buffers");

  est.components = b.components;
  {
    Builder all;
    for (const auto& c : est.components) {
      if (c.name == "weights" || c.name == "adapter_weights" || c.name == "master_weights") all.components.push_back(c);
    }
    all.add("gradients", grad_bytes, "all trainable gradients");
    all.add("optimizer_state", optimizer_state, state_detail);
    all.add("weight_casts", amp_casts, "autocast weight copies");
    // Inference keeps nothing for backward: its block working set and logits are the components'
    // own "activations" and "logits", named and described as there.
    auto component_detail = [&](const char* name, const char* fallback) {
      for (const auto& c : est.components) if (c.name == name) return c.detail;
      return std::string(fallback);
    };
    if (p.training) {
      all.add("activations", activations, act_detail);
      all.add("recompute", layer_working, "one block's working set");
      all.add("backward_working", backward_working, "the first block's backward: MLP-width gradients");
      all.add("logits", logits, "loss region peak");
    } else {
      all.add("activations", layer_working, component_detail("activations", "one block's working set (no grad)"));
      all.add("logits", logits, component_detail("logits", "logits"));
    }
    all.add("kv_cache", kv_cache, component_detail("kv_cache", "KV cache"));
    all.add("kv_cache_growth", kv_growth, component_detail("kv_cache_growth", "the cache's growth in a decoding step"));
    all.add("gathered_params", gather, "unsharded blocks");
    all.add("gradient_buckets", ddp_buckets, "DDP buckets");
    all.add("temporary", std::max(temporary, step_temp), "largest temporary");
    est.breakdown = all.components;
  }
  est.peak_allocated_bytes = allocated;
  est.peak_reserved_bytes = saturating_add(saturating_add(allocated, cached), slack);
  est.reclaimable_bytes = cached;
  est.device_used_bytes = saturating_add(saturating_add(est.peak_reserved_bytes, context),
                                         saturating_add(nccl,
                                                        paged ? saturated_bytes(optimizer_state) : 0));
  est.peak_phase = phase;
  est.dominant_component = dominant_component(est.components);
  // Uncertainty: allocator and context always; more for each size the job left open.
  double band = 0.05;
  for (const auto& a : est.assumptions) {
    if (a.rfind("seq_len", 0) == 0 || a.rfind("micro_batch_size", 0) == 0 || a.rfind("prompt_len", 0) == 0 ||
        a.rfind("max_new_tokens", 0) == 0 || a.rfind("batch_size", 0) == 0)
      band += 0.10;
    else if (a.rfind("attention_impl", 0) == 0 && p.training) band += 0.05;
    // Who prepares a quantized base (PEFT's fp32 upcast or not) moves weights and activations.
    else if (a.rfind("kbit_upcast: all", 0) == 0) band += 0.10;
  }
  if (m.source == "--params") band += 0.10;
  est.uncertainty_fraction = std::min(band, 0.5);
  est.assumptions.push_back(fmt::format("CUDA context {} ({} module loading), allocator slack {:.0f}% of allocated",
                                        format_bytes(context), p.lazy_module_loading ? "lazy" : "eager", kAllocatorSlack * 100));
  warn_if_saturated(est);
  return est;
}

}  // namespace oomdoc
