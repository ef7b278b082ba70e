// A fake libnvidia-ml for tests: exports the NVML C symbols oomdoc uses, answering from a script
// named by $OOMDOC_FAKE_NVML_SCRIPT, so `oomdoc gpus` is tested through the real dlopen path.
//
// Built in several variants (tests/fake_nvml/CMakeLists.txt) that export different symbol sets,
// like drivers of different ages:
//   FAKE_MODERN        nvmlInitWithFlags, *_v2, nvmlDeviceGetRunningProcessDetailList, _v3 (24 B)
//   FAKE_R535          no detail list, nvmlDeviceGetConfComputeMemSizeInfo, _v3 writes 32-byte
//                      entries without a version bump (nvitop PR #79)
//   FAKE_R535_NO_CONF  as R535 but without ConfComputeMemSizeInfo, so the size guess is wrong
//   FAKE_LEGACY        unversioned names only: nvmlInit, v1 memory, 16-byte process entries
//
// Script lines (one per line, '#' starts a comment; values may be "quoted"):
//   driver 550.54.15
//   cuda 12040
//   init_error 9                         nvmlInit returns this code
//   device name="NVIDIA H100 80GB HBM3" uuid=GPU-1 total=N reserved=N used=N util=37
//          [memory_error=4] [process_error=4]
//   process device=0 pid=123 used=N|na kind=compute|graphics|mps [sm=37]
//          (sm: a utilisation sample; with no sample on a device, the samples call says NOT_FOUND)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "readers/nvml_api.h"

using namespace oomdoc::nvml;

namespace {

struct FakeProcess {
  unsigned device = 0;
  unsigned pid = 0;
  unsigned long long used = kValueNotAvailable;
  unsigned mode = kProcessModeCompute;
  int sm = -1;  // SM utilisation sample; -1: no sample
};

struct FakeDevice {
  std::string name, uuid;
  unsigned long long total = 0, reserved = 0, used = 0;
  unsigned util = 0;
  Return memory_error = kSuccess;
  Return process_error = kSuccess;
};

struct Script {
  std::string driver = "550.54.15";
  int cuda = 12040;
  Return init_error = kSuccess;
  std::vector<FakeDevice> devices;
  std::vector<FakeProcess> processes;
};

Script g_script;
bool g_initialized = false;

std::vector<std::string> tokenize(const std::string& line) {
  std::vector<std::string> out;
  std::string current;
  bool quoted = false, any = false;
  for (char c : line) {
    if (c == '"') { quoted = !quoted; any = true; continue; }
    if (!quoted && (c == ' ' || c == '\t')) {
      if (any) out.push_back(current);
      current.clear();
      any = false;
      continue;
    }
    current += c;
    any = true;
  }
  if (any) out.push_back(current);
  return out;
}

// Re-read at every nvmlInit, so one process can load several scripts in turn.
void load_script() {
  g_script = Script{};
  const char* path = std::getenv("OOMDOC_FAKE_NVML_SCRIPT");
  if (!path) return;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    auto tokens = tokenize(line);
    if (tokens.empty()) continue;
    const std::string& kind = tokens[0];
    if (kind == "driver" && tokens.size() > 1) g_script.driver = tokens[1];
    if (kind == "cuda" && tokens.size() > 1) g_script.cuda = std::atoi(tokens[1].c_str());
    if (kind == "init_error" && tokens.size() > 1) g_script.init_error = std::atoi(tokens[1].c_str());
    if (kind == "device") {
      FakeDevice d;
      for (size_t i = 1; i < tokens.size(); ++i) {
        auto eq = tokens[i].find('=');
        if (eq == std::string::npos) continue;
        std::string key = tokens[i].substr(0, eq), value = tokens[i].substr(eq + 1);
        if (key == "name") d.name = value;
        if (key == "uuid") d.uuid = value;
        if (key == "total") d.total = std::strtoull(value.c_str(), nullptr, 10);
        if (key == "reserved") d.reserved = std::strtoull(value.c_str(), nullptr, 10);
        if (key == "used") d.used = std::strtoull(value.c_str(), nullptr, 10);
        if (key == "util") d.util = static_cast<unsigned>(std::atoi(value.c_str()));
        if (key == "memory_error") d.memory_error = std::atoi(value.c_str());
        if (key == "process_error") d.process_error = std::atoi(value.c_str());
      }
      g_script.devices.push_back(d);
    }
    if (kind == "process") {
      FakeProcess p;
      for (size_t i = 1; i < tokens.size(); ++i) {
        auto eq = tokens[i].find('=');
        if (eq == std::string::npos) continue;
        std::string key = tokens[i].substr(0, eq), value = tokens[i].substr(eq + 1);
        if (key == "device") p.device = static_cast<unsigned>(std::atoi(value.c_str()));
        if (key == "pid") p.pid = static_cast<unsigned>(std::strtoul(value.c_str(), nullptr, 10));
        if (key == "used")
          p.used = value == "na" ? kValueNotAvailable : std::strtoull(value.c_str(), nullptr, 10);
        if (key == "sm") p.sm = std::atoi(value.c_str());
        if (key == "kind")
          p.mode = value == "graphics" ? kProcessModeGraphics
                   : value == "mps"    ? kProcessModeMps
                                       : kProcessModeCompute;
      }
      g_script.processes.push_back(p);
    }
  }
}

FakeDevice* device_of(Device handle) { return reinterpret_cast<FakeDevice*>(handle); }

unsigned index_of(Device handle) {
  return static_cast<unsigned>(device_of(handle) - g_script.devices.data());
}

Return init_impl() {
  load_script();
  if (g_script.init_error != kSuccess) return g_script.init_error;
  g_initialized = true;
  return kSuccess;
}

Return copy_string(const std::string& s, char* buffer, unsigned length) {
  if (s.size() + 1 > length) return kErrorInsufficientSize;
  std::memcpy(buffer, s.c_str(), s.size() + 1);
  return kSuccess;
}

// Writes the processes of one mode in the given entry size; the NVML count protocol.
Return list_processes(Device handle, unsigned mode, unsigned* count, void* infos, size_t entry_size) {
  if (!g_initialized) return kErrorUninitialized;
  FakeDevice* d = device_of(handle);
  if (d->process_error != kSuccess) return d->process_error;
  std::vector<FakeProcess> selected;
  for (const auto& p : g_script.processes)
    if (p.device == index_of(handle) && p.mode == mode) selected.push_back(p);
  if (*count < selected.size()) {
    *count = static_cast<unsigned>(selected.size());
    return selected.empty() ? kSuccess : kErrorInsufficientSize;
  }
  *count = static_cast<unsigned>(selected.size());
  auto* out = static_cast<unsigned char*>(infos);
  for (size_t i = 0; i < selected.size(); ++i) {
    ProcessInfoV3 entry{};
    entry.pid = selected[i].pid;
    entry.usedGpuMemory = selected[i].used;
    entry.gpuInstanceId = kIdNotAvailable;
    entry.computeInstanceId = kIdNotAvailable;
    entry.usedGpuCcProtectedMemory = 0;
    std::memcpy(out + i * entry_size, &entry, entry_size);
  }
  return kSuccess;
}

}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT Return nvmlInit() { return init_impl(); }
FAKE_EXPORT Return nvmlShutdown() {
  g_initialized = false;
  return kSuccess;
}
FAKE_EXPORT const char* nvmlErrorString(Return code) {
  switch (code) {
    case kErrorNoPermission: return "Insufficient Permissions";
    case kErrorDriverNotLoaded: return "Driver Not Loaded";
    case kErrorLibRmVersionMismatch: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
  }
}
FAKE_EXPORT Return nvmlSystemGetDriverVersion(char* version, unsigned length) {
  return copy_string(g_script.driver, version, length);
}
FAKE_EXPORT Return nvmlDeviceGetCount(unsigned* count) {
  if (!g_initialized) return kErrorUninitialized;
  *count = static_cast<unsigned>(g_script.devices.size());
  return kSuccess;
}
FAKE_EXPORT Return nvmlDeviceGetHandleByIndex(unsigned index, Device* device) {
  if (!g_initialized) return kErrorUninitialized;
  if (index >= g_script.devices.size()) return kErrorInvalidArgument;
  *device = reinterpret_cast<Device>(&g_script.devices[index]);
  return kSuccess;
}
FAKE_EXPORT Return nvmlDeviceGetName(Device device, char* name, unsigned length) {
  return copy_string(device_of(device)->name, name, length);
}
FAKE_EXPORT Return nvmlDeviceGetUUID(Device device, char* uuid, unsigned length) {
  return copy_string(device_of(device)->uuid, uuid, length);
}
FAKE_EXPORT Return nvmlDeviceGetMemoryInfo(Device device, MemoryV1* memory) {
  FakeDevice* d = device_of(device);
  if (d->memory_error != kSuccess) return d->memory_error;
  // v1 counts the driver's reserve as used (gpustat#141).
  memory->total = d->total;
  memory->used = d->used + d->reserved;
  memory->free = d->total - d->used - d->reserved;
  return kSuccess;
}
FAKE_EXPORT Return nvmlDeviceGetUtilizationRates(Device device, Utilization* utilization) {
  utilization->gpu = device_of(device)->util;
  utilization->memory = 0;
  return kSuccess;
}
FAKE_EXPORT Return nvmlDeviceGetComputeRunningProcesses(Device device, unsigned* count, void* infos) {
  return list_processes(device, kProcessModeCompute, count, infos, sizeof(ProcessInfoV1));
}
FAKE_EXPORT Return nvmlDeviceGetGraphicsRunningProcesses(Device device, unsigned* count, void* infos) {
  return list_processes(device, kProcessModeGraphics, count, infos, sizeof(ProcessInfoV1));
}

#ifndef FAKE_LEGACY
FAKE_EXPORT Return nvmlInit_v2() { return init_impl(); }
FAKE_EXPORT Return nvmlInitWithFlags(unsigned) { return init_impl(); }
FAKE_EXPORT Return nvmlSystemGetCudaDriverVersion_v2(int* version) {
  *version = g_script.cuda;
  return kSuccess;
}
FAKE_EXPORT Return nvmlDeviceGetCount_v2(unsigned* count) { return nvmlDeviceGetCount(count); }
FAKE_EXPORT Return nvmlDeviceGetHandleByIndex_v2(unsigned index, Device* device) {
  return nvmlDeviceGetHandleByIndex(index, device);
}
FAKE_EXPORT Return nvmlDeviceGetMemoryInfo_v2(Device device, MemoryV2* memory) {
  // A real driver refuses a bare `2` (nvidia-settings#78); so does the fake.
  if (memory->version != kMemoryV2Version) return kErrorArgumentVersionMismatch;
  FakeDevice* d = device_of(device);
  if (d->memory_error != kSuccess) return d->memory_error;
  memory->total = d->total;
  memory->reserved = d->reserved;
  memory->used = d->used;
  memory->free = d->total - d->used - d->reserved;
  return kSuccess;
}
FAKE_EXPORT Return nvmlDeviceGetComputeRunningProcesses_v2(Device device, unsigned* count, void* infos) {
  return list_processes(device, kProcessModeCompute, count, infos, sizeof(ProcessInfoV2));
}
FAKE_EXPORT Return nvmlDeviceGetGraphicsRunningProcesses_v2(Device device, unsigned* count, void* infos) {
  return list_processes(device, kProcessModeGraphics, count, infos, sizeof(ProcessInfoV2));
}
FAKE_EXPORT Return nvmlDeviceGetMPSComputeRunningProcesses_v2(Device device, unsigned* count, void* infos) {
  return list_processes(device, kProcessModeMps, count, infos, sizeof(ProcessInfoV2));
}

#if defined(FAKE_R535) || defined(FAKE_R535_NO_CONF)
constexpr size_t kV3Entry = sizeof(ProcessInfoV3);  // grew without a version bump
#else
constexpr size_t kV3Entry = sizeof(ProcessInfoV2);
#endif
FAKE_EXPORT Return nvmlDeviceGetComputeRunningProcesses_v3(Device device, unsigned* count, void* infos) {
  return list_processes(device, kProcessModeCompute, count, infos, kV3Entry);
}
FAKE_EXPORT Return nvmlDeviceGetGraphicsRunningProcesses_v3(Device device, unsigned* count, void* infos) {
  return list_processes(device, kProcessModeGraphics, count, infos, kV3Entry);
}
FAKE_EXPORT Return nvmlDeviceGetMPSComputeRunningProcesses_v3(Device device, unsigned* count, void* infos) {
  return list_processes(device, kProcessModeMps, count, infos, kV3Entry);
}

FAKE_EXPORT Return nvmlDeviceGetProcessUtilization(Device device, ProcessUtilizationSample* samples,
                                                   unsigned* count, unsigned long long) {
  std::vector<ProcessUtilizationSample> found;
  for (const auto& p : g_script.processes) {
    if (p.device != index_of(device) || p.sm < 0) continue;
    ProcessUtilizationSample s{};
    s.pid = p.pid;
    s.smUtil = static_cast<unsigned>(p.sm);
    found.push_back(s);
  }
  if (found.empty()) return kErrorNotFound;
  if (!samples || *count < found.size()) {
    *count = static_cast<unsigned>(found.size());
    return kErrorInsufficientSize;
  }
  *count = static_cast<unsigned>(found.size());
  for (size_t i = 0; i < found.size(); ++i) samples[i] = found[i];
  return kSuccess;
}

#if defined(FAKE_R535)
FAKE_EXPORT Return nvmlDeviceGetConfComputeMemSizeInfo(Device, void*) { return kErrorNotSupported; }
#endif

#if defined(FAKE_MODERN)
FAKE_EXPORT Return nvmlDeviceGetRunningProcessDetailList(Device device, ProcessDetailListV1* list) {
  if (list->version != kProcessDetailListV1Version) return kErrorArgumentVersionMismatch;
  return list_processes(device, list->mode, &list->numProcArrayEntries, list->procArray,
                        sizeof(ProcessDetailV1));
}
#endif
#endif  // !FAKE_LEGACY
