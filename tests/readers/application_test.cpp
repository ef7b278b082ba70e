// Which program an OOM comes from (readers/application.h), on real log excerpts
// (tests/fixtures/explain/real/README.md names each thread).
#include "readers/application.h"

#include <gtest/gtest.h>

#include "readers/log_line.h"
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

// vLLM's process names and logging prefix, from real lines: vllm-project/vllm#39788 ("Worker_TP2",
// vLLM 0.11+), #11251 (the logging prefix before vLLM 0.8, without '['), #12529.
TEST(Application, VllmProcessTagsAndLoggingPrefixNameVllm) {
  CleanLine tp = clean_line("(Worker_TP2 pid=99) ERROR 04-09 20:31:10 [multiproc_executor.py:949] WorkerProc hit an exception.");
  EXPECT_EQ(tp.process_tag, "Worker_TP2");
  EXPECT_FALSE(tp.rank);  // only "rank=N" gives a rank (log_line.cpp says why)
  EXPECT_TRUE(tp.logger_prefix);
  EXPECT_EQ(application_from_prefix(tp), "vllm");
  CleanLine brief = clean_line("(VllmWorker TP0 pid=123) INFO 05-01 12:00:00 [gpu_worker.py:123] Model loading took 14.25 GiB");
  EXPECT_EQ(application_from_prefix(brief), "vllm");
  CleanLine old = clean_line("(VllmWorkerProcess pid=90) ERROR 12-16 21:40:15 multiproc_worker_utils.py:229]   File "
                             "\"/usr/local/lib/python3.12/dist-packages/vllm/executor/multiproc_worker_utils.py\", line 223, "
                             "in _run_worker_process");
  EXPECT_TRUE(old.logger_prefix);
  EXPECT_EQ(strip_logger_prefix(old.text),
            "  File \"/usr/local/lib/python3.12/dist-packages/vllm/executor/multiproc_worker_utils.py\", line 223, in "
            "_run_worker_process");
  CleanLine prefix_only = clean_line("CRITICAL 03-13 09:00:43 [core_client.py:260] Got fatal signal from worker processes, "
                                     "shutting down. See stack trace above for root cause issue.");
  EXPECT_EQ(prefix_only.process_tag, "");
  EXPECT_EQ(application_from_prefix(prefix_only), "vllm");
  // Neither a training log's own logging nor a non-vLLM process tag.
  EXPECT_EQ(application_from_prefix(clean_line("INFO:Loading lmsys_vicuna-7b-delta-v1.1...")), "");
  EXPECT_EQ(application_from_prefix(clean_line("2024-01-09 07:29:27,018 INFO in core: getting grammar")), "");
  EXPECT_EQ(strip_logger_prefix("INFO 12-29 07:45:20 not a location] x"), "INFO 12-29 07:45:20 not a location] x");
}

// vllm-project/vllm#12529: the engine core's log of the OOM, where only the prefix says vLLM.
TEST(Application, VllmFromTheLoggingPrefixOfTheMessageLine) {
  OomEvent e = first_event("vllm_logger_prefix_only.log");
  EXPECT_EQ(e.string_field("application"), "vllm");
  EXPECT_NE(e.field("vllm_process"), nullptr);
}

// A vLLM OOM whose own line has no prefix: the tagged lines just above decide (the traceback's
// frames as vLLM printed them in vllm-project/vllm#15182, the frames' files made non-vLLM here so
// that only the tags can tell; written for the rule).
TEST(Application, VllmFromTheTagsOfTheLinesAbove) {
  ScanResult scan = scan_text(
      "(VllmWorker rank=5 pid=3073)   File \"/opt/venv/lib/python3.12/site-packages/torch/nn/modules/module.py\", line "
      "1739, in _wrapped_call_impl\n"
      "(VllmWorker rank=5 pid=3073)     return self._call_impl(*args, **kwargs)\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 5 has a total capacity of 14.62 GiB of "
      "which 3.31 MiB is free. Including non-PyTorch memory, this process has 14.61 GiB memory in use. Of the allocated "
      "memory 14.42 GiB is allocated by PyTorch, and 23.14 MiB is reserved by PyTorch but unallocated.\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].string_field("application"), "vllm");
  EXPECT_EQ(scan.events[0].field("vllm_process"), nullptr);  // its own line has no tag
}

// SGLang's log prefix above a failure (the lines of sgl-project/sglang#1751) names SGLang.
TEST(Application, SglangFromItsLogPrefix) {
  OomEvent e;
  e.message = "torch.OutOfMemoryError: CUDA out of memory.";
  EXPECT_EQ(detect_application({"[2024-10-22 06:31:49 TP0] Memory pool end. avail mem=8.38 GB",
                                "[2024-10-22 06:31:49 TP0] Capture cuda graph begin. This can take up to several minutes."},
                               e),
            "sglang");
  EXPECT_EQ(detect_application({"[2025-10-04 02:29:36 DP7 TP7] Scheduler hit an exception:"}, e), "sglang");
  EXPECT_EQ(detect_application({"[2023-11-13 16:59:54,760] [INFO] [launch.py:314:sigkill_handler] Killing subprocess 9439"}, e),
            "");
  EXPECT_EQ(first_event("sglang_capture_oom.log").string_field("application"), "sglang");
}

TEST(Application, LoadingBarAboveGivesModelLoadingUntilItIsComplete) {
  OomEvent e;
  e.message = "Killed";
  EXPECT_EQ(operation_from_lines({"Loading checkpoint shards:   0%|          | 0/2 [00:00<?, ?it/s]"}, e), "model_loading");
  EXPECT_EQ(operation_from_lines({"Loading checkpoint shards: 100%|##########| 2/2 [00:03<00:00,  1.50s/it]"}, e), "");
}

}  // namespace
}  // namespace oomdoc
