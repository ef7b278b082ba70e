// Helpers shared by the test suites: paths to fixtures and corpora, running the CLI.
#pragma once

#include <string>
#include <vector>

namespace oomdoc::testing {

// <source>/tests/fixtures/<relative>
std::string fixture_path(const std::string& relative);
// Reads a whole file (fails the current test if it cannot).
std::string read_file(const std::string& path);

#ifdef OOMDOC_CORPUS_DIR
// <corpus>/<relative>; the corpus tests fail when it is missing.
std::string corpus_path(const std::string& relative);
#endif

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// An environment with no Hugging Face cache and no home: model names resolve to bundled presets
// only, whatever the machine running the tests has downloaded.
inline const std::vector<std::string> kNoModelCache = {"HF_HUB_CACHE=/nonexistent-oomdoc-cache",
                                                       "HOME=/nonexistent-oomdoc-home"};

// Runs the built oomdoc binary with args (and optional stdin text); captures stdout and stderr.
CommandResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text = "",
                      const std::vector<std::string>& env = {});
// Runs `sh -c script` with $OOMDOC naming the built binary, for what run_cli cannot set up: oomdoc's
// stdout on /dev/full or on a pipe whose reader leaves, stdin from a given file. Captures sh's
// stdout and stderr.
CommandResult run_shell(const std::string& script, const std::vector<std::string>& env = {});

}  // namespace oomdoc::testing
