// Reads the token lengths of a training set (fit --lengths FILE): one count per line, or JSON lines
// whose objects carry "length", "num_tokens" or "input_ids" (a list: its size is the length), as
// `datasets` map() / tokenizer outputs are commonly dumped. Blank lines are skipped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace oomdoc {

// display_name names the input in errors ("lengths.jsonl: line 7: no length, num_tokens or
// input_ids field").
Result<std::vector<uint64_t>> parse_lengths(std::string_view text, const std::string& display_name);

Result<std::vector<uint64_t>> read_lengths(const std::string& path);

}  // namespace oomdoc
