// One GPU model from the catalog (data/gpus.json): memory as nvidia-smi (or rocm-smi) reports it,
// not the marketing figure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomdoc {

struct GpuSpec {
  std::string name;                  // canonical, e.g. "H100 SXM 80GB"
  std::vector<std::string> aliases;  // "h100", "h100-80", "h100 sxm"
  std::string vendor;                // nvidia, amd, apple
  std::string architecture;          // Turing, Ampere, Ada, Hopper, Blackwell, CDNA3, Apple M
  uint64_t total_bytes = 0;          // as nvidia-smi reports it
  bool bf16 = false;
  bool fp8 = false;
  bool fp4 = false;
  bool nvlink = false;
  std::string interconnect;          // notes: "NVLink 900 GB/s", "PCIe Gen4 only"
  // The most GPUs one tensor-parallel group spans: the NVLink domain (an HGX board's 8, a GB200
  // NVL72's 72), else one server's 8 PCIe slots. Beyond it, more GPUs are pipeline stages on more
  // nodes (vLLM's distributed serving guide: TP = GPUs per node, PP = nodes). fit and serve both
  // read it from here; data/gpus.json's tp_domain_gpus, 8 where absent.
  uint64_t tensor_parallel_domain = 8;
  std::string source;                // where total_bytes comes from
  // The smaller total that CUDA itself reports (torch.cuda.mem_get_info, vLLM's total_gpu_memory),
  // which vLLM multiplies by gpu_memory_utilization. Absent when no reliable figure is known.
  std::optional<uint64_t> cuda_total_bytes;
  std::string cuda_total_source;
};

// The lowest CUDA compute capability (major x 10 + minor) of an NVIDIA architecture as the catalog
// names it: Pascal 6.0, Volta 7.0, Turing 7.5, Ampere 8.0 (8.6 on GA10x), Ada 8.9, Hopper 9.0,
// Blackwell 10.0 (12.0 on GB20x). Frameworks gate kernels on it; 0 for other vendors or unknown names.
inline int min_compute_capability(std::string_view architecture) {
  if (architecture == "Pascal") return 60;
  if (architecture == "Volta") return 70;
  if (architecture == "Turing") return 75;
  if (architecture == "Ampere") return 80;
  if (architecture == "Ada") return 89;
  if (architecture == "Hopper") return 90;
  if (architecture == "Blackwell") return 100;
  return 0;
}

}  // namespace oomdoc
