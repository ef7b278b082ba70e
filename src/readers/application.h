// Which program a failing run belongs to, when the log says so: vLLM, ComfyUI, AUTOMATIC1111's
// stable-diffusion-webui. The fixes are then written in that program's settings (vLLM flags,
// ComfyUI's launch flags, the webui's COMMANDLINE_ARGS) instead of a training recipe. This file is
// the one place that knows the markers; explain's diagnosis reads the result ("application").
#pragma once

#include <string>
#include <vector>

#include "model/oom_event.h"

namespace oomdoc {

inline constexpr const char* kAppVllm = "vllm";
inline constexpr const char* kAppComfyUi = "comfyui";
inline constexpr const char* kAppSdWebui = "sd-webui";

// From the traceback's frames (their files): "" when they name none.
std::string application_from_frames(const Traceback& traceback);

// From the event's own text, the cleaned log lines just above it (oldest first; only the last
// kApplicationContextLines are read, so that a long log's earlier phase does not decide) and the
// few lines right after it (the webui's "Stable diffusion model failed to load"); the traceback's
// frames come first. "" when nothing names a program.
std::string detect_application(const std::vector<std::string>& lines_above, const OomEvent& event,
                               const std::vector<std::string>& lines_after = {});

inline constexpr size_t kApplicationContextLines = 60;

// What the program was doing when the lines just above say so and no traceback does: vLLM's
// "Capturing CUDA graph shapes" progress bar or "Error executing method 'capture_model'" give
// "cuda_graph_capture" (the traceback's vocabulary, readers/traceback.h). "" otherwise.
std::string operation_from_lines(const std::vector<std::string>& lines_above, const OomEvent& event);

}  // namespace oomdoc
