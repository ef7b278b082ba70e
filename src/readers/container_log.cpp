#include "readers/container_log.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

#include "core/text.h"

namespace oomdoc {
namespace {

// A line split by its runtime is joined up to this size, then written as it is (a program that
// never ends its line: a progress bar, a hostile file); the scanner reads long lines in windows.
constexpr size_t kMaxJoinedLine = 1u << 20;
// Lines held behind one still waiting for its next part (the other stream kept writing).
constexpr size_t kMaxHeldBytes = 4u << 20;
constexpr size_t kMaxHeldLines = 1u << 16;
// An input line longer than kMaxContainerRecordLine is no record: it is written through as it comes.
constexpr size_t kMaxRecordLine = kMaxContainerRecordLine;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<uint32_t> read_hex4(std::string_view s, size_t at) {
  if (at + 4 > s.size()) return std::nullopt;
  uint32_t v = 0;
  for (size_t k = 0; k < 4; ++k) {
    const int d = hex_value(s[at + k]);
    if (d < 0) return std::nullopt;
    v = v << 4 | static_cast<uint32_t>(d);
  }
  return v;
}

// Decodes the JSON string body at s[i...] (after its opening quote) into `out`; on success `i` is
// past the closing quote. Docker writes Go's encoding/json escapes: \n \t \" \\, \u003c for <, >
// and &, \u00XX for other control bytes, surrogate pairs beyond the BMP.
bool read_json_string(std::string_view s, size_t& i, std::string& out) {
  // The next quote and the next backslash by memchr: most of a record is plain text.
  size_t quote = 0;
  bool quote_known = false;
  while (i < s.size()) {
    if (!quote_known || quote < i) {
      const void* q = std::memchr(s.data() + i, '"', s.size() - i);
      quote = q ? static_cast<size_t>(static_cast<const char*>(q) - s.data()) : s.size();
      quote_known = true;
    }
    const void* b = std::memchr(s.data() + i, '\\', quote - i);
    const size_t j = b ? static_cast<size_t>(static_cast<const char*>(b) - s.data()) : quote;
    out.append(s.data() + i, j - i);
    i = j;
    if (i >= s.size()) return false;
    if (s[i] == '"') {
      ++i;
      return true;
    }
    if (i + 1 >= s.size()) return false;
    const char e = s[i + 1];
    i += 2;
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case '"': case '\\': case '/': out += e; break;
      case 'u': {
        auto unit = read_hex4(s, i);
        if (!unit) return false;
        i += 4;
        uint32_t cp = *unit;
        if (cp >= 0xd800 && cp <= 0xdbff) {
          // A high surrogate pairs with a following \uDC00-\uDFFF; alone it is U+FFFD.
          auto low = s.substr(i, 2) == "\\u" ? read_hex4(s, i + 2) : std::nullopt;
          if (low && *low >= 0xdc00 && *low <= 0xdfff) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (*low - 0xdc00);
            i += 6;
          } else {
            cp = 0xfffd;
          }
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
          cp = 0xfffd;
        }
        char bytes[4];
        out.append(bytes, static_cast<size_t>(write_utf8(cp, bytes) - bytes));
        break;
      }
      default: return false;
    }
  }
  return false;
}

// The line break ending a record's "log" (`out` from `from` on) says the line is whole: it comes
// off, with a CRLF's '\r'; none says the next record of the stream holds the rest.
bool strip_line_end(std::string& out, size_t from) {
  if (out.size() == from || out.back() != '\n') return false;
  out.pop_back();
  if (out.size() > from && out.back() == '\r') out.pop_back();
  return true;
}

// A record of the stream; a line break before the end of its "log" is no runtime's record.
std::optional<ContainerRecord> docker_record(std::string payload, std::string stream) {
  ContainerRecord r;
  // The driver writes only these two; any other name shares one bucket, so that the parts held
  // stay a handful whatever a file claims.
  if (stream != "stdout" && stream != "stderr") stream = "other";
  r.partial = !strip_line_end(payload, 0);
  if (payload.find('\n') != std::string::npos) return std::nullopt;
  r.payload = std::move(payload);
  r.stream = std::move(stream);
  return r;
}

// The RFC 3339 time a CRI record starts with ("2024-05-01T10:00:00.123456789Z", "+02:00"
// offsets): its length, 0 without one (core/text.h timestamp_length, with the 'T' RFC 3339 puts).
size_t rfc3339_length(std::string_view s) {
  const size_t n = timestamp_length(s);
  return n > 10 && s[10] == 'T' ? n : 0;
}

// A CRI record's parts, as views into `line`: "<time> <stream> <P|F> <text>".
struct CriParts {
  std::string_view stream, payload;
  bool partial = false;
};
std::optional<CriParts> split_cri(std::string_view line) {
  const size_t t = rfc3339_length(line);
  if (t == 0) return std::nullopt;
  std::string_view rest = line.substr(t);
  if (!rest.starts_with(" stdout ") && !rest.starts_with(" stderr ")) return std::nullopt;
  CriParts parts;
  parts.stream = rest.substr(1, 6);
  rest.remove_prefix(8);
  if (rest.empty() || (rest[0] != 'F' && rest[0] != 'P') || (rest.size() > 1 && rest[1] != ' ')) return std::nullopt;
  parts.partial = rest[0] == 'P';
  rest.remove_prefix(std::min<size_t>(2, rest.size()));
  if (!parts.partial && !rest.empty() && rest.back() == '\r') rest.remove_suffix(1);   // a CRLF line end
  parts.payload = rest;
  return parts;
}

// The json-file driver's own layout, {"log":"...","stream":"...",...}, read without a JSON parser
// (every line of a container's output): the decoded "log" is appended to `out` and the stream
// named; nullopt, and `out` as it was, for any other line.
std::optional<std::string_view> read_docker_layout(std::string_view line, std::string& out) {
  static constexpr std::string_view kLog = "{\"log\":\"", kStream = ",\"stream\":\"";
  if (!line.starts_with(kLog) || !line.ends_with("}")) return std::nullopt;
  const size_t mark = out.size();
  size_t i = kLog.size();
  if (read_json_string(line, i, out) && line.substr(i).starts_with(kStream)) {
    const size_t from = i + kStream.size();
    const size_t close = line.find('"', from);
    if (close != std::string_view::npos) return line.substr(from, close - from);
  }
  out.resize(mark);
  return std::nullopt;
}

}  // namespace

std::optional<ContainerRecord> parse_cri_record(std::string_view line) {
  auto parts = split_cri(line);
  if (!parts) return std::nullopt;
  return ContainerRecord{std::string(parts->payload), std::string(parts->stream), parts->partial};
}

std::optional<ContainerRecord> parse_docker_record(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  std::string payload;
  if (auto stream = read_docker_layout(line, payload)) return docker_record(std::move(payload), std::string(*stream));
  // Anything else shaped like a record (other key order, spaces): a JSON parser reads it.
  const size_t first = line.find_first_not_of(" \t");
  if (first == std::string_view::npos || line[first] != '{' || line.back() != '}') return std::nullopt;
  const nlohmann::json doc = nlohmann::json::parse(line.substr(first), nullptr, false);
  if (!doc.is_object()) return std::nullopt;
  const auto log = doc.find("log");
  const auto stream = doc.find("stream");
  if (log == doc.end() || !log->is_string() || stream == doc.end() || !stream->is_string()) return std::nullopt;
  return docker_record(log->get<std::string>(), stream->get<std::string>());
}

std::optional<ContainerLogKind> sniff_container_log(std::string_view head) {
  if (head.starts_with("\xef\xbb\xbf")) head.remove_prefix(3);   // a UTF-8 BOM
  size_t at = 0;
  while (at < head.size()) {
    size_t end = head.find('\n', at);
    if (end == std::string_view::npos) end = head.size();
    std::string_view line = head.substr(at, end - at);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) {
      if (parse_cri_record(line)) return ContainerLogKind::kKubernetesCri;
      if (parse_docker_record(line)) return ContainerLogKind::kDockerJsonFile;
      return std::nullopt;
    }
    at = end + 1;
  }
  return std::nullopt;
}

void ContainerLogDecoder::decode(std::string_view in, std::string& out) {
  size_t pos = 0;
  while (pos < in.size()) {
    const void* nl = std::memchr(in.data() + pos, '\n', in.size() - pos);
    const size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - in.data()) : in.size();
    const std::string_view piece = in.substr(pos, end - pos);
    if (carry_is_raw_) {
      out.append(piece);
    } else if (!nl) {
      carry_.append(piece);
      if (carry_.size() > kMaxRecordLine) {
        close_all(out);
        out += carry_;
        carry_.clear();
        carry_is_raw_ = true;
      }
      return;
    } else if (!carry_.empty()) {
      carry_.append(piece);
      take_line(carry_, out);
      carry_.clear();
    } else {
      take_line(piece, out);
    }
    if (!nl) return;
    if (carry_is_raw_) {
      out += '\n';
      carry_is_raw_ = false;
    }
    pos = end + 1;
  }
}

void ContainerLogDecoder::finish(std::string& out) {
  if (!carry_is_raw_ && !carry_.empty()) take_line(carry_, out);
  carry_.clear();
  close_all(out);
}

namespace {

// The common case, written straight to `out`: a whole line in a record of the runtime's own
// layout, with no split line waiting. False (and `out` as it was) for anything else.
bool append_whole_record(ContainerLogKind kind, std::string_view line, std::string& out) {
  if (kind == ContainerLogKind::kKubernetesCri) {
    auto parts = split_cri(line);
    if (!parts || parts->partial) return false;
    out.append(parts->payload);
    return true;
  }
  const size_t mark = out.size();
  if (!read_docker_layout(line, out)) return false;
  // Whole: it ends its line, and holds no other break.
  if (!strip_line_end(out, mark) || out.find('\n', mark) != std::string::npos) {
    out.resize(mark);
    return false;
  }
  return true;
}

}  // namespace

void ContainerLogDecoder::take_line(std::string_view line, std::string& out) {
  if (slots_.empty() && append_whole_record(kind_, line, out)) {
    out += '\n';
    return;
  }
  std::optional<ContainerRecord> record =
      kind_ == ContainerLogKind::kDockerJsonFile ? parse_docker_record(line) : parse_cri_record(line);
  if (!record) {
    // Not a record (a line a tool added, a corrupt one): kept as it is.
    slots_.push_back({std::string(line), "", false});
    held_bytes_ += line.size();
  } else {
    auto open = std::find_if(open_.begin(), open_.end(), [&](const Slot* slot) { return slot->stream == record->stream; });
    held_bytes_ += record->payload.size();
    if (open != open_.end()) {
      Slot& slot = **open;
      slot.text += record->payload;
      slot.open = record->partial;
      std::string rest;   // what goes on past a cut, at this part's place
      if (slot.open && slot.text.size() >= kMaxJoinedLine) {
        // Cut at the last redraw or line break of the last 64 KiB (a progress bar's), so that a
        // message after it stays whole; at the end when there is none.
        const size_t from = slot.text.size() - std::min<size_t>(slot.text.size(), 64u << 10);
        const size_t brk = slot.text.find_last_of("\r\n");
        const size_t cut = brk != std::string::npos && brk >= from ? brk : slot.text.size();
        rest = slot.text.substr(cut);
        slot.text.resize(cut);
        slot.open = false;
      }
      if (!slot.open) open_.erase(open);
      if (rest.empty()) {
        slots_.push_back({"", record->stream, false});   // where this part was: an empty line
      } else {
        slots_.push_back({std::move(rest), record->stream, true});
        open_.push_back(&slots_.back());
      }
    } else {
      slots_.push_back({std::move(record->payload), record->stream, record->partial});
      if (record->partial) open_.push_back(&slots_.back());
    }
  }
  // Bounded memory: the oldest line waiting for a part that does not come is written as it is.
  while (!slots_.empty() && slots_.front().open && (held_bytes_ > kMaxHeldBytes || slots_.size() > kMaxHeldLines)) {
    std::erase(open_, &slots_.front());
    slots_.front().open = false;
    emit_closed(out);
  }
  emit_closed(out);
}

void ContainerLogDecoder::emit_closed(std::string& out) {
  while (!slots_.empty() && !slots_.front().open) {
    out += slots_.front().text;
    out += '\n';
    held_bytes_ -= std::min(held_bytes_, slots_.front().text.size());
    slots_.pop_front();
  }
}

void ContainerLogDecoder::close_all(std::string& out) {
  for (Slot* slot : open_) slot->open = false;
  open_.clear();
  emit_closed(out);
}

}  // namespace oomdoc
