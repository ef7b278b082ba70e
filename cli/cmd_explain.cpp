// oomdoc explain [FILE...]: find every out-of-memory error in logs and say why and what to do.
#include <unistd.h>

#include <iostream>

#include "analyses/explain.h"
#include "command.h"
#include "core/exit_codes.h"
#include "report/explain_json.h"
#include "report/explain_terminal.h"

namespace oomdoc::cli {
namespace {

struct ExplainFlags {
  std::vector<std::string> files;
  bool json = false;
  bool all = false;
  bool each = false;
};

int run_explain(const ExplainFlags& flags) {
  std::vector<std::string> files = flags.files;
  if (files.empty()) files.push_back("-");
  ExplainReport report;
  // An unreadable input does not hide the others' results: each error is one line on stderr, the
  // rest is reported (and in JSON the document lists the errors), and the exit status is 2.
  for (const auto& file : files) {
    // An empty name is a mistake (an unset shell variable), not stdin: '-' is.
    auto scan = file.empty() ? Result<ScanResult>(make_error("\"\": no such file (an empty name; '-' reads stdin)"))
                             : scan_file(file);
    if (!scan) {
      fail(scan.error().message);
      report.errors.push_back({file, scan.error().message});
      continue;
    }
    add_to_report(report, *scan);
  }
  if (report.inputs.empty()) return kExitUsage;  // nothing to report: the errors said it all
  if (flags.json) {
    std::cout << dump_json(explain_to_json(report));
  } else {
    ExplainTerminalOptions options;
    options.show_info = flags.all;
    options.group_similar = !flags.each;
    std::cout << render_explain(report, Style::for_fd(STDOUT_FILENO), options);
  }
  if (!report.errors.empty()) return kExitUsage;
  return report.error_count() > 0 ? kExitOk : kExitNothingFound;
}

CommandRegistration registration(10, "explain", [](CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ExplainFlags>();
  CLI::App* cmd = app.add_subcommand("explain", "Find every out-of-memory error in logs and say why and what to do");
  cmd->add_option("files", flags->files, "Log files (stdin when none or '-')");
  cmd->add_flag("--json", flags->json, "Print one JSON document (docs/json.md)");
  cmd->add_flag("--all", flags->all, "Also list informational memory lines (vLLM accounting, TF banners)");
  cmd->add_flag("--each", flags->each, "List every error, not once per group of errors that say the same thing");
  cmd->footer("Exit status: 0 an error was found, 1 none found, 2 unreadable input.");
  cmd->callback([flags, exit_code]() { *exit_code = run_explain(*flags); });
});

}  // namespace
}  // namespace oomdoc::cli
