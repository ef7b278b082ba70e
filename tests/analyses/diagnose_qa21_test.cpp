// Findings of the explain QA review 21: launcher summaries and prefixes, NCCL's CUDA out-of-memory
// as PyTorch raises it, host-RAM errors.
#include <gtest/gtest.h>

#include "analyses/diagnose.h"
#include "analyses/explain.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

using testing::explain_text;
using testing::fix_ids;

const std::string kOom =
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 1 has a total capacity of 79.11 GiB of "
    "which 1.08 GiB is free. Including non-PyTorch memory, this process has 78.02 GiB memory in use. Of the allocated "
    "memory 75.50 GiB is allocated by PyTorch, and 1.85 GiB is reserved by PyTorch but unallocated.";

// torchrun's end-of-run summary block for rank 1, its error file's traceback under "traceback : ".
std::string torchrun_summary(const std::string& rank, const std::string& message) {
  return "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
         "============================================================\n"
         "train.py FAILED\n"
         "------------------------------------------------------------\n"
         "Failures:\n"
         "  <NO_OTHER_FAILURES>\n"
         "------------------------------------------------------------\n"
         "Root Cause (first observed failure):\n"
         "[0]:\n"
         "  time      : 2024-05-01_10:00:05\n"
         "  host      : node01\n"
         "  rank      : " + rank + " (local_rank: " + rank + ")\n"
         "  exitcode  : 1 (pid: 1235)\n"
         "  error_file: /tmp/torchelastic_abc/none_x/attempt_0/1/error.json\n"
         "  traceback : Traceback (most recent call last):\n"
         "    File \"/w/train.py\", line 180, in main\n"
         "      loss.backward()\n"
         "  " + message + "\n"
         "  \n"
         "============================================================\n";
}

// The summary repeats the error rank 1 printed: one event, the rank's own, with the summary's line.
TEST(DiagnoseQa21, TorchrunRootCauseJoinsTheRanksOwnError) {
  const std::string log = "[rank1]: Traceback (most recent call last):\n"
                          "[rank1]:   File \"/w/train.py\", line 180, in main\n"
                          "[rank1]:     loss.backward()\n"
                          "[rank1]: " + kOom + "\n"
                          "E0501 10:00:06.456000 140000 torch/distributed/elastic/multiprocessing/api.py:869] failed "
                          "(exitcode: 1) local_rank: 1 (pid: 1235) of binary: /usr/bin/python3\n" +
                          torchrun_summary("1", kOom);
  const ExplainReport r = explain_text(log);
  ASSERT_EQ(r.events.size(), 1u);
  const OomEvent& e = r.events[0].event;
  EXPECT_EQ(e.line, 4u);
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.repeats, 1u);
  EXPECT_EQ(e.int_field("launcher_summary_line"), 23);
  ASSERT_TRUE(e.traceback);
  EXPECT_EQ(e.traceback->innermost_user_frame->line, 180u);
}

// Without the rank's own output (the launcher's log alone) the summary is the event, with its rank;
// a summary of another rank's error is that rank's.
TEST(DiagnoseQa21, TorchrunRootCauseAloneIsTheEventOfItsRank) {
  const ExplainReport alone = explain_text(torchrun_summary("3", kOom));
  ASSERT_EQ(alone.events.size(), 1u);
  EXPECT_EQ(alone.events[0].event.line, 18u);
  EXPECT_EQ(alone.events[0].event.rank, 3);
  EXPECT_EQ(alone.events[0].event.field("launcher_summary_line"), nullptr);
  EXPECT_EQ(alone.events[0].event.traceback->innermost_user_frame->line, 180u);

  const ExplainReport other = explain_text("[rank0]: " + kOom + "\n" + torchrun_summary("1", kOom));
  ASSERT_EQ(other.events.size(), 2u);
  EXPECT_EQ(other.events[0].event.rank, 0);
  EXPECT_EQ(other.events[1].event.rank, 1);
  EXPECT_EQ(other.events[1].event.line, 19u);
}

}  // namespace
}  // namespace oomdoc
