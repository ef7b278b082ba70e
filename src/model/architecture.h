// The module structure of a transformer as its Hugging Face implementation builds it: every
// Linear layer (named as in the implementation, so LoRA target_modules match) and the exact
// parameter count. The one place that knows how a config's numbers turn into parameters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/job.h"
#include "model/model_spec.h"

namespace oomdoc {

struct LinearShape {
  std::string name;          // module name in the HF implementation: q_proj, c_attn, wi_0, ...
  uint64_t in_features = 0;
  uint64_t out_features = 0;
  bool bias = false;
  uint64_t copies = 1;       // routed experts: one Linear per expert
  uint64_t layers = 0;       // how many blocks hold it
  bool expert = false;       // part of a routed expert (only experts_per_token of them run per token)
  // What the layer does, whatever the family calls it: q, k, v, qkv (fused), o, gate, up,
  // gate_up (fused), down (MLP output), fc_in (plain MLP input). LoRA targets match it too.
  std::string role;
  // An nn.Linear module. gpt-oss's experts are 3-D nn.Parameters instead (GptOssExperts
  // gate_up_proj [E, hidden, 2I]): PEFT's target_modules and "all-linear" do not reach them.
  bool nn_linear = true;
  // Reads the encoder's output (T5's EncDecAttention): its k and v see the source tokens.
  bool cross_attention = false;

  uint64_t params() const {
    return (in_features * out_features + (bias ? out_features : 0)) * copies * layers;
  }
};

// Parameters of the block Linears (weights and biases) that a quantized checkpoint keeps in 16 bits
// (ModelSpec::unquantized_modules) in blocks [first_layer, first_layer + layer_count). A module is
// named "model.layers.N.self_attn.<name>" or "model.layers.N.mlp.<name>" (transformers' Llama-style
// paths); an entry names it when equal to that path, a parent of it ("model.layers.0.self_attn"),
// a bare module name ("down_proj", "mlp.gate") or one component of it ("mlp"). Routed experts are
// not matched.
uint64_t unquantized_linear_params(const ModelSpec& m, uint64_t first_layer, uint64_t layer_count);

// Every Linear of the transformer blocks (not the embeddings or the output head).
std::vector<LinearShape> linear_layers(const ModelSpec& model);

// Quantization formats that quantize only the routed experts' weight matrices and leave every
// other parameter (attention, router, embeddings, head, biases) in 16 bits: MXFP4, whose
// transformers quantizer replaces only GptOssExperts and whose vLLM method quantizes only FusedMoE
// layers (quantization/mxfp4.py: every LinearBase gets UnquantizedLinearMethod).
bool quantizes_only_experts(const std::string& method);

// Weight-matrix parameters of the routed experts (biases excluded): what such a format quantizes.
uint64_t expert_weight_params(const ModelSpec& model);

struct ParamCount {
  uint64_t embeddings = 0;   // token, position and type embeddings, their norm and projections
  uint64_t lm_head = 0;      // 0 when tied to the input embedding
  uint64_t linear = 0;       // sum over linear_layers()
  uint64_t norms = 0;        // every norm weight (and bias)
  uint64_t other = 0;        // routers, relative position biases, extra_params
  uint64_t total = 0;
  uint64_t largest_layer = 0;
};

ParamCount count_parameters(const ModelSpec& model);

// How validate_shape names the fields in its messages: config.json keys, or the estimate flags
// that set them with --params (--heads, --kv-heads, ...).
enum class ShapeFieldNames { kConfigKeys, kFlags };

// The one check that a shape is usable before anything divides by it or multiplies it: no zero
// widths, depths or head counts, heads a multiple of the kv heads, hidden_size a multiple of the
// heads when head_dim is not given, and bounds that keep every parameter product inside 64 bits.
// Errors read "<source>: <field> is 0".
Status validate_shape(const ModelSpec& model, const std::string& source,
                      ShapeFieldNames names = ShapeFieldNames::kConfigKeys);

// Sets total_params, embedding_params, lm_head_params and largest_layer_params from the shape.
void fill_parameter_counts(ModelSpec& model);
// The model with a sequence-classification head of `labels` outputs in place of its LM head (a
// reward model): counts adjusted, an exact total_params kept exact.
ModelSpec with_score_head(const ModelSpec& model, uint64_t labels);

uint64_t norm_params(const ModelSpec& model, uint64_t width);

// Whether LoRA settings target a Linear: by its module name (or a dotted path ending in it), by
// the framework names of its role (query/value in LitGPT, output_proj/w1 in torchtune, q/o in
// Unsloth), or every Linear for all_linear. No targets means PEFT's default: q and v.
// router_is_gate: the model's MoE router is an nn.Linear called "gate" (router_is_linear_gate), so a
// "gate" target names it and not the experts' gate projections.
bool lora_matches(const LinearShape& linear, const LoraSettings& lora, bool router_is_gate = false);
bool router_is_linear_gate(const ModelSpec& model);

// Trainable LoRA parameters: r * (in + out) per targeted Linear (per expert copy, per layer).
uint64_t lora_parameter_count(const ModelSpec& model, const LoraSettings& lora);

// Why tensor parallelism of degree tp cannot split this model's attention, or an empty string
// when it can. Every rank needs whole query heads, and whole key/value heads or (tp above the
// kv head count) an equal number of copies of each, as Megatron-LM and vLLM assert; MLA's latent
// is not split by head. The estimator reports it; fit only offers degrees without one.
std::string tensor_parallel_problem(const ModelSpec& m, uint64_t tp);

}  // namespace oomdoc
