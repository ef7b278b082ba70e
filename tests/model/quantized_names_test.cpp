#include "model/quantized_names.h"

#include <gtest/gtest.h>

namespace oomdoc {
namespace {

TEST(QuantizedNames, SplitsTheOutermostSuffixAndKeepsTheBase) {
  auto bnb = split_quantized_name("unsloth/Meta-Llama-3.1-8B-Instruct-bnb-4bit");
  ASSERT_TRUE(bnb);
  EXPECT_EQ(bnb->base, "unsloth/Meta-Llama-3.1-8B-Instruct");
  EXPECT_EQ(bnb->format->method, "bitsandbytes");
  EXPECT_EQ(bnb->format->bits, 4u);
  EXPECT_EQ(bnb->format->group_size, 64u);
  EXPECT_TRUE(bnb->format->double_quant);

  // The longest suffix wins: "-GPTQ-Int8" is 8-bit, not the 4-bit "-gptq"/"-int4" entries.
  auto gptq8 = split_quantized_name("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8/");
  ASSERT_TRUE(gptq8);
  EXPECT_EQ(gptq8->base, "Qwen/Qwen2.5-7B-Instruct");
  EXPECT_EQ(gptq8->format->method, "gptq");
  EXPECT_EQ(gptq8->format->bits, 8u);
  EXPECT_EQ(gptq8->format->group_size, 128u);

  // W8A8 from compressed-tensors: per output channel, no groups.
  auto w8a8 = split_quantized_name("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8");
  ASSERT_TRUE(w8a8);
  EXPECT_EQ(w8a8->base, "RedHatAI/Meta-Llama-3.1-8B-Instruct");
  EXPECT_EQ(w8a8->format->method, "compressed-tensors");
  EXPECT_EQ(w8a8->format->group_size, 0u);

  // Stacked suffixes: every one is stripped, the outermost names the format.
  auto stacked = split_quantized_name("org/model-AWQ-fp8-dynamic");
  ASSERT_TRUE(stacked);
  EXPECT_EQ(stacked->base, "org/model");
  EXPECT_EQ(stacked->format->method, "fp8");
}

TEST(QuantizedNames, PlainNamesAreNotQuantized) {
  EXPECT_FALSE(split_quantized_name("meta-llama/Llama-3.1-8B-Instruct"));
  EXPECT_FALSE(split_quantized_name("awq"));   // the word alone is not a suffix
  EXPECT_FALSE(split_quantized_name(""));
}

}  // namespace
}  // namespace oomdoc
