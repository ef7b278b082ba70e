// The search logic, against a stand-in estimator whose numbers are easy to follow by hand (GiB):
//   context 2 + weights (14, or 4 under QLoRA) + full fine-tuning state (gradients 14, AdamW 28 or
//   8-bit 7) or LoRA state 1 + activations (micro-batch x seq/1024 x 4, or x 1 with checkpointing)
//   + logits (micro-batch x seq/1024, 0 with a fused loss); ZeRO-2 divides gradients and optimizer
//   by the GPU count, full sharding divides weights too; offload moves optimizer / weights away.
//   Tensor x pipeline parallel (tp x pp GPUs) divide weights and state, and sharding then divides
//   by the data-parallel rest; tensor parallel also divides activations.
// Tests against the real estimator are in fit_plan_test.cpp.
#include "analyses/fit_search.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>

#include "core/units.h"

namespace oomdoc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

int calls = 0;

Result<Estimate> toy_estimator(const ModelSpec&, const Job& job) {
  ++calls;
  const std::string task = job.task.value_or("train_full");
  const double tp = static_cast<double>(job.tp.value_or(1));
  const double model_parallel = tp * static_cast<double>(job.pp.value_or(1));
  const double n = static_cast<double>(job.num_gpus.value_or(1)) / model_parallel;  // data parallel
  const std::string par = job.parallelism.value_or("ddp");
  auto offloaded = [&](const char* what) {
    return std::find(job.offload.begin(), job.offload.end(), what) != job.offload.end();
  };
  double weights = task == "train_qlora" ? 4 : 14;
  double state = 1;
  if (task == "train_full") {
    const std::string opt = job.optimizer.value_or("adamw");
    double optimizer = opt == "adamw" ? 28 : 7;
    // FSDP's CPU offload takes gradients and the optimizer step along with the parameters.
    const bool fsdp_offload = offloaded("params") && is_fsdp(par);
    if (offloaded("optimizer") || fsdp_offload) optimizer = 0;
    state = (fsdp_offload ? 0 : 14) + optimizer;
    if (par != "ddp") state /= n;
  }
  if (par == "fsdp_full_shard" || par == "zero3") weights /= n;
  if (offloaded("params")) weights = 0;
  weights /= model_parallel;
  state /= model_parallel;
  const double tokens = static_cast<double>(job.micro_batch_size.value_or(1)) *
                        static_cast<double>(job.seq_len.value_or(1024)) / 1024.0;
  const double activations = tokens * (job.gradient_checkpointing.value_or("none") == "full" ? 1 : 4) / tp;
  const double logits = job.loss_impl.value_or("standard") == "fused_linear" ? 0 : tokens;
  const double total = 2 + weights + state + activations + logits;
  Estimate e;
  e.device_used_bytes = static_cast<uint64_t>(total * kGiB);
  e.peak_reserved_bytes = e.device_used_bytes - 2 * kGiB;
  e.peak_allocated_bytes = e.peak_reserved_bytes;
  e.components = {{"weights", static_cast<uint64_t>(weights * kGiB), ""},
                  {"optimizer_state", static_cast<uint64_t>((state - (task == "train_full" ? 14 / (par != "ddp" ? n : 1) : 0)) * kGiB), ""}};
  e.peak_phase = "backward";
  e.dominant_component = "optimizer_state";
  return e;
}

Job full_job() {
  Job job;
  job.model = "toy";
  job.task = "train_full";
  job.precision = "bf16_mixed";
  job.optimizer = "adamw";
  job.micro_batch_size = 4;
  job.grad_accum_steps = 1;
  job.seq_len = 2048;
  job.gradient_checkpointing = "none";
  job.loss_impl = "fused_linear";
  return job;
}

FitOptions card(uint64_t gib, uint64_t gpus = 1) {
  FitOptions o;
  o.gpu_name = fmt::format("{} GiB card", gib);
  o.total_bytes = gib * kGiB;
  o.num_gpus = gpus;
  return o;
}

std::vector<std::string> ids(const FitPlan& plan) {
  std::vector<std::string> out;
  for (const auto& c : plan.changes) out.push_back(c.id);
  return out;
}

TEST(FitSearch, ALengthCutToUnderAQuarterIsNoAlternative) {
  ModelSpec model;
  model.id = "toy";
  // On a 64 GiB card (58.88 GiB budget) the 58 GiB of fixed state leave room for 56 tokens of
  // the 2048 asked: listed as "fits at max length 56" it would be a different task.
  auto r = fit_job(model, full_job(), card(64), toy_estimator);
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (const auto& a : r->alternatives) EXPECT_NE(a.change.id, "seq_len") << a.description;
}

TEST(FitSearch, FitsAsGivenNeedsNoPlan) {
  ModelSpec model;
  model.id = "toy";
  Job job = full_job();
  job.micro_batch_size = 1;
  job.optimizer = "adamw_8bit";
  // 2 + 14 + 21 + 8 = 45 GiB on an 80 GiB card: under the 64 GiB target.
  auto r = fit_job(model, job, card(80), toy_estimator);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->fits);
  EXPECT_TRUE(r->fits_target);
  EXPECT_FALSE(r->plan.has_value());
  EXPECT_TRUE(r->alternatives.empty());
  EXPECT_EQ(r->usable_bytes, static_cast<uint64_t>(80 * 0.92 * kGiB));
  EXPECT_EQ(r->target_bytes, 64 * kGiB);
}

TEST(FitSearch, SmallerMicroBatchThen8BitAdamAndTheMicroBatchIsRelaxed) {
  ModelSpec model;
  model.id = "toy";
  // 2 + 14 + 42 + 4*2*4 = 90 GiB on an 80 GiB card (target 64).
  auto r = fit_job(model, full_job(), card(80), toy_estimator);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->fits);
  EXPECT_EQ(r->estimate.device_used_bytes, 90 * kGiB);
  ASSERT_TRUE(r->plan.has_value());
  // Micro-batch 1 alone is 66 GiB (over the target); with 8-bit AdamW micro-batch 2 is enough:
  // 2 + 14 + 21 + 16 = 53 GiB.
  EXPECT_THAT(ids(*r->plan), ElementsAre("micro_batch", "optimizer_8bit"));
  EXPECT_THAT(r->plan->changes[0].title, HasSubstr("micro-batch 4 -> 2 with gradient accumulation 1 -> 2"));
  EXPECT_EQ(r->plan->predicted.device_used_bytes, 53 * kGiB);
  EXPECT_TRUE(r->plan->fits_target);
  EXPECT_EQ(r->plan->job.micro_batch_size, 2u);
  EXPECT_EQ(r->plan->job.grad_accum_steps, 2u);
  EXPECT_EQ(r->plan->job.optimizer, "adamw_8bit");
  // The cumulative prediction after each change.
  EXPECT_EQ(r->plan->changes[0].predicted->device_used_bytes, 74 * kGiB);
  EXPECT_EQ(r->plan->changes[1].predicted->device_used_bytes, 53 * kGiB);
  EXPECT_EQ(r->plan->changes[1].settings[0].name, "optim");
  EXPECT_EQ(r->plan->changes[1].settings[0].value, "\"adamw_bnb_8bit\"");
  // Single changes that fit the budget (73.6 GiB) alone are alternatives, in cost order.
  std::vector<std::string> alt;
  for (const auto& a : r->alternatives) alt.push_back(a.change.id);
  EXPECT_THAT(alt, ElementsAre("micro_batch", "seq_len", "optimizer_8bit", "gradient_checkpointing",
                               "lora", "qlora", "offload_optimizer", "bigger_gpu", "more_gpus"));
  EXPECT_EQ(r->alternatives[0].predicted.device_used_bytes, 66 * kGiB);  // micro-batch 1
  EXPECT_FALSE(r->alternatives[0].fits_target);
  // 58 + 16 GiB per 1024 tokens <= 73.6 GiB: 998 tokens.
  EXPECT_EQ(r->alternatives[1].change.title, "max sequence length 2048 -> 998");
  EXPECT_EQ(r->alternatives[7].gpu_name, "H200 SXM 141GB");
  // Full sharding over 2, the global batch of 4 kept by micro-batch 2 on each:
  // 2 + 7 + 21 + 2 x 2 x 4 = 46 GiB.
  EXPECT_EQ(r->alternatives[8].num_gpus, 2u);
  EXPECT_EQ(r->alternatives[8].predicted.device_used_bytes, 46 * kGiB);
  EXPECT_EQ(r->alternatives[8].job->micro_batch_size, 2u);
  EXPECT_EQ(r->alternatives[8].job->grad_accum_steps, 1u);
}

TEST(FitSearch, ShardingAcrossTheGpusTheUserHas) {
  ModelSpec model;
  model.id = "toy";
  Job job = full_job();
  job.micro_batch_size = 1;
  // One GPU: 2 + 14 + 42 + 8 = 66 GiB on a 56 GiB card (target 44.8). Micro-batch 1 already;
  // 8-bit AdamW gives 45, checkpointing then 39.
  auto one = fit_job(model, job, card(56), toy_estimator);
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE(one->plan.has_value());
  EXPECT_THAT(ids(*one->plan), ElementsAre("optimizer_8bit", "gradient_checkpointing"));
  EXPECT_EQ(one->plan->predicted.device_used_bytes, 39 * kGiB);
  // 4 x 24 GiB (target 19.2): 8-bit + checkpointing = 39; LoRA + checkpointing = 19 fits before
  // sharding is reached, and 8-bit AdamW is then not needed.
  auto four = fit_job(model, job, card(24, 4), toy_estimator);
  ASSERT_TRUE(four.ok());
  ASSERT_TRUE(four->plan.has_value());
  EXPECT_THAT(ids(*four->plan), ElementsAre("gradient_checkpointing", "lora"));
}

// A model with 8 heads and 8 layers: TP 2/4/8 and PP up to 8 are possible layouts.
ModelSpec toy_transformer() {
  ModelSpec model;
  model.id = "toy";
  model.num_attention_heads = 8;
  model.num_kv_heads = 8;
  model.num_layers = 8;
  return model;
}

TEST(FitSearch, TensorParallelKeepsTheMethodWhenShardingAloneIsNotEnough) {
  // Long sequences: 16 GiB of checkpointed activations. One GPU: 2 + 14 + 21 + 16 = 53 GiB.
  Job job = full_job();
  job.optimizer = "adamw_8bit";
  job.micro_batch_size = 1;
  job.grad_accum_steps = 4;
  job.seq_len = 16384;
  job.gradient_checkpointing = "full";
  FitOptions options = card(24, 4);   // target 19.2 GiB
  options.gpu_nvlink = true;
  options.gpu_interconnect = "NVLink 4.0, 900 GB/s per GPU";
  auto r = fit_job(toy_transformer(), job, options, toy_estimator);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->plan.has_value());
  // LoRA (cheaper in the cost order) still needs the sharding step here, which reaches the target
  // without changing the method, so the plan keeps full fine-tuning: the sharding step's cheapest
  // option under the target. ZeRO-2 gives 2 + 14 + 5.25 + 16 = 37.25 and FSDP 2 + 3.5 + 5.25 + 16
  // = 26.75, TP 2 x FSDP 2: 2 + 3.5 + 5.25 + 8 = 18.75 GiB.
  const FitPlan& plan = *r->plan;
  EXPECT_THAT(ids(plan), ElementsAre("tensor_parallel"));
  EXPECT_EQ(plan.predicted.device_used_bytes, static_cast<uint64_t>(18.75 * kGiB));
  EXPECT_TRUE(plan.fits_target);
  const FitChange& layout = plan.changes.back();
  EXPECT_EQ(layout.title,
            "tensor parallel 2 (with sequence parallelism), FSDP over the 2 data-parallel groups "
            "across the 4 GPUs; accumulation 4 -> 8 keeps the global batch 16");
  EXPECT_EQ(plan.job.tp, 2u);
  EXPECT_EQ(plan.job.pp, 1u);
  EXPECT_EQ(plan.job.num_gpus, 4u);
  EXPECT_EQ(plan.job.parallelism, "fsdp_full_shard");
  EXPECT_EQ(plan.job.grad_accum_steps, 8u);
  EXPECT_THAT(layout.cost, HasSubstr("needs an NVLink-class interconnect between the 2 GPUs; "
                                     "NVLink 4.0, 900 GB/s per GPU"));
  std::vector<std::string> flags;
  for (const auto& s : layout.settings) flags.push_back(s.target + " " + s.name + " " + s.value);
  EXPECT_THAT(flags, ElementsAre("torchtitan --parallelism.data_parallel_shard_degree -1",
                                 "torchtitan --parallelism.tensor_parallel_degree 2",
                                 "torchtitan --parallelism.pipeline_parallel_degree 1",
                                 "torchtitan --training.local_batch_size 1",
                                 "torchtitan --training.global_batch_size 16",
                                 "torchtitan --activation_checkpoint.mode full",
                                 "Megatron-LM --tensor-model-parallel-size 2",
                                 "Megatron-LM --sequence-parallel ",
                                 "Megatron-LM --pipeline-model-parallel-size 1",
                                 "Megatron-LM --micro-batch-size 1",
                                 "Megatron-LM --global-batch-size 16",
                                 "Megatron-LM --bf16 ",
                                 "Megatron-LM --recompute-granularity full",
                                 "Megatron-LM --recompute-method uniform",
                                 "Megatron-LM --recompute-num-layers 1"));
  EXPECT_THAT(layout.cost, HasSubstr("8-bit AdamW has no torchtitan or Megatron-LM flag: build it "
                                     "in the training script (torchao.optim.AdamW8bit)"));
  EXPECT_THAT(layout.cost, HasSubstr("use liger_kernel's LigerFusedLinearCrossEntropyLoss"));
  // The plan keeps the method: no same-method alternative.
  EXPECT_TRUE(std::none_of(r->alternatives.begin(), r->alternatives.end(),
                           [](const FitAlternative& a) { return a.change.id == "same_method"; }));

  // Over PCIe the same layout is still the one that fits (pipeline stages first: PP 2 and PP 4
  // leave 16 GiB of activations, 26.75 GiB), and its cost says the interconnect is not suited.
  options.gpu_nvlink = false;
  options.gpu_interconnect = "PCIe Gen4 only";
  auto pcie = fit_job(toy_transformer(), job, options, toy_estimator);
  ASSERT_TRUE(pcie.ok());
  ASSERT_TRUE(pcie->plan.has_value());
  EXPECT_EQ(pcie->plan->job.tp, 2u);
  EXPECT_THAT(pcie->plan->changes.back().cost, HasSubstr("NOT this one, expect a large slowdown; PCIe Gen4 only"));
}

TEST(FitSearch, ModelParallelLayoutIsTakenOnlyWhenItFits) {
  // One GPU: 2 + 14 + 42 + 8 = 66 GiB; 2 x 16 GiB (target 12.8). Keeping full fine-tuning, after
  // checkpointing (39): ZeRO-2 28.5, FSDP 21.5, TP 2 20.5 lowers most but does not fit. Were TP
  // kept, the offload step (which does not combine with TP) would be out of reach; FSDP is kept
  // instead, and FSDP's CPU offload (parameters, gradients and optimizer) reaches 2 + 0 + 0 + 8 =
  // 10 GiB without checkpointing.
  Job job = full_job();
  job.micro_batch_size = 1;
  FitOptions options = card(16, 2);
  options.gpu_nvlink = true;
  auto r = fit_job(toy_transformer(), job, options, toy_estimator);
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto same = std::find_if(r->alternatives.begin(), r->alternatives.end(),
                           [](const FitAlternative& a) { return a.change.id == "same_method"; });
  ASSERT_NE(same, r->alternatives.end());
  EXPECT_EQ(same->predicted.device_used_bytes, 10 * kGiB);
  EXPECT_EQ(same->change.title, "FSDP full sharding (ZeRO-3) across the 2 GPUs; offload parameters, gradients and "
                                "the optimizer step to CPU memory (FSDP CPU offload)");
  // One fsdp= argument: the offload's value replaces the sharding step's.
  std::vector<std::string> fsdp_values;
  for (const auto& setting : same->change.settings) {
    if (setting.name == "fsdp") fsdp_values.push_back(setting.value);
  }
  EXPECT_EQ(fsdp_values, std::vector<std::string>{"\"full_shard offload auto_wrap\""});
  ASSERT_TRUE(same->job.has_value());
  EXPECT_EQ(same->job->tp.value_or(1), 1u);
}

TEST(FitSearch, InferenceSplitsTheModelAcrossTheGpus) {
  // Inference: 2 + 14 + 1 + 4 + 1 = 22 GiB on 2 x 20 GiB (target 16).
  Job job;
  job.model = "toy";
  job.task = "inference";
  job.batch_size = 1;
  FitOptions options = card(20, 2);
  // Without NVLink, pipeline stages come first: PP 2 gives 2 + 7 + 0.5 + 4 + 1 = 14.5 GiB.
  auto pcie = fit_job(toy_transformer(), job, options, toy_estimator);
  ASSERT_TRUE(pcie.ok()) << pcie.error().message;
  ASSERT_TRUE(pcie->plan.has_value());
  EXPECT_THAT(ids(*pcie->plan), ElementsAre("pipeline_parallel"));
  EXPECT_EQ(pcie->plan->predicted.device_used_bytes, static_cast<uint64_t>(14.5 * kGiB));
  EXPECT_EQ(pcie->plan->job.pp, 2u);
  EXPECT_EQ(pcie->plan->changes[0].title, "pipeline parallel across 2 GPUs (layers split into 2 stages)");
  EXPECT_EQ(pcie->plan->changes[0].settings[1].name, "--pipeline-parallel-size");
  EXPECT_EQ(pcie->plan->changes[0].settings[2].value, "\"auto\"");   // device_map
  // With NVLink, tensor parallel first: 2 + 7 + 0.5 + 2 + 1 = 12.5 GiB.
  options.gpu_nvlink = true;
  auto nvlink = fit_job(toy_transformer(), job, options, toy_estimator);
  ASSERT_TRUE(nvlink.ok());
  ASSERT_TRUE(nvlink->plan.has_value());
  EXPECT_THAT(ids(*nvlink->plan), ElementsAre("tensor_parallel"));
  EXPECT_EQ(nvlink->plan->predicted.device_used_bytes, static_cast<uint64_t>(12.5 * kGiB));
  EXPECT_EQ(nvlink->plan->changes[0].settings[0].name, "--tensor-parallel-size");
  EXPECT_EQ(nvlink->plan->changes[0].settings[2].name, "tp_plan");
}

TEST(FitSearch, OffloadReportsHostMemoryAndHardwareWhenNothingElseFits) {
  ModelSpec model;
  model.id = "toy";
  Job job = full_job();
  job.micro_batch_size = 1;
  job.task = "train_qlora";
  job.gradient_checkpointing = "full";
  // QLoRA, micro-batch 1, checkpointing: 2 + 4 + 1 + 2 = 9 GiB on an 8 GiB card (usable 7.36).
  // Offloading the 4 GiB of weights gives 5 GiB, under the 6.4 GiB target.
  auto r = fit_job(model, job, card(8), toy_estimator);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->plan.has_value());
  EXPECT_THAT(ids(*r->plan), ElementsAre("offload_params"));
  EXPECT_EQ(r->plan->predicted.device_used_bytes, 5 * kGiB);
  ASSERT_TRUE(r->plan->changes[0].host_ram_bytes.has_value());
  EXPECT_EQ(*r->plan->changes[0].host_ram_bytes, static_cast<uint64_t>(4 * 1.5 * kGiB));
  // On a 4 GiB card nothing searched fits: the plan is hardware.
  auto tiny = fit_job(model, job, card(4), toy_estimator);
  ASSERT_TRUE(tiny.ok());
  ASSERT_TRUE(tiny->plan.has_value());
  EXPECT_EQ(tiny->plan->changes[0].step, 9);
  // 9 GiB under an 80% target needs 11.25 GiB: the smallest bf16 card in the catalog that has it.
  EXPECT_EQ(tiny->plan->gpu_name, "GeForce RTX 3060 12GB");
}

TEST(FitSearch, MaxBatchAndMaxSeqSolvers) {
  ModelSpec model;
  model.id = "toy";
  Job job = full_job();
  job.optimizer = "adamw_8bit";
  job.micro_batch_size = 1;
  // 37 GiB fixed + 8 GiB per sample at 2048 tokens: usable on 80 GiB is 73.6 -> 4 samples (69).
  auto b = solve_largest(model, job, &Job::micro_batch_size, static_cast<uint64_t>(73.6 * kGiB),
                         1 << 16, toy_estimator);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(*b, 4u);
  // 37 + 4 * seq/1024 <= 73.6 -> seq <= 9369.6
  auto s = solve_largest(model, job, &Job::seq_len, static_cast<uint64_t>(73.6 * kGiB), 1 << 23,
                         toy_estimator);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(*s, 9369u);
  EXPECT_FALSE(solve_largest(model, job, &Job::seq_len, 10 * kGiB, 1 << 23, toy_estimator));
}

TEST(FitSearch, LengthsLetThePlanCutTheSequence) {
  ModelSpec model;
  model.id = "toy";
  Job job = full_job();
  job.micro_batch_size = 1;
  job.optimizer = "adamw_8bit";
  job.seq_len = 16384;
  job.gradient_checkpointing = "full";
  // 2 + 14 + 21 + 16 = 53 GiB on a 40 GiB card (target 32).
  std::vector<uint64_t> lengths(1000, 1500);
  lengths[0] = 16000;   // one outlier: 0.1% of the examples
  FitOptions o = card(40);
  o.lengths = lengths;
  auto r = fit_job(model, job, o, toy_estimator);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->lengths.has_value());
  EXPECT_EQ(r->lengths->stats.p99, 1500u);
  EXPECT_EQ(r->lengths->suggested_cut, 2048u);
  ASSERT_TRUE(r->plan.has_value());
  // No cut that truncates at most 1% reaches 32 GiB alone (2048 gives 39); LoRA alone gives 33.
  // Together: LoRA and the longest cut that then fits, 8192 (2 + 14 + 1 + 8 = 25 GiB).
  EXPECT_THAT(ids(*r->plan), ElementsAre("seq_len", "lora"));
  EXPECT_EQ(r->plan->changes[0].title, "max sequence length 16384 -> 8192");
  EXPECT_THAT(r->plan->changes[0].cost, HasSubstr("truncates 1 of 1000 examples (0.10%)"));
  EXPECT_EQ(r->plan->predicted.device_used_bytes, 25 * kGiB);
}

TEST(FitSearch, BadOptions) {
  ModelSpec model;
  FitOptions o = card(24);
  o.budget = 1.5;
  auto r = fit_job(model, full_job(), o, toy_estimator);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("--budget 1.5 is outside (0, 1]"));
  o.budget = 0;
  EXPECT_FALSE(fit_job(model, full_job(), o, toy_estimator).ok());
  o = card(24);
  o.target = -0.1;
  EXPECT_FALSE(fit_job(model, full_job(), o, toy_estimator).ok());
}

TEST(FitSearch, Prices) {
  auto prices = parse_prices("gpu,price\n# comment\nh100, 2.49\nL40S 0.99\n4090\t$0.35\n", "p.csv");
  ASSERT_TRUE(prices.ok()) << prices.error().message;
  EXPECT_EQ(prices->size(), 3u);
  EXPECT_DOUBLE_EQ(prices->at("L40S 48GB"), 0.99);
  EXPECT_DOUBLE_EQ(prices->at("GeForce RTX 4090 24GB"), 0.35);
  auto bad = parse_prices("h100, 2.49\nl40s, cheap\n", "p.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "p.csv: line 2: 'cheap' is not a price per GPU-hour (a number, 0 or more)");
  // A priced GPU whose price is wrong is an error even on the first line (not a header), as is
  // a GPU priced twice; "$2.50/hr" reads as 2.5.
  auto first_bad = parse_prices("h100, abc\n", "p.csv");
  ASSERT_FALSE(first_bad.ok());
  EXPECT_EQ(first_bad.error().message, "p.csv: line 1: 'abc' is not a price per GPU-hour (a number, 0 or more)");
  auto negative = parse_prices("h100, -1\n", "p.csv");
  ASSERT_FALSE(negative.ok());
  auto twice = parse_prices("h100, 2\nh100-80, 3\n", "p.csv");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().message, "p.csv: line 2: H100 SXM 80GB is priced twice (line 1 too)");
  auto hourly = parse_prices("h100 $2.50/hr\n", "p.csv");
  ASSERT_TRUE(hourly.ok()) << hourly.error().message;
  EXPECT_DOUBLE_EQ(hourly->at("H100 SXM 80GB"), 2.5);
  auto unknown = parse_prices("h100, 2.49\nquantum card, 3\n", "p.csv");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.error().message, HasSubstr("p.csv: line 2: "));
  // A first line with a number in it is a price line gone wrong, not a header; a file of no
  // prices at all is an error, not a silent no-op.
  auto worded = parse_prices("h100, 2 per hour\n", "p.csv");
  ASSERT_FALSE(worded.ok());
  EXPECT_EQ(worded.error().message, "p.csv: line 1: 'hour' is not a price per GPU-hour (a number, 0 or more)");
  auto empty = parse_prices("foo, bar\n", "p.csv");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().message, "p.csv: no prices: expected lines 'GPU NAME, PRICE PER GPU-HOUR' (e.g. 'H100 SXM, 2.49')");
  // A spreadsheet's byte-order mark is not part of the first GPU's name.
  auto bom = parse_prices("\xEF\xBB\xBFh100, 2.49\n", "p.csv");
  ASSERT_TRUE(bom.ok()) << bom.error().message;
  EXPECT_DOUBLE_EQ(bom->at("H100 SXM 80GB"), 2.49);
}

TEST(FitSearch, CheapestWithPrices) {
  ModelSpec model;
  model.id = "toy";
  Job job = full_job();
  job.micro_batch_size = 1;
  // 66 GiB. H100 (79.6 GiB, target 63.7): 2 cards with full sharding (2 + 7 + 21 + 8 = 38), 6.00
  // an hour. L40S (45 GiB, target 36): 4 cards (2 + 3.5 + 10.5 + 8 = 24), 4.00 an hour.
  FitOptions o = card(24);
  o.prices = {{"H100 SXM 80GB", 3.0}, {"L40S 48GB", 1.0}};
  auto r = fit_job(model, job, o, toy_estimator);
  ASSERT_TRUE(r.ok());
  auto cheapest = std::find_if(r->alternatives.begin(), r->alternatives.end(),
                               [](const FitAlternative& a) { return a.change.id == "cheapest_gpu"; });
  ASSERT_NE(cheapest, r->alternatives.end());
  EXPECT_EQ(cheapest->gpu_name, "L40S 48GB");
  EXPECT_EQ(cheapest->num_gpus, 4u);
  EXPECT_DOUBLE_EQ(*cheapest->price_per_hour, 4.0);
}

TEST(FitSearch, GpuCountFromFlagJobOrLayout) {
  Job job;
  EXPECT_EQ(fit_gpu_count(job, std::nullopt), 1u);
  job.tp = 2;
  job.pp = 2;
  EXPECT_EQ(fit_gpu_count(job, std::nullopt), 4u);
  job.num_gpus = 8;
  EXPECT_EQ(fit_gpu_count(job, std::nullopt), 8u);
  EXPECT_EQ(fit_gpu_count(job, 16), 16u);
}

}  // namespace
}  // namespace oomdoc
