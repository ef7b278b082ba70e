#include "process/output_watcher.h"

namespace oomdoc {

OutputWatcher::OutputWatcher()
    : stdout_scanner_(std::make_unique<LogScanner>()), stderr_scanner_(std::make_unique<LogScanner>()) {}

void OutputWatcher::feed(std::string_view chunk, bool from_stderr) {
  total_bytes_ += chunk.size();
  if (from_stderr) {
    saw_stderr_ = true;
    stderr_scanner_->feed(chunk);
  } else {
    saw_stdout_ = true;
    stdout_scanner_->feed(chunk);
  }
}

ExplainReport OutputWatcher::finish() {
  ExplainReport report;
  const std::pair<LogScanner*, const char*> streams[] = {{stdout_scanner_.get(), "stdout"},
                                                         {stderr_scanner_.get(), "stderr"}};
  for (auto [scanner, name] : streams) {
    scanner->finish();
    if ((name == std::string_view("stdout") && !saw_stdout_) ||
        (name == std::string_view("stderr") && !saw_stderr_))
      continue;
    ScanResult scan = scanner->take_result();
    scan.input = name;
    add_to_report(report, scan);
  }
  return report;
}

}  // namespace oomdoc
