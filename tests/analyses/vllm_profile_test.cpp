// The profile run's activation peak: the sampler's bytes per logit as derived from vLLM's dummy
// sampler run and PyTorch's sort (analyses/vllm_profile.h), and the forward pass it competes with.
#include "analyses/vllm_profile.h"

#include <gtest/gtest.h>

#include "readers/model_resolver.h"

namespace oomdoc {
namespace {

TEST(VllmSampler, BytesPerLogitFollowTheSortPathForTheRowCount) {
  // bf16 logits (2) + fp32 copy (4) + sorted values (4) + int64 indices (8), plus the sort's scratch.
  EXPECT_EQ(sampler_bytes_per_logit(256, 2), 38u);    // segmented_sort_pairs: 8 + 4 + 8
  EXPECT_EQ(sampler_bytes_per_logit(128, 2), 38u);
  EXPECT_EQ(sampler_bytes_per_logit(127, 2), 50u);    // by full sort: 8 + 8 + 4 + 4 + 8
  EXPECT_EQ(sampler_bytes_per_logit(2, 2), 50u);
  EXPECT_EQ(sampler_bytes_per_logit(1, 2), 30u);      // one large segment: 4 + 8
  EXPECT_EQ(sampler_bytes_per_logit(256, 4), 40u);    // fp32 model: its logits take 4
  EXPECT_EQ(sampler_peak_bytes(256, 128256, 2), 1247674368u);
  EXPECT_EQ(sampler_peak_bytes(0, 128256, 2), 0u);
}

TEST(VllmSampler, NewerV1MasksWithoutSortingFromEightRows) {
  // Triton pivot search (vllm#33538): logits (2), fp32 copy (4), probabilities (4), draws (4).
  EXPECT_EQ(sampler_bytes_per_logit(256, 2, true), 14u);
  EXPECT_EQ(sampler_bytes_per_logit(8, 2, true), 14u);
  EXPECT_EQ(sampler_bytes_per_logit(7, 2, true), 50u);   // small batches still sort
  EXPECT_EQ(sampler_peak_bytes(1024, 151936, 2, true), 1024ull * 151936 * 14);
}

TEST(VllmProfile, PeakIsTheLargerOfForwardAndSampler) {
  auto m = resolve_model("meta-llama/Llama-3.1-8B-Instruct");
  ASSERT_TRUE(m.ok()) << m.error().message;
  // Forward of 2048 tokens: (3 x 4096 + 3 x 14336) x 2048 x 2 B = 226,492,416 B.
  // Sampler of 256 rows: 256 x 128,256 x 38 B = 1,247,674,368 B; it is the peak.
  EXPECT_EQ(profile_activation_bytes(*m, 2048, 256, 1, 2, true), 1247674368u);
  // V0 also holds the 2048 tokens' hidden states (2048 x 4096 x 2 B) while sampling.
  EXPECT_EQ(profile_activation_bytes(*m, 2048, 256, 1, 2, false), 1264451584u);
  // 32 rows sort by the full-sort path (50 B) and stay below the forward pass.
  EXPECT_EQ(profile_activation_bytes(*m, 2048, 32, 1, 2, true), 226492416u);
}

}  // namespace
}  // namespace oomdoc
