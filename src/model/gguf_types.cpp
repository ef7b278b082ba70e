#include "model/gguf_types.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>

namespace oomdoc {
namespace {

// ggml.c type_traits: block size and bytes per block, by ggml_type id.
constexpr GgmlTypeSize kById[] = {
    {0, "f32", 1, 4},         {1, "f16", 1, 2},          {2, "q4_0", 32, 18},      {3, "q4_1", 32, 20},
    {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},       {8, "q8_0", 32, 34},      {9, "q8_1", 32, 36},
    {10, "q2_K", 256, 84},    {11, "q3_K", 256, 110},    {12, "q4_K", 256, 144},   {13, "q5_K", 256, 176},
    {14, "q6_K", 256, 210},   {15, "q8_K", 256, 292},    {16, "iq2_xxs", 256, 66}, {17, "iq2_xs", 256, 74},
    {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},    {20, "iq4_nl", 32, 18},   {21, "iq3_s", 256, 110},
    {22, "iq2_s", 256, 82},   {23, "iq4_xs", 256, 136},  {24, "i8", 1, 1},         {25, "i16", 1, 2},
    {26, "i32", 1, 4},        {27, "i64", 1, 8},         {28, "f64", 1, 8},        {29, "iq1_m", 256, 56},
    {30, "bf16", 1, 2},       {34, "tq1_0", 256, 54},    {35, "tq2_0", 256, 66},   {39, "mxfp4", 32, 17},
};

// The file types llama-quantize names (llama.h enum llama_ftype, LLAMA_FTYPE_MOSTLY_*): the name,
// the ftype id a GGUF file records, and the default tensor type the quantize rules start from
// (none for the ones oomdoc only names: their tensor types come from a file).
struct FileType {
  const char* name;
  uint64_t ftype;
  std::optional<GgmlType> base;
};
const std::vector<FileType>& file_type_table() {
  static const std::vector<FileType> kTable = {
      {"f32", 0, GgmlType::kF32},       {"f16", 1, GgmlType::kF16},       {"bf16", 32, GgmlType::kBF16},
      {"q4_0", 2, GgmlType::kQ4_0},     {"q4_1", 3, GgmlType::kQ4_1},     {"q5_0", 8, GgmlType::kQ5_0},
      {"q5_1", 9, GgmlType::kQ5_1},     {"q8_0", 7, GgmlType::kQ8_0},     {"q2_k", 10, GgmlType::kQ2_K},
      {"q3_k_s", 11, GgmlType::kQ3_K},  {"q3_k_m", 12, GgmlType::kQ3_K},  {"q3_k_l", 13, GgmlType::kQ3_K},
      {"q4_k_s", 14, GgmlType::kQ4_K},  {"q4_k_m", 15, GgmlType::kQ4_K},  {"q5_k_s", 16, GgmlType::kQ5_K},
      {"q5_k_m", 17, GgmlType::kQ5_K},  {"q6_k", 18, GgmlType::kQ6_K},
      {"iq2_xxs", 19, std::nullopt},    {"iq2_xs", 20, std::nullopt},     {"q2_k_s", 21, std::nullopt},
      {"iq3_xs", 22, std::nullopt},     {"iq3_xxs", 23, std::nullopt},    {"iq1_s", 24, std::nullopt},
      {"iq4_nl", 25, std::nullopt},     {"iq3_s", 26, std::nullopt},      {"iq3_m", 27, std::nullopt},
      {"iq2_s", 28, std::nullopt},      {"iq2_m", 29, std::nullopt},      {"iq4_xs", 30, std::nullopt},
      {"iq1_m", 31, std::nullopt},      {"tq1_0", 36, std::nullopt},      {"tq2_0", 37, std::nullopt},
      {"mxfp4_moe", 38, std::nullopt},
  };
  return kTable;
}

// llama.cpp's use_more_bits (src/llama-quant.cpp): the first and last eighth of the layers and
// every third one in between get the larger type in the _M mixes.
bool use_more_bits(uint64_t layer, uint64_t n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

GgmlType default_type(std::string_view file_type) {
  for (const FileType& f : file_type_table()) {
    if (file_type == f.name && f.base) return *f.base;
  }
  return GgmlType::kF16;
}

// llama-quantize's tensor_type_fallback: a k-quant needs rows of whole 256-weight super-blocks.
GgmlType fallback_for_width(GgmlType t, uint64_t row_width) {
  const uint64_t block = ggml_type_size(t).block_elements;
  if (row_width == 0 || row_width % block == 0) return t;
  switch (t) {
    case GgmlType::kQ2_K: case GgmlType::kQ3_K: return GgmlType::kQ4_0;
    case GgmlType::kQ4_K: return GgmlType::kQ5_0;
    case GgmlType::kQ5_K: return GgmlType::kQ5_1;
    case GgmlType::kQ6_K: return GgmlType::kQ8_0;
    default: return row_width % 32 == 0 ? t : GgmlType::kF16;
  }
}

bool is_quantized(GgmlType t) { return t != GgmlType::kF32 && t != GgmlType::kF16 && t != GgmlType::kBF16; }

}  // namespace

std::optional<GgmlTypeSize> ggml_type_by_id(uint32_t id) {
  for (const auto& t : kById) {
    if (t.id == id) return t;
  }
  return std::nullopt;
}

const GgmlTypeSize& ggml_type_size(GgmlType type) {
  const uint32_t id = static_cast<uint32_t>(type);
  return *std::find_if(std::begin(kById), std::end(kById), [&](const GgmlTypeSize& s) { return s.id == id; });
}

double ggml_bytes(GgmlType type, double elements) {
  const GgmlTypeSize& s = ggml_type_size(type);
  return elements / static_cast<double>(s.block_elements) * static_cast<double>(s.block_bytes);
}

std::string gguf_file_type_name(uint64_t ftype) {
  for (const FileType& f : file_type_table()) {
    if (f.ftype == ftype) return f.name;
  }
  return "ftype " + std::to_string(ftype);
}

std::optional<GgmlType> llama_cache_type(std::string_view name) {
  if (name == "auto" || name == "fp16" || name == "f16") return GgmlType::kF16;
  if (name == "bf16") return GgmlType::kBF16;
  if (name == "fp32") return GgmlType::kF32;
  if (name == "q8_0") return GgmlType::kQ8_0;
  if (name == "q4_0") return GgmlType::kQ4_0;
  if (name == "q4_1") return GgmlType::kQ4_1;
  if (name == "iq4_nl") return GgmlType::kIQ4_NL;
  if (name == "q5_0") return GgmlType::kQ5_0;
  if (name == "q5_1") return GgmlType::kQ5_1;
  return std::nullopt;
}

const std::vector<std::string>& gguf_file_types() {
  static const std::vector<std::string> kTypes = [] {
    std::vector<std::string> out;
    for (const FileType& f : file_type_table()) {
      if (f.base) out.push_back(f.name);
    }
    return out;
  }();
  return kTypes;
}

bool is_gguf_file_type(std::string_view name) {
  const auto& types = gguf_file_types();
  return std::find(types.begin(), types.end(), name) != types.end();
}

const std::vector<std::string>& gguf_file_type_ladder() {
  static const std::vector<std::string> kLadder = {"f32", "f16", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q3_k_m"};
  return kLadder;
}

std::optional<std::string> smaller_gguf_file_type(std::string_view current) {
  auto bits = [](std::string_view type) -> std::optional<double> {
    for (const FileType& f : file_type_table()) {
      if (type == f.name && f.base) {
        const GgmlTypeSize& s = ggml_type_size(*f.base);
        return 8.0 * static_cast<double>(s.block_bytes) / static_cast<double>(s.block_elements);
      }
    }
    return std::nullopt;
  };
  const auto have = bits(current);
  if (!have) return std::nullopt;
  for (const std::string& type : gguf_file_type_ladder()) {
    // (The _M mixes share their base type with the _S ones: q4_k_s steps down to q3_k_m, not q4_k_m.)
    if (auto b = bits(type); b && *b < *have) return type;
  }
  return std::nullopt;
}

std::optional<std::string> gguf_file_type_from_printed(std::string_view printed) {
  std::string text;
  for (char c : printed) text += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (auto guessed = text.find(" (guessed)"); guessed != std::string::npos) text.erase(guessed);
  // Older builds (llama.cpp before mid-2024) print "mostly Q4_K - Medium" (llama_model_ftype_name).
  if (text.rfind("mostly ", 0) == 0) text.erase(0, 7);
  while (!text.empty() && text.back() == ' ') text.pop_back();
  if (text == "all f32") return "f32";
  std::string name = text.substr(0, text.find(' '));
  // "Q4_K - Medium" is q4_k_m; Q2_K's "Medium" is plain q2_k (llama.h: LLAMA_FTYPE_MOSTLY_Q2_K).
  const std::string size = text.find(" - ") != std::string::npos ? text.substr(text.find(" - ") + 3) : "";
  if (name.size() > 2 && name.compare(name.size() - 2, 2, "_k") == 0) {
    if (size == "small") name += "_s";
    else if (size == "large") name += "_l";
    else if (size == "medium" && name != "q2_k") name += "_m";
  }
  for (const FileType& f : file_type_table()) {
    if (name == f.name) return name;
  }
  return std::nullopt;
}

namespace {

// llama_tensor_get_type_impl: the type the file type's mix asks for, before the width fallback.
GgmlType requested_type(std::string_view ft, std::string_view role, uint64_t layer, uint64_t n_layers,
                        const ModelSpec& model) {
  const GgmlType base = default_type(ft);
  // Unquantized files (convert_hf_to_gguf.py) keep every matrix in their type.
  if (!is_quantized(base)) return base;
  const bool eight_experts = model.num_experts == 8;
  if (role == "output") {
    // Falcon's head, and heads whose rows are not whole k-quant blocks, in Q8_0.
    if (model.model_type == "falcon" || model.hidden_size % 256 != 0) return GgmlType::kQ8_0;
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
    const uint64_t n_gqa = model.num_kv_heads ? model.num_attention_heads / model.num_kv_heads : 1;
    if (ft == "q2_k") t = n_gqa >= 4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
    else if (ft == "q3_k_m") t = layer < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    else if (ft == "q3_k_l") t = GgmlType::kQ5_K;
    else if ((ft == "q4_k_m" || ft == "q5_k_m") && use_more_bits(layer, n_layers)) t = GgmlType::kQ6_K;
    else if (ft == "q4_k_s" && layer < 4) t = GgmlType::kQ5_K;
    // LLM_TYPE_70B (Llama's 80-layer grouped-query models; the MHA LLaMA-65B is LLM_TYPE_65B):
    // attn_v is 8x smaller than attn_q, bumped.
    if (model.model_type == "llama" && n_layers == 80 && n_gqa > 1 && (t == GgmlType::kQ3_K || t == GgmlType::kQ4_K)) {
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

}  // namespace

GgmlType gguf_tensor_type(std::string_view ft, std::string_view role, uint64_t layer, uint64_t n_layers,
                          uint64_t row_width, const ModelSpec& model) {
  return fallback_for_width(requested_type(ft, role, layer, n_layers, model), row_width);
}

}  // namespace oomdoc
