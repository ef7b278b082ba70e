// Field-by-field comparison of two Snapshot models, for tests that read the same file two ways
// (the trace-entry fast path and the general pickle VM; pickle and JSON encodings).
#pragma once

#include <string>

#include "model/snapshot.h"

namespace oomdoc::testing {

// The first difference found, described ("trace_events[12].addr: 4096 vs 8192"); empty when the
// two models are equal (source_format aside).
std::string first_snapshot_difference(const Snapshot& a, const Snapshot& b);

}  // namespace oomdoc::testing
