// Logs as container runtimes store them: each line a program wrote, wrapped in a record.
//   Docker's json-file driver:  {"log":"<line>\n","stream":"stderr","time":"2024-05-01T10:00:00.1Z"}
//   Kubernetes' CRI log files:  2024-05-01T10:00:00.123456789Z stderr F <line>
// Both split a line longer than 16 KiB over several records (Docker: a "log" without its final
// newline, moby daemon/logger/copier.go; CRI: the tag "P" on every part but the last "F", the
// kubelet's pkg/kubelet/kuberuntime/logs), and the stdout and stderr records of one container
// interleave, so a part's rest may come after another stream's lines.
//
// ContainerLogDecoder turns such a file back into the lines the program wrote, in a stream of
// chunks, before the log scanner reads it. It writes one line per input line so that every line
// number stays the file's: a line split over n records comes out whole at its first record's place,
// and each later part leaves an empty line where it was; a line that grows past 1 MiB is cut at a
// progress bar's redraw and goes on at the part where the cut fell.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomdoc {

enum class ContainerLogKind { kDockerJsonFile, kKubernetesCri };

// The longest line read as a record: a record holds at most 16 KiB of output, escaped at most 6
// bytes per byte in JSON, and a log shipper may merge several.
constexpr size_t kMaxContainerRecordLine = 256u << 10;

// One record: the line part it holds, its stream, and whether the line goes on in the next record
// of the same stream.
struct ContainerRecord {
  std::string payload;    // without the final line break
  std::string stream;     // "stdout", "stderr" (CRI and Docker name no other)
  bool partial = false;
};

// A CRI record ("<RFC 3339 time> <stream> <P|F> <text>"), or nullopt.
std::optional<ContainerRecord> parse_cri_record(std::string_view line);
// A json-file record (an object with a string "log" and a "stream"), or nullopt. A "log" holding
// line breaks before its end is no runtime's record: nullopt, it is read as a JSON logger's.
std::optional<ContainerRecord> parse_docker_record(std::string_view line);

// What the first non-empty line of `head` says the file is; nullopt for any other log.
std::optional<ContainerLogKind> sniff_container_log(std::string_view head);

class ContainerLogDecoder {
 public:
  explicit ContainerLogDecoder(ContainerLogKind kind) : kind_(kind) {}
  // Appends to `out` the decoded lines that `in` completes.
  void decode(std::string_view in, std::string& out);
  // The end of input: writes what is still held (a line whose last part never came, as it is).
  void finish(std::string& out);

 private:
  struct Slot {
    std::string text;
    std::string stream;
    bool open = false;    // a split line still waiting for its next part
  };
  void take_line(std::string_view line, std::string& out);
  void emit_closed(std::string& out);
  void close_all(std::string& out);

  ContainerLogKind kind_;
  std::string carry_;              // an input line not ended yet
  bool carry_is_raw_ = false;      // that line outgrew any record: written through as it comes
  std::deque<Slot> slots_;         // lines in input order, waiting behind an open one
  std::vector<Slot*> open_;        // the open slots (one per stream at most; deque keeps them in place)
  size_t held_bytes_ = 0;
};

}  // namespace oomdoc
