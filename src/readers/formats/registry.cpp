#include "readers/formats/message_format.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <cctype>
#include <functional>

namespace oomdoc {

MessageWindow MessageWindow::from_lines(std::vector<std::string> lines) {
  MessageWindow window;
  window.lines = std::move(lines);
  size_t bytes = 0;
  for (const std::string& line : window.lines) bytes += line.size() + 1;
  window.flat.reserve(bytes);
  window.joined.reserve(std::min<size_t>(bytes, kJoinedBytes + 1024));
  window.line_starts.reserve(window.lines.size());
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
    // Runs of other characters are copied whole; each run of whitespace becomes one space (none
    // at the start). (A byte at a time, this loop was a sixth of a scan of dense non-message hits.)
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; };
    for (size_t at = 0; at < line.size();) {
      size_t run_end = at;
      while (run_end < line.size() && !space(line[run_end])) ++run_end;
      window.joined.append(line, at, run_end - at);
      if (run_end == line.size()) break;
      if (!window.joined.empty() && window.joined.back() != ' ') window.joined += ' ';
      at = run_end;
      while (at < line.size() && space(line[at])) ++at;
    }
  }
  return window;
}

size_t MessageWindow::joined_line_of(size_t offset) const {
  auto it = std::upper_bound(joined_starts.begin(), joined_starts.end(), offset);
  return it == joined_starts.begin() ? 0 : static_cast<size_t>(it - joined_starts.begin()) - 1;
}

namespace {

// Every format's triggers, once each, sorted (a trigger's id is its index).
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

// The triggers by their first byte, each with its first 8 bytes as a word (most places a trigger's
// first byte occurs are ruled out by one compare), and the longest trigger.
struct TriggerIndex {
  struct Entry {
    size_t id;
    uint64_t head;   // the trigger's first bytes, up to 8, little end first
    uint64_t mask;   // which bytes of `head` count
  };
  std::array<std::vector<Entry>, 256> by_first;
  // The triggers' first two bytes, as a 65,536-bit set: most places in a line start no trigger's
  // pair, and one bit test rules them out before the bucket is read.
  std::array<uint64_t, 1024> pairs{};
  size_t longest = 0;
  bool has_pair(unsigned char a, unsigned char b) const {
    const unsigned bit = (static_cast<unsigned>(a) << 8) | b;
    return (pairs[bit >> 6] >> (bit & 63)) & 1;
  }
};

// Up to 8 bytes of `text` from `at` as a word (missing bytes are 0).
uint64_t word_at(std::string_view text, size_t at) {
  uint64_t w = 0;
  const size_t n = std::min<size_t>(8, text.size() - at);
  for (size_t i = 0; i < n; ++i) w |= static_cast<uint64_t>(static_cast<unsigned char>(text[at + i])) << (8 * i);
  return w;
}

const TriggerIndex& trigger_index() {
  static const TriggerIndex index = [] {
    TriggerIndex out;
    const auto& triggers = all_triggers();
    for (size_t id = 0; id < triggers.size(); ++id) {
      const std::string& t = triggers[id];
      const size_t n = std::min<size_t>(8, t.size());
      const uint64_t mask = n == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * n)) - 1;
      out.by_first[static_cast<unsigned char>(t[0])].push_back({id, word_at(t, 0), mask});
      out.longest = std::max(out.longest, t.size());
      // (A one-byte trigger would pair with any byte.)
      for (unsigned second = 0; second < 256; ++second) {
        if (t.size() >= 2 && second != static_cast<unsigned char>(t[1])) continue;
        const unsigned bit = (static_cast<unsigned>(static_cast<unsigned char>(t[0])) << 8) | second;
        out.pairs[bit >> 6] |= uint64_t{1} << (bit & 63);
      }
    }
    return out;
  }();
  return index;
}

// Calls `on_found(id)` for each place a trigger starts in `text` before offset `limit`, until it
// returns true: one pass that compares, at each byte, only the triggers beginning with it. (A find
// per trigger read a 16 KiB cut line once per trigger: a line of nothing but "memory memory ..."
// took seconds.)
template <typename OnFound>
bool for_each_trigger(std::string_view text, size_t limit, OnFound on_found) {
  const TriggerIndex& index = trigger_index();
  const auto& triggers = all_triggers();
  limit = std::min(limit, text.size());
  for (size_t at = 0; at < limit; ++at) {
    if (at + 1 < text.size() &&
        !index.has_pair(static_cast<unsigned char>(text[at]), static_cast<unsigned char>(text[at + 1]))) {
      continue;
    }
    const auto& bucket = index.by_first[static_cast<unsigned char>(text[at])];
    if (bucket.empty()) continue;
    uint64_t word = 0;
    if (at + 8 <= text.size()) {
      std::memcpy(&word, text.data() + at, 8);
      if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
    } else {
      word = word_at(text, at);
    }
    for (const auto& e : bucket) {
      if ((word & e.mask) != e.head) continue;
      const std::string& t = triggers[e.id];
      if (t.size() > 8 && text.substr(at, t.size()) != t) continue;
      if (on_found(e.id)) return true;
    }
  }
  return false;
}

}  // namespace

bool MessageWindow::first_line_triggers(const MessageFormat& format) const {
  if (lines.empty()) return false;
  // Each format's trigger ids, looked up once (the scanner asks this of every format per window).
  static const std::vector<std::vector<size_t>> ids_of = [] {
    std::vector<std::vector<size_t>> out;
    const auto& triggers = all_triggers();
    for (const MessageFormat& f : message_formats()) {
      out.emplace_back();
      for (const std::string& t : f.triggers) {
        out.back().push_back(static_cast<size_t>(std::lower_bound(triggers.begin(), triggers.end(), t) - triggers.begin()));
      }
    }
    return out;
  }();
  const auto& formats = message_formats();
  const std::less<const MessageFormat*> before;
  if (before(&format, formats.data()) || !before(&format, formats.data() + formats.size())) {
    // (A format built elsewhere, a test's: its triggers one by one.)
    return std::any_of(format.triggers.begin(), format.triggers.end(), [&](const std::string& t) { return first_line_holds(t); });
  }
  const std::vector<bool>& found = first_line_trigger_set();
  const auto& ids = ids_of[static_cast<size_t>(&format - formats.data())];
  return std::any_of(ids.begin(), ids.end(), [&](size_t id) { return found[id]; });
}

const std::vector<bool>& MessageWindow::first_line_trigger_set() const {
  if (first_line_trigger_ids.empty()) {
    first_line_trigger_ids.assign(all_triggers().size(), false);
    auto mark = [&](size_t id) {
      first_line_trigger_ids[id] = true;
      return false;
    };
    for_each_trigger(lines[0], lines[0].size(), mark);
    // A trigger that starts on line 0 begins before line 1's offset in `joined`.
    if (joined_starts.size() >= 2) for_each_trigger(joined, joined_starts[1], mark);
  }
  return first_line_trigger_ids;
}

bool MessageWindow::first_line_holds(std::string_view trigger) const {
  if (lines.empty() || trigger.empty()) return false;
  const auto& triggers = all_triggers();
  const auto it = std::lower_bound(triggers.begin(), triggers.end(), trigger);
  if (it == triggers.end() || *it != trigger) {
    // (Not a format's trigger: looked for directly.)
    if (lines[0].find(trigger) != std::string::npos) return true;
    if (joined_starts.size() < 2) return false;
    const size_t reach = std::min(joined.size(), joined_starts[1] + trigger.size() - 1);
    return std::string_view(joined).substr(0, reach).find(trigger) != std::string_view::npos;
  }
  return first_line_trigger_set()[static_cast<size_t>(it - triggers.begin())];
}

bool holds_trigger(std::string_view text) {
  return for_each_trigger(text, text.size(), [](size_t) { return true; });
}

bool trigger_crosses(std::string_view text, size_t seam) {
  for (const std::string& trigger : all_triggers()) {
    // Only a trigger starting within its length before the seam can cross it.
    const size_t from = seam >= trigger.size() ? seam - trigger.size() + 1 : 0;
    if (from >= text.size()) continue;
    if (text.substr(from, seam - from + trigger.size() - 1).find(trigger) != std::string_view::npos) return true;
  }
  return false;
}

bool ends_with_trigger_start(std::string_view line) {
  // Triggers by their first byte, and the longest: only the line's last bytes that begin one
  // are compared (every candidate line of a log passes here).
  const TriggerIndex& index = trigger_index();
  const auto& triggers = all_triggers();
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.remove_suffix(1);
  const size_t from = line.size() > index.longest ? line.size() - index.longest : 0;
  for (size_t at = from; at < line.size(); ++at) {
    const size_t n = line.size() - at;  // how much of a trigger the line would end with
    const std::string_view tail = line.substr(at);
    for (const auto& e : index.by_first[static_cast<unsigned char>(line[at])]) {
      const std::string_view trigger = triggers[e.id];
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

size_t hard_wrapped_run(const std::vector<std::string>& lines, size_t continuable, size_t first_width) {
  // Narrower than this, a run of equal lengths is more likely chance than a terminal's width.
  constexpr size_t kMinWidth = 16;
  const size_t n = std::min(continuable, lines.size());
  if (n < 2) return 0;
  auto blank = [](const std::string& l) { return l.find_first_not_of(" \t") == std::string::npos; };
  // Two equal lines after a shorter first give the width; else the width the first line was printed
  // at, its prefix included, when the scanner knows it.
  size_t width = lines[0].size();
  if (n >= 3 && lines[1].size() > width && lines[1].size() == lines[2].size()) {
    width = lines[1].size();
  } else if (first_width > width) {
    width = first_width;
  }
  if (width < kMinWidth || blank(lines[0])) return 0;
  size_t k = 1;
  while (k < n && (k == 1 || lines[k - 1].size() == width) && !blank(lines[k])) ++k;
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

bool set_printed_bytes(OomEvent& event, const std::string& name, std::string_view digits, std::string_view printed) {
  if (digits.data() == nullptr) return false;   // an optional group that did not match
  auto q = parse_printed_size(std::string(digits) + " bytes", LabelMeaning::kBinary);
  if (!q) return false;
  q->text = std::string(printed.data() != nullptr ? printed : digits);   // the text as printed
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
    add_paddle_formats(all);
    add_tensorrt_formats(all);
    add_other_formats(all);
    add_cuda_library_formats(all);
    return all;
  }();
  return formats;
}

}  // namespace oomdoc
