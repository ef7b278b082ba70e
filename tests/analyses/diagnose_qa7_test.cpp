// The seventh explain QA round (tests/fixtures/explain/real/README.md names each thread): frameworks
// and runtimes oomdoc did not read — PaddlePaddle, MXNet, TensorRT, DirectML, the TPU runtime's HBM
// reservation, Metal's buffer-size limit, TensorRT-LLM's executor — each with its figures in bytes
// and fixes in its own settings.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "analyses/diagnose.h"
#include "analyses/explain.h"
#include "core/units.h"
#include "report/explain_terminal.h"
#include "report/style.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

using testing::explain_fixture;
using testing::explain_text;
using testing::fix;
using testing::fix_ids;
using testing::has_fix;
using testing::only_event;

bool no_training_recipe(const Diagnosis& d) {
  return std::none_of(d.fixes.begin(), d.fixes.end(), [](const Fix& f) {
    return f.snippet.find("per_device_train_batch_size") != std::string::npos ||
           f.snippet.find("TrainingArguments") != std::string::npos ||
           f.snippet.find("PYTORCH_") != std::string::npos;
  });
}

// ---- PaddlePaddle ----

// Paddle 2.x: the request, what was allocated on the GPU and what was available, in binary units
// (HumanReadableSize divides by 1024): 98.000244MB is 102,760,704 bytes.
TEST(DiagnoseQa7, PaddleAllocatedAndAvailableAreBinary) {
  const ExplainedEvent x = only_event(explain_fixture("paddle_allocated_available_zero.log"));
  EXPECT_EQ(x.event.framework, "paddle");
  EXPECT_EQ(x.event.format, "paddle_gpu_oom");
  EXPECT_EQ(x.event.device, 0);
  EXPECT_EQ(x.event.bytes("requested"), 102760704u);
  EXPECT_EQ(x.event.bytes("gpu_allocated"), 6442450944u);
  EXPECT_EQ(x.event.bytes("free"), 0u);
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.capacity_title, "the card was full (Paddle saw 0 B available)");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "Paddle could not allocate 98.00 MiB on GPU 0: only 0 B was available, with "
                                        "6.00 GiB allocated.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"end_other_processes", "check_device_and_limits",
                                                            "paddle_auto_growth", "smaller_input", "bigger_gpu"}));
  EXPECT_EQ(fix(x.diagnosis, "check_device_and_limits").snippet,
            "CUDA_VISIBLE_DEVICES=1 python train.py  # or paddle.set_device('gpu:1'): a GPU nothing else uses");
  EXPECT_EQ(fix(x.diagnosis, "paddle_auto_growth").snippet,
            "export FLAGS_allocator_strategy=auto_growth  # the pip package's default since 2.0; naive_best_fit reserves "
            "the card");
  EXPECT_EQ(fix(x.diagnosis, "smaller_input").detail,
            "The request is 98.00 MiB with 0 B available: the peak must drop by at least 98.00 MiB. Activations scale "
            "with the batch; halve it.");
  EXPECT_TRUE(no_training_recipe(x.diagnosis));
}

// PaddleOCR's form without the allocated clause, after "Error Message Summary", then glog's stack.
TEST(DiagnoseQa7, PaddleOcrWithoutAllocatedClause) {
  const ExplainedEvent big = only_event(explain_fixture("paddleocr_3gb_request.log"));
  EXPECT_EQ(big.event.format, "paddle_gpu_oom");
  EXPECT_EQ(big.event.bytes("requested"), 3355443200u);
  EXPECT_EQ(big.event.bytes("free"), 123469824u);
  EXPECT_EQ(big.event.quantity("gpu_allocated"), nullptr);
  EXPECT_EQ(big.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(big.diagnosis.capacity_title, "the card had less available than the request");

  const ExplainedEvent small = only_event(explain_fixture("paddleocr_cuda_allocator.log"));
  EXPECT_EQ(small.event.bytes("requested"), 26216704u);
  EXPECT_EQ(small.event.bytes("free"), 15925248u);
  EXPECT_EQ(small.diagnosis.fixes.at(0).id, "end_other_processes");
}

// Paddle 1.x names the share its pool reserved (0.98): raising it has nothing more to give.
TEST(DiagnoseQa7, Paddle1xFractionFlag) {
  const ExplainedEvent x = only_event(explain_fixture("paddle_1x_fraction_flag.log"));
  EXPECT_EQ(x.event.bytes("requested"), 152535296u);
  EXPECT_EQ(x.event.bytes("free"), 75825152u);
  const FieldValue* fraction = x.event.field("fraction_of_gpu_memory_to_use");
  ASSERT_NE(fraction, nullptr);
  EXPECT_DOUBLE_EQ(std::get<double>(*fraction), 0.98);
  EXPECT_FALSE(has_fix(x.diagnosis, "paddle_fraction"));
  EXPECT_TRUE(has_fix(x.diagnosis, "paddle_eager_delete"));
  EXPECT_EQ(x.diagnosis.evidence.at(2),
            "FLAGS_fraction_of_gpu_memory_to_use is already 0.98: a larger share has nothing more to give.");
  EXPECT_EQ(fix(x.diagnosis, "paddle_eager_delete").snippet,
            "export FLAGS_eager_delete_tensor_gb=0.0  # garbage collection of variables; negative values turn it off");
}

// The same message at a share below 0.95 gets a concrete larger share.
TEST(DiagnoseQa7, Paddle1xFractionBelowTheTopIsRaised) {
  const ExplainedEvent x = only_event(explain_text(
      "Out of memory error on GPU 0. Cannot allocate 145.468994MB GPU memory, available memory is 72.312500MB.\n"
      "If no, please try to decrease the batch size of your model. Or try to set environment variable "
      "FLAGS_fraction_of_gpu_memory_to_use to a higher value. Currently, it is 0.800000.\n"));
  EXPECT_EQ(fix(x.diagnosis, "paddle_fraction").snippet, "export FLAGS_fraction_of_gpu_memory_to_use=0.85");
}

// The 2018 fluid check at startup, in bytes: the first chunk did not fit what was free, before this
// process allocated anything.
TEST(DiagnoseQa7, PaddleFluidEnforceIsOtherProcesses) {
  const ExplainedEvent x = only_event(explain_fixture("paddle_fluid_enforce_allocating.log"));
  EXPECT_EQ(x.event.format, "paddle_enforce_allocating");
  EXPECT_EQ(x.event.bytes("requested"), 10513462067u);
  EXPECT_EQ(x.event.bytes("free"), 1369702144u);
  EXPECT_EQ(x.diagnosis.cause, "other_processes");
  EXPECT_EQ(x.diagnosis.secondary_causes, (std::vector<std::string>{"framework_preallocation"}));
  EXPECT_EQ(fix_ids(x.diagnosis),
            (std::vector<std::string>{"end_other_processes", "check_device_and_limits", "paddle_fraction"}));
  EXPECT_EQ(fix(x.diagnosis, "paddle_fraction").detail,
            "To share the card, lower the share Paddle reserves until it fits in the 1.28 GiB available.");
}

// ---- MXNet ----

// The pooled allocator's cudaMalloc failure, in an MXNetError and in dmlc's logging line: MXNet's
// own memory settings, no figures.
TEST(DiagnoseQa7, MxnetPooledStorageManager) {
  for (const char* name : {"mxnet_pooled_storage_error.log", "mxnet_dmlc_logging.log"}) {
    const ExplainedEvent x = only_event(explain_fixture(name));
    EXPECT_EQ(x.event.framework, "mxnet") << name;
    EXPECT_EQ(x.event.format, "mxnet_cudamalloc") << name;
    EXPECT_EQ(x.diagnosis.cause, "driver_oom_no_details") << name;
    EXPECT_EQ(fix_ids(x.diagnosis),
              (std::vector<std::string>{"end_other_processes", "mxnet_cudnn_autotune", "mxnet_pool_round",
                                        "mxnet_pool_reserve", "smaller_input", "bigger_gpu"})) << name;
    EXPECT_TRUE(no_training_recipe(x.diagnosis)) << name;
  }
  const ExplainedEvent x = only_event(explain_fixture("mxnet_pooled_storage_error.log"));
  EXPECT_EQ(fix(x.diagnosis, "mxnet_pool_round").snippet,
            "export MXNET_GPU_MEM_POOL_TYPE=Round  # sizes rounded up (to powers of two below "
            "2^MXNET_GPU_MEM_POOL_ROUND_LINEAR_CUTOFF) so freed buffers fit later requests");
  EXPECT_EQ(fix(x.diagnosis, "mxnet_cudnn_autotune").snippet,
            "export MXNET_CUDNN_AUTOTUNE_DEFAULT=0  # no trial of every convolution algorithm with its workspace");
  EXPECT_EQ(fix(x.diagnosis, "mxnet_pool_reserve").snippet,
            "export MXNET_GPU_MEM_POOL_RESERVE=10  # percent kept for cuDNN handles and kernel launches (default 5)");
}

// The same words from another program (no MXNet near) are a CUDA OOM without figures; the retry
// form is read too.
TEST(DiagnoseQa7, BareCudaMallocFailureIsAGenericCudaOom) {
  const ExplainedEvent x = only_event(explain_text("[12:00:01] worker.cc:88: cudaMalloc retry failed: out of memory\n"));
  EXPECT_EQ(x.event.framework, "cuda");
  EXPECT_EQ(x.event.format, "cuda_malloc_failed");
  ASSERT_NE(x.event.field("retried"), nullptr);
  EXPECT_TRUE(std::get<bool>(*x.event.field("retried")));
  EXPECT_EQ(x.diagnosis.cause, "driver_oom_no_details");
  EXPECT_EQ(x.diagnosis.fixes.at(0).id, "end_other_processes");
}

// ---- TensorRT ----

// The builder's failed tactic workspace: the "Error Code 2" lines, the 16 GiB request and "Skipping
// tactic" are one non-fatal warning (exit status 1: no error).
// A container's one "Process P has M" line that is this process (its host PID) is labelled so in the
// headline's figures.
TEST(DiagnoseQa7, TheHostPidOfThisProcessIsLabelled) {
  const ExplainReport r = explain_text(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of 39.39 GiB of "
      "which 1.03 GiB is free. Process 23144 has 38.35 GiB memory in use. Of the allocated memory 35.20 GiB is allocated "
      "by PyTorch, and 2.63 GiB is reserved by PyTorch but unallocated.\n");
  const std::string plain = render_explain(r, Style::plain());
  EXPECT_NE(plain.find("· pid 23144 38.35 GiB (this process)\n"), std::string::npos) << plain;
}

// The text lists the six cheapest fixes and names the rest, which --json carries.
TEST(DiagnoseQa7, TextNamesTheFixesItLeavesOut) {
  const ExplainReport r = explain_text(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of "
      "which 1.05 GiB is free. Including non-PyTorch memory, this process has 78.09 GiB memory in use. Of the allocated "
      "memory 70.00 GiB is allocated by PyTorch, and 7.50 GiB is reserved by PyTorch but unallocated.\n");
  const ExplainedEvent x = only_event(r);
  ASSERT_GT(x.diagnosis.fixes.size(), 6u);
  std::string rest;
  for (size_t i = 6; i < x.diagnosis.fixes.size(); ++i) rest += (rest.empty() ? "" : "; ") + x.diagnosis.fixes[i].title;
  const std::string plain = render_explain(r, Style::plain());
  EXPECT_NE(plain.find(fmt::format("    (+{} more in --json, dearer: {})\n", x.diagnosis.fixes.size() - 6, rest)),
            std::string::npos) << plain;
  EXPECT_EQ(plain.find("    7. "), std::string::npos);
}

TEST(DiagnoseQa7, TensorrtTacticWorkspaceIsAWarning) {
  const ExplainReport r = explain_fixture("tensorrt_tactic_workspace_warnings.log");
  const ExplainedEvent x = only_event(r);
  EXPECT_EQ(x.event.framework, "tensorrt");
  EXPECT_EQ(x.event.format, "tensorrt_out_of_memory");
  EXPECT_FALSE(x.event.is_error);
  EXPECT_EQ(x.event.line, 1u);
  EXPECT_EQ(x.event.end_line, 5u);
  EXPECT_EQ(x.event.bytes("requested"), 17179869184u);
  EXPECT_EQ(x.event.string_field("source"), "virtualMemoryBuffer.cpp::resizePhysical");
  // Hidden as a warning, and named as one.
  const std::string plain = render_explain(r, Style::plain());
  EXPECT_NE(plain.find("1 non-fatal allocator warning not shown; --all lists them."), std::string::npos) << plain;
  EXPECT_EQ(x.diagnosis.cause, "warning_non_fatal");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"tensorrt_workspace"}));
  EXPECT_EQ(fix(x.diagnosis, "tensorrt_workspace").snippet,
            "config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 4 << 30)  # C++: config->setMemoryPoolLimit("
            "MemoryPoolType::kWORKSPACE, 4ULL << 30); trtexec --memPoolSize=workspace:4096");
  EXPECT_EQ(fix(x.diagnosis, "tensorrt_workspace").detail,
            "Only to stop the builder trying tactics the card cannot hold: a workspace limit below 16.00 GiB skips "
            "them without the warning.");
}

// DeepStream's nvinfer prints the same lines as "ERROR: [TRT]:": its config file's workspace-size.
TEST(DiagnoseQa7, DeepstreamTacticWorkspaceGetsItsConfigKey) {
  const ExplainedEvent x = only_event(explain_fixture("deepstream_trt_tactic_workspace.log"));
  EXPECT_FALSE(x.event.is_error);
  EXPECT_EQ(x.event.bytes("requested"), 4294967296u);
  EXPECT_EQ(fix(x.diagnosis, "tensorrt_workspace").snippet,
            "workspace-size=4096  # [property] of the nvinfer config (config_infer_*.txt), in MB; delete the built "
            "engine file so it is rebuilt");
}

// trtexec's fatal [F] error is an error, whatever follows it; so is the default allocator's CUDA error.
TEST(DiagnoseQa7, TensorrtFatalAndAllocatorErrorsAreErrors) {
  const ExplainReport r = explain_fixture("tensorrt_fatal_resize_physical.log");
  const ExplainedEvent x = only_event(r);
  EXPECT_TRUE(x.event.is_error);
  EXPECT_EQ(x.event.line, 5u);
  EXPECT_EQ(x.event.end_line, 6u);
  EXPECT_EQ(x.event.string_field("severity"), "F");
  EXPECT_EQ(x.diagnosis.cause, "driver_oom_no_details");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"end_other_processes", "tensorrt_workspace",
                                                            "tensorrt_smaller_shapes", "bigger_gpu"}));
  EXPECT_TRUE(no_training_recipe(x.diagnosis));

  const ExplainedEvent a = only_event(explain_fixture("tensorrt_default_allocator_cuda_error.log"));
  EXPECT_EQ(a.event.format, "tensorrt_cuda_alloc");
  EXPECT_TRUE(a.event.is_error);
  EXPECT_EQ(a.event.string_field("cuda_call"), "nvinfer1::internal::DefaultAllocator::allocate");
  EXPECT_EQ(a.diagnosis.cause, "driver_oom_no_details");
}

// ---- DirectML ----

TEST(DiagnoseQa7, DirectmlTensorAllocation) {
  const ExplainedEvent x = only_event(explain_fixture("directml_could_not_allocate_tensor.log"));
  EXPECT_EQ(x.event.framework, "directml");
  EXPECT_EQ(x.event.format, "directml_alloc");
  EXPECT_EQ(x.event.bytes("requested"), 81544192u);
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "DirectML could not allocate a 77.77 MiB tensor: the GPU's video memory was used up.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"end_other_processes", "smaller_input", "bigger_gpu"}));
  EXPECT_EQ(fix(x.diagnosis, "end_other_processes").snippet.find("nvidia-smi"), std::string::npos);
}

// The heap allocator's warning and the HRESULT raised after it (a traceback between) are one event.
TEST(DiagnoseQa7, DirectmlHeapAllocatorAndHresult) {
  const ExplainedEvent x = only_event(explain_fixture("directml_heap_allocator_hresult.log"));
  EXPECT_EQ(x.event.format, "directml_heap_oom");
  EXPECT_EQ(x.event.line, 1u);
  EXPECT_EQ(x.event.end_line, 5u);
  EXPECT_EQ(x.event.string_field("hresult"), "0x8007000E (E_OUTOFMEMORY)");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "DirectML's heap allocator ran out of video memory; the error raised after it, "
                                        "-2147024882, is HRESULT 0x8007000E, E_OUTOFMEMORY.");
}

// ---- TPU runtime ----

// 6.78G free, more than the 6.48G request, but only 3.33G reservable: fragmentation. (The same
// message repeated in the "Recent warning and error logs" is the same event.)
TEST(DiagnoseQa7, TpuReserveWithFreeAboveTheRequestIsFragmentation) {
  const ExplainedEvent x = only_event(explain_fixture("torch_xla_tpu_reserve_fragmented.log"));
  EXPECT_EQ(x.event.framework, "torch_xla");
  EXPECT_EQ(x.event.format, "xla_tpu_hbm_reserve");
  EXPECT_EQ(x.event.bytes("requested"), parse_quantity("6.48G")->bytes);
  EXPECT_EQ(x.event.bytes("free"), parse_quantity("6.78G")->bytes);
  EXPECT_EQ(x.event.bytes("reservable"), parse_quantity("3.33G")->bytes);
  EXPECT_EQ(x.event.bytes("hbm_reserved"), 0u);
  EXPECT_EQ(x.event.bytes("requested"), 6957847020u);
  EXPECT_EQ(x.diagnosis.cause, "fragmentation");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"release_references", "smaller_input"}));
  EXPECT_EQ(fix(x.diagnosis, "smaller_input").detail,
            "A smaller per-device batch shrinks the program's 6.48 GiB below the 3.33 GiB reservable.");
  EXPECT_EQ(x.event.repeats, 2u);
}

// Colab's breakdown: HBM capacity and the exact bytes of what is allocated and what the program needs.
TEST(DiagnoseQa7, TpuReserveReadsTheHbmBreakdown) {
  const ExplainedEvent x = only_event(explain_fixture("tpu_hbm_reserve_capacity.log"));
  EXPECT_EQ(x.event.framework, "xla");
  EXPECT_EQ(x.event.bytes("requested"), parse_quantity("3.95G")->bytes);
  EXPECT_EQ(x.event.bytes("free"), parse_quantity("1.92G")->bytes);
  EXPECT_EQ(x.event.bytes("total"), 8589934592u);
  EXPECT_EQ(x.event.bytes("hbm_allocated"), 6532939776u);
  EXPECT_EQ(x.event.bytes("xla_memory_needed"), 4237689856u);
  EXPECT_EQ(x.event.bytes("hbm_top_reserved"), 554696704u);
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "The TPU runtime could not reserve 3.95 GiB for the program: 1.92 GiB was free, "
                                        "6.08 GiB already allocated of 8.00 GiB HBM.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"release_references", "smaller_input", "mixed_precision"}));
  // Nothing here names PyTorch/XLA or JAX: the snippets give both.
  EXPECT_EQ(fix(x.diagnosis, "release_references").snippet,
            "metrics.append(jax.device_get(m))  # JAX: host copies, not device arrays kept across steps; PyTorch/XLA: "
            "loss.item(), t.cpu(); del arrays no longer needed");
}

// ---- Apple Metal / MLX ----

// One buffer over Metal's maxBufferLength: split or shrink it; the wired limit does not apply.
TEST(DiagnoseQa7, MetalMaxBufferSizeIsASingleBufferLimit) {
  const ExplainedEvent x = only_event(explain_fixture("mlx_metal_malloc_max_buffer.log"));
  EXPECT_EQ(x.event.framework, "mlx");
  EXPECT_EQ(x.event.format, "metal_max_buffer_size");
  EXPECT_EQ(x.event.bytes("requested"), 48736917632u);
  EXPECT_EQ(x.event.bytes("max_buffer_size"), 30150672384u);
  EXPECT_EQ(x.diagnosis.cause, "allocation_size_limit");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"smaller_input", "shorter_sequence"}));
  EXPECT_FALSE(has_fix(x.diagnosis, "metal_wired_limit"));
  EXPECT_EQ(fix(x.diagnosis, "smaller_input").detail,
            "Split the work so no array reaches 28.08 GiB: fewer sequences batched at once, the prompt processed in "
            "chunks; this one is 1.6x the limit.");
}

// MLX's "Insufficient Memory" without the kIOGPU code is the same failure.
TEST(DiagnoseQa7, MlxInsufficientMemoryWithoutTheCode) {
  const ExplainedEvent x = only_event(explain_fixture("mlx_metal_insufficient_no_code.log"));
  EXPECT_EQ(x.event.framework, "mlx");
  EXPECT_EQ(x.event.format, "metal_insufficient_memory");
  EXPECT_EQ(x.diagnosis.cause, "metal_working_set_exceeded");
  EXPECT_EQ(x.diagnosis.fixes.at(0).id, "metal_wired_limit");
  // A line that merely says "Insufficient Memory" is none.
  EXPECT_TRUE(explain_text("warning: Insufficient Memory for thumbnails cache\n").events.empty());
}

// ---- TensorRT-LLM (PyTorch backend) ----

TEST(DiagnoseQa7, TrtllmExecutorCreationReadsTotalAndFree) {
  const ExplainedEvent x = only_event(explain_fixture("trtllm_executor_insufficient_memory.log"));
  EXPECT_EQ(x.event.framework, "tensorrt-llm");
  EXPECT_EQ(x.event.format, "trtllm_executor_insufficient_memory");
  EXPECT_EQ(x.event.line, 1u);
  EXPECT_EQ(x.event.end_line, 5u);
  EXPECT_EQ(x.event.string_field("component"), "KV cache");
  EXPECT_EQ(x.event.bytes("total"), parse_quantity("140.06 GiB")->bytes);
  EXPECT_EQ(x.event.bytes("free"), parse_quantity("108.86 GiB")->bytes);
  EXPECT_EQ(x.event.bytes("total"), 150388279869u);
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.capacity_title, "TensorRT-LLM could not create its KV cache with 108.86 GiB of 140.06 GiB free");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"end_other_processes", "trtllm_kv_cache_fraction",
                                                            "trtllm_max_num_tokens", "trtllm_tensor_parallel"}));
  EXPECT_EQ(fix(x.diagnosis, "trtllm_kv_cache_fraction").snippet,
            "trtllm-serve --kv_cache_free_gpu_memory_fraction 0.8  # LLM API: KvCacheConfig(free_gpu_memory_fraction=0.8)");
  EXPECT_TRUE(no_training_recipe(x.diagnosis));
}

}  // namespace
}  // namespace oomdoc
