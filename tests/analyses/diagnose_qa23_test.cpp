// Findings of the explain QA review 23: other runtimes' and libraries' out-of-memory codes, a
// memory cgroup's kill.
#include <gtest/gtest.h>

#include "analyses/explain.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

using testing::explain_text;
using testing::fix_ids;
using testing::only_event;

// ROCm's runtime status is HIP's, not CUDA's: named so, with AMD's tools.
TEST(DiagnoseQa23, HipRuntimeStatusIsHipNotCuda) {
  const auto x = only_event(explain_text("hipErrorOutOfMemory: out of memory\n"));
  EXPECT_EQ(x.event.framework, "hip");
  EXPECT_EQ(x.diagnosis.cause, "driver_oom_no_details");
  EXPECT_EQ(x.diagnosis.evidence.front(), "The HIP runtime reported out of memory without figures (outside PyTorch's "
                                          "caching allocator, often at context creation or in a library).");
  ASSERT_FALSE(x.diagnosis.fixes.empty());
  EXPECT_EQ(x.diagnosis.fixes.front().snippet, "rocm-smi --showpids  # or amd-smi process; then kill <pid>");
}

// PyTorch on an Intel GPU: the Unified Runtime's code, with Intel's tools.
TEST(DiagnoseQa23, IntelUnifiedRuntimeOutOfDeviceMemory) {
  const auto x = only_event(
      explain_text("RuntimeError: UR backend failed. UR backend returns:40 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)\n"));
  EXPECT_EQ(x.event.framework, "pytorch-xpu");
  EXPECT_EQ(x.event.string_field("status"), "UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY");
  ASSERT_GE(x.diagnosis.fixes.size(), 2u);
  EXPECT_EQ(x.diagnosis.fixes[0].snippet, "xpu-smi ps  # Intel XPU Manager; then kill <pid>");
  EXPECT_EQ(x.diagnosis.fixes[1].snippet, "ZE_AFFINITY_MASK (which devices the process sees), the tensor's .device");
}

// cuFFT, cuSOLVER, cuSPARSE and cuRAND fail their plan's or handle's allocation with codes of their own.
TEST(DiagnoseQa23, MathLibraryAllocationFailures) {
  struct Case {
    const char* line;
    const char* status;
    const char* library;
  };
  for (const Case& c : {Case{"RuntimeError: cuFFT error: CUFFT_ALLOC_FAILED", "CUFFT_ALLOC_FAILED", "cuFFT"},
                        Case{"RuntimeError: cusolver error: CUSOLVER_STATUS_ALLOC_FAILED, when calling "
                             "`cusolverDnCreate(handle)`", "CUSOLVER_STATUS_ALLOC_FAILED", "cuSOLVER"},
                        Case{"RuntimeError: CUDA error: CUSPARSE_STATUS_ALLOC_FAILED when calling `cusparseCreate(handle)`",
                             "CUSPARSE_STATUS_ALLOC_FAILED", "cuSPARSE"}}) {
    const auto x = only_event(explain_text(std::string(c.line) + "\n"));
    EXPECT_EQ(x.event.format, "library_status") << c.line;
    EXPECT_EQ(x.event.framework, "pytorch") << c.line;
    EXPECT_EQ(x.event.string_field("status"), c.status);
    EXPECT_EQ(x.diagnosis.cause, "library_workspace_alloc");
    EXPECT_EQ(x.diagnosis.evidence.front(), std::string(c.status) + ": " + c.library +
                                                " could not allocate its handle, plan or workspace, which happens when "
                                                "the card is (nearly) full.");
  }
  // The status alone, as a library prints it, names the library.
  const auto bare = only_event(explain_text("curandCreateGenerator failed: CURAND_STATUS_ALLOCATION_FAILED\n"));
  EXPECT_EQ(bare.event.framework, "curand");
}

// A memory cgroup's limit (a container's, a job's) is not lifted by the node's swap.
TEST(DiagnoseQa23, MemoryCgroupKillGetsNoSwapAdvice) {
  const auto x = only_event(explain_text(
      "[ 5123.123456] Memory cgroup out of memory: Killed process 777 (pt_main_thread) total-vm:40000000kB, "
      "anon-rss:31457280kB, file-rss:65536kB, shmem-rss:0kB, UID:0 pgtables:70000kB oom_score_adj:-997\n"));
  EXPECT_EQ(fix_ids(x.diagnosis),
            (std::vector<std::string>{"low_cpu_mem_usage", "fewer_dataloader_workers", "more_host_memory"}));
  // Without the cgroup, the host's own RAM: swap helps a short peak.
  const auto host = only_event(explain_text(
      "[ 5123.123456] Out of memory: Killed process 777 (pt_main_thread) total-vm:40000000kB, "
      "anon-rss:31457280kB, file-rss:65536kB, shmem-rss:0kB, UID:0 pgtables:70000kB oom_score_adj:0\n"));
  EXPECT_EQ(fix_ids(host.diagnosis),
            (std::vector<std::string>{"low_cpu_mem_usage", "fewer_dataloader_workers", "add_swap", "more_host_memory"}));
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// A quantity's text is the substring the message prints: bare digits stay bare, "N bytes" keeps its
// unit, thousands separators stay, and TensorFlow's shape is quoted as printed.
TEST(DiagnoseQa23, QuantityTextsAreThePrintedSubstrings) {
  auto text_of = [](const std::string& log, const std::string& name) {
    const auto x = testing::only_event(testing::explain_text(log));
    const Quantity* q = x.event.quantity(name);
    return q == nullptr ? std::string("<none>") : q->text + " = " + std::to_string(q->bytes);
  };
  EXPECT_EQ(text_of("2024-01-01 E external/xla/xla/stream_executor/cuda/cuda_driver.cc:1234] failed to alloc 34359738368 "
                    "bytes on host: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n", "requested"),
            "34359738368 bytes = 34359738368");
  EXPECT_EQ(text_of("ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 2214592512\n", "requested"),
            "2214592512 = 2214592512");
  EXPECT_EQ(text_of("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
                    "shape[128,3072,1024] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator "
                    "GPU_0_bfc\n", "requested"),
            "shape[128,3072,1024] and type float = 1610612736");
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// A negative size wrapped to 2^64 (PyTorch prints 17179869184.00 GiB) or 8 EiB: no card holds it,
// so it is a size to find, said as printed, not a bigger GPU.
TEST(DiagnoseQa23, ARequestBeyondAnyGpuIsAGarbageSize) {
  for (const char* size : {"17179869184.00 GiB", "8589934592.00 GiB"}) {
    const auto x = testing::only_event(testing::explain_text(
        std::string("RuntimeError: CUDA out of memory. Tried to allocate ") + size +
        " (GPU 0; 23.70 GiB total capacity; 1.05 GiB already allocated; 21.80 GiB free; 1.10 GiB reserved in total by "
        "PyTorch)\n"));
    EXPECT_EQ(x.diagnosis.cause, "garbage_request_size") << size;
    ASSERT_FALSE(x.diagnosis.evidence.empty());
    EXPECT_EQ(x.diagnosis.evidence.front().rfind(std::string("A request of ") + size + " is not a real tensor size", 0), 0u)
        << x.diagnosis.evidence.front();
    EXPECT_EQ(testing::fix_ids(x.diagnosis), std::vector<std::string>{"find_failing_shape"});
  }
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// Kills while building a package from source: nvcc's stage, make's recipe, pip's exit code -9 and
// the shell's Killed under pip's wheel build all get the build's fixes (fewer compiler jobs first).
TEST(DiagnoseQa23, BuildKillsInEveryWording) {
  struct Case {
    std::string log;
    const char* report;
    const char* first_evidence_start;
  };
  const std::vector<Case> cases = {
      {"[12/49] /usr/local/cuda/bin/nvcc -c flash_fwd_hdim128.cu -o flash_fwd_hdim128.o\n"
       "nvcc error   : 'cicc' died due to signal 9 (Kill signal)\n",
       "compiler", "The compiler (cicc) was killed by SIGKILL."},
      {"/usr/local/cuda/bin/nvcc -c kernel.cu -o kernel.o\nmake: *** [Makefile:12: all] Killed\n", "make",
       "make reports a command it ran Killed"},
      {"  Building wheel for flash-attn (setup.py) ... error\n  error: subprocess-exited-with-error\n\n"
       "  × python setup.py bdist_wheel did not run successfully.\n  │ exit code: -9\n  ╰─> [0 lines of output]\n",
       "exit_code", "Exit code -9: the process was killed by SIGKILL (signal 9), with no error of its own."},
      {"Building wheels for collected packages: flash-attn\n  Building wheel for flash-attn (setup.py) ... \\\nKilled\n",
       "shell", "The shell reports the process Killed"},
  };
  for (const Case& c : cases) {
    const auto x = testing::only_event(testing::explain_text(c.log));
    EXPECT_EQ(x.event.string_field("kill_report"), c.report) << c.log;
    ASSERT_FALSE(x.diagnosis.evidence.empty()) << c.log;
    EXPECT_EQ(x.diagnosis.evidence.front().rfind(c.first_evidence_start, 0), 0u) << x.diagnosis.evidence.front();
    EXPECT_NE(x.diagnosis.evidence.front().find("It happened building software"), std::string::npos);
    EXPECT_EQ(testing::fix_ids(x.diagnosis),
              (std::vector<std::string>{"build_max_jobs", "add_swap", "more_host_memory"})) << c.log;
  }
  // A line that mentions make's Killed without make's own prefix is no build kill.
  EXPECT_TRUE(testing::explain_text("[INFO] cleaned up: 3 zombie workers Killed earlier\n").events.empty());
  // make runs training too: without a build above, its kill is the program's.
  const auto train = testing::only_event(testing::explain_text(
      "python train.py --bs 64\nEpoch 1:  40%|####      | 400/1000 [02:00<03:00, 3.3it/s]\n"
      "make: *** [Makefile:14: train] Killed\n"));
  EXPECT_EQ(train.event.string_field("kill_report"), "make");
  EXPECT_FALSE(testing::has_fix(train.diagnosis, "build_max_jobs"));
  // DeepSpeed's prebuilt ops print a ninja step that compiles nothing: a kill after it is no build's.
  const auto jit = testing::only_event(testing::explain_text(
      "Emitting ninja build file /root/.cache/torch_extensions/py310_cu121/cpu_adam/build.ninja...\n"
      "Building extension module cpu_adam...\nninja: no work to do.\nLoading extension module cpu_adam...\n"
      "Time to load cpu_adam op: 2.5 seconds\n"
      "[2024-05-01 10:00:00,000] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 4242\n"
      "[2024-05-01 10:00:00,000] [ERROR] [launch.py:325:sigkill_handler] ['python', 'train.py'] exits with return code = -9\n"));
  EXPECT_NE(jit.event.string_field("log_operation"), "building_package");
  EXPECT_FALSE(testing::has_fix(jit.diagnosis, "build_max_jobs"));
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// The kill reports users paste from their container tools and init system.
TEST(DiagnoseQa23, ContainerAndSystemdKillReports) {
  const auto pods = testing::only_event(testing::explain_text(
      "NAME        READY   STATUS      RESTARTS     AGE\ntrainer-0   0/1     OOMKilled   3 (2m ago)   15m\n"));
  EXPECT_EQ(pods.event.string_field("kill_report"), "kubernetes");
  EXPECT_EQ(pods.event.string_field("pod"), "trainer-0");
  EXPECT_FALSE(testing::has_fix(pods.diagnosis, "add_swap"));
  const auto docker = testing::only_event(testing::explain_text(
      "        \"State\": {\n            \"Status\": \"exited\",\n            \"Running\": false,\n"
      "            \"OOMKilled\": true,\n            \"Dead\": false,\n            \"Pid\": 0,\n"
      "            \"ExitCode\": 137,\n"));
  EXPECT_EQ(docker.event.string_field("kill_report"), "docker");
  EXPECT_EQ(docker.event.int_field("exit_code"), 137);
  EXPECT_EQ(docker.diagnosis.evidence.front(),
            "Docker reports the container OOMKilled: it went over its memory limit (docker run --memory) and the kernel "
            "ended it (exit code 137). Host (CPU) RAM ran out under that limit, not GPU memory.");
  EXPECT_FALSE(testing::has_fix(docker.diagnosis, "add_swap"));
  EXPECT_TRUE(testing::explain_text("            \"OOMKilled\": false,\n").events.empty());
  const auto unit = testing::only_event(testing::explain_text(
      "Dec 03 10:00:01 node1 systemd[1]: trainer.service: A process of this unit has been killed by the OOM killer.\n"
      "Dec 03 10:00:01 node1 systemd[1]: trainer.service: Failed with result 'oom-kill'.\n"));
  EXPECT_EQ(unit.event.string_field("kill_report"), "systemd");
  EXPECT_EQ(unit.event.string_field("unit"), "trainer.service");
  EXPECT_EQ(unit.diagnosis.evidence.front().rfind(
                "systemd reports the kernel's OOM killer ended a process of trainer.service.", 0), 0u);
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// PyTorch's shared-memory files refused (a full /dev/shm): the DataLoader's shared memory.
TEST(DiagnoseQa23, SharedMemoryFilesRefused) {
  for (const char* line : {"RuntimeError: unable to mmap 1048576 bytes from file </torch_3141_2718281828_0>: Cannot "
                           "allocate memory (12)",
                           "RuntimeError: unable to write to file </torch_18_1234567890_0>: No space left on device (28)"}) {
    const auto x = testing::only_event(testing::explain_text(std::string(line) + "\n"));
    EXPECT_EQ(x.event.format, "dataloader_shm") << line;
    EXPECT_EQ(testing::fix_ids(x.diagnosis), (std::vector<std::string>{"shm_size", "fewer_dataloader_workers"})) << line;
  }
  // A disk that is full is no memory error.
  EXPECT_TRUE(testing::explain_text("OSError: [Errno 28] No space left on device: '/data/ckpt.pt'\n").events.empty());
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// The new reports are read only as their programs print them: prose that quotes them is no event.
TEST(DiagnoseQa23, QuotedReportsAreNoEvents) {
  for (const char* line : {"The build failed with exit code: -9 last night, so we lowered MAX_JOBS.",
                           "Note: if pip reports \"exit code: -9\" the build was killed by the OOM killer",
                           "grep for \"OOMKilled\": true in docker inspect to see if container was killed",
                           "  │ exit code: 1"}) {
    EXPECT_TRUE(testing::explain_text(std::string(line) + "\n").events.empty()) << line;
  }
}

// A wheel build that finished ("... done", "Successfully installed") is over: a kill after it is the program's.
TEST(DiagnoseQa23, AFinishedBuildIsOver) {
  const auto x = testing::only_event(testing::explain_text(
      "Building wheel for flash-attn (setup.py) ... done\nSuccessfully installed flash-attn-2.5.8\npython train.py\nKilled\n"));
  EXPECT_NE(x.event.string_field("log_operation"), "building_package");
  EXPECT_FALSE(testing::has_fix(x.diagnosis, "build_max_jobs"));
}

// A large but real request (eager attention over a long context) is larger than the card, not garbage.
TEST(DiagnoseQa23, ALargeRealRequestIsNotGarbage) {
  const auto x = testing::only_event(testing::explain_text(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 600.00 GiB. GPU 0 has a total capacity of 79.15 GiB "
      "of which 70.00 GiB is free. Including non-PyTorch memory, this process has 9.00 GiB memory in use. Of the "
      "allocated memory 8.00 GiB is allocated by PyTorch, and 500.00 MiB is reserved by PyTorch but unallocated.\n"));
  EXPECT_EQ(x.diagnosis.cause, "request_exceeds_total_capacity");
}

}  // namespace
}  // namespace oomdoc
