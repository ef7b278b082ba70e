// The seventh explain QA round's causes and fix ladders (tests/fixtures/explain/real/README.md names
// each thread; its new message formats are in diagnose_qa7_test.cpp). A PyTorch
// OOM inside a vLLM server gets the flags for where vLLM was: serving requests, the KV cache already
// holds the budget, so a smaller budget, smaller prefill chunks and fewer sequences come first and
// neither a shorter context nor an fp8 cache is offered; in the sampler's warm-up, fewer sequences
// first, as vLLM's own message says. Also: a `.to(dtype)` cast is no move to the device; free plus
// cached memory that together hold the request; sysmem fallback beside a request larger than the
// card; Kubernetes' own exit code; TensorFlow's pinned host pool; JAX's float64 buffers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyses/diagnose.h"
#include "readers/traceback.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

using testing::explain_fixture;
using testing::fix_ids;
using testing::only_event;

TEST(DiagnoseVllmPhase, ServingPrefillGetsTheBudgetThenChunksThenSequences) {
  const ExplainedEvent x = only_event(explain_fixture("vllm_serving_prefill_oom.log"));
  EXPECT_EQ(x.event.string_field("application"), "vllm");
  EXPECT_EQ(fix_ids(x.diagnosis),
            (std::vector<std::string>{"expandable_segments", "vllm_gpu_memory_utilization", "vllm_max_num_batched_tokens",
                                      "vllm_max_num_seqs", "vllm_enforce_eager", "vllm_tensor_parallel"}));
  EXPECT_EQ(testing::fix(x.diagnosis, "vllm_gpu_memory_utilization").snippet,
            "--gpu-memory-utilization 0.87  # 0.85 with a vLLM before v0.21");
  // `v_cached_trim.to(qdtype)` casts; the failing frame is not moving data to the GPU.
  ASSERT_TRUE(x.event.traceback.has_value());
  EXPECT_NE(x.event.traceback->operation, "moving_to_device");
}

TEST(DiagnoseVllmPhase, EngineDeadReportedByServingChatIsServing) {
  const ExplainedEvent x = only_event(explain_fixture("vllm_engine_dead_serving.log"));
  EXPECT_EQ(x.event.string_field("vllm_phase"), "serving");
  const auto ids = fix_ids(x.diagnosis);
  ASSERT_GE(ids.size(), 2u);
  // 16 MiB free and 118.89 MiB cached would together hold the 128 MiB: the allocator setting first.
  EXPECT_EQ(ids[0], "expandable_segments");
  EXPECT_EQ(ids[1], "vllm_gpu_memory_utilization");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), "vllm_max_model_len"), 0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), "vllm_kv_cache_dtype"), 0);
}

TEST(DiagnoseVllmPhase, SamplerWarmupPutsFewerSequencesFirst) {
  const ExplainedEvent x = only_event(explain_fixture("vllm_sampler_warmup_frames.log"));
  EXPECT_EQ(x.event.string_field("vllm_phase"), "sampler");
  const auto ids = fix_ids(x.diagnosis);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], "vllm_max_num_seqs");
  EXPECT_EQ(ids[1], "vllm_gpu_memory_utilization");
  // The excerpt shows no profile or warm-up frame: either may have run it.
  EXPECT_EQ(x.diagnosis.evidence.back(),
            "The traceback is vLLM's sampler dummy run (the logits of max_num_seqs sequences), in its startup profile "
            "or the warm-up after it.");
}

// Neither the free memory nor the cache alone holds the request, together they do: the allocator's
// setting is offered (tests/fixtures: Tongyi-MAI/Z-Image#103's figures).
TEST(DiagnoseFragmentation, FreePlusCachedHoldingTheRequestOffersExpandableSegments) {
  const auto report = testing::explain_text(
      "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.88 GiB. GPU 0 has a total capacity of 23.98 GiB "
      "of which 1.70 GiB is free. Of the allocated memory 21.65 GiB is allocated by PyTorch, and 279.78 MiB is reserved "
      "by PyTorch but unallocated.\n");
  const ExplainedEvent x = only_event(report);
  EXPECT_EQ(x.diagnosis.secondary_causes, std::vector<std::string>{"fragmentation_minor"});
  EXPECT_EQ(testing::fix(x.diagnosis, "expandable_segments").detail,
            "1.70 GiB free plus 279.78 MiB reserved but unallocated would hold the 1.88 GiB request: expandable segments "
            "let the cached pieces be used with the free memory.");
}

// Kubernetes' report says the exit code it saw; none is assumed when it prints none.
TEST(DiagnoseKill, KubernetesExitCodeIsTheReportsOwn) {
  const auto shown = only_event(testing::explain_text("State:          Terminated\n  Reason:       OOMKilled\n"
                                                      "  Exit Code:    0\n"));
  EXPECT_EQ(shown.event.int_field("exit_code"), 0);
  const auto bare = only_event(testing::explain_text("  Reason:       OOMKilled\n"));
  EXPECT_EQ(bare.event.int_field("exit_code"), std::nullopt);
  EXPECT_NE(bare.diagnosis.evidence.at(0).find("the kernel ended it. Host"), std::string::npos) << bare.diagnosis.evidence.at(0);
}

// More held than the card has is Windows' sysmem fallback, said beside a request larger than the
// card (the figures of a PyTorch message in iPASSR's issue #9).
TEST(DiagnoseKill, HeldBeyondTheCardIsSysmemFallbackWhateverTheCause) {
  const auto x = only_event(testing::explain_text(
      "RuntimeError: CUDA out of memory. Tried to allocate 10.73 GiB (GPU 0; 8.00 GiB total capacity; 17.20 GiB already "
      "allocated; 0 bytes free; 19.15 GiB reserved in total by PyTorch)\n"));
  EXPECT_EQ(x.diagnosis.cause, "request_exceeds_total_capacity");
  EXPECT_EQ(x.diagnosis.evidence.at(1), "This process already holds 19.15 GiB, more than the card's 8.00 GiB: the driver "
                                        "spilled 11.15 GiB into shared system memory (Windows' sysmem fallback, much "
                                        "slower than the card).");
}

// TensorFlow's pinned host pool (cuda_host_bfc) is host RAM, not the GPU.
TEST(DiagnoseKill, TensorflowHostBfcIsHostMemory) {
  const auto x = only_event(testing::explain_text(
      "W tensorflow/core/common_runtime/bfc_allocator.cc:273] Allocator (cuda_host_bfc) ran out of memory trying to "
      "allocate 3.72GiB.  Current allocation summary follows.\n"));
  EXPECT_EQ(x.diagnosis.cause, "host_memory");
}

// XLA's peak buffers in float64 (jax_enable_x64) and no temporaries: float32 halves them, and remat
// has nothing to recompute.
TEST(DiagnoseJax, Float64PeakBuffersWithoutTemporaries) {
  const ExplainedEvent x = only_event(explain_fixture("jax_f64_peak_buffers.log"));
  // 23.43 GiB + 23.43 GiB + 23.16 MiB as printed (the f64 buffers; each printed size read as binary).
  EXPECT_EQ(x.event.int_field("xla_f64_peak_buffer_bytes"), 50339826892LL);
  const auto ids = fix_ids(x.diagnosis);
  EXPECT_EQ(ids, (std::vector<std::string>{"xla_preallocation", "jax_float32", "smaller_input"}));
}

// A vLLM server killed for host RAM right after its "# CPU blocks" line: V0's pinned swap space
// first, none of a transformers load's or a DataLoader's fixes.
TEST(DiagnoseKill, KilledVllmServerGetsItsSwapSpace) {
  const ExplainedEvent x = testing::first_error_event(explain_fixture("vllm_v0_killed_after_cpu_blocks.log"));
  EXPECT_EQ(x.diagnosis.cause, "killed_host_oom_suspected");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"vllm_swap_space", "add_swap", "more_host_memory"}));
}

// DeepSpeed ZeRO-3 out of memory while gathering parameters (fetch_sub_module): its live-parameter
// and prefetch settings first.
TEST(DiagnoseTraining, ZeroThreeGatheringGetsItsLiveParameterSettings) {
  const ExplainedEvent x = only_event(explain_fixture("deepspeed_zero3_fetch_sub_module.log"));
  const auto ids = fix_ids(x.diagnosis);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), "zero3_live_parameters");
  EXPECT_EQ(testing::fix(x.diagnosis, "zero3_live_parameters").snippet,
            "\"zero_optimization\": {\"stage3_max_live_parameters\": 1e8, \"stage3_max_reuse_distance\": 1e8, "
            "\"stage3_prefetch_bucket_size\": 1e7}  # DeepSpeed's defaults: 1e9, 1e9, 5e7");
}

// wgpu's DeviceError::OutOfMemory ("Not enough memory left") inside a Rust panic (burn).
TEST(DiagnoseWgpu, NotEnoughMemoryLeftIsAnOutOfMemoryError) {
  const ExplainedEvent x = only_event(explain_fixture("wgpu_burn_create_buffer.log"));
  EXPECT_EQ(x.event.framework, "wgpu");
  EXPECT_EQ(x.event.format, "wgpu_out_of_memory");
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"end_other_processes", "smaller_input"}));
  // The phrase elsewhere in a sentence is no event.
  EXPECT_TRUE(testing::explain_text("warning: Not enough memory left for the cache, shrinking it\n").events.empty());
}

// ComfyUI's tip under an out-of-memory error names the application.
TEST(DiagnoseApplication, ComfyUisOutOfMemoryTipNamesIt) {
  const ExplainedEvent x = only_event(testing::explain_text(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 11.99 GiB "
      "of which 1.00 GiB is free. Of the allocated memory 10.20 GiB is allocated by PyTorch, and 300.00 MiB is reserved "
      "by PyTorch but unallocated.\n"
      "This error means you ran out of memory on your GPU.\n"));
  EXPECT_EQ(x.event.string_field("application"), "comfyui");
}

// A kernel OOM-killer line hard-wrapped by a viewer (space padding mid-number) keeps its figures
// (tranX's issue #41 as GitHub rendered dmesg).
TEST(DiagnoseKill, KernelLineWrappedWithPaddingKeepsItsFigures) {
  const ExplainedEvent x = only_event(testing::explain_text(
      "[2059991.491542] Out of memory: Killed process 25315 (python3) total-vm:53312244" + std::string(60, ' ') +
      "kB, anon-rss:31451456kB, file-rss:74816kB, shmem-rss:12296kB\n"));
  EXPECT_EQ(x.event.bytes("total_vm"), 53312244ull * 1024);
  EXPECT_EQ(x.event.bytes("anon_rss"), 31451456ull * 1024);
  EXPECT_EQ(x.event.bytes("shmem_rss"), 12296ull * 1024);
}

// A TPU compile-time HBM failure under a program's own generate call (`self._forward_generate(`):
// no remat and no optimizer-state sharding, fewer sequences or a shorter context instead.
TEST(DiagnoseJax, TpuHbmCompileInGenerationGetsNoTrainingFixes) {
  const ExplainedEvent x = only_event(explain_fixture("tpu_hbm_compile_generation.log"));
  ASSERT_TRUE(x.event.traceback.has_value());
  EXPECT_EQ(x.event.traceback->operation, "generation");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"smaller_input", "mixed_precision", "shard_model"}));
  EXPECT_EQ(testing::fix(x.diagnosis, "shard_model").detail,
            "Shard the parameters (and the KV cache) over the TPU cores instead of a replica on each.");
}

TEST(TracebackOperation, CastIsNotAMoveToTheDevice) {
  auto op = [](const std::string& code) {
    return classify_operation({TracebackFrame{"/site-packages/x.py", 1, "f", code}});
  };
  EXPECT_EQ(op("v = v_cached.to(qdtype)"), "");
  EXPECT_EQ(op("logits = logits.to(torch.float32)"), "");
  EXPECT_EQ(op("x = x.to(dtype=torch.bfloat16)"), "");
  EXPECT_EQ(op("x = x.to(torch.double)"), "");
  EXPECT_EQ(op("x = x.to(torch.complex64)"), "");
  EXPECT_EQ(op("x = x.to(memory_format=torch.channels_last)"), "");
  EXPECT_EQ(op("x = x.to(device)"), "moving_to_device");
  EXPECT_EQ(op("x = x.to('cuda:0')"), "moving_to_device");
  EXPECT_EQ(op("x = x.to(device, dtype=torch.float16)"), "moving_to_device");
  EXPECT_EQ(op("x = x.cuda()"), "moving_to_device");
}

}  // namespace
}  // namespace oomdoc
