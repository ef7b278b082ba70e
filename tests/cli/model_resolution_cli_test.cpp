// End-to-end: how estimate, fit and serve read and name the model they are given (a folder, a
// path that is not here, a preset), and what they say when the files are incomplete or wrong.
// Fixtures: tests/fixtures/models (written by its make_fixtures.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "support/test_support.h"

namespace oomdoc {
namespace {

using testing::fixture_path;
using testing::run_cli;

const std::vector<std::string> kEnv = [] {
  auto env = testing::kNoModelCache;
  env.push_back("NO_COLOR=1");
  return env;
}();

bool has(const nlohmann::json& list, const std::string& text) {
  return std::find(list.begin(), list.end(), text) != list.end();
}

// Shard 1 of 2 with no index: the same one-line error as with the index, naming the missing file.
TEST(ModelResolutionCli, AnIncompleteShardSetIsAnError) {
  const std::string folder = fixture_path("models/shard_missing");
  auto r = run_cli({"estimate", folder}, "", kEnv);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "oomdoc: " + folder + "/model-00002-of-00002.safetensors: missing (the shard names say 2 files, 1 is "
                   "here): an incomplete download?\n");
  const std::string indexed = fixture_path("models/shard_missing_index");
  auto i = run_cli({"estimate", indexed}, "", kEnv);
  EXPECT_EQ(i.exit_code, 2);
  EXPECT_EQ(i.err, "oomdoc: " + indexed + "/model-00002-of-00002.safetensors: missing (model.safetensors.index.json "
                   "lists 2 files, 1 is here): an incomplete download?\n");
  auto served = run_cli({"serve", "--gpu", "h100", "--", "vllm", "serve", folder}, "", kEnv);
  EXPECT_EQ(served.exit_code, 2);
  EXPECT_EQ(served.err, "oomdoc: serve: " + folder + "/model-00002-of-00002.safetensors: missing (the shard names say 2 "
                        "files, 1 is here): an incomplete download?\n");
}

// A malformed file's fix is the file: no "or pass --params"; an unknown dtype names file and tensor.
TEST(ModelResolutionCli, MalformedWeightsNameTheFileWithoutOfferingParams) {
  const std::string too_long = fixture_path("models/header_too_long");
  auto r = run_cli({"estimate", too_long}, "", kEnv);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "oomdoc: " + too_long + "/model.safetensors: header length 1099511627776 is larger than the file "
                   "(1556 bytes)\n");
  const std::string dtype = fixture_path("models/unknown_dtype");
  auto d = run_cli({"estimate", dtype}, "", kEnv);
  EXPECT_EQ(d.exit_code, 2);
  EXPECT_EQ(d.err, "oomdoc: " + dtype + "/model.safetensors: tensor \"model.embed_tokens.weight\": unknown dtype "
                   "\"BF17\" (the safetensors dtypes: BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, "
                   "I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64)\n");
}

// Headers holding 600 of the config's 744 parameters: a warning in the text and in JSON, and the
// estimate sized from the config.
TEST(ModelResolutionCli, APartialCheckpointIsAWarning) {
  const std::string folder = fixture_path("models/partial_checkpoint");
  const std::string warning = folder + ": the config implies 744 parameters, the safetensors headers hold 600 (19.4% "
                              "fewer): tensors are missing from the checkpoint (a partial download or a wrong "
                              "config?); sized from the config, which is what loading it builds";
  auto r = run_cli({"estimate", folder, "--task", "inference", "--json"}, "", kEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["model"]["total_params"], 744);
  EXPECT_TRUE(has(doc["warnings"], warning)) << doc["warnings"].dump();
  auto text = run_cli({"estimate", folder, "--task", "inference"}, "", kEnv);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("\nwarning: " + warning + "\n"), std::string::npos) << text.out;
}

// No _name_or_path: JSON model.id is null and model.name the folder's name; the text names it by
// its folder; fit prints no empty "model config" line.
TEST(ModelResolutionCli, AFolderWithoutAnIdIsNamedByTheFolder) {
  const std::string folder = fixture_path("models/unnamed_checkpoint");
  auto r = run_cli({"estimate", folder, "--task", "inference", "--json"}, "", kEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_TRUE(doc["model"]["id"].is_null());
  EXPECT_EQ(doc["model"]["name"], "unnamed_checkpoint");
  EXPECT_EQ(doc["model"]["source"], folder);
  auto text = run_cli({"estimate", folder, "--task", "inference"}, "", kEnv);
  EXPECT_EQ(text.out.rfind("unnamed_checkpoint (744 params, " + folder + ")\n", 0), 0u) << text.out;
  auto fit = run_cli({"fit", folder, "--gpu", "h100", "--task", "inference"}, "", kEnv);
  EXPECT_EQ(fit.exit_code, 0) << fit.err;
  EXPECT_EQ(fit.out.find("model config:"), std::string::npos) << fit.out;
  EXPECT_EQ(fit.out.rfind(folder + " on ", 0), 0u) << fit.out;
  auto fit_json = run_cli({"fit", folder, "--gpu", "h100", "--task", "inference", "--json"}, "", kEnv);
  auto fit_doc = nlohmann::json::parse(fit_json.out);
  EXPECT_EQ(fit_doc["model"], folder);
  EXPECT_TRUE(fit_doc["model_config"].is_null());
}

// A path from another machine: sized as the preset its name matches, with a warning; otherwise a
// one-line "no such file or folder".
TEST(ModelResolutionCli, AMissingPathIsSizedAsItsPresetWithAWarning) {
  const std::string path = "/nonexistent-oomdoc/models/Llama-3.1-8B-Instruct";
  const std::string warning = path + ": no such folder here; sized as the bundled preset meta-llama/Llama-3.1-8B-Instruct";
  auto r = run_cli({"estimate", path, "--task", "inference", "--json"}, "", kEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["model"]["id"], "meta-llama/Llama-3.1-8B-Instruct");
  EXPECT_EQ(doc["model"]["total_params"], 8030261248ull);
  EXPECT_TRUE(has(doc["warnings"], warning)) << doc["warnings"].dump();
  auto text = run_cli({"estimate", path, "--task", "inference"}, "", kEnv);
  EXPECT_NE(text.out.find("\nwarning: " + warning + "\n"), std::string::npos) << text.out;

  auto served = run_cli({"serve", "--gpu", "h100", "--json", "--", "vllm", "serve", path, "--max-model-len", "8192"}, "", kEnv);
  ASSERT_EQ(served.exit_code, 0) << served.err;
  auto serve_doc = nlohmann::json::parse(served.out);
  EXPECT_EQ(serve_doc["model"]["id"], path);
  EXPECT_EQ(serve_doc["model"]["source"], "meta-llama/Llama-3.1-8B-Instruct (preset:presets/llama-3.1-8b.json)");
  EXPECT_EQ(serve_doc["warnings"][0], "--gpu 'h100' is read as H100 SXM 80GB; it also names H100 NVL 94GB (give the "
                                      "size, e.g. --gpu 'H100 NVL 94GB')");
  EXPECT_EQ(serve_doc["warnings"][1], warning);
  auto served_text = run_cli({"serve", "--gpu", "h100", "--", "vllm", "serve", path, "--max-model-len", "8192"}, "", kEnv);
  EXPECT_NE(served_text.out.find("warning: " + warning + "\n"), std::string::npos) << served_text.out;

  // An Axolotl config whose base_model is a path on the training cluster.
  auto axolotl = run_cli({"estimate", fixture_path("models/axolotl_missing_base_model.yml"), "--json"}, "", kEnv);
  ASSERT_EQ(axolotl.exit_code, 0) << axolotl.err;
  auto axolotl_doc = nlohmann::json::parse(axolotl.out);
  EXPECT_TRUE(has(axolotl_doc["warnings"], "/nonexistent-oomdoc/models/llama3-8b: no such folder here; sized as the "
                                           "bundled preset meta-llama/Meta-Llama-3-8B"))
      << axolotl_doc["warnings"].dump();

  auto missing = run_cli({"estimate", "./no-such-model-xyz"}, "", kEnv);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "oomdoc: ./no-such-model-xyz: no such file or folder\n");
}

// Rope-scaled configs warn against their scaled context: Llama 3.1's 131072 (llama3 scaling is
// already in max_position_embeddings), YaRN's original length x factor.
TEST(ModelResolutionCli, LengthsBeyondARopeScaledContextWarn) {
  auto llama = run_cli({"estimate", "meta-llama/Llama-3.1-8B", "--seq-len", "200000", "--json"}, "", kEnv);
  ASSERT_EQ(llama.exit_code, 0) << llama.err;
  EXPECT_TRUE(has(nlohmann::json::parse(llama.out)["warnings"],
                  "200000 tokens per sequence is above the model's context of 131072 (max_position_embeddings 131072 "
                  "with llama3 rope scaling 8): it was not trained for that length"))
      << llama.out;
  auto within = run_cli({"estimate", "meta-llama/Llama-3.1-8B", "--seq-len", "131072", "--json"}, "", kEnv);
  EXPECT_TRUE(nlohmann::json::parse(within.out)["warnings"].empty()) << within.out;
  const std::string yarn = fixture_path("models/yarn_context");
  auto inside = run_cli({"estimate", yarn, "--seq-len", "8192", "--json"}, "", kEnv);
  ASSERT_EQ(inside.exit_code, 0) << inside.err;
  EXPECT_TRUE(nlohmann::json::parse(inside.out)["warnings"].empty()) << inside.out;
  auto beyond = run_cli({"estimate", yarn, "--seq-len", "9000", "--json"}, "", kEnv);
  EXPECT_TRUE(has(nlohmann::json::parse(beyond.out)["warnings"],
                  "9000 tokens per sequence is above the model's context of 8192 (max_position_embeddings 2048 with "
                  "yarn rope scaling 4): it was not trained for that length"))
      << beyond.out;
  // Without rope scaling, the wording stays.
  auto qwen = run_cli({"estimate", "Qwen/Qwen3-8B", "--seq-len", "100000", "--json"}, "", kEnv);
  EXPECT_TRUE(has(nlohmann::json::parse(qwen.out)["warnings"],
                  "100000 tokens per sequence is above the model's context of 40960 (max_position_embeddings): it was "
                  "not trained for that length"))
      << qwen.out;
}

// Names: what the user typed (an alias that is a Hugging Face id) is what errors and output show.
TEST(ModelResolutionCli, TheModelIsNamedAsMatched) {
  auto gemma = run_cli({"estimate", "google/gemma-3-27b-pt", "--task", "inference", "--json"}, "", kEnv);
  ASSERT_EQ(gemma.exit_code, 0) << gemma.err;
  EXPECT_EQ(nlohmann::json::parse(gemma.out)["model"]["id"], "google/gemma-3-27b-pt");
  // An error about the model names what the user typed, not the preset behind it.
  auto r1 = run_cli({"estimate", "deepseek-ai/DeepSeek-R1"}, "", kEnv);
  EXPECT_EQ(r1.exit_code, 2);
  EXPECT_EQ(r1.err, "oomdoc: deepseek-ai/DeepSeek-R1: an FP8 checkpoint (fp8); transformers cannot train over it (the "
                    "Trainer refuses: \"quantized with fp8 but that quantization method do not support training\"): "
                    "load it dequantized (FineGrainedFP8Config(dequantize=True)) or start from the 16-bit model\n");
  auto nemo = run_cli({"estimate", "mistralai/Mistral-Nemo-Instruct-2407", "--task", "inference", "--json"}, "", kEnv);
  ASSERT_EQ(nemo.exit_code, 0) << nemo.err;
  EXPECT_EQ(nlohmann::json::parse(nemo.out)["model"]["total_params"], 12247782400ull);
}

}  // namespace
}  // namespace oomdoc
