// Each subcommand lives in its own cli/cmd_<name>.cpp and registers itself with a static
// CommandRegistration, so adding a command touches one file. The CLI only parses flags, calls the
// library and hands the result to a renderer: no logic here.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace oomdoc::cli {

// Sets up a subcommand on `app`. The callback it installs stores the command's exit code in
// *exit_code (see core/exit_codes.h).
using CommandSetup = std::function<void(CLI::App& app, int* exit_code)>;

struct CommandInfo {
  int order;             // position in `oomdoc --help`
  std::string name;
  CommandSetup setup;
};

std::vector<CommandInfo>& command_table();

struct CommandRegistration {
  CommandRegistration(int order, std::string name, CommandSetup setup) {
    command_table().push_back({order, std::move(name), std::move(setup)});
  }
};

// The first word of argv that is not an option ("" when none), and whether it is a command: option
// errors name the command.
std::string first_word(int argc, char** argv);
bool is_command(CLI::App& app, const std::string& word);
// A CLI11 parse error as the second half of one line: "--params: unknown option".
std::string describe_parse_error(const CLI::ParseError& e, bool top_level);

// The first option between the command word and `--` that `command` does not know ("--gpus" in
// `oomdoc serve --gpus 2 -- vllm serve M`), if any.
std::optional<std::string> unknown_option_before_separator(CLI::App& command, int argc, char** argv);

// Prints "oomdoc: <message>" on stderr as one line (newlines folded) and returns kExitUsage.
int fail(const std::string& message);
// Prints "oomdoc: note: <message>" on stderr (nothing when empty): said once the answer is
// certain, so that an error stays the only line on stderr.
void note(const std::string& message);

}  // namespace oomdoc::cli
