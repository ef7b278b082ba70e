// The full fit search (plan, alternatives, catalog GPUs, --max-batch, --max-seq) for a job that
// does not fit, against the obvious alternative: a grid search that estimates every combination
// of the same knobs and keeps the cheapest that fits. Run: build/bench/fit_bench
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>

#include "analyses/estimator.h"
#include "analyses/fit_search.h"
#include "core/units.h"
#include "readers/gpu_catalog.h"
#include "readers/model_resolver.h"

namespace {

using namespace oomdoc;

const ModelSpec& llama() {
  static ModelSpec model = [] {
    auto m = resolve_model("meta-llama/Llama-2-7b-hf");
    if (!m) {
      std::cerr << m.error().message << "\n";
      std::exit(2);
    }
    return *m;
  }();
  return model;
}

Job full_fine_tune() {
  Job job;
  job.model = "meta-llama/Llama-2-7b-hf";
  job.task = "train_full";
  job.precision = "bf16_mixed";
  job.optimizer = "adamw";
  job.micro_batch_size = 8;
  job.grad_accum_steps = 2;
  job.seq_len = 2048;
  job.gradient_checkpointing = "none";
  job.attention_impl = "sdpa";
  return job;
}

FitOptions rtx4090() {
  auto gpu = find_gpu("4090");  // the catalog's entry: one place for its memory
  if (!gpu) {
    std::cerr << gpu.error().message << "\n";
    std::exit(2);
  }
  FitOptions o;
  set_fit_gpu(o, *gpu);
  o.solve_max_batch = true;
  o.solve_max_seq = true;
  return o;
}

void BM_FitSearch(benchmark::State& state) {
  const Job job = full_fine_tune();
  const FitOptions options = rtx4090();
  for (auto _ : state) {
    auto report = fit_job(llama(), job, options);
    if (!report) state.SkipWithError(report.error().message.c_str());
    benchmark::DoNotOptimize(report);
  }
}
BENCHMARK(BM_FitSearch)->Unit(benchmark::kMillisecond);

// The same analysis with step 7's tensor/pipeline layouts in play, and the worst case of the
// search: Llama-3.1-8B full fine-tuning at 32k tokens on 8 x RTX 4090 (PCIe). The greedy search
// through LoRA/QLoRA finds nothing (one block's recompute is too large), so the search runs again
// keeping the method and ends at tensor parallel 4 with FSDP over the other 2 groups.
void BM_FitSearchEightGpusTensorPipeline(benchmark::State& state) {
  static const ModelSpec model = [] {
    auto m = resolve_model("meta-llama/Llama-3.1-8B");
    if (!m) {
      std::cerr << m.error().message << "\n";
      std::exit(2);
    }
    return *m;
  }();
  Job job = full_fine_tune();
  job.model = "meta-llama/Llama-3.1-8B";
  job.micro_batch_size = 1;
  job.grad_accum_steps = 4;
  job.seq_len = 32768;
  job.attention_impl = "flash";
  FitOptions options = rtx4090();
  options.num_gpus = 8;
  options.gpu_nvlink = false;
  options.gpu_interconnect = "PCIe Gen4 only; no NVLink and P2P disabled by the driver";
  options.solve_max_batch = true;
  options.solve_max_seq = true;
  for (auto _ : state) {
    auto report = fit_job(model, job, options);
    if (!report) state.SkipWithError(report.error().message.c_str());
    benchmark::DoNotOptimize(report);
  }
}
BENCHMARK(BM_FitSearchEightGpusTensorPipeline)->Unit(benchmark::kMillisecond);

// Every combination: micro-batch 1..8, 2 precisions, 3 optimizers, checkpointing on/off,
// full/LoRA/QLoRA, no offload / optimizer / optimizer+params.
void BM_GridSearch(benchmark::State& state) {
  const Job base = full_fine_tune();
  const uint64_t usable = static_cast<uint64_t>(24564.0 * kMiB * 0.80);
  for (auto _ : state) {
    int fitting = 0;
    for (uint64_t mb = 1; mb <= 8; ++mb)
      for (const char* precision : {"bf16_mixed", "bf16"})
        for (const char* optimizer : {"adamw", "adamw_8bit", "paged_adamw_8bit"})
          for (const char* checkpointing : {"none", "full"})
            for (const char* task : {"train_full", "train_lora", "train_qlora"})
              for (int offload = 0; offload < 3; ++offload) {
                Job j = base;
                j.micro_batch_size = mb;
                j.precision = precision;
                j.optimizer = optimizer;
                j.gradient_checkpointing = checkpointing;
                j.task = task;
                if (std::string(task) != "train_full") j.lora = LoraSettings{};
                if (std::string(task) == "train_qlora") j.weight_quantization = "nf4";
                if (offload > 0) {
                  j.parallelism = "zero3";
                  j.offload = offload == 1 ? std::vector<std::string>{"optimizer"}
                                           : std::vector<std::string>{"optimizer", "params"};
                }
                auto e = estimate_memory(llama(), j);
                fitting += e && oom_view(*e).device_used_bytes <= usable;  // as fit decides
              }
    benchmark::DoNotOptimize(fitting);
  }
}
BENCHMARK(BM_GridSearch)->Unit(benchmark::kMillisecond);

// The grid for the 8-GPU case: checkpointing x 2 optimizers x fused loss or not x 12 layouts of
// the 8 GPUs (DDP, ZeRO-2, FSDP, and TP/PP 2x1 4x1 8x1 1x2 1x4 1x8 2x2 2x4 4x2 with FSDP over the
// rest) x micro-batch 1..4 = 384 estimates of full fine-tuning; the method changes (LoRA, QLoRA,
// offload) of the single-GPU grid would multiply it by 9 more.
void BM_GridSearchEightGpus(benchmark::State& state) {
  static const ModelSpec model = *resolve_model("meta-llama/Llama-3.1-8B");
  Job base = full_fine_tune();
  base.model = "meta-llama/Llama-3.1-8B";
  base.seq_len = 32768;
  base.attention_impl = "flash";
  base.num_gpus = 8;
  struct Layout { const char* parallelism; uint64_t tp, pp; };
  const Layout layouts[] = {{"ddp", 1, 1}, {"zero2", 1, 1}, {"fsdp_full_shard", 1, 1},
                            {"fsdp_full_shard", 2, 1}, {"fsdp_full_shard", 4, 1}, {"fsdp_full_shard", 8, 1},
                            {"fsdp_full_shard", 1, 2}, {"fsdp_full_shard", 1, 4}, {"fsdp_full_shard", 1, 8},
                            {"fsdp_full_shard", 2, 2}, {"fsdp_full_shard", 2, 4}, {"fsdp_full_shard", 4, 2}};
  const uint64_t usable = static_cast<uint64_t>(24564.0 * kMiB * 0.80);
  for (auto _ : state) {
    int fitting = 0;
    for (uint64_t mb = 1; mb <= 4; ++mb)
      for (const char* optimizer : {"adamw", "adamw_8bit"})
        for (const char* checkpointing : {"none", "full"})
          for (const char* loss : {"standard", "fused_linear"})
            for (const Layout& l : layouts) {
              Job j = base;
              j.micro_batch_size = mb;
              j.optimizer = optimizer;
              j.gradient_checkpointing = checkpointing;
              j.loss_impl = loss;
              j.parallelism = l.parallelism;
              j.tp = l.tp;
              j.pp = l.pp;
              j.grad_accum_steps = 2 * l.tp * l.pp;
              auto e = estimate_memory(model, j);
              fitting += e && oom_view(*e).device_used_bytes <= usable;  // as fit decides
            }
    benchmark::DoNotOptimize(fitting);
  }
}
BENCHMARK(BM_GridSearchEightGpus)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
