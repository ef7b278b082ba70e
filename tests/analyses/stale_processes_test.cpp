#include "analyses/stale_processes.h"

#include <map>

#include <gtest/gtest.h>

namespace oomdoc {
namespace {

// Scripted /proc: pids not in the map are gone.
class FakeProcessTable : public ProcessTable {
 public:
  std::map<uint32_t, ProcessDetails> processes;
  std::vector<ProcessDetails> describe(const std::vector<uint32_t>& pids) override {
    std::vector<ProcessDetails> out;
    for (uint32_t pid : pids) {
      auto it = processes.find(pid);
      ProcessDetails d;
      if (it != processes.end()) d = it->second;
      d.pid = pid;
      out.push_back(d);
    }
    return out;
  }
  std::chrono::milliseconds cpu_window() const override { return std::chrono::milliseconds(300); }
};

ProcessDetails running(const std::string& command, double cpu_percent, double elapsed,
                       uint32_t ppid = 500, uint32_t uid = 1000) {
  ProcessDetails d;
  d.visibility = ProcessVisibility::kVisible;
  d.uid = uid;
  d.user = uid == 1000 ? "alice" : "bob";
  d.command_line = command;
  d.state = 'S';
  d.parent_pid = ppid;
  d.parent_command = "-bash";
  d.session_id = 400;
  d.elapsed_seconds = elapsed;
  d.recent_cpu_percent = cpu_percent;
  return d;
}

DeviceState one_device(std::vector<std::pair<uint32_t, std::optional<uint64_t>>> processes,
                       std::optional<uint64_t> used = std::nullopt) {
  DeviceState s;
  GpuDevice d;
  d.name = "NVIDIA A100-SXM4-80GB";
  d.total_bytes = 85899345920;
  d.used_bytes = used;
  for (auto [pid, bytes] : processes) {
    GpuProcess p;
    p.pid = pid;
    p.used_bytes = bytes;
    p.compute = true;
    d.processes.push_back(p);
  }
  s.devices.push_back(d);
  return s;
}

const ProcessFinding& finding(const GpuProcessReport& r, uint32_t pid) {
  for (const auto& f : r.devices.at(0).processes)
    if (f.gpu.pid == pid) return f;
  throw std::runtime_error("pid not in report");
}

constexpr uint64_t kGiB = 1ull << 30;

TEST(StaleProcesses, BusyTrainingRunIsNotStale) {
  FakeProcessTable table;
  table.processes[100] = running("python train.py", 180.0, 7200);
  auto r = find_stale_processes(one_device({{100, 40 * kGiB}}, 41 * kGiB), table);
  const auto& f = finding(r, 100);
  EXPECT_FALSE(f.stale);
  EXPECT_TRUE(f.flags.empty());
  EXPECT_TRUE(f.explanation.empty());
  EXPECT_EQ(r.devices[0].unattributed_bytes, 1 * kGiB);
  EXPECT_EQ(r.devices[0].stale_bytes, 0u);
}

TEST(StaleProcesses, ZombieSuggestsEndingItsParent) {
  FakeProcessTable table;
  auto d = running("", 0, 9000, 321);
  d.state = 'Z';
  d.parent_command = "python launcher.py";
  table.processes[101] = d;
  auto r = find_stale_processes(one_device({{101, 2 * kGiB}}), table);
  const auto& f = finding(r, 101);
  EXPECT_TRUE(f.stale);
  EXPECT_EQ(f.flags, std::vector<ProcessFlag>{ProcessFlag::kZombie});
  EXPECT_EQ(f.explanation,
            "a zombie holding 2.00 GiB: it has exited but its parent (pid 321, python launcher.py) "
            "has not reaped it");
  EXPECT_EQ(f.suggestions, std::vector<std::string>{"ending the parent reaps it: `kill -TERM 321`"});
  EXPECT_EQ(r.devices[0].stale_bytes, 2 * kGiB);
}

TEST(StaleProcesses, IdleOrphanIsALeftoverWorker) {
  FakeProcessTable table;
  table.processes[102] = running("python train.py (DataLoader worker)", 0.0, 120, /*ppid=*/1);
  auto r = find_stale_processes(one_device({{102, 3 * kGiB}}), table);
  const auto& f = finding(r, 102);
  EXPECT_TRUE(f.stale);
  EXPECT_EQ(f.flags, (std::vector<ProcessFlag>{ProcessFlag::kParentGone, ProcessFlag::kFinishedLooking}));
  EXPECT_EQ(f.explanation,
            "idle and orphaned (its parent exited) while holding 3.00 GiB: probably a leftover "
            "worker of a finished job");
  EXPECT_EQ(f.suggestions, (std::vector<std::string>{
                               "`kill -TERM 102` asks it to exit and clean up",
                               "if it is still listed after 30 s: `kill -KILL 102`"}));
}

TEST(StaleProcesses, BusyNohupJobIsOnlyNoted) {
  FakeProcessTable table;
  table.processes[103] = running("python train.py", 95.0, 120, /*ppid=*/1);
  auto r = find_stale_processes(one_device({{103, 3 * kGiB}}), table);
  const auto& f = finding(r, 103);
  EXPECT_FALSE(f.stale);
  EXPECT_EQ(f.flags, std::vector<ProcessFlag>{ProcessFlag::kParentGone});
  EXPECT_EQ(f.explanation, "its parent exited (nohup or a detached job); it is still working");
}

TEST(StaleProcesses, IdleJupyterKernelOfAnotherUserNeedsSudo) {
  FakeProcessTable table;
  table.processes[104] = running(
      "/usr/bin/python3 -m ipykernel_launcher -f /home/bob/.local/share/jupyter/runtime/kernel-1.json",
      0.0, 30, 500, /*uid=*/1001);
  StaleRules rules;
  rules.viewer_uid = 1000;
  auto r = find_stale_processes(one_device({{104, 12 * kGiB}}), table, rules);
  const auto& f = finding(r, 104);
  EXPECT_TRUE(f.stale);
  EXPECT_EQ(f.flags, std::vector<ProcessFlag>{ProcessFlag::kIdleJupyterKernel});
  EXPECT_EQ(f.explanation,
            "an idle Jupyter kernel (no CPU use in the last 0.3 s) holding 12.00 GiB: a notebook "
            "keeps its tensors and PyTorch's cache until the kernel is shut down");
  ASSERT_EQ(f.suggestions.size(), 2u);
  EXPECT_EQ(f.suggestions[1], "from a shell (the notebook loses its state): `sudo kill -TERM 104`");
}

TEST(StaleProcesses, BusyJupyterKernelIsFine) {
  FakeProcessTable table;
  table.processes[105] = running("python -m ipykernel_launcher -f k.json", 50.0, 3000);
  auto r = find_stale_processes(one_device({{105, kGiB}}), table);
  EXPECT_FALSE(finding(r, 105).stale);
}

TEST(StaleProcesses, FinishedLookingRunNeedsAge) {
  FakeProcessTable table;
  table.processes[106] = running("torchrun train.py", 0.2, 3600 * 5);
  table.processes[107] = running("python eval.py", 0.0, 60);  // idle but young: loading, not finished
  auto r = find_stale_processes(one_device({{106, 30 * kGiB}, {107, kGiB}}), table);
  EXPECT_TRUE(finding(r, 106).stale);
  EXPECT_EQ(finding(r, 106).flags, std::vector<ProcessFlag>{ProcessFlag::kFinishedLooking});
  EXPECT_EQ(finding(r, 106).explanation,
            "looks finished: no CPU use in the last 0.3 s while holding 30.00 GiB");
  EXPECT_FALSE(finding(r, 107).stale);
  // Largest holder first.
  EXPECT_EQ(r.devices[0].processes[0].gpu.pid, 106u);
}

TEST(StaleProcesses, GpuSamplesDecideIdleness) {
  FakeProcessTable table;
  // Both CPUs idle; one runs kernels (a blocking-sync training loop), one does not.
  table.processes[120] = running("python train.py", 0.0, 3600);
  table.processes[121] = running("python old_eval.py", 0.0, 3600);
  DeviceState s = one_device({{120, 30 * kGiB}, {121, 8 * kGiB}});
  s.devices[0].processes[0].sm_percent = 45;
  s.devices[0].processes[1].sm_percent = 0;
  auto r = find_stale_processes(s, table);
  EXPECT_FALSE(finding(r, 120).stale);
  EXPECT_TRUE(finding(r, 121).stale);
  EXPECT_EQ(finding(r, 121).explanation,
            "looks finished: no CPU use in the last 0.3 s, no GPU kernel in the last second while "
            "holding 8.00 GiB");
}

TEST(StaleProcesses, BusyDeviceWithoutSamplesVetoesIdle) {
  FakeProcessTable table;
  table.processes[122] = running("python train.py", 0.0, 3600);
  table.processes[123] = running("python -m ipykernel_launcher -f k.json", 0.0, 3600);
  DeviceState s = one_device({{122, 30 * kGiB}, {123, kGiB}});
  s.devices[0].utilization_percent = 98;
  auto r = find_stale_processes(s, table);
  EXPECT_FALSE(finding(r, 122).stale);
  EXPECT_FALSE(finding(r, 123).stale);
}

TEST(StaleProcesses, StoppedJobSuggestsResumeOrEnd) {
  FakeProcessTable table;
  auto d = running("python train.py", 0, 100);
  d.state = 'T';
  table.processes[108] = d;
  auto r = find_stale_processes(one_device({{108, kGiB}}), table);
  const auto& f = finding(r, 108);
  EXPECT_TRUE(f.stale);
  EXPECT_EQ(f.flags, std::vector<ProcessFlag>{ProcessFlag::kStopped});
  EXPECT_EQ(f.suggestions[1], "or end it: `kill -TERM 108 && kill -CONT 108`");
}

TEST(StaleProcesses, VanishedPidAmongVisibleOnesIsStale) {
  FakeProcessTable table;
  table.processes[100] = running("python train.py", 100, 100);
  auto r = find_stale_processes(one_device({{100, kGiB}, {99999, 5 * kGiB}}), table);
  const auto& f = finding(r, 99999);
  EXPECT_TRUE(f.stale);
  EXPECT_EQ(f.flags, std::vector<ProcessFlag>{ProcessFlag::kGone});
  EXPECT_TRUE(r.notes.empty());
  EXPECT_EQ(r.devices[0].stale_bytes, 5 * kGiB);
}

TEST(StaleProcesses, NoPidVisibleMeansHostPidNamespace) {
  FakeProcessTable table;
  auto r = find_stale_processes(one_device({{2001, kGiB}, {2002, std::nullopt}}), table);
  for (const auto& f : r.devices[0].processes) {
    EXPECT_FALSE(f.stale);
    EXPECT_EQ(f.flags, std::vector<ProcessFlag>{ProcessFlag::kHostPid});
  }
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0].rfind("none of the 2 processes the driver lists exist here", 0), 0u);
  EXPECT_EQ(r.devices[0].unattributed_bytes, std::nullopt);  // one amount is unknown
}

// Process figures that add up past 2^64 (a driver's garbage) do not wrap to a small sum: nothing
// is said to be unattributed.
TEST(StaleProcesses, AbsurdProcessFiguresDoNotWrapTheSum) {
  FakeProcessTable table;
  auto r = find_stale_processes(one_device({{100, UINT64_MAX - 1}, {101, 5}, {102, 6}}, 1000), table);
  EXPECT_EQ(r.devices[0].unattributed_bytes, std::nullopt);
}

TEST(StaleProcesses, OtherContainerIsNamed) {
  FakeProcessTable table;
  auto d = running("python serve.py", 40, 100);
  d.other_pid_namespace = true;
  d.container_id = "3f2a9c1b7d4e";
  table.processes[110] = d;
  auto r = find_stale_processes(one_device({{110, kGiB}}), table);
  const auto& f = finding(r, 110);
  EXPECT_FALSE(f.stale);
  EXPECT_EQ(f.flags, std::vector<ProcessFlag>{ProcessFlag::kOtherContainer});
  EXPECT_EQ(f.explanation, "runs in another container (3f2a9c1b7d4e)");
}

TEST(StaleProcesses, UnreadableProcessIsNotGuessedAt) {
  FakeProcessTable table;
  ProcessDetails d;
  d.visibility = ProcessVisibility::kNoPermission;
  table.processes[111] = d;
  auto r = find_stale_processes(one_device({{111, kGiB}}), table);
  EXPECT_FALSE(finding(r, 111).stale);
  EXPECT_EQ(finding(r, 111).flags, std::vector<ProcessFlag>{ProcessFlag::kNoPermission});
}

TEST(StaleProcesses, FlagNamesAreStable) {
  EXPECT_EQ(flag_name(ProcessFlag::kIdleJupyterKernel), "idle_jupyter_kernel");
  EXPECT_EQ(flag_name(ProcessFlag::kParentGone), "parent_gone");
  EXPECT_EQ(flag_name(ProcessFlag::kHostPid), "host_pid");
}

}  // namespace
}  // namespace oomdoc
