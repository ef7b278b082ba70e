// Small text helpers shared by the readers that match names (models, GPUs, record fields).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace oomdoc {

// ASCII lower case (names and flags are ASCII; other bytes pass through).
std::string to_lower(std::string_view s);

// Levenshtein distance (insertions, deletions, substitutions), for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace oomdoc
