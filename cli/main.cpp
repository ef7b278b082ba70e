// oomdoc: explains GPU out-of-memory errors and predicts GPU memory. Thin wiring over src/.
#include <algorithm>
#include <iostream>

#include "command.h"
#include "core/exit_codes.h"

namespace oomdoc::cli {

std::vector<CommandInfo>& command_table() {
  static std::vector<CommandInfo> table;
  return table;
}

int fail(const std::string& message) {
  std::string line = message;
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::cerr << "oomdoc: " << line << "\n";
  return kExitUsage;
}

}  // namespace oomdoc::cli

int main(int argc, char** argv) {
  using namespace oomdoc;
  CLI::App app{"oomdoc: find out why a GPU ran out of memory, and what will fit", "oomdoc"};
  app.set_version_flag("--version", std::string("oomdoc ") + OOMDOC_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);

  auto& table = cli::command_table();
  std::sort(table.begin(), table.end(),
            [](const auto& a, const auto& b) { return a.order < b.order; });
  int exit_code = kExitOk;
  for (auto& command : table) command.setup(app, &exit_code);

  // `oomdoc help [CMD]`: the same text as `oomdoc CMD --help`.
  std::string help_topic;
  CLI::App* help = app.add_subcommand("help", "Show help for oomdoc or one command");
  help->add_option("command", help_topic, "Command to describe");
  help->callback([&]() {
    if (help_topic.empty()) {
      std::cout << app.help();
      return;
    }
    try {
      CLI::App* sub = app.get_subcommand(help_topic);
      std::cout << sub->help();
    } catch (const CLI::OptionNotFound&) {
      exit_code = cli::fail("help: unknown command '" + help_topic + "'");
    }
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line naming what is wrong, then the usage hint; exit 2 for every usage error.
    cli::fail(e.what());
    std::cerr << "Run 'oomdoc --help' for usage.\n";
    return kExitUsage;
  }
  return exit_code;
}
