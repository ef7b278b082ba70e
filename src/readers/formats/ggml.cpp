// llama.cpp / ggml and Ollama: a GPU backend's failed buffer (CUDA/HIP, Vulkan, Metal, SYCL) with the
// size asked for, followed by the exact buffer size, pinned host buffers, and Ollama's runner exit.
#include <memory>

#include "core/text.h"
#include "model/gguf_types.h"
#include "readers/formats/message_format.h"
#include "readers/formats/regex_search.h"

namespace oomdoc {
namespace {

const std::string kSize(kSizePattern);

// The line llama.cpp prints after a GPU backend refused a buffer, naming the buffer and its exact size:
// "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 2148007936" (the compute graph) or
// "alloc_tensor_range: failed to allocate Vulkan0 buffer of size N" (weights or KV cache). The
// buffer type is the backend and its device: CUDA0, ROCm1, Vulkan0, SYCL0, MUSA0, CANN0, or Metal
// (one device, no index). CPU buffers are host memory (match_cpu_buffer), CUDA_Host pinned memory.
struct BufferLine {
  std::string buffer_backend;       // "CUDA0"
  std::string backend;              // "CUDA"
  std::optional<int64_t> device;    // 0; none for Metal
  std::string_view bytes;           // the exact size's digits
  bool graph_allocator = false;     // ggml_gallocr: the compute graph's buffer
};

std::optional<BufferLine> read_buffer_line(std::string_view line) {
  static const RE2 re(R"(failed to allocate ((CUDA|ROCm|Vulkan|SYCL|MUSA|CANN|Metal)(\d*)) buffer of size (\d+))");
  auto g = regex_search(re, line);
  if (!g) return std::nullopt;
  BufferLine b;
  b.buffer_backend = std::string((*g)[1]);
  b.backend = std::string((*g)[2]);
  if (!(*g)[3].empty()) b.device = parse_decimal<int64_t>((*g)[3]);
  b.bytes = (*g)[4];
  b.graph_allocator = line.find("gallocr") != std::string_view::npos;
  return b;
}

// Which of llama.cpp's buffers failed, from the message's lines (each names its caller): the compute
// graph (ggml_gallocr_reserve_n, "failed to allocate compute buffers"), the KV cache
// (llama_kv_cache_init), or the model's weights (llama_model_load, load_tensors); "" when none says.
std::string llama_buffer_named(const MessageWindow& w) {
  for (size_t i = 0; i < w.lines.size() && i <= 4; ++i) {
    const std::string& line = w.lines[i];
    if (line.find("gallocr") != std::string::npos || line.find("compute buffer") != std::string::npos ||
        line.find("compute pp buffer") != std::string::npos) {
      return "compute";
    }
    if (line.find("kv_cache") != std::string::npos || line.find("kv cache") != std::string::npos) return "kv_cache";
    if (line.find("llama_model_load") != std::string::npos || line.find("load_tensors") != std::string::npos ||
        line.find("error loading model") != std::string::npos) {
      return "model";
    }
  }
  return "";
}

// A GPU backend's refusal of a buffer, as each backend words it, then what every one of them has in
// common: the exact size the buffer line gives (the first line's MiB rounded it), the buffer and its
// device, and which of llama.cpp's buffers it was.
//  - CUDA/HIP (ggml-cuda.cu): "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 2048.50 MiB on
//    device 1: cudaMalloc failed: out of memory" (format ggml_cuda_alloc);
//  - Vulkan (ggml-vulkan.cpp): "ggml_vulkan: Device memory allocation of size 118497280 failed." then
//    "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory";
//  - Metal (ggml-metal.m): "ggml_backend_metal_buffer_type_alloc_buffer: error: failed to allocate
//    buffer, size =  8480.00 MiB";
//  - SYCL (ggml-sycl.cpp): "ggml_backend_sycl_buffer_type_alloc_buffer: can't allocate 3072.00 MiB of
//    device memory";
//  - the buffer line alone (read_buffer_line), when nothing before it was kept.
// The backend's own lines print MiB as "%.2f MiB" (binary).
std::optional<FormatMatch> match_backend_alloc(const MessageWindow& w) {
  struct Wording {
    const char* backend;
    const char* format;
    std::unique_ptr<RE2> re;   // group 1: the size; group 2, when present: the device
  };
  static const std::vector<Wording> wordings = [] {
    std::vector<Wording> out;
    out.push_back({"CUDA", "ggml_cuda_alloc",
                   std::make_unique<RE2>("allocating (" + kSize + ") on device (\\d+): (?:cudaMalloc|hipMalloc) failed: out of memory")});
    out.push_back({"Vulkan", "ggml_backend_alloc", std::make_unique<RE2>(R"(ggml_vulkan: Device memory allocation of size (\d+) failed)")});
    out.push_back({"Metal", "ggml_backend_alloc",
                   std::make_unique<RE2>("metal_buffer_type_alloc_buffer: error: failed to allocate buffer, size =\\s*(" + kSize + ")")});
    out.push_back({"SYCL", "ggml_backend_alloc",
                   std::make_unique<RE2>("sycl_buffer_type_alloc_buffer: can't allocate (" + kSize + ") of device memory")});
    return out;
  }();
  FormatMatch m;
  OomEvent& e = m.event;
  e.framework = "llama.cpp";
  std::optional<Quantity> requested;
  const Wording* found = nullptr;
  bool device_printed = false;
  for (const Wording& wording : wordings) {
    auto g = regex_search(*wording.re, w.lines[0]);
    if (!g) continue;
    found = &wording;
    e.format = wording.format;
    // A size beyond what parse_printed_size reads (40 digits) leaves the request out.
    const bool digits = (*g)[1].find_first_not_of("0123456789") == std::string_view::npos;
    requested = parse_printed_size(digits ? std::string((*g)[1]) + " bytes" : std::string((*g)[1]), LabelMeaning::kBinary);
    if (requested && digits) requested->text = std::string((*g)[1]);   // the text as printed: the digits alone
    if (wording.re->NumberOfCapturingGroups() > 1) {
      device_printed = true;
      e.device = parse_decimal<int64_t>((*g)[2]);   // null when it does not fit, even if the buffer names one
    }
    break;
  }
  std::optional<BufferLine> buffer;
  if (found == nullptr) {
    // The buffer line on its own.
    buffer = read_buffer_line(w.lines[0]);
    if (!buffer) return std::nullopt;
    e.format = "ggml_backend_alloc";
    e.set_field("backend", buffer->backend);
  } else {
    // (ggml_cuda_alloc names no backend: CUDA's and HIP's builds print the same words.)
    if (std::string_view(found->backend) != "CUDA") e.set_field("backend", std::string(found->backend));
    // Vulkan names the driver's status on the next line.
    if (w.lines.size() > 1 && w.lines[1].find("ErrorOutOfDeviceMemory") != std::string::npos) m.lines_used = 2;
    for (size_t i = 1; i < w.lines.size() && i <= 2 && !buffer; ++i) {
      if ((buffer = read_buffer_line(w.lines[i]))) m.lines_used = i + 1;
    }
  }
  if (buffer) {
    e.set_field("buffer_backend", buffer->buffer_backend);
    // A HIP or MUSA build words its refusal as CUDA's; its buffer line names the backend.
    if (found != nullptr && std::string_view(found->backend) == "CUDA" && buffer->backend != "CUDA") {
      e.set_field("backend", buffer->backend);
    }
    if (!device_printed) e.device = buffer->device;
    if (requested && requested->unit != "bytes") {
      // The first line's MiB, rounded; the buffer line's bytes are exact.
      e.set_field("requested_bytes_from_text", static_cast<int64_t>(requested->bytes));
      if (auto exact = parse_decimal<uint64_t>(buffer->bytes)) {
        requested->bytes = *exact;
        requested->tolerance_bytes = 0;
      }
    } else if (!requested) {
      set_printed_bytes(e, "requested", buffer->bytes);
    }
  }
  if (requested) e.set_quantity("requested", *requested);
  if (std::string buffer_kind = llama_buffer_named(w); !buffer_kind.empty()) e.set_field("llama_buffer", buffer_kind);
  return m;
}

// ggml-cuda's check of a CUDA call (ggml_cuda_error in ggml-cuda.cu): "CUDA error: out of memory", then
// "  current device: 0, in function ggml_cuda_pool_malloc_vmm at .../ggml-cuda.cu:375", the call that
// failed ("  cuMemCreate(&handle, reserve_size, &prop, 0)") and ".../ggml-cuda.cu:100: CUDA error".
// Builds for ROCm and MUSA say so instead of CUDA; 2023 builds print "CUDA error 2 at
// ggml-cuda.cu:6871: out of memory" and the device alone. PyTorch prints the first line too
// (pytorch.cpp), never the device line: that and a ggml function or file tell llama.cpp's.
std::optional<FormatMatch> match_ggml_cuda_error(const MessageWindow& w) {
  static const RE2 error(R"((CUDA|ROCm|MUSA) error(?: \d+ at \S+)?:\s*out of memory)");
  static const RE2 where(R"(^\s*current device:\s*(\d+)(?:,\s*in function (\w+))?)");
  auto g = regex_search(error, w.lines[0]);
  if (!g || w.lines.size() < 2) return std::nullopt;
  auto d = regex_search(where, w.lines[1]);
  if (!d) return std::nullopt;
  const std::string function = matched((*d)[2]) ? std::string((*d)[2]) : std::string();
  bool ggml = function.starts_with("ggml_");
  for (size_t i = 0; i < w.lines.size() && i <= 3 && !ggml; ++i) ggml = contains(w.lines[i], "ggml");
  if (!ggml) return std::nullopt;
  auto m = new_match("llama.cpp", "ggml_cuda_error");
  OomEvent& e = m.event;
  e.set_field("backend", std::string((*g)[1]));
  e.device = parse_decimal<int64_t>((*d)[1]);
  if (!function.empty()) e.set_field("cuda_function", function);
  m.lines_used = 2;
  // The call that failed ("cuMemCreate(...)"), then the source line that aborts.
  static const RE2 call(R"(^\s*(\w+)\(.*\)\s*$)");
  if (w.lines.size() > 2) {
    if (auto c = regex_search(call, w.lines[2])) {
      e.set_field("cuda_call", std::string((*c)[1]));
      m.lines_used = 3;
    }
  }
  if (w.lines.size() > m.lines_used && contains(w.lines[m.lines_used], ": CUDA error") &&
      contains(w.lines[m.lines_used], "ggml")) {
    ++m.lines_used;
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
  for (size_t i = 1; i < w.lines.size() && i <= 2; ++i) {
    auto buffer = read_buffer_line(w.lines[i]);
    if (!buffer) continue;
    set_printed_bytes(e, "requested", buffer->bytes);
    e.set_field("buffer_backend", buffer->buffer_backend);
    e.device = buffer->device;
    if (buffer->graph_allocator) e.set_field("llama_buffer", std::string("compute"));
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

void read_llama_settings(const std::vector<std::string>& lines_above, OomEvent& e) {
  // The context as llama_context (llama_new_context_with_model before mid-2025) prints it:
  // "llama_context: n_ctx         = 131072" (not n_ctx_per_seq or n_ctx_train).
  static const RE2 n_ctx(R"(\bn_ctx\s*=\s*(\d+)\s*$)");
  // The model's file type (llama_model_ftype_name): "print_info: file type   = Q4_K - Medium",
  // "llm_load_print_meta: model ftype      = Q8_0" in 2024 builds.
  static const RE2 file_type(R"((?:print_info|llm_load_print_meta): (?:file type|model ftype)\s*=\s*(.+?)\s*$)");
  // The whole KV cache: "llama_kv_cache_unified: size = 16384.00 MiB (131072 cells, 32 layers, 1
  // seqs), K (f16): ...", "llama_kv_cache: size = ..." in newer builds, "KV self size  = ... MiB" in
  // older ones (all devices together; "CUDA0 KV buffer size" is one device's part).
  static const RE2 kv_total(R"((?:llama_kv_cache\w*: size|KV self size)\s*=\s*(\d+(?:\.\d+)?) MiB)");
  // The failing device's memory as llama.cpp printed it while loading: what was free ("using device
  // CUDA0 (NVIDIA GeForce RTX 3090) - 23306 MiB free") and the buffers it then put there ("CUDA0
  // model buffer size = 4403.49 MiB", "CUDA0 KV buffer size = 16384.00 MiB", "CUDA0 compute buffer
  // size = ..."), so the evidence can say what was left for the buffer that failed.
  static const RE2 device_free(R"(using device ([A-Za-z]+)(\d+) \(.*\) - (\d+) MiB free)");
  static const RE2 buffer(R"(\b([A-Za-z]+)(\d+) (model|KV|compute) buffer size\s*=\s*(\d+(?:\.\d+)?) MiB)");
  const int64_t device = e.device.value_or(0);
  auto on_device = [&](std::string_view index) { return parse_decimal<int64_t>(index) == device; };
  auto mib = [](std::string_view figure) -> int64_t {
    auto q = parse_printed_size(std::string(figure) + " MiB", LabelMeaning::kBinary);
    return q ? static_cast<int64_t>(q->bytes) : 0;
  };
  bool have_free = false, have_model = false, have_kv_buffer = false;
  for (size_t i = lines_above.size(); i-- > 0 && !have_free;) {
    const std::string& line = lines_above[i];
    if (line.find("buffer size") != std::string::npos) {
      if (auto g = regex_search(buffer, line); g && on_device((*g)[2])) {
        // (A compute buffer that was allocated is not the one that failed: not summed.)
        if ((*g)[3] == "model" && !have_model) {
          e.set_field("llama_model_buffer_bytes", mib((*g)[4]));
          have_model = true;
        } else if ((*g)[3] == "KV" && !have_kv_buffer) {
          e.set_field("llama_kv_buffer_bytes", mib((*g)[4]));
          have_kv_buffer = true;
        }
      }
    } else if (line.find("MiB free") != std::string::npos) {
      if (auto g = regex_search(device_free, line); g && on_device((*g)[2])) {
        e.set_field("llama_device_free_bytes", mib((*g)[3]));
        have_free = true;
      }
    }
  }
  bool have_ctx = false, have_type = false, have_kv = false;
  // Nearest first: a log of several runs states each run's settings before its failure.
  for (size_t i = lines_above.size(); i-- > 0 && !(have_ctx && have_type && have_kv);) {
    const std::string& line = lines_above[i];
    if (!have_ctx && line.find("n_ctx") != std::string::npos) {
      if (auto g = regex_search(n_ctx, line)) {
        if (auto v = parse_decimal<int64_t>((*g)[1]); v && *v > 0) e.set_field("llama_n_ctx", *v);
        have_ctx = true;
      }
    }
    if (!have_type && line.find("type") != std::string::npos) {
      if (auto g = regex_search(file_type, line)) {
        if (auto name = gguf_file_type_from_printed((*g)[1])) e.set_field("llama_file_type", *name);
        have_type = true;
      }
    }
    if (!have_kv && line.find(" size") != std::string::npos) {
      if (auto g = regex_search(kv_total, line)) {
        if (auto q = parse_printed_size(std::string((*g)[1]) + " MiB", LabelMeaning::kBinary)) {
          e.set_field("llama_kv_cache_bytes", static_cast<int64_t>(q->bytes));
        }
        have_kv = true;
      }
    }
  }
}

void add_ggml_formats(std::vector<MessageFormat>& out) {
  out.push_back({"ollama_system_memory", {"requires more system memory"}, match_ollama_system_memory});
  out.push_back({"ggml_cpu_buffer", {"failed to allocate buffer of size", "failed to allocate CPU buffer"}, match_cpu_buffer});
  out.push_back({"ollama_runner", {"llama runner process has terminated"}, match_ollama_terminated});
  out.push_back({"ggml_backend_alloc",
                 {"Malloc failed: out of memory", "Device memory allocation of size", "failed to allocate buffer, size",
                  "can't allocate", "buffer of size"},
                 match_backend_alloc});
  out.push_back({"ggml_cuda_error", {": out of memory"}, match_ggml_cuda_error});
  out.push_back({"ggml_pinned_host", {"of pinned memory"}, match_pinned_host});
  out.push_back({"ollama_runner", {"enough available memory"}, match_ollama});
}

}  // namespace oomdoc
