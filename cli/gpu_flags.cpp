#include "gpu_flags.h"

#include <fmt/format.h>

#include "core/units.h"
#include "readers/gpu_catalog.h"

namespace oomdoc::cli {

void add_gpu_flags(CLI::App* cmd, GpuFlags& flags) {
  cmd->add_option("--gpu", flags.gpu, "GPU from the catalog, fuzzy: 4090, h100-80, 'a100 40gb' (oomdoc gpus --catalog)");
  cmd->add_option("--memory", flags.memory, "GPU memory instead of a name, as CUDA reports it: 24GiB, 23.58GiB");
}

Result<uint64_t> parse_size_flag(std::string_view flag, const std::string& text, std::string_view example) {
  // A bare number is ambiguous (bytes? GB? GiB?): a size needs its unit; 0 is 0 in any unit.
  const bool bare = text.find_first_not_of("0123456789.eE+- ") == std::string::npos;
  if (const auto number = parse_user_size(text); bare && number && *number != 0) {
    return Error{fmt::format("{}: '{}' has no unit: write {}GiB (as CUDA and nvidia-smi count) or {}GB (decimal)",
                             flag, text, text, text)};
  }
  auto bytes = parse_user_size(text);
  if (!bytes) return Error{fmt::format("{}: '{}' is not a size (e.g. {})", flag, text, example)};
  return *bytes;
}

Result<uint64_t> parse_gpu_capacity(std::string_view flag, const std::string& text) {
  auto bytes = parse_size_flag(flag, text, "24GiB");
  if (!bytes) return bytes;
  if (*bytes == 0) return Error{fmt::format("{}: '{}' is not a size (e.g. 24GiB)", flag, text)};
  return *bytes;
}

Result<GpuChoice> resolve_gpu_flags(const GpuFlags& flags) {
  if (!flags.gpu.empty() && !flags.memory.empty()) return Error{"give --gpu or --memory, not both"};
  GpuChoice choice;
  if (!flags.gpu.empty()) {
    auto gpu = find_gpu(flags.gpu);
    if (!gpu) return Error{"--gpu: " + gpu.error().message};
    choice.gpu = std::move(gpu.value());
    auto others = other_sizes_named(flags.gpu, *choice.gpu);
    if (!others.empty()) {
      choice.note = fmt::format("--gpu '{}' is read as {}; it also names {} (give the size, e.g. --gpu '{}')",
                                flags.gpu, choice.gpu->name, card_names(others), others.front()->name);
    }
    return choice;
  }
  if (!flags.memory.empty()) {
    auto bytes = parse_gpu_capacity("--memory", flags.memory);
    if (!bytes) return bytes.error();
    if (*bytes < kGiB) {
      return Error{fmt::format("--memory: {} is smaller than any GPU this sizes (1 GiB at least)", format_bytes(*bytes))};
    }
    choice.memory_bytes = *bytes;
    return choice;
  }
  return Error{"which GPU? pass --gpu NAME (e.g. --gpu 4090, --gpu h100) or --memory SIZE"};
}

void set_fit_card(FitOptions& options, const GpuChoice& card) {
  if (card.gpu) set_fit_gpu(options, *card.gpu);
  else set_fit_memory(options, card.memory_bytes);
}

}  // namespace oomdoc::cli
