// Which program a failing run belongs to, when the log says so: vLLM, SGLang, ComfyUI,
// AUTOMATIC1111's stable-diffusion-webui, Ollama, text-generation-inference. The fixes are then written in that program's settings
// (vLLM's and SGLang's flags, ComfyUI's launch flags, the webui's COMMANDLINE_ARGS) instead of a
// training recipe. This file is the one place that knows the markers (line prefixes, frames, the
// programs' own messages); explain's diagnosis reads the result ("application").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/oom_event.h"
#include "readers/log_line.h"

namespace oomdoc {

inline constexpr const char* kAppVllm = "vllm";
inline constexpr const char* kAppSglang = "sglang";
inline constexpr const char* kAppComfyUi = "comfyui";
inline constexpr const char* kAppSdWebui = "sd-webui";
inline constexpr const char* kAppOllama = "ollama";   // llama.cpp inside Ollama's runner
inline constexpr const char* kAppTgi = "tgi";         // Hugging Face text-generation-inference

// From the prefix the line cleaner took off a log line (readers/log_line.h): vLLM's process tags
// ("(VllmWorker TP0 pid=1)", "(Worker_TP2 pid=9)", "(EngineCore_DP0 pid=9)", "(APIServer pid=1)",
// "(RayWorkerWrapper pid=7, ip=...)") and vLLM's logging prefix ("INFO 05-01 12:00:00
// [gpu_worker.py:123] "). "" when the prefix names no program.
std::string application_from_prefix(const CleanLine& line);

// From the traceback's frames (their files): "" when they name none.
std::string application_from_frames(const Traceback& traceback);

// The cleaned lines around an event with, line by line, the program their prefix named
// (application_from_prefix; "" where none, or an empty list when the prefixes were not kept).
struct ContextLines {
  std::vector<std::string> text;
  std::vector<std::string> prefix_program;
  // Line by line, application_from_line's answer when the caller already has it (the log scanner
  // keeps it with each cleaned line: dense events share most of their lines above); empty: computed.
  std::vector<std::string> line_program;
};

// What one cleaned line names by itself: its prefix's program, else the programs' own messages in
// its words, else a stray frame line's file. "" when it names none.
std::string application_from_line(std::string_view text, const std::string& prefix_program);

// The one decision of which program failed. In order: the prefix of the event's own line (the
// process that printed it), the traceback's frames, the event's own text, then the lines just
// above it, nearest first (their prefix, their text, a stray frame line; only the last
// kApplicationContextLines, so that a long log's earlier phase does not decide), then the few
// lines right after it (the webui's "Stable diffusion model failed to load"). "" when nothing
// names a program.
std::string detect_application(const std::vector<std::string>& lines_above, const OomEvent& event,
                               const std::vector<std::string>& lines_after = {});
std::string detect_application(const ContextLines& above, const OomEvent& event, const ContextLines& after,
                               const std::string& event_prefix_program);

inline constexpr size_t kApplicationContextLines = 60;

// What the program was doing when the lines just above (or the message itself) say so and no
// traceback does: vLLM's "Capturing CUDA graph shapes" progress bar, "Error executing method
// 'capture_model'" or SGLang's "Capture cuda graph failed" give "cuda_graph_capture";
// transformers' "Loading checkpoint shards" progress bar gives "model_loading" (the traceback's
// vocabulary, readers/traceback.h). "" otherwise.
std::string operation_from_lines(const std::vector<std::string>& lines_above, const OomEvent& event);

// Where a vLLM server was when it ran out, from its own lines where the traceback does not say it:
// "sampler" (its dummy sampler run, in the profile or the warm-up: `sampling_metadata=dummy_metadata`
// among the frames' code),
// "serving" (the engine died while serving requests: MQEngineDeadError / EngineDeadError, or the
// OpenAI server's serving_chat/serving_completion reporting it), "" otherwise.
std::string vllm_phase_from_lines(const std::vector<std::string>& lines_above, const OomEvent& event);

}  // namespace oomdoc
