// vLLM's --kv-cache-dtype choices and how each one stores the cache: one table for the
// command-line check (readers/vllm_args.cpp) and for the page sizes (analyses/vllm_kv_cache.cpp).
// The names are vLLM's CacheDType over its versions (vllm/config/cache.py; "int8" from an older
// release); the storage is vllm/utils/torch_utils.py (STR_DTYPE_TO_TORCH_DTYPE: the cache tensor's
// element type; nvfp4_kv_cache_full_dim) and vllm/v1/kv_cache_interface.py (AttentionSpec
// page_size_bytes / real_page_size_bytes, MLAAttentionSpec).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace oomdoc {

enum class KvPacking {
  kModelDtype,       // "auto": the model's dtype
  kElements,         // one element of element_bytes per value
  kNvfp4,            // per head: head_size/2 bytes of fp4 values + head_size/16 fp8 scales
  kInt4,             // per head: head_size/2 bytes (two int4 values per byte)
  kSparseMla,        // fp8_ds_mla on an MLA model: a fixed 656 B per token and layer (FlashMLA sparse)
  kUnsized,          // accepted by vLLM; its page size is computed by its backend, not sized here
};

struct VllmKvCacheDtype {
  std::string_view name;
  KvPacking packing = KvPacking::kElements;
  uint64_t element_bytes = 1;          // of the cache tensor (kModelDtype: unused)
  bool per_token_head_scales = false;  // an fp32 scale per token, KV head and K/V, in the same pages
};

// Every name vLLM has accepted for --kv-cache-dtype, in the order vLLM lists them.
const std::vector<VllmKvCacheDtype>& vllm_kv_cache_dtypes();
// The entry for `name`, or the error naming every choice: "--kv-cache-dtype: 'half' is not one of
// vLLM's KV cache dtypes (auto, float16, ...)".
Result<VllmKvCacheDtype> find_vllm_kv_cache_dtype(std::string_view name);

// FlashMLA's sparse fp8 layout (vllm/v1/kv_cache_interface.py MLAAttentionSpec, fp8_ds_mla: "return
// self.block_size * 656"): 512 fp8 latent values, 4 fp32 scales and 64 bf16 rope values per token.
inline constexpr uint64_t kVllmSparseMlaTokenBytes = 656;

}  // namespace oomdoc
