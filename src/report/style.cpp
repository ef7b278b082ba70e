#include "report/style.h"

#include <unistd.h>

#include <cstdlib>

namespace oomdoc {

Style Style::for_fd(int fd) {
  const char* no_color = std::getenv("NO_COLOR");
  const bool disabled = no_color != nullptr && no_color[0] != '\0';
  return Style(!disabled && isatty(fd) == 1);
}

std::string Style::wrap(std::string_view code, std::string_view s) const {
  if (!color_) return std::string(s);
  std::string out = "\x1b[";
  out += code;
  out += 'm';
  out += s;
  out += "\x1b[0m";
  return out;
}

}  // namespace oomdoc
