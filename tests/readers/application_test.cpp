// Which program an OOM comes from (readers/application.h), on real log excerpts
// (tests/fixtures/explain/real/README.md names each thread).
#include "readers/application.h"

#include <gtest/gtest.h>

#include "readers/log_scanner.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

OomEvent first_event(const std::string& fixture) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/" + fixture)));
  EXPECT_FALSE(scan.events.empty()) << fixture;
  return scan.events.empty() ? OomEvent{} : scan.events.front();
}

TEST(Application, ComfyUiFromItsErrorReportAndItsErrorLine) {
  EXPECT_EQ(first_event("comfyui_error_report.log").string_field("application"), "comfyui");
  // "!!! Exception during processing !!! Allocation on device" is itself the event's line.
  EXPECT_EQ(first_event("comfyui_exception.log").string_field("application"), "comfyui");
}

TEST(Application, StableDiffusionWebuiFromItsFramesOrTheLineAfter) {
  EXPECT_EQ(first_event("sd_webui_decode.log").string_field("application"), "sd-webui");
  // Only the line after the message names the webui ("Stable diffusion model failed to load").
  EXPECT_EQ(first_event("sd_webui_2gb_load.log").string_field("application"), "sd-webui");
}

TEST(Application, VllmFromItsCaptureProgressBarWithoutAnyWorkerTag) {
  OomEvent e = first_event("vllm_graph_capture_untagged.log");
  EXPECT_EQ(e.framework, "pytorch");
  EXPECT_EQ(e.string_field("application"), "vllm");
  ASSERT_TRUE(e.traceback.has_value());
  // torch/cuda/graphs.py's capture_end is a capture under any caller.
  EXPECT_EQ(e.traceback->operation, "cuda_graph_capture");
}

TEST(Application, CaptureModelErrorLineGivesTheOperationWithoutATraceback) {
  OomEvent e = first_event("vllm_capture_model_ray.log");
  EXPECT_EQ(e.string_field("application"), "vllm");
  EXPECT_FALSE(e.traceback.has_value());
  EXPECT_EQ(e.string_field("log_operation"), "cuda_graph_capture");
}

TEST(Application, PlainTrainingLogNamesNoProgram) {
  ScanResult scan = scan_text(
      "Traceback (most recent call last):\n"
      "  File \"/home/u/train.py\", line 10, in <module>\n"
      "    loss.backward()\n"
      "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.80 GiB total capacity; 6.90 GiB "
      "already allocated; 10.19 MiB free; 7.02 GiB reserved in total by PyTorch)\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].field("application"), nullptr);
  EXPECT_EQ(scan.events[0].field("log_operation"), nullptr);
}

TEST(Application, OnlyTheNearestLinesDecide) {
  // A vLLM startup line far above (a colocated generation phase) does not make a later training
  // OOM vLLM's.
  std::string log = "INFO the current vLLM instance can use total_gpu_memory (79.10GiB) x gpu_memory_utilization (0.30) = 23.73GiB\n";
  for (size_t i = 0; i < kApplicationContextLines + 5; ++i) log += "step " + std::to_string(i) + " loss 0.5\n";
  log += "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
         "79.10 GiB of which 10.00 MiB is free. Including non-PyTorch memory, this process has 79.00 GiB memory in use. "
         "Of the allocated memory 70.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated.\n";
  ScanResult scan = scan_text(log);
  const OomEvent* oom = nullptr;
  for (const auto& e : scan.events) {
    if (e.framework == "pytorch") oom = &e;
  }
  ASSERT_NE(oom, nullptr);
  EXPECT_EQ(oom->field("application"), nullptr);
}

}  // namespace
}  // namespace oomdoc
