#include "model/architecture.h"

#include <gtest/gtest.h>

#include "readers/model_presets.h"

namespace oomdoc {
namespace {

ModelSpec preset(const std::string& id) {
  auto spec = find_preset(id);
  EXPECT_TRUE(spec && spec->ok()) << id;
  return spec->value();
}

std::vector<std::string> names(const ModelSpec& m) {
  std::vector<std::string> out;
  for (const auto& l : linear_layers(m)) out.push_back(l.name);
  return out;
}

TEST(Architecture, LinearNamesFollowTheHuggingFaceModules) {
  EXPECT_EQ(names(preset("meta-llama/Llama-2-7b-hf")),
            (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}));
  EXPECT_EQ(names(preset("gpt2")), (std::vector<std::string>{"c_attn", "c_proj", "c_fc", "c_proj"}));
  EXPECT_EQ(names(preset("EleutherAI/gpt-neox-20b")),
            (std::vector<std::string>{"query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"}));
  EXPECT_EQ(names(preset("microsoft/Phi-3-mini-4k-instruct")),
            (std::vector<std::string>{"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}));
  EXPECT_EQ(names(preset("mixtral-8x7b")),
            (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "w1", "w3", "w2"}));
}

TEST(Architecture, GqaShapes) {
  // Llama-3-8B: 32 query heads, 8 kv heads of 128.
  auto linears = linear_layers(preset("meta-llama/Meta-Llama-3-8B"));
  EXPECT_EQ(linears[1].name, "k_proj");
  EXPECT_EQ(linears[1].in_features, 4096u);
  EXPECT_EQ(linears[1].out_features, 1024u);
  EXPECT_EQ(linears[1].layers, 32u);
}

TEST(Architecture, MixtureOfExpertsCountsEveryExpert) {
  ModelSpec m = preset("Qwen/Qwen3-30B-A3B");
  uint64_t experts = 0;
  for (const auto& l : linear_layers(m)) {
    if (l.expert) experts += l.params();
  }
  EXPECT_EQ(experts, 128ull * 3 * 2048 * 768 * 48);
}

// gpt-oss (transformers modeling_gpt_oss.py), counted by hand from the 20b config:
//   attention  q 2880x4096+4096, k and v 2880x512+512, o 4096x2880+2880   26,550,080
//   sinks      64 heads                                                        64
//   router     2880x32 + 32 (GptOssTopKRouter weight and bias)                92,192
//   experts    32 x (2880x5760 + 5760 + 2880x2880 + 2880)               796,538,880
//   norms      2 x 2880                                                     5,760
//   per layer                                                         823,186,976 x 24 layers
//   embed_tokens and the untied lm_head 201088 x 2880 each, final norm 2880
// = 20,914,757,184 (the model card: 20.91B; 120b with 36 layers of 128 experts: 116.83B).
// OpenAI's cookbook LoRA run (r 8, target_modules "all-linear" plus target_parameters on the
// experts of layers 7, 15, 23) prints "all params: 20,929,797,696" = 20,914,757,184 + its
// 15,040,512 trainable ones, of which all-linear's q/k/v/o are 24 x 8 x 20,736 = 3,981,312.
TEST(Architecture, GptOssCountsSinksRouterBiasAndExpertBiases) {
  ModelSpec m = preset("openai/gpt-oss-20b");
  ParamCount c = count_parameters(m);
  EXPECT_EQ(c.embeddings, 579133440u);
  EXPECT_EQ(c.lm_head, 579133440u);
  EXPECT_EQ(c.linear, 24ull * (26550080 + 796538880));
  EXPECT_EQ(c.norms, 24u * 5760u + 2880u);
  EXPECT_EQ(c.other, 24u * (92192u + 64u));
  EXPECT_EQ(c.total, 20914757184u);
  EXPECT_EQ(c.largest_layer, 823186976u);
  EXPECT_EQ(names(m), (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj", "down_proj"}));
  EXPECT_EQ(expert_weight_params(m), 24ull * 32 * (2880 * 5760 + 2880 * 2880));
  EXPECT_EQ(preset("gpt-oss-120b").total_params, 116829156672u);
  // The experts are 3-D nn.Parameters, not nn.Linear: PEFT's all-linear reaches q, k, v, o only.
  LoraSettings all;
  all.r = 8;
  all.all_linear = true;
  EXPECT_EQ(lora_parameter_count(m, all), 3981312u);
  LoraSettings experts;
  experts.r = 8;
  experts.target_modules = {"gate_up_proj", "mlp"};
  EXPECT_EQ(lora_parameter_count(m, experts), 0u);
}

TEST(Architecture, DeepSeekV3LargestBlockIsAMoeBlock) {
  ModelSpec m = preset("deepseek-ai/DeepSeek-V3");
  // Attention 187,107,328 + norms 16,384... the MoE block is ~11.5B parameters.
  EXPECT_GT(m.largest_layer_params, 11'000'000'000u);
  EXPECT_LT(m.largest_layer_params, 12'000'000'000u);
}

// LoRA counts against the trainable-parameter figures the sources printed (PEFT's
// MetaMathQA benchmark, LitGPT's lora.py), quoted in ../shared/data/measured-memory/dev.jsonl.
TEST(Architecture, LoraParameterCountsMatchPublishedTrainableCounts) {
  LoraSettings qv;
  qv.r = 32;
  qv.target_modules = {"q_proj", "v_proj"};
  EXPECT_EQ(lora_parameter_count(preset("meta-llama/Llama-3.2-3B"), qv), 9175040u);
  qv.r = 64;
  EXPECT_EQ(lora_parameter_count(preset("meta-llama/Llama-3.2-3B"), qv), 18350080u);
  LoraSettings mlp;
  mlp.r = 10;
  mlp.target_modules = {"gate_proj", "up_proj", "down_proj"};
  EXPECT_EQ(lora_parameter_count(preset("meta-llama/Llama-3.2-3B"), mlp), 9461760u);
  LoraSettings litgpt;  // LitGPT names: query, value
  litgpt.r = 8;
  litgpt.target_modules = {"query", "value"};
  EXPECT_EQ(lora_parameter_count(preset("meta-llama/Llama-2-7b-hf"), litgpt), 4194304u);
  EXPECT_EQ(lora_parameter_count(preset("meta-llama/Llama-2-13b-hf"), litgpt), 6553600u);
  EXPECT_EQ(lora_parameter_count(preset("microsoft/phi-1_5"), litgpt), 1572864u);
  EXPECT_EQ(lora_parameter_count(preset("stabilityai/stablelm-base-alpha-3b"), litgpt), 2097152u);
}

TEST(Architecture, LoraDefaultsToQueryAndValue) {
  LoraSettings defaults;
  defaults.r = 8;
  // Llama-2-7B: q and v are 4096x4096: 8 * 8192 * 2 * 32 layers.
  EXPECT_EQ(lora_parameter_count(preset("meta-llama/Llama-2-7b-hf"), defaults), 4194304u);
  LoraSettings all;
  all.r = 8;
  all.all_linear = true;
  // Every Linear of the blocks: 8 * (in + out) summed over q,k,v,o,gate,up,down, 32 layers.
  const uint64_t per_layer = 8 * ((4096 + 4096) * 4 + (4096 + 11008) * 3);
  EXPECT_EQ(lora_parameter_count(preset("meta-llama/Llama-2-7b-hf"), all), per_layer * 32);
}

// One check for every way a shape arrives; messages name the input's own field names.
TEST(Architecture, ValidateShapeNamesConfigKeysOrFlags) {
  ModelSpec m = preset("meta-llama/Llama-2-7b-hf");
  EXPECT_TRUE(validate_shape(m, "config.json"));
  m.num_kv_heads = 0;
  EXPECT_EQ(validate_shape(m, "config.json").error().message, "config.json: num_key_value_heads is 0");
  EXPECT_EQ(validate_shape(m, "--params", ShapeFieldNames::kFlags).error().message, "--params: --kv-heads is 0");
  m.num_kv_heads = 32;
  m.head_dim = 0;
  m.hidden_size = 4100;
  EXPECT_EQ(validate_shape(m, "config.json").error().message,
            "config.json: hidden_size 4100 is not a multiple of num_attention_heads 32 and no head_dim is given");
  m.head_dim = 128;  // an explicit head_dim need not be hidden / heads (Gemma)
  EXPECT_TRUE(validate_shape(m, "config.json"));
}

// One rule for tensor parallelism, shared by estimate (which reports it) and fit (which only
// offers degrees it accepts): whole query heads per rank; kv heads split evenly, or replicated
// when tp is a multiple of them; MLA's latent is not split by head.
TEST(Architecture, TensorParallelProblem) {
  ModelSpec m;
  m.num_attention_heads = 12;
  m.num_kv_heads = 2;
  EXPECT_EQ(tensor_parallel_problem(m, 1), "");
  EXPECT_EQ(tensor_parallel_problem(m, 2), "");
  EXPECT_EQ(tensor_parallel_problem(m, 4), "");  // each kv head copied to two ranks
  EXPECT_EQ(tensor_parallel_problem(m, 8),
            "tp 8 does not divide the model's 12 attention heads (each tensor-parallel rank needs whole heads)");
  m.num_kv_heads = 3;
  EXPECT_EQ(tensor_parallel_problem(m, 2),
            "tp 2 does not fit the model's 3 key/value heads (they must split evenly across the tp ranks, or "
            "tp be a multiple of them)");
  m.attention = AttentionKind::kMultiLatent;
  EXPECT_EQ(tensor_parallel_problem(m, 2), "");
  m.num_attention_heads = 0;
  EXPECT_NE(tensor_parallel_problem(m, 2), "");
}

// PEFT wraps a named output head as a Linear and named embeddings as lora.Embedding; all-linear
// leaves the head out, and a named head adds to it (Axolotl's lora_target_linear + lm_head).
TEST(ArchitectureQa4, LoraOnTheHeadAndTheEmbeddings) {
  const ModelSpec llama = find_preset("meta-llama/Llama-3.1-8B")->value();
  LoraSettings all;
  all.r = 16;
  all.all_linear = true;
  EXPECT_EQ(lora_parameter_count(llama, all), 41943040u);   // PEFT's print_trainable_parameters
  all.target_modules = {"lm_head"};
  EXPECT_EQ(lora_parameter_count(llama, all), 41943040u + 16u * (4096 + 128256));
  LoraSettings embeddings;
  embeddings.r = 8;
  embeddings.target_modules = {"model.embed_tokens"};
  EXPECT_EQ(lora_parameter_count(llama, embeddings), 8u * (128256 + 4096));
}

// PEFT's rule: a module matches when its name equals the target or ends with "." + target.
// BERT has three Linears called dense: attention.output.dense, intermediate.dense, output.dense.
TEST(ArchitectureQa5, LoraTargetsMatchAsPeftMatchesThem) {
  const ModelSpec bert = find_preset("google-bert/bert-base-uncased")->value();
  auto count = [&](std::vector<std::string> targets) {
    LoraSettings lora;
    lora.r = 8;
    lora.target_modules = std::move(targets);
    return lora_parameter_count(bert, lora);
  };
  const uint64_t attention_dense = 8 * (768 + 768), intermediate = 8 * (768 + 3072), output = 8 * (3072 + 768);
  // BertModel's pooler.dense (hidden x hidden, outside the blocks) ends in ".dense" too.
  const uint64_t pooler = 8 * (768 + 768);
  EXPECT_EQ(count({"dense"}), 12 * (attention_dense + intermediate + output) + pooler);   // 897,024
  EXPECT_EQ(count({"pooler.dense"}), pooler);
  EXPECT_EQ(count({"intermediate.dense"}), 12 * intermediate);
  EXPECT_EQ(count({"attention.output.dense"}), 12 * attention_dense);
  EXPECT_EQ(count({"output.dense"}), 12 * (attention_dense + output));   // both end in ".output.dense"
  // A path through the block's container still names the module.
  const ModelSpec llama = find_preset("meta-llama/Llama-3.2-3B")->value();
  LoraSettings paths;
  paths.r = 32;
  paths.target_modules = {"self_attn.q_proj", "self_attn.v_proj"};
  EXPECT_EQ(lora_parameter_count(llama, paths), 9175040u);
  // Mixtral's "gate" is its router (block_sparse_moe.gate, hidden x experts), not the experts' w1.
  const ModelSpec mixtral = find_preset("mistralai/Mixtral-8x7B-v0.1")->value();
  LoraSettings gate;
  gate.r = 16;
  gate.target_modules = {"gate"};
  EXPECT_EQ(lora_parameter_count(mixtral, gate), 32u * 16 * (4096 + 8));
  // DeepSeek names its shared experts "shared_experts" (Qwen2-MoE: "shared_expert").
  const ModelSpec deepseek = find_preset("deepseek-ai/DeepSeek-V3")->value();
  LoraSettings shared;
  shared.r = 16;
  shared.target_modules = {"shared_experts.gate_proj"};
  EXPECT_EQ(lora_parameter_count(deepseek, shared), 58u * 16 * (7168 + 2048));
  shared.target_modules = {"mlp.shared_experts.gate_proj"};
  EXPECT_EQ(lora_parameter_count(deepseek, shared), 58u * 16 * (7168 + 2048));
  gate.target_modules = {"w1"};
  EXPECT_EQ(lora_parameter_count(mixtral, gate), 32u * 8 * 16 * (4096 + 14336));
  // PEFT's all-linear takes every nn.Linear but the output layer, the router too: 242,225,152 at
  // r=16, the count PEFT prints for Mixtral (huggingface/peft#1594).
  LoraSettings all;
  all.r = 16;
  all.all_linear = true;
  EXPECT_EQ(lora_parameter_count(mixtral, all), 242225152u);
  // BERT's all-linear: every block's six Linears plus the pooler's dense, 1,339,392 at r=8.
  LoraSettings bert_all;
  bert_all.r = 8;
  bert_all.all_linear = true;
  EXPECT_EQ(lora_parameter_count(find_preset("google-bert/bert-base-uncased")->value(), bert_all),
            12u * 8 * (4 * (768 + 768) + 2 * (768 + 3072)) + 8u * (768 + 768));
  // DeBERTa-v2's base model has no pooler (its ContextPooler belongs to the classification head).
  const ModelSpec deberta = find_preset("microsoft/deberta-v2-xlarge")->value();
  EXPECT_FALSE(deberta.pooler_dense);
}

// The Linears a quantized checkpoint keeps in 16 bits, by transformers' module paths: an exact
// path, a parent module, or a bare name.
TEST(Architecture, UnquantizedModulesOfAQuantizedCheckpoint) {
  ModelSpec m = find_preset("meta-llama/Llama-3.1-8B")->value();
  m.quantization = "fbgemm_fp8";
  m.quantization_bits = 8;
  m.unquantized_modules = {"model.layers.0.mlp.down_proj", "model.layers.31.mlp.down_proj", "model.layers.0.self_attn",
                           "lm_head"};
  const uint64_t down = 14336ull * 4096, attention = 4096ull * 4096 * 2 + 4096ull * 1024 * 2;
  EXPECT_EQ(unquantized_linear_params(m, 0, 32), 2 * down + attention);
  EXPECT_EQ(unquantized_linear_params(m, 1, 30), 0u);       // a pipeline stage without those blocks
  EXPECT_EQ(unquantized_linear_params(m, 16, 16), down);    // the last stage holds block 31
  m.unquantized_modules = {"down_proj"};                     // a bare name: every block's
  EXPECT_EQ(unquantized_linear_params(m, 0, 32), 32 * down);
  m.unquantized_modules = {"mlp"};                           // a component: every block's MLP
  EXPECT_EQ(unquantized_linear_params(m, 0, 32), 32 * 3 * down);
  m.unquantized_modules = {"model.layers.1"};                // block 1, not blocks 10-19
  EXPECT_EQ(unquantized_linear_params(m, 0, 32), 4096ull * (4096 * 2 + 1024 * 2) + 3 * 14336ull * 4096);
}

}  // namespace
}  // namespace oomdoc
