// Bytes per weight of the quantized weight formats: one place for `estimate`
// (analyses/estimator.cpp, the job's weight_quantization) and `serve` (analyses/vllm_profile.cpp,
// vLLM's --quantization and the checkpoint's quant_method).
#pragma once

#include <cstdint>

namespace oomdoc {

// GPTQ / AWQ / compressed-tensors b-bit in groups: packed integers, an fp16 scale and a packed
// b-bit zero point per group (auto-gptq / autoawq QuantLinear layouts): 0.52 B for 4-bit/128.
// Group 0 is per output channel (GPTQ's group_size -1, compressed-tensors' "channel" strategy):
// one scale and zero per row of thousands of weights, negligible.
inline constexpr uint64_t kPerChannelGroup = 0;
constexpr double grouped_int_bytes_per_weight(uint64_t bits, uint64_t group) {
  const double packed = static_cast<double>(bits) / 8;
  if (group == kPerChannelGroup) return packed;
  return packed + (16.0 + static_cast<double>(bits)) / static_cast<double>(group) / 8;
}

// bitsandbytes 4-bit (NF4/FP4): blocksize 64, one fp32 absmax per block; double quantization stores
// the absmax in 8 bits with one fp32 constant per 256 blocks (QLoRA paper, Dettmers et al. 2023, 3).
inline constexpr double kNf4BytesPerWeight = 0.5 + 4.0 / 64;
inline constexpr double kNf4DoubleQuantBytesPerWeight = 0.5 + 1.0 / 64 + 4.0 / (64 * 256);

// NVFP4 (ModelOpt): 4-bit e2m1 values and an fp8 scale per 16 (the per-tensor scale is noise).
inline constexpr double kNvfp4BytesPerWeight = 0.5 + 1.0 / 16;

// MXFP4 (OCP microscaling): 4-bit e2m1 values, two per byte, and one e8m0 byte per 32 values.
inline constexpr double kMxfp4BytesPerWeight = 0.5 + 1.0 / 32;

}  // namespace oomdoc
