// `oomdoc run [options] -- COMMAND [ARGS...]`: runs a command unchanged, and when it dies of an
// out-of-memory error says why (and where the memory snapshot is, with --snapshot-on-oom).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "command.h"
#include "output_file.h"
#include "core/exit_codes.h"
#include "process/alloc_conf.h"
#include "process/child_process.h"
#include "process/output_watcher.h"
#include "process/python_hook.h"
#include "report/explain_json.h"
#include "report/explain_terminal.h"
#include "report/json_output.h"
#include "report/style.h"

namespace oomdoc::cli {
namespace {

struct RunOptions {
  std::string snapshot_dir;
  uint64_t snapshot_entries = kDefaultSnapshotMaxEntries;
  std::string alloc_conf;
  std::string json_report;
  std::vector<std::string> command;
};

// --json-report FILE: stdout belongs to the child, so the machine-readable verdict goes to a file.
// `start_error` says why the command never ran ("nosuchcmd: command not found"); the report is
// written then too, with the shell's status for it (127, 126).
Status write_json_report(const std::string& path, const ChildOutcome& outcome,
                         const std::optional<ExplainReport>& oom, const std::optional<HookOutcome>& hook,
                         const std::optional<std::string>& start_error = std::nullopt) {
  Json doc = json_document_header("run");
  doc["exit_code"] = outcome.exit_code;
  doc["signal"] = json_optional(outcome.signal);
  doc["start_error"] = json_optional(start_error);
  // The same document `oomdoc explain --json` prints, for the child's output.
  doc["explain"] = oom ? explain_to_json(*oom) : Json(nullptr);
  doc["snapshots"] = hook ? Json(hook->snapshots) : Json::array();
  doc["snapshot_hook"] = nullptr;
  if (hook) {
    auto summary = hook->summary();
    doc["snapshot_hook"] = {{"python_processes", hook->processes},
                            {"recorded", hook->recorded},
                            {"message", summary ? Json(*summary) : Json(nullptr)}};
  }
  return write_output_file(path, dump_json(doc), "the JSON report");
}

// What the JSON report must not replace: every word of the command (a script, a config, a log it
// writes), the value of each --option=VALUE in it, and the program PATH finds for it.
std::vector<InputFile> files_named_by(const std::vector<std::string>& command) {
  const std::string role = "a file the command names";
  std::vector<InputFile> files;
  for (const std::string& word : command) {
    if (word.empty()) continue;
    files.push_back({word, role});
    if (size_t eq = word.find('='); eq != std::string::npos && eq + 1 < word.size()) {
      files.push_back({word.substr(eq + 1), role});
    }
  }
  if (auto program = find_executable(command[0])) files.push_back({*program, "the command's program"});
  return files;
}

void say(const Style& style, const std::string& line) {
  std::cerr << style.bold("oomdoc: ") << line << "\n";
}

// Ends oomdoc with the child's signal, so the caller (a shell, a scheduler) sees what it would
// have seen without oomdoc in between.
[[noreturn]] void die_like_child(int sig, int fallback_code) {
  std::cout.flush();
  std::cerr.flush();
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // the child already dumped core if it was going to
  signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(sig);
  std::_Exit(fallback_code);  // signals whose default is to be ignored
}

int run_command(const RunOptions& options) {
  if (options.command.empty())
    return fail("run: no command given; usage: oomdoc run [options] -- COMMAND [ARGS...]");
  // Everything that can be refused is refused before the command starts (exit 2): a mistake found
  // after an hour of training costs the hour.
  if (!options.alloc_conf.empty()) {
    if (auto valid = check_alloc_conf(options.alloc_conf); !valid) return fail(valid.error().message);
  }
  if (!options.json_report.empty()) {
    if (auto writable = check_output_file(options.json_report, "the JSON report", files_named_by(options.command));
        !writable) {
      return fail(writable.error().message);
    }
  }
  const Style style = Style::for_fd(2);
  // A command that cannot start ends as the shell's 127 or 126, with the report FILE promises.
  auto not_started = [&](int exit_code, const std::string& why) {
    fail("run: " + why);
    if (!options.json_report.empty()) {
      ChildOutcome outcome;
      outcome.exit_code = exit_code;
      if (Status written = write_json_report(options.json_report, outcome, std::nullopt, std::nullopt, why); !written) {
        say(style, written.error().message);
      }
    }
    return exit_code;
  };
  bool not_found = false;
  auto executable = find_executable(options.command[0], &not_found);
  if (!executable) {
    return not_started(not_found ? kExitCommandNotFound : kExitCommandNotExecutable, executable.error().message);
  }

  ChildSpec spec;
  spec.argv = options.command;
  spec.stdout_is_terminal = isatty(1) == 1;
  spec.stderr_is_terminal = isatty(2) == 1;
  if (!options.alloc_conf.empty()) {
    for (auto& kv : alloc_conf_environment(options.alloc_conf)) spec.set_env.push_back(kv);
  }
  std::optional<SnapshotHook> hook;
  if (!options.snapshot_dir.empty()) {
    auto prepared = SnapshotHook::prepare(options.snapshot_dir, options.snapshot_entries,
                                          std::getenv("PYTHONPATH"));
    if (!prepared) return fail(prepared.error().message);
    hook.emplace(std::move(prepared).value());
    for (auto& kv : hook->environment()) spec.set_env.push_back(kv);
  }

  OutputWatcher watcher;
  auto outcome = run_child(spec, [&](std::string_view chunk, bool from_stderr) {
    watcher.feed(chunk, from_stderr);
  });
  if (!outcome) return not_started(kExitCommandNotExecutable, outcome.error().message);
  // First: the explanation below may be lost the same way, and this is why the output is missing.
  if (outcome->output_error != 0) {
    std::cerr << "oomdoc run: writing the command's output failed: " << std::strerror(outcome->output_error) << "\n";
  }

  // Explained only when the child failed: a run that caught its OOM and went on is not news.
  std::optional<ExplainReport> oom;
  if (outcome->exit_code != 0) {
    ExplainReport report = watcher.finish();
    if (report.error_count() > 0) oom = std::move(report);
  }
  const bool said_oom = oom.has_value();
  if (oom) {
    std::cerr << "\n" << style.bold("oomdoc: the command ran out of memory") << "\n\n"
              << render_explain(*oom, style);
  }
  std::optional<HookOutcome> hook_result;
  if (hook) {
    hook_result = read_hook_outcome(hook->hook_dir());
    const HookOutcome& hook_outcome = *hook_result;
    for (const auto& path : hook_outcome.snapshots)
      for (const auto& line : snapshot_verdict(path)) say(style, line);
    if (said_oom && hook_outcome.recorded && hook_outcome.snapshots.empty())
      say(style, "--snapshot-on-oom: the out-of-memory error left no snapshot (the error was not "
                 "raised by PyTorch's CUDA allocator?)");
    // Why nothing was recorded matters after a failure; a run that succeeded hears only of a
    // recording that could never have worked.
    if (auto summary = hook_outcome.summary(); summary && (outcome->exit_code != 0 || hook_outcome.misconfigured()))
      say(style, *summary);
  }
  if (outcome->signal == SIGKILL && !said_oom)
    say(style, "the command was killed (SIGKILL): if nobody sent it, the Linux OOM killer may have "
               "ended it for using too much host memory; check `dmesg | grep -i 'killed process'`");
  bool report_lost = false;
  if (!options.json_report.empty()) {
    Status written = write_json_report(options.json_report, *outcome, oom, hook_result);
    if (!written) {
      say(style, written.error().message);
      report_lost = true;
    }
  }
  if (outcome->signal) {
    hook.reset();  // remove the temporary directory before dying
    die_like_child(*outcome->signal, outcome->exit_code);
  }
  // A child that succeeded but whose output or report was lost is not a success for whoever reads
  // them: exit 2. A failing child's own status says more, and is kept.
  if ((report_lost || outcome->output_error != 0) && outcome->exit_code == 0) return kExitUsage;
  return outcome->exit_code;
}

// An empty path ("--json-report $REPORT" with REPORT unset) is refused, not taken as "no report".
const CLI::Validator kNonEmptyPath(
    [](std::string& value) { return value.empty() ? std::string("an empty path") : std::string(); }, "");

void setup(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run a command; when it dies of an out-of-memory error, explain it");
  cmd->footer("Usage: oomdoc run [OPTIONS] -- COMMAND [ARGS...]");
  CLI::Option* snapshot_on_oom =
      cmd->add_option("--snapshot-on-oom", options->snapshot_dir,
                      "For a PyTorch program: record CUDA memory history and write a snapshot into DIR "
                      "at the out-of-memory error")
          ->type_name("DIR")
          ->check(kNonEmptyPath);
  cmd->add_option("--snapshot-entries", options->snapshot_entries,
                  "Allocator events kept for the snapshot (bounds the recording's memory)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{100000000}))
      ->capture_default_str()
      ->needs(snapshot_on_oom);
  cmd->add_option("--alloc-conf", options->alloc_conf,
                  "PyTorch allocator settings, e.g. expandable_segments:True (sets "
                  "PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF)")
      ->type_name("SETTINGS");
  cmd->add_option("--json-report", options->json_report,
                  "Also write the verdict as one JSON document to FILE (stdout is the child's)")
      ->type_name("FILE")
      ->check(kNonEmptyPath);
  cmd->add_option("command", options->command, "The command and its arguments, after --")
      ->expected(-1);
  cmd->positionals_at_end();
  cmd->callback([options, exit_code]() { *exit_code = run_command(*options); });
}

CommandRegistration reg{70, "run", setup};

}  // namespace
}  // namespace oomdoc::cli
