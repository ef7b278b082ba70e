// libFuzzer target: any bytes through the snapshot reader (pickle VM, JSON, model conversion) and,
// when they parse, through every analysis and renderer. Must never crash, leak or hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "analyses/snapshot_report.h"
#include "readers/snapshot_reader.h"
#include "report/snapshot_render.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto snapshot = oomdoc::read_snapshot_bytes(bytes, "fuzz");
  if (!snapshot) return 0;
  oomdoc::SnapshotOptions options;
  options.device_total_bytes = 80ull << 30;
  oomdoc::SnapshotReport report = oomdoc::analyze_snapshot(*snapshot, options);
  (void)oomdoc::render_snapshot_text(report, oomdoc::Style::plain());
  (void)oomdoc::dump_json(oomdoc::snapshot_report_json(report));  // as the CLI prints it
  (void)oomdoc::render_snapshot_html(report);
  (void)oomdoc::compare_snapshots(*snapshot, *snapshot, options);
  return 0;
}
