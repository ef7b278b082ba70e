// Inputs that once aborted `oomdoc explain` (the review's reproductions, and any crash
// fuzz/explain_fuzz.cpp finds: add it under tests/fixtures/explain/fuzz/ as FORMAT__what.log),
// replayed through the fuzzer's pipeline: scan, diagnose, both renderers. Each file is named after
// the format tag its first event must have: the message is still recognised, with the oversized
// number left out (tests/readers/formats/oversized_numbers_test.cpp checks each field).
#include <gtest/gtest.h>

#include <filesystem>

#include "analyses/explain.h"
#include "readers/log_scanner.h"
#include "report/explain_json.h"
#include "report/explain_terminal.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

TEST(ExplainFuzzRegressions, EveryInputIsStillRecognised) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::fixture_path("explain/fuzz"))) {
    const std::string name = entry.path().filename().string();
    const std::string format = name.substr(0, name.find("__"));
    ExplainReport report;
    add_to_report(report, scan_text(testing::read_file(entry.path().string())));
    ++n;
    ASSERT_EQ(report.events.size(), 1u) << name;
    EXPECT_EQ(report.events[0].event.format, format) << name;
    Json doc = Json::parse(dump_json(explain_to_json(report)));
    EXPECT_EQ(doc["events"][0]["format"], format) << name;
    EXPECT_NE(render_explain(report, Style::plain()).find("\n"), std::string::npos) << name;
  }
  EXPECT_EQ(n, 8u);
}

}  // namespace
}  // namespace oomdoc
