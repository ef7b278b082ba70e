// Exit codes shared by every command (like grep): found/ok, nothing found, bad usage or input.
#pragma once

namespace oomdoc {

enum ExitCode : int {
  kExitOk = 0,          // something found, or the command succeeded
  kExitNothingFound = 1,  // e.g. no out-of-memory error in the input; "does not fit" for fit
  kExitUsage = 2,       // bad usage, unreadable or malformed input, missing driver
};

}  // namespace oomdoc
