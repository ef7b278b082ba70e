// The eighth explain QA round: messages oomdoc did not read, or read wrong — the TPU runtime's device
// buffer allocation, llama.cpp's other backends and its own CUDA error, ranks whose wrapped messages
// interleave, Jupyter tracebacks, vLLM with no KV cache at all, PyTorch 1.x's message cut short. The
// fixture text is written here from each program's message template.
#include <gtest/gtest.h>

#include "analyses/diagnose.h"
#include "analyses/explain.h"
#include "core/units.h"
#include "report/explain_json.h"
#include "report/explain_terminal.h"
#include "report/style.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

using testing::explain_text;
using testing::fix;
using testing::fix_ids;
using testing::only_event;

// ---- the TPU runtime's device buffer ----

// Request above free: the HBM was full. XLA's "M" is MiB; the memory space is a chip's coordinates and
// its HBM, kept as printed (HBM0 of two chips are two memories: no device index is made of it).
TEST(DiagnoseQa8, TpuDeviceBufferRequestAboveFree) {
  const ExplainedEvent x = only_event(explain_text(
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
      "allocate 129.50M. That was not possible. There are 78.17M free.; (0x0x0_HBM0)\n"));
  EXPECT_EQ(x.event.framework, "xla");
  EXPECT_EQ(x.event.format, "xla_tpu_hbm_alloc");
  EXPECT_EQ(x.event.string_field("device_kind"), "TPU");
  EXPECT_EQ(x.event.string_field("device_string"), "0x0x0_HBM0");
  EXPECT_FALSE(x.event.device);
  EXPECT_EQ(x.event.bytes("requested"), 135790592u);   // 129.50 x 2^20
  EXPECT_EQ(x.event.bytes("free"), 81967186u);         // 78.17 x 2^20
  EXPECT_EQ(x.event.quantity("requested")->text, "129.50M");
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.capacity_title, "the TPU's HBM had less free than the buffer (129.50 MiB requested, 78.17 MiB free)");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "The TPU runtime could not allocate a 129.50 MiB buffer on 0x0x0_HBM0: only "
                                        "78.17 MiB was free, 51.33 MiB short.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"release_references", "smaller_input", "mixed_precision"}));
  EXPECT_EQ(fix(x.diagnosis, "smaller_input").detail,
            "The buffer is 129.50 MiB with 78.17 MiB free: the peak must drop by at least 51.33 MiB. A smaller "
            "per-device batch shrinks the activations and temporaries.");
  const std::string out = render_explain(explain_text(
      "RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 129.50M. That was not possible. "
      "There are 78.17M free.; (0x0x0_HBM0)\n"), Style::plain());
  EXPECT_NE(out.find("test.log:1  XLA (TPU) out of memory on TPU 0x0x0_HBM0\n  requested 129.50 MiB · free 78.17 MiB\n"),
            std::string::npos) << out;
}

// The shorter wording ("Resource exhausted:"), PyTorch/XLA naming itself, the second HBM of another chip.
TEST(DiagnoseQa8, TpuDeviceBufferTorchXlaSecondHbm) {
  const ExplainedEvent x = only_event(explain_text(
      "2024-05-01 10:00:00.123456: E torch_xla/csrc/xla_graph_executor.cpp:700] Resource exhausted: Attempting to "
      "allocate 180.59M. That was not possible. There are 142.58M free.; (0x3x0_HBM1)\n"));
  EXPECT_EQ(x.event.framework, "torch_xla");
  EXPECT_EQ(x.event.format, "xla_tpu_hbm_alloc");
  EXPECT_EQ(x.event.string_field("device_string"), "0x3x0_HBM1");
  EXPECT_EQ(x.event.bytes("requested"), 189362340u);   // 180.59 x 2^20
  EXPECT_EQ(x.event.bytes("free"), 149505966u);        // 142.58 x 2^20
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "The TPU runtime could not allocate a 180.59 MiB buffer on 0x3x0_HBM1: only "
                                        "142.58 MiB was free, 38.01 MiB short.");
  EXPECT_EQ(fix(x.diagnosis, "mixed_precision").snippet, "model.to(torch.bfloat16)  # and bf16 inputs; older torch_xla: XLA_USE_BF16=1");
}

// As much free as the buffer, yet refused: HBM in pieces.
TEST(DiagnoseQa8, TpuDeviceBufferFreeAboveRequestIsFragmentation) {
  const ExplainedEvent x = only_event(explain_text(
      "RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 1.00G. That was not possible. "
      "There are 3.50G free.; (0x1x0_HBM0)\n"));
  EXPECT_EQ(x.event.bytes("requested"), kGiB);
  EXPECT_EQ(x.event.bytes("free"), 3758096384u);
  EXPECT_EQ(x.diagnosis.cause, "fragmentation");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "0x1x0_HBM0 had 3.50 GiB free, as much as the 1.00 GiB buffer, yet could not "
                                        "place it: the free HBM is in pieces, between buffers that live across steps.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"release_references", "smaller_input"}));
}

// Prose with the same first words is no event.
TEST(DiagnoseQa8, TpuDeviceBufferNeedsTheRuntimeSentence) {
  EXPECT_TRUE(explain_text("Attempting to allocate 2 buffers for the cache\n").events.empty());
}

// ---- llama.cpp's other GPU backends ----

// Vulkan: the size in bytes, the driver's status on the next line, then the buffer line that names the
// device, and the caller that says it was the compute graph.
TEST(DiagnoseQa8, LlamaCppVulkanDeviceMemory) {
  const ExplainedEvent x = only_event(explain_text(
      "ggml_vulkan: Device memory allocation of size 118497280 failed.\n"
      "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory\n"
      "ggml_gallocr_reserve_n: failed to allocate Vulkan0 buffer of size 118497280\n"
      "llama_new_context_with_model: failed to allocate compute buffers\n"));
  EXPECT_EQ(x.event.framework, "llama.cpp");
  EXPECT_EQ(x.event.format, "ggml_backend_alloc");
  EXPECT_EQ(x.event.string_field("backend"), "Vulkan");
  EXPECT_EQ(x.event.string_field("buffer_backend"), "Vulkan0");
  EXPECT_EQ(x.event.device, 0);
  EXPECT_EQ(x.event.bytes("requested"), 118497280u);
  EXPECT_FALSE(x.event.field("requested_bytes_from_text"));   // the first line is exact already
  EXPECT_EQ(x.event.string_field("llama_buffer"), "compute");
  EXPECT_EQ(x.event.line, 1u);
  EXPECT_EQ(x.event.end_line, 3u);
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "The Vulkan device could not provide a 113.01 MiB buffer on device 0.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"ggml_flash_attention", "ggml_kv_cache_type", "ggml_smaller_context",
                                                            "ggml_smaller_quant", "ggml_fewer_layers"}));
}

// Vulkan's two lines alone: no device printed, none made up.
TEST(DiagnoseQa8, LlamaCppVulkanWithoutBufferLine) {
  const ExplainedEvent x = only_event(explain_text(
      "ggml_vulkan: Device memory allocation of size 2147483648 failed.\n"
      "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory\n"));
  EXPECT_EQ(x.event.format, "ggml_backend_alloc");
  EXPECT_EQ(x.event.bytes("requested"), 2147483648u);
  EXPECT_FALSE(x.event.device);
  EXPECT_FALSE(x.event.field("llama_buffer"));
  EXPECT_EQ(x.event.end_line, 2u);
  EXPECT_EQ(x.diagnosis.evidence.at(0), "The Vulkan device could not provide a 2.00 GiB buffer.");
}

// Metal: its MiB (binary) first, the exact bytes on the buffer line; macOS's wired limit is one more fix.
TEST(DiagnoseQa8, LlamaCppMetalBuffer) {
  const ExplainedEvent x = only_event(explain_text(
      "ggml_backend_metal_buffer_type_alloc_buffer: error: failed to allocate buffer, size =  8480.00 MiB\n"
      "ggml_gallocr_reserve_n: failed to allocate Metal buffer of size 8891928576\n"
      "llama_new_context_with_model: failed to allocate compute buffers\n"));
  EXPECT_EQ(x.event.format, "ggml_backend_alloc");
  EXPECT_EQ(x.event.string_field("backend"), "Metal");
  EXPECT_EQ(x.event.string_field("buffer_backend"), "Metal");
  EXPECT_FALSE(x.event.device);
  EXPECT_EQ(x.event.bytes("requested"), 8891928576u);
  EXPECT_EQ(x.event.int_field("requested_bytes_from_text"), 8891924480);   // 8480.00 x 2^20
  EXPECT_EQ(x.event.quantity("requested")->text, "8480.00 MiB");
  EXPECT_EQ(x.event.string_field("llama_buffer"), "compute");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "The Metal device could not provide an 8.28 GiB buffer.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"metal_wired_limit", "ggml_flash_attention", "ggml_kv_cache_type",
                                                            "ggml_smaller_context", "ggml_smaller_quant", "ggml_fewer_layers"}));
}

// Metal's line alone, and when the model's loader names itself after it: the weights' fixes only.
TEST(DiagnoseQa8, LlamaCppMetalWeights) {
  const ExplainedEvent alone = only_event(explain_text(
      "ggml_backend_metal_buffer_type_alloc_buffer: error: failed to allocate buffer, size =  8480.00 MiB\n"));
  EXPECT_EQ(alone.event.bytes("requested"), 8891924480u);
  EXPECT_FALSE(alone.event.field("requested_bytes_from_text"));
  EXPECT_FALSE(alone.event.field("llama_buffer"));
  const ExplainedEvent model = only_event(explain_text(
      "ggml_backend_metal_buffer_type_alloc_buffer: error: failed to allocate buffer, size =  8480.00 MiB\n"
      "llama_model_load: error loading model: unable to allocate backend buffer\n"));
  EXPECT_EQ(model.event.string_field("llama_buffer"), "model");
  EXPECT_EQ(fix_ids(model.diagnosis), (std::vector<std::string>{"metal_wired_limit", "ggml_smaller_quant", "ggml_fewer_layers"}));
}

// SYCL (Intel GPUs).
TEST(DiagnoseQa8, LlamaCppSyclDeviceMemory) {
  const ExplainedEvent x = only_event(explain_text(
      "ggml_backend_sycl_buffer_type_alloc_buffer: can't allocate 3072.00 MiB of device memory\n"));
  EXPECT_EQ(x.event.format, "ggml_backend_alloc");
  EXPECT_EQ(x.event.string_field("backend"), "SYCL");
  EXPECT_EQ(x.event.bytes("requested"), 3221225472u);
  EXPECT_EQ(x.diagnosis.evidence.at(0), "The SYCL device could not provide a 3.00 GiB buffer.");
}

// The buffer line on its own, for each GPU backend: the backend and device from the buffer's name.
// The graph allocator's line is the compute buffer, and so is any line followed by llama.cpp's
// "failed to allocate compute buffers"; the tensor allocator's is told by the caller after it.
TEST(DiagnoseQa8, LlamaCppBufferLineAlone) {
  struct Case {
    std::string buffer, backend;
    int64_t device;
  };
  for (const Case& c : {Case{"CUDA0", "CUDA", 0}, Case{"ROCm1", "ROCm", 1}, Case{"Vulkan0", "Vulkan", 0}, Case{"SYCL0", "SYCL", 0}}) {
    const ExplainedEvent x = only_event(explain_text("ggml_gallocr_reserve_n: failed to allocate " + c.buffer +
                                                     " buffer of size 1258291200\n"
                                                     "graph_reserve: failed to allocate compute buffers\n"));
    EXPECT_EQ(x.event.format, "ggml_backend_alloc") << c.buffer;
    EXPECT_EQ(x.event.string_field("backend"), c.backend) << c.buffer;
    EXPECT_EQ(x.event.string_field("buffer_backend"), c.buffer);
    EXPECT_EQ(x.event.device, c.device) << c.buffer;
    EXPECT_EQ(x.event.bytes("requested"), 1258291200u);
    EXPECT_EQ(x.event.string_field("llama_buffer"), "compute");
    EXPECT_EQ(x.diagnosis.evidence.at(0), "The " + c.backend + " device could not provide a 1.17 GiB buffer on device " +
                                              std::to_string(c.device) + ".");
  }
  const ExplainedEvent gallocr = only_event(explain_text("ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 1258291200\n"));
  EXPECT_EQ(gallocr.event.string_field("llama_buffer"), "compute");
  const ExplainedEvent tensors = only_event(explain_text("alloc_tensor_range: failed to allocate CUDA0 buffer of size 1258291200\n"));
  EXPECT_FALSE(tensors.event.field("llama_buffer"));
  const ExplainedEvent kv = only_event(explain_text(
      "alloc_tensor_range: failed to allocate CUDA0 buffer of size 4294967296\n"
      "llama_kv_cache_init: failed to allocate buffer for kv cache\n"));
  EXPECT_EQ(kv.event.string_field("llama_buffer"), "kv_cache");
  EXPECT_EQ(fix_ids(kv.diagnosis), (std::vector<std::string>{"ggml_kv_cache_type", "ggml_smaller_context", "ggml_smaller_quant",
                                                             "ggml_fewer_layers"}));
  // Host buffers are not the GPU's: system RAM (ggml_cpu_buffer) and pinned memory stay out.
  EXPECT_EQ(only_event(explain_text("alloc_tensor_range: failed to allocate CPU buffer of size 1258291200\n")).event.format,
            "ggml_cpu_buffer");
  EXPECT_TRUE(explain_text("ggml_backend_cuda_host_buffer_type_alloc_buffer: failed to allocate CUDA_Host buffer of size 1258291200\n")
                  .events.empty());
}

// ---- llama.cpp's own CUDA error ----

// ggml-cuda's check names the device and its function on the next line: llama.cpp's, not PyTorch's.
TEST(DiagnoseQa8, LlamaCppCudaErrorInPool) {
  const ExplainedEvent x = only_event(explain_text(
      "CUDA error: out of memory\n"
      "  current device: 0, in function ggml_cuda_pool_malloc at /app/ggml/src/ggml-cuda/ggml-cuda.cu:375\n"
      "  cuMemCreate(&handle, reserve_size, &prop, 0)\n"
      "/app/ggml/src/ggml-cuda/ggml-cuda.cu:100: CUDA error\n"));
  EXPECT_EQ(x.event.framework, "llama.cpp");
  EXPECT_EQ(x.event.format, "ggml_cuda_error");
  EXPECT_EQ(x.event.device, 0);
  EXPECT_EQ(x.event.string_field("backend"), "CUDA");
  EXPECT_EQ(x.event.string_field("cuda_function"), "ggml_cuda_pool_malloc");
  EXPECT_EQ(x.event.string_field("cuda_call"), "cuMemCreate");
  EXPECT_EQ(x.event.end_line, 4u);
  EXPECT_EQ(x.diagnosis.cause, "driver_oom_no_details");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "A CUDA call inside llama.cpp ran out of memory in ggml_cuda_pool_malloc on device 0; "
                                        "no size is printed.");
  EXPECT_EQ(x.diagnosis.evidence.size(), 2u);   // and what the pool is
  // (No buffer named: the smaller file keeps its place in the ladder.)
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"ggml_flash_attention", "ggml_kv_cache_type", "ggml_smaller_quant",
                                                            "ggml_smaller_context", "ggml_fewer_layers"}));
  const std::string out = render_explain(explain_text(
      "CUDA error: out of memory\n"
      "  current device: 0, in function ggml_cuda_pool_malloc at /app/ggml/src/ggml-cuda/ggml-cuda.cu:375\n"), Style::plain());
  EXPECT_NE(out.find("test.log:1  llama.cpp out of memory on device 0\n"), std::string::npos) << out;
}

// Another ggml function, a ROCm build, another device; the 2023 form ("CUDA error 2 at file:line")
// with the device alone, told by ggml's file.
TEST(DiagnoseQa8, LlamaCppCudaErrorOtherForms) {
  const ExplainedEvent rocm = only_event(explain_text(
      "ROCm error: out of memory\n"
      "  current device: 1, in function ggml_backend_cuda_graph_compute at /llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:2700\n"
      "  hipStreamSynchronize(cuda_ctx->stream())\n"));
  EXPECT_EQ(rocm.event.format, "ggml_cuda_error");
  EXPECT_EQ(rocm.event.device, 1);
  EXPECT_EQ(rocm.event.string_field("backend"), "ROCm");
  EXPECT_EQ(rocm.event.string_field("cuda_function"), "ggml_backend_cuda_graph_compute");
  EXPECT_EQ(rocm.diagnosis.evidence.size(), 1u);
  const ExplainedEvent old = only_event(explain_text(
      "CUDA error 2 at /home/u/llama.cpp/ggml-cuda.cu:6871: out of memory\n"
      "current device: 0\n"));
  EXPECT_EQ(old.event.framework, "llama.cpp");
  EXPECT_EQ(old.event.device, 0);
  EXPECT_FALSE(old.event.field("cuda_function"));
  EXPECT_EQ(old.diagnosis.evidence.at(0), "A CUDA call inside llama.cpp ran out of memory on device 0; no size is printed.");
}

// PyTorch's "CUDA error: out of memory" has no device line: it stays PyTorch's.
TEST(DiagnoseQa8, PytorchCudaErrorStaysPytorch) {
  const ExplainedEvent x = only_event(explain_text(
      "RuntimeError: CUDA error: out of memory\n"
      "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
      "incorrect.\n"));
  EXPECT_EQ(x.event.framework, "pytorch");
  EXPECT_EQ(x.event.format, "cuda_error_oom");
  // A device line without anything of ggml's is not llama.cpp's either.
  EXPECT_EQ(only_event(explain_text("CUDA error: out of memory\ncurrent device: 0, in function my_kernel_launch\n")).event.format,
            "cuda_error_oom");
}

// ---- Jupyter ----

// An OOM inside an evaluation function called from a notebook cell: IPython's traceback is read, so
// the evaluation without no_grad is the cause, as it is under Python's own traceback.
TEST(DiagnoseQa8, JupyterEvaluationWithoutNoGrad) {
  const ExplainedEvent x = only_event(explain_text(
      "---------------------------------------------------------------------------\n"
      "OutOfMemoryError                          Traceback (most recent call last)\n"
      "Cell In[12], line 3\n"
      "      1 model.eval()\n"
      "      2 batch = next(iter(loader))\n"
      "----> 3 loss = evaluate(model)\n"
      "\n"
      "File /home/ana/project/x.py:40, in evaluate(model)\n"
      "     38 for batch in loader:\n"
      "     39     batch = {k: v.cuda() for k, v in batch.items()}\n"
      "---> 40     out = model(**batch)\n"
      "     41     total += out.loss\n"
      "\n"
      "File ~/venv/lib/python3.10/site-packages/torch/nn/modules/module.py:1518, in Module._wrapped_call_impl(self, *args, **kwargs)\n"
      "   1517 else:\n"
      "-> 1518     return self._call_impl(*args, **kwargs)\n"
      "\n"
      "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of "
      "which 1.08 GiB is free. Including non-PyTorch memory, this process has 22.56 GiB memory in use. Of the allocated "
      "memory 20.14 GiB is allocated by PyTorch, and 1.97 GiB is reserved by PyTorch but unallocated.\n"));
  ASSERT_TRUE(x.event.traceback);
  EXPECT_EQ(x.event.traceback->operation, "evaluation");
  ASSERT_TRUE(x.event.traceback->innermost_user_frame);
  EXPECT_EQ(x.event.traceback->innermost_user_frame->file, "/home/ana/project/x.py");
  EXPECT_EQ(x.event.traceback->innermost_user_frame->line, 40u);
  EXPECT_EQ(x.diagnosis.cause, "evaluation_with_grad");
  EXPECT_EQ(x.diagnosis.secondary_causes, (std::vector<std::string>{"fragmentation_minor", "capacity_exhausted"}));
  EXPECT_EQ(x.diagnosis.evidence.back(), "It failed during evaluation (traceback), where no gradients are needed; a "
                                         "torch.no_grad() block does not show in a traceback, so check that the "
                                         "evaluation runs under one.");
  EXPECT_EQ(fix_ids(x.diagnosis).at(0), "no_grad_for_eval");
}

// ---- vLLM with no KV cache at all ----

bool offers_max_model_len(const Diagnosis& d) {
  for (const Fix& f : d.fixes) {
    if (f.id == "vllm_max_model_len" || f.snippet.find("--max-model-len") != std::string::npos) return true;
  }
  return false;
}

// A negative KV budget in vLLM's error, and its estimate of 0 tokens: no --max-model-len 0, what frees
// memory instead, and the negative figure kept (JSON: kv_available_bytes below zero, as printed).
TEST(DiagnoseQa8, VllmNegativeAvailableKvCache) {
  const ExplainReport report = explain_text(
      "ValueError: To serve at least one request with the models's max seq len (8192), (1.00 GiB KV cache is needed, "
      "which is larger than the available KV cache memory (-2.35 GiB). Based on the available memory, the estimated "
      "maximum model length is 0. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
      "initializing the engine.\n");
  const ExplainedEvent x = only_event(report);
  EXPECT_EQ(x.event.format, "vllm_kv_needed_gt_available");
  EXPECT_EQ(x.event.bytes("kv_needed"), kGiB);
  EXPECT_FALSE(x.event.quantity("kv_available"));
  EXPECT_EQ(x.event.int_field("kv_available_bytes"), -2523293286);   // -2.35 x 2^30
  EXPECT_EQ(x.event.string_field("kv_available_text"), "-2.35 GiB");
  EXPECT_EQ(x.event.int_field("estimated_max_model_len"), 0);
  EXPECT_EQ(x.diagnosis.cause, "no_kv_cache_memory");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "vLLM's budget minus weights and the profiling peak leaves -2.35 GiB for the KV "
                                        "cache: the budget is 2.35 GiB too small for even an empty cache.");
  EXPECT_EQ(x.diagnosis.evidence.at(1), "One request of 8192 tokens needs 1.00 GiB of KV cache.");
  EXPECT_EQ(x.diagnosis.evidence.at(2), "vLLM estimates the longest request that fits at 0 tokens: no shorter "
                                        "--max-model-len helps, only more memory for the KV cache.");
  EXPECT_FALSE(offers_max_model_len(x.diagnosis));
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"vllm_max_num_seqs", "vllm_gpu_memory_utilization",
                                                            "vllm_enforce_eager", "vllm_tensor_parallel",
                                                            "vllm_quantized_weights", "vllm_cpu_offload"}));
  const Json json = event_to_json(x);
  EXPECT_EQ(json["kv_available_bytes"], -2523293286);
  EXPECT_EQ(json["kv_available_text"], "-2.35 GiB");
  EXPECT_EQ(json["kv_available_unit"], "GiB");
  const std::string out = render_explain(report, Style::plain());
  EXPECT_NE(out.find("  KV needed 1.00 GiB · KV available -2.35 GiB · max_model_len 8192\n"), std::string::npos) << out;
}

// vLLM's estimate of 0 tokens with a little memory available: still no length to offer.
TEST(DiagnoseQa8, VllmEstimatedMaximumLengthZero) {
  const ExplainedEvent x = only_event(explain_text(
      "ValueError: To serve at least one request with the models's max seq len (32768), (4.00 GiB KV cache is needed, "
      "which is larger than the available KV cache memory (0.05 GiB). Based on the available memory, the estimated "
      "maximum model length is 0. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
      "initializing the engine.\n"));
  EXPECT_EQ(x.event.bytes("kv_available"), 53687091u);   // 0.05 x 2^30
  EXPECT_EQ(x.diagnosis.cause, "no_kv_cache_memory");
  EXPECT_FALSE(offers_max_model_len(x.diagnosis));
  // A positive estimate is still the length to serve.
  const ExplainedEvent some = only_event(explain_text(
      "ValueError: To serve at least one request with the models's max seq len (32768), (4.00 GiB KV cache is needed, "
      "which is larger than the available KV cache memory (2.00 GiB). Based on the available memory, the estimated "
      "maximum model length is 16384. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
      "initializing the engine.\n"));
  EXPECT_EQ(some.diagnosis.cause, "kv_cache_insufficient");
  EXPECT_EQ(fix(some.diagnosis, "vllm_max_model_len").snippet, "--max-model-len 16384");
}

// V0's wording with a KV cache of 0 tokens: no "--max-model-len 0".
TEST(DiagnoseQa8, VllmZeroKvTokens) {
  const ExplainedEvent x = only_event(explain_text(
      "ValueError: The model's max seq len (4096) is larger than the maximum number of tokens that can be stored in KV "
      "cache (0). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n"));
  EXPECT_EQ(x.event.int_field("kv_cache_tokens"), 0);
  EXPECT_EQ(x.diagnosis.cause, "no_kv_cache_memory");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "The KV cache holds 0 tokens.");
  EXPECT_FALSE(offers_max_model_len(x.diagnosis));
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"vllm_max_num_seqs", "vllm_gpu_memory_utilization",
                                                            "vllm_tensor_parallel", "vllm_quantized_weights",
                                                            "vllm_cpu_offload"}));
}

// The accounting line with a KV budget of 0 (or less) is the error itself: the error vLLM raises after
// it joins it, and the figure stays as printed.
TEST(DiagnoseQa8, VllmAvailableKvCacheMemoryZeroOrNegative) {
  const ExplainReport zero = explain_text(
      "INFO 05-01 10:00:00 [gpu_worker.py:227] Available KV cache memory: 0.00 GiB\n"
      "ERROR 05-01 10:00:00 [core.py:396] ValueError: No available memory for the cache blocks. Try increasing "
      "`gpu_memory_utilization` when initializing the engine.\n");
  const ExplainedEvent z = only_event(zero);
  EXPECT_EQ(z.event.format, "vllm_memory_info");
  EXPECT_TRUE(z.event.is_error);
  EXPECT_EQ(z.event.bytes("kv_cache"), 0u);
  EXPECT_EQ(z.event.int_field("error_line"), 2);
  EXPECT_EQ(z.diagnosis.cause, "no_kv_cache_memory");
  EXPECT_EQ(z.diagnosis.evidence.at(0), "vLLM's budget minus weights and the profiling peak leaves 0.00 GiB for the KV "
                                        "cache: nothing for even one block.");
  EXPECT_FALSE(offers_max_model_len(z.diagnosis));
  const ExplainedEvent negative = only_event(explain_text(
      "INFO 05-01 10:00:00 [gpu_worker.py:227] Available KV cache memory: -2.35 GiB\n"
      "ERROR 05-01 10:00:00 [core.py:396] ValueError: No available memory for the cache blocks. Try increasing "
      "`gpu_memory_utilization` when initializing the engine.\n"));
  EXPECT_EQ(negative.event.int_field("kv_cache_bytes"), -2523293286);
  EXPECT_EQ(event_to_json(negative)["kv_cache_bytes"], -2523293286);
  EXPECT_EQ(event_to_json(negative)["kv_cache_text"], "-2.35 GiB");
  EXPECT_EQ(negative.diagnosis.evidence.at(0), "vLLM's budget minus weights and the profiling peak leaves -2.35 GiB for "
                                               "the KV cache: the budget is 2.35 GiB too small for even an empty cache.");
  EXPECT_FALSE(offers_max_model_len(negative.diagnosis));
}

// vLLM 0.6's one-line "Memory profiling results" gives no budget or activation peak: the budget is
// total x utilization (23.65 x 0.60 = 14.19 GiB), the torch peak (16.15 GiB) holds the weights
// (14.96 GiB) and the activations, so 0.75 leaves about 1 GiB of cache; fewer sequences shrink
// only the 1.19 GiB of activations, less than the 2.37 GiB missing.
TEST(DiagnoseQa8, Vllm06ProfilingLineGivesTheUtilizationThatFits) {
  const ExplainedEvent x = only_event(explain_text(
      "INFO 11-18 18:07:20 model_runner.py:1072] Loading model weights took 14.9595 GB\n"
      "INFO 11-18 18:07:27 worker.py:232] Memory profiling results: total_gpu_memory=23.65GiB "
      "initial_memory_usage=15.32GiB peak_torch_memory=16.15GiB memory_usage_post_profile=15.41GiB "
      "non_torch_memory=0.41GiB kv_cache_size=-2.37GiB gpu_memory_utilization=0.60\n"
      "INFO 11-18 18:07:27 gpu_executor.py:113] # GPU blocks: 0, # CPU blocks: 2048\n"
      "ERROR 11-18 18:07:28 engine.py:366] ValueError: No available memory for the cache blocks. Try increasing "
      "`gpu_memory_utilization` when initializing the engine.\n"));
  const Fix* utilization = nullptr;
  for (const Fix& f : x.diagnosis.fixes) {
    if (f.id == "vllm_gpu_memory_utilization" && utilization == nullptr) utilization = &f;
  }
  ASSERT_NE(utilization, nullptr);
  EXPECT_EQ(utilization->snippet, "--gpu-memory-utilization 0.75");
  EXPECT_EQ(x.diagnosis.evidence.at(2), "Weights 14.96 GiB + non-torch 419.84 MiB + activations 1.19 GiB = 16.56 GiB of a "
                                        "14.19 GiB budget leave nothing for the KV cache.");
  const Fix* fewer = nullptr;
  for (const Fix& f : x.diagnosis.fixes) {
    if (f.id == "vllm_max_num_seqs") fewer = &f;
  }
  ASSERT_NE(fewer, nullptr);
  EXPECT_EQ(fewer->detail, "The profiling run's activation peak is 1.19 GiB, less than the 2.37 GiB missing: fewer "
                           "sequences alone cannot make room; combine it with another fix.");
}

// TensorFlow logs a pool growth the driver refused at INFO when it goes on without it (sleap#2142:
// then "not a failure", and an epoch completes): no error, a non-fatal warning; at E it is one.
TEST(DiagnoseQa8, TensorflowInfoLevelDriverAllocIsNotAFailure) {
  const ExplainReport r = explain_text(
      "2025-03-17 17:48:09.854267: I tensorflow/stream_executor/cuda/cuda_driver.cc:739] failed to allocate 2.12G "
      "(2282521344 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"
      "Epoch 1/100\n");
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_FALSE(r.events[0].event.is_error);
  EXPECT_EQ(r.events[0].event.string_field("log_severity"), "I");
  EXPECT_EQ(r.events[0].diagnosis.cause, "warning_non_fatal");
  EXPECT_TRUE(r.events[0].diagnosis.fixes.empty());
  const ExplainedEvent e = only_event(explain_text(
      "2019-07-21 23:23:06.228049: E tensorflow/stream_executor/cuda/cuda_driver.cc:828] failed to allocate 32.00M "
      "(33554432 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"));
  EXPECT_TRUE(e.event.is_error);
  EXPECT_EQ(e.event.string_field("log_severity"), "E");
  EXPECT_EQ(e.diagnosis.cause, "framework_preallocation");
  // glog's own header ("I0601 12:00:00.123456 1234 file.cc:N]") says the same.
  const ExplainReport glog = explain_text(
      "I0601 12:00:00.123456 1234 cuda_driver.cc:739] failed to allocate 2.12G (2282521344 bytes) from device: "
      "CUDA_ERROR_OUT_OF_MEMORY: out of memory\n");
  ASSERT_EQ(glog.events.size(), 1u);
  EXPECT_FALSE(glog.events[0].event.is_error);
  EXPECT_EQ(glog.events[0].event.string_field("log_severity"), "I");
}

// ---- PyTorch 1.x's message cut short ----

// Cut inside the free figure: the device, the capacity and the allocated memory were printed whole
// and stay; the free figure does not. Without PyTorch's reserve the rest of the card cannot be told.
TEST(DiagnoseQa8, Pytorch1xCutKeepsTheWholeFigures) {
  const ExplainedEvent x = only_event(explain_text(
      "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.70 GiB total capacity; 21.05 GiB "
      "already allocated; 812.5\n"));
  EXPECT_EQ(x.event.format, "pytorch_old_truncated");
  EXPECT_EQ(x.event.framework, "pytorch");
  EXPECT_EQ(x.event.device, 0);
  EXPECT_EQ(x.event.string_field("device_kind"), "GPU");
  EXPECT_EQ(x.event.bytes("requested"), 20 * kMiB);
  EXPECT_EQ(x.event.bytes("total"), 25447681229u);       // 23.70 GiB
  EXPECT_EQ(x.event.bytes("allocated"), 22602265395u);   // 21.05 GiB
  EXPECT_FALSE(x.event.quantity("free"));
  EXPECT_FALSE(x.event.quantity("reserved_total"));
  EXPECT_EQ(x.event.end_line, 1u);
  EXPECT_EQ(x.diagnosis.cause, "insufficient_information");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "The message was cut before PyTorch's reserve and the free figure: PyTorch had "
                                        "21.05 GiB of 23.70 GiB allocated (89%), so what holds the rest of the card "
                                        "(PyTorch's cache, other processes) cannot be told; the full message (or `oomdoc "
                                        "snapshot`) can.");
}

// Cut inside a label: the figure before it is whole, named by its place or by the label's start when
// only one field can stand there; a bare figure where several could is left out.
TEST(DiagnoseQa8, Pytorch1xCutInsideALabel) {
  const std::string head = "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 1; 23.70 GiB total capacity; ";
  const ExplainedEvent alloc = only_event(explain_text(head + "21.05 GiB already alloc\n"));
  EXPECT_EQ(alloc.event.device, 1);
  EXPECT_EQ(alloc.event.bytes("allocated"), 22602265395u);
  const ExplainedEvent bare = only_event(explain_text(head + "21.05 GiB already allocated; 812.50 MiB\n"));
  EXPECT_EQ(bare.event.bytes("allocated"), 22602265395u);
  EXPECT_FALSE(bare.event.quantity("free"));    // free, active or the reserve: the label does not say
  const ExplainedEvent reserve = only_event(explain_text(head + "21.05 GiB already allocated; 812.50 MiB free; 21.40 GiB reser\n"));
  EXPECT_EQ(reserve.event.format, "pytorch_old_truncated");
  EXPECT_EQ(reserve.event.bytes("free"), 851968000u);          // 812.50 MiB
  EXPECT_EQ(reserve.event.bytes("reserved_total"), 22978075034u);   // 21.40 GiB
  // With every figure, the figures decide: the reserve holds the rest of the card.
  EXPECT_NE(reserve.diagnosis.cause, "insufficient_information");
}

// Cut inside the capacity: the device alone stays; the cause cannot be told.
TEST(DiagnoseQa8, Pytorch1xCutInsideTheCapacity) {
  const ExplainedEvent x = only_event(explain_text(
      "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.7\n"));
  EXPECT_EQ(x.event.format, "pytorch_old_truncated");
  EXPECT_EQ(x.event.device, 0);
  EXPECT_EQ(x.event.bytes("requested"), 20 * kMiB);
  EXPECT_FALSE(x.event.quantity("total"));
  EXPECT_EQ(x.diagnosis.cause, "insufficient_information");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "The message was cut after the request (20.00 MiB): it gives no capacity, free "
                                        "or allocated figures.");
}

}  // namespace
}  // namespace oomdoc
