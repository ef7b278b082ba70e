// KV bytes per token against hand-computed values from the models' real config.json (bundled
// presets): 2 x layers x max(1, kv_heads / tp) x head_dim x dtype bytes; MLA: layers x
// (kv_lora_rank + qk_rope_head_dim) x dtype bytes, the same on every TP rank.
#include "analyses/vllm_kv_cache.h"

#include <gtest/gtest.h>

#include "core/units.h"
#include "readers/model_resolver.h"

namespace oomdoc {
namespace {

ModelSpec model(const std::string& name) {
  auto m = resolve_model(name);
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? m.value() : ModelSpec{};
}

uint64_t bytes_per_token(const std::string& name, uint64_t tp = 1, uint64_t pp = 1,
                         uint64_t dtype_bytes = 2) {
  ModelSpec m = model(name);
  uint64_t worst = 0;
  for (const auto& stage : pipeline_stages(m, pp)) {
    worst = std::max(worst, kv_layout(m, stage, tp, dtype_bytes, 16).bytes_per_token);
  }
  return worst;
}

TEST(VllmKvBytesPerToken, GroupedQueryAttention) {
  EXPECT_EQ(bytes_per_token("llama-3-8b"), 128 * kKiB);       // 2 x 32 x 8 x 128 x 2
  EXPECT_EQ(bytes_per_token("qwen2.5-7b"), 56 * kKiB);        // 2 x 28 x 4 x 128 x 2
  EXPECT_EQ(bytes_per_token("llama-2-70b"), 320 * kKiB);      // 2 x 80 x 8 x 128 x 2
}

TEST(VllmKvBytesPerToken, MultiHeadAttention) {
  EXPECT_EQ(bytes_per_token("llama-2-7b"), 512 * kKiB);       // 2 x 32 x 32 x 128 x 2
}

TEST(VllmKvBytesPerToken, MultiLatentAttentionIsReplicatedAcrossTensorParallel) {
  EXPECT_EQ(bytes_per_token("deepseek-v3"), 61u * 576 * 2);   // 70,272 B = 68.6 KiB
  EXPECT_EQ(bytes_per_token("deepseek-v3", 8), 61u * 576 * 2);
  EXPECT_EQ(bytes_per_token("deepseek-v3", 8, 1, 1), 61u * 576);
  auto m = model("deepseek-v3");
  auto layout = kv_layout(m, pipeline_stages(m, 1)[0], 8, 2, 16);
  EXPECT_TRUE(layout.latent);
  EXPECT_EQ(layout.page_bytes, 16u * 576 * 2);
  EXPECT_EQ(layout.formula, "61 layers x 1 latent x (512 + 64) x 2 B");
}

TEST(VllmKvBytesPerToken, TensorParallelSplitsHeadsAndReplicatesPastTheirCount) {
  EXPECT_EQ(bytes_per_token("llama-3-8b", 2), 64 * kKiB);
  EXPECT_EQ(bytes_per_token("llama-3-8b", 8), 16 * kKiB);     // one KV head per rank
  EXPECT_EQ(bytes_per_token("llama-3-8b", 16), 16 * kKiB);    // still one: replicated
  EXPECT_EQ(bytes_per_token("gemma-2-9b", 8), 42 * kKiB);     // 2 x 42 x 1 x 256 x 2
  EXPECT_EQ(bytes_per_token("qwen3-235b-a22b", 4), 47 * kKiB);  // 2 x 94 x 1 x 128 x 2
}

TEST(VllmKvBytesPerToken, Fp8HalvesAndPipelineSplitsLayers) {
  EXPECT_EQ(bytes_per_token("llama-3-8b", 1, 1, 1), 64 * kKiB);
  EXPECT_EQ(bytes_per_token("llama-3-8b", 1, 2), 64 * kKiB);
  // 61 layers over 4 stages: get_pp_indices gives 15, 15, 16, 15.
  auto stages = pipeline_stages(model("deepseek-v3"), 4);
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_EQ(stages[0].layers, 15u);
  EXPECT_EQ(stages[1].layers, 15u);
  EXPECT_EQ(stages[2].layers, 16u);
  EXPECT_EQ(stages[3].layers, 15u);
  EXPECT_TRUE(stages[0].first);
  EXPECT_TRUE(stages[3].last);
  EXPECT_EQ(stages[2].first_layer, 30u);
}

KvLayout layout_for(const std::string& name, const std::string& kv_cache_dtype, uint64_t tp = 1) {
  ModelSpec m = model(name);
  auto storage = kv_cache_storage(kv_cache_dtype, 2);
  EXPECT_TRUE(storage.ok()) << storage.error().message;
  return kv_layout(m, pipeline_stages(m, 1)[0], tp, storage.ok() ? storage.value() : KvCacheStorage{}, 16);
}

TEST(VllmKvDtype, FollowsTheFlag) {
  EXPECT_EQ(kv_cache_storage("auto", 2)->element_bytes, 2u);
  EXPECT_EQ(kv_cache_storage("auto", 4)->element_bytes, 4u);
  EXPECT_EQ(kv_cache_storage("fp8", 2)->element_bytes, 1u);
  EXPECT_EQ(kv_cache_storage("fp8_e5m2", 2)->element_bytes, 1u);
  EXPECT_EQ(kv_cache_storage("bfloat16", 4)->element_bytes, 2u);
  EXPECT_EQ(kv_cache_storage("float16", 4)->element_bytes, 2u);
}

// Llama-3.1-8B: 32 layers, 8 KV heads of 128. vllm/v1/kv_cache_interface.py page sizes.
TEST(VllmKvDtype, FourBitCachesArePackedWithTheirScales) {
  // nvfp4_kv_cache_full_dim(128) = 64 + 8 bytes per head for K and for V (uint8 elements).
  KvLayout nvfp4 = layout_for("llama-3.1-8b", "nvfp4");
  EXPECT_EQ(nvfp4.bytes_per_token, 2u * 32 * 8 * 72);   // 36,864 B: 0.28 of bf16's 131,072
  EXPECT_EQ(nvfp4.page_bytes, 16u * 2 * 8 * 72);
  EXPECT_EQ(nvfp4.formula, "2 x 32 layers x 8 KV heads x (128/2 + 128/16) B (nvfp4: fp4 values + an fp8 scale per 16)");
  EXPECT_EQ(layout_for("llama-3.1-8b", "nvfp4_4over6").bytes_per_token, 2u * 32 * 8 * 72);
  // int4_per_token_head: 64 bytes of packed values and a 4-byte fp32 scale per token, head and K/V.
  EXPECT_EQ(layout_for("llama-3.1-8b", "int4_per_token_head").bytes_per_token, 2u * 32 * 8 * (64 + 4));
}

TEST(VllmKvDtype, PerTokenHeadScalesLiveInThePages) {
  // AttentionSpec.page_size_bytes adds 2 * block_size * num_kv_heads * 4 to the 1-byte page.
  KvLayout int8 = layout_for("llama-3.1-8b", "int8_per_token_head");
  EXPECT_EQ(int8.bytes_per_token, 2u * 32 * 8 * (128 + 4));   // 67,584 B, not fp8's 65,536
  EXPECT_EQ(int8.page_bytes, 16u * 2 * 8 * 132);
  EXPECT_EQ(int8.formula, "2 x 32 layers x 8 KV heads x (128 x 1 B + a 4 B scale)");
  EXPECT_EQ(layout_for("llama-3.1-8b", "fp8_per_token_head").bytes_per_token, 2u * 32 * 8 * 132);
  EXPECT_EQ(layout_for("llama-3.1-8b", "fp8").bytes_per_token, 2u * 32 * 8 * 128);
  // Per TP rank: 8 heads over TP 4 leave 2.
  EXPECT_EQ(layout_for("llama-3.1-8b", "int8_per_token_head", 4).bytes_per_token, 2u * 32 * 2 * 132);
}

TEST(VllmKvDtype, SparseMlaIsFlashMlasFixedLayout) {
  // MLAAttentionSpec: fp8_ds_mla pages are block_size * 656 bytes, not 576 fp8 latent values.
  KvLayout ds = layout_for("deepseek-v3", "fp8_ds_mla");
  EXPECT_EQ(ds.bytes_per_token, 61u * 656);
  EXPECT_EQ(ds.formula, "61 layers x 656 B (fp8_ds_mla: FlashMLA's sparse layout per token)");
  EXPECT_EQ(layout_for("deepseek-v3", "fp8").bytes_per_token, 61u * 576);
  // On ordinary attention the name still means uint8 elements.
  EXPECT_EQ(layout_for("llama-3.1-8b", "fp8_ds_mla").bytes_per_token, 2u * 32 * 8 * 128);
}

TEST(VllmKvDtype, UnsizedAndUnknownDtypesAreRefused) {
  auto turbo = kv_cache_storage("turboquant_4bit_nc", 2);
  ASSERT_FALSE(turbo.ok());
  EXPECT_EQ(turbo.error().message,
            "--kv-cache-dtype turboquant_4bit_nc: vLLM accepts it, but its pages are laid out by its own attention "
            "backend and oomdoc does not size them; size this launch with fp8 or nvfp4 instead");
  EXPECT_FALSE(kv_cache_storage("nvfp4_ds_mla", 2).ok());
  auto half = kv_cache_storage("half", 2);
  ASSERT_FALSE(half.ok());
  EXPECT_EQ(half.error().message.rfind("--kv-cache-dtype: 'half' is not one of vLLM's KV cache dtypes (auto, float16, ", 0),
            0u);
}

TEST(VllmKvCapacity, BlocksTokensAndConcurrency) {
  auto m = model("llama-3.1-8b");
  auto layout = kv_layout(m, pipeline_stages(m, 1)[0], 1, 2, 16);
  EXPECT_EQ(layout.page_bytes, 64 * kKiB);
  // 3.81 GiB as a V0 log prints it; one block of all 32 layers is 2 MiB.
  KvCapacity c = kv_capacity(layout, 4090956349, 20000, 20000, std::nullopt, KvGrouping{false});
  EXPECT_EQ(c.num_blocks, 1950u);          // floor(4090956349 / 2097152)
  EXPECT_EQ(c.tokens, 31200u);
  EXPECT_EQ(c.blocks_per_request, 1250u);  // cdiv(20000, 16)
  EXPECT_NEAR(c.max_concurrency, 1.56, 1e-9);
  EXPECT_EQ(c.bytes_per_request, 1250u * 2 * kMiB);
  EXPECT_EQ(kv_capacity(layout, -5, 20000, 20000, std::nullopt, KvGrouping{false}).num_blocks, 0u);
  // The longest request 1950 blocks hold.
  EXPECT_EQ(max_model_len_that_fits(layout, 4090956349, 2048, std::nullopt, KvGrouping{false}, 131072), 31200u);
  EXPECT_EQ(max_model_len_that_fits(layout, 1000, 2048, std::nullopt, KvGrouping{false}, 131072), 0u);
}

TEST(VllmKvCapacity, HybridManagerGivesSlidingLayersTheirOwnGroups) {
  auto m = model("gemma-2-9b");
  auto stage = pipeline_stages(m, 1)[0];
  EXPECT_EQ(stage.sliding_layers, 21u);
  auto layout = kv_layout(m, stage, 1, 2, 16);
  EXPECT_EQ(layout.page_bytes, 16u * 2 * 8 * 256 * 2);   // 131,072 B per layer per block
  // Hybrid (V1 >= 0.10): groups of 21 layers; a block of every group is 21 pages.
  KvCapacity hybrid = kv_capacity(layout, 10 * kGiB, 8192, 2048, m.sliding_window, KvGrouping{true});
  EXPECT_EQ(hybrid.num_groups, 2u);
  EXPECT_EQ(hybrid.num_blocks, 3900u);      // floor(10 GiB / (21 x 131072))
  EXPECT_EQ(hybrid.tokens, 31200u);         // 3900 // 2 groups x 16
  // Full layers: cdiv(8192, 16) = 512; sliding: cdiv(min(4095 + 2048, 8192), 16) + 1 = 385.
  EXPECT_EQ(hybrid.blocks_per_request, 897u);
  EXPECT_NEAR(hybrid.max_concurrency, 3900.0 / 897.0, 1e-12);
  // Without the hybrid manager every layer is full attention.
  KvCapacity uniform = kv_capacity(layout, 10 * kGiB, 8192, 2048, m.sliding_window, KvGrouping{false});
  EXPECT_EQ(uniform.num_blocks, 1950u);
  EXPECT_EQ(uniform.tokens, 31200u);
  EXPECT_NEAR(uniform.max_concurrency, 1950.0 / 512.0, 1e-12);
}

// Gemma 3 (google/gemma-3-1b-pt config.json): sliding_window 512, every sixth layer global, so 4
// full and 22 sliding layers of 1 KV head x 256. The hybrid manager cuts them into groups of 4
// (the smaller count): 1 full group and cdiv(22, 4) = 6 sliding groups, the last padded.
TEST(VllmKvCapacity, GemmaThreeSlidingLayersAreGroupedByTheGlobalLayerCount) {
  auto m = model("gemma-3-1b");
  auto stage = pipeline_stages(m, 1)[0];
  EXPECT_EQ(stage.sliding_layers, 22u);
  auto layout = kv_layout(m, stage, 1, 2, 16);
  EXPECT_EQ(layout.bytes_per_token, 26u * 2 * 1 * 256 * 2);   // 26,624 B: every layer, as V0 sizes it
  EXPECT_EQ(layout.page_bytes, 16u * 2 * 1 * 256 * 2);        // 16,384 B per layer per block
  KvCapacity hybrid = kv_capacity(layout, kGiB, 32768, 2048, m.sliding_window, KvGrouping{true});
  EXPECT_EQ(hybrid.num_groups, 7u);
  EXPECT_EQ(hybrid.num_blocks, 16384u);       // 2^30 / (16,384 x 4 layers per group)
  EXPECT_EQ(hybrid.tokens, 37440u);           // 16384 // 7 groups x 16
  // Full: cdiv(32768, 16) = 2048; each sliding group: cdiv(min(511 + 2048, 32768), 16) + 1 = 161.
  EXPECT_EQ(hybrid.blocks_per_request, 2048u + 6 * 161);
  KvCapacity uniform = kv_capacity(layout, kGiB, 32768, 2048, m.sliding_window, KvGrouping{false});
  EXPECT_EQ(uniform.num_blocks, 2520u);       // 2^30 / (16,384 x 26)
}

// Mistral-7B-v0.1: sliding_window 4096 on every layer: one sliding group of 32 layers, and a
// request is charged cdiv(min(4095 + 2048, 32768), 16) + 1 = 385 blocks, not cdiv(32768, 16).
TEST(VllmKvCapacity, MistralSlidingWindowOnEveryLayer) {
  auto m = model("mistral-7b-v0.1");
  auto stage = pipeline_stages(m, 1)[0];
  EXPECT_EQ(stage.sliding_layers, 32u);
  auto layout = kv_layout(m, stage, 1, 2, 16);
  EXPECT_EQ(layout.bytes_per_token, 128 * kKiB);   // 2 x 32 x 8 x 128 x 2
  KvCapacity hybrid = kv_capacity(layout, 4 * kGiB, 32768, 2048, m.sliding_window, KvGrouping{true});
  EXPECT_EQ(hybrid.num_groups, 1u);
  EXPECT_EQ(hybrid.num_blocks, 2048u);        // 4 GiB / (65,536 x 32)
  EXPECT_EQ(hybrid.tokens, 32768u);
  EXPECT_EQ(hybrid.blocks_per_request, 385u);
  EXPECT_EQ(kv_capacity(layout, 4 * kGiB, 32768, 2048, m.sliding_window, KvGrouping{false}).blocks_per_request, 2048u);
}

// Nearly balanced kinds (gpt-oss-20b + eagle: 12 sliding + 13 full) are padded to groups of the
// larger count, 13, instead of 12 groups of 1 (kv_cache_utils.py: max < 1.5 x min; 1.25 before).
TEST(VllmKvCapacity, NearlyBalancedKindsUseTheLargerGroupSize) {
  ModelSpec m;
  m.num_layers = 25;
  m.num_attention_heads = 64;
  m.num_kv_heads = 8;
  m.head_dim = 64;
  m.hidden_size = 2880;
  m.sliding_window = 128;
  m.layer_is_sliding.assign(25, false);
  for (uint64_t i = 0; i < 24; i += 2) m.layer_is_sliding[i] = true;   // 12 sliding
  auto stage = pipeline_stages(m, 1)[0];
  EXPECT_EQ(stage.sliding_layers, 12u);
  auto layout = kv_layout(m, stage, 1, 2, 16);
  EXPECT_EQ(layout.page_bytes, 16u * 2 * 8 * 64 * 2);   // 32,768 B
  KvCapacity c = kv_capacity(layout, kGiB, 8192, 2048, m.sliding_window, KvGrouping{true});
  EXPECT_EQ(c.num_groups, 2u);
  EXPECT_EQ(c.num_blocks, 2520u);             // 2^30 / (32,768 x 13)
  EXPECT_EQ(c.tokens, 20160u);                // 2520 // 2 x 16
  EXPECT_EQ(c.blocks_per_request, 512u + 137u);   // sliding: cdiv(127 + 2048, 16) + 1
}

// A model of 24 layers like gpt-oss-20b's (64 x 8 KV heads of 64, window 128): 12 sliding ones.
ModelSpec gpt_oss_like(uint64_t sliding, uint64_t full) {
  ModelSpec m;
  m.num_layers = sliding + full;
  m.num_attention_heads = 64;
  m.num_kv_heads = 8;
  m.head_dim = 64;
  m.hidden_size = 2880;
  m.sliding_window = 128;
  m.layer_is_sliding.assign(m.num_layers, false);
  for (uint64_t i = 0; i < sliding; ++i) m.layer_is_sliding[i] = true;
  return m;
}

// 14 sliding + 10 full: 1.4 x the smaller count. vLLM since #36684 (1.5) pads them into 2 groups of
// 14; v0.12 to v0.17 (1.25) cut groups of 10: 2 sliding + 1 full; before v0.12, always the smaller.
TEST(VllmKvCapacity, TheLargerKindsThresholdFollowsTheVersion) {
  auto m = gpt_oss_like(14, 10);
  auto layout = kv_layout(m, pipeline_stages(m, 1)[0], 1, 2, 16);
  KvCapacity now = kv_capacity(layout, kGiB, 8192, 2048, m.sliding_window, KvGrouping{true, 150});
  EXPECT_EQ(now.num_groups, 2u);
  EXPECT_EQ(now.num_blocks, 2340u);                 // 2^30 / (32,768 x 14)
  EXPECT_EQ(now.blocks_per_request, 512u + 137u);
  KvCapacity before = kv_capacity(layout, kGiB, 8192, 2048, m.sliding_window, KvGrouping{true, 125});
  EXPECT_EQ(before.num_groups, 3u);
  EXPECT_EQ(before.num_blocks, 3276u);              // 2^30 / (32,768 x 10)
  EXPECT_EQ(before.blocks_per_request, 512u + 2 * 137u);
  EXPECT_EQ(kv_capacity(layout, kGiB, 8192, 2048, m.sliding_window, KvGrouping{true, 0}).num_groups, 3u);
  // 12 + 12 is one group of each whatever the threshold.
  auto even = gpt_oss_like(12, 12);
  auto even_layout = kv_layout(even, pipeline_stages(even, 1)[0], 1, 2, 16);
  EXPECT_EQ(kv_capacity(even_layout, kGiB, 8192, 2048, even.sliding_window, KvGrouping{true, 0}).num_groups, 2u);
}

// Pipeline stages: the groups are the whole model's (12 sliding + 12 full: one of each), projected
// onto each stage. A stage of 3 sliding and 2 full layers costs 3 pages a block, not the 2 pages
// of its own grouping (3 groups of 2), and a request is charged for the model's 2 groups.
TEST(VllmKvCapacity, PipelineStagesShareTheWholeModelsGroups) {
  auto m = gpt_oss_like(12, 12);
  for (uint64_t i = 0; i < 24; ++i) m.layer_is_sliding[i] = i % 2 == 0;   // alternating, as gpt-oss
  PipelineStage stage;
  stage.first_layer = 10;
  stage.layers = 5;
  stage.sliding_layers = 3;   // layers 10, 12, 14
  auto layout = kv_layout(m, stage, 1, 2, 16);
  KvCapacity own = kv_capacity(layout, kGiB, 8192, 2048, m.sliding_window, KvGrouping{true});
  EXPECT_EQ(own.num_groups, 3u);                     // (before v0.11) 2 full + 3 sliding: groups of 2
  EXPECT_EQ(own.num_blocks, 16384u);                 // 2^30 / (32,768 x 2)
  layout.model_full_layers = 12;
  layout.model_sliding_layers = 12;
  KvCapacity projected = kv_capacity(layout, kGiB, 8192, 2048, m.sliding_window, KvGrouping{true});
  EXPECT_EQ(projected.num_groups, 2u);
  EXPECT_EQ(projected.num_blocks, 10922u);           // 2^30 / (32,768 x 3)
  EXPECT_EQ(projected.blocks_per_request, 512u + 137u);
  // Two sliding groups over the model (8 full + 16 sliding, groups of 8): the stage's 3 sliding
  // layers are dealt round the 2 groups, so the fuller holds 2.
  layout.model_full_layers = 8;
  layout.model_sliding_layers = 16;
  layout.full_layers = 1;
  layout.sliding_layers = 3;
  KvCapacity dealt = kv_capacity(layout, kGiB, 8192, 2048, m.sliding_window, KvGrouping{true});
  EXPECT_EQ(dealt.num_groups, 3u);
  EXPECT_EQ(dealt.num_blocks, 16384u);               // 2^30 / (32,768 x 2)
}

}  // namespace
}  // namespace oomdoc
