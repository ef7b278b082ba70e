// A traceback as Rich draws it (rich.traceback.install()): frames in a box, "path:line in function"
// (folded over rows by a long path), the row that ran marked with ❱ and
// indent guides inside the code, so that what the program was doing is read as from Python's own.
#include <gtest/gtest.h>

#include "analyses/explain.h"
#include "readers/log_scanner.h"
#include "readers/traceback.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

const std::string kRich =
    "╭───────────────────── Traceback (most recent call last) ──────────────────────╮\n"
    "│ /home/u/train.py:40 in evaluate                                              │\n"
    "│                                                                              │\n"
    "│   37 │   model.eval()                                                        │\n"
    "│   38 │   for batch in loader:                                                │\n"
    "│   39 │   │   batch = {k: v.cuda() for k, v in batch.items()}                 │\n"
    "│ ❱ 40 │   │   outputs = model(**batch)                                        │\n"
    "│   41 │   │   losses.append(outputs.loss)                                     │\n"
    "│                                                                              │\n"
    "│ /home/u/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py:1736   │\n"
    "│ in _wrapped_call_impl                                                        │\n"
    "│                                                                              │\n"
    "│   1735 │   │   else:                                                         │\n"
    "│ ❱ 1736 │   │   │   return self._call_impl(*args, **kwargs)                   │\n"
    "│   1737                                                                       │\n"
    "╰──────────────────────────────────────────────────────────────────────────────╯\n"
    "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of "
    "which 1.08 GiB is free. Including non-PyTorch memory, this process has 22.56 GiB memory in use. Of the allocated "
    "memory 20.14 GiB is allocated by PyTorch, and 1.97 GiB is reserved by PyTorch but unallocated.\n";

// The frames of the traceback above the one event `text` holds (a test failure otherwise).
std::vector<TracebackFrame> frames_of(const std::string& text) {
  const ScanResult r = scan_text(text);
  EXPECT_EQ(r.events.size(), 1u);
  if (r.events.size() != 1 || !r.events[0].traceback) {
    ADD_FAILURE() << "no traceback";
    return {};
  }
  return r.events[0].traceback->frames;
}

void expect_frame(const TracebackFrame& f, const std::string& file, uint64_t line, const std::string& function,
                  const std::string& code) {
  EXPECT_EQ(f.file, file);
  EXPECT_EQ(f.line, line);
  EXPECT_EQ(f.function, function);
  EXPECT_EQ(f.code, code);
}

TEST(TracebackRich, BoxedFramesAndTheRowThatRan) {
  const ScanResult r = scan_text(kRich);
  ASSERT_EQ(r.events.size(), 1u);
  ASSERT_TRUE(r.events[0].traceback);
  const Traceback& tb = *r.events[0].traceback;
  ASSERT_EQ(tb.frames.size(), 2u);
  expect_frame(tb.frames[0], "/home/u/train.py", 40, "evaluate", "outputs = model(**batch)");
  expect_frame(tb.frames[1], "/home/u/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py", 1736,
               "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)");
  ASSERT_TRUE(tb.innermost_user_frame);
  EXPECT_EQ(tb.innermost_user_frame->file, "/home/u/train.py");
  EXPECT_EQ(tb.operation, "evaluation");
  // The cause is read from the frames as from a plain traceback.
  const ExplainReport report = testing::explain_text(kRich);
  ASSERT_EQ(report.events.size(), 1u);
  EXPECT_EQ(report.events[0].diagnosis.cause, "evaluation_with_grad");
}

// A path longer than the box folds over rows: cut mid-word (the row is full), or at the ':' with
// the line number on the next row; the frame is read whole either way.
TEST(TracebackRich, FoldedPathsAreReadWhole) {
  const std::string folded =
      "╭───────────────────── Traceback (most recent call last) ──────────────────────╮\n"
      "│ /home/someone/.local/share/virtualenvs/project-abc123/lib/python3.11/site-pa │\n"
      "│ ckages/mylib/trainer.py:40 in evaluate                                       │\n"
      "│                                                                              │\n"
      "│ ❱ 40 │   │   out = model(batch)                                              │\n"
      "│                                                                              │\n"
      "│ /home/someone/very/long/path/to/a/project/with/many/dirs/src/pkg/trainer.py: │\n"
      "│ 88 in evaluate_with_a_really_long_function_name                              │\n"
      "│                                                                              │\n"
      "│ ❱ 88 │   │   return self.step(batch)                                         │\n"
      "│                                                                              │\n"
      "│ /home/someone/very/long/path/to/a/project/with/many/dirs/src/pkg/trainer.py:90 │\n"
      "│ in step                                                                      │\n"
      "│                                                                              │\n"
      "│ ❱ 90 │   │   return model(batch)                                             │\n"
      "╰──────────────────────────────────────────────────────────────────────────────╯\n"
      "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of "
      "which 1.08 GiB is free. Including non-PyTorch memory, this process has 22.56 GiB memory in use. Of the allocated "
      "memory 20.14 GiB is allocated by PyTorch, and 1.97 GiB is reserved by PyTorch but unallocated.\n";
  const std::vector<TracebackFrame> frames = frames_of(folded);
  ASSERT_EQ(frames.size(), 3u);
  expect_frame(frames[0], "/home/someone/.local/share/virtualenvs/project-abc123/lib/python3.11/site-packages/mylib/trainer.py",
               40, "evaluate", "out = model(batch)");
  const std::string trainer = "/home/someone/very/long/path/to/a/project/with/many/dirs/src/pkg/trainer.py";
  expect_frame(frames[1], trainer, 88, "evaluate_with_a_really_long_function_name", "return self.step(batch)");
  // A row that fills the box but ends at a space: the next row is a new word.
  expect_frame(frames[2], trainer, 90, "step", "return model(batch)");
}

// Real Rich output (tests/fixtures/explain/rich/README.md): at every width the three frames are
// read whole, the code of the row that ran as far as Rich prints it.
TEST(TracebackRich, RealRichOutputAtSeveralWidths) {
  const std::string dir = "/tmp/qa-round2/rich/src/";
  const std::string call = "return forward_pass_with_a_very_long_function_name_for_wrapping(batch_of_inputs)";
  // The row that ran, as far as each width lets Rich print it.
  const std::pair<const char*, size_t> fixtures[] = {
      {"folded_w45.log", 33}, {"folded_w86.log", 74}, {"locals_beside_w126.log", call.size()}};
  for (const auto& [fixture, printed] : fixtures) {
    SCOPED_TRACE(fixture);
    const std::vector<TracebackFrame> frames =
        frames_of(testing::read_file(testing::fixture_path(std::string("explain/rich/") + fixture)));
    ASSERT_EQ(frames.size(), 3u);
    expect_frame(frames[0], dir + "short/train.py", 6, "main", call.substr(0, printed));
    expect_frame(frames[1],
                 dir + "very_long_project_directory_name_for_testing/another_really_long_subdirectory/models/"
                       "transformer_block_implementation_with_long_name.py",
                 4, "forward_pass_with_a_very_long_function_name_for_wrapping",
                 "return attn(x, hidden_states)");   // not the locals table beside it
    expect_frame(frames[2], dir + "pkg/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/aa/bb/cc/dd/attention.py",
                 7, "attn", "raise OutOfMemoryError(MSG)");
  }
}

// show_locals draws a table inside the box; its own bottom row does not close the traceback.
TEST(TracebackRich, LocalsTablesInsideTheBox) {
  std::string with_locals = kRich;
  const std::string after = "│   41 │   │   losses.append(outputs.loss)                                     │\n";
  with_locals.insert(with_locals.find(after) + after.size(),
                     "│ ╭──────────────── locals ────────────────╮                                   │\n"
                     "│ │ batch = {'input_ids': tensor([[1, 2]])} │                                   │\n"
                     "│ ╰─────────────────────────────────────────╯                                   │\n");
  const ScanResult r = scan_text(with_locals);
  ASSERT_EQ(r.events.size(), 1u);
  ASSERT_TRUE(r.events[0].traceback);
  ASSERT_EQ(r.events[0].traceback->frames.size(), 2u);
  EXPECT_EQ(r.events[0].traceback->frames[1].function, "_wrapped_call_impl");
  EXPECT_EQ(r.events[0].traceback->operation, "evaluation");
}

// A box the log cuts before its bottom row gives no frames rather than half of them: the message
// after it is read without a traceback.
TEST(TracebackRich, UnclosedBoxGivesNoFrames) {
  const size_t bottom = kRich.find("╰");
  const std::string cut = kRich.substr(0, bottom) + kRich.substr(kRich.find("OutOfMemoryError"));
  const ScanResult r = scan_text(cut);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].bytes("requested"), 2ull << 30);
  EXPECT_FALSE(r.events[0].traceback.has_value());
}

}  // namespace
}  // namespace oomdoc
