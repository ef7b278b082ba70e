// How fast `serve` answers: reading a vLLM command line, one startup prediction, and a full
// analysis that does not fit (every fix re-predicted, including the catalog search).
// Run: build/bench/serve_bench (docs/benchmarks.md, "serve").
#include <benchmark/benchmark.h>

#include "analyses/vllm_serve.h"
#include "readers/gpu_catalog.h"
#include "readers/served_model.h"
#include "readers/vllm_args.h"

namespace oomdoc {
namespace {

const std::vector<std::string> kCommand = {
    "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "131072",
    "--gpu-memory-utilization", "0.9", "--max-num-seqs", "64", "--kv-cache-dtype", "auto",
    "--enable-prefix-caching", "--port", "8000"};

ServeInputs make_inputs() {
  ServeInputs in;
  in.config = parse_vllm_command_line(kCommand).value();
  in.model = resolve_served_model(in.config.model)->spec;
  in.target = serve_target(find_gpu("4090").value());
  in.version = parse_vllm_version("").value();
  return in;
}

void BM_ParseVllmCommandLine(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(parse_vllm_command_line(kCommand));
}
BENCHMARK(BM_ParseVllmCommandLine);

void BM_ResolveModelPreset(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(resolve_served_model("meta-llama/Llama-3.1-8B-Instruct"));
}
BENCHMARK(BM_ResolveModelPreset);

void BM_PredictStartup(benchmark::State& state) {
  ServeInputs in = make_inputs();
  for (auto _ : state) benchmark::DoNotOptimize(predict_vllm_startup(in));
}
BENCHMARK(BM_PredictStartup);

// 131072 tokens do not fit a 4090: the analysis searches every fix and the catalog.
void BM_AnalyzeWithFixes(benchmark::State& state) {
  ServeInputs in = make_inputs();
  for (auto _ : state) benchmark::DoNotOptimize(analyze_serve(in));
}
BENCHMARK(BM_AnalyzeWithFixes);

}  // namespace
}  // namespace oomdoc

BENCHMARK_MAIN();
