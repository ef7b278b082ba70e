// Renderers for `oomdoc snapshot`: they print a SnapshotReport and compute nothing.
#pragma once

#include <string>

#include "analyses/snapshot_report.h"
#include "report/json_output.h"
#include "report/style.h"

namespace oomdoc {

// Terminal summary: the verdict first, then per device the numbers, OOMs, the segments (the first
// `segment_rows` of the fragmentation table), top stacks, leaks.
inline constexpr size_t kDefaultSegmentRows = 10;
std::string render_snapshot_text(const SnapshotReport& report, const Style& style,
                                 size_t segment_rows = kDefaultSegmentRows);
// The --json document (fields documented in docs/json.md, "oomdoc snapshot").
Json snapshot_report_json(const SnapshotReport& report);
// One self-contained HTML page (inline uPlot, no network) with the timeline and the tables.
std::string render_snapshot_html(const SnapshotReport& report);

// The fragmentation table's wording, one place for the terminal and the HTML page: a segment's
// pool ("large", "small, private", "?" when the pool is not known), the table's heading
// ("segments at the OOM (event 23), most free memory in pieces smaller than the request first")
// and the line under it ("0 of 4 segments had a free block of 16.00 MiB (the request); ...").
std::string segment_pool_text(const SegmentUse& segment);
std::string fragmentation_heading_text(const Fragmentation& fragmentation);
std::string fragmentation_summary_text(const Fragmentation& fragmentation);

std::string render_comparison_text(const SnapshotComparison& comparison, const std::string& before,
                                   const std::string& after, const Style& style);
Json comparison_json(const SnapshotComparison& comparison, const std::string& before,
                     const std::string& after);

}  // namespace oomdoc
