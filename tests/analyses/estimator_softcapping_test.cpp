// Gemma 2's tanh soft-capping keeps tanh's output for backward: one more score matrix per head
// under eager attention, and one more copy of the logits before the loss. Hand-computed from
// Gemma-2-9B's shapes (42 layers, 16 heads, a 256,000-token vocabulary).
#include <gtest/gtest.h>

#include "analyses/estimator.h"
#include "readers/model_presets.h"

namespace oomdoc {
namespace {

std::optional<uint64_t> at_its_moment(const Estimate& e, const std::string& name) {
  for (const auto& c : e.breakdown) {
    if (c.name == name) return c.bytes;
  }
  return std::nullopt;
}

Job eager_training() {
  Job job;
  job.task = "train_full";
  job.precision = "bf16";
  job.micro_batch_size = 1;
  job.seq_len = 1024;
  job.attention_impl = "eager";
  job.gradient_checkpointing = "none";
  return job;
}

TEST(EstimatorSoftcapping, Gemma2PresetCarriesItsCaps) {
  const ModelSpec gemma2 = find_preset("google/gemma-2-9b")->value();
  EXPECT_EQ(gemma2.attn_logit_softcapping, 50.0);
  EXPECT_EQ(gemma2.final_logit_softcapping, 30.0);
  const ModelSpec gemma = find_preset("google/gemma-7b")->value();
  EXPECT_EQ(gemma.attn_logit_softcapping, 0.0);
  EXPECT_EQ(gemma.final_logit_softcapping, 0.0);
}

TEST(EstimatorSoftcapping, TanhOutputsAreSavedForBackward) {
  const ModelSpec capped = find_preset("google/gemma-2-9b")->value();
  ModelSpec uncapped = capped;
  uncapped.attn_logit_softcapping = 0;
  uncapped.final_logit_softcapping = 0;
  auto with = estimate_memory(capped, eager_training());
  auto without = estimate_memory(uncapped, eager_training());
  ASSERT_TRUE(with && without);
  // 42 layers x 16 heads x 1024 x 1024 scores x 2 B.
  EXPECT_EQ(*at_its_moment(*with, "activations") - *at_its_moment(*without, "activations"), 42ull * 16 * 1024 * 1024 * 2);
  // 1024 tokens x 256,000 logits x 2 B.
  EXPECT_EQ(*at_its_moment(*with, "logits") - *at_its_moment(*without, "logits"), 1024ull * 256000 * 2);
  // SDPA ignores the score cap; the logits are capped whatever the attention.
  Job sdpa = eager_training();
  sdpa.attention_impl = "sdpa";
  auto sdpa_with = estimate_memory(capped, sdpa);
  auto sdpa_without = estimate_memory(uncapped, sdpa);
  ASSERT_TRUE(sdpa_with && sdpa_without);
  EXPECT_EQ(at_its_moment(*sdpa_with, "activations"), at_its_moment(*sdpa_without, "activations"));
  EXPECT_EQ(*at_its_moment(*sdpa_with, "logits") - *at_its_moment(*sdpa_without, "logits"), 1024ull * 256000 * 2);
}

}  // namespace
}  // namespace oomdoc
