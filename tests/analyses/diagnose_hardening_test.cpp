// QA findings on `explain`'s causes and fixes: a container's own process listed as "Process P has",
// fixes that cannot act at model-load time or on the backend, programs far smaller than the card,
// TensorFlow's two reports of one request.
#include <gtest/gtest.h>

#include <algorithm>

#include "analyses/diagnose.h"
#include "analyses/explain.h"
#include "core/units.h"
#include "readers/log_scanner.h"

namespace oomdoc {
namespace {

ExplainReport explain_text(const std::string& text) {
  ExplainReport report;
  ScanResult scan = scan_text(text);
  scan.input = "test.log";
  add_to_report(report, scan);
  return report;
}

std::vector<std::string> fix_ids(const Diagnosis& d) {
  std::vector<std::string> ids;
  for (const auto& f : d.fixes) ids.push_back(f.id);
  return ids;
}

bool has(const std::vector<std::string>& ids, const std::string& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::string all_text(const Diagnosis& d) {
  std::string out;
  for (const auto& s : d.evidence) out += s + "\n";
  for (const auto& f : d.fixes) out += f.title + "\n" + f.detail + "\n" + f.snippet + "\n";
  return out;
}

// Two "Process P has" lines, no "this process" line: PyTorch's 10.78 GiB reserve plus both listed
// processes (23.34 GiB) exceed the 23.36 GiB in use, so one of them is this process (pid 1111, the
// one closest above the reserve); only pid 987654 is another process.
TEST(DiagnoseHardening, OneOfSeveralListedProcessesIsThisOne) {
  ExplainReport r = explain_text(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 23.65 "
      "GiB of which 300.00 MiB is free. Process 987654 has 12.00 GiB memory in use. Process 1111 has 11.34 GiB memory "
      "in use. Of the allocated memory 10.00 GiB is allocated by PyTorch, and 800.00 MiB is reserved by PyTorch but "
      "unallocated.\n");
  ASSERT_EQ(r.events.size(), 1u);
  const OomEvent& e = r.events[0].event;
  MemoryBreakdown m = breakdown(e);
  EXPECT_EQ(m.likely_self_pid, 1111u);
  EXPECT_EQ(m.this_process, e.other_processes[1].memory.bytes);
  EXPECT_EQ(m.other_processes, 12 * kGiB);
  ASSERT_TRUE(m.unattributed);
  EXPECT_EQ(*m.unattributed, static_cast<int64_t>(*e.bytes("total") - *e.bytes("free") -
                                                  e.other_processes[1].memory.bytes - 12 * kGiB));
  EXPECT_GE(*m.unattributed, 0);
  const Diagnosis& d = r.events[0].diagnosis;
  ASSERT_FALSE(d.evidence.empty());
  EXPECT_NE(d.evidence[0].find("Other processes hold 12.00 GiB (51% of the card): pid 987654 holds 12.00 GiB; pid "
                               "1111 holding 11.34 GiB is this process under its host PID."),
            std::string::npos)
      << d.evidence[0];
  for (const auto& f : d.fixes) {
    if (f.id == "end_other_processes") EXPECT_NE(f.detail.find("not pid 1111"), std::string::npos) << f.detail;
  }
}

// The listed processes and PyTorch's reserve fit in what is used: all listed are others.
TEST(DiagnoseHardening, ListedProcessesThatAddUpAreAllOthers) {
  ExplainReport r = explain_text(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 24.00 "
      "GiB of which 1.00 GiB is free. Process 1 has 9.00 GiB memory in use. Process 2 has 9.00 GiB memory in use. Of "
      "the allocated memory 4.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated.\n");
  MemoryBreakdown m = breakdown(r.events[0].event);
  EXPECT_FALSE(m.likely_self_pid);
  EXPECT_EQ(m.other_processes, 18 * kGiB);
  EXPECT_EQ(m.unattributed, 0);   // 24 - 1 - 5 (PyTorch) - 18
}

// Rounded figures that would make a derived value negative stay at zero.
TEST(DiagnoseHardening, DerivedValuesAreNeverNegative) {
  ExplainReport r = explain_text(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 24.00 "
      "GiB of which 1.00 GiB is free. Including non-PyTorch memory, this process has 22.00 GiB memory in use. Of the "
      "allocated memory 21.00 GiB is allocated by PyTorch, and 2.00 GiB is reserved by PyTorch but unallocated.\n");
  MemoryBreakdown m = breakdown(r.events[0].event);
  EXPECT_EQ(m.non_pytorch_in_process, 0);   // 22 - 23
  EXPECT_EQ(m.unattributed, 1 * static_cast<int64_t>(kGiB));
}

}  // namespace
}  // namespace oomdoc
