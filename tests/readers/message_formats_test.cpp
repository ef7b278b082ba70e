// Table-driven: one message per format, written from each framework's message template, and the
// fields explain must read from it.
#include <gtest/gtest.h>

#include "readers/log_line.h"
#include "readers/log_scanner.h"

namespace oomdoc {
namespace {

OomEvent only_event(const ScanResult& scan) {
  EXPECT_EQ(scan.events.size(), 1u);
  return scan.events.front();
}

TEST(PytorchFormats, NewFormatWithEveryFigure) {
  auto scan = scan_text(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.15 GiB "
      "of which 1.25 GiB is free. Process 4242 has 10.00 GiB memory in use. Including non-PyTorch memory, this process "
      "has 67.80 GiB memory in use. Of the allocated memory 60.00 GiB is allocated by PyTorch, with 512.00 MiB allocated "
      "in private pools (e.g., CUDA Graphs), and 6.50 GiB is reserved by PyTorch but unallocated. If reserved but "
      "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.\n");
  const OomEvent& e = only_event(scan);
  EXPECT_EQ(e.format, "pytorch_new");
  EXPECT_EQ(e.framework, "pytorch");
  EXPECT_EQ(e.device, 3);
  EXPECT_EQ(e.bytes("requested"), 2 * kGiB);
  EXPECT_EQ(e.bytes("total"), 84986665370u);  // 79.15 GiB
  EXPECT_EQ(e.bytes("free"), 1342177280u);    // 1.25 GiB
  EXPECT_EQ(e.bytes("process"), 72799695667u);
  EXPECT_EQ(e.bytes("allocated"), 60 * kGiB);
  EXPECT_EQ(e.bytes("private_pools"), 512 * kMiB);
  EXPECT_EQ(e.bytes("reserved_unallocated"), 6979321856u);
  ASSERT_EQ(e.other_processes.size(), 1u);
  EXPECT_EQ(e.other_processes[0].pid, 4242u);
  EXPECT_EQ(e.other_processes[0].memory.bytes, 10 * kGiB);
  EXPECT_EQ(e.string_field("hint"), "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  EXPECT_EQ(e.string_field("capacity_spelling"), "capacity");
}

TEST(PytorchFormats, OldReservedFormatWrappedOverLines) {
  auto scan = scan_text(
      "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 1;\n"
      "7.80 GiB total capacity; 6.90 GiB already allocated; 10.19 MiB free;\n"
      "7.02 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb\n");
  const OomEvent& e = only_event(scan);
  EXPECT_EQ(e.format, "pytorch_old_reserved");
  EXPECT_EQ(e.line, 1u);
  EXPECT_EQ(e.end_line, 3u);
  EXPECT_EQ(e.device, 1);
  EXPECT_EQ(e.bytes("requested"), 20 * kMiB);
  EXPECT_EQ(e.bytes("reserved_total"), 7537667604u);
  EXPECT_EQ(e.bytes("free"), 10684989u);
  EXPECT_EQ(e.string_field("hint"), "max_split_size_mb");
}

TEST(PytorchFormats, OldCachedMeansReservedMinusAllocated) {
  const OomEvent& e = only_event(scan_text(
      "RuntimeError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 0; 3.95 GiB total capacity; 3.20 GiB already "
      "allocated; 20.06 MiB free; 100.50 MiB cached)\n"));
  EXPECT_EQ(e.format, "pytorch_old_cached");
  EXPECT_EQ(e.bytes("reserved_unallocated"), 105381888u);
  EXPECT_FALSE(e.bytes("reserved_total"));
}

TEST(PytorchFormats, MisspelledCapacityAndRocm) {
  const OomEvent& e = only_event(scan_text(
      "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacty of 63.98 GiB of "
      "which 0 bytes is free. Of the allocated memory 60.00 GiB is allocated by PyTorch, and 2.00 GiB is reserved by "
      "PyTorch but unallocated.\n"));
  EXPECT_EQ(e.framework, "pytorch-rocm");
  EXPECT_EQ(e.string_field("backend"), "HIP");
  EXPECT_EQ(e.string_field("capacity_spelling"), "capacty");
  EXPECT_EQ(e.bytes("free"), 0u);
}

TEST(PytorchFormats, MpsUsesBinaryUnitsBehindDecimalLabels) {
  const OomEvent& e = only_event(scan_text(
      "RuntimeError: MPS backend out of memory (MPS allocated: 8.00 GB, other allocations: 2.00 GB, max allowed: 10.00 "
      "GB). Tried to allocate 512.00 MB on private pool.\n"));
  EXPECT_EQ(e.format, "mps");
  EXPECT_EQ(e.bytes("mps_allocated"), 8 * kGiB);
  EXPECT_EQ(e.bytes("max_allowed"), 10 * kGiB);
  EXPECT_EQ(e.bytes("requested"), 512 * kMiB);
  EXPECT_EQ(e.string_field("pool"), "private");
}

TEST(PytorchFormats, CudaMallocAsyncBlockAndUnlimitedLimit) {
  const OomEvent& e = only_event(scan_text(
      "torch.cuda.OutOfMemoryError: Allocation on device 1 would exceed allowed memory. (out of memory)\n"
      "Currently allocated     : 10.00 GiB\n"
      "Requested               : 1.00 GiB\n"
      "Device limit            : 11.00 GiB\n"
      "Free (according to CUDA): 0 bytes\n"
      "PyTorch limit (set by user-supplied memory fraction)\n"
      "                        : 17179869184.00 GiB\n"));
  EXPECT_EQ(e.format, "pytorch_cudamallocasync");
  EXPECT_EQ(e.device, 1);
  EXPECT_EQ(e.bytes("allocated"), 10 * kGiB);
  EXPECT_EQ(e.bytes("total"), 11 * kGiB);
  EXPECT_TRUE(e.quantity("pytorch_limit")->overflow);
  EXPECT_EQ(e.end_line, 7u);
}

TEST(PytorchFormats, DriverAndLibraryErrorsWithoutFigures) {
  EXPECT_EQ(only_event(scan_text("RuntimeError: CUDA error: out of memory\n")).format, "cuda_error_oom");
  const OomEvent& blas = only_event(scan_text(
      "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n"));
  EXPECT_EQ(blas.format, "library_status");
  EXPECT_EQ(blas.string_field("status"), "CUBLAS_STATUS_ALLOC_FAILED");
  EXPECT_EQ(only_event(scan_text("cudnn error: CUDNN_STATUS_NOT_ALLOCATED\n")).format, "library_status");
  const OomEvent& garbage = only_event(scan_text(
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory.\n"));
  EXPECT_EQ(garbage.format, "pytorch_garbage_size");
  EXPECT_FALSE(garbage.bytes("requested"));
  EXPECT_EQ(garbage.int_field("requested_lower_bound_bytes"), int64_t{1} << 60);
}

TEST(VllmFormats, ErrorsWithTheirNumbers) {
  const OomEvent& seq = only_event(scan_text(
      "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV "
      "cache (20480). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n"));
  EXPECT_EQ(seq.format, "vllm_max_seq_len_gt_kv_tokens");
  EXPECT_EQ(seq.int_field("max_model_len"), 32768);
  EXPECT_EQ(seq.int_field("kv_cache_tokens"), 20480);

  const OomEvent& kv = only_event(scan_text(
      "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, "
      "which is larger than the available KV cache memory (4.50 GiB). Based on the available memory, the estimated maximum "
      "model length is 36864. Try increasing `gpu_memory_utilization` or decreasing `max_model_len`.\n"));
  EXPECT_EQ(kv.format, "vllm_kv_needed_gt_available");
  EXPECT_EQ(kv.bytes("kv_needed"), 16 * kGiB);
  EXPECT_EQ(kv.bytes("kv_available"), 4831838208u);
  EXPECT_EQ(kv.int_field("estimated_max_model_len"), 36864);

  const OomEvent& warm = only_event(scan_text(
      "(VllmWorker rank=2 pid=77) ERROR 01-01 00:00:00 [core.py:1] RuntimeError: CUDA out of memory occurred when warming "
      "up sampler with 512 dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization`.\n"));
  EXPECT_EQ(warm.format, "vllm_sampler_warmup_oom");
  EXPECT_EQ(warm.rank, 2);
  EXPECT_EQ(warm.int_field("worker_rank"), 2);
  EXPECT_EQ(warm.int_field("dummy_requests"), 512);
}

TEST(VllmFormats, StartupFreeMemoryErrorAndInfo) {
  const OomEvent& err = only_event(scan_text(
      "ValueError: Free memory on device (30.50/79.19 GiB) on startup is less than desired GPU memory utilization (0.9, "
      "71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n"));
  EXPECT_TRUE(err.is_error);
  EXPECT_EQ(err.bytes("free"), 32749125632u);  // 30.50 GiB, the unit shared with the total
  EXPECT_EQ(err.quantity("free")->text, "30.50");
  const OomEvent& info = only_event(scan_text(
      "Free memory on device (70.00/79.19 GiB) on startup. Desired GPU memory utilization is (0.9, 71.27 GiB).\n"));
  EXPECT_FALSE(info.is_error);
}

// The accounting lines of one startup are one report: informational, unless a figure says no KV
// cache fits (a negative KV budget here).
TEST(VllmFormats, AccountingLinesOfOneStartupAreOneReport) {
  auto scan = scan_text(
      "INFO 01-01 worker.py:1] model weights take 14.99GiB; non_torch_memory takes 0.50GiB; PyTorch activation peak "
      "memory takes 1.20GiB; the rest of the memory reserved for KV Cache is 2.25GiB.\n"
      "INFO 01-01 kv_cache_utils.py:1] GPU KV cache size: 158,656 tokens\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_FALSE(scan.events[0].is_error);
  EXPECT_EQ(scan.events[0].line, 1u);
  EXPECT_EQ(scan.events[0].end_line, 2u);
  EXPECT_EQ(scan.events[0].bytes("weights"), 16095389942u);
  EXPECT_EQ(scan.events[0].bytes("kv_cache"), 2415919104u);
  EXPECT_EQ(scan.events[0].int_field("kv_cache_tokens"), 158656);
  auto negative = scan_text(
      "INFO 01-01 worker.py:1] model weights take 14.99GiB; non_torch_memory takes 0.50GiB; PyTorch activation peak "
      "memory takes 1.20GiB; the rest of the memory reserved for KV Cache is -0.25GiB.\n");
  ASSERT_EQ(negative.events.size(), 1u);
  EXPECT_TRUE(negative.events[0].is_error);
  EXPECT_EQ(negative.events[0].int_field("kv_cache_bytes"), -268435456);
  EXPECT_EQ(negative.events[0].string_field("kv_cache_text"), "-0.25GiB");
  // Two startups' figures that disagree stay two reports.
  auto two = scan_text("INFO Available KV cache memory: 2.00 GiB\nINFO Available KV cache memory: 3.00 GiB\n");
  EXPECT_EQ(two.events.size(), 2u);
}

TEST(TensorflowFormats, TensorShapeTimesDtype) {
  const OomEvent& e = only_event(scan_text(
      "ResourceExhaustedError: OOM when allocating tensor with shape[32,1024,1024] and type float on "
      "/job:localhost/replica:0/task:0/device:GPU:2 by allocator GPU_2_bfc\n"));
  EXPECT_EQ(e.format, "tf_oom_tensor");
  EXPECT_EQ(e.bytes("requested"), 32ull * 1024 * 1024 * 4);
  EXPECT_EQ(e.device, 2);
  EXPECT_EQ(e.string_field("allocator"), "GPU_2_bfc");
}

TEST(TensorflowFormats, BfcWarningIsNotAFailure) {
  const OomEvent& e = only_event(scan_text(
      "W tensorflow/core/common_runtime/bfc_allocator.cc:275] Allocator (GPU_0_bfc) ran out of memory trying to allocate "
      "3.05GiB with freed_by_count=0. The caller indicates that this is not a failure, but may mean that there could be "
      "performance gains if more memory were available.\n"));
  EXPECT_FALSE(e.is_error);
  EXPECT_EQ(e.bytes("requested"), 3274912563u);
}

TEST(TensorflowFormats, DriverAllocationUsesTheExactBytes) {
  const OomEvent& e = only_event(scan_text(
      "E tensorflow/stream_executor/cuda/cuda_driver.cc:806] failed to allocate 3.77G (4046333952 bytes) from device: "
      "CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"));
  EXPECT_EQ(e.format, "tf_cuda_driver_alloc");
  EXPECT_EQ(e.bytes("requested"), 4046333952u);
  EXPECT_EQ(e.int_field("requested_bytes_from_text"), 4048006676);
}

TEST(XlaFormats, BytesAndBufferAssignment) {
  auto scan = scan_text(
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1073741824 bytes.\n"
      "BufferAssignment OOM Debugging.\n"
      "BufferAssignment stats:\n"
      "             parameter allocation:    2.00GiB\n"
      "                 total allocation:    5.50GiB\n"
      "              total fragmentation:   10.00MiB (0.18%)\n");
  const OomEvent& e = only_event(scan);
  EXPECT_EQ(e.bytes("requested"), kGiB);
  EXPECT_EQ(e.bytes("xla_parameter_allocation"), 2 * kGiB);
  EXPECT_EQ(e.bytes("xla_total_allocation"), 5905580032u);
  EXPECT_EQ(e.bytes("xla_total_fragmentation"), 10 * kMiB);
}

TEST(GgmlFormats, RequestedMiBThenExactBuffer) {
  const OomEvent& e = only_event(scan_text(
      "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 2048.50 MiB on device 1: cudaMalloc failed: out of memory\n"
      "ggml_gallocr_reserve_n: failed to allocate CUDA1 buffer of size 2148007936\n"));
  EXPECT_EQ(e.framework, "llama.cpp");
  EXPECT_EQ(e.device, 1);
  EXPECT_EQ(e.bytes("requested"), 2148007936u);
  EXPECT_EQ(e.string_field("buffer_backend"), "CUDA1");
  EXPECT_EQ(e.string_field("llama_buffer"), "compute");   // ggml_gallocr: the compute graph
}

// A HIP build words the refusal as CUDA's; the buffer line names ROCm.
TEST(GgmlFormats, RocmBuildNamedByItsBufferLine) {
  const OomEvent& e = only_event(scan_text(
      "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4352.00 MiB on device 1: cudaMalloc failed: out of memory\n"
      "ggml_gallocr_reserve_n: failed to allocate ROCm1 buffer of size 4563402752\n"));
  EXPECT_EQ(e.string_field("backend"), "ROCm");
  EXPECT_EQ(e.string_field("buffer_backend"), "ROCm1");
  EXPECT_EQ(e.device, 1);
  EXPECT_EQ(e.bytes("requested"), 4563402752u);
}

TEST(GgmlFormats, NamesTheBufferThatFailed) {
  auto buffer = [](const std::string& text) { return only_event(scan_text(text)).string_field("llama_buffer"); };
  EXPECT_EQ(buffer("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 8192.00 MiB on device 0: cudaMalloc failed: out of memory\n"
                   "llama_kv_cache_init: failed to allocate buffer for kv cache\n"
                   "llama_init_from_model: llama_kv_cache_init() failed for self-attention cache\n"),
            "kv_cache");
  EXPECT_EQ(buffer("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4403.49 MiB on device 0: cudaMalloc failed: out of memory\n"
                   "alloc_tensor_range: failed to allocate CUDA0 buffer of size 4617395200\n"
                   "llama_model_load: error loading model: unable to allocate CUDA0 buffer\n"),
            "model");
  EXPECT_EQ(buffer("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 100.00 MiB on device 0: cudaMalloc failed: out of memory\n"),
            std::nullopt);
}

TEST(OtherFormats, SglangOllamaNccl) {
  EXPECT_EQ(only_event(scan_text("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n")).format,
            "sglang_not_enough_memory");
  EXPECT_EQ(only_event(scan_text("Error: llama runner exited, you may not have enough available memory to run this model\n")).format,
            "ollama_runner");
  EXPECT_EQ(only_event(scan_text("node1:123:456 [0] NCCL WARN Cuda failure 'out of memory'\n")).format, "nccl_cuda_oom");
}

TEST(Formats, OrdinaryLinesAreNotEvents) {
  auto scan = scan_text(
      "epoch 1 step 10 loss 2.31 lr 3e-4\n"
      "Saving model checkpoint to out/checkpoint-500\n"
      "Allocating memory for the dataloader workers\n"
      "The memory of the past is kept in the library.\n");
  EXPECT_TRUE(scan.events.empty());
}


TEST(PytorchFormats, ShortAndBareFormsAreEvents) {
  OomEvent short_form = only_event(scan_text("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"));
  EXPECT_EQ(short_form.format, "pytorch_new_truncated");
  EXPECT_EQ(short_form.bytes("requested"), 2147483648u);
  OomEvent no_prefix = only_event(scan_text("CUDA out of memory. Tried to allocate 2.00 GiB\n"));
  EXPECT_EQ(no_prefix.bytes("requested"), 2147483648u);
  OomEvent bare = only_event(scan_text("torch.OutOfMemoryError: CUDA out of memory.\n"));
  EXPECT_EQ(bare.format, "pytorch_new_truncated");
  EXPECT_EQ(bare.framework, "pytorch");
  EXPECT_FALSE(bare.bytes("requested").has_value());
  // Prose that mentions the error is not an event.
  EXPECT_TRUE(scan_text("retrying after CUDA out of memory with a smaller batch\n").events.empty());
}

TEST(PytorchFormats, DefaultCpuAllocatorIsAHostEvent) {
  OomEvent e = only_event(scan_text("RuntimeError: [enforce fail at alloc_cpu.cpp:83] data. DefaultCPUAllocator: can't "
                                    "allocate memory: you tried to allocate 21474836480 bytes. Error code 12 (Cannot "
                                    "allocate memory)\n"));
  EXPECT_EQ(e.format, "pytorch_cpu_allocator");
  EXPECT_EQ(e.string_field("device_kind"), "CPU");
  EXPECT_EQ(e.bytes("requested"), 21474836480u);
}

TEST(PytorchFormats, VllmProcessTagIsRecorded) {
  OomEvent e = only_event(scan_text(
      "(VllmWorker rank=1 pid=4731) ERROR 05-09 10:47:36 [multiproc_executor.py:470] torch.OutOfMemoryError: CUDA out "
      "of memory. Tried to allocate 150.00 MiB. GPU 1 has a total capacity of 21.99 GiB of which 39.00 MiB is free.\n"));
  EXPECT_EQ(e.framework, "pytorch");
  ASSERT_NE(e.field("vllm_process"), nullptr);
  EXPECT_EQ(std::get<bool>(*e.field("vllm_process")), true);
  EXPECT_EQ(e.int_field("worker_rank"), 1);
  OomEvent plain = only_event(scan_text("[rank1]: torch.OutOfMemoryError: CUDA out of memory.\n"));
  EXPECT_EQ(plain.field("vllm_process"), nullptr);
}


TEST(PytorchFormats, RaysRepeatedSuffixCountsPrints) {
  const std::string oom =
      "(RayWorkerWrapper pid=1463574, ip=192.168.10.60) ERROR 03-27 10:29:01 [worker.py:267] torch.OutOfMemoryError: "
      "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.06 GiB is free.";
  OomEvent alone = only_event(scan_text(oom + " [repeated 7x across cluster]\n"));
  EXPECT_EQ(alone.repeats, 7u);
  EXPECT_EQ(alone.last_repeat_line, 1u);
  EXPECT_EQ(alone.message.find("repeated"), std::string::npos) << alone.message;
  EXPECT_NE(alone.field("vllm_process"), nullptr);   // RayWorkerWrapper is vLLM's Ray worker
  // The first print, then Ray's batch of 7 more: 8 in all.
  OomEvent both = only_event(scan_text(oom + "\nstep\n" + oom + " [repeated 7x across cluster]\n"));
  EXPECT_EQ(both.repeats, 8u);
  EXPECT_EQ(both.last_repeat_line, 3u);
}

TEST(LogLine, LoggerPrefixIsStripped) {
  EXPECT_EQ(strip_logger_prefix("ERROR 05-01 10:00:20 [core.py:396] ValueError: No available memory"),
            "ValueError: No available memory");
  EXPECT_EQ(strip_logger_prefix("INFO 05-01 10:00:20.123 [gpu_worker.py:227] Available KV cache memory: -0.85 GiB"),
            "Available KV cache memory: -0.85 GiB");
  EXPECT_EQ(strip_logger_prefix("ERROR: something"), "ERROR: something");
  EXPECT_EQ(strip_logger_prefix("ERROR 05-01 [x] y"), "ERROR 05-01 [x] y");
}

TEST(VllmFormats, ErrorMessageHasNoLoggingPrefix) {
  ScanResult scan = scan_text(
      "vllm-1  | INFO 05-01 10:00:10 [gpu_model_runner.py:1329] Model loading took 14.9889 GiB and 5.123 seconds\n"
      "vllm-1  | (EngineCore_DP0 pid=9) INFO 05-01 10:00:20 [gpu_worker.py:227] Available KV cache memory: -0.85 GiB\n"
      "vllm-1  | (EngineCore_DP0 pid=9) ERROR 05-01 10:00:20 [core.py:396] EngineCore failed to start.\n"
      "vllm-1  | (EngineCore_DP0 pid=9) ERROR 05-01 10:00:20 [core.py:396] ValueError: No available memory for the cache "
      "blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].string_field("error_message"),
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine.");
  EXPECT_EQ(scan.events[0].int_field("error_line"), 4);
}

}  // namespace
}  // namespace oomdoc
