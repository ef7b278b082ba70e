// --gpu NAME / --memory SIZE, shared by `fit` and `serve`: exactly one of them names the card.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

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
// Errors are one line naming the flag: "--memory: 'lots' is not a size (e.g. 24GiB)".
Result<GpuChoice> resolve_gpu_flags(const GpuFlags& flags);
// The chosen card into fit's options (set_fit_gpu / set_fit_memory).
void set_fit_card(FitOptions& options, const GpuChoice& card);

}  // namespace oomdoc::cli
