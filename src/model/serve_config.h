// A vLLM launch as the user would type it (`vllm serve MODEL --flag ...`, the OpenAI api_server
// module, or `LLM(...)` keyword arguments), reduced to the settings that change GPU memory.
// Filled by readers/vllm_args.cpp; unset settings stay nullopt so the analysis can apply (and
// report) the default of the vLLM version in question.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace oomdoc {

struct ServeConfig {
  std::string model;      // positional MODEL or --model, as given
  std::string launcher;   // "vllm serve", "python -m vllm.entrypoints.openai.api_server", "LLM(...)"

  std::optional<double> gpu_memory_utilization;
  std::optional<uint64_t> max_model_len;       // nullopt: the model's context
  bool max_model_len_auto = false;             // --max-model-len -1 / auto: vLLM fits it to memory
  std::optional<uint64_t> max_num_seqs;
  std::optional<uint64_t> max_num_batched_tokens;
  std::optional<std::string> kv_cache_dtype;   // auto, fp8, fp8_e4m3, fp8_e5m2, bfloat16, ...
  std::optional<uint64_t> block_size;
  std::optional<std::string> dtype;            // auto, half, float16, bfloat16, float, float32
  std::optional<std::string> quantization;     // awq, gptq, fp8, bitsandbytes, ...
  uint64_t tensor_parallel_size = 1;
  uint64_t pipeline_parallel_size = 1;
  uint64_t data_parallel_size = 1;             // replicas: same memory per GPU, more GPUs
  bool enforce_eager = false;
  double cpu_offload_gb = 0;                   // per GPU, GiB
  std::optional<uint64_t> kv_cache_memory_bytes;
  std::optional<uint64_t> num_gpu_blocks_override;
  std::map<std::string, uint64_t> limit_mm_per_prompt;   // modality -> items per prompt
  std::optional<bool> enable_prefix_caching;
  std::optional<bool> enable_chunked_prefill;
  bool chunked_prefill_value_given = false;   // "--enable-chunked-prefill False": only v0.5-v0.9 take a value
  bool enable_lora = false;
  // --runner pooling, --convert embed/classify/reward, or (before v0.10) --task embed/classify/
  // score/reward: the model pools hidden states instead of sampling tokens. As written, for notes.
  std::optional<std::string> pooling_flag;
  std::optional<uint64_t> num_speculative_tokens;
  // Speculative decoding (--speculative-config JSON, or the older --speculative-model,
  // --num-speculative-tokens, --speculative-draft-tensor-parallel-size flags).
  std::optional<std::string> speculative_method;   // "method": mtp, eagle, eagle3, ngram, draft_model, ...
  std::optional<std::string> speculative_model;    // "model": a draft model or EAGLE head, as given
  std::optional<uint64_t> draft_tensor_parallel_size;
  std::optional<std::string> speculative_quantization;   // the draft's own "quantization"
  std::optional<uint64_t> max_position_override;   // --hf-overrides max_position_embeddings
  // --hf-overrides rope_scaling / rope_parameters, or --rope-scaling: the rope object as JSON text,
  // which replaces the config's and so vLLM's derived max_model_len.
  std::optional<std::string> rope_scaling_override;
  std::map<std::string, std::string> env;          // VAR=VALUE words before the command
  std::optional<std::string> image_tag;            // docker image tag (vllm/vllm-openai:v0.8.5)
  std::optional<std::string> config_file;          // --config FILE: its settings were read before the flags

  // vLLM flags oomdoc knows to have no effect on GPU memory (port, served name...), as given.
  std::vector<std::string> ignored;
  // Flags (and stray words) oomdoc does not know: not checked, and possibly not vLLM's at all.
  std::vector<std::string> unknown;
  // Flags that do change memory but that oomdoc does not model (LoRA adapters, ...), as given.
  std::vector<std::string> not_modeled;
};

}  // namespace oomdoc
