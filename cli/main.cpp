// oomdoc: explains GPU out-of-memory errors and predicts GPU memory. Thin wiring over src/.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "command.h"
#include "core/exit_codes.h"
#include "core/text.h"

namespace oomdoc::cli {

std::vector<CommandInfo>& command_table() {
  static std::vector<CommandInfo> table;
  return table;
}

int fail(const std::string& message) {
  std::string line = message;
  std::replace(line.begin(), line.end(), '\n', ' ');
  // One line a terminal (or a program reading stderr as UTF-8) can take, whatever a corrupt file put
  // into the message.
  std::cerr << "oomdoc: " << printable(line) << "\n";
  return kExitUsage;
}

void note(const std::string& message) {
  if (message.empty()) return;
  std::cerr << "oomdoc: note: " << message << "\n";
}

std::string first_word(int argc, char** argv) {
  // oomdoc has no top-level options that take a value, so the first word is the command.
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (!word.empty() && word[0] != '-') return word;
  }
  return "";
}

bool is_command(CLI::App& app, const std::string& word) {
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == word) return true;
  }
  return false;
}

std::string describe_parse_error(const CLI::ParseError& e, bool top_level) {
  const std::string what = e.what();
  auto after = [&](const std::string& prefix) { return what.substr(prefix.size()); };
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    // "The following argument(s) was/were not expected: b a" (CLI11 lists them last first).
    std::vector<std::string> words;
    std::istringstream list(what.substr(what.find(": ") + 2));
    for (std::string w; list >> w;) words.insert(words.begin(), w);
    if (words.empty()) return what;
    std::string first = words.front();
    if (first[0] == '-') return first.substr(0, first.find('=')) + ": unknown option";
    if (top_level) return "'" + first + "': unknown command";
    return "'" + first + "': unexpected argument" + (words.size() > 1 ? fmt::format(" (and {} more)", words.size() - 1) : "");
  }
  if (what.rfind("Could not convert: ", 0) == 0) {  // "Could not convert: --tp = abc"
    std::string rest = after("Could not convert: ");
    size_t eq = rest.find(" = ");
    // (Only numeric options fail to convert: a text option takes any word.)
    if (eq != std::string::npos) return fmt::format("{}: '{}' is not a number", rest.substr(0, eq), rest.substr(eq + 3));
  }
  if (what.find(" required ") != std::string::npos && what.size() > 8 && what.substr(what.size() - 8) == " missing") {
    return what.substr(0, what.find(':')) + ": needs a value";  // "--gpu: 1 required TEXT missing"
  }
  if (what.rfind("A subcommand is required", 0) == 0 || what.rfind("Requires at least 1 subcommand", 0) == 0) {
    return "no command given";
  }
  return what;
}

// The options of `command` given on the command line before "--", in order: each word that names
// one (a known option or not: `option` is null for an unknown name) and its value (the "=" part or,
// for an option that takes one, the next word). `visit` returns a message to stop with.
using OptionVisitor = std::function<std::optional<std::string>(const std::string& name, const CLI::Option* option,
                                                               const std::optional<std::string>& value)>;
std::optional<std::string> visit_options(CLI::App& command, int argc, char** argv, const OptionVisitor& visit) {
  bool after_command = false;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (!after_command) {
      after_command = word == command.get_name();
      continue;
    }
    if (word == "--") break;
    if (word.size() < 2 || word[0] != '-' || std::isdigit(static_cast<unsigned char>(word[1]))) continue;
    const size_t eq = word.find('=');
    const std::string name = word.substr(0, eq);
    const CLI::Option* option = command.get_option_no_throw(name);
    std::optional<std::string> value;
    if (eq != std::string::npos) {
      value = word.substr(eq + 1);
    } else if (option && option->get_items_expected_max() > 0 && i + 1 < argc) {
      value = argv[++i];   // a known option's value is not an option, whatever it looks like
    }
    if (auto stop = visit(name, option, value)) return stop;
  }
  return std::nullopt;
}

std::optional<std::string> unknown_option_before_separator(CLI::App& command, int argc, char** argv) {
  return visit_options(command, argc, argv, [](const std::string& name, const CLI::Option* option, const auto&) {
    return option ? std::nullopt : std::optional<std::string>(name);
  });
}

// CLI11's "At Most 1 required but received 2" when one option is given twice, under one name or
// under two (--gpus and --num-gpus): which, with the values given.
std::optional<std::string> repeated_option(CLI::App& command, int argc, char** argv) {
  std::map<const CLI::Option*, std::vector<std::string>> given;  // "--gpus 2", "--num-gpus 4"
  return visit_options(command, argc, argv,
                       [&](const std::string& name, const CLI::Option* option,
                           const std::optional<std::string>& value) -> std::optional<std::string> {
                         if (!option) return std::nullopt;
                         auto& uses = given[option];
                         uses.push_back(!value || value->empty() ? name : name + " " + *value);
                         if (uses.size() < 2) return std::nullopt;
                         const std::string first_name = uses[0].substr(0, uses[0].find(' '));
                         if (first_name == name) {
                           return fmt::format("{} is given twice ({}, {}): give it once", name, uses[0], uses[1]);
                         }
                         return fmt::format("{} and {} set the same option: give one", uses[0], uses[1]);
                       });
}

}  // namespace oomdoc::cli

namespace {

int run_oomdoc(int argc, char** argv) {
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
  // CLI11 reads "-1" into an unsigned option as 2^64 - 1: refuse a sign on every one of them.
  const CLI::Validator unsigned_only(
      [](std::string& value) { return value.rfind('-', 0) == 0 ? "must be 0 or more (got " + value + ")" : std::string(); },
      "");
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    for (CLI::Option* option : sub->get_options()) {
      if (option->get_type_name() == "UINT") option->check(unsigned_only);
    }
  }

  // `oomdoc help [CMD]`: the same text as `oomdoc CMD --help`.
  std::string help_topic;
  CLI::App* help = app.add_subcommand("help", "Show help for oomdoc or one command");
  help->add_option("command", help_topic, "Command to describe");
  help->callback([&]() {
    if (help_topic.empty()) {
      // app.help() would describe the selected subcommand (help itself): ask the formatter for oomdoc's.
      std::cout << app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
      return;
    }
    try {
      CLI::App* sub = app.get_subcommand(help_topic);
      std::cout << sub->help(app.get_name());  // "Usage: oomdoc CMD", as CMD --help prints it
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
    // One line: the command, what is wrong, and where its usage is; exit 2 for every usage error.
    const std::string word = cli::first_word(argc, argv);
    const bool known = !word.empty() && cli::is_command(app, word);
    const std::string who = known ? "oomdoc " + word : "oomdoc";
    std::string what = !known && !word.empty() ? "'" + word + "': unknown command" : cli::describe_parse_error(e, !known);
    // An unknown option before `--` (oomdoc serve --gpus 2 -- vllm ...) leaves CLI11 complaining
    // about the words after `--`: name the option instead.
    if (known && dynamic_cast<const CLI::ExtrasError*>(&e)) {
      if (auto option = cli::unknown_option_before_separator(*app.get_subcommand(word), argc, argv)) {
        what = *option + ": unknown option";
      }
    }
    if (known && what.find("At Most 1 required but received") != std::string::npos) {
      if (auto option = cli::repeated_option(*app.get_subcommand(word), argc, argv)) what = *option;
    }
        std::cerr << who << ": " << what << " (see " << who << " --help)\n";
    return kExitUsage;
  }
  return exit_code;
}

}  // namespace

namespace oomdoc::cli {

// Every command prints its report through std::cout, whose writes fail silently (a full disk, a
// quota): a report that was not written must not exit 0 as if it had been. Checked once here,
// after the command, for all of them. A failed command keeps its own exit status.
int check_stdout_written(int exit_code, const std::string& command) {
  std::cout.flush();
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout;
  if (!failed) return exit_code;
  // errno as the failed write left it (stdio keeps no error code): nothing runs after the report.
  const int error = errno;
  fail(fmt::format("{}cannot write the output: {}", command.empty() ? "" : command + ": ",
                   error != 0 ? std::strerror(error) : "write error"));
  return exit_code == kExitOk || exit_code == kExitNothingFound ? kExitUsage : exit_code;
}

}  // namespace oomdoc::cli

int main(int argc, char** argv) {
  // The safety net, not the error path: expected failures are Error values with a message that
  // names the input. An exception that gets here is a bug, and still ends as one line and exit 2
  // rather than an abort.
  try {
    return oomdoc::cli::check_stdout_written(run_oomdoc(argc, argv), oomdoc::cli::first_word(argc, argv));
  } catch (const std::exception& e) {
    return oomdoc::cli::fail(std::string("internal error: ") + e.what());
  }
}
