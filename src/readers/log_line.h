// Cleaning one log line before format matching: ANSI colour codes, the prefixes that launchers
// put in front of every line ([rank3]:, [default0]:, (VllmWorker rank=1 pid=123), docker-compose
// "name-1  | ", pdsh's "worker-0: ", kubectl's "[pod/NAME/CONTAINER] "), remembering the rank or node a prefix names, and the records that collectors wrap each line
// in (Docker's json-file, Kubernetes' CRI files, JSON loggers), read down to the line they hold.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomdoc {

struct CleanLine {
  std::string text;               // the line without colour codes and launcher prefixes
  std::optional<int64_t> rank;    // from [rankN]: / (VllmWorker rank=N ...) / [defaultN]:
  bool rank_is_worker = false;    // the rank came from a worker's process tag "(VllmWorker rank=N pid=P)"
  // The node or pod a multi-node launcher's prefix names: pdsh's "worker-0" (DeepSpeed's multi-node
  // runner), `kubectl logs --prefix`'s "pod/trainer-0/pytorch"; "" without one. Lines of two nodes
  // are two processes' output, whatever rank each prints.
  std::string node;
  // The process name a parenthesised process tag starts with ("VllmWorker", "EngineCore_DP0",
  // "Worker_TP2", "APIServer"); "" without one. Which program it names is readers/application.cpp's call.
  std::string process_tag;
  // The program a syslog/journald prefix names ("ollama" of "Dec 31 01:55:57 host ollama[555324]: ").
  std::string syslog_ident;
  // `text` starts with a "LEVEL MM-DD HH:MM:SS [file.py:N] " logging prefix (strip_logger_prefix).
  bool logger_prefix = false;
  // The line starts a logger's record: a timestamp, that prefix, or glog's "W0501 10:00:05.123 ..."
  // (no wrapped line of another message).
  bool log_record = false;
  // Of those, a logger's own: its level follows the timestamp ("2024-05-01 10:00:00,123 - WARNING -"),
  // or the logging or glog prefix. (A bare timestamp may be a runtime's, on every physical line.)
  bool logger_record = false;
  // The line starts a record of Rich's log renderer (rich.logging.RichHandler: "[05/01/24 10:00:00]
  // ERROR    message ...   train.py:40"): the width of its time and level columns as printed, where
  // the message column starts and the record's wrapped lines are indented to (0: no such record).
  // The columns and the path column after the message are off `text`.
  size_t rich_message_column = 0;
  // The raw line is a JSON-lines record other than a container runtime's: a JSON logger's
  // ({"msg": ...} / {"message": ...}: `text` is its message) or any other object. json_record_lines()
  // gives all its strings (a traceback may sit in another field).
  bool json_record = false;
};

// The severity letter (I, W, E, F) of a line that starts with glog's header ("W0501 10:00:05.123000
// 1234 api.py:897] ": torchrun's own warnings, TensorFlow's and XLA's C++ logging), else nullopt.
std::optional<char> glog_severity(std::string_view text);

// Removes ANSI escape sequences (CSI and OSC) and trailing '\r'.
std::string strip_ansi(std::string_view line);

CleanLine clean_line(std::string_view raw);

// The string values of a JSON-lines record, in order (message, traceback, ...), split on newlines;
// nullopt when `line` is no JSON object, or a container runtime's record (it wraps one line:
// clean_line reads it).
std::optional<std::vector<std::string>> json_record_lines(std::string_view line);

// The text after a Python logging prefix as vLLM prints it: "ERROR 05-01 10:00:20 [core.py:396] "
// (level, MM-DD, HH:MM:SS[.fff], [file:line]; before vLLM 0.8 without the opening bracket:
// "INFO 12-29 07:45:20 selector.py:120] "); `line` itself when it has none.
std::string_view strip_logger_prefix(std::string_view line);

}  // namespace oomdoc
