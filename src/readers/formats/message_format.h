// The contract between the log scanner and the per-framework message formats. Each framework's
// formats live in one file (pytorch.cpp, vllm.cpp, tensorflow.cpp, xla.cpp, ggml.cpp, metal.cpp,
// paddle.cpp, tensorrt.cpp, cuda_libraries.cpp, others.cpp) with their patterns and field mapping; registry.cpp lists them.
// Adding a framework's message = one matcher in its file + a line in registry.cpp + a test.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/units.h"
#include "model/oom_event.h"

namespace oomdoc {

struct MessageFormat;

// The cleaned candidate line and the lines after it (a message can wrap over several lines).
struct MessageWindow {
  std::vector<std::string> lines;       // lines[0] holds the anchor that triggered matching
  std::string flat;                     // lines joined by '\n'
  std::vector<size_t> line_starts;      // offset of each line in flat
  // The lines up to the first blank one (or a traceback's start), joined with one space, every run
  // of whitespace collapsed to one space, at most kJoinedBytes: a message a terminal or `fold`
  // wrapped, with or without the trailing spaces, reads as it was printed on one line.
  std::string joined;
  std::vector<size_t> joined_starts;    // offset of each line in joined (a prefix of `lines`)
  static constexpr size_t kJoinedBytes = 8 << 10;
  // The lines from lines[0] that may continue it cut at a fixed width (hard_wrapped_run): up to the
  // first after it that starts a logger's record (a level after a timestamp, a logging or glog
  // prefix), which no terminal's wrap does. A log of equal-width records ("skipping batch 12: CUDA out of memory")
  // was read twice per line, the second time glued into one 40-line "message".
  size_t continuable_lines = SIZE_MAX;
  // lines[0] as printed, its prefix included (0: as cleaned): the width a hard wrap cut it at.
  size_t first_line_width = 0;

  static MessageWindow from_lines(std::vector<std::string> lines);
  // Index of the line that holds flat offset `offset`.
  size_t line_of(size_t offset) const;
  // Index of the line that holds joined offset `offset`.
  size_t joined_line_of(size_t offset) const;
  // Whether `trigger` starts on lines[0], possibly running on into lines[1] (a wrapped message).
  bool first_line_holds(std::string_view trigger) const;
  // Whether any of `format`'s triggers starts on lines[0] (first_line_holds of each).
  bool first_line_triggers(const MessageFormat& format) const;
  // Which formats' triggers start on lines[0] (or run on from it), by id (the trigger's index in the
  // sorted list of every format's triggers): found in one pass on first use.
  const std::vector<bool>& first_line_trigger_set() const;
  mutable std::vector<bool> first_line_trigger_ids;
};

// Whether any format's trigger occurs in `text` (one pass over it).
bool holds_trigger(std::string_view text);

// Whether `line` ends with the start of a trigger, cut at one of its spaces ("... CUDA out of" then
// "memory. Tried ...") or, at a fixed width, inside a word ("... CUDA ou" then "t of memory."): the
// line may begin a wrapped message.
bool ends_with_trigger_start(std::string_view line);

// A message hard-wrapped at a fixed width (a terminal's columns, `fold -w 60`) is cut mid-word, so
// joining its lines with spaces reads "Tried t o allocate". Returns how many lines from lines[0]
// form such a run, to be glued back without spaces (0 when they do not look so): every line but
// the last of the run has the same width, the first may be shorter by the prefix cleaning took
// off ("[rank1]: "), and no line of the run is blank. Only the first `continuable` lines can be in
// the run (MessageWindow::continuable_lines). `first_width`: the first line as printed, with the
// prefix cleaning took off (a journald prefix on the first line only), when known.
size_t hard_wrapped_run(const std::vector<std::string>& lines, size_t continuable = SIZE_MAX, size_t first_width = 0);

// Whether a trigger in `text` starts before offset `seam` and ends after it: gluing two lines at
// `seam` made it whole.
bool trigger_crosses(std::string_view text, size_t seam);

// `lines` with the first `run` glued into one line (see hard_wrapped_run).
std::vector<std::string> glue_hard_wrapped(const std::vector<std::string>& lines, size_t run);
// MessageWindow::continuable_lines of the glued lines, `run` of them now one.
inline size_t continuable_after_glue(size_t continuable, size_t run) {
  return continuable == SIZE_MAX ? SIZE_MAX : continuable - std::min(continuable, run - 1);
}

struct FormatMatch {
  OomEvent event;        // line numbers are filled in by the scanner
  size_t lines_used = 1; // how many window lines the message spans
};

struct MessageFormat {
  std::string name;                       // format tag, e.g. "pytorch_new"
  // Cheap literal test on lines[0]; only then is `match` run.
  std::vector<std::string> triggers;
  std::function<std::optional<FormatMatch>(const MessageWindow&)> match;
};

// All formats, most specific first (the first that matches a candidate line wins).
const std::vector<MessageFormat>& message_formats();

// The allocator's "Stats:" block (tsl/framework/allocator.cc, AllocatorStats::DebugString), one
// "Name: value" per line in bytes, within a few lines of `from`: after the BFC dump's totals
// (TensorFlow, JAX) and after XLA's cudaMallocAsync failure. "Limit" (0: none), "InUse",
// "MaxInUse" and, in newer versions, "LargestFreeBlock" (0: not tracked) go into `e`'s
// in_use_chunks, memory_limit_bytes, max_in_use and largest_free_block where it has none. Returns
// the line after the block (`from` when there is none).
size_t read_allocator_stats(const MessageWindow& w, size_t from, OomEvent& e);

// Per-framework registration (one per file).
void add_pytorch_formats(std::vector<MessageFormat>& out);
void add_vllm_formats(std::vector<MessageFormat>& out);
void add_tensorflow_formats(std::vector<MessageFormat>& out);
void add_xla_formats(std::vector<MessageFormat>& out);
void add_ggml_formats(std::vector<MessageFormat>& out);
void add_metal_formats(std::vector<MessageFormat>& out);
void add_cuda_library_formats(std::vector<MessageFormat>& out);
void add_other_formats(std::vector<MessageFormat>& out);
void add_paddle_formats(std::vector<MessageFormat>& out);
void add_tensorrt_formats(std::vector<MessageFormat>& out);

// What llama.cpp printed about the run before it failed, from the cleaned lines above a llama.cpp
// event, nearest first, so its fixes can name values: the context (`llama_n_ctx`), the model's file
// type as llama-quantize names it (`llama_file_type`), the whole KV cache (`llama_kv_cache_bytes`).
void read_llama_settings(const std::vector<std::string>& lines_above, OomEvent& e);

// ---- helpers shared by the format files ----

// Regex fragment for a printed size: "12.50 MiB", "16160MiB", "0 bytes", "1.97G", "6727663616B".
// Decimal commas ("1900,00 MiB") are accepted; parse with parse_printed_size.
inline constexpr std::string_view kSizePattern =
    R"(\d+(?:[.,]\d+)?\s?(?:[kKMGTP]i?B|bytes|B|[KMGT])\b)";

// Parses a size captured with kSizePattern; handles the decimal comma some locales print.
std::optional<Quantity> parse_printed_size(std::string_view text,
                                           LabelMeaning meaning = LabelMeaning::kAsPrinted);

// Sets `event`'s quantity `name` from a size captured with kSizePattern. Returns false, and sets
// nothing, when the group did not match or parse_printed_size cannot read it (a 40-digit number,
// 19 decimals): a hostile line loses that figure, not the whole event.
bool set_printed_size(OomEvent& event, const std::string& name, std::string_view text,
                      LabelMeaning meaning = LabelMeaning::kAsPrinted);
// The same for an exact count of bytes printed as digits ("48736917632", from "... 48736917632
// bytes"): the one place a bare byte count becomes a quantity.
// (`printed`: the text as the message prints it, when it is not the digits alone: "6,532,939,776".)
bool set_printed_bytes(OomEvent& event, const std::string& name, std::string_view digits, std::string_view printed = {});

// Span of a regex submatch inside the window's flat text.
size_t offset_in(const MessageWindow& window, std::string_view submatch);

// Offset of a submatch of `window.joined`.
size_t joined_offset_in(const MessageWindow& window, std::string_view submatch);

// How many window lines a match spans, from lines[0] through the line where `match` ends.
size_t lines_through(const MessageWindow& window, std::string_view match);

// A match of `framework`'s message `format` (is_error false for informational lines).
FormatMatch new_match(const char* framework, const char* format, bool is_error = true);

}  // namespace oomdoc
