// Watches a child's output as it streams past for `oomdoc run`: keeps the tail of the output,
// and at exit asks the explain machinery whether the child died of an out-of-memory error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomdoc {

class OutputWatcher {
 public:
  // Keeps the last tail_bytes of output (an OOM traceback sits at the end; 1 MiB holds hundreds
  // of traceback lines) in a buffer that grows to at most twice that.
  explicit OutputWatcher(size_t tail_bytes = 1u << 20);
  void feed(std::string_view chunk);
  // The kept output, starting at a line boundary when some was dropped.
  std::string_view tail() const;
  uint64_t total_bytes() const { return total_bytes_; }

 private:
  std::string buffer_;
  size_t tail_bytes_;
  uint64_t total_bytes_ = 0;
};

// What `oomdoc run` says after a child that ran out of memory.
struct ChildOomReport {
  std::string headline;            // the OOM message line as the child printed it
  std::vector<std::string> lines;  // the explanation, one line each
};

// INTEGRATION POINT (explain, issue 1): the lead's scanner (readers/log_scanner.h) and diagnosis
// (analyses/diagnose.h) replace the body of this function: scan `tail` for OOM events and render
// the diagnosis of the last one. Until then it recognises the lines every framework prints
// ("out of memory", "OutOfMemoryError", cuBLAS/cuDNN alloc failures) and points at `oomdoc explain`.
std::optional<ChildOomReport> explain_child_output(std::string_view tail);

}  // namespace oomdoc
