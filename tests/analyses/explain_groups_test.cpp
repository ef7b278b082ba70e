// Errors that say the same thing are told once: group_similar_events and how explain shows a group.
#include <gtest/gtest.h>

#include <string>

#include "analyses/explain.h"
#include "report/explain_terminal.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

using testing::explain_text;

// PyTorch 2.x's message from rank `rank` on GPU `rank`, `allocated` GiB held by PyTorch.
std::string rank_oom(int rank, const std::string& requested, const std::string& allocated) {
  return "[rank" + std::to_string(rank) + "]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate " + requested +
         ". GPU " + std::to_string(rank) +
         " has a total capacity of 79.11 GiB of which 1.05 GiB is free. Including non-PyTorch memory, this process has "
         "78.05 GiB memory in use. Of the allocated memory " + allocated +
         " is allocated by PyTorch, and 2.35 GiB is reserved by PyTorch but unallocated.\n";
}

// Three steps in which all eight ranks fail, PyTorch's figure a little higher each step.
std::string eight_ranks_three_steps() {
  std::string log;
  for (int step = 0; step < 3; ++step) {
    log += "step " + std::to_string(step) + " loss 1.5\n";
    for (int rank = 0; rank < 8; ++rank) log += rank_oom(rank, "2.00 GiB", "74." + std::to_string(step) + "0 GiB");
  }
  return log;
}

TEST(ExplainGroups, RanksAndStepsFailingAlikeFormOneGroup) {
  const ExplainReport report = explain_text(eight_ranks_three_steps());
  ASSERT_EQ(report.error_count(), 24u);
  const auto groups = group_similar_events(report);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].members.size(), 24u);
  EXPECT_EQ(groups[0].members.front(), 0u);
  EXPECT_EQ(groups[0].prints, 24u);
}

TEST(ExplainGroups, ADifferentRequestOrCauseStandsApart) {
  std::string log = eight_ranks_three_steps();
  log += rank_oom(0, "2.15 GiB", "74.00 GiB");    // within 10% of 2.00 GiB: the same failure
  log += rank_oom(1, "9.00 GiB", "74.00 GiB");    // a far larger request: another
  // Another process holds the card: another cause.
  log += "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
         "79.11 GiB of which 1.05 GiB is free. Process 4242 has 60.00 GiB memory in use. Including non-PyTorch "
         "memory, this process has 18.05 GiB memory in use. Of the allocated memory 16.00 GiB is allocated by "
         "PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated.\n";
  const ExplainReport report = explain_text(log);
  ASSERT_EQ(report.error_count(), 27u);
  const auto groups = group_similar_events(report);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].members.size(), 25u);
  EXPECT_EQ(groups[0].members.back(), 24u);
  EXPECT_EQ(groups[1].members, std::vector<size_t>{25});
  EXPECT_EQ(groups[2].members, std::vector<size_t>{26});
  EXPECT_NE(report.events[26].diagnosis.cause, report.events[0].diagnosis.cause);
}

TEST(ExplainGroups, TheTerminalShowsAGroupOnceWithItsSpread) {
  const ExplainReport report = explain_text(eight_ranks_three_steps());
  const std::string out = render_explain(report, Style::plain());
  EXPECT_EQ(out.rfind("24 out-of-memory errors in test.log, 1 distinct: each is shown once, with how many more are "
                      "like it (oomdoc explain --each lists them all).\n", 0), 0u) << out;
  EXPECT_NE(out.find("test.log:2  PyTorch out of memory on GPU 0 (rank 0)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  + 23 more like it: ranks 0-7 (GPUs 0-7), lines 2-27; allocated by PyTorch 74.00 GiB to "
                     "74.20 GiB\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("(rank 1)"), std::string::npos) << "the other ranks are counted, not listed";

  ExplainTerminalOptions each;
  each.group_similar = false;
  const std::string all = render_explain(report, Style::plain(), each);
  EXPECT_EQ(all.find("more like it"), std::string::npos);
  EXPECT_EQ(all.find("distinct"), std::string::npos);
  size_t headlines = 0;
  for (size_t at = all.find("PyTorch out of memory"); at != std::string::npos; at = all.find("PyTorch out of memory", at + 1)) {
    ++headlines;
  }
  EXPECT_EQ(headlines, 24u);
}

TEST(ExplainGroups, WordForWordRepeatsCountAsPrints) {
  // One rank's retry loop prints the same message three times; rank 1 fails once alike.
  const std::string log = rank_oom(0, "2.00 GiB", "74.00 GiB") + rank_oom(0, "2.00 GiB", "74.00 GiB") +
                          rank_oom(0, "2.00 GiB", "74.00 GiB") + rank_oom(1, "2.00 GiB", "74.00 GiB");
  const ExplainReport report = explain_text(log);
  ASSERT_EQ(report.error_count(), 2u);
  const auto groups = group_similar_events(report);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].prints, 4u);
  const std::string out = render_explain(report, Style::plain());
  EXPECT_NE(out.find("  + 1 more like it: ranks 0-1 (GPUs 0-1), lines 1-4, 4 prints in all\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace oomdoc
