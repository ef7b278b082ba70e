#include "process/child_process.h"

#include <unistd.h>

#include <fstream>

#include <filesystem>
#include <gtest/gtest.h>

#include "support/test_support.h"

namespace oomdoc {
namespace {

// The child's stdout and stderr go to temporary files; the observer's view is kept too.
struct Captured {
  Result<ChildOutcome> outcome = make_error("not run");
  std::string out, err, observed_out, observed_err;
};

Captured run(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env = {}) {
  char out_path[] = "/tmp/oomdoc-child-out-XXXXXX", err_path[] = "/tmp/oomdoc-child-err-XXXXXX";
  int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
  ChildSpec spec;
  spec.argv = argv;
  spec.set_env = env;
  spec.stdout_fd = out_fd;
  spec.stderr_fd = err_fd;
  Captured c;
  c.outcome = run_child(spec, [&](std::string_view chunk, bool from_stderr) {
    (from_stderr ? c.observed_err : c.observed_out).append(chunk);
  });
  close(out_fd);
  close(err_fd);
  c.out = testing::read_file(out_path);
  c.err = testing::read_file(err_path);
  unlink(out_path);
  unlink(err_path);
  return c;
}

TEST(ChildProcess, PassesOutputAndExitCode) {
  auto c = run({"sh", "-c", "printf 'a\\nb'; printf 'e' >&2; exit 7"});
  ASSERT_TRUE(c.outcome.ok()) << c.outcome.error().message;
  EXPECT_EQ(c.outcome->exit_code, 7);
  EXPECT_EQ(c.outcome->signal, std::nullopt);
  EXPECT_EQ(c.out, "a\nb");
  EXPECT_EQ(c.err, "e");
  EXPECT_EQ(c.observed_out, "a\nb");
  EXPECT_EQ(c.observed_err, "e");
}

TEST(ChildProcess, MegabytesArriveWholeAndInOrder) {
  // 1,000,000 lines (6.9 MB) on stdout and 500,000 on stderr at the same time.
  auto c = run({"sh", "-c", "seq 1 1000000; seq 1 500000 >&2"});
  ASSERT_TRUE(c.outcome.ok());
  EXPECT_EQ(c.outcome->exit_code, 0);
  std::string expected_out, expected_err;
  for (int i = 1; i <= 1000000; ++i) expected_out += std::to_string(i) + "\n";
  for (int i = 1; i <= 500000; ++i) expected_err += std::to_string(i) + "\n";
  EXPECT_TRUE(c.out == expected_out) << "stdout differs: " << c.out.size() << " bytes";
  EXPECT_TRUE(c.err == expected_err) << "stderr differs: " << c.err.size() << " bytes";
  EXPECT_TRUE(c.observed_out == expected_out);
}

TEST(ChildProcess, SetsEnvironment) {
  auto c = run({"sh", "-c", "echo \"$OOMDOC_TEST_VALUE\""}, {{"OOMDOC_TEST_VALUE", "x=1 y"}});
  ASSERT_TRUE(c.outcome.ok());
  EXPECT_EQ(c.out, "x=1 y\n");
}

TEST(ChildProcess, ReportsTheSignalThatEndedIt) {
  auto c = run({"sh", "-c", "kill -KILL $$"});
  ASSERT_TRUE(c.outcome.ok());
  EXPECT_EQ(c.outcome->signal, 9);
  EXPECT_EQ(c.outcome->exit_code, 137);
}

TEST(ChildProcess, DoesNotWaitForABackgroundGrandchild) {
  // The grandchild keeps stdout open for 30 s; the run ends when the child does.
  auto start = std::chrono::steady_clock::now();
  auto c = run({"sh", "-c", "sleep 30 & echo started"});
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(c.outcome.ok());
  EXPECT_EQ(c.out, "started\n");
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST(ChildProcess, CommandNotFound) {
  auto c = run({"oomdoc-no-such-command-xyz"});
  ASSERT_FALSE(c.outcome.ok());
  EXPECT_EQ(c.outcome.error().message, "oomdoc-no-such-command-xyz: command not found");
  EXPECT_EQ(find_executable("/nonexistent/tool").error().message, "/nonexistent/tool: no such file");
  EXPECT_EQ(find_executable("/tmp").error().message, "/tmp: is a directory");
  EXPECT_EQ(find_executable("sh").value().back(), 'h');
  // Which shell status a failure maps to: 127 for a missing command, 126 for one that cannot run.
  bool not_found = false;
  EXPECT_FALSE(find_executable("/nonexistent/tool", &not_found));
  EXPECT_TRUE(not_found);
  EXPECT_FALSE(find_executable("oomdoc-no-such-command-anywhere", &not_found));
  EXPECT_TRUE(not_found);
  EXPECT_FALSE(find_executable("/tmp", &not_found));
  EXPECT_FALSE(not_found);
  const std::string plain = (std::filesystem::temp_directory_path() / "oomdoc_not_executable.txt").string();
  std::ofstream(plain) << "data";
  std::filesystem::permissions(plain, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_FALSE(find_executable(plain, &not_found));  // exists, no execute bit
  EXPECT_FALSE(not_found);
  std::filesystem::remove(plain);
}

TEST(ChildProcess, FileWithoutExecutePermission) {
  char path[] = "/tmp/oomdoc-not-executable-XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  auto c = run({path});
  ASSERT_FALSE(c.outcome.ok());
  EXPECT_EQ(c.outcome.error().message, std::string(path) + ": permission denied");
  unlink(path);
}

}  // namespace
}  // namespace oomdoc
