// Inference memory of a model run by llama.cpp (job implementation "llama_cpp"): the GPU
// buffers llama.cpp allocates and logs itself ("CUDA0 model buffer size", "KV self size" /
// "CUDA0 KV buffer size", "CUDA0 compute buffer size"), from the GGUF file type, the context,
// the micro-batch (n_ubatch), the layers offloaded (-ngl) and the KV cache type. No PyTorch
// allocator is involved: the three buffers are what llama.cpp holds; nvidia-smi adds the CUDA
// context and cuBLAS. Formulas and sources: docs/estimator.md ("llama.cpp").
#pragma once

#include <algorithm>

#include "core/result.h"
#include "model/estimate.h"
#include "model/job.h"
#include "model/model_spec.h"

namespace oomdoc {

// llama.cpp's defaults as the 2024 builds the estimate was checked against set them
// (common/common.h): -c 4096, -ub 512, no flash attention. Newer builds take the model's trained
// context (-c 0), turn flash attention on with CUDA (-fa auto) and fit -ngl by themselves: the
// estimate says which it assumed, and a job that gives prompt_len / attention_impl overrides it.
inline constexpr uint64_t kLlamaCppDefaultContext = 4096;
inline constexpr uint64_t kLlamaCppDefaultUbatch = 512;

// Context cells per sequence: prompt_len (default -c 4096) + max_new_tokens.
inline uint64_t llama_cpp_context_per_sequence(const Job& job) {
  // Without a prompt length the default -c is the whole context, generated tokens included (more
  // when more tokens are to be generated than it holds).
  if (!job.prompt_len) return std::max<uint64_t>(kLlamaCppDefaultContext, job.max_new_tokens.value_or(0));
  return *job.prompt_len + job.max_new_tokens.value_or(0);
}

Result<Estimate> estimate_llama_cpp(const ModelSpec& model, const Job& job);

}  // namespace oomdoc
