// Serving engines, runtimes and communication libraries other than vLLM (SGLang, TGI, ONNX Runtime, NCCL, MXNet, DirectML), and a process the
// kernel killed (SIGKILL): the Linux OOM killer ends a process that takes too much host RAM without
// any error of its own, so what the log shows is the kill as others report it (the shell's
// "Killed", torchrun's and DeepSpeed's summaries, the kernel's own dmesg line).
#include "core/text.h"
#include "readers/formats/message_format.h"
#include "readers/formats/regex_search.h"

namespace oomdoc {
namespace {

std::optional<FormatMatch> match_sglang(const MessageWindow& w) {
  if (w.lines[0].find("Not enough memory. Please try to increase --mem-fraction-static") == std::string::npos) {
    return std::nullopt;
  }
  FormatMatch m;
  m.event.framework = "sglang";
  m.event.format = "sglang_not_enough_memory";
  return m;
}

// wgpu (WebGPU in Rust: burn, candle's wgpu backend, Bevy): a buffer or texture the device could
// not allocate is wgpu-core's DeviceError::OutOfMemory, printed "Not enough memory left" under the
// call that failed ("In Device::create_buffer"), usually inside a "wgpu error: Validation Error" panic.
std::optional<FormatMatch> match_wgpu(const MessageWindow& w) {
  static const RE2 re(R"(^\s*Not enough memory left\.?\s*$)");
  if (!regex_search(re, w.lines[0])) return std::nullopt;
  return new_match("wgpu", "wgpu_out_of_memory");
}

// ONNX Runtime's arena allocator (onnxruntime/core/framework/bfc_arena.cc AllocateRawInternal):
// "Failed to allocate memory for requested buffer of size N", inside the status of the node that
// ran ("Non-zero status code returned while running Conv node. Name:'...'").
std::optional<FormatMatch> match_onnxruntime_arena(const MessageWindow& w) {
  static const RE2 re(R"(Failed to allocate memory for requested buffer of size (\d+))");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m = new_match("onnxruntime", "onnxruntime_arena");
  // A size no 64-bit count holds is left out; one that is held but no device's is kept (diagnosis
  // calls it what it is).
  set_printed_bytes(m.event, "requested", (*g)[1]);
  return m;
}

// text-generation-inference's warmup (server/text_generation_server/models/flash_causal_lm.py):
// "Not enough memory to handle 4096 prefill tokens. You need to decrease `--max-batch-prefill-tokens`".
std::optional<FormatMatch> match_tgi_warmup(const MessageWindow& w) {
  static const RE2 re(R"(Not enough memory to handle (\d+) prefill tokens)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m = new_match("tgi", "tgi_warmup_prefill");
  if (auto n = parse_decimal<int64_t>((*g)[1])) m.event.set_field("prefill_tokens", *n);
  return m;
}

std::optional<FormatMatch> match_nccl(const MessageWindow& w) {
  static const RE2 re(R"(NCCL WARN.*(?:Cuda failure|cudaMalloc).*out of memory)");
  if (!regex_search(re, w.lines[0])) return std::nullopt;
  FormatMatch m;
  m.event.framework = "nccl";
  m.event.format = "nccl_cuda_oom";
  // NCCL's debug prefix (src/debug.cc): "host:pid:tid [cudaDev] ": several processes' warnings are
  // several failures, not one printed again.
  static const RE2 prefix(R"(^\s*[\w.-]+:(\d+):\d+ \[(\d+)\] )");
  if (auto p = regex_search(prefix, w.lines[0])) {
    if (auto pid = parse_decimal<int64_t>((*p)[1])) m.event.set_field("pid", *pid);
    m.event.device = parse_decimal<int64_t>((*p)[2]);
  }
  // NCCL's alloc.h names the size a line or two later: "NCCL WARN Failed to CUDA calloc 6291456 bytes".
  static const RE2 size(R"(NCCL WARN Failed to CUDA (?:calloc|malloc) (\d+) bytes)");
  for (size_t i = 1; i < w.lines.size() && i <= 3; ++i) {
    if (auto s = regex_search(size, w.lines[i])) {
      set_printed_bytes(m.event, "requested", (*s)[1]);
      m.lines_used = i + 1;
      break;
    }
  }
  return m;
}

// The same failure as PyTorch raises it (torch/csrc/distributed/c10d/NCCLUtils.hpp, C10D_NCCL_CHECK):
// "torch.distributed.DistBackendError: NCCL error in: .../ProcessGroupNCCL.cpp:1269, unhandled cuda
// error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5" (1.x and 2.0: "RuntimeError:
// NCCL error in: ..."), then NCCL's last error, ncclGetLastError(), on the lines after it:
// "ncclUnhandledCudaError: Call to CUDA function failed." / "Last error:" / "Cuda failure 'out of
// memory'". Only that last error makes it an out-of-memory error; the window may start at the
// ncclUnhandledCudaError line (the exception's first line cut off).
std::optional<FormatMatch> match_nccl_raised(const MessageWindow& w) {
  const bool raised = contains(w.lines[0], "NCCL error") && contains(w.lines[0], "unhandled cuda error");
  if (!raised && !contains(w.lines[0], "ncclUnhandledCudaError")) return std::nullopt;
  static const RE2 last_error(R"(^\s*(?:Last error:\s*)?Cuda failure (?:\d+ )?'out of memory')");
  constexpr size_t kLinesAfter = 4;   // the status line, "Last error:", the CUDA failure
  for (size_t i = 1; i < w.lines.size() && i <= kLinesAfter; ++i) {
    if (!regex_search(last_error, w.lines[i])) continue;
    FormatMatch m = new_match("nccl", "nccl_cuda_oom");
    m.event.set_field("nccl_error", std::string("ncclUnhandledCudaError"));
    m.lines_used = i + 1;
    return m;
  }
  return std::nullopt;
}

// MXNet's pooled GPU allocator (src/storage/pooled_storage_manager.h) when cudaMalloc fails: "cudaMalloc
// failed: out of memory" (1.x: "cudaMalloc retry failed: out of memory", after releasing its pool and
// trying again), inside an MXNetError or dmlc's logging line, with libmxnet.so frames below. The same
// words from another program are a CUDA out-of-memory error without figures. (llama.cpp's and Ollama's
// lines that quote them are read by their own formats first.)
std::optional<FormatMatch> match_cudamalloc_failed(const MessageWindow& w) {
  static const RE2 re(R"(cudaMalloc (retry )?failed: out of memory)");
  auto g = regex_search(re, w.lines[0]);
  if (!g || contains(w.lines[0], "ggml") || contains(w.lines[0], "llama runner")) return std::nullopt;
  constexpr size_t kLinesAfter = 6;   // the stack trace's first frames name libmxnet.so
  bool mxnet = false;
  for (size_t i = 0; i < w.lines.size() && i <= kLinesAfter && !mxnet; ++i) {
    const std::string lower = to_lower(w.lines[i]);
    mxnet = contains(lower, "mxnet") || contains(lower, "pooled_storage_manager");
  }
  FormatMatch m = new_match(mxnet ? "mxnet" : "cuda", mxnet ? "mxnet_cudamalloc" : "cuda_malloc_failed");
  m.event.set_field("backend", std::string("CUDA"));
  if (matched((*g)[1])) m.event.set_field("retried", true);
  return m;
}

// DirectML (torch-directml on Windows and WSL): its allocator's "Could not allocate tensor with 81544192
// bytes. There is not enough GPU video memory available!", and its heap allocator's warning "[W
// dml_heap_allocator.cc:97] DML allocator out of memory!" followed by the error it raises, "RuntimeError:
// Unknown error -2147024882": that is HRESULT 0x8007000E, E_OUTOFMEMORY.
std::optional<FormatMatch> match_directml(const MessageWindow& w) {
  static const RE2 tensor(R"(Could not allocate tensor with (\d+) bytes\. There is not enough GPU video memory)");
  if (auto g = regex_search(tensor, w.lines[0])) {
    FormatMatch m = new_match("directml", "directml_alloc");
    set_printed_bytes(m.event, "requested", (*g)[1]);
    return m;
  }
  if (!contains(w.lines[0], "DML allocator out of memory")) return std::nullopt;
  FormatMatch m = new_match("directml", "directml_heap_oom");
  // The HRESULT the caller raises (a traceback may come between): E_OUTOFMEMORY, as a signed or a hex number.
  static const RE2 hresult(R"((?:Unknown error |HRESULT[: ]*)(-2147024882|0x8007000[Ee])\b)");
  constexpr size_t kLinesAfter = 12;
  for (size_t i = 1; i < w.lines.size() && i <= kLinesAfter; ++i) {
    if (regex_search(hresult, w.lines[i])) {
      m.event.set_field("hresult", std::string("0x8007000E (E_OUTOFMEMORY)"));
      m.lines_used = i + 1;
      break;
    }
  }
  return m;
}

FormatMatch kill_match(const char* framework, const char* reporter);
void set_pid(OomEvent& event, std::string_view digits);

// A worker killed by SIGKILL with no error of its own, as torchrun's ChildFailedError summary
// ("traceback : Signal 9 (SIGKILL) received by PID 2410412") or Python's subprocess error ("died
// with <Signals.SIGKILL: 9>") reports it: on Linux usually the kernel's OOM killer (host RAM).
// fish reports its own child the same way: "fish: Job 1, 'python train.py' terminated by signal
// SIGKILL (Forced quit)" (older releases: "fish: 'python train.py' terminated by signal SIGKILL").
std::optional<FormatMatch> match_sigkill(const MessageWindow& w) {
  static const RE2 fish(R"(^fish: (?:Job \d+, )?'.*' terminated by signal SIGKILL\b)");
  if (regex_search(fish, w.lines[0])) return kill_match("shell", "shell");
  static const RE2 re(R"((?i:signal) 9 \(SIGKILL\) received by PID (\d+)|died with <Signals\.SIGKILL: 9>|(exit code 137) \(interrupted by signal 9: SIGKILL\))");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  const bool python = w.lines[0].find("Signals.SIGKILL") != std::string::npos;
  FormatMatch m = kill_match(python || matched((*g)[2]) ? "python" : "pytorch",
                             python ? "subprocess" : matched((*g)[2]) ? "exit_code" : "torchrun");
  if (matched((*g)[1])) set_pid(m.event, (*g)[1]);
  if (matched((*g)[2])) m.event.set_field("exit_code", int64_t{137});
  return m;
}

// A kill event of `framework` reported by `reporter` (the field "kill_report": which program said so).
FormatMatch kill_match(const char* framework, const char* reporter) {
  FormatMatch m;
  m.event.framework = framework;
  m.event.format = "process_killed";
  m.event.set_field("device_kind", std::string("CPU"));
  m.event.set_field("signal", std::string("SIGKILL"));
  m.event.set_field("kill_report", std::string(reporter));
  return m;
}

void set_pid(OomEvent& event, std::string_view digits) {
  if (auto pid = parse_decimal<int64_t>(digits)) event.set_field("pid", *pid);
}

// The shell's report of a child it lost to SIGKILL. bash prints "Killed" on a line of its own, or
// right after a progress bar that ended without a newline ("3.06it/s]Killed"), or, in a script,
// "train.sh: line 12: 4242 Killed   python train.py"; job control prints "[1]+  Killed  python ...".
// zsh pads its status word to a column before the command: "zsh: killed     python train.py", or
// with job control "[1]    26478 killed     python test.py"; both also glued to a progress bar
// ("?it/s]zsh: killed     .venv/bin/python"). A line that merely contains the word ("Killed 3
// zombie workers", "test_killed PASSED") is none.
// A compiler killed while building a CUDA extension (flash-attn, DeepSpeed's ops, xformers from
// source): gcc's driver reports its cc1plus (or cc1, or the linker) ended by SIGKILL, "c++: fatal
// error: Killed signal terminated program cc1plus"; ninja runs one such job per core.
// nvcc reports its own stages the same way ("nvcc error   : 'cicc' died due to signal 9 (Kill
// signal)", also ptxas), and make the recipe it ran ("make: *** [Makefile:12: all] Killed").
std::optional<FormatMatch> match_compiler_killed(const MessageWindow& w) {
  static const RE2 re(R"(\bfatal error: Killed signal terminated program (\S+))");
  if (auto g = regex_search(re, w.lines[0])) {
    FormatMatch m = kill_match("build", "compiler");
    m.event.set_field("process_name", std::string((*g)[1]));
    return m;
  }
  static const RE2 nvcc(R"('(\w+)' died due to signal 9 \(Kill signal\))");
  if (auto g = regex_search(nvcc, w.lines[0])) {
    FormatMatch m = kill_match("build", "compiler");
    m.event.set_field("process_name", std::string((*g)[1]));
    return m;
  }
  static const RE2 make(R"(\b(?:g?make|ninja)(?:\[\d+\])?: \*\*\* \[[^\]]*\] Killed\b)");
  if (regex_search(make, w.lines[0])) {
    // (make runs training too, `make train`: a build only when the lines above say so.)
    return kill_match("build", "make");
  }
  return std::nullopt;
}

std::optional<FormatMatch> match_shell_killed(const MessageWindow& w) {
  std::string_view line = w.lines[0];
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  static const RE2 zsh(R"((?:^|it/s\]|s/it\])(?:zsh: |\[\d+\] *[+-]? +(\d+) )killed  +\S)");
  if (auto g = regex_search(zsh, line)) {
    FormatMatch m = kill_match("shell", "shell");
    if (matched((*g)[1])) set_pid(m.event, (*g)[1]);
    if ((*g)[0].front() != 'z' && (*g)[0].front() != '[') m.event.set_field("after_progress_bar", true);
    return m;
  }
  static constexpr std::string_view kKilled = "Killed";
  if (line.size() < kKilled.size() || line.substr(line.size() - kKilled.size()) != kKilled) {
    static const RE2 script(R"(^(?:\S.*: line \d+: +|\[\d+\][+-]? +)(?:(\d+) +)?Killed +\S)");
    auto g = regex_search(script, line);
    if (!g) return std::nullopt;
    FormatMatch m = kill_match("shell", "shell");
    if (matched((*g)[1])) set_pid(m.event, (*g)[1]);
    return m;
  }
  std::string_view before = line.substr(0, line.size() - kKilled.size());
  size_t lead = 0;
  while (lead < before.size() && (before[lead] == ' ' || before[lead] == '\t')) ++lead;
  before.remove_prefix(lead);
  // tqdm's bar ends in "<rate>]" ("3.06it/s]", "1.20s/it]", "?it/s]"): the shell's word followed it.
  const bool after_progress_bar = !before.empty() && before.back() == ']' &&
                                  (before.find("it/s]") != std::string_view::npos || before.find("s/it]") != std::string_view::npos);
  if (!before.empty() && !after_progress_bar) return std::nullopt;
  FormatMatch m = kill_match("shell", "shell");
  if (after_progress_bar) m.event.set_field("after_progress_bar", true);
  return m;
}

// The kernel's own record (dmesg, journalctl -k, /var/log/kern.log): "Out of memory: Killed process
// 410126 (python) total-vm:79905000kB, anon-rss:22957108kB, file-rss:72036kB, shmem-rss:15143164kB"
// ("Memory cgroup out of memory: ..." in a container; before Linux 5.x the "Killed process" line
// stands alone after "Out of memory: Kill process N (name) score S or sacrifice child"). The sizes
// are the victim's resident memory when it was killed, in KiB ("kB").
std::optional<FormatMatch> match_kernel_oom_kill(const MessageWindow& w) {
  static const RE2 re(R"((?:(Memory cgroup out of memory|Out of memory): )?Killed process (\d+) \(([^)]{1,64})\)((?: [a-z-]+:[\d,]+kB,?)*))");
  // A viewer that hard-wraps dmesg at a fixed width pads each cut with spaces, mid-number too
  // ("total-vm:53312244<60 spaces>kB,"): runs of 8 or more spaces are that padding, not text.
  std::string line = w.lines[0];
  for (size_t at = line.find("        "); at != std::string::npos; at = line.find("        ", at)) {
    const size_t end = line.find_first_not_of(' ', at);
    line.erase(at, (end == std::string::npos ? line.size() : end) - at);
  }
  auto g = regex_search(re, line);
  if (!g) return std::nullopt;
  // Without the kernel's "Out of memory" prefix, only the figures say it is the kernel's line.
  if (!matched((*g)[1]) && (*g)[4].find("anon-rss:") == std::string_view::npos) return std::nullopt;
  FormatMatch m = kill_match("linux", "kernel_oom_killer");
  set_pid(m.event, (*g)[2]);
  m.event.set_field("process_name", std::string((*g)[3]));
  if (matched((*g)[1]) && (*g)[1].front() == 'M') m.event.set_field("memory_cgroup", true);
  static const RE2 size(R"(([a-z-]+):([\d,]+)kB)");
  std::string_view rest = (*g)[4];
  while (auto s = regex_search(size, rest)) {
    std::string digits;
    for (char c : (*s)[2]) {
      if (c != ',') digits += c;
    }
    std::string name((*s)[1]);
    for (char& c : name) c = c == '-' ? '_' : c;
    if (auto q = parse_quantity(digits + "kB", LabelMeaning::kBinary)) {
      q->text = std::string((*s)[2]) + "kB";
      m.event.set_quantity(name, *q);
    }
    rest.remove_prefix(static_cast<size_t>((*s)[0].data() + (*s)[0].size() - rest.data()));
  }
  return m;
}

// PyTorch's DataLoader when a worker process died of SIGKILL: "DataLoader worker (pid 3521) is killed
// by signal: Killed." (the OOM killer's usual victim: each worker is a process of its own).
std::optional<FormatMatch> match_dataloader_killed(const MessageWindow& w) {
  static const RE2 re(R"(DataLoader worker \(pid(?:\(s\))? (\d+)[^)]*\) is killed by signal: Killed)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m = kill_match("pytorch", "dataloader_worker");
  set_pid(m.event, (*g)[1]);
  m.event.set_field("process_name", std::string("DataLoader worker"));
  return m;
}

// Launchers that report a child's death by signal 9 as an exit status: torchrun's agent ("failed
// (exitcode: -9) local_rank: 3 (pid: 812917) of binary"), DeepSpeed's launcher ("exits with return
// code = -9"), an IDE or container runtime ("Process finished with exit code 137 (interrupted by
// signal 9: SIGKILL)": 128 + 9).
std::optional<FormatMatch> match_exit_status_kill(const MessageWindow& w) {
  static const RE2 torchrun(R"(failed \(exitcode: -9\) local_rank: (\d+) \(pid: (\d+)\))");
  if (auto g = regex_search(torchrun, w.lines[0])) {
    FormatMatch m = kill_match("pytorch", "torchrun");
    if (auto rank = parse_decimal<int64_t>((*g)[1])) m.event.set_field("local_rank", *rank);
    set_pid(m.event, (*g)[2]);
    m.event.set_field("exit_code", int64_t{-9});
    return m;
  }
  // Python 2's subprocess error for a child killed by a signal (Python 3 names the signal: "died
  // with <Signals.SIGKILL: 9>", match_sigkill): "Command '[...]' returned non-zero exit status -9".
  static const RE2 subprocess(R"(returned non-zero exit status -9\b)");
  if (regex_search(subprocess, w.lines[0])) {
    FormatMatch m = kill_match("python", "subprocess");
    m.event.set_field("exit_code", int64_t{-9});
    return m;
  }
  static const RE2 deepspeed(R"(exits with return code = -9\b)");
  if (regex_search(deepspeed, w.lines[0])) {
    FormatMatch m = kill_match("pytorch", "deepspeed_launcher");
    m.event.set_field("exit_code", int64_t{-9});
    return m;
  }
  // pip's error box for a build step killed by SIGKILL ("× python setup.py bdist_wheel did not run
  // successfully." then "│ exit code: -9").
  // (Only as the box prints it: its bar, or the line to itself; prose that quotes it is no report.)
  static const RE2 minus9(R"(^\s*(?:│\s*)?exit code: -9\s*$)");
  if (regex_search(minus9, w.lines[0])) {
    FormatMatch m = kill_match("python", "exit_code");
    m.event.set_field("exit_code", int64_t{-9});
    return m;
  }
  // (BuildKit: "did not complete successfully: exit code: 137".)
  static const RE2 code137(R"(\bexit(?:ed with)? code:? 137\b)");
  if (regex_search(code137, w.lines[0])) {
    FormatMatch m = kill_match("python", "exit_code");
    m.event.set_field("exit_code", int64_t{137});
    return m;
  }
  return std::nullopt;
}

// A cluster's own record of a job step killed at its memory limit (host RAM, cgroup): Slurm's
// "slurmstepd: error: Detected 1 oom_kill event in StepId=123456.0. Some of the step tasks have
// been OOM Killed." and srun's "srun: error: gpu01: task 0: Out Of Memory" (older releases:
// "Exceeded step memory limit at some point."); Kubernetes' "Reason: OOMKilled" (kubectl describe
// pod, or "reason": "OOMKilled" in its JSON), the container's exit code 137.
std::optional<FormatMatch> match_cluster_oom(const MessageWindow& w) {
  const std::string_view line = w.lines[0];
  // ("Exceeded step memory limit at some point." is a warning at step end, not a kill.)
  static const RE2 slurm(R"(\bDetected (\d+) oom[-_]kill events?(?:\(s\))? in (?:StepId=|step )?([\w.+]+?)\.?(?:\s|$)|)"
                         R"(\bexceeded memory limit \(([^)]*)\), being killed)");
  if (auto g = regex_search(slurm, line)) {
    if (line.find("slurmstepd") == std::string_view::npos && line.find("oom_kill event") == std::string_view::npos &&
        line.find("oom-kill event") == std::string_view::npos && line.find("being killed") == std::string_view::npos) {
      return std::nullopt;
    }
    FormatMatch m = kill_match("slurm", "slurm");
    if (matched((*g)[1])) {
      if (auto n = parse_decimal<int64_t>((*g)[1])) m.event.set_field("oom_kill_events", *n);
      m.event.set_field("step", std::string((*g)[2]));
    }
    // Older slurmstepd's polling kill: "exceeded memory limit (67108864 > 65536000)", the job's
    // use and its limit in KiB (jobacct_gather counts kilobytes of 1024 bytes).
    if (matched((*g)[3])) {
      static const RE2 figures(R"(^\s*(\d+)\s*>\s*(\d+)\s*$)");
      if (auto f = regex_search(figures, (*g)[3])) {
        for (auto [name, digits] : {std::pair{"job_memory_used", (*f)[1]}, std::pair{"job_memory_limit", (*f)[2]}}) {
          if (auto q = parse_quantity(std::string(digits) + "KiB", LabelMeaning::kBinary)) m.event.set_quantity(name, *q);
        }
      }
    }
    return m;
  }
  static const RE2 srun(R"(\bsrun: error: (\S+): tasks? ([\d,\-\[\]]+): Out Of Memory\b)");
  if (auto g = regex_search(srun, line)) {
    FormatMatch m = kill_match("slurm", "srun");
    m.event.set_field("host", std::string((*g)[1]));
    m.event.set_field("tasks", std::string((*g)[2]));
    return m;
  }
  // Docker's own record (docker inspect's State block: "OOMKilled": true, then "ExitCode": 137): the
  // container's --memory limit.
  // The exit code a report prints within its first `lines` lines (the first group of `re`).
  auto read_exit_code = [&](FormatMatch& m, const RE2& re, size_t lines) {
    for (size_t i = 0; i < std::min(w.lines.size(), lines); ++i) {
      if (auto c = regex_search(re, w.lines[i])) {
        if (auto n = parse_decimal<int64_t>((*c)[1])) m.event.set_field("exit_code", *n);
        return;
      }
    }
  };
  // (Only as docker inspect prints it: a line of its pretty-printed State block.)
  static const RE2 docker(R"(^\s*"OOMKilled":\s*true,?\s*$)");
  if (regex_search(docker, line)) {
    FormatMatch m = kill_match("docker", "docker");
    static const RE2 exit_code(R"("ExitCode":\s*(-?\d+))");
    read_exit_code(m, exit_code, 8);
    return m;
  }
  // kubectl get pods: the pod's row with OOMKilled as its status ("trainer-0   0/1   OOMKilled   3 (2m ago)   15m").
  static const RE2 pod_row(R"(^\s*(\S+)\s+\d+/\d+\s+OOMKilled\s+\d+)");
  if (auto g = regex_search(pod_row, line)) {
    FormatMatch m = kill_match("kubernetes", "kubernetes");
    m.event.set_field("pod", std::string((*g)[1]));
    return m;
  }
  static const RE2 k8s(R"((?:\bReason:\s+|"reason":\s*")OOMKilled\b)");
  if (regex_search(k8s, line)) {
    FormatMatch m = kill_match("kubernetes", "kubernetes");
    // The exit code as the report prints it ("Exit Code: 137" below the reason, "exitCode": 137 in
    // JSON); a killed container usually shows 137, but not always (a process that handles the
    // signal): none is assumed.
    static const RE2 exit_code(R"((?:\bExit Code:\s+|"exitCode":\s*)(-?\d+))");
    read_exit_code(m, exit_code, 4);
    return m;
  }
  return std::nullopt;
}

}  // namespace

// NumPy's host allocation failure (numpy/core/_exceptions.py, _ArrayMemoryError, sizes printed with
// binary units by _size_to_string): "Unable to allocate 74.5 GiB for an array with shape (100000,
// 100000) and data type float64" — host RAM, in data preparation or metrics, not the GPU.
std::optional<FormatMatch> match_numpy_array(const MessageWindow& w) {
  static const RE2 re(R"(Unable to allocate ([\d.]+ (?:bytes|[KMGTPE]iB)) for an array with shape (\([^)]{0,200}\)) and data type (\w+))");
  auto g = regex_search(re, w.joined);
  if (!g || w.joined_line_of(joined_offset_in(w, (*g)[0])) != 0) return std::nullopt;
  FormatMatch m = new_match("numpy", "numpy_array_alloc");
  m.event.set_field("device_kind", std::string("CPU"));
  set_printed_size(m.event, "requested", (*g)[1], LabelMeaning::kBinary);
  m.event.set_field("shape", std::string((*g)[2]));
  m.event.set_field("dtype", std::string((*g)[3]));
  m.lines_used = w.joined_line_of(joined_offset_in(w, (*g)[0]) + (*g)[0].size() - 1) + 1;
  return m;
}

// Python's own MemoryError (the interpreter's allocator failed: PyErr_NoMemory), as a traceback ends
// with it or a logger prints the exception: "MemoryError", "MemoryError: <text>". Only as the line's
// start (a traceback's exception line, indented in torchrun's summary): the word in a sentence, an
// `except MemoryError:` or the code a frame echoes ("raise MemoryError") is none. NumPy's subclass
// (_ArrayMemoryError) has its own format.
std::optional<FormatMatch> match_python_memory_error(const MessageWindow& w) {
  static const RE2 re(R"(^\s*(?:builtins\.)?MemoryError(?::\s|\s*$))");
  if (!regex_search(re, w.lines[0])) return std::nullopt;
  FormatMatch m = new_match("python", "python_memory_error");
  m.event.set_field("device_kind", std::string("CPU"));
  return m;
}

// The kernel's ENOMEM as Python raises it: "OSError: [Errno 12] Cannot allocate memory" (os.fork
// when a DataLoader starts its workers, mmap, subprocess): the process could not get more memory
// under the host's RAM, overcommit policy or its cgroup's limit.
std::optional<FormatMatch> match_enomem(const MessageWindow& w) {
  if (!contains(w.lines[0], "[Errno 12] Cannot allocate memory")) return std::nullopt;
  FormatMatch m = new_match("python", "os_enomem");
  m.event.set_field("device_kind", std::string("CPU"));
  return m;
}

// A DataLoader worker that died of SIGBUS writing a batch to shared memory (/dev/shm, 64 MB in a
// Docker container by default): the worker's own "ERROR: Unexpected bus error encountered in worker.
// This might be caused by insufficient shared memory (shm)." (torch/csrc/DataLoader.cpp, its SIGBUS
// handler), then the main process's "RuntimeError: DataLoader worker (pid 4321) is killed by signal:
// Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise
// your shared memory limit." (log_scanner.cpp joins the two).
// PyTorch's shared-memory files for tensors a worker hands over (/dev/shm/torch_<pid>_<n>_<i>) when
// /dev/shm is full or its mapping is refused: "unable to write to file </torch_18_1234567890_0>: No
// space left on device (28)", "unable to mmap 1048576 bytes from file </torch_3141_2718281828_0>:
// Cannot allocate memory (12)" (torch/csrc/... MapAllocator.cpp).
std::optional<FormatMatch> match_dataloader_shm(const MessageWindow& w) {
  static const RE2 killed(R"(DataLoader worker \(pid(?:\(s\))? (\d+)[^)]*\) is killed by signal: Bus error)");
  static const RE2 shm_file(R"(unable to (?:write to|mmap \d+ bytes from|open shared memory object) (?:file )?</torch_[\w]+>: )"
                            R"((?:No space left on device \(28\)|Cannot allocate memory \(12\)))");
  const auto g = regex_search(killed, w.lines[0]);
  if (!g && !contains(w.lines[0], "Unexpected bus error encountered in worker") && !regex_search(shm_file, w.lines[0])) {
    return std::nullopt;
  }
  FormatMatch m = new_match("pytorch", "dataloader_shm");
  m.event.set_field("device_kind", std::string("CPU"));
  m.event.set_field("memory_kind", std::string("shared memory (/dev/shm)"));
  if (g) set_pid(m.event, (*g)[1]);
  return m;
}

// systemd's record of a unit whose process the kernel's OOM killer ended ("trainer.service: A process
// of this unit has been killed by the OOM killer.", then "Failed with result 'oom-kill'.").
std::optional<FormatMatch> match_systemd_oom(const MessageWindow& w) {
  static const RE2 re(R"((?:^|\s)([\w@.\-]+\.(?:service|scope)): A process of this unit has been killed by the OOM killer)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m = kill_match("systemd", "systemd");
  m.event.set_field("unit", std::string((*g)[1]));
  for (size_t i = 1; i < std::min<size_t>(w.lines.size(), 4); ++i) {
    if (w.lines[i].find("Failed with result 'oom-kill'") != std::string::npos) m.lines_used = i + 1;
  }
  return m;
}

void add_other_formats(std::vector<MessageFormat>& out) {
  out.push_back({"numpy_array_alloc", {"for an array with shape"}, match_numpy_array});
  out.push_back({"tgi_warmup_prefill", {"prefill tokens"}, match_tgi_warmup});
  out.push_back({"sglang_not_enough_memory", {"Not enough memory"}, match_sglang});
  out.push_back({"onnxruntime_arena", {"Failed to allocate memory for requested buffer"}, match_onnxruntime_arena});
  out.push_back({"wgpu_out_of_memory", {"Not enough memory left"}, match_wgpu});
  out.push_back({"nccl_cuda_oom", {"NCCL WARN"}, match_nccl});
  out.push_back({"nccl_cuda_oom", {"unhandled cuda error", "ncclUnhandledCudaError"}, match_nccl_raised});
  out.push_back({"directml_alloc", {"not enough GPU video memory", "DML allocator out of memory"}, match_directml});
  out.push_back({"mxnet_cudamalloc", {"cudaMalloc failed", "cudaMalloc retry failed"}, match_cudamalloc_failed});
  // A process killed by SIGKILL, each report of it; one kill reported by several of them is one
  // event (log_scanner.cpp joins them).
  out.push_back({"process_killed", {"SIGKILL"}, match_sigkill});
  out.push_back({"process_killed", {"Killed process"}, match_kernel_oom_kill});
  out.push_back({"process_killed", {"killed by signal: Killed"}, match_dataloader_killed});
  // Host RAM: Python's MemoryError, the kernel's ENOMEM, a DataLoader worker out of shared memory.
  out.push_back({"python_memory_error", {"MemoryError"}, match_python_memory_error});
  out.push_back({"os_enomem", {"[Errno 12]"}, match_enomem});
  out.push_back({"dataloader_shm", {"Unexpected bus error encountered", "killed by signal: Bus error", "</torch_"},
                 match_dataloader_shm});
  out.push_back({"process_killed", {"Killed signal terminated program", "died due to signal 9", "Killed"},
                 match_compiler_killed});
  out.push_back({"process_killed", {"Killed", "killed  "}, match_shell_killed});
  out.push_back({"process_killed", {"-9", "137"}, match_exit_status_kill});
  out.push_back({"process_killed", {"oom_kill event", "oom-kill event", "emory limit (", "Out Of Memory", "OOMKilled"},
                 match_cluster_oom});
  out.push_back({"process_killed", {"killed by the OOM killer"}, match_systemd_oom});
}

}  // namespace oomdoc
