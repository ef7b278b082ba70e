#include "readers/application.h"

#include <algorithm>
#include <string_view>

namespace oomdoc {
namespace {

bool has(std::string_view text, std::string_view needle) { return text.find(needle) != std::string_view::npos; }

// Markers in a frame's file path.
std::string from_file(std::string_view file) {
  if (has(file, "/vllm/") || file.rfind("vllm/", 0) == 0 || has(file, "\\vllm\\")) return kAppVllm;
  // ComfyUI's own modules (execution.py, comfy/...) and its custom nodes.
  if (has(file, "ComfyUI") || has(file, "/comfy/") || has(file, "\\comfy\\") || has(file, "custom_nodes")) {
    return kAppComfyUi;
  }
  if (has(file, "stable-diffusion-webui")) return kAppSdWebui;
  return "";
}

// Markers in a log line: the programs' own messages.
std::string from_line(std::string_view line) {
  // vLLM's CUDA-graph capture progress and startup accounting (V0 model_runner, V1 gpu_model_runner).
  for (std::string_view marker : {"Capturing CUDA graph shapes", "Capturing cudagraphs for decoding",
                                  "Capturing the model for CUDA graphs", "the current vLLM instance can use",
                                  "Error executing method 'capture_model'", "(VllmWorker", "(EngineCore"}) {
    if (has(line, marker)) return kAppVllm;
  }
  // ComfyUI's execution error line and its error report.
  if (has(line, "!!! Exception during processing !!!") || has(line, "# ComfyUI Error Report") ||
      has(line, "ComfyUI_windows_portable")) {
    return kAppComfyUi;
  }
  if (has(line, "stable-diffusion-webui") || has(line, "Stable diffusion model failed to load")) return kAppSdWebui;
  return "";
}

}  // namespace

std::string application_from_frames(const Traceback& traceback) {
  // Innermost first: the program whose code was running when memory ran out.
  for (auto it = traceback.frames.rbegin(); it != traceback.frames.rend(); ++it) {
    std::string app = from_file(it->file);
    if (!app.empty()) return app;
  }
  return "";
}

std::string detect_application(const std::vector<std::string>& lines_above, const OomEvent& event,
                               const std::vector<std::string>& lines_after) {
  if (event.traceback) {
    std::string app = application_from_frames(*event.traceback);
    if (!app.empty()) return app;
  }
  // The event's own lines (ComfyUI prefixes its error line), then the nearest lines above.
  size_t at = 0;
  while (at <= event.message.size()) {
    size_t end = event.message.find('\n', at);
    if (end == std::string::npos) end = event.message.size();
    std::string app = from_line(std::string_view(event.message).substr(at, end - at));
    if (!app.empty()) return app;
    at = end + 1;
  }
  const size_t first = lines_above.size() > kApplicationContextLines ? lines_above.size() - kApplicationContextLines : 0;
  for (size_t i = lines_above.size(); i-- > first;) {
    std::string app = from_line(lines_above[i]);
    // A frame line outside a parsed traceback (its header cut off by the excerpt).
    if (app.empty() && has(lines_above[i], "File \"")) app = from_file(lines_above[i]);
    if (!app.empty()) return app;
  }
  for (size_t i = 0; i < lines_after.size() && i < 4; ++i) {
    std::string app = from_line(lines_after[i]);
    if (!app.empty()) return app;
  }
  return "";
}

std::string operation_from_lines(const std::vector<std::string>& lines_above, const OomEvent& event) {
  auto capturing = [](std::string_view line) {
    return has(line, "capture_model") || has(line, "Capturing CUDA graph") || has(line, "Capturing cudagraphs");
  };
  if (capturing(event.message)) return "cuda_graph_capture";
  // The capture's progress bar or error line sits right above the failure.
  constexpr size_t kNear = 12;
  const size_t first = lines_above.size() > kNear ? lines_above.size() - kNear : 0;
  for (size_t i = first; i < lines_above.size(); ++i) {
    if (capturing(lines_above[i])) return "cuda_graph_capture";
  }
  return "";
}

}  // namespace oomdoc
