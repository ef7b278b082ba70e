// llama.cpp's command-line flags: every spelling common/arg.cpp registers (llama-server,
// llama-cli and the older main/server), with how many values each takes and whether it changes
// GPU memory in a way the estimate does not size. llama.cpp refuses any other word that starts
// with '-' ("error: invalid argument: %s", common_params_parse_ex), so the reader does too.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomdoc {

struct LlamaCppFlag {
  // 0: a switch; 1 or 2: values that follow as separate words; -1: an optional on/off/auto word
  // (the value newer builds take where older ones had a bare switch: -fa, --color, --log-colors).
  int values = 0;
  bool changes_memory = false;   // changes GPU memory but is not sized: "not sized", never "ignored"
};

// The flag by any of its spellings ("-c", "--ctx-size"), or nullopt for a word llama.cpp refuses.
std::optional<LlamaCppFlag> find_llama_cpp_flag(std::string_view spelling);

// Every spelling, for "did you mean" (core/text.h closest_spelling).
const std::vector<std::string>& llama_cpp_flag_spellings();

}  // namespace oomdoc
