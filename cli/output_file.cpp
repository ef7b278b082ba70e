#include "output_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace oomdoc::cli {

Status check_output_file(const std::string& path, std::string_view what) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (fs::is_directory(target, ec)) return make_error(fmt::format("{}: cannot write {} (it is a directory)", path, what));
  if (!fs::is_directory(dir, ec)) return make_error(fmt::format("{}: cannot write {} (no directory {})", path, what, dir.string()));
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
