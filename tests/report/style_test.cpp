#include "report/style.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include "analyses/explain.h"
#include "report/explain_terminal.h"

namespace oomdoc {
namespace {

TEST(Style, ColourOnlyOnATerminalAndWithoutNoColor) {
  EXPECT_EQ(Style(false).red("x"), "x");
  EXPECT_EQ(Style(true).red("x"), "\x1b[31mx\x1b[0m");
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  unsetenv("NO_COLOR");
  EXPECT_TRUE(Style::for_fd(slave).color());
  setenv("NO_COLOR", "1", 1);
  EXPECT_FALSE(Style::for_fd(slave).color());
  unsetenv("NO_COLOR");
  int file = open("/dev/null", O_WRONLY);
  EXPECT_FALSE(Style::for_fd(file).color());
  close(file);
  close(slave);
  close(master);
}

TEST(ExplainTerminal, InformationalLinesAreSummarisedUnlessAsked) {
  ScanResult scan = scan_text("INFO kv_cache_utils.py:1] GPU KV cache size: 158,656 tokens\n");
  scan.input = "serve.log";
  ExplainReport report;
  add_to_report(report, scan);
  std::string plain = render_explain(report, Style::plain());
  EXPECT_NE(plain.find("No out-of-memory error found in serve.log"), std::string::npos) << plain;
  EXPECT_NE(plain.find("1 informational memory line"), std::string::npos);
  ExplainTerminalOptions all;
  all.show_info = true;
  std::string full = render_explain(report, Style::plain(), all);
  EXPECT_NE(full.find("vLLM memory report"), std::string::npos) << full;
  EXPECT_NE(full.find("KV cache 158656 tokens"), std::string::npos) << full;
}

}  // namespace
}  // namespace oomdoc
