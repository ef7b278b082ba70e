#include "support/test_support.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace oomdoc::testing {

std::string fixture_path(const std::string& relative) {
  return std::string(OOMDOC_SOURCE_DIR) + "/tests/fixtures/" + relative;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

#ifdef OOMDOC_CORPUS_DIR
std::string corpus_path(const std::string& relative) {
  return std::string(OOMDOC_CORPUS_DIR) + "/" + relative;
}
#endif

namespace {
std::string slurp_fd(int fd) {
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Runs `binary` with args (argv[0] is the binary), stdin_text on stdin; captures stdout and stderr.
CommandResult run_captured(const std::string& binary, const std::vector<std::string>& args,
                           const std::string& stdin_text, const std::vector<std::string>& env) {
  // Files rather than pipes for stdout/stderr so large outputs cannot deadlock.
  char out_path[] = "/tmp/oomdoc-test-out-XXXXXX";
  char err_path[] = "/tmp/oomdoc-test-err-XXXXXX";
  char in_path[] = "/tmp/oomdoc-test-in-XXXXXX";
  int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path), in_fd = mkstemp(in_path);
  if (::write(in_fd, stdin_text.data(), stdin_text.size()) < 0) {}
  lseek(in_fd, 0, SEEK_SET);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv;
    std::string argv0 = binary;
    argv.push_back(argv0.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  lseek(out_fd, 0, SEEK_SET);
  lseek(err_fd, 0, SEEK_SET);
  result.out = slurp_fd(out_fd);
  result.err = slurp_fd(err_fd);
  close(out_fd);
  close(err_fd);
  close(in_fd);
  unlink(out_path);
  unlink(err_path);
  unlink(in_path);
  return result;
}
}  // namespace

CommandResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text,
                      const std::vector<std::string>& env) {
  return run_captured(OOMDOC_CLI, args, stdin_text, env);
}

CommandResult run_shell(const std::string& script, const std::vector<std::string>& env) {
  std::vector<std::string> with_binary = env;
  with_binary.push_back(std::string("OOMDOC=") + OOMDOC_CLI);
  return run_captured("/bin/sh", {"-c", script}, "", with_binary);
}

}  // namespace oomdoc::testing
