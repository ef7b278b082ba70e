#include "support/spawned_cli.h"

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace oomdoc::testing {

SpawnedCli::SpawnedCli(const std::vector<std::string>& args, const std::vector<std::string>& env,
                       bool use_pty) {
  int read_fd = -1, write_fd = -1;
  if (use_pty) {
    if (openpty(&read_fd, &write_fd, nullptr, nullptr, nullptr) != 0) return;
  } else {
    int fds[2];
    if (pipe(fds) != 0) return;
    read_fd = fds[0];
    write_fd = fds[1];
  }
  pid_ = fork();
  if (pid_ == 0) {
    if (use_pty) setsid();
    dup2(write_fd, 1);
    dup2(write_fd, 2);
    close(read_fd);
    close(write_fd);
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<std::string> copy = args;
    std::string binary = OOMDOC_CLI;
    std::vector<char*> argv{binary.data()};
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(write_fd);
  fd_ = read_fd;
}

SpawnedCli::~SpawnedCli() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (fd_ >= 0) close(fd_);
}

bool SpawnedCli::read_some(int timeout_ms) {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return false;
  char buffer[65536];
  ssize_t n = read(fd_, buffer, sizeof buffer);
  if (n <= 0) {  // EOF (pipe) or EIO (pty with no writer left)
    close(fd_);
    fd_ = -1;
    return false;
  }
  output_.append(buffer, static_cast<size_t>(n));
  return true;
}

bool SpawnedCli::wait_for_output(const std::string& text, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (output_.find(text) == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || fd_ < 0) return false;
    read_some(static_cast<int>(left.count()));
  }
  return true;
}

void SpawnedCli::send_signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

int SpawnedCli::wait() {
  if (!exited_) {
    while (fd_ >= 0) {
      read_some(100);
      int status = 0;
      if (!exited_ && waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        status_ = status;
        while (read_some(50)) {
        }
        break;
      }
    }
    if (!exited_) {
      waitpid(pid_, &status_, 0);
      exited_ = true;
    }
  }
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
}

}  // namespace oomdoc::testing
