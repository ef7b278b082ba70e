// Message forms found missing or misread on real logs (tests/fixtures/explain/real/README.md names
// each thread): each figure must come out exactly.
#include <gtest/gtest.h>

#include "readers/log_scanner.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

OomEvent only_event(const std::string& fixture) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/" + fixture)));
  EXPECT_EQ(scan.events.size(), 1u) << fixture;
  return scan.events.empty() ? OomEvent{} : scan.events.front();
}

TEST(RealMessages, JaxOutOfMemoryAllocatingForm) {
  OomEvent e = only_event("jax_out_of_memory_allocating.log");
  EXPECT_EQ(e.framework, "jax");
  EXPECT_EQ(e.format, "xla_oom_bytes");
  EXPECT_EQ(e.bytes("requested"), 20029400304u);
}

TEST(RealMessages, WindowsDefaultCpuAllocatorForm) {
  OomEvent e = only_event("cpu_allocator_windows.log");
  EXPECT_EQ(e.format, "pytorch_cpu_allocator");
  EXPECT_EQ(e.string_field("device_kind"), "CPU");
  EXPECT_EQ(e.bytes("requested"), 1073741824u);
}

TEST(RealMessages, OllamaRunnerTerminatedWithTheBufferSize) {
  OomEvent e = only_event("ollama_runner_terminated.log");
  EXPECT_EQ(e.framework, "ollama");
  EXPECT_EQ(e.format, "ollama_runner");
  EXPECT_EQ(e.line, 2u);
  EXPECT_EQ(e.end_line, 3u);
  EXPECT_EQ(e.bytes("requested"), 838447104u);
  EXPECT_EQ(e.quantity("requested")->tolerance_bytes, 0u);
  EXPECT_EQ(e.string_field("buffer_backend"), "CUDA0");
  EXPECT_EQ(e.device, 0);
  EXPECT_EQ(e.string_field("llama_buffer"), "compute");
  EXPECT_EQ(e.string_field("runner_error"), "cudaMalloc failed: out of memory");
}

TEST(RealMessages, OllamaRunnerQuotingCudaErrorIsOllamasNotPytorchs) {
  ScanResult scan = scan_text("Error: llama runner process has terminated: CUDA error: out of memory\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].framework, "ollama");
  EXPECT_FALSE(scan.events[0].bytes("requested").has_value());
}

TEST(RealMessages, RocmMessageWithAMemoryFractionAndHipGraphPools) {
  OomEvent e = only_event("rocm_memory_fraction.log");
  EXPECT_EQ(e.framework, "pytorch-rocm");
  EXPECT_EQ(e.bytes("requested"), 2097152u);
  EXPECT_EQ(e.bytes("total"), 309216170476u);   // 287.98 GiB
  EXPECT_EQ(e.bytes("free"), 296202419569u);    // 275.86 GiB
  EXPECT_EQ(e.bytes("pytorch_limit"), 1127428915u);   // 1.05 GiB allowed
  EXPECT_EQ(e.quantity("pytorch_limit")->text, "1.05 GiB");
  // "(e.g., HIP Graphs)" no longer hides the figures after it.
  EXPECT_EQ(e.bytes("allocated"), 1066412278u);       // 1017.01 MiB
  EXPECT_EQ(e.bytes("private_pools"), 17825792u);     // 17.00 MiB
  EXPECT_EQ(e.bytes("reserved_unallocated"), 57661194u);  // 54.99 MiB
}

TEST(RealMessages, XpuMessageWithAMemoryFraction) {
  OomEvent e = only_event("xpu_memory_fraction.log");
  EXPECT_EQ(e.framework, "pytorch-xpu");
  EXPECT_EQ(e.bytes("requested"), 8708046193u);   // 8.11 GiB
  EXPECT_EQ(e.bytes("pytorch_limit"), 8879844884u);   // 8.27 GiB
  EXPECT_EQ(e.bytes("allocated"), 0u);
  EXPECT_EQ(e.bytes("reserved_unallocated"), 0u);
  EXPECT_EQ(e.string_field("hint"), "empty_cache");
}

TEST(RealMessages, LibraryStatusNamesWhoReportedIt) {
  EXPECT_EQ(only_event("tf_cudnn_handle.log").framework, "tensorflow");
  EXPECT_EQ(only_event("lua_torch_cudnn.log").framework, "cudnn");
  ScanResult cntk = scan_text("RuntimeError: CUBLAS failure 3: CUBLAS_STATUS_ALLOC_FAILED ; GPU=1 ;\n");
  ASSERT_EQ(cntk.events.size(), 1u);
  EXPECT_EQ(cntk.events[0].framework, "cublas");   // CNTK's, not PyTorch's, despite "RuntimeError"
  EXPECT_EQ(cntk.events[0].device, 1);
  ScanResult torch = scan_text("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n");
  ASSERT_EQ(torch.events.size(), 1u);
  EXPECT_EQ(torch.events[0].framework, "pytorch");
}

TEST(RealMessages, NcclNamesTheBufferSizeOnALaterLine) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/nccl_calloc.log")));
  ASSERT_EQ(scan.events.size(), 1u);
  const OomEvent& e = scan.events[0];
  EXPECT_EQ(e.format, "nccl_cuda_oom");
  EXPECT_EQ(e.bytes("requested"), 6291456u);
  EXPECT_EQ(e.line, 1u);
  EXPECT_EQ(e.end_line, 3u);
}

TEST(RealMessages, TorchrunWorkerKilledBySigkill) {
  OomEvent e = only_event("torchrun_sigkill.log");
  EXPECT_EQ(e.format, "process_killed");
  EXPECT_EQ(e.framework, "pytorch");
  EXPECT_EQ(e.line, 12u);
  EXPECT_EQ(e.int_field("pid"), 36071);
  EXPECT_EQ(e.string_field("device_kind"), "CPU");
  ScanResult py = scan_text("subprocess.CalledProcessError: Command '['python', 'train.py']' died with <Signals.SIGKILL: 9>.\n");
  ASSERT_EQ(py.events.size(), 1u);
  EXPECT_EQ(py.events[0].framework, "python");
  EXPECT_FALSE(py.events[0].int_field("pid").has_value());
  // A log that only mentions the signal name is not an event.
  EXPECT_TRUE(scan_text("WARNING: sending SIGKILL to stale workers\n").events.empty());
}

TEST(RealMessages, TensorflowShapeIsReadForTheBatchAdvice) {
  ScanResult scan = scan_text(
      "ResourceExhaustedError (see above for traceback): OOM when allocating tensor with shape[128,3,8,128,8,128] and "
      "type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].bytes("requested"), 1610612736u);   // 128*3*8*128*8*128 floats
}

}  // namespace
// vLLM logs its traceback through its logger: the `raise ValueError("No available memory ...")`
// source line under the frame is code, not a first print of the error (vllm-project/vllm#27508).
TEST(RealMessages, VllmLoggedSourceLineIsNotAPrint) {
  const std::string p = "(EngineCore_DP0 pid=223840) ERROR 10-25 13:08:43 [core.py:708] ";
  ScanResult scan = scan_text(
      p + "  File \"/opt/vllm/v1/core/kv_cache_utils.py\", line 699, in check_enough_kv_cache_memory\n" +
      p + "    raise ValueError(\"No available memory for the cache blocks. \"\n" +
      p + "                     \"Try increasing `gpu_memory_utilization` when \"\n" +
      p + "                     \"initializing the engine.\")\n" +
      p + "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
          "initializing the engine.\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].format, "vllm_no_cache_blocks");
  EXPECT_EQ(scan.events[0].line, 5u);
  EXPECT_EQ(scan.events[0].repeats, 1u);
}

// jaxlib before 2023 built XLA from a vendored TensorFlow (external/org_tensorflow/): its BFC warning
// is JAX's, and BFC's request rounded up to 256 bytes is the XLA error's exact one (t5x#870): one
// event.
TEST(RealMessages, JaxWithVendoredTensorflowIsOneEvent) {
  ScanResult scan = scan_text(
      "2022-10-25 21:52:08.138224: W external/org_tensorflow/tensorflow/tsl/framework/bfc_allocator.cc:479] Allocator "
      "(GPU_0_bfc) ran out of memory trying to allocate 27.93GiB (rounded to 29995136256)requested by op\n"
      "2022-10-25 21:52:08.139090: W external/org_tensorflow/tensorflow/tsl/framework/bfc_allocator.cc:492] ****____\n"
      "2022-10-25 21:52:08.148530: E external/org_tensorflow/tensorflow/compiler/xla/pjrt/pjrt_stream_executor_client.cc:"
      "2153] Execution of replica 0 failed: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 29995136128 bytes.\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].framework, "jax");
  EXPECT_EQ(scan.events[0].format, "xla_oom_bytes");
  EXPECT_EQ(scan.events[0].bytes("requested"), 29995136128u);
  EXPECT_EQ(scan.events[0].int_field("allocator_warning_line"), 1);
}

}  // namespace oomdoc
