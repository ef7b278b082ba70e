// Stack labels: where an allocation came from, as the user would name it. Noise frames (the
// unwinder, the interpreter) are the ones PyTorch's own viewers drop (snapshot-format.md §2.5);
// library frames (torch, site-packages, C++ without a file) are skipped to find the first frame
// of the user's code, which is where the group's key starts.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>

#include "analyses/snapshot_analysis.h"
#include "core/text.h"

namespace oomdoc {

namespace {

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

// What the C++ frames of a stack say when no Python frame does: the autograd node that ran
// ("MulBackward0", from "torch::autograd::generated::MulBackward0::apply(...)") or the aten operator
// ("aten::bmm", from "at::_ops::bmm::call(...)"). The group key and the folded C++ line use them.
std::optional<std::string> autograd_node(std::string_view name) {
  size_t backward = name.find("Backward");
  if (backward == std::string_view::npos) return std::nullopt;
  size_t end = name.find("::apply", backward);
  if (end == std::string_view::npos) return std::nullopt;
  size_t start = name.rfind("::", backward);
  start = start == std::string_view::npos ? 0 : start + 2;
  return std::string(name.substr(start, end - start));
}

std::optional<std::string> aten_op(std::string_view name) {
  if (!name.starts_with("at::_ops::")) return std::nullopt;
  std::string_view op = name.substr(10);
  return "aten::" + std::string(op.substr(0, op.find("::")));
}

}  // namespace

bool is_python_frame(std::string_view filename) {
  // "x.py", or code Python made up: "<frozen runpy>", "<string>", FX's "<eval_with_key>.3".
  return filename.ends_with(".py") || filename.starts_with("<");
}

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
  if (!filename.ends_with(".py")) return false;  // C++ frames ('??', 'memory_snapshot.cpp') are never user code
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
      if (auto node = autograd_node(snapshot_.str(snapshot_.frames[frames[i]].name))) {
        key = *node + " (backward pass, no Python frame)";
      }
    }
    for (size_t i = 0; i < frames.size() && key.empty(); ++i) {
      if (auto op = aten_op(snapshot_.str(snapshot_.frames[frames[i]].name))) key = *op + " (no Python frame)";
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

// Python frames first, innermost first; the C++ frames (with stacks='all' a stack starts with a
// dozen allocator, dispatcher and aten frames) folded into one last line naming the autograd nodes
// and aten operators among them, so the frames a user can act on are never pushed out by them.
std::vector<std::string> StackLabeler::frames(StackId stack, size_t max) const {
  std::vector<std::string> out;
  if (stack == kNoStack || stack >= keys_.size()) return out;
  size_t more_python = 0, native = 0;
  std::vector<std::string> native_names;
  for (FrameId id : snapshot_.stack(stack)) {
    const SnapshotFrame& f = snapshot_.frames[id];
    const std::string_view file = snapshot_.str(f.filename), name = snapshot_.str(f.name);
    if (is_noise_frame(file, name)) continue;
    if (!is_python_frame(file)) {
      ++native;
      std::optional<std::string> what = autograd_node(name);
      if (!what) what = aten_op(name);
      if (what && std::find(native_names.begin(), native_names.end(), *what) == native_names.end()) {
        native_names.push_back(std::move(*what));
      }
      continue;
    }
    // Past `max`, the user's own frames are still listed (up to 2 * max lines): a stack deep in
    // library code (autograd, nn.Module wrappers) would otherwise end before the user's code starts.
    if (out.size() >= max && (!is_user_frame(file, name) || out.size() >= 2 * max)) {
      ++more_python;
    } else {
      out.push_back(frame_text(id));
    }
  }
  if (more_python) out.push_back("... " + count_noun(more_python, "more Python frame"));
  if (native) {
    constexpr size_t kNamesShown = 4;
    std::string names;
    for (size_t i = 0; i < native_names.size() && i < kNamesShown; ++i) names += (i ? ", " : ": ") + native_names[i];
    if (native_names.size() > kNamesShown) names += ", ...";
    out.push_back(fmt::format("[{}{}]", count_noun(native, "C++ frame"), names));
  }
  return out;
}

}  // namespace oomdoc
