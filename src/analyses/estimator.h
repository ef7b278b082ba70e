// Predicts a job's peak GPU memory, per GPU, by component. Every formula lives in estimator.cpp
// with its source, and docs/estimator.md explains each. Implemented by the estimate work (issue 3).
#pragma once

#include "core/result.h"
#include "model/estimate.h"
#include "model/job.h"
#include "model/model_spec.h"

namespace oomdoc {

// Fails (with a message naming the field) when the job is contradictory or cannot be expressed.
Result<Estimate> estimate_memory(const ModelSpec& model, const Job& job);

// The estimate as the out-of-memory check sees it: the caching allocator frees the blocks it
// keeps cached (Estimate::reclaimable_bytes) and retries before it fails, so they are not needed
// to fit. What `fit`, capacity solving and fit/no-fit comparisons use.
Estimate oom_view(Estimate estimate);

// The CUDA context the estimate assumes per GPU (what nvidia-smi shows before any tensor).
// CUDA context and loaded kernels outside the allocator; far larger without lazy module loading.
uint64_t cuda_context_bytes(bool lazy_module_loading = true);

// The precision a training job runs in when it does not say: bf16 for LoRA and QLoRA (the model
// loaded in 16 bits), bf16_mixed for the rest.
std::string default_training_precision(const Job& job);

// The tokens an inference job generates after its prompt: max_new_tokens, else the estimator's
// default (256); none when the job only loads the model. llama.cpp jobs are sized from their
// context (llama_cpp_context_per_sequence), which takes no default for it.
uint64_t new_tokens_of(const Job& job);

// Whether the job's `kernels` ("liger", "unsloth") patch this model's family; elsewhere the
// model runs unpatched and the kernels change nothing.
bool kernels_patch(const ModelSpec& model, const std::string& kernels);

// Whether Liger's patch for this family turns its fused linear cross-entropy on by default
// (Granite's takes the plain cross-entropy kernel instead).
bool liger_fuses_loss(const ModelSpec& model);

// The attention implementations transformers offers this family, as from_pretrained's
// attn_implementation names them: whether SDPA is one, and the flash kernel's name
// ("flash_attention_2"; gpt-oss, whose sinks FA2 cannot take: the kernels-hub
// "kernels-community/vllm-flash-attn3"); empty when the family has no flash path (DeBERTa-v2).
bool supports_sdpa(const ModelSpec& model);
std::string flash_attention_setting(const ModelSpec& model);

}  // namespace oomdoc
