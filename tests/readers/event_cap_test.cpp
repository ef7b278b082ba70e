// Past ScanOptions::max_events a message is counted, not read: the events kept and their repeat
// counts stay what they were, and the count of what was left out is honest.
#include <gtest/gtest.h>

#include <string>

#include "analyses/explain.h"
#include "readers/log_scanner.h"
#include "report/explain_json.h"
#include "report/explain_terminal.h"
#include "report/style.h"

namespace oomdoc {
namespace {

// PyTorch 2.x's message with `mib` MiB requested: distinct figures, one format.
std::string oom(int mib) {
  return "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate " + std::to_string(mib) +
         ".00 MiB. GPU 0 has a total capacity of 79.11 GiB of which 100.00 MiB is free. Including non-PyTorch memory, "
         "this process has 78.05 GiB memory in use. Of the allocated memory 74.00 GiB is allocated by PyTorch, and 2.35 "
         "GiB is reserved by PyTorch but unallocated.\n";
}

ScanOptions cap(size_t events) {
  ScanOptions options;
  options.max_events = events;
  return options;
}

TEST(EventCap, MessagesPastTheCapAreCountedNotKept) {
  std::string log;
  for (int i = 0; i < 300; ++i) log += "step " + std::to_string(i) + "\n" + oom(1000 + i);
  const ScanResult scan = scan_text(log, cap(100));
  ASSERT_EQ(scan.events.size(), 100u);
  EXPECT_TRUE(scan.events_truncated);
  EXPECT_EQ(scan.messages_beyond_cap, 200u);
  EXPECT_EQ(scan.events.back().line, 200u);
  EXPECT_EQ(scan.events.back().bytes("requested"), uint64_t{1099} << 20);
  for (const OomEvent& e : scan.events) {
    EXPECT_EQ(e.repeats, 1u);
    EXPECT_EQ(e.last_repeat_line, 0u);
  }
}

// The figures cycle with a period longer than the cap: a message past the cap equal to the last one
// kept, with other messages between, is no repeat of it (it once was: "1167 prints in all").
TEST(EventCap, NoRepeatIsMergedAcrossMessagesLeftOut) {
  std::string log;
  for (int i = 0; i < 1000; ++i) log += oom(1000 + i % 150);
  const ScanResult scan = scan_text(log, cap(100));
  ASSERT_EQ(scan.events.size(), 100u);
  EXPECT_EQ(scan.messages_beyond_cap, 900u);
  uint64_t prints = 0;
  for (const OomEvent& e : scan.events) prints += e.repeats;
  EXPECT_EQ(prints, 100u);
}

// The last event kept printed again and again (a retry loop) is still one event with its count,
// past the cap too, until another message comes between.
TEST(EventCap, RepeatsOfTheLastEventKeptAreStillCounted) {
  std::string log;
  for (int i = 0; i < 99; ++i) log += oom(1000 + i);
  for (int i = 0; i < 5; ++i) log += oom(5000);   // the 100th event, printed 5 times (lines 100-104)
  log += oom(6000);                               // past the cap
  log += oom(5000);                               // after another message: not a repeat
  const ScanResult scan = scan_text(log, cap(100));
  ASSERT_EQ(scan.events.size(), 100u);
  EXPECT_EQ(scan.events.back().line, 100u);
  EXPECT_EQ(scan.events.back().repeats, 5u);
  EXPECT_EQ(scan.events.back().last_repeat_line, 104u);
  EXPECT_EQ(scan.messages_beyond_cap, 2u);
  EXPECT_TRUE(scan.events_truncated);
}

TEST(EventCap, ReportSaysHowManyWereLeftOut) {
  std::string log;
  for (int i = 0; i < 30; ++i) log += oom(1000 + 100 * i);
  ScanResult scan = scan_text(log, cap(10));
  scan.input = "big.log";
  ExplainReport report;
  add_to_report(report, scan);
  EXPECT_EQ(report.messages_beyond_cap, 20u);
  const std::string text = render_explain(report, Style::plain());
  EXPECT_NE(text.find("Only the first events are listed: the input holds more (20 message lines past them, counted but "
                      "not read).\n"),
            std::string::npos)
      << text;
  const Json doc = explain_to_json(report);
  EXPECT_EQ(doc["truncated"], true);
  EXPECT_EQ(doc["messages_beyond_cap"], 20);
}

}  // namespace
}  // namespace oomdoc
