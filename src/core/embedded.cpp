#include "core/embedded.h"

namespace oomdoc {

std::optional<std::string_view> embedded(std::string_view path) {
  for (const EmbeddedFile& file : embedded_files()) {
    if (file.path == path) return file.content;
  }
  return std::nullopt;
}

std::vector<EmbeddedFile> embedded_under(std::string_view prefix) {
  std::vector<EmbeddedFile> out;
  for (const EmbeddedFile& file : embedded_files()) {
    if (file.path.substr(0, prefix.size()) == prefix) out.push_back(file);
  }
  return out;
}

}  // namespace oomdoc
