#include "readers/log_scanner.h"

#include <deque>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <bit>
#include <cstring>
#include <deque>
#include <memory>

#include "core/file_input.h"
#include "core/text.h"
#include "core/units.h"
#include "readers/application.h"
#include "readers/container_log.h"
#include "readers/formats/message_format.h"
#include "readers/formats/regex_search.h"
#include "readers/keyword_filter.h"
#include "readers/log_line.h"
#include "readers/traceback.h"

namespace oomdoc {
namespace {

constexpr size_t kWindowLines = 40;        // a message wraps over at most this many lines (PyTorch's
                                           // 2.x message folded at 40 columns takes 17)
constexpr size_t kWindowBytes = 32 << 10;
// Ranks failing at once interleave their wrapped lines: a message's window counts its own rank's
// lines, over at most this many ranks' lines in all.
constexpr size_t kMaxInterleavedRanks = 128;
constexpr size_t kMaxLine = 16 << 10;      // longer lines are cut around the keyword ...
constexpr size_t kLineLead = 2 << 10;      // ... keeping this much before it (a message's start)
constexpr size_t kBackContext = 32 << 10;  // traceback above an event
constexpr size_t kCompactAt = 512u << 10;  // buffered bytes before old text is dropped (stays in L2)
constexpr size_t kRecentEvents = 16;       // events looked back at for a repeat (ranks interleave)
constexpr size_t kJoinLines = 200;         // a second report of one failure follows within these lines
                                           // (after a traceback: JAX's and vLLM's run to dozens of lines)
// TensorFlow's allocator dump after its BFC warning: a line per bin and per chunk, and a pool of
// tens of GiB holds hundreds of thousands of chunks (only the warning's own rank's events lie
// between the two: nothing else is joined across it).
constexpr size_t kBfcDumpLines = 2000000;
constexpr size_t kBlockGapLines = 8;       // vLLM's accounting lines of one startup are this close

bool is_break(char c) { return c == '\n' || c == '\r'; }

// What kind of binary file `head` (the first bytes of the input) starts, or nullopt for text. A log
// may hold NUL runs (a file truncated under its writer, preallocated space) and stray bytes, so
// only a known magic number, or a head that is largely bytes no text uses, says binary: more than
// 30% of its non-NUL bytes are control bytes (other than tab, line breaks, form feed, backspace and
// ESC) or bytes that are not UTF-8.
std::optional<std::string> binary_kind(std::string_view head) {
  struct Magic { std::string_view bytes; const char* kind; };
  static constexpr Magic kMagics[] = {
      {"\x1f\x8b", "gzip"},       {"\x7f" "ELF", "ELF"},        {"PK\x03\x04", "zip"},
      {"\x28\xb5\x2f\xfd", "zstd"}, {"BZh", "bzip2"},          {"\xfd" "7zXZ", "xz"},
      {"7z\xbc\xaf\x27\x1c", "7z"}, {"\x89PNG", "PNG"},         {"\x04\x22\x4d\x18", "lz4"}};
  for (const Magic& m : kMagics) {
    // bzip2's "BZh" is followed by the block size digit and the block magic (1AY&SY), so a log
    // line starting "BZh" stays text.
    if (head.substr(0, m.bytes.size()) == m.bytes &&
        (m.bytes != "BZh" || (head.size() > 4 && head[3] >= '1' && head[3] <= '9' && head[4] == '1'))) {
      return std::string(m.kind);
    }
  }
  size_t text = 0, odd = 0, control = 0, breaks = 0;
  for (size_t i = 0; i < head.size(); ++i) {
    const auto c = static_cast<unsigned char>(head[i]);
    if (c == 0) continue;
    ++text;
    if (c < 0x20) {
      if (c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\b' && c != 0x1b) {
        ++odd;
        ++control;
      }
      if (c == '\n' || c == '\r') ++breaks;
    } else if (c == 0x7f) {
      ++odd;
      ++control;
    } else if (c >= 0x80) {
      // A UTF-8 sequence counts as text; any other high byte (Latin-1, random data) as odd.
      const size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
      size_t k = 1;
      while (len && k < len && i + k < head.size() && (static_cast<unsigned char>(head[i + k]) & 0xc0) == 0x80) ++k;
      if (len && (k == len || i + k == head.size())) {
        text += k - 1;
        i += k - 1;
      } else {
        ++odd;
      }
    }
  }
  // A log in a legacy code page (Windows' cp1251, Shift-JIS: what Python writes there when output
  // is redirected) is high bytes that are not UTF-8, but almost no control bytes, and it has lines;
  // data has control bytes throughout (about one in ten of random bytes).
  const bool legacy_code_page = control * 100 < text && breaks * 2000 >= text;
  if (text > 0 && odd * 10 > text * 3 && !legacy_code_page) return std::string("mostly non-text bytes");
  return std::nullopt;
}

// UTF-16 text (PowerShell's `>` writes UTF-16LE, Windows tools add a BOM): its byte order, or
// nullopt. Without a BOM, ASCII text in UTF-16 has a NUL in every other byte and almost none in the
// others (a log's NUL runs fill both).
enum class Utf16 { kLittle, kBig };
// With a BOM, a tenth of the units having a NUL high byte (some ASCII: a log's digits, spaces and
// keywords) is enough; bytes FF FE before UTF-8 garbage stay UTF-8.
std::optional<Utf16> utf16_order(std::string_view head) {
  const bool bom_le = head.size() >= 2 && head[0] == '\xff' && head[1] == '\xfe';
  const bool bom_be = head.size() >= 2 && head[0] == '\xfe' && head[1] == '\xff';
  const size_t n = std::min<size_t>(head.size(), 1024) & ~size_t{1};
  if ((bom_le || bom_be) && n <= 2) return bom_le ? Utf16::kLittle : Utf16::kBig;
  if (!bom_le && !bom_be && n < 16) return std::nullopt;
  size_t even_nul = 0, odd_nul = 0;
  for (size_t i = 0; i < n; i += 2) {
    even_nul += head[i] == '\0';
    odd_nul += head[i + 1] == '\0';
  }
  const size_t units = n / 2;
  if (bom_le) return odd_nul * 10 >= units ? std::optional(Utf16::kLittle) : std::nullopt;
  if (bom_be) return even_nul * 10 >= units ? std::optional(Utf16::kBig) : std::nullopt;
  if (odd_nul * 10 >= units * 9 && even_nul * 10 < units) return Utf16::kLittle;
  if (even_nul * 10 >= units * 9 && odd_nul * 10 < units) return Utf16::kBig;
  // Text in a non-Latin script (Chinese progress lines) has a NUL high byte only in its ASCII units:
  // a fiftieth of them (the line breaks) NUL on one side and under a tenth on the other, when every unit reads as text (ASCII
  // printable or whitespace, or a letter above U+00FF outside the surrogates), is UTF-16 too.
  // (A character such as U+4E00 has a NUL low byte; an emoji is a surrogate pair.)
  auto all_text_units = [&](bool big) {
    auto unit_at = [&](size_t i) {
      return (static_cast<unsigned>(static_cast<unsigned char>(head[big ? i : i + 1])) << 8) |
             static_cast<unsigned char>(head[big ? i + 1 : i]);
    };
    for (size_t i = 0; i < n; i += 2) {
      const unsigned unit = unit_at(i);
      if (unit >= 0xd800 && unit < 0xdc00) {   // a high surrogate: a low one must follow (or the sample ends)
        if (i + 2 < n && !(unit_at(i + 2) >= 0xdc00 && unit_at(i + 2) < 0xe000)) return false;
        i += 2;
        continue;
      }
      const bool ascii_text = unit < 0x100 && (unit == '\n' || unit == '\r' || unit == '\t' || (unit >= 0x20 && unit < 0x7f));
      const bool script = unit >= 0x0100 && (unit < 0xd800 || unit >= 0xe000) && unit != 0xfffe && unit != 0xffff;
      if (!ascii_text && !script) return false;
    }
    return true;
  };
  if (odd_nul * 50 >= units && even_nul * 10 < units && all_text_units(false)) return Utf16::kLittle;
  if (even_nul * 50 >= units && odd_nul * 10 < units && all_text_units(true)) return Utf16::kBig;
  return std::nullopt;
}

// Streams UTF-16 into UTF-8, keeping an odd byte or a lone high surrogate for the next piece; a
// BOM is dropped, an unpaired surrogate becomes U+FFFD. Logs are mostly ASCII: four ASCII units
// (8 bytes) are checked with one mask and copied at once, the rest goes unit by unit.
class Utf16Decoder {
 public:
  explicit Utf16Decoder(Utf16 order) : big_(order == Utf16::kBig) {}
  void decode(std::string_view in, std::string& out) {
    const size_t old = out.size();
    // At most 3 UTF-8 bytes per unit (4 per surrogate pair of 2 units), plus a pending U+FFFD.
    out.resize(old + (in.size() / 2 + 2) * 3);
    char* w = out.data() + old;
    const auto* p = reinterpret_cast<const unsigned char*>(in.data());
    const unsigned char* const end = p + in.size();
    if (have_byte_ && p < end) {
      have_byte_ = false;
      w = put(big_ ? (uint32_t{byte_} << 8 | *p) : (uint32_t{*p} << 8 | byte_), w);
      ++p;
    }
    // An ASCII unit has a zero high byte and a low byte below 0x80.
    const uint64_t non_ascii = big_ ? 0x80ff80ff80ff80ffULL : 0xff80ff80ff80ff80ULL;
    const int low = big_ ? 1 : 0;
    while (end - p >= 2) {
      if (end - p >= 8 && high_ == 0 && first_done_) {
        uint64_t word;
        std::memcpy(&word, p, 8);
        if constexpr (std::endian::native == std::endian::little) {
          if ((word & non_ascii) == 0) {
            w[0] = static_cast<char>(p[low]);
            w[1] = static_cast<char>(p[2 + low]);
            w[2] = static_cast<char>(p[4 + low]);
            w[3] = static_cast<char>(p[6 + low]);
            w += 4;
            p += 8;
            continue;
          }
        }
      }
      w = put(big_ ? (uint32_t{p[0]} << 8 | p[1]) : (uint32_t{p[1]} << 8 | p[0]), w);
      p += 2;
    }
    if (p < end) {
      byte_ = *p;
      have_byte_ = true;
    }
    out.resize(static_cast<size_t>(w - out.data()));
  }

 private:
  char* put(uint32_t unit, char* w) {
    if (high_) {
      const uint32_t high = high_;
      high_ = 0;
      if (unit >= 0xdc00 && unit <= 0xdfff) return write_utf8(0x10000 + ((high - 0xd800) << 10) + (unit - 0xdc00), w);
      w = write_utf8(0xfffd, w);
    }
    if (unit >= 0xd800 && unit <= 0xdbff) {
      high_ = unit;
    } else if (unit >= 0xdc00 && unit <= 0xdfff) {
      w = write_utf8(0xfffd, w);
    } else if (unit != 0xfeff) {
      w = write_utf8(unit, w);
    }
    first_done_ = true;
    return w;
  }
  bool big_;
  bool have_byte_ = false;
  bool first_done_ = false;
  unsigned char byte_ = 0;
  uint32_t high_ = 0;
};

// Whether `text` holds one of the scanner's keywords (a candidate for a message).
bool holds_keyword(const std::string& text) { return KeywordFilter::standard().find(text, 0) != std::string::npos; }

// How many sizes `text` prints: a number, maybe a space, then a byte unit (core/units.h's labels:
// "2.00 GiB", "512 bytes").
size_t size_figures(std::string_view text) {
  size_t count = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i])) || (i > 0 && std::isdigit(static_cast<unsigned char>(text[i - 1])))) {
      continue;
    }
    size_t j = i;
    while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.' || text[j] == ',')) ++j;
    if (j < text.size() && text[j] == ' ') ++j;
    size_t label_end = j;
    while (label_end < text.size() && std::isalpha(static_cast<unsigned char>(text[label_end]))) ++label_end;
    if (label_end > j && unit_multiplier(text.substr(j, label_end - j), LabelMeaning::kAsPrinted)) ++count;
    i = label_end;
  }
  return count;
}

// `text` without the quotations a sentence makes: a span in "...", '...' or “...” with fewer than
// two sizes that opens after a space (or at the line's start) and closes before a space and the next word, as in
// `The test expects: "CUDA error: out of memory" to be handled` (qa21 t21). A program quoting
// its error does not go on with prose after it: a repr `OutOfMemoryError('...')`, logfmt's
// `error="..."`, NCCL's `Cuda failure 'out of memory'` at the line's end all stay.
std::string without_prose_quotes(std::string_view text) {
  std::string out;
  size_t copied = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    std::string_view open, close;
    if (text[i] == '"' || text[i] == '\'') {
      open = close = text.substr(i, 1);
    } else if (text.compare(i, 3, "\u201c") == 0) {
      open = "\u201c";
      close = "\u201d";
    } else {
      continue;
    }
    if (i > 0 && text[i - 1] != ' ' && text[i - 1] != '\t') continue;
    const size_t end = text.find(close, i + open.size());
    if (end == std::string_view::npos) break;
    size_t after = end + close.size();
    // A quotation with the figures of a whole message is the error itself, logged by a retry loop
    // or a job runner (`attempt 3 failed with "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0
    // has a total capacity of 23.65 GiB ..." giving up`); one with a size or none is prose, a test's
    // assertion or a pattern (`assert "... Tried to allocate 2.00 GiB" in err.message`).
    const std::string_view quoted = text.substr(i + open.size(), end - i - open.size());
    if (size_figures(quoted) < 2 && after + 1 < text.size() && text[after] == ' ' &&
        std::isalpha(static_cast<unsigned char>(text[after + 1]))) {
      out.append(text.substr(copied, i - copied));
      out += ' ';
      copied = after;
    }
    i = end + close.size() - 1;
  }
  if (copied == 0) return std::string(text);
  out.append(text.substr(copied));
  return out;
}

// Whether a cleaned line holds a message (a format's trigger, or the start of one cut at the line's
// end) outside any quotation a sentence makes of it: a message quoted in prose is a mention.
bool holds_message(const std::string& text) {
  const bool trigger = holds_trigger(text);
  if (!trigger) return ends_with_trigger_start(text);
  // (No quote character at all, the common case; a plain scan, which find_first_of is not.)
  if (std::none_of(text.begin(), text.end(), [](char c) { return c == '"' || c == '\'' || c == '\xe2'; })) return true;
  // (Every trigger quoted: a mention, even if the line's last word could start a wrapped message.)
  const std::string unquoted = without_prose_quotes(text);
  return unquoted.size() == text.size() || holds_trigger(unquoted);
}

// A message quoted as a string literal (a Rust panic's Debug print of a Python error, a repr) has
// its newlines as the two characters backslash and n: its lines, when at least two of those breaks
// start a message line (a capital, a space, a digit; a Windows path's backslash-"nvidia" does not),
// from the first line that holds a message (a quoted traceback's frames come before it). Empty: not
// split (the common case costs one find).
std::vector<std::string> split_escaped_newlines(const std::string& line) {
  if (line.find("\\n") == std::string::npos || !holds_trigger(line)) return {};
  std::vector<std::string> parts;
  size_t from = 0;
  for (size_t at = line.find("\\n"); at != std::string::npos; at = line.find("\\n", at + 2)) {
    const char next = at + 2 < line.size() ? line[at + 2] : ' ';
    if (!(std::isupper(static_cast<unsigned char>(next)) || std::isdigit(static_cast<unsigned char>(next)) || next == ' ')) {
      continue;
    }
    parts.push_back(line.substr(from, at - from));
    from = at + 2;
  }
  if (parts.size() < 2) return {};
  parts.push_back(line.substr(from));
  const auto message = std::find_if(parts.begin(), parts.end(), [](const std::string& part) { return holds_trigger(part); });
  if (message != parts.end()) parts.erase(parts.begin(), message);
  return parts;
}

// Whether the first format that reads `lines` reads them as a whole message, not a cut one.
bool reads_whole(std::vector<std::string> lines, size_t continuable) {
  MessageWindow window = MessageWindow::from_lines(std::move(lines));
  window.continuable_lines = continuable;
  for (const MessageFormat& format : message_formats()) {
    if (!window.first_line_triggers(format)) continue;
    if (auto match = format.match(window)) return !match->event.format.ends_with("_truncated");
  }
  return false;
}

// Whether a format reads `lines` (from their first) as a message of its own.
bool reads_as_message(const std::vector<std::string>& lines) {
  const MessageWindow window = MessageWindow::from_lines(lines);
  for (const MessageFormat& format : message_formats()) {
    if (window.first_line_triggers(format) && format.match(window)) return true;
  }
  return false;
}

// TensorFlow's first reservation retries at 90% of the size that failed (the driver's "failed to
// allocate 968.17M ..." then 871.35M, 784.21M, ...): `event` is the next try after `previous`.
bool next_reservation_retry(const OomEvent& previous, const OomEvent& event) {
  if (previous.format != event.format || event.line > previous.end_line + 1 ||
      (event.format != "tf_cuda_driver_alloc" && event.format != "tf_rocm_driver_alloc")) {
    return false;
  }
  const uint64_t last = previous.bytes("smallest_retry").value_or(previous.bytes("requested").value_or(0));
  // 128 bits: the sizes come from the log and may be near 2^64 (a garbage reservation).
  const unsigned __int128 now_x100 = static_cast<unsigned __int128>(event.bytes("requested").value_or(0)) * 100;
  const unsigned __int128 last_x = last;
  return last > 0 && now_x100 >= last_x * 85 && now_x100 <= last_x * 95;
}

// Two events carry the same numbers: the same message printed twice (logged, then raised).
// a's and b's fields, the line numbers left out (names_a_line), in order.
bool same_fields_but_lines(const OomEvent& a, const OomEvent& b) {
  size_t i = 0, j = 0;
  while (true) {
    while (i < a.fields.size() && names_a_line(a.fields[i].first)) ++i;
    while (j < b.fields.size() && names_a_line(b.fields[j].first)) ++j;
    if (i == a.fields.size() || j == b.fields.size()) return i == a.fields.size() && j == b.fields.size();
    if (a.fields[i] != b.fields[j]) return false;
    ++i;
    ++j;
  }
}

bool same_figures(const OomEvent& a, const OomEvent& b) {
  // An error merged with the allocator's warning before it (error_after_bfc_warning) carries the
  // warning's figures too: a second print of the error matches when all its own figures agree.
  if (a.field("allocator_warning_line") != nullptr && b.field("allocator_warning_line") == nullptr) {
    if (a.other_processes.size() != b.other_processes.size() || a.device != b.device) return false;
    for (const auto& [name, q] : b.quantities) {
      const Quantity* have = a.quantity(name);
      if (have == nullptr || have->bytes != q.bytes) return false;
    }
    for (const auto& [name, v] : b.fields) {
      if (names_a_line(name)) continue;
      const FieldValue* have = a.field(name);
      if (have == nullptr || !(*have == v)) return false;
    }
    return true;
  }
  if (a.quantities.size() != b.quantities.size() || a.other_processes.size() != b.other_processes.size() ||
      a.device != b.device) {
    return false;
  }
  for (size_t i = 0; i < a.quantities.size(); ++i) {
    if (a.quantities[i].first != b.quantities[i].first || a.quantities[i].second.bytes != b.quantities[i].second.bytes) return false;
  }
  return same_fields_but_lines(a, b);
}

bool same_message(const OomEvent& a, const OomEvent& b) {
  return a.format == b.format && a.framework == b.framework && a.is_error == b.is_error && same_figures(a, b);
}

// N of a trailing " [repeated Nx across cluster]" (Ray), which is removed from `message`; 0 without one.
uint64_t ray_repeat_count(std::string& message) {
  static constexpr std::string_view kTail = "x across cluster]";
  std::string_view m = message;
  while (!m.empty() && (m.back() == ' ' || m.back() == '\t')) m.remove_suffix(1);
  if (m.size() < kTail.size() || m.substr(m.size() - kTail.size()) != kTail) return 0;
  const size_t open = m.rfind("[repeated ");
  if (open == std::string_view::npos) return 0;
  const std::string_view digits = m.substr(open + 10, m.size() - kTail.size() - open - 10);
  const auto n = parse_decimal<uint64_t>(digits);
  if (!n || *n == 0) return 0;
  size_t cut = open;
  while (cut > 0 && (message[cut - 1] == ' ' || message[cut - 1] == '\t')) --cut;
  message.resize(cut);
  return *n;
}

// torchrun's end-of-run ChildFailedError summary ("Root Cause (first observed failure):") repeats a
// failed rank's error file under "traceback : ", every line of it indented, a few lines below
// "rank      : 1 (local_rank: 1)" (torch/distributed/elastic/multiprocessing/errors/__init__.py,
// _format_failure). The rank it names when the message line `first` (cleaned) stands in such a
// block, `above` its lines above; nullopt otherwise.
std::optional<int64_t> torchrun_summary_rank(const std::vector<std::string>& above, const std::string& first) {
  static const RE2 traceback_field(R"(^\s+traceback\s*: )");
  static const RE2 rank_field(R"(^\s+rank\s*: (\d+) \(local_rank: \d+\))");
  if (first.empty() || (first[0] != ' ' && first[0] != '\t')) return std::nullopt;
  size_t field = SIZE_MAX;   // the "traceback : " line: the message's own (an error without frames) or above it
  if (RE2::PartialMatch(first, traceback_field)) field = above.size();
  // (A summary's traceback is a few dozen frames: two lines each.)
  for (size_t i = above.size(); field == SIZE_MAX && i > 0 && above.size() - i < 400;) {
    const std::string& line = above[--i];
    if (line.empty() || (line[0] != ' ' && line[0] != '\t')) return std::nullopt;   // out of the block
    if (RE2::PartialMatch(line, traceback_field)) field = i;
  }
  if (field == SIZE_MAX) return std::nullopt;
  // time, host, rank, exitcode, error_file, traceback: the rank is the fourth line up.
  for (size_t k = field; k > 0 && field - k < 6;) {
    std::string digits;
    if (RE2::PartialMatch(above[--k], rank_field, &digits)) return parse_decimal<int64_t>(digits);
  }
  return std::nullopt;
}

// The BFC allocator's warning and XLA's RESOURCE_EXHAUSTED error for one failed request: JAX prints
// both (readers/formats/tensorflow.cpp attributes the warning to JAX).
// The BFC allocator's warning ("ran out of memory trying to allocate 1.50GiB (rounded to N)") and
// the error raised for the same request right after it: JAX's XlaRuntimeError, TensorFlow's "OOM
// when allocating tensor with shape[...]".
bool error_after_bfc_warning(const OomEvent& bfc, const OomEvent& xla) {
  if (bfc.format != "tf_bfc_oom") return false;
  const bool jax = bfc.framework == "jax" && xla.format == "xla_oom_bytes";
  const bool tensorflow = bfc.framework == "tensorflow" && xla.format == "tf_oom_tensor";
  if (!jax && !tensorflow) return false;
  if (bfc.device && xla.device && bfc.device != xla.device) return false;
  auto requested = xla.bytes("requested");
  if (!requested) return false;
  // BFC rounds a request up to its 256-byte granule (bfc_allocator.cc RoundedBytes,
  // kMinAllocationSize): "rounded to 29995136256" for XLA's exact 29995136128.
  if (auto rounded = bfc.int_field("requested_rounded_bytes");
      rounded && *rounded >= static_cast<int64_t>(*requested) && *rounded - static_cast<int64_t>(*requested) < 256) {
    return true;
  }
  const Quantity* q = bfc.quantity("requested");
  if (q == nullptr) return false;
  const uint64_t diff = q->bytes > *requested ? q->bytes - *requested : *requested - q->bytes;
  return diff <= q->tolerance_bytes;
}

// True when no figure both events carry differs (two lines of one startup's accounting).
bool figures_agree(const OomEvent& a, const OomEvent& b) {
  for (const auto& [name, q] : b.quantities) {
    const Quantity* have = a.quantity(name);
    if (have != nullptr && have->bytes != q.bytes) return false;
  }
  for (const auto& [name, v] : b.fields) {
    const FieldValue* have = a.field(name);
    if (have != nullptr && !(*have == v)) return false;
  }
  return true;
}

// Adds `from`'s figures that `into` lacks (`into` keeps its own where both have one).
void add_missing_figures(OomEvent& into, const OomEvent& from) {
  for (const auto& [name, q] : from.quantities) {
    if (into.quantity(name) == nullptr) into.set_quantity(name, q);
  }
  for (const auto& [name, v] : from.fields) {
    if (into.field(name) == nullptr) into.set_field(name, v);
  }
}

std::string join_lines(const std::vector<std::string>& lines, size_t count) {
  std::string out;
  for (size_t i = 0; i < count && i < lines.size(); ++i) {
    if (i > 0) out += ' ';
    std::string_view line = lines[i];
    // A wrapped line keeps the space it was broken at: one space between the parts, not two.
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    out += line;
    if (out.size() > 4096) break;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// A growable byte buffer that, unlike std::string, can be read into without zero-filling first.
class ByteBuffer {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const char* data() const { return data_.get(); }
  char operator[](size_t i) const { return data_[i]; }
  char back() const { return data_[size_ - 1]; }
  operator std::string_view() const { return {data_.get(), size_}; }
  void append(const char* p, size_t n) {
    std::memcpy(tail(n), p, n);
    size_ += n;
  }
  // Room for n more bytes at the end; commit() what was written there.
  char* tail(size_t n) {
    if (size_ + n > capacity_) {
      size_t capacity = std::max(capacity_ * 2, size_ + n);
      auto grown = std::make_unique_for_overwrite<char[]>(capacity);
      if (size_ > 0) std::memcpy(grown.get(), data_.get(), size_);
      data_ = std::move(grown);
      capacity_ = capacity;
    }
    return data_.get() + size_;
  }
  void commit(size_t n) { size_ += n; }
  void erase_front(size_t n) {
    std::memmove(data_.get(), data_.get() + n, size_ - n);
    size_ -= n;
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t size_ = 0, capacity_ = 0;
};

}  // namespace

struct LogScanner::State {
  ScanOptions options;
  // A container runtime's file (Docker json-file, Kubernetes CRI) is read through its decoder:
  // the scanner sees the lines the program wrote. The first line with text decides.
  static constexpr size_t kSniffBytes = kMaxContainerRecordLine;
  bool sniffed = false;
  std::string head_pending;      // input before that line is complete
  std::optional<ContainerLogDecoder> container;
  std::string raw, decoded;      // input read for the decoder, and its output
  void take(std::string_view chunk, bool eof);
  ByteBuffer buf;                // pending text; buf[0] is absolute offset `base`
  uint64_t base = 0;
  size_t scan_pos = 0;           // buf offsets below this have been searched
  size_t counted_pos = 0;        // buf offset whose line number is counted_line
  uint64_t counted_line = 1;
  uint64_t consumed_until = 0;   // absolute offset: text before it belongs to earlier events
  // Lines after consumed_until that an earlier event took (absolute offsets of their starts): the
  // rest of a message whose lines interleave with another rank's, read before that rank's.
  std::vector<uint64_t> consumed_lines;
  // A JSON record read up to its string `json_strings_done` (absolute offset of its line).
  uint64_t json_record_at = UINT64_MAX;
  size_t json_strings_done = 0;
  bool consumed(uint64_t line_start) {
    if (line_start < consumed_until) return true;
    // Candidates come in log order: lines above this one are behind the scan for good.
    std::erase_if(consumed_lines, [&](uint64_t at) { return at < line_start; });
    return std::find(consumed_lines.begin(), consumed_lines.end(), line_start) != consumed_lines.end();
  }
  ScanResult result;

  uint64_t line_at(size_t pos) {
    if (pos >= counted_pos) {
      counted_line += count_newlines(buf.data() + counted_pos, pos - counted_pos);
    } else {
      counted_line -= count_newlines(buf.data() + pos, counted_pos - pos);
    }
    counted_pos = pos;
    return counted_line;
  }

  void process(bool eof);
  bool process_candidate(size_t hit, bool eof, size_t* resume);
  // The earlier event that `event` repeats word for word (same rank, nothing different since).
  OomEvent* find_repeat(const OomEvent& event);
  // (`node`: the node a launcher's prefix names, "" for none: another node's lines are left out too.)
  ContextLines lines_above(size_t start, std::optional<int64_t> rank, const std::string& node, std::vector<std::string>& json_above);
  std::optional<Traceback> traceback_above(size_t start, std::optional<int64_t> rank, const std::string& node,
                                           std::vector<std::string>& json_above) {
    return parse_traceback(lines_above(start, rank, node, json_above).text);
  }
  // Returns the event that now stands for `event` when it was added or counted as a repeat
  // (nullptr when it joined another report or the list is full).
  // `launcher_summary`: the event is torchrun's summary of a rank's error (torchrun_summary_rank).
  OomEvent* add_event(OomEvent event, bool launcher_summary = false);
  // The last event's one-line message (cleaned) and rank: from its third print on (the second may
  // bring the traceback the first lacked), a candidate line equal to it is counted as a repeat
  // without matching it again (a retry loop's thousands of prints).
  static constexpr size_t kNoQuickRepeat = SIZE_MAX;
  size_t quick_repeat_index = kNoQuickRepeat;
  std::string quick_repeat_text;
  std::optional<int64_t> quick_repeat_rank;
  std::string quick_repeat_node;
  bool quick_repeat_json = false;   // the text is a JSON record's one message string (json_repeats_last)
  // Whether the record's strings `decoded` hold the quick-repeat message as their only message:
  // the first string with a keyword equals it (cleaned, same rank) and none after it holds one.
  bool json_repeats_last(const std::vector<std::string>& decoded) const;
  void add_reading(const std::string& line, uint64_t line_number, std::optional<int64_t> rank);
  void add_notice(const std::string& line, uint64_t line_number, std::optional<int64_t> rank);
  // A candidate line that is not an error message: a memory figure or a notice.
  void add_context_line(const std::string& line, uint64_t line_number, std::optional<int64_t> rank) {
    add_reading(line, line_number, rank);
    add_notice(line, line_number, rank);
  }
  // The cleaned lines lines_above read last, by absolute offset: the next event's window mostly
  // overlaps it (a log of dense errors cleaned the same 32 KiB again for each).
  struct CleanedLine {
    uint64_t start = 0, end = 0;   // absolute offsets of the line and of its break
    std::optional<int64_t> rank;
    std::string node;
    std::string prefix_program;    // application_from_prefix
    std::string line_program;      // application_from_line
    std::string text;              // without the logger prefix (a JSON record's message: maybe several lines)
  };
  std::deque<CleanedLine> cleaned_above;
  // The lines message windows cleaned last, by absolute offsets, in order: the next candidate's
  // window starts inside them (dense errors cleaned the same 40 lines again for each).
  struct AheadLine {
    uint64_t start = 0, end = 0;
    CleanLine line;
  };
  std::deque<AheadLine> cleaned_ahead;
  size_t ahead_cursor = 0;   // the next window line's place in cleaned_ahead
  void begin_window(size_t start) {
    while (!cleaned_ahead.empty() && cleaned_ahead.front().start < base + start) cleaned_ahead.pop_front();
    ahead_cursor = 0;
  }
  // The window's next line, [start, end) in the buffer, cleaned (once). The reference stays valid
  // for the window.
  const CleanLine& clean_ahead(size_t start, size_t end) {
    const uint64_t at = base + start, to = base + end;
    if (ahead_cursor < cleaned_ahead.size()) {
      if (cleaned_ahead[ahead_cursor].start == at && cleaned_ahead[ahead_cursor].end == to) {
        return cleaned_ahead[ahead_cursor++].line;
      }
      cleaned_ahead.erase(cleaned_ahead.begin() + static_cast<std::ptrdiff_t>(ahead_cursor), cleaned_ahead.end());
    }
    cleaned_ahead.push_back({at, to, clean_line(std::string_view(buf.data() + start, end - start))});
    ++ahead_cursor;
    return cleaned_ahead.back().line;
  }
  void compact();
  // Whether the line at buffer offset `start` (cleaned: `text`) is the indented source line under a
  // traceback's `File "...", line N, in f` line.
  bool is_source_echo(size_t start, const std::string& line) const {
    // vLLM logs each traceback line through its logger: the frame and the code under it read as
    // Python printed them once the logger's prefix is off.
    const std::string_view text = strip_logger_prefix(line);
    if (text.empty() || (text[0] != ' ' && text[0] != '\t') || start == 0) return false;
    size_t end = start - 1;                       // the break ending the line above
    if (end > 0 && buf[end] == '\n' && buf[end - 1] == '\r') --end;
    size_t begin = end;
    while (begin > 0 && buf[begin - 1] != '\n') --begin;
    if (end - begin > kMaxLine) return false;
    static const RE2 frame(R"re(^\s*File ".+", line \d+, in )re");
    return RE2::PartialMatch(strip_logger_prefix(clean_line(std::string_view(buf.data() + begin, end - begin)).text), frame);
  }
};

OomEvent* LogScanner::State::find_repeat(const OomEvent& event) {
  auto& events = result.events;
  size_t looked = 0;
  for (auto it = events.rbegin(); it != events.rend() && looked < kRecentEvents; ++it, ++looked) {
    if (it->rank != event.rank) continue;
    return same_message(*it, event) ? &*it : nullptr;
  }
  return nullptr;
}

bool LogScanner::State::json_repeats_last(const std::vector<std::string>& decoded) const {
  size_t i = 0;
  while (i < decoded.size() && !holds_keyword(decoded[i])) ++i;
  if (i == decoded.size()) return false;
  const CleanLine c = clean_line(decoded[i]);
  if (c.rank != quick_repeat_rank || c.node != quick_repeat_node || c.text != quick_repeat_text) return false;
  for (++i; i < decoded.size(); ++i) {
    if (holds_keyword(decoded[i])) return false;
  }
  return true;
}

namespace {

// Another report of the SIGKILL `kept` stands for: its figures, and the kernel's line when it is the kernel's.
void join_kill_report(OomEvent& kept, const OomEvent& report) {
  if (report.string_field("kill_report") == "kernel_oom_killer") {
    kept.set_field("kernel_report_line", static_cast<int64_t>(report.line));
  }
  add_missing_figures(kept, report);
  kept.end_line = std::max(kept.end_line, report.end_line);
}

}  // namespace

OomEvent* LogScanner::State::add_event(OomEvent event, bool launcher_summary) {
  auto& events = result.events;
  quick_repeat_index = kNoQuickRepeat;
  // NCCL's own warning ("NCCL WARN Cuda failure 'out of memory'", with NCCL_DEBUG=WARN or INFO) and
  // the error PyTorch raises for it ("NCCL error in: ..., unhandled cuda error ... Cuda failure 'out
  // of memory'") tell one failure: the raised error stands (its traceback and rank), with the
  // warning's size and line. NCCL's prefix names the host, pid and device, no rank: a warning
  // without one joins the raised error of any rank, the nearest first.
  if (event.format == "nccl_cuda_oom" && event.field("nccl_error") != nullptr) {
    for (auto it = events.rbegin(); it != events.rend() && it - events.rbegin() < static_cast<long>(kRecentEvents); ++it) {
      if (it->format != "nccl_cuda_oom" || it->field("nccl_error") != nullptr || (it->rank && it->rank != event.rank) ||
          event.line > it->end_line + kJoinLines) {
        continue;
      }
      add_missing_figures(event, *it);
      if (!event.device) event.device = it->device;
      event.set_field("nccl_warning_line", static_cast<int64_t>(it->line));
      events.erase(std::next(it).base());   // the raised error is added below, in its own place
      break;
    }
  }
  // torchrun's summary repeats the error a rank printed itself: that error stands, with the
  // summary's line. (The summary alone, when the rank's own output is not in the log, is the event.)
  if (launcher_summary) {
    for (auto it = events.rbegin(); it != events.rend() && it - events.rbegin() < static_cast<long>(kRecentEvents); ++it) {
      if (it->rank != event.rank || it->format != event.format || it->framework != event.framework ||
          !figures_agree(*it, event)) {
        continue;
      }
      add_missing_figures(*it, event);
      it->set_field("launcher_summary_line", static_cast<int64_t>(event.line));
      return nullptr;
    }
  }
  // A worker the launcher itself killed while tearing the job down is no out-of-memory kill.
  if (event.format == "process_killed") {
    if (auto pid = event.int_field("pid")) {
      for (const LogNotice& n : result.notices) {
        if (n.kind == "launcher_sent_sigkill" && n.line <= event.line && n.value == static_cast<double>(*pid)) {
          return nullptr;
        }
      }
    }
  }
  // A markdown quotation ("> ...") of an error an earlier event carries (a GitHub comment quoting
  // the message above it) mentions that failure: no second event, and no traceback borrowed from it.
  // (A whole log pasted as a quotation quotes every rank's error: an earlier quoted one is no original.)
  if (event.message.starts_with(">") && event.bytes("requested")) {
    for (auto it = events.rbegin(); it != events.rend() && it - events.rbegin() < static_cast<long>(kRecentEvents); ++it) {
      if (!it->message.starts_with(">") && it->framework == event.framework && it->rank == event.rank &&
          (!event.device || it->device == event.device) && it->bytes("requested") == event.bytes("requested") &&
          figures_agree(*it, event)) {
        return nullptr;
      }
    }
  }
  // The same failure reported again is not a new event: a retry loop printing one OOM thousands
  // of times is one event with a count and a line range (find_repeat, before the traceback is
  // read), and a second layer's report of it joins the first.
  if (OomEvent* same = find_repeat(event)) {
    ++same->repeats;
    same->last_repeat_line = event.line;
    return same;
  }
  // JAX on several devices: each device's PjRt client logs "Execution of replica 0 failed:
  // RESOURCE_EXHAUSTED: Out of memory while trying to allocate N bytes" (after its BFC warning),
  // then the program raises one XlaRuntimeError for the same request ("other replicas may have
  // failed as well"): one failure. The raised error stands, with the devices the reports named.
  if (event.framework == "jax" && event.message.find("XlaRuntimeError") != std::string::npos) {
    std::vector<int64_t> devices;
    uint64_t first_report = 0;
    while (!events.empty()) {
      OomEvent& report = events.back();
      if (report.framework != "jax" || report.rank != event.rank || !report.is_error ||
          report.message.find("Execution of replica") == std::string::npos ||
          report.bytes("requested") != event.bytes("requested") || event.line > report.end_line + kJoinLines) {
        break;
      }
      if (report.device && std::find(devices.begin(), devices.end(), *report.device) == devices.end()) {
        devices.push_back(*report.device);
      }
      first_report = report.line;
      add_missing_figures(event, report);
      events.pop_back();
    }
    if (first_report > 0) {
      std::sort(devices.begin(), devices.end());
      if (devices.size() == 1 && !event.device) event.device = devices.front();
      if (devices.size() > 1) {
        std::string list;
        for (int64_t d : devices) list += (list.empty() ? "" : ", ") + std::to_string(d);
        event.set_field("replica_devices", list);
      }
      event.set_field("replica_report_line", static_cast<int64_t>(first_report));
      // A retry loop's next failure: the same as the last one once its replica reports are joined.
      if (OomEvent* same = find_repeat(event)) {
        ++same->repeats;
        same->last_repeat_line = event.line;
        return same;
      }
    }
  }
  // torchrun's failure summary lists each failed rank again ("Failures:" then "Root Cause"), after
  // the launcher's own "failed (exitcode: -9) ... (pid: N)" line: a process already reported by
  // its pid is the same kill, whatever was reported between.
  if (event.format == "process_killed") {
    if (const auto pid = event.int_field("pid")) {
      for (auto it = events.rbegin(); it != events.rend() && it - events.rbegin() < static_cast<long>(kRecentEvents); ++it) {
        // (Same rank too: on several nodes one pid can be two processes.)
        if (it->format != "process_killed" || it->int_field("pid") != pid || it->rank != event.rank ||
            event.line > it->end_line + kJoinLines) {
          continue;
        }
        join_kill_report(*it, event);
        return nullptr;
      }
    }
  }
  // TensorFlow logs the failed kernel ("OP_REQUIRES failed at conv_ops.cc:1068 : RESOURCE_EXHAUSTED:
  // OOM when allocating tensor with shape[...]") and then raises it (ResourceExhaustedError, whose
  // "Detected at node" text repeats the message): one failure. The raised error stands, with its
  // traceback, and takes the logged one's figures (the BFC pool's, joined to that line).
  if (!events.empty() && event.framework == "tensorflow" && event.format == "tf_oom_tensor" && event.is_error &&
      event.message.find("OP_REQUIRES failed") == std::string::npos) {
    const OomEvent& logged = events.back();
    const FieldValue* allocator = event.field("allocator");
    const FieldValue* logged_allocator = logged.field("allocator");
    if (logged.framework == "tensorflow" && logged.format == event.format && logged.is_error && logged.rank == event.rank &&
        logged.message.find("OP_REQUIRES failed") != std::string::npos && logged.device == event.device &&
        logged.bytes("requested") == event.bytes("requested") && logged.field("shape") != nullptr &&
        event.field("shape") != nullptr && *logged.field("shape") == *event.field("shape") &&
        (allocator == nullptr || logged_allocator == nullptr || *allocator == *logged_allocator) &&
        event.line <= logged.end_line + kJoinLines) {
      const uint64_t logged_line = logged.line;
      add_missing_figures(event, logged);
      events.pop_back();
      event.set_field("kernel_log_line", static_cast<int64_t>(logged_line));
    }
  }
  OomEvent* previous = nullptr;
  for (auto it = events.rbegin(); it != events.rend() && it - events.rbegin() < static_cast<long>(kRecentEvents); ++it) {
    if (it->rank == event.rank) {
      previous = &*it;
      break;
    }
  }
  // TensorFlow's reservation retries: one startup, one event; the largest request stands, the
  // smallest tried is kept.
  if (previous != nullptr && next_reservation_retry(*previous, event)) {
    if (const Quantity* q = event.quantity("requested")) previous->set_quantity("smallest_retry", *q);
    ++previous->repeats;
    previous->last_repeat_line = event.line;
    previous->end_line = std::max(previous->end_line, event.end_line);
    return previous;
  }
  // TensorFlow's BFC warning is followed by its allocator dump (a line per bin and chunk, hundreds
  // of them) that ends with the totals and the "Stats:" block: they belong to the warning, however
  // long the dump.
  if (previous != nullptr && previous->format == "tf_bfc_oom" && event.format == "tf_bfc_stats" &&
      previous->framework == event.framework && event.line <= previous->end_line + kBfcDumpLines) {
    add_missing_figures(*previous, event);
    previous->set_field("allocator_stats_line", static_cast<int64_t>(event.line));
    previous->end_line = std::max(previous->end_line, event.end_line);
    return nullptr;
  }
  if (previous != nullptr && event.line <= previous->end_line + kJoinLines) {
    if (error_after_bfc_warning(*previous, event)) {
      // The error carries the program's buffers (XLA) or the tensor's shape (TensorFlow) and the
      // traceback: it stands for both.
      OomEvent bfc = std::move(*previous);
      add_missing_figures(event, bfc);
      if (!event.device) event.device = bfc.device;
      event.set_field("allocator_warning_line", static_cast<int64_t>(bfc.line));
      *previous = std::move(event);
      return nullptr;
    }
    // vLLM's startup accounting prints one figure per line: one startup's lines are one report,
    // and an error that no KV cache fits ("No available memory for the cache blocks") after
    // accounting that already showed it is the same failure.
    if (previous->format == "vllm_memory_info" && event.line <= previous->end_line + kBlockGapLines) {
      if (event.format == "vllm_memory_info" && figures_agree(*previous, event)) {
        add_missing_figures(*previous, event);
        previous->is_error = previous->is_error || event.is_error;
        previous->end_line = std::max(previous->end_line, event.end_line);
        if (previous->message.size() < 4096) previous->message += "\n" + event.message;
        return nullptr;
      }
    }
    if (previous->format == "vllm_memory_info" && previous->is_error &&
        (event.format == "vllm_no_cache_blocks" || event.format == "vllm_kv_needed_gt_available" ||
         event.format == "vllm_max_seq_len_gt_kv_tokens")) {
      add_missing_figures(*previous, event);
      previous->set_field("error_line", static_cast<int64_t>(event.line));
      previous->set_field("error_message", std::string(strip_logger_prefix(event.message)));
      previous->end_line = std::max(previous->end_line, event.end_line);
      return nullptr;
    }
    // A DataLoader worker's own bus-error line, then the main process's error naming it (its pid):
    // one worker out of shared memory.
    if (previous->format == "dataloader_shm" && event.format == "dataloader_shm" && !previous->field("pid")) {
      add_missing_figures(*previous, event);
      previous->end_line = std::max(previous->end_line, event.end_line);
      return nullptr;
    }
    // One SIGKILL told by several programs (the shell's "Killed", the launcher's exit status, the
    // kernel's "Out of memory: Killed process"): one event with every report's figures, as long as
    // no two of them name different processes.
    if (previous->format == "process_killed" && event.format == "process_killed" &&
        (!previous->int_field("pid") || !event.int_field("pid") || previous->int_field("pid") == event.int_field("pid"))) {
      join_kill_report(*previous, event);
      return nullptr;
    }
  }
  if (events.size() >= options.max_events) {
    result.events_truncated = true;
    ++result.messages_beyond_cap;
    return nullptr;
  }
  events.push_back(std::move(event));
  return &events.back();
}

namespace {

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c; }

// Whether `text` holds `word` (lower case) at `at`, in any case.
bool has_word_at(std::string_view text, size_t at, std::string_view word) {
  if (at > text.size() || text.size() - at < word.size()) return false;
  for (size_t i = 0; i < word.size(); ++i) {
    if (ascii_lower(text[at + i]) != word[i]) return false;
  }
  return true;
}

// The end of a printed size starting at `at` (kSizePattern, in any case: digits, an optional
// fraction, an optional space, a unit, a word boundary), or npos.
size_t printed_size_end(std::string_view t, size_t at) {
  auto digit = [&](size_t i) { return i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])); };
  size_t i = at;
  while (digit(i)) ++i;
  if (i == at) return std::string_view::npos;
  if (i + 1 < t.size() && (t[i] == '.' || t[i] == ',') && digit(i + 1)) {
    i += 1;
    while (digit(i)) ++i;
  }
  if (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
  auto bounded = [&](size_t end) { return end >= t.size() || !is_word_char(t[end]) ? end : std::string_view::npos; };
  auto lower = [&](size_t k) { return k < t.size() ? ascii_lower(t[k]) : '\0'; };
  // [kKMGTP]i?B | bytes | B | [KMGT], each followed by \b, tried in that order.
  if (std::string_view("kmgtp").find(lower(i)) != std::string_view::npos && lower(i) != '\0') {
    const size_t b = lower(i + 1) == 'i' && lower(i + 2) == 'b' ? i + 3 : lower(i + 1) == 'b' ? i + 2 : 0;
    if (b && bounded(b) != std::string_view::npos) return b;
  }
  if (has_word_at(t, i, "bytes") && bounded(i + 5) != std::string_view::npos) return i + 5;
  if (lower(i) == 'b' && bounded(i + 1) != std::string_view::npos) return i + 1;
  if (std::string_view("kmgt").find(lower(i)) != std::string_view::npos && lower(i) != '\0' &&
      bounded(i + 1) != std::string_view::npos) {
    return i + 1;
  }
  return std::string_view::npos;
}

// A memory figure in a progress or logging line, read as the pattern
// (?i)((?:max[_ ]?)?(?:gpu[_ ]?|cuda[_ ]?)?mem(?:ory)?(?:[_ ](?:allocated|reserved|usage|used|alloc))?)['"]?\s*[:=]\s*['"]?(SIZE)
// reads it (leftmost match; the name, then the size), by hand: on a log whose every step line
// prints its memory (torchtitan's "memory: 34.21GiB(43.25%)") the regex was most of the scan.
struct ReadingText {
  std::string_view name, size;
};
std::optional<ReadingText> find_memory_reading(std::string_view t) {
  auto space = [&](size_t i) { return i < t.size() && std::isspace(static_cast<unsigned char>(t[i])); };
  auto quote = [&](size_t i) { return i < t.size() && (t[i] == '\'' || t[i] == '"'); };
  // After the name: ['"]?\s*[:=]\s*['"]? and the size; the size's span, or nothing.
  auto value_after = [&](size_t i) -> std::optional<std::string_view> {
    if (quote(i)) ++i;
    while (space(i)) ++i;
    if (i >= t.size() || (t[i] != ':' && t[i] != '=')) return std::nullopt;
    ++i;
    while (space(i)) ++i;
    if (quote(i)) ++i;
    const size_t end = printed_size_end(t, i);
    if (end == std::string_view::npos) return std::nullopt;
    return t.substr(i, end - i);
  };
  // (A plain loop: find_first_of calls memchr on its set once per byte of the line, and every line
  // of a busy log comes here.)
  for (size_t p = 0; p + 3 <= t.size(); ++p) {
    if ((t[p] | 0x20) != 'm' || !has_word_at(t, p, "mem")) continue;
    // The name's start: (gpu|cuda)[_ ]? and max[_ ]? right before "mem", the longest (leftmost) chain.
    auto prefixed = [&](size_t at, std::initializer_list<std::string_view> words) -> size_t {
      for (std::string_view w : words) {
        if (at >= w.size() + 1 && (t[at - 1] == '_' || t[at - 1] == ' ') && has_word_at(t, at - 1 - w.size(), w)) {
          return at - 1 - w.size();
        }
        if (at >= w.size() && has_word_at(t, at - w.size(), w)) return at - w.size();
      }
      return at;
    };
    const size_t start = prefixed(prefixed(p, {"gpu", "cuda"}), {"max"});
    const size_t after_mem = p + 3;
    for (size_t base : {has_word_at(t, after_mem, "ory") ? after_mem + 3 : std::string_view::npos, after_mem}) {
      if (base == std::string_view::npos) continue;
      for (std::string_view suffix : {"allocated", "reserved", "usage", "used", "alloc", ""}) {
        size_t end = base;
        if (!suffix.empty()) {
          if (end >= t.size() || (t[end] != '_' && t[end] != ' ') || !has_word_at(t, end + 1, suffix)) continue;
          end += 1 + suffix.size();
        }
        if (auto size = value_after(end)) return ReadingText{t.substr(start, end - start), *size};
      }
    }
  }
  return std::nullopt;
}

}  // namespace

void LogScanner::State::add_reading(const std::string& line, uint64_t line_number, std::optional<int64_t> rank) {
  auto g = find_memory_reading(line);
  if (!g) return;
  auto q = parse_printed_size(g->size, LabelMeaning::kBinary);
  if (!q) return;
  if (result.readings.size() >= options.max_readings) {
    // Keep the series' shape within a bounded size: drop every other reading.
    std::vector<MemoryReading> kept;
    for (size_t i = 0; i < result.readings.size(); i += 2) kept.push_back(result.readings[i]);
    result.readings = std::move(kept);
  }
  result.readings.push_back({line_number, rank, std::string(g->name), q->bytes});
}

namespace {

// SGLang's static-pool share as the log states it: its command line ("--mem-fraction-static 0.9",
// "--mem-fraction-static=0.9"), its server_args dump ("server_args=ServerArgs(..., mem_fraction_static=0.88,
// ...)") or its own adjustment ("Automatically reduce --mem-fraction-static to 0.850 because this is a
// multimodal model."). Its advice ("set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
// "Please try to increase --mem-fraction-static.") names no value in use and is not read.

// A share of the card in (0, 1], the first group of `re` (the setting's spellings, then the number).
std::optional<double> card_share(const RE2& re, const std::string& line) {
  auto g = regex_search(re, line);
  if (!g) return std::nullopt;
  auto v = parse_decimal<double>((*g)[1]);
  if (!v || *v <= 0.0 || *v > 1.0) return std::nullopt;
  return v;
}

std::optional<double> sglang_mem_fraction_static(const std::string& line) {
  if (line.find("mem_fraction_static=") == std::string::npos && line.find("mem-fraction-static") == std::string::npos) {
    return std::nullopt;
  }
  static const RE2 re(R"((?:\bmem_fraction_static=|--mem-fraction-static(?:=| +| to ))((?:0?\.\d+|1(?:\.0+)?)\b))");
  return card_share(re, line);
}

// vLLM's gpu_memory_utilization as its startup prints it: the args Namespace
// ("gpu_memory_utilization=0.7"), the non-default args dict ("'gpu_memory_utilization': 0.7"),
// a JSON config, or the command line ("--gpu-memory-utilization 0.7").
std::optional<double> vllm_gpu_memory_utilization(const std::string& line) {
  if (line.find("emory_utilization") == std::string::npos && line.find("emory-utilization") == std::string::npos) {
    return std::nullopt;
  }
  static const RE2 re(
      R"((?:\bgpu_memory_utilization['"]?\s*[=:]\s*|--gpu[-_]memory[-_]utilization(?:=|\s+))((?:0?\.\d+|1(?:\.0+)?)\b))");
  return card_share(re, line);
}

}  // namespace

void LogScanner::State::add_notice(const std::string& line, uint64_t line_number, std::optional<int64_t> rank) {
  static constexpr size_t kMaxNotices = 1024;
  // torchrun ending the other workers after one failed ("Sending process 1235 closing signal
  // SIGKILL", torch/distributed/elastic/multiprocessing/api.py): their -9 is its doing, no OOM.
  if (line.find("closing signal SIGKILL") != std::string::npos) {
    static const RE2 re(R"(Sending process (\d+) closing signal SIGKILL)");
    if (auto g = regex_search(re, line)) {
      if (auto pid = parse_decimal<int64_t>((*g)[1]); pid && result.notices.size() < kMaxNotices) {
        result.notices.push_back({line_number, rank, "launcher_sent_sigkill", static_cast<double>(*pid)});
      }
    }
    return;
  }
  // A server's memory share as the log states it, each new value once (a restarted server,
  // SGLang's own reduction after the command line's): the diagnosis takes the last one before the error.
  auto add_setting = [&](const char* kind, double value) {
    for (auto it = result.notices.rbegin(); it != result.notices.rend(); ++it) {
      if (it->kind == kind && it->rank == rank) {
        if (it->value == value) return;
        break;
      }
    }
    if (result.notices.size() < kMaxNotices) result.notices.push_back({line_number, rank, kind, value});
  };
  if (auto utilization = vllm_gpu_memory_utilization(line)) return add_setting("vllm_gpu_memory_utilization", *utilization);
  // The allocator's settings as the launch line or an environment dump states them
  // ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True torchrun ...", PYTORCH_ALLOC_CONF in 2.8+).
  if (line.find("_ALLOC_CONF") != std::string::npos) {
    // (Only the CUDA and HIP names: up to 2.9.1 PyTorch reads expandable_segments from them alone,
    // pytorch#183387, so PYTORCH_ALLOC_CONF by itself may have done nothing.)
    // (Also as Python writes it: os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "...", a dict's repr.)
    static const RE2 expandable(R"(PYTORCH_(?:CUDA|HIP)_ALLOC_CONF["'\]]*\s*[=:]\s*["']?[^"'\s]*expandable_segments:(?i:true)\b)");
    if (RE2::PartialMatch(line, expandable)) return add_setting("expandable_segments_on", 1.0);
  }
  if (auto fraction = sglang_mem_fraction_static(line)) return add_setting("sglang_mem_fraction_static", *fraction);
  // transformers warns when flash attention gets fp32 states "because of upcasted embedding or
  // layer norm layers": "The input hidden states seems to be silently casted in float32" (until
  // 2024), "Casting fp32 inputs back to torch.bfloat16 for flash-attn compatibility." (since,
  // modeling_flash_attention_utils.py fa_peft_integration_check).
  const bool fp32_hidden = line.find("silently casted in float32") != std::string::npos ||
                           (line.find("Casting fp32 inputs back to") != std::string::npos &&
                            line.find("for flash-attn compat") != std::string::npos);
  if (!fp32_hidden) return;
  // The first per rank is what diagnosis needs (the warning repeats every step); ranks are few.
  for (const auto& n : result.notices) {
    if (n.kind == "fp32_hidden_states" && n.rank == rank) return;
  }
  if (result.notices.size() < kMaxNotices) result.notices.push_back({line_number, rank, "fp32_hidden_states"});
}

// Reads the message at the candidate `hit`. Returns false when more input is needed first.
bool LogScanner::State::process_candidate(size_t hit, bool eof, size_t* resume) {
  // The candidate line: from the last line break before the hit (also '\r': tqdm redraws) ...
  size_t ls = hit;
  // A line longer than kMaxLine is read from kLineLead before the keyword: the message around it,
  // not the start of the line (where the keyword would fall outside the window).
  const size_t back_limit = hit > kLineLead ? hit - kLineLead : 0;
  while (ls > back_limit && !is_break(buf[ls - 1])) --ls;
  // Inside a cut line, a message after an earlier one on the same line starts after it.
  if (ls == back_limit && ls > 0 && !is_break(buf[ls - 1]) && consumed_until > base + ls && consumed_until <= base + hit) {
    ls = static_cast<size_t>(consumed_until - base);
  }
  struct Segment {
    size_t start, end;
  };
  // Most candidates are ordinary lines that mention memory: look at the candidate line alone first,
  // and gather the following lines only when a message format is triggered.
  std::optional<std::vector<std::string>> record_strings;   // a JSON record's strings, decoded once
  {
    size_t end = ls;
    const size_t cap = std::min(buf.size(), ls + kMaxLine);
    while (end < cap && !is_break(buf[end])) ++end;
    if (end == buf.size() && !eof) return false;  // the line is not complete yet
    if (consumed(base + ls)) {
      *resume = end;
      return true;
    }
    std::string_view raw(buf.data() + ls, end - ls);
    // A JSON logger's record holds its strings on one line (json_record_lines): it takes the window
    // below.
    CleanLine c = clean_line(raw);
    const bool whole = !c.json_record;   // the cleaned line is all there is to read
    if (!whole) record_strings = json_record_lines(raw);
    // (A record is compared by its message string; not while its later strings are being read.)
    const bool repeats_last =
        quick_repeat_index != kNoQuickRepeat &&
        (whole ? !quick_repeat_json && c.rank == quick_repeat_rank && c.node == quick_repeat_node && c.text == quick_repeat_text
               : quick_repeat_json && record_strings && json_record_at != base + ls && json_repeats_last(*record_strings));
    if (repeats_last && result.events[quick_repeat_index].repeats >= 2) {
      OomEvent& same = result.events[quick_repeat_index];
      ++same.repeats;
      same.last_repeat_line = line_at(ls);
      consumed_until = base + end;
      *resume = end;
      return true;
    }
    bool triggered = holds_message(c.text);
    std::string context_text = std::move(c.text);   // what the line says when it holds no message
    if (!whole && !triggered) {
      // A JSON record: its strings (a message in another field, a traceback), read decoded.
      const auto& decoded = record_strings;
      bool keyword_seen = false;   // the context is the first string that holds the keyword
      for (size_t i = 0; decoded && i < decoded->size() && !triggered; ++i) {
        std::string text = clean_line((*decoded)[i]).text;
        triggered = holds_message(text);
        if (!keyword_seen && holds_keyword((*decoded)[i])) {
          keyword_seen = true;
          context_text = std::move(text);
        }
      }
      if (!decoded) triggered = true;   // (a record clean_line took for JSON but no reader does: read it in full)
    }
    if (!triggered) {
      add_context_line(context_text, line_at(ls), c.rank);
      *resume = end;
      return true;
    }
    // Past the event cap a message is counted, not read (a log of 100,000 distinct errors spent
    // most of its time reading the ones it would drop); only a print of the last event kept is
    // read, as the repeat it may be.
    if (triggered && !repeats_last && result.events.size() >= options.max_events) {
      // A JSON record counts each of its lines that holds a trigger, as the plain lines would (one
      // whose first messages were read before the cap, from the string after them).
      uint64_t message_lines = 1;
      if (!whole) {
        if (const auto& decoded = record_strings) {
          const size_t done = json_record_at == base + ls ? std::min(json_strings_done, decoded->size()) : 0;
          message_lines = static_cast<uint64_t>(std::count_if(decoded->begin() + static_cast<std::ptrdiff_t>(done), decoded->end(),
                                                              [](const std::string& l) { return holds_trigger(clean_line(l).text); }));
          if (done == 0) message_lines = std::max<uint64_t>(message_lines, 1);
        }
      }
      if (message_lines > 0) result.events_truncated = true;
      result.messages_beyond_cap += message_lines;
      quick_repeat_index = kNoQuickRepeat;   // a message came between: no later line repeats the last
      consumed_until = base + end;
      *resume = end;
      return true;
    }
  }
  // ... over the lines a message can wrap onto.
  std::vector<Segment> segments;
  std::vector<const CleanLine*> cleaned;   // the segments' lines cleaned so far
  begin_window(ls);
  std::optional<int64_t> first_rank;
  std::string first_node;
  size_t own_lines = 0, own_bytes = 0;   // the segments of the first line's rank (or of none)
  size_t pos = ls;
  bool complete = false;
  while (own_lines < kWindowLines && segments.size() < kWindowLines * kMaxInterleavedRanks) {
    size_t end = pos;
    const size_t cap = std::min(buf.size(), pos + kMaxLine);
    while (end < cap && !is_break(buf[end])) ++end;
    if (end == buf.size() && !eof) return false;  // the line is not complete yet
    segments.push_back({pos, end});
    // Without a rank on the first line every line is its own; with one, each line is cleaned here
    // to tell (the rest are cleaned below, when read).
    if (segments.size() == 1 || first_rank || !first_node.empty()) {
      cleaned.push_back(&clean_ahead(pos, end));
      if (segments.size() == 1) {
        first_rank = cleaned.front()->rank;
        first_node = cleaned.front()->node;
      }
    }
    if ((!first_rank || !cleaned.back()->rank || cleaned.back()->rank == first_rank) &&
        (first_node.empty() || cleaned.back()->node.empty() || cleaned.back()->node == first_node)) {
      ++own_lines;
      own_bytes += end - pos;
    }
    if (end >= buf.size()) {
      complete = true;
      break;
    }
    size_t next = end;
    if (next < buf.size() && is_break(buf[next])) {
      if (buf[next] == '\r' && next + 1 < buf.size() && buf[next + 1] == '\n') ++next;
      ++next;
    }
    pos = next;
    if (own_bytes > kWindowBytes || pos - ls > kWindowBytes * kMaxInterleavedRanks / 8) {
      complete = true;
      break;
    }
  }
  if (!complete && own_lines < kWindowLines && segments.size() < kWindowLines * kMaxInterleavedRanks && !eof) return false;

  const Segment first = segments.front();
  *resume = first.end;
  if (consumed(base + first.start)) return true;  // part of an earlier message

  const uint64_t line_number = line_at(first.start);
  std::vector<std::string> lines;
  std::vector<std::string> prefix_programs;  // the program each line's prefix names (readers/application.h)
  std::vector<uint64_t> line_numbers;
  std::vector<uint64_t> end_numbers;         // the last physical line of each (a glued hard-wrapped run ends lower)
  std::vector<size_t> end_segments;          // the last segment each window line comes from
  std::vector<bool> other_rank(segments.size(), false);   // segments left out: another rank's lines
  std::optional<int64_t> rank;
  std::string node;
  bool rank_is_worker = false;
  std::vector<std::string> json_above;  // decoded lines before the keyword (a traceback)
  bool from_json = false;
  size_t json_start = 0, json_strings = 0;   // the record's string the window starts at, and its count
  // After this window, come back to the record for its strings past the first `done`.
  auto revisit_record = [&](size_t done) {
    if (!from_json || done >= json_strings) return false;
    json_record_at = base + first.start;
    json_strings_done = done;
    *resume = hit + 1;
    return true;
  };
  // (The record the candidate line holds, read above: the window's first segment is that line.)
  if (const auto& decoded = record_strings) {
    from_json = true;
    // A JSON-lines record: its strings form the window, all on this one physical line, starting
    // at the string line that holds the keyword.
    // A record may hold several messages (a log shipper's merge of many lines): after one is read,
    // the scan comes back to the record for the strings after it.
    const size_t begin = json_record_at == base + first.start ? json_strings_done : 0;
    size_t start = decoded->size();
    for (size_t i = begin; i < decoded->size(); ++i) {
      if (holds_keyword((*decoded)[i])) {
        start = i;
        break;
      }
    }
    if (start == decoded->size()) return true;   // no (further) string of the record holds a keyword
    json_start = start;
    json_strings = decoded->size();
    std::vector<CleanLine> above;   // the record's lines before the keyword
    for (size_t i = 0; i < decoded->size(); ++i) {
      CleanLine c = clean_line((*decoded)[i]);
      if (i < start) {
        above.push_back(std::move(c));
        continue;
      }
      prefix_programs.push_back(application_from_prefix(c));
      lines.push_back(std::move(c.text));
      line_numbers.push_back(line_number);
      end_numbers.push_back(line_number);
      end_segments.push_back(0);
      if (!rank) rank = c.rank;
    }
    // Ranks' lines merged into one record: the traceback is the message's own rank's.
    for (CleanLine& c : above) {
      if (!rank || !c.rank || c.rank == rank) json_above.push_back(std::move(c.text));
    }
  }
  // The lines after it (after a JSON record: the next few records, their messages: a logger
  // writes a message of several lines, llama.cpp's, one record a line).
  {
    uint64_t n = line_number;
    // After a JSON record the next records' messages may hold many lines each (a traceback
    // apiece): the window stops at the lines and bytes a plain window holds.
    size_t json_bytes = 0;
    for (size_t i = from_json ? 1 : 0;
         i < segments.size() && !(from_json && (lines.size() >= kWindowLines || json_bytes > kWindowBytes)); ++i) {
      if (i > 0) {
        n += count_newlines(buf.data() + segments[i - 1].end, segments[i].start - segments[i - 1].end);
      }
      if (i >= cleaned.size()) cleaned.push_back(&clean_ahead(segments[i].start, segments[i].end));
      const CleanLine& c = *cleaned[i];
      if (i == 0) {
        rank = c.rank;
        node = c.node;
        rank_is_worker = c.rank_is_worker;
      }
      // Ranks printing at once interleave their lines ("[rank0]: ..." / "[rank1]: ..."): a message
      // continues on its own rank's lines only, and on lines without a prefix (a terminal's wrap)
      // unless they start a logger's record (the launcher's own warning between a rank's lines).
      // (So do nodes: pdsh's "worker-0: " and "worker-1: ".)
      const bool other_node = !node.empty() && !c.node.empty() && c.node != node;
      if (i > 0 && (other_node || (rank && ((c.rank && c.rank != rank) || (!c.rank && c.log_record))))) {
        other_rank[i] = true;
        continue;
      }
      const std::string program = application_from_prefix(c);
      // A record of Rich's log renderer (RichHandler) wraps its message inside the message column:
      // its later lines are indented to that column and padded after it. The message is its text.
      if (i > 0 && !from_json && cleaned[0]->rich_message_column > 0 && !c.log_record) {
        std::string_view text = c.text;
        size_t indent = 0;
        while (indent < text.size() && indent < cleaned[0]->rich_message_column && text[indent] == ' ') ++indent;
        text.remove_prefix(indent);
        while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
        lines.emplace_back(text);
        json_bytes += lines.back().size();
        prefix_programs.push_back(program);
        line_numbers.push_back(n);
        end_numbers.push_back(n);
        end_segments.push_back(i);
        continue;
      }
      for (size_t from = 0;;) {
        const size_t nl = from_json ? c.text.find('\n', from) : std::string::npos;
        lines.push_back(c.text.substr(from, nl == std::string::npos ? std::string::npos : nl - from));
        json_bytes += lines.back().size();
        prefix_programs.push_back(program);
        line_numbers.push_back(n);
        end_numbers.push_back(n);
        end_segments.push_back(i);
        if (nl == std::string::npos) break;
        from = nl + 1;
      }
    }
  }
  if (lines.empty()) return true;
  // A message quoted as a string literal: its lines, all on this one physical line.
  if (!from_json) {
    std::vector<std::string> parts = split_escaped_newlines(lines[0]);
    if (!parts.empty()) {
      lines.erase(lines.begin());
      lines.insert(lines.begin(), parts.begin(), parts.end());
      line_numbers.insert(line_numbers.begin(), parts.size() - 1, line_numbers.front());
      end_numbers.insert(end_numbers.begin(), parts.size() - 1, line_numbers.front());
      end_segments.insert(end_segments.begin(), parts.size() - 1, end_segments.front());
      prefix_programs.insert(prefix_programs.begin(), parts.size() - 1, prefix_programs.front());
    }
  }
  // The source line Python echoes under a traceback frame (`File "...", line N, in f` then the
  // code, indented) is code, not a message: `raise RuntimeError("CUDA out of memory. ...")`.
  if (!from_json && is_source_echo(first.start, lines[0])) {
    add_context_line(lines[0], line_numbers[0], rank);
    return true;
  }

  const std::string candidate_line = lines[0];
  // A terminal's hard wrap does not start a logger's record (with its level: `kubectl logs
  // --timestamps` stamps every physical line): the lines that may continue the first one cut at a
  // fixed width end before the first that does (MessageWindow::continuable_lines).
  size_t continuable = SIZE_MAX;
  for (size_t i = 1; !from_json && i < lines.size(); ++i) {
    const size_t segment = end_segments[i];
    if (segment > 0 && segment < cleaned.size() && cleaned[segment]->logger_record) {
      continuable = i;
      break;
    }
  }
  // The first line as printed (colour codes aside), its prefix included: the width a terminal cut
  // it at, when cleaning took a prefix off.
  // Only for a record's prefix (a timestamp, journald's) on the first line alone, the lines after it
  // kept whole; lines that all lose one compare as cleaned.
  size_t first_width = 0;
  // (Not a Rich record's: its later lines are indented to the message column, not cut at a width.)
  if (!from_json && segments.size() > 1 && cleaned.size() > 1 && cleaned[0]->log_record && cleaned[0]->rich_message_column == 0) {
    const Segment second = segments[1];
    const size_t second_printed = strip_ansi(std::string_view(buf.data() + second.start, second.end - second.start)).size();
    if (second_printed == cleaned[1]->text.size()) {
      first_width = strip_ansi(std::string_view(buf.data() + first.start, first.end - first.start)).size();
    }
  }
  // (A line glued from a hard-wrapped run ends lower too.)
  size_t glued_lines = 0;  // physical lines the glued first line holds beyond one
  bool glued_reads_whole = false;   // the first reading was cut short, and the glued one is whole
  for (int reading = 0; reading < 2; ++reading) {
    if (reading == 1) {
      // Nothing matched: a message hard-wrapped at a fixed width reads only with its lines glued
      // back together (formats/message_format.h) when the cut fell inside a trigger ("CUDA ou" /
      // "t of memory.") or inside what the format reads ("shape[128,3,8," / "8,128]", "KV cach" /
      // "e is needed"). Glued when at least two lines share the width; for two lines (of which
      // only the first is full: they may be two unrelated lines), when the cut made a trigger
      // whole, or a triggered line was cut inside a word.
      const size_t run = hard_wrapped_run(lines, continuable, first_width);   // (lines of JSON records too: a logger writes what it is given)
      if (run < 2) break;
      std::vector<std::string> glued = glue_hard_wrapped(lines, run);
      auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
      const bool cut_in_word = !lines[1].empty() && word_char(candidate_line.back()) && word_char(lines[1].front());
      const bool trigger_made_whole = ends_with_trigger_start(candidate_line) && trigger_crosses(glued[0], candidate_line.size());
      if (!glued_reads_whole && run < 3 && !trigger_made_whole && !(cut_in_word && holds_trigger(candidate_line))) break;
      // A second line that a format reads as a message of its own is the next message, not the
      // rest of this one (llama.cpp's "failed to allocate compute buffers", then
      // "ggml_backend_cuda_...: allocating 9866.00 MiB on device 1: cudaMalloc failed").
      if (!glued_reads_whole && run < 3 && !trigger_made_whole && holds_trigger(lines[1]) &&
          reads_as_message(std::vector<std::string>(lines.begin() + 1, lines.end()))) {
        break;
      }
      lines = std::move(glued);
      end_numbers.erase(end_numbers.begin(), end_numbers.begin() + static_cast<std::ptrdiff_t>(run - 1));
      end_segments.erase(end_segments.begin(), end_segments.begin() + static_cast<std::ptrdiff_t>(run - 1));
      line_numbers.erase(line_numbers.begin() + 1, line_numbers.begin() + static_cast<std::ptrdiff_t>(run));
      prefix_programs.erase(prefix_programs.begin() + 1, prefix_programs.begin() + static_cast<std::ptrdiff_t>(run));
      glued_lines = run - 1;
      continuable = continuable_after_glue(continuable, run);
    }
    MessageWindow window = MessageWindow::from_lines(lines);
    window.continuable_lines = continuable;
    if (glued_lines == 0) window.first_line_width = first_width;
    for (const MessageFormat& format : message_formats()) {
      if (!window.first_line_triggers(format)) continue;
      std::optional<FormatMatch> match = format.match(window);
      if (!match) continue;
      // A message read as cut short whose lines a fixed width cut (a first line shorter by the
      // prefix taken off: journald's, syslog's) may read whole glued: the glued reading is taken
      // when it gives the message, not another cut one.
      if (reading == 0 && match->event.format.ends_with("_truncated")) {
        const size_t run = hard_wrapped_run(lines, continuable, first_width);
        // (Three lines or more: two may be two messages, which the glued reading's own checks tell.)
        if (run >= 3 && reads_whole(glue_hard_wrapped(lines, run), continuable_after_glue(continuable, run))) {
          glued_reads_whole = true;
          break;   // to the glued reading
        }
      }
      OomEvent& event = match->event;
      const size_t used = std::clamp<size_t>(match->lines_used, 1, lines.size());
      event.line = line_numbers[0];
      event.end_line = end_numbers[used - 1];
      if (glued_lines > 0) event.set_field("hard_wrapped", true);
      if (!event.rank) event.rank = rank;
      if (!node.empty()) event.set_field("node", node);
      if (rank_is_worker && rank && !event.field("worker_rank")) event.set_field("worker_rank", *rank);
      // The process that printed the message, as its line's prefix names it.
      const std::string& printed_by = prefix_programs[0];
      if (printed_by == kAppVllm && event.framework != "vllm") event.set_field("vllm_process", true);
      if (auto worker = event.int_field("worker_rank"); worker && !event.rank) event.rank = worker;
      event.message = join_lines(lines, used);
      // Ray's log deduplication prints one line for N occurrences across the cluster: "... [repeated
      // 7x across cluster]". The suffix is not part of the message; N counts as N prints.
      const uint64_t ray_count = ray_repeat_count(event.message);
      // The physical lines the message took. Another rank's lines between them stay to be read:
      // the scan resumes before the first of those, and this message's lines after it are marked.
      const size_t last_segment = std::min(end_segments[used - 1], segments.size() - 1);
      size_t unbroken = last_segment;
      for (size_t i = 1; i <= last_segment; ++i) {
        if (other_rank[i]) {
          unbroken = i - 1;
          break;
        }
      }
      bool launcher_summary = false;
      // A repeat is counted without reading the 32 KiB above it again (a retry loop can print the
      // same OOM thousands of times); its traceback is read only if the first print had none.
      if (OomEvent* same = find_repeat(event)) {
        // The second print may be the raised one, with the traceback the logged one lacked.
        if (!same->traceback && same->repeats == 1) same->traceback = traceback_above(first.start, rank, node, json_above);
      } else {
        const ContextLines above = lines_above(first.start, rank, node, json_above);
        event.traceback = parse_traceback(above.text);
        // (A SIGKILL's summary lines are joined by its pid, with the launcher's own line that has no rank.)
        if (!event.rank && !from_json && event.format != "process_killed") {
          if (auto summarized = torchrun_summary_rank(above.text, candidate_line)) {
            event.rank = summarized;
            launcher_summary = true;
          }
        }
        // llama.cpp's Metal backend may name itself on the line before the driver's words
        // ("ggml_metal_graph_compute: command buffer 6 failed with status 5", then "error:
        // Insufficient Memory (...)"; ggml-org/llama.cpp#7010) as well as on the line after.
        if (event.format == "metal_insufficient_memory" && event.framework == "metal") {
          const size_t n = above.text.size();
          for (size_t k = n > 2 ? n - 2 : 0; k < n; ++k) {
            if (above.text[k].find("ggml_metal") != std::string::npos) event.framework = "llama.cpp";
          }
        }
        if (event.framework == "llama.cpp") read_llama_settings(above.text, event);
        // Which program failed, for fixes in its own settings (readers/application.h decides).
        const ContextLines after{std::vector<std::string>(lines.begin() + static_cast<long>(used), lines.end()),
                                 std::vector<std::string>(prefix_programs.begin() + static_cast<long>(used), prefix_programs.end())};
        const std::string app = detect_application(above, event, after, printed_by);
        if (!app.empty()) event.set_field("application", app);
        if (app == "vllm" || event.framework == "vllm") {
          if (std::string phase = vllm_phase_from_lines(above.text, event); !phase.empty()) event.set_field("vllm_phase", phase);
        }
        if (!event.traceback || event.traceback->operation.empty()) {
          if (std::string op = operation_from_lines(above.text, event); !op.empty()) event.set_field("log_operation", op);
        }
      }
      consumed_until = base + segments[unbroken].end;
      *resume = segments[unbroken].end;
      if (end_segments[used - 1] == 0 && revisit_record(json_start + used)) consumed_until = base + first.start;
      for (size_t i = unbroken + 1; i <= last_segment; ++i) {
        if (!other_rank[i]) consumed_lines.push_back(base + segments[i].start);
      }
      // (A JSON record's message qualifies when it is the record's one message: the record's later
      // strings, which the scan comes back for, hold no keyword.)
      bool one_line = used == 1 && glued_lines == 0 && ray_count == 0;
      if (one_line && from_json) {
        const auto& decoded = *record_strings;
        one_line = std::none_of(decoded.begin() + static_cast<std::ptrdiff_t>(json_start + 1), decoded.end(),
                                [](const std::string& s) { return holds_keyword(s); });
      }
      std::string first_text = one_line ? lines[0] : std::string();
      OomEvent* kept = add_event(std::move(event), launcher_summary);
      if (kept != nullptr && ray_count > 1) {
        kept->repeats = kept->repeats > UINT64_MAX - (ray_count - 1) ? UINT64_MAX : kept->repeats + (ray_count - 1);
        if (kept->last_repeat_line == 0) kept->last_repeat_line = line_number;
      }
      // A line equal to this one may be counted before any matching (from its third print on).
      if (kept != nullptr && one_line) {
        quick_repeat_index = static_cast<size_t>(kept - result.events.data());
        quick_repeat_text = std::move(first_text);
        quick_repeat_rank = rank;
        quick_repeat_node = node;
        quick_repeat_json = from_json;
      }
      return true;
    }
  }
  add_context_line(candidate_line, line_numbers[0], rank);
  revisit_record(json_start + 1);
  return true;
}

// The cleaned lines above the exception line at buffer offset `start` (same rank only when ranks
// interleave), and the lines a JSON-lines record held above the keyword: where its Python
// traceback is.
ContextLines LogScanner::State::lines_above(size_t start, std::optional<int64_t> rank, const std::string& node,
                                            std::vector<std::string>& json_above) {
  const size_t back_start = start > kBackContext ? start - kBackContext : 0;
  size_t s = back_start;
  if (back_start > 0) {
    while (s < start && buf[s] != '\n') ++s;
    ++s;
  }
  // Reuse the lines cleaned for an earlier event when this window starts inside them and ends after.
  auto& cache = cleaned_above;
  while (!cache.empty() && cache.front().start < base + s) cache.pop_front();
  if (!cache.empty() && (cache.front().start != base + s || cache.back().end > base + start)) cache.clear();
  if (!cache.empty()) s = static_cast<size_t>(cache.back().end - base) + 1;
  std::optional<CleanedLine> unfinished;   // text before `start` on its own line: not cached
  while (s < start) {
    size_t e = s;
    while (e < start && buf[e] != '\n') ++e;
    CleanLine c = clean_line(std::string_view(buf.data() + s, e - s));
    CleanedLine line{base + s, base + e, c.rank, c.node, application_from_prefix(c), "", ""};
    // vLLM logs each traceback line through its logger ("ERROR 06-05 06:18:13 [multiproc_executor.py:470]
    // File ..."): without that prefix the frames read as Python printed them.
    line.text = std::string(strip_logger_prefix(c.text));
    line.line_program = application_from_line(line.text, line.prefix_program);
    if (e < start) {
      cache.push_back(std::move(line));
    } else {
      unfinished = std::move(line);
    }
    s = e + 1;
  }
  ContextLines above;
  auto add = [&](const CleanedLine& line) {
    if (rank && line.rank && line.rank != rank) return;
    if (!node.empty() && !line.node.empty() && line.node != node) return;
    std::string_view text = line.text;
    // A JSON logger's message may hold several lines (a traceback logged as one message).
    for (size_t from = 0;;) {
      const size_t nl = text.find('\n', from);
      above.text.emplace_back(text.substr(from, nl == std::string_view::npos ? std::string_view::npos : nl - from));
      above.prefix_program.push_back(line.prefix_program);
      above.line_program.push_back(line.line_program);
      if (nl == std::string_view::npos) break;
      from = nl + 1;
    }
  };
  for (const CleanedLine& line : cache) add(line);
  if (unfinished) add(*unfinished);
  for (auto& l : json_above) {
    above.text.push_back(std::move(l));
    above.prefix_program.emplace_back();
    above.line_program.emplace_back();
  }
  return above;
}

void LogScanner::State::process(bool eof) {
  const KeywordFilter& filter = KeywordFilter::standard();
  while (true) {
    size_t hit = filter.find(buf, scan_pos);
    if (hit == std::string::npos) {
      // Keep the tail: a keyword may straddle this chunk and the next.
      scan_pos = eof ? buf.size() : std::max(scan_pos, buf.size() > 32 ? buf.size() - 32 : size_t{0});
      break;
    }
    size_t resume = hit + 1;
    if (!process_candidate(hit, eof, &resume)) {
      // Wait for the rest of the message.
      size_t ls = hit;
      while (ls > scan_pos && !is_break(buf[ls - 1])) --ls;
      scan_pos = ls;
      break;
    }
    scan_pos = std::max(resume, hit + 1);
  }
  if (buf.size() > kCompactAt) compact();
}

void LogScanner::State::compact() {
  // Keep enough text above the scan position for the next event's traceback.
  size_t keep_from = scan_pos > kBackContext ? scan_pos - kBackContext : 0;
  if (keep_from == 0) return;
  line_at(keep_from);
  buf.erase_front(keep_from);
  base += keep_from;
  scan_pos -= keep_from;
  counted_pos -= keep_from;
}

LogScanner::LogScanner(ScanOptions options) : state_(new State) { state_->options = options; }
LogScanner::~LogScanner() { delete state_; }

void LogScanner::State::take(std::string_view chunk, bool eof) {
  if (!sniffed) {
    // The first line with text says whether this is a container runtime's file.
    head_pending.append(chunk);
    const size_t text = head_pending.find_first_not_of(" \t\r\n");
    const bool line_done = text != std::string::npos && head_pending.find('\n', text) != std::string::npos;
    if (!eof && !line_done && head_pending.size() < kSniffBytes) return;
    sniffed = true;
    if (auto kind = sniff_container_log(head_pending)) container.emplace(*kind);
    // A UTF-8 BOM (Windows editors and tools write one) is no text of the log's first line.
    if (head_pending.starts_with("\xef\xbb\xbf")) head_pending.erase(0, 3);
    const std::string head = std::move(head_pending);
    head_pending = std::string();
    take(head, eof);
    return;
  }
  if (!container) {
    buf.append(chunk.data(), chunk.size());
    return;
  }
  decoded.clear();
  container->decode(chunk, decoded);
  if (eof) container->finish(decoded);
  buf.append(decoded.data(), decoded.size());
}

void LogScanner::feed(std::string_view chunk) {
  state_->result.bytes_scanned += chunk.size();
  state_->take(chunk, false);
  if (state_->buf.size() - state_->scan_pos >= (256u << 10)) state_->process(false);
}

size_t LogScanner::feed_from(InputFile& input, size_t max_bytes) {
  size_t n = 0;
  if (state_->sniffed && !state_->container) {
    // A plain log is read straight into the buffer (no extra copy).
    n = input.read(state_->buf.tail(max_bytes), max_bytes);
    state_->buf.commit(n);
  } else {
    std::string& raw = state_->raw;
    raw.resize(max_bytes);
    n = input.read(raw.data(), max_bytes);
    state_->take(std::string_view(raw.data(), n), false);
  }
  state_->result.bytes_scanned += n;
  if (n > 0) state_->process(false);
  return n;
}

void LogScanner::finish() {
  state_->take({}, true);
  state_->process(true);
  state_->line_at(state_->buf.size());
  uint64_t lines = state_->counted_line - 1;
  if (!state_->buf.empty() && state_->buf.back() != '\n') ++lines;
  state_->result.lines = lines;
}

const ScanResult& LogScanner::result() const { return state_->result; }
ScanResult LogScanner::take_result() { return std::move(state_->result); }

ScanResult scan_text(std::string_view text, ScanOptions options) {
  LogScanner scanner(options);
  // In pieces, so the scan buffer stays small and cache-resident.
  constexpr size_t kPiece = 1u << 20;
  for (size_t at = 0; at < text.size(); at += kPiece) scanner.feed(text.substr(at, kPiece));
  scanner.finish();
  return scanner.take_result();
}

Result<ScanResult> scan_file(const std::string& path, ScanOptions options) {
  auto input = InputFile::open(path);
  if (!input) return input.error();
  InputFile& in = **input;
  LogScanner scanner(options);
  constexpr size_t kChunk = 128u << 10;
  // The first chunk decides what the input is: a pickle, a binary file, UTF-16 or UTF-8 text.
  std::string first(kChunk, '\0');
  size_t got = 0;
  while (got < first.size()) {
    size_t n = in.read(first.data() + got, first.size() - got);
    if (n == 0) break;
    got += n;
  }
  first.resize(got);
  std::string_view head = std::string_view(first).substr(0, 8192);
  if (head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x80 && head[1] >= 2 && head[1] <= 5) {
    return make_error(fmt::format("{}: a Python pickle, not a log (a PyTorch memory snapshot? try 'oomdoc snapshot {}')",
                                  in.display_name(), path));
  }
  // UTF-32 (a BOM, FF FE 00 00 or 00 00 FE FF): rare enough that it is refused with the way out,
  // not read as UTF-16 full of NULs and reported as a log without errors.
  if (head.size() >= 4 && (head.substr(0, 4) == std::string_view("\xff\xfe\x00\x00", 4) ||
                           head.substr(0, 4) == std::string_view("\x00\x00\xfe\xff", 4))) {
    return make_error(fmt::format("{}: UTF-32 text, which explain does not read; convert it first: iconv -f UTF-32 "
                                  "-t UTF-8 '{}' > '{}.utf8.log'", in.display_name(), path, path));
  }
  const std::optional<Utf16> utf16 = utf16_order(head);
  if (!utf16) {
    if (auto kind = binary_kind(head)) {
      return make_error(fmt::format("{}: binary file ({}), not a text log", in.display_name(), *kind));
    }
    scanner.feed(first);
    first = std::string();
    while (scanner.feed_from(in, kChunk) != 0) {
    }
  } else {
    // Transcoded piece by piece to UTF-8: the scanner sees the same text a UTF-8 log would give.
    Utf16Decoder decoder(*utf16);
    std::string text;
    decoder.decode(first, text);
    scanner.feed(text);
    while (true) {
      size_t n = in.read(first.data(), first.size());
      if (n == 0) break;
      text.clear();
      decoder.decode(std::string_view(first.data(), n), text);
      scanner.feed(text);
    }
  }
  if (in.failed()) return make_error(in.error_message());
  scanner.finish();
  ScanResult result = scanner.take_result();
  result.input = in.display_name();
  return result;
}

}  // namespace oomdoc
