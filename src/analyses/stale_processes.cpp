#include "analyses/stale_processes.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/saturating.h"
#include "core/units.h"

namespace oomdoc {

std::string_view flag_name(ProcessFlag flag) {
  switch (flag) {
    case ProcessFlag::kGone: return "gone";
    case ProcessFlag::kNoPermission: return "no_permission";
    case ProcessFlag::kHostPid: return "host_pid";
    case ProcessFlag::kZombie: return "zombie";
    case ProcessFlag::kStopped: return "stopped";
    case ProcessFlag::kParentGone: return "parent_gone";
    case ProcessFlag::kOtherContainer: return "other_container";
    case ProcessFlag::kIdleJupyterKernel: return "idle_jupyter_kernel";
    case ProcessFlag::kFinishedLooking: return "finished_looking";
  }
  return "unknown";
}

bool ProcessFinding::has(ProcessFlag flag) const {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

namespace {

bool is_jupyter_kernel(const std::string& command) {
  // `python -m ipykernel_launcher -f kernel-*.json` (Jupyter), `-m ipykernel` (older launchers).
  return command.find("ipykernel") != std::string::npos;
}

std::string holding(const GpuProcess& gpu) {
  return gpu.used_bytes ? format_bytes(*gpu.used_bytes) : std::string("an unknown amount of memory");
}

// `sudo` only when the viewer is not root and the process is someone else's.
std::string kill_prefix(const ProcessDetails& d, const StaleRules& rules) {
  if (rules.viewer_uid && *rules.viewer_uid != 0 && d.uid && *d.uid != *rules.viewer_uid) return "sudo ";
  return "";
}

std::vector<std::string> terminate_suggestions(uint32_t pid, const ProcessDetails& d,
                                               const StaleRules& rules) {
  const std::string sudo = kill_prefix(d, rules);
  std::vector<std::string> out;
  if (!sudo.empty()) out.push_back(fmt::format("it belongs to {}: ask them before ending it", d.user));
  out.push_back(fmt::format("`{}kill -TERM {}` asks it to exit and clean up", sudo, pid));
  out.push_back(fmt::format("if it is still listed after 30 s: `{}kill -KILL {}`", sudo, pid));
  return out;
}

// device_busy: the device's utilisation is above 0, for when per-process samples are absent.
void classify(ProcessFinding* f, const StaleRules& rules, double cpu_window_seconds, bool device_busy) {
  const ProcessDetails& d = f->details;
  const uint32_t pid = f->gpu.pid;
  if (d.visibility == ProcessVisibility::kGone) {
    f->flags.push_back(ProcessFlag::kGone);
    f->stale = true;
    f->explanation = fmt::format(
        "the driver lists pid {} holding {}, but no such process exists here: it has exited "
        "while its memory is still held (a child or a stuck context), or it runs in another "
        "PID namespace",
        pid, holding(f->gpu));
    f->suggestions = {
        "`nvidia-smi --query-compute-apps=pid,used_memory --format=csv` shows whether the driver "
        "still lists it",
        "`sudo fuser -v /dev/nvidia*` lists the processes that still have the GPU open"};
    return;
  }
  if (d.visibility == ProcessVisibility::kNoPermission) {
    f->flags.push_back(ProcessFlag::kNoPermission);
    f->explanation = fmt::format(
        "/proc/{} cannot be read (/proc is mounted with hidepid, or it is another user's "
        "process); run as root to see it",
        pid);
    return;
  }

  // Idle = no CPU use and no GPU kernels. A job can wait on the GPU with its CPU asleep (blocking
  // sync, CUDA graphs), so without a per-process GPU sample a busy device vetoes "idle".
  const bool cpu_idle = d.recent_cpu_percent && *d.recent_cpu_percent < rules.idle_cpu_percent;
  const bool gpu_idle = f->gpu.sm_percent ? *f->gpu.sm_percent == 0 : !device_busy;
  const bool idle = cpu_idle && gpu_idle;
  const std::string idle_words =
      f->gpu.sm_percent ? fmt::format("no CPU use in the last {:.1f} s, no GPU kernel in the last second",
                                      cpu_window_seconds)
                        : fmt::format("no CPU use in the last {:.1f} s", cpu_window_seconds);
  const bool old_enough = d.elapsed_seconds && *d.elapsed_seconds >= rules.finished_min_age_seconds;
  const bool parent_gone = d.parent_pid && *d.parent_pid == 1 && pid != 1 && d.session_id &&
                           *d.session_id != pid;  // session leaders (daemons) are re-parented by design
  if (d.other_pid_namespace.value_or(false)) f->flags.push_back(ProcessFlag::kOtherContainer);
  if (parent_gone) f->flags.push_back(ProcessFlag::kParentGone);

  if (d.state == 'Z') {
    f->flags.push_back(ProcessFlag::kZombie);
    f->stale = true;
    if (d.parent_pid && *d.parent_pid > 1) {
      f->explanation = fmt::format(
          "a zombie holding {}: it has exited but its parent (pid {}{}) has not reaped it",
          holding(f->gpu), *d.parent_pid,
          d.parent_command.empty() ? "" : ", " + d.parent_command.substr(0, 60));
      ProcessDetails parent;  // the suggestion targets the parent, with the parent's owner unknown
      parent.uid = d.uid;
      parent.user = d.user;
      f->suggestions = {fmt::format("ending the parent reaps it: `{}kill -TERM {}`",
                                    kill_prefix(parent, rules), *d.parent_pid)};
    } else {
      f->explanation = fmt::format(
          "a zombie holding {}: init will reap it; if memory stays held, a thread of it is stuck "
          "in the driver",
          holding(f->gpu));
      f->suggestions = {"`sudo fuser -v /dev/nvidia*` lists the processes that still have the GPU open"};
    }
    return;
  }
  if (d.state == 'T' || d.state == 't') {
    f->flags.push_back(ProcessFlag::kStopped);
    f->stale = true;
    f->explanation = fmt::format("stopped (Ctrl-Z or SIGSTOP) while holding {}", holding(f->gpu));
    const std::string sudo = kill_prefix(d, rules);
    f->suggestions = {fmt::format("resume it with `fg` in its shell or `{}kill -CONT {}`", sudo, pid),
                      fmt::format("or end it: `{}kill -TERM {} && {}kill -CONT {}`", sudo, pid, sudo, pid)};
    return;
  }
  if (is_jupyter_kernel(d.command_line)) {
    if (idle) {
      f->flags.push_back(ProcessFlag::kIdleJupyterKernel);
      f->stale = true;
      f->explanation = fmt::format(
          "an idle Jupyter kernel ({}) holding {}: a notebook keeps its tensors and PyTorch's "
          "cache until the kernel is shut down",
          idle_words, holding(f->gpu));
      f->suggestions = {"shut the kernel down from Jupyter (Kernel > Shut Down Kernel), or free "
                        "memory in the notebook: `del` the tensors, then `torch.cuda.empty_cache()`"};
      f->suggestions.push_back(fmt::format("from a shell (the notebook loses its state): `{}kill -TERM {}`",
                                           kill_prefix(d, rules), pid));
    }
    return;
  }
  if (idle && (old_enough || parent_gone)) {
    f->flags.push_back(ProcessFlag::kFinishedLooking);
    f->stale = true;
    f->explanation =
        parent_gone
            ? fmt::format("idle and orphaned (its parent exited) while holding {}: probably a "
                          "leftover worker of a finished job",
                          holding(f->gpu))
            : fmt::format("looks finished: {} while holding {}", idle_words, holding(f->gpu));
    f->suggestions = terminate_suggestions(pid, d, rules);
    return;
  }
  if (parent_gone) {
    f->explanation = "its parent exited (nohup or a detached job); it is still working";
  } else if (f->has(ProcessFlag::kOtherContainer)) {
    f->explanation = fmt::format("runs in another container{}",
                                 d.container_id.empty() ? "" : " (" + d.container_id + ")");
  }
}

}  // namespace

GpuProcessReport find_stale_processes(const DeviceState& state, ProcessTable& table,
                                      const StaleRules& rules) {
  GpuProcessReport report;
  report.state = state;
  std::vector<uint32_t> pids;
  for (const auto& device : state.devices)
    for (const auto& p : device.processes) pids.push_back(p.pid);
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());

  std::map<uint32_t, ProcessDetails> details;
  for (auto& d : table.describe(pids)) details[d.pid] = std::move(d);
  const bool none_visible =
      !pids.empty() && std::all_of(pids.begin(), pids.end(), [&](uint32_t pid) {
        return details[pid].visibility == ProcessVisibility::kGone;
      });
  const double window = std::chrono::duration<double>(table.cpu_window()).count();

  for (const auto& device : state.devices) {
    DeviceFindings findings;
    findings.device = device;
    uint64_t attributed = 0;
    bool all_known = true;
    for (const auto& gpu : device.processes) {
      ProcessFinding f;
      f.gpu = gpu;
      f.details = details[gpu.pid];
      f.details.pid = gpu.pid;
      if (none_visible) {
        // NVML ignores PID namespaces: every pid is a host pid (NVIDIA/nvidia-docker#1483).
        f.flags.push_back(ProcessFlag::kHostPid);
        f.explanation = "a host PID, not visible from this container";
      } else {
        classify(&f, rules, window, device.utilization_percent.value_or(0) > 0);
      }
      if (gpu.used_bytes) {
        // Saturating: absurd per-process figures must not wrap the sum below the device's used.
        attributed = saturating_add(attributed, *gpu.used_bytes);
        if (f.stale) findings.stale_bytes = saturating_add(findings.stale_bytes, *gpu.used_bytes);
      } else {
        all_known = false;
      }
      findings.processes.push_back(std::move(f));
    }
    if (device.used_bytes && all_known && *device.used_bytes >= attributed)
      findings.unattributed_bytes = *device.used_bytes - attributed;
    // Largest holder first: the answer to "who holds the card".
    std::stable_sort(findings.processes.begin(), findings.processes.end(),
                     [](const ProcessFinding& a, const ProcessFinding& b) {
                       return a.gpu.used_bytes.value_or(0) > b.gpu.used_bytes.value_or(0);
                     });
    report.devices.push_back(std::move(findings));
  }
  if (none_visible) {
    report.notes.push_back(fmt::format(
        "none of the {} process{} the driver lists exist here: oomdoc is probably running in a "
        "container, and NVML reports host PIDs (NVIDIA/nvidia-docker#1483); run it on the host, "
        "or start the container with `--pid=host`, to see who they are",
        pids.size(), pids.size() == 1 ? "" : "es"));
  }
  return report;
}

}  // namespace oomdoc
