#include "readers/nvml_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>

#include <fmt/format.h>

#include "readers/nvml_api.h"

namespace oomdoc {

namespace nvml {
const char* return_code_name(Return code) {
  switch (code) {
    case kSuccess: return "NVML_SUCCESS";
    case kErrorUninitialized: return "NVML_ERROR_UNINITIALIZED";
    case kErrorInvalidArgument: return "NVML_ERROR_INVALID_ARGUMENT";
    case kErrorNotSupported: return "NVML_ERROR_NOT_SUPPORTED";
    case kErrorNoPermission: return "NVML_ERROR_NO_PERMISSION";
    case kErrorNotFound: return "NVML_ERROR_NOT_FOUND";
    case kErrorInsufficientSize: return "NVML_ERROR_INSUFFICIENT_SIZE";
    case kErrorDriverNotLoaded: return "NVML_ERROR_DRIVER_NOT_LOADED";
    case kErrorLibraryNotFound: return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case kErrorFunctionNotFound: return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case kErrorGpuIsLost: return "NVML_ERROR_GPU_IS_LOST";
    case kErrorOperatingSystem: return "NVML_ERROR_OPERATING_SYSTEM";
    case kErrorLibRmVersionMismatch: return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    case kErrorArgumentVersionMismatch: return "NVML_ERROR_ARGUMENT_VERSION_MISMATCH";
    case kErrorGpuNotFound: return "NVML_ERROR_GPU_NOT_FOUND";
    case kErrorUnknown: return "NVML_ERROR_UNKNOWN";
    default: return "NVML error";
  }
}
}  // namespace nvml

namespace {

using namespace nvml;

// Linux's PID_MAX_LIMIT on 64-bit: no real pid is larger, so a larger one means a layout mismatch.
constexpr uint64_t kPidLimit = 4194304;

std::string code_text(Return code) {
  std::string name = return_code_name(code);
  if (name == "NVML error") return fmt::format("NVML error {}", code);
  return name;
}

// Looks up the first of `names` the library exports (newest first); records which one answered.
template <typename Fn>
Fn first_symbol(void* handle, std::initializer_list<const char*> names, std::string* found = nullptr) {
  for (const char* name : names) {
    if (void* symbol = dlsym(handle, name)) {
      if (found) *found = name;
      return reinterpret_cast<Fn>(symbol);
    }
  }
  return nullptr;
}

// One way to list processes of one kind: the entry point and the entry size we decode with.
struct ProcessQuery {
  DeviceGetRunningProcessesFn fn = nullptr;
  std::string name;
  size_t entry_size = 0;
};

struct DecodedEntry {
  uint32_t pid;
  uint64_t used;
  std::optional<uint32_t> gpu_instance;
  std::optional<uint32_t> compute_instance;
};

std::vector<DecodedEntry> decode_entries(const std::vector<unsigned char>& buffer, unsigned count,
                                         size_t stride) {
  std::vector<DecodedEntry> out;
  for (unsigned i = 0; i < count && (i + 1) * stride <= buffer.size(); ++i) {
    const unsigned char* p = buffer.data() + i * stride;
    DecodedEntry e{};
    std::memcpy(&e.pid, p, sizeof(uint32_t));
    std::memcpy(&e.used, p + 8, sizeof(uint64_t));
    if (stride >= sizeof(ProcessInfoV2)) {
      uint32_t gi = 0, ci = 0;
      std::memcpy(&gi, p + 16, sizeof gi);
      std::memcpy(&ci, p + 20, sizeof ci);
      if (gi != kIdNotAvailable) e.gpu_instance = gi;
      if (ci != kIdNotAvailable) e.compute_instance = ci;
    }
    out.push_back(e);
  }
  return out;
}

// Entries decoded with the wrong layout show pids of 0 or beyond the kernel's limit, or more
// memory than the device has (pynvml#50 shows pid and memory swapped).
bool entry_looks_valid(const DecodedEntry& e, std::optional<uint64_t> total) {
  if (e.pid == 0 || e.pid > kPidLimit) return false;
  return !(e.used != kValueNotAvailable && total && *total > 0 && e.used > *total);
}
size_t valid_entries(const std::vector<DecodedEntry>& entries, std::optional<uint64_t> total) {
  return static_cast<size_t>(std::count_if(entries.begin(), entries.end(),
                                           [&](const DecodedEntry& e) { return entry_looks_valid(e, total); }));
}
bool entries_look_valid(const std::vector<DecodedEntry>& entries, std::optional<uint64_t> total) {
  return valid_entries(entries, total) == entries.size();
}

// Calls a process-list entry point until the buffer is large enough. The list can grow between
// the sizing call and the fetch, so over-allocate (nvitop: count*2+5) and retry a few times.
// Buffers are sized with the largest entry any driver writes, whatever layout we decode with.
Return fetch_entries(const std::function<Return(unsigned*, void*)>& call,
                     std::vector<unsigned char>* buffer, unsigned* count) {
  *count = 0;
  Return r = call(count, nullptr);
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (r == kSuccess) {
      if (buffer->empty()) *count = 0;
      return r;
    }
    if (r != kErrorInsufficientSize) return r;
    unsigned capacity = *count * 2 + 5;
    buffer->assign(static_cast<size_t>(capacity) * kLargestProcessEntry, 0);
    *count = capacity;
    r = call(count, buffer->data());
  }
  return r;
}

class NvmlBackend final : public GpuBackend {
 public:
  NvmlBackend(void* handle, std::string library) : handle_(handle), library_(std::move(library)) {}
  ~NvmlBackend() override {
    if (initialized_ && shutdown_) shutdown_();
    dlclose(handle_);
  }
  NvmlBackend(const NvmlBackend&) = delete;
  NvmlBackend& operator=(const NvmlBackend&) = delete;

  Status load_and_init();
  Result<DeviceState> read_state() override;

 private:
  std::string describe(Return code) const {
    std::string text = code_text(code);
    if (error_string_) {
      const char* s = error_string_(code);
      if (s && *s) text += fmt::format(" ({})", s);
    }
    return text;
  }
  std::string symbol_error(const char* what) const {
    return fmt::format("{}: not a usable NVML library: it has no {}", library_, what);
  }
  void read_memory(Device device, GpuDevice* out) const;
  void read_processes(Device device, GpuDevice* out) const;
  void read_processes_detail_list(Device device, GpuDevice* out) const;
  void read_processes_legacy(Device device, GpuDevice* out) const;
  void read_process_utilization(Device device, GpuDevice* out) const;

  void* handle_;
  std::string library_;
  bool initialized_ = false;

  ShutdownFn shutdown_ = nullptr;
  ErrorStringFn error_string_ = nullptr;
  SystemGetDriverVersionFn driver_version_ = nullptr;
  SystemGetCudaDriverVersionFn cuda_version_ = nullptr;
  DeviceGetCountFn count_ = nullptr;
  DeviceGetHandleByIndexFn handle_by_index_ = nullptr;
  DeviceGetStringFn name_ = nullptr;
  DeviceGetStringFn uuid_ = nullptr;
  DeviceGetMemoryInfoV2Fn memory_v2_ = nullptr;
  DeviceGetMemoryInfoFn memory_v1_ = nullptr;
  DeviceGetUtilizationRatesFn utilization_ = nullptr;
  DeviceGetRunningProcessDetailListFn detail_list_ = nullptr;
  DeviceGetProcessUtilizationFn process_utilization_ = nullptr;
  ProcessQuery compute_, graphics_, mps_;
};

// nvitop's rule (PR #79/#94), since the _v3 functions changed their entry size without a version
// bump on some R535 drivers: the 32-byte layout only when nvmlDeviceGetConfComputeMemSizeInfo
// exists and nvmlDeviceGetRunningProcessDetailList does not; the sanity check corrects a wrong guess.
ProcessQuery choose_process_query(void* handle, const std::string& kind, bool r535_layout) {
  ProcessQuery q;
  const std::string base = "nvmlDeviceGet" + kind + "RunningProcesses";
  const std::string v3 = base + "_v3", v2 = base + "_v2";
  if (void* s = dlsym(handle, v3.c_str())) {
    q = {reinterpret_cast<DeviceGetRunningProcessesFn>(s), v3,
         r535_layout ? sizeof(ProcessInfoV3) : sizeof(ProcessInfoV2)};
  } else if (void* s2 = dlsym(handle, v2.c_str())) {
    q = {reinterpret_cast<DeviceGetRunningProcessesFn>(s2), v2, sizeof(ProcessInfoV2)};
  } else if (void* s1 = dlsym(handle, base.c_str())) {
    q = {reinterpret_cast<DeviceGetRunningProcessesFn>(s1), base, sizeof(ProcessInfoV1)};
  }
  return q;
}

Status NvmlBackend::load_and_init() {
  std::string init_name;
  auto init_with_flags = first_symbol<InitWithFlagsFn>(handle_, {"nvmlInitWithFlags"}, &init_name);
  auto init = first_symbol<InitFn>(handle_, {"nvmlInit_v2", "nvmlInit"}, &init_name);
  shutdown_ = first_symbol<ShutdownFn>(handle_, {"nvmlShutdown"});
  error_string_ = first_symbol<ErrorStringFn>(handle_, {"nvmlErrorString"});
  driver_version_ = first_symbol<SystemGetDriverVersionFn>(handle_, {"nvmlSystemGetDriverVersion"});
  cuda_version_ = first_symbol<SystemGetCudaDriverVersionFn>(
      handle_, {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
  count_ = first_symbol<DeviceGetCountFn>(handle_, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  handle_by_index_ = first_symbol<DeviceGetHandleByIndexFn>(
      handle_, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  name_ = first_symbol<DeviceGetStringFn>(handle_, {"nvmlDeviceGetName"});
  uuid_ = first_symbol<DeviceGetStringFn>(handle_, {"nvmlDeviceGetUUID"});
  memory_v2_ = first_symbol<DeviceGetMemoryInfoV2Fn>(handle_, {"nvmlDeviceGetMemoryInfo_v2"});
  memory_v1_ = first_symbol<DeviceGetMemoryInfoFn>(handle_, {"nvmlDeviceGetMemoryInfo"});
  utilization_ = first_symbol<DeviceGetUtilizationRatesFn>(handle_, {"nvmlDeviceGetUtilizationRates"});
  detail_list_ = first_symbol<DeviceGetRunningProcessDetailListFn>(
      handle_, {"nvmlDeviceGetRunningProcessDetailList"});
  process_utilization_ =
      first_symbol<DeviceGetProcessUtilizationFn>(handle_, {"nvmlDeviceGetProcessUtilization"});
  const bool r535_layout =
      dlsym(handle_, "nvmlDeviceGetConfComputeMemSizeInfo") != nullptr && detail_list_ == nullptr;
  compute_ = choose_process_query(handle_, "Compute", r535_layout);
  graphics_ = choose_process_query(handle_, "Graphics", r535_layout);
  mps_ = choose_process_query(handle_, "MPSCompute", r535_layout);

  // Required entry points are checked before nvmlInit runs (nvtop does the same).
  if (!init_with_flags && !init) return make_error(symbol_error("nvmlInit"));
  if (!count_) return make_error(symbol_error("nvmlDeviceGetCount"));
  if (!handle_by_index_) return make_error(symbol_error("nvmlDeviceGetHandleByIndex"));
  if (!memory_v2_ && !memory_v1_) return make_error(symbol_error("nvmlDeviceGetMemoryInfo"));
  if (!detail_list_ && !compute_.fn)
    return make_error(symbol_error("nvmlDeviceGetComputeRunningProcesses"));

  Return r = init_with_flags ? init_with_flags(kInitFlagNoGpus) : init();
  if (r == kSuccess) {
    initialized_ = true;
    return Ok{};
  }
  switch (r) {
    case kErrorDriverNotLoaded:
      return make_error(fmt::format(
          "no NVIDIA driver: {} is installed but the kernel driver is not loaded ({}); "
          "check `lsmod | grep nvidia`", library_, describe(r)));
    case kErrorLibRmVersionMismatch:
      return make_error(fmt::format(
          "the NVIDIA library and kernel driver versions differ ({}): the driver was upgraded "
          "without a reboot; reboot or reload the nvidia kernel modules", describe(r)));
    case kErrorNoPermission:
      return make_error(fmt::format(
          "no permission to open the NVIDIA devices ({}): check access to /dev/nvidia*",
          describe(r)));
    default:
      return make_error(fmt::format("{}: NVML failed to initialise: {}", library_, describe(r)));
  }
}

void NvmlBackend::read_memory(Device device, GpuDevice* out) const {
  Return r = kErrorFunctionNotFound;
  if (memory_v2_) {
    MemoryV2 m{};
    m.version = kMemoryV2Version;
    r = memory_v2_(device, &m);
    if (r == kSuccess && m.total > 0) {
      out->total_bytes = m.total;
      out->reserved_bytes = m.reserved;
      out->used_bytes = m.used;
      out->free_bytes = m.free;
      out->memory_api = "nvmlDeviceGetMemoryInfo_v2";
      return;
    }
  }
  // v1: older drivers, or a v2 that refused. Its `used` includes the driver's reserve.
  if (memory_v1_ && (r != kSuccess)) {
    MemoryV1 m{};
    r = memory_v1_(device, &m);
    if (r == kSuccess && m.total > 0) {
      out->total_bytes = m.total;
      out->used_bytes = m.used;
      out->free_bytes = m.free;
      out->memory_api = "nvmlDeviceGetMemoryInfo";
      return;
    }
  }
  // total 0 or NOT_SUPPORTED: a unified-memory device (Jetson, Grace) sharing system RAM (nvtop).
  if (r == kSuccess || r == kErrorNotSupported) {
    out->unified_memory = true;
    return;
  }
  out->memory_error = describe(r);
}

void NvmlBackend::read_processes(Device device, GpuDevice* out) const {
  if (detail_list_) {
    read_processes_detail_list(device, out);
  } else {
    read_processes_legacy(device, out);
  }
}

namespace {
void merge_process(std::map<uint32_t, GpuProcess>* merged, const DecodedEntry& e, unsigned mode) {
  GpuProcess& p = (*merged)[e.pid];
  p.pid = e.pid;
  if (e.used != kValueNotAvailable && (!p.used_bytes || e.used > *p.used_bytes)) p.used_bytes = e.used;
  if (mode == kProcessModeCompute) p.compute = true;
  if (mode == kProcessModeGraphics) p.graphics = true;
  if (mode == kProcessModeMps) p.mps = true;
  if (e.gpu_instance) p.gpu_instance_id = e.gpu_instance;
  if (e.compute_instance) p.compute_instance_id = e.compute_instance;
}
}  // namespace

void NvmlBackend::read_processes_detail_list(Device device, GpuDevice* out) const {
  std::map<uint32_t, GpuProcess> merged;
  out->process_api = "nvmlDeviceGetRunningProcessDetailList";
  for (unsigned mode : {kProcessModeCompute, kProcessModeGraphics, kProcessModeMps}) {
    std::vector<unsigned char> buffer;
    unsigned count = 0;
    Return r = fetch_entries(
        [&](unsigned* n, void* infos) {
          ProcessDetailListV1 list{};
          list.version = kProcessDetailListV1Version;
          list.mode = mode;
          list.numProcArrayEntries = *n;
          list.procArray = static_cast<ProcessDetailV1*>(infos);
          Return rr = detail_list_(device, &list);
          *n = list.numProcArrayEntries;
          return rr;
        },
        &buffer, &count);
    if (r == kErrorNotSupported && mode != kProcessModeCompute) continue;  // no graphics/MPS here
    if (r != kSuccess) {
      out->process_error = describe(r);
      return;
    }
    for (const auto& e : decode_entries(buffer, count, sizeof(ProcessDetailV1)))
      merge_process(&merged, e, mode);
  }
  for (auto& [pid, p] : merged) out->processes.push_back(p);
}

void NvmlBackend::read_processes_legacy(Device device, GpuDevice* out) const {
  std::map<uint32_t, GpuProcess> merged;
  const std::pair<const ProcessQuery*, unsigned> queries[] = {
      {&compute_, kProcessModeCompute}, {&graphics_, kProcessModeGraphics}, {&mps_, kProcessModeMps}};
  std::string api;
  for (const auto& entry : queries) {
    const ProcessQuery* query = entry.first;  // plain names: the lambda below captures one
    const unsigned mode = entry.second;
    if (!query->fn) continue;
    std::vector<unsigned char> buffer;
    unsigned count = 0;
    Return r = fetch_entries([&](unsigned* n, void* infos) { return query->fn(device, n, infos); },
                             &buffer, &count);
    if (r == kErrorNotSupported && mode != kProcessModeCompute) continue;
    if (r != kSuccess) {
      out->process_error = describe(r);
      return;
    }
    size_t stride = query->entry_size;
    auto entries = decode_entries(buffer, count, stride);
    if (!entries_look_valid(entries, out->total_bytes) && stride != sizeof(ProcessInfoV1)) {
      // The _v3 entry size is a guess (see choose_process_query): try the other one, and keep the
      // layout under which more entries make sense.
      size_t other = stride == sizeof(ProcessInfoV2) ? sizeof(ProcessInfoV3) : sizeof(ProcessInfoV2);
      auto retry = decode_entries(buffer, count, other);
      if (valid_entries(retry, out->total_bytes) > valid_entries(entries, out->total_bytes)) {
        entries = std::move(retry);
        stride = other;
      }
    }
    if (!entries_look_valid(entries, out->total_bytes)) {
      // One odd entry (pid 0, more memory than the card) does not hide the others: it is left out
      // and said; a list where nothing makes sense is the layout's failure.
      const size_t before = entries.size();
      std::erase_if(entries, [&](const DecodedEntry& e) { return !entry_looks_valid(e, out->total_bytes); });
      if (entries.empty()) {
        out->process_error = fmt::format("{} returned entries that fit no known layout", query->name);
        return;
      }
      out->process_warning = fmt::format("{} returned {} of {} entries that fit no known layout (pid 0 or past the "
                                         "kernel's limit, or more memory than the card): left out",
                                         query->name, before - entries.size(), before);
    }
    if (mode == kProcessModeCompute) api = fmt::format("{} ({}-byte entries)", query->name, stride);
    for (const auto& e : entries) merge_process(&merged, e, mode);
  }
  out->process_api = api;
  for (auto& [pid, p] : merged) out->processes.push_back(p);
}

// Samples from the last second ("the timestamp 1 second ago to ensure the record buffer is not
// empty", nvitop api/device.py). A process without a sample ran no kernel in that second: 0 %.
// Failure (NOT_FOUND: no samples at all, NOT_SUPPORTED: MIG) leaves every sm_percent absent.
void NvmlBackend::read_process_utilization(Device device, GpuDevice* out) const {
  if (!process_utilization_) return;
  const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  const unsigned long long since = static_cast<unsigned long long>(now_us) - 1000000ull;
  unsigned count = 0;
  Return r = process_utilization_(device, nullptr, &count, since);
  std::vector<ProcessUtilizationSample> samples;
  for (int attempt = 0; attempt < 5 && r == kErrorInsufficientSize; ++attempt) {
    samples.assign(count * 2 + 5, ProcessUtilizationSample{});
    count = static_cast<unsigned>(samples.size());
    r = process_utilization_(device, samples.data(), &count, since);
  }
  if (r != kSuccess) return;
  samples.resize(std::min<size_t>(count, samples.size()));
  for (auto& p : out->processes) {
    unsigned sm = 0;
    for (const auto& s : samples)
      if (s.pid == p.pid && s.smUtil <= 100) sm = std::max(sm, s.smUtil);
    p.sm_percent = sm;
  }
}

// gpustat warns about 535.43 <= driver < 535.86: "these are buggy, gives wrong process information".
std::optional<std::string> driver_warning(const std::string& version) {
  unsigned major = 0, minor = 0;
  if (std::sscanf(version.c_str(), "%u.%u", &major, &minor) != 2) return std::nullopt;
  if (major == 535 && minor >= 43 && minor < 86)
    return fmt::format(
        "driver {} is known to report wrong process lists (535.43 to 535.85); upgrade the driver",
        version);
  return std::nullopt;
}

Result<DeviceState> NvmlBackend::read_state() {
  DeviceState state;
  state.library = library_;
  if (driver_version_) {
    char buffer[kDriverVersionBufferSize] = {};
    if (driver_version_(buffer, sizeof buffer) == kSuccess) state.driver_version = buffer;
  }
  if (cuda_version_) {
    int v = 0;
    if (cuda_version_(&v) == kSuccess && v > 0)
      state.cuda_version = fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
  }
  if (state.driver_version) {
    if (auto w = driver_warning(*state.driver_version)) state.warnings.push_back(*w);
  }
  unsigned count = 0;
  Return r = count_(&count);
  if (r != kSuccess)
    return make_error(fmt::format("{}: cannot count GPUs: {}", library_, describe(r)));
  if (count == 0)
    return make_error(fmt::format("no NVIDIA GPU: the driver{} sees no device",
                                  state.driver_version ? " (" + *state.driver_version + ")" : ""));
  for (unsigned i = 0; i < count; ++i) {
    GpuDevice gpu;
    gpu.index = i;
    Device device = nullptr;
    r = handle_by_index_(i, &device);
    if (r != kSuccess) {
      gpu.memory_error = describe(r);
      gpu.process_error = describe(r);
      state.devices.push_back(std::move(gpu));
      continue;
    }
    char text[kNameBufferSize] = {};
    if (name_ && name_(device, text, sizeof text) == kSuccess) gpu.name = text;
    char uuid[kUuidBufferSize] = {};
    if (uuid_ && uuid_(device, uuid, sizeof uuid) == kSuccess) gpu.uuid = uuid;
    read_memory(device, &gpu);
    if (utilization_) {
      Utilization u{};
      if (utilization_(device, &u) == kSuccess) gpu.utilization_percent = u.gpu;
    }
    read_processes(device, &gpu);
    if (!gpu.processes.empty()) read_process_utilization(device, &gpu);
    state.devices.push_back(std::move(gpu));
  }
  return state;
}

}  // namespace

Result<std::unique_ptr<GpuBackend>> open_nvml_backend(const std::string& library) {
  std::string name = library;
  if (name.empty()) {
    const char* env = std::getenv(kNvmlLibraryEnv);
    name = (env && *env) ? env : kDefaultNvmlLibrary;
  }
  void* handle = dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return make_error(fmt::format("no NVIDIA driver: cannot load {} ({})", name,
                                  why ? why : "unknown dlopen error"));
  }
  auto backend = std::make_unique<NvmlBackend>(handle, name);
  Status status = backend->load_and_init();
  if (!status) return status.error();
  return std::unique_ptr<GpuBackend>(std::move(backend));
}

}  // namespace oomdoc
