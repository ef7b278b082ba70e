// `oomdoc run` end to end: the built binary wrapping small shell and Python children.
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/spawned_cli.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;
using testing::SpawnedCli;

TEST(RunCli, OomChildKeepsExitCodeAndGetsAnExplanation) {
  const std::string log = testing::fixture_path("run/torch_oom.txt");
  auto r = run_cli({"run", "--", "sh", "-c", "echo starting; cat '" + log + "' >&2; exit 1"}, "", {"NO_COLOR=1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "starting\n");  // stdout untouched
  const std::string child_err = testing::read_file(log);
  ASSERT_EQ(r.err.substr(0, child_err.size()), child_err);  // the child's stderr first, unchanged
  const std::string ours = r.err.substr(child_err.size());
  // The explanation `oomdoc explain` gives for the same text, after a headline.
  auto explain = run_cli({"explain", log}, "", {"NO_COLOR=1"});
  ASSERT_EQ(explain.exit_code, 0);
  std::string expected = explain.out;
  const std::string file_prefix = log + ":";
  ASSERT_EQ(expected.rfind(file_prefix, 0), 0u);
  expected.replace(0, file_prefix.size(), "stderr:");
  EXPECT_EQ(ours, "\noomdoc: the command ran out of memory\n\n" + expected);
  EXPECT_NE(ours.find("stderr:5  PyTorch out of memory on GPU 0\n"), std::string::npos) << ours;
}

TEST(RunCli, SuccessfulChildIsSilent) {
  auto r = run_cli({"run", "--", "sh", "-c", "echo 'out of memory is just a phrase'; exit 0"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "out of memory is just a phrase\n");
  EXPECT_EQ(r.err, "");
}

TEST(RunCli, FailingChildWithoutOomIsSilent) {
  auto r = run_cli({"run", "--", "sh", "-c", "echo 'ValueError: bad' >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.err, "ValueError: bad\n");
}

// An empty path (a script's unset $REPORT) is refused before the command starts, not taken as none.
TEST(RunCli, EmptyPathsAreRefusedBeforeTheCommandRuns) {
  for (const char* flag : {"--json-report", "--snapshot-on-oom"}) {
    auto r = run_cli({"run", flag, "", "--", "sh", "-c", "echo ran"});
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_EQ(r.out, "") << flag;
    EXPECT_EQ(r.err, std::string("oomdoc run: ") + flag + ": an empty path (see oomdoc run --help)\n") << flag;
  }
}

TEST(RunCli, MegabytesPassThroughUnchanged) {
  auto r = run_cli({"run", "--", "seq", "1", "1000000"});
  EXPECT_EQ(r.exit_code, 0);
  std::string expected;
  for (int i = 1; i <= 1000000; ++i) expected += std::to_string(i) + "\n";
  EXPECT_EQ(r.out.size(), expected.size());
  EXPECT_TRUE(r.out == expected);
  EXPECT_EQ(r.err, "");
}

TEST(RunCli, StdinIsTheChildsStdin) {
  auto r = run_cli({"run", "--", "tr", "a-z", "A-Z"}, "hello\n");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "HELLO\n");
}

// The child traps the signal, says so, and exits with its own code: oomdoc must pass the signal on
// and then exit with that code.
void expect_forwarded(int sig, const std::string& name) {
  SpawnedCli cli({"run", "--", "sh", "-c",
                  "trap 'echo got " + name + "; exit 42' " + name + "; echo ready; while :; do sleep 0.05; done"});
  ASSERT_TRUE(cli.wait_for_output("ready\n", std::chrono::seconds(20))) << cli.output();
  cli.send_signal(sig);
  EXPECT_EQ(cli.wait(), 42) << cli.output();
  EXPECT_EQ(cli.output(), "ready\ngot " + name + "\n");
}

TEST(RunCli, ForwardsSigterm) { expect_forwarded(SIGTERM, "TERM"); }
TEST(RunCli, ForwardsSigint) { expect_forwarded(SIGINT, "INT"); }

TEST(RunCli, DiesOfTheSignalThatKilledTheChild) {
  SpawnedCli cli({"run", "--", "sh", "-c", "echo ready; while :; do sleep 0.05; done"});
  ASSERT_TRUE(cli.wait_for_output("ready\n", std::chrono::seconds(20)));
  cli.send_signal(SIGTERM);
  EXPECT_EQ(cli.wait(), 128 + SIGTERM);
  EXPECT_EQ(cli.output(), "ready\n");
}

TEST(RunCli, TerminalStaysATerminal) {
  SpawnedCli cli({"run", "--", "sh", "-c", "if [ -t 1 ]; then echo stdout-is-a-tty; fi; printf 'a\\nb\\n'"},
                 {}, /*use_pty=*/true);
  EXPECT_EQ(cli.wait(), 0);
  // The child saw a terminal; its bytes pass through unchanged ("\n", as our pty adds the "\r").
  EXPECT_EQ(cli.output(), "stdout-is-a-tty\r\na\r\nb\r\n");
}

TEST(RunCli, OptionsAfterTheCommandBelongToTheCommand) {
  auto r = run_cli({"run", "sh", "-c", "echo \"$0 $1\"", "--json-report", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "--json-report --help\n");
}

TEST(RunCli, MissingCommandIsUsageError) {
  auto r = run_cli({"run"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "oomdoc: run: no command given; usage: oomdoc run [options] -- COMMAND [ARGS...]\n");
  r = run_cli({"run", "--"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(RunCli, CommandNotFoundIs127WithOneLine) {
  auto r = run_cli({"run", "--", "oomdoc-no-such-command-xyz", "--flag"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "oomdoc: run: oomdoc-no-such-command-xyz: command not found\n");
}

// A command that cannot start still gets the report --json-report promises: the shell's status
// (127 not found, 126 not executable), why, and no OOM.
TEST(RunCli, CommandThatCannotStartStillGetsItsReport) {
  const fs::path dir = fs::temp_directory_path() / ("oomdoc-run-not-started-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string report = (dir / "nf.json").string();
  auto missing = run_cli({"run", "--json-report", report, "--", "oomdoc-no-such-command-xyz"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_EQ(missing.out, "");
  EXPECT_EQ(missing.err, "oomdoc: run: oomdoc-no-such-command-xyz: command not found\n");
  auto doc = nlohmann::json::parse(testing::read_file(report));
  EXPECT_EQ(doc["command"], "run");
  EXPECT_EQ(doc["exit_code"], 127);
  EXPECT_EQ(doc["signal"], nullptr);
  EXPECT_EQ(doc["start_error"], "oomdoc-no-such-command-xyz: command not found");
  EXPECT_EQ(doc["explain"], nullptr);
  EXPECT_EQ(doc["snapshots"], nlohmann::json::array());
  EXPECT_EQ(doc["snapshot_hook"], nullptr);

  const std::string not_executable = testing::fixture_path("run/torch_oom.txt");
  auto denied = run_cli({"run", "--json-report", report, "--", not_executable});
  EXPECT_EQ(denied.exit_code, 126);
  EXPECT_EQ(denied.err, "oomdoc: run: " + not_executable + ": permission denied\n");
  doc = nlohmann::json::parse(testing::read_file(report));
  EXPECT_EQ(doc["exit_code"], 126);
  EXPECT_EQ(doc["start_error"], not_executable + ": permission denied");

  // A command that ran has a null start_error.
  auto ran = run_cli({"run", "--json-report", report, "--", "true"});
  EXPECT_EQ(ran.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(testing::read_file(report))["start_error"], nullptr);
  fs::remove_all(dir);
}

TEST(RunCli, NotExecutableIs126) {
  auto r = run_cli({"run", "--", testing::fixture_path("run/torch_oom.txt")});
  EXPECT_EQ(r.exit_code, 126);
  EXPECT_EQ(r.err, "oomdoc: run: " + testing::fixture_path("run/torch_oom.txt") + ": permission denied\n");
}

TEST(RunCli, AllocConfReachesTheChild) {
  auto r = run_cli({"run", "--alloc-conf", "expandable_segments:True", "--", "sh", "-c",
                    "echo \"$PYTORCH_CUDA_ALLOC_CONF|$PYTORCH_ALLOC_CONF\""});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "expandable_segments:True|expandable_segments:True\n");
}

TEST(RunCli, JsonReportGoesToAFile) {
  char path[] = "/tmp/oomdoc-run-report-XXXXXX";
  close(mkstemp(path));
  auto r = run_cli({"run", "--json-report", path, "--", "sh", "-c",
                    "echo 'RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total "
                    "capacity; 14.56 GiB already allocated; 3.44 MiB free; 14.71 GiB reserved in total by "
                    "PyTorch)' >&2; exit 1"});
  EXPECT_EQ(r.exit_code, 1);
  auto doc = nlohmann::json::parse(testing::read_file(path));
  unlink(path);
  EXPECT_EQ(doc["command"], "run");
  EXPECT_EQ(doc["exit_code"], 1);
  EXPECT_EQ(doc["signal"], nullptr);
  ASSERT_EQ(doc["explain"]["events"].size(), 1u);
  EXPECT_EQ(doc["explain"]["events"][0]["requested_bytes"], 20971520);
  EXPECT_EQ(doc["snapshots"], nlohmann::json::array());
  EXPECT_EQ(doc["snapshot_hook"], nullptr);
}

// The report's path is checked before the command starts: a run of hours must not end in "cannot
// write". The command does not run (no "ran" on stdout).
TEST(RunCli, JsonReportPathIsCheckedBeforeTheCommandStarts) {
  auto missing = run_cli({"run", "--json-report", "/nonexistent-oomdoc-dir/r.json", "--", "sh", "-c", "echo ran"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.out, "");
  EXPECT_EQ(missing.err,
            "oomdoc: /nonexistent-oomdoc-dir/r.json: cannot write the JSON report (no directory /nonexistent-oomdoc-dir)\n");
  const std::string dir = fs::temp_directory_path().string();
  auto directory = run_cli({"run", "--json-report", dir, "--", "sh", "-c", "echo ran"});
  EXPECT_EQ(directory.exit_code, 2);
  EXPECT_EQ(directory.out, "");
  EXPECT_EQ(directory.err, "oomdoc: " + dir + ": cannot write the JSON report (it is a directory)\n");
}

// Writing can still fail at the end (here /dev/full: the disk is full). The reason is given; a child
// that succeeded makes oomdoc exit 2, not 0; a child that failed keeps its own status.
TEST(RunCli, JsonReportThatCannotBeWrittenAtTheEnd) {
  auto ok_child = run_cli({"run", "--json-report", "/dev/full", "--", "sh", "-c", "echo done"}, "", {"NO_COLOR=1"});
  EXPECT_EQ(ok_child.exit_code, 2);
  EXPECT_EQ(ok_child.out, "done\n");
  EXPECT_EQ(ok_child.err, "oomdoc: /dev/full: cannot write the JSON report: No space left on device\n");
  auto failing_child = run_cli({"run", "--json-report", "/dev/full", "--", "sh", "-c", "exit 3"}, "", {"NO_COLOR=1"});
  EXPECT_EQ(failing_child.exit_code, 3);
  EXPECT_EQ(failing_child.err, "oomdoc: /dev/full: cannot write the JSON report: No space left on device\n");
  // The directory removed while the command ran.
  const fs::path dir = fs::temp_directory_path() / ("oomdoc-run-report-gone-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string report = (dir / "r.json").string();
  auto gone = run_cli({"run", "--json-report", report, "--", "rm", "-r", dir.string()}, "", {"NO_COLOR=1"});
  EXPECT_EQ(gone.exit_code, 2);
  EXPECT_EQ(gone.err, "oomdoc: " + report + ": cannot write the JSON report: No such file or directory\n");
  EXPECT_FALSE(fs::exists(dir));
}

// --json-report never replaces a file the command names (its script, a config, a log it writes)
// nor its program: refused before the command starts, the file left as it was. A device is not
// replaced by writing to it: /dev/null stays allowed.
TEST(RunCli, JsonReportThatWouldReplaceAFileOfTheCommandIsRefused) {
  const fs::path dir = fs::temp_directory_path() / ("oomdoc-run-clobber-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "bin");
  const std::string script = (dir / "myscript.sh").string();
  std::ofstream(script) << "echo ran\n";
  const std::string link = (dir / "link.json").string();
  fs::create_symlink(script, link);

  auto same = run_cli({"run", "--json-report", script, "--", "sh", script});
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_EQ(same.out, "");
  EXPECT_EQ(same.err, "oomdoc: " + script + ": cannot write the JSON report (it is a file the command names)\n");
  auto through_link = run_cli({"run", "--json-report", link, "--", "sh", script});
  EXPECT_EQ(through_link.exit_code, 2);
  EXPECT_EQ(through_link.out, "");
  EXPECT_EQ(through_link.err,
            "oomdoc: " + link + ": cannot write the JSON report (it is " + script + ", a file the command names)\n");
  EXPECT_EQ(testing::read_file(script), "echo ran\n");

  // Not there yet, named as an --option=VALUE and spelled another way: the command may write it.
  const std::string log = (dir / "log.txt").string(), log_respelled = (dir / "." / "log.txt").string();
  auto option_value = run_cli({"run", "--json-report", log, "--", "sh", script, "--log=" + log_respelled});
  EXPECT_EQ(option_value.exit_code, 2);
  EXPECT_EQ(option_value.out, "");
  EXPECT_EQ(option_value.err,
            "oomdoc: " + log + ": cannot write the JSON report (it is " + log_respelled + ", a file the command names)\n");
  EXPECT_FALSE(fs::exists(log));

  // The program PATH finds for the command.
  const std::string program = (dir / "bin" / "myprog").string();
  std::ofstream(program) << "#!/bin/sh\necho ran\n";
  fs::permissions(program, fs::perms::owner_all);
  auto program_run = run_cli({"run", "--json-report", program, "--", "myprog"}, "",
                             {"PATH=" + (dir / "bin").string() + ":/usr/bin:/bin"});
  EXPECT_EQ(program_run.exit_code, 2);
  EXPECT_EQ(program_run.out, "");
  EXPECT_EQ(program_run.err, "oomdoc: " + program + ": cannot write the JSON report (it is the command's program)\n");
  EXPECT_EQ(testing::read_file(program), "#!/bin/sh\necho ran\n");

  auto device = run_cli({"run", "--json-report", "/dev/null", "--", "cat", "/dev/null"});
  EXPECT_EQ(device.exit_code, 0);
  EXPECT_EQ(device.err, "");
  fs::remove_all(dir);
}

// oomdoc's own stdout failing (a full disk: /dev/full) is said once and makes a successful command's
// run exit 2; a failing command keeps its status. The child ran to its end all the same.
TEST(RunCli, OutputThatCannotBeWrittenIsReported) {
  auto ok_child = testing::run_shell("\"$OOMDOC\" run -- sh -c 'echo hi; echo done >&2' >/dev/full", {"NO_COLOR=1"});
  EXPECT_EQ(ok_child.exit_code, 2);
  EXPECT_EQ(ok_child.err, "done\noomdoc run: writing the command's output failed: No space left on device\n");
  auto failing_child = testing::run_shell("\"$OOMDOC\" run -- sh -c 'echo hi; exit 3' >/dev/full", {"NO_COLOR=1"});
  EXPECT_EQ(failing_child.exit_code, 3);
  EXPECT_EQ(failing_child.err, "oomdoc run: writing the command's output failed: No space left on device\n");
  // The OOM is still read from the output that could not be written, and explained.
  const std::string log = testing::fixture_path("run/torch_oom.txt");
  auto oom = testing::run_shell("\"$OOMDOC\" run -- sh -c 'cat \"" + log + "\"; exit 1' >/dev/full", {"NO_COLOR=1"});
  EXPECT_EQ(oom.exit_code, 1);
  EXPECT_EQ(oom.err.rfind("oomdoc run: writing the command's output failed: No space left on device\n\n"
                          "oomdoc: the command ran out of memory\n\nstdout:5  PyTorch out of memory on GPU 0\n", 0),
            0u)
      << oom.err;
}

// A reader that leaves (`| head`) is no error: nothing is said, and the command meets the broken
// pipe as it would without oomdoc (here `yes`, which would otherwise never end, dies of SIGPIPE),
// and oomdoc ends with its signal.
TEST(RunCli, AReaderThatLeavesEndsTheCommandQuietly) {
  auto r = testing::run_shell("{ timeout 20 \"$OOMDOC\" run -- yes; echo \"oomdoc exit=$?\" >&2; } | head -n 2 >/dev/null");
  EXPECT_EQ(r.err, "oomdoc exit=141\n");  // 128 + SIGPIPE, and nothing from oomdoc
}

TEST(RunCli, AllocConfIsCheckedBeforeTheCommandStarts) {
  auto r = run_cli({"run", "--alloc-conf", "expandable_segments:true", "--", "sh", "-c", "echo ran"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "oomdoc: --alloc-conf: expandable_segments:true: must be True or False (with capitals)\n");
  auto bogus = run_cli({"run", "--alloc-conf", "bogus", "--", "sh", "-c", "echo ran"});
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_EQ(bogus.out, "");
  EXPECT_EQ(bogus.err.rfind("oomdoc: --alloc-conf: unknown setting 'bogus'; PyTorch's CUDA allocator knows backend, ", 0), 0u)
      << bogus.err;
}

TEST(RunCli, SnapshotEntriesNeedsSnapshotOnOom) {
  auto r = run_cli({"run", "--snapshot-entries", "10", "--", "sh", "-c", "echo ran"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "oomdoc run: --snapshot-entries requires --snapshot-on-oom (see oomdoc run --help)\n");
}

// torch 1.13 has no torch.OutOfMemoryError: the script's own `raise torch.OutOfMemoryError("CUDA out of
// memory. ...")` fails with AttributeError, and the traceback shows that source line. The OOM text is
// code, not an error message: the scanner reads a line indented under a `File "...", line N` frame as
// the frame's source, not as a message.
TEST(RunCli, OomTextInATracebackSourceLineIsNotAnOom) {
  const std::string log = testing::fixture_path("run/oom_text_in_source_line.txt");
  auto r = run_cli({"run", "--", "sh", "-c", "cat '" + log + "' >&2; exit 1"}, "", {"NO_COLOR=1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, testing::read_file(log));  // the child's stderr, and nothing from oomdoc
}

// ---- --snapshot-on-oom ----

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag)
      : path(fs::temp_directory_path() / ("oomdoc-run-test-" + tag + "-" + std::to_string(getpid()))) {
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (fs::exists(dir))
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  return out;
}

// Debian's python3-torch is a CPU build: the hook loads, finds no CUDA, leaves the child's output
// alone, and oomdoc says so once.
TEST(RunCli, SnapshotHookWithRealCpuTorchStaysQuiet) {
  TempDir snaps("cpu");
  auto r = run_cli({"run", "--snapshot-on-oom", snaps.path.string(), "--", "/usr/bin/python3", "-c",
                    "import torch; x = torch.ones(3); print(x.sum().item())"},
                   "", {"NO_COLOR=1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "3.0\n");
  ASSERT_EQ(r.err.rfind("oomdoc: --snapshot-on-oom: PyTorch ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(" in the child has no CUDA support; nothing was recorded\n"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(files_in(snaps.path).empty());
}

TEST(RunCli, SnapshotHookRecordsAndDumpsOnOom) {
  TempDir snaps("fake");
  const std::string script = "import torch; torch.cuda.init(); print('training'); torch.cuda.allocate_too_much()";
  for (const char* variant : {"observer", "excepthook", "legacy"}) {
    fs::remove_all(snaps.path);
    std::vector<std::string> env = {"NO_COLOR=1", "PYTHONPATH=" + testing::fixture_path("run/fake_torch")};
    if (std::string(variant) != "observer") env.push_back("FAKE_TORCH_NO_OBSERVER=1");
    if (std::string(variant) == "legacy") env.push_back("FAKE_TORCH_LEGACY=1");
    auto r = run_cli({"run", "--snapshot-on-oom", snaps.path.string(), "--snapshot-entries", "777", "--",
                      "/usr/bin/python3", "-c", script},
                     "", env);
    EXPECT_EQ(r.exit_code, 1) << variant << r.err;
    EXPECT_EQ(r.out, "training\n") << variant;
    auto files = files_in(snaps.path);
    ASSERT_EQ(files.size(), 1u) << variant << r.err;
    EXPECT_EQ(files[0].filename().string().rfind("oom-snapshot-", 0), 0u);
    EXPECT_NE(r.err.find("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."), std::string::npos);
    EXPECT_NE(r.err.find("oomdoc: the command ran out of memory\n"), std::string::npos) << variant << r.err;
    EXPECT_NE(r.err.find("oomdoc: memory snapshot at the out-of-memory error: " + files[0].string() + "\n"),
              std::string::npos) << variant << r.err;
    // The recording was bounded by --snapshot-entries, through the signature of that torch version.
    auto check = run_cli({"run", "--", "/usr/bin/python3", "-c",
                          "import pickle,sys; a = pickle.load(open(sys.argv[1], 'rb'))['history_args']; "
                          "print(a.get('max_entries') or a.get('trace_alloc_max_entries'))",
                          files[0].string()});
    EXPECT_EQ(check.out, "777\n") << variant << check.err;
  }
}

TEST(RunCli, SnapshotHookRunsTheUsersSitecustomize) {
  TempDir snaps("chain");
  auto r = run_cli({"run", "--snapshot-on-oom", snaps.path.string(), "--", "/usr/bin/python3", "-c", "print('main')"},
                   "", {"NO_COLOR=1", "PYTHONPATH=" + testing::fixture_path("run/user_site")});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "main\n");
  // A run that succeeds without torch is not told that nothing was recorded.
  EXPECT_EQ(r.err, "user sitecustomize ran\n");
  auto failed = run_cli({"run", "--snapshot-on-oom", snaps.path.string(), "--", "/usr/bin/python3", "-c",
                         "import sys; print('main'); sys.exit(3)"},
                        "", {"NO_COLOR=1", "PYTHONPATH=" + testing::fixture_path("run/user_site")});
  EXPECT_EQ(failed.exit_code, 3);
  EXPECT_EQ(failed.err,
            "user sitecustomize ran\n"
            "oomdoc: --snapshot-on-oom: the child never imported torch; nothing was recorded\n");
}

TEST(RunCli, SnapshotDirThatCannotBeCreated) {
  auto r = run_cli({"run", "--snapshot-on-oom", "/proc/oomdoc", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("oomdoc: /proc/oomdoc: cannot create the snapshot directory: ", 0), 0u) << r.err;
}

}  // namespace
}  // namespace oomdoc
