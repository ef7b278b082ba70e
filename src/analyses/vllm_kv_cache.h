// vLLM's paged KV cache, per GPU: bytes per token, pages of block_size tokens, how many blocks
// the available memory holds, and what vLLM logs from them ("GPU KV cache size: N tokens",
// "Maximum concurrency for L tokens per request: X x"). Mirrors vllm/v1/kv_cache_interface.py
// (page sizes) and vllm/v1/core/kv_cache_utils.py (block counts, concurrency, max length).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/model_spec.h"
#include "model/vllm_kv_dtype.h"

namespace oomdoc {

inline constexpr uint64_t kVllmDefaultBlockSize = 16;  // vllm/config/cache.py DEFAULT_BLOCK_SIZE

// The decoder layers one pipeline stage holds (vLLM's get_pp_indices: the remainder goes to the
// stages just before the last).
struct PipelineStage {
  uint64_t first_layer = 0;
  uint64_t layers = 0;
  uint64_t sliding_layers = 0;   // of which sliding-window
  bool first = false;            // holds the input embedding
  bool last = false;             // holds the output head
};
// `partition`: the layers of each stage as VLLM_PP_LAYER_PARTITION gives them (already checked:
// one count per stage, summing to the model's layers); empty: vLLM's even split.
std::vector<PipelineStage> pipeline_stages(const ModelSpec& model, uint64_t pipeline_parallel_size,
                                           const std::vector<uint64_t>& partition = {});

// A --kv-cache-dtype resolved against the model's dtype: how one token of one KV head is stored.
struct KvCacheStorage {
  std::string dtype = "auto";
  KvPacking packing = KvPacking::kElements;
  uint64_t element_bytes = 2;            // of the cache tensor
  bool per_token_head_scales = false;    // plus an fp32 scale per token, head and K/V
};
// Fails (exit 2) for a dtype vLLM accepts but whose pages oomdoc does not size (TurboQuant,
// nvfp4_ds_mla), and for a name vLLM does not know.
Result<KvCacheStorage> kv_cache_storage(const std::string& kv_cache_dtype, uint64_t model_dtype_bytes);
// Plain elements of `bytes` each (a 16-bit cache: 2).
KvCacheStorage plain_kv_cache_storage(uint64_t bytes);

struct KvLayout {
  uint64_t block_size = kVllmDefaultBlockSize;
  uint64_t dtype_bytes = 2;            // bytes of one element of the cache tensor
  bool latent = false;                 // MLA: one latent per token, replicated on every TP rank
  uint64_t kv_heads_per_gpu = 0;       // max(1, kv_heads / tp); 1 for MLA
  uint64_t head_size = 0;              // head_dim; kv_lora_rank + qk_rope_head_dim for MLA
  uint64_t bytes_per_token_per_layer = 0;
  uint64_t page_bytes = 0;             // one block of one layer
  uint64_t full_layers = 0;            // on this GPU
  uint64_t sliding_layers = 0;
  uint64_t bytes_per_token = 0;        // all layers on this GPU (a speculative drafter's included)
  std::string formula;                 // "2 x 32 layers x 8 KV heads x 128 x 2 B"
  // A speculative drafter's layers whose page differs from page_bytes (another head size):
  // one block of all of them, added to every block (analyses/vllm_speculative.h, add_draft_kv).
  uint64_t extra_page_bytes = 0;
  uint64_t draft_layers = 0;           // of full_layers + the extra pages: the drafter's
  // The whole model's layers of each kind (its drafter's with them), over which vLLM cuts the
  // hybrid manager's groups before projecting them onto each pipeline stage (v0.11+); 0 and 0:
  // the groups are cut from this stage's own layers.
  uint64_t model_full_layers = 0;
  uint64_t model_sliding_layers = 0;
};

// How V1's hybrid KV cache manager cuts a model's layers into groups, as the vLLM in use does it
// (kv_cache_utils.py, _get_kv_cache_groups_uniform_page_size).
struct KvGrouping {
  bool hybrid = false;   // sliding-window layers in groups of their own; otherwise every layer is
                         // sized as full attention (V0, V1 before v0.10)
  // Groups hold as many layers as the smaller kind has, or as the larger kind has when that is
  // under this many hundredths of the smaller (vllm-project/vllm#29303: 125; #36684: 150); 0:
  // always the smaller's count.
  uint32_t larger_kind_ratio_percent = 150;
};

// layers: those of one pipeline stage. tp: tensor-parallel size.
KvLayout kv_layout(const ModelSpec& model, const PipelineStage& stage, uint64_t tp,
                   const KvCacheStorage& storage, uint64_t block_size);
// V0's CacheEngine on CUDA pads each MLA latent entry to a multiple of 256 bytes of the model's
// dtype (align_to_256bytes, "Primarily targets MLA as this typically only ends up having entries be
// 128 byte aligned"; VLLM_CUDA_MEM_ALIGN_KV_CACHE, on by default): 576 elements become 640.
void align_latent_entries_to_256_bytes(KvLayout& layout, uint64_t model_dtype_bytes);
// The same for a plain cache of dtype_bytes per element.
KvLayout kv_layout(const ModelSpec& model, const PipelineStage& stage, uint64_t tp,
                   uint64_t dtype_bytes, uint64_t block_size);

struct KvCapacity {
  uint64_t num_blocks = 0;
  uint64_t tokens = 0;                 // as "GPU KV cache size: N tokens" prints it
  // The blocks over the groups, in tokens (vLLM's figure before v0.20; what one group's blocks hold).
  uint64_t pool_tokens = 0;
  uint64_t blocks_per_request = 0;     // for one request of max_model_len
  uint64_t bytes_per_request = 0;
  double max_concurrency = 0;          // as "Maximum concurrency for L tokens per request" prints it
  uint64_t num_groups = 1;             // KV cache groups (hybrid models)
  uint64_t layers_per_group = 0;       // page slots per group and block: the fullest group's layers
  // What one pool token costs: a page slot of every group (num_groups x layers_per_group layer
  // pages, and a drafter's), more than the layers' own bytes per token when groups are padded.
  uint64_t pool_bytes_per_token = 0;
  uint64_t bytes = 0;                  // the KV tensors vLLM allocates: num_blocks x one block of every layer
};

// grouping.hybrid: V1's hybrid manager (sliding layers in their own groups, requests charged only
// for the window); otherwise every layer is sized as full attention (V0, older V1).
KvCapacity kv_capacity(const KvLayout& layout, int64_t available_bytes, uint64_t max_model_len,
                       uint64_t max_num_batched_tokens, std::optional<uint64_t> sliding_window,
                       const KvGrouping& grouping);

// The same from a block count given outright (--num-gpu-blocks-override): vLLM allocates that many
// blocks whatever the memory (vllm/v1/core/kv_cache_utils.py, get_num_blocks: "Overriding
// num_gpu_blocks=%d with num_gpu_blocks_override=%d"), so tokens, concurrency and bytes follow it.
KvCapacity kv_capacity_for_blocks(const KvLayout& layout, uint64_t num_blocks, uint64_t max_model_len,
                                  uint64_t max_num_batched_tokens, std::optional<uint64_t> sliding_window,
                                  const KvGrouping& grouping);

// The longest request that fits in the available KV memory (vLLM's "estimated maximum model
// length"), 0 when not even one block fits.
uint64_t max_model_len_that_fits(const KvLayout& layout, int64_t available_bytes,
                                 uint64_t max_num_batched_tokens,
                                 std::optional<uint64_t> sliding_window, const KvGrouping& grouping,
                                 uint64_t upper_bound);


}  // namespace oomdoc
