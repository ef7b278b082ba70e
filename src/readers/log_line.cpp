#include "readers/log_line.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <set>
#include <nlohmann/json.hpp>

#include "core/text.h"
#include "readers/container_log.h"

namespace oomdoc {
namespace {

// Python logging's level names, as its records and the loggers built on it print them.
bool is_python_log_level(std::string_view word) {
  return word == "DEBUG" || word == "INFO" || word == "WARNING" || word == "ERROR" || word == "CRITICAL";
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// Reads digits at s[i...]; returns the value and advances i, or nullopt.
std::optional<int64_t> read_int(std::string_view s, size_t& i) {
  size_t start = i;
  int64_t v = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && i - start < 12) {
    v = v * 10 + (s[i] - '0');
    ++i;
  }
  if (i == start) return std::nullopt;
  return v;
}

// "[rank3]:" / "[rank3]: " / "[default0]:" (torchrun --tee / elastic prefixes).
bool strip_bracket_rank(std::string_view& s, std::optional<int64_t>& rank) {
  for (std::string_view tag : {std::string_view("[rank"), std::string_view("[default")}) {
    if (!starts_with(s, tag)) continue;
    size_t i = tag.size();
    auto value = read_int(s, i);
    if (!value || i >= s.size() || s[i] != ']') return false;
    ++i;
    if (i < s.size() && s[i] == ':') ++i;
    rank = *value;
    // torchrun writes "[rank3]: " before the line: one space, the line's own indentation kept (a
    // traceback's, or a hard-wrapped message's line that starts with a space).
    if (i < s.size() && s[i] == ' ') ++i;
    s = s.substr(i);
    return true;
  }
  return false;
}

// Open MPI's `mpirun --tag-output`: "[1,3]<stderr>:" (job id, rank, stream).
bool strip_openmpi_tag(std::string_view& s, std::optional<int64_t>& rank) {
  if (!starts_with(s, "[")) return false;
  size_t i = 1;
  if (!read_int(s, i) || i >= s.size() || s[i] != ',') return false;
  ++i;
  auto value = read_int(s, i);
  if (!value || i >= s.size() || s[i] != ']') return false;
  ++i;
  std::string_view rest = s.substr(i);
  for (std::string_view stream : {std::string_view("<stdout>:"), std::string_view("<stderr>:")}) {
    if (starts_with(rest, stream)) {
      rank = *value;
      s = rest.substr(stream.size());
      return true;
    }
  }
  return false;
}

// A launcher's "[host:rank]:" ("[gpu187:1]:", huggingface/accelerate#1519's multi-node log): a host
// name of letters, digits, '.', '-' or '_', a colon, the rank, "]:".
bool strip_host_rank(std::string_view& s, std::optional<int64_t>& rank) {
  if (!starts_with(s, "[")) return false;
  size_t i = 1;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == '-' || s[i] == '_')) ++i;
  if (i == 1 || i >= s.size() || s[i] != ':' || !std::isalpha(static_cast<unsigned char>(s[1]))) return false;
  ++i;
  auto value = read_int(s, i);
  if (!value || i + 1 >= s.size() || s[i] != ']' || s[i + 1] != ':') return false;
  rank = *value;
  s = trim_left(s.substr(i + 2));
  return true;
}

// Slurm's `srun --label`: "0: " (the task number, right-aligned when there are ten or more:
// " 3: "). Only at the start of the line, a number of at most four digits, one space after.
bool strip_srun_label(std::string_view& s, std::optional<int64_t>& rank) {
  size_t i = 0;
  auto value = read_int(s, i);
  if (!value || i > 4 || i + 2 >= s.size() || s[i] != ':' || s[i + 1] != ' ') {
    return false;
  }
  rank = *value;
  s = s.substr(i + 2);
  return true;
}

// pdsh's "host: " before each line of a remote command's output (DeepSpeed's multi-node runner
// runs `pdsh -w worker-0,worker-1 ...`: "worker-0: Traceback ..."). A host name of letters,
// digits, '.', '-', '_' that ends in a digit ("worker-0", "node01", "10.0.0.5") and is not a
// number alone (Slurm's task label), first on the line, one space after the colon.
bool strip_pdsh_host(std::string_view& s, std::string& node) {
  size_t i = 0;
  bool letter_or_dot = false;
  while (i < s.size() && i <= 64 &&
         (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == '-' || s[i] == '_')) {
    letter_or_dot = letter_or_dot || !std::isdigit(static_cast<unsigned char>(s[i]));
    ++i;
  }
  if (i == 0 || i > 64 || !letter_or_dot || !std::isdigit(static_cast<unsigned char>(s[i - 1])) || i + 1 >= s.size() ||
      s[i] != ':' || s[i + 1] != ' ') {
    return false;
  }
  // Only a host name as clusters name them: lowercase, an IPv4 address ("10.0.0.5"), or letters with a
  // '-' or '.' ("worker-0", "gpu-node-3", "ip-10-0-1-5") or a host word and its number ("node01",
  // "nid001234"). A script's own counters and devices read the same way ("GPU0: ", "fold2: ",
  // "local_rank1: ", "rank-3: ", "gpu-0: "): a counter word and only a number after it is none.
  const std::string_view name = s.substr(0, i);
  if (std::any_of(name.begin(), name.end(), [](char c) { return std::isupper(static_cast<unsigned char>(c)); })) {
    return false;
  }
  const size_t letters = name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_");
  const std::string_view word = name.substr(0, letters);
  const std::string_view rest = name.substr(std::min(letters, name.size()));
  const bool ipv4 = std::count(name.begin(), name.end(), '.') == 3 &&
                    name.find_first_not_of("0123456789.") == std::string_view::npos;
  if (word.empty() && !ipv4) return false;   // no letters first: only a dotted IPv4 address
  static const std::set<std::string_view> kCounterWords = {"gpu", "cuda", "rank", "local_rank", "step", "epoch", "iter",
                                                           "iteration", "batch", "device", "dev", "layer", "stage", "fold",
                                                           "trial", "run", "tp", "pp", "dp", "worker_rank", "proc", "process"};
  const bool number_only = rest.find_first_not_of("0123456789-_") == std::string_view::npos;
  if (kCounterWords.count(word) && number_only) return false;
  if (!ipv4 && name.find_first_of("-.") == std::string_view::npos) {
    static const std::set<std::string_view> kHostWords = {"node", "host", "worker", "nid", "compute", "server",
                                                          "machine", "instance", "gn", "cn"};
    if (!kHostWords.count(word)) return false;
  }
  node = std::string(s.substr(0, i));
  s = s.substr(i + 2);
  return true;
}

// `kubectl logs --prefix` (one pod's or a label selector's): "[pod/trainer-worker-1/pytorch] ",
// the pod and the container.
bool strip_kubectl_prefix(std::string_view& s, std::string& node) {
  if (!starts_with(s, "[pod/")) return false;
  const size_t close = s.substr(0, 512).find("] ");
  if (close == std::string_view::npos) return false;
  const std::string_view name = s.substr(1, close - 1);
  if (std::count(name.begin(), name.end(), '/') != 2 || name.find(' ') != std::string_view::npos) return false;
  node = std::string(name);
  s = s.substr(close + 2);
  return true;
}

// "(VllmWorker rank=1 pid=123) ", "(VllmWorker TP0 pid=123) ", "(Worker_TP2 pid=99) ",
// "(EngineCore_DP0 pid=1094) ", "(RayWorkerWrapper pid=77, ip=...) ", "(VllmWorkerProcess pid=4731) ":
// a parenthesised process tag with a pid. Only "rank=N" gives the rank: a "TPn" name is left alone,
// since vLLM's engine core reports one startup's accounting without a rank and the two halves
// would no longer join (log_scanner.cpp joins reports of one rank).
bool strip_process_tag(std::string_view& s, std::optional<int64_t>& rank, bool& is_worker, std::string& tag) {
  if (s.empty() || s.front() != '(') return false;
  size_t close = s.find(')');
  if (close == std::string_view::npos || close > 120) return false;
  std::string_view inside = s.substr(1, close - 1);
  if (inside.find("pid=") == std::string_view::npos) return false;
  tag = std::string(inside.substr(0, inside.find_first_of(" ,")));
  size_t r = inside.find("rank=");
  if (r != std::string_view::npos) {
    size_t i = r + 5;
    if (auto value = read_int(inside, i)) {
      rank = *value;
      is_worker = true;
    }
  }
  s = trim_left(s.substr(close + 1));
  return true;
}

// docker compose: "vllm-1  | ", "deep-seek-1  | ".
bool strip_compose_prefix(std::string_view& s) {
  size_t bar = s.substr(0, 67).find(" | ");   // the name is at most 64 bytes: no need to read the line
  if (bar == std::string_view::npos || bar == 0 || bar > 64) return false;
  for (size_t i = 0; i < bar; ++i) {
    char c = s[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ' ')) {
      return false;
    }
  }
  // The container name has no inner spaces, ends in its replica number ("vllm-1", "app_web_1"),
  // and is padded with spaces before the bar.
  std::string_view name = s.substr(0, bar);
  while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
  if (name.empty() || name.find(' ') != std::string_view::npos) return false;
  size_t digits = name.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(name[digits - 1]))) --digits;
  if (digits == name.size() || digits < 2 || (name[digits - 1] != '-' && name[digits - 1] != '_')) return false;
  s = s.substr(bar + 3);
  return true;
}

// syslog's and journalctl's record prefix: a timestamp ("Dec 31 01:55:57", RFC 3164, or an ISO one
// from `journalctl -o short-iso`), the host, and the program with its pid: "FORGE ollama[555324]: ".
// Left on, it hid what a format reads at a line's start (ggml's "  current device: 0, in function").
bool strip_syslog_prefix(std::string_view& s, std::string& ident) {
  size_t i = 0;
  bool iso = false;
  static constexpr std::string_view kMonths = "JanFebMarAprMayJunJulAugSepOctNovDec";
  const size_t month = s.size() > 16 ? kMonths.find(s.substr(0, 3)) : std::string_view::npos;
  const bool bsd_month = month != std::string_view::npos && month % 3 == 0 && s[3] == ' ';
  if (bsd_month && (s[4] == ' ' || std::isdigit(static_cast<unsigned char>(s[4]))) &&
      std::isdigit(static_cast<unsigned char>(s[5])) && has_shape(s, 6, " 00:00:00 ")) {
    i = 16;
  } else if (const size_t n = timestamp_length(s); n > 0 && n < s.size() && s[n] == ' ') {
    i = n + 1;
    iso = true;
  } else {
    return false;
  }
  // The host: no spaces; then the program, its pid in brackets, and ": ".
  const size_t host_end = s.find(' ', i);
  if (host_end == std::string_view::npos || host_end == i || host_end - i > 64) return false;
  size_t j = host_end + 1;
  const size_t ident_start = j;
  while (j < s.size() && j - ident_start < 64 &&
         (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '-' || s[j] == '_' || s[j] == '.' || s[j] == '/' || s[j] == '@')) {
    ++j;
  }
  const size_t ident_end = j;
  if (j == ident_start || j >= s.size()) return false;
  // After an ISO timestamp only with the pid: Rust's tracing prints "<time> ERROR target: ".
  if (iso && s[j] != '[') return false;
  if (s[j] == '[') {
    const size_t close = s.find(']', j);
    if (close == std::string_view::npos || close == j + 1 || close - j > 12) return false;
    for (size_t k = j + 1; k < close; ++k) {
      if (!std::isdigit(static_cast<unsigned char>(s[k]))) return false;
    }
    j = close + 1;
  }
  if (j + 1 >= s.size() || s[j] != ':' || s[j + 1] != ' ') return false;
  ident = std::string(s.substr(ident_start, ident_end - ident_start));
  s = s.substr(j + 2);
  return true;
}

// The level column of Rich's log renderer (rich.logging.RichHandler, rich's Console.log): the
// level name padded to its 8 columns, then the one space between columns ("ERROR    ",
// "WARNING  ", "CRITICAL "), then the message. Returns the message's offset, or 0.
size_t rich_level_column(std::string_view s) {
  static constexpr size_t kLevelColumn = 9;
  if (s.size() <= kLevelColumn || s[kLevelColumn] == ' ') return 0;
  size_t i = 0;
  while (i < s.size() && s[i] >= 'A' && s[i] <= 'Z') ++i;
  const std::string_view level = s.substr(0, i);
  if (!is_python_log_level(level)) return 0;
  for (; i < kLevelColumn; ++i) {
    if (s[i] != ' ') return 0;
  }
  return kLevelColumn;
}

// The time column before it: RichHandler's default "[%x %X]" ("[05/01/24 10:00:00]", in other
// locales "[01.05.2024 10:00:00]"), another `log_time_format` in brackets ("[10:00:00]",
// "[2024-05-01 10:00:00]") or without ("10:00:00"): digits and date or time separators, a colon
// among them, at most 40 bytes, one space after. Returns the column's width with that space, or 0.
size_t rich_time_column(std::string_view s) {
  const bool bracket = !s.empty() && s.front() == '[';
  size_t i = bracket ? 1 : 0;
  bool colon = false, digit = false;
  while (i < s.size() && i <= 40) {
    const char c = s[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digit = true;
    } else if (c == ':') {
      colon = true;
    } else if (c == '/' || c == '.' || c == '-' || c == ',' || (c == ' ' && bracket)) {
    } else if (bracket && (std::isalpha(static_cast<unsigned char>(c)) != 0)) {   // "May", "PM", "T"
    } else {
      break;
    }
    ++i;
  }
  if (!digit || !colon) return 0;
  if (bracket) {
    if (i >= s.size() || s[i] != ']') return 0;
    ++i;
  }
  return i < s.size() && s[i] == ' ' ? i + 1 : 0;
}

// A file and line as RichHandler's path column prints them: a Python file's name, a colon, the
// line ("train.py:40", "megatron_gpt_pretraining.py:1234").
bool is_rich_path(std::string_view token) {
  const size_t colon = token.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == token.size() || token.size() - colon > 7) return false;
  for (char c : token.substr(colon + 1)) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  const std::string_view file = token.substr(0, colon);
  if (file.size() < 4 || file.substr(file.size() - 3) != ".py") return false;
  return std::all_of(file.begin(), file.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

// A record of Rich's log renderer, as RichHandler writes it: "[05/01/24 10:00:00] ERROR    message
// text wrapped to the terminal     train.py:40": the time column (blank, spaces of its width, when
// the time repeats the record before's; absent with show_time=False), the level column, the message
// column, and the path column right-aligned at the end of the record's first line, one space or
// more after the message's text (the message column is padded to its width). The record's later
// lines are the message's wrap, indented to the message column. `s` starts after any leading spaces;
// `line` is where the record starts (before those spaces, or before a time column another cleaner
// took off), to measure the indentation. Takes the columns off and returns the message column's
// offset from `line`, or 0 when `s` is no such record.
size_t strip_rich_record(std::string_view& s, const char* line) {
  const size_t time = rich_time_column(s);
  const size_t level = rich_level_column(s.substr(time));
  if (level == 0) return 0;
  // vLLM's "CRITICAL 03-13 09:00:43 [core_client.py:260] " has a CRITICAL as wide: its prefix, kept.
  if (const std::string_view rest = s.substr(time); strip_logger_prefix(rest).size() != rest.size()) return 0;
  std::string_view message = s.substr(time + level);
  // The padding of the columns after the message (a console writes it to a file too).
  while (!message.empty() && (message.back() == ' ' || message.back() == '\t')) message.remove_suffix(1);
  // The path column: the last word, a Python file and line, after a space.
  const size_t space = message.rfind(' ');
  if (space != std::string_view::npos && is_rich_path(message.substr(space + 1))) {
    size_t text_end = space;
    while (text_end > 0 && message[text_end - 1] == ' ') --text_end;
    if (text_end > 0) message = message.substr(0, text_end);
  }
  const size_t column = static_cast<size_t>(message.data() - line);
  s = message;
  return column;
}

// kLogger: a record with a message field; kObject: any other JSON object (its strings are read whole).
enum class JsonRecord { kNone, kContainer, kLogger, kObject };

// The JSON object a JSON-lines log holds on `line`, or a discarded value.
nlohmann::json parse_json_record(std::string_view line) {
  const size_t first = line.find_first_not_of(" \t");
  const size_t last = line.find_last_not_of(" \t");
  if (first == std::string_view::npos || line[first] != '{' || line[last] != '}') return nlohmann::json::value_t::discarded;
  nlohmann::json doc = nlohmann::json::parse(line.substr(first, last - first + 1), nullptr, false);
  return doc.is_object() ? doc : nlohmann::json(nlohmann::json::value_t::discarded);
}

// A JSON-lines record and the line it holds (`payload`): a container runtime's record that the
// scanner's decoder did not take (readers/container_log.h: a log that does not start with records)
// or a JSON logger's record ({"msg": ...}, {"message": ...}: structlog, python-json-logger, zap,
// pino, log shippers). A "log" holding several lines reads as a logger's message.
JsonRecord unwrap_json_record(std::string_view s, std::string& payload) {
  if (s.empty() || s.front() != '{') return JsonRecord::kNone;
  const nlohmann::json doc = parse_json_record(s);
  if (doc.is_discarded()) return JsonRecord::kNone;
  if (auto log = doc.find("log"); log != doc.end() && log->is_string()) {
    payload = log->get<std::string>();
    while (!payload.empty() && (payload.back() == '\n' || payload.back() == '\r')) payload.pop_back();
    return payload.find('\n') == std::string::npos ? JsonRecord::kContainer : JsonRecord::kLogger;
  }
  for (const char* key : {"msg", "message"}) {
    if (auto msg = doc.find(key); msg != doc.end() && msg->is_string()) {
      payload = msg->get<std::string>();
      return JsonRecord::kLogger;
    }
  }
  return JsonRecord::kObject;
}

// A timestamp that a collector or a logging formatter puts before every line, so that a wrapped
// message reads on: `docker logs -t` / `kubectl logs --timestamps` ("2024-05-01T10:00:00.123456789Z "),
// Python's logging ("2024-05-01 10:00:00,123 - ERROR - ", "... - trainer - ERROR - ") and loguru
// ("2024-05-01 10:00:00.123 | ERROR    | train:main:42 - ").
bool strip_timestamp(std::string_view& s, bool& with_level) {
  const size_t i = timestamp_length(s);
  if (i == 0 || i >= s.size() || s[i] != ' ') return false;
  std::string_view rest = trim_left(s.substr(i));
  // The level (and the logger's name before it, or loguru's location after it) that follow.
  auto is_level = is_python_log_level;
  if (rest.rfind("- ", 0) == 0 || rest.rfind("| ", 0) == 0) {
    const char sep = rest[0];
    std::string_view fields = rest;
    for (int k = 0; k < 3; ++k) {   // at most: name, level, location
      const size_t start = fields.find_first_not_of(' ', 1);
      if (start == std::string_view::npos) break;
      const size_t next = fields.find(std::string{' ', sep, ' '}, start);
      const size_t loguru_end = sep == '|' ? fields.find(" - ", start) : std::string_view::npos;
      std::string_view word = fields.substr(start, std::min(next, fields.size()) - start);
      while (!word.empty() && word.back() == ' ') word.remove_suffix(1);
      if (is_level(word)) {
        with_level = true;
        // Python: "- LEVEL - message"; loguru: "| LEVEL | location - message".
        if (sep == '-' && next != std::string_view::npos) {
          rest = fields.substr(next + 3);
        } else if (sep == '|' && loguru_end != std::string_view::npos && loguru_end > next) {
          rest = fields.substr(loguru_end + 3);
        }
        break;
      }
      if (next == std::string_view::npos || next - start > 64) break;
      fields = fields.substr(next + 1);
    }
  }
  s = rest;
  return true;
}

}  // namespace

std::optional<char> glog_severity(std::string_view text) {
  if (text.size() > 14 && std::string_view("IWEF").find(text[0]) != std::string_view::npos &&
      has_shape(text, 1, "0000 00:00:00")) {
    return text[0];
  }
  return std::nullopt;
}

std::string strip_ansi(std::string_view line) {
  // Most lines carry neither: one pass of memchr each instead of a byte-by-byte copy.
  if (line.find('\x1b') == std::string_view::npos && line.find('\0') == std::string_view::npos) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
    return std::string(line);
  }
  std::string out;
  out.reserve(line.size());
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == '\x1b' && i + 1 < line.size()) {
      if (line[i + 1] == '[') {  // CSI: ESC [ params final-byte(0x40-0x7e)
        size_t j = i + 2;
        while (j < line.size() && !(line[j] >= 0x40 && line[j] <= 0x7e)) ++j;
        i = j;
        continue;
      }
      if (line[i + 1] == ']') {  // OSC: ESC ] ... BEL or ESC backslash
        size_t j = i + 2;
        while (j < line.size() && line[j] != '\x07' && !(line[j] == '\x1b' && j + 1 < line.size() && line[j + 1] == '\\')) ++j;
        i = (j < line.size() && line[j] == '\x1b') ? j + 1 : j;
        continue;
      }
      ++i;  // two-byte escape
      continue;
    }
    if (c == '\0') continue;  // NUL runs: a log truncated under its writer, or preallocated space
    out += c;
  }
  while (!out.empty() && (out.back() == '\r' || out.back() == '\n')) out.pop_back();
  return out;
}

std::string_view strip_logger_prefix(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && line[i] >= 'A' && line[i] <= 'Z') ++i;
  const std::string_view level = line.substr(0, i);
  if (!is_python_log_level(level)) return line;
  // " MM-DD HH:MM:SS": digits and separators in a fixed shape.
  static constexpr std::string_view kShape = " 00-00 00:00:00";
  if (!has_shape(line, i, kShape)) return line;
  i += kShape.size();
  if (i < line.size() && line[i] == '.') {
    ++i;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
  }
  if (i >= line.size() || line[i] != ' ') return line;
  // " [file.py:N] ", or before vLLM 0.8 " file.py:N] " (a file name, a colon and digits).
  const bool bracket = line.substr(i, 2) == " [";
  const size_t close = line.find("] ", i);
  if (close == std::string_view::npos || close - i > 120) return line;
  if (!bracket) {
    const std::string_view location = line.substr(i + 1, close - i - 1);
    const size_t colon = location.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == location.size() ||
        location.find(' ') != std::string_view::npos) {
      return line;
    }
    for (char c : location.substr(colon + 1)) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return line;
    }
  }
  return line.substr(close + 2);
}

CleanLine clean_line(std::string_view raw) {
  CleanLine result;
  // Most lines carry no escape or NUL: read in place, without a copy (every candidate line of a
  // log passes here).
  std::string no_ansi;
  std::string_view s = raw;
  if (raw.find('\x1b') != std::string_view::npos || raw.find('\0') != std::string_view::npos) {
    no_ansi = strip_ansi(raw);
    s = no_ansi;
  } else {
    while (!s.empty() && (s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  }
  std::string payload;   // the line a JSON record holds
  // Prefixes can stack ("vllm-1  | (VllmWorker rank=1 pid=2) [rank1]: ..."), and a record can hold
  // a prefixed line: strip until none applies.
  // Where a timestamp began that a logger's record may start with (RichHandler's own time column
  // in a format strip_timestamp reads): the message column is measured from there.
  const char* record_start = nullptr;
  for (int guard = 0; guard < 4; ++guard) {
    std::string_view before = s;
    s = trim_left(s);
    // A CRI record's timestamp would read as a collector's (strip_timestamp), leaving its stream and tag.
    if (guard == 0) {
      if (auto cri = parse_cri_record(s)) {
        payload = std::move(cri->payload);
        s = payload;
        record_start = nullptr;
        continue;
      }
    }
    if (const JsonRecord record = unwrap_json_record(s, payload); record != JsonRecord::kNone) {
      result.json_record = result.json_record || (guard == 0 && record != JsonRecord::kContainer);
      if (record != JsonRecord::kObject) {
        payload = strip_ansi(payload);   // the escapes were JSON-escaped in the record
        s = payload;
        record_start = nullptr;
        continue;
      }
    }
    if (strip_bracket_rank(s, result.rank)) continue;
    if (strip_openmpi_tag(s, result.rank)) continue;
    if (strip_host_rank(s, result.rank)) continue;
    // A task label comes first on the line, before anything else is stripped.
    if (guard == 0 && strip_srun_label(s, result.rank)) continue;
    if (guard == 0 && strip_pdsh_host(s, result.node)) continue;
    if (strip_kubectl_prefix(s, result.node)) continue;
    if (strip_process_tag(s, result.rank, result.rank_is_worker, result.process_tag)) continue;
    if (strip_compose_prefix(s)) continue;
    // (An ISO time without brackets is strip_timestamp's below; the level column is read here next.)
    // What follows the columns is the message's text: no prefix is looked for in it.
    if (const size_t column = strip_rich_record(s, record_start != nullptr ? record_start : before.data()); column > 0) {
      result.rich_message_column = column;
      result.log_record = true;
      result.logger_record = true;
      break;
    }
    // (A journald record per physical line, as kubectl's timestamps: no logger's record.)
    if (strip_syslog_prefix(s, result.syslog_ident)) {
      result.log_record = true;
      continue;
    }
    if (strip_timestamp(s, result.logger_record)) {
      result.log_record = true;
      if (record_start == nullptr) record_start = before.data();
      continue;
    }
    s = before;
    break;
  }
  result.text = std::string(s);
  result.logger_prefix = strip_logger_prefix(result.text).size() != result.text.size();
  const bool glog = glog_severity(result.text).has_value();
  result.log_record = result.log_record || result.logger_prefix || glog;
  result.logger_record = result.logger_record || result.logger_prefix || glog;
  return result;
}

std::optional<std::vector<std::string>> json_record_lines(std::string_view line) {
  std::string payload;
  const JsonRecord record = unwrap_json_record(trim_left(line), payload);
  if (record != JsonRecord::kLogger && record != JsonRecord::kObject) return std::nullopt;
  const nlohmann::json doc = parse_json_record(line);
  std::vector<std::string> out;
  std::function<void(const nlohmann::json&, int)> collect = [&](const nlohmann::json& v, int depth) {
    if (depth > 4) return;
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      size_t start = 0;
      while (start <= s.size()) {
        size_t nl = s.find('\n', start);
        out.push_back(s.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
        if (nl == std::string::npos) break;
        start = nl + 1;
      }
    } else if (v.is_object() || v.is_array()) {
      for (const auto& item : v) collect(item, depth + 1);
    }
  };
  // A container record's lines are its "log"; its stream and time are no text of the program's.
  const auto log = doc.find("log");
  collect(log != doc.end() && log->is_string() ? *log : doc, 0);
  return out;
}

}  // namespace oomdoc
