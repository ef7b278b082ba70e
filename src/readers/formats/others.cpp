// Serving engines and communication libraries other than vLLM (SGLang, NCCL), and a process the
// kernel killed (SIGKILL).
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

std::optional<FormatMatch> match_nccl(const MessageWindow& w) {
  static const RE2 re(R"(NCCL WARN.*(?:Cuda failure|cudaMalloc).*out of memory)");
  if (!regex_search(re, w.lines[0])) return std::nullopt;
  FormatMatch m;
  m.event.framework = "nccl";
  m.event.format = "nccl_cuda_oom";
  // NCCL's alloc.h names the size a line or two later: "NCCL WARN Failed to CUDA calloc 6291456 bytes".
  static const RE2 size(R"(NCCL WARN Failed to CUDA (?:calloc|malloc) (\d+) bytes)");
  for (size_t i = 1; i < w.lines.size() && i <= 3; ++i) {
    if (auto s = regex_search(size, w.lines[i])) {
      if (auto q = parse_quantity(std::string((*s)[1]) + " bytes")) m.event.set_quantity("requested", *q);
      m.lines_used = i + 1;
      break;
    }
  }
  return m;
}

// A worker killed by SIGKILL with no error of its own, as torchrun's ChildFailedError summary
// ("traceback : Signal 9 (SIGKILL) received by PID 2410412") or Python's subprocess error ("died
// with <Signals.SIGKILL: 9>") reports it: on Linux usually the kernel's OOM killer (host RAM).
std::optional<FormatMatch> match_sigkill(const MessageWindow& w) {
  static const RE2 re(R"((?i:signal) 9 \(SIGKILL\) received by PID (\d+)|died with <Signals\.SIGKILL: 9>)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m;
  m.event.framework = w.lines[0].find("Signals.SIGKILL") != std::string::npos ? "python" : "pytorch";
  m.event.format = "process_killed";
  m.event.set_field("device_kind", std::string("CPU"));
  m.event.set_field("signal", std::string("SIGKILL"));
  if (matched((*g)[1])) {
    if (auto pid = parse_decimal<int64_t>((*g)[1])) m.event.set_field("pid", *pid);
  }
  return m;
}

}  // namespace

void add_other_formats(std::vector<MessageFormat>& out) {
  out.push_back({"sglang_not_enough_memory", {"Not enough memory"}, match_sglang});
  out.push_back({"nccl_cuda_oom", {"NCCL WARN"}, match_nccl});
  out.push_back({"process_killed", {"SIGKILL"}, match_sigkill});
}

}  // namespace oomdoc
