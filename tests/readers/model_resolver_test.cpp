#include "readers/model_presets.h"
#include "readers/model_resolver.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model/architecture.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace oomdoc {
namespace {

namespace fs = std::filesystem;

class ResolverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("oomdoc_resolver_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // An empty cache so the bundled presets answer.
    setenv("HF_HUB_CACHE", (dir_ / "hub").c_str(), 1);
    unsetenv("HF_HOME");
    setenv("HOME", dir_.c_str(), 1);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

constexpr const char* kTinyLlama = R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 8,
  "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16, "tie_word_embeddings": true})";
// 10*8 + q,k,v,o 4*64 + mlp 3*8*16 + 2 norms*8 + final 8 = 80 + 256 + 384 + 16 + 8 = 744

TEST_F(ResolverTest, PresetsByIdCaseInsensitiveAliasAndVariant) {
  auto exact = resolve_model("meta-llama/Llama-2-7b-hf");
  ASSERT_TRUE(exact) << exact.error().message;
  EXPECT_EQ(exact->total_params, 6738415616u);
  EXPECT_EQ(exact->source, "preset:presets/llama-2-7b.json");
  EXPECT_EQ(resolve_model("META-LLAMA/llama-2-7B-HF")->id, "meta-llama/Llama-2-7b-hf");
  EXPECT_EQ(resolve_model("llama-2-7b")->id, "meta-llama/Llama-2-7b-hf");
  EXPECT_EQ(resolve_model("google-bert/bert-large-uncased")->total_params, 335141888u);
  EXPECT_EQ(resolve_model("EleutherAI/gpt-j-6b")->total_params, 6050882784u);
  // Instruct / chat variants share the architecture.
  EXPECT_EQ(resolve_model("meta-llama/Llama-2-7b-chat-hf")->id, "meta-llama/Llama-2-7b-chat-hf");  // an alias: shown as typed
  // ... and a variant whose config.json differs is its preset's `variants` entry: own id, own values.
  auto instruct = resolve_model("Qwen/Qwen2.5-7B-Instruct");
  ASSERT_TRUE(instruct) << instruct.error().message;
  EXPECT_EQ(instruct->id, "Qwen/Qwen2.5-7B-Instruct");
  EXPECT_EQ(instruct->source, "preset:presets/qwen2.5-7b.json#Qwen/Qwen2.5-7B-Instruct");
  EXPECT_EQ(instruct->max_position_embeddings, 32768u);
  EXPECT_EQ(instruct->total_params, 7615616512u);   // the base model's architecture
  EXPECT_EQ(resolve_model("qwen2.5-7b-instruct")->max_position_embeddings, 32768u);
  EXPECT_EQ(resolve_model("/models/Qwen2.5-7B-Instruct/")->max_position_embeddings, 32768u);
  EXPECT_EQ(resolve_model("Qwen/Qwen2.5-7B")->max_position_embeddings, 131072u);
  EXPECT_EQ(resolve_model("Qwen/Qwen2.5-72B-Instruct")->max_position_embeddings, 32768u);
  EXPECT_EQ(resolve_model("microsoft/Phi-3-mini-128k-instruct")->max_position_embeddings, 131072u);
  EXPECT_EQ(resolve_model("microsoft/Phi-3-mini-4k-instruct")->max_position_embeddings, 4096u);
  EXPECT_EQ(resolve_model("Qwen/Qwen3-30B-A3B-Instruct-2507")->max_position_embeddings, 262144u);
  EXPECT_EQ(resolve_model("Qwen/Qwen3-30B-A3B")->max_position_embeddings, 40960u);
  EXPECT_EQ(resolve_model("google/gemma-2-9b-it")->id, "google/gemma-2-9b-it");
  EXPECT_EQ(resolve_model("mistralai/Mixtral-8x7B-Instruct-v0.1")->id, "mistralai/Mixtral-8x7B-Instruct-v0.1");
  EXPECT_EQ(resolve_model("mistralai/Mixtral-8x7B-Instruct-v0.1")->source, "preset:presets/mixtral-8x7b.json");
}

// Names typed with spaces find the preset whose words are joined by '-'.
TEST_F(ResolverTest, NamesWithSpacesFindTheirPreset) {
  EXPECT_EQ(resolve_model("mistral 7b")->id, "mistralai/Mistral-7B-v0.1");
  EXPECT_EQ(resolve_model("Llama 3.1 8B")->id, "meta-llama/Llama-3.1-8B");
}

// Suggestions share the family, version and size words first: Llama-3 70B before Llama-2 70B.
TEST_F(ResolverTest, SuggestionsShareFamilyVersionAndSize) {
  EXPECT_EQ(closest_presets("llama-3-70b", 4),
            (std::vector<std::string>{"meta-llama/Meta-Llama-3-70B", "meta-llama/Llama-3.1-70B",
                                      "meta-llama/Llama-3.3-70B-Instruct", "meta-llama/Llama-2-70b-hf"}));
  EXPECT_EQ(closest_presets("llama3-70b", 1), std::vector<std::string>{"meta-llama/Meta-Llama-3-70B"});
  // A release that is not bundled (Qwen2.5-Coder-32B base): the same family and size first.
  EXPECT_EQ(closest_presets("Qwen/Qwen2.5-Coder-32B", 1), std::vector<std::string>{"Qwen/Qwen2.5-32B"});
}

TEST_F(ResolverTest, QuantizedVariantsKeepTheirQuantization) {
  auto fp8 = resolve_model("Qwen/Qwen3-235B-A22B-FP8");
  ASSERT_TRUE(fp8) << fp8.error().message;
  EXPECT_EQ(fp8->quantization, "fp8");
  EXPECT_EQ(fp8->total_params, 235093634560u);
  auto bf16 = resolve_model("Qwen/Qwen3-235B-A22B");
  ASSERT_TRUE(bf16);
  EXPECT_EQ(bf16->quantization, "");
  EXPECT_EQ(resolve_model("deepseek-ai/DeepSeek-R1")->quantization, "fp8");
}

TEST_F(ResolverTest, UnknownNameSuggestsPresets) {
  auto m = resolve_model("meta-llama/Llama-2-7b-hf-typo-xyz");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("not a bundled preset (closest: "), std::string::npos);
  EXPECT_EQ(m.error().message.back(), ')');
  EXPECT_EQ(m.error().message.find("--params"), std::string::npos);  // the estimate command adds it
}

// A variable left in a pasted command (`vllm serve $MODEL`) is said to be one, not matched to presets.
TEST_F(ResolverTest, AShellExpansionIsNoModelName) {
  auto m = resolve_model("${MODEL_PATH}");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message, "${MODEL_PATH}: a shell expansion, not a model name: give the model it stands for");
  EXPECT_FALSE(m.error().unknown_kind);
}

TEST_F(ResolverTest, ConfigFileAndFolderWithSafetensors) {
  fs::path folder = dir_ / "model";
  fs::create_directories(folder);
  std::ofstream(folder / "config.json") << kTinyLlama;
  auto from_file = resolve_model((folder / "config.json").string());
  ASSERT_TRUE(from_file) << from_file.error().message;
  EXPECT_EQ(from_file->total_params, 744u);
  // A checkpoint whose headers hold 750 elements wins over the config's count.
  std::string header = R"({"w": {"dtype": "BF16", "shape": [750], "data_offsets": [0, 1500]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  std::ofstream(folder / "model.safetensors", std::ios::binary) << bytes << header << std::string(1500, '\0');
  auto from_folder = resolve_model(folder.string());
  ASSERT_TRUE(from_folder) << from_folder.error().message;
  EXPECT_EQ(from_folder->total_params, 750u);
  EXPECT_EQ(from_folder->checkpoint_bytes, 1500u);
  EXPECT_EQ(from_folder->params_by_dtype.at("BF16"), 750u);
}

// A checkpoint holding far fewer parameters than its config is missing tensors: a warning (not an
// assumption), and the config's count, which is what loading it builds. Far more is a warning too.
TEST_F(ResolverTest, HeadersAndConfigThatDisagreeAreWarnings) {
  auto write_weights = [&](const fs::path& folder, uint64_t elements) {
    fs::create_directories(folder);
    std::ofstream(folder / "config.json") << kTinyLlama;
    const std::string header =
        fmt::format(R"({{"w": {{"dtype": "BF16", "shape": [{}], "data_offsets": [0, {}]}}}})", elements, elements * 2);
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    std::ofstream(folder / "model.safetensors", std::ios::binary) << bytes << header << std::string(elements * 2, '\0');
  };
  write_weights(dir_ / "partial", 600);
  auto partial = resolve_model((dir_ / "partial").string());
  ASSERT_TRUE(partial) << partial.error().message;
  EXPECT_EQ(partial->total_params, 744u);
  EXPECT_EQ(partial->checkpoint_bytes, 0u);
  ASSERT_EQ(partial->warnings.size(), 1u);
  EXPECT_EQ(partial->warnings[0], (dir_ / "partial").string() +
                                      ": the config implies 744 parameters, the safetensors headers hold 600 (19.4% "
                                      "fewer): tensors are missing from the checkpoint (a partial download or a wrong "
                                      "config?); sized from the config, which is what loading it builds");
  write_weights(dir_ / "doubled", 1488);
  auto doubled = resolve_model((dir_ / "doubled").string());
  ASSERT_TRUE(doubled) << doubled.error().message;
  EXPECT_EQ(doubled->total_params, 744u);   // loading builds the config's model, from one copy
  EXPECT_EQ(doubled->checkpoint_bytes, 0u);
  ASSERT_EQ(doubled->warnings.size(), 1u);
  EXPECT_EQ(doubled->warnings[0], (dir_ / "doubled").string() +
                                      ": the config implies 744 parameters, the safetensors headers hold 1,488 (2.00x): "
                                      "more than the model has (two copies of the weights in the folder?); sized from "
                                      "the config, which is what loading it builds");
  // Within the margins (an extra head, multi-token-prediction layers): a note, as before.
  write_weights(dir_ / "close", 740);
  auto close = resolve_model((dir_ / "close").string());
  ASSERT_TRUE(close);
  EXPECT_TRUE(close->warnings.empty());
  EXPECT_EQ(close->total_params, 740u);
}

// A tied model whose checkpoint also stores lm_head.weight (Qwen3-0.6B does) is counted without the
// copy: loading ties it to the embeddings.
TEST_F(ResolverTest, AStoredCopyOfATiedHeadIsNotCounted) {
  fs::path folder = dir_ / "tied";
  fs::create_directories(folder);
  std::ofstream(folder / "config.json") << kTinyLlama;
  // The 744 parameters (embed_tokens 10 x 8 among them) and the head's copy, 10 x 8 more.
  const std::string header = R"({"model": {"dtype": "BF16", "shape": [744], "data_offsets": [0, 1488]},)"
                             R"( "lm_head.weight": {"dtype": "BF16", "shape": [10, 8], "data_offsets": [1488, 1648]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  std::ofstream(folder / "model.safetensors", std::ios::binary) << bytes << header << std::string(1648, '\0');
  auto model = resolve_model(folder.string());
  ASSERT_TRUE(model) << model.error().message;
  EXPECT_EQ(model->total_params, 744u);
  EXPECT_EQ(model->checkpoint_bytes, 1488u);
  EXPECT_EQ(model->params_by_dtype.at("BF16"), 744u);
  EXPECT_TRUE(model->warnings.empty());
  EXPECT_NE(std::find(model->notes.begin(), model->notes.end(),
                      "the checkpoint stores a copy of the tied output head (lm_head.weight, 80 parameters); loading "
                      "ties it to the embeddings, so it is not counted"),
            model->notes.end());
}

// A folder whose config has no _name_or_path (or a local path there) has no id; it is named by
// its folder.
TEST_F(ResolverTest, ALocalConfigWithoutAnIdIsNamedByItsFolder) {
  fs::path folder = dir_ / "my-finetune";
  fs::create_directories(folder);
  std::ofstream(folder / "config.json") << kTinyLlama;
  auto m = resolve_model(folder.string() + "/");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->id, "");
  EXPECT_EQ(m->label(), "my-finetune");
  auto file = resolve_model((folder / "config.json").string());
  ASSERT_TRUE(file);
  EXPECT_EQ(file->label(), "my-finetune");
  std::string with_path = kTinyLlama;
  with_path.insert(1, R"("_name_or_path": "/data/out/checkpoint-500", )");
  std::ofstream(folder / "config.json") << with_path;
  EXPECT_EQ(resolve_model(folder.string())->id, "");
  std::string with_id = kTinyLlama;
  with_id.insert(1, R"("_name_or_path": "acme/tiny", )");
  std::ofstream(folder / "config.json") << with_id;
  EXPECT_EQ(resolve_model(folder.string())->label(), "acme/tiny");
}

TEST(ModelNames, PathsAndIds) {
  for (const char* path : {"/data/x", "./x", "../x", "~/models/x", ".", "models/org/x", "org/name/", "C:\\models\\x"}) {
    EXPECT_TRUE(looks_like_path(path)) << path;
  }
  for (const char* id : {"meta-llama/Llama-2-7b-hf", "llama-2-7b", "mistral 7b", "Qwen/Qwen2.5-7B-Instruct", ""}) {
    EXPECT_FALSE(looks_like_path(id)) << id;
  }
}

// A path that does not exist here is sized as the bundled preset its last component names, with a
// warning saying so; without one it is "no such file or folder" (not a suggestion of presets).
TEST_F(ResolverTest, AMissingPathIsSizedAsItsPresetLoudly) {
  auto cluster = resolve_model("/nonexistent-oomdoc/models/Llama-3.1-8B-Instruct");
  ASSERT_TRUE(cluster) << cluster.error().message;
  EXPECT_EQ(cluster->id, "meta-llama/Llama-3.1-8B-Instruct");
  EXPECT_EQ(cluster->source, "preset:presets/llama-3.1-8b.json");
  ASSERT_EQ(cluster->warnings.size(), 1u);
  EXPECT_EQ(cluster->warnings[0], "/nonexistent-oomdoc/models/Llama-3.1-8B-Instruct: no such folder here; sized as "
                                  "the bundled preset meta-llama/Llama-3.1-8B-Instruct");
  auto relative = resolve_model("./llama-2-7b");
  ASSERT_TRUE(relative);
  EXPECT_EQ(relative->id, "meta-llama/Llama-2-7b-hf");
  EXPECT_EQ(relative->warnings,
            std::vector<std::string>{"./llama-2-7b: no such folder here; sized as the bundled preset meta-llama/Llama-2-7b-hf"});
  auto variant = resolve_model("/models/Qwen2.5-7B-Instruct/");
  ASSERT_TRUE(variant);
  EXPECT_EQ(variant->id, "Qwen/Qwen2.5-7B-Instruct");
  EXPECT_EQ(variant->warnings.size(), 1u);
  auto unknown = resolve_model("/nonexistent-oomdoc/models/my-finetune-v3");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message, "/nonexistent-oomdoc/models/my-finetune-v3: no such file or folder");
  EXPECT_FALSE(unknown.error().unknown_kind);
  EXPECT_EQ(resolve_model("./nonexistent-oomdoc/").error().message, "./nonexistent-oomdoc/: no such file or folder");
  // A Hugging Face id is not a path: no warning.
  EXPECT_TRUE(resolve_model("meta-llama/Llama-3.1-8B-Instruct")->warnings.empty());
}

// Only "not found anywhere" and "an architecture oomdoc does not model" let estimate offer --params.
TEST_F(ResolverTest, UnknownKindSetOnlyWhenTheModelIsNotKnown) {
  EXPECT_TRUE(resolve_model("no-such-model-xyz").error().unknown_kind);
  fs::path folder = dir_ / "kinds";
  fs::create_directories(folder);
  std::ofstream(folder / "config.json") << R"({"model_type": "mamba-xyz", "hidden_size": 8})";
  auto unknown_type = resolve_model(folder.string());
  ASSERT_FALSE(unknown_type);
  EXPECT_TRUE(unknown_type.error().unknown_kind) << unknown_type.error().message;
  std::ofstream(folder / "config.json") << R"({"model_type": "llama", "hidden_size": "8"})";
  auto malformed = resolve_model(folder.string());
  ASSERT_FALSE(malformed);
  EXPECT_FALSE(malformed.error().unknown_kind) << malformed.error().message;
}

TEST_F(ResolverTest, HuggingFaceCacheSnapshot) {
  fs::path repo = dir_ / "hub" / "models--acme--tiny";
  fs::create_directories(repo / "snapshots" / "abc123");
  fs::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << "abc123\n";
  std::ofstream(repo / "snapshots" / "abc123" / "config.json") << kTinyLlama;
  auto m = resolve_model("acme/tiny");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->total_params, 744u);
  EXPECT_EQ(m->source, "hf-cache:" + (repo / "snapshots" / "abc123").string());
}

// refs/main names the revision the hub client loads: when its config.json is a broken link (an
// interrupted download) the older snapshot beside it is not sized silently; without a ref the newest
// snapshot with a config is.
TEST_F(ResolverTest, HuggingFaceCacheBrokenCurrentSnapshotIsAnError) {
  fs::path repo = dir_ / "hub" / "models--acme--tiny";
  fs::create_directories(repo / "snapshots" / "aaa");
  fs::create_directories(repo / "snapshots" / "bbb");
  std::ofstream(repo / "snapshots" / "aaa" / "config.json") << kTinyLlama;
  fs::create_symlink("../../blobs/missing", repo / "snapshots" / "bbb" / "config.json");
  fs::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << "bbb\n";
  auto broken = resolve_model("acme/tiny");
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().message,
            "acme/tiny: " + (repo / "snapshots" / "bbb" / "config.json").string() +
                " (the Hugging Face cache's current snapshot, refs/main) is a broken link, its blob missing: an "
                "interrupted download; fetch it again (huggingface-cli download acme/tiny)");
  // A current snapshot of other files only (a tokenizer fetched alone) is looked past.
  fs::remove(repo / "snapshots" / "bbb" / "config.json");
  std::ofstream(repo / "snapshots" / "bbb" / "tokenizer_config.json") << "{}";
  auto tokenizer_only = resolve_model("acme/tiny");
  ASSERT_TRUE(tokenizer_only) << tokenizer_only.error().message;
  EXPECT_EQ(tokenizer_only->source, "hf-cache:" + (repo / "snapshots" / "aaa").string());
  // refs/main written, its snapshot never fetched: an interrupted download too.
  std::ofstream(repo / "refs" / "main", std::ios::trunc) << "ccc\n";
  auto absent = resolve_model("acme/tiny");
  ASSERT_FALSE(absent);
  EXPECT_EQ(absent.error().message, "acme/tiny: the Hugging Face cache's refs/main names snapshot ccc, which is not "
                                    "there: an interrupted download; fetch it again (huggingface-cli download acme/tiny)");
  fs::remove(repo / "refs" / "main");
  auto newest = resolve_model("acme/tiny");
  ASSERT_TRUE(newest) << newest.error().message;
  EXPECT_EQ(newest->source, "hf-cache:" + (repo / "snapshots" / "aaa").string());
}

TEST_F(ResolverTest, ParamCountGivesALlamaShape) {
  auto m = model_from_param_count(7'000'000'000);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->total_params, 7'000'000'000u);
  EXPECT_EQ(m->hidden_size, 4096u);
  // The picked depth makes the shape's own count land within one layer of the given count.
  ParamCount shape = count_parameters(*m);
  EXPECT_NEAR(static_cast<double>(shape.total), 7e9, 0.2e9);
  ShapeHints hints;
  hints.hidden_size = 5120;
  hints.num_layers = 40;
  auto shaped = model_from_param_count(13'000'000'000, hints);
  ASSERT_TRUE(shaped);
  EXPECT_EQ(shaped->num_layers, 40u);
  EXPECT_EQ(shaped->num_attention_heads, 40u);
  EXPECT_FALSE(model_from_param_count(0));
  // A count below half the smallest derived shape (78,384,128) stands for no model it can derive.
  auto tiny = model_from_param_count(125'000);
  ASSERT_FALSE(tiny);
  EXPECT_EQ(tiny.error().message, "--params 125.0K: fewer parameters than the smallest shape oomdoc derives (78,384,128: "
                                  "hidden 1024, 1 layer, vocab 32000); give the shape too (--hidden-size, --layers, "
                                  "--vocab-size) or the model itself");
  EXPECT_TRUE(model_from_param_count(125'000'000));
}

// Shape flags go through the same validate_shape as config files, before anything divides by
// them: --heads 0 used to end in SIGFPE, --layers 0 in a made-up estimate.
TEST_F(ResolverTest, ParamCountShapeFlagsAreCheckedBeforeUse) {
  auto error_with = [](auto set) {
    ShapeHints hints;
    set(hints);
    auto m = model_from_param_count(7'000'000'000, hints);
    return m ? std::string("<ok>") : m.error().message;
  };
  EXPECT_EQ(error_with([](ShapeHints& h) { h.num_attention_heads = 0; }), "--params: --heads is 0");
  EXPECT_EQ(error_with([](ShapeHints& h) { h.num_kv_heads = 0; }), "--params: --kv-heads is 0");
  EXPECT_EQ(error_with([](ShapeHints& h) { h.hidden_size = 0; }), "--params: --hidden-size is 0");
  EXPECT_EQ(error_with([](ShapeHints& h) { h.num_layers = 0; }), "--params: --layers is 0");
  EXPECT_EQ(error_with([](ShapeHints& h) { h.vocab_size = 0; }), "--params: --vocab-size is 0");
  EXPECT_EQ(error_with([](ShapeHints& h) { h.intermediate_size = 0; }), "--params: --intermediate-size is 0");
  EXPECT_EQ(error_with([](ShapeHints& h) { h.num_attention_heads = 3; }),
            "--params: --hidden-size 4096 is not a multiple of --heads 3");
  EXPECT_EQ(error_with([](ShapeHints& h) { h.num_kv_heads = 5; }), "--params: --heads 32 is not a multiple of --kv-heads 5 (--heads was not given: derived from "
            "--params; pass --heads)");
  EXPECT_EQ(error_with([](ShapeHints& h) { h.num_kv_heads = 64; }), "--params: --heads 32 is not a multiple of --kv-heads 64 (--heads was not given: derived from "
            "--params; pass --heads)");
  EXPECT_EQ(error_with([](ShapeHints& h) { h.num_layers = 100000; }),
            "--params: --layers 100000 is implausibly large (limit 4096)");
}

}  // namespace
}  // namespace oomdoc
