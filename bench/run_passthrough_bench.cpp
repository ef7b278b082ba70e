// `oomdoc run` passes a child's output through while the explain scanner watches it. Compared here with the obvious
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

constexpr long kBytes = 256l << 20;  // 256 MiB of training-log-like lines per run
const std::string kChild =
    "yes 'step 1200 loss 2.3011 lr 3.0e-04 grad_norm 0.81 tokens/s 18234.5' | head -c " +
    std::to_string(kBytes);

void BM_ChildWritesDirectly(benchmark::State& state) {
  int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  for (auto _ : state) {
    pid_t pid = fork();
    if (pid == 0) {
      dup2(null_fd, 1);
      execlp("sh", "sh", "-c", kChild.c_str(), static_cast<char*>(nullptr));
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
    spec.argv = {"sh", "-c", kChild};
    spec.stdout_fd = null_fd;
    spec.stderr_fd = null_fd;
    auto outcome = oomdoc::run_child(spec, [&](std::string_view chunk, bool from_stderr) {
      watcher.feed(chunk, from_stderr);
    });
    benchmark::DoNotOptimize(outcome);
    benchmark::DoNotOptimize(watcher.finish());
  }
  close(null_fd);
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_ChildThroughRunChild)->Unit(benchmark::kMillisecond)->UseRealTime();

// The copy alone, without the scanner: separates the cost of watching from the cost of relaying.
void BM_ChildThroughRunChildNoWatcher(benchmark::State& state) {
  int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  for (auto _ : state) {
    oomdoc::ChildSpec spec;
    spec.argv = {"sh", "-c", kChild};
    spec.stdout_fd = null_fd;
    spec.stderr_fd = null_fd;
    benchmark::DoNotOptimize(oomdoc::run_child(spec, nullptr));
  }
  close(null_fd);
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_ChildThroughRunChildNoWatcher)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
