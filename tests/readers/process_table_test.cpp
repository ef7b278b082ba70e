#include "readers/process_table.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace oomdoc {
namespace {

namespace fs = std::filesystem;

TEST(ProcessTable, ContainerIdFromCgroupPaths) {
  const std::string id = "3f2a9c1b7d4e5f6071829a4b5c6d7e8f90112233445566778899aabbccddeeff";
  EXPECT_EQ(container_id_from_cgroup("0::/system.slice/docker-" + id + ".scope\n"), "3f2a9c1b7d4e");
  EXPECT_EQ(container_id_from_cgroup("12:memory:/docker/" + id + "\n"), "3f2a9c1b7d4e");
  EXPECT_EQ(container_id_from_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n"), "");
  EXPECT_EQ(container_id_from_cgroup("0::/x/" + id + "0\n"), "");  // 65 digits: not an id
}

TEST(ProcessTable, HidepidMountsHideOtherUsersProcesses) {
  EXPECT_TRUE(proc_hides_pids("proc /proc proc rw,nosuid,nodev,noexec,relatime,hidepid=2 0 0\n", "/proc"));
  EXPECT_TRUE(proc_hides_pids("proc /proc proc rw,relatime,hidepid=invisible 0 0\n", "/proc"));
  EXPECT_FALSE(proc_hides_pids("proc /proc proc rw,relatime 0 0\n", "/proc"));
  EXPECT_FALSE(proc_hides_pids("proc /other proc rw,hidepid=2 0 0\n", "/proc"));
  EXPECT_FALSE(proc_hides_pids("tmpfs /proc tmpfs rw,hidepid=2 0 0\n", "/proc"));
}

// A hand-made /proc tree: a comm with spaces and parentheses, NUL-separated argv, a zombie.
TEST(ProcessTable, ParsesAFakeProcTree) {
  fs::path root = fs::temp_directory_path() / ("oomdoc-proc-" + std::to_string(getpid()));
  fs::create_directories(root / "4242");
  fs::create_directories(root / "77");
  fs::create_directories(root / "self");
  std::ofstream(root / "uptime") << "10000.00 50000.00\n";
  const long hz = sysconf(_SC_CLK_TCK);
  // starttime = 4000 s after boot -> elapsed 6000 s.
  std::ofstream(root / "4242" / "stat")
      << "4242 (python (train) x) S 77 4242 4100 0 -1 4194560 0 0 0 0 500 20 0 0 20 0 9 0 "
      << 4000 * hz << " 0 0\n";
  std::ofstream(root / "4242" / "cmdline") << std::string("python\0train.py\0--lr\0001\0", 23);
  std::ofstream(root / "77" / "stat") << "77 (bash) S 1 77 77 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 0 0\n";
  std::ofstream(root / "77" / "cmdline") << std::string("-bash\0", 6);

  LinuxProcessTable table(root.string(), std::chrono::milliseconds(0));
  auto details = table.describe({4242, 5555});
  ASSERT_EQ(details.size(), 2u);
  const auto& d = details[0];
  EXPECT_EQ(d.visibility, ProcessVisibility::kVisible);
  EXPECT_EQ(d.command_line, "python train.py --lr 1");
  EXPECT_EQ(d.state, 'S');
  EXPECT_EQ(d.parent_pid, 77u);
  EXPECT_EQ(d.session_id, 4100u);
  EXPECT_EQ(d.parent_command, "-bash");
  ASSERT_TRUE(d.elapsed_seconds);
  EXPECT_DOUBLE_EQ(*d.elapsed_seconds, 6000.0);
  EXPECT_EQ(d.recent_cpu_percent, std::nullopt);  // window 0: not sampled
  EXPECT_EQ(details[1].visibility, ProcessVisibility::kGone);
  fs::remove_all(root);
}

TEST(ProcessTable, ReadsThisProcessFromRealProc) {
  LinuxProcessTable table("/proc", std::chrono::milliseconds(50));
  auto details = table.describe({static_cast<uint32_t>(getpid())});
  ASSERT_EQ(details.size(), 1u);
  EXPECT_EQ(details[0].visibility, ProcessVisibility::kVisible);
  EXPECT_EQ(details[0].uid, getuid());
  EXPECT_NE(details[0].command_line.find("oomdoc_tests"), std::string::npos);
  EXPECT_EQ(details[0].other_pid_namespace, false);
  EXPECT_TRUE(details[0].recent_cpu_percent.has_value());
}

}  // namespace
}  // namespace oomdoc
