// Runs a command as oomdoc's child with its output passed through unchanged and live, and every
// chunk also handed to an observer (the OOM watcher). The child keeps oomdoc's stdin and process
// group; stdout/stderr become a pseudo-terminal when ours are terminals (colours and progress
// bars keep working), pipes otherwise. Signals sent to oomdoc are forwarded to the child.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace oomdoc {

struct ChildSpec {
  std::vector<std::string> argv;                            // argv[0] is looked up in PATH
  std::vector<std::pair<std::string, std::string>> set_env;  // added to (or replacing in) ours
  int stdout_fd = 1;         // where the child's stdout is copied to
  int stderr_fd = 2;
  bool stdout_is_terminal = false;  // give the child a pty for stdout
  bool stderr_is_terminal = false;  // for stderr (shares the pty with stdout when both are)
};

struct ChildOutcome {
  int exit_code = 0;              // the child's exit status, or 128+signal
  std::optional<int> signal;      // the signal that ended it
  // errno of the first failed copy of the child's output to stdout_fd/stderr_fd (ENOSPC, EIO): that
  // stream is no longer copied, but still read and observed. 0 when all was copied, or when only a
  // reader that went away (EPIPE, `| head`) stopped the copy: that is how pipelines end.
  int output_error = 0;
};

// Called with each chunk of output as it arrives, in order per stream; from_stderr tells which.
using OutputObserver = std::function<void(std::string_view chunk, bool from_stderr)>;

// "COMMAND: command not found" / "COMMAND: permission denied" when it cannot be started.
Result<ChildOutcome> run_child(const ChildSpec& spec, const OutputObserver& observer);

// The path execve would run for name: as given when it holds a '/', else the first match in PATH.
// On failure *not_found (when given) tells "does not exist" (the shell's 127) from "exists but
// cannot be executed" (126).
Result<std::string> find_executable(const std::string& name, bool* not_found = nullptr);

// Exit status for "could not start": 127 not found, 126 found but not executable (as env(1)).
inline constexpr int kExitCommandNotFound = 127;
inline constexpr int kExitCommandNotExecutable = 126;

}  // namespace oomdoc
