// One out-of-memory error (or memory report) found in a log, with every number the message prints.
// Quantity names follow the oom-messages corpus vocabulary (requested, total, free, process,
// allocated, reserved_total, reserved_unallocated, private_pools, active, mps_allocated, ...) and are
// emitted in JSON as <name>_bytes / <name>_unit / <name>_text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/units.h"

namespace oomdoc {

struct OtherProcess {
  std::optional<uint64_t> pid;   // null when the printed pid does not fit in 64 bits
  Quantity memory;
};

// A non-byte field a message carries: a device string, a status name, a shape, a token count...
using FieldValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;

// Whether field `name` says where one print's parts were (the line of the allocator warning, its
// stats block, the replica reports, the kernel's report), not what failed: two prints of one
// failure in a retry loop differ there only.
bool names_a_line(std::string_view name);

struct TracebackFrame {
  std::string file;
  std::optional<uint64_t> line;   // null when the printed line number does not fit in 64 bits
  std::string function;
  std::string code;   // the source line Python printed under the frame, if any
};

struct Traceback {
  std::vector<TracebackFrame> frames;          // outermost first, as Python prints them
  std::optional<TracebackFrame> innermost_user_frame;   // last frame outside site-packages / stdlib
  std::string operation;   // backward, optimizer_step, forward, generate, evaluation, model_loading, ...
};

struct OomEvent {
  std::string framework;        // pytorch, pytorch-mps, pytorch-rocm, pytorch-xpu, pytorch-npu, vllm,
                                // tensorflow, jax, llama.cpp, sglang, ollama, cuda, cublas, cudnn, ...
  std::string format;           // message format tag (corpus vocabulary), e.g. pytorch_new
  uint64_t line = 0;            // 1-based line of the message's first line
  uint64_t end_line = 0;        // last line the message spans
  std::optional<int64_t> device;
  std::optional<int64_t> rank;  // from [rankN]: / (VllmWorker rank=N ...) prefixes or the message
  bool is_error = true;         // false for informational lines and non-fatal warnings
  std::string message;          // the message as found, lines joined, prefixes stripped

  // Byte quantities by name, in the order the message prints them.
  std::vector<std::pair<std::string, Quantity>> quantities;
  std::vector<OtherProcess> other_processes;
  // Everything else by name (backend, device_kind, hint, status, shape, max_model_len, ...).
  std::vector<std::pair<std::string, FieldValue>> fields;

  std::optional<Traceback> traceback;

  // The same message printed again, word for word (a retry loop, a message logged then raised):
  // how many times in all, and the line of the last print (0 when printed once).
  uint64_t repeats = 1;
  uint64_t last_repeat_line = 0;

  const Quantity* quantity(std::string_view name) const;
  std::optional<uint64_t> bytes(std::string_view name) const;
  const FieldValue* field(std::string_view name) const;
  std::optional<int64_t> int_field(std::string_view name) const;
  std::optional<std::string> string_field(std::string_view name) const;

  void set_quantity(std::string name, Quantity q);
  void set_field(std::string name, FieldValue value);
};

}  // namespace oomdoc
