// libFuzzer target: any bytes through the snapshot reader (pickle VM, JSON, model conversion) and,
// when they parse, through every analysis and renderer. Must never crash, leak or hang. Every
// input is also read with the trace-entry fast path off: both readings must agree exactly
// (the same error, or the same model), else the fuzzer stops on it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "analyses/snapshot_report.h"
#include "readers/snapshot_reader.h"
#include "report/snapshot_render.h"
#include "support/snapshot_equality.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto snapshot = oomdoc::read_snapshot_bytes(bytes, "fuzz");
  oomdoc::SnapshotReadOptions vm_only;
  vm_only.fast_trace_entries = false;
  auto reference = oomdoc::read_snapshot_bytes(bytes, "fuzz", vm_only);
  if (snapshot.ok() != reference.ok() ||
      (!snapshot.ok() && snapshot.error().message != reference.error().message)) {
    std::fprintf(stderr, "fast path and VM disagree: '%s' vs '%s'\n",
                 snapshot.ok() ? "ok" : snapshot.error().message.c_str(),
                 reference.ok() ? "ok" : reference.error().message.c_str());
    std::abort();
  }
  if (!snapshot) return 0;
  if (std::string d = oomdoc::testing::first_snapshot_difference(*snapshot, *reference); !d.empty()) {
    std::fprintf(stderr, "fast path and VM disagree: %s\n", d.c_str());
    std::abort();
  }
  oomdoc::SnapshotOptions options;
  options.device_total_bytes = 80ull << 30;
  oomdoc::SnapshotReport report = oomdoc::analyze_snapshot(*snapshot, options);
  (void)oomdoc::render_snapshot_text(report, oomdoc::Style::plain());
  (void)oomdoc::dump_json(oomdoc::snapshot_report_json(report));  // as the CLI prints it
  (void)oomdoc::render_snapshot_html(report);
  (void)oomdoc::compare_snapshots(*snapshot, *snapshot, options);
  return 0;
}
