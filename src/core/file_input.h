// Opening user-named inputs with the error messages every command shares:
// "FILE: no such file", "FILE: is a directory", "FILE: permission denied".
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "core/result.h"

namespace oomdoc {

// A readable byte source: a file, or standard input when the name is "-" or empty.
class InputFile {
 public:
  static Result<std::unique_ptr<InputFile>> open(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Reads up to size bytes; returns the count read, 0 at end of input. Sets error() on failure.
  size_t read(char* buffer, size_t size);
  const std::string& display_name() const { return display_name_; }
  bool failed() const { return failed_; }
  std::string error_message() const { return error_; }
  // Size in bytes when it is a regular file (for progress bars), else 0.
  uint64_t size_hint() const { return size_hint_; }

 private:
  InputFile(int fd, std::string display_name, bool owned, uint64_t size_hint);
  int fd_;
  std::string display_name_;
  bool owned_;
  uint64_t size_hint_;
  bool failed_ = false;
  std::string error_;
};

// Whole-file read for small inputs (configs, job files). Refuses files over max_bytes.
Result<std::string> read_small_file(const std::string& path, uint64_t max_bytes = 64ull << 20);

}  // namespace oomdoc
