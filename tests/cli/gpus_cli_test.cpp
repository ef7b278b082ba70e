// `oomdoc gpus` end to end: the built binary loads the fake NVML through OOMDOC_NVML_LIBRARY.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "readers/gpu_catalog.h"
#include "support/spawned_cli.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

using testing::run_cli;

std::string write_temp(const std::string& text) {
  char path[] = "/tmp/oomdoc-gpus-cli-XXXXXX";
  int fd = mkstemp(path);
  ::close(fd);
  std::ofstream(path) << text;
  return path;
}

// A pid that existed a moment ago and does not now: NVML can still list such a pid.
uint32_t vanished_pid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return static_cast<uint32_t>(pid);
}

std::vector<std::string> fake_env(const std::string& script, const char* library = OOMDOC_FAKE_NVML_MODERN) {
  return {std::string("OOMDOC_NVML_LIBRARY=") + library, "OOMDOC_FAKE_NVML_SCRIPT=" + script, "NO_COLOR=1"};
}

TEST(GpusCli, JsonListsDevicesAndJoinsProcessesWithProc) {
  const uint32_t self = static_cast<uint32_t>(getpid());
  const uint32_t gone = vanished_pid();
  std::string script = write_temp(
      "driver 550.54.15\ncuda 12040\n"
      "device name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-aaaa total=85520809984 reserved=566231040 "
      "used=44040192000 util=37\n"
      "process device=0 pid=" + std::to_string(self) + " used=42949672960 kind=compute\n"
      "process device=0 pid=" + std::to_string(gone) + " used=1073741824 kind=compute\n");
  auto r = run_cli({"gpus", "--json"}, "", fake_env(script));
  unlink(script.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["command"], "gpus");
  EXPECT_EQ(doc["driver_version"], "550.54.15");
  EXPECT_EQ(doc["cuda_version"], "12.4");
  ASSERT_EQ(doc["devices"].size(), 1u);
  const auto& d = doc["devices"][0];
  EXPECT_EQ(d["total_bytes"], 85520809984ull);
  EXPECT_EQ(d["reserved_bytes"], 566231040ull);
  EXPECT_EQ(d["used_bytes"], 44040192000ull);
  EXPECT_EQ(d["free_bytes"], 85520809984ull - 44040192000ull - 566231040ull);
  EXPECT_EQ(d["unattributed_bytes"], 44040192000ull - 42949672960ull - 1073741824ull);
  EXPECT_EQ(d["stale_bytes"], 1073741824ull);
  ASSERT_EQ(d["processes"].size(), 2u);
  const auto& mine = d["processes"][0];
  EXPECT_EQ(mine["pid"], self);
  EXPECT_EQ(mine["visible"], true);
  EXPECT_EQ(mine["uid"], getuid());
  EXPECT_NE(mine["command"].get<std::string>().find("oomdoc_tests"), std::string::npos);
  EXPECT_EQ(mine["type"], "C");
  const auto& vanished = d["processes"][1];
  EXPECT_EQ(vanished["pid"], gone);
  EXPECT_EQ(vanished["visible"], false);
  EXPECT_EQ(vanished["user"], nullptr);
  EXPECT_EQ(vanished["flags"], nlohmann::json::array({"gone"}));
  EXPECT_EQ(vanished["stale"], true);
}

TEST(GpusCli, TextShowsReservedSeparately) {
  std::string script = write_temp(
      "device name=\"NVIDIA A10\" uuid=GPU-1 total=24146608128 reserved=350000000 used=0 util=0\n");
  auto r = run_cli({"gpus"}, "", fake_env(script));
  unlink(script.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "NVIDIA driver 550.54.15, CUDA 12.4\n\n"
            "GPU 0  NVIDIA A10  util 0%\n"
            "  memory: 22.49 GiB total, 0 B used, 333.79 MiB reserved by the driver, 22.16 GiB free\n"
            "  no process holds memory on this GPU\n");
}

TEST(GpusCli, NoDriverIsExit2WithOneLine) {
  auto r = run_cli({"gpus"}, "", {"OOMDOC_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("oomdoc: no NVIDIA driver: cannot load /nonexistent/libnvidia-ml.so.1 (", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
}

TEST(GpusCli, NoGpuIsExit2WithOneLine) {
  std::string script = write_temp("driver 550.54.15\n");
  auto r = run_cli({"gpus", "--json"}, "", fake_env(script));
  unlink(script.c_str());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "oomdoc: no NVIDIA GPU: the driver (550.54.15) sees no device\n");
}

// A --watch interval out of range says so in seconds, not CLI11's "Value 0 not in range 0.100000".
TEST(GpusCli, WatchIntervalOutOfRangeSaysTheRange) {
  auto r = run_cli({"gpus", "--watch", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "oomdoc gpus: --watch: must be between 0.1 and 86400 seconds (got 0) (see oomdoc gpus --help)\n");
}

TEST(GpusCli, CatalogListsTheBundledGpus) {
  auto r = run_cli({"gpus", "--catalog", "--json"}, "", {"OOMDOC_NVML_LIBRARY=/nonexistent"});
  ASSERT_EQ(r.exit_code, 0) << r.err;  // needs no driver
  auto doc = nlohmann::json::parse(r.out);
  const auto& catalog = gpu_catalog();
  ASSERT_EQ(doc["catalog"].size(), catalog.size());
  ASSERT_FALSE(catalog.empty());
  EXPECT_EQ(doc["catalog"][0]["name"], catalog[0].name);
  EXPECT_EQ(doc["catalog"][0]["total_bytes"], catalog[0].total_bytes);
  auto text = run_cli({"gpus", "--catalog"}, "", {"NO_COLOR=1"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_EQ(std::count(text.out.begin(), text.out.end(), '\n'), static_cast<long>(catalog.size()) + 2);
  EXPECT_NE(text.out.find(catalog[0].name), std::string::npos);
}

TEST(GpusCli, WatchWithJsonPrintsOneDocumentPerLine) {
  std::string script = write_temp("device name=G uuid=U total=1000 used=10\n");
  testing::SpawnedCli cli({"gpus", "--json", "--watch", "0.1"}, fake_env(script));
  ASSERT_TRUE(cli.wait_for_output("\n{", std::chrono::seconds(20))) << cli.output();
  cli.send_signal(SIGTERM);
  cli.wait();
  unlink(script.c_str());
  std::string out = cli.output();
  auto first_line = out.substr(0, out.find('\n'));
  auto doc = nlohmann::json::parse(first_line);
  EXPECT_EQ(doc["devices"][0]["total_bytes"], 1000);
}

TEST(GpusCli, WatchOnATerminalRefreshesInPlace) {
  std::string script = write_temp("device name=G uuid=U total=1073741824 used=0\n");
  testing::SpawnedCli cli({"gpus", "--watch", "0.1"}, fake_env(script), /*use_pty=*/true);
  // Two frames: each starts at the top-left corner; the first also clears the screen.
  ASSERT_TRUE(cli.wait_for_output("\x1b[J", std::chrono::seconds(20)));
  ASSERT_TRUE(cli.wait_for_output("\x1b[J\x1b[H", std::chrono::seconds(20))) << cli.output();
  cli.send_signal(SIGINT);
  cli.wait();
  unlink(script.c_str());
  const std::string& out = cli.output();
  EXPECT_EQ(out.rfind("\x1b[H\x1b[2JNVIDIA driver 550.54.15, CUDA 12.4\x1b[K\r\n", 0), 0u) << out;
  EXPECT_NE(out.find("GPU 0  G  util 0%\x1b[K\r\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace oomdoc
