// Apple Metal's command-buffer failure when the GPU cannot get the unified memory it needs:
// "Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)", as MLX raises it
// ("[METAL] Command buffer execution failed: ...", the code sometimes left off), as llama.cpp's Metal backend logs it ("error:
// ..." then "ggml_metal_graph_compute: command buffer N failed with status 5"), or as a Swift
// MTLCommandBufferErrorDomain error ("Insufficient Memory (IOAF code 8)").
#include "readers/formats/message_format.h"
#include "readers/formats/regex_search.h"

namespace oomdoc {
namespace {

std::optional<FormatMatch> match_metal(const MessageWindow& w) {
  // MLX's own wording may end at the words, without the driver's code (vmlx: "[METAL] Command buffer
  // execution failed: Insufficient Memory").
  static const RE2 re(R"(Insufficient Memory \((?:[0-9A-Fa-f]+:kIOGPUCommandBufferCallbackErrorOutOfMemory|IOAF code 8)\)|)"
                      R"(\[METAL\] Command buffer execution failed: Insufficient Memory\b)");
  if (!regex_search(re, w.lines[0])) return std::nullopt;
  FormatMatch m;
  OomEvent& e = m.event;
  e.format = "metal_insufficient_memory";
  e.set_field("backend", std::string("Metal"));
  e.set_field("device_kind", std::string("GPU"));
  e.framework = "metal";
  if (w.lines[0].find("[METAL]") != std::string::npos) e.framework = "mlx";
  // llama.cpp names itself on the next line: its Metal backend, or its scheduler failing the graph
  // ("llama_graph_compute: ggml_backend_sched_graph_compute_async failed with error -1", koboldcpp#1371).
  if (w.lines.size() > 1 && (w.lines[1].find("ggml_metal") != std::string::npos ||
                             w.lines[1].find("ggml_backend_sched") != std::string::npos)) {
    e.framework = "llama.cpp";
    m.lines_used = 2;
  }
  return m;
}

// MLX's Metal allocator (mlx/backend/metal/allocator.cpp) refusing one buffer larger than the device's
// maxBufferLength: "[metal::malloc] Attempting to allocate 48736917632 bytes which is greater than the
// maximum allowed buffer size of 30150672384 bytes." No amount of free or wired memory lifts that limit.
std::optional<FormatMatch> match_metal_max_buffer(const MessageWindow& w) {
  static const RE2 re(R"(\[metal::malloc\] Attempting to allocate (\d+) bytes which is greater than the maximum allowed buffer size of (\d+) bytes)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m = new_match("mlx", "metal_max_buffer_size");
  m.event.set_field("backend", std::string("Metal"));
  m.event.set_field("device_kind", std::string("GPU"));
  set_printed_bytes(m.event, "requested", (*g)[1]);
  set_printed_bytes(m.event, "max_buffer_size", (*g)[2]);
  return m;
}

}  // namespace

void add_metal_formats(std::vector<MessageFormat>& out) {
  out.push_back({"metal_insufficient_memory", {"Insufficient Memory"}, match_metal});
  out.push_back({"metal_max_buffer_size", {"[metal::malloc]"}, match_metal_max_buffer});
}

}  // namespace oomdoc
