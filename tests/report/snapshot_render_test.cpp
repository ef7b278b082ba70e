#include "report/snapshot_render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

TEST(SnapshotHtml, SelfContainedWithTheChartLibraryAndData) {
  std::string html = render_snapshot_html(train_report());
  EXPECT_THAT(html, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("uPlot 1.6.32 | MIT License"));
  EXPECT_THAT(html, HasSubstr("\"peak_live_bytes\""));
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  // Nothing inside the inline scripts can close them early.
  size_t first_close = html.find("</script>");
  size_t report_start = html.find("id=\"report\">");
  ASSERT_NE(report_start, std::string::npos);
  EXPECT_GT(html.find("</script>", report_start), report_start);
  EXPECT_LT(first_close, report_start);
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

}  // namespace
}  // namespace oomdoc
