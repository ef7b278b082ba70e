// Watches a child's output as it streams past for `oomdoc run`: each stream goes through the
// explain scanner (readers/log_scanner.h) chunk by chunk, in bounded memory whatever the volume,
// and at exit the events found are diagnosed like `oomdoc explain` does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "analyses/explain.h"
#include "readers/log_scanner.h"

namespace oomdoc {

class OutputWatcher {
 public:
  OutputWatcher();
  // Chunks of one stream must arrive in order; stdout and stderr are scanned separately, since
  // their chunks interleave at arbitrary points, not at line ends.
  void feed(std::string_view chunk, bool from_stderr);
  // Ends both streams and diagnoses what they held. Call once.
  ExplainReport finish();
  uint64_t total_bytes() const { return total_bytes_; }

 private:
  std::unique_ptr<LogScanner> stdout_scanner_;
  std::unique_ptr<LogScanner> stderr_scanner_;
  bool saw_stdout_ = false;
  bool saw_stderr_ = false;
  uint64_t total_bytes_ = 0;
};

}  // namespace oomdoc
