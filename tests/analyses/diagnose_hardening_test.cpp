// QA findings on `explain`'s causes and fixes: a container's own process listed as "Process P has",
// fixes that cannot act at model-load time or on the backend, programs far smaller than the card,
// TensorFlow's two reports of one request.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "analyses/diagnose.h"
#include "analyses/explain.h"
#include "core/units.h"
#include "readers/log_scanner.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

using testing::explain_text;
using testing::fix_ids;

bool has(const std::vector<std::string>& ids, const std::string& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::string all_text(const Diagnosis& d) {
  std::string out;
  for (const auto& s : d.evidence) out += s + "\n";
  for (const auto& f : d.fixes) out += f.title + "\n" + f.detail + "\n" + f.snippet + "\n";
  return out;
}

// Two "Process P has" lines, no "this process" line: PyTorch's 10.78 GiB reserve plus both listed
// processes (23.34 GiB) exceed the 23.36 GiB in use, so one of them is this process (pid 1111, the
// one closest above the reserve); only pid 987654 is another process.
TEST(DiagnoseHardening, OneOfSeveralListedProcessesIsThisOne) {
  ExplainReport r = explain_text(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 23.65 "
      "GiB of which 300.00 MiB is free. Process 987654 has 12.00 GiB memory in use. Process 1111 has 11.34 GiB memory "
      "in use. Of the allocated memory 10.00 GiB is allocated by PyTorch, and 800.00 MiB is reserved by PyTorch but "
      "unallocated.\n");
  ASSERT_EQ(r.events.size(), 1u);
  const OomEvent& e = r.events[0].event;
  MemoryBreakdown m = breakdown(e);
  EXPECT_EQ(m.likely_self_pid, 1111u);
  EXPECT_EQ(m.this_process, e.other_processes[1].memory.bytes);
  EXPECT_EQ(m.other_processes, 12 * kGiB);
  ASSERT_TRUE(m.unattributed);
  EXPECT_EQ(*m.unattributed, static_cast<int64_t>(*e.bytes("total") - *e.bytes("free") -
                                                  e.other_processes[1].memory.bytes - 12 * kGiB));
  EXPECT_GE(*m.unattributed, 0);
  const Diagnosis& d = r.events[0].diagnosis;
  ASSERT_FALSE(d.evidence.empty());
  EXPECT_NE(d.evidence[0].find("Other processes hold 12.00 GiB (51% of the card): pid 987654 holds 12.00 GiB; pid "
                               "1111 holding 11.34 GiB is this process under its host PID."),
            std::string::npos)
      << d.evidence[0];
  for (const auto& f : d.fixes) {
    if (f.id == "end_other_processes") {
      EXPECT_NE(f.detail.find("not pid 1111"), std::string::npos) << f.detail;
    }
  }
}

// The listed processes and PyTorch's reserve fit in what is used: all listed are others.
TEST(DiagnoseHardening, ListedProcessesThatAddUpAreAllOthers) {
  ExplainReport r = explain_text(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 24.00 "
      "GiB of which 1.00 GiB is free. Process 1 has 9.00 GiB memory in use. Process 2 has 9.00 GiB memory in use. Of "
      "the allocated memory 4.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated.\n");
  MemoryBreakdown m = breakdown(r.events[0].event);
  EXPECT_FALSE(m.likely_self_pid);
  EXPECT_EQ(m.other_processes, 18 * kGiB);
  EXPECT_EQ(m.unattributed, 0);   // 24 - 1 - 5 (PyTorch) - 18
}

// Figures no card can show (ms-swift#5943: "this process has 0 bytes" under a 51.64 GiB reserve;
// axolotl#998: NVML's 2^64-byte placeholder for this process and a listed one) are left out of the
// sums, and the evidence says so.
TEST(DiagnoseHardening, ImpossibleProcessFiguresAreLeftOut) {
  ExplainReport zero = explain_text(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.63 GiB. GPU 7 has a total capacity of 79.11 GiB "
      "of which 2.61 GiB is free. Including non-PyTorch memory, this process has 0 bytes memory in use. Of the allocated "
      "memory 48.15 GiB is allocated by PyTorch, with 50.00 MiB allocated in private pools (e.g., CUDA Graphs), and 3.49 "
      "GiB is reserved by PyTorch but unallocated.\n");
  ASSERT_EQ(zero.events.size(), 1u);
  MemoryBreakdown m = breakdown(zero.events[0].event);
  EXPECT_FALSE(m.this_process);
  // 79.11 - 2.61 - (48.15 + 3.49) GiB, as printed.
  EXPECT_EQ(m.unattributed, static_cast<int64_t>(std::llround(79.11 * kGiB)) - static_cast<int64_t>(std::llround(2.61 * kGiB)) -
                                static_cast<int64_t>(std::llround(48.15 * kGiB)) - static_cast<int64_t>(std::llround(3.49 * kGiB)));
  EXPECT_EQ(zero.events[0].diagnosis.evidence.back(),
            "\"This process has 0 bytes\" is less than the 51.64 GiB PyTorch itself reserves (a container that hides "
            "per-process use), so it is left out.");

  ExplainReport placeholder = explain_text(
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacty of 24.00 "
      "GiB of which 0 bytes is free. Including non-PyTorch memory, this process has 17179869184.00 GiB memory in use. "
      "Process 2954422 has 17179869184.00 GiB memory in use. Of the allocated memory 23.01 GiB is allocated by PyTorch, "
      "and 121.23 MiB is reserved by PyTorch but unallocated.\n");
  ASSERT_EQ(placeholder.events.size(), 1u);
  const ExplainedEvent& x = placeholder.events[0];
  MemoryBreakdown p = breakdown(x.event);
  EXPECT_FALSE(p.this_process);
  EXPECT_EQ(p.other_processes, 0u);
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "This process holds 23.13 GiB of 24.00 GiB (96%); the 20.00 MiB request is the last straw.");
  const std::vector<std::string> notes(x.diagnosis.evidence.end() - 2, x.diagnosis.evidence.end());
  EXPECT_EQ(notes, (std::vector<std::string>{
                       "\"This process has 17179869184.00 GiB\" is more than the card's 24.00 GiB: a placeholder for a "
                       "figure the driver could not read, so it is left out.",
                       "1 listed process holds more than the card's 24.00 GiB: placeholder for figures the driver could not "
                       "read, left out."}));
}

// Rounded figures that would make a derived value negative stay at zero.
TEST(DiagnoseHardening, DerivedValuesAreNeverNegative) {
  ExplainReport r = explain_text(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 24.00 "
      "GiB of which 1.00 GiB is free. Including non-PyTorch memory, this process has 22.99 GiB memory in use. Of the "
      "allocated memory 21.00 GiB is allocated by PyTorch, and 2.00 GiB is reserved by PyTorch but unallocated.\n");
  MemoryBreakdown m = breakdown(r.events[0].event);
  EXPECT_EQ(m.non_pytorch_in_process, 0);   // 22.99 - 23
  EXPECT_EQ(m.unattributed, 23 * static_cast<int64_t>(kGiB) - static_cast<int64_t>(std::llround(22.99 * kGiB)));
}

// An OOM inside from_pretrained(...).to("cuda"): nothing has run, so the training ladder (batch,
// sequence, bf16 training, 8-bit optimizer, checkpointing, LoRA) cannot act; load-time fixes only.
TEST(DiagnoseHardening, LoadTimeOomGetsLoadTimeFixesOnly) {
  ExplainReport r = explain_text(
      "Traceback (most recent call last):\n"
      "  File \"/home/u/serve.py\", line 10, in <module>\n"
      "    model = AutoModelForCausalLM.from_pretrained(\"meta-llama/Llama-2-13b-hf\").to(\"cuda\")\n"
      "  File \"/usr/lib/python3/dist-packages/torch/nn/modules/module.py\", line 1160, in to\n"
      "    return self._apply(convert)\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 100.00 MiB. GPU 0 has a total capacity of 23.65 "
      "GiB of which 50.00 MiB is free. Including non-PyTorch memory, this process has 23.59 GiB memory in use. Of the "
      "allocated memory 23.10 GiB is allocated by PyTorch, and 10.00 MiB is reserved by PyTorch but unallocated.\n");
  const Diagnosis& d = r.events[0].diagnosis;
  EXPECT_EQ(d.cause, "model_does_not_fit");
  EXPECT_EQ(fix_ids(d), (std::vector<std::string>{"load_in_bf16", "quantize_model", "offload", "bigger_gpu"}));
  EXPECT_EQ(d.fixes[0].snippet,
            "from_pretrained(..., torch_dtype=torch.bfloat16)  # without it transformers loads fp32: twice the memory");
  EXPECT_EQ(d.fixes[2].snippet, "from_pretrained(..., device_map=\"auto\", max_memory={0: \"20GiB\", \"cpu\": \"64GiB\"})");
}

// JAX: the compiled program needs 12 MiB in all; it cannot have filled any card.
TEST(DiagnoseHardening, SmallJaxProgramMeansMemoryHeldElsewhere) {
  ExplainReport r = explain_text(
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 6291456 bytes.\n"
      "BufferAssignment OOM Debugging.\n"
      "BufferAssignment stats:\n"
      "             parameter allocation:    6.00MiB\n"
      "              constant allocation:         0B\n"
      "        maybe_live_out allocation:    6.00MiB\n"
      "     preallocated temp allocation:         0B\n"
      "                 total allocation:   12.00MiB\n"
      "              total fragmentation:         0B (0.00%)\n");
  const Diagnosis& d = r.events[0].diagnosis;
  EXPECT_EQ(d.cause, "memory_held_elsewhere");
  EXPECT_EQ(fix_ids(d), (std::vector<std::string>{"release_references", "end_other_processes", "xla_shared_card"}));
  EXPECT_NE(all_text(d).find("The whole program needs only 12.00 MiB"), std::string::npos);
}

// PyTorch 1.x: an 8.13 GiB request (76% of the card) with 8.20 GiB free: one tensor, whatever the
// cause branch; the headline does not claim the card was filled.
TEST(DiagnoseHardening, RequestOfHalfTheCardFindsTheShapeInEveryBranch) {
  ExplainReport r = explain_text(
      "RuntimeError: CUDA out of memory. Tried to allocate 8.13 GiB (GPU 0; 10.76 GiB total capacity; 643.57 MiB "
      "already allocated; 8.20 GiB free; 32.43 MiB cached)\n");
  const Diagnosis& d = r.events[0].diagnosis;
  EXPECT_EQ(d.cause, "capacity_exhausted");
  EXPECT_EQ(d.capacity_title, "one allocation takes half the card or more (a single very large tensor)");
  ASSERT_FALSE(d.fixes.empty());
  EXPECT_EQ(d.fixes[1].id, "smaller_input");
  EXPECT_EQ(d.fixes[1].detail, "Find the 8.13 GiB tensor's shape and shrink the dimension that makes it (batch, "
                               "sequence, resolution).");
  // Another process holds more than the tensor: the cause is that process, the shape fix stays.
  ExplainReport o = explain_text(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB. GPU 0 has a total capacity of 24.00 "
      "GiB of which 1.00 GiB is free. Process 7 has 15.00 GiB memory in use. Including non-PyTorch memory, this "
      "process has 8.00 GiB memory in use. Of the allocated memory 7.50 GiB is allocated by PyTorch, and 0 bytes is "
      "reserved by PyTorch but unallocated.\n");
  const Diagnosis& od = o.events[0].diagnosis;
  EXPECT_EQ(od.cause, "other_processes");
  EXPECT_TRUE(has(fix_ids(od), "smaller_input"));
  EXPECT_NE(all_text(od).find("Find the 12.00 GiB tensor's shape"), std::string::npos);
}

// "Close to the limit" needs the figures: 57% held is not it, no figures is not it, 100% is.
TEST(DiagnoseHardening, FilledTheCardOnlyWhenTheFiguresShowIt) {
  auto title = [](const std::string& text) { return explain_text(text).events[0].diagnosis.capacity_title; };
  EXPECT_EQ(title("RuntimeError: CUDA out of memory. Tried to allocate 12.00 GiB (GPU 0; 23.65 GiB total capacity; "
                  "13.00 GiB already allocated; 10.00 GiB free; 13.10 GiB reserved in total by PyTorch)\n"),
            "one allocation takes half the card or more (a single very large tensor)");
  EXPECT_EQ(title("RuntimeError: CUDA out of memory. Tried to allocate 8.00 GiB (GPU 0; 23.65 GiB total capacity; "
                  "16.90 GiB already allocated; 6.50 GiB free; 17.00 GiB reserved in total by PyTorch)\n"),
            "the card ran out: this process's memory and the request do not fit together");
  EXPECT_EQ(title("RuntimeError: CUDA out of memory. Tried to allocate 100.00 MiB (GPU 0; 23.65 GiB total capacity; "
                  "22.00 GiB already allocated; 50.00 MiB free; 23.10 GiB reserved in total by PyTorch)\n"),
            "the process filled the card (close to the limit)");
  EXPECT_EQ(title("2023-05-01 10:00:00.123456: W tensorflow/tsl/framework/bfc_allocator.cc:485] Allocator (GPU_0_bfc) "
                  "ran out of memory trying to allocate 1.50GiB (rounded to 1610612736)requested by op MatMul\n"),
            "the device ran out of memory (no figures show how full it was)");
}

// MPS: bitsandbytes' paged optimizers page through CUDA unified memory, and its 4-bit path is not
// there on Apple Silicon before v0.50: no paged_adamw_8bit, no 4-bit base.
TEST(DiagnoseHardening, MpsGetsNoCudaOnlyFixes) {
  ExplainReport r = explain_text(
      "RuntimeError: MPS backend out of memory (MPS allocated: 17.00 GB, other allocations: 1.20 GB, max allowed: "
      "18.13 GB). Tried to allocate 256.00 MB on private pool.\n");
  const Diagnosis& d = r.events[0].diagnosis;
  const std::vector<std::string> ids = fix_ids(d);
  EXPECT_FALSE(has(ids, "eight_bit_optimizer"));
  EXPECT_EQ(all_text(d).find("paged_adamw_8bit"), std::string::npos);
  EXPECT_EQ(all_text(d).find("load_in_4bit"), std::string::npos);
  for (const auto& f : d.fixes) {
    if (f.id == "lora") {
      EXPECT_EQ(f.snippet, "peft.LoraConfig(r=16, target_modules=\"all-linear\")  # no bitsandbytes 4-bit base on MPS");
    }
  }
}

// A script driving DeepSpeed's engine itself sets the batch and offload in DeepSpeed's config; under
// the Trainer, TrainingArguments stay.
TEST(DiagnoseHardening, DeepSpeedEngineGetsItsConfigKeys) {
  const std::string oom =
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB "
      "of which 1.10 GiB is free. Process 1 has 78.04 GiB memory in use. Of the allocated memory 75.20 GiB is allocated "
      "by PyTorch, and 1.30 GiB is reserved by PyTorch but unallocated.\n";
  auto snippet_of = [](const ExplainReport& r, const char* id) {
    for (const auto& f : r.events.at(0).diagnosis.fixes) {
      if (f.id == id) return f.snippet;
    }
    return std::string();
  };
  ExplainReport engine = explain_text(
      "Traceback (most recent call last):\n"
      "  File \"/home/u/train.py\", line 88, in <module>\n"
      "    model_engine.backward(loss)\n"
      "  File \"/usr/lib/python3/site-packages/deepspeed/runtime/engine.py\", line 2020, in backward\n"
      "    self.optimizer.backward(loss)\n" + oom);
  ASSERT_EQ(engine.events.size(), 1u);
  EXPECT_EQ(snippet_of(engine, "smaller_batch").rfind("\"train_micro_batch_size_per_gpu\": B/2", 0), 0u)
      << snippet_of(engine, "smaller_batch");
  ExplainReport trainer = explain_text(
      "Traceback (most recent call last):\n"
      "  File \"/usr/lib/python3/site-packages/transformers/trainer.py\", line 2240, in train\n"
      "    return inner_training_loop(\n"
      "  File \"/usr/lib/python3/site-packages/deepspeed/runtime/engine.py\", line 2020, in backward\n"
      "    self.optimizer.backward(loss)\n" + oom);
  ASSERT_EQ(trainer.events.size(), 1u);
  EXPECT_EQ(snippet_of(trainer, "smaller_batch").find("train_micro_batch_size_per_gpu"), std::string::npos);
}

// One MPS request above the whole limit is a shape problem: find it before lifting the watermark.
TEST(DiagnoseHardening, MpsRequestAboveTheWholeLimitIsAShapeProblem) {
  ExplainReport r = explain_text(
      "RuntimeError: MPS backend out of memory (MPS allocated: 1.00 GB, other allocations: 0.50 GB, max allowed: "
      "18.13 GB). Tried to allocate 64.00 GB on private pool.\n");
  ASSERT_EQ(r.events.size(), 1u);
  const Diagnosis& d = r.events[0].diagnosis;
  EXPECT_EQ(d.cause, "request_exceeds_total_capacity");
  const std::vector<std::string> ids = fix_ids(d);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], "smaller_input");
  EXPECT_FALSE(has(ids, "mps_watermark"));
  EXPECT_EQ(d.fixes[0].detail, "A single 64.00 GiB tensor is larger than the whole 18.13 GiB MPS limit: find its shape "
                               "(batch x seq x vocab for logits, image size for vision) and shrink the dimension that "
                               "makes it.");
}

// TensorFlow's BFC line has no shape: its fix says nothing about the shape's first dimension.
TEST(DiagnoseHardening, TensorFlowWithoutShapeSaysNothingOfDimensions) {
  ExplainReport r = explain_text(
      "2023-05-01 10:00:00.123456: W tensorflow/tsl/framework/bfc_allocator.cc:485] Allocator (GPU_0_bfc) ran out of "
      "memory trying to allocate 1.50GiB (rounded to 1610612736)requested by op MatMul\n");
  EXPECT_EQ(all_text(r.events[0].diagnosis).find("first dimension"), std::string::npos);
}

// TensorFlow's BFC warning and the "OOM when allocating tensor" error for the same 1.50 GiB are one
// event (as JAX's BFC warning and XlaRuntimeError are); the error printed again is a repeat.
TEST(DiagnoseHardening, TensorFlowBfcWarningAndTensorErrorAreOneEvent) {
  const std::string log =
      "2023-05-01 10:00:00.123456: W tensorflow/tsl/framework/bfc_allocator.cc:485] Allocator (GPU_0_bfc) ran out of "
      "memory trying to allocate 1.50GiB (rounded to 1610612736)requested by op MatMul\n"
      "2023-05-01 10:00:00.123500: W tensorflow/core/framework/op_kernel.cc:1828] OP_REQUIRES failed at "
      "matmul_op_impl.h:731 : RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[32768,12288] and type float on "
      "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
      "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
      "shape[32768,12288] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n";
  ExplainReport r = explain_text(log);
  ASSERT_EQ(r.events.size(), 1u);
  const OomEvent& e = r.events[0].event;
  EXPECT_EQ(e.format, "tf_oom_tensor");
  EXPECT_EQ(e.bytes("requested"), 1610612736u);
  EXPECT_EQ(e.int_field("allocator_warning_line"), 1);
  EXPECT_EQ(e.repeats, 2u);
  const Diagnosis& d = r.events[0].diagnosis;
  EXPECT_EQ(d.fixes[0].detail, "The first dimension (32768) is usually the batch (or batch x sequence length): at 16384 "
                               "this tensor takes 768.00 MiB instead of 1.50 GiB.");
}

// A tensor already in 16 bits ran under a 16-bit policy: no mixed-precision advice.
TEST(DiagnoseHardening, TensorFlowSixteenBitTensorGetsNoMixedPrecisionAdvice) {
  auto fix_ids = [](const std::string& type) {
    ExplainReport r = explain_text(
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
        "shape[64,4096,4096] and type " + type + " on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n");
    std::vector<std::string> ids;
    if (!r.events.empty()) {
      for (const auto& f : r.events[0].diagnosis.fixes) ids.push_back(f.id);
    }
    return ids;
  };
  auto has = [](const std::vector<std::string>& ids, const char* id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  EXPECT_FALSE(has(fix_ids("bfloat16"), "mixed_precision"));
  EXPECT_FALSE(has(fix_ids("half"), "mixed_precision"));
  EXPECT_TRUE(has(fix_ids("bfloat16"), "smaller_input"));
  EXPECT_TRUE(has(fix_ids("float"), "mixed_precision"));
}

// The source line Python echoes under a traceback frame is code, not a message.
TEST(DiagnoseHardening, SourceEchoUnderAFrameIsNotAMessage) {
  ExplainReport r = explain_text(
      "Traceback (most recent call last):\n"
      "  File \"/home/u/train.py\", line 120, in train_loop\n"
      "    raise RuntimeError(\"CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity)\")\n"
      "AttributeError: 'NoneType' object has no attribute 'shape'\n");
  EXPECT_TRUE(r.events.empty());
  // The same text as the exception line (not indented under a frame) is a message.
  ExplainReport raised = explain_text(
      "Traceback (most recent call last):\n"
      "  File \"/home/u/train.py\", line 120, in train_loop\n"
      "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB.\n");
  EXPECT_EQ(raised.events.size(), 1u);
}

// PyTorch 1.x's fragmentation fix is max_split_size_mb, and its detail says so.
TEST(DiagnoseHardening, OldFormFragmentationDetailNamesMaxSplitSize) {
  ExplainReport r = explain_text(
      "RuntimeError: CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 23.65 GiB total capacity; 21.00 GiB "
      "already allocated; 100.00 MiB free; 21.60 GiB reserved in total by PyTorch)\n");
  bool found = false;
  for (const auto& f : r.events[0].diagnosis.fixes) {
    if (f.id != "max_split_size") continue;
    found = true;
    EXPECT_EQ(f.detail, "614.40 MiB is reserved but unallocated, as much as the 512.00 MiB request: smaller cached "
                        "blocks (max_split_size_mb) let it be reused.");
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace oomdoc
