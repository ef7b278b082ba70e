// Findings of the explain QA review 21: launcher summaries and prefixes, NCCL's CUDA out-of-memory
// as PyTorch raises it, host-RAM errors.
#include <gtest/gtest.h>

#include "analyses/diagnose.h"
#include "analyses/explain.h"
#include "readers/log_line.h"
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

// ProcessGroupNCCL's error (2.x: DistBackendError) whose NCCL last error is CUDA's out of memory.
const std::string kNcclRaised =
    "[rank2]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
    "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
    "[rank2]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
    "[rank2]: Last error:\n"
    "[rank2]: Cuda failure 'out of memory'\n";

TEST(DiagnoseQa21, NcclUnhandledCudaErrorOutOfMemoryAsPyTorchRaisesIt) {
  const ExplainReport r = explain_text(kNcclRaised);
  ASSERT_EQ(r.events.size(), 1u);
  const OomEvent& e = r.events[0].event;
  EXPECT_EQ(e.format, "nccl_cuda_oom");
  EXPECT_EQ(e.framework, "nccl");
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.line, 1u);
  EXPECT_EQ(e.end_line, 4u);
  EXPECT_EQ(e.string_field("nccl_error"), "ncclUnhandledCudaError");
  const Diagnosis& d = r.events[0].diagnosis;
  EXPECT_EQ(d.cause, "nccl_buffer_alloc");
  EXPECT_EQ(fix_ids(d), (std::vector<std::string>{"nccl_buffers", "nccl_nvls_off", "nccl_headroom", "smaller_input"}));
  ASSERT_EQ(d.evidence.size(), 2u);
  EXPECT_EQ(d.evidence[1].substr(0, 56), "PyTorch raised NCCL's ncclUnhandledCudaError, whose last");

  // 1.x and 2.0 raise RuntimeError; a log may hold the exception from its second line on.
  const ExplainReport old = explain_text(
      "RuntimeError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled "
      "cuda error, NCCL version 2.14.3\nncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n"
      "Cuda failure 'out of memory'\n");
  ASSERT_EQ(old.events.size(), 1u);
  EXPECT_EQ(old.events[0].event.end_line, 4u);
  const ExplainReport cut = explain_text("ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n"
                                         "Cuda failure 'out of memory'\n");
  ASSERT_EQ(cut.events.size(), 1u);
  EXPECT_EQ(cut.events[0].event.end_line, 3u);
}

// Another last error is no out-of-memory error.
TEST(DiagnoseQa21, NcclUnhandledCudaErrorOtherThanMemoryIsNoEvent) {
  EXPECT_TRUE(explain_text("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                           "NCCLUtils.hpp:275, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version "
                           "2.20.5\nncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n"
                           "Cuda failure 'invalid device ordinal'\n")
                  .events.empty());
}

// NCCL's own warning, then the traceback and the error PyTorch raised for it: one failure, the
// raised error with the warning's size; two ranks failing are two.
TEST(DiagnoseQa21, NcclWarningJoinsTheErrorPyTorchRaises) {
  const std::string warning = "node01:1234:1290 [2] include/alloc.h:109 NCCL WARN Cuda failure 'out of memory'\n"
                              "node01:1234:1290 [2] include/alloc.h:110 NCCL WARN Failed to CUDA calloc 6291456 bytes\n"
                              "node01:1234:1290 [2] NCCL INFO transport/p2p.cc:204 -> 1\n";
  const std::string traceback = "[rank2]: Traceback (most recent call last):\n"
                                "[rank2]:   File \"/w/train.py\", line 77, in <module>\n"
                                "[rank2]:     dist.all_reduce(t)\n";
  const ExplainReport r = explain_text(warning + traceback + kNcclRaised);
  ASSERT_EQ(r.events.size(), 1u);
  const OomEvent& e = r.events[0].event;
  EXPECT_EQ(e.line, 7u);
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.bytes("requested"), 6291456u);
  EXPECT_EQ(e.int_field("nccl_warning_line"), 1);
  EXPECT_EQ(e.int_field("pid"), 1234);   // NCCL's prefix: host:pid:tid [device]
  EXPECT_EQ(e.device, 2);
  ASSERT_TRUE(e.traceback);
  EXPECT_EQ(e.traceback->innermost_user_frame->line, 77u);
  EXPECT_EQ(r.events[0].diagnosis.evidence.at(0), "NCCL could not allocate a 6.00 MiB communication buffer: the card was "
                                                  "already full when it set up a channel or peer connection.");

  std::string rank3 = kNcclRaised;
  for (size_t at; (at = rank3.find("[rank2]")) != std::string::npos;) rank3.replace(at, 7, "[rank3]");
  std::string other_process = warning;   // another pid, device 3
  for (size_t at; (at = other_process.find("1234:1290 [2]")) != std::string::npos;) other_process.replace(at, 13, "1235:1291 [3]");
  const ExplainReport two = explain_text(warning + other_process + kNcclRaised + rank3);
  ASSERT_EQ(two.events.size(), 2u);
  EXPECT_EQ(two.events[0].event.rank, 2);
  EXPECT_EQ(two.events[0].event.int_field("nccl_warning_line"), 4);   // the nearest warning
  EXPECT_EQ(two.events[0].event.device, 3);
  EXPECT_EQ(two.events[1].event.rank, 3);
  EXPECT_EQ(two.events[1].event.int_field("nccl_warning_line"), 1);
  EXPECT_EQ(two.events[1].event.line, 11u);
}

// pdsh's "host: " (DeepSpeed's multi-node runner) and `kubectl logs --prefix`'s "[pod/NAME/CONTAINER] "
// come off like the other launcher prefixes, the node kept; a number alone stays Slurm's task label.
TEST(DiagnoseQa21, MultiNodePrefixesAreStrippedAndNameTheNode) {
  const CleanLine pdsh = clean_line("worker-0:   File \"/w/train.py\", line 50, in <module>");
  EXPECT_EQ(pdsh.text, "  File \"/w/train.py\", line 50, in <module>");
  EXPECT_EQ(pdsh.node, "worker-0");
  EXPECT_FALSE(pdsh.rank);
  EXPECT_EQ(clean_line("10.0.0.5: [rank3]: x").node, "10.0.0.5");
  EXPECT_EQ(clean_line("10.0.0.5: [rank3]: x").rank, 3);
  const CleanLine pod = clean_line("[pod/trainer-worker-1/pytorch] torch.OutOfMemoryError: x");
  EXPECT_EQ(pod.text, "torch.OutOfMemoryError: x");
  EXPECT_EQ(pod.node, "pod/trainer-worker-1/pytorch");
  // Not a host: a word without a digit at its end, a number alone, a space before the colon.
  EXPECT_EQ(clean_line("RuntimeError: boom").node, "");
  EXPECT_EQ(clean_line("RuntimeError: boom").text, "RuntimeError: boom");
  EXPECT_EQ(clean_line("3: x").rank, 3);
  EXPECT_EQ(clean_line("3: x").node, "");
  EXPECT_EQ(clean_line("Epoch 1: loss 2.3").text, "Epoch 1: loss 2.3");
  EXPECT_EQ(clean_line("[pod/a] x").text, "[pod/a] x");
  // A script's own devices and counters are no hosts: "GPU0: ", "rank1: ", "step10: " stay.
  // Only a host-like name is: lowercase, with '-' or '.', or a host word and its number.
  for (const char* line : {"GPU0: RuntimeError: CUDA out of memory.", "rank1: loss 2.3", "step10: loss 2.3",
                           "cuda_1: x", "Epoch3: x", "fold2: x", "trial3: x", "tp0: x", "local_rank1: x", "rank-3: x",
                           "gpu-0: x", "0.5: x"}) {
    EXPECT_EQ(clean_line(line).node, "") << line;
    EXPECT_EQ(clean_line(line).text, line) << line;
  }
  EXPECT_EQ(clean_line("gpu-node-3: x").node, "gpu-node-3");   // a host named after its GPUs
  EXPECT_EQ(clean_line("node01: x").node, "node01");
  EXPECT_EQ(clean_line("nid001234: x").node, "nid001234");
}

std::string prefixed(const std::string& prefix, const std::string& lines) {
  std::string out;
  for (size_t start = 0; start < lines.size();) {
    const size_t nl = lines.find('\n', start);
    out += prefix + lines.substr(start, nl - start) + "\n";
    start = nl + 1;
  }
  return out;
}

const std::string kDeepSpeedTraceback =
    "Traceback (most recent call last):\n"
    "  File \"/w/train.py\", line 50, in <module>\n"
    "    engine.backward(loss)\n"
    "  File \"/usr/local/lib/python3.10/dist-packages/deepspeed/runtime/engine.py\", line 2020, in backward\n"
    "    self.optimizer.backward(loss, retain_graph=retain_graph)\n";

// The traceback under the prefix is read: its location, and DeepSpeed's config keys, not TrainingArguments.
TEST(DiagnoseQa21, PdshAndKubectlPrefixesKeepTheTracebackAndDeepSpeedFixes) {
  for (const std::string prefix : {"worker-0: ", "[pod/trainer-worker-1/pytorch] "}) {
    const ExplainReport r = explain_text(prefixed(prefix, kDeepSpeedTraceback + kOom + "\n"));
    ASSERT_EQ(r.events.size(), 1u) << prefix;
    const OomEvent& e = r.events[0].event;
    EXPECT_EQ(e.line, 6u);
    EXPECT_EQ(e.string_field("node"), prefix[0] == 'w' ? "worker-0" : "pod/trainer-worker-1/pytorch");
    ASSERT_TRUE(e.traceback) << prefix;
    EXPECT_EQ(e.traceback->frames.size(), 2u);
    EXPECT_EQ(e.traceback->innermost_user_frame->line, 50u);
    const Fix& batch = testing::fix(r.events[0].diagnosis, "smaller_batch");
    EXPECT_EQ(batch.snippet.substr(0, 35), "\"train_micro_batch_size_per_gpu\": B") << prefix;
  }
}

// Two nodes failing at once, their lines interleaved: two errors, each with its own node's traceback.
TEST(DiagnoseQa21, TwoPdshNodesAreTwoErrors) {
  const std::string log = "worker-0: Traceback (most recent call last):\n"
                          "worker-1: Traceback (most recent call last):\n"
                          "worker-0:   File \"/w/train.py\", line 50, in <module>\n"
                          "worker-1:   File \"/w/train.py\", line 61, in <module>\n"
                          "worker-0:     engine.backward(loss)\n"
                          "worker-1:     engine.step()\n"
                          "worker-0: " + kOom + "\n"
                          "worker-1: " + kOom + "\n";
  const ExplainReport r = explain_text(log);
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].event.line, 7u);
  EXPECT_EQ(r.events[0].event.repeats, 1u);
  EXPECT_EQ(r.events[0].event.string_field("node"), "worker-0");
  EXPECT_EQ(r.events[0].event.traceback->innermost_user_frame->line, 50u);
  EXPECT_EQ(r.events[1].event.line, 8u);
  EXPECT_EQ(r.events[1].event.string_field("node"), "worker-1");
  EXPECT_EQ(r.events[1].event.traceback->innermost_user_frame->line, 61u);
  // One node printing it twice is one error printed twice.
  const ExplainReport again = explain_text("worker-0: " + kOom + "\nworker-0: " + kOom + "\n");
  ASSERT_EQ(again.events.size(), 1u);
  EXPECT_EQ(again.events[0].event.repeats, 2u);
}

// Host RAM: Python's bare MemoryError ending a traceback.
TEST(DiagnoseQa21, BareMemoryErrorEndingATracebackIsHostMemory) {
  const ExplainReport r = explain_text("Traceback (most recent call last):\n"
                                       "  File \"/home/u/prep.py\", line 30, in <module>\n"
                                       "    data = np.concatenate(chunks)\n"
                                       "MemoryError\n");
  ASSERT_EQ(r.events.size(), 1u);
  const OomEvent& e = r.events[0].event;
  EXPECT_EQ(e.format, "python_memory_error");
  EXPECT_EQ(e.framework, "python");
  EXPECT_EQ(e.line, 4u);
  EXPECT_EQ(e.string_field("device_kind"), "CPU");
  EXPECT_EQ(e.traceback->innermost_user_frame->line, 30u);
  EXPECT_EQ(r.events[0].diagnosis.cause, "host_memory");
  EXPECT_EQ(fix_ids(r.events[0].diagnosis), (std::vector<std::string>{"host_memory", "more_host_memory"}));
  // A logged exception with its text, after Python logging's prefix.
  EXPECT_EQ(explain_text("2024-05-01 10:00:00,123 - ERROR - MemoryError: cannot allocate buffer\n").events.size(), 1u);
}

// The word in ordinary text is none: a sentence, an except clause, the code a frame echoes, a
// subclass's name.
TEST(DiagnoseQa21, MemoryErrorInOrdinaryTextIsNoEvent) {
  EXPECT_TRUE(explain_text("Caught a MemoryError while resizing, retrying with smaller tiles\n"
                           "except MemoryError:\n"
                           "  File \"/w/x.py\", line 3, in f\n"
                           "    raise MemoryError\n"
                           "MemoryErrors are retried three times\n"
                           "class MyMemoryError(Exception): pass\n")
                  .events.empty());
}

// OSError's ENOMEM from os.fork as a DataLoader starts its workers: fewer workers first.
TEST(DiagnoseQa21, EnomemFromForkIsHostMemoryWithFewerWorkers) {
  const ExplainReport r = explain_text("Traceback (most recent call last):\n"
                                       "  File \"/home/u/train.py\", line 80, in <module>\n"
                                       "    for batch in loader:\n"
                                       "  File \"/usr/lib/python3.10/multiprocessing/popen_fork.py\", line 66, in _launch\n"
                                       "    self.pid = os.fork()\n"
                                       "OSError: [Errno 12] Cannot allocate memory\n");
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].event.format, "os_enomem");
  EXPECT_EQ(r.events[0].event.line, 6u);
  const Diagnosis& d = r.events[0].diagnosis;
  EXPECT_EQ(d.cause, "host_memory");
  EXPECT_EQ(fix_ids(d), (std::vector<std::string>{"fewer_dataloader_workers", "host_memory", "more_host_memory"}));
  ASSERT_EQ(d.evidence.size(), 3u);
  EXPECT_EQ(d.evidence[2], "It failed starting a process (fork): each DataLoader worker starts as a copy of the main "
                           "process, which the kernel must be able to hold whole.");
  // Without a fork no worker advice.
  EXPECT_EQ(fix_ids(explain_text("OSError: [Errno 12] Cannot allocate memory\n").events.at(0).diagnosis),
            (std::vector<std::string>{"host_memory", "more_host_memory"}));
}

// A worker's bus error in shared memory and the main process's error for it: one event, the
// container's /dev/shm first.
TEST(DiagnoseQa21, DataLoaderSharedMemoryBusErrorIsOneEvent) {
  const ExplainReport r = explain_text(
      "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"
      "Traceback (most recent call last):\n"
      "  File \"/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py\", line 1133, in _try_get_data\n"
      "    data = self._data_queue.get(timeout=timeout)\n"
      "RuntimeError: DataLoader worker (pid 4321) is killed by signal: Bus error. It is possible that dataloader's "
      "workers are out of shared memory. Please try to raise your shared memory limit.\n");
  ASSERT_EQ(r.events.size(), 1u);
  const OomEvent& e = r.events[0].event;
  EXPECT_EQ(e.format, "dataloader_shm");
  EXPECT_EQ(e.line, 1u);
  EXPECT_EQ(e.end_line, 5u);
  EXPECT_EQ(e.int_field("pid"), 4321);
  EXPECT_EQ(r.events[0].diagnosis.cause, "host_memory");
  EXPECT_EQ(fix_ids(r.events[0].diagnosis), (std::vector<std::string>{"shm_size", "fewer_dataloader_workers"}));
  // The SIGKILL of a worker stays a kill.
  EXPECT_EQ(explain_text("RuntimeError: DataLoader worker (pid 4321) is killed by signal: Killed.\n").events.at(0).event.format,
            "process_killed");
}

// PyTorch main's device-generic wording, without the backend: every figure read.
TEST(DiagnoseQa21, GenericOutOfMemoryWordingIsPyTorchNew) {
  const ExplainReport r = explain_text(
      "torch.OutOfMemoryError: Out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.19 GiB of "
      "which 2.31 GiB is free. Including non-PyTorch memory, this process has 76.86 GiB memory in use. Of the allocated "
      "memory 72.40 GiB is allocated by PyTorch, and 3.91 GiB is reserved by PyTorch but unallocated.\n");
  ASSERT_EQ(r.events.size(), 1u);
  const OomEvent& e = r.events[0].event;
  EXPECT_EQ(e.format, "pytorch_new");
  EXPECT_EQ(e.device, 0);
  EXPECT_EQ(e.bytes("requested"), 4294967296u);
  EXPECT_EQ(e.bytes("total"), 85029615043u);       // 79.19 GiB
  EXPECT_EQ(e.bytes("free"), 2480343613u);         // 2.31 GiB
  EXPECT_EQ(e.bytes("process"), 82527796593u);     // 76.86 GiB
  EXPECT_EQ(e.bytes("allocated"), 77738908058u);   // 72.40 GiB
  EXPECT_EQ(e.bytes("reserved_unallocated"), 4198330532u);   // 3.91 GiB
  EXPECT_EQ(r.events[0].diagnosis.cause, "capacity_exhausted");
}

// XPU's message before it printed free memory: the total and PyTorch's figures are read, and the
// cause is the card's capacity (13.52 GiB reserved and 3.00 GiB more do not fit in 15.11 GiB).
TEST(DiagnoseQa21, XpuMessageWithoutFreeMemoryKeepsTheTotal) {
  const ExplainReport r = explain_text(
      "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 3.00 GiB. GPU 0 has a total capacity of 15.11 GiB. "
      "Of the allocated memory 12.02 GiB is allocated by PyTorch, and 1.50 GiB is reserved by PyTorch but unallocated. "
      "Please use `empty_cache` to release all unoccupied cached memory.\n");
  ASSERT_EQ(r.events.size(), 1u);
  const OomEvent& e = r.events[0].event;
  EXPECT_EQ(e.format, "pytorch_new");
  EXPECT_EQ(e.framework, "pytorch-xpu");
  EXPECT_EQ(e.bytes("total"), 16224238961u);       // 15.11 GiB
  EXPECT_FALSE(e.bytes("free"));
  EXPECT_EQ(e.bytes("allocated"), 12906376724u);   // 12.02 GiB
  EXPECT_EQ(e.bytes("reserved_unallocated"), 1610612736u);
  EXPECT_EQ(r.events[0].diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(r.events[0].diagnosis.evidence.at(0),
            "This process holds 13.52 GiB of 15.11 GiB (89%); the 3.00 GiB request is the last straw.");
}

}  // namespace
}  // namespace oomdoc
