// Reads a PyTorch memory snapshot (pickle of protocol 2-5, or JSON of the same shape) into the
// Snapshot model. Frames, stacks and trace entries are decoded while the pickle streams in (a
// pickle::Folder), so a multi-GB file never exists as a generic tree in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "model/snapshot.h"

namespace oomdoc {

struct SnapshotReadOptions {
  // Called now and then with (bytes read, total bytes or 0 when unknown); for progress bars.
  std::function<void(uint64_t, uint64_t)> progress;
  // Decode trace entries straight from the pickle's bytes when they have the usual shape (the
  // general pickle VM reads the rest). Off: everything goes through the VM; tests compare both.
  bool fast_trace_entries = true;
  // When set, receives how many trace entries the fast path decoded (tests and benchmarks).
  uint64_t* fast_entries_taken = nullptr;
};

// path "-" reads standard input. Errors name the file: "x.pickle: offset 12: GLOBAL: refused: ...".
Result<Snapshot> read_snapshot_file(const std::string& path, const SnapshotReadOptions& options = {});
// The same from bytes in memory (tests, fuzzing); name is used in error messages.
Result<Snapshot> read_snapshot_bytes(std::string_view bytes, std::string_view name,
                                     const SnapshotReadOptions& options = {});

}  // namespace oomdoc
