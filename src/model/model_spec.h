// A model's architecture as the estimators need it, whatever it was read from (config.json,
// safetensors headers, a bundled preset, or --params). Filled by readers/model_*.cpp.
// Owned by the estimate work (issue 3); serve and fit read it. Extend, don't rename.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace oomdoc {

enum class NormKind {
  kRmsNorm,     // weight only (Llama, T5, Qwen, Gemma)
  kLayerNorm,   // weight and bias (GPT-2, BERT, Falcon, OPT, BLOOM, Phi-1/2, GPT-NeoX)
};

enum class AttentionKind {
  kMultiHead,      // MHA / GQA / MQA: K and V per kv head
  kMultiLatent,    // DeepSeek MLA: one compressed latent (kv_lora_rank + qk_rope_head_dim) per token
};

struct ModelSpec {
  std::string id;             // e.g. "meta-llama/Llama-2-7b-hf", or "custom" for --params
  std::string model_type;     // config.json "model_type": llama, mistral, gpt2, t5, ...
  std::string source;         // where it came from: a path, "preset:<file>", "hf-cache:<path>", "--params"
  std::string base_model_id;  // a quantized checkpoint's name read as this base model's config (id is the name)

  // Transformer shape (decoder; for encoder-decoder models, see num_encoder_layers).
  uint64_t vocab_size = 0;
  uint64_t hidden_size = 0;
  uint64_t num_layers = 0;            // decoder layers (or encoder layers for encoder-only models)
  uint64_t num_encoder_layers = 0;    // encoder-decoder models only
  uint64_t num_attention_heads = 0;
  uint64_t num_kv_heads = 0;          // = num_attention_heads for MHA
  uint64_t head_dim = 0;              // explicit when config gives it; not always hidden/heads
  uint64_t intermediate_size = 0;
  uint64_t max_position_embeddings = 0;
  // The context-length keys config.json sets (max_position_embeddings, n_positions, seq_length, ...),
  // with the family's transformers default for its own key when config.json leaves it out (what
  // getattr on the config object sees): vLLM derives its default max_model_len from them
  // (analyses/vllm_serve.cpp vllm_context_limit).
  std::map<std::string, uint64_t> context_keys;
  bool tie_word_embeddings = false;
  bool is_encoder_only = false;
  bool is_encoder_decoder = false;

  // Mixture of experts.
  uint64_t num_experts = 0;           // routed experts; 0 for dense models
  uint64_t experts_per_token = 0;
  uint64_t moe_intermediate_size = 0;
  uint64_t num_shared_experts = 0;
  uint64_t first_dense_layers = 0;    // DeepSeek first_k_dense_replace

  // Attention kind and its parameters.
  AttentionKind attention = AttentionKind::kMultiHead;
  uint64_t kv_lora_rank = 0;          // MLA
  uint64_t q_lora_rank = 0;           // MLA
  uint64_t qk_rope_head_dim = 0;      // MLA
  uint64_t qk_nope_head_dim = 0;      // MLA
  uint64_t v_head_dim = 0;            // MLA
  // rope_scaling as config.json gives it: vLLM derives the default max_model_len from it
  // (analyses/vllm_serve.cpp). Empty type: no rope_scaling.
  std::string rope_scaling_type;            // linear, dynamic, yarn, llama3, longrope, ...
  double rope_scaling_factor = 1.0;
  uint64_t rope_original_max_position = 0;  // yarn's original_max_position_embeddings
  std::optional<uint64_t> sliding_window;   // tokens; applies to the layers listed below
  std::vector<bool> layer_is_sliding;       // per layer when the model mixes full and sliding layers
                                            // (Gemma 2/3); empty with sliding_window set = every layer

  // Parameters. total_params is exact when read from safetensors or computed from a full config.
  uint64_t total_params = 0;
  uint64_t embedding_params = 0;      // input embeddings (and output head when untied, separately)
  uint64_t lm_head_params = 0;        // 0 when tied; the score head's with score_labels
  // A sequence-classification head (…ForSequenceClassification, as TRL's RewardTrainer trains with
  // num_labels=1): a bias-free score Linear of hidden x score_labels replaces the LM head, so there
  // are no vocabulary logits. 0: the model's own head.
  uint64_t score_labels = 0;
  // An encoder's task head as `architectures` names it: "classification" (…ForSequenceClassification,
  // ViTForImageClassification, sized: it only adds parameters), "masked_lm" (…ForMaskedLM: its
  // vocabulary logits are not sized), or "" (the bare encoder).
  std::string encoder_head;
  std::map<std::string, uint64_t> params_by_dtype;   // from safetensors headers: "BF16" -> count
  uint64_t checkpoint_bytes = 0;      // sum of tensor bytes in safetensors, when read

  // Layout details that the parameter count (model/architecture.cpp) and the activation formulas
  // need; readers/model_config.cpp sets them per family from the Hugging Face implementation.
  NormKind norm = NormKind::kRmsNorm;
  uint64_t norms_per_layer = 2;       // 1: one shared pre-norm (GPT-J, Falcon-7B, Phi-2); 4: Gemma 2/3
  bool qk_norm = false;               // per-head RMSNorm on q and k (Qwen3, Gemma 3)
  bool parallel_attention = false;    // attention and MLP read the same normed input (GPT-J, Falcon)
  bool gated_mlp = true;              // gate, up and down projections (SwiGLU / GeGLU)
  bool qkv_bias = false;
  bool attn_out_bias = false;
  bool mlp_bias = false;
  bool lm_head_bias = false;
  bool final_norm = true;
  bool embedding_norm = false;        // LayerNorm right after the embeddings (BLOOM, BERT)
  uint64_t position_embeddings = 0;   // rows of a learned absolute position table; 0 for RoPE/ALiBi
  uint64_t token_type_embeddings = 0; // BERT segment embeddings
  uint64_t embedding_dim = 0;         // OPT word_embed_proj_dim (projected to hidden); 0 = hidden
  uint64_t shared_expert_intermediate_size = 0;  // Qwen2-MoE shared expert width (DeepSeek: n * moe)
  bool shared_expert_gate = false;    // Qwen2-MoE sigmoid gate on the shared expert
  bool router_score_bias = false;     // DeepSeek-V3 e_score_correction_bias
  bool router_bias = false;           // router Linear with a bias (gpt-oss GptOssTopKRouter)
  // One learned logit per query head per layer added to the softmax (gpt-oss GptOssAttention.sinks):
  // num_attention_heads parameters per layer, nothing in the KV cache.
  bool attention_sinks = false;
  // Gemma 2's tanh soft-capping (cap * tanh(x / cap)) of the attention scores (eager attention
  // only: SDPA ignores it, flash-attn applies it inside its kernel) and of the output logits;
  // 0 = none.
  double attn_logit_softcapping = 0;
  double final_logit_softcapping = 0;
  uint64_t relative_attention_buckets = 0;  // T5 relative position bias (first layer of each stack)
  // DeBERTa-v2/v3 disentangled attention (modeling_deberta_v2.py DisentangledSelfAttention):
  // att_span = position_buckets, else max_relative_positions (max_position_embeddings when < 1);
  // 0 when relative_attention is off. pos_att_type "c2p" / "p2c" switch the two score terms.
  uint64_t relative_attention_span = 0;
  bool content_to_position = false;
  bool position_to_content = false;
  uint64_t conv_kernel_size = 0;      // DeBERTa-v2 ConvLayer after the first block (0: none)
  std::string conv_act;               // its activation (config conv_act, "tanh" by default)
  uint64_t extra_params = 0;          // outside the transformer stack: pooler, patch embedding, conv
  bool has_vision_tower = false;      // a multimodal config (vision_config), counted or not
  // Any multimodal wrapper: a text_config, vision_config or audio_config beside the language model
  // (Qwen2-Audio has no vision tower). vLLM takes multimodal flags only for these.
  bool is_multimodal = false;
  // The inputs besides text a multimodal config declares: "image" (vision_config), "video"
  // (video_token_id / video_token_index: Qwen2-VL, LLaVA-OneVision), "audio" (audio_config,
  // audio_token_index). vLLM's profile run feeds the encoder every one whose limit is above 0.
  std::vector<std::string> modalities;
  // BertPooler / RobertaPooler / ViTPooler: an nn.Linear(hidden, hidden) named pooler.dense, counted
  // in extra_params; PEFT's all-linear (and a "dense" target) adapts it too.
  bool pooler_dense = false;
  std::string hidden_act;             // config hidden_act / activation_function, as written
  double attention_dropout = 0;       // dropout probabilities the training-mode forward applies
  double hidden_dropout = 0;
  double mlp_dropout = 0;             // between the MLP's activation and its output projection (T5)
  uint64_t image_size = 0;            // ViT: tokens = (image/patch)^2 + 1
  uint64_t patch_size = 0;
  uint64_t largest_layer_params = 0;  // biggest transformer block (ZeRO-3 / FSDP gather unit)

  // A GGUF file (readers/gguf_header.h): every tensor's bytes as stored, by where llama.cpp puts
  // them. Unset for models not read from a GGUF file.
  struct GgufWeights {
    std::string file_type;              // general.file_type as llama-quantize names it ("q4_k_m")
    std::vector<uint64_t> layer_bytes;  // blk.N.* for each block N
    uint64_t token_embd_bytes = 0;      // token_embd.weight: kept in host memory by llama.cpp
    uint64_t input_bytes = 0;           // the rest of its input layer (position/type/per-layer embeddings): host too
    uint64_t output_bytes = 0;          // output.weight; 0 when tied (the embeddings are duplicated)
    uint64_t other_bytes = 0;           // output_norm and other tensors outside the blocks
  };
  std::optional<GgufWeights> gguf;

  std::string torch_dtype;            // "bfloat16", "float16", "float32"; empty if unknown
  std::string quantization;           // quantization_config.quant_method: gptq, awq, bitsandbytes, fp8
  uint64_t quantization_bits = 0;
  uint64_t quantization_group_size = 0;
  bool quantization_double_quant = false;  // bitsandbytes bnb_4bit_use_double_quant
  bool quantization_fp4 = false;           // bitsandbytes bnb_4bit_quant_type "fp4" (else nf4)
  // compressed-tensors stores integers or floats at the same width ("type": "int" or "float" per
  // config group): W8A8-INT8 and FP8-dynamic checkpoints are both 8-bit.
  bool quantization_integers = false;
  // GPTQ's group_size -1: one scale and zero per output channel (desc_act checkpoints often), not
  // groups; quantization_group_size is then 0.
  bool quantization_per_channel = false;
  // Modules a quantized checkpoint keeps in 16 bits (quantization_config's modules_to_not_convert,
  // ignored_layers, ignore or llm_int8_skip_modules, as written: "model.layers.0.mlp.down_proj",
  // "model.layers.5.self_attn", "lm_head"). See unquantized_linear_params (model/architecture.h).
  std::vector<std::string> unquantized_modules;

  // Published parameter count the bundled preset records (with its source), for checks only.
  std::optional<uint64_t> reference_params;
  std::vector<std::string> notes;     // what the reader assumed (missing fields, defaults)
  // What the reader found legal but likely a mistake, said loudly (the estimate's warnings, not
  // its assumptions): a checkpoint holding far fewer parameters than its config, a path that does
  // not exist here sized as the bundled preset its name matches.
  std::vector<std::string> warnings;

  // The one place for the shape defaults every formula needs: head_dim is hidden / heads unless
  // the config says otherwise; no num_key_value_heads means one KV head per query head (MHA).
  uint64_t head_dim_or_default() const {
    if (head_dim) return head_dim;
    return num_attention_heads ? hidden_size / num_attention_heads : 0;
  }
  uint64_t kv_heads_or_default() const { return num_kv_heads ? num_kv_heads : num_attention_heads; }

  // How outputs name the model: its id, else (a local config without `_name_or_path`) the name of
  // the folder it was read from ("/data/ckpt/" and "/data/ckpt/config.json" are both "ckpt").
  std::string label() const {
    if (!id.empty()) return id;
    std::string path = source;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    const std::string config = "/config.json";
    if (path.size() > config.size() && path.compare(path.size() - config.size(), config.size(), config) == 0) {
      path.resize(path.size() - config.size());
    }
    const size_t slash = path.rfind('/');
    return slash == std::string::npos || slash + 1 == path.size() ? path : path.substr(slash + 1);
  }
};

}  // namespace oomdoc
