// Files a command writes besides stdout (`snapshot --html FILE`, `run --json-report FILE`): the path
// is checked before any work, so that a long run or a report on stdout is not followed by "cannot
// write", and a write that fails anyway says why and leaves no partial file behind.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "core/result.h"

namespace oomdoc::cli {

// A file the command reads, or one its wrapped command names: an output file must never replace it.
struct InputFile {
  std::string path;
  std::string role;  // how the error names it: "the snapshot being read"
};

// Whether `path` can be created or overwritten, without creating it. `what` names the file in the
// error: "r.json: cannot write the JSON report (no directory /nonexist)", "... (it is a directory)",
// "... (/ro: Permission denied)". A path that is one of `inputs` (the same file, through a symlink or
// a hard link too; for a file not there yet, the same path once resolved) is refused:
// "in.pickle: cannot write the HTML report (it is the snapshot being read)", or, under another name,
// "(it is in.pickle, the snapshot being read)".
Status check_output_file(const std::string& path, std::string_view what, std::span<const InputFile> inputs = {});

// Writes `text` to `path` (replacing it). On failure the error gives the system's reason
// ("out.html: cannot write the HTML report: No space left on device") and the partial file is removed.
Status write_output_file(const std::string& path, std::string_view text, std::string_view what);

}  // namespace oomdoc::cli
