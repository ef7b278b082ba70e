// A PyTorch OOM inside a vLLM server gets the flags for where vLLM was (tests/fixtures/explain/real/
// README.md names each thread): serving requests, the KV cache already holds the budget, so a
// smaller budget, smaller prefill chunks and fewer sequences come first and neither a shorter
// context nor an fp8 cache is offered; in the sampler's warm-up, fewer sequences first, as vLLM's
// own message says. A `.to(dtype)` cast is no move to the device.
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
            "--gpu-memory-utilization 0.87  # 0.05 below the value in use (0.92 from vLLM v0.21, 0.90 before)");
  // `v_cached_trim.to(qdtype)` casts; the failing frame is not moving data to the GPU.
  ASSERT_TRUE(x.event.traceback.has_value());
  EXPECT_NE(x.event.traceback->operation, "moving_to_device");
}

TEST(DiagnoseVllmPhase, EngineDeadReportedByServingChatIsServing) {
  const ExplainedEvent x = only_event(explain_fixture("vllm_engine_dead_serving.log"));
  EXPECT_EQ(x.event.string_field("vllm_phase"), "serving");
  const auto ids = fix_ids(x.diagnosis);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), "vllm_gpu_memory_utilization");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), "vllm_max_model_len"), 0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), "vllm_kv_cache_dtype"), 0);
}

TEST(DiagnoseVllmPhase, SamplerWarmupPutsFewerSequencesFirst) {
  const ExplainedEvent x = only_event(explain_fixture("vllm_sampler_warmup_frames.log"));
  EXPECT_EQ(x.event.string_field("vllm_phase"), "sampler_warmup");
  const auto ids = fix_ids(x.diagnosis);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], "vllm_max_num_seqs");
  EXPECT_EQ(ids[1], "vllm_gpu_memory_utilization");
  EXPECT_EQ(x.diagnosis.evidence.back(),
            "The traceback is vLLM's sampler warm-up (a dummy run over max_num_seqs sequences' logits), after the KV "
            "cache was allocated.");
}

TEST(TracebackOperation, CastIsNotAMoveToTheDevice) {
  auto op = [](const std::string& code) {
    return classify_operation({TracebackFrame{"/site-packages/x.py", 1, "f", code}});
  };
  EXPECT_EQ(op("v = v_cached.to(qdtype)"), "");
  EXPECT_EQ(op("logits = logits.to(torch.float32)"), "");
  EXPECT_EQ(op("x = x.to(dtype=torch.bfloat16)"), "");
  EXPECT_EQ(op("x = x.to(device)"), "moving_to_device");
  EXPECT_EQ(op("x = x.to('cuda:0')"), "moving_to_device");
  EXPECT_EQ(op("x = x.to(device, dtype=torch.float16)"), "moving_to_device");
  EXPECT_EQ(op("x = x.cuda()"), "moving_to_device");
}

}  // namespace
}  // namespace oomdoc
