#include "readers/formats/message_format.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace oomdoc {

MessageWindow MessageWindow::from_lines(std::vector<std::string> lines) {
  MessageWindow window;
  window.lines = std::move(lines);
  for (size_t i = 0; i < window.lines.size(); ++i) {
    if (i > 0) window.flat += '\n';
    window.line_starts.push_back(window.flat.size());
    window.flat += window.lines[i];
  }
  for (size_t i = 0; i < window.lines.size() && window.joined.size() < kJoinedBytes; ++i) {
    const std::string& line = window.lines[i];
    const bool blank = line.find_first_not_of(" \t\r\f\v") == std::string::npos;
    if (i > 0 && (blank || line.starts_with("Traceback (most recent call last)"))) break;
    if (i > 0 && !window.joined.empty() && window.joined.back() != ' ') window.joined += ' ';
    window.joined_starts.push_back(window.joined.size());
    for (char c : line) {
      const bool space = c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
      if (space && (window.joined.empty() || window.joined.back() == ' ')) continue;
      window.joined += space ? ' ' : c;
    }
  }
  return window;
}

size_t MessageWindow::joined_line_of(size_t offset) const {
  auto it = std::upper_bound(joined_starts.begin(), joined_starts.end(), offset);
  return it == joined_starts.begin() ? 0 : static_cast<size_t>(it - joined_starts.begin()) - 1;
}

bool MessageWindow::first_line_holds(std::string_view trigger) const {
  if (lines.empty()) return false;
  if (lines[0].find(trigger) != std::string::npos) return true;
  if (joined_starts.size() < 2 || trigger.empty()) return false;
  // A trigger that starts on line 0 begins before line 1's offset in `joined`.
  const size_t reach = std::min(joined.size(), joined_starts[1] + trigger.size() - 1);
  return std::string_view(joined).substr(0, reach).find(trigger) != std::string_view::npos;
}

namespace {

// Every format's triggers, once each.
const std::vector<std::string>& all_triggers() {
  static const std::vector<std::string> triggers = [] {
    std::vector<std::string> out;
    for (const MessageFormat& format : message_formats()) out.insert(out.end(), format.triggers.begin(), format.triggers.end());
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }();
  return triggers;
}

}  // namespace

bool trigger_crosses(std::string_view text, size_t seam) {
  for (const std::string& trigger : all_triggers()) {
    const size_t from = seam >= trigger.size() ? seam - trigger.size() + 1 : 0;
    const size_t at = text.find(trigger, from);
    if (at != std::string_view::npos && at < seam) return true;
  }
  return false;
}

bool ends_with_trigger_start(std::string_view line) {
  // Triggers by their first byte, and the longest: only the line's last bytes that begin one
  // are compared (every candidate line of a log passes here).
  struct Index {
    std::array<std::vector<std::string_view>, 256> by_first;
    size_t longest = 0;
  };
  static const Index index = [] {
    Index out;
    for (const std::string& trigger : all_triggers()) {
      out.by_first[static_cast<unsigned char>(trigger[0])].push_back(trigger);
      out.longest = std::max(out.longest, trigger.size());
    }
    return out;
  }();
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.remove_suffix(1);
  const size_t from = line.size() > index.longest ? line.size() - index.longest : 0;
  for (size_t at = from; at < line.size(); ++at) {
    const size_t n = line.size() - at;  // how much of a trigger the line would end with
    const std::string_view tail = line.substr(at);
    for (std::string_view trigger : index.by_first[static_cast<unsigned char>(line[at])]) {
      if (n >= trigger.size() || trigger.substr(0, n) != tail) continue;
      const bool cut_at_space = trigger[n] == ' ';
      // Cut inside a word: only a word's trigger ("ou" of "out of memory"), and a single letter
      // only as a word's start ("CUDA o"); short numbers ("137") and word ends are too common.
      const bool letter = std::isalpha(static_cast<unsigned char>(trigger[0])) != 0;
      if (cut_at_space || (letter && (n >= 2 || at == 0 || line[at - 1] == ' '))) return true;
    }
  }
  return false;
}

size_t hard_wrapped_run(const std::vector<std::string>& lines) {
  // Narrower than this, a run of equal lengths is more likely chance than a terminal's width.
  constexpr size_t kMinWidth = 16;
  if (lines.size() < 2) return 0;
  auto blank = [](const std::string& l) { return l.find_first_not_of(" \t") == std::string::npos; };
  size_t width = lines[0].size();
  if (lines.size() >= 3 && lines[1].size() > width && lines[1].size() == lines[2].size()) width = lines[1].size();
  if (width < kMinWidth || blank(lines[0])) return 0;
  size_t k = 1;
  while (k < lines.size() && (k == 1 || lines[k - 1].size() == width) && !blank(lines[k])) ++k;
  return k >= 2 ? k : 0;
}

std::vector<std::string> glue_hard_wrapped(const std::vector<std::string>& lines, size_t run) {
  std::vector<std::string> out;
  out.emplace_back();
  for (size_t i = 0; i < run && i < lines.size(); ++i) out[0] += lines[i];
  out.insert(out.end(), lines.begin() + static_cast<std::ptrdiff_t>(std::min(run, lines.size())), lines.end());
  return out;
}

size_t MessageWindow::line_of(size_t offset) const {
  auto it = std::upper_bound(line_starts.begin(), line_starts.end(), offset);
  return it == line_starts.begin() ? 0 : static_cast<size_t>(it - line_starts.begin()) - 1;
}

size_t offset_in(const MessageWindow& window, std::string_view submatch) {
  return static_cast<size_t>(submatch.data() - window.flat.data());
}

size_t joined_offset_in(const MessageWindow& window, std::string_view submatch) {
  return static_cast<size_t>(submatch.data() - window.joined.data());
}

size_t lines_through(const MessageWindow& window, std::string_view match) {
  return window.line_of(offset_in(window, match) + (match.empty() ? 0 : match.size() - 1)) + 1;
}

FormatMatch new_match(const char* framework, const char* format, bool is_error) {
  FormatMatch m;
  m.event.framework = framework;
  m.event.format = format;
  m.event.is_error = is_error;
  return m;
}

std::optional<Quantity> parse_printed_size(std::string_view text, LabelMeaning meaning) {
  if (auto q = parse_quantity(text, meaning)) return q;
  return parse_quantity(text, meaning, /*decimal_comma=*/true);
}

bool set_printed_size(OomEvent& event, const std::string& name, std::string_view text, LabelMeaning meaning) {
  if (text.data() == nullptr) return false;   // an optional group that did not match
  auto q = parse_printed_size(text, meaning);
  if (!q) return false;
  event.set_quantity(name, *q);
  return true;
}

bool set_printed_bytes(OomEvent& event, const std::string& name, std::string_view digits) {
  if (digits.data() == nullptr) return false;   // an optional group that did not match
  return set_printed_size(event, name, std::string(digits) + " bytes");
}

const std::vector<MessageFormat>& message_formats() {
  // Order matters where two formats could claim one line: wrappers and specific texts come before
  // the generic "CUDA error: out of memory" family.
  static const std::vector<MessageFormat> formats = [] {
    std::vector<MessageFormat> all;
    add_vllm_formats(all);
    // Before PyTorch's: ggml's and Ollama's lines quote "CUDA error: out of memory" inside their
    // own wording ("llama runner process has terminated: CUDA error: out of memory").
    add_ggml_formats(all);
    add_metal_formats(all);
    add_pytorch_formats(all);
    add_tensorflow_formats(all);
    add_xla_formats(all);
    add_paddle_formats(all);
    add_tensorrt_formats(all);
    add_other_formats(all);
    add_cuda_library_formats(all);
    return all;
  }();
  return formats;
}

}  // namespace oomdoc
