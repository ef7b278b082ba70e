// QA round 3 of serve's command-line reading: docker's own options and environment, the positional
// model against --model, boolean flags with an explicit value, vLLM's number and flag spellings.
#include <gtest/gtest.h>

#include "readers/vllm_args.h"

namespace oomdoc {
namespace {

ServeConfig parse_ok(const std::vector<std::string>& words) {
  auto config = parse_vllm_command_line(words);
  EXPECT_TRUE(config.ok()) << config.error().message;
  return config.ok() ? config.value() : ServeConfig{};
}

std::string error_of(const std::vector<std::string>& words) {
  auto config = parse_vllm_command_line(words);
  return config.ok() ? std::string("(parsed)") : config.error().message;
}

TEST(VllmArgsDocker, TheImageIsTheFirstWordAfterDockersOptions) {
  // A container named like the image, and docker's own flags with values, are not vLLM's.
  ServeConfig c = parse_ok({"docker", "run", "-d", "--name", "vllm-openai-server", "--gpus", "all", "-p", "8000:8000",
                            "--ipc=host", "-v", "/models:/models", "vllm/vllm-openai:v0.6.3", "--model", "m"});
  EXPECT_EQ(c.launcher, "docker vllm/vllm-openai:v0.6.3");
  EXPECT_EQ(c.image_tag, "v0.6.3");
  EXPECT_EQ(c.model, "m");
  EXPECT_TRUE(c.unknown.empty());
  EXPECT_EQ(error_of({"docker", "run", "--gpus", "all", "ubuntu:22.04", "vllm", "serve", "m"}),
            "not a vLLM command line: docker runs 'ubuntu:22.04', not the vllm/vllm-openai image");
  EXPECT_EQ(error_of({"docker", "ps"}), "not a vLLM command line: a docker command other than `docker run`");
}

TEST(VllmArgsDocker, EnvironmentOptionsReachTheContainer) {
  ServeConfig c = parse_ok({"docker", "run", "--gpus", "all", "-e", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
                            "--env=VLLM_USE_V1=0", "-eHF_TOKEN=x", "--env", "HOST_VAR", "vllm/vllm-openai:v0.9.2",
                            "--model", "m"});
  EXPECT_EQ(c.env.at("VLLM_ALLOW_LONG_MAX_MODEL_LEN"), "1");
  EXPECT_EQ(c.env.at("VLLM_USE_V1"), "0");
  EXPECT_EQ(c.env.at("HF_TOKEN"), "x");
  EXPECT_EQ(c.env.count("HOST_VAR"), 0u);   // taken from the host: no value here
}

TEST(VllmArgsQa3, ThePositionalModelWinsOverModel) {
  ServeConfig c = parse_ok({"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--model", "Qwen/Qwen2.5-7B-Instruct"});
  EXPECT_EQ(c.model, "meta-llama/Llama-3.1-8B-Instruct");
  ASSERT_EQ(c.ignored.size(), 1u);
  EXPECT_EQ(c.ignored[0], "--model Qwen/Qwen2.5-7B-Instruct (the positional meta-llama/Llama-3.1-8B-Instruct wins, as in "
                          "vllm serve)");
  // --model alone (no positional) still names it.
  EXPECT_EQ(parse_ok({"vllm", "serve", "--model", "m2"}).model, "m2");
}

TEST(VllmArgsQa3, BooleanFlagTakesAnExplicitValue) {
  // v0.5/v0.6 declared it with nargs="?": "False" is its value, not a stray word.
  ServeConfig off = parse_ok({"vllm", "serve", "m", "--enable-chunked-prefill", "False"});
  EXPECT_EQ(off.enable_chunked_prefill, false);
  EXPECT_TRUE(off.unknown.empty());
  EXPECT_EQ(parse_ok({"vllm", "serve", "m", "--enable-chunked-prefill", "true"}).enable_chunked_prefill, true);
  // A model after a boolean flag is still the model.
  EXPECT_EQ(parse_ok({"vllm", "serve", "--enforce-eager", "m"}).model, "m");
}

TEST(VllmArgsQa3, SpellingsVllmRefuses) {
  EXPECT_EQ(error_of({"vllm", "serve", "m", "--tp", "2"}),
            "--tp: not a vLLM flag; its short form is -tp (or --tensor-parallel-size); vLLM would exit with "
            "'unrecognized arguments'");
  EXPECT_EQ(parse_ok({"vllm", "serve", "m", "-tp", "2"}).tensor_parallel_size, 2u);
  EXPECT_EQ(error_of({"vllm", "serve", "m", "--max-model-len", "1.5K"}),
            "--max-model-len: '1.5K': vLLM refuses it: \"Decimals are not allowed with binary suffixes\" (write 1.5k "
            "for thousands, or a whole number of K)");
  EXPECT_EQ(parse_ok({"vllm", "serve", "m", "--max-model-len", "25.6k"}).max_model_len, 25600u);
}

TEST(VllmArgsQa3, FlagsAreListedAsWritten) {
  ServeConfig c = parse_ok({"vllm", "serve", "m", "-O3", "--port", "8000"});
  ASSERT_EQ(c.not_modeled.size(), 1u);
  EXPECT_EQ(c.not_modeled[0], "-O3");
  ASSERT_EQ(c.ignored.size(), 1u);
  EXPECT_EQ(c.ignored[0], "--port 8000");
}

}  // namespace
}  // namespace oomdoc
