#include "analyses/vllm_kv_cache.h"

#include <fmt/format.h>

#include <algorithm>

namespace oomdoc {
namespace {

uint64_t cdiv(uint64_t a, uint64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

bool layer_is_sliding(const ModelSpec& model, uint64_t layer) {
  if (!model.sliding_window) return false;
  if (model.layer_is_sliding.empty()) return true;  // one window for every layer (Mistral v0.1)
  return layer < model.layer_is_sliding.size() && model.layer_is_sliding[layer];
}

// KV cache groups of the hybrid manager (kv_cache_utils.py, _get_kv_cache_groups_uniform_page_size):
// layers of each kind are cut into groups of the size of the smaller kind, or of the larger kind
// when it has not many more (KvGrouping: "gpt-oss-20b + eagle, with 12 sw + 13 full. We pad it to
// (13 sw, 13 full)"). Layer i of a kind goes to group i mod (its groups) ("layers[i::num_groups]").
// Since v0.11 (vllm-project/vllm#23974) the groups are cut over the whole model and projected onto
// each pipeline stage (_project_kv_cache_groups_to_worker): a stage's contiguous run of n layers of
// a kind with g groups puts at most ceil(n / g) in one group, and a block costs one page per layer
// of the fullest group (get_kv_cache_config_from_groups: the group size is the largest group's).
struct Groups {
  uint64_t layers_per_block = 0;   // the most layers one group holds on this stage
  uint64_t full_groups = 0;
  uint64_t sliding_groups = 0;
};

Groups hybrid_groups_of(const KvLayout& layout, const KvGrouping& grouping) {
  Groups g;
  const uint64_t full = layout.full_layers;
  const uint64_t sliding = layout.sliding_layers;
  const bool whole_model = layout.model_full_layers + layout.model_sliding_layers > 0;
  const uint64_t model_full = whole_model ? layout.model_full_layers : full;
  const uint64_t model_sliding = whole_model ? layout.model_sliding_layers : sliding;
  if (!grouping.hybrid || model_sliding == 0 || model_full == 0) {
    // One group of every layer: full attention, or (a model whose every layer slides) a window.
    g.layers_per_block = full + sliding;
    if (grouping.hybrid && model_full == 0) g.sliding_groups = 1;
    else g.full_groups = 1;
    return g;
  }
  uint64_t group_size = std::min(model_full, model_sliding);
  const uint64_t larger = std::max(model_full, model_sliding);
  if (larger * 100 < group_size * grouping.larger_kind_ratio_percent) group_size = larger;
  g.full_groups = cdiv(model_full, group_size);
  g.sliding_groups = cdiv(model_sliding, group_size);
  g.layers_per_block = std::max(cdiv(full, g.full_groups), cdiv(sliding, g.sliding_groups));
  return g;
}

// The groups of a model with a window or none (no window: every layer full attention).
Groups groups_for(const KvLayout& layout, std::optional<uint64_t> sliding_window, KvGrouping grouping) {
  grouping.hybrid = grouping.hybrid && sliding_window.has_value();
  return hybrid_groups_of(layout, grouping);
}

// One block of every group on this GPU: a page per layer of the fullest group, and the drafter's
// pages of another size.
uint64_t block_bytes(const KvLayout& layout, const Groups& groups) {
  return layout.page_bytes * groups.layers_per_block + layout.extra_page_bytes;
}

uint64_t sliding_blocks_per_request(uint64_t window, uint64_t max_model_len, uint64_t batched,
                                    uint64_t block_size) {
  // SlidingWindowSpec.max_memory_usage_bytes: the window plus one prefill chunk, plus a block.
  uint64_t tokens = std::min(window - 1 + batched, max_model_len);
  return cdiv(tokens, block_size) + 1;
}

}  // namespace

std::vector<PipelineStage> pipeline_stages(const ModelSpec& model, uint64_t pp, const std::vector<uint64_t>& partition) {
  pp = std::max<uint64_t>(pp, 1);
  std::vector<uint64_t> sizes(pp, model.num_layers / pp);
  uint64_t remaining = model.num_layers % pp;
  for (uint64_t i = 2; i < remaining + 2 && i <= pp; ++i) sizes[pp - i] += 1;
  if (partition.size() == pp) sizes = partition;
  std::vector<PipelineStage> stages;
  uint64_t next = 0;
  for (uint64_t i = 0; i < pp; ++i) {
    PipelineStage stage;
    stage.first_layer = next;
    stage.layers = sizes[i];
    for (uint64_t layer = next; layer < next + sizes[i]; ++layer) {
      if (layer_is_sliding(model, layer)) ++stage.sliding_layers;
    }
    stage.first = i == 0;
    stage.last = i + 1 == pp;
    next += sizes[i];
    stages.push_back(stage);
  }
  return stages;
}

Result<KvCacheStorage> kv_cache_storage(const std::string& kv_cache_dtype, uint64_t model_dtype_bytes) {
  auto dtype = find_vllm_kv_cache_dtype(kv_cache_dtype);
  if (!dtype) return dtype.error();
  if (dtype->packing == KvPacking::kUnsized) {
    return Error{fmt::format("--kv-cache-dtype {}: vLLM accepts it, but its pages are laid out by its own attention "
                             "backend and oomdoc does not size them; size this launch with fp8 or nvfp4 instead",
                             kv_cache_dtype)};
  }
  KvCacheStorage storage;
  storage.dtype = kv_cache_dtype;
  storage.packing = dtype->packing == KvPacking::kModelDtype ? KvPacking::kElements : dtype->packing;
  storage.element_bytes = dtype->packing == KvPacking::kModelDtype ? model_dtype_bytes : dtype->element_bytes;
  storage.per_token_head_scales = dtype->per_token_head_scales;
  return storage;
}

KvCacheStorage plain_kv_cache_storage(uint64_t bytes) {
  KvCacheStorage storage;
  storage.element_bytes = bytes;
  return storage;
}

KvLayout kv_layout(const ModelSpec& model, const PipelineStage& stage, uint64_t tp,
                   const KvCacheStorage& storage, uint64_t block_size) {
  KvLayout layout;
  layout.block_size = block_size;
  layout.dtype_bytes = storage.element_bytes;
  layout.full_layers = stage.layers - stage.sliding_layers;
  layout.sliding_layers = stage.sliding_layers;
  const uint64_t layers = stage.layers;
  const uint64_t e = storage.element_bytes;
  // AttentionSpec.page_size_bytes: per-token-head modes carve one fp32 scale per token, head and
  // K/V out of the same pages ("2 * block_size * num_kv_heads * get_dtype_size(torch.float32)").
  const uint64_t head_scale = storage.per_token_head_scales ? 4 : 0;
  if (model.attention == AttentionKind::kMultiLatent) {
    // MLAAttentionSpec: no factor 2 (one latent serves as K and V), one "head", every rank keeps
    // the whole latent; its pages pack no 4-bit format (uint8 elements), and fp8_ds_mla is
    // FlashMLA's sparse layout of a fixed size.
    layout.latent = true;
    layout.kv_heads_per_gpu = 1;
    layout.head_size = model.kv_lora_rank + model.qk_rope_head_dim;
    if (storage.packing == KvPacking::kSparseMla) {
      layout.bytes_per_token_per_layer = kVllmSparseMlaTokenBytes;
      layout.formula = fmt::format("{} layers x {} B (fp8_ds_mla: FlashMLA's sparse layout per token)", layers,
                                   kVllmSparseMlaTokenBytes);
    } else {
      layout.bytes_per_token_per_layer = layout.head_size * e + 2 * head_scale;
      layout.formula = fmt::format("{} layers x 1 latent x ({} + {}) x {} B{}", layers, model.kv_lora_rank,
                                   model.qk_rope_head_dim, e, head_scale ? " + 2 x 4 B scales" : "");
    }
  } else {
    const uint64_t kv_heads = model.kv_heads_or_default();
    const uint64_t head_dim = model.head_dim_or_default();
    // ModelConfig.get_num_kv_heads: heads are split across TP ranks, replicated when TP > heads.
    layout.kv_heads_per_gpu = std::max<uint64_t>(1, kv_heads / std::max<uint64_t>(tp, 1));
    layout.head_size = head_dim;
    const uint64_t heads = layout.kv_heads_per_gpu;
    const std::string head_text = fmt::format("2 x {} layers x {} KV head{}", layers, heads, heads == 1 ? "" : "s");
    uint64_t head_bytes = 0;   // one token's K (or V) of one head
    switch (storage.packing) {
      case KvPacking::kNvfp4:
        // nvfp4_kv_cache_full_dim: head_size // 2 bytes of fp4 values + head_size // 16 fp8 scales.
        head_bytes = (head_dim / 2 + head_dim / 16) * e;
        layout.formula = fmt::format("{} x ({}/2 + {}/16) B ({}: fp4 values + an fp8 scale per 16)", head_text,
                                     head_dim, head_dim, storage.dtype);
        break;
      case KvPacking::kInt4:
        head_bytes = head_dim / 2 * e + head_scale;
        layout.formula = fmt::format("{} x ({}/2 B + a 4 B scale) ({}: two values per byte)", head_text, head_dim,
                                     storage.dtype);
        break;
      default:
        head_bytes = head_dim * e + head_scale;
        layout.formula = head_scale
            ? fmt::format("{} x ({} x {} B + a 4 B scale)", head_text, head_dim, e)
            : fmt::format("{} x {} x {} B", head_text, head_dim, e);
    }
    layout.bytes_per_token_per_layer = 2 * heads * head_bytes;
  }
  layout.page_bytes = layout.bytes_per_token_per_layer * block_size;
  layout.bytes_per_token = layout.bytes_per_token_per_layer * layers;
  return layout;
}

void align_latent_entries_to_256_bytes(KvLayout& layout, uint64_t model_dtype_bytes) {
  if (!layout.latent || layout.head_size == 0 || layout.dtype_bytes == 0) return;
  const uint64_t per_256 = 256 / std::max<uint64_t>(model_dtype_bytes, 1);
  const uint64_t padded = (layout.head_size + per_256 - 1) / per_256 * per_256;
  if (padded == layout.head_size) return;
  const uint64_t layers = layout.bytes_per_token / std::max<uint64_t>(layout.bytes_per_token_per_layer, 1);
  layout.bytes_per_token_per_layer = padded * layout.dtype_bytes;
  layout.page_bytes = layout.bytes_per_token_per_layer * layout.block_size;
  layout.bytes_per_token = layout.bytes_per_token_per_layer * layers;
  layout.formula += fmt::format(", each entry padded from {} to {} elements (V0's 256-byte alignment)", layout.head_size,
                                padded);
}

KvLayout kv_layout(const ModelSpec& model, const PipelineStage& stage, uint64_t tp, uint64_t dtype_bytes,
                   uint64_t block_size) {
  return kv_layout(model, stage, tp, plain_kv_cache_storage(dtype_bytes), block_size);
}

KvCapacity kv_capacity_for_blocks(const KvLayout& layout, uint64_t num_blocks, uint64_t max_model_len,
                                  uint64_t max_num_batched_tokens, std::optional<uint64_t> sliding_window,
                                  const KvGrouping& grouping) {
  KvCapacity capacity;
  const Groups groups = groups_for(layout, sliding_window, grouping);
  capacity.num_groups = groups.full_groups + groups.sliding_groups;
  const uint64_t bytes_per_block_all_groups = block_bytes(layout, groups);
  capacity.layers_per_group = groups.layers_per_block;
  capacity.pool_bytes_per_token =
      std::max<uint64_t>(capacity.num_groups, 1) * bytes_per_block_all_groups / std::max<uint64_t>(layout.block_size, 1);
  capacity.num_blocks = num_blocks;
  capacity.bytes = num_blocks * bytes_per_block_all_groups;
  capacity.tokens = capacity.num_blocks / std::max<uint64_t>(capacity.num_groups, 1) * layout.block_size;
  capacity.pool_tokens = capacity.tokens;

  uint64_t full_blocks = cdiv(max_model_len, layout.block_size);
  uint64_t per_request = groups.full_groups * full_blocks;
  if (groups.sliding_groups) {
    per_request += groups.sliding_groups *
                   sliding_blocks_per_request(*sliding_window, max_model_len, max_num_batched_tokens,
                                              layout.block_size);
  }
  capacity.blocks_per_request = per_request;
  capacity.bytes_per_request = per_request * bytes_per_block_all_groups;
  capacity.max_concurrency =
      per_request ? static_cast<double>(capacity.num_blocks) / static_cast<double>(per_request) : 0;
  return capacity;
}

KvCapacity kv_capacity(const KvLayout& layout, int64_t available_bytes, uint64_t max_model_len,
                       uint64_t max_num_batched_tokens, std::optional<uint64_t> sliding_window,
                       const KvGrouping& grouping) {
  const uint64_t bytes_per_block_all_groups = block_bytes(layout, groups_for(layout, sliding_window, grouping));
  uint64_t num_blocks = 0;
  if (available_bytes > 0 && bytes_per_block_all_groups > 0) {
    // kv_cache_utils: num_blocks = available_memory // page_size // num_layers (per group).
    num_blocks = static_cast<uint64_t>(available_bytes) / bytes_per_block_all_groups;
  }
  return kv_capacity_for_blocks(layout, num_blocks, max_model_len, max_num_batched_tokens, sliding_window, grouping);
}

uint64_t max_model_len_that_fits(const KvLayout& layout, int64_t available_bytes,
                                 uint64_t max_num_batched_tokens,
                                 std::optional<uint64_t> sliding_window, const KvGrouping& grouping,
                                 uint64_t upper_bound) {
  // Binary search like vLLM's estimate_max_model_len: the largest length whose one request fits.
  auto fits = [&](uint64_t len) {
    KvCapacity c = kv_capacity(layout, available_bytes, len, max_num_batched_tokens, sliding_window, grouping);
    return c.num_blocks > 0 && c.blocks_per_request <= c.num_blocks;
  };
  if (upper_bound == 0 || !fits(1)) return 0;
  uint64_t lo = 1, hi = upper_bound;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

}  // namespace oomdoc
