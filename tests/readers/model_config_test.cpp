#include "readers/model_config.h"

#include "model/architecture.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "support/test_support.h"

namespace oomdoc {
namespace {

Result<ModelSpec> parse(const std::string& json) { return parse_model_config(json, "config.json"); }

// The modules a quantized checkpoint keeps in 16 bits, under each format's key; compressed-tensors'
// regular expressions ("re:...") are not read.
TEST(ModelConfig, UnquantizedModulesAreRead) {
  auto m = parse(R"({"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
      "quantization_config": {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
                              "modules_to_not_convert": ["model.layers.0.mlp.down_proj", "lm_head"]}})");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->unquantized_modules, (std::vector<std::string>{"model.layers.0.mlp.down_proj", "lm_head"}));
  auto ct = parse(R"({"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
      "quantization_config": {"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*mlp.gate$"]}})");
  ASSERT_TRUE(ct.ok()) << ct.error().message;
  EXPECT_EQ(ct->unquantized_modules, (std::vector<std::string>{"lm_head"}));
}

// compressed-tensors says per config group whether its 8 bits are integers (W8A8-INT8) or floats
// (FP8-dynamic).
TEST(ModelConfig, CompressedTensorsWeightTypeIsRead) {
  const std::string base = R"({"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
      "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
      "quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"group_0":
      {"targets": ["Linear"], "weights": {"num_bits": 8, "strategy": "channel", "type": )";
  auto integers = parse(base + R"("int"}}}}})");
  ASSERT_TRUE(integers.ok()) << integers.error().message;
  EXPECT_EQ(integers->quantization_bits, 8u);
  EXPECT_TRUE(integers->quantization_integers);
  auto floats = parse(base + R"("float"}}}}})");
  ASSERT_TRUE(floats.ok()) << floats.error().message;
  EXPECT_FALSE(floats->quantization_integers);
  EXPECT_TRUE(floats->quantization_per_channel);   // "strategy": "channel": no groups
  // QuantizationArgs' type defaults to int.
  auto untyped = parse(R"({"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "quantization_config":
      {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {"num_bits": 4,
      "strategy": "group", "group_size": 128}}}}})");
  ASSERT_TRUE(untyped.ok()) << untyped.error().message;
  EXPECT_TRUE(untyped->quantization_integers);
  EXPECT_FALSE(untyped->quantization_per_channel);
  EXPECT_EQ(untyped->quantization_group_size, 128u);
}

// An encoder's head as `architectures` names it.
TEST(ModelConfig, EncoderHeadIsRead) {
  const std::string base = R"({"model_type": "bert", "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
      "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 512, "architectures": )";
  EXPECT_EQ(parse(base + R"(["BertForMaskedLM"]})")->encoder_head, "masked_lm");
  EXPECT_EQ(parse(base + R"(["BertForSequenceClassification"]})")->encoder_head, "classification");
  EXPECT_EQ(parse(base + R"(["BertModel"]})")->encoder_head, "");
}

TEST(ModelConfig, LlamaWithExplicitHeadDim) {
  // Qwen3-style: head_dim 128 although hidden/heads = 64.
  auto m = parse(R"({"model_type": "qwen3", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128,
                     "intermediate_size": 512, "tie_word_embeddings": true, "torch_dtype": "bfloat16"})");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->head_dim, 128u);
  EXPECT_TRUE(m->qk_norm);
  // q 256x512, k,v 256x256, o 512x256, MLP 3x256x512, norms 2x256 + q/k norm 2x128, final 256,
  // embeddings 1000x256 tied.
  const uint64_t layer = 256 * 512 + 2 * 256 * 256 + 512 * 256 + 3 * 256 * 512 + 2 * 256 + 2 * 128;
  EXPECT_EQ(m->total_params, 2 * layer + 256 + 1000 * 256);
  EXPECT_EQ(m->torch_dtype, "bfloat16");
}

TEST(ModelConfig, GemmaTwoAlternatesSlidingLayers) {
  auto m = parse(R"({"model_type": "gemma2", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 4,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
                     "intermediate_size": 128, "sliding_window": 4096})");
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_TRUE(m->sliding_window);
  EXPECT_EQ(*m->sliding_window, 4096u);
  EXPECT_EQ(m->layer_is_sliding, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(m->norms_per_layer, 4u);
}

// Qwen2's window covers the layers from max_window_layers on; without use_sliding_window, none.
TEST(ModelConfig, QwenSlidesOnlyFromMaxWindowLayers) {
  const std::string shape = R"("model_type": "qwen2", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 6,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 128,
                     "sliding_window": 4096, "max_window_layers": 4)";
  auto on = parse("{" + shape + R"(, "use_sliding_window": true})");
  ASSERT_TRUE(on) << on.error().message;
  ASSERT_TRUE(on->sliding_window);
  EXPECT_EQ(on->layer_is_sliding, (std::vector<bool>{false, false, false, false, true, true}));
  auto off = parse("{" + shape + R"(, "use_sliding_window": false})");
  ASSERT_TRUE(off) << off.error().message;
  EXPECT_FALSE(off->sliding_window);
  EXPECT_TRUE(off->layer_is_sliding.empty());
  // Mistral's window covers every layer.
  auto mistral = parse(R"({"model_type": "mistral", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 128,
                     "sliding_window": 4096, "max_window_layers": 1})");
  ASSERT_TRUE(mistral) << mistral.error().message;
  EXPECT_TRUE(mistral->layer_is_sliding.empty());
}

// openai/gpt-oss-20b's config.json as published (tests/fixtures/estimate/gpt-oss-20b).
TEST(ModelConfig, GptOssTwentyB) {
  auto m = parse_model_config(testing::read_file(testing::fixture_path("estimate/gpt-oss-20b/config.json")),
                              "config.json");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->model_type, "gpt_oss");
  EXPECT_EQ(m->head_dim, 64u);  // given: hidden 2880 / 64 heads would be 45
  EXPECT_EQ(m->num_kv_heads, 8u);
  EXPECT_EQ(m->num_experts, 32u);
  EXPECT_EQ(m->experts_per_token, 4u);
  EXPECT_EQ(m->moe_intermediate_size, 2880u);
  EXPECT_TRUE(m->qkv_bias && m->attn_out_bias && m->mlp_bias && m->router_bias && m->attention_sinks);
  EXPECT_FALSE(m->tie_word_embeddings);
  ASSERT_TRUE(m->sliding_window);
  EXPECT_EQ(*m->sliding_window, 128u);
  ASSERT_EQ(m->layer_is_sliding.size(), 24u);
  for (size_t i = 0; i < 24; ++i) EXPECT_EQ(m->layer_is_sliding[i], i % 2 == 0) << i;
  EXPECT_EQ(m->rope_scaling_type, "yarn");
  EXPECT_EQ(m->rope_scaling_factor, 32.0);
  EXPECT_EQ(m->rope_original_max_position, 4096u);
  EXPECT_EQ(m->quantization, "mxfp4");
  EXPECT_EQ(m->quantization_bits, 4u);
  EXPECT_EQ(m->total_params, 20914757184u);  // counted in architecture_test.cpp
}

TEST(ModelConfig, GptOssWithoutLayerTypesAlternatesFromSliding) {
  auto m = parse(R"({"model_type": "gpt_oss", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 4,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 32,
                     "num_local_experts": 4, "experts_per_token": 2, "sliding_window": 8})");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->experts_per_token, 2u);
  EXPECT_EQ(m->layer_is_sliding, (std::vector<bool>{true, false, true, false}));
  // attention 64x64+64, 2 x (64x32+32), 64x64+64; sinks 4; router 64x4+4; experts 4 x (64x64+64 + 32x64+64);
  // norms 2 x 64; embeddings and head 100 x 64 each; final norm 64.
  const uint64_t layer = (64 * 64 + 64) * 2 + (64 * 32 + 32) * 2 + 4 + (64 * 4 + 4) + 4 * (64 * 64 + 64 + 32 * 64 + 64) + 128;
  EXPECT_EQ(m->total_params, 4 * layer + 2 * 100 * 64 + 64);
}

TEST(ModelConfig, MultimodalTextConfigIsRead) {
  auto m = parse(R"({"model_type": "gemma3", "torch_dtype": "bfloat16",
                     "text_config": {"vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 6,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
                     "intermediate_size": 128, "sliding_window": 512, "sliding_window_pattern": 6}})");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->model_type, "gemma3_text");
  EXPECT_EQ(m->layer_is_sliding, (std::vector<bool>{true, true, true, true, true, false}));
  EXPECT_EQ(m->torch_dtype, "bfloat16");
}

// The vision tower and projector are loaded (and trained) with the language model: counted to
// the parameter. llava-hf/llava-1.5-7b-hf: Llama-2-7B with 32,064 tokens (6,738,939,904), CLIP
// ViT-L/14 at 336 px (24 blocks of 12,596,224 + class token, patch conv 3x14x14x1024, 577
// positions, pre- and post-norm: 303,507,456) and two biased Linears 1024->4096->4096
// (20,979,712): 7,063,427,072, the count on the model's page.
TEST(ModelConfig, LlavaCountsItsClipTowerAndProjector) {
  // llava-hf/llava-1.5-7b-hf's config.json as published: the text_config gives only what differs
  // from LlamaConfig's defaults.
  auto m = parse(R"({"model_type": "llava", "_name_or_path": "llava-hf/llava-1.5-7b-hf", "torch_dtype": "float16",
                     "text_config": {"_name_or_path": "lmsys/vicuna-7b-v1.5", "architectures": ["LlamaForCausalLM"],
                       "max_position_embeddings": 4096, "model_type": "llama", "rms_norm_eps": 1e-05,
                       "torch_dtype": "float16", "vocab_size": 32064},
                     "vision_config": {"hidden_size": 1024, "image_size": 336, "intermediate_size": 4096,
                       "model_type": "clip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 24,
                       "patch_size": 14, "projection_dim": 768, "vocab_size": 32000}})");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->total_params, 7063427072u);
  EXPECT_EQ(m->extra_params, 303507456u + 20979712u);
  EXPECT_EQ(m->id, "llava-hf/llava-1.5-7b-hf");
  EXPECT_EQ(m->max_position_embeddings, 4096u);
  // An unknown tower is said, not guessed.
  auto other = parse(R"({"model_type": "gemma3",
                     "text_config": {"vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 6,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 128},
                     "vision_config": {"model_type": "pixtral"}})");
  ASSERT_TRUE(other) << other.error().message;
  EXPECT_EQ(other->extra_params, 0u);
  ASSERT_FALSE(other->notes.empty());
  EXPECT_EQ(other->notes.back(), "vision tower \"pixtral\" not counted (SigLIP, CLIP, Qwen2-VL, Qwen2.5-VL and Mllama "
                                 "towers are): the parameter count is the language model's");
  // A hostile vision config is an error naming the key.
  auto bad = parse(R"({"model_type": "gemma3",
                     "text_config": {"vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 6,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 128},
                     "vision_config": {"model_type": "siglip_vision_model", "patch_size": 0}})");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("image_size 224 and patch_size 0 give no patches"), std::string::npos);
  // Sizes whose products would wrap 64 bits are refused, as the text model's are.
  auto huge = parse(R"({"model_type": "gemma3",
                     "text_config": {"vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 6,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 128},
                     "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 4294967296}})");
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().message.find("vision_config: hidden_size 4294967296 is implausibly large (limit 262144)"),
            std::string::npos) << huge.error().message;
  auto wide = parse(R"({"model_type": "gemma3",
                     "text_config": {"vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 6,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 128},
                     "vision_config": {"model_type": "siglip_vision_model", "image_size": 1000000000000000, "patch_size": 1}})");
  ASSERT_FALSE(wide);
  EXPECT_NE(wide.error().message.find("vision_config: image_size / patch_size 1000000000000000 is implausibly large "
                                      "(limit 4096)"), std::string::npos) << wide.error().message;
  auto typed = parse(R"({"model_type": "gemma3",
                     "text_config": {"vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 6,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 128},
                     "vision_config": {"model_type": 5}})");
  ASSERT_FALSE(typed);
  EXPECT_NE(typed.error().message.find("vision_config.model_type"), std::string::npos) << typed.error().message;
}

// google/gemma-3-27b-it's config.json as published: text_config without vocabulary or context
// (Gemma3TextConfig's 262,208 and 131,072), vision_config without channels; 27,432,406,640
// parameters with the SigLIP tower and projector, the count on the model's page.
TEST(ModelConfig, GemmaThreeSparseTextConfigTakesTheClassDefaults) {
  auto m = parse(R"({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
                     "mm_tokens_per_image": 256, "torch_dtype": "bfloat16",
                     "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504,
                       "model_type": "gemma3_text", "num_attention_heads": 32, "num_hidden_layers": 62,
                       "num_key_value_heads": 16, "query_pre_attn_scalar": 168,
                       "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
                     "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                       "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                       "patch_size": 14, "vision_use_head": false}})");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->vocab_size, 262208u);
  EXPECT_EQ(m->max_position_embeddings, 131072u);
  EXPECT_EQ(m->total_params, 27432406640u);
  EXPECT_EQ(m->layer_is_sliding.size(), 62u);
  EXPECT_FALSE(m->layer_is_sliding[5]);   // every sixth layer is global
  EXPECT_TRUE(m->layer_is_sliding[4]);
}

// llava-hf/llava-v1.6-mistral-7b-hf as published: a Mistral text_config that leaves its shape to
// MistralConfig's defaults (vocabulary 32,064 given): 7,242,256,384; the CLIP tower and projector
// of LLaVA-1.5 (324,487,168) and LLaVA-NeXT's image_newline (4,096): 7,566,747,648 in all.
TEST(ModelConfig, LlavaNextWithAMistralTextConfig) {
  auto m = parse(R"({"model_type": "llava_next", "torch_dtype": "float16",
                     "text_config": {"_name_or_path": "mistralai/Mistral-7B-Instruct-v0.2",
                       "architectures": ["MistralForCausalLM"], "intermediate_size": 14336,
                       "max_position_embeddings": 32768, "model_type": "mistral", "num_key_value_heads": 8,
                       "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
                       "torch_dtype": "bfloat16", "vocab_size": 32064},
                     "vision_config": {"hidden_size": 1024, "image_size": 336, "intermediate_size": 4096,
                       "model_type": "clip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 24,
                       "patch_size": 14, "projection_dim": 768, "vocab_size": 32000}})");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->total_params, 7566747648u);
  EXPECT_EQ(m->max_position_embeddings, 32768u);
}

// Qwen/Qwen2-VL-7B-Instruct's config.json as first published: flat, the Qwen2 text keys at the
// top beside vision_config. Qwen2-7B's language model (7,615,616,512) and the tower: Conv3d
// 3x2x14x14x1280 (1,505,280), 32 blocks of LayerNorms 4x1280, qkv 1280x3840 + 3840, proj
// 1280x1280 + 1280, fc1 1280x5120 + 5120, fc2 5120x1280 + 1280 (19,677,440 each), and the
// PatchMerger: LayerNorm 2x1280, Linear 5120x5120 + 5120, Linear 5120x3584 + 3584 (44,575,744):
// 675,759,104; 8,291,375,616 in all, the Hub checkpoint's count.
TEST(ModelConfig, QwenTwoVlCountsItsTowerAndMerger) {
  auto m = parse(R"({"architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl",
                     "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
                     "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
                     "max_position_embeddings": 32768, "sliding_window": 32768, "use_sliding_window": false,
                     "tie_word_embeddings": false, "torch_dtype": "bfloat16", "rope_theta": 1000000.0,
                     "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
                     "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16,
                       "in_chans": 3, "hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2,
                       "temporal_patch_size": 2}})");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->model_type, "qwen2");
  EXPECT_TRUE(m->qkv_bias);
  EXPECT_FALSE(m->attn_out_bias);
  EXPECT_EQ(m->extra_params, 1505280u + 32 * 19677440u + 44575744u);
  EXPECT_EQ(m->extra_params, 675759104u);
  EXPECT_EQ(m->total_params, 8291375616u);
  // mrope splits the rotary positions over time, height and width: no context scaling.
  EXPECT_EQ(m->rope_scaling_type, "");
  EXPECT_EQ(m->rope_scaling_factor, 1.0);
  EXPECT_NE(std::find(m->notes.begin(), m->notes.end(),
                      "rope_scaling with mrope_section: multimodal rotary positions (time, height, width), no "
                      "context scaling"), m->notes.end());
  EXPECT_EQ(m->notes.back(), "vision tower (Qwen2-VL, 32 blocks) and projector counted: 675,759,104 params; trained "
                             "with the rest by train_full, frozen under LoRA (not a LoRA target); images are not "
                             "sized (batches taken as text, no image-token activations)");
}

// Qwen/Qwen2.5-VL-7B-Instruct's config.json as republished by transformers 4.49: vision_config
// keeps only what differs from Qwen2_5_VLVisionConfig (hidden_size 1280 against the class's
// 3584), rope_scaling rewritten to "default". Tower: Conv3d 1,505,280, 32 blocks of RMSNorms
// 2x1280, qkv and proj (6,558,720), gate/up/down of 3420 with biases (13,140,920): 19,702,200
// each (torchinfo's count for a Qwen2_5_VLVisionBlock); merger RMSNorm 1280, Linear 5120x5120 +
// 5120, Linear 5120x3584 + 3584 (44,574,464):
// 676,550,144, the count a Qwen2.5-VL fine-tuning script prints for model.visual; 8,292,166,656
// in all, the Hub's count.
TEST(ModelConfig, QwenTwoPointFiveVlSparseVisionConfigTakesTheClassDefaults) {
  auto m = parse(R"({"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
                     "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
                     "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
                     "max_position_embeddings": 128000, "sliding_window": 32768, "use_sliding_window": false,
                     "tie_word_embeddings": false, "torch_dtype": "bfloat16",
                     "rope_scaling": {"mrope_section": [16, 24, 24], "rope_type": "default", "type": "default"},
                     "vision_config": {"hidden_size": 1280, "in_chans": 3, "model_type": "qwen2_5_vl",
                       "spatial_patch_size": 14, "tokens_per_second": 2, "torch_dtype": "bfloat16"}})");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->extra_params, 1505280u + 32 * 19702200u + 44574464u);
  EXPECT_EQ(m->extra_params, 676550144u);
  EXPECT_EQ(m->total_params, 8292166656u);
  EXPECT_EQ(m->total_params - m->extra_params, 7615616512u);  // what is left with the tower frozen
  EXPECT_EQ(m->rope_scaling_type, "");
  EXPECT_EQ(m->max_position_embeddings, 128000u);
}

// The nested layout later transformers write: the language model in a text_config without its
// model_type (Qwen2_5_VLTextConfig's own, whose defaults fill what it leaves out) and the
// vision_config without its own. Qwen2.5-VL-3B's shape: a tied output head, 3,754,622,976.
TEST(ModelConfig, QwenVlNestedTextConfigTakesItsClassDefaults) {
  auto m = parse(R"({"model_type": "qwen2_5_vl", "tie_word_embeddings": true, "torch_dtype": "bfloat16",
                     "text_config": {"hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
                       "num_attention_heads": 16, "num_key_value_heads": 2, "vocab_size": 151936,
                       "max_position_embeddings": 128000},
                     "vision_config": {"hidden_size": 1280, "out_hidden_size": 2048}})");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->model_type, "qwen2");
  EXPECT_TRUE(m->tie_word_embeddings);
  EXPECT_EQ(m->total_params, 3754622976u);
  // Every key left out: Qwen2_5_VLTextConfig's 72B-like defaults and the tower's own.
  auto defaults = parse(R"({"model_type": "qwen2_5_vl", "text_config": {}, "vision_config": {}})");
  ASSERT_TRUE(defaults) << defaults.error().message;
  EXPECT_EQ(defaults->hidden_size, 8192u);
  EXPECT_EQ(defaults->num_layers, 80u);
  EXPECT_EQ(defaults->vocab_size, 152064u);
}

// meta-llama/Llama-3.2-11B-Vision's config.json. Language model: 40 Llama decoder layers of
// 218,112,000 (8 of them MllamaCrossAttentionDecoderLayer, each with a q_norm and k_norm of 128
// and two gates: 258 more), embed_tokens of 128,264 rows, untied head, final norm: 9,775,192,080.
// Tower at 560 px (1,601 positions, 4 tiles, 8 aspect ratios): patch conv 752,640, class
// embedding 1,280, gated positions 1 + 2,049,280 + 73,774,080, pre/post tile embeddings
// 2 x 46,081, LayerNorms 5,120, 32 local blocks of 19,672,320 and 8 gated global blocks:
// 863,567,379. Projector 7680x4096 + 4096: 31,461,376. 10,670,220,835 in all, the Hub's count.
TEST(ModelConfig, MllamaCountsCrossAttentionLayersTowerAndProjector) {
  auto m = parse(R"({"architectures": ["MllamaForConditionalGeneration"], "model_type": "mllama",
                     "torch_dtype": "bfloat16",
                     "text_config": {"model_type": "mllama_text_model", "vocab_size": 128256, "hidden_size": 4096,
                       "intermediate_size": 14336, "num_hidden_layers": 40, "num_attention_heads": 32,
                       "num_key_value_heads": 8, "max_position_embeddings": 131072, "rope_theta": 500000.0,
                       "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
                       "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38], "tie_word_embeddings": false},
                     "vision_config": {"model_type": "mllama_vision_model", "hidden_size": 1280,
                       "intermediate_size": 5120, "num_hidden_layers": 32, "num_global_layers": 8,
                       "attention_heads": 16, "image_size": 560, "patch_size": 14, "num_channels": 3,
                       "max_num_tiles": 4, "vision_output_dim": 7680,
                       "supported_aspect_ratios": [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]]}})");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->model_type, "llama");
  EXPECT_EQ(m->num_layers, 40u);
  EXPECT_EQ(m->rope_scaling_type, "llama3");
  const uint64_t cross_extras = 8 * (2 * 128 + 2) + 8 * 4096;
  const uint64_t tower = 752640 + 1280 + (1 + 2049280 + 73774080) + 2 * 46081 + 5120 + 32 * 19672320ull +
                         8 * (19672320ull + 2);
  EXPECT_EQ(tower, 863567379u);
  EXPECT_EQ(m->extra_params, cross_extras + tower + 31461376u);
  EXPECT_EQ(m->total_params, 10670220835u);
  EXPECT_EQ(m->total_params - m->extra_params + cross_extras, 9775192080u);
  EXPECT_NE(std::find(m->notes.begin(), m->notes.end(),
                      "Mllama: 8 of the 40 decoder layers are cross-attention layers, counted as decoder blocks for "
                      "activations and the KV cache (they run on every text token when the batch has an image; "
                      "transformers skips them without one, and 32 blocks run)"), m->notes.end());
  EXPECT_EQ(m->notes.back(), "vision tower (Mllama, 40 blocks) and projector counted: 895,028,755 params; trained "
                             "with the rest by train_full, frozen under LoRA (not a LoRA target); images are not "
                             "sized (batches taken as text, no image-token activations)");
  // The defaults of MllamaTextConfig and MllamaVisionConfig (448 px tiles) where keys are left out.
  auto sparse = parse(R"({"model_type": "mllama", "text_config": {}, "vision_config": {"image_size": 560}})");
  ASSERT_TRUE(sparse) << sparse.error().message;
  EXPECT_EQ(sparse->total_params, 10670220835u);
}

// Hostile or contradictory vision configs are errors naming the key, never a wrapped count.
TEST(ModelConfig, QwenAndMllamaTowerErrorsNameTheKey) {
  const std::string qwen_text = R"("model_type": "qwen2_vl", "vocab_size": 100, "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128)";
  auto expect_error = [&](const std::string& json, const std::string& message) {
    auto m = parse(json);
    ASSERT_FALSE(m) << json;
    EXPECT_NE(m.error().message.find(message), std::string::npos) << m.error().message;
  };
  expect_error("{" + qwen_text + R"(, "vision_config": {"spatial_merge_size": 0}})",
               "config.json: vision_config: the tower's width, patch_size, temporal_patch_size and "
               "spatial_merge_size must not be 0");
  expect_error("{" + qwen_text + R"(, "vision_config": {"mlp_ratio": -1}})",
               "config.json: vision_config: mlp_ratio -1 must be above 0 and at most 64");
  expect_error("{" + qwen_text + R"(, "vision_config": {"depth": 100000}})",
               "config.json: vision_config: depth 100000 is implausibly large (limit 4096)");
  expect_error("{" + qwen_text + R"(, "vision_config": {"embed_dim": "wide"}})",
               "config.json: \"vision_config.embed_dim\" must be a non-negative integer, got \"wide\"");
  const std::string mllama_text = R"("model_type": "mllama", "text_config": {"vocab_size": 100,
      "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4,
      "intermediate_size": 128)";
  expect_error("{" + mllama_text + R"(, "cross_attention_layers": [1, 4]}, "vision_config": {}})",
               "config.json: \"cross_attention_layers\" holds 4, not a layer index below num_hidden_layers 4");
  // Repeated indices are one layer; a layer count far too large is refused by the shape check,
  // never allocated for.
  auto repeated = parse("{" + mllama_text + R"(, "cross_attention_layers": [1, 1, 2]}, "vision_config": {}})");
  ASSERT_TRUE(repeated) << repeated.error().message;
  EXPECT_EQ(repeated->notes.front().rfind("Mllama: 2 of the 4 decoder layers", 0), 0u) << repeated->notes.front();
  expect_error(R"({"model_type": "mllama", "text_config": {"num_hidden_layers": 1000000000000,
                 "cross_attention_layers": [999999999999]}, "vision_config": {}})",
               "config.json: number of layers 1000000000000 is implausibly large (limit 4096)");
  expect_error("{" + mllama_text + R"(, "cross_attention_layers": 3}, "vision_config": {}})",
               "config.json: \"cross_attention_layers\" must be a list of layer indices, got number");
  expect_error("{" + mllama_text + R"(, "cross_attention_layers": [1]}, "vision_config": {"max_num_tiles": 6}})",
               "config.json: vision_config: max_num_tiles 6 needs supported_aspect_ratios (the default list is for "
               "4 tiles)");
  expect_error("{" + mllama_text + R"(, "cross_attention_layers": [1]}, "vision_config": {"patch_size": 0}})",
               "config.json: vision_config: image_size 448 and patch_size 0 give no patches");
}

TEST(ModelConfig, DeepSeekMultiLatentAttention) {
  auto m = parse(R"({"model_type": "deepseek_v2", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128,
                     "q_lora_rank": null, "kv_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16,
                     "v_head_dim": 16, "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2,
                     "moe_intermediate_size": 32, "first_k_dense_replace": 1})");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->attention, AttentionKind::kMultiLatent);
  EXPECT_EQ(m->kv_lora_rank, 32u);
  EXPECT_EQ(m->num_experts, 4u);
  // Attention: q_proj 64x(4*24), kv_a 64x40, kv_b 32x(4*32), o 64x64; norms 2x64 + kv norm 32.
  const uint64_t attn = 64 * 96 + 64 * 40 + 32 * 128 + 64 * 64 + 2 * 64 + 32;
  const uint64_t dense_mlp = 3 * 64 * 128;
  const uint64_t moe = 4 * 3 * 64 * 32 + 3 * 64 * 32 + 64 * 4;  // experts + shared + router
  EXPECT_EQ(m->total_params, 2 * attn + dense_mlp + moe + 64 + 2 * 100 * 64);
}

TEST(ModelConfig, QuantizationConfig) {
  auto m = parse(R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 1,
                     "num_attention_heads": 2, "intermediate_size": 128,
                     "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}})");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->quantization, "gptq");
  EXPECT_EQ(m->quantization_bits, 4u);
  EXPECT_EQ(m->quantization_group_size, 128u);
  auto bnb = parse(R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 1,
                       "num_attention_heads": 2, "intermediate_size": 128,
                       "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true}})");
  ASSERT_TRUE(bnb);
  EXPECT_EQ(bnb->quantization_bits, 4u);
  EXPECT_FALSE(bnb->quantization_double_quant);
  auto nested = parse(R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 1,
                          "num_attention_heads": 2, "intermediate_size": 128,
                          "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true,
                                                  "bnb_4bit_use_double_quant": true}})");
  ASSERT_TRUE(nested);
  EXPECT_TRUE(nested->quantization_double_quant);
}

// Every width a format packs is read (GPTQ's 2, 3, 4 or 8 bits; torchao's weight-only int4/int8);
// an impossible width is an error; a format oomdoc cannot size is said to be counted at 16 bits.
TEST(ModelConfig, QuantizationWidthsAndFormatsNotSized) {
  const std::string base = R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 1,
                              "num_attention_heads": 2, "intermediate_size": 128, "quantization_config": )";
  auto three = parse(base + R"({"quant_method": "gptq", "bits": 3, "group_size": 128}})");
  ASSERT_TRUE(three) << three.error().message;
  EXPECT_EQ(three->quantization_bits, 3u);
  auto zero = parse(base + R"({"quant_method": "gptq", "bits": 0}})");
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().message, "config.json: quantization_config.bits: GPTQ packs 2, 3, 4 or 8 bits (got 0)");
  auto torchao = parse(base + R"({"quant_method": "torchao", "quant_type": "int4_weight_only",
                                  "quant_type_kwargs": {"group_size": 64}}})");
  ASSERT_TRUE(torchao) << torchao.error().message;
  EXPECT_EQ(torchao->quantization_bits, 4u);
  EXPECT_EQ(torchao->quantization_group_size, 64u);
  auto serialized = parse(base + R"({"quant_method": "torchao", "quant_type": {"default": {"_type": "Int8WeightOnlyConfig",
                                                                                          "_data": {}}}}})");
  ASSERT_TRUE(serialized) << serialized.error().message;
  EXPECT_EQ(serialized->quantization_bits, 8u);
  auto awq = parse(base + R"({"quant_method": "awq", "w_bit": 4, "q_group_size": 128}})");   // AutoAWQ's names
  ASSERT_TRUE(awq) << awq.error().message;
  EXPECT_EQ(awq->quantization_bits, 4u);
  auto awq8 = parse(base + R"({"quant_method": "awq", "bits": 8}})");
  ASSERT_FALSE(awq8);
  EXPECT_EQ(awq8.error().message, "config.json: quantization_config.bits: AWQ packs 4 bits (got 8)");
  auto hqq = parse(base + R"({"quant_method": "hqq", "nbits": 4}})");
  ASSERT_TRUE(hqq) << hqq.error().message;
  EXPECT_EQ(hqq->quantization_bits, 0u);
  ASSERT_EQ(hqq->notes.size(), 1u);
  EXPECT_EQ(hqq->notes[0], "quantization_config quant_method \"hqq\" is not sized: its weights are counted at the model's "
                           "16 bits, an upper bound");
}

// Qwen2-MoE's shared-expert gate is an nn.Linear(hidden, 1): PEFT's all-linear adapts it, as it
// does the router (r x (64 + 1) more per MoE layer here), and naming it adapts it alone.
TEST(ModelConfig, Qwen2MoeSharedExpertGateTakesLora) {
  auto m = parse(R"({"model_type": "qwen2_moe", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128,
                     "moe_intermediate_size": 32, "shared_expert_intermediate_size": 96, "num_experts": 4,
                     "num_experts_per_tok": 2})");
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_TRUE(m->shared_expert_gate);
  LoraSettings gate;
  gate.r = 8;
  gate.target_modules = {"mlp.shared_expert_gate"};
  EXPECT_EQ(lora_parameter_count(*m, gate), 2u * 8 * (64 + 1));
  LoraSettings all;
  all.r = 8;
  all.all_linear = true;
  LoraSettings all_but_gate = all;
  m->shared_expert_gate = false;
  const uint64_t without = lora_parameter_count(*m, all_but_gate);
  m->shared_expert_gate = true;
  EXPECT_EQ(lora_parameter_count(*m, all), without + 2u * 8 * (64 + 1));
}

TEST(ModelConfig, UnknownArchitectureSaysWhatIsMissing) {
  auto m = parse(R"({"model_type": "mamba2", "hidden_size": 64})");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("config.json: unknown model_type \"mamba2\" (known: "), std::string::npos);
  // Which flag could stand in depends on the command (only estimate has --params): cli/cmd_estimate.cpp.
  EXPECT_EQ(m.error().message.find("--params"), std::string::npos);
}

TEST(ModelConfig, ContradictoryAndMissingFieldsAreErrors) {
  auto heads = parse(R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 1,
                         "num_attention_heads": 6, "num_key_value_heads": 4, "intermediate_size": 128})");
  ASSERT_FALSE(heads);
  EXPECT_EQ(heads.error().message, "config.json: num_attention_heads 6 is not a multiple of num_key_value_heads 4");
  auto width = parse(R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 100, "num_hidden_layers": 1,
                         "num_attention_heads": 3, "intermediate_size": 128})");
  ASSERT_FALSE(width);
  EXPECT_EQ(width.error().message,
            "config.json: hidden_size 100 is not a multiple of num_attention_heads 3 and no head_dim is given");
  auto experts = parse(R"({"model_type": "mixtral", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 1,
                           "num_attention_heads": 2, "intermediate_size": 128, "num_local_experts": 2,
                           "num_experts_per_tok": 3})");
  ASSERT_FALSE(experts);
  EXPECT_EQ(experts.error().message, "config.json: num_experts_per_tok 3 must be between 1 and the 2 experts");
  auto missing = parse(R"({"model_type": "llama", "vocab_size": 100, "num_hidden_layers": 1})");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "config.json: missing \"hidden_size\"");
  auto negative = parse(R"({"model_type": "llama", "vocab_size": -5, "hidden_size": 64, "num_hidden_layers": 1,
                            "num_attention_heads": 2, "intermediate_size": 128})");
  ASSERT_FALSE(negative);
  EXPECT_EQ(negative.error().message, "config.json: \"vocab_size\" must be a non-negative integer, got -5");
  EXPECT_EQ(parse("{not json").error().message,
            "config.json: invalid JSON: line 1, column 3: syntax error while parsing object key - invalid literal; last "
            "read: '{no'; expected string literal");
  EXPECT_EQ(parse("[1]").error().message, "config.json: expected a JSON object");
  EXPECT_EQ(parse("{}").error().message, "config.json: no \"model_type\"; not a Hugging Face model config");
}

TEST(ModelConfig, EveryListedModelTypeIsKnown) {
  EXPECT_GE(supported_model_types().size(), 29u);
}

TEST(ModelConfig, ImplausibleSizesAreErrorsNotWrappedCounts) {
  auto m = parse_model_config(R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 4294967296,
    "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 1})", "config.json");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message, "config.json: hidden_size 4294967296 is implausibly large (limit 262144)");
}

// A small DeBERTa-v2 with one key replaced: every key is read with its type checked.
Result<ModelSpec> deberta_with(const std::string& key_and_value) {
  return parse_model_config(R"({"model_type": "deberta-v2", "vocab_size": 128, "hidden_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 256,
    "max_position_embeddings": 64, "type_vocab_size": 0, "position_biased_input": false,
    "relative_attention": true, "position_buckets": 0, "norm_rel_ebd": "layer_norm", "share_att_key": true,
    "pos_att_type": "p2c|c2p", "hidden_act": "gelu", )" + key_and_value + "}", "config.json");
}

TEST(ModelConfig, MistypedKeysAreErrorsNamingFileAndKey) {
  auto number = deberta_with(R"("max_relative_positions": 32)");
  ASSERT_TRUE(number) << number.error().message;
  EXPECT_EQ(number->relative_attention_span, 32u);
  auto minus_one = deberta_with(R"("max_relative_positions": -1)");   // "use max_position_embeddings"
  ASSERT_TRUE(minus_one) << minus_one.error().message;
  EXPECT_EQ(minus_one->relative_attention_span, 64u);

  auto text = deberta_with(R"("max_relative_positions": "512")");   // was an uncaught type_error
  ASSERT_FALSE(text);
  EXPECT_EQ(text.error().message, R"(config.json: "max_relative_positions" must be an integer, got "512")");
  auto huge = deberta_with(R"("max_relative_positions": 18446744073709551615)");
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().message,
            R"(config.json: "max_relative_positions" must be an integer, got 18446744073709551615)");
  auto flag = deberta_with(R"("share_att_key": "yes")");
  ASSERT_FALSE(flag);
  EXPECT_EQ(flag.error().message, R"(config.json: "share_att_key" must be true or false, got "yes")");
  auto act = deberta_with(R"("conv_act": 5, "conv_kernel_size": 3)");
  ASSERT_FALSE(act);
  EXPECT_EQ(act.error().message, R"(config.json: "conv_act" must be a string, got 5)");
  auto dropout = deberta_with(R"("hidden_dropout_prob": [0.1])");
  ASSERT_FALSE(dropout);
  EXPECT_EQ(dropout.error().message, R"(config.json: "hidden_dropout_prob" must be a number, got [0.1])");
  auto pos_att = deberta_with(R"("pos_att_type": 3)");
  ASSERT_FALSE(pos_att);
  EXPECT_EQ(pos_att.error().message, R"(config.json: "pos_att_type" must be a string or a list, got number)");
  auto model_type = parse_model_config(R"({"model_type": 7, "vocab_size": 1})", "config.json");
  ASSERT_FALSE(model_type);
  EXPECT_EQ(model_type.error().message, R"(config.json: "model_type" must be a string, got 7)");
  // A multimodal wrapper whose top-level model_type is not a string (was an uncaught type_error).
  auto wrapper = parse_model_config(R"({"model_type": 7, "text_config": {"vocab_size": 1}})", "config.json");
  ASSERT_FALSE(wrapper);
  EXPECT_EQ(wrapper.error().message, R"(config.json: no "model_type"; not a Hugging Face model config)");
}

// transformers' AutoQuantizationConfig.from_dict: a config without quant_method is bitsandbytes
// when it sets load_in_4bit/8bit (saved before quant_method existed), else refused; both at once
// is refused by BitsAndBytesConfig. bnb_4bit_quant_type "fp4" is kept; GPTQ's group_size -1 is
// per output channel.
TEST(ModelConfig, QuantizationConfigAsTransformersReadsIt) {
  const std::string base = R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "intermediate_size": 128, "quantization_config": )";
  auto old_bnb = parse_model_config(base + R"({"load_in_4bit": true, "bnb_4bit_quant_type": "fp4"}})", "config.json");
  ASSERT_TRUE(old_bnb) << old_bnb.error().message;
  EXPECT_EQ(old_bnb->quantization, "bitsandbytes");
  EXPECT_EQ(old_bnb->quantization_bits, 4u);
  EXPECT_TRUE(old_bnb->quantization_fp4);
  auto old_int8 = parse_model_config(base + R"({"load_in_8bit": true}})", "config.json");
  ASSERT_TRUE(old_int8) << old_int8.error().message;
  EXPECT_EQ(old_int8->quantization_bits, 8u);
  auto no_method = parse_model_config(base + R"({"bits": 4}})", "config.json");
  ASSERT_FALSE(no_method);
  EXPECT_EQ(no_method.error().message,
            R"(config.json: "quantization_config" has no "quant_method" (nor load_in_4bit or load_in_8bit): transformers refuses it as not correctly quantized)");
  auto both = parse_model_config(base + R"({"quant_method": "bitsandbytes", "load_in_4bit": true, "load_in_8bit": true}})",
                                 "config.json");
  ASSERT_FALSE(both);
  EXPECT_EQ(both.error().message,
            R"(config.json: "quantization_config" sets both load_in_4bit and load_in_8bit; bitsandbytes uses one (BitsAndBytesConfig refuses both))");
  auto per_channel = parse_model_config(base + R"({"quant_method": "gptq", "bits": 4, "group_size": -1}})", "config.json");
  ASSERT_TRUE(per_channel) << per_channel.error().message;
  EXPECT_TRUE(per_channel->quantization_per_channel);
  EXPECT_EQ(per_channel->quantization_group_size, 0u);
}

TEST(ModelConfig, QuantizationConfigKeysAreTypeChecked) {
  const std::string base = R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 128, "quantization_config": )";
  auto gptq = parse_model_config(base + R"({"quant_method": "gptq", "bits": 4, "group_size": -1}})", "config.json");
  ASSERT_TRUE(gptq) << gptq.error().message;
  EXPECT_EQ(gptq->quantization_bits, 4u);
  EXPECT_EQ(gptq->quantization_group_size, 0u);   // -1: one group per column
  auto bits = parse_model_config(base + R"({"quant_method": "gptq", "bits": "4"}})", "config.json");
  ASSERT_FALSE(bits);
  EXPECT_EQ(bits.error().message, R"(config.json: "quantization_config.bits" must be a non-negative integer, got "4")");
  auto method = parse_model_config(base + R"({"quant_method": 4}})", "config.json");
  ASSERT_FALSE(method);
  EXPECT_EQ(method.error().message, R"(config.json: "quantization_config.quant_method" must be a string, got 4)");
  auto nested = parse_model_config(base + R"({"quant_method": "compressed-tensors", "config_groups":
    {"group_0": {"weights": {"num_bits": 4, "group_size": "128"}}}}})", "config.json");
  ASSERT_FALSE(nested);
  EXPECT_EQ(nested.error().message,
            R"(config.json: "quantization_config.config_groups.group_0.weights.group_size" must be an integer, got "128")");
  auto not_object = parse_model_config(base + R"("gptq"})", "config.json");
  ASSERT_FALSE(not_object);
  EXPECT_EQ(not_object.error().message, R"(config.json: "quantization_config" must be an object, got string)");
}

// A reward model saved as LlamaForSequenceClassification (Skywork-Reward-Llama-3.1-8B's config
// shape): the score Linear of hidden x len(id2label) replaces the LM head.
TEST(ModelConfigQa5, SequenceClassificationCheckpointsCarryAScoreHead) {
  const std::string body = R"("model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
      "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
      "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "tie_word_embeddings": false)";
  auto causal = parse_model_config("{\"architectures\": [\"LlamaForCausalLM\"], " + body + "}", "config.json");
  ASSERT_TRUE(causal) << causal.error().message;
  EXPECT_EQ(causal->total_params, 8030261248u);
  EXPECT_EQ(causal->score_labels, 0u);
  auto reward = parse_model_config("{\"architectures\": [\"LlamaForSequenceClassification\"], "
                                   "\"id2label\": {\"0\": \"LABEL_0\"}, " + body + "}", "config.json");
  ASSERT_TRUE(reward) << reward.error().message;
  EXPECT_EQ(reward->score_labels, 1u);
  EXPECT_EQ(reward->total_params, 8030261248u - 128256u * 4096u + 4096u);
  // Without id2label, transformers' num_labels is 2.
  auto pair = parse_model_config("{\"architectures\": [\"LlamaForSequenceClassification\"], " + body + "}",
                                 "config.json");
  ASSERT_TRUE(pair) << pair.error().message;
  EXPECT_EQ(pair->score_labels, 2u);
}

// An encoder's classification head only adds parameters (QA round 8: bert-base with 3 labels was
// counted without its classifier): BERT's biased Linear after the pooler, RoBERTa's two-Linear
// head in place of its pooler (the same count), DeBERTa-v2's ContextPooler and classifier.
TEST(ModelConfigQa8, EncoderClassificationHeadsAreCounted) {
  const std::string bert = R"("model_type": "bert", "hidden_size": 768, "intermediate_size": 3072,
      "num_hidden_layers": 12, "num_attention_heads": 12, "vocab_size": 30522, "max_position_embeddings": 512,
      "type_vocab_size": 2)";
  auto base = parse_model_config("{\"architectures\": [\"BertForMaskedLM\"], " + bert + "}", "config.json");
  ASSERT_TRUE(base) << base.error().message;
  EXPECT_EQ(base->total_params, 109482240u);
  auto three = parse_model_config("{\"architectures\": [\"BertForSequenceClassification\"], \"id2label\": "
                                  "{\"0\": \"NEG\", \"1\": \"POS\", \"2\": \"NEU\"}, " + bert + "}",
                                  "config.json");
  ASSERT_TRUE(three) << three.error().message;
  EXPECT_EQ(three->total_params, 109482240u + 768u * 3 + 3);
  EXPECT_EQ(three->score_labels, 0u);   // no vocabulary head to replace
  const std::string deberta = R"("model_type": "deberta-v2", "hidden_size": 1536, "intermediate_size": 6144,
      "num_hidden_layers": 24, "num_attention_heads": 24, "vocab_size": 128100, "max_position_embeddings": 512,
      "type_vocab_size": 0, "relative_attention": true, "position_buckets": 256, "norm_rel_ebd": "layer_norm",
      "share_att_key": true, "pos_att_type": "p2c|c2p", "position_biased_input": false,
      "max_relative_positions": -1)";
  auto deberta_base = parse_model_config("{" + deberta + "}", "config.json");
  auto nli = parse_model_config("{\"architectures\": [\"DebertaV2ForSequenceClassification\"], \"id2label\": "
                                "{\"0\": \"C\", \"1\": \"N\", \"2\": \"E\"}, " + deberta + "}", "config.json");
  ASSERT_TRUE(deberta_base) << deberta_base.error().message;
  ASSERT_TRUE(nli) << nli.error().message;
  EXPECT_EQ(nli->total_params - deberta_base->total_params, 1536u * 1536 + 1536 + 1536u * 3 + 3);
}

}  // namespace
}  // namespace oomdoc
