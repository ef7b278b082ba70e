#include "readers/model_config.h"

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace oomdoc {
namespace {

Result<ModelSpec> parse(const std::string& json) { return parse_model_config(json, "config.json"); }

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
                     "vision_config": {"model_type": "qwen2_vl"}})");
  ASSERT_TRUE(other) << other.error().message;
  EXPECT_EQ(other->extra_params, 0u);
  ASSERT_FALSE(other->notes.empty());
  EXPECT_EQ(other->notes.back(), "vision tower \"qwen2_vl\" not counted (SigLIP and CLIP towers are): the parameter "
                                 "count is the language model's");
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
  EXPECT_EQ(parse("{not json").error().message, "config.json: not valid JSON");
  EXPECT_EQ(parse("[1]").error().message, "config.json: expected a JSON object");
  EXPECT_EQ(parse("{}").error().message, "config.json: no \"model_type\"; not a Hugging Face model config");
}

TEST(ModelConfig, EveryListedModelTypeIsKnown) {
  EXPECT_GE(supported_model_types().size(), 29u);
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

TEST(ModelConfig, ImplausibleSizesAreErrorsNotWrappedCounts) {
  auto m = parse_model_config(R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 4294967296,
    "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 1})", "config.json");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message, "config.json: hidden_size 4294967296 is implausibly large (limit 262144)");
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

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

}  // namespace
}  // namespace oomdoc
