// Each subcommand lives in its own cli/cmd_<name>.cpp and registers itself with a static
// CommandRegistration, so adding a command touches one file. The CLI only parses flags, calls the
// library and hands the result to a renderer: no logic here.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
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

// Prints "oomdoc: <message>" on stderr as one line (newlines folded) and returns kExitUsage.
int fail(const std::string& message);

}  // namespace oomdoc::cli
