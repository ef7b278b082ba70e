// serve: what the eighth QA round found (2026-12-02): unitless size overrides, vLLM's context keys
// and its 2048-token fallback, flags vLLM refuses for the model, V0's concurrency figure, launchers
// named by path, an override --enforce-eager makes moot, architectures vLLM has no code for.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "analyses/vllm_serve.h"
#include "readers/model_config.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

using testing::run_cli;

// vLLM's "Model loading took 14.9888 GiB" pasted without its unit was read as 15 bytes, and the
// job "fit"; a size needs its unit now (0 needs none).
TEST(ServeCliQa8, ASizeOverrideNeedsItsUnit) {
  for (const char* flag : {"--weights", "--activation", "--non-torch", "--cuda-graph"}) {
    auto r = run_cli({"serve", "--gpu", "3090", flag, "14.9888", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"});
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_EQ(r.err, fmt::format("oomdoc: serve: {}: '14.9888' has no unit: write 14.9888GiB (as CUDA and nvidia-smi "
                                 "count) or 14.9888GB (decimal)\n", flag));
    EXPECT_TRUE(r.out.empty());
  }
  // Text that is no number at all is not a size, whatever its characters.
  for (const char* text : {"1.2.3", "e", "-"}) {
    auto r = run_cli({"serve", "--gpu", "3090", "--weights", text, "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"});
    EXPECT_EQ(r.err, fmt::format("oomdoc: serve: --weights: '{}' is not a size (e.g. 14.96GiB)\n", text));
  }
  auto zero = run_cli({"serve", "--gpu", "h100", "--cuda-graph", "0", "--json", "--", "vllm", "serve",
                       "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"});
  ASSERT_EQ(zero.exit_code, 0) << zero.err;
  EXPECT_EQ(nlohmann::json::parse(zero.out)["components"]["cuda_graphs"]["bytes"], 0);
}

// vllm/config.py _get_and_verify_max_len: the smallest of its context keys the config sets.
TEST(ServeCliQa8, TheSmallestContextKeyIsTheDefaultLength) {
  const std::string config = R"({"model_type": "llama", "_name_or_path": "acme/short", "vocab_size": 32000,
    "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 11008,
    "max_position_embeddings": 32768, "seq_length": 8192, "torch_dtype": "bfloat16"})";
  auto model = parse_model_config(config, "config.json");
  ASSERT_TRUE(model) << model.error().message;
  EXPECT_EQ(model->max_position_embeddings, 32768u);
  EXPECT_EQ(model->context_keys, (std::map<std::string, uint64_t>{{"max_position_embeddings", 32768},
                                                                  {"seq_length", 8192}}));
  EXPECT_EQ(vllm_context_limit(*model, std::nullopt).key, "seq_length");
  EXPECT_EQ(vllm_derived_max_model_len(*model, std::nullopt), 8192u);
  // An --hf-overrides max_position_embeddings rewrites that key and joins the others.
  EXPECT_EQ(vllm_derived_max_model_len(*model, 4096), 4096u);
  EXPECT_EQ(vllm_derived_max_model_len(*model, 16384), 8192u);
}

// A key config.json leaves out has its transformers class default, as vLLM's getattr sees it:
// MistralConfig's max_position_embeddings is 4096 x 32.
TEST(ServeCliQa8, AFamilysDefaultContextCountsWhenTheConfigLeavesItOut) {
  auto model = parse_model_config(R"({"model_type": "mistral", "vocab_size": 32768, "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128})", "config.json");
  ASSERT_TRUE(model) << model.error().message;
  EXPECT_EQ(vllm_derived_max_model_len(*model, std::nullopt), 131072u);
}

// Command-R keeps a longer context in model_max_length: vLLM lets a length up to it through.
TEST(ServeCliQa8, ALengthUpToModelMaxLengthIsAllowed) {
  auto model = parse_model_config(R"({"model_type": "llama", "_name_or_path": "acme/long", "vocab_size": 32000,
    "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 11008,
    "max_position_embeddings": 4096, "model_max_length": 16384})", "config.json");
  ASSERT_TRUE(model) << model.error().message;
  EXPECT_EQ(vllm_derived_max_model_len(*model, std::nullopt), 4096u);
  ServeInputs in;
  in.model = *model;
  in.target = serve_target_memory(80ull << 30);
  in.config.model = "acme/long";
  in.config.max_model_len = 16384;
  EXPECT_TRUE(analyze_serve(in)) << analyze_serve(in).error().message;
  in.config.max_model_len = 16385;
  auto refused = analyze_serve(in);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("(max_position_embeddings=4096 or model_max_length=16384 in model's "
                                         "config.json)"),
            std::string::npos)
      << refused.error().message;
}

// BLOOM's config has none of the keys: vLLM assumes 2048 with a warning instead of refusing.
TEST(ServeCliQa8, AConfigWithoutContextKeysIsServedAt2048) {
  auto r = run_cli({"serve", "--gpu", "h200", "--json", "--", "vllm", "serve", "bigscience/bloomz-7b1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["settings"]["max_model_len"], 2048);
  EXPECT_EQ(doc["settings"]["max_model_len_source"], "model context: vLLM's fallback (no context key in the config)");
  const auto& warnings = doc["warnings"];
  EXPECT_TRUE(std::any_of(warnings.begin(), warnings.end(), [](const nlohmann::json& w) {
    return w.get<std::string>().rfind("bigscience/bloomz-7b1's config gives none of the context-length keys vLLM "
                                      "reads", 0) == 0;
  })) << warnings.dump();
}

TEST(ServeCliQa8, ModelsAndFlagsVllmRefuses) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"serve", "--gpu", "a100-80", "--", "vllm", "serve", "meta-llama/Meta-Llama-3-8B", "--limit-mm-per-prompt",
             "image=2"},
            "oomdoc: serve: --limit-mm-per-prompt on meta-llama/Meta-Llama-3-8B, a text-only model: vLLM refuses it: "
            "\"`limit_mm_per_prompt` is only supported for multimodal models.\"; drop the flag\n"},
           {{"serve", "--gpu", "4090", "--", "vllm", "serve", "bigscience/T0_3B", "--max-model-len", "4096"},
            "oomdoc: serve: bigscience/T0_3B is an encoder-decoder model (t5): vLLM has no implementation of it (its "
            "model registry lists no T5-style architecture), so it cannot be served or sized; `oomdoc estimate --task "
            "inference` sizes it under Hugging Face transformers\n"},
           {{"serve", "--gpu", "h100", "--", "vllm", "serve", "meta-llama/Meta-Llama-3-8B", "--max-model-len",
             "99999999999999999999"},
            "oomdoc: serve: --max-model-len: 99999999999999999999 is beyond any real launch (at most 4294967296)\n"},
       }) {
    auto r = run_cli(c.args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, c.message);
    EXPECT_TRUE(r.out.empty());
  }
  auto deberta = run_cli({"serve", "--gpu", "4090", "--json", "--", "vllm", "serve", "microsoft/deberta-v2-xlarge"});
  ASSERT_EQ(deberta.exit_code, 0) << deberta.err;
  EXPECT_EQ(nlohmann::json::parse(deberta.out)["warnings"][0],
            "vLLM's model registry lists no DeBERTa-v2 architecture: vLLM would refuse microsoft/deberta-v2-xlarge "
            "(\"not supported\"); the figures size it as if it served like BERT");
}

// V0 divides the cache's tokens by max_model_len: 28,060 blocks x 16 / 1000 = 448.96, in the log
// line, the summary and the JSON alike (a length that is not a multiple of 16 shows it).
TEST(ServeCliQa8, V0ConcurrencyIsTheLoggedFigureEverywhere) {
  auto r = run_cli({"serve", "--gpu", "a100-80", "--vllm-version", "0.6.4", "--json", "--", "vllm", "serve",
                    "meta-llama/Meta-Llama-3-8B", "--max-model-len", "1000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["kv_cache"]["num_blocks"], 28060);
  EXPECT_DOUBLE_EQ(doc["kv_cache"]["max_concurrency"].get<double>(), 28060.0 * 16 / 1000);
  EXPECT_EQ(doc["log_lines"].back(), "Maximum concurrency for 1000 tokens per request: 448.96x");
  // Current V1 counts whole blocks per request: 63 blocks for 1000 tokens.
  auto v1 = run_cli({"serve", "--gpu", "a100-80", "--json", "--", "vllm", "serve", "meta-llama/Meta-Llama-3-8B",
                     "--max-model-len", "1000"});
  ASSERT_EQ(v1.exit_code, 0) << v1.err;
  const auto v1_doc = nlohmann::json::parse(v1.out);
  EXPECT_DOUBLE_EQ(v1_doc["kv_cache"]["max_concurrency"].get<double>(),
                   v1_doc["kv_cache"]["num_blocks"].get<double>() / 63);
}

// systemd units and virtual environments name the launcher by its path.
TEST(ServeCliQa8, ALauncherNamedByItsPath) {
  auto by_path = run_cli({"serve", "--gpu", "a100-80", "--json", "--", "/opt/venv/bin/vllm", "serve",
                          "meta-llama/Meta-Llama-3-8B"});
  auto by_name = run_cli({"serve", "--gpu", "a100-80", "--json", "--", "vllm", "serve", "meta-llama/Meta-Llama-3-8B"});
  ASSERT_EQ(by_path.exit_code, 0) << by_path.err;
  EXPECT_EQ(nlohmann::json::parse(by_path.out)["kv_cache"], nlohmann::json::parse(by_name.out)["kv_cache"]);
}

// --enforce-eager captures no graphs: a --cuda-graph figure is ignored, and the user is told.
TEST(ServeCliQa8, AGraphFigureUnderEnforceEagerIsIgnoredAloud) {
  auto r = run_cli({"serve", "--json", "--gpu", "a100-80", "--cuda-graph", "2GiB", "--", "vllm", "serve",
                    "meta-llama/Meta-Llama-3-8B", "--enforce-eager"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["components"]["cuda_graphs"]["bytes"], 0);
  EXPECT_EQ(doc["components"]["cuda_graphs"]["from_log"], false);
  const auto& warnings = doc["warnings"];
  EXPECT_NE(std::find(warnings.begin(), warnings.end(),
                      "--cuda-graph is ignored: with --enforce-eager vLLM captures no CUDA graphs"),
            warnings.end())
      << warnings.dump();
  auto llama = run_cli({"serve", "--gpu", "3060", "--weights", "1GiB", "--", "llama-server", "-m",
                        testing::fixture_path("gguf/tiny_llama_q8_0.gguf")});
  EXPECT_NE(llama.out.find("--weights is ignored: the overrides size vLLM's profile, not llama.cpp's buffers"),
            std::string::npos)
      << llama.err << llama.out;
}

// The free-memory error quotes the utilization as Python prints the float.
TEST(ServeCliQa8, TheFreeMemoryErrorQuotesAPythonFloat) {
  auto r = run_cli({"serve", "--gpu", "a100-80", "--json", "--", "vllm", "serve", "meta-llama/Meta-Llama-3-8B",
                    "--gpu-memory-utilization", "1.0"});
  const auto doc = nlohmann::json::parse(r.out);
  const std::string message = doc["error"]["message"];
  EXPECT_NE(message.find("is less than desired GPU memory utilization (1.0, "), std::string::npos) << message;
}

// An audio model is multimodal too (vLLM's own examples give Qwen2-Audio --limit-mm-per-prompt audio=5).
TEST(ServeCliQa8, AnAudioModelTakesMultimodalLimits) {
  auto model = parse_model_config(R"({"architectures": ["Qwen2AudioForConditionalGeneration"], "model_type": "qwen2_audio",
    "_name_or_path": "Qwen/Qwen2-Audio-7B-Instruct", "audio_config": {"model_type": "qwen2_audio_encoder"},
    "text_config": {"model_type": "qwen2", "vocab_size": 156032, "hidden_size": 4096, "intermediate_size": 11008,
      "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 8192}})",
                                  "config.json");
  ASSERT_TRUE(model) << model.error().message;
  EXPECT_TRUE(model->is_multimodal);
  ServeInputs in;
  in.model = *model;
  in.target = serve_target_memory(80ull << 30);
  in.config.model = "Qwen/Qwen2-Audio-7B-Instruct";
  in.config.limit_mm_per_prompt = {{"audio", 5}};
  EXPECT_TRUE(analyze_serve(in)) << analyze_serve(in).error().message;
}

TEST(Cli, HelpWithoutACommandIsOomdocsHelp) {
  auto help = run_cli({"help"});
  auto flag = run_cli({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.out, flag.out);
  EXPECT_EQ(help.out.rfind("oomdoc: find out why a GPU ran out of memory", 0), 0u) << help.out;
}

}  // namespace
}  // namespace oomdoc
