// A traceback as Jupyter/IPython prints it: its frames ("Cell In[12], line 3", "File /x.py:40, in
// f(args)", IPython 7's "/x.py in f(args)"), the line each ran from the "---->" arrow, and the
// function's bare name, so that what the program was doing is read as from Python's own traceback.
#include <gtest/gtest.h>

#include "readers/log_scanner.h"
#include "readers/traceback.h"

namespace oomdoc {
namespace {

const std::string kMessage =
    "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of "
    "which 1.08 GiB is free. Including non-PyTorch memory, this process has 22.56 GiB memory in use. Of the allocated "
    "memory 20.14 GiB is allocated by PyTorch, and 1.97 GiB is reserved by PyTorch but unallocated.\n";

// IPython 8: a cell, the user's function in a file, PyTorch's module call with its class and
// arguments; context lines around each arrow (more than Python's one line per frame).
const std::string kIpython8 =
    "---------------------------------------------------------------------------\n"
    "OutOfMemoryError                          Traceback (most recent call last)\n"
    "Cell In[12], line 3\n"
    "      1 model.eval()\n"
    "      2 batch = next(iter(loader))\n"
    "----> 3 loss = evaluate(model)\n"
    "\n"
    "File /home/ana/project/x.py:40, in evaluate(model)\n"
    "     35 def evaluate(model):\n"
    "     36     total = 0\n"
    "     37     n = 0\n"
    "     38     for batch in loader:\n"
    "     39         batch = {k: v.cuda() for k, v in batch.items()}\n"
    "---> 40         out = model(**batch)\n"
    "     41         total += out.loss\n"
    "     42         n += 1\n"
    "\n"
    "File ~/venv/lib/python3.10/site-packages/torch/nn/modules/module.py:1518, in Module._wrapped_call_impl(self, *args, **kwargs)\n"
    "   1516     return self._compiled_call_impl(*args, **kwargs)  # type: ignore[misc]\n"
    "   1517 else:\n"
    "-> 1518     return self._call_impl(*args, **kwargs)\n"
    "   1519 # comment\n"
    "   1520 x = 1\n"
    "   1521 y = 2\n"
    "   1522 z = 3\n"
    "   1523 w = 4\n"
    "\n";

TEST(TracebackIpython, Ipython8FramesAndArrows) {
  const ScanResult r = scan_text(kIpython8 + kMessage);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].line, 28u);
  ASSERT_TRUE(r.events[0].traceback);
  const Traceback& tb = *r.events[0].traceback;
  ASSERT_EQ(tb.frames.size(), 3u);
  EXPECT_EQ(tb.frames[0].file, "Cell In[12]");
  EXPECT_EQ(tb.frames[0].line, 3u);
  EXPECT_EQ(tb.frames[0].function, "<module>");
  EXPECT_EQ(tb.frames[0].code, "loss = evaluate(model)");
  EXPECT_EQ(tb.frames[1].file, "/home/ana/project/x.py");
  EXPECT_EQ(tb.frames[1].line, 40u);
  EXPECT_EQ(tb.frames[1].function, "evaluate");
  EXPECT_EQ(tb.frames[1].code, "out = model(**batch)");
  EXPECT_EQ(tb.frames[2].file, "~/venv/lib/python3.10/site-packages/torch/nn/modules/module.py");
  EXPECT_EQ(tb.frames[2].line, 1518u);
  EXPECT_EQ(tb.frames[2].function, "_wrapped_call_impl");
  EXPECT_EQ(tb.frames[2].code, "return self._call_impl(*args, **kwargs)");
  ASSERT_TRUE(tb.innermost_user_frame);
  EXPECT_EQ(tb.innermost_user_frame->file, "/home/ana/project/x.py");
  EXPECT_EQ(tb.operation, "evaluation");
}

// IPython 7: "<ipython-input-...> in <module>" and "/path/x.py in f(args)", the line from the arrow;
// a function defined in a cell of IPython 8 ("Cell In[3], line 4, in train_step(batch)").
TEST(TracebackIpython, Ipython7AndCellFunctions) {
  const ScanResult old = scan_text(
      "OutOfMemoryError                          Traceback (most recent call last)\n"
      "<ipython-input-5-9a8b7c6d2e1f> in <module>\n"
      "----> 1 scores = run_validation(model, loader)\n"
      "\n"
      "/home/ana/project/x.py in run_validation(model, loader)\n"
      "     39     for batch in loader:\n"
      "---> 40         out = model(**batch)\n"
      "     41         total += out.loss\n"
      "\n" + kMessage);
  ASSERT_EQ(old.events.size(), 1u);
  ASSERT_TRUE(old.events[0].traceback);
  const Traceback& tb = *old.events[0].traceback;
  ASSERT_EQ(tb.frames.size(), 2u);
  EXPECT_EQ(tb.frames[0].file, "<ipython-input-5-9a8b7c6d2e1f>");
  EXPECT_EQ(tb.frames[0].line, 1u);
  EXPECT_EQ(tb.frames[0].function, "<module>");
  EXPECT_EQ(tb.frames[1].file, "/home/ana/project/x.py");
  EXPECT_EQ(tb.frames[1].line, 40u);
  EXPECT_EQ(tb.frames[1].function, "run_validation");
  EXPECT_EQ(tb.frames[1].code, "out = model(**batch)");
  EXPECT_EQ(tb.operation, "evaluation");

  const ScanResult cell = scan_text(
      "OutOfMemoryError                          Traceback (most recent call last)\n"
      "Cell In[3], line 4, in train_step(batch)\n"
      "      2 def train_step(batch):\n"
      "      3     loss = model(**batch).loss\n"
      "----> 4     loss.backward()\n"
      "\n" + kMessage);
  ASSERT_EQ(cell.events.size(), 1u);
  ASSERT_TRUE(cell.events[0].traceback);
  ASSERT_EQ(cell.events[0].traceback->frames.size(), 1u);
  EXPECT_EQ(cell.events[0].traceback->frames[0].file, "Cell In[3]");
  EXPECT_EQ(cell.events[0].traceback->frames[0].line, 4u);
  EXPECT_EQ(cell.events[0].traceback->frames[0].function, "train_step");
  EXPECT_EQ(cell.events[0].traceback->operation, "backward");
}

// Python's own frames keep reading as before; IPython's forms are read only under a traceback header.
TEST(TracebackIpython, OnlyUnderAHeader) {
  EXPECT_FALSE(parse_traceback({"File /home/ana/x.py:40, in evaluate(model)", "---> 40 out = model(**batch)"}));
  const auto tb = parse_traceback({"Traceback (most recent call last):", "  File \"/home/ana/x.py\", line 7, in main",
                                   "    model(x)"});
  ASSERT_TRUE(tb);
  EXPECT_EQ(tb->frames.at(0).function, "main");
  EXPECT_EQ(tb->frames.at(0).code, "model(x)");
}

}  // namespace
}  // namespace oomdoc
