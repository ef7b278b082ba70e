// What the GPU driver says right now: devices, their memory, and the processes holding memory.
// Produced by a GpuBackend (readers/nvml_backend.h); knows nothing of /proc or of reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace oomdoc {

// One process with a context on one device, merged across NVML's compute/graphics/MPS lists.
struct GpuProcess {
  uint32_t pid = 0;                      // a host PID: the driver ignores PID namespaces
  std::optional<uint64_t> used_bytes;    // absent under WDDM / MIG without privileges
  bool compute = false;
  bool graphics = false;
  bool mps = false;
  std::optional<uint32_t> gpu_instance_id;      // MIG only
  std::optional<uint32_t> compute_instance_id;  // MIG only
  // Share of the last second the GPU's SMs ran this process's kernels (NVML process samples);
  // absent when the driver keeps no samples (MIG, old drivers).
  std::optional<unsigned> sm_percent;

  // "C", "G", "C+G", "MPS" (nvitop's type column).
  std::string kind_label() const {
    if (mps) return "MPS";
    if (compute && graphics) return "C+G";
    return graphics ? "G" : "C";
  }
};

struct GpuDevice {
  unsigned index = 0;
  std::string name;
  std::string uuid;
  // From nvmlDeviceGetMemoryInfo_v2 when the driver has it: `used` then excludes the driver's
  // reserved memory, which is reported separately. From v1, reserved is absent and used includes it.
  std::optional<uint64_t> total_bytes;
  std::optional<uint64_t> reserved_bytes;
  std::optional<uint64_t> used_bytes;
  std::optional<uint64_t> free_bytes;
  std::optional<unsigned> utilization_percent;
  std::string memory_api;                   // the entry point that answered
  std::optional<std::string> memory_error;  // why memory is absent ("NVML_ERROR_NO_PERMISSION")
  bool unified_memory = false;              // total 0 / NOT_SUPPORTED: an iGPU sharing system RAM

  std::vector<GpuProcess> processes;
  std::string process_api;                   // entry point and entry layout that answered
  std::optional<std::string> process_error;  // why the process list is absent
  std::optional<std::string> process_warning;  // entries left out of the list (they fit no layout)
};

struct DeviceState {
  std::string library;                      // the NVML library that was loaded
  std::optional<std::string> driver_version;
  std::optional<std::string> cuda_version;  // "12.4"
  std::vector<GpuDevice> devices;
  std::vector<std::string> warnings;        // e.g. a driver known to report wrong process lists
};

}  // namespace oomdoc
