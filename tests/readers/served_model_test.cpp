// The model a vLLM command line names: quantized checkpoints fall back to their base model, and
// models with Mamba / linear-attention layers are refused rather than sized as plain transformers.
#include "readers/served_model.h"

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace oomdoc {
namespace {

TEST(ServedModel, RefusesJambaWithItsReason) {
  std::string dir = testing::fixture_path("serve/jamba-v0.1");
  auto m = resolve_served_model(dir);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message,
            dir + "/config.json: model_type \"jamba\" has Mamba or linear-attention layers; vLLM keeps a "
                  "fixed-size recurrent state per request for those layers (MambaSpec, page size unified "
                  "with the attention layers) and oomdoc serve does not size it yet");
}

TEST(ServedModel, RefusesQwen3NextGivenAsItsConfigFile) {
  std::string file = testing::fixture_path("serve/qwen3-next-80b-a3b/config.json");
  auto m = resolve_served_model(file);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message.rfind(file + ": model_type \"qwen3_next\" has Mamba or linear-attention layers;", 0), 0u)
      << m.error().message;
}

TEST(ServedModel, RecognisesStateLayersByTheirConfigKeys) {
  // Granite 4.0 hybrids list their layers; Nemotron-H spells them as a pattern.
  EXPECT_EQ(unsupported_state_layers(R"({"model_type": "custom", "layer_types": ["mamba", "attention"]})"),
            "its layer_types include \"mamba\"");
  EXPECT_EQ(unsupported_state_layers(R"({"model_type": "custom", "hybrid_override_pattern": "M-M*-"})"),
            "its config has \"hybrid_override_pattern\" (Mamba or linear-attention layers)");
  EXPECT_EQ(unsupported_state_layers(R"({"model_type": "x", "text_config": {"model_type": "qwen3_5"}})"),
            "model_type \"qwen3_5\" has Mamba or linear-attention layers");
  // Sliding-window layer kinds are attention, which serve sizes.
  EXPECT_EQ(unsupported_state_layers(R"({"model_type": "gemma3_text", "layer_types": ["sliding_attention", "full_attention"]})"),
            std::nullopt);
  EXPECT_EQ(unsupported_state_layers("not json"), std::nullopt);
}

TEST(ServedModel, QuantizedNameFallsBackToTheBaseModel) {
  auto m = resolve_served_model("Qwen/Qwen2.5-7B-Instruct-AWQ");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->spec.num_layers, 28u);
  EXPECT_TRUE(m->spec.quantization.empty());
  EXPECT_NE(m->note.find("was not found; sized as its base model"), std::string::npos) << m->note;
}

// estimate and fit read a quantized checkpoint's name as its base model with the format the name
// says; the outermost suffix decides ("-AWQ-INT4" is AWQ, not GPTQ's "-int4").
TEST(ServedModel, CheckpointNameCarriesItsQuantizationForEstimate) {
  struct Case {
    const char* name;
    const char* base;
    const char* method;
    uint64_t bits;
    uint64_t group;
  };
  for (const Case& c : {Case{"unsloth/llama-3-8b-bnb-4bit", "meta-llama/Meta-Llama-3-8B", "bitsandbytes", 4, 64},
                        Case{"TheBloke/Llama-2-7B-Chat-AWQ", "meta-llama/Llama-2-7b-hf", "awq", 4, 128},
                        Case{"hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "meta-llama/Meta-Llama-3.1-8B-Instruct", "awq", 4, 128},
                        Case{"TheBloke/Llama-2-13B-GPTQ", "meta-llama/Llama-2-13b", "gptq", 4, 128},
                        Case{"neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "meta-llama/Meta-Llama-3.1-8B-Instruct", "fp8", 8, 0}}) {
    auto m = resolve_checkpoint_name(c.name);
    ASSERT_TRUE(m.ok()) << c.name << ": " << m.error().message;
    // The model is the named checkpoint; its source says which base model gave the shape.
    EXPECT_EQ(m->id, c.name);
    EXPECT_EQ(m->base_model_id, c.base);
    EXPECT_EQ(m->source.rfind("preset:presets/", 0), 0u) << m->source;
    EXPECT_EQ(m->quantization, c.method) << c.name;
    EXPECT_EQ(m->quantization_bits, c.bits) << c.name;
    EXPECT_EQ(m->quantization_group_size, c.group) << c.name;
    // Unsloth's bnb-4bit uploads quantize the absmax again (bnb_4bit_use_double_quant: true).
    EXPECT_EQ(m->quantization_double_quant, std::string(c.method) == "bitsandbytes") << c.name;
    ASSERT_FALSE(m->notes.empty());
    EXPECT_NE(m->notes.back().find(std::string("'") + c.name + "' was not found: read as its base model"), std::string::npos)
        << m->notes.back();
  }
  // A bundled model is read as it is, and a name that is neither fails as resolve_model does.
  auto plain = resolve_checkpoint_name("meta-llama/Llama-2-7b-hf");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->quantization.empty());
  auto unknown = resolve_checkpoint_name("nobody/no-such-model-AWQ");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("nobody/no-such-model-AWQ: not a file or folder"), std::string::npos)
      << unknown.error().message;
}

// A folder whose config.json has no _name_or_path (a VLM's text_config here) is named by the
// path given, not by an empty id ("model config:  (path)", "'s context of ...").
TEST(ServedModel, LocalFolderWithoutANameIsNamedByItsPath) {
  const std::string folder = testing::fixture_path("serve/gemma-3-27b-it");
  auto m = resolve_served_model(folder);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->spec.id, folder);
  EXPECT_EQ(m->spec.num_layers, 62u);
}

// nvidia's ModelOpt checkpoints carry kv_cache_quant_algo, which vLLM's --kv-cache-dtype auto
// takes (resolve_kv_cache_dtype_string / get_kv_cache_quant_algo_string).
TEST(ServedModel, ModelOptCheckpointsGiveTheirKvCacheDtype) {
  EXPECT_EQ(modelopt_kv_cache_dtype(R"({"producer": {"name": "modelopt"},
                                        "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}})"),
            "fp8_e4m3");
  EXPECT_EQ(modelopt_kv_cache_dtype(R"({"producer": {"name": "modelopt"},
                                        "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "NVFP4"}})"),
            "nvfp4");
  EXPECT_EQ(modelopt_kv_cache_dtype(R"({"quant_method": "modelopt",
                                        "kv_cache_scheme": {"num_bits": 8, "type": "float", "dynamic": false}})"),
            "fp8_e4m3");
  EXPECT_EQ(modelopt_kv_cache_dtype(R"({"quant_method": "modelopt", "kv_cache_scheme": {"num_bits": 8, "type": "int"}})"),
            std::nullopt);
  // Not ModelOpt's, no directive, hostile types, not JSON: no KV dtype, no exception.
  EXPECT_EQ(modelopt_kv_cache_dtype(R"({"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float", "dynamic": false}})"),
            std::nullopt);
  EXPECT_EQ(modelopt_kv_cache_dtype(R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}})"),
            std::nullopt);
  EXPECT_EQ(modelopt_kv_cache_dtype(R"({"producer": {"name": "modelopt"}, "quantization": {"kv_cache_quant_algo": 5}})"),
            std::nullopt);
  EXPECT_EQ(modelopt_kv_cache_dtype(R"({"producer": "modelopt", "quant_method": 7})"), std::nullopt);
  EXPECT_EQ(modelopt_kv_cache_dtype("not json"), std::nullopt);

  const std::string folder = testing::fixture_path("serve/llama-3.1-8b-instruct-fp8-modelopt");
  auto m = resolve_served_model(folder);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->checkpoint_kv_cache_dtype, "fp8_e4m3");
  EXPECT_EQ(m->checkpoint_kv_cache_source, folder + "/hf_quant_config.json");
  EXPECT_EQ(m->spec.quantization, "modelopt");   // quant_algo FP8 from the sidecar
  EXPECT_EQ(m->spec.id, "nvidia/Llama-3.1-8B-Instruct-FP8");
}

}  // namespace
}  // namespace oomdoc
