// NVIDIA TensorRT's memory messages, as its logger prints them (trtexec "[04/11/2022-09:13:11] [F] [TRT]
// ...", the Python/C++ samples "[TRT] [E] ...", DeepStream's nvinfer "ERROR: [TRT]: ..."): the builder's
// and runtime's "Error Code 2: OutOfMemory" ([virtualMemoryBuffer.cpp::resizePhysical::79]), its
// default allocator's "Cuda Error in nvinfer1::internal::DefaultAllocator::allocate: 2 (out of memory)",
// and the builder's warning that a tactic's workspace could not be allocated ("Requested amount of GPU
// memory (N bytes) could not be allocated", then "Skipping tactic ..."): the builder skips that tactic
// and goes on, so it is no failure unless the severity is fatal ([F]). And TensorRT-LLM's PyTorch
// backend's executor that could not be created for lack of memory.
#include "core/text.h"
#include "readers/formats/message_format.h"
#include "readers/formats/regex_search.h"

namespace oomdoc {
namespace {

// The severity TensorRT's logger printed: "F" (internal error), "E", "W", "I", "V", or "" when none.
std::string trt_severity(std::string_view line) {
  static const RE2 re(R"(\[([FEWIV])\]\s*\[TRT\]|\[TRT\]\s*\[([FEWIV])\]|\b(ERROR|WARNING|INFO): \[TRT\])");
  auto g = regex_search(re, line);
  if (!g) return "";
  if (matched((*g)[1])) return std::string((*g)[1]);
  if (matched((*g)[2])) return std::string((*g)[2]);
  return std::string((*g)[3].substr(0, 1));
}

// DeepStream's nvinfer prints TensorRT's lines as "ERROR: [TRT]: ..." / "WARNING: [TRT]: ...".
bool deepstream_line(std::string_view line) { return contains(line, ": [TRT]: "); }

// The builder's tactic warning at or after window line `from` (within a few lines): the request, and
// the line through which the warning (and its "Try decreasing the workspace size" advice) runs.
struct TacticWarning {
  std::optional<uint64_t> requested;
  bool skipped = false;
  size_t first_line = 0, last_line = 0;
};
std::optional<TacticWarning> tactic_warning(const MessageWindow& w, size_t from) {
  static const RE2 requested(R"(Requested amount of GPU memory \((\d+) bytes\) could not be allocated)");
  constexpr size_t kLinesAfter = 4;
  std::optional<TacticWarning> out;
  for (size_t i = from; i < w.lines.size() && i <= from + kLinesAfter; ++i) {
    const std::string& line = w.lines[i];
    if (auto g = regex_search(requested, line); g && !out) {
      out = TacticWarning{parse_decimal<uint64_t>((*g)[1]), false, i, i};
    } else if (out && contains(line, "Skipping tactic")) {
      out->skipped = true;
      out->last_line = i;
    } else if (out && out->skipped && contains(line, "workspace size")) {
      out->last_line = i;
      break;
    } else if (out) {
      break;
    }
  }
  return out;
}

std::optional<FormatMatch> match_trt_out_of_memory(const MessageWindow& w) {
  static const RE2 re(R"((?:\[([\w.]+)::(\w+)::\d+\]\s*)?Error Code 2: OutOfMemory)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  const std::string severity = trt_severity(w.lines[0]);
  auto m = new_match("tensorrt", "tensorrt_out_of_memory");
  OomEvent& e = m.event;
  if (matched((*g)[1])) e.set_field("source", std::string((*g)[1]) + "::" + std::string((*g)[2]));
  if (!severity.empty()) e.set_field("severity", severity);
  if (deepstream_line(w.lines[0])) e.set_field("deepstream", true);
  // The same error printed again for the next chunk (resizePhysical::145, then ::160) is this one.
  size_t next = 1;
  while (next < w.lines.size() && next <= 4 && contains(w.lines[next], "Error Code 2: OutOfMemory") &&
         trt_severity(w.lines[next]) == severity) {
    ++next;
  }
  m.lines_used = next;
  if (auto t = tactic_warning(w, next)) {
    if (t->requested) set_printed_bytes(e, "requested", std::to_string(*t->requested));
    m.lines_used = t->last_line + 1;
    // The builder caught the failure and skipped the tactic: a warning, unless TensorRT itself says fatal.
    if (t->skipped && severity != "F") {
      e.is_error = false;
      e.set_field("fatal", false);
      e.set_field("tactic_skipped", true);
    }
  }
  if (severity == "F") e.set_field("fatal", true);
  return m;
}

// The tactic warning alone (no "Error Code 2" line before it).
std::optional<FormatMatch> match_trt_tactic_warning(const MessageWindow& w) {
  auto t = tactic_warning(w, 0);
  if (!t || t->first_line != 0) return std::nullopt;
  auto m = new_match("tensorrt", "tensorrt_out_of_memory", /*is_error=*/false);
  OomEvent& e = m.event;
  if (t->requested) set_printed_bytes(e, "requested", std::to_string(*t->requested));
  e.set_field("fatal", false);
  if (t->skipped) e.set_field("tactic_skipped", true);
  if (const std::string severity = trt_severity(w.lines[0]); !severity.empty()) e.set_field("severity", severity);
  if (deepstream_line(w.lines[0])) e.set_field("deepstream", true);
  m.lines_used = t->last_line + 1;
  return m;
}

// TensorRT's default GPU allocator when cudaMalloc fails: "Cuda Error in
// nvinfer1::internal::DefaultAllocator::allocate: 2 (out of memory)" (2 is cudaErrorMemoryAllocation).
std::optional<FormatMatch> match_trt_cuda_error(const MessageWindow& w) {
  static const RE2 re(R"(Cuda Error in ([\w:]+): 2 \(out of memory\))");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  auto m = new_match("tensorrt", "tensorrt_cuda_alloc");
  m.event.set_field("cuda_call", std::string((*g)[1]));
  if (const std::string severity = trt_severity(w.lines[0]); !severity.empty()) m.event.set_field("severity", severity);
  return m;
}

// TensorRT-LLM's PyTorch backend when creating the executor runs out of memory
// (tensorrt_llm/_torch/pyexecutor): "Executor creation failed due to insufficient GPU memory.", then
// (after a blank line) "The following component could not be created: KV cache", "Total GPU memory
// (GiB): 140.06" and "Free GPU memory before component creation attempt (GiB): 108.86".
// A figure whose unit is in its label ("Total GPU memory (GiB): 140.06"): its text is the number as printed.
void set_figure_of_gib_label(OomEvent& e, const std::string& name, std::string_view number) {
  auto q = parse_printed_size(std::string(number) + " GiB", LabelMeaning::kBinary);
  if (!q) return;
  q->text = std::string(number);
  e.set_quantity(name, *q);
}

std::optional<FormatMatch> match_trtllm_executor(const MessageWindow& w) {
  if (!contains(w.lines[0], "Executor creation failed due to insufficient GPU memory")) return std::nullopt;
  auto m = new_match("tensorrt-llm", "trtllm_executor_insufficient_memory");
  OomEvent& e = m.event;
  static const RE2 component(R"(The following component could not be created: (.+?)\s*$)");
  static const RE2 total(R"(Total GPU memory \(GiB\): (\d+(?:\.\d+)?))");
  static const RE2 free_re(R"(Free GPU memory before component creation attempt \(GiB\): (\d+(?:\.\d+)?))");
  constexpr size_t kLinesAfter = 8;
  for (size_t i = 1; i < w.lines.size() && i <= kLinesAfter; ++i) {
    const std::string& line = w.lines[i];
    if (auto c = regex_search(component, line)) {
      e.set_field("component", std::string((*c)[1]));
    } else if (auto t = regex_search(total, line)) {
      set_figure_of_gib_label(e, "total", (*t)[1]);
    } else if (auto f = regex_search(free_re, line)) {
      set_figure_of_gib_label(e, "free", (*f)[1]);
    } else {
      continue;
    }
    m.lines_used = i + 1;
  }
  return m;
}

}  // namespace

void add_tensorrt_formats(std::vector<MessageFormat>& out) {
  out.push_back({"tensorrt_out_of_memory", {"Error Code 2: OutOfMemory"}, match_trt_out_of_memory});
  out.push_back({"tensorrt_out_of_memory", {"Requested amount of GPU memory"}, match_trt_tactic_warning});
  out.push_back({"tensorrt_cuda_alloc", {"Cuda Error in "}, match_trt_cuda_error});
  out.push_back({"trtllm_executor_insufficient_memory", {"Executor creation failed"},
                 match_trtllm_executor});
}

}  // namespace oomdoc
