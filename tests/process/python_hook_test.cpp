#include "process/python_hook.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "analyses/fix_catalog.h"

namespace oomdoc {
namespace {

namespace fs = std::filesystem;

TEST(PythonHook, PrepareWritesTheHookAndChainsPythonpath) {
  fs::path snapshots = fs::temp_directory_path() / ("oomdoc-snaps-" + std::to_string(getpid())) / "nested";
  std::string hook_dir;
  {
    auto hook = SnapshotHook::prepare(snapshots.string(), 500, "/opt/mine:/opt/other");
    ASSERT_TRUE(hook.ok()) << hook.error().message;
    hook_dir = hook->hook_dir();
    EXPECT_TRUE(fs::is_directory(snapshots));
    EXPECT_TRUE(fs::is_regular_file(hook_dir + "/sitecustomize.py"));
    const auto& env = hook->environment();
    ASSERT_EQ(env.size(), 4u);
    EXPECT_EQ(env[0], (std::pair<std::string, std::string>{"PYTHONPATH", hook_dir + ":/opt/mine:/opt/other"}));
    EXPECT_EQ(env[1].second, snapshots.string());
    EXPECT_EQ(env[2], (std::pair<std::string, std::string>{"OOMDOC_SNAPSHOT_MAX_ENTRIES", "500"}));
    EXPECT_EQ(env[3], (std::pair<std::string, std::string>{"OOMDOC_HOOK_STATUS_DIR", hook_dir}));
  }
  EXPECT_FALSE(fs::exists(hook_dir));  // removed with the hook
  fs::remove_all(snapshots.parent_path());
}

TEST(PythonHook, UnwritableSnapshotDirIsAnError) {
  auto hook = SnapshotHook::prepare("/proc/oomdoc-snapshots", 10, nullptr);
  ASSERT_FALSE(hook.ok());
  EXPECT_EQ(hook.error().message.rfind("/proc/oomdoc-snapshots: cannot create the snapshot directory: ", 0), 0u);
}

HookOutcome outcome_of(const std::vector<std::string>& files) {
  fs::path dir = fs::temp_directory_path() / ("oomdoc-status-" + std::to_string(getpid()));
  fs::create_directories(dir);
  int i = 0;
  for (const auto& text : files) std::ofstream(dir / ("status-" + std::to_string(++i) + ".txt")) << text;
  HookOutcome o = read_hook_outcome(dir.string());
  fs::remove_all(dir);
  return o;
}

TEST(PythonHook, OutcomeSummaries) {
  EXPECT_EQ(outcome_of({}).summary(),
            "--snapshot-on-oom: the hook did not load: the command is not a Python program, or "
            "Python ran with -E or -I (which ignore PYTHONPATH)");
  EXPECT_EQ(outcome_of({"loaded\nno-torch\n"}).summary(),
            "--snapshot-on-oom: the child never imported torch; nothing was recorded");
  EXPECT_EQ(outcome_of({"loaded\ntorch 1.13.0a0\nno-cuda torch=1.13.0a0\n", "loaded\nno-torch\n"}).summary(),
            "--snapshot-on-oom: PyTorch 1.13.0a0 in the child has no CUDA support; nothing was recorded");
  EXPECT_EQ(outcome_of({"loaded\ntorch 2.4.0\ncuda-unused torch=2.4.0\n"}).summary(),
            "--snapshot-on-oom: the child imported PyTorch 2.4.0 but never used CUDA; nothing was recorded");
  auto recorded = outcome_of({"loaded\ntorch 2.4.0\nrecording torch=2.4.0 max_entries=100000\n"
                              "snapshot /snaps/oom-snapshot-12-1700000000.pickle\n"});
  EXPECT_EQ(recorded.summary(), std::nullopt);
  EXPECT_EQ(recorded.processes, 1);
  EXPECT_EQ(recorded.snapshots, std::vector<std::string>{"/snaps/oom-snapshot-12-1700000000.pickle"});
}

TEST(PythonHook, AllocConfSetsBothNames) {
  auto env = alloc_conf_environment("expandable_segments:True");
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(env[0], (std::pair<std::string, std::string>{"PYTORCH_ALLOC_CONF", "expandable_segments:True"}));
  EXPECT_EQ(env[1], (std::pair<std::string, std::string>{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}));
}

TEST(PythonHook, TheExpandableSegmentsFixNamesTheSameVariables) {
  const std::string snippet(fix_info("expandable_segments").snippet);
  for (std::string_view variable : kAllocatorConfVariables) {
    EXPECT_NE(snippet.find(std::string(variable) + "=expandable_segments:True"), std::string::npos) << variable;
  }
}

}  // namespace
}  // namespace oomdoc
