// What the operating system knows about a process (user, command line, age, state): the /proc side
// of `oomdoc gpus`. Behind an interface so the stale-process rules are tested with scripted
// processes (tests/analyses/stale_processes_test.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace oomdoc {

enum class ProcessVisibility {
  kVisible,
  kGone,          // no /proc/<pid>: exited, or in another PID namespace (NVML lists host PIDs)
  kNoPermission,  // /proc/<pid> exists but cannot be read (hidepid)
};

struct ProcessDetails {
  uint32_t pid = 0;
  ProcessVisibility visibility = ProcessVisibility::kGone;
  std::optional<uint32_t> uid;
  std::string user;             // login name, or the uid as text when it has no name
  std::string command_line;     // argv joined by spaces; empty for zombies
  std::optional<char> state;    // /proc/<pid>/stat: R running, S sleeping, Z zombie, T stopped...
  std::optional<uint32_t> parent_pid;
  std::string parent_command;   // the parent's command line, when readable
  std::optional<uint32_t> session_id;
  std::optional<double> elapsed_seconds;     // since the process started
  std::optional<double> recent_cpu_percent;  // CPU use over the table's sampling window
  std::optional<bool> other_pid_namespace;   // lives in another container's PID namespace
  std::string container_id;                  // from /proc/<pid>/cgroup (docker/containerd/podman)
};

class ProcessTable {
 public:
  virtual ~ProcessTable() = default;
  // Details for each pid, in the same order.
  virtual std::vector<ProcessDetails> describe(const std::vector<uint32_t>& pids) = 0;
  // How long CPU use was sampled for recent_cpu_percent (for explanations).
  virtual std::chrono::milliseconds cpu_window() const = 0;
};

// Reads <proc_root>/<pid>/{stat,cmdline,cgroup,ns/pid}; samples CPU time twice, cpu_window apart.
class LinuxProcessTable final : public ProcessTable {
 public:
  explicit LinuxProcessTable(std::string proc_root = "/proc",
                             std::chrono::milliseconds cpu_window = std::chrono::milliseconds(300));
  std::vector<ProcessDetails> describe(const std::vector<uint32_t>& pids) override;
  std::chrono::milliseconds cpu_window() const override { return cpu_window_; }

 private:
  std::string proc_root_;
  std::chrono::milliseconds cpu_window_;
};

// True when the mount table text mounts `proc_root` with hidepid=1/2/noaccess/invisible: other
// users' processes are then hidden, and a missing /proc/<pid> does not mean the process is gone.
bool proc_hides_pids(const std::string& mounts_text, const std::string& proc_root);

// The container id in one /proc/<pid>/cgroup text (a 64-hex-digit id in a docker, containerd,
// podman or kubepods path), shortened to 12 digits like `docker ps`; empty when none.
std::string container_id_from_cgroup(const std::string& cgroup_text);

}  // namespace oomdoc
