// Data files compiled into the binary (data/ in the source tree; see cmake/Embed.cmake).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace oomdoc {

struct EmbeddedFile {
  std::string_view path;     // relative to data/, e.g. "gpus.json"
  std::string_view content;
};

const std::vector<EmbeddedFile>& embedded_files();

// The content of data/<path>, or nullopt when no such file was compiled in.
std::optional<std::string_view> embedded(std::string_view path);

// Every embedded file whose path starts with prefix (e.g. "presets/").
std::vector<EmbeddedFile> embedded_under(std::string_view prefix);

}  // namespace oomdoc
