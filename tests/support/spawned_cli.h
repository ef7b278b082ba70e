// Runs the built oomdoc binary in the background for tests that need to talk to it while it runs
// (signals, --watch): stdout and stderr go to one pipe that is read as the test waits.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace oomdoc::testing {

class SpawnedCli {
 public:
  // env entries are "NAME=value", added to the inherited environment. With use_pty, stdout and
  // stderr are the slave side of a pseudo-terminal instead of a pipe.
  SpawnedCli(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
             bool use_pty = false);
  ~SpawnedCli();
  SpawnedCli(const SpawnedCli&) = delete;
  SpawnedCli& operator=(const SpawnedCli&) = delete;

  // Reads output until it contains text or the timeout passes; true when found.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds timeout);
  void send_signal(int signal);
  // Waits for exit (reading the rest of the output); exit code, or 128+signal.
  int wait();
  const std::string& output() const { return output_; }
  pid_t pid() const { return pid_; }

 private:
  bool read_some(int timeout_ms);
  pid_t pid_ = -1;
  int fd_ = -1;
  int status_ = -1;
  bool exited_ = false;
  std::string output_;
};

}  // namespace oomdoc::testing
