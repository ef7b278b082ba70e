// Small text helpers shared by the readers that match names (models, GPUs, record fields).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace oomdoc {

// ASCII lower case (names and flags are ASCII; other bytes pass through).
std::string to_lower(std::string_view s);

// Edit distance for "did you mean" suggestions: insertions, deletions, substitutions, and the swap
// of two neighbouring characters, each counting one.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace oomdoc
