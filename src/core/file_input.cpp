#include "core/file_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace oomdoc {

namespace {
std::string describe_errno(int err) {
  switch (err) {
    case ENOENT: return "no such file";
    case EACCES: return "permission denied";
    case EISDIR: return "is a directory";
    default: return std::strerror(err);
  }
}
}  // namespace

InputFile::InputFile(int fd, std::string display_name, bool owned, uint64_t size_hint)
    : fd_(fd), display_name_(std::move(display_name)), owned_(owned), size_hint_(size_hint) {}

InputFile::~InputFile() {
  if (owned_ && fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<InputFile>> InputFile::open(const std::string& path) {
  if (path.empty() || path == "-") {
    return std::unique_ptr<InputFile>(new InputFile(0, "<stdin>", false, 0));
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(fmt::format("{}: {}", path, describe_errno(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return make_error(fmt::format("{}: {}", path, describe_errno(err)));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return make_error(fmt::format("{}: is a directory", path));
  }
  uint64_t size = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
#ifdef POSIX_FADV_SEQUENTIAL
  posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  return std::unique_ptr<InputFile>(new InputFile(fd, path, true, size));
}

size_t InputFile::read(char* buffer, size_t size) {
  while (true) {
    ssize_t n = ::read(fd_, buffer, size);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    failed_ = true;
    error_ = fmt::format("{}: read failed: {}", display_name_, describe_errno(errno));
    return 0;
  }
}

Result<std::string> read_small_file(const std::string& path, uint64_t max_bytes) {
  auto file = InputFile::open(path);
  if (!file) return file.error();
  if ((*file)->size_hint() > max_bytes) {
    return make_error(fmt::format("{}: file is too large ({} bytes; at most {} expected)", path,
                                  (*file)->size_hint(), max_bytes));
  }
  std::string content;
  char buffer[1 << 16];
  while (size_t n = (*file)->read(buffer, sizeof buffer)) {
    content.append(buffer, n);
    if (content.size() > max_bytes) {
      return make_error(fmt::format("{}: file is too large (over {} bytes)", path, max_bytes));
    }
  }
  if ((*file)->failed()) return make_error((*file)->error_message());
  return content;
}

}  // namespace oomdoc
