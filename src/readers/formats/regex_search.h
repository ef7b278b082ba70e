// A thin helper over RE2 for the format files: search and get every group as a string_view into
// the searched text (an unmatched optional group is an empty view with a null data pointer).
#pragma once

#include <re2/re2.h>

#include <optional>
#include <string_view>
#include <vector>

namespace oomdoc {

using Groups = std::vector<std::string_view>;

inline std::optional<Groups> regex_search(const RE2& re, std::string_view text, size_t from = 0) {
  const int count = re.NumberOfCapturingGroups() + 1;
  std::vector<re2::StringPiece> pieces(static_cast<size_t>(count));
  if (from > text.size()) return std::nullopt;
  if (!re.Match(re2::StringPiece(text.data(), text.size()), from, text.size(), RE2::UNANCHORED,
                pieces.data(), count)) {
    return std::nullopt;
  }
  Groups groups;
  groups.reserve(pieces.size());
  for (const auto& p : pieces) groups.emplace_back(p.data(), p.size());
  return groups;
}

inline bool matched(std::string_view group) { return group.data() != nullptr; }

}  // namespace oomdoc
