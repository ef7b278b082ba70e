#include "report/snapshot_render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analyses/snapshot_builder.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

using ::testing::HasSubstr;

SnapshotReport train_report() {
  auto r = analyze_snapshot_file(testing::fixture_path("snapshot/train_p4.pickle"));
  EXPECT_TRUE(r.ok());
  return r.ok() ? std::move(r.value()) : SnapshotReport{};
}

TEST(SnapshotJson, HasTheDocumentedFields) {
  Json doc = snapshot_report_json(train_report());
  EXPECT_EQ(doc["command"], "snapshot");
  ASSERT_EQ(doc["devices"].size(), 2u);
  const Json& d = doc["devices"][0];
  for (const char* key : {"device", "segments", "reserved_bytes", "allocated_bytes", "active_bytes",
                          "requested_bytes", "inactive_bytes", "largest_free_block_bytes", "trace_events",
                          "peak_live_bytes", "baseline_bytes", "ooms", "top_stacks"}) {
    EXPECT_TRUE(d.contains(key)) << key;
  }
  ASSERT_EQ(d["ooms"].size(), 1u);
  const Json& o = d["ooms"][0];
  for (const char* key : {"event_index", "requested_bytes", "device_free_bytes", "live_bytes",
                          "reserved_bytes", "largest_free_block_bytes", "verdict", "stack"}) {
    EXPECT_TRUE(o.contains(key)) << key;
  }
  EXPECT_EQ(o["verdict"], "too_large_or_outside_pytorch");
  EXPECT_EQ(o["requested_bytes"], 21474836480ull);
  EXPECT_TRUE(d["top_stacks"][0]["live_bytes"].is_number_unsigned());
  // Absent values are null, never 0 or -1.
  EXPECT_TRUE(o["outside_pytorch_bytes"].is_null());
  EXPECT_TRUE(doc["devices"][1]["ooms"].empty());
}

// Every figure the terminal prints is in the document: the peak live memory of the verdict (baseline
// + trace peak), the count of frees of pre-recording memory and whether the trace has time_us.
// Expected values: plain Python (pickle.load, alloc/free_completed replay) on the fixture.
TEST(SnapshotJson, CarriesEveryFigureTheTerminalPrints) {
  Json doc = snapshot_report_json(train_report());
  const Json& d = doc["devices"][0];
  EXPECT_EQ(d["baseline_bytes"], 25784476u);
  EXPECT_EQ(d["peak_live_bytes"], 40592250);
  EXPECT_EQ(d["live_at_peak_bytes"], 66376726u);
  EXPECT_EQ(d["unmatched_frees"], 2u);
  EXPECT_EQ(d["unmatched_free_bytes"], 409600u);
  EXPECT_EQ(d["trace_has_time"], true);
  EXPECT_EQ(doc["devices"][1]["live_at_peak_bytes"], 87642231u);
  std::string text = render_snapshot_text(train_report(), Style::plain());
  EXPECT_THAT(text, HasSubstr("(live 63.30 MiB)"));  // 66376726 B
  EXPECT_THAT(text, HasSubstr("2 frees of memory allocated before recording (400.00 KiB)"));
  // The plotted timeline, as columns: 105 events, so one point each; the peak is event 70.
  const Json& tl = d["timeline"];
  for (const char* column : {"event_index", "time_us", "live_bytes", "reserved_bytes", "action", "size_bytes", "stack"}) {
    ASSERT_EQ(tl[column].size(), 105u) << column;
  }
  EXPECT_EQ(tl["event_index"][70], 70u);
  EXPECT_EQ(tl["live_bytes"][70], 66376726);
  EXPECT_EQ(tl["action"][70], "alloc");
  EXPECT_EQ(tl["time_us"][70], d["peak_time_us"]);
}

TEST(SnapshotText, VerdictFirst) {
  std::string text = render_snapshot_text(train_report(), Style::plain());
  EXPECT_EQ(text.rfind("OOM on cuda:0 at trace event ", 0), 0u) << text.substr(0, 200);
  EXPECT_THAT(text, HasSubstr("OOM at event "));
  EXPECT_THAT(text, HasSubstr("top stacks at the trace peak"));
  EXPECT_THAT(text, HasSubstr("possible leaks"));
  EXPECT_EQ(text.find("\x1b["), std::string::npos);  // plain style: no colour codes
  // The failing allocation's whole listing: 12 library frames, then the user's (it used to stop at 8).
  EXPECT_THAT(text, HasSubstr("      nn/functional.py:1191 gelu\n      project/model.py:42 forward\n"
                              "      project/train.py:88 train_step\n      project/train.py:131 main\n"
                              "    cache released just before"));
}

TEST(SnapshotText, OomsPastTheAnalysedFirstTwentyAreStillCounted) {
  testing::SnapshotBuilder b;
  b.segment(0, 0x10000000, {{2 << 20, BlockState::kActiveAllocated, 2 << 20, kNoStack}});
  for (int i = 0; i < 25; ++i) b.event(TraceAction::kOom, 0, 4 << 20);
  SnapshotReport r = analyze_snapshot(b.snapshot());
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].ooms.size(), 20u);
  EXPECT_EQ(r.devices[0].oom_count, 25u);
  EXPECT_THAT(r.verdict, HasSubstr(" and 24 more OOM events"));
  const std::string text = render_snapshot_text(r, Style::plain());
  EXPECT_THAT(text, HasSubstr("\n  (5 more OOM events not analysed: only the first 20 of 25 are)\n"));
  EXPECT_THAT(text, HasSubstr("segments at the first of 25 OOMs (event 0)"));
  const Json doc = snapshot_report_json(r);
  EXPECT_EQ(doc["devices"][0]["ooms"].size(), 20u);
  EXPECT_EQ(doc["devices"][0]["oom_count"], 25u);
}

TEST(SnapshotText, ControlCharactersFromTheFileAreEscaped) {
  testing::SnapshotBuilder b;
  StackId evil = b.stack({{"/u/model.py", 3, "ax\x1b[31mRED\x1b]0;title\x07\r\nFAKE LINE: No OOM"}});
  b.segment(0, 0x10000000, {{2 << 20, BlockState::kActiveAllocated, 2 << 20, evil}});
  const std::string text = render_snapshot_text(analyze_snapshot(b.snapshot()), Style::plain());
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_EQ(text.find('\x07'), std::string::npos);
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_EQ(text.find("\nFAKE LINE"), std::string::npos);
  EXPECT_THAT(text, HasSubstr("u/model.py:3 ax\\x1b[31mRED\\x1b]0;title\\x07\\x0d\\x0aFAKE LINE: No OOM\n"));
}

TEST(SnapshotText, CompareSaysHowManyChangedStacksTopLeftOut) {
  testing::SnapshotBuilder before, after;
  before.segment(0, 0x10000000, {{512, BlockState::kInactive, 0, kNoStack}});
  std::vector<std::tuple<uint64_t, BlockState, uint64_t, StackId>> blocks;
  for (int i = 0; i < 13; ++i) {
    StackId s = after.stack({{"/p/model.py", i + 1, "forward"}});
    blocks.push_back({4096, BlockState::kActiveAllocated, 1000 + uint64_t(i), s});
  }
  after.segment(0, 0x10000000, blocks);
  SnapshotComparison c = compare_snapshots(before.snapshot(), after.snapshot());
  EXPECT_EQ(c.stacks.size(), 10u);
  EXPECT_EQ(c.changed_stacks, 13u);
  EXPECT_THAT(render_comparison_text(c, "a", "b", Style::plain()),
              HasSubstr("p/model.py:4 forward\n  (3 more changed stacks; --top to see more)\n"));
  EXPECT_EQ(comparison_json(c, "a", "b")["changed_stacks"], 13u);
  SnapshotOptions all;
  all.top = 20;
  EXPECT_EQ(render_comparison_text(compare_snapshots(before.snapshot(), after.snapshot(), all), "a", "b",
                                   Style::plain())
                .find("more changed stacks"),
            std::string::npos);
}

TEST(SnapshotHtml, SelfContainedWithTheChartLibraryAndData) {
  std::string html = render_snapshot_html(train_report());
  EXPECT_THAT(html, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("uPlot 1.6.32 | MIT License"));
  EXPECT_THAT(html, HasSubstr("\"peak_live_bytes\""));
  // The byte axis ticks at whole binary steps, as its labels are binary (not 9.54 MiB for 10^7 B).
  EXPECT_THAT(html, HasSubstr("incrs: binaryIncrs"));
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  // Nothing inside the inline scripts can close them early.
  size_t first_close = html.find("</script>");
  size_t report_start = html.find("id=\"report\">");
  ASSERT_NE(report_start, std::string::npos);
  EXPECT_GT(html.find("</script>", report_start), report_start);
  EXPECT_LT(first_close, report_start);
}

// A frame's filename can hold markup (tests/fixtures/snapshot/markup_in_frames.json:
// "<!--<script>", U+2028, "</script>", "&amp;"). In the page's JSON blocks every <, > and & is a \u
// escape, so no script block holds "<!--" (which, followed by "<script", would make the parser
// swallow the rest of the page) or an early "</script>"; JSON.parse gives the filename back whole.
TEST(SnapshotHtml, MarkupInTheSnapshotStaysDataInsideItsScriptBlock) {
  auto r = analyze_snapshot_file(testing::fixture_path("snapshot/markup_in_frames.json"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string html = render_snapshot_html(r.value());
  const std::string filename = "<!--<script>\u2028</script>&amp;";
  size_t blocks = 0;
  for (size_t open = html.find("<script"); open != std::string::npos; open = html.find("<script", open + 1)) {
    const size_t body = html.find('>', open) + 1;
    const size_t close = html.find("</script>", body);
    ASSERT_NE(close, std::string::npos);
    const std::string content = html.substr(body, close - body);
    EXPECT_EQ(content.find("<!--"), std::string::npos) << "script block " << blocks;
    EXPECT_EQ(content.find("<script"), std::string::npos) << "script block " << blocks;
    EXPECT_EQ(content.find("\u2028"), std::string::npos) << "script block " << blocks;  // the raw character
    ++blocks;
    open = close;
  }
  EXPECT_EQ(blocks, 7u);  // the error counter, four JSON blocks, uPlot, the page's code
  EXPECT_THAT(html, HasSubstr("\\u003c!--\\u003cscript\\u003e\\u2028\\u003c/script\\u003e\\u0026amp;"));
  const size_t report = html.find("id=\"report\">") + std::string("id=\"report\">").size();
  const Json doc = Json::parse(html.substr(report, html.find("</script>", report) - report));
  EXPECT_EQ(doc["devices"][0]["top_stacks"][0]["frames"][0].get<std::string>().rfind(filename, 0), 0u)
      << doc["devices"][0]["top_stacks"][0].dump();
}

// The page's figures are oomdoc's format_bytes, not a JavaScript copy of it: 1 GiB - 512 B is
// "1.00 GiB" (a JS formatter without the 1023.995 carry wrote "1024.00 MiB") and 1152 B is
// "1.12 KiB" (JS toFixed rounds the tie up: "1.13 KiB").
TEST(SnapshotHtml, FiguresAreFormattedByFormatBytes) {
  auto r = analyze_snapshot_file(testing::fixture_path("snapshot/format_edges.json"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::string html = render_snapshot_html(r.value());
  EXPECT_THAT(html, HasSubstr("\"reserved_bytes\":1073741312,\"reserved_bytes_text\":\"1.00 GiB\""));
  EXPECT_THAT(html, HasSubstr("\"requested_bytes\":1152,\"requested_bytes_text\":\"1.12 KiB\""));
  EXPECT_THAT(html, HasSubstr("\"live_bytes\":1152,\"live_bytes_text\":\"1.12 KiB\""));  // top stack
  // The --json document itself carries no texts.
  EXPECT_FALSE(snapshot_report_json(r.value())["devices"][0].contains("reserved_bytes_text"));
}

SnapshotReport fixture_report(const std::string& name) {
  auto r = analyze_snapshot_file(testing::fixture_path("snapshot/" + name));
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r.value()) : SnapshotReport{};
}

TEST(SnapshotJson, FragmentationHasTheDocumentedFieldsAndEverySegment) {
  Json doc = snapshot_report_json(fixture_report("fragmented_p4.pickle"));
  const Json& f = doc["devices"][0]["fragmentation"];
  EXPECT_EQ(f["at"], "oom");
  EXPECT_EQ(f["oom_event_index"], 23u);
  EXPECT_EQ(f["requested_bytes"], 16777216u);
  EXPECT_EQ(f["device_free_bytes"], 2097152u);
  EXPECT_EQ(f["free_bytes"], 50855936u);
  EXPECT_EQ(f["unusable_free_bytes"], 50855936u);
  EXPECT_EQ(f["largest_free_block_bytes"], 14680064u);
  EXPECT_EQ(f["segments_fitting_request"], 0u);
  EXPECT_EQ(f["expandable_segments"], false);
  EXPECT_EQ(f["meaning"], "fragmented");
  EXPECT_EQ(f["segment_count"], 4u);
  // Columns of equal length, one entry per segment, in the table's order.
  const Json& columns = f["segments"];
  ASSERT_EQ(columns.size(), 12u);
  for (const auto& [name, column] : columns.items()) EXPECT_EQ(column.size(), 4u) << name;
  Json first;
  for (const auto& [name, column] : columns.items()) first[name] = column[0];
  EXPECT_EQ(first, Json::parse(R"({"address": 139637976727552, "size_bytes": 67108864, "segment_type": "large",
                                   "stream": 0, "private_pool": false, "expandable": false,
                                   "allocated_bytes": 33554432, "free_bytes": 33554432,
                                   "largest_free_block_bytes": 8388608, "blocks": 8, "free_blocks": 4,
                                   "unusable_free_bytes": 33554432})"));
  EXPECT_TRUE(columns["segment_type"][3].is_null());  // released after the OOM
  EXPECT_EQ(columns["stream"][3], 3);
  // Without an OOM: at dump, request and fitting count null.
  const Json train = snapshot_report_json(train_report());
  const Json& dump = train["devices"][1]["fragmentation"];
  EXPECT_EQ(dump["at"], "dump");
  EXPECT_TRUE(dump["oom_event_index"].is_null());
  EXPECT_TRUE(dump["requested_bytes"].is_null());
  EXPECT_TRUE(dump["device_free_bytes"].is_null());
  EXPECT_TRUE(dump["segments_fitting_request"].is_null());
  EXPECT_EQ(dump["segment_count"], 26u);
  EXPECT_EQ(dump["segments"]["address"].size(), 26u);  // all of them, whatever --segments says
}

// With time_us on every entry the timeline's x axis is seconds from the first event; the same
// snapshot without time_us falls back to the event index.
TEST(SnapshotJson, TimelineInSecondsWhenTimedElseByEventIndex) {
  Json timed = snapshot_report_json(fixture_report("fragmented_p4.pickle"))["devices"][0];
  EXPECT_EQ(timed["trace_time_axis"], true);
  EXPECT_EQ(timed["trace_start_time_us"], 1717000000000000);
  EXPECT_EQ(timed["trace_seconds"], 7.5);   // 31 events, 0.25 s apart
  EXPECT_EQ(timed["peak_event_index"], 14u);
  EXPECT_EQ(timed["peak_seconds"], 3.5);
  EXPECT_EQ(timed["ooms"][0]["seconds"], 5.75);
  const Json& tl = timed["timeline"];
  EXPECT_EQ(tl["x_axis"], "seconds");
  EXPECT_EQ(tl["start_time_us"], 1717000000000000);
  ASSERT_EQ(tl["seconds"].size(), 31u);
  EXPECT_EQ(tl["seconds"][0], 0.0);
  EXPECT_EQ(tl["seconds"][23], 5.75);
  EXPECT_EQ(tl["time_us"][23], 1717000005750000);

  Json untimed = snapshot_report_json(fixture_report("fragmented_no_time.json"))["devices"][0];
  EXPECT_EQ(untimed["trace_time_axis"], false);
  EXPECT_TRUE(untimed["trace_start_time_us"].is_null());
  EXPECT_TRUE(untimed["trace_seconds"].is_null());
  EXPECT_TRUE(untimed["peak_seconds"].is_null());
  EXPECT_TRUE(untimed["ooms"][0]["seconds"].is_null());
  EXPECT_EQ(untimed["timeline"]["x_axis"], "event_index");
  ASSERT_EQ(untimed["timeline"]["seconds"].size(), 31u);
  EXPECT_TRUE(untimed["timeline"]["seconds"][5].is_null());
  // The segments do not depend on the clock.
  EXPECT_EQ(untimed["fragmentation"], timed["fragmentation"]);
}

TEST(SnapshotText, SegmentTableAndWhatItMeans) {
  const SnapshotReport r = fixture_report("fragmented_p4.pickle");
  std::string text = render_snapshot_text(r, Style::plain(), 2);
  EXPECT_THAT(text, HasSubstr(
      "  segments at the OOM (event 23), most free memory in pieces smaller than the request first: 2 of 4 (--segments N for more, --json for all)\n"
      "    address                 size pool   stream   allocated        free largest free blocks    unusable\n"
      "    0x7f0000000000     64.00 MiB large       0   32.00 MiB   32.00 MiB     8.00 MiB      8   32.00 MiB\n"
      "    0x7f0020000000     20.00 MiB large       7    6.00 MiB   14.00 MiB    14.00 MiB      2   14.00 MiB\n"
      "    0 of 4 segments had a free block of 16.00 MiB (the request); the largest free block was 14.00 MiB, 48.50 MiB free in all\n"));
  EXPECT_THAT(text, HasSubstr("trace: 31 events over 7.500 s;"));
  EXPECT_THAT(text, HasSubstr(" at event 14 (3.500 s) "));
  EXPECT_THAT(text, HasSubstr("OOM at event 23 (5.750 s): fragmentation\n"));
  // --segments 0: no rows, the summary and its meaning stay.
  std::string none = render_snapshot_text(r, Style::plain(), 0);
  EXPECT_EQ(none.find("0x7f0000000000"), std::string::npos);
  EXPECT_THAT(none, HasSubstr("0 of 4 segments had a free block of 16.00 MiB (the request)"));
  EXPECT_THAT(none, HasSubstr("=> 48.50 MiB free in PyTorch's cache and 2.00 MiB on the device would have covered"));
  std::string untimed = render_snapshot_text(fixture_report("fragmented_no_time.json"), Style::plain());
  EXPECT_THAT(untimed, HasSubstr("trace: 31 events (no time_us: event index as time);"));
  EXPECT_THAT(untimed, HasSubstr("OOM at event 23: fragmentation\n"));
}

TEST(SnapshotHtml, SegmentTableAndTheTimeAxis) {
  std::string html = render_snapshot_html(fixture_report("fragmented_p4.pickle"));
  EXPECT_THAT(html, HasSubstr("'seconds from the first trace event (time_us)'"));
  EXPECT_THAT(html, HasSubstr("'trace event index (the trace has no time_us)'"));
  EXPECT_THAT(html, HasSubstr("\"x_axis\":\"seconds\""));
  EXPECT_THAT(html, HasSubstr("\"unusable_free_bytes\":33554432,\"unusable_free_bytes_text\":\"32.00 MiB\""));
  EXPECT_THAT(html, HasSubstr("'segments-' + d.device"));
  EXPECT_THAT(html, HasSubstr("id=\"segment-rows\">[[{\"address\":\"0x7f0000000000\",\"size_bytes\":67108864,"));
  // The page lists the first 100 rows: the report it embeds carries no segment columns.
  EXPECT_EQ(html.find("\"segments\":{\"address\""), std::string::npos);
}

}  // namespace
}  // namespace oomdoc
