// Throughput of the explain scanner on an in-memory training log (no I/O): bytes per second of
// LogScanner over realistic output with a few OOM tracebacks. bench/explain_vs_grep.sh compares the
// whole command with grep on a 1 GiB file.
#include <benchmark/benchmark.h>

#include <string>

#include "analyses/explain.h"
#include "readers/keyword_filter.h"
#include "readers/log_scanner.h"

namespace {

std::string make_log(size_t bytes) {
  std::string out;
  size_t step = 0;
  const std::string oom =
      "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 1 has a total capacity of "
      "23.65 GiB of which 1.08 GiB is free. Including non-PyTorch memory, this process has 22.56 GiB memory in use. Of "
      "the allocated memory 20.14 GiB is allocated by PyTorch, and 1.97 GiB is reserved by PyTorch but unallocated.\n";
  while (out.size() < bytes) {
    out += " 42%|####      | " + std::to_string(step) + "/100000 [01:02<12:00:00, 2.31it/s]\r";
    out += "[rank0]: {'loss': 1.2345, 'grad_norm': 0.912, 'learning_rate': 2.000e-05, 'epoch': 0.42}\n";
    if (step % 50 == 0) out += "[rank0]: step " + std::to_string(step) + " | gpu mem: 17.42 GiB | tokens/s 10234\n";
    if (step % 100000 == 99999) out += oom;
    ++step;
  }
  return out;
}

const std::string& log_64mb() {
  static const std::string log = make_log(64u << 20);
  return log;
}

// What `oomdoc explain` does to a log in memory: scan, then diagnose every event.
void scan_and_diagnose(benchmark::State& state, const std::string& log) {
  for (auto _ : state) {
    oomdoc::ScanResult scan = oomdoc::scan_text(log);
    oomdoc::ExplainReport report;
    oomdoc::add_to_report(report, scan);
    benchmark::DoNotOptimize(report.events.size());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * log.size()));
}

void BM_KeywordFilter(benchmark::State& state) {
  const std::string& log = log_64mb();
  const auto& filter = oomdoc::KeywordFilter::standard();
  for (auto _ : state) {
    size_t hits = 0;
    for (size_t pos = filter.find(log, 0); pos != std::string::npos; pos = filter.find(log, pos + 1)) ++hits;
    benchmark::DoNotOptimize(hits);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * log.size()));
}
BENCHMARK(BM_KeywordFilter)->Unit(benchmark::kMillisecond);

void BM_ScanAndDiagnose(benchmark::State& state) {
  const std::string& log = log_64mb();
  scan_and_diagnose(state, log);
}
BENCHMARK(BM_ScanAndDiagnose)->Unit(benchmark::kMillisecond);

// A retry loop printing the same OOM 20,000 times (6.5 MB, one line each): each repeat must cost
// about what its line does, not a re-read of the 32 KiB above it.
void BM_ScanRepeatedOom(benchmark::State& state) {
  static const std::string log = [] {
    const std::string oom =
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 23.65 GiB "
        "of which 5.06 MiB is free. Including non-PyTorch memory, this process has 23.64 GiB memory in use. Of the "
        "allocated memory 23.20 GiB is allocated by PyTorch, and 20.00 MiB is reserved by PyTorch but unallocated.\n";
    std::string out;
    for (int i = 0; i < 20000; ++i) out += oom;
    return out;
  }();
  scan_and_diagnose(state, log);
}
BENCHMARK(BM_ScanRepeatedOom)->Unit(benchmark::kMillisecond);

// Eight ranks failing together 1,300 times, PyTorch's figure moving each step (10,400 distinct
// errors, 4.6 MB): each new error's traceback window is mostly the one before's, and the log-wide
// checks (memory climbing) must be read once, not per error. Grouping is part of what explain does.
void BM_ScanDistinctOomsAndGroup(benchmark::State& state) {
  static const std::string log = [] {
    std::string out;
    for (int step = 0; step < 1300; ++step) {
      out += "step " + std::to_string(step) + " loss 1.23\n";
      for (int rank = 0; rank < 8; ++rank) {
        out += "[rank" + std::to_string(rank) + "]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU " +
               std::to_string(rank) + " has a total capacity of 79.11 GiB of which 1.05 GiB is free. Including non-PyTorch "
               "memory, this process has 78.05 GiB memory in use. Of the allocated memory 74." + std::to_string(step % 10) +
               "0 GiB is allocated by PyTorch, and 2.35 GiB is reserved by PyTorch but unallocated.\n";
      }
    }
    return out;
  }();
  for (auto _ : state) {
    oomdoc::ScanResult scan = oomdoc::scan_text(log);
    oomdoc::ExplainReport report;
    oomdoc::add_to_report(report, scan);
    benchmark::DoNotOptimize(report.groups.size());   // add_to_report groups them
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * log.size()));
}
BENCHMARK(BM_ScanDistinctOomsAndGroup)->Unit(benchmark::kMillisecond);

// 100,000 distinct errors of one format (one step's figures each, 35 MB), ten times the event cap:
// the 90,000 past the cap must be counted at the cost of their lines, not read and dropped (that
// took 12.3 s of the command's 12.9 s before; docs/benchmarks.md).
void BM_ScanHundredThousandDistinctOoms(benchmark::State& state) {
  static const std::string log = [] {
    std::string out;
    for (int i = 0; i < 100000; ++i) {
      out += "step " + std::to_string(i) + " loss 1.23\n";
      out += "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate " + std::to_string(1000 + i % 997) +
             ".00 MiB. GPU 0 has a total capacity of 79.11 GiB of which " + std::to_string(100 + i % 13) +
             ".00 MiB is free. Including non-PyTorch memory, this process has 78.05 GiB memory in use. Of the allocated "
             "memory 74.00 GiB is allocated by PyTorch, and 2.35 GiB is reserved by PyTorch but unallocated.\n";
    }
    return out;
  }();
  for (auto _ : state) {
    oomdoc::ScanResult scan = oomdoc::scan_text(log);
    oomdoc::ExplainReport report;
    oomdoc::add_to_report(report, scan);
    benchmark::DoNotOptimize(report.groups.size());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * log.size()));
}
BENCHMARK(BM_ScanHundredThousandDistinctOoms)->Unit(benchmark::kMillisecond);

// A memory reading on every line, after a logged dict (16 MB): every line is a candidate, and each
// must take the one-line look (a memory reading for the climbing check), not a 40-line window.
void BM_ScanMemoryReadingEveryLine(benchmark::State& state) {
  static const std::string log = [] {
    std::string out;
    for (int step = 1; out.size() < (16u << 20); ++step) {
      out += "2024-05-01 10:00:00,123 - INFO - trainer - {'loss': 0.1234, 'epoch': 0.42} mem: 17." +
             std::to_string(step % 10) + " GiB step " + std::to_string(step) + "\n";
    }
    return out;
  }();
  scan_and_diagnose(state, log);
}
BENCHMARK(BM_ScanMemoryReadingEveryLine)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
