// llama.cpp / ggml and Ollama: cudaMalloc failures with the MiB asked for, followed by the exact
// buffer size, pinned host buffers, and Ollama's runner exit.
#include "core/text.h"
#include "readers/formats/message_format.h"
#include "readers/formats/regex_search.h"

namespace oomdoc {
namespace {

const std::string kSize(kSizePattern);

std::optional<FormatMatch> match_cuda_alloc(const MessageWindow& w) {
  static const RE2 re("allocating (" + kSize + ") on device (\\d+): (?:cudaMalloc|hipMalloc) failed: out of memory");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m;
  OomEvent& e = m.event;
  e.framework = "llama.cpp";
  e.format = "ggml_cuda_alloc";
  e.device = parse_decimal<int64_t>((*g)[2]);
  // A size beyond what parse_printed_size reads (40 digits) leaves the request out.
  auto q = parse_printed_size((*g)[1], LabelMeaning::kBinary);
  // The next line usually repeats the request exactly: "failed to allocate CUDA0 buffer of size N".
  static const RE2 exact(R"(failed to allocate (\w+) buffer of size (\d+))");
  if (auto x = regex_search(exact, w.flat); x && w.line_of(offset_in(w, (*x)[0])) <= 2) {
    if (q) {
      e.set_field("requested_bytes_from_text", static_cast<int64_t>(q->bytes));
      if (auto exact = parse_decimal<uint64_t>((*x)[2])) {
        q->bytes = *exact;
        q->tolerance_bytes = 0;
      }
    }
    e.set_field("buffer_backend", std::string((*x)[1]));
    m.lines_used = w.line_of(offset_in(w, (*x)[0])) + 1;
  }
  if (q) e.set_quantity("requested", *q);
  // Which of llama.cpp's buffers failed, from the lines that follow (each names its caller): the
  // compute graph (ggml_gallocr_reserve_n, "failed to allocate compute buffers"), the KV cache
  // (llama_kv_cache_init), or the model's weights (llama_model_load, load_tensors).
  for (size_t i = 1; i < w.lines.size() && i <= 4; ++i) {
    const std::string& line = w.lines[i];
    const char* buffer = nullptr;
    if (line.find("gallocr") != std::string::npos || line.find("compute buffer") != std::string::npos ||
        line.find("compute pp buffer") != std::string::npos) {
      buffer = "compute";
    } else if (line.find("kv_cache") != std::string::npos || line.find("kv cache") != std::string::npos) {
      buffer = "kv_cache";
    } else if (line.find("llama_model_load") != std::string::npos || line.find("load_tensors") != std::string::npos ||
               line.find("error loading model") != std::string::npos) {
      buffer = "model";
    }
    if (buffer) {
      e.set_field("llama_buffer", std::string(buffer));
      break;
    }
  }
  return m;
}

std::optional<FormatMatch> match_pinned_host(const MessageWindow& w) {
  // ggml_cuda_host_malloc prints cudaGetErrorString after the size: "out of memory", or a status
  // that is none ("invalid argument": a platform that cannot pin, WSL's limits). llama.cpp goes on
  // either way; the status is kept for the diagnosis.
  static const RE2 re("failed to allocate (" + kSize + ") of pinned memory(?::\\s*(.*))?");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  std::string status;
  if (matched((*g)[2]) && !(*g)[2].empty()) status = std::string((*g)[2]);
  FormatMatch m;
  m.event.framework = "llama.cpp";
  m.event.format = "ggml_pinned_host";
  if (!status.empty()) m.event.set_field("status", status);
  // Another status than out of memory is no memory error (explain lists it with --all).
  if (!status.empty() && status.find("out of memory") == std::string::npos) m.event.is_error = false;
  m.event.set_field("memory_kind", std::string("pinned host"));
  set_printed_size(m.event, "requested", (*g)[1], LabelMeaning::kBinary);
  if ((*g)[1].find(',') != std::string_view::npos) m.event.set_field("decimal_separator", std::string(","));
  return m;
}

std::optional<FormatMatch> match_ollama(const MessageWindow& w) {
  if (w.lines[0].find("you may not have enough available memory to run this model") == std::string::npos) {
    return std::nullopt;
  }
  FormatMatch m;
  m.event.framework = "ollama";
  m.event.format = "ollama_runner";
  return m;
}

// The ollama CLI's report of its runner's death: "Error: llama runner process has terminated:
// cudaMalloc failed: out of memory" (or "CUDA error: out of memory"), usually followed by the
// runner's own line with the exact size: "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer
// of size 838447104".
std::optional<FormatMatch> match_ollama_terminated(const MessageWindow& w) {
  static const RE2 re(R"(llama runner process has terminated:\s*(.*out of memory))");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m;
  OomEvent& e = m.event;
  e.framework = "ollama";
  e.format = "ollama_runner";
  e.set_field("runner_error", std::string((*g)[1]));
  static const RE2 exact(R"(failed to allocate ((?:CUDA|ROCm|Metal|Vulkan)(\d*)) buffer of size (\d+))");
  for (size_t i = 1; i < w.lines.size() && i <= 2; ++i) {
    auto x = regex_search(exact, w.lines[i]);
    if (!x) continue;
    set_printed_bytes(e, "requested", (*x)[3]);
    e.set_field("buffer_backend", std::string((*x)[1]));
    if (matched((*x)[2])) e.device = parse_decimal<int64_t>((*x)[2]);
    if (w.lines[i].find("gallocr") != std::string::npos) e.set_field("llama_buffer", std::string("compute"));
    m.lines_used = i + 1;
    break;
  }
  return m;
}

}  // namespace

// System RAM for the layers llama.cpp keeps on the CPU (or, with mmap off, the whole file):
// "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size N", then
// "alloc_tensor_range: failed to allocate CPU buffer of size N" for the same request.
std::optional<FormatMatch> match_cpu_buffer(const MessageWindow& w) {
  static const RE2 re(R"((?:cpu_buffer_type_alloc_buffer: failed to allocate buffer|failed to allocate CPU buffer) of size (\d+))");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m = new_match("llama.cpp", "ggml_cpu_buffer");
  m.event.set_field("memory_kind", std::string("host"));
  set_printed_bytes(m.event, "requested", (*g)[1]);
  if (w.lines.size() > 1) {
    if (auto next = regex_search(re, w.lines[1]); next && (*next)[1] == (*g)[1]) m.lines_used = 2;
  }
  return m;
}

// Ollama's check before it loads a model into system RAM (llm/server.go): "model requires more
// system memory (13.7 GiB) than is available (9.3 GiB)".
std::optional<FormatMatch> match_ollama_system_memory(const MessageWindow& w) {
  static const RE2 re("requires more system memory \\((" + kSize + ")\\) than is available \\((" + kSize + ")\\)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m = new_match("ollama", "ollama_system_memory");
  m.event.set_field("memory_kind", std::string("host"));
  set_printed_size(m.event, "requested", (*g)[1], LabelMeaning::kBinary);
  set_printed_size(m.event, "free", (*g)[2], LabelMeaning::kBinary);
  return m;
}

void add_ggml_formats(std::vector<MessageFormat>& out) {
  out.push_back({"ollama_system_memory", {"requires more system memory"}, match_ollama_system_memory});
  out.push_back({"ggml_cpu_buffer", {"failed to allocate buffer of size", "failed to allocate CPU buffer"}, match_cpu_buffer});
  out.push_back({"ollama_runner", {"llama runner process has terminated"}, match_ollama_terminated});
  out.push_back({"ggml_cuda_alloc", {"Malloc failed: out of memory"}, match_cuda_alloc});
  out.push_back({"ggml_pinned_host", {"of pinned memory"}, match_pinned_host});
  out.push_back({"ollama_runner", {"enough available memory"}, match_ollama});
}

}  // namespace oomdoc
