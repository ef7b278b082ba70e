// GGUF sizes and llama-quantize's per-tensor choices (model/gguf_types.h), against ggml's block
// layouts and the rules of llama.cpp's llama_tensor_get_type.
#include "model/gguf_types.h"

#include <gtest/gtest.h>

#include "readers/model_presets.h"

namespace oomdoc {
namespace {

ModelSpec preset(const char* id) { return find_preset(id)->value(); }

TEST(GgufTypes, BlockSizesAreGgmls) {
  EXPECT_EQ(ggml_bytes(GgmlType::kQ4_0, 32), 18);     // fp16 scale + 16 bytes of nibbles
  EXPECT_EQ(ggml_bytes(GgmlType::kQ8_0, 32), 34);     // fp16 scale + 32 int8
  EXPECT_EQ(ggml_bytes(GgmlType::kQ4_K, 256), 144);
  EXPECT_EQ(ggml_bytes(GgmlType::kQ5_K, 256), 176);
  EXPECT_EQ(ggml_bytes(GgmlType::kQ6_K, 256), 210);
  EXPECT_EQ(ggml_bytes(GgmlType::kF16, 1000), 2000);
  EXPECT_STREQ(ggml_type_size(GgmlType::kQ6_K).name, "q6_K");
  EXPECT_EQ(ggml_type_by_id(23)->block_bytes, 136u);   // iq4_xs: only read from files
  EXPECT_FALSE(ggml_type_by_id(200).has_value());
  EXPECT_EQ(gguf_file_type_name(15), "q4_k_m");
  EXPECT_EQ(gguf_file_type_name(30), "iq4_xs");
  EXPECT_EQ(gguf_file_type_name(999), "ftype 999");
  EXPECT_TRUE(is_gguf_file_type("q4_k_m"));
  EXPECT_FALSE(is_gguf_file_type("q4_k"));   // a tensor type, not a file type llama-quantize names
}

TEST(GgufTypes, Q4KMGivesAttnVAndFfnDownSixBitsOnTheLayersUseMoreBitsPicks) {
  const ModelSpec m = preset("meta-llama/Llama-2-7b-hf");   // 32 layers: n/8 = 4
  for (const char* role : {"v", "down"}) {
    EXPECT_EQ(gguf_tensor_type("q4_k_m", role, 0, 32, 4096, m), GgmlType::kQ6_K) << role;   // first eighth
    EXPECT_EQ(gguf_tensor_type("q4_k_m", role, 4, 32, 4096, m), GgmlType::kQ4_K) << role;   // (4 - 4) % 3 = 0
    EXPECT_EQ(gguf_tensor_type("q4_k_m", role, 6, 32, 4096, m), GgmlType::kQ6_K) << role;   // (6 - 4) % 3 = 2
    EXPECT_EQ(gguf_tensor_type("q4_k_m", role, 28, 32, 4096, m), GgmlType::kQ6_K) << role;  // last eighth
  }
  EXPECT_EQ(gguf_tensor_type("q4_k_m", "q", 0, 32, 4096, m), GgmlType::kQ4_K);
  EXPECT_EQ(gguf_tensor_type("q4_k_m", "output", 0, 32, 4096, m), GgmlType::kQ6_K);
  EXPECT_EQ(gguf_tensor_type("q4_0", "output", 0, 32, 4096, m), GgmlType::kQ6_K);   // every type but Q8_0
  EXPECT_EQ(gguf_tensor_type("q8_0", "output", 0, 32, 4096, m), GgmlType::kQ8_0);
  EXPECT_EQ(gguf_tensor_type("f16", "output", 0, 32, 4096, m), GgmlType::kF16);     // converted, not quantized
  // Q4_K_S: the first four attn_v and the first eighth of ffn_down in Q5_K.
  EXPECT_EQ(gguf_tensor_type("q4_k_s", "v", 3, 32, 4096, m), GgmlType::kQ5_K);
  EXPECT_EQ(gguf_tensor_type("q4_k_s", "v", 4, 32, 4096, m), GgmlType::kQ4_K);
  EXPECT_EQ(gguf_tensor_type("q4_k_s", "down", 3, 32, 4096, m), GgmlType::kQ5_K);
  EXPECT_EQ(gguf_tensor_type("q4_k_s", "down", 4, 32, 4096, m), GgmlType::kQ4_K);
}

TEST(GgufTypes, RowsThatAreNotWholeSuperBlocksFallBack) {
  const ModelSpec m = preset("meta-llama/Llama-2-7b-hf");
  // llama-quantize's tensor_type_fallback for a 1152-wide input (Gemma-3-1B's hidden size).
  EXPECT_EQ(gguf_tensor_type("q4_k_m", "q", 4, 32, 1152, m), GgmlType::kQ5_0);
  EXPECT_EQ(gguf_tensor_type("q4_k_m", "v", 0, 32, 1152, m), GgmlType::kQ8_0);    // Q6_K -> Q8_0
  EXPECT_EQ(gguf_tensor_type("q5_k_m", "q", 4, 32, 1152, m), GgmlType::kQ5_1);
  EXPECT_EQ(gguf_tensor_type("q2_k", "q", 4, 32, 1152, m), GgmlType::kQ4_0);
  EXPECT_EQ(gguf_tensor_type("q4_0", "q", 4, 32, 1152, m), GgmlType::kQ4_0);      // 32-blocks fit
  const ModelSpec falcon = preset("tiiuae/falcon-7b");
  EXPECT_EQ(gguf_tensor_type("q4_k_m", "output", 0, 32, 4544, falcon), GgmlType::kQ8_0);
}

TEST(GgufTypes, SeventyBAndEightExpertBumps) {
  const ModelSpec llama70 = preset("meta-llama/Llama-2-70b-hf");   // 80 layers: LLM_TYPE_70B
  EXPECT_EQ(gguf_tensor_type("q4_k_m", "v", 11, 80, 4096, llama70), GgmlType::kQ5_K);  // (11 - 10) % 3: Q4_K, bumped
  EXPECT_EQ(gguf_tensor_type("q4_k_m", "v", 4, 80, 4096, llama70), GgmlType::kQ6_K);   // first eighth: already more
  const ModelSpec mixtral = preset("mistralai/Mixtral-8x7B-v0.1");
  EXPECT_EQ(gguf_tensor_type("q4_k_m", "v", 4, 32, 4096, mixtral), GgmlType::kQ8_0);
  EXPECT_EQ(gguf_tensor_type("q4_k_m", "k", 4, 32, 4096, mixtral), GgmlType::kQ8_0);
  EXPECT_EQ(gguf_tensor_type("q4_k_m", "o", 4, 32, 4096, mixtral), GgmlType::kQ5_K);
}

}  // namespace
}  // namespace oomdoc
