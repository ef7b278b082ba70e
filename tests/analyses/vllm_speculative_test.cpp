// Speculative decoding in `oomdoc serve` (analyses/vllm_speculative.cpp): the drafter's weights,
// its KV cache per token, the rejection sampler's dummy run, and what vLLM refuses. Every expected
// value is worked out in the comment above it.
#include "analyses/vllm_speculative.h"

#include <gtest/gtest.h>

#include "analyses/vllm_serve.h"
#include "core/units.h"
#include "readers/gpu_catalog.h"
#include "readers/model_resolver.h"
#include "readers/served_model.h"
#include "readers/vllm_args.h"
#include "support/test_support.h"
#include "vllm_serve_test_support.h"

namespace oomdoc {
namespace {

using serve_test::inputs;
using serve_test::predict;

ServeInputs on_h100(const std::vector<std::string>& command, const std::string& version = "") {
  ServeInputs in = inputs(command, 80 * kGiB, version);
  in.target = serve_target(find_gpu("h100").value());
  return in;
}

// The draft resolved as the CLI resolves it (readers/served_model.h: draft_vocab_size too).
void with_draft(ServeInputs& in, const std::string& draft) {
  auto model = resolve_served_model(draft);
  ASSERT_TRUE(model.ok()) << model.error().message;
  in.draft_model = model->spec;
  in.draft_vocab_size = model->draft_vocab_size;
}

// The target's num_nextn_predict_layers, as the CLI reads it.
void with_mtp_layers(ServeInputs& in) {
  auto model = resolve_served_model(in.config.model);
  ASSERT_TRUE(model.ok()) << model.error().message;
  in.mtp_layers = model->mtp_layers;
}

Result<ServePrediction> try_predict(const ServeInputs& in) { return predict_vllm_startup(in); }

TEST(VllmSpeculative, MethodAsVllmDetectsIt) {
  auto method = [](const std::vector<std::string>& flags) {
    std::vector<std::string> command = {"vllm", "serve", "llama-3.1-8b"};
    command.insert(command.end(), flags.begin(), flags.end());
    auto config = parse_vllm_command_line(command);
    EXPECT_TRUE(config.ok()) << config.error().message;
    auto choice = speculative_choice(config.value());
    return choice ? choice->method : std::string("none");
  };
  EXPECT_EQ(method({}), "none");
  EXPECT_EQ(method({"--speculative-config", R"({"model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3})"}), "eagle");
  EXPECT_EQ(method({"--speculative-config", R"({"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3})"}), "eagle3");
  EXPECT_EQ(method({"--speculative-config", R"({"model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 5})"}), "draft_model");
  EXPECT_EQ(method({"--speculative-config", R"({"model": "[ngram]", "num_speculative_tokens": 5})"}), "ngram");
  EXPECT_EQ(method({"--speculative-config", R"({"method": "deepseek_mtp", "num_speculative_tokens": 1})"}), "mtp");
  EXPECT_EQ(method({"--speculative-model", "meta-llama/Llama-3.2-1B", "--num-speculative-tokens", "5"}), "draft_model");
}

// Llama-3.1-70B at TP 4 drafted by Llama-3.2-1B on H100s. The draft is split 4 ways like the target
// (draft_tensor_parallel_size defaults to the target's).
// Draft weights per GPU (Llama-3.2-1B: 16 layers, hidden 2048, 32 heads, 8 KV heads of 64,
// intermediate 8192, vocabulary 128,256, tied embeddings):
//   per layer q 2048x2048 + k, v 2048x512 x 2 + o 2048x2048 + MLP 3 x 2048x8192 = 60,817,408 Linear
//   16 layers: 973,078,528 Linear / 4 x 2 B                           = 486,539,264
//   norms 2 x 2048 x 16 x 2 B                                         =     131,072
//   embedding (also the head) 128,256 x 2048 / 4 x 2 B                = 131,334,144
//   final norm 2048 x 2 B                                             =       4,096
//   rotary cache 131,072 positions x 64 x 2 B (not the target's: 128) =  16,777,216
//   total                                                             = 634,785,792
// KV per token per GPU: target 2 x 80 layers x 2 KV heads x 128 x 2 B = 81,920; draft 2 x 16 x 2 x
// 64 x 2 B = 8,192; 90,112 in all. The pages differ (16,384 and 8,192 B per layer), so one block
// is 80 x 16,384 + 16 x 8,192 = 1,441,792 B (vLLM's UniformTypeKVCacheSpecs: one group, the
// layers' pages summed).
constexpr uint64_t kLlama32_1bDraftTp4 = 634785792;

TEST(VllmSpeculative, DraftModelAddsItsWeightsAndKvToEveryGpu) {
  const std::vector<std::string> base = {"vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "-tp", "4",
                                         "--max-model-len", "8192", "--kv-cache-memory-bytes", "10G"};
  ServeInputs plain_in = on_h100(base);
  std::vector<std::string> spec_command = base;
  spec_command.insert(spec_command.end(), {"--speculative-config",
                                           R"({"model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 5})"});
  ServeInputs in = on_h100(spec_command);
  with_draft(in, "meta-llama/Llama-3.2-1B-Instruct");
  const ServePrediction plain = predict(plain_in);
  const ServePrediction p = predict(in);
  ASSERT_TRUE(p.speculative.has_value());
  const SpeculativeSizing& z = *p.speculative;
  EXPECT_EQ(z.method, "draft_model");
  EXPECT_EQ(z.draft_tensor_parallel_size, 4u);
  EXPECT_EQ(z.num_speculative_tokens, 5u);
  EXPECT_FALSE(z.shares_embedding);
  EXPECT_EQ(z.weights_bytes, kLlama32_1bDraftTp4);
  EXPECT_EQ(p.weights.bytes, plain.weights.bytes + kLlama32_1bDraftTp4);
  EXPECT_EQ(z.kv.bytes_per_token, 8192u);
  EXPECT_EQ(plain.kv.bytes_per_token, 81920u);
  EXPECT_EQ(p.kv.bytes_per_token, 90112u);
  EXPECT_EQ(p.kv.extra_page_bytes, 16u * 8192);
  // 10G (10 GiB) of KV cache: 10,737,418,240 / 1,310,720 = 8,192 blocks (131,072 tokens) without the
  // draft; / 1,441,792 = 7,447 blocks (119,152 tokens) with it. A request of 8,192 tokens takes
  // 512 blocks: 16.00x and 7,447 / 512 = 14.54x.
  EXPECT_EQ(plain.capacity.num_blocks, 8192u);
  EXPECT_EQ(p.capacity.num_blocks, 7447u);
  EXPECT_EQ(p.capacity.tokens, 119152u);
  EXPECT_DOUBLE_EQ(p.capacity.max_concurrency, 7447.0 / 512.0);
  EXPECT_EQ(p.capacity.bytes, 7447ull * 1441792);
}

// From the profiled budget: the draft's weights and the rejection sampler's dummy run come out of
// the KV cache. H100, current vLLM: 1024 sequences (>= 70 GiB), so the sampler's dummy rows are
// 1024 x 128,256 logits; the rejection sampler holds 2 x 2 B more per logit beside the sampler's
// peak: 1024 x 128,256 x 4 = 525,336,576 B, when the sampler (not the forward pass) is the peak.
TEST(VllmSpeculative, DraftWeightsAndSamplerComeOutOfTheKvCache) {
  const std::vector<std::string> base = {"vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "-tp", "4",
                                         "--max-model-len", "32768"};
  std::vector<std::string> spec_command = base;
  spec_command.insert(spec_command.end(), {"--speculative-config",
                                           R"({"model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 5})"});
  ServeInputs in = on_h100(spec_command);
  with_draft(in, "meta-llama/Llama-3.2-1B-Instruct");
  const ServePrediction plain = predict(on_h100(base));
  const ServePrediction p = predict(in);
  EXPECT_EQ(p.activation.bytes, plain.activation.bytes + 1024ull * 128256 * 4);
  EXPECT_EQ(p.available_kv_bytes,
            plain.available_kv_bytes - static_cast<int64_t>(kLlama32_1bDraftTp4) - static_cast<int64_t>(1024ull * 128256 * 4));
  EXPECT_EQ(p.capacity.num_blocks, static_cast<uint64_t>(p.available_kv_bytes) / 1441792u);
  EXPECT_EQ(plain.capacity.num_blocks, static_cast<uint64_t>(plain.available_kv_bytes) / 1310720u);
  EXPECT_TRUE(p.fits);
}

TEST(VllmSpeculative, DraftModelRefusalsInVllmsWords) {
  const std::vector<std::string> base = {"vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "-tp", "4",
                                         "--max-model-len", "8192"};
  auto refused = [&](const std::string& config, const std::string& draft, const std::string& version = "") {
    std::vector<std::string> command = base;
    command.insert(command.end(), {"--speculative-config", config});
    ServeInputs in = on_h100(command, version);
    with_draft(in, draft);
    auto p = try_predict(in);
    return p.ok() ? std::string("accepted") : p.error().message;
  };
  // V1's DraftModelProposer runs the draft at the target's TP only.
  EXPECT_EQ(refused(R"({"model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 5, "draft_tensor_parallel_size": 1})",
                    "meta-llama/Llama-3.2-1B"),
            "--speculative-config: vLLM refuses it: \"Currently, 'draft_tensor_parallel_size' and 'tensor_parallel_size' "
            "must be the same. Got 1 and 4. Please pass 'draft_tensor_parallel_size' in the speculative_config.\"");
  EXPECT_EQ(refused(R"({"model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 5, "draft_tensor_parallel_size": 2})",
                    "meta-llama/Llama-3.2-1B"),
            "--speculative-config: vLLM refuses it: \"speculative_draft_tensor_parallel_size=2 cannot be other value "
            "than 1 or target model tensor_parallel_size\" (here 4)");
  // Qwen2.5-0.5B's vocabulary (151,936) is not Llama's (128,256).
  EXPECT_EQ(refused(R"({"model": "Qwen/Qwen2.5-0.5B", "num_speculative_tokens": 5})", "Qwen/Qwen2.5-0.5B").rfind(
                "--speculative-config: draft model 'Qwen/Qwen2.5-0.5B': vLLM refuses it: \"Target and draft model should "
                "have the same vocabulary size. Target model vocab_size=128256. Draft model vocab_size=151936.", 0),
            0u);
  EXPECT_EQ(refused(R"({"model": "meta-llama/Llama-3.2-1B"})", "meta-llama/Llama-3.2-1B"),
            "--speculative-config: vLLM refuses it: \"A speculative model was provided, but `num_speculative_tokens` "
            "was not provided\"");
  // v0.11-v0.13 had no draft models in V1 and no V0 to fall back to.
  EXPECT_EQ(refused(R"({"model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 5})", "meta-llama/Llama-3.2-1B",
                    "0.13.0").rfind("--speculative-config: draft model 'meta-llama/Llama-3.2-1B': vLLM 0.13.0 refuses it: "
                                    "\"Speculative decoding with draft model is not supported yet.", 0),
            0u);
  EXPECT_EQ(refused(R"({"model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 5})", "meta-llama/Llama-3.2-1B",
                    "0.14.0"), "accepted");
}

// v0.8-v0.10: V1 did not run draft models; vLLM falls back to V0 (EngineArgs._is_v1_supported_oracle),
// where a draft at TP 1 runs whole on the first GPU (SmallerTpProposerWorker).
TEST(VllmSpeculative, OldV1FallsBackToV0ForADraftModel) {
  ServeInputs in = on_h100({"vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "-tp", "4", "--max-model-len", "8192",
                            "--speculative-config",
                            R"({"model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 5, "draft_tensor_parallel_size": 1})"},
                           "0.9.2");
  with_draft(in, "meta-llama/Llama-3.2-1B");
  const ServePrediction p = predict(in);
  EXPECT_FALSE(p.behavior.v1_engine);
  EXPECT_NE(std::find(p.assumptions.begin(), p.assumptions.end(),
                      "vLLM 0.9.2 runs this speculative decoding (a model without \"method\") on the V0 engine: V1 did "
                      "not support it yet and falls back (EngineArgs._is_v1_supported_oracle)"),
            p.assumptions.end());
  // The whole draft on one GPU: 1,235,814,400 parameters x 2 B + the 16 MiB rotary cache; KV
  // 2 x 16 x 8 KV heads x 64 x 2 B = 32,768 B per token. V0 holds no rejection-sampler dummy run.
  ASSERT_TRUE(p.speculative.has_value());
  EXPECT_EQ(p.speculative->weights_bytes, 1235814400ull * 2 + 16777216);
  EXPECT_EQ(p.speculative->kv.bytes_per_token, 32768u);
  EXPECT_EQ(p.speculative->sampler_extra_bytes_per_logit, 0u);
  // With VLLM_USE_V1=1 that vLLM refuses instead of falling back.
  ServeInputs forced = in;
  forced.config.env["VLLM_USE_V1"] = "1";
  auto refused = try_predict(forced);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "VLLM_USE_V1=1 with this speculative decoding: vLLM refuses it: \"VLLM_USE_V1=1 is "
                                     "not supported with Speculative Decoding.\"");
}

// An EAGLE head whose config is not here: one Llama-3.1-8B decoder layer (llama_eagle.py), TP 1:
//   Linear: q 4096x4096 + k, v 4096x1024 x 2 + o 4096x4096 + MLP 3 x 4096x14336
//           = 218,103,808 x 2 B                                       = 436,207,616
//   post_attention_layernorm only (layer 0 has no input_layernorm): 4096 x 2 B = 8,192
//   fc, nn.Linear(2 x 4096, 4096), whole: 8192 x 4096 x 2 B           =  67,108,864
//   embed_tokens and lm_head: the target's                            =           0
//   total                                                             = 503,324,672
// Its KV: 2 x 1 layer x 8 KV heads x 128 x 2 B = 4,096 per token, the target's page, so it joins
// the target's group as a 33rd layer: 131,072 + 4,096 = 135,168 B per token.
TEST(VllmSpeculative, EagleHeadFromTheTargetsShapeWhenItsConfigIsMissing) {
  ServeInputs in = on_h100({"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192",
                            "--speculative-config",
                            R"({"model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3})"});
  in.draft_model_note = "yuhuili/EAGLE-LLaMA3.1-Instruct-8B: not a preset and not in the Hugging Face cache";
  const ServePrediction p = predict(in);
  ASSERT_TRUE(p.speculative.has_value());
  const SpeculativeSizing& z = *p.speculative;
  EXPECT_EQ(z.method, "eagle");
  EXPECT_TRUE(z.shares_embedding);
  EXPECT_TRUE(z.shares_lm_head);
  EXPECT_EQ(z.weights_bytes, 503324672u);
  EXPECT_EQ(z.kv.bytes_per_token, 4096u);
  EXPECT_EQ(p.kv.bytes_per_token, 135168u);
  EXPECT_EQ(p.kv.full_layers, 33u);
  EXPECT_EQ(p.kv.extra_page_bytes, 0u);
  EXPECT_EQ(z.model_source, "the target's shape (assumed)");
  EXPECT_NE(std::find(p.assumptions.begin(), p.assumptions.end(),
                      "EAGLE head 'yuhuili/EAGLE-LLaMA3.1-Instruct-8B' has no config here (not in the Hugging Face "
                      "cache): sized as one decoder layer of meta-llama/Llama-3.1-8B-Instruct's shape; give its config.json "
                      "path as \"model\" for its own"),
            p.assumptions.end());
}

// An EAGLE-3 head from its config (tests/fixtures/serve/eagle3-llama3.1-8b: the shape of
// yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, one layer, draft_vocab_size 32,000), llama_eagle3.py, TP 1:
//   the layer as above, both norms: 436,207,616 + 4096 x 2 x 2 B      = 436,224,000
//   qkv_proj reads 2H: one more 4096 x (32 + 2 x 8) x 128 x 2 B       =  50,331,648
//   hidden_norm and the final norm: 2 x 4096 x 2 B                    =      16,384
//   fc, ReplicatedLinear(3 x 4096, 4096): 12,288 x 4096 x 2 B         = 100,663,296
//   its own lm_head: 32,000 x 4096 x 2 B                              = 262,144,000
//   draft_id_to_target_id: 32,000 x 8 B (int64)                       =     256,000
//   total                                                             = 849,635,328
// (served in the target's bfloat16 although the head's config says float16: vLLM builds the
// draft's ModelConfig with the target's dtype).
TEST(VllmSpeculative, Eagle3HeadFromItsConfig) {
  const std::string head = testing::fixture_path("serve/eagle3-llama3.1-8b");
  ServeInputs in = on_h100({"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192",
                            "--speculative-config",
                            R"({"method": "eagle3", "model": ")" + head + R"(", "num_speculative_tokens": 3})"});
  with_draft(in, head);
  const ServePrediction p = predict(in);
  ASSERT_TRUE(p.speculative.has_value());
  EXPECT_EQ(p.speculative->method, "eagle3");
  EXPECT_TRUE(p.speculative->shares_embedding);
  EXPECT_FALSE(p.speculative->shares_lm_head);
  EXPECT_EQ(p.speculative->weights_bytes, 849635328u);
  EXPECT_EQ(p.speculative->kv.bytes_per_token, 4096u);
}

// DeepSeek-V3's MTP layer (num_nextn_predict_layers 1) at TP 8, FP8 like the target; its KV is
// one more MLA latent: 576 x 2 B = 1,152 per token, on top of 61 x 1,152 = 70,272.
// Weights per GPU (deepseek_mtp.py): one MoE decoder block as the target's layers are sized
// (stage_weight_bytes for a layer past first_k_dense_replace), plus what DeepSeekMultiTokenPredictorLayer
// adds whole on every GPU in bfloat16: eh_proj 2 x 7168 x 7168 x 2 B = 205,520,896 and enorm,
// hnorm, shared_head.norm 3 x 7168 x 2 B = 43,008. The block itself:
//   routed experts 256 x 3 x 7168 x 2048 + shared expert 3 x 7168 x 2048 = 11,318,329,344
//   attention q_a 7168x1536, q_b 1536x24576, kv_a 7168x576, kv_b 512x32768, o 16384x7168
//             = 187,105,280, with the q_a/kv_a norms (2,048), router 1,835,008 and its bias (256)
//   Linear 11,507,271,936 x 1 B / 8                                     = 1,438,408,992
//   MLA down projections whole: (11,010,048 + 4,128,768) x 1 B x 7/8     =    13,246,464
//   kv_b's 16-bit copies: 512 x 16 heads x (128 + 128) x 2 B             =     4,194,304
//   router whole in bfloat16: 1,835,008 x (2 - 1/8)                      =     3,440,640
//   the block's two norms 2 x 7168 x 2 B                                 =        28,672
//   block                                                                = 1,459,319,072
// so 1,459,319,072 + 205,520,896 + 43,008 = 1,664,882,976 B. Embeddings and lm_head are shared.
TEST(VllmSpeculative, DeepSeekMtpLayerIsLoadedByTheDrafter) {
  ServeInputs in = on_h100({"vllm", "serve", "deepseek-ai/DeepSeek-V3", "-tp", "8", "--max-model-len", "32768",
                            "--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 1})"});
  with_mtp_layers(in);
  EXPECT_EQ(in.mtp_layers, 1u);   // the preset's num_nextn_predict_layers
  const ServePrediction plain = predict(on_h100({"vllm", "serve", "deepseek-ai/DeepSeek-V3", "-tp", "8",
                                                 "--max-model-len", "32768"}));
  const ServePrediction p = predict(in);
  ASSERT_TRUE(p.speculative.has_value());
  const SpeculativeSizing& z = *p.speculative;
  EXPECT_EQ(z.method, "mtp");
  EXPECT_EQ(z.draft_layers, 1u);
  EXPECT_TRUE(z.shares_embedding);
  EXPECT_TRUE(z.shares_lm_head);
  EXPECT_EQ(z.kv.bytes_per_token, 1152u);
  EXPECT_EQ(plain.kv.bytes_per_token, 70272u);
  EXPECT_EQ(p.kv.bytes_per_token, 71424u);
  EXPECT_EQ(p.kv.full_layers, 62u);
  EXPECT_EQ(z.weights_bytes, 1664882976u);
  EXPECT_EQ(p.weights.bytes, plain.weights.bytes + 1664882976u);
}

TEST(VllmSpeculative, MtpNeedsMtpLayersAndDivisibleTokens) {
  auto refused = [](const std::string& model, const std::string& config) {
    ServeInputs in = on_h100({"vllm", "serve", model, "-tp", "8", "--max-model-len", "8192",
                              "--speculative-config", config});
    with_mtp_layers(in);
    auto p = try_predict(in);
    return p.ok() ? std::string("accepted") : p.error().message;
  };
  EXPECT_EQ(refused("meta-llama/Llama-3.1-70B-Instruct", R"({"method": "mtp", "num_speculative_tokens": 1})"),
            "--speculative-config: method mtp needs the model's multi-token-prediction layers "
            "(num_nextn_predict_layers in config.json); meta-llama/Llama-3.1-70B-Instruct has none");
  // One MTP layer reused for 3 tokens: any count is a multiple of 1.
  EXPECT_EQ(refused("deepseek-ai/DeepSeek-V3", R"({"method": "deepseek_mtp", "num_speculative_tokens": 3})"), "accepted");
}

// The n-gram proposer loads nothing: the same weights and KV bytes per token; only the rejection
// sampler's dummy run (which every speculative launch runs in V1) is added to the profile.
TEST(VllmSpeculative, NgramAddsOnlyTheRejectionSamplersDummyRun) {
  const std::vector<std::string> base = {"vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192"};
  std::vector<std::string> ngram_command = base;
  ngram_command.insert(ngram_command.end(),
                       {"--speculative-config", R"({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4})"});
  const ServePrediction plain = predict(inputs(base, 24 * kGiB));
  const ServePrediction ngram = predict(inputs(ngram_command, 24 * kGiB));
  EXPECT_EQ(ngram.weights.bytes, plain.weights.bytes);
  EXPECT_EQ(ngram.kv.bytes_per_token, plain.kv.bytes_per_token);
  // 256 sequences (a 24 GiB card) x 128,256 logits x 2 x 2 B.
  EXPECT_EQ(ngram.activation.bytes, plain.activation.bytes + 256ull * 128256 * 4);
  ASSERT_TRUE(ngram.speculative.has_value());
  EXPECT_FALSE(ngram.speculative->loads_model);
  EXPECT_EQ(ngram.speculative->weights_bytes, 0u);
}

TEST(VllmSpeculative, AMethodNotSizedIsSaid) {
  const ServePrediction p = predict(inputs({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192",
                                            "--speculative-config",
                                            R"({"method": "medusa", "model": "FasterDecoding/medusa-vicuna-7b-v1.3", "num_speculative_tokens": 3})"},
                                           24 * kGiB));
  ASSERT_TRUE(p.speculative.has_value());
  EXPECT_FALSE(p.speculative->sized);
  EXPECT_NE(std::find(p.assumptions.begin(), p.assumptions.end(),
                      "speculative decoding (medusa FasterDecoding/medusa-vicuna-7b-v1.3, 3 tokens) is read but not "
                      "sized: its draft weights and KV cache come on top"),
            p.assumptions.end());
}

}  // namespace
}  // namespace oomdoc
