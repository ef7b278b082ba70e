// The NVML backend against the fake NVML libraries (tests/fake_nvml), loaded through dlopen like
// the real libnvidia-ml.so.1: one variant per driver generation.
#include "readers/nvml_backend.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

namespace oomdoc {
namespace {

constexpr uint64_t kH100Total = 85520809984;  // an H100 80GB as NVML reports it
constexpr uint64_t kReserved = 566231040;
constexpr uint64_t kUsed = 44040192000;

// Writes a fake-NVML script and points the fake library at it for this process.
class ScriptFile {
 public:
  explicit ScriptFile(const std::string& text) {
    char path[] = "/tmp/oomdoc-fake-nvml-XXXXXX";
    int fd = mkstemp(path);
    path_ = path;
    ::close(fd);
    std::ofstream(path_) << text;
    setenv("OOMDOC_FAKE_NVML_SCRIPT", path_.c_str(), 1);
  }
  ~ScriptFile() {
    unsetenv("OOMDOC_FAKE_NVML_SCRIPT");
    unlink(path_.c_str());
  }

 private:
  std::string path_;
};

const char* kTwoProcesses = R"(
driver 550.54.15
cuda 12040
device name="NVIDIA H100 80GB HBM3" uuid=GPU-aaaa total=85520809984 reserved=566231040 used=44040192000 util=37
process device=0 pid=4242 used=42949672960 kind=compute
process device=0 pid=4243 used=1073741824 kind=compute
process device=0 pid=4243 used=1073741824 kind=graphics
process device=0 pid=4244 used=na kind=graphics
)";

DeviceState read_with(const char* library, const std::string& script) {
  ScriptFile file(script);
  auto backend = open_nvml_backend(library);
  EXPECT_TRUE(backend.ok()) << (backend.ok() ? "" : backend.error().message);
  if (!backend.ok()) return {};
  auto state = (*backend)->read_state();
  EXPECT_TRUE(state.ok()) << (state.ok() ? "" : state.error().message);
  return state.ok() ? *state : DeviceState{};
}

void expect_two_processes(const GpuDevice& d) {
  ASSERT_EQ(d.processes.size(), 3u);
  EXPECT_EQ(d.processes[0].pid, 4242u);
  EXPECT_EQ(d.processes[0].used_bytes, 42949672960ull);
  EXPECT_EQ(d.processes[0].kind_label(), "C");
  EXPECT_EQ(d.processes[1].pid, 4243u);
  EXPECT_EQ(d.processes[1].used_bytes, 1073741824ull);
  EXPECT_EQ(d.processes[1].kind_label(), "C+G");
  EXPECT_EQ(d.processes[2].pid, 4244u);
  EXPECT_EQ(d.processes[2].used_bytes, std::nullopt);  // NVML_VALUE_NOT_AVAILABLE
  EXPECT_EQ(d.processes[2].kind_label(), "G");
  EXPECT_EQ(d.processes[0].gpu_instance_id, std::nullopt);  // 0xFFFFFFFF: MIG off
}

TEST(NvmlBackend, ModernDriverUsesMemoryV2AndTheDetailList) {
  DeviceState s = read_with(OOMDOC_FAKE_NVML_MODERN, kTwoProcesses);
  EXPECT_EQ(s.driver_version, "550.54.15");
  EXPECT_EQ(s.cuda_version, "12.4");
  ASSERT_EQ(s.devices.size(), 1u);
  const GpuDevice& d = s.devices[0];
  EXPECT_EQ(d.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d.uuid, "GPU-aaaa");
  EXPECT_EQ(d.total_bytes, kH100Total);
  EXPECT_EQ(d.reserved_bytes, kReserved);
  EXPECT_EQ(d.used_bytes, kUsed);  // v2: the driver's reserve is not counted as used
  EXPECT_EQ(d.free_bytes, kH100Total - kUsed - kReserved);
  EXPECT_EQ(d.utilization_percent, 37u);
  EXPECT_EQ(d.memory_api, "nvmlDeviceGetMemoryInfo_v2");
  EXPECT_EQ(d.process_api, "nvmlDeviceGetRunningProcessDetailList");
  EXPECT_EQ(d.process_error, std::nullopt);
  expect_two_processes(d);
  EXPECT_TRUE(s.warnings.empty());
}

TEST(NvmlBackend, R535DriverWith32ByteV3EntriesIsDecodedByNvitopsRule) {
  DeviceState s = read_with(OOMDOC_FAKE_NVML_R535, kTwoProcesses);
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].process_api, "nvmlDeviceGetComputeRunningProcesses_v3 (32-byte entries)");
  expect_two_processes(s.devices[0]);
}

TEST(NvmlBackend, WrongLayoutGuessIsCaughtBySanityCheckAndRetried) {
  // No ConfComputeMemSizeInfo, so nvitop's rule guesses 24-byte entries; the driver wrote 32.
  DeviceState s = read_with(OOMDOC_FAKE_NVML_R535_NO_CONF, kTwoProcesses);
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].process_api, "nvmlDeviceGetComputeRunningProcesses_v3 (32-byte entries)");
  EXPECT_EQ(s.devices[0].process_error, std::nullopt);
  expect_two_processes(s.devices[0]);
}

TEST(NvmlBackend, LegacyDriverWithoutV2SymbolsFallsBackToV1) {
  DeviceState s = read_with(OOMDOC_FAKE_NVML_LEGACY, kTwoProcesses);
  EXPECT_EQ(s.cuda_version, std::nullopt);  // no nvmlSystemGetCudaDriverVersion* exported
  ASSERT_EQ(s.devices.size(), 1u);
  const GpuDevice& d = s.devices[0];
  EXPECT_EQ(d.memory_api, "nvmlDeviceGetMemoryInfo");
  EXPECT_EQ(d.reserved_bytes, std::nullopt);
  EXPECT_EQ(d.used_bytes, kUsed + kReserved);  // v1 counts the reserve as used
  EXPECT_EQ(d.process_api, "nvmlDeviceGetComputeRunningProcesses (16-byte entries)");
  expect_two_processes(d);
}

// One entry no layout explains (pid 0) is left out and said; the valid ones stay, on every
// reader (the detail list has no layout to doubt and keeps it).
TEST(NvmlBackend, OneOddEntryDoesNotHideTheOthers) {
  const char* script =
      "device name=G uuid=U total=85520809984 used=3000000000 util=0\n"
      "process device=0 pid=4242 used=2000000000 kind=compute\n"
      "process device=0 pid=0 used=5 kind=compute\n";
  for (const char* lib : {OOMDOC_FAKE_NVML_LEGACY, OOMDOC_FAKE_NVML_R535, OOMDOC_FAKE_NVML_R535_NO_CONF}) {
    SCOPED_TRACE(lib);
    DeviceState s = read_with(lib, script);
    const GpuDevice& d = s.devices.at(0);
    EXPECT_EQ(d.process_error, std::nullopt);
    ASSERT_EQ(d.processes.size(), 1u);
    EXPECT_EQ(d.processes[0].pid, 4242u);
    EXPECT_EQ(d.processes[0].used_bytes, 2000000000u);
    ASSERT_TRUE(d.process_warning);
    EXPECT_NE(d.process_warning->find("returned 1 of 2 entries that fit no known layout"), std::string::npos);
  }
}

TEST(NvmlBackend, ProcessUtilizationSamples) {
  const char* script =
      "device name=G uuid=U total=85520809984 used=1000 util=40\n"
      "process device=0 pid=4242 used=10 kind=compute sm=37\n"
      "process device=0 pid=4243 used=10 kind=compute\n";
  DeviceState s = read_with(OOMDOC_FAKE_NVML_MODERN, script);
  ASSERT_EQ(s.devices.at(0).processes.size(), 2u);
  EXPECT_EQ(s.devices[0].processes[0].sm_percent, 37u);
  EXPECT_EQ(s.devices[0].processes[1].sm_percent, 0u);  // no sample in the last second
  // No sample on the device at all (NOT_FOUND), or no such entry point: unknown, not 0.
  DeviceState none = read_with(OOMDOC_FAKE_NVML_MODERN, kTwoProcesses);
  EXPECT_EQ(none.devices.at(0).processes.at(0).sm_percent, std::nullopt);
  DeviceState legacy = read_with(OOMDOC_FAKE_NVML_LEGACY, script);
  EXPECT_EQ(legacy.devices.at(0).processes.at(0).sm_percent, std::nullopt);
}

TEST(NvmlBackend, ManyProcessesGrowTheBuffer) {
  std::string script = "device name=G uuid=U total=85520809984 reserved=0 used=1000\n";
  for (int i = 1; i <= 300; ++i)
    script += "process device=0 pid=" + std::to_string(1000 + i) + " used=" + std::to_string(i) + "\n";
  for (const char* lib : {OOMDOC_FAKE_NVML_MODERN, OOMDOC_FAKE_NVML_R535, OOMDOC_FAKE_NVML_LEGACY}) {
    DeviceState s = read_with(lib, script);
    ASSERT_EQ(s.devices.size(), 1u) << lib;
    ASSERT_EQ(s.devices[0].processes.size(), 300u) << lib;
    EXPECT_EQ(s.devices[0].processes[299].pid, 1300u) << lib;
    EXPECT_EQ(s.devices[0].processes[299].used_bytes, 300u) << lib;
  }
}

TEST(NvmlBackend, NoPermissionIsRecordedPerDevice) {
  DeviceState s = read_with(OOMDOC_FAKE_NVML_MODERN,
                            "device name=A uuid=U total=100 used=10 memory_error=4 process_error=4\n"
                            "device name=B uuid=V total=100 used=10\n");
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.devices[0].memory_error, "NVML_ERROR_NO_PERMISSION (Insufficient Permissions)");
  EXPECT_EQ(s.devices[0].total_bytes, std::nullopt);
  EXPECT_EQ(s.devices[0].process_error, "NVML_ERROR_NO_PERMISSION (Insufficient Permissions)");
  EXPECT_EQ(s.devices[1].total_bytes, 100u);
  EXPECT_EQ(s.devices[1].memory_error, std::nullopt);
}

TEST(NvmlBackend, UnifiedMemoryDeviceReportsTotalZero) {
  DeviceState s = read_with(OOMDOC_FAKE_NVML_MODERN, "device name=Orin uuid=U total=0 used=0\n");
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_TRUE(s.devices[0].unified_memory);
  EXPECT_EQ(s.devices[0].total_bytes, std::nullopt);
  EXPECT_EQ(s.devices[0].memory_error, std::nullopt);
}

TEST(NvmlBackend, KnownBadDriverIsWarnedAbout) {
  DeviceState s = read_with(OOMDOC_FAKE_NVML_MODERN, "driver 535.54.03\ndevice name=A uuid=U total=100\n");
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0],
            "driver 535.54.03 is known to report wrong process lists (535.43 to 535.85); upgrade the driver");
}

TEST(NvmlBackend, MissingLibraryIsOneLineError) {
  auto backend = open_nvml_backend("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.error().message.rfind("no NVIDIA driver: cannot load /nonexistent/libnvidia-ml.so.1 (", 0), 0u)
      << backend.error().message;
}

TEST(NvmlBackend, DriverNotLoadedAndVersionMismatchAreExplained) {
  {
    ScriptFile file("init_error 9\n");
    auto backend = open_nvml_backend(OOMDOC_FAKE_NVML_MODERN);
    ASSERT_FALSE(backend.ok());
    EXPECT_EQ(backend.error().message,
              std::string("no NVIDIA driver: ") + OOMDOC_FAKE_NVML_MODERN +
                  " is installed but the kernel driver is not loaded (NVML_ERROR_DRIVER_NOT_LOADED "
                  "(Driver Not Loaded)); check `lsmod | grep nvidia`");
  }
  {
    ScriptFile file("init_error 18\n");
    auto backend = open_nvml_backend(OOMDOC_FAKE_NVML_MODERN);
    ASSERT_FALSE(backend.ok());
    EXPECT_NE(backend.error().message.find("upgraded without a reboot"), std::string::npos);
  }
}

TEST(NvmlBackend, NoDeviceIsAnError) {
  ScriptFile file("driver 550.54.15\n");
  auto backend = open_nvml_backend(OOMDOC_FAKE_NVML_MODERN);
  ASSERT_TRUE(backend.ok());
  auto state = (*backend)->read_state();
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.error().message, "no NVIDIA GPU: the driver (550.54.15) sees no device");
}

TEST(NvmlBackend, LibraryWithoutNvmlSymbolsIsRejected) {
  auto backend = open_nvml_backend("libm.so.6");
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.error().message, "libm.so.6: not a usable NVML library: it has no nvmlInit");
}

}  // namespace
}  // namespace oomdoc
