// --gpu NAME / --memory SIZE, shared by `fit` and `serve`: exactly one of them names the card.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "analyses/fit_search.h"
#include "core/result.h"
#include "model/gpu.h"

namespace oomdoc::cli {

struct GpuFlags {
  std::string gpu;
  std::string memory;
};

// The card: a catalog entry for --gpu, or only a capacity for --memory.
struct GpuChoice {
  std::optional<GpuSpec> gpu;
  uint64_t memory_bytes = 0;  // set for --memory
  std::string note;           // a short --gpu name that also names cards of other sizes
};

void add_gpu_flags(CLI::App* cmd, GpuFlags& flags);
// A GPU capacity typed by a user (--memory, snapshot's --gpu-memory): a size with its unit, "80GiB"
// (binary, as CUDA and nvidia-smi count) or "80GB" (decimal, as units.h reads decimal labels). A bare
// number is refused (bytes? GB? GiB?), and so is 0. Errors name the flag.
Result<uint64_t> parse_gpu_capacity(std::string_view flag, const std::string& text);
// Any other size typed by a user (serve's --weights, --activation...): the same rule, a unit is
// needed ("14.99" pasted from vLLM's "Model loading took 14.99 GiB" would be read as 15 bytes), but
// 0 is allowed (nothing of that component). `example` is shown in the error, e.g. "14.96GiB".
Result<uint64_t> parse_size_flag(std::string_view flag, const std::string& text, std::string_view example);
// Errors are one line naming the flag: "--memory: 'lots' is not a size (e.g. 24GiB)".
Result<GpuChoice> resolve_gpu_flags(const GpuFlags& flags);
// The chosen card into fit's options (set_fit_gpu / set_fit_memory).
void set_fit_card(FitOptions& options, const GpuChoice& card);

}  // namespace oomdoc::cli
