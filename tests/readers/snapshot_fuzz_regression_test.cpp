// Inputs the fuzzer (fuzz/snapshot_fuzz.cpp) once crashed, stalled or found the trace-entry fast
// path and the VM disagreeing on, replayed through the same pipeline: each must give a clean
// result or a clean error, the same with the fast path off.
#include <gtest/gtest.h>

#include <filesystem>

#include "analyses/snapshot_report.h"
#include "readers/snapshot_reader.h"
#include "report/snapshot_render.h"
#include "support/snapshot_equality.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

TEST(SnapshotFuzzRegressions, EveryCrashInputIsHandled) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::fixture_path("snapshot/fuzz"))) {
    std::string bytes = testing::read_file(entry.path().string());
    auto snapshot = read_snapshot_bytes(bytes, entry.path().filename().string());
    SnapshotReadOptions vm_only;
    vm_only.fast_trace_entries = false;
    auto reference = read_snapshot_bytes(bytes, entry.path().filename().string(), vm_only);
    ++n;
    ASSERT_EQ(snapshot.ok(), reference.ok()) << entry.path();
    if (!snapshot) {
      EXPECT_EQ(snapshot.error().message, reference.error().message) << entry.path();
    } else {
      EXPECT_EQ(testing::first_snapshot_difference(*snapshot, *reference), "") << entry.path();
    }
    if (!snapshot) {
      EXPECT_FALSE(snapshot.error().message.empty());
      continue;
    }
    SnapshotOptions options;
    options.device_total_bytes = 80ull << 30;
    SnapshotReport report = analyze_snapshot(*snapshot, options);
    EXPECT_FALSE(render_snapshot_text(report, Style::plain()).empty());
    EXPECT_FALSE(dump_json(snapshot_report_json(report)).empty());  // invalid UTF-8 is replaced
    EXPECT_FALSE(render_snapshot_html(report).empty());
  }
  EXPECT_GE(n, 1u);
}

}  // namespace
}  // namespace oomdoc
