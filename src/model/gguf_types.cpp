#include "model/gguf_types.h"

#include <algorithm>
#include <array>
#include <map>

namespace oomdoc {
namespace {

constexpr std::array<GgmlTypeSize, 13> kSizes = {{
    {GgmlType::kF32, "f32", 1, 4},
    {GgmlType::kF16, "f16", 1, 2},
    {GgmlType::kBF16, "bf16", 1, 2},
    {GgmlType::kQ4_0, "q4_0", 32, 18},    // fp16 scale + 32 nibbles
    {GgmlType::kQ4_1, "q4_1", 32, 20},    // fp16 scale and min + 32 nibbles
    {GgmlType::kQ5_0, "q5_0", 32, 22},    // fp16 scale + 32 high bits + 32 nibbles
    {GgmlType::kQ5_1, "q5_1", 32, 24},
    {GgmlType::kQ8_0, "q8_0", 32, 34},    // fp16 scale + 32 int8
    {GgmlType::kQ2_K, "q2_K", 256, 84},   // k-quants: super-blocks of 256 weights
    {GgmlType::kQ3_K, "q3_K", 256, 110},
    {GgmlType::kQ4_K, "q4_K", 256, 144},
    {GgmlType::kQ5_K, "q5_K", 256, 176},
    {GgmlType::kQ6_K, "q6_K", 256, 210},
}};

// llama.cpp's use_more_bits (src/llama-quant.cpp): the first and last eighth of the layers and
// every third one in between get the larger type in the _M mixes.
bool use_more_bits(uint64_t layer, uint64_t n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

GgmlType default_type(std::string_view file_type) {
  if (file_type == "f32") return GgmlType::kF32;
  if (file_type == "bf16") return GgmlType::kBF16;
  if (file_type == "q4_0") return GgmlType::kQ4_0;
  if (file_type == "q4_1") return GgmlType::kQ4_1;
  if (file_type == "q5_0") return GgmlType::kQ5_0;
  if (file_type == "q5_1") return GgmlType::kQ5_1;
  if (file_type == "q8_0") return GgmlType::kQ8_0;
  if (file_type == "q2_k") return GgmlType::kQ2_K;
  if (file_type.starts_with("q3_k")) return GgmlType::kQ3_K;
  if (file_type.starts_with("q4_k")) return GgmlType::kQ4_K;
  if (file_type.starts_with("q5_k")) return GgmlType::kQ5_K;
  if (file_type == "q6_k") return GgmlType::kQ6_K;
  return GgmlType::kF16;
}

bool is_quantized(GgmlType t) { return t != GgmlType::kF32 && t != GgmlType::kF16 && t != GgmlType::kBF16; }

}  // namespace

const GgmlTypeSize& ggml_type_size(GgmlType type) {
  return *std::find_if(kSizes.begin(), kSizes.end(), [&](const GgmlTypeSize& s) { return s.type == type; });
}

double ggml_bytes(GgmlType type, double elements) {
  const GgmlTypeSize& s = ggml_type_size(type);
  return elements / static_cast<double>(s.block_elements) * static_cast<double>(s.block_bytes);
}

std::optional<GgmlTypeById> ggml_type_by_id(uint32_t id) {
  // ggml.h / ggml.c type_traits: block size and bytes per block.
  static constexpr GgmlTypeById kById[] = {
      {0, "f32", 1, 4},         {1, "f16", 1, 2},          {2, "q4_0", 32, 18},      {3, "q4_1", 32, 20},
      {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},       {8, "q8_0", 32, 34},      {9, "q8_1", 32, 36},
      {10, "q2_K", 256, 84},    {11, "q3_K", 256, 110},    {12, "q4_K", 256, 144},   {13, "q5_K", 256, 176},
      {14, "q6_K", 256, 210},   {15, "q8_K", 256, 292},    {16, "iq2_xxs", 256, 66}, {17, "iq2_xs", 256, 74},
      {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},    {20, "iq4_nl", 32, 18},   {21, "iq3_s", 256, 110},
      {22, "iq2_s", 256, 82},   {23, "iq4_xs", 256, 136},  {24, "i8", 1, 1},         {25, "i16", 1, 2},
      {26, "i32", 1, 4},        {27, "i64", 1, 8},         {28, "f64", 1, 8},        {29, "iq1_m", 256, 56},
      {30, "bf16", 1, 2},       {34, "tq1_0", 256, 54},    {35, "tq2_0", 256, 66},   {39, "mxfp4", 32, 17},
  };
  for (const auto& t : kById) {
    if (t.id == id) return t;
  }
  return std::nullopt;
}

std::string gguf_file_type_name(uint64_t ftype) {
  // llama.h enum llama_ftype (LLAMA_FTYPE_MOSTLY_*).
  static const std::map<uint64_t, std::string> kNames = {
      {0, "f32"},     {1, "f16"},     {2, "q4_0"},    {3, "q4_1"},    {7, "q8_0"},    {8, "q5_0"},
      {9, "q5_1"},    {10, "q2_k"},   {11, "q3_k_s"}, {12, "q3_k_m"}, {13, "q3_k_l"}, {14, "q4_k_s"},
      {15, "q4_k_m"}, {16, "q5_k_s"}, {17, "q5_k_m"}, {18, "q6_k"},   {19, "iq2_xxs"}, {20, "iq2_xs"},
      {21, "q2_k_s"}, {22, "iq3_xs"}, {23, "iq3_xxs"}, {24, "iq1_s"}, {25, "iq4_nl"}, {26, "iq3_s"},
      {27, "iq3_m"},  {28, "iq2_s"},  {29, "iq2_m"},  {30, "iq4_xs"}, {31, "iq1_m"},  {32, "bf16"},
      {36, "tq1_0"},  {37, "tq2_0"},  {38, "mxfp4_moe"}};
  auto it = kNames.find(ftype);
  return it != kNames.end() ? it->second : "ftype " + std::to_string(ftype);
}

const std::vector<std::string>& gguf_file_types() {
  static const std::vector<std::string> kTypes = {"f32",    "f16",    "bf16",   "q4_0",   "q4_1",   "q5_0",
                                                  "q5_1",   "q8_0",   "q2_k",   "q3_k_s", "q3_k_m", "q3_k_l",
                                                  "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m", "q6_k"};
  return kTypes;
}

bool is_gguf_file_type(std::string_view name) {
  const auto& types = gguf_file_types();
  return std::find(types.begin(), types.end(), name) != types.end();
}

GgmlType gguf_tensor_type(std::string_view ft, std::string_view role, uint64_t layer, uint64_t n_layers,
                          const ModelSpec& model) {
  const GgmlType base = default_type(ft);
  // Unquantized files (convert_hf_to_gguf.py) keep every matrix in their type.
  if (!is_quantized(base)) return base;
  const bool eight_experts = model.num_experts == 8;
  if (role == "output") {
    // Rows not a multiple of 256 cannot take a k-quant: Q8_0 instead.
    if (model.hidden_size % 256 != 0) return GgmlType::kQ8_0;
    return base == GgmlType::kQ8_0 ? GgmlType::kQ8_0 : GgmlType::kQ6_K;
  }
  if (role == "token_embd") return base;
  if (role == "v" || role == "qkv") {
    if (role == "qkv") {
      // Fused attention (Phi, Falcon, GPT-NeoX): llama_tensor_get_type's ATTENTION_QKV rule.
      if (ft == "q3_k_m" || ft == "q3_k_l") return GgmlType::kQ4_K;
      if (ft == "q4_k_m") return GgmlType::kQ5_K;
      if (ft == "q5_k_m") return GgmlType::kQ6_K;
      return base;
    }
    GgmlType t = base;
    const uint64_t gqa = model.num_kv_heads ? model.num_attention_heads / model.num_kv_heads : 1;
    if (ft == "q2_k") t = gqa >= 4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
    else if (ft == "q3_k_m") t = layer < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    else if (ft == "q3_k_l") t = GgmlType::kQ5_K;
    else if ((ft == "q4_k_m" || ft == "q5_k_m") && use_more_bits(layer, n_layers)) t = GgmlType::kQ6_K;
    else if (ft == "q4_k_s" && layer < 4) t = GgmlType::kQ5_K;
    // LLM_TYPE_70B (Llama's 80-layer models): attn_v is 8x smaller than attn_q, bumped.
    if (model.model_type == "llama" && n_layers == 80 && (t == GgmlType::kQ3_K || t == GgmlType::kQ4_K)) {
      t = GgmlType::kQ5_K;
    }
    if (eight_experts) t = GgmlType::kQ8_0;
    return t;
  }
  if (role == "k") return eight_experts ? GgmlType::kQ8_0 : base;
  const bool falcon = model.model_type == "falcon";
  if (role == "down") {
    const bool more = use_more_bits(layer, n_layers);
    if (ft == "q2_k") return GgmlType::kQ3_K;
    if (ft == "q3_k_m") {
      if (layer < n_layers / 16) return GgmlType::kQ5_K;
      return !falcon || more ? GgmlType::kQ4_K : GgmlType::kQ3_K;
    }
    if (ft == "q3_k_l") return falcon ? GgmlType::kQ4_K : GgmlType::kQ5_K;
    if (ft == "q4_k_m") {
      if (falcon) return layer < n_layers / 16 ? GgmlType::kQ6_K : more ? GgmlType::kQ5_K : GgmlType::kQ4_K;
      return more ? GgmlType::kQ6_K : base;
    }
    if (ft == "q5_k_m" && more) return GgmlType::kQ6_K;
    if (ft == "q4_k_s" && !falcon && layer < n_layers / 8) return GgmlType::kQ5_K;
    return base;
  }
  if (role == "o") {
    if (falcon) return ft == "q3_k_l" ? GgmlType::kQ4_K : base;
    if (eight_experts) {
      if (ft == "q2_k" || ft == "q3_k_s" || ft == "q3_k_m" || ft == "q4_k_s" || ft == "q4_k_m") return GgmlType::kQ5_K;
      return base;
    }
    if (ft == "q2_k") return GgmlType::kQ3_K;
    if (ft == "q3_k_m") return GgmlType::kQ4_K;
    if (ft == "q3_k_l") return GgmlType::kQ5_K;
    return base;
  }
  return base;
}

}  // namespace oomdoc
