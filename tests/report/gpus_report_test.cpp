#include "report/gpus_report.h"

#include <gtest/gtest.h>

namespace oomdoc {
namespace {

TEST(GpusReport, DurationsForHumans) {
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(59.9), "59s");
  EXPECT_EQ(format_duration(723), "12m03s");
  EXPECT_EQ(format_duration(3 * 3600 + 12 * 60 + 5), "3h12m");
  EXPECT_EQ(format_duration(2 * 86400 + 4 * 3600 + 59), "2d04h");
}

GpuProcessReport one_process(const std::string& command) {
  GpuProcessReport r;
  r.state.driver_version = "550.54.15";
  DeviceFindings d;
  d.device.name = "NVIDIA L4";
  d.device.total_bytes = 24152899584;
  d.device.used_bytes = 1u << 30;
  d.device.reserved_bytes = 0;
  d.device.free_bytes = 24152899584 - (1u << 30);
  ProcessFinding f;
  f.gpu.pid = 77;
  f.gpu.used_bytes = 1u << 30;
  f.gpu.compute = true;
  f.gpu.sm_percent = 12;
  f.details.pid = 77;
  f.details.visibility = ProcessVisibility::kVisible;
  f.details.user = "alice";
  f.details.command_line = command;
  f.details.elapsed_seconds = 125;
  d.processes.push_back(f);
  d.unattributed_bytes = 0;
  r.devices.push_back(d);
  return r;
}

TEST(GpusReport, TextTable) {
  EXPECT_EQ(render_gpus_text(one_process("python train.py"), Style::plain()),
            "NVIDIA driver 550.54.15\n"
            "\n"
            "GPU 0  NVIDIA L4\n"
            "  memory: 22.49 GiB total, 1.00 GiB used, 0 B reserved by the driver, 21.49 GiB free\n"
            "  PID      USER           GPU MEM  SM%    TIME TYPE COMMAND\n"
            "  77       alice         1.00 GiB   12   2m05s C    python train.py\n");
}

TEST(GpusReport, ControlCharactersInCommandLinesCannotReachTheTerminal) {
  std::string text = render_gpus_text(one_process("python -c \nimport os\x1b]0;pwned\x07"), Style::plain());
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_EQ(text.find('\x07'), std::string::npos);
  EXPECT_NE(text.find("python -c  import os\\x1b]0;pwned\\x07\n"), std::string::npos) << text;
  // JSON keeps the bytes (escaped by the encoder).
  EXPECT_EQ(gpus_json(one_process("a\nb"))["devices"][0]["processes"][0]["command"], "a\nb");
}

}  // namespace
}  // namespace oomdoc
