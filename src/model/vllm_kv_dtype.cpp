#include "model/vllm_kv_dtype.h"

#include <fmt/format.h>

#include <algorithm>

namespace oomdoc {

const std::vector<VllmKvCacheDtype>& vllm_kv_cache_dtypes() {
  static const std::vector<VllmKvCacheDtype> kDtypes = {
      {"auto", KvPacking::kModelDtype, 0, false},
      {"float16", KvPacking::kElements, 2, false},
      {"bfloat16", KvPacking::kElements, 2, false},
      {"fp8", KvPacking::kElements, 1, false},
      {"fp8_e4m3", KvPacking::kElements, 1, false},
      {"fp8_e5m2", KvPacking::kElements, 1, false},
      {"fp8_inc", KvPacking::kElements, 1, false},
      // uint8 elements on ordinary attention; MLA models get FlashMLA's sparse layout.
      {"fp8_ds_mla", KvPacking::kSparseMla, 1, false},
      {"nvfp4_ds_mla", KvPacking::kUnsized, 1, false},
      {"turboquant_k8v4", KvPacking::kUnsized, 1, false},
      {"turboquant_4bit_nc", KvPacking::kUnsized, 1, false},
      {"turboquant_k3v4_nc", KvPacking::kUnsized, 1, false},
      {"turboquant_3bit_nc", KvPacking::kUnsized, 1, false},
      {"int4_per_token_head", KvPacking::kInt4, 1, true},
      {"int8_per_token_head", KvPacking::kElements, 1, true},
      {"fp8_per_token_head", KvPacking::kElements, 1, true},
      {"nvfp4", KvPacking::kNvfp4, 1, false},
      {"nvfp4_4over6", KvPacking::kNvfp4, 1, false},
      {"int8", KvPacking::kElements, 1, false},
  };
  return kDtypes;
}

Result<VllmKvCacheDtype> find_vllm_kv_cache_dtype(std::string_view name) {
  const auto& all = vllm_kv_cache_dtypes();
  auto it = std::find_if(all.begin(), all.end(), [&](const VllmKvCacheDtype& d) { return d.name == name; });
  if (it != all.end()) return *it;
  std::string names;
  for (const auto& d : all) names += (names.empty() ? "" : ", ") + std::string(d.name);
  return Error{fmt::format("--kv-cache-dtype: '{}' is not one of vLLM's KV cache dtypes ({})", name, names)};
}

}  // namespace oomdoc
