// Flags oomdoc knows to leave memory alone, flags it does not know, and typos of memory flags.
#include <gtest/gtest.h>

#include "readers/vllm_args.h"

namespace oomdoc {
namespace {

std::string error_of(const std::vector<std::string>& words) {
  auto config = parse_vllm_command_line(words);
  return config.ok() ? std::string("(parsed)") : config.error().message;
}

TEST(VllmArgsUnknownFlags, ATypoOfAMemoryFlagIsAnError) {
  EXPECT_EQ(error_of({"vllm", "serve", "m", "--max-model-length", "8192"}),
            "--max-model-length: not a vLLM flag (did you mean --max-model-len?); vLLM would exit with "
            "'unrecognized arguments'");
  EXPECT_EQ(error_of({"vllm", "serve", "m", "--gpu-memory-utilisation", "0.5"}),
            "--gpu-memory-utilisation: not a vLLM flag (did you mean --gpu-memory-utilization?); vLLM would exit "
            "with 'unrecognized arguments'");
  EXPECT_EQ(error_of({"vllm", "serve", "m", "--tensor-paralel-size", "2"}),
            "--tensor-paralel-size: not a vLLM flag (did you mean --tensor-parallel-size?); vLLM would exit with "
            "'unrecognized arguments'");
  // A prefix of a memory flag is an abbreviation, refused with its own words.
  EXPECT_EQ(error_of({"vllm", "serve", "m", "--max_num_seq=8"}),
            "--max-num-seq: an abbreviation of --max-num-seqs; write it out (vLLM's argument parser expands or "
            "refuses abbreviations depending on its version)");
  EXPECT_EQ(error_of({"LLM(model=\"m\", max_model_length=8192)"}),
            "max_model_length: not a vLLM argument (did you mean max_model_len?); LLM(...) would raise "
            "'TypeError: ... got an unexpected keyword argument 'max_model_length''");
}

TEST(VllmArgsUnknownFlags, KnownFlagsWithoutMemoryEffectAreIgnoredOthersAreUnknown) {
  auto config = parse_vllm_command_line({"vllm", "serve", "m", "--host", "0.0.0.0", "--port", "8000",
                                         "--served-model-name", "chat", "--api-key", "k", "--trust-remote-code",
                                         "--download-dir", "/d", "--tokenizer", "t", "--my-custom-flag", "x",
                                         "--enable-foo", "stray"});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->ignored, (std::vector<std::string>{"--host 0.0.0.0", "--port 8000", "--served-model-name chat",
                                                       "--api-key k", "--trust-remote-code", "--download-dir /d",
                                                       "--tokenizer t"}));
  EXPECT_EQ(config->unknown, (std::vector<std::string>{"--my-custom-flag x", "--enable-foo stray"}));
  auto stray = parse_vllm_command_line({"vllm", "serve", "m", "--enforce-eager", "extra"});
  ASSERT_TRUE(stray.ok());
  EXPECT_EQ(stray->unknown, (std::vector<std::string>{"extra"}));
}

// Current flags that change memory oomdoc does not size are read as such, not as unknown words:
// -O3, the CUDA-graph capture sizes (a list), decode context parallelism.
TEST(VllmArgsUnknownFlags, CurrentGraphAndParallelFlagsAreKnown) {
  auto config = parse_vllm_command_line({"vllm", "serve", "m", "-O3", "--cudagraph-capture-sizes", "1", "2", "4", "8",
                                         "--max-cudagraph-capture-size", "256", "-dcp", "2", "--kv-cache-dtype", "int8"});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_TRUE(config->unknown.empty());
  EXPECT_EQ(config->not_modeled.size(), 4u);
  EXPECT_EQ(config->kv_cache_dtype, "int8");
  auto half = parse_vllm_command_line({"vllm", "serve", "m", "--kv-cache-dtype", "half"});
  ASSERT_FALSE(half.ok());
  EXPECT_EQ(half.error().message,
            "--kv-cache-dtype: 'half' is not one of vLLM's KV cache dtypes (auto, float16, bfloat16, fp8, fp8_e4m3, "
            "fp8_e5m2, fp8_inc, fp8_ds_mla, nvfp4_ds_mla, turboquant_k8v4, turboquant_4bit_nc, turboquant_k3v4_nc, "
            "turboquant_3bit_nc, int4_per_token_head, int8_per_token_head, fp8_per_token_head, nvfp4, nvfp4_4over6, "
            "int8)");
  // float16 is one of current vLLM's choices (vllm/config/cache.py CacheDType).
  EXPECT_EQ(parse_vllm_command_line({"vllm", "serve", "m", "--kv-cache-dtype", "float16"})->kv_cache_dtype, "float16");
}

}  // namespace
}  // namespace oomdoc
