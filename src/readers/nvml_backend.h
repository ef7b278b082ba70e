// Reads DeviceState from the NVIDIA driver through NVML, loaded at run time with dlopen so oomdoc
// runs (and says why it cannot show GPUs) on machines without a driver.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "model/device_state.h"

namespace oomdoc {

// The seam between `oomdoc gpus` and the driver; tests use the fake NVML library behind the
// real implementation, or a hand-made DeviceState.
class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  // A fresh reading of every device. Per-device failures (no permission, ...) are recorded in the
  // device; an error is returned only when nothing can be read.
  virtual Result<DeviceState> read_state() = 0;
};

// Environment variable naming the NVML library to load instead of libnvidia-ml.so.1 (tests load
// the fake library through it; also useful for WSL's /usr/lib/wsl/lib).
inline constexpr const char* kNvmlLibraryEnv = "OOMDOC_NVML_LIBRARY";
inline constexpr const char* kDefaultNvmlLibrary = "libnvidia-ml.so.1";

// Loads and initialises NVML. library: a path or soname; empty = $OOMDOC_NVML_LIBRARY, else
// libnvidia-ml.so.1. The error is one line saying why there is no GPU view: library missing,
// driver not loaded, driver/library mismatch (reboot after an upgrade), no GPU.
Result<std::unique_ptr<GpuBackend>> open_nvml_backend(const std::string& library = "");

}  // namespace oomdoc
