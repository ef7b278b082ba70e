#include "readers/model_presets.h"

#include <gtest/gtest.h>

#include "readers/model_resolver.h"

namespace oomdoc {
namespace {

TEST(ModelPresets, AtLeastFortyAndEveryOneParses) {
  const auto& index = preset_index();
  EXPECT_GE(index.size(), 73u);
  for (const auto& p : index) {
    auto spec = find_preset(p.id);
    ASSERT_TRUE(spec.has_value()) << p.id;
    ASSERT_TRUE(spec->ok()) << p.id << ": " << spec->error().message;
    EXPECT_FALSE(p.source.empty()) << p.id;
  }
}

// The count computed from each config must equal the published count to the parameter.
TEST(ModelPresets, ParameterCountMatchesPublishedCount) {
  int checked = 0;
  for (const auto& p : preset_index()) {
    if (!p.reference_params) continue;
    auto spec = find_preset(p.id);
    ASSERT_TRUE(spec && spec->ok()) << p.id;
    EXPECT_EQ((*spec)->total_params, *p.reference_params) << p.id;
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

// Presets added for the models users ask about most: each found by its exact Hugging Face id in any
// case, by a short alias, and as its instruct/chat release; the count is the config's own.
TEST(ModelPresets, PopularModelsByIdAliasAndInstructName) {
  struct Case {
    const char* name;
    const char* id;
    uint64_t params;
  };
  const Case cases[] = {
      {"mistralai/Mistral-7B-v0.3", "mistralai/Mistral-7B-v0.3", 7248023552},
      {"MISTRALAI/mistral-7b-instruct-V0.3", "mistralai/Mistral-7B-Instruct-v0.3", 7248023552},
      {"mistral-7b-v0.3", "mistralai/Mistral-7B-v0.3", 7248023552},
      {"meta-llama/Meta-Llama-3-70B-Instruct", "meta-llama/Meta-Llama-3-70B-Instruct", 70553706496},
      {"llama3-70b", "meta-llama/Meta-Llama-3-70B", 70553706496},
      {"qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B", 494032768},
      {"Qwen/Qwen2.5-1.5B", "Qwen/Qwen2.5-1.5B", 1543714304},
      {"qwen2.5-3b", "Qwen/Qwen2.5-3B", 3085938688},
      {"qwen2.5-14b", "Qwen/Qwen2.5-14B", 14770033664},
      {"qwen/qwen2.5-32b", "Qwen/Qwen2.5-32B", 32763876352},
      {"Qwen/Qwen3-4B", "Qwen/Qwen3-4B", 4022468096},
      {"qwen3-14b", "Qwen/Qwen3-14B", 14768307200},
      {"google/gemma-2-2b-it", "google/gemma-2-2b-it", 2614341888},
      {"gemma-2-27b", "google/gemma-2-27b", 27227128320},
      {"microsoft/phi-3.5-mini-instruct", "microsoft/Phi-3.5-mini-instruct", 3821079552},
      {"phi-4", "microsoft/phi-4", 14659507200},
      {"mistral-nemo-12b", "mistralai/Mistral-Nemo-Base-2407", 12247782400},
      {"mistralai/Mistral-Small-24B-Instruct-2501", "mistralai/Mistral-Small-24B-Instruct-2501", 23572403200},
      {"deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", 8030261248},
      {"deepseek-r1-distill-qwen-32b", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", 32763876352},
      // Re-uploads under another organisation, in a 16-bit dtype named in the repo.
      {"casperhansen/llama-3-70b-fp16", "meta-llama/Meta-Llama-3-70B", 70553706496},
      {"NousResearch/Meta-Llama-3.1-8B", "meta-llama/Meta-Llama-3.1-8B", 8030261248},
  };
  for (const auto& c : cases) {
    auto spec = find_preset(c.name);
    ASSERT_TRUE(spec.has_value()) << c.name;
    ASSERT_TRUE(spec->ok()) << c.name << ": " << spec->error().message;
    EXPECT_EQ((*spec)->id, c.id) << c.name;
    EXPECT_EQ((*spec)->total_params, c.params) << c.name;
  }
}

// Vision-language models: the language model, the vision tower and its projector, each preset
// found by its Hugging Face id, alias and instruct name; the counts are the Hub checkpoints'.
TEST(ModelPresets, VisionLanguageModelsCountTheirTowers) {
  struct Case {
    const char* name;
    const char* id;
    uint64_t params;
    uint64_t tower;  // vision tower and projector (extra_params)
  };
  const Case cases[] = {
      {"Qwen/Qwen2-VL-7B-Instruct", "Qwen/Qwen2-VL-7B-Instruct", 8291375616, 675759104},
      {"qwen2-vl-2b", "Qwen/Qwen2-VL-2B-Instruct", 2208985600, 665271296},
      {"qwen/qwen2-vl-72b-instruct", "Qwen/Qwen2-VL-72B-Instruct", 73405560320, 699356672},
      {"Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct", 8292166656, 676550144},
      {"qwen2.5-vl-3b", "Qwen/Qwen2.5-VL-3B-Instruct", 3754622976, 668684288},
      {"meta-llama/Llama-3.2-11B-Vision-Instruct", "meta-llama/Llama-3.2-11B-Vision-Instruct", 10670220835,
       863567379 + 31461376 + 8 * 258 + 8 * 4096},
      {"llama-3.2-11b-vision", "meta-llama/Llama-3.2-11B-Vision", 10670220835, 895063587},
  };
  for (const auto& c : cases) {
    auto spec = find_preset(c.name);
    ASSERT_TRUE(spec.has_value()) << c.name;
    ASSERT_TRUE(spec->ok()) << c.name << ": " << spec->error().message;
    EXPECT_EQ((*spec)->id, c.id) << c.name;
    EXPECT_EQ((*spec)->total_params, c.params) << c.name;
    EXPECT_EQ((*spec)->extra_params, c.tower) << c.name;
  }
  // Qwen2.5-VL-72B has no exact published count: its config's own, Qwen2.5-72B's language model
  // (72,706,203,648) and the tower with a 3456-wide MLP and an 8192-wide merger (704,573,696).
  auto q72 = find_preset("Qwen/Qwen2.5-VL-72B-Instruct");
  ASSERT_TRUE(q72 && q72->ok());
  EXPECT_FALSE((*q72)->reference_params.has_value());
  EXPECT_EQ((*q72)->extra_params, 704573696u);
  EXPECT_EQ((*q72)->total_params, 72706203648u + 704573696u);
}

// Qwen2-7B and Qwen2-72B: no exact published count of their own was found; their configs are
// Qwen2.5-7B's and Qwen2.5-72B's shapes, whose published counts they reach.
TEST(ModelPresets, QwenTwoHasQwenTwoPointFivesShape) {
  for (const auto& [qwen2, qwen25] : {std::pair{"Qwen/Qwen2-7B", "Qwen/Qwen2.5-7B"},
                                      std::pair{"qwen2-72b", "Qwen/Qwen2.5-72B"}}) {
    auto a = find_preset(qwen2);
    auto b = find_preset(qwen25);
    ASSERT_TRUE(a && a->ok() && b && b->ok()) << qwen2;
    EXPECT_FALSE((*a)->reference_params.has_value()) << qwen2;
    EXPECT_EQ((*a)->total_params, *(*b)->reference_params) << qwen2;
  }
  auto instruct = find_preset("Qwen/Qwen2-7B-Instruct");
  ASSERT_TRUE(instruct && instruct->ok());
  EXPECT_EQ((*instruct)->id, "Qwen/Qwen2-7B-Instruct");
  EXPECT_EQ((*instruct)->max_position_embeddings, 32768u);
  EXPECT_EQ((*find_preset("Qwen/Qwen2-7B"))->max_position_embeddings, 131072u);
  EXPECT_EQ((*find_preset("Qwen/Qwen2-72B-Instruct"))->total_params, 72706203648u);
}

// Instruct releases whose config.json differs are variants: their own id and context.
TEST(ModelPresets, InstructVariantsWithTheirOwnContext) {
  auto q14 = find_preset("Qwen/Qwen2.5-14B-Instruct");
  ASSERT_TRUE(q14 && q14->ok());
  EXPECT_EQ((*q14)->id, "Qwen/Qwen2.5-14B-Instruct");
  EXPECT_EQ((*q14)->source, "preset:presets/qwen2.5-14b.json#Qwen/Qwen2.5-14B-Instruct");
  EXPECT_EQ((*q14)->max_position_embeddings, 32768u);
  EXPECT_EQ((*q14)->total_params, 14770033664u);
  EXPECT_EQ((*find_preset("Qwen/Qwen2.5-14B"))->max_position_embeddings, 131072u);
  EXPECT_EQ((*find_preset("qwen2.5-1.5b-instruct"))->max_position_embeddings, 32768u);
  EXPECT_EQ((*find_preset("Qwen/Qwen2.5-1.5B"))->max_position_embeddings, 131072u);
  EXPECT_EQ((*find_preset("Qwen/Qwen2.5-0.5B-Instruct"))->id, "Qwen/Qwen2.5-0.5B-Instruct");
  auto coder = find_preset("Qwen/Qwen2.5-Coder-32B-Instruct");
  ASSERT_TRUE(coder && coder->ok());
  EXPECT_EQ((*coder)->id, "Qwen/Qwen2.5-Coder-32B-Instruct");
  EXPECT_EQ((*coder)->max_position_embeddings, 32768u);
  EXPECT_EQ((*coder)->total_params, 32763876352u);
  EXPECT_EQ((*find_preset("Qwen/Qwen2.5-Coder-7B-Instruct"))->total_params, 7615616512u);
  auto q4 = find_preset("Qwen/Qwen3-4B-Instruct-2507");
  ASSERT_TRUE(q4 && q4->ok());
  EXPECT_EQ((*q4)->max_position_embeddings, 262144u);
  EXPECT_EQ((*find_preset("Qwen/Qwen3-4B"))->max_position_embeddings, 40960u);
  // Llama 3 (not 3.1): 8K context and no rope scaling.
  auto l70 = find_preset("llama-3-70b");
  ASSERT_TRUE(l70 && l70->ok());
  EXPECT_EQ((*l70)->max_position_embeddings, 8192u);
  EXPECT_EQ((*l70)->rope_scaling_type, "");
  // A base model whose own config is not bundled is not answered with another release's.
  EXPECT_FALSE(find_preset("Qwen/Qwen2.5-Coder-32B").has_value());
}

// Released checkpoints whose config.json has the preset's shape: variants with their own source.
TEST(ModelPresets, SameShapeReleasesAreVariantsWithTheirSource) {
  auto nemo = find_preset("mistralai/Mistral-Nemo-Instruct-2407");
  ASSERT_TRUE(nemo && nemo->ok());
  EXPECT_EQ((*nemo)->id, "mistralai/Mistral-Nemo-Instruct-2407");
  EXPECT_EQ((*nemo)->source, "preset:presets/mistral-nemo-12b.json#mistralai/Mistral-Nemo-Instruct-2407");
  EXPECT_EQ((*nemo)->total_params, 12247782400u);
  EXPECT_EQ((*nemo)->max_position_embeddings, 1024000u);
  for (const char* name : {"deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-V3.1", "deepseek-ai/DeepSeek-V3.1-Base"}) {
    auto spec = find_preset(name);
    ASSERT_TRUE(spec && spec->ok()) << name;
    EXPECT_EQ((*spec)->id, name);
    EXPECT_EQ((*spec)->total_params, 671026419200u) << name;
    EXPECT_EQ((*spec)->quantization, "fp8") << name;
  }
  EXPECT_EQ((*find_preset("deepseek-ai/DeepSeek-V3.1-Base"))->source,
            "preset:presets/deepseek-v3.json#deepseek-ai/DeepSeek-V3.1");
}

// The id shown is what matched, as the preset file spells it: an alias that is a Hugging Face id
// is itself, not the preset's id; a short alias or a name matched by its key shows the preset's id.
TEST(ModelPresets, TheIdIsWhatMatched) {
  EXPECT_EQ((*find_preset("google/gemma-3-27b-pt"))->id, "google/gemma-3-27b-pt");
  EXPECT_EQ((*find_preset("GOOGLE/GEMMA-3-27B-PT"))->id, "google/gemma-3-27b-pt");
  EXPECT_EQ((*find_preset("gemma-3-27b"))->id, "google/gemma-3-27b-it");
  EXPECT_EQ((*find_preset("deepseek-ai/DeepSeek-R1"))->id, "deepseek-ai/DeepSeek-R1");
  EXPECT_EQ((*find_preset("deepseek-r1"))->id, "deepseek-ai/DeepSeek-V3");
  EXPECT_EQ((*find_preset("meta-llama/Llama-3.1-8B-Instruct"))->id, "meta-llama/Llama-3.1-8B-Instruct");
  EXPECT_EQ((*find_preset("Llama-3.1-8B-Instruct"))->id, "meta-llama/Llama-3.1-8B-Instruct");
  EXPECT_EQ((*find_preset("meta-llama/Llama-2-7b-chat-hf"))->id, "meta-llama/Llama-2-7b-chat-hf");  // an alias
  EXPECT_EQ((*find_preset("casperhansen/llama-3-70b-fp16"))->id, "meta-llama/Meta-Llama-3-70B");  // by its key
  EXPECT_EQ((*find_preset("google/gemma-3-27b-pt"))->source, "preset:presets/gemma-3-27b.json");
}

// Qwen3-0.6B and -1.7B tie the output head to the embedding (tie_word_embeddings true): the model
// has one copy, which is what is counted. Their safetensors files store lm_head.weight as well, so
// the Hub shows 751,632,384 and 2,031,739,904: no reference_params for those two presets.
TEST(ModelPresets, TiedEmbeddingsAreCountedOnce) {
  auto small = find_preset("Qwen/Qwen3-0.6B");
  ASSERT_TRUE(small && small->ok());
  EXPECT_TRUE((*small)->tie_word_embeddings);
  EXPECT_EQ((*small)->total_params, 596049920u);
  EXPECT_EQ((*small)->total_params + 151936ull * 1024, 751632384u);
  auto medium = find_preset("qwen3-1.7b");
  ASSERT_TRUE(medium && medium->ok());
  EXPECT_EQ((*medium)->total_params, 1720574976u);
  EXPECT_EQ((*medium)->total_params + 151936ull * 2048, 2031739904u);
}

}  // namespace
}  // namespace oomdoc
