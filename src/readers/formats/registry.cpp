#include "readers/formats/message_format.h"

#include <algorithm>

namespace oomdoc {

MessageWindow MessageWindow::from_lines(std::vector<std::string> lines) {
  MessageWindow window;
  window.lines = std::move(lines);
  for (size_t i = 0; i < window.lines.size(); ++i) {
    if (i > 0) window.flat += '\n';
    window.line_starts.push_back(window.flat.size());
    window.flat += window.lines[i];
  }
  return window;
}

size_t MessageWindow::line_of(size_t offset) const {
  auto it = std::upper_bound(line_starts.begin(), line_starts.end(), offset);
  return it == line_starts.begin() ? 0 : static_cast<size_t>(it - line_starts.begin()) - 1;
}

size_t offset_in(const MessageWindow& window, std::string_view submatch) {
  return static_cast<size_t>(submatch.data() - window.flat.data());
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
    add_other_formats(all);
    add_cuda_library_formats(all);
    return all;
  }();
  return formats;
}

}  // namespace oomdoc
