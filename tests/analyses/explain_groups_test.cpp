// Errors that say the same thing are told once: group_similar_events and how explain shows a group.
#include <gtest/gtest.h>

#include <fmt/format.h>

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
  const auto& groups = report.groups;
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
  // add_to_report keeps the same grouping in the report, for the renderers.
  ASSERT_EQ(report.groups.size(), 3u);
  for (size_t g = 0; g < 3; ++g) EXPECT_EQ(report.groups[g].members, groups[g].members);
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

// Without a request figure, the other figures decide: errors that need different fixes stay apart.
TEST(ExplainGroups, DifferentFiguresWithoutARequestStayApart) {
  // MPS: another program took the memory in the second (other allocations 2 -> 15 GB).
  // Two errors in, two groups out.
  auto expect_apart = [](const std::string& log) {
    const ExplainReport report = explain_text(log);
    ASSERT_EQ(report.error_count(), 2u) << log;
    EXPECT_EQ(report.groups.size(), 2u) << log;
  };
  expect_apart(
      "RuntimeError: MPS backend out of memory (MPS allocated: 18.00 GB, other allocations: 2.00 GB, max allowed: "
      "20.40 GB). Tried to allocate 256.00 MB on private pool.\n"
      "RuntimeError: MPS backend out of memory (MPS allocated: 5.00 GB, other allocations: 15.00 GB, max allowed: "
      "20.40 GB). Tried to allocate 256.00 MB on private pool.\n");
  // The kernel killed a 95 GiB process, then a 1.9 GiB one.
  expect_apart(
      "[12345.678] Out of memory: Killed process 4242 (python) total-vm:120000000kB, anon-rss:100000000kB, file-rss:0kB, "
      "shmem-rss:0kB, UID:1000 pgtables:2000kB oom_score_adj:0\n"
      "[22345.678] Out of memory: Killed process 5252 (python) total-vm:12000000kB, anon-rss:2000000kB, file-rss:0kB, "
      "shmem-rss:0kB, UID:1000 pgtables:2000kB oom_score_adj:0\n");
  // vLLM: the same words, another max_model_len and KV figures.
  const std::string kv = "ValueError: To serve at least one request with the models's max seq len ({}), ({} GiB KV cache is "
                         "needed, which is larger than the available KV cache memory ({} GiB). Based on the available "
                         "memory, the estimated maximum model length is {}. Try increasing `gpu_memory_utilization` or "
                         "decreasing `max_model_len` when initializing the engine.\n";
  expect_apart(fmt::format(fmt::runtime(kv), 131072, "16.00", "4.00", 32768) + "step\n" +
               fmt::format(fmt::runtime(kv), 32768, "4.00", "1.00", 8192));
}

// The member told in full is the one that misses most, so the fixes' figures hold for every member.
TEST(ExplainGroups, TheMemberThatMissesMostIsShown) {
  const std::string log = rank_oom(0, "2.00 GiB", "74.00 GiB") + rank_oom(1, "2.20 GiB", "74.00 GiB") +
                          rank_oom(2, "2.10 GiB", "74.00 GiB");
  const ExplainReport report = explain_text(log);
  const auto groups = group_similar_events(report);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].members, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(groups[0].shown, 1u);   // 2.20 GiB requested with 1.05 GiB free
  const std::string out = render_explain(report, Style::plain());
  EXPECT_NE(out.find("test.log:2  PyTorch out of memory on GPU 1 (rank 1)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  + 2 more like it: ranks 0-2 (GPUs 0-2), lines 1-3; requested 2.00 GiB to 2.20 GiB\n"),
            std::string::npos) << out;
  EXPECT_NE(out.find("the peak must drop by at least 1.15 GiB"), std::string::npos) << out;
}

// PyTorch 2.1's form lists the card's processes, this one among them: the group's range names
// the listed process, not "another" one.
TEST(ExplainGroups, ListedProcessFiguresAreNotCalledAnotherProcess) {
  auto listed = [](int rank, const std::string& in_use) {
    return "[rank" + std::to_string(rank) + "]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate "
           "2.00 GiB. GPU " + std::to_string(rank) + " has a total capacty of 79.15 GiB of which 1.20 GiB is free. "
           "Process " + std::to_string(1234 + rank) + " has " + in_use + " memory in use. Of the allocated memory "
           "75.10 GiB is allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated.\n";
  };
  const ExplainReport report = explain_text(listed(0, "77.94 GiB") + listed(1, "78.04 GiB"));
  ASSERT_EQ(report.groups.size(), 1u);
  const std::string out = render_explain(report, Style::plain());
  EXPECT_NE(out.find("; process memory in use 77.94 GiB to 78.04 GiB\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("another process"), std::string::npos) << out;
}

}  // namespace
}  // namespace oomdoc
