// The search against the real estimator, for a set of jobs that do not fit: the plan's predicted
// peak is the estimator's for the plan's job and under the budget (the target where it says so),
// and no cheaper step alone would have reached the plan's goal.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "analyses/estimator.h"
#include "analyses/fit_search.h"
#include "readers/gpu_catalog.h"
#include "readers/job_file.h"
#include "readers/model_resolver.h"

namespace oomdoc {
namespace {

struct PlanCase {
  std::string name;
  std::string model;
  std::string gpu;
  uint64_t gpus;
  Job job;
  std::string model_parallel_change = "";   // the TP/PP change the plan must end with, if any
};

Job training(std::string task, uint64_t micro_batch, uint64_t seq_len) {
  Job job;
  job.task = std::move(task);
  job.micro_batch_size = micro_batch;
  job.grad_accum_steps = 2;
  job.seq_len = seq_len;
  if (*job.task == "train_lora") {
    job.lora = LoraSettings{};
    job.lora->all_linear = true;
  }
  return job;
}

// A QLoRA job of one sequence with the fused loss and a paged 8-bit optimizer (the cheap steps
// already taken), for the k-bit preparation tests.
Job qlora_job(uint64_t seq_len, const std::string& attention) {
  Job job;
  job.task = "train_qlora";
  job.micro_batch_size = 1;
  job.seq_len = seq_len;
  job.attention_impl = attention;
  job.loss_impl = "fused_linear";
  job.optimizer = "paged_adamw_8bit";
  return job;
}

// The ids of a plan's changes, in order.
std::vector<std::string> change_ids(const FitReport& report) {
  std::vector<std::string> ids;
  if (report.plan) {
    for (const auto& c : report.plan->changes) ids.push_back(c.id);
  }
  return ids;
}

// What fit compares with the card for a job: the estimate's device total without the allocator's
// reclaimable cache (0, and a failure, when the job cannot be estimated).
uint64_t needed_bytes(const ModelSpec& model, const Job& job) {
  auto e = estimate_memory(model, job);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e ? oom_view(*e).device_used_bytes : 0;
}

Job inference(uint64_t batch, uint64_t prompt, uint64_t new_tokens) {
  Job job;
  job.task = "inference";
  job.precision = "bf16";
  job.batch_size = batch;
  job.prompt_len = prompt;
  job.max_new_tokens = new_tokens;
  return job;
}

// Fit options for n of a catalog GPU, as `oomdoc fit --gpu NAME --gpus N` builds them.
FitOptions options_for(const GpuSpec& gpu, uint64_t n) {
  FitOptions options;
  set_fit_gpu(options, gpu);
  options.num_gpus = n;
  return options;
}

// `oomdoc fit MODEL --gpu GPU --gpus N` for a job, with the resolved model (to re-estimate plans).
struct Fitted {
  ModelSpec model;
  FitReport report;
};
Result<Fitted> fit_on(const std::string& model_id, const std::string& gpu_name, Job job, uint64_t gpus,
                      const std::function<void(FitOptions&)>& tweak = {}) {
  auto model = resolve_model(model_id);
  if (!model) return model.error();
  auto gpu = find_gpu(gpu_name);
  if (!gpu) return gpu.error();
  job.model = model_id;
  FitOptions options = options_for(*gpu, gpus);
  if (tweak) tweak(options);
  auto report = fit_job(*model, job, options);
  if (!report) return report.error();
  return Fitted{std::move(*model), std::move(*report)};
}

std::vector<PlanCase> cases() {
  std::vector<PlanCase> out = {
      {"llama2_7b_full_on_4090", "meta-llama/Llama-2-7b-hf", "4090", 1, training("train_full", 8, 2048)},
      {"llama3_8b_lora_on_t4", "meta-llama/Meta-Llama-3-8B", "t4", 1, training("train_lora", 4, 2048)},
      {"mistral_7b_full_on_a100_80", "mistralai/Mistral-7B-v0.1", "a100-80", 1, training("train_full", 4, 4096)},
      {"qwen25_7b_full_on_2_a100_40", "Qwen/Qwen2.5-7B", "a100 40gb", 2, training("train_full", 2, 2048)},
      {"llama2_13b_lora_on_4090", "meta-llama/Llama-2-13b-hf", "4090", 1, training("train_lora", 2, 4096)},
      {"tinyllama_full_on_t4", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "t4", 1, training("train_full", 16, 2048)},
      {"gpt2_xl_full_fp32_on_3060", "gpt2-xl", "3060", 1, training("train_full", 8, 1024)},
      {"llama31_70b_lora_on_8_h100", "meta-llama/Llama-3.1-70B", "h100", 8, training("train_lora", 4, 8192)},
      // Long context on GPUs without NVLink: LoRA/QLoRA (on a 16-bit base) leave one block's
      // recompute too large, so the method is kept and tensor (x pipeline) parallel splits the
      // activations.
      {"llama31_8b_full_96k_on_8_4090", "meta-llama/Llama-3.1-8B", "4090", 8, training("train_full", 1, 98304),
       "tensor_pipeline_parallel"},
      // Inference on several GPUs: the model is split (TP over NVLink, PP over PCIe).
      {"llama31_70b_inference_on_4_a100_80", "meta-llama/Llama-3.1-70B", "a100-80", 4, inference(8, 4096, 512),
       "tensor_parallel"},
      {"llama31_70b_inference_on_4_l40s", "meta-llama/Llama-3.1-70B", "l40s", 4, inference(1, 2048, 256),
       "tensor_pipeline_parallel"},
      {"llama31_8b_full_128k_on_8_a100_80", "meta-llama/Llama-3.1-8B", "a100-80", 8, training("train_full", 1, 131072),
       "tensor_parallel"},
      {"llama31_8b_full_96k_on_4_l40s", "meta-llama/Llama-3.1-8B", "l40s", 4, training("train_full", 1, 98304),
       "tensor_pipeline_parallel"},
  };
  // llama.cpp jobs: its own ladder (flash attention, q8_0 cache, smaller GGUF, context, -ngl).
  Job gguf = inference(1, 65536, 0);
  gguf.precision.reset();
  gguf.implementation = "llama_cpp";
  gguf.weight_quantization = "q4_k_m";
  out.push_back({"llama31_8b_q4km_64k_llama_cpp_on_3060", "meta-llama/Llama-3.1-8B", "3060", 1, gguf});
  Job big = gguf;
  big.prompt_len = 8192;
  out.push_back({"llama31_70b_q4km_llama_cpp_on_4090", "meta-llama/Llama-3.1-70B", "4090", 1, big});
  out[8].job.attention_impl = "flash";
  out[11].job.attention_impl = "flash";
  out[12].job.attention_impl = "flash";
  out[6].job.precision = "fp32";
  out[6].job.attention_impl = "eager";
  return out;
}

class FitPlanProperty : public ::testing::TestWithParam<PlanCase> {};

TEST_P(FitPlanProperty, PlanFitsAndNoCheaperStepAloneWould) {
  const PlanCase& c = GetParam();
  auto model = resolve_model(c.model);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto gpu = find_gpu(c.gpu);
  ASSERT_TRUE(gpu.ok()) << gpu.error().message;
  Job job = c.job;
  job.model = c.model;
  FitOptions options = options_for(*gpu, c.gpus);
  auto report = fit_job(*model, job, options);
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_FALSE(report->fits_target) << "the case should need a plan";
  ASSERT_TRUE(report->plan.has_value());
  const FitPlan& plan = *report->plan;
  ASSERT_FALSE(plan.changes.empty());
  // The plan's job is one `oomdoc estimate --job` accepts.
  auto valid = validate_job(plan.job, "plan");
  EXPECT_TRUE(valid.ok()) << valid.error().message;

  // The plan's totals are the estimator's for the plan's job, under the budget (and the target
  // when the plan says so).
  if (plan.changes.front().step != 9) {
    const uint64_t check = needed_bytes(*model, plan.job);
    EXPECT_EQ(check, plan.predicted.needed_bytes);
    EXPECT_EQ(plan.changes.back().predicted->needed_bytes, plan.predicted.needed_bytes);
    EXPECT_LE(plan.predicted.needed_bytes, report->usable_bytes);
    if (plan.fits_target) {
      EXPECT_LE(plan.predicted.needed_bytes, report->target_bytes);
    }
  }
  // Steps are in cost order, each change lowers the prediction.
  uint64_t previous = report->needed_bytes;
  int previous_step = 0;
  for (const auto& change : plan.changes) {
    EXPECT_GE(change.step, previous_step) << change.id;
    previous_step = change.step;
    if (change.step == 9) continue;
    ASSERT_TRUE(change.predicted.has_value()) << change.id << ": not a valid job after the changes before it";
    EXPECT_LT(change.predicted->needed_bytes, previous) << change.id;
    previous = change.predicted->needed_bytes;
  }
  // No cheaper step alone reaches what the plan reaches.
  const int last_step = plan.changes.back().step;
  const uint64_t goal = plan.fits_target ? report->target_bytes : report->usable_bytes;
  for (const auto& alternative : report->alternatives) {
    if (alternative.change.step >= last_step) continue;
    EXPECT_GT(alternative.predicted.needed_bytes, goal)
        << alternative.description << " alone would have fit, cheaper than " << plan.changes.back().id;
  }
  if (!c.model_parallel_change.empty()) {
    EXPECT_EQ(plan.changes.back().id, c.model_parallel_change);
  }
  // A TP/PP layout is the sharding step's dearest kind of option: ZeRO-2 or FSDP over all the GPUs
  // instead, with everything else in the plan, would not have reached the goal.
  if (is_model_parallel(plan.changes.back()) && report->job.task != "inference") {
    for (const char* sharding : {"zero2", "fsdp_full_shard"}) {
      Job instead = plan.job;
      instead.tp = 1;
      instead.pp = 1;
      instead.grad_accum_steps = report->job.grad_accum_steps;
      instead.num_gpus = c.gpus;
      instead.parallelism = sharding;
      instead.sync_each_batch = true;  // as fit's FSDP change sets it
      const uint64_t e = needed_bytes(*model, instead);
      EXPECT_GT(e, goal) << sharding << " would have fit instead of TP/PP";
    }
  }
}

// The same property for the "without changing the training method" alternative, whose sharding
// step is where TP/PP layouts enter a full fine-tuning plan: its prediction is the estimator's
// for its job, under the goal, and FSDP in place of its TP/PP layout would not have been enough.
TEST(FitPlan, SameMethodAlternativeKeepsFullFineTuning) {
  // Llama-3.1-70B full fine-tuning at 8k tokens on 16 x H100: the plan is QLoRA (step 6);
  // keeping full fine-tuning takes the sharding step (7): FSDP over the 16 GPUs.
  Job job = training("train_full", 1, 8192);
  job.attention_impl = "flash";
  auto fitted = fit_on("meta-llama/Llama-3.1-70B", "h100", job, 16);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const ModelSpec* model = &fitted->model;
  const FitReport* report = &fitted->report;
  ASSERT_TRUE(report->plan.has_value());
  EXPECT_EQ(report->plan->changes.back().id, "qlora");
  auto same = std::find_if(report->alternatives.begin(), report->alternatives.end(),
                           [](const FitAlternative& a) { return a.change.id == "same_method"; });
  ASSERT_NE(same, report->alternatives.end());
  ASSERT_TRUE(same->job.has_value());
  const uint64_t check = needed_bytes(*model, *same->job);
  EXPECT_EQ(check, same->predicted.needed_bytes);
  const uint64_t goal = same->fits_target ? report->target_bytes : report->usable_bytes;
  EXPECT_LE(same->predicted.needed_bytes, goal);
  EXPECT_EQ(same->job->task, "train_full");
  EXPECT_EQ(same->job->parallelism, "fsdp_full_shard");
  EXPECT_EQ(same->job->num_gpus, 16u);
  EXPECT_EQ(same->change.step, 7);
}

// Llama-3.1-8B full fine-tuning at batch 8 x 2048 on one H100: pure bf16 weights, gradients and
// optimizer states (step 5) fit before LoRA (step 6) changes the method.
TEST(FitPlan, PureBf16KeepsFullFineTuningBeforeLora) {
  auto fitted = fit_on("meta-llama/Llama-3.1-8B", "h100", training("train_full", 8, 2048), 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitReport& report = fitted->report;
  ASSERT_TRUE(report.plan.has_value());
  const auto ids = change_ids(report);
  EXPECT_NE(std::find(ids.begin(), ids.end(), "pure_bf16"), ids.end());
  EXPECT_EQ(std::find(ids.begin(), ids.end(), "lora"), ids.end());
  EXPECT_EQ(report.plan->job.task, "train_full");
  EXPECT_EQ(report.plan->job.precision, "bf16");
  EXPECT_EQ(needed_bytes(fitted->model, report.plan->job), report.plan->predicted.needed_bytes);
  EXPECT_LE(report.plan->predicted.needed_bytes, report.target_bytes);
  // Without bf16 on the card (a V100), the step is not offered.
  auto v100 = fit_on("meta-llama/Llama-3.1-8B", "v100-32", training("train_full", 8, 2048), 1);
  ASSERT_TRUE(v100.ok()) << v100.error().message;
  const auto v100_ids = change_ids(v100->report);
  EXPECT_EQ(std::find(v100_ids.begin(), v100_ids.end(), "pure_bf16"), v100_ids.end());
}

// Inference on the GPUs the user has: the split across them comes before any cut in quality or
// throughput, and later steps build on it. Llama-3.1-70B at batch 8 x 8192 tokens on 2 x A100 80GB:
// tensor parallel 2, then 8-bit weights; the batch stays 8 (not halved and quantized to 4 bits).
TEST(FitPlan, InferenceUsesTheGpusItHasBeforeCuttingTheBatch) {
  Job job;
  job.task = "inference";
  job.batch_size = 8;
  job.prompt_len = 8192;
  auto fitted = fit_on("meta-llama/Llama-3.1-70B", "a100-80", job, 2);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitReport& report = fitted->report;
  ASSERT_TRUE(report.plan.has_value());
  std::vector<std::string> ids;
  for (const auto& c : report.plan->changes) ids.push_back(c.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"tensor_parallel", "quantize_int8"}));
  EXPECT_EQ(report.plan->job.batch_size, 8u);
  EXPECT_EQ(report.plan->job.tp, 2u);
  EXPECT_EQ(report.plan->predicted.needed_bytes, needed_bytes(fitted->model, report.plan->job));
  EXPECT_LE(report.plan->predicted.needed_bytes, report.target_bytes);
}

INSTANTIATE_TEST_SUITE_P(Jobs, FitPlanProperty, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// FSDP accumulating under no_sync holds unsharded gradients: syncing every micro-batch is the
// plan (one setting, tried right after the micro-batch), before any method or hardware change.
TEST(FitPlan, FsdpAccumulationIsFixedBySyncingEachMicroBatch) {
  Job job = training("train_full", 1, 2048);
  job.precision = "bf16_mixed";
  job.grad_accum_steps = 8;
  job.gradient_checkpointing = "full";
  job.parallelism = "fsdp_full_shard";
  job.num_gpus = 4;
  auto fitted = fit_on("meta-llama/Llama-2-7b-hf", "l40s", job, 4);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const ModelSpec* model = &fitted->model;
  const FitReport* report = &fitted->report;
  EXPECT_FALSE(report->fits);
  ASSERT_TRUE(report->plan.has_value());
  ASSERT_EQ(report->plan->changes.size(), 1u);
  EXPECT_EQ(report->plan->changes[0].id, "sync_each_batch");
  EXPECT_EQ(report->plan->changes[0].fix_id, "fsdp_sync_each_batch");
  EXPECT_TRUE(report->plan->job.sync_each_batch.value_or(false));
  job.sync_each_batch = true;
  const uint64_t synced = needed_bytes(*model, job);
  EXPECT_EQ(report->plan->predicted.needed_bytes, synced);
}

// A QLoRA job prepared by PEFT (fp32 embeddings, norms and head, so fp32 hidden states): keeping
// them in bf16 is a step-4 change, taken before offload or a bigger GPU, and it keeps the
// gradient checkpointing the preparation turned on.
TEST(FitPlan, QloraKeepsTheHiddenStatesInBf16BeforeOffloading) {
  Job job = qlora_job(8192, "flash");
  job.lora = LoraSettings{};
  job.lora->all_linear = true;
  auto fitted = fit_on("meta-llama/Llama-3.1-70B", "a100-80", job, 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitReport& report = fitted->report;
  EXPECT_FALSE(report.fits);
  ASSERT_TRUE(report.plan.has_value());
  ASSERT_EQ(report.plan->changes.size(), 1u);
  EXPECT_EQ(report.plan->changes[0].id, "bf16_hidden_states");
  EXPECT_EQ(report.plan->changes[0].step, 4);
  EXPECT_EQ(report.plan->job.kbit_upcast, "none");
  EXPECT_EQ(report.plan->job.gradient_checkpointing, "full");
  job.kbit_upcast = "none";
  job.gradient_checkpointing = "full";
  const uint64_t kept = needed_bytes(fitted->model, job);
  EXPECT_EQ(report.plan->predicted.needed_bytes, kept);
}

// The same change for an fp32 QLoRA job is its own step: bf16 mixed precision is still offered,
// and a plan keeps both when both are needed.
TEST(FitPlan, Bf16HiddenStatesDoesNotHideMixedPrecision) {
  Job job = qlora_job(32768, "sdpa");
  job.precision = "fp32";
  job.kbit_upcast = "all";
  auto fitted = fit_on("meta-llama/Llama-3.1-8B", "a100 40gb", job, 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitReport& report = fitted->report;
  ASSERT_TRUE(report.plan.has_value());
  EXPECT_THAT(change_ids(report), ::testing::Contains("mixed_precision"));
  // For a frozen base the precision change loads it in 16 bits under autocast (no fp32 master).
  EXPECT_EQ(report.plan->job.precision, "bf16");
  EXPECT_EQ(report.plan->job.autocast, true);
  // The plan's prediction is the estimator's for the plan's job, within the target.
  const uint64_t again = needed_bytes(fitted->model, report.plan->job);
  EXPECT_EQ(report.plan->predicted.needed_bytes, again);
  EXPECT_LE(report.plan->predicted.needed_bytes, report.target_bytes);
}

// A change the others made unnecessary is dropped, the last one included: a QLoRA job that the
// fused loss and checkpointing bring under the target gets no offload and no precision change.
TEST(FitPlan, NoChangeTheRestDoesNotNeed) {
  Job job;
  job.task = "train_qlora";
  job.micro_batch_size = 1;
  job.seq_len = 16384;
  job.kbit_upcast = "none";
  auto fitted = fit_on("meta-llama/Llama-3.1-8B", "4090", job, 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  ASSERT_TRUE(fitted->report.plan.has_value());
  EXPECT_THAT(change_ids(fitted->report), ::testing::ElementsAre("fused_loss", "gradient_checkpointing"));
}

// A llama.cpp job: no PyTorch allocator advice, and llama.cpp's own settings in the plan.
TEST(FitPlan, LlamaCppJobsGetLlamaCppSettings) {
  Job job = inference(1, 65536, 0);
  job.precision.reset();
  job.implementation = "llama_cpp";
  job.weight_quantization = "q4_k_m";
  auto fitted = fit_on("meta-llama/Llama-3.1-8B", "3060", job, 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitReport& report = fitted->report;
  EXPECT_TRUE(report.free_advice.empty());
  ASSERT_TRUE(report.plan.has_value());
  // 8 GiB of f16 KV at 65,536 tokens: the q8_0 cache (with -fa) is the cheapest change that fits.
  ASSERT_EQ(report.plan->changes.size(), 1u);
  EXPECT_EQ(report.plan->changes[0].id, "llama_kv_cache_type");
  EXPECT_EQ(report.plan->job.kv_cache_dtype, "q8_0");
  EXPECT_EQ(report.plan->job.attention_impl, "flash");
  for (const auto& s : report.plan->changes[0].settings) EXPECT_EQ(s.target, "llama.cpp");
  // The solvers vary llama.cpp's sequences and context (not training's micro-batch): a job
  // without a task once solved 65,536 / 8,388,608 as if it were training. The longest prompt is
  // exact: it fits the budget and one token more does not.
  Job untasked = job;
  untasked.task.reset();
  auto solved = fit_on("meta-llama/Llama-3.1-8B", "3060", untasked, 1, [](FitOptions& o) {
    o.solve_max_batch = true;
    o.solve_max_seq = true;
  });
  ASSERT_TRUE(solved.ok()) << solved.error().message;
  ASSERT_TRUE(solved->report.max_seq_len.has_value());
  Job at = job;
  at.prompt_len = *solved->report.max_seq_len;
  EXPECT_LE(needed_bytes(solved->model, at), solved->report.usable_bytes);
  at.prompt_len = *at.prompt_len + 1;
  EXPECT_GT(needed_bytes(solved->model, at), solved->report.usable_bytes);
  // One 65,536-token sequence does not fit: no number of sequences does.
  EXPECT_FALSE(solved->report.max_micro_batch.has_value() && *solved->report.max_micro_batch > 0);
}


TEST(FitPlan, LigerIsOfferedOnlyWhereItPatchesTheModel) {
  // Llama-3.1-8B LoRA at 8 x 4096 tokens on a 4090 (like the README's example): the plan takes
  // Liger's kernels, and its job says so (the estimator then counts the fused norms and SwiGLU,
  // not only the fused loss).
  auto llama = fit_on("meta-llama/Llama-3.1-8B", "4090", training("train_lora", 8, 4096), 1);
  ASSERT_TRUE(llama.ok()) << llama.error().message;
  ASSERT_TRUE(llama->report.plan.has_value());
  EXPECT_THAT(change_ids(llama->report), ::testing::Contains("fused_loss"));
  EXPECT_EQ(llama->report.plan->job.kernels, "liger");
  EXPECT_EQ(llama->report.plan->job.loss_impl, "fused_linear");
  // A job with Liger's norm and MLP kernels but not its loss (Axolotl's per-kernel keys) is
  // still offered the fused loss.
  Job norms_only = training("train_lora", 8, 4096);
  norms_only.kernels = "liger";
  norms_only.loss_impl = "standard";
  auto partial = fit_on("meta-llama/Llama-3.1-8B", "4090", norms_only, 1);
  ASSERT_TRUE(partial.ok()) << partial.error().message;
  EXPECT_THAT(change_ids(partial->report), ::testing::Contains("fused_loss"));
  EXPECT_EQ(partial->report.plan->job.loss_impl, "fused_linear");
  // GPT-2: Liger has no kernels for it and the Trainer's flag would change nothing.
  Job gpt2_job = training("train_full", 8, 1024);
  gpt2_job.attention_impl = "eager";
  auto gpt2 = fit_on("gpt2-xl", "3060", gpt2_job, 1);
  ASSERT_TRUE(gpt2.ok()) << gpt2.error().message;
  ASSERT_TRUE(gpt2->report.plan.has_value());
  EXPECT_THAT(change_ids(gpt2->report), ::testing::Not(::testing::Contains("fused_loss")));
  for (const auto& a : gpt2->report.alternatives) EXPECT_NE(a.change.id, "fused_loss");
}

// gpt-oss has no SDPA and no FlashAttention-2 path in transformers (its sinks join the softmax):
// every attention change names the kernels hub's FA3 build, the one TRL's padding-free batches
// accept for it, never "sdpa" or "flash_attention_2", which from_pretrained would refuse.
TEST(FitPlan, GptOssAttentionChangesNameItsOwnFlashKernel) {
  auto fitted = fit_on("openai/gpt-oss-20b", "h100-80", training("train_lora", 4, 2048), 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  std::vector<FitChange> changes;
  if (fitted->report.plan) changes = fitted->report.plan->changes;
  for (const auto& a : fitted->report.alternatives) changes.push_back(a.change);
  bool attention_named = false;
  for (const auto& c : changes) {
    for (const auto& s : c.settings) {
      if (s.name != "attn_implementation") continue;
      EXPECT_EQ(s.value, "\"kernels-community/vllm-flash-attn3\"") << c.id;
      attention_named = true;
    }
  }
  EXPECT_TRUE(attention_named);
  // That kernel is FlashAttention-3: Hopper only. On an A100 no attention change is offered.
  auto ampere = fit_on("openai/gpt-oss-20b", "a100-80", training("train_lora", 4, 2048), 1);
  ASSERT_TRUE(ampere.ok()) << ampere.error().message;
  std::vector<FitChange> ampere_changes;
  if (ampere->report.plan) ampere_changes = ampere->report.plan->changes;
  for (const auto& a : ampere->report.alternatives) ampere_changes.push_back(a.change);
  for (const auto& c : ampere_changes) {
    for (const auto& s : c.settings) EXPECT_NE(s.name, "attn_implementation") << c.id;
  }
  // Llama keeps the usual names.
  auto llama = fit_on("meta-llama/Llama-3.1-8B", "4090", training("train_lora", 8, 4096), 1);
  ASSERT_TRUE(llama.ok());
  for (const auto& a : llama->report.alternatives) {
    for (const auto& s : a.change.settings) {
      if (s.name == "attn_implementation") {
        EXPECT_NE(s.value, "\"kernels-community/vllm-flash-attn3\"");
      }
    }
  }
}

// The QLoRA step's LoraConfig is the LoRA step's (r, alpha, all linear layers, task_type), with
// the base quantized: a plan that says one without the other's task_type would build a
// different model.
TEST(FitPlan, QloraChangeNamesTheSameLoraConfigAsLora) {
  Job job = training("train_full", 1, 8192);
  job.attention_impl = "flash";
  auto fitted = fit_on("meta-llama/Llama-3.1-70B", "h100", job, 16);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  ASSERT_TRUE(fitted->report.plan.has_value());
  const FitChange& qlora = fitted->report.plan->changes.back();
  ASSERT_EQ(qlora.id, "qlora");
  std::vector<std::string> lora_config;
  for (const auto& s : qlora.settings) {
    if (s.target == "LoraConfig") lora_config.push_back(s.name + "=" + s.value);
  }
  EXPECT_EQ(lora_config, (std::vector<std::string>{"r=16", "lora_alpha=32", "target_modules=\"all-linear\"",
                                                   "task_type=\"CAUSAL_LM\""}));
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// QA round 3: full fine-tuning in bf16 mixed precision holds fp32 weights; LoRA's frozen base loads
// in 16 bits, and the plan says so (torch_dtype) and predicts it so (the plan's job re-estimates to
// the plan's figure).
TEST(FitPlanQa3, LoraLoadsTheFrozenBaseIn16Bits) {
  Job job = training("train_full", 8, 2048);
  job.precision = "bf16_mixed";
  auto fitted = fit_on("meta-llama/Llama-2-7b-hf", "4090", job, 2);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitReport& report = fitted->report;
  ASSERT_TRUE(report.plan.has_value());
  const FitChange& last = report.plan->changes.back();
  ASSERT_TRUE(last.id == "lora" || last.id == "qlora") << last.id;
  EXPECT_EQ(report.plan->job.precision, "bf16");
  EXPECT_TRUE(std::any_of(last.settings.begin(), last.settings.end(), [](const FitSetting& s) {
    return s.target == "from_pretrained" && s.name == "torch_dtype" && s.value == "torch.bfloat16";
  }));
  EXPECT_EQ(needed_bytes(fitted->model, report.plan->job), report.plan->predicted.needed_bytes);
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// Inference keeps no effective batch: the largest batch that reaches the goal, not the next half.
TEST(FitPlanQa3, InferenceBatchIsTheLargestThatFits) {
  Job job;
  job.task = "inference";
  job.batch_size = 16;
  job.prompt_len = 512;
  job.max_new_tokens = 512;
  auto fitted = fit_on("meta-llama/Llama-3.1-8B", "l4", job, 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitReport& report = fitted->report;
  ASSERT_TRUE(report.plan.has_value());
  const FitChange& change = report.plan->changes.front();
  EXPECT_EQ(change.id, "batch_size");
  EXPECT_EQ(change.fix_id, "smaller_inference_batch");
  const uint64_t chosen = *report.plan->job.batch_size;
  Job one_more = report.plan->job;
  one_more.batch_size = chosen + 1;
  const uint64_t goal = report.plan->fits_target ? report.target_bytes : report.usable_bytes;
  EXPECT_GT(needed_bytes(fitted->model, one_more), goal);
  EXPECT_GT(chosen, 8u);
}

// A LoRA job with PEFT's default targets (q_proj, v_proj) is re-sized by the QLoRA step with the
// all-linear adapters of QLoRA's recipe: the step says so, instead of switching targets silently.
TEST(FitPlan, QloraOnADefaultLoraJobSaysItTargetsAllLinearLayers) {
  Job job = training("train_lora", 4, 4096);
  job.lora.reset();   // no targets given: PEFT's defaults
  auto fitted = fit_on("meta-llama/Llama-2-70b-hf", "A100 SXM4 80GB", job, 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  ASSERT_TRUE(fitted->report.plan.has_value());
  const FitChange& qlora = fitted->report.plan->changes.back();
  ASSERT_EQ(qlora.id, "qlora");
  ASSERT_FALSE(qlora.settings.empty());
  EXPECT_EQ(qlora.settings[0].target + "." + qlora.settings[0].name + "=" + qlora.settings[0].value,
            "LoraConfig.target_modules=\"all-linear\"");
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

const FitAlternative* alternative(const FitReport& report, const std::string& id) {
  for (const auto& a : report.alternatives) {
    if (a.change.id == id) return &a;
  }
  return nullptr;
}

std::optional<std::string> setting(const FitChange& change, const std::string& name) {
  for (const auto& s : change.settings) {
    if (s.name == name) return s.value;
  }
  return std::nullopt;
}

// QLoRA on two T4s: FSDP's CPU offload is an FSDP setting, so the plan keeps the FSDP change it
// was made for (params offload under DDP is no job), and stores the 4-bit weights as fp16 to shard.
TEST(FitPlan, FsdpOffloadKeepsTheShardingItNeeds) {
  Job job;
  job.task = "train_qlora";
  job.micro_batch_size = 2;
  job.seq_len = 2048;
  auto fitted = fit_on("mistralai/Mixtral-8x7B-v0.1", "t4", job, 2);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitReport& report = fitted->report;
  ASSERT_TRUE(report.plan.has_value());
  EXPECT_EQ(change_ids(report), (std::vector<std::string>{"bf16_hidden_states", "fsdp_full_shard", "offload_params"}));
  EXPECT_EQ(report.plan->job.parallelism, "fsdp_full_shard");
  EXPECT_EQ(report.plan->job.offload, std::vector<std::string>{"params"});
  EXPECT_EQ(setting(report.plan->changes[1], "bnb_4bit_quant_storage"), "torch.float16");
  EXPECT_TRUE(validate_job(report.plan->job, "plan").ok());
  EXPECT_EQ(report.plan->predicted.needed_bytes, needed_bytes(fitted->model, report.plan->job));
}

// A LoRA job already sharding its parameters (FSDP) that moves to QLoRA stores the 4-bit base in
// bf16, so FSDP can flatten it with the other parameters (PEFT's "FSDP + QLoRA").
TEST(FitPlan, QloraOnAShardedJobStoresTheBaseForSharding) {
  Job job = training("train_lora", 1, 4096);
  job.parallelism = "fsdp_full_shard";
  job.num_gpus = 2;
  job.gradient_checkpointing = "full";
  job.attention_impl = "flash";
  auto fitted = fit_on("meta-llama/Llama-3.1-70B", "h100 sxm", job, 2);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  ASSERT_TRUE(fitted->report.plan.has_value());
  const FitChange& last = fitted->report.plan->changes.back();
  ASSERT_EQ(last.id, "qlora");
  EXPECT_EQ(setting(last, "bnb_4bit_quant_storage"), "torch.bfloat16");
}

// bf16 asked for on a card without it (T4): the plan starts with fp16, as FlashAttention-2 there
// starts with SDPA, and is predicted in fp16; the job as read keeps its bf16 and a note says it
// will not run as given.
TEST(FitPlan, BfloatOnACardWithoutItStartsThePlanWithFp16) {
  Job job = training("train_lora", 1, 1024);
  job.grad_accum_steps = 1;
  job.precision = "bf16";
  auto fitted = fit_on("Qwen/Qwen3-4B", "t4", job, 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitReport& report = fitted->report;
  EXPECT_EQ(report.job.precision, "bf16");
  EXPECT_EQ(report.estimate.precision, "fp16");
  ASSERT_TRUE(report.plan.has_value());
  ASSERT_GE(report.plan->changes.size(), 2u);
  EXPECT_EQ(report.plan->changes[0].id, "precision_fp16");
  EXPECT_EQ(setting(report.plan->changes[0], "fp16"), "True");
  EXPECT_EQ(setting(report.plan->changes[0], "bf16"), "False");
  EXPECT_EQ(report.plan->job.precision, "fp16");
  EXPECT_EQ(report.plan->predicted.needed_bytes, needed_bytes(fitted->model, report.plan->job));
  Job fp16 = job;
  fp16.precision = "fp16";
  EXPECT_EQ(report.needed_bytes, needed_bytes(fitted->model, fp16));
  EXPECT_TRUE(std::any_of(report.notes.begin(), report.notes.end(), [](const std::string& n) {
    return n.find("a bf16 job will not run as given; use fp16 mixed precision (fp16=True), which is what is predicted") !=
           std::string::npos;
  }));
  // A bigger card takes the job as asked: bf16, on a card that has it.
  const FitAlternative* bigger = alternative(report, "bigger_gpu");
  ASSERT_NE(bigger, nullptr);
  auto card = find_gpu(*bigger->gpu_name);
  ASSERT_TRUE(card.ok());
  EXPECT_TRUE(card->bf16) << *bigger->gpu_name;
  // The 32 GB V100 holds as much as the 5090 but has no bf16: the 5090 is the card for the job as asked.
  EXPECT_EQ(*bigger->gpu_name, "GeForce RTX 5090 32GB");
  auto v100 = find_gpu("Tesla V100 SXM2 32GB");
  ASSERT_TRUE(v100.ok());
  EXPECT_FALSE(v100->bf16);
  EXPECT_LE(bigger->predicted.needed_bytes, v100->total_bytes * 4 / 5);
}

// Full fine-tuning trains the model's own weights: in fp16 they need fp32 masters (the Trainer's
// GradScaler refuses fp16 gradients), so pure bf16 becomes fp16 mixed precision, loaded in fp32.
TEST(FitPlan, PureBfloatFullFineTuneOnACardWithoutItBecomesFp16Mixed) {
  Job job = training("train_full", 1, 512);
  job.precision = "bf16";
  auto fitted = fit_on("Qwen/Qwen2.5-0.5B", "t4", job, 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitReport& report = fitted->report;
  EXPECT_EQ(report.estimate.precision, "fp16_mixed");
  ASSERT_TRUE(report.plan.has_value());
  EXPECT_EQ(report.plan->changes[0].id, "precision_fp16");
  EXPECT_EQ(report.plan->changes[0].title, "precision bf16 -> fp16_mixed: Tesla T4 16GB has no bfloat16");
  EXPECT_EQ(setting(report.plan->changes[0], "torch_dtype"), "torch.float32");
  EXPECT_EQ(report.plan->job.precision, "fp16_mixed");
}

// On several data-parallel GPUs the micro-batch step names the global batch it keeps, as the
// alternatives on more cards do.
TEST(FitPlan, MicroBatchStepNamesTheGlobalBatchOnSeveralGpus) {
  Job job = training("train_full", 8, 2048);
  auto fitted = fit_on("meta-llama/Llama-2-7b-hf", "4090", job, 2);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  ASSERT_TRUE(fitted->report.plan.has_value());
  const FitChange& first = fitted->report.plan->changes.front();
  ASSERT_EQ(first.id, "micro_batch");
  EXPECT_THAT(first.title, ::testing::HasSubstr("(global batch 32 kept: 16 per GPU x 2 GPUs)"));
}

// More cards that fit only at a smaller micro-batch are no alternative when that micro-batch fits
// the card one has (the plan says so); nor is a count that keeps no global batch. Llama-3-8B QLoRA at
// 2 x 4 x 4096 on an A10G: the plan is micro-batch 1; the alternative keeps micro-batch 2 and the
// global batch 8 on 2 cards.
TEST(FitPlan, MoreGpusAreAnAlternativeOnlyWhereTheCardsDoNotAlready) {
  Job job = training("train_qlora", 2, 4096);
  job.grad_accum_steps = 4;
  auto fitted = fit_on("meta-llama/Meta-Llama-3-8B", "a10g", job, 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  EXPECT_EQ(change_ids(fitted->report), std::vector<std::string>{"micro_batch"});
  const FitAlternative* more = alternative(fitted->report, "more_gpus");
  ASSERT_NE(more, nullptr);
  EXPECT_EQ(more->num_gpus, 2u);
  ASSERT_TRUE(more->job.has_value());
  EXPECT_EQ(more->job->micro_batch_size, 2u);
  EXPECT_EQ(more->job->grad_accum_steps, 2u);
  EXPECT_THAT(more->description, ::testing::HasSubstr("accumulation 4 -> 2 keeps the global batch 8"));
  EXPECT_EQ(more->predicted.needed_bytes, needed_bytes(fitted->model, *more->job));
}

// When no count keeps the global batch (2 x 1 does not fit two A100s, and more cards cannot keep
// 2), the smallest count that fits with a larger one is offered, saying so, at micro-batch 1: the
// nearest global batch the count allows, and the least memory.
TEST(FitPlan, MoreGpusThatChangeTheGlobalBatchWhenNoneKeepsIt) {
  Job job = training("train_full", 2, 2048);
  job.grad_accum_steps = 1;
  job.gradient_checkpointing = "full";
  auto fitted = fit_on("meta-llama/Llama-3.1-8B", "a100-80", job, 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitAlternative* more = alternative(fitted->report, "more_gpus");
  ASSERT_NE(more, nullptr);
  EXPECT_EQ(more->num_gpus, 4u);
  EXPECT_THAT(more->description, ::testing::HasSubstr("the global batch goes from 2 to 4 (micro-batch 1 x accumulation 1 x 4 GPUs)"));
  ASSERT_TRUE(more->job.has_value());
  EXPECT_EQ(more->job->micro_batch_size, 1u);
  EXPECT_EQ(more->predicted.needed_bytes, needed_bytes(fitted->model, *more->job));
}

// More cards keep the global batch: 2 x 16 on one A100 is 1 x 8 on each of 4 (more cards shard
// the weights and optimizer, not the activations, so the micro-batch is lowered too; at micro-batch
// 2 it takes 8 cards), and the alternative says how to shard and accumulate.
TEST(FitPlan, MoreGpusLowerTheAccumulationToKeepTheGlobalBatch) {
  Job job = training("train_full", 2, 2048);
  job.grad_accum_steps = 16;
  auto fitted = fit_on("meta-llama/Llama-3.1-8B", "a100-80", job, 1, [](FitOptions& o) {
    o.prices = {{"A100 SXM4 80GB", 1.79}, {"GeForce RTX 4090 24GB", 0.69}};
  });
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitAlternative* more = alternative(fitted->report, "more_gpus");
  ASSERT_NE(more, nullptr);
  EXPECT_EQ(more->num_gpus, 4u);
  ASSERT_TRUE(more->job.has_value());
  EXPECT_EQ(more->job->micro_batch_size, 1u);
  EXPECT_EQ(more->job->grad_accum_steps, 8u);
  EXPECT_EQ(more->job->parallelism, "fsdp_full_shard");
  EXPECT_EQ(setting(more->change, "per_device_train_batch_size"), "1");
  EXPECT_EQ(setting(more->change, "gradient_accumulation_steps"), "8");
  EXPECT_EQ(setting(more->change, "fsdp"), "\"full_shard auto_wrap\"");
  EXPECT_THAT(more->description, ::testing::HasSubstr("micro-batch 2 -> 1, accumulation 16 -> 8 keeps the global batch 32"));
  EXPECT_EQ(more->predicted.needed_bytes, needed_bytes(fitted->model, *more->job));
  // Micro-batch 1 alone does not fit the one card (else this would be no alternative).
  Job alone = job;
  alone.micro_batch_size = 1;
  alone.grad_accum_steps = 32;
  EXPECT_GT(needed_bytes(fitted->model, alone), fitted->report.usable_bytes);
  // At the micro-batch given it takes 8 cards: more than 4.
  Job on4 = *more->job;
  on4.micro_batch_size = 2;
  on4.grad_accum_steps = 4;
  EXPECT_GT(needed_bytes(fitted->model, on4), fitted->report.target_bytes);
  // The cheapest priced configuration says the same.
  const FitAlternative* cheapest = alternative(fitted->report, "cheapest_gpu");
  ASSERT_NE(cheapest, nullptr);
  EXPECT_EQ(cheapest->gpu_name, "A100 SXM4 80GB");
  EXPECT_EQ(cheapest->num_gpus, 4u);
  EXPECT_EQ(setting(cheapest->change, "fsdp"), "\"full_shard auto_wrap\"");
  EXPECT_EQ(setting(cheapest->change, "gradient_accumulation_steps"), "8");
}

// Serving on the 8 GPUs one has: tensor parallel 8 alone fits; it is not traded for a smaller
// batch at tensor parallel 4.
TEST(FitPlan, InferenceTakesTheWiderSplitOverABatchCut) {
  auto fitted = fit_on("meta-llama/Llama-3.1-70B", "h100 sxm", inference(64, 8192, 1024), 8);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitReport& report = fitted->report;
  EXPECT_EQ(change_ids(report), std::vector<std::string>{"tensor_parallel"});
  ASSERT_TRUE(report.plan.has_value());
  EXPECT_EQ(report.plan->job.tp, 8u);
  EXPECT_EQ(report.plan->job.batch_size, 64u);
}

// More cards for a model whose 8 KV heads split at most 8 ways, on an 8-GPU NVLink domain: tensor
// parallel 8, then pipeline stages.
TEST(FitPlan, MoreGpusForInferenceSplitWithinTheTensorParallelDomain) {
  auto fitted = fit_on("meta-llama/Llama-3.1-405B", "h100 sxm", inference(1, 2048, 256), 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitReport& report = fitted->report;
  ASSERT_TRUE(report.plan.has_value());
  EXPECT_EQ(change_ids(report), std::vector<std::string>{"more_gpus"});
  EXPECT_EQ(report.plan->num_gpus, 16u);
  EXPECT_EQ(report.plan->job.tp, 8u);
  EXPECT_EQ(report.plan->job.pp, 2u);
  EXPECT_EQ(setting(report.plan->changes[0], "--tensor-parallel-size"), "8");
  EXPECT_EQ(setting(report.plan->changes[0], "--pipeline-parallel-size"), "2");
}

// A T4 cannot run FlashAttention-2: the prediction is SDPA's, and the plan says so first.
TEST(FitPlan, FlashAttentionOnATuringCardIsPlannedAsSdpa) {
  Job job = training("train_full", 4, 2048);
  job.grad_accum_steps.reset();
  job.attention_impl = "flash";
  auto fitted = fit_on("meta-llama/Llama-3.2-1B", "t4", job, 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitReport& report = fitted->report;
  ASSERT_TRUE(report.plan.has_value());
  EXPECT_EQ(report.plan->changes.front().id, "attention_sdpa");
  EXPECT_EQ(setting(report.plan->changes.front(), "attn_implementation"), "\"sdpa\"");
  EXPECT_EQ(report.plan->job.attention_impl, "sdpa");
  Job sdpa = job;
  sdpa.model = "meta-llama/Llama-3.2-1B";
  sdpa.attention_impl = "sdpa";
  sdpa.precision = "fp16_mixed";
  EXPECT_EQ(report.needed_bytes, needed_bytes(fitted->model, sdpa));
  EXPECT_FALSE(report.will_not_run.empty());
  // The job as read keeps what was asked for.
  EXPECT_EQ(report.job.attention_impl, "flash");
  // A job that fits still gets the change it needs to run there, as its whole plan.
  Job small = training("train_lora", 1, 512);
  small.attention_impl = "flash";
  auto fits = fit_on("Qwen/Qwen2.5-0.5B", "v100", small, 1);
  ASSERT_TRUE(fits.ok()) << fits.error().message;
  EXPECT_TRUE(fits->report.fits);
  EXPECT_EQ(change_ids(fits->report), std::vector<std::string>{"attention_sdpa"});
  EXPECT_EQ(fits->report.plan->job.attention_impl, "sdpa");
}

// A move to another vendor's card says so in the plan too, not only among the alternatives.
TEST(FitPlan, AnotherVendorsCardIsNamedAsSuch) {
  Job job = training("train_full", 2, 2048);
  job.grad_accum_steps = 16;
  auto fitted = fit_on("meta-llama/Llama-3.1-8B", "4090", job, 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitAlternative* bigger = alternative(fitted->report, "bigger_gpu");
  ASSERT_NE(bigger, nullptr);
  EXPECT_EQ(bigger->gpu_name, "Instinct MI325X 256GB");
  EXPECT_EQ(bigger->change.title, "move to Instinct MI325X 256GB (256.00 GiB), an AMD card (ROCm)");
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// A batch cut that stays: the split that keeps the largest batch (TP 8 on the 8 cards there, not
// TP 4 with batch 47); and with 4-bit weights the split alone, with no cut at all.
TEST(FitPlan, InferenceSplitKeepsTheLargestBatch) {
  auto eight = fit_on("meta-llama/Llama-3.1-70B", "h100", inference(200, 4096, 512), 8);
  ASSERT_TRUE(eight.ok()) << eight.error().message;
  ASSERT_TRUE(eight->report.plan.has_value());
  EXPECT_EQ(change_ids(eight->report), (std::vector<std::string>{"batch_size", "tensor_parallel"}));
  EXPECT_EQ(eight->report.plan->job.tp, 8u);
  EXPECT_EQ(eight->report.plan->job.batch_size, 144u);
  // Batch 160 (the next candidate up) would not reach the target at TP 8.
  Job more = eight->report.plan->job;
  more.batch_size = 160;
  EXPECT_GT(needed_bytes(eight->model, more), eight->report.target_bytes);
  auto l4 = fit_on("meta-llama/Llama-3.1-70B", "l4", inference(16, 2048, 256), 4);
  ASSERT_TRUE(l4.ok()) << l4.error().message;
  ASSERT_TRUE(l4->report.plan.has_value());
  EXPECT_EQ(l4->report.plan->job.batch_size, 16u);
  EXPECT_EQ(l4->report.plan->predicted.needed_bytes, needed_bytes(l4->model, l4->report.plan->job));
}

// A plan that moves an inference job to one bigger card says one card in its job, as predicted.
TEST(FitPlan, BiggerGpuInferencePlanRunsOnOneCard) {
  auto fitted = fit_on("meta-llama/Llama-3.1-70B", "l4", inference(3, 1024, 128), 2);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  ASSERT_TRUE(fitted->report.plan.has_value());
  EXPECT_EQ(fitted->report.plan->num_gpus, 1u);
  EXPECT_EQ(fitted->report.plan->job.num_gpus, 1u);
  EXPECT_EQ(fitted->report.plan->predicted.needed_bytes, needed_bytes(fitted->model, fitted->report.plan->job));
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// QLoRA with PEFT's preparation checkpoints by itself on one GPU; sharded over more cards (where the
// preparation is skipped) the alternative asks for the checkpointing it was predicted with.
TEST(FitPlan, MoreGpusKeepTheCheckpointingTheJobWasPredictedWith) {
  Job job;
  job.task = "train_qlora";
  job.micro_batch_size = 1;
  job.grad_accum_steps = 4;
  job.seq_len = 2048;
  auto fitted = fit_on("meta-llama/Llama-3.1-70B", "l40s", job, 1);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitAlternative* more = nullptr;
  for (const auto& a : fitted->report.alternatives) {
    if (a.change.id == "more_gpus") more = &a;
  }
  ASSERT_NE(more, nullptr);
  EXPECT_EQ(more->num_gpus, 2u);
  ASSERT_TRUE(more->job.has_value());
  EXPECT_EQ(more->job->gradient_checkpointing, "full");
  EXPECT_EQ(more->job->grad_accum_steps, 2u);
  EXPECT_EQ(more->predicted.needed_bytes, needed_bytes(fitted->model, *more->job));
  bool asks = false;
  for (const auto& s : more->change.settings) asks |= s.name == "gradient_checkpointing" && s.value == "True";
  EXPECT_TRUE(asks);
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// The Trainer's FSDP over a 16-bit model under autocast keeps fp32 flat parameters (Accelerate
// upcasts them), as the config readers size such a config: a change to FSDP takes the job to
// bf16_mixed, and its figure is that job's estimate.
TEST(FitPlan, TrainerFsdpOverAnAutocastModelKeepsFp32Parameters) {
  Job job = training("train_full", 4, 8192);
  job.precision = "bf16";
  job.autocast = true;
  job.gradient_checkpointing = "full";
  auto fitted = fit_on("meta-llama/Meta-Llama-3-8B", "a100-80", job, 2);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  size_t fsdp_jobs = 0;
  for (const auto& a : fitted->report.alternatives) {
    if (!a.job || a.job->parallelism != "fsdp_full_shard" || a.job->tp.value_or(1) * a.job->pp.value_or(1) > 1) continue;
    ++fsdp_jobs;
    EXPECT_EQ(a.job->precision, "bf16_mixed") << a.change.title;
    EXPECT_EQ(a.predicted.needed_bytes, needed_bytes(fitted->model, *a.job)) << a.change.title;
  }
  EXPECT_GT(fsdp_jobs, 0u);
}

// A same-method combination that ends on a TP layout runs in torchtitan or Megatron-LM: no
// TrainingArguments beside their flags (the layout's cost says what the script must carry).
TEST(FitPlan, SameMethodWithATensorParallelLayoutHasNoTrainerArguments) {
  Job job = training("train_full", 2, 8192);
  job.grad_accum_steps = 8;
  auto fitted = fit_on("meta-llama/Llama-3.1-70B", "h100", job, 8);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitAlternative* same = nullptr;
  for (const auto& a : fitted->report.alternatives) {
    if (a.change.id == "same_method") same = &a;
  }
  ASSERT_NE(same, nullptr);
  bool torchtitan = false;
  for (const auto& s : same->change.settings) {
    EXPECT_NE(s.target, "TrainingArguments") << s.name;
    torchtitan |= s.target == "torchtitan";
  }
  EXPECT_TRUE(torchtitan);
  EXPECT_NE(same->change.cost.find("8-bit AdamW has no torchtitan or Megatron-LM flag"), std::string::npos);
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// Adapters train under the Trainer, which has no tensor parallelism: a TP job's LoRA and QLoRA
// options shard with FSDP instead, and are sized so.
TEST(FitPlan, AdaptersOnATensorParallelJobShardWithFsdp) {
  Job job = training("train_full", 1, 1024);
  job.grad_accum_steps.reset();
  job.gradient_checkpointing = "full";
  job.tp = 2;
  auto fitted = fit_on("meta-llama/Llama-3.1-8B", "a100 40gb", job, 2);
  ASSERT_TRUE(fitted.ok()) << fitted.error().message;
  const FitAlternative* qlora = nullptr;
  for (const auto& a : fitted->report.alternatives) {
    if (a.change.id == "qlora") qlora = &a;
  }
  ASSERT_NE(qlora, nullptr);
  ASSERT_TRUE(qlora->job.has_value());
  const Job& changed = *qlora->job;
  EXPECT_EQ(changed.task, "train_qlora");
  EXPECT_FALSE(changed.tp.has_value());
  EXPECT_EQ(changed.parallelism, "fsdp_full_shard");
  EXPECT_EQ(qlora->predicted.needed_bytes, needed_bytes(fitted->model, changed));
  bool fsdp = false, storage = false;
  for (const auto& s : qlora->change.settings) {
    fsdp |= s.name == "fsdp";
    storage |= s.name == "bnb_4bit_quant_storage";
  }
  EXPECT_TRUE(fsdp && storage);
}

}  // namespace
}  // namespace oomdoc
