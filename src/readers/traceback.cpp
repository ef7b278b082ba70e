#include "readers/traceback.h"

#include "core/text.h"
#include "readers/formats/regex_search.h"

namespace oomdoc {
namespace {

bool is_library_file(const std::string& file) {
  for (const char* marker : {"site-packages/", "dist-packages/", "/lib/python", "<frozen", "\\lib\\",
                             "site-packages\\", "/torch/", "/transformers/", "/accelerate/", "/vllm/",
                             "/deepspeed/", "/peft/", "/trl/"}) {
    if (file.find(marker) != std::string::npos) return true;
  }
  return false;
}


}  // namespace

// `x.cuda(...)`, or `x.to(...)` whose argument is not a dtype: `.to(qdtype)` or
// `.to(torch.float16)` casts on the same device.
bool moves_to_device(std::string_view code) {
  if (contains(code, ".cuda(")) return true;
  for (size_t at = code.find(".to("); at != std::string_view::npos; at = code.find(".to(", at + 4)) {
    const size_t close = code.find(')', at);
    const std::string arg = to_lower(code.substr(at + 4, close == std::string_view::npos ? std::string_view::npos : close - at - 4));
    bool dtype = contains(arg, "dtype") || contains(arg, "memory_format");
    for (std::string_view name : {"torch.float", "torch.bfloat", "torch.half", "torch.double", "torch.int", "torch.uint",
                                  "torch.bool", "torch.long", "torch.short", "torch.complex", "torch.cfloat",
                                  "torch.cdouble"}) {
      dtype = dtype || contains(arg, name);
    }
    if (!dtype || contains(arg, "device") || contains(arg, "cuda")) return true;
  }
  return false;
}

std::string classify_operation(const std::vector<TracebackFrame>& frames) {
  // Innermost first: the nearest recognisable step wins, except that loading and evaluation
  // context anywhere in the stack explains the whole failure.
  for (const auto& f : frames) {
    if (contains(f.function, "from_pretrained") || contains(f.function, "load_state_dict") ||
        contains(f.function, "load_model") || contains(f.function, "load_weights") ||
        contains(f.code, "from_pretrained(") || contains(f.code, "load_state_dict(")) {
      return "model_loading";
    }
  }
  for (const auto& f : frames) {
    // DistributedDataParallel allocates its gradient buckets while it wraps the model
    // (torch/nn/parallel/distributed.py: _ddp_init_helper -> dist.Reducer).
    if (f.function == "_ddp_init_helper" || contains(f.code, "dist.Reducer(") ||
        (f.function == "__init__" && (contains(f.file, "parallel/distributed.py") || contains(f.file, "parallel\\distributed.py")))) {
      return "ddp_setup";
    }
  }
  for (const auto& f : frames) {
    // vLLM's capture_model/_capture_cudagraphs (V0 model_runner, V1 gpu_model_runner), and
    // PyTorch's own torch.cuda.graph context (torch/cuda/graphs.py: capture_begin/capture_end)
    // under any caller.
    if (f.function == "capture_model" || f.function == "_capture_cudagraphs" ||
        (contains(f.function, "capture") &&
         (contains(f.file, "cuda_graph") || contains(f.function, "graph") || contains(f.file, "cuda/graphs.py") ||
          contains(f.file, "cuda\\graphs.py"))) ||
        contains(f.code, "torch.cuda.graph(")) {
      return "cuda_graph_capture";
    }
  }
  for (const auto& f : frames) {
    // (`model.generate(`, and a program's own `self._forward_generate(` or `sample_generate(`.)
    if (contains(f.function, "generate") || contains(f.code, "generate(")) return "generation";
  }
  for (const auto& f : frames) {
    if (contains(f.function, "evaluat") || contains(f.function, "prediction_step") ||
        contains(f.function, "validation") || contains(f.function, "eval_loop") || contains(f.code, "evaluate(")) {
      return "evaluation";
    }
  }
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    const auto& f = *it;
    if (contains(f.code, ".backward(") || contains(f.function, "backward") || contains(f.code, "accelerator.backward(")) {
      return "backward";
    }
    if (contains(f.code, "optimizer.step(") || (contains(f.code, ".step()") && contains(f.file, "optim")) ||
        (f.function == "step" && contains(f.file, "optim"))) {
      return "optimizer_step";
    }
    if (moves_to_device(f.code)) return "moving_to_device";
    if (f.function == "forward" || contains(f.code, "model(") || contains(f.function, "_call_impl")) return "forward";
  }
  return "";
}

namespace {

// `line` with every byte that is not part of valid UTF-8 replaced by U+FFFD: a Windows log in
// cp1252 ("C:\\Users\\Jos<0xE9>\\...") keeps its frames (RE2 reads UTF-8 and skips a line with an
// invalid byte), and what is printed or written as JSON stays valid UTF-8.
std::string valid_utf8(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  size_t i = 0;
  while (i < line.size()) {
    const auto c = static_cast<unsigned char>(line[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 && c >= 0xC2 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E && c <= 0xF4 ? 4 : 0;
    bool ok = len > 0 && i + len <= line.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(line[i + k]) & 0xC0) == 0x80;
    if (ok && len == 3) {
      const auto c1 = static_cast<unsigned char>(line[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);   // overlong, surrogate
    } else if (ok && len == 4) {
      const auto c1 = static_cast<unsigned char>(line[i + 1]);
      ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);   // overlong, above U+10FFFF
    }
    if (ok) {
      out.append(line.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// IPython names a frame's function with its class and arguments ("Module._call_impl(self, *args,
// **kwargs)", "evaluate(model)"): the bare name, as Python's own traceback prints it ("_call_impl"),
// which is what the operation is told from; "<module>" and "<cell line: 2>" stay as they are.
std::string bare_function(std::string_view name) {
  if (name.starts_with('<')) return std::string(name.substr(0, name.find('>') + 1));
  name = name.substr(0, name.find('('));
  if (const size_t dot = name.rfind('.'); dot != std::string_view::npos) name.remove_prefix(dot + 1);
  while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
  return std::string(name);
}

// A frame's first line as IPython (Jupyter) prints it, its line number when given there:
//  - "Cell In[12], line 3" (IPython 8; ", in f(x)" inside a function defined in the cell),
//    "Input In [12], in <cell line: 3>()" (IPython 7.3x);
//  - "File /home/u/x.py:40, in evaluate(model)" (IPython 8), "/home/u/x.py in evaluate(model)" and
//    "<ipython-input-5-9a8b7c6d> in <module>" (IPython 7).
std::optional<TracebackFrame> ipython_frame(const std::string& line) {
  static const RE2 cell(R"(^((?:Cell|Input) In\s*\[\d+\])(?:, line (\d+))?(?:, in (.+?))?\s*$)");
  static const RE2 file(R"(^File (.+):(\d+), in (.+?)\s*$)");
  static const RE2 ipython7(R"(^(<ipython-input-[^>]*>|(?:/|~|[A-Za-z]:\\)\S*\.py) in (.+?)\s*$)");
  TracebackFrame frame;
  if (auto g = regex_search(cell, line)) {
    frame.file = std::string((*g)[1]);
    if (matched((*g)[2])) frame.line = parse_decimal<uint64_t>((*g)[2]);
    frame.function = matched((*g)[3]) ? bare_function((*g)[3]) : "<module>";
  } else if (auto f = regex_search(file, line)) {
    frame.file = std::string((*f)[1]);
    frame.line = parse_decimal<uint64_t>((*f)[2]);
    frame.function = bare_function((*f)[3]);
  } else if (auto o = regex_search(ipython7, line)) {
    frame.file = std::string((*o)[1]);
    frame.function = bare_function((*o)[2]);
  } else {
    return std::nullopt;
  }
  return frame;
}

// Rich's boxed traceback (rich.traceback.install(), used by many training scripts):
//   ╭──── Traceback (most recent call last) ────╮
//   │ /home/u/train.py:40 in evaluate            │
//   │   39 │   │   batch = to_device(batch)      │
//   │ ❱ 40 │   │   outputs = model(**batch)      │
//   ╰────────────────────────────────────────────╯
// A long path folds over rows. The frames from the box, and the row that closes it; nullopt when
// `header` opens no box.
constexpr std::string_view kBoxSide = "\u2502";      // │
constexpr std::string_view kBoxTopLeft = "\u256d";   // ╭
constexpr std::string_view kBoxBottomLeft = "\u2570";// ╰
constexpr std::string_view kRichArrow = "\u2771";    // ❱

// A row's content between the box's sides; `full` tells whether it reaches the right side (Rich
// keeps one space of padding there), as a row folded in the middle of a word does, and
// `lead_space` whether it starts with a space of its own past the left padding (a row folded just
// before a space keeps it).
std::string_view box_content(std::string_view row, bool* full = nullptr, bool* lead_space = nullptr) {
  if (full != nullptr) *full = false;
  if (lead_space != nullptr) *lead_space = false;
  size_t start = row.find_first_not_of(' ');
  if (start == std::string_view::npos || row.substr(start, kBoxSide.size()) != kBoxSide) return {};
  row.remove_prefix(start + kBoxSide.size());
  if (lead_space != nullptr) *lead_space = row.starts_with("  ");
  while (!row.empty() && row.back() == ' ') row.remove_suffix(1);
  if (row.size() >= kBoxSide.size() && row.substr(row.size() - kBoxSide.size()) == kBoxSide) {
    row.remove_suffix(kBoxSide.size());
    if (full != nullptr) *full = row.size() >= 2 && row.back() == ' ' && row[row.size() - 2] != ' ';
  }
  while (!row.empty() && row.front() == ' ') row.remove_prefix(1);
  while (!row.empty() && row.back() == ' ') row.remove_suffix(1);
  return row;
}

struct RichFrames {
  std::vector<TracebackFrame> frames;
  size_t closing_row = 0;
};

std::optional<RichFrames> rich_frames(const std::vector<std::string>& lines, size_t header) {
  if (lines[header].find(kBoxTopLeft) == std::string::npos) return std::nullopt;
  // (Rich drops the space it wraps at, so " in " may lose one side at a row's end.)
  static const RE2 location(R"(^(\S.*?):(\d+)(?: ?in(?: ?(\S+))?)?$)");
  static const RE2 code_row(R"(^(\S+ )?(\d+) \S+(?: (.*))?$)");
  RichFrames out;
  // A frame's location ("path:line in function") may fold over several rows: a row that fills the
  // box was cut there (mid-word: the next row goes on directly, with the space it starts with if
  // any); one that does not was wrapped at a space. Its rows are gathered until a blank row or the
  // code below it.
  std::string location_rows;
  auto end_location = [&] {
    if (auto g = regex_search(location, location_rows)) {
      TracebackFrame frame;
      frame.file = std::string((*g)[1]);
      frame.line = parse_decimal<uint64_t>((*g)[2]);
      if (matched((*g)[3])) frame.function = std::string((*g)[3]);
      out.frames.push_back(std::move(frame));
    }
    location_rows.clear();
  };
  bool last_row_full = false;
  for (size_t i = header + 1; i < lines.size(); ++i) {
    // The outer box's bottom row starts with ╰; a show_locals table's own ╰ sits inside a │ row.
    if (const size_t start = lines[i].find_first_not_of(' ');
        start != std::string::npos && std::string_view(lines[i]).substr(start, kBoxBottomLeft.size()) == kBoxBottomLeft) {
      end_location();
      out.closing_row = i;
      return out;
    }
    bool full = false, lead_space = false;
    const std::string_view row = box_content(lines[i], &full, &lead_space);
    const bool code = row.starts_with(kRichArrow) || (!row.empty() && std::isdigit(static_cast<unsigned char>(row[0])) &&
                                                      regex_search(code_row, row) && row.find(kBoxSide) != std::string_view::npos);
    // A show_locals table is a box inside the box.
    const bool locals = row.starts_with(kBoxSide) || row.starts_with(kBoxTopLeft) || row.starts_with(kBoxBottomLeft);
    if (row.empty() || code || locals) {
      end_location();
    } else {
      if (!location_rows.empty() && (!last_row_full || lead_space)) location_rows += ' ';
      location_rows += row;
      last_row_full = full;
      continue;
    }
    // The row that ran is marked with ❱; rich draws indent guides (│) inside the code.
    if (out.frames.empty() || !row.starts_with(kRichArrow)) continue;
    if (auto c = regex_search(code_row, row); c && matched((*c)[3])) {
      // The indent guides before the code, then the code up to a box beside it (show_locals puts
      // its table to the right of the code in a wide box).
      std::string_view code_text = (*c)[3];
      while (true) {
        code_text.remove_prefix(std::min(code_text.size(), code_text.find_first_not_of(' ')));
        if (!code_text.starts_with(kBoxSide)) break;
        code_text.remove_prefix(kBoxSide.size());
      }
      for (std::string_view side : {kBoxSide, kBoxTopLeft, kBoxBottomLeft}) code_text = code_text.substr(0, code_text.find(side));
      while (!code_text.empty() && code_text.back() == ' ') code_text.remove_suffix(1);
      if (!code_text.empty()) out.frames.back().code = std::string(code_text);
    }
  }
  return std::nullopt;   // a box never closed: not a traceback to trust
}

bool has_high_bytes(std::string_view line) {
  for (char c : line) {
    if (static_cast<unsigned char>(c) >= 0x80) return true;
  }
  return false;
}

}  // namespace

std::optional<Traceback> parse_traceback(const std::vector<std::string>& raw_lines) {
  // Lines are made valid UTF-8 only when they hold a non-ASCII byte (rare: no copy otherwise).
  std::vector<std::string> cleaned;
  bool any_high = false;
  for (const auto& l : raw_lines) any_high = any_high || has_high_bytes(l);
  if (any_high) {
    cleaned.reserve(raw_lines.size());
    for (const auto& l : raw_lines) cleaned.push_back(has_high_bytes(l) ? valid_utf8(l) : l);
  }
  const std::vector<std::string>& lines = any_high ? cleaned : raw_lines;
  // Find the last traceback header; frames follow it until the exception line.
  size_t header = lines.size();
  for (size_t i = lines.size(); i-- > 0;) {
    if (lines[i].find("Traceback (most recent call last)") != std::string::npos) {
      header = i;
      break;
    }
  }
  Traceback tb;
  size_t last_frame_line = 0;
  if (header < lines.size()) {
    if (auto rich = rich_frames(lines, header)) {
      tb.frames = std::move(rich->frames);
      last_frame_line = rich->closing_row;
    }
  }
  // loguru (backtrace=True) marks the frame where the error was caught with "> " before "File".
  static const RE2 frame_re(R"re(^\s*(?:> )?File "([^"]+)", line (\d+), in (.+?)\s*$)re");
  // loguru's diagnose=True draws each variable of a frame's code under it ("    │    └ <method
  // 'backward' ...>"): part of the frame, however many there are.
  auto loguru_variable = [](const std::string& line) {
    const size_t start = line.find_first_not_of(' ');
    return start != std::string::npos && start > 0 &&
           (line.compare(start, kBoxSide.size(), kBoxSide) == 0 || line.compare(start, 3, "\u2514") == 0);
  };
  size_t first = tb.frames.empty() ? header + 1 : lines.size();
  if (header == lines.size()) {
    // A traceback pasted without its header (an issue quoting its last frames): the frames and
    // their indented code lines right above the exception line.
    first = lines.size();
    while (first > 0) {
      const std::string& l = lines[first - 1];
      const bool indented = !l.empty() && (l[0] == ' ' || l[0] == '\t');
      if (!indented && !regex_search(frame_re, l)) break;
      --first;
    }
  }
  // IPython's source lines under a frame: "     38 code", the one that ran marked "---> 40 code".
  static const RE2 numbered(R"(^\s*(-+>)?\s*(\d+)(?: (.*))?$)");
  for (size_t i = first; i < lines.size(); ++i) {
    // (IPython always prints the header: "OutOfMemoryError      Traceback (most recent call last)".)
    if (header < lines.size() && !regex_search(frame_re, lines[i])) {
      if (auto frame = ipython_frame(lines[i])) {
        size_t k = i + 1;
        for (; k < lines.size(); ++k) {
          auto n = regex_search(numbered, lines[k]);
          if (!n) break;
          if (!matched((*n)[1])) continue;
          if (!frame->line) frame->line = parse_decimal<uint64_t>((*n)[2]);
          if (matched((*n)[3])) {
            const std::string_view code = (*n)[3];
            const size_t start = code.find_first_not_of(" \t");
            if (start != std::string_view::npos) frame->code = std::string(code.substr(start));
          }
        }
        last_frame_line = k - 1;
        tb.frames.push_back(std::move(*frame));
        i = k - 1;
        continue;
      }
    }
    if (auto g = regex_search(frame_re, lines[i])) {
      last_frame_line = i;
      TracebackFrame frame;
      frame.file = std::string((*g)[1]);
      frame.line = parse_decimal<uint64_t>((*g)[2]);
      frame.function = std::string((*g)[3]);
      // The source line follows, indented, unless Python could not read the file.
      if (i + 1 < lines.size() && !regex_search(frame_re, lines[i + 1])) {
        std::string code = lines[i + 1];
        size_t start = code.find_first_not_of(" \t");
        if (start != std::string::npos && code.find("^^^") == std::string::npos) {
          frame.code = code.substr(start);
        }
      }
      tb.frames.push_back(std::move(frame));
      continue;
    }
    if (last_frame_line + 2 >= i && !tb.frames.empty() && loguru_variable(lines[i])) last_frame_line = i;
  }
  if (tb.frames.empty()) return std::nullopt;
  // The block must end right above the exception line, not be an older traceback.
  if (last_frame_line + 8 < lines.size()) return std::nullopt;
  for (auto it = tb.frames.rbegin(); it != tb.frames.rend(); ++it) {
    if (!is_library_file(it->file)) {
      tb.innermost_user_frame = *it;
      break;
    }
  }
  std::vector<TracebackFrame> innermost_first(tb.frames.rbegin(), tb.frames.rend());
  tb.operation = classify_operation(innermost_first);
  return tb;
}

}  // namespace oomdoc
