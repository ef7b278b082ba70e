#include <gtest/gtest.h>

#include "analyses/snapshot_analysis.h"
#include "analyses/snapshot_builder.h"

namespace oomdoc {
namespace {

using testing::SnapshotBuilder;

TEST(StackLabeler, GroupsAtTheFirstUserFrameSkippingNoiseAndLibraries) {
  SnapshotBuilder b;
  StackId s = b.stack({{"??", 0, "torch::unwind::unwind()"},
                       {"??", 0, "at::native::empty_cuda"},
                       {"/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", 116, "forward"},
                       {"/home/me/proj/model.py", 42, "forward"},
                       {"/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 1501, "_call_impl"},
                       {"/home/me/proj/train.py", 88, "train_step"},
                       {"/home/me/proj/train.py", 131, "main"}});
  StackLabeler labeler(b.snapshot(), 2);
  EXPECT_EQ(labeler.key(s), "proj/model.py:42 forward < proj/train.py:88 train_step");
  StackLabeler deep(b.snapshot(), 3);
  EXPECT_EQ(deep.key(s), "proj/model.py:42 forward < proj/train.py:88 train_step < proj/train.py:131 main");
  // Noise frames are dropped from the listing; library frames stay; Python frames come first and
  // the C++ frame is folded into the last line.
  EXPECT_EQ(labeler.frames(s), (std::vector<std::string>{"modules/linear.py:116 forward", "proj/model.py:42 forward",
                                                         "modules/module.py:1501 _call_impl",
                                                         "proj/train.py:88 train_step", "proj/train.py:131 main",
                                                         "[1 C++ frame]"}));
  EXPECT_EQ(labeler.key(kNoStack), "<no stack recorded>");
}

// With stacks='all' a stack starts with a dozen allocator and aten frames: the listing must still
// show the Python frames (it used to show the first 12 frames, all C++, and cut the rest).
TEST(StackLabeler, FramesListPythonFirstAndFoldTheCppFrames) {
  SnapshotBuilder b;
  std::vector<std::tuple<std::string, uint64_t, std::string>> frames = {
      {"??", 0, "torch::unwind::unwind()"},
      {"??", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)"}};
  for (int i = 0; i < 12; ++i) frames.push_back({"??", 0, "at::detail::empty_cuda(c10::ArrayRef<long>)"});
  frames.push_back({"??", 0, "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)"});
  frames.push_back({"??", 0, "torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor>&&)"});
  frames.push_back({"??", 0, "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)"});  // named once
  frames.push_back({"/home/me/proj/model.py", 42, "forward"});
  frames.push_back({"Python/ceval.c", 0, "_PyEval_EvalFrameDefault"});  // noise: dropped, not counted
  frames.push_back({"??", 0, "pybind11::cpp_function::dispatcher(_object*, _object*, _object*)"});
  frames.push_back({"/home/me/proj/train.py", 88, "train_step"});
  frames.push_back({"<eval_with_key>.3", 7, "forward"});
  StackId s = b.stack(frames);
  StackId native_only = b.stack({{"??", 0, "at::_ops::mul_Tensor::call(at::Tensor const&)"},
                                 {"??", 0, "torch::autograd::generated::MulBackward0::apply(std::vector<at::Tensor>&&)"}});
  StackLabeler labeler(b.snapshot(), 2);
  EXPECT_EQ(labeler.frames(s), (std::vector<std::string>{"proj/model.py:42 forward", "proj/train.py:88 train_step",
                                                         "<eval_with_key>.3:7 forward",
                                                         "[17 C++ frames: aten::bmm, BmmBackward0]"}));
  EXPECT_EQ(labeler.frames(s, 2), (std::vector<std::string>{"proj/model.py:42 forward", "proj/train.py:88 train_step",
                                                            "... 1 more Python frame",
                                                            "[17 C++ frames: aten::bmm, BmmBackward0]"}));
  EXPECT_EQ(labeler.frames(native_only), (std::vector<std::string>{"[2 C++ frames: aten::mul_Tensor, MulBackward0]"}));
}

// A stack deep in library code still shows where the user's code is: user frames past the limit
// are listed, library frames past it are counted.
TEST(StackLabeler, FramesKeepTheUserFramesPastTheLimit) {
  SnapshotBuilder b;
  std::vector<std::tuple<std::string, uint64_t, std::string>> frames;
  for (uint64_t i = 1; i <= 4; ++i) frames.push_back({"/usr/lib/python3/dist-packages/torch/nn/modules/module.py", i, "_call_impl"});
  frames.push_back({"/home/me/proj/model.py", 42, "forward"});
  frames.push_back({"/usr/lib/python3/dist-packages/torch/autograd/__init__.py", 9, "backward"});
  frames.push_back({"/home/me/proj/train.py", 88, "train_step"});
  StackId s = b.stack(frames);
  StackLabeler labeler(b.snapshot(), 2);
  EXPECT_EQ(labeler.frames(s, 3), (std::vector<std::string>{"modules/module.py:1 _call_impl", "modules/module.py:2 _call_impl",
                                                            "modules/module.py:3 _call_impl", "proj/model.py:42 forward",
                                                            "proj/train.py:88 train_step", "... 2 more Python frames"}));
  // Library frames past the limit are counted (3 here), user frames listed up to 2 * max lines.
  EXPECT_EQ(labeler.frames(s, 2), (std::vector<std::string>{"modules/module.py:1 _call_impl", "modules/module.py:2 _call_impl",
                                                            "proj/model.py:42 forward", "proj/train.py:88 train_step",
                                                            "... 3 more Python frames"}));
}

TEST(StackLabeler, NoUserFrameNamesTheFirstMeaningfulFrame) {
  SnapshotBuilder b;
  StackId s = b.stack({{"??", 0, "torch::unwind::unwind()"}, {"??", 0, "at::native::empty_cuda"}});
  StackId only_noise = b.stack({{"??", 0, "torch::unwind::unwind()"}});
  StackId op = b.stack({{"??", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"},
                        {"??", 0, "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)"}});
  StackId backward = b.stack({{"??", 0, "at::_ops::mul_Tensor::call(at::Tensor const&)"},
                              {"??", 0, "torch::autograd::generated::MulBackward0::apply(std::vector<at::Tensor>&&)"}});
  StackLabeler labeler(b.snapshot(), 2);
  EXPECT_EQ(labeler.key(s), "at::native::empty_cuda (no user frame)");
  EXPECT_EQ(labeler.key(only_noise), "<no user frame>");
  EXPECT_EQ(labeler.key(op), "aten::bmm (no Python frame)");
  EXPECT_EQ(labeler.key(backward), "MulBackward0 (backward pass, no Python frame)");
}

TEST(StackFilters, MatchThePeersNoiseList) {
  EXPECT_TRUE(is_noise_frame("??", "torch::CapturedTraceback::gather(bool, bool, bool)"));
  EXPECT_TRUE(is_noise_frame("Python/ceval.c", "x"));
  EXPECT_TRUE(is_noise_frame("", "_start"));
  EXPECT_FALSE(is_noise_frame("", "_start_thread"));
  EXPECT_TRUE(is_user_frame("D:\\work\\train.py", "main"));
  EXPECT_FALSE(is_user_frame("C:\\Python311\\Lib\\site-packages\\torch\\nn\\functional.py", "linear"));
  EXPECT_FALSE(is_user_frame("memory_snapshot.cpp", "f"));
}

TEST(LiveStacks, AtAnEventAndAtDump) {
  SnapshotBuilder b;
  StackId a = b.stack({{"/p/a.py", 1, "f"}});
  StackId c = b.stack({{"/p/c.py", 2, "g"}});
  StackId a2 = b.stack({{"/p/a.py", 1, "f"}, {"/p/x.py", 9, "h"}});  // same key at depth 1
  b.event(TraceAction::kAlloc, 0x100, 1000, a);
  b.event(TraceAction::kAlloc, 0x200, 3000, c);
  b.event(TraceAction::kAlloc, 0x300, 500, a2);
  b.event(TraceAction::kFreeCompleted, 0x200, 3000, c);
  StackLabeler labeler(b.snapshot(), 1);
  const Timeline none;  // nothing allocated before recording
  auto at2 = live_stacks_at(b.snapshot(), 0, none, 2, labeler, 10);
  ASSERT_EQ(at2.size(), 2u);
  EXPECT_EQ(at2[0].key, "p/c.py:2 g");
  EXPECT_EQ(at2[0].bytes, 3000u);
  EXPECT_EQ(at2[1].key, "p/a.py:1 f");
  EXPECT_EQ(at2[1].bytes, 1500u);
  EXPECT_EQ(at2[1].count, 2u);
  auto at3 = live_stacks_at(b.snapshot(), 0, none, 3, labeler, 1);
  ASSERT_EQ(at3.size(), 1u);
  EXPECT_EQ(at3[0].bytes, 1500u);

  b.segment(0, 0x1000, {{512, BlockState::kActiveAllocated, 100, c}, {512, BlockState::kInactive, 9, a}});
  auto dump = live_stacks_at_dump(b.snapshot(), 0, labeler, 10);
  ASSERT_EQ(dump.size(), 1u);
  EXPECT_EQ(dump[0].key, "p/c.py:2 g");
  EXPECT_EQ(dump[0].bytes, 100u);
}


// What was allocated before recording started is live at the peak too: the groups must add up to
// the live figure (baseline + delta), not to the trace's delta alone (they used to leave it out).
TEST(LiveStacks, IncludeWhatWasAllocatedBeforeRecording) {
  SnapshotBuilder b;
  StackId a = b.stack({{"/p/a.py", 1, "f"}});
  StackId w = b.stack({{"/p/w.py", 5, "init"}});
  b.event(TraceAction::kAlloc, 0x1000, 1000, a);     // 0
  b.event(TraceAction::kFreeCompleted, 0x9000, 400);  // 1: frees an allocation made before recording
  b.event(TraceAction::kAlloc, 0x1400, 2000, a);     // 2
  // At dump: the two traced blocks, and two the trace never allocated (one with its own stack).
  b.segment(0, 0x1000, {{1024, BlockState::kActiveAllocated, 1000, a}, {2048, BlockState::kActiveAllocated, 2000, a},
                        {512, BlockState::kActiveAllocated, 300, kNoStack}, {512, BlockState::kActiveAllocated, 200, w}});
  Snapshot& s = b.snapshot();
  Timeline t = replay_timeline(s, 0, SnapshotOptions{});
  ASSERT_EQ(t.baseline_bytes, 900u);  // 400 freed + 300 + 200 live at dump
  ASSERT_EQ(t.pre_recording.size(), 3u);
  ASSERT_EQ(t.peak_index, std::optional<uint64_t>(2));
  ASSERT_EQ(t.peak_live_delta, 2600);
  StackLabeler labeler(s, 1);

  auto at_peak = live_stacks_at(s, 0, t, 2, labeler, 10);
  ASSERT_EQ(at_peak.size(), 3u);
  EXPECT_EQ(at_peak[0].key, "p/a.py:1 f");
  EXPECT_EQ(at_peak[0].bytes, 3000u);
  EXPECT_EQ(at_peak[1].key, "<allocated before recording started>");
  EXPECT_EQ(at_peak[1].bytes, 300u);  // the 400 were freed at event 1
  EXPECT_EQ(at_peak[1].count, 1u);
  EXPECT_EQ(at_peak[2].key, "p/w.py:5 init");
  EXPECT_EQ(at_peak[2].bytes, 200u);
  EXPECT_EQ(at_peak[0].bytes + at_peak[1].bytes + at_peak[2].bytes, t.baseline_bytes + uint64_t(t.peak_live_delta));

  auto at_first = live_stacks_at(s, 0, t, 0, labeler, 10);
  ASSERT_EQ(at_first.size(), 3u);
  EXPECT_EQ(at_first[0].key, "p/a.py:1 f");
  EXPECT_EQ(at_first[0].bytes, 1000u);
  EXPECT_EQ(at_first[1].key, "<allocated before recording started>");
  EXPECT_EQ(at_first[1].bytes, 700u);  // 300 live at dump + 400 not yet freed
  EXPECT_EQ(at_first[1].count, 2u);
  EXPECT_EQ(at_first[2].bytes, 200u);
}

}  // namespace
}  // namespace oomdoc
