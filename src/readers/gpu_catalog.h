// The bundled GPU catalog (data/gpus.json) and fuzzy lookup by name ("4090", "h100-80", "a100 40gb").
// Implemented by the serve/catalog work (issue 4/5).
#pragma once

#include <string_view>
#include <vector>

#include "core/result.h"
#include "model/gpu.h"

namespace oomdoc {

// Usable share of a GPU's memory unless the user says otherwise (fit's --budget). Chosen equal to
// vLLM's current default budget (issue 4: also a sound training budget); vLLM's own default, which
// depends on its version, is kVllmDefaultGpuMemoryUtilization in analyses/vllm_version.h.
inline constexpr double kDefaultMemoryBudget = 0.92;

const std::vector<GpuSpec>& gpu_catalog();

// The catalog's largest memory (Apple's 512 GB unified tier): one allocation above it is no
// card's, a size computed wrong (a shape bug), not a card that is too small.
const GpuSpec& largest_catalog_gpu();

// Finds a GPU by a fuzzy name ("4090", "h100-80", "a100 40gb"). Errors: a name that fits several
// cards equally, or a bare number that is no card's alias ("16"), lists the candidates; an unknown
// name suggests only catalog entries that are close to it.
Result<GpuSpec> find_gpu(std::string_view name);

// Catalog cards of another memory size that also hold every word of `name`: what a short name
// left open ("a100", read as the 80GB SXM4 card, also names the 40GB ones).
std::vector<const GpuSpec*> other_sizes_named(std::string_view name, const GpuSpec& chosen);
// "A100 SXM4 40GB, A100 PCIe 40GB": the first `at_most` names, for the notes that list them.
std::string card_names(const std::vector<const GpuSpec*>& cards, size_t at_most = 4);

}  // namespace oomdoc
