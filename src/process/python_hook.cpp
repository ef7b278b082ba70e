#include "process/python_hook.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "analyses/fix_catalog.h"
#include "analyses/snapshot_report.h"
#include "core/embedded.h"
#include "core/units.h"

namespace oomdoc {

namespace fs = std::filesystem;

Result<SnapshotHook> SnapshotHook::prepare(const std::string& snapshot_dir, uint64_t max_entries,
                                           const char* existing_pythonpath) {
  std::error_code ec;
  fs::create_directories(snapshot_dir, ec);
  if (ec || !fs::is_directory(snapshot_dir))
    return make_error(fmt::format("{}: cannot create the snapshot directory: {}", snapshot_dir,
                                  ec ? ec.message() : "not a directory"));
  if (access(snapshot_dir.c_str(), W_OK) != 0)
    return make_error(fmt::format("{}: snapshot directory is not writable", snapshot_dir));

  auto source = embedded("python/oomdoc_sitecustomize.py");
  if (!source) return make_error("internal error: the Python hook was not compiled in");
  std::string temp = (fs::temp_directory_path() / "oomdoc-run-XXXXXX").string();
  if (!mkdtemp(temp.data()))
    return make_error(fmt::format("cannot create a temporary directory: {}", std::strerror(errno)));
  SnapshotHook hook;
  hook.hook_dir_ = temp;
  hook.snapshot_dir_ = fs::absolute(snapshot_dir).lexically_normal().string();
  {
    std::ofstream out(temp + "/sitecustomize.py", std::ios::binary);
    out << *source;
    if (!out) return make_error(fmt::format("{}: cannot write the Python hook", temp));
  }
  std::string pythonpath = temp;
  if (existing_pythonpath && *existing_pythonpath) pythonpath += std::string(":") + existing_pythonpath;
  hook.environment_ = {{"PYTHONPATH", pythonpath},
                       {"OOMDOC_SNAPSHOT_DIR", hook.snapshot_dir_},
                       {"OOMDOC_SNAPSHOT_MAX_ENTRIES", std::to_string(max_entries)},
                       {"OOMDOC_HOOK_STATUS_DIR", temp}};
  return hook;
}

SnapshotHook::SnapshotHook(SnapshotHook&& other) noexcept
    : hook_dir_(std::move(other.hook_dir_)),
      snapshot_dir_(std::move(other.snapshot_dir_)),
      environment_(std::move(other.environment_)) {
  other.hook_dir_.clear();
}

SnapshotHook::~SnapshotHook() {
  if (hook_dir_.empty()) return;
  std::error_code ec;
  fs::remove_all(hook_dir_, ec);
}

HookOutcome read_hook_outcome(const std::string& hook_dir) {
  HookOutcome outcome;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(hook_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("status-", 0) != 0) continue;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      auto space = line.find(' ');
      std::string word = line.substr(0, space);
      std::string rest = space == std::string::npos ? "" : line.substr(space + 1);
      std::string version = rest.rfind("torch=", 0) == 0 ? rest.substr(6, rest.find(' ') - 6) : rest;
      if (word == "loaded") ++outcome.processes;
      if (word == "snapshot") outcome.snapshots.push_back(rest);
      if (word == "recording") outcome.recorded = outcome.torch_imported = true;
      if (word == "no-cuda") outcome.torch_without_cuda = version, outcome.torch_imported = true;
      if (word == "cuda-unused") outcome.cuda_unused = version, outcome.torch_imported = true;
      if (word == "torch") outcome.torch_imported = true;
      if (word == "error") outcome.errors.push_back(rest);
    }
  }
  std::sort(outcome.snapshots.begin(), outcome.snapshots.end());
  return outcome;
}

std::optional<std::string> HookOutcome::summary() const {
  const std::string prefix = "--snapshot-on-oom: ";
  if (!errors.empty()) return prefix + errors.front();
  if (processes == 0)
    return prefix + "the hook did not load: the command is not a Python program, or Python ran "
                    "with -E or -I (which ignore PYTHONPATH)";
  if (recorded) return std::nullopt;
  if (torch_without_cuda)
    return prefix + fmt::format("PyTorch {} in the child has no CUDA support; nothing was recorded",
                                *torch_without_cuda);
  if (cuda_unused)
    return prefix + fmt::format("the child imported PyTorch {} but never used CUDA; nothing was recorded",
                                *cuda_unused);
  if (torch_imported)
    return prefix + "the child imported torch but ended before saying whether it used CUDA; "
                    "nothing was recorded";
  return prefix + "the child never imported torch; nothing was recorded";
}

std::vector<std::string> snapshot_verdict(const std::string& snapshot_path) {
  std::vector<std::string> lines = {fmt::format("memory snapshot at the out-of-memory error: {}", snapshot_path)};
  auto report = analyze_snapshot_file(snapshot_path);
  if (!report) {
    lines.push_back("could not analyse it: " + report.error().message);
    return lines;
  }
  lines.push_back(report->verdict);
  for (const DeviceReport& device : report->devices) {
    for (const OomReport& oom : device.ooms) {
      if (!oom.stack.empty()) lines.push_back("failing allocation from " + oom.stack.front());
      if (!oom.top_stacks.empty()) {
        lines.push_back(fmt::format("largest live stack then: {} ({})", oom.top_stacks.front().key,
                                    format_bytes(oom.top_stacks.front().bytes)));
      }
      std::string fixes;
      for (const OomFix& fix : oom.fixes) fixes += (fixes.empty() ? "" : "; ") + fix.title;
      if (!fixes.empty()) lines.push_back("fixes: " + fixes);
    }
  }
  lines.push_back(fmt::format("details: oomdoc snapshot {} (--html report.html for the timeline)", snapshot_path));
  return lines;
}

EnvironmentChanges alloc_conf_environment(const std::string& value) {
  EnvironmentChanges changes;
  for (std::string_view variable : kAllocatorConfVariables) changes.push_back({std::string(variable), value});
  return changes;
}

}  // namespace oomdoc
