// The search against the real estimator, for a set of jobs that do not fit: the plan's predicted
// peak is the estimator's for the plan's job and under the budget (the target where it says so),
// and no cheaper step alone would have reached the plan's goal.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "analyses/estimator.h"
#include "analyses/fit_search.h"
#include "readers/gpu_catalog.h"
#include "readers/model_resolver.h"

namespace oomdoc {
namespace {

struct PlanCase {
  std::string name;
  std::string model;
  std::string gpu;
  uint64_t gpus;
  Job job;
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
  };
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
  FitOptions options;
  options.gpu_name = gpu->name;
  options.total_bytes = gpu->total_bytes;
  options.gpu_has_bf16 = gpu->bf16;
  options.num_gpus = c.gpus;
  auto report = fit_job(*model, job, options);
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_FALSE(report->fits_target) << "the case should need a plan";
  ASSERT_TRUE(report->plan.has_value());
  const FitPlan& plan = *report->plan;
  ASSERT_FALSE(plan.changes.empty());

  // The plan's totals are the estimator's for the plan's job, under the budget (and the target
  // when the plan says so).
  if (plan.changes.front().step != 9) {
    auto check = estimate_memory(*model, plan.job);
    ASSERT_TRUE(check.ok()) << check.error().message;
    EXPECT_EQ(check->device_used_bytes, plan.predicted.device_used_bytes);
    EXPECT_EQ(plan.changes.back().predicted->device_used_bytes, plan.predicted.device_used_bytes);
    EXPECT_LE(plan.predicted.device_used_bytes, report->usable_bytes);
    if (plan.fits_target) EXPECT_LE(plan.predicted.device_used_bytes, report->target_bytes);
  }
  // Steps are in cost order, each change lowers the prediction.
  uint64_t previous = report->estimate.device_used_bytes;
  int previous_step = 0;
  for (const auto& change : plan.changes) {
    EXPECT_GE(change.step, previous_step) << change.id;
    previous_step = change.step;
    if (change.step == 9) continue;
    ASSERT_TRUE(change.predicted.has_value());
    EXPECT_LT(change.predicted->device_used_bytes, previous) << change.id;
    previous = change.predicted->device_used_bytes;
  }
  // No cheaper step alone reaches what the plan reaches.
  const int last_step = plan.changes.back().step;
  const uint64_t goal = plan.fits_target ? report->target_bytes : report->usable_bytes;
  for (const auto& alternative : report->alternatives) {
    if (alternative.change.step >= last_step) continue;
    EXPECT_GT(alternative.predicted.device_used_bytes, goal)
        << alternative.description << " alone would have fit, cheaper than " << plan.changes.back().id;
  }
}

INSTANTIATE_TEST_SUITE_P(Jobs, FitPlanProperty, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace oomdoc
