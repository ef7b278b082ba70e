#include "output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace oomdoc::cli {

namespace {

namespace fs = std::filesystem;

// The input that writing `output` would replace, if any.
const InputFile* replaced_input(const fs::path& output, std::span<const InputFile> inputs) {
  std::error_code ec;
  const fs::file_status status = fs::status(output, ec);
  // A device or a fifo (/dev/null, /dev/stdout) is written to, not replaced; but a pipe or fifo that
  // is also the input (`--html /dev/stdin` with the snapshot piped in, a named fifo given twice)
  // would block the write forever once the report outgrows the pipe's buffer.
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    struct stat out_stat {};
    if (fs::is_fifo(status) && ::stat(output.c_str(), &out_stat) == 0) {
      for (const InputFile& input : inputs) {
        struct stat in_stat {};
        if (::stat(input.path.c_str(), &in_stat) == 0 && in_stat.st_dev == out_stat.st_dev && in_stat.st_ino == out_stat.st_ino) {
          return &input;
        }
      }
    }
    return nullptr;
  }
  // Resolved, a path not there yet still matches an input named another way (./r.json, dir/../r.json)
  // that the wrapped command may create.
  const fs::path resolved = fs::weakly_canonical(output, ec);
  const bool has_resolved = !ec;
  for (const InputFile& input : inputs) {
    if (fs::exists(status) && fs::equivalent(output, input.path, ec)) return &input;  // symlinks, hard links
    const fs::path input_resolved = fs::weakly_canonical(input.path, ec);
    if (has_resolved && !ec && input_resolved == resolved) return &input;
  }
  return nullptr;
}

}  // namespace

Status check_output_file(const std::string& path, std::string_view what, std::span<const InputFile> inputs) {
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (fs::is_directory(target, ec)) return make_error(fmt::format("{}: cannot write {} (it is a directory)", path, what));
  if (!fs::is_directory(dir, ec)) return make_error(fmt::format("{}: cannot write {} (no directory {})", path, what, dir.string()));
  if (const InputFile* input = replaced_input(target, inputs)) {
    if (input->path == path) return make_error(fmt::format("{}: cannot write {} (it is {})", path, what, input->role));
    return make_error(fmt::format("{}: cannot write {} (it is {}, {})", path, what, input->path, input->role));
  }
  if (fs::exists(target, ec)) {
    if (::access(path.c_str(), W_OK) != 0) {
      return make_error(fmt::format("{}: cannot write {} ({})", path, what, std::strerror(errno)));
    }
  } else if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return make_error(fmt::format("{}: cannot write {} ({}: {})", path, what, dir.string(), std::strerror(errno)));
  }
  return Ok{};
}

Status write_output_file(const std::string& path, std::string_view text, std::string_view what) {
  auto failed = [&](int error) {
    // A partial report must not pass for a complete one; only a regular file is ours to remove
    // (/dev/full, a fifo are not).
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) std::remove(path.c_str());
    return make_error(fmt::format("{}: cannot write {}: {}", path, what, std::strerror(error)));
  };
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return make_error(fmt::format("{}: cannot write {}: {}", path, what, std::strerror(errno)));
  if (std::fwrite(text.data(), 1, text.size(), file) != text.size()) {
    const int error = errno;
    std::fclose(file);
    return failed(error);
  }
  if (std::fclose(file) != 0) return failed(errno);
  return Ok{};
}

}  // namespace oomdoc::cli
