// How long an estimate takes: resolving a bundled preset (JSON parse + parameter count) and the
// estimate itself, against the obvious alternative of building the model on PyTorch's meta device
// (what `accelerate estimate-memory` does), timed here as one Python process that imports torch
// and builds a Llama-2-7B-shaped module tree on the meta device.
//   build/bench/estimate_bench
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "analyses/estimator.h"
#include "readers/model_resolver.h"

namespace {

oomdoc::Job training_job() {
  oomdoc::Job job;
  job.task = "train_qlora";
  job.micro_batch_size = 4;
  job.seq_len = 4096;
  job.gradient_checkpointing = "full";
  job.num_gpus = 8;
  job.parallelism = "fsdp_full_shard";
  return job;
}

void BM_ResolvePresetAndEstimate(benchmark::State& state) {
  const oomdoc::Job job = training_job();
  for (auto _ : state) {
    auto model = oomdoc::resolve_model("meta-llama/Llama-3.1-70B-Instruct");
    auto est = oomdoc::estimate_memory(*model, job);
    benchmark::DoNotOptimize(est);
  }
}
BENCHMARK(BM_ResolvePresetAndEstimate)->Unit(benchmark::kMicrosecond);

// A vision-language preset: the language model, Llama 3.2 Vision's cross-attention layers, its
// tiled vision tower and projector counted from the config on every resolve.
void BM_ResolveVisionPresetAndEstimate(benchmark::State& state) {
  const oomdoc::Job job = training_job();
  for (auto _ : state) {
    auto model = oomdoc::resolve_model("meta-llama/Llama-3.2-11B-Vision-Instruct");
    auto est = oomdoc::estimate_memory(*model, job);
    benchmark::DoNotOptimize(est);
  }
}
BENCHMARK(BM_ResolveVisionPresetAndEstimate)->Unit(benchmark::kMicrosecond);

void BM_EstimateOnly(benchmark::State& state) {
  const oomdoc::Job job = training_job();
  auto model = oomdoc::resolve_model("deepseek-ai/DeepSeek-V3");
  for (auto _ : state) {
    auto est = oomdoc::estimate_memory(*model, job);
    benchmark::DoNotOptimize(est);
  }
}
BENCHMARK(BM_EstimateOnly)->Unit(benchmark::kMicrosecond);

// llama.cpp: every tensor's type by llama-quantize's rules, layer by layer (DeepSeek-V3, 61
// blocks of 256 experts, Q4_K_M at 32k tokens).
void BM_LlamaCppEstimateByRules(benchmark::State& state) {
  oomdoc::Job job;
  job.implementation = "llama_cpp";
  job.weight_quantization = "q4_k_m";
  job.prompt_len = 32768;
  job.max_new_tokens = 0;
  auto model = oomdoc::resolve_model("deepseek-ai/DeepSeek-V3");
  for (auto _ : state) {
    auto est = oomdoc::estimate_memory(*model, job);
    benchmark::DoNotOptimize(est);
  }
}
BENCHMARK(BM_LlamaCppEstimateByRules)->Unit(benchmark::kMicrosecond);

double python_meta_model_seconds() {
  const char* script =
      "/usr/bin/python3 -c \"import torch.nn as nn\n"
      "L = lambda i, o: nn.Linear(i, o, bias=False, device='meta')\n"
      "layers = nn.ModuleList([nn.ModuleList([L(4096,4096), L(4096,4096), L(4096,4096), L(4096,4096),"
      " L(4096,11008), L(4096,11008), L(11008,4096)]) for _ in range(32)])\n"
      "emb = nn.Embedding(32000, 4096, device='meta')\n"
      "print(sum(p.numel() for p in layers.parameters()) + emb.weight.numel())\" 2>/dev/null";
  auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen(script, "r");
  if (!pipe) return -1;
  char buffer[128];
  while (fgets(buffer, sizeof buffer, pipe)) {
  }
  int rc = pclose(pipe);
  if (rc != 0) return -1;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  // One-shot comparison: a whole oomdoc estimate vs the PyTorch meta-device alternative.
  const oomdoc::Job job = training_job();
  auto start = std::chrono::steady_clock::now();
  const int runs = 1000;
  for (int i = 0; i < runs; ++i) {
    auto model = oomdoc::resolve_model("meta-llama/Llama-2-7b-hf");
    auto est = oomdoc::estimate_memory(*model, job);
    benchmark::DoNotOptimize(est);
  }
  double ours = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / runs;
  double python = python_meta_model_seconds();
  std::cout << "\noomdoc resolve+estimate (Llama-2-7B preset): " << ours * 1e6 << " us\n";
  if (python > 0) {
    std::cout << "python3 + torch meta-device Llama-2-7B shape: " << python * 1e3 << " ms\n";
    std::cout << "ratio: " << python / ours << "x\n";
  } else {
    std::cout << "python3 + torch not available: no comparison\n";
  }
  benchmark::Shutdown();
  return 0;
}
