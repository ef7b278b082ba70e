// The --html page in a real headless Chromium (Debian's `chromium`, installed by scripts/setup.sh):
// it loads from disk with no console errors, the timeline plot is drawn, and a screenshot is kept
// as a test artifact (<build>/test-artifacts/snapshot_report.png).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>

#include "support/test_support.h"

namespace oomdoc {
namespace {

std::string run_capture(const std::string& command) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return out;
  std::array<char, 65536> buffer;
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe.get())) out.append(buffer.data(), n);
  return out;
}

std::string chromium() {
  for (const char* candidate : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::filesystem::exists(candidate)) return candidate;
  }
  return "";
}

TEST(SnapshotHtmlBrowser, LoadsWithoutErrorsAndDrawsThePlot) {
  std::string browser = chromium();
  ASSERT_FALSE(browser.empty()) << "chromium is not installed (scripts/setup.sh installs it)";
  std::string dir = std::string(OOMDOC_BINARY_DIR) + "/test-artifacts";
  std::filesystem::create_directories(dir);
  std::string html = dir + "/snapshot_report.html";
  auto r = testing::run_cli({"snapshot", testing::fixture_path("snapshot/train_p4.pickle"), "--html", html});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const std::string flags = " --headless --no-sandbox --disable-gpu --hide-scrollbars "
                            "--virtual-time-budget=5000 --user-data-dir=" + dir + "/chromium-profile ";
  std::string log = dir + "/chromium.log";
  std::string dom = run_capture("timeout 120 " + browser + flags + "--enable-logging=stderr --v=0 --dump-dom file://" +
                                html + " 2>" + log);
  std::smatch body;
  ASSERT_TRUE(std::regex_search(dom, body, std::regex("<body[^>]*>"))) << dom.substr(0, 500);
  // The page counts window errors and console.error calls itself; uPlot's draw hook counts plots.
  EXPECT_THAT(body.str(), ::testing::HasSubstr("data-console-errors=\"0\""));
  EXPECT_THAT(body.str(), ::testing::HasSubstr("data-plots-drawn=\"2\""));  // one per device
  EXPECT_THAT(dom, ::testing::HasSubstr("<canvas"));
  EXPECT_THAT(dom, ::testing::HasSubstr("OOM at event"));
  std::string console = testing::read_file(log);
  EXPECT_EQ(console.find("Uncaught"), std::string::npos) << console;
  EXPECT_EQ(console.find(":CONSOLE("), std::string::npos) << console;

  std::string png = dir + "/snapshot_report.png";
  std::filesystem::remove(png);
  run_capture("timeout 120 " + browser + flags + "--window-size=1280,1400 --screenshot=" + png + " file://" + html +
              " 2>/dev/null");
  ASSERT_TRUE(std::filesystem::exists(png));
  EXPECT_GT(std::filesystem::file_size(png), 20000u);  // a drawn page, not a blank one
}

// The tables the page builds in the browser show format_bytes' figures (the JSON's "_text"s).
TEST(SnapshotHtmlBrowser, TablesShowTheTerminalFigures) {
  std::string browser = chromium();
  ASSERT_FALSE(browser.empty()) << "chromium is not installed (scripts/setup.sh installs it)";
  std::string dir = std::string(OOMDOC_BINARY_DIR) + "/test-artifacts";
  std::filesystem::create_directories(dir);
  std::string html = dir + "/snapshot_format_edges.html";
  auto r = testing::run_cli({"snapshot", testing::fixture_path("snapshot/format_edges.json"), "--html", html});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string dom = run_capture("timeout 120 " + browser +
                                " --headless --no-sandbox --disable-gpu --virtual-time-budget=5000 --user-data-dir=" +
                                // Its own profile: ctest -j runs the other browser test at the same
                                // time, and a second Chromium on a locked profile prints nothing.
                                dir + "/chromium-profile-tables --dump-dom file://" + html + " 2>/dev/null");
  EXPECT_THAT(dom, ::testing::HasSubstr("<td class=\"num\">1.00 GiB</td>"));  // reserved: 1 GiB - 512 B
  EXPECT_THAT(dom, ::testing::HasSubstr("<td class=\"num\">1.12 KiB</td>"));  // requested: 1152 B
  EXPECT_EQ(dom.find("1024.00 MiB"), std::string::npos);
  EXPECT_EQ(dom.find("1.13 KiB"), std::string::npos);
}

// Markup in the snapshot (a frame's filename "<!--<script>...</script>&amp;") is shown as text: the
// whole page still runs, draws its plot and lists the stack with the filename as it was written.
TEST(SnapshotHtmlBrowser, MarkupInTheSnapshotIsShownAsText) {
  std::string browser = chromium();
  ASSERT_FALSE(browser.empty()) << "chromium is not installed (scripts/setup.sh installs it)";
  std::string dir = std::string(OOMDOC_BINARY_DIR) + "/test-artifacts";
  std::filesystem::create_directories(dir);
  std::string html = dir + "/snapshot_markup_in_frames.html";
  auto r = testing::run_cli({"snapshot", testing::fixture_path("snapshot/markup_in_frames.json"), "--html", html});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string dom = run_capture("timeout 120 " + browser +
                                " --headless --no-sandbox --disable-gpu --virtual-time-budget=5000 --user-data-dir=" +
                                dir + "/chromium-profile-markup --dump-dom file://" + html + " 2>/dev/null");
  std::smatch body;
  ASSERT_TRUE(std::regex_search(dom, body, std::regex("<body[^>]*>"))) << dom.substr(0, 500);
  EXPECT_THAT(body.str(), ::testing::HasSubstr("data-console-errors=\"0\""));
  EXPECT_THAT(body.str(), ::testing::HasSubstr("data-plots-drawn=\"1\""));  // the code after the JSON ran
  EXPECT_THAT(dom, ::testing::HasSubstr("&lt;!--&lt;script&gt;\u2028&lt;/script&gt;&amp;amp;:7 train_step"));
}

// The segment table and the timeline's x axis, as the browser lays them out: seconds when the trace
// has time_us, the event index when it has not.
TEST(SnapshotHtmlBrowser, SegmentTableAndTimeAxis) {
  std::string browser = chromium();
  ASSERT_FALSE(browser.empty()) << "chromium is not installed (scripts/setup.sh installs it)";
  std::string dir = std::string(OOMDOC_BINARY_DIR) + "/test-artifacts";
  std::filesystem::create_directories(dir);
  for (const char* fixture : {"fragmented_p4.pickle", "fragmented_no_time.json"}) {
    std::string html = dir + "/snapshot_" + fixture + ".html";
    auto r = testing::run_cli({"snapshot", testing::fixture_path(std::string("snapshot/") + fixture), "--html", html});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string dom = run_capture("timeout 120 " + browser +
                                  " --headless --no-sandbox --disable-gpu --virtual-time-budget=5000 --user-data-dir=" +
                                  dir + "/chromium-profile-segments --dump-dom file://" + html + " 2>/dev/null");
    std::smatch body;
    ASSERT_TRUE(std::regex_search(dom, body, std::regex("<body[^>]*>"))) << dom.substr(0, 500);
    EXPECT_THAT(body.str(), ::testing::HasSubstr("data-console-errors=\"0\"")) << fixture;
    EXPECT_THAT(body.str(), ::testing::HasSubstr("data-plots-drawn=\"1\"")) << fixture;
    // The first row: the 64 MiB segment cut into 8 MiB holes by live tensors.
    EXPECT_THAT(dom, ::testing::HasSubstr("<td>0x7f0000000000</td><td class=\"num\">64.00 MiB</td><td>large</td>"
                                          "<td class=\"num\">0</td><td class=\"num\">32.00 MiB</td>"
                                          "<td class=\"num\">32.00 MiB</td><td class=\"num\">8.00 MiB</td>"
                                          "<td class=\"num\">8</td><td class=\"num\">4</td>"
                                          "<td class=\"num\">32.00 MiB</td>")) << fixture;
    EXPECT_THAT(dom, ::testing::HasSubstr("0 of 4 segments had a free block of 16.00 MiB (the request)")) << fixture;
    const bool timed = std::string(fixture) == "fragmented_p4.pickle";
    EXPECT_THAT(dom, ::testing::HasSubstr(timed ? "seconds from the first trace event (time_us)"
                                                : "trace event index (the trace has no time_us)")) << fixture;
  }
}

}  // namespace
}  // namespace oomdoc
