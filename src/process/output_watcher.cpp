#include "process/output_watcher.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace oomdoc {

OutputWatcher::OutputWatcher(size_t tail_bytes) : tail_bytes_(std::max<size_t>(tail_bytes, 1)) {
  buffer_.reserve(2 * tail_bytes_);
}

void OutputWatcher::feed(std::string_view chunk) {
  total_bytes_ += chunk.size();
  if (chunk.size() >= tail_bytes_) {
    buffer_.assign(chunk.substr(chunk.size() - tail_bytes_));
    return;
  }
  // Amortised O(1) per byte: drop the front only when the buffer reaches twice the tail.
  if (buffer_.size() + chunk.size() > 2 * tail_bytes_) buffer_.erase(0, buffer_.size() + chunk.size() - tail_bytes_);
  buffer_.append(chunk);
}

std::string_view OutputWatcher::tail() const {
  std::string_view view(buffer_);
  if (view.size() > tail_bytes_) view.remove_prefix(view.size() - tail_bytes_);
  if (total_bytes_ > view.size()) {
    auto newline = view.find('\n');
    if (newline != std::string_view::npos) view.remove_prefix(newline + 1);
  }
  return view;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

}  // namespace

std::optional<ChildOomReport> explain_child_output(std::string_view tail) {
  // Lower-case needles: the framework-independent part of GPU OOM messages.
  static constexpr std::array<std::string_view, 4> kNeedles = {
      "out of memory", "outofmemoryerror", "cublas_status_alloc_failed", "cudnn_status_alloc_failed"};
  // One lower-cased copy, then a fast rfind per needle: the last OOM line is what matters.
  std::string lower(tail);
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  size_t found = std::string::npos;
  for (auto needle : kNeedles) {
    size_t at = lower.rfind(needle);
    if (at != std::string::npos && (found == std::string::npos || at > found)) found = at;
  }
  std::optional<std::string_view> last;
  if (found != std::string::npos) {
    size_t begin = tail.rfind('\n', found);
    begin = begin == std::string_view::npos ? 0 : begin + 1;
    size_t end = tail.find('\n', found);
    last = tail.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
  }
  if (!last) return std::nullopt;
  ChildOomReport report;
  report.headline = std::string(trim(*last));
  report.lines.push_back("the command ran out of memory:");
  report.lines.push_back("  " + report.headline);
  report.lines.push_back("save its output and run `oomdoc explain FILE` for the cause and the fixes");
  return report;
}

}  // namespace oomdoc
