// Reads a vLLM launch command line into a ServeConfig: `vllm serve MODEL [flags]`,
// `python -m vllm.entrypoints.openai.api_server --model MODEL [flags]` (and the older
// vllm.entrypoints.api_server), or Python's `LLM(model=..., tensor_parallel_size=2, ...)`.
// Flag spellings follow vLLM's argparse: `--max-model-len` and `--max_model_len` are one flag,
// `--flag=value` and `--flag value` both work. Leading `VAR=value` words are kept as environment.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "model/serve_config.h"

namespace oomdoc {

// `words` is the command as the shell split it; a single word holding a whole command line
// (quoted by the user) is split here with shell quoting rules.
Result<ServeConfig> parse_vllm_command_line(const std::vector<std::string>& words);

// vLLM's human-readable integers: "32768", "32k" (x1000), "32K" (x1024), "1m", "1M", "25.6k".
std::optional<uint64_t> parse_vllm_token_count(std::string_view text);

// Splits a command line like a POSIX shell does: quotes and backslashes; unquoted `;`, `&&`, `||`,
// `|`, `&` and newlines separate commands, a `#` starting a word comments out the rest of its line,
// and redirections (`> log.txt`, `2>&1`, `&>> f`) are dropped with their files. Variables the text
// sets (`TP=2`, `export MODEL=...`) are expanded where used ($TP, ${TP}, ${TP:-2}, unquoted values
// split into words); anything else with a `$` or a backquote ($(nproc), a variable set elsewhere)
// is kept literally as one word, since oomdoc runs nothing.
Result<std::vector<std::vector<std::string>>> split_shell_commands(std::string_view line);
// The index of the program a command runs past its wrappers (`VAR=value`, sudo, env, nohup, exec,
// time, `uv run`, `conda run` and their options); the assignments go to env.
size_t skip_command_wrappers(const std::vector<std::string>& words, size_t i, std::map<std::string, std::string>& env);

}  // namespace oomdoc
