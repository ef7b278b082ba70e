// Snapshot reading and analysis speed. The input is OOMDOC_BENCH_SNAPSHOT when set (e.g. the 1 GB
// file bench/snapshot_vs_python.sh generates), else the committed training fixture. Reports bytes
// per second; the comparison with Python lives in bench/snapshot_vs_python.sh.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "analyses/snapshot_report.h"
#include "readers/pickle_reader.h"
#include "readers/snapshot_reader.h"

namespace {

std::string input_path() {
  const char* env = std::getenv("OOMDOC_BENCH_SNAPSHOT");
  if (env) return env;
  std::string here = __FILE__;  // <source>/bench/snapshot_bench.cpp
  return here.substr(0, here.rfind("/bench/")) + "/tests/fixtures/snapshot/train_p4.pickle";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The generic pickle VM alone (no folder): every container kept.
void BM_PickleTree(benchmark::State& state) {
  std::string bytes = slurp(input_path());
  for (auto _ : state) {
    oomdoc::pickle::Tree tree;
    auto st = oomdoc::pickle::read_pickle(std::string_view(bytes), tree);
    if (!st) state.SkipWithError(st.error().message.c_str());
    benchmark::DoNotOptimize(tree.root());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes.size()));
}

// Read into the Snapshot model (frames, stacks and trace entries folded while streaming).
void BM_ReadSnapshot(benchmark::State& state) {
  std::string path = input_path();
  int64_t size = int64_t(slurp(path).size());
  for (auto _ : state) {
    auto s = oomdoc::read_snapshot_file(path);
    if (!s) state.SkipWithError(s.error().message.c_str());
    benchmark::DoNotOptimize(s.ok());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * size);
}

// What `oomdoc snapshot` does: read and run every analysis.
void BM_AnalyzeSnapshotFile(benchmark::State& state) {
  std::string path = input_path();
  int64_t size = int64_t(slurp(path).size());
  for (auto _ : state) {
    auto r = oomdoc::analyze_snapshot_file(path);
    if (!r) state.SkipWithError(r.error().message.c_str());
    benchmark::DoNotOptimize(r.ok());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * size);
}

BENCHMARK(BM_PickleTree)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadSnapshot)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AnalyzeSnapshotFile)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
