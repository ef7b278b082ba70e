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


// What every tensor-parallel rank keeps whole (analyses/vllm_profile.cpp, replicated_layer_bytes).
uint64_t weights_at(const ModelSpec& m, uint64_t tp, const WeightFormat& format, bool mla_copies = false) {
  PipelineStage whole;
  whole.layers = m.num_layers;
  whole.first = whole.last = true;
  return stage_weight_bytes(m, whole, tp, 1, format, mla_copies);
}

// The rotary cos/sin cache vLLM registers when it builds the model: rows x rotary_dim values in
// the model dtype, one cache per distinct rope. Llama-3.1-8B's is what separates 2 x 8,030,261,248
// B (14.9575 GiB) from the 14.9888 GiB its startup logs show (vllm-logs records 1, 2, 10).
TEST(VllmWeights, RotaryCacheRowsFollowTheRopeType) {
  auto llama = resolve_model("meta-llama/Llama-3.1-8B");
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(rotary_cache_bytes(*llama, 2), 131072u * 128 * 2);          // llama3: max_position rows
  EXPECT_EQ(rotary_cache_bytes(*llama, 4), 131072u * 128 * 4);          // --dtype float32
  auto gemma3 = resolve_model("google/gemma-3-27b-it");
  ASSERT_TRUE(gemma3.ok());
  // Global layers: linear x 8 over 131,072 positions; local layers: a second, unscaled rope.
  EXPECT_EQ(rotary_cache_bytes(*gemma3, 2), (131072u * 8 + 131072u) * 128 * 2);
  auto deepseek = resolve_model("deepseek-ai/DeepSeek-V3");
  ASSERT_TRUE(deepseek.ok());
  EXPECT_EQ(rotary_cache_bytes(*deepseek, 2), 4096u * 40 * 64 * 2);     // YaRN: original x factor, rope dims
  auto gpt_oss = resolve_model("openai/gpt-oss-20b");
  ASSERT_TRUE(gpt_oss.ok());
  EXPECT_EQ(rotary_cache_bytes(*gpt_oss, 2), 4096u * 32 * 64 * 4);      // fp32, as gpt_oss.py builds it
  auto gpt2 = resolve_model("gpt2");
  ASSERT_TRUE(gpt2.ok());
  EXPECT_EQ(rotary_cache_bytes(*gpt2, 2), 0u);                          // learned positions, no rope
}

TEST(VllmWeights, RanksBeyondTheKvHeadCountEachHoldAWholeHead) {
  auto m = resolve_model("meta-llama/Llama-3.1-70B-Instruct");   // 8 KV heads of 128, hidden 8192
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto bf16 = weight_format(*m, std::nullopt, std::nullopt, true);
  ASSERT_TRUE(bf16.ok());
  const uint64_t tp8 = weights_at(*m, 8, *bf16), tp16 = weights_at(*m, 16, *bf16);
  // At TP 16 the k and v projections keep one head per rank, not half of one:
  // 80 layers x 2 x 128 x 8192 x (1 - 8/16) x 2 B = 167,772,160 B more than half of TP 8; the
  // norms, whole on every rank, add half of theirs (80 x 2 x 8192 + 8192 weights x 2 B / 2).
  EXPECT_NEAR(static_cast<double>(tp16) - static_cast<double>(tp8) / 2, 167772160.0 + 1318912.0, 2.0);
}

TEST(VllmWeights, MoeRoutersAreWholeAndUnquantizedOnEveryRank) {
  auto m = resolve_model("mistralai/Mixtral-8x7B-v0.1");   // 32 layers, 8 experts, hidden 4096
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto bf16 = weight_format(*m, std::nullopt, std::nullopt, true);
  auto awq = weight_format(*m, std::nullopt, std::string("awq"), true);
  ASSERT_TRUE(bf16.ok() && awq.ok());
  const double router = 32.0 * 4096 * 8;   // ReplicatedLinear(hidden, experts), quant_config=None
  const double norms = (2.0 * 4096 * 32 + 4096) * 2;
  EXPECT_NEAR(static_cast<double>(weights_at(*m, 2, *bf16)) - static_cast<double>(weights_at(*m, 1, *bf16)) / 2,
              router * 2 / 2 + norms / 2, 2.0);
  // Under AWQ the router stays in 16 bits: at TP 1 it costs 2 B, not 0.52 B, per weight.
  const double linear_awq = static_cast<double>(weights_at(*m, 1, *awq));
  PipelineStage none;   // a stage without layers: embedding and head only
  none.first = none.last = true;
  const double outside = static_cast<double>(stage_weight_bytes(*m, none, 1, 1, *awq));
  const double per_layer_linear = (static_cast<double>(m->total_params) - static_cast<double>(m->embedding_params) -
                                   static_cast<double>(m->lm_head_params) - 4096 - 2.0 * 4096 * 32) *
                                  awq->linear_bytes;
  EXPECT_NEAR(linear_awq - outside, per_layer_linear + router * (2 - awq->linear_bytes) + 2.0 * 4096 * 32 * 2, 64.0);
}

TEST(VllmWeights, MlaDownProjectionsAreReplicatedAndQuantizedUpProjectionsCopiedTo16Bits) {
  auto m = resolve_model("deepseek-ai/DeepSeek-V3");   // 61 layers, 128 heads, q_lora 1536, kv_lora 512
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto awq = weight_format(*m, std::string("bfloat16"), std::string("awq_marlin"), true);
  ASSERT_TRUE(awq.ok());
  // W_UK_T and W_UV (v0.8+): kv_lora_rank x 8 heads on each of 16 ranks x (128 + 128) x 2 B per layer.
  EXPECT_EQ(weights_at(*m, 16, *awq, true) - weights_at(*m, 16, *awq, false), 61ull * 512 * 8 * 256 * 2);
  // Unquantized, the up projections are views of kv_b_proj: no copy.
  auto bf16 = weight_format(*m, std::string("bfloat16"), std::string("none"), true);
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(weights_at(*m, 16, *bf16, true), weights_at(*m, 16, *bf16, false));
  // q_a_proj (7168 x 1536) and kv_a_proj_with_mqa (7168 x 576) whole on every rank: 15/16 of
  // them more than a 1/16 share, per layer, in the linear format.
  const double down = 7168.0 * (1536 + 576) * 61;
  const double router = 7168.0 * 256 * 58;   // 58 MoE layers after first_k_dense_replace 3
  const double norms = 2.0 * 7168 * 61;
  EXPECT_NEAR(static_cast<double>(weights_at(*m, 16, *bf16)) - static_cast<double>(weights_at(*m, 1, *bf16)) / 16,
              down * 2 * 15 / 16 + router * 2 * 15 / 16 + (norms * 2 + 7168 * 2) * 15 / 16, 64.0);
}

// "By default, expert layers form a tensor parallel group of size DP x TP" (vLLM's data parallel
// deployment docs; --enable-expert-parallel places whole experts on as many ranks instead).
TEST(VllmWeights, DataParallelSpreadsTheRoutedExpertsOnly) {
  auto m = resolve_model("Qwen/Qwen3-30B-A3B");   // 48 layers, 128 experts of 3 x 2048 x 768
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto bf16 = weight_format(*m, std::nullopt, std::nullopt, true);
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(moe_expert_ranks(*m, 1, 4), 4u);
  EXPECT_EQ(moe_expert_ranks(*m, 2, 4), 8u);
  PipelineStage whole;
  whole.layers = m->num_layers;
  whole.first = whole.last = true;
  const double routed = 48.0 * 128 * 3 * 2048 * 768;   // 28,991,029,248 parameters
  const double tp1 = static_cast<double>(stage_weight_bytes(*m, whole, 1, 1, *bf16));
  const double dp4 = static_cast<double>(stage_weight_bytes(*m, whole, 1, 1, *bf16, false, 4));
  EXPECT_NEAR(tp1 - dp4, routed * 2 * 3 / 4, 4.0);   // a quarter of the experts stay on each GPU
  // TP 2 x DP 4: the experts over 8 ranks, everything else over the 2 TP ranks.
  const double tp2 = static_cast<double>(stage_weight_bytes(*m, whole, 2, 1, *bf16));
  const double tp2dp4 = static_cast<double>(stage_weight_bytes(*m, whole, 2, 1, *bf16, false, 8));
  EXPECT_NEAR(tp2 - tp2dp4, routed * 2 * (1.0 / 2 - 1.0 / 8), 4.0);
  // Dense models are replicated whole on every DP rank.
  auto dense = resolve_model("meta-llama/Llama-3.1-8B");
  ASSERT_TRUE(dense.ok());
  EXPECT_EQ(moe_expert_ranks(*dense, 2, 4), 2u);
}

// GPTQ's group_size -1 is one scale per output channel: 4 bits per weight, said as per channel.
TEST(VllmWeightFormat, PerChannelGptqHasNoGroupOverhead) {
  auto m = resolve_model("meta-llama/Llama-2-7b-hf");
  ASSERT_TRUE(m.ok());
  ModelSpec gptq = *m;
  gptq.quantization = "gptq";
  gptq.quantization_bits = 4;
  gptq.quantization_per_channel = true;
  auto format = weight_format(gptq, std::nullopt, std::nullopt, true);
  ASSERT_TRUE(format.ok()) << format.error().message;
  EXPECT_EQ(format->linear_bytes, 0.5);
  EXPECT_EQ(format->description, "gptq 4-bit, per channel: 0.500 B per linear weight");
}

}  // namespace
}  // namespace oomdoc
