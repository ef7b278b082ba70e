// Stack labels: where an allocation came from, as the user would name it. Noise frames (the
// unwinder, the interpreter) are the ones PyTorch's own viewers drop (snapshot-format.md §2.5);
// library frames (torch, site-packages, C++ without a file) are skipped to find the first frame
// of the user's code, which is where the group's key starts.
#include <fmt/format.h>

#include <array>

#include "analyses/snapshot_analysis.h"

namespace oomdoc {

namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

constexpr std::array<std::string_view, 8> kNoiseNames = {
    "unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
    "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"};
constexpr std::array<std::string_view, 10> kNoiseFiles = {
    "core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c", "Objects/call.c",
    "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h"};
constexpr std::array<std::string_view, 9> kLibraryPaths = {
    "/torch/", "torch/nn/", "site-packages/", "dist-packages/", "/lib/python3", "<frozen",
    "/python3.", "\\torch\\", "\\site-packages\\"};

std::string short_path(std::string_view path) {
  // The last two components are enough to recognise a file and short enough to read.
  size_t cut = path.size();
  int slashes = 0;
  for (size_t i = path.size(); i-- > 0;) {
    if (path[i] == '/' || path[i] == '\\') {
      if (++slashes == 2) {
        cut = i + 1;
        break;
      }
    }
  }
  return std::string(slashes == 2 ? path.substr(cut) : path);
}

}  // namespace

bool is_noise_frame(std::string_view filename, std::string_view name) {
  for (auto n : kNoiseNames) {
    if (n == "_start" ? name == n : contains(name, n)) return true;
  }
  for (auto f : kNoiseFiles) {
    if (contains(filename, f)) return true;
  }
  return false;
}

bool is_user_frame(std::string_view filename, std::string_view name) {
  if (is_noise_frame(filename, name)) return false;
  bool python = filename.size() > 3 && filename.substr(filename.size() - 3) == ".py";
  if (!python) return false;  // C++ frames ('??', 'memory_snapshot.cpp') are never user code
  for (auto lib : kLibraryPaths) {
    if (contains(filename, lib)) return false;
  }
  return true;
}

StackLabeler::StackLabeler(const Snapshot& snapshot, size_t depth)
    : snapshot_(snapshot), depth_(depth == 0 ? 1 : depth) {
  keys_.resize(snapshot.stack_count());
  done_.resize(snapshot.stack_count(), false);
}

std::string StackLabeler::frame_text(FrameId id) const {
  const SnapshotFrame& f = snapshot_.frames[id];
  std::string_view file = snapshot_.str(f.filename);
  std::string_view name = snapshot_.str(f.name);
  if (file.empty() || file == "??" || f.line == 0) return std::string(name);
  return fmt::format("{}:{} {}", short_path(file), f.line, name);
}

const std::string& StackLabeler::key(StackId stack) {
  static const std::string kNone = "<no stack recorded>";
  if (stack == kNoStack || stack >= keys_.size()) return kNone;
  if (done_[stack]) return keys_[stack];
  auto frames = snapshot_.stack(stack);
  size_t first = frames.size();
  for (size_t i = 0; i < frames.size(); ++i) {
    const SnapshotFrame& f = snapshot_.frames[frames[i]];
    if (is_user_frame(snapshot_.str(f.filename), snapshot_.str(f.name))) {
      first = i;
      break;
    }
  }
  std::string key;
  if (first == frames.size()) {
    // No user code (e.g. the backward pass runs on autograd's C++ thread): the autograd node,
    // else the aten operator, else the first meaningful frame.
    for (size_t i = 0; i < frames.size() && key.empty(); ++i) {
      std::string_view name = snapshot_.str(snapshot_.frames[frames[i]].name);
      size_t backward = name.find("Backward");
      if (backward != std::string_view::npos && name.find("::apply", backward) != std::string_view::npos) {
        size_t start = name.rfind("::", backward);
        start = start == std::string_view::npos ? 0 : start + 2;
        size_t end = name.find("::apply", backward);
        key = std::string(name.substr(start, end - start)) + " (backward pass, no Python frame)";
      }
    }
    for (size_t i = 0; i < frames.size() && key.empty(); ++i) {
      std::string_view name = snapshot_.str(snapshot_.frames[frames[i]].name);
      if (name.rfind("at::_ops::", 0) == 0) {
        std::string_view op = name.substr(10);
        key = "aten::" + std::string(op.substr(0, op.find("::"))) + " (no Python frame)";
      }
    }
    for (size_t i = 0; i < frames.size() && key.empty(); ++i) {
      const SnapshotFrame& f = snapshot_.frames[frames[i]];
      if (!is_noise_frame(snapshot_.str(f.filename), snapshot_.str(f.name))) {
        key = frame_text(frames[i]) + " (no user frame)";
        break;
      }
    }
    if (key.empty()) key = "<no user frame>";
  } else {
    size_t taken = 0;
    for (size_t i = first; i < frames.size() && taken < depth_; ++i) {
      const SnapshotFrame& f = snapshot_.frames[frames[i]];
      if (!is_user_frame(snapshot_.str(f.filename), snapshot_.str(f.name))) continue;
      if (!key.empty()) key += " < ";
      key += frame_text(frames[i]);
      ++taken;
    }
  }
  keys_[stack] = std::move(key);
  done_[stack] = true;
  return keys_[stack];
}

std::vector<std::string> StackLabeler::frames(StackId stack, size_t max) const {
  std::vector<std::string> out;
  if (stack == kNoStack || stack >= keys_.size()) return out;
  for (FrameId id : snapshot_.stack(stack)) {
    const SnapshotFrame& f = snapshot_.frames[id];
    if (is_noise_frame(snapshot_.str(f.filename), snapshot_.str(f.name))) continue;
    if (out.size() == max) {
      out.push_back("...");
      break;
    }
    out.push_back(frame_text(id));
  }
  return out;
}

}  // namespace oomdoc
