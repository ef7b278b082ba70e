// Hostile and random command lines: the reader and the analysis answer with a value or an error,
// never a crash, a hang or a wrapped-around number.
#include <gtest/gtest.h>

#include <random>

#include "analyses/vllm_serve.h"
#include "core/units.h"
#include "readers/model_resolver.h"
#include "readers/vllm_args.h"

namespace oomdoc {
namespace {

TEST(VllmArgsRobustness, RandomWordSoupNeverCrashes) {
  const std::vector<std::string> pieces = {
      "vllm", "serve", "llama-3.1-8b", "--max-model-len", "-1", "0", "1", "99999999999", "4294967296",
      "--tensor-parallel-size", "-tp", "8", "4097", "--pipeline-parallel-size", "--gpu-memory-utilization",
      "1.0", "0.0001", "nan", "inf", "--kv-cache-dtype", "fp8", "--block-size", "5000", "--cpu-offload-gb",
      "1e308", "--kv-cache-memory-bytes", "1125899906842625", "--limit-mm-per-prompt", "{", "{\"image\": -1}",
      "image=", "--speculative-config", "{\"num_speculative_tokens\": 1e400}", "'", "\"", "LLM(", ")",
      "model=", "=", "--", "-", "--max-num-seqs", "--max-num-batched-tokens", "32k", "1.5M", "--hf-overrides",
      "{\"max_position_embeddings\": 18446744073709551615}", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "\\", "--enforce-eager"};
  auto model = resolve_model("llama-3.1-8b");
  ASSERT_TRUE(model.ok());
  std::mt19937 rng(12345);
  int parsed = 0, predicted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<std::string> words;
    size_t n = rng() % 12;
    for (size_t j = 0; j < n; ++j) words.push_back(pieces[rng() % pieces.size()]);
    if (rng() % 2) words.insert(words.begin(), {"vllm", "serve", "llama-3.1-8b"});
    auto config = parse_vllm_command_line(words);
    if (!config) {
      EXPECT_FALSE(config.error().message.empty());
      EXPECT_EQ(config.error().message.find('\n'), std::string::npos);
      continue;
    }
    ++parsed;
    ServeInputs in;
    in.config = config.value();
    in.model = model.value();
    in.target = serve_target_memory(24 * kGiB);
    auto report = analyze_serve(in);
    if (!report) continue;
    ++predicted;
    const ServePrediction& p = report->prediction;
    EXPECT_LE(p.budget_bytes, 24 * kGiB);
    EXPECT_LE(p.capacity.tokens, uint64_t{1} << 50);
  }
  EXPECT_GT(parsed, 100);
  EXPECT_GT(predicted, 50);
}

TEST(VllmArgsRobustness, LimitsAreErrorsNotWrapAround) {
  auto tp = parse_vllm_command_line({"vllm", "serve", "m", "-tp", "100000"});
  ASSERT_FALSE(tp.ok());
  EXPECT_EQ(tp.error().message, "--tensor-parallel-size: 100000 is beyond any real launch (at most 4096)");
  auto offload = parse_vllm_command_line({"vllm", "serve", "m", "--cpu-offload-gb", "1e308"});
  ASSERT_FALSE(offload.ok());
  auto kv = parse_vllm_command_line({"vllm", "serve", "m", "--kv-cache-memory-bytes", "2000000000000000"});
  ASSERT_FALSE(kv.ok());
  auto nan = parse_vllm_command_line({"vllm", "serve", "m", "--gpu-memory-utilization", "nan"});
  ASSERT_FALSE(nan.ok());

  ServeInputs in;
  in.config = parse_vllm_command_line({"vllm", "serve", "m"}).value();
  in.model = resolve_model("llama-3.1-8b").value();
  in.model.num_layers = 1ull << 40;
  in.target = serve_target_memory(24 * kGiB);
  auto huge = predict_vllm_startup(in);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().message, "meta-llama/Llama-3.1-8B: num_hidden_layers = 1099511627776 is beyond any real model (at most 10000)");
}

TEST(VllmArgsRobustness, ADotWithoutDigitsIsAnErrorNamingTheFlag) {
  // "." passed the digit check and reached std::stod, which threw (an abort of `oomdoc serve`).
  EXPECT_EQ(parse_vllm_token_count("."), std::nullopt);
  EXPECT_EQ(parse_vllm_token_count(".k"), std::nullopt);
  EXPECT_EQ(parse_vllm_token_count("k"), std::nullopt);
  EXPECT_EQ(parse_vllm_token_count(".5k"), 500u);
  EXPECT_EQ(parse_vllm_token_count("1.5k"), 1500u);
  EXPECT_EQ(parse_vllm_token_count("32K"), 32768u);
  auto len = parse_vllm_command_line({"vllm", "serve", "m", "--max-model-len", ".k"});
  ASSERT_FALSE(len.ok());
  EXPECT_EQ(len.error().message, "--max-model-len: '.k' is not a positive whole number");
  auto mm = parse_vllm_command_line({"vllm", "serve", "m", "--limit-mm-per-prompt", "image=.k"});
  ASSERT_FALSE(mm.ok());
  EXPECT_EQ(mm.error().message, "--limit-mm-per-prompt: 'image=.k' is not MODALITY=COUNT");
  auto util = parse_vllm_command_line({"vllm", "serve", "m", "--gpu-memory-utilization", "."});
  ASSERT_FALSE(util.ok());
  EXPECT_EQ(util.error().message, "--gpu-memory-utilization: '.' is not a number");
}

}  // namespace
}  // namespace oomdoc
