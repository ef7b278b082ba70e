// GGUF weight formats as llama.cpp stores them: the size of each ggml tensor type, and which
// type `llama-quantize` gives each tensor for a file type such as Q4_K_M. The one place that
// knows GGUF sizes; the llama.cpp estimate (analyses/llama_cpp_estimate.cpp) sums them.
//
// Block sizes are ggml's (ggml/src/ggml-common.h: block_q4_0 is an fp16 scale and 16 bytes of
// nibbles for 32 weights, block_q4_K 144 bytes for 256, ...). The per-tensor choice follows
// llama.cpp's llama_tensor_get_type (src/llama-quant.cpp): the output matrix in Q6_K unless the
// file is Q8_0; for the _M mixes attn_v and ffn_down in Q6_K on the layers use_more_bits picks;
// Q4_K_S's first attn_v and ffn_down layers in Q5_K; the 70B attn_v and 8-expert bumps.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/model_spec.h"

namespace oomdoc {

// ggml tensor types, by their ids in a GGUF tensor table (ggml.h enum ggml_type): the ones the
// quantize rules below produce. A file may hold others (IQ types, ...): ggml_type_by_id knows them.
enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kIQ4_NL = 20, kBF16 = 30,
};

struct GgmlTypeSize {
  uint32_t id;
  const char* name;          // as llama.cpp prints it: "q4_K", "f16"
  uint64_t block_elements;   // weights per block
  uint64_t block_bytes;      // bytes per block
};

// Any ggml type by id (ggml.c type_traits), or nullopt for one oomdoc does not know.
std::optional<GgmlTypeSize> ggml_type_by_id(uint32_t id);
const GgmlTypeSize& ggml_type_size(GgmlType type);
// Bytes of a tensor of `elements` weights (whole blocks: every row of a GGUF tensor is).
double ggml_bytes(GgmlType type, double elements);

// general.file_type (llama.h enum llama_ftype) as llama-quantize names it ("q4_k_m"), or
// "ftype N" for one oomdoc does not name.
std::string gguf_file_type_name(uint64_t ftype);

// llama.cpp's KV cache types (-ctk/-ctv; common/arg.cpp kv_cache_types) by the job's
// kv_cache_dtype names: auto, fp16 and f16 (llama.cpp's default f16), bf16, fp32 (llama.cpp's
// f32), q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1. nullopt for any other.
std::optional<GgmlType> llama_cache_type(std::string_view kv_cache_dtype);
inline constexpr std::string_view kLlamaCacheTypeNames = "f16, bf16, fp32, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1";

// The file types oomdoc knows, as `llama-quantize` names them, lower case:
// f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k_s, q3_k_m, q3_k_l, q4_k_s, q4_k_m,
// q5_k_s, q5_k_m, q6_k.
const std::vector<std::string>& gguf_file_types();
bool is_gguf_file_type(std::string_view name);

// The file types a smaller-file step offers, largest first: f32, f16, q8_0, q6_k, q5_k_m, q4_k_m,
// q3_k_m (fit's ladder and explain's advice both walk it).
const std::vector<std::string>& gguf_file_type_ladder();
// The first type on that ladder with fewer bits per weight than `current` (bf16 counts as f16),
// or nullopt: nothing on it is smaller (q3_k_m and below), or oomdoc does not size `current`.
std::optional<std::string> smaller_gguf_file_type(std::string_view current);

// llama.cpp's printed file type (llama_model_ftype_name: "Q4_K - Medium", "Q8_0", "all F32",
// "IQ4_XS - 4.25 bpw", with " (guessed)" when the file did not record it) as llama-quantize names
// it ("q4_k_m"), or nullopt for a name oomdoc does not know.
std::optional<std::string> gguf_file_type_from_printed(std::string_view printed);

// The ggml type llama-quantize gives one weight matrix of `model`. role: the LinearShape role
// (q, k, v, qkv, o, gate, up, gate_up, down, fc_in, or "" for others), "output" for the output
// head, "token_embd" for the input embedding. layer / n_layers: the block it belongs to.
// row_width: the matrix's input width (ne[0]); a k-quant needs a multiple of 256, else
// llama-quantize falls back (tensor_type_fallback: Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0,
// Q5_K -> Q5_1, Q6_K -> Q8_0).
GgmlType gguf_tensor_type(std::string_view file_type, std::string_view role, uint64_t layer, uint64_t n_layers,
                          uint64_t row_width, const ModelSpec& model);

}  // namespace oomdoc
