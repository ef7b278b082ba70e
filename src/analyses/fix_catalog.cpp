#include "analyses/fix_catalog.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <set>

namespace oomdoc {

std::string half_hidden_states_snippet(bool bf16) {
  std::string snippet(kBf16HiddenStatesSnippet);
  if (bf16) return snippet;
  const std::string_view from = "bfloat16";
  return snippet.replace(snippet.find(from), from.size(), "float16");
}

const std::vector<FixInfo>& fix_catalog() {
  static const std::string sync_each_batch_snippet =
      "accelerator_config=" + std::string(kSyncEachBatchAcceleratorConfig) + "  # TrainingArguments";
  static const std::vector<FixInfo> catalog = {
      // ---- free: change nothing about the model or the data ----
      {"release_references", "Stop keeping tensors (and their graphs) alive across steps",
       "total_loss += loss.item()   # not loss; preds.append(out.detach().cpu())", 0, "free"},
      // Trainer's evaluation keeps every batch's logits on the GPU (TrainingArguments:
      // eval_accumulation_steps, prediction_loss_only; Trainer(preprocess_logits_for_metrics=...)).
      {"eval_accumulation_steps", "Move evaluation predictions to the CPU every few steps",
       "eval_accumulation_steps=4  # TrainingArguments; 1 keeps the least on the GPU", 0, "slower evaluation, host RAM"},
      {"preprocess_logits_for_metrics", "Keep token ids, not the whole vocabulary's logits, for the metrics",
       "Trainer(..., preprocess_logits_for_metrics=lambda logits, labels: logits.argmax(dim=-1))", 0,
       "a few lines; metrics must take ids"},
      {"prediction_loss_only", "Keep no predictions when the metrics need only the loss",
       "prediction_loss_only=True  # TrainingArguments", 0, "no logit-based metrics"},
      {"no_grad_for_eval", "Run evaluation and generation without autograd",
       "with torch.inference_mode():  # model.eval() alone still records gradients", 0, "free"},
      {"end_other_processes", "Free the card from other processes",
       "nvidia-smi --query-compute-apps=pid,process_name,used_gpu_memory --format=csv; kill <pid>", 1,
       "free (if those processes are stale)"},
      {"check_device_and_limits", "Check which device failed and any per-process memory limit",
       "CUDA_VISIBLE_DEVICES, torch.cuda.set_per_process_memory_fraction(), the tensor's .device", 1, "free"},
      {"expandable_segments", "Let the allocator grow segments instead of fragmenting",
       "export PYTORCH_ALLOC_CONF=expandable_segments:True PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  # 2.8+ prefers the first, but up to "
       "2.9.1 applies expandable_segments only from the second (pytorch#183387); max_split_size_mb:128 where expandable segments are unavailable",
       2, "free"},
      {"max_split_size", "Stop the allocator from splitting large cached blocks (PyTorch before 2.1)",
       "export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128  # PyTorch before 2.1: expandable_segments needs 2.1+ "
       "and older versions reject unknown keys; upgrading PyTorch is the better fix",
       2, "free"},
      {"tf_memory_growth", "Stop TensorFlow from reserving the whole card up front",
       "tf.config.experimental.set_memory_growth(gpu, True)  # or TF_FORCE_GPU_ALLOW_GROWTH=true", 2, "free"},
      {"tf_async_allocator", "Use the CUDA async allocator against BFC fragmentation",
       "export TF_GPU_ALLOCATOR=cuda_malloc_async", 2, "free"},
      // JAX's GPU memory docs: disabling preallocation "is more prone to GPU memory fragmentation", so
      // the larger fraction comes first; preallocate=false only for sharing the card.
      {"xla_preallocation", "Give JAX/XLA a larger share of the card than its default 75%",
       "export XLA_PYTHON_CLIENT_MEM_FRACTION=.95  # XLA_PYTHON_CLIENT_PREALLOCATE=false only to share the card "
       "with other processes: it can increase fragmentation-driven OOMs",
       2, "free if nothing else uses the card"},
      {"xla_shared_card", "Stop every JAX process preallocating 75% of a shared card",
       "export XLA_PYTHON_CLIENT_PREALLOCATE=false  # in every JAX process sharing the card; or "
       "XLA_PYTHON_CLIENT_MEM_FRACTION=.45 in each of two", 2, "can increase fragmentation-driven OOMs"},
      {"mps_watermark", "Raise the MPS high-watermark limit (with care: the system can swap or hang)",
       "export PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0", 3, "free, risks system stability"},
      // macOS lets the GPU wire about two thirds to three quarters of unified memory
      // (recommendedMaxWorkingSetSize); macOS 14+ reads iogpu.wired_limit_mb (mlx-lm's README).
      {"metal_wired_limit", "Raise macOS's limit on GPU-wired unified memory (with care: the system can swap or hang)",
       "sudo sysctl iogpu.wired_limit_mb=N  # macOS 14+: N in MB, below physical RAM (leave the system 8 GB or more); "
       "resets at reboot", 3, "free, risks system stability"},
      {"nccl_buffers", "Shrink NCCL's communication buffers", "export NCCL_BUFFSIZE=1048576  # default 4 MiB per channel", 3,
       "free, slightly slower collectives"},
      // NVLink SHARP (NVSwitch systems, Hopper and later) sets up multicast buffers for each
      // communicator: memory-hungry enough that NVIDIA's own launchers turned it off to save memory
      // (NVIDIA/NeMo-Framework-Launcher#127, NVIDIA/JAX-Toolbox#383).
      {"nccl_nvls_off", "Turn off NVLink SHARP's buffers on NVSwitch systems (H100/H200 HGX)",
       "export NCCL_NVLS_ENABLE=0  # only where NCCL uses NVLS (NCCL_DEBUG=INFO prints \"NVLS\" lines)", 3,
       "free, slower all-reduce inside the node"},
      // NCCL allocates with cudaMalloc, outside PyTorch's caching allocator: memory the cache holds
      // stays unavailable to it (NVIDIA/nccl#295: TensorFlow tuned to leave NCCL room).
      {"nccl_headroom", "Leave NCCL room outside PyTorch's cache",
       "torch.cuda.set_per_process_memory_fraction(0.95)  # before the model is loaded; or torch.cuda.empty_cache() "
       "before a new process group's first collective", 3, "free, up to 5% less for PyTorch"},
      {"find_failing_shape", "Find the operation with the impossible size",
       "CUDA_LAUNCH_BLOCKING=1 python train.py; print the shapes going into the failing op", 1, "free"},
      // A CUDA call that failed outside PyTorch's caching allocator: find the call, then who holds the card.
      {"cuda_launch_blocking", "Report CUDA errors at the call that failed",
       "CUDA_LAUNCH_BLOCKING=1 python train.py  # synchronous kernels: the traceback points at the real call "
       "(slower; for one debugging run)", 1, "free (one slower run)"},
      {"no_caching_allocator_debug", "Run once without PyTorch's cache to see whether it holds the memory",
       "PYTORCH_NO_CUDA_MEMORY_CACHING=1 python train.py  # debugging only: every free goes back to the driver; "
       "if that run gets further, torch.cuda.empty_cache() before the failing call helps", 2,
       "free (one much slower run)"},
      // Memory this process holds outside PyTorch's caching allocator (nvidia-smi's figure less
      // reserved): the CUDA context, NCCL's buffers, and other libraries' own cudaMalloc. cuBLAS and
      // cuDNN workspaces are not among them: PyTorch allocates those from its cache.
      {"outside_allocator_holder", "Find what holds memory outside PyTorch's allocator in this process",
       "NCCL_DEBUG=INFO shows NCCL's buffers; keep CUDA_MODULE_LOADING=LAZY (PyTorch's default; EAGER loads every "
       "kernel); call torch.cuda.mem_get_info() before and after other GPU libraries load (CuPy, TensorRT, ONNX "
       "Runtime, a JAX or TensorFlow runtime in the same process) and cap their pools", 2, "free"},
      {"library_workspace", "Leave room for cuBLAS/cuDNN workspaces and handles",
       // CUBLAS_WORKSPACE_CONFIG=:SIZE_KiB:COUNT; PyTorch's default is :4096:2:16:8 (2 x 4 MiB + 8 x
       // 16 KiB); :16:8 (8 x 16 KiB, CUDA's small deterministic setting) shrinks it, :4096:8 would grow it.
       "torch.backends.cudnn.benchmark = False; export CUBLAS_WORKSPACE_CONFIG=:16:8  # 8 x 16 KiB per handle, "
       "down from :4096:2:16:8", 3, "free, some matmuls slower"},
      // ---- vLLM and serving engines: flags, in the order `oomdoc serve` tries them ----
      {"vllm_restore_gpu_memory_utilization", "Give vLLM back its default share of the card",
       "--gpu-memory-utilization U  # or drop the flag: vLLM's default", 1,
       "free if nothing else shares the card"},
      {"vllm_lower_gpu_memory_utilization", "Ask vLLM for no more than the card has free at startup",
       "--gpu-memory-utilization U  # at most the free share: vLLM checks free memory before loading", 1,
       "free: a smaller KV cache"},
      {"vllm_kv_cache_size", "Ask for a KV cache the card can hold",
       "--kv-cache-memory-bytes N  # or drop it (and --num-gpu-blocks-override): gpu_memory_utilization sizes the cache",
       1, "free"},
      {"vllm_dtype", "Serve in 16 bits (bf16, or fp16 without bf16), not float32",
       "--dtype auto  # the checkpoint's 16-bit dtype; --dtype half on GPUs without bf16", 4,
       "float32's extra precision, rarely needed for inference"},
      {"vllm_max_model_len", "Serve a shorter context", "--max-model-len N", 4, "longest request shrinks"},
      {"vllm_kv_cache_dtype", "Store the KV cache in fp8 (about twice the tokens)",
       "--kv-cache-dtype fp8  # uncalibrated scales can cost some accuracy", 5, "small accuracy risk"},
      {"vllm_max_num_batched_tokens", "Prefill in smaller chunks (fewer tokens per step, a smaller profile run)",
       "--max-num-batched-tokens N", 5, "slower time to first token"},
      {"vllm_max_num_seqs", "Run fewer sequences at once", "--max-num-seqs N", 5, "lower peak throughput"},
      {"vllm_enforce_eager", "Skip CUDA graph capture and its memory", "--enforce-eager", 6, "slower decoding"},
      {"vllm_swap_space", "Pin less host RAM for swapped KV blocks (V0)",
       "--swap-space 1  # GiB per GPU; 0 turns swapping off (preempted requests are recomputed)", 2,
       "preempted requests are recomputed instead of swapped back"},
      // The same for a process that is not known to be vLLM: each engine's switch.
      {"cuda_graphs", "Capture fewer CUDA graphs, or none",
       "vLLM: --enforce-eager; SGLang: --disable-cuda-graph; torch.compile: mode=\"default\" instead of \"reduce-overhead\"",
       6, "slower decoding or steps"},
      // Only when nothing else shares the card: after the flags that cost nothing but speed.
      {"vllm_gpu_memory_utilization", "Give vLLM a budget that matches the card",
       "--gpu-memory-utilization U", 6, "free if nothing else needs the card"},
      {"vllm_tensor_parallel", "Split every layer over more GPUs",
       "--tensor-parallel-size N  # best over NVLink", 9, "more GPUs"},
      {"vllm_pipeline_parallel", "Split the layers into stages on more GPUs",
       "--pipeline-parallel-size N  # the choice for GPUs without NVLink", 9, "more GPUs"},
      {"vllm_quantized_weights", "Smaller weights: fp8 at load time, or a 4-bit checkpoint",
       "--quantization fp8  # or an AWQ/GPTQ checkpoint", 9, "some accuracy"},
      {"vllm_cpu_offload", "Keep part of the weights in CPU memory", "--cpu-offload-gb N", 10, "much slower"},
      // TensorRT-LLM's runtime (trtllm-serve options; the LLM API's KvCacheConfig, whose
      // free_gpu_memory_fraction defaults to 0.9 of the memory free after the engine loads).
      {"trtllm_kv_cache_fraction", "Give the KV cache a smaller share of the free memory",
       "trtllm-serve --kv_cache_free_gpu_memory_fraction 0.8  # LLM API: KvCacheConfig(free_gpu_memory_fraction=0.8)", 5,
       "fewer tokens cached at once"},
      {"trtllm_max_num_tokens", "Schedule fewer tokens and requests per step",
       "trtllm-serve --max_num_tokens 4096 --max_batch_size 64", 5, "lower peak throughput"},
      // PaddlePaddle's memory flags (paddlepaddle.org.cn, guides/flags/memory_en.html): naive_best_fit
      // reserves FLAGS_fraction_of_gpu_memory_to_use of the card up front (Paddle 1.x's default, and
      // inference builds'); the pip package's default since 2.0 is auto_growth.
      {"paddle_fraction", "Size the share of the card Paddle reserves up front",
       "export FLAGS_fraction_of_gpu_memory_to_use=0.5  # naive_best_fit reserves this share at startup: lower it when "
       "other processes share the card, raise it (below 1.0) when Paddle has the card alone", 1, "free"},
      {"paddle_eager_delete", "Free each variable as soon as nothing needs it (Paddle 1.x)",
       "export FLAGS_eager_delete_tensor_gb=0.0  # garbage collection of variables; negative values turn it off", 1, "free"},
      {"paddle_auto_growth", "Let Paddle take GPU memory as it needs it, not a fixed share up front",
       "export FLAGS_allocator_strategy=auto_growth  # the pip package's default since 2.0; naive_best_fit reserves the card",
       2, "can fragment more"},
      {"paddle_memory_limit", "Raise (or drop) the cap on Paddle's GPU memory",
       "export FLAGS_gpu_memory_limit_mb=N  # the most this process may take on the card; unset: no cap", 2,
       "free if nothing else needs the card"},
      // MXNet's environment variables (mxnet.apache.org, faq/env_var): the GPU memory pool's type
      // (Naive by default) and reserve (5% by default), and cuDNN's autotuning of convolutions.
      {"mxnet_cudnn_autotune", "Skip cuDNN autotuning's trial runs (MXNet)",
       "export MXNET_CUDNN_AUTOTUNE_DEFAULT=0  # no trial of every convolution algorithm with its workspace", 2,
       "maybe slower convolutions"},
      {"mxnet_pool_round", "Let MXNet's memory pool reuse buffers of rounded sizes",
       "export MXNET_GPU_MEM_POOL_TYPE=Round  # sizes rounded up (to powers of two below 2^MXNET_GPU_MEM_POOL_ROUND_LINEAR_CUTOFF) "
       "so freed buffers fit later requests", 2, "some memory lost to rounding"},
      {"mxnet_pool_reserve", "Keep more of the card outside MXNet's memory pool",
       "export MXNET_GPU_MEM_POOL_RESERVE=10  # percent kept for cuDNN handles and kernel launches (default 5)", 2,
       "a smaller pool"},
      // TensorRT's builder: the workspace pool's limit (IBuilderConfig::setMemoryPoolLimit with
      // MemoryPoolType::kWORKSPACE; trtexec --memPoolSize=workspace:N, N in MiB), and the largest input
      // shapes of the optimization profile, which size the engine's activations.
      {"tensorrt_workspace", "Cap TensorRT's builder workspace below what the card can give",
       "config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 4 << 30)  # C++: config->setMemoryPoolLimit("
       "MemoryPoolType::kWORKSPACE, 4ULL << 30); trtexec --memPoolSize=workspace:4096", 2,
       "tactics that need more are skipped"},
      {"tensorrt_smaller_shapes", "Build for smaller inputs: the optimization profile's largest shapes, the batch",
       "trtexec --maxShapes=input:4x3x640x640  # profile.set_shape(name, min, opt, max) with a smaller max", 5,
       "smaller batches or inputs"},
      {"trtllm_tensor_parallel", "Split the model over more GPUs",
       "trtllm-serve <model> --tp_size 2  # LLM API: LLM(model, tensor_parallel_size=2); MoE experts: --ep_size / "
       "moe_expert_parallel_size", 9, "more GPUs"},
      // text-generation-inference's launcher flags (docs: "Text-generation-launcher arguments").
      {"tgi_max_batch_prefill_tokens", "Prefill fewer tokens per batch",
       "--max-batch-prefill-tokens 2048  # half the value in use (4096 was TGI 1.x's default)", 5, "slower prefill of long or many prompts"},
      {"tgi_max_total_tokens", "Cap the tokens of one request",
       "--max-input-tokens 2048 --max-total-tokens 4096", 5, "shorter prompts and answers"},
      {"tgi_quantize", "Serve the model quantized",
       "--quantize bitsandbytes-nf4  # or awq / gptq with a pre-quantized checkpoint", 6, "some quality; speed"},
      {"tgi_num_shard", "Shard the model over more GPUs", "--num-shard 2", 8, "more GPUs"},
      // ONNX Runtime's CUDA execution provider options (onnxruntime.ai, "CUDA Execution Provider":
      // arena_extend_strategy defaults to kNextPowerOfTwo, gpu_mem_limit to no limit).
      {"ort_arena_same_as_requested", "Let ONNX Runtime's arena grow by what is asked, within a limit",
       "providers=[(\"CUDAExecutionProvider\", {\"arena_extend_strategy\": \"kSameAsRequested\", "
       "\"gpu_mem_limit\": 8 * 1024**3})]", 1, "more, smaller allocations"},
      // SGLang's flags (server_args.py; its troubleshooting page, docs.sglang.ai/references/faq.html,
      // and the advice its failed CUDA-graph capture prints).
      {"sglang_mem_fraction", "Give SGLang's static pool a larger share", "--mem-fraction-static 0.9", 4, "free"},
      {"sglang_lower_mem_fraction", "Give SGLang's static pool (weights and KV cache) a smaller share",
       "--mem-fraction-static 0.8  # 0.05-0.1 below the value in use: more room for activations and CUDA graphs", 4,
       "fewer KV-cache tokens: less concurrency"},
      {"sglang_cuda_graph_max_bs", "Capture CUDA graphs for smaller batches only", "--cuda-graph-max-bs 16", 5,
       "larger batches run without graphs"},
      {"sglang_chunked_prefill_size", "Prefill long prompts in smaller chunks", "--chunked-prefill-size 4096  # or 2048", 5,
       "slower prefill of long prompts"},
      {"sglang_max_running_requests", "Decode fewer requests at once", "--max-running-requests N", 5,
       "lower peak throughput"},
      {"sglang_disable_cuda_graph", "Skip CUDA graph capture and its memory", "--disable-cuda-graph", 6,
       "much slower decoding"},
      {"sglang_tensor_parallel", "Split every layer over more GPUs", "--tp-size N", 9, "more GPUs"},
      // ---- image-generation front ends: their launch flags and nodes ----
      // ComfyUI's cli_args.py: --lowvram splits the model, --novram keeps weights in RAM,
      // --reserve-vram leaves N GB to other programs.
      {"comfyui_lowvram", "Start ComfyUI in low-VRAM mode",
       "python main.py --lowvram  # --novram if that is not enough; --reserve-vram 1.0 leaves 1 GB to other programs "
       "(the portable build: add the flag to run_nvidia_gpu.bat)", 2, "slower sampling"},
      {"comfyui_tiled_vae", "Decode with the VAE Decode (Tiled) node",
       "VAE Decode (Tiled) in place of VAE Decode, tile_size 512 or smaller", 3, "none visible"},
      {"comfyui_fp8_weights", "Load the diffusion model in fp8, or a GGUF quantization of it",
       "Load Diffusion Model: weight_dtype fp8_e4m3fn  # or a GGUF model through the ComfyUI-GGUF nodes", 6,
       "slight quality loss"},
      // AUTOMATIC1111's cmd_args: --medvram moves parts of the model to the CPU between steps,
      // --lowvram does so layer by layer (for 4 GB cards and smaller).
      {"webui_low_vram", "Start the webui with --medvram (--lowvram on 4 GB cards)",
       "set COMMANDLINE_ARGS=--medvram --xformers  # webui-user.bat (export COMMANDLINE_ARGS=... in webui-user.sh)", 2,
       "slower generation"},
      {"smaller_image", "Smaller images or batches per generation",
       "a smaller width/height or batch size (upscale afterwards); fewer frames for video", 5, "smaller output"},
      // ---- training and inference recipe, cheapest first ----
      {"smaller_batch", "Smaller micro-batch, same effective batch through accumulation",
       "per_device_train_batch_size=B/2, gradient_accumulation_steps=2*A", 5, "some throughput"},
      {"fsdp_sync_each_batch", "With FSDP and accumulation, reduce-scatter gradients after every micro-batch",
       sync_each_batch_snippet, 5,
       "one reduce-scatter per micro-batch instead of per step"},
      {"shorter_sequence", "Shorter sequences (truncate, or pack without padding)",
       "max_seq_length=L  # or padding_free=True / group_by_length=True", 6, "truncated examples"},
      // Inference with transformers (generate, evaluation): the KV cache and the logits grow with
      // the sequences at once and their length; the Trainer's evaluation gathers every batch's
      // logits on the GPU unless eval_accumulation_steps moves them to the CPU.
      {"smaller_inference_batch", "Fewer sequences at once",
       "model.generate(**batch) over batches of B/2  # evaluation: per_device_eval_batch_size=B/2, eval_accumulation_steps=1",
       5, "some throughput"},
      {"shorter_generation", "Fewer new tokens or shorter prompts",
       "model.generate(..., max_new_tokens=N)  # and tokenizer(..., truncation=True, max_length=L)", 6,
       "shorter answers or truncated prompts"},
      {"quantized_kv_cache", "Quantize the KV cache during generation",
       "model.generate(..., cache_implementation=\"quantized\", cache_config={\"backend\": \"quanto\", \"nbits\": 4})  "
       "# transformers >= 4.42, optimum-quanto", 7, "small quality loss, slower decoding"},
      {"smaller_input", "Smaller inputs per step (batch, image size, sequence length)",
       "batch_size=B/2  # check the shape: batch x seq x vocab, image size", 5, "some throughput"},
      {"bf16_hidden_states", "Keep embeddings, norms and head in bf16 after prepare_model_for_kbit_training",
       kBf16HiddenStatesSnippet,
       4, "small: norms in 16 bits (or skip prepare_model_for_kbit_training)"},
      {"mixed_precision", "bf16 mixed precision instead of fp32", "bf16=True  # TrainingArguments", 7, "small"},
      {"eight_bit_optimizer", "8-bit (paged) optimizer states", "optim=\"paged_adamw_8bit\"  # bitsandbytes", 7,
       "small"},
      {"double_quant", "Double quantization of the 4-bit base's constants",
       "BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_use_double_quant=True)", 7, "negligible"},
      {"fused_kernels", "Fused kernels: the loss without full logits, leaner norms and activations (Liger)",
       "use_liger_kernel=True  # TrainingArguments; needs liger-kernel", 7, "small: same results"},
      {"zero3_live_parameters", "Keep fewer ZeRO-3 parameters gathered and prefetched",
       "\"zero_optimization\": {\"stage3_max_live_parameters\": 1e8, \"stage3_max_reuse_distance\": 1e8, "
       "\"stage3_prefetch_bucket_size\": 1e7}  # DeepSpeed's defaults: 1e9, 1e9, 5e7", 3,
       "some speed: less overlap of gathering with compute"},
      {"gradient_checkpointing", "Recompute activations in backward instead of keeping them",
       "gradient_checkpointing=True  # model.gradient_checkpointing_enable()", 8, "about 20-33% more compute"},
      {"pure_bf16", "Train in pure bf16: weights, gradients and optimizer states without an fp32 copy",
       "from_pretrained(..., torch_dtype=torch.bfloat16)  # torchtune dtype: bf16; LLaMA-Factory pure_bf16: true", 8,
       "updates below bf16's resolution are lost"},
      {"jax_float32", "Compute in float32 instead of float64",
       "jax.config.update(\"jax_enable_x64\", False)  # or x.astype(jnp.float32) for the large arrays", 3,
       "float64's extra precision"},
      {"lora", "Train LoRA adapters, or QLoRA on a 4-bit base",
       "peft.LoraConfig(r=16, target_modules=\"all-linear\"); BitsAndBytesConfig(load_in_4bit=True)", 9,
       "quality and method change"},
      // At model-load time (nothing has run: the training ladder cannot act).
      {"load_in_bf16", "Load the weights in bf16 instead of fp32",
       "from_pretrained(..., torch_dtype=torch.bfloat16)  # without it transformers loads fp32: twice the memory", 1,
       "none for inference (fp16 on GPUs without bf16)"},
      {"quantize_model", "Load the model quantized (4-bit or 8-bit) or pick a quantized checkpoint",
       "from_pretrained(..., quantization_config=BitsAndBytesConfig(load_in_4bit=True))", 9, "some quality"},
      // llama.cpp, cheapest first: the same order as fit's llama.cpp ladder.
      {"ggml_flash_attention", "Flash attention in llama.cpp: no context-sized f32 score matrices",
       "-fa  # --flash-attn", 3, "none: usually faster"},
      {"ggml_kv_cache_type", "Store llama.cpp's KV cache in 8 bits (about half the KV memory)",
       "-ctk q8_0 -ctv q8_0 -fa  # a quantized V cache needs flash attention", 5, "small quality loss"},
      {"ggml_smaller_quant", "A smaller GGUF quantization of the model",
       "a lower-bit GGUF file (e.g. Q4_K_M instead of Q8_0), or llama-quantize", 6, "some quality"},
      {"ggml_smaller_context", "A smaller context or micro-batch in llama.cpp",
       "-c N  # N: the context in tokens, below the n_ctx llama.cpp printed (KV cache and compute buffer); -ub 256 "
       "(smaller compute buffer)", 7, "longer prompts are cut"},
      {"ggml_fewer_layers", "Offload fewer layers to the GPU",
       "-ngl N  # the other layers run on the CPU", 9, "much slower"},
      {"shard_model", "Shard the model across the GPUs (FSDP or DeepSpeed ZeRO) instead of a full replica and full gradients on each",
       "TrainingArguments(fsdp=\"full_shard auto_wrap\")  # or deepspeed ZeRO-2/3; oomdoc fit <job> --gpus N shows which fits",
       9, "communication between the GPUs every step"},
      {"offload", "Offload optimizer states or parameters to CPU memory",
       "DeepSpeed ZeRO offload_optimizer/offload_param, or device_map=\"auto\" with max_memory", 10, "much slower"},
      {"host_memory", "Free or add host (CPU) memory; avoid large pinned buffers",
       "pin_memory=False; fewer DataLoader workers; smaller prefetch", 4, "slower data loading"},
      // A process the OOM killer ended for host RAM, cheapest first.
      {"low_cpu_mem_usage", "Load the checkpoint without a full extra copy in RAM",
       "from_pretrained(..., low_cpu_mem_usage=True)  # implied by device_map=\"auto\"; safetensors shards are "
       "memory-mapped one at a time; FSDP: fsdp_cpu_ram_efficient_loading=True loads on rank 0 only", 1, "free"},
      {"fewer_dataloader_workers", "Fewer DataLoader workers",
       "DataLoader(..., num_workers=2, persistent_workers=False, prefetch_factor=2)  # each worker is a process "
       "with its own copy of the dataset object", 3, "slower data loading"},
      // DataLoader workers hand batches to the main process through /dev/shm; Docker gives a
      // container 64 MB of it (docker run --shm-size).
      {"shm_size", "Give the container more shared memory (/dev/shm)",
       "docker run --shm-size=16g ...  # or --ipc=host; Kubernetes: an emptyDir with medium: Memory mounted at /dev/shm",
       1, "free"},
      // Building a CUDA extension from source (flash-attn, DeepSpeed ops, xformers): ninja runs a
      // compiler per core, and each nvcc/cc1plus job can take several GB of RAM (flash-attn's README
      // asks for MAX_JOBS=4 on machines with less than 96 GB of RAM and many cores).
      {"build_max_jobs", "Build with fewer parallel compiler jobs",
       "MAX_JOBS=4 pip install flash-attn --no-build-isolation  # or a prebuilt wheel; each compiler job can take "
       "several GB of RAM", 1, "free; a slower build"},
      // XLA's GPU client caps its pinned host memory (host offloading, transfers) separately.
      {"xla_host_memory_limit", "Raise XLA's host memory limit",
       "export XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB=N  # above what the request needs, within the machine's RAM", 2,
       "free, if the machine has the RAM"},
      {"add_swap", "Add swap, so a short peak pages out instead of ending the run",
       "sudo fallocate -l 32G /swapfile && sudo chmod 600 /swapfile && sudo mkswap /swapfile && sudo swapon /swapfile",
       3, "free; very slow while the peak lasts"},
      {"more_host_memory", "More host RAM, or a higher memory limit for the job",
       "a machine with more RAM, or the job's limit: Slurm --mem=, docker run --memory=, Kubernetes resources.limits.memory",
       11, "hardware or quota"},
      {"bigger_gpu", "A GPU with more memory, or more GPUs",
       "oomdoc fit <job> --gpu <name>  # finds the smallest that fits", 11, "hardware"},
  };
  return catalog;
}

const FixInfo& fix_info(std::string_view id) {
  for (const auto& fix : fix_catalog()) {
    if (fix.id == id) return fix;
  }
  std::cerr << "oomdoc: internal error: unknown fix id " << id << "\n";
  std::abort();
}

std::optional<std::string> fix_snippet_with_value(std::string_view id, FixVariant variant, std::string_view value,
                                                  std::string_view why) {
  struct Valued {
    std::string_view id;
    FixVariant variant;
    std::string_view snippet;   // {value}, {why}
  };
  static constexpr Valued kValued[] = {
      {"xla_host_memory_limit", FixVariant::kDefault,
       "export XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB={value}  # {why}; the machine must have that much RAM free"},
      {"ggml_smaller_context", FixVariant::kDefault, "-c {value}  # {why}; -ub 256 shrinks the compute buffer"},
      {"ggml_smaller_context", FixVariant::kOllama,
       "/set parameter num_ctx {value}  # {why}, in `ollama run`; PARAMETER num_ctx {value} in a Modelfile, "
       "\"options\": {{\"num_ctx\": {value}}} in the API, OLLAMA_CONTEXT_LENGTH={value} for the server's default"},
  };
  for (const Valued& v : kValued) {
    if (v.id == id && v.variant == variant) {
      return fmt::format(fmt::runtime(v.snippet), fmt::arg("value", value), fmt::arg("why", why));
    }
  }
  return std::nullopt;
}

std::optional<std::string_view> fix_variant_snippet(std::string_view id, FixVariant variant) {
  struct Variant {
    std::string_view id;
    FixVariant variant;
    std::string_view snippet;
  };
  static constexpr Variant kVariants[] = {
      {"end_other_processes", FixVariant::kAmd, "rocm-smi --showpids  # or amd-smi process; then kill <pid>"},
      {"end_other_processes", FixVariant::kIntel, "xpu-smi ps  # Intel XPU Manager; then kill <pid>"},
      {"check_device_and_limits", FixVariant::kAmd,
       "HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES, torch.cuda.set_per_process_memory_fraction(), the tensor's .device"},
      {"check_device_and_limits", FixVariant::kIntel, "ZE_AFFINITY_MASK (which devices the process sees), the tensor's .device"},
      {"cuda_launch_blocking", FixVariant::kAmd,
       "HIP_LAUNCH_BLOCKING=1 python train.py  # synchronous kernels: the traceback points at the real call "
       "(slower; for one debugging run)"},
      {"expandable_segments", FixVariant::kAmd,
       "export PYTORCH_HIP_ALLOC_CONF=expandable_segments:True PYTORCH_ALLOC_CONF=expandable_segments:True  "
       "# ROCm builds read the HIP name (whichever name the message prints), 2.8+ the generic one"},
      {"expandable_segments", FixVariant::kAscend,
       "export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True  # torch_npu reads this, not "
       "PYTORCH_CUDA_ALLOC_CONF; max_split_size_mb:128 where expandable segments are unavailable"},
      {"max_split_size", FixVariant::kTorch14,
       "pip install -U torch  # 1.4 and older read no PYTORCH_CUDA_ALLOC_CONF; newer 1.x take max_split_size_mb:128"},
      {"library_workspace", FixVariant::kVllmServer,
       "export CUBLAS_WORKSPACE_CONFIG=:16:8  # in vLLM's environment: 8 x 16 KiB per handle, down from :4096:2:16:8"},
      // llama.cpp falls back to ordinary (pageable) memory when pinning fails (ggml-cuda.cu).
      {"host_memory", FixVariant::kLlamaCpp,
       "export GGML_CUDA_NO_PINNED=1  # skip pinned buffers; or free RAM, or a smaller -c / -b"},
      {"host_memory", FixVariant::kLlamaCppHostRam,
       "drop --no-mmap (Ollama: use_mmap true); raise -ngl (Ollama: num_gpu); close other programs"},
      // Ollama runs llama.cpp with its own names for the same settings (docs/faq.md, docs/modelfile.md).
      {"host_memory", FixVariant::kOllama,
       "ollama pull <model>:<tag>-q4_K_M; PARAMETER num_ctx 4096 (a Modelfile) or OLLAMA_CONTEXT_LENGTH=4096"},
      {"ggml_flash_attention", FixVariant::kOllama, "OLLAMA_FLASH_ATTENTION=1 ollama serve  # in the server's environment"},
      {"ggml_kv_cache_type", FixVariant::kOllama,
       "OLLAMA_FLASH_ATTENTION=1 OLLAMA_KV_CACHE_TYPE=q8_0 ollama serve  # a quantized KV cache needs flash attention"},
      {"ggml_smaller_context", FixVariant::kOllama,
       "/set parameter num_ctx N  # in `ollama run`; PARAMETER num_ctx N in a Modelfile, or \"options\": {\"num_ctx\": N} "
       "in the API; OLLAMA_CONTEXT_LENGTH=N for the server's default"},
      {"ggml_fewer_layers", FixVariant::kOllama,
       "/set parameter num_gpu N  # layers on the GPU; PARAMETER num_gpu N in a Modelfile, \"num_gpu\": N in the API"},
      {"ggml_smaller_quant", FixVariant::kOllama, "ollama pull <model>:<tag>-q4_K_M  # a smaller quantization of the same model"},
      {"check_device_and_limits", FixVariant::kPaddle,
       "CUDA_VISIBLE_DEVICES=1 python train.py  # or paddle.set_device('gpu:1'): a GPU nothing else uses"},
      {"smaller_input", FixVariant::kPaddle,
       "batch_size=B/2  # paddle.io.DataLoader(..., batch_size=...); PaddleOCR/PaddleDetection configs: batch_size_per_card"},
      {"smaller_input", FixVariant::kMxnet,
       "batch_size=B/2  # mx.io iterators / gluon.data.DataLoader; with several GPUs the batch is split over the contexts"},
      {"tensorrt_workspace", FixVariant::kDeepStream,
       "workspace-size=4096  # [property] of the nvinfer config (config_infer_*.txt), in MB; delete the built engine "
       "file so it is rebuilt"},
      {"tensorrt_smaller_shapes", FixVariant::kDeepStream,
       "batch-size=1  # [property] of the nvinfer config (and the streammux batch-size); delete the built engine file"},
      {"end_other_processes", FixVariant::kDirectMl,
       "Task Manager > Details: add the \"Dedicated GPU memory\" column, close the programs that hold it (browsers, "
       "games, other Python processes)"},
      // DeepSpeed's own config (deepspeed.initialize(config=...)): the batch, precision, ZeRO stage and
      // offload are its keys (deepspeed.ai/docs/config-json); the 8-bit optimizer is a client one.
      {"smaller_batch", FixVariant::kDeepSpeed,
       "\"train_micro_batch_size_per_gpu\": B/2, \"gradient_accumulation_steps\": 2*G  # DeepSpeed config; "
       "train_batch_size stays micro x accumulation x GPUs"},
      {"mixed_precision", FixVariant::kDeepSpeed, "\"bf16\": {\"enabled\": true}  # DeepSpeed config (\"fp16\" on GPUs before Ampere)"},
      {"eight_bit_optimizer", FixVariant::kDeepSpeed,
       "deepspeed.initialize(model=model, optimizer=bnb.optim.AdamW8bit(model.parameters()), config=...)  # a client "
       "optimizer instead of the config's \"optimizer\" block (ZeRO stage 0-2)"},
      {"gradient_checkpointing", FixVariant::kDeepSpeed,
       "model.gradient_checkpointing_enable()  # transformers models; else deepspeed.checkpointing.checkpoint(block, x) "
       "in the forward"},
      {"shard_model", FixVariant::kDeepSpeed, "\"zero_optimization\": {\"stage\": 3}  # DeepSpeed config; stage 2 shards "
                                              "the optimizer states and gradients only"},
      {"offload", FixVariant::kDeepSpeed,
       "\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}}  "
       "# DeepSpeed config; stage 3 adds \"offload_param\""},
      {"quantize_model", FixVariant::kMlx, "mlx_lm.convert --hf-path <model> -q --q-bits 4  # or an mlx-community 4-bit model"},
      {"shorter_sequence", FixVariant::kMlx, "--max-kv-size N  # mlx_lm: a rotating KV cache of N tokens; or a shorter prompt"},
      // ComfyUI on AMD or Intel cards starts from main.py: the portable build's launcher is NVIDIA's.
      {"comfyui_lowvram", FixVariant::kAmd,
       "python main.py --lowvram  # --novram if that is not enough; --reserve-vram 1.0 leaves 1 GB to other programs"},
      {"comfyui_lowvram", FixVariant::kIntel,
       "python main.py --lowvram  # --novram if that is not enough; --reserve-vram 1.0 leaves 1 GB to other programs"},
      {"host_memory", FixVariant::kTensorFlowHost,
       "smaller input pipeline buffers (tf.data prefetch, num_parallel_calls); "
       "TF_GPU_HOST_MEM_LIMIT_IN_MB caps TensorFlow's pinned host pool"},
  };
  for (const Variant& v : kVariants) {
    if (v.id == id && v.variant == variant) return v.snippet;
  }
  return std::nullopt;
}

std::string_view fix_snippet(std::string_view id, FixVariant variant) {
  return fix_variant_snippet(id, variant).value_or(fix_info(id).snippet);
}

Fix make_fix(std::string_view id, std::string detail, std::string snippet_override) {
  const FixInfo& info = fix_info(id);
  Fix fix;
  fix.id = std::string(info.id);
  fix.title = std::string(info.title);
  fix.detail = std::move(detail);
  fix.snippet = snippet_override.empty() ? std::string(info.snippet) : std::move(snippet_override);
  fix.cost_rank = info.cost_rank;
  return fix;
}

void order_fixes(std::vector<Fix>& fixes) {
  std::stable_sort(fixes.begin(), fixes.end(), [](const Fix& a, const Fix& b) { return a.cost_rank < b.cost_rank; });
  std::set<std::string> seen;
  std::vector<Fix> unique;
  for (auto& fix : fixes) {
    if (seen.insert(fix.id).second) unique.push_back(std::move(fix));
  }
  fixes = std::move(unique);
}

}  // namespace oomdoc
