#include "readers/application.h"

#include <algorithm>
#include <string_view>

#include "core/text.h"

namespace oomdoc {
namespace {

bool has(std::string_view text, std::string_view needle) { return text.find(needle) != std::string_view::npos; }

// Markers in a frame's file path.
std::string from_file(std::string_view file) {
  if (has(file, "/vllm/") || file.rfind("vllm/", 0) == 0 || has(file, "\\vllm\\")) return kAppVllm;
  if (has(file, "/sglang/") || file.rfind("sglang/", 0) == 0 || has(file, "\\sglang\\")) return kAppSglang;
  // ComfyUI's own modules (execution.py, comfy/...) and its custom nodes.
  if (has(file, "ComfyUI") || has(file, "/comfy/") || has(file, "\\comfy\\") || has(file, "custom_nodes")) {
    return kAppComfyUi;
  }
  if (has(file, "stable-diffusion-webui")) return kAppSdWebui;
  if (has(file, "text_generation_server")) return kAppTgi;
  return "";
}

// SGLang's logging prefix: "[2025-03-01 12:00:00 TP0] ", "[2025-10-04 02:29:36 DP7 TP7] " (a date,
// a time, then the process's parallel ranks).
bool sglang_prefix(std::string_view line) {
  static constexpr std::string_view kShape = "[0000-00-00 00:00:00 ";
  if (line.size() < kShape.size() + 4 || !has_shape(line, 0, kShape)) return false;
  const size_t close = line.find(']', kShape.size());
  if (close == std::string_view::npos || close > kShape.size() + 24) return false;
  const std::string_view ranks = line.substr(kShape.size(), close - kShape.size());
  return ranks.rfind("TP", 0) == 0 || ranks.rfind("DP", 0) == 0 || ranks.rfind("PP", 0) == 0;
}

// Markers in a log line: the programs' own messages.
std::string from_line(std::string_view line) {
  // vLLM's CUDA-graph capture progress and startup accounting (V0 model_runner, V1 gpu_model_runner).
  for (std::string_view marker : {"Capturing CUDA graph shapes", "Capturing cudagraphs for decoding",
                                  "Capturing the model for CUDA graphs", "the current vLLM instance can use",
                                  "Error executing method 'capture_model'", "(VllmWorker", "(EngineCore"}) {
    if (has(line, marker)) return kAppVllm;
  }
  // SGLang's own wrapping of a failed capture (cuda_graph_runner.py), its scheduler's crash line and
  // its log prefix.
  if (has(line, "Capture cuda graph failed") || has(line, "Scheduler hit an exception") || sglang_prefix(line)) {
    return kAppSglang;
  }
  // ComfyUI's execution error line, its error report, and the tip its execution.py prints under an
  // out-of-memory error ("This error means you ran out of memory on your GPU.").
  if (has(line, "!!! Exception during processing !!!") || has(line, "# ComfyUI Error Report") ||
      has(line, "ComfyUI_windows_portable") || has(line, "This error means you ran out of memory on your GPU")) {
    return kAppComfyUi;
  }
  if (has(line, "stable-diffusion-webui") || has(line, "Stable diffusion model failed to load")) return kAppSdWebui;
  // TGI's launcher, router and shards log under their crate and module names.
  for (std::string_view marker : {"text_generation_launcher", "text_generation_client", "text_generation_router",
                                  "text_generation_server"}) {
    if (has(line, marker)) return kAppTgi;
  }
  // Ollama: its journald tag ("ollama[402476]: "), its Go server's structured lines, its model store
  // (the runner's "panic: unable to load model: /root/.ollama/models/blobs/...").
  if (has(line, " ollama[") || line.rfind("ollama[", 0) == 0 || has(line, "source=server.go") ||
      has(line, "/.ollama/models") || has(line, "\\.ollama\\models") || has(line, "llama runner")) {
    return kAppOllama;
  }
  return "";
}

}  // namespace

std::string application_from_prefix(const CleanLine& line) {
  // vLLM names its processes VllmWorker/VllmWorkerProcess, Worker_TPn (0.11+), EngineCore[_DPn],
  // APIServer and RayWorkerWrapper; its logger prints "LEVEL MM-DD HH:MM:SS [file.py:N] ".
  const std::string_view tag = line.process_tag;
  for (std::string_view name : {"Vllm", "EngineCore", "APIServer", "RayWorkerWrapper", "Worker_TP", "Worker_PP", "Worker_DP"}) {
    if (tag.substr(0, name.size()) == name) return kAppVllm;
  }
  if (line.logger_prefix) return kAppVllm;
  // A journald/syslog record names its program ("host ollama[402476]: ").
  if (line.syslog_ident == "ollama") return kAppOllama;
  return "";
}

std::string application_from_line(std::string_view text, const std::string& prefix_program) {
  if (!prefix_program.empty()) return prefix_program;
  std::string app = from_line(text);
  // A frame line outside a parsed traceback (its header cut off by the excerpt).
  if (app.empty() && has(text, "File \"")) app = from_file(text);
  return app;
}

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
  return detect_application(ContextLines{lines_above, {}, {}}, event, ContextLines{lines_after, {}, {}}, "");
}

std::string detect_application(const ContextLines& above, const OomEvent& event, const ContextLines& after,
                               const std::string& event_prefix_program) {
  if (!event_prefix_program.empty()) return event_prefix_program;
  const std::vector<std::string>& lines_above = above.text;
  const std::vector<std::string>& lines_after = after.text;
  auto prefix_of = [](const ContextLines& lines, size_t i) -> std::string {
    return i < lines.prefix_program.size() ? lines.prefix_program[i] : std::string();
  };
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
    std::string app = i < above.line_program.size() ? above.line_program[i]
                                                    : application_from_line(lines_above[i], prefix_of(above, i));
    if (!app.empty()) return app;
  }
  for (size_t i = 0; i < lines_after.size() && i < 4; ++i) {
    std::string app = prefix_of(after, i);
    if (app.empty()) app = from_line(lines_after[i]);
    if (!app.empty()) return app;
  }
  return "";
}

std::string vllm_phase_from_lines(const std::vector<std::string>& lines_above, const OomEvent& event) {
  auto serving = [](std::string_view line) {
    return has(line, "EngineDeadError") || has(line, "Engine loop is not running") || has(line, "serving_chat.py") ||
           has(line, "serving_completion.py");
  };
  if (serving(event.message)) return "serving";
  constexpr size_t kNear = 40;   // a traceback's frames, each with its code lines
  const size_t first = lines_above.size() > kNear ? lines_above.size() - kNear : 0;
  for (size_t i = lines_above.size(); i-- > first;) {
    if (has(lines_above[i], "dummy_metadata") || has(lines_above[i], "_dummy_sampler_run")) return "sampler";
  }
  for (size_t i = lines_above.size(); i-- > first;) {
    if (serving(lines_above[i])) return "serving";
  }
  return "";
}

std::string operation_from_lines(const std::vector<std::string>& lines_above, const OomEvent& event) {
  auto capturing = [](std::string_view line) {
    return has(line, "capture_model") || has(line, "Capturing CUDA graph") || has(line, "Capturing cudagraphs") ||
           has(line, "Capture cuda graph failed");
  };
  // transformers' progress bar while from_pretrained reads the checkpoint's shards, unless it got to
  // 100% (then loading was over; tqdm's '\r' redraws stay on one line).
  auto loading = [](std::string_view line) { return has(line, "Loading checkpoint shards") && !has(line, "100%"); };
  // Building a package from source (pip's wheel build, setup.py, ninja's compile steps): a kill
  // there is a compiler's, not the program's.
  // (DeepSpeed's just-in-time ops print "Emitting ninja build file" and "Building extension module"
  // even when nothing is compiled; "ninja: no work to do" or "Loading extension module" below them
  // says the step is over.)
  auto building = [](std::string_view line) {
    return has(line, "Building wheel for") || has(line, "setup.py bdist_wheel") || has(line, "Running setup.py install") ||
           has(line, "/nvcc ") || has(line, "Building editable for") || has(line, "Building CXX object") ||
           has(line, "Building CUDA object");
  };
  // (pip's "... done", "Successfully installed" also end a build.)
  auto built = [](std::string_view line) {
    return has(line, "ninja: no work to do") || has(line, "Loading extension module") || has(line, "Time to load") ||
           has(line, "Successfully installed") || has(line, "Successfully built") || has(line, "Created wheel for") ||
           (has(line, "Building wheel for") && has(line, "... done"));
  };
  if (capturing(event.message)) return "cuda_graph_capture";
  if (loading(event.message)) return "model_loading";
  if (building(event.message)) return "building_package";
  // The capture's progress bar or error line sits right above the failure; so does the loading bar
  // (the nearest of them decides).
  constexpr size_t kNear = 12;
  const size_t first = lines_above.size() > kNear ? lines_above.size() - kNear : 0;
  bool build_over = false;
  for (size_t i = lines_above.size(); i-- > first;) {
    if (capturing(lines_above[i])) return "cuda_graph_capture";
    if (loading(lines_above[i])) return "model_loading";
    build_over = build_over || built(lines_above[i]);
    if (!build_over && building(lines_above[i])) return "building_package";
  }
  return "";
}

}  // namespace oomdoc
