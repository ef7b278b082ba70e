// Our own minimal declarations of the NVML C API, so oomdoc builds without NVIDIA headers and
// loads libnvidia-ml at run time (the approach of nvtop's extract_gpuinfo_nvidia.c). Only what
// `oomdoc gpus` uses is declared. Layouts and version words come from NVIDIA/go-nvml
// pkg/nvml/nvml.h (NVML API 13); see ../shared/docs/nvml.md section 2.5 for the table.
//
// Shared by the real backend (readers/nvml_backend.cpp) and the fake library in tests/fake_nvml,
// which exports the same C symbols.
#pragma once

#include <cstddef>
#include <cstdint>

namespace oomdoc::nvml {

using Return = int;  // nvmlReturn_t, stored as int (nvtop does the same)
struct DeviceOpaque;
using Device = DeviceOpaque*;  // nvmlDevice_t

// nvmlReturn_t values we name in messages.
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorLibraryNotFound = 12;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorOperatingSystem = 17;
inline constexpr Return kErrorLibRmVersionMismatch = 18;
inline constexpr Return kErrorArgumentVersionMismatch = 25;
inline constexpr Return kErrorGpuNotFound = 28;
inline constexpr Return kErrorUnknown = 999;

// nvmlInitWithFlags: "Don't fail nvmlInit() when no GPUs are found" (we report that ourselves).
inline constexpr unsigned kInitFlagNoGpus = 1u << 0;

// NVML_VALUE_NOT_AVAILABLE: usedGpuMemory under WDDM, or on MIG without privileges.
inline constexpr unsigned long long kValueNotAvailable = ~0ull;

inline constexpr unsigned kNameBufferSize = 96;           // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned kUuidBufferSize = 96;           // NVML_DEVICE_UUID_V2_BUFFER_SIZE
inline constexpr unsigned kDriverVersionBufferSize = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE

// NVML_STRUCT_VERSION(name, ver) = sizeof(struct) | (ver << 24).
constexpr unsigned struct_version(size_t size, unsigned version) {
  return static_cast<unsigned>(size) | (version << 24);
}

struct MemoryV1 {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;  // includes driver-reserved memory on R510+ (gpustat#141)
};
static_assert(sizeof(MemoryV1) == 24);

struct MemoryV2 {  // nvmlMemory_v2_t
  unsigned version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
static_assert(sizeof(MemoryV2) == 40);
// The full version word, not plain 2: nvidia-settings#78, dxvk-nvapi#198.
inline constexpr unsigned kMemoryV2Version = struct_version(sizeof(MemoryV2), 2);
static_assert(kMemoryV2Version == 0x02000028);

struct ProcessInfoV1 {  // nvmlProcessInfo_v1_t
  unsigned pid;
  unsigned long long usedGpuMemory;
};
static_assert(sizeof(ProcessInfoV1) == 16);

struct ProcessInfoV2 {  // nvmlProcessInfo_v2_t, what nvmlProcessInfo_t is today
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId;      // 0xFFFFFFFF when MIG is off
  unsigned computeInstanceId;
};
static_assert(sizeof(ProcessInfoV2) == 24);
static_assert(offsetof(ProcessInfoV2, usedGpuMemory) == 8);

// What some R535 drivers write from the _v3 process functions without a version bump
// (nvitop PR #79, gpustat#161); identical to nvmlProcessDetail_v1_t.
struct ProcessInfoV3 {
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId;
  unsigned computeInstanceId;
  unsigned long long usedGpuCcProtectedMemory;
};
static_assert(sizeof(ProcessInfoV3) == 32);
using ProcessDetailV1 = ProcessInfoV3;

// The largest process entry any driver writes; buffers are sized with it so a layout guess that
// is too small can never make the driver write past the end.
inline constexpr size_t kLargestProcessEntry = sizeof(ProcessInfoV3);

inline constexpr unsigned kIdNotAvailable = 0xFFFFFFFFu;

struct ProcessDetailListV1 {  // nvmlProcessDetailList_v1_t
  unsigned version;
  unsigned mode;  // kProcessMode*
  unsigned numProcArrayEntries;
  ProcessDetailV1* procArray;
};
static_assert(sizeof(ProcessDetailListV1) == 24);
inline constexpr unsigned kProcessDetailListV1Version =
    struct_version(sizeof(ProcessDetailListV1), 1);
static_assert(kProcessDetailListV1Version == 0x01000018);

inline constexpr unsigned kProcessModeCompute = 0;
inline constexpr unsigned kProcessModeGraphics = 1;
inline constexpr unsigned kProcessModeMps = 2;

struct ProcessUtilizationSample {  // nvmlProcessUtilizationSample_t
  unsigned pid;
  unsigned long long timeStamp;  // microseconds since the epoch
  unsigned smUtil;
  unsigned memUtil;
  unsigned encUtil;
  unsigned decUtil;
};
static_assert(sizeof(ProcessUtilizationSample) == 32);

struct Utilization {  // nvmlUtilization_t
  unsigned gpu;
  unsigned memory;
};
static_assert(sizeof(Utilization) == 8);

// Function pointer types, one per signature.
extern "C" {
using InitWithFlagsFn = Return (*)(unsigned flags);
using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using SystemGetDriverVersionFn = Return (*)(char* version, unsigned length);
using SystemGetCudaDriverVersionFn = Return (*)(int* version);
using DeviceGetCountFn = Return (*)(unsigned* count);
using DeviceGetHandleByIndexFn = Return (*)(unsigned index, Device* device);
using DeviceGetStringFn = Return (*)(Device device, char* buffer, unsigned length);
using DeviceGetMemoryInfoFn = Return (*)(Device device, MemoryV1* memory);
using DeviceGetMemoryInfoV2Fn = Return (*)(Device device, MemoryV2* memory);
using DeviceGetUtilizationRatesFn = Return (*)(Device device, Utilization* utilization);
using DeviceGetRunningProcessDetailListFn = Return (*)(Device device, ProcessDetailListV1* list);
// Cast to a common void* signature; the entry size depends on which version was found.
using DeviceGetRunningProcessesFn = Return (*)(Device device, unsigned* count, void* infos);
using DeviceGetProcessUtilizationFn = Return (*)(Device device, ProcessUtilizationSample* samples,
                                                 unsigned* count, unsigned long long last_seen_us);
using DeviceGetConfComputeMemSizeInfoFn = Return (*)(Device device, void* info);
}

// "NVML_ERROR_NO_PERMISSION" for 4, "NVML error 123" for codes we do not name.
const char* return_code_name(Return code);

}  // namespace oomdoc::nvml
