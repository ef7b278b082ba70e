// The formats' triggers are found in one pass over a line (registry.cpp): the same answers as a
// find per trigger, at every place a trigger can sit.
#include <gtest/gtest.h>

#include "readers/formats/message_format.h"

namespace oomdoc {
namespace {

TEST(TriggerIndex, HoldsTriggerAtTheStartMiddleAndEndOfALine) {
  EXPECT_TRUE(holds_trigger("out of memory"));
  EXPECT_TRUE(holds_trigger("RuntimeError: CUDA out of memory. Tried"));
  EXPECT_TRUE(holds_trigger("x out of memory"));
  EXPECT_FALSE(holds_trigger("out of memor"));       // one byte short, at the line's end
  EXPECT_FALSE(holds_trigger("out of  memory"));     // the trigger is literal (the window collapses spaces)
  EXPECT_FALSE(holds_trigger(""));
  EXPECT_FALSE(holds_trigger(std::string(20000, 'm') + " memory memory"));
  // A trigger of fewer than 8 bytes (compared by its masked first word) and one of more.
  EXPECT_TRUE(holds_trigger("ggml: more than the limit"));
  EXPECT_FALSE(holds_trigger("ggml: more tha"));
}

TEST(TriggerIndex, FirstLineHoldsATriggerStartingOnItEvenWhenItRunsOntoTheNext) {
  const MessageWindow wrapped = MessageWindow::from_lines({"RuntimeError: CUDA out of", "memory. Tried to allocate 2.00 GiB"});
  EXPECT_TRUE(wrapped.first_line_holds("out of memory"));
  // A trigger that starts on the second line is not the first line's.
  const MessageWindow second = MessageWindow::from_lines({"step 12 loss 1.3", "RuntimeError: CUDA out of memory."});
  EXPECT_FALSE(second.first_line_holds("out of memory"));
  // Runs of spaces on the first line are read as one, as the joined text has them.
  const MessageWindow spaced = MessageWindow::from_lines({"CUDA out  of   memory", "next"});
  EXPECT_TRUE(spaced.first_line_holds("out of memory"));
  // A string that is no format's trigger is looked for directly.
  EXPECT_TRUE(wrapped.first_line_holds("CUDA out"));
  EXPECT_FALSE(wrapped.first_line_holds("Tried to"));
}

TEST(TriggerIndex, LineEndingWithATriggerStart) {
  EXPECT_TRUE(ends_with_trigger_start("RuntimeError: CUDA out of"));
  EXPECT_TRUE(ends_with_trigger_start("RuntimeError: CUDA ou"));
  EXPECT_TRUE(ends_with_trigger_start("RuntimeError: CUDA"));   // "CUDA error: out of memory" cut at its space
  EXPECT_FALSE(ends_with_trigger_start("step 12 loss 1.3"));
}

TEST(TriggerIndex, TriggerCrossesTheSeamOnlyWhenItStartsBeforeAndEndsAfter) {
  const std::string glued = "CUDA out of memory. Tried";
  EXPECT_TRUE(trigger_crosses(glued, 8));     // "CUDA out" | " of memory"
  EXPECT_FALSE(trigger_crosses(glued, 5));    // the trigger starts at the seam
  EXPECT_FALSE(trigger_crosses(glued, 18));   // it ends at the seam
  EXPECT_FALSE(trigger_crosses(glued, 100));  // a seam past the text
}

}  // namespace
}  // namespace oomdoc
