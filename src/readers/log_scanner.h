// Finds every out-of-memory message in a log of any size, streaming: memory stays bounded by a few
// MiB whatever the log's size. Text is fed in chunks (feed/finish) so `oomdoc run` can watch a
// child's output live; scan_file() is the convenience for files and stdin.
//
// Pipeline: a container runtime's file is decoded back into the program's lines
// (readers/container_log.h) -> KeywordFilter (SIMD) finds candidate lines -> the candidate line and
// the lines after it are cleaned (ANSI codes, [rankN]: prefixes, JSON-lines records decoded) -> the
// message formats in readers/formats/ try to read an event -> the Python traceback above it is attached.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_input.h"
#include "core/result.h"
#include "model/oom_event.h"

namespace oomdoc {

// A memory figure a training log printed outside any error ("mem: 12.3G", "max_memory_allocated=...").
// A series of them shows memory climbing step after step.
struct MemoryReading {
  uint64_t line = 0;
  std::optional<int64_t> rank;
  std::string label;
  uint64_t bytes = 0;
};

// A line that is not an error but tells how the job ran, and so which fix applies.
struct LogNotice {
  uint64_t line = 0;
  std::optional<int64_t> rank;
  // "fp32_hidden_states": transformers' warning that flash attention got fp32 inputs "because of
  // upcasted embedding or layer norm layers" (PEFT's prepare_model_for_kbit_training does that).
  // "sglang_mem_fraction_static": the share of the card SGLang's static pool was given, as its
  // command line or its server_args dump states it (`value`). "vllm_gpu_memory_utilization": the
  // share vLLM was started with, from its args dump or command line (`value`).
  // "launcher_sent_sigkill": torchrun killed process `value` (a pid) itself while tearing the job
  // down; a later SIGKILL report of that pid is no out-of-memory kill.
  std::string kind;
  std::optional<double> value;
};

struct ScanResult {
  std::string input;                  // file name or "<stdin>"
  std::vector<OomEvent> events;       // in log order
  std::vector<MemoryReading> readings;
  std::vector<LogNotice> notices;     // the first of each kind per rank (a setting: each new value)
  uint64_t bytes_scanned = 0;
  uint64_t lines = 0;
  bool events_truncated = false;      // more events than ScanOptions::max_events
  // Message lines past max_events (a line holding a format's trigger, other than a one-line repeat
  // of the last event kept): counted, not read, so some may repeat the events kept.
  uint64_t messages_beyond_cap = 0;
};

struct ScanOptions {
  size_t max_events = 10000;
  size_t max_readings = 20000;
};

class LogScanner {
 public:
  explicit LogScanner(ScanOptions options = {});
  ~LogScanner();
  LogScanner(const LogScanner&) = delete;
  LogScanner& operator=(const LogScanner&) = delete;

  void feed(std::string_view chunk);
  // Reads up to max_bytes from input straight into the scanner's buffer (no extra copy) and
  // processes them; returns the bytes read, 0 at the end of input.
  size_t feed_from(InputFile& input, size_t max_bytes);
  // Ends the input: processes what is buffered. Call once.
  void finish();
  // Events found so far (complete ones only: a message at the end of the buffer waits for more input).
  const ScanResult& result() const;
  ScanResult take_result();

 private:
  struct State;
  State* state_;
};

// Scans one whole text (tests, small inputs).
ScanResult scan_text(std::string_view text, ScanOptions options = {});

// Scans a file, or stdin for "-". Errors name the file: missing, a directory, unreadable, or a
// binary file that is not a log.
Result<ScanResult> scan_file(const std::string& path, ScanOptions options = {});

}  // namespace oomdoc
