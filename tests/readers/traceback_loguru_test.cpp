// A traceback as loguru prints it with backtrace=True and diagnose=True (logger.catch,
// logger.exception): "> File ..." marks the frame where the error was caught, and each variable of
// a frame's code is drawn under it with │ and └ (qa21 t100).
#include <gtest/gtest.h>

#include "analyses/explain.h"
#include "readers/traceback.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

const std::string kOom =
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.53 GiB. GPU 0 has a total capacity of 23.64 GiB of "
    "which 1.02 GiB is free. Including non-PyTorch memory, this process has 22.60 GiB memory in use. Of the allocated "
    "memory 20.11 GiB is allocated by PyTorch, and 2.03 GiB is reserved by PyTorch but unallocated.\n";

std::string loguru_log(const std::string& extra_variables) {
  return "2024-05-01 10:00:00.123 | ERROR    | __main__:main:42 - An error has been caught in function 'main', process "
         "'MainProcess' (1234), thread 'MainThread' (5678):\n"
         "Traceback (most recent call last):\n"
         "\n"
         "  File \"/w/train.py\", line 60, in <module>\n"
         "    main()\n"
         "    └ <function main at 0x7f3c2a1b0d30>\n"
         "\n"
         "> File \"/w/train.py\", line 42, in main\n"
         "    loss.backward()\n"
         "    │    └ <method 'backward' of 'torch._C.TensorBase' objects>\n"
         "    └ tensor(2.3051, device='cuda:0', grad_fn=<NllLossBackward0>)\n"
         "\n"
         "  File \"/usr/lib/python3/dist-packages/torch/_tensor.py\", line 522, in backward\n"
         "    torch.autograd.backward(\n"
         "    │     │        └ <function backward at 0x7f3c4b2c1e50>\n" +
         extra_variables +
         "    │     └ <module 'torch.autograd' from '/usr/lib/python3/dist-packages/torch/autograd/__init__.py'>\n"
         "    └ <module 'torch' from '/usr/lib/python3/dist-packages/torch/__init__.py'>\n"
         "\n" + kOom;
}

void expect_caught_frame(const std::string& log) {
  const ExplainReport r = testing::explain_text(log);
  ASSERT_EQ(r.events.size(), 1u);
  const auto& tb = r.events[0].event.traceback;
  ASSERT_TRUE(tb.has_value());
  ASSERT_EQ(tb->frames.size(), 3u);
  EXPECT_EQ(tb->frames[1].file, "/w/train.py");
  EXPECT_EQ(tb->frames[1].line, 42u);
  EXPECT_EQ(tb->frames[1].function, "main");
  EXPECT_EQ(tb->frames[1].code, "loss.backward()");
  EXPECT_EQ(tb->frames[2].line, 522u);
  ASSERT_TRUE(tb->innermost_user_frame.has_value());
  EXPECT_EQ(tb->innermost_user_frame->line, 42u);
  EXPECT_EQ(tb->innermost_user_frame->function, "main");
  EXPECT_EQ(tb->operation, "backward");
}

TEST(TracebackLoguru, CaughtFrameAndVariablesAreRead) { expect_caught_frame(loguru_log("")); }

// A frame whose code names many variables draws a line for each: the last frame is still the one
// right above the exception.
TEST(TracebackLoguru, ManyVariableLinesKeepTheTraceback) {
  std::string many;
  for (int i = 0; i < 12; ++i) many += "    │     │        │ <tensor " + std::to_string(i) + ">\n";
  expect_caught_frame(loguru_log(many));
}

}  // namespace
}  // namespace oomdoc
