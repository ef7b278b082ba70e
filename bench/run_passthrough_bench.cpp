// `oomdoc run` passes a child's output through while watching it. Compared here with the obvious
// alternative, running the child with its stdout straight to the destination (no oomdoc between):
// the ratio of the two throughputs is oomdoc's overhead on a child that prints as fast as it can.
//   build/bench/run_passthrough_bench --benchmark_min_time=1
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <string>

#include "process/child_process.h"
#include "process/output_watcher.h"

namespace {

constexpr long kBytes = 256l << 20;  // 256 MiB of output per run
const std::string kCount = std::to_string(kBytes);

void BM_ChildWritesDirectly(benchmark::State& state) {
  int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  for (auto _ : state) {
    pid_t pid = fork();
    if (pid == 0) {
      dup2(null_fd, 1);
      execlp("head", "head", "-c", kCount.c_str(), "/dev/zero", static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
  }
  close(null_fd);
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_ChildWritesDirectly)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ChildThroughRunChild(benchmark::State& state) {
  int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  for (auto _ : state) {
    oomdoc::OutputWatcher watcher;
    oomdoc::ChildSpec spec;
    spec.argv = {"head", "-c", kCount, "/dev/zero"};
    spec.stdout_fd = null_fd;
    spec.stderr_fd = null_fd;
    auto outcome = oomdoc::run_child(spec, [&](std::string_view chunk, bool) { watcher.feed(chunk); });
    benchmark::DoNotOptimize(outcome);
    benchmark::DoNotOptimize(watcher.total_bytes());
  }
  close(null_fd);
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_ChildThroughRunChild)->Unit(benchmark::kMillisecond)->UseRealTime();

// The one-off cost at exit: looking for the OOM line in the kept 1 MiB tail.
void BM_ExplainOneMebibyteTail(benchmark::State& state) {
  std::string tail;
  for (int i = 0; tail.size() < (1u << 20); ++i)
    tail += "step " + std::to_string(i) + " loss 2.3011 lr 3e-4 tokens/s 18234.5\n";
  tail += "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n";
  for (auto _ : state) benchmark::DoNotOptimize(oomdoc::explain_child_output(tail));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(tail.size()));
}
BENCHMARK(BM_ExplainOneMebibyteTail)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
