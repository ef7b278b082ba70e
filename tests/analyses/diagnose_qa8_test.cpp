// The eighth explain QA round: messages oomdoc did not read, or read wrong — the TPU runtime's device
// buffer allocation, llama.cpp's other backends and its own CUDA error, ranks whose wrapped messages
// interleave, Jupyter tracebacks, vLLM with no KV cache at all, PyTorch 1.x's message cut short. The
// fixture text is written here from each program's message template.
#include <gtest/gtest.h>

#include "analyses/diagnose.h"
#include "analyses/explain.h"
#include "core/units.h"
#include "report/explain_terminal.h"
#include "report/style.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

using testing::explain_text;
using testing::fix;
using testing::fix_ids;
using testing::only_event;

// ---- the TPU runtime's device buffer ----

// Request above free: the HBM was full. XLA's "M" is MiB; the memory space is a chip's coordinates and
// its HBM, kept as printed (HBM0 of two chips are two memories: no device index is made of it).
TEST(DiagnoseQa8, TpuDeviceBufferRequestAboveFree) {
  const ExplainedEvent x = only_event(explain_text(
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
      "allocate 129.50M. That was not possible. There are 78.17M free.; (0x0x0_HBM0)\n"));
  EXPECT_EQ(x.event.framework, "xla");
  EXPECT_EQ(x.event.format, "xla_tpu_hbm_alloc");
  EXPECT_EQ(x.event.string_field("device_kind"), "TPU");
  EXPECT_EQ(x.event.string_field("device_string"), "0x0x0_HBM0");
  EXPECT_FALSE(x.event.device);
  EXPECT_EQ(x.event.bytes("requested"), 135790592u);   // 129.50 x 2^20
  EXPECT_EQ(x.event.bytes("free"), 81967186u);         // 78.17 x 2^20
  EXPECT_EQ(x.event.quantity("requested")->text, "129.50M");
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.capacity_title, "the TPU's HBM had less free than the buffer (129.50 MiB requested, 78.17 MiB free)");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "The TPU runtime could not allocate a 129.50 MiB buffer on 0x0x0_HBM0: only "
                                        "78.17 MiB was free, 51.33 MiB short.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"release_references", "smaller_input", "mixed_precision"}));
  EXPECT_EQ(fix(x.diagnosis, "smaller_input").detail,
            "The buffer is 129.50 MiB with 78.17 MiB free: the peak must drop by at least 51.33 MiB. A smaller "
            "per-device batch shrinks the activations and temporaries.");
  const std::string out = render_explain(explain_text(
      "RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 129.50M. That was not possible. "
      "There are 78.17M free.; (0x0x0_HBM0)\n"), Style::plain());
  EXPECT_NE(out.find("test.log:1  XLA (TPU) out of memory on TPU 0x0x0_HBM0\n  requested 129.50 MiB · free 78.17 MiB\n"),
            std::string::npos) << out;
}

// The shorter wording ("Resource exhausted:"), PyTorch/XLA naming itself, the second HBM of another chip.
TEST(DiagnoseQa8, TpuDeviceBufferTorchXlaSecondHbm) {
  const ExplainedEvent x = only_event(explain_text(
      "2024-05-01 10:00:00.123456: E torch_xla/csrc/xla_graph_executor.cpp:700] Resource exhausted: Attempting to "
      "allocate 180.59M. That was not possible. There are 142.58M free.; (0x3x0_HBM1)\n"));
  EXPECT_EQ(x.event.framework, "torch_xla");
  EXPECT_EQ(x.event.format, "xla_tpu_hbm_alloc");
  EXPECT_EQ(x.event.string_field("device_string"), "0x3x0_HBM1");
  EXPECT_EQ(x.event.bytes("requested"), 189362340u);   // 180.59 x 2^20
  EXPECT_EQ(x.event.bytes("free"), 149505966u);        // 142.58 x 2^20
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "The TPU runtime could not allocate a 180.59 MiB buffer on 0x3x0_HBM1: only "
                                        "142.58 MiB was free, 38.01 MiB short.");
  EXPECT_EQ(fix(x.diagnosis, "mixed_precision").snippet, "model.to(torch.bfloat16)  # and bf16 inputs; older torch_xla: XLA_USE_BF16=1");
}

// As much free as the buffer, yet refused: HBM in pieces.
TEST(DiagnoseQa8, TpuDeviceBufferFreeAboveRequestIsFragmentation) {
  const ExplainedEvent x = only_event(explain_text(
      "RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 1.00G. That was not possible. "
      "There are 3.50G free.; (0x1x0_HBM0)\n"));
  EXPECT_EQ(x.event.bytes("requested"), kGiB);
  EXPECT_EQ(x.event.bytes("free"), 3758096384u);
  EXPECT_EQ(x.diagnosis.cause, "fragmentation");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "0x1x0_HBM0 had 3.50 GiB free, as much as the 1.00 GiB buffer, yet could not "
                                        "place it: the free HBM is in pieces, between buffers that live across steps.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"release_references", "smaller_input"}));
}

// Prose with the same first words is no event.
TEST(DiagnoseQa8, TpuDeviceBufferNeedsTheRuntimeSentence) {
  EXPECT_TRUE(explain_text("Attempting to allocate 2 buffers for the cache\n").events.empty());
}

}  // namespace
}  // namespace oomdoc
