// Hostile and truncated inputs to every parser of untrusted bytes in the estimate path: each
// must return a value or an Error, never crash, hang or throw.
#include <gtest/gtest.h>

#include <random>

#include "readers/job_file.h"
#include "readers/measured_memory.h"
#include "readers/model_config.h"
#include "readers/safetensors_header.h"

namespace oomdoc {
namespace {

const std::string kHeader =
    R"({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}, "__metadata__": {"a": "b"}})";
const std::string kConfig = R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "head_dim": 16,
  "quantization_config": {"quant_method": "gptq", "bits": 4}})";
const std::string kJob = R"({"model": "x", "task": "train_lora", "lora": {"r": 8, "target_modules": ["q_proj"]},
  "micro_batch_size": 2, "seq_len": 128, "offload": ["activations"]})";

std::string safetensors_bytes(const std::string& header) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(12, '\0');
}

TEST(HostileInput, EveryPrefixAndRandomMutationIsHandled) {
  std::mt19937 rng(1234);
  const std::string st = safetensors_bytes(kHeader);
  for (size_t n = 0; n <= st.size(); ++n) {
    auto r = parse_safetensors_header(st.substr(0, n), n, "m.safetensors");
    EXPECT_EQ(r.ok(), n == st.size()) << n;
  }
  for (size_t n = 0; n < kConfig.size(); ++n) {
    EXPECT_FALSE(parse_model_config(kConfig.substr(0, n), "config.json")) << n;
    EXPECT_FALSE(parse_job_json(kJob.substr(0, std::min(n, kJob.size() - 1)), "job.json"));
  }
  auto mutate = [&](std::string s) {
    std::uniform_int_distribution<size_t> pos(0, s.size() - 1);
    std::uniform_int_distribution<int> byte(0, 255);
    for (int i = 0; i < 3; ++i) s[pos(rng)] = static_cast<char>(byte(rng));
    return s;
  };
  // Mutations: whatever the outcome, a failure is one message that names the input.
  auto names_input = [](const auto& result, const std::string& name) {
    return result.ok() || (result.error().message.rfind(name, 0) == 0 &&
                           result.error().message.find('\n') == std::string::npos);
  };
  for (int i = 0; i < 3000; ++i) {
    std::string m = mutate(st);
    EXPECT_TRUE(names_input(parse_safetensors_header(m, m.size(), "m.safetensors"), "m.safetensors"));
    EXPECT_TRUE(names_input(parse_safetensors_header(m, 1ull << 62, "m.safetensors"), "m.safetensors"));
    EXPECT_TRUE(names_input(parse_model_config(mutate(kConfig), "config.json"), "config.json"));
    EXPECT_TRUE(names_input(parse_job_json(mutate(kJob), "job.json"), "job.json"));
    (void)parse_measured_record(mutate(kJob), "dev.jsonl");
  }
}

TEST(HostileInput, HugeNumbersAreErrorsNotOverflows) {
  auto big = parse_model_config(R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 1e300,
    "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 1})", "config.json");
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().message, "config.json: \"hidden_size\" must be a non-negative integer, got 1e+300");
  auto job = parse_job_json(R"({"seq_len": 1e30})", "job.json");
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().message, "job.json: seq_len: must be an integer, at least 1 (got 1e+30)");
}

}  // namespace
}  // namespace oomdoc
