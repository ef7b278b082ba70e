#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "support/test_support.h"

namespace oomdoc {
namespace {

using ::testing::HasSubstr;
using testing::fixture_path;
using testing::run_cli;

TEST(SnapshotCli, SummaryAndJson) {
  auto text = run_cli({"snapshot", fixture_path("snapshot/train_p5.pickle")});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("OOM on cuda:0"));
  auto json = run_cli({"snapshot", "--json", fixture_path("snapshot/train.json")});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc["devices"][0]["ooms"][0]["verdict"], "too_large_or_outside_pytorch");  // 20 GiB asked of 60 MiB reserved + 256 MiB free
  auto one = run_cli({"snapshot", "--json", "--device", "1", fixture_path("snapshot/train_p2.pickle")});
  EXPECT_EQ(nlohmann::json::parse(one.out)["devices"].size(), 1u);
}

// --segments N: rows of the fragmentation table in the terminal; --json always lists every segment.
TEST(SnapshotCli, SegmentsFlagLimitsTheTableNotTheJson) {
  auto count_rows = [](const std::string& out) {
    size_t rows = 0;
    for (size_t at = out.find("\n    0x"); at != std::string::npos; at = out.find("\n    0x", at + 1)) ++rows;
    return rows;
  };
  const std::string file = fixture_path("snapshot/fragmented_p4.pickle");
  auto def = run_cli({"snapshot", file});
  ASSERT_EQ(def.exit_code, 0) << def.err;
  EXPECT_EQ(count_rows(def.out), 4u);  // default 10: all four
  EXPECT_THAT(def.out, HasSubstr("most free memory in pieces smaller than the request first: 4 of 4\n"));
  auto one = run_cli({"snapshot", file, "--segments", "1"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(count_rows(one.out), 1u);
  EXPECT_THAT(one.out, HasSubstr("1 of 4 (--segments N for more, --json for all)\n"));
  EXPECT_THAT(one.out, HasSubstr("\n    0x7f0000000000     64.00 MiB large       0   32.00 MiB"));
  auto json = run_cli({"snapshot", file, "--segments", "1", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out)["devices"][0]["fragmentation"]["segments"]["address"].size(), 4u);
  auto bad = run_cli({"snapshot", file, "--segments", "abc"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(bad.out.empty());
}

// stdout is checked once, after any command (cli/main.cpp): a report that could not be written
// (here /dev/full: the disk is full) is an error, never exit 0.
TEST(SnapshotCli, OutputThatCannotBeWrittenIsAnError) {
  const std::string file = fixture_path("snapshot/train_p4.pickle");
  for (const char* format : {"--json", "--segments=10"}) {
    auto r = testing::run_shell("\"$OOMDOC\" snapshot " + std::string(format) + " '" + file + "' >/dev/full");
    EXPECT_EQ(r.exit_code, 2) << format;
    EXPECT_EQ(r.err, "oomdoc: snapshot: cannot write the output: No space left on device\n") << format;
  }
  // The same for the other commands, from the same place.
  auto catalog = testing::run_shell("\"$OOMDOC\" gpus --catalog --json >/dev/full");
  EXPECT_EQ(catalog.exit_code, 2);
  EXPECT_EQ(catalog.err, "oomdoc: gpus: cannot write the output: No space left on device\n");
}

TEST(SnapshotCli, StdinCannotBeBothSnapshotsOfACompare) {
  auto r = run_cli({"snapshot", "-", "--compare", "-"}, testing::read_file(fixture_path("snapshot/train_p4.pickle")));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(r.err, "oomdoc: --compare: standard input (-) can be read once: give one of the two snapshots as a file\n");
}

TEST(SnapshotCli, ReadsStdin) {
  auto r = run_cli({"snapshot", "--json", "-"}, testing::read_file(fixture_path("snapshot/train_p4.pickle")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["file"], "<stdin>");
  // A comparison names standard input the same way.
  auto c = run_cli({"snapshot", "--json", "-", "--compare", fixture_path("snapshot/expandable_p4.pickle")},
                   testing::read_file(fixture_path("snapshot/train_p4.pickle")));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(nlohmann::json::parse(c.out)["before"], "<stdin>");
}

TEST(SnapshotCli, CompareAndHtml) {
  auto c = run_cli({"snapshot", fixture_path("snapshot/train_p4.pickle"), "--compare",
                    fixture_path("snapshot/expandable_p4.pickle"), "--json"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_FALSE(nlohmann::json::parse(c.out)["stacks"].empty());
  std::string html = std::string(OOMDOC_BINARY_DIR) + "/snapshot_cli_test.html";
  auto h = run_cli({"snapshot", fixture_path("snapshot/train_p4.pickle"), "--html", html});
  ASSERT_EQ(h.exit_code, 0) << h.err;
  EXPECT_THAT(testing::read_file(html), HasSubstr("new uPlot("));
}

TEST(SnapshotCli, BadInputIsOneLineAndExitTwo) {
  auto missing = run_cli({"snapshot", "/nonexistent.pickle"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "oomdoc: /nonexistent.pickle: no such file\n");
  std::string hostile = std::string(OOMDOC_BINARY_DIR) + "/hostile.pickle";
  std::ofstream(hostile, std::ios::binary) << std::string("\x80\x04\x63os\nsystem\n\x8c\x02id\x85R.", 18);
  auto h = run_cli({"snapshot", hostile});
  EXPECT_EQ(h.exit_code, 2);
  EXPECT_THAT(h.err, HasSubstr("offset 2: GLOBAL: refused"));
  EXPECT_TRUE(h.out.empty());
  auto size = run_cli({"snapshot", fixture_path("snapshot/train_p4.pickle"), "--gpu-memory", "lots"});
  EXPECT_EQ(size.exit_code, 2);
}

TEST(SnapshotCli, DeviceNotInTheFileIsBadInput) {
  const std::string file = fixture_path("snapshot/train_p2.pickle");
  auto r = run_cli({"snapshot", "--device", "7", file});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "oomdoc: " + file + ": no device 7 (devices in the file: 0, 1)\n");
  auto negative = run_cli({"snapshot", "--device", "-1", file});
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_EQ(negative.err, "oomdoc: --device: must be 0 or more (got -1)\n");
  auto compare = run_cli({"snapshot", "--device", "7", file, "--compare", file});
  EXPECT_EQ(compare.exit_code, 2);
  EXPECT_EQ(compare.err, "oomdoc: " + file + ": no device 7 (devices in the file: 0, 1)\n");
}

// --gpu-memory is read as --memory is everywhere (cli/gpu_flags.h): a unit is required, GB is decimal,
// GiB binary; a capacity below what the file shows reserved cannot be the device's.
TEST(SnapshotCli, GpuMemoryNeedsAUnitAndRoomForWhatIsReserved) {
  const std::string file = fixture_path("snapshot/two_devices_oom_p4.pickle");
  auto bare = run_cli({"snapshot", file, "--gpu-memory", "80"});
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_EQ(bare.out, "");
  EXPECT_EQ(bare.err, "oomdoc: --gpu-memory: '80' has no unit: write 80GiB (as CUDA and nvidia-smi count) or 80GB (decimal)\n");
  auto lots = run_cli({"snapshot", file, "--gpu-memory", "lots"});
  EXPECT_EQ(lots.exit_code, 2);
  EXPECT_EQ(lots.err, "oomdoc: --gpu-memory: 'lots' is not a size (e.g. 24GiB)\n");
  auto small = run_cli({"snapshot", file, "--gpu-memory", "10MiB"});
  EXPECT_EQ(small.exit_code, 2);
  EXPECT_EQ(small.out, "");
  EXPECT_EQ(small.err, "oomdoc: --gpu-memory: 10.00 MiB is less than the 20.00 MiB cuda:0 had reserved (at dump time) in " +
                           file + "\n");
  // At the OOM PyTorch had 20 MiB reserved and CUDA 1 MiB free: a card of 20 MiB cannot be it.
  auto short_by_free = run_cli({"snapshot", file, "--gpu-memory", "20MiB", "--json"});
  EXPECT_EQ(short_by_free.exit_code, 2);
  EXPECT_EQ(short_by_free.out, "");
  EXPECT_EQ(short_by_free.err, "oomdoc: --gpu-memory: 20.00 MiB is less than the 21.00 MiB cuda:0 held at its OOM (event 3) "
                               "in " + file + ": 20.00 MiB reserved by PyTorch and 1.00 MiB CUDA reported free\n");
  auto enough = run_cli({"snapshot", file, "--gpu-memory", "21MiB", "--json"});
  ASSERT_EQ(enough.exit_code, 0) << enough.err;
  auto doc = nlohmann::json::parse(enough.out);
  // 21 MiB capacity, 20 MiB reserved, 1 MiB free: 0 B outside PyTorch.
  EXPECT_EQ(doc["devices"][0]["ooms"][0]["outside_pytorch_bytes"], 0);
  auto decimal = run_cli({"snapshot", file, "--gpu-memory", "1GB", "--json"});
  ASSERT_EQ(decimal.exit_code, 0) << decimal.err;
  // 10^9 - 20 MiB reserved - 1 MiB free.
  EXPECT_EQ(nlohmann::json::parse(decimal.out)["devices"][0]["ooms"][0]["outside_pytorch_bytes"], 1000000000 - 21 * 1048576);
  auto compare = run_cli({"snapshot", file, "--compare", file, "--gpu-memory", "80GiB"});
  EXPECT_EQ(compare.exit_code, 2);
  EXPECT_EQ(compare.err, "oomdoc: --gpu-memory: not available with --compare (the comparison gives no OOM verdicts)\n");
}

// Each device that ran out of memory is named in the headline; a device's segment table is at its
// first OOM, and says so when there are more.
TEST(SnapshotCli, HeadlineNamesEveryDevicesOom) {
  const std::string file = fixture_path("snapshot/two_devices_oom_p4.pickle");
  auto r = run_cli({"snapshot", file}, "", {"NO_COLOR=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')),
            "OOM on cuda:0 at trace event 3: exhaustion (16.00 MiB requested, 1.00 MiB free on the device, 20.00 MiB "
            "reserved, largest free block 4.00 MiB) and 1 more OOM event; OOM on cuda:1 at trace event 2: "
            "too_large_or_outside_pytorch (80.00 MiB requested, 3.00 MiB free on the device, 2.00 MiB reserved, "
            "largest free block 0 B)");
  EXPECT_THAT(r.out, HasSubstr("\n  segments at the first of 2 OOMs (event 3), most free memory in pieces smaller than "
                               "the request first: 1 of 1\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  segments at the OOM (event 2), most free memory"));
  EXPECT_THAT(r.out, HasSubstr("0 of 1 segment had a free block of 16.00 MiB (the request)"));
  EXPECT_THAT(r.out, HasSubstr("for a 16.00 MiB request: the device is full of live tensors"));
  EXPECT_THAT(r.out, HasSubstr("for an 8.00 MiB request: the device is full of live tensors"));
  EXPECT_THAT(r.out, HasSubstr("\ncuda:1  1 segment\n"));
}

TEST(SnapshotCli, NegativeDeviceInTheFileIsBadInput) {
  const std::string file = fixture_path("snapshot/negative_device_p4.pickle");
  auto r = run_cli({"snapshot", file});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "oomdoc: " + file + ": segments[0].device is -1: not a CUDA device ordinal\n");
}

// A file without a trace has no peak (null), and a device one file lacks is absent there, not 0 B.
TEST(SnapshotCli, CompareKeepsAbsentValuesAbsent) {
  const std::string before = fixture_path("snapshot/list_1_13_p2.pickle");  // device 0, no trace
  const std::string after = fixture_path("snapshot/train_p2.pickle");       // devices 0 and 1, with traces
  auto json = run_cli({"snapshot", before, "--compare", after, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto doc = nlohmann::json::parse(json.out);
  ASSERT_EQ(doc["devices"].size(), 2u);
  const auto& d0 = doc["devices"][0];
  const auto& d1 = doc["devices"][1];
  EXPECT_EQ(d0["peak_live_before_bytes"], nullptr);
  EXPECT_FALSE(d0["reserved_before_bytes"].is_null());
  EXPECT_EQ(d1["device"], 1);
  EXPECT_EQ(d1["reserved_before_bytes"], nullptr);
  EXPECT_EQ(d1["allocated_before_bytes"], nullptr);
  EXPECT_EQ(d1["peak_live_before_bytes"], nullptr);
  // The after side is each device's live_at_peak_bytes in the single-file document.
  auto single = nlohmann::json::parse(run_cli({"snapshot", after, "--json"}).out);
  EXPECT_EQ(d0["peak_live_after_bytes"], single["devices"][0]["live_at_peak_bytes"]);
  EXPECT_EQ(d1["peak_live_after_bytes"], single["devices"][1]["live_at_peak_bytes"]);
  EXPECT_EQ(d1["reserved_after_bytes"], single["devices"][1]["reserved_bytes"]);
  auto old = nlohmann::json::parse(run_cli({"snapshot", before, "--json"}).out);
  EXPECT_EQ(old["devices"][0]["peak_live_bytes"], nullptr);
  EXPECT_EQ(old["devices"][0]["live_at_peak_bytes"], nullptr);
  auto text = run_cli({"snapshot", before, "--compare", after}, "", {"NO_COLOR=1"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("\ncuda:1  reserved absent -> "));
  EXPECT_THAT(text.out, HasSubstr("  allocated absent -> "));
  EXPECT_THAT(text.out, HasSubstr("  peak live absent -> "));
  EXPECT_THAT(text.out, HasSubstr("  peak live no trace -> "));
}

TEST(SnapshotCli, APickleThatImportsIsRefusedWithTheOffset) {
  // docs/snapshot.md shows this file's output; the doc check keeps the whole line in step.
  const std::string file = fixture_path("snapshot/global_p2.pickle");
  auto r = run_cli({"snapshot", file});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("oomdoc: " + file + ": offset 2: GLOBAL: refused", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
}


// A stack is keyed by at least its innermost user frame.
TEST(SnapshotCli, DepthZeroIsRefused) {
  auto r = run_cli({"snapshot", fixture_path("snapshot/train_p4.pickle"), "--depth", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "oomdoc: --depth: must be 1 or more (the user frames that name a stack)\n");
}

TEST(SnapshotCli, HtmlPathIsCheckedBeforeAnythingIsPrinted) {
  auto r = run_cli({"snapshot", fixture_path("snapshot/train_p4.pickle"), "--html", "/nonexistent-dir/x.html"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "oomdoc: /nonexistent-dir/x.html: cannot write the HTML report (no directory /nonexistent-dir)\n");
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(SnapshotCli, HtmlWithCompareIsRefused) {
  std::string html = std::string(OOMDOC_BINARY_DIR) + "/snapshot_cli_compare.html";
  std::remove(html.c_str());
  auto r = run_cli({"snapshot", fixture_path("snapshot/train_p4.pickle"), "--compare",
                    fixture_path("snapshot/expandable_p4.pickle"), "--html", html});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "oomdoc: --html: not available with --compare (the HTML report shows one snapshot; use --json for the "
                   "comparison)\n");
  EXPECT_TRUE(r.out.empty());
  EXPECT_FALSE(std::ifstream(html).good());
}

// --html never replaces the snapshot it reads: not under its own name, not through a symlink or a
// hard link, not spelled another way, not when the snapshot comes on stdin. The file is left as it was.
TEST(SnapshotCli, HtmlThatWouldReplaceTheSnapshotIsRefused) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("oomdoc-snapshot-clobber-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string in = (dir / "in.pickle").string();
  std::filesystem::copy_file(fixture_path("snapshot/train_p4.pickle"), in);
  const std::string original = testing::read_file(in);
  const std::string link = (dir / "link.html").string(), hard = (dir / "hard.html").string();
  std::filesystem::create_symlink(in, link);
  std::filesystem::create_hard_link(in, hard);
  const std::string respelled = (dir / "." / "in.pickle").string();

  auto same = run_cli({"snapshot", in, "--html", in});
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_EQ(same.out, "");
  EXPECT_EQ(same.err, "oomdoc: " + in + ": cannot write the HTML report (it is the snapshot being read)\n");
  for (const std::string& other_name : {link, hard, respelled}) {
    auto r = run_cli({"snapshot", in, "--html", other_name});
    EXPECT_EQ(r.exit_code, 2) << other_name;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "oomdoc: " + other_name + ": cannot write the HTML report (it is " + in +
                         ", the snapshot being read)\n");
  }
  auto stdin_file = testing::run_shell("\"$OOMDOC\" snapshot - --html '" + in + "' < '" + in + "'");
  EXPECT_EQ(stdin_file.exit_code, 2);
  EXPECT_EQ(stdin_file.out, "");
  EXPECT_EQ(stdin_file.err, "oomdoc: " + in + ": cannot write the HTML report (it is /dev/stdin, the snapshot being read)\n");
  EXPECT_TRUE(testing::read_file(in) == original);
  EXPECT_TRUE(std::filesystem::is_symlink(link));

  auto elsewhere = run_cli({"snapshot", in, "--html", (dir / "report.html").string()});
  EXPECT_EQ(elsewhere.exit_code, 0) << elsewhere.err;
  // The pipe the snapshot comes through is no place for the report either: writing it back into
  // the pipe blocked forever once the page outgrew the pipe's buffer.
  auto pipe = testing::run_shell("cat '" + in + "' | timeout 20 \"$OOMDOC\" snapshot - --html /dev/stdin");
  EXPECT_EQ(pipe.exit_code, 2);
  EXPECT_EQ(pipe.out, "");
  EXPECT_EQ(pipe.err, "oomdoc: /dev/stdin: cannot write the HTML report (it is the snapshot being read)\n");
  std::filesystem::remove_all(dir);
}

// A snapshot that breaks the allocator's arithmetic (../shared/data/snapshots/SOURCES.md lists what
// every real file keeps) is still analysed, under a warning naming the first segment that is off, in
// the text (after the verdict) and in --json's warnings. A file that adds up has none.
TEST(SnapshotCli, ASnapshotThatDoesNotAddUpIsSaidSo) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  auto write = [&](const std::string& name, const std::string& segment) {
    const std::string path = (dir / (name + "-" + std::to_string(getpid()) + ".json")).string();
    std::ofstream(path) << R"({"segments": [)" << segment << R"(], "device_traces": [[]]})";
    return path;
  };
  // The blocks cover 1 MiB of a 2 MiB segment.
  const std::string short_blocks = write("oomdoc-short-blocks", R"({"device": 0, "address": 4096, "total_size": 2097152,
      "allocated_size": 1048576, "active_size": 1048576, "blocks": [{"address": 4096, "size": 1048576,
      "requested_size": 1000000, "state": "active_allocated"}]})");
  auto text = run_cli({"snapshot", short_blocks}, "", {"NO_COLOR=1"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.err, "");
  EXPECT_EQ(text.out.substr(0, text.out.find("\n\n") + 2),
            "No OOM recorded. cuda:0 holds 2.00 MiB reserved, 1.00 MiB allocated at dump time (no trace recorded)\n"
            "warning: the snapshot does not add up, so its figures may be wrong: segments[0] (cuda:0 at 0x1000): its "
            "blocks add up to 1.00 MiB, its total_size is 2.00 MiB\n\n");
  // More allocated than reserved.
  const std::string over = write("oomdoc-over-allocated", R"({"device": 0, "address": 4096, "total_size": 1048576,
      "allocated_size": 3145728, "active_size": 3145728, "blocks": [{"address": 4096, "size": 1048576,
      "requested_size": 1048576, "state": "active_allocated"}]})");
  auto json = run_cli({"snapshot", "--json", over});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out)["warnings"],
            nlohmann::json::array({"the snapshot does not add up, so its figures may be wrong: segments[0] (cuda:0 at "
                                   "0x1000): its allocated_size 3.00 MiB is more than its total_size 1.00 MiB"}));
  auto fine = run_cli({"snapshot", "--json", fixture_path("snapshot/train_p4.pickle")});
  ASSERT_EQ(fine.exit_code, 0) << fine.err;
  EXPECT_EQ(nlohmann::json::parse(fine.out)["warnings"], nlohmann::json::array());
  std::remove(short_blocks.c_str());
  std::remove(over.c_str());
}

// An unknown option is named as such, not hidden behind the missing file; no file is its own error.
TEST(SnapshotCli, UnknownOptionAndMissingFileAreOneLineEach) {
  auto bogus = run_cli({"snapshot", "--bogus"});
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_EQ(bogus.out, "");
  EXPECT_EQ(bogus.err, "oomdoc snapshot: --bogus: unknown option (see oomdoc snapshot --help)\n");
  auto none = run_cli({"snapshot"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.out, "");
  EXPECT_EQ(none.err, "oomdoc: snapshot: no file given; usage: oomdoc snapshot FILE [--json | --html OUT] "
                      "(see oomdoc snapshot --help)\n");
}

}  // namespace
}  // namespace oomdoc
