// Who holds GPU memory, and which holders look stale: the usual culprits behind "my GPU is full
// but nothing is running" (a zombie, an orphan whose parent is gone, an idle Jupyter kernel, a
// training run that looks finished, a stopped job). For each stale process, how to end it; oomdoc
// never ends a process itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/device_state.h"
#include "readers/process_table.h"

namespace oomdoc {

enum class ProcessFlag {
  kGone,               // the driver lists it, /proc does not
  kNoPermission,       // /proc/<pid> unreadable
  kHostPid,            // no listed pid exists here: we run in a container, NVML gives host pids
  kZombie,             // exited, not yet reaped by its parent
  kStopped,            // stopped (Ctrl-Z, SIGSTOP) while holding memory
  kParentGone,         // re-parented to init: its parent exited
  kOtherContainer,     // in another PID namespace than oomdoc
  kIdleJupyterKernel,  // an ipykernel using no CPU
  kFinishedLooking,    // long-running, idle, still holding memory
};

// Stable names used in JSON: "gone", "no_permission", "host_pid", "zombie", "stopped",
// "parent_gone", "other_container", "idle_jupyter_kernel", "finished_looking".
std::string_view flag_name(ProcessFlag flag);

struct ProcessFinding {
  GpuProcess gpu;
  ProcessDetails details;
  std::vector<ProcessFlag> flags;
  bool stale = false;                    // probably holding memory for nothing
  std::string explanation;               // one sentence, empty when nothing is notable
  std::vector<std::string> suggestions;  // commands for the user to run, never run by oomdoc

  bool has(ProcessFlag flag) const;
};

struct DeviceFindings {
  GpuDevice device;
  std::vector<ProcessFinding> processes;
  // Used memory not attributed to any listed process (absent when a process's memory is unknown).
  std::optional<uint64_t> unattributed_bytes;
  uint64_t stale_bytes = 0;  // memory held by processes flagged stale (known amounts only)
};

struct GpuProcessReport {
  DeviceState state;
  std::vector<DeviceFindings> devices;
  std::vector<std::string> notes;  // report-wide explanations (host PID namespace, ...)
};

struct StaleRules {
  double idle_cpu_percent = 1.0;             // below this over the sampling window = idle
  double finished_min_age_seconds = 600;     // a run younger than this is not "finished-looking"
  std::optional<uint32_t> viewer_uid;        // suggestions add `sudo` for other users' processes
};

// Joins the driver's view with the process table and applies the rules above.
GpuProcessReport find_stale_processes(const DeviceState& state, ProcessTable& table,
                                      const StaleRules& rules = {});

}  // namespace oomdoc
