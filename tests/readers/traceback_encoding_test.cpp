// A traceback frame with a byte that is not UTF-8 (a cp1252 Windows path) is kept, the byte shown
// as U+FFFD, and the JSON stays valid UTF-8.
#include <gtest/gtest.h>

#include "readers/log_scanner.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

const std::string kWindowsLog =
    "Traceback (most recent call last):\r\n"
    "  File \"C:\\Users\\Jos\xe9\\proj\\train.py\", line 42, in <module>\r\n"
    "    loss.backward()\r\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 8.00 GiB "
    "of which 0 bytes is free. Of the allocated memory 6.50 GiB is allocated by PyTorch, and 300.00 MiB is reserved by "
    "PyTorch but unallocated.\r\n";

TEST(TracebackEncoding, Cp1252PathKeepsTheFrame) {
  const ScanResult r = scan_text(kWindowsLog);
  ASSERT_EQ(r.events.size(), 1u);
  ASSERT_TRUE(r.events[0].traceback);
  const Traceback& tb = *r.events[0].traceback;
  ASSERT_EQ(tb.frames.size(), 1u);
  EXPECT_EQ(tb.frames[0].file, "C:\\Users\\Jos\xEF\xBF\xBD\\proj\\train.py");
  EXPECT_EQ(tb.frames[0].line, 42u);
  EXPECT_EQ(tb.frames[0].function, "<module>");
  EXPECT_EQ(tb.frames[0].code, "loss.backward()");
  EXPECT_EQ(tb.operation, "backward");
}

TEST(TracebackEncoding, JsonIsValidUtf8) {
  const testing::CommandResult r = testing::run_cli({"explain", "--json", "-"}, kWindowsLog);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find(R"("file": "C:\\Users\\Jos)" "\xEF\xBF\xBD" R"(\\proj\\train.py")"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\xe9'), std::string::npos);
}

// A traceback quoted without its "Traceback (most recent call last):" line (LlamaFactory#257): the
// frames right above the error still say where it failed.
TEST(TracebackEncoding, FramesWithoutTheHeaderAreRead) {
  const ScanResult r = scan_text(
      "  File \"/env/transformers/modeling_utils.py\", line 717, in _load_state_dict_into_meta_model\n"
      "    set_module_tensor_to_device(model, param_name, param_device, **set_module_kwargs)\n"
      "  File \"/env/accelerate/utils/modeling.py\", line 298, in set_module_tensor_to_device\n"
      "    new_value = value.to(device)\n"
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB (GPU 7; 79.32 GiB total capacity; "
      "78.58 GiB already allocated; 259.56 MiB free; 78.58 GiB reserved in total by PyTorch)\n");
  ASSERT_EQ(r.events.size(), 1u);
  ASSERT_TRUE(r.events[0].traceback.has_value());
  EXPECT_EQ(r.events[0].traceback->frames.size(), 2u);
  EXPECT_EQ(r.events[0].traceback->operation, "model_loading");
}

}  // namespace
}  // namespace oomdoc
