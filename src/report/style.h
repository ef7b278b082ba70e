// Terminal styling for human output: colour only when stdout is a terminal and NO_COLOR is unset
// (https://no-color.org). Renderers take a Style so tests can force colour on or off.
#pragma once

#include <string>
#include <string_view>

namespace oomdoc {

class Style {
 public:
  explicit Style(bool color) : color_(color) {}
  // Colour when the given file descriptor is a terminal and NO_COLOR is not set (to anything).
  static Style for_fd(int fd);
  static Style plain() { return Style(false); }

  bool color() const { return color_; }
  std::string bold(std::string_view s) const { return wrap("1", s); }
  std::string dim(std::string_view s) const { return wrap("2", s); }
  std::string red(std::string_view s) const { return wrap("31", s); }
  std::string green(std::string_view s) const { return wrap("32", s); }
  std::string yellow(std::string_view s) const { return wrap("33", s); }
  std::string cyan(std::string_view s) const { return wrap("36", s); }

 private:
  std::string wrap(std::string_view code, std::string_view s) const;
  bool color_;
};

}  // namespace oomdoc
