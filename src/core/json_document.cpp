#include "core/json_document.h"

#include <fmt/format.h>

namespace oomdoc {

using json = nlohmann::json;

Result<nlohmann::json> parse_json_document(std::string_view text, const std::string& source) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line 3, column 1: ..."
    std::string what = e.what();
    const std::string marker = "parse error at ";
    auto at = what.find(marker);
    std::string detail = at == std::string::npos ? what : what.substr(at + marker.size());
    if (detail.size() > 200) detail.resize(200);
    for (char& c : detail) {
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    }
    return make_error(fmt::format("{}: invalid JSON: {}", source, detail));
  }
}

}  // namespace oomdoc
