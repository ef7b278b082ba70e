// Hostile log lines: every number a message format reads, printed with more digits than 64 bits
// hold (or as a size parse_printed_size cannot read). The number becomes null; the rest of the
// event (its format, its other figures, the diagnosis) stays.
#include <gtest/gtest.h>

#include "analyses/explain.h"
#include "readers/log_scanner.h"
#include "report/explain_json.h"

namespace oomdoc {
namespace {

const std::string k20Digits = "99999999999999999999";   // > 2^64 - 1
const std::string k40Digits = k20Digits + k20Digits;     // > what parse_printed_size reads

OomEvent only_event(const std::string& text) {
  auto scan = scan_text(text);
  EXPECT_EQ(scan.events.size(), 1u) << text;
  return scan.events.empty() ? OomEvent{} : scan.events.front();
}

// The event as `oomdoc explain --json` prints it.
Json event_json(const std::string& text) {
  ExplainReport report;
  add_to_report(report, scan_text(text));
  EXPECT_EQ(report.events.size(), 1u) << text;
  return report.events.empty() ? Json() : event_to_json(report.events.front());
}

TEST(OversizedNumbers, PytorchDeviceAndPidAreNullAndTheFiguresStay) {
  const std::string line = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU " + k20Digits +
                           " has a total capacity of 79.15 GiB of which 1.25 GiB is free. Process " + k20Digits +
                           " has 10.00 GiB memory in use. Of the allocated memory 60.00 GiB is allocated by PyTorch, "
                           "and 6.50 GiB is reserved by PyTorch but unallocated.\n";
  const OomEvent e = only_event(line);
  EXPECT_EQ(e.format, "pytorch_new");
  EXPECT_EQ(e.device, std::nullopt);
  EXPECT_EQ(e.bytes("total"), 84986665370u);
  EXPECT_EQ(e.bytes("free"), 1342177280u);
  ASSERT_EQ(e.other_processes.size(), 1u);
  EXPECT_EQ(e.other_processes[0].pid, std::nullopt);
  EXPECT_EQ(e.other_processes[0].memory.bytes, 10 * kGiB);
  Json j = event_json(line);
  EXPECT_TRUE(j["device"].is_null());
  EXPECT_TRUE(j["other_processes"][0]["pid"].is_null());
  EXPECT_EQ(j["other_processes"][0]["bytes"], 10 * kGiB);
  EXPECT_EQ(j["total_bytes"], 84986665370u);
}

// A request no number holds is left out, and the diagnosis does not speak of it as 0 B.
TEST(OversizedNumbers, AnUnreadableRequestIsNoZeroByteRequest) {
  const std::string line = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate " + k40Digits + "99999.00 GiB. "
                           "GPU 0 has a total capacity of 79.11 GiB of which 1.05 GiB is free. Including non-PyTorch "
                           "memory, this process has 78.05 GiB memory in use. Of the allocated memory 74.00 GiB is "
                           "allocated by PyTorch, and 2.35 GiB is reserved by PyTorch but unallocated.\n";
  ExplainReport report;
  add_to_report(report, scan_text(line));
  ASSERT_EQ(report.events.size(), 1u);
  const ExplainedEvent& x = report.events.front();
  EXPECT_EQ(x.event.format, "pytorch_new");
  EXPECT_FALSE(x.event.bytes("requested"));
  EXPECT_EQ(x.event.bytes("process"), 83805549363u);   // 78.05 GiB
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  ASSERT_FALSE(x.diagnosis.evidence.empty());
  EXPECT_EQ(x.diagnosis.evidence.front(), "This process holds 78.05 GiB of 79.11 GiB (99%); 1.05 GiB was free.");
}

TEST(OversizedNumbers, PytorchOldFormatAndCudaMallocAsyncDevice) {
  const OomEvent old = only_event("RuntimeError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU " + k20Digits +
                                  "; 3.95 GiB total capacity; 3.20 GiB already allocated; 20.06 MiB free; 3.30 GiB "
                                  "reserved in total by PyTorch)\n");
  EXPECT_EQ(old.format, "pytorch_old_reserved");
  EXPECT_EQ(old.device, std::nullopt);
  EXPECT_EQ(old.bytes("requested"), 64 * kMiB);
  const OomEvent async = only_event("RuntimeError: Allocation on device " + k20Digits +
                                    " would exceed allowed memory. (out of memory)\nCurrently allocated     : 7.50 GiB\n"
                                    "Requested               : 1.00 GiB\n");
  EXPECT_EQ(async.format, "pytorch_cudamallocasync");
  EXPECT_EQ(async.device, std::nullopt);
  EXPECT_EQ(async.bytes("requested"), kGiB);
}

TEST(OversizedNumbers, ThcErrorCodeIsLeftOut) {
  const std::string line = "RuntimeError: cuda runtime error (" + k20Digits +
                           ") : out of memory at /pytorch/aten/src/THC/THCCachingAllocator.cpp:510\n";
  const OomEvent e = only_event(line);
  EXPECT_EQ(e.format, "pytorch_thc_cuda_runtime_oom");
  EXPECT_EQ(e.field("cuda_error_code"), nullptr);
  EXPECT_FALSE(event_json(line).contains("cuda_error_code"));
  EXPECT_EQ(only_event("RuntimeError: cuda runtime error (2) : out of memory at x.cpp:1\n").int_field("cuda_error_code"), 2);
}

TEST(OversizedNumbers, GarbageSizeLowerBoundIsNullBeyondInt64) {
  auto bound = [](const std::string& size) {
    return only_event("RuntimeError: CUDA out of memory. Tried to allocate more than " + size + " memory.\n")
        .int_field("requested_lower_bound_bytes");
  };
  EXPECT_EQ(bound("1EB"), int64_t{1} << 60);
  EXPECT_EQ(bound("7EB"), int64_t{7} << 60);             // the largest count of EB that fits
  EXPECT_EQ(bound("8EB"), std::nullopt);                 // 2^63: one past int64
  EXPECT_EQ(bound("9999EB"), std::nullopt);              // was a negative bound
  EXPECT_EQ(bound(k20Digits + "EB"), std::nullopt);      // was an abort
  EXPECT_EQ(bound("8191PB"), int64_t{8191} << 50);
  EXPECT_EQ(bound("8192PB"), std::nullopt);
  const OomEvent e = only_event("RuntimeError: CUDA out of memory. Tried to allocate more than 9999EB memory.\n");
  EXPECT_EQ(e.format, "pytorch_garbage_size");
  EXPECT_EQ(e.string_field("requested_text"), "more than 9999EB");
}

TEST(OversizedNumbers, TensorflowShapeWithAnOversizedDimension) {
  const OomEvent e = only_event("ResourceExhaustedError: OOM when allocating tensor with shape[" + k20Digits +
                                ",1024] and type float on /job:localhost/replica:0/task:0/device:GPU:" + k20Digits +
                                " by allocator GPU_0_bfc\n");
  EXPECT_EQ(e.format, "tf_oom_tensor");
  EXPECT_EQ(e.field("shape"), nullptr);        // the shape is unknown, not [1024]
  EXPECT_EQ(e.string_field("dtype"), "float");
  EXPECT_FALSE(e.bytes("requested"));
  EXPECT_EQ(e.device, std::nullopt);
  EXPECT_EQ(e.string_field("device_kind"), "GPU");
  EXPECT_EQ(e.string_field("allocator"), "GPU_0_bfc");
  // No dtype: no float32 figure either.
  const OomEvent bare = only_event("OOM when allocating tensor with shape[" + k20Digits + ", 2]\n");
  EXPECT_EQ(bare.field("shape"), nullptr);
  EXPECT_EQ(bare.field("requested_bytes_if_float32"), nullptr);
}

TEST(OversizedNumbers, TensorflowAllocatorFigures) {
  const OomEvent bfc = only_event("W bfc_allocator.cc:275] Allocator (GPU_" + k20Digits +
                                  "_bfc) ran out of memory trying to allocate 2.00GiB (rounded to " + k20Digits +
                                  ")requested by op MatMul\n");
  EXPECT_EQ(bfc.format, "tf_bfc_oom");
  EXPECT_EQ(bfc.device, std::nullopt);
  EXPECT_EQ(bfc.bytes("requested"), 2 * kGiB);
  EXPECT_EQ(bfc.field("requested_rounded_bytes"), nullptr);
  EXPECT_EQ(bfc.string_field("op"), "MatMul");
  // A size with 19 decimals is beyond parse_printed_size: the request is left out (was a read of an
  // empty optional).
  const OomEvent decimals = only_event(
      "W bfc_allocator.cc:275] Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.0000000000000000000GiB\n");
  EXPECT_EQ(decimals.format, "tf_bfc_oom");
  EXPECT_EQ(decimals.device, 0);
  EXPECT_FALSE(decimals.bytes("requested"));
  const OomEvent stats = only_event("I bfc_allocator.cc:1] Sum Total of in-use chunks: 1.00GiB\n"
                                    "I bfc_allocator.cc:2] memory_limit_: " + k20Digits + " available bytes\n");
  EXPECT_EQ(stats.format, "tf_bfc_stats");
  EXPECT_EQ(stats.bytes("in_use_chunks"), kGiB);
  EXPECT_EQ(stats.field("memory_limit_bytes"), nullptr);
  // The exact count beside the rounded one does not fit: the rounded one stands, with its precision.
  const OomEvent driver = only_event("E cuda_driver.cc:1] failed to allocate 2.00G (" + k20Digits +
                                     " bytes) from device: CUDA_ERROR_OUT_OF_MEMORY\n");
  EXPECT_EQ(driver.format, "tf_cuda_driver_alloc");
  EXPECT_EQ(driver.bytes("requested"), 2 * kGiB);
  EXPECT_GT(driver.quantity("requested")->tolerance_bytes, 0u);
  EXPECT_EQ(driver.int_field("requested_bytes_from_text"), static_cast<int64_t>(2 * kGiB));
  const OomEvent host = only_event("E gpu_host_allocator.cc:1] failed to alloc " + k40Digits + " bytes on host\n");
  EXPECT_EQ(host.format, "host_or_unified_alloc");
  EXPECT_FALSE(host.bytes("requested"));
  EXPECT_EQ(host.string_field("memory_kind"), "on host");
}

TEST(OversizedNumbers, XlaGgmlAndCudaLibraries) {
  const OomEvent xla = only_event("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate "
                                  "request for 1.00GiB (" + k20Digits + "B) on device ordinal " + k20Digits + "\n");
  EXPECT_EQ(xla.format, "xla_failed_request");
  EXPECT_EQ(xla.device, std::nullopt);
  EXPECT_EQ(xla.bytes("requested"), kGiB);
  EXPECT_EQ(xla.int_field("requested_bytes_from_text"), static_cast<int64_t>(kGiB));
  const OomEvent xla_bytes = only_event("RESOURCE_EXHAUSTED: Out of memory while trying to allocate " + k40Digits +
                                        " bytes.\n");
  EXPECT_EQ(xla_bytes.format, "xla_oom_bytes");
  EXPECT_FALSE(xla_bytes.bytes("requested"));
  const OomEvent ggml = only_event("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 1024.00 MiB on device " +
                                   k20Digits + ": cudaMalloc failed: out of memory\n"
                                   "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size " + k20Digits + "\n");
  EXPECT_EQ(ggml.format, "ggml_cuda_alloc");
  EXPECT_EQ(ggml.device, std::nullopt);
  EXPECT_EQ(ggml.bytes("requested"), kGiB);   // the exact size does not fit: the MiB figure stands
  EXPECT_EQ(ggml.string_field("buffer_backend"), "CUDA0");
  const OomEvent ggml_huge = only_event("allocating " + k40Digits + " MiB on device 0: cudaMalloc failed: out of memory\n");
  EXPECT_EQ(ggml_huge.format, "ggml_cuda_alloc");
  EXPECT_EQ(ggml_huge.device, 0);
  EXPECT_FALSE(ggml_huge.bytes("requested"));
  const OomEvent blas = only_event("CUBLAS_STATUS_ALLOC_FAILED on GPU=" + k20Digits + "\n");
  EXPECT_EQ(blas.format, "library_status");
  EXPECT_EQ(blas.device, std::nullopt);
  EXPECT_EQ(blas.string_field("status"), "CUBLAS_STATUS_ALLOC_FAILED");
}

TEST(OversizedNumbers, VllmCountsAreLeftOut) {
  const OomEvent kv = only_event("INFO 01-01 kv_cache_utils.py:1] GPU KV cache size: 99,999,999,999,999,999,999 tokens\n");
  EXPECT_EQ(kv.format, "vllm_memory_info");
  EXPECT_EQ(kv.field("kv_cache_tokens"), nullptr);
  EXPECT_TRUE(event_json("INFO 01-01 kv_cache_utils.py:1] GPU KV cache size: 99,999,999,999,999,999,999 tokens\n")
                  ["kv_cache_tokens"].is_null());
  const OomEvent conc = only_event("INFO 01-01 kv_cache_utils.py:1] Maximum concurrency for " + k20Digits +
                                   " tokens per request: 3.50x\n");
  EXPECT_EQ(conc.field("concurrency_tokens_per_request"), nullptr);
  ASSERT_NE(conc.field("max_concurrency"), nullptr);
  EXPECT_EQ(std::get<double>(*conc.field("max_concurrency")), 3.5);
  const OomEvent seq = only_event("ValueError: The model's max seq len (" + k20Digits +
                                  ") is larger than the maximum number of tokens that can be stored in KV cache (16384). "
                                  "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n");
  EXPECT_EQ(seq.format, "vllm_max_seq_len_gt_kv_tokens");
  EXPECT_EQ(seq.field("max_model_len"), nullptr);
  EXPECT_EQ(seq.int_field("kv_cache_tokens"), 16384);
  // A free figure with 41 digits: left out; the total and the request stay.
  const OomEvent startup = only_event("ValueError: Free memory on device (" + k40Digits + "1/79.19 GiB) on startup is "
                                      "less than desired GPU memory utilization (0.9, 71.27 GiB).\n");
  EXPECT_EQ(startup.format, "vllm_startup_free_memory");
  EXPECT_FALSE(startup.bytes("free"));
  EXPECT_EQ(startup.bytes("total"), 85029615043u);   // 79.19 GiB
  EXPECT_EQ(startup.bytes("requested"), 76525579796u);   // 71.27 GiB
}

TEST(OversizedNumbers, TracebackLineNumberIsNull) {
  const std::string text = "Traceback (most recent call last):\n"
                           "  File \"/home/me/train.py\", line " + k20Digits + ", in train_step\n"
                           "    loss.backward()\n"
                           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total "
                           "capacity of 7.79 GiB of which 1.00 MiB is free.\n";
  const OomEvent e = only_event(text);
  ASSERT_TRUE(e.traceback);
  ASSERT_EQ(e.traceback->frames.size(), 1u);
  EXPECT_EQ(e.traceback->frames[0].file, "/home/me/train.py");
  EXPECT_EQ(e.traceback->frames[0].line, std::nullopt);
  EXPECT_EQ(e.traceback->frames[0].function, "train_step");
  EXPECT_EQ(e.traceback->operation, "backward");
  Json j = event_json(text);
  EXPECT_TRUE(j["traceback"]["frames"][0]["line"].is_null());
  EXPECT_TRUE(j["traceback"]["user_frame"]["line"].is_null());
  EXPECT_EQ(j["traceback"]["user_frame"]["function"], "train_step");
}

}  // namespace
}  // namespace oomdoc
