// The sixth explain QA round (tests/fixtures/explain/real/README.md names each thread): messages of
// XLA's async allocator, ONNX Runtime, text-generation-inference, Ollama's journald lines and
// llama.cpp's host buffers are read with their figures, and told as the program that failed says
// them; sizes no GPU has are shape bugs, not full cards.
#include <gtest/gtest.h>

#include <algorithm>

#include "analyses/diagnose.h"
#include "analyses/explain.h"
#include "core/units.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

using testing::explain_fixture;
using testing::fix_ids;
using testing::only_event;

bool no_training_recipe(const Diagnosis& d) {
  return std::none_of(d.fixes.begin(), d.fixes.end(), [](const Fix& f) {
    return f.snippet.find("per_device_train_batch_size") != std::string::npos ||
           f.snippet.find("TrainingArguments") != std::string::npos;
  });
}

// XLA's cuMemAllocAsync failure with the driver's free/total line: 1.11 TiB asked of a 79.25 GiB card.
TEST(DiagnoseQa6, XlaAsyncAllocatorReadsTheDriverFiguresAndCallsTheSizeABug) {
  const ExplainReport r = explain_fixture("xla_cuda_async_alloc.log");
  const ExplainedEvent x = only_event(r);
  EXPECT_EQ(x.event.format, "xla_cuda_async_alloc");
  EXPECT_EQ(x.event.framework, "jax");
  EXPECT_EQ(x.event.bytes("requested"), 1225195446464u);
  EXPECT_EQ(x.event.bytes("free"), 22635544576u);
  EXPECT_EQ(x.event.bytes("total"), 85095874560u);
  EXPECT_EQ(x.diagnosis.cause, "garbage_request_size");
  ASSERT_FALSE(x.diagnosis.fixes.empty());
  EXPECT_EQ(x.diagnosis.fixes[0].id, "smaller_input");
  const std::vector<std::string> ids = fix_ids(x.diagnosis);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), "xla_preallocation"), 0);
}

// The BFC allocator asked for 1.25 TiB with no total printed: still more than any GPU.
TEST(DiagnoseQa6, XlaRequestBeyondAnyGpuIsAShapeBugNotAMemoryFraction) {
  const ExplainReport r = explain_fixture("xla_bfc_beyond_any_gpu.log");
  ASSERT_FALSE(r.events.empty());
  const ExplainedEvent& x = r.events.back();
  EXPECT_EQ(x.event.bytes("requested"), 1374389534720u);   // 1.25 TiB as printed
  EXPECT_EQ(x.diagnosis.cause, "garbage_request_size");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"smaller_input"}));
}

// TensorFlow on ROCm: "HIP_ERROR_OutOfMemory" (newer releases) as well as hipError_t(N); a reservation
// of 127.99 TiB means the driver's free figure was wrong. Its retries (90% each) are one event.
TEST(DiagnoseQa6, TensorflowRocmStatusAndRetryLoop) {
  const ExplainReport r = explain_fixture("tf_rocm_hip_error.log");
  const ExplainedEvent x = only_event(r);
  EXPECT_EQ(x.event.format, "tf_rocm_driver_alloc");
  EXPECT_EQ(x.event.bytes("requested"), 140729850295296u);
  EXPECT_EQ(x.event.bytes("smallest_retry"), 126656857505792u);
  EXPECT_EQ(x.diagnosis.cause, "garbage_request_size");
  EXPECT_EQ(x.diagnosis.fixes.at(0).snippet, "rocm-smi --showmeminfo vram");

  const ExplainReport loop = explain_fixture("tf_driver_retry_loop.log");
  const ExplainedEvent l = only_event(loop);
  EXPECT_EQ(l.event.repeats, 7u);
  EXPECT_EQ(l.event.bytes("requested"), 1015196672u);
  EXPECT_EQ(l.event.bytes("smallest_retry"), 539517440u);
  EXPECT_EQ(l.diagnosis.cause, "framework_preallocation");
  EXPECT_EQ(l.diagnosis.evidence.at(1), "It retried 6 times at 90% of the last size, down to 514.52 MiB, and the driver "
                                        "refused each: that much was not free on the card.");
}

// ONNX Runtime's arena: a real size gets the arena settings; 3.98 EiB is a shape bug.
TEST(DiagnoseQa6, OnnxRuntimeArena) {
  const ExplainedEvent x = only_event(explain_fixture("onnxruntime_arena.log"));
  EXPECT_EQ(x.event.framework, "onnxruntime");
  EXPECT_EQ(x.event.bytes("requested"), 2830172160u);
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.fixes.at(0).id, "ort_arena_same_as_requested");
  EXPECT_TRUE(no_training_recipe(x.diagnosis));
  const ExplainedEvent g = only_event(explain_fixture("onnxruntime_garbage_size.log"));
  EXPECT_EQ(g.event.bytes("requested"), 4585490524328388608u);
  EXPECT_EQ(g.diagnosis.cause, "garbage_request_size");
}

// text-generation-inference: its warmup error, its router relaying PyTorch's message, and the
// message inside a Rust panic with its newlines escaped.
TEST(DiagnoseQa6, TextGenerationInferenceGetsItsLauncherFlags) {
  const ExplainedEvent warmup = only_event(explain_fixture("tgi_warmup_prefill.log"));
  EXPECT_EQ(warmup.event.format, "tgi_warmup_prefill");
  EXPECT_EQ(warmup.event.int_field("prefill_tokens"), 4096);
  EXPECT_EQ(warmup.diagnosis.fixes.at(0).id, "tgi_max_batch_prefill_tokens");
  EXPECT_EQ(warmup.diagnosis.fixes.at(0).snippet,
            "--max-batch-prefill-tokens 2048 --max-input-tokens 2047 --max-total-tokens 2048  # half of 4096; TGI needs "
            "prefill tokens >= input tokens < total tokens");

  const ExplainedEvent router = only_event(explain_fixture("tgi_router_pytorch.log"));
  EXPECT_EQ(router.event.format, "pytorch_new");
  EXPECT_TRUE(no_training_recipe(router.diagnosis));
  const std::vector<std::string> ids = fix_ids(router.diagnosis);
  EXPECT_NE(std::find(ids.begin(), ids.end(), "tgi_max_batch_prefill_tokens"), ids.end());

  const ExplainReport escaped = explain_fixture("tgi_rust_panic_escaped.log");
  const ExplainedEvent panic = only_event(escaped);
  EXPECT_EQ(panic.event.bytes("requested"), parse_quantity("4.83 GiB")->bytes);
  EXPECT_EQ(panic.event.bytes("allocated"), parse_quantity("16.08 GiB")->bytes);
  EXPECT_EQ(panic.event.bytes("free"), parse_quantity("11.12 MiB")->bytes);
  EXPECT_EQ(panic.event.line, 1u);
  EXPECT_TRUE(no_training_recipe(panic.diagnosis));
}

// llama.cpp under Ollama (journald lines): Ollama's settings; its host buffers are system RAM; a
// pinned buffer refused with "invalid argument" is no out-of-memory error.
TEST(DiagnoseQa6, LlamaCppUnderOllamaAndHostBuffers) {
  const ExplainedEvent ollama = only_event(explain_fixture("ollama_journald_llama_cpp.log"));
  EXPECT_EQ(ollama.event.format, "ggml_cuda_alloc");
  for (const Fix& f : ollama.diagnosis.fixes) {
    EXPECT_EQ(f.snippet.find("-ngl"), std::string::npos) << f.id << ": " << f.snippet;
  }
  EXPECT_EQ(ollama.diagnosis.fixes.at(0).snippet, "ollama pull <model>:<tag>-q4_K_M  # a smaller quantization of the same model");
  // The journald tag alone names Ollama (the prefix is taken off the text, its program kept).
  const ExplainedEvent tagged = only_event(testing::explain_text(
      "Feb 21 01:41:02 paibo ollama[402476]: ggml_backend_cuda_buffer_type_alloc_buffer: allocating 81656.95 MiB on "
      "device 0: cudaMalloc failed: out of memory\n"
      "Feb 21 01:41:16 paibo ollama[402476]: llama_model_load: error loading model: unable to allocate CUDA0 buffer\n"
      "Feb 21 01:41:16 paibo ollama[402476]: llama_load_model_from_file: failed to load model\n"));
  EXPECT_EQ(tagged.event.string_field("application"), "ollama");
  EXPECT_EQ(tagged.diagnosis.fixes.at(0).snippet, "ollama pull <model>:<tag>-q4_K_M  # a smaller quantization of the same model");

  const ExplainedEvent cpu = only_event(explain_fixture("llama_cpu_buffer.log"));
  EXPECT_EQ(cpu.event.format, "ggml_cpu_buffer");
  EXPECT_EQ(cpu.event.bytes("requested"), 437944320u);
  EXPECT_EQ(cpu.event.end_line, 5u);   // the allocator's line and alloc_tensor_range's repeat of it
  EXPECT_EQ(cpu.diagnosis.cause, "host_memory");

  const ExplainedEvent pinned = only_event(explain_fixture("llama_pinned_invalid_argument.log"));
  EXPECT_FALSE(pinned.event.is_error);
  EXPECT_EQ(pinned.event.string_field("status"), "invalid argument");
  EXPECT_EQ(pinned.diagnosis.secondary_causes, (std::vector<std::string>{"not_an_oom_status"}));

  // One failure printed four times is one event, each print starting at the allocator's line.
  const ExplainedEvent repeated = only_event(explain_fixture("llama_compute_repeated.log"));
  EXPECT_EQ(repeated.event.repeats, 4u);
  EXPECT_EQ(repeated.event.line, 1u);
  EXPECT_EQ(repeated.event.string_field("llama_buffer"), "compute");
}

// A C++ program's own CUDA check is not PyTorch's; DeepSpeed creating optimizer states needs the
// optimizer-state fixes first; an XPU process far from full hit the single-allocation limit.
TEST(DiagnoseQa6, CausesFollowWhatTheMessageShows) {
  const ExplainedEvent lc0 = only_event(explain_fixture("lc0_cuda_error.log"));
  EXPECT_EQ(lc0.event.framework, "cuda");
  EXPECT_TRUE(no_training_recipe(lc0.diagnosis));

  const ExplainReport ds = explain_fixture("deepspeed_optimizer_states.log");
  ASSERT_FALSE(ds.events.empty());
  EXPECT_EQ(fix_ids(ds.events[0].diagnosis),
            (std::vector<std::string>{"eight_bit_optimizer", "shard_model", "lora", "offload", "bigger_gpu"}));

  const ExplainReport xpu = explain_fixture("xpu_repl_allocation_limit.log");
  ASSERT_EQ(xpu.events.size(), 3u);
  for (const ExplainedEvent& e : xpu.events) {
    EXPECT_EQ(e.diagnosis.cause, "allocation_size_limit") << e.event.line;
    EXPECT_TRUE(e.diagnosis.secondary_causes.empty()) << e.event.line;   // 176 MiB is no leak on 15.56 GiB
  }
}

// Review of this round's rules: a quoted traceback whose message comes after its frames; an XPU
// request over half the card with nothing reserved; TensorFlow retries at sizes near 2^64.
TEST(DiagnoseQa6, ReviewedEdgesOfTheNewRules) {
  ScanResult quoted = scan_text(
      "thread 'main' panicked at src/main.rs:10: PyErr { value: \"Traceback (most recent call last):\\n  File "
      "\\\"x.py\\\", line 3, in <module>\\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; "
      "23.65 GiB total capacity; 20.10 GiB already allocated; 1.50 GiB free; 21.00 GiB reserved in total by "
      "PyTorch)\\n\" }\n");
  ASSERT_EQ(quoted.events.size(), 1u);
  EXPECT_EQ(quoted.events[0].bytes("requested"), parse_quantity("2.00 GiB")->bytes);
  EXPECT_EQ(quoted.events[0].bytes("free"), parse_quantity("1.50 GiB")->bytes);

  ScanResult xpu = scan_text("RuntimeError: XPU out of memory. Tried to allocate 10.00 GiB (GPU 0; 15.56 GiB total "
                             "capacity; 0 bytes already allocated; 0 bytes reserved in total by PyTorch)\n");
  ExplainReport xpu_report;
  add_to_report(xpu_report, xpu);
  EXPECT_EQ(only_event(xpu_report).diagnosis.cause, "allocation_size_limit");

  ScanResult huge = scan_text(
      "E tensorflow/stream_executor/cuda/cuda_driver.cc:924] failed to allocate 16.00E (18446744073709551615 bytes) "
      "from device: CUDA_ERROR_OUT_OF_MEMORY\n"
      "E tensorflow/stream_executor/cuda/cuda_driver.cc:924] failed to allocate 14.40E (16602069666338596454 bytes) "
      "from device: CUDA_ERROR_OUT_OF_MEMORY\n");
  ASSERT_EQ(huge.events.size(), 1u);
  EXPECT_EQ(huge.events[0].repeats, 2u);
}

// XLA's async allocator prints the driver's free and total: the cause says how full the card was.
TEST(DiagnoseQa6, XlaAsyncAllocatorSaysHowFullTheCardWas) {
  ScanResult scan = scan_text(
      "E0501 12:00:00.123456  1234 gpu_cudamallocasync_allocator.cc:343] gpu_async_0 cuMemAllocAsync failed to "
      "allocate 4294967296 bytes: RESOURCE_EXHAUSTED: : CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"
      " Reported by CUDA: Free memory/Total memory: 1073741824/25393692672\n");
  ExplainReport report;
  add_to_report(report, scan);
  const ExplainedEvent x = only_event(report);
  EXPECT_EQ(x.diagnosis.capacity_title, "the card had less free than the request (22.65 GiB of 23.65 GiB in use)");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "The driver reported 1.00 GiB free of 23.65 GiB when 4.00 GiB was asked for.");
}

// Ollama's check before loading a model into system RAM: the need and what is free, as host memory.
TEST(DiagnoseQa6, OllamaSystemMemoryCheck) {
  ScanResult scan = scan_text("Error: model requires more system memory (13.7 GiB) than is available (9.3 GiB)\n");
  ExplainReport report;
  add_to_report(report, scan);
  const ExplainedEvent x = only_event(report);
  EXPECT_EQ(x.event.format, "ollama_system_memory");
  EXPECT_EQ(x.event.bytes("requested"), parse_quantity("13.7 GiB")->bytes);
  EXPECT_EQ(x.event.bytes("free"), parse_quantity("9.3 GiB")->bytes);
  EXPECT_EQ(x.diagnosis.cause, "host_memory");
  EXPECT_EQ(x.diagnosis.evidence.at(1), "Ollama checks before loading: the model needs more system RAM than is free "
                                        "(4.40 GiB short); the layers it cannot put on a GPU are loaded into RAM.");
}

}  // namespace
}  // namespace oomdoc
