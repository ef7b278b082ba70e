// What the optimizer set-up keeps beside the states proper: DDP's gradient buckets, Adafactor's
// fp32 working copies, 8-bit AdamW's states; and the defaults the estimate names. Values are
// hand-computed from Llama-2-7B's shapes.
#include <gtest/gtest.h>

#include <algorithm>

#include "analyses/estimator.h"
#include "readers/model_config.h"
#include "readers/model_presets.h"

namespace oomdoc {
namespace {

constexpr uint64_t kLlama2Params = 6'738'415'616;
constexpr uint64_t kLlama2Embedding = 32'000ull * 4'096;   // embed_tokens (lm_head untied, same shape)

ModelSpec llama2_7b() { return find_preset("meta-llama/Llama-2-7b-hf")->value(); }

Job full_training() {
  Job job;
  job.task = "train_full";
  job.precision = "bf16_mixed";
  job.micro_batch_size = 1;
  job.seq_len = 256;
  job.gradient_checkpointing = "full";
  job.attention_impl = "flash";
  return job;
}

std::optional<uint64_t> component(const std::vector<MemoryComponent>& list, const std::string& name) {
  for (const auto& c : list) {
    if (c.name == name) return c.bytes;
  }
  return std::nullopt;
}

bool assumes(const Estimate& e, const std::string& text) {
  return std::find(e.assumptions.begin(), e.assumptions.end(), text) != e.assumptions.end();
}

// DDP's Reducer allocates its buckets when it wraps the model (gradient_as_bucket_view=False):
// a second copy of the fp32 gradients, live at the optimizer step too.
TEST(EstimatorOptimizerMemory, DdpBucketsStayLiveThroughTheOptimizerStep) {
  Job one = full_training();
  Job two = one;
  two.num_gpus = 2;
  two.parallelism = "ddp";
  auto single = estimate_memory(llama2_7b(), one);
  auto ddp = estimate_memory(llama2_7b(), two);
  ASSERT_TRUE(single && ddp);
  EXPECT_EQ(ddp->peak_phase, "optimizer_step");
  EXPECT_EQ(single->peak_phase, "optimizer_step");
  EXPECT_EQ(component(ddp->components, "gradient_buckets"), kLlama2Params * 4);
  EXPECT_EQ(component(single->components, "gradient_buckets"), std::nullopt);
  EXPECT_EQ(ddp->peak_allocated_bytes - single->peak_allocated_bytes, kLlama2Params * 4);
}

// transformers' Adafactor.step: grad.float(), p.float(), grad**2 + eps and r_factor * c_factor,
// for the largest parameter (the 32000 x 4096 embedding): 4 fp32 copies in pure bf16, 2 when the
// parameters and gradients are fp32 already.
TEST(EstimatorOptimizerMemory, AdafactorStepHoldsFp32CopiesOfTheLargestParameter) {
  Job pure = full_training();
  pure.precision = "bf16";
  pure.optimizer = "adafactor";
  Job mixed = pure;
  mixed.precision = "bf16_mixed";
  auto p = estimate_memory(llama2_7b(), pure);
  auto m = estimate_memory(llama2_7b(), mixed);
  ASSERT_TRUE(p && m);
  EXPECT_EQ(component(p->breakdown, "temporary"), kLlama2Embedding * 4 * 4);
  EXPECT_EQ(component(m->breakdown, "temporary"), kLlama2Embedding * 4 * 2);
}

// Under DeepSpeed ZeRO, Adafactor steps the rank's flat 1-D fp32 partition: not factored (a full
// fp32 second moment) and its temporaries are two copies of the partition.
TEST(EstimatorOptimizerMemory, AdafactorUnderZeroStepsFlatPartitions) {
  Job job = full_training();
  job.optimizer = "adafactor";
  job.num_gpus = 2;
  job.parallelism = "zero2";
  auto e = estimate_memory(llama2_7b(), job);
  ASSERT_TRUE(e);
  EXPECT_EQ(component(e->components, "optimizer_state"), kLlama2Params * 4 / 2);
  EXPECT_EQ(component(e->breakdown, "temporary"), kLlama2Params / 2 * 4 * 2);
}

// Trainer.create_optimizer's 32-bit override of nn.Embedding states applies only when the optimizer
// class is named "Adam8bit" (transformers < 4.30); today's adamw_bnb_8bit / paged_adamw_8bit are
// bitsandbytes' AdamW with optim_bits=8, so every state is 8-bit, embeddings included.
TEST(EstimatorOptimizerMemory, EightBitAdamWKeepsEmbeddingStatesIn8Bits) {
  Job job = full_training();
  job.optimizer = "adamw_8bit";
  auto trainer = estimate_memory(llama2_7b(), job);
  ASSERT_TRUE(trainer);
  const uint64_t eight_bit = kLlama2Params * 2 + kLlama2Params / 32;   // 2 + 8/256 B each
  EXPECT_EQ(component(trainer->components, "optimizer_state"), eight_bit);
}

TEST(EstimatorOptimizerMemory, NamesTheAccumulationItAssumed) {
  auto e = estimate_memory(llama2_7b(), full_training());
  ASSERT_TRUE(e);
  EXPECT_TRUE(assumes(*e, "grad_accum_steps: 1 (not given)"));
  Job given = full_training();
  given.grad_accum_steps = 4;
  auto g = estimate_memory(llama2_7b(), given);
  ASSERT_TRUE(g);
  EXPECT_FALSE(assumes(*g, "grad_accum_steps: 1 (not given)"));
}

// google/vit-base-patch16-224 (ViTForImageClassification, 1000 ImageNet labels): 86,567,656
// parameters, no pooler and a biased Linear(768, 1000) classifier.
TEST(EstimatorOptimizerMemory, VitImageClassifierHasNoPoolerAndAClassifier) {
  std::string labels;
  for (int i = 0; i < 1000; ++i) labels += (i ? ", " : "") + ("\"" + std::to_string(i) + "\": \"c" + std::to_string(i) + "\"");
  const std::string config = R"({"architectures": ["ViTForImageClassification"], "model_type": "vit",
    "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
    "image_size": 224, "patch_size": 16, "num_channels": 3, "qkv_bias": true, "hidden_act": "gelu",
    "id2label": {)" + labels + "}}";
  auto classifier = parse_model_config(config, "config.json");
  ASSERT_TRUE(classifier) << classifier.error().message;
  EXPECT_EQ(classifier->total_params, 86'567'656u);
  EXPECT_FALSE(classifier->pooler_dense);
  // The same backbone as ViTModel: the pooler (768 x 768 + 768) instead of the classifier.
  std::string backbone = config;
  backbone.replace(backbone.find("ViTForImageClassification"), 25, "ViTModel");
  auto model = parse_model_config(backbone, "config.json");
  ASSERT_TRUE(model);
  EXPECT_EQ(model->total_params, 86'567'656u - 769'000 + 590'592);
}

}  // namespace
}  // namespace oomdoc
