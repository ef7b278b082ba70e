// The Python side of `oomdoc run`: the injected sitecustomize for --snapshot-on-oom
// (data/python/oomdoc_sitecustomize.py), and the environment for --alloc-conf.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace oomdoc {

using EnvironmentChanges = std::vector<std::pair<std::string, std::string>>;

inline constexpr uint64_t kDefaultSnapshotMaxEntries = 100000;

// A temporary directory holding the hook as sitecustomize.py, removed by the destructor.
class SnapshotHook {
 public:
  // Creates snapshot_dir when missing; the error names it. existing_pythonpath: $PYTHONPATH now.
  static Result<SnapshotHook> prepare(const std::string& snapshot_dir, uint64_t max_entries,
                                      const char* existing_pythonpath);
  SnapshotHook(SnapshotHook&& other) noexcept;
  SnapshotHook& operator=(SnapshotHook&&) = delete;
  SnapshotHook(const SnapshotHook&) = delete;
  ~SnapshotHook();

  const EnvironmentChanges& environment() const { return environment_; }
  const std::string& hook_dir() const { return hook_dir_; }
  const std::string& snapshot_dir() const { return snapshot_dir_; }

 private:
  SnapshotHook() = default;
  std::string hook_dir_;
  std::string snapshot_dir_;
  EnvironmentChanges environment_;
};

// What the hook reported from every Python process of the run (status files in the hook dir).
struct HookOutcome {
  int processes = 0;                   // Python processes that loaded the hook
  std::vector<std::string> snapshots;  // snapshot files written
  bool recorded = false;               // some process recorded CUDA memory history
  std::optional<std::string> torch_without_cuda;  // torch version whose build has no CUDA
  std::optional<std::string> cuda_unused;         // torch version whose program never used CUDA
  bool torch_imported = false;
  std::vector<std::string> errors;

  // The one line to say after the run, or nullopt when recording worked and there is nothing
  // to add (the snapshots are reported separately).
  std::optional<std::string> summary() const;
  // Whether recording could never have worked (the hook's own errors, a hook that did not load,
  // a torch without CUDA): worth saying even after a run that succeeded. A program that simply
  // never used CUDA is news only after a failure.
  bool misconfigured() const { return !errors.empty() || processes == 0 || torch_without_cuda.has_value(); }
};

HookOutcome read_hook_outcome(const std::string& hook_dir);

// Lines to print about a snapshot the hook wrote: the verdict of `oomdoc snapshot`, the failing
// stack, the largest live stack at the OOM and the fixes that follow.
std::vector<std::string> snapshot_verdict(const std::string& snapshot_path);

// --alloc-conf VALUE: set under both of the variable's names (kAllocatorConfVariables in
// analyses/fix_catalog.h says why).
EnvironmentChanges alloc_conf_environment(const std::string& value);

}  // namespace oomdoc
