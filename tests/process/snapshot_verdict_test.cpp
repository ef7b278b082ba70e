// `oomdoc run --snapshot-on-oom` adds the snapshot analysis's verdict to its explanation.
#include <gtest/gtest.h>

#include "process/python_hook.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

TEST(SnapshotVerdict, NamesTheVerdictStackAndFixes) {
  const std::string path = testing::fixture_path("snapshot/train_p4.pickle");
  std::vector<std::string> lines = snapshot_verdict(path);
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[0], "memory snapshot at the out-of-memory error: " + path);
  EXPECT_EQ(lines[1].rfind("OOM on cuda:0 at trace event 104: too_large_or_outside_pytorch", 0), 0u) << lines[1];
  bool fixes = false, stack = false;
  for (const auto& l : lines) {
    fixes = fixes || l.rfind("fixes: ", 0) == 0;
    stack = stack || l.rfind("failing allocation from ", 0) == 0;
  }
  EXPECT_TRUE(fixes);
  EXPECT_TRUE(stack);
}

TEST(SnapshotVerdict, AnUnreadableDumpIsSaidNotHidden) {
  std::vector<std::string> lines = snapshot_verdict("/nonexistent/snapshot.pickle");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("could not analyse it: /nonexistent/snapshot.pickle"), std::string::npos) << lines[1];
}

}  // namespace
}  // namespace oomdoc
