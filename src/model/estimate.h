// What the estimator predicts for one job on one GPU (per GPU when sharded).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace oomdoc {

struct MemoryComponent {
  std::string name;       // stable id: weights, master_weights, gradients, optimizer_state,
                          // activations, logits, temporary, kv_cache, cuda_context, workspace,
                          // allocator_slack, ...
  uint64_t bytes = 0;
  std::string detail;     // one line: how it was computed
};

struct Estimate {
  std::vector<MemoryComponent> components;  // what is live at the peak, per GPU
  uint64_t peak_allocated_bytes = 0;        // torch.cuda.max_memory_allocated()
  uint64_t peak_reserved_bytes = 0;         // torch.cuda.max_memory_reserved()
  uint64_t device_used_bytes = 0;           // nvidia-smi: reserved + CUDA context and libraries
  // Part of reserved (and device) that the caching allocator keeps only while memory allows: it
  // frees its cached blocks and retries before it reports out of memory (allocator_cache).
  uint64_t reclaimable_bytes = 0;
  std::string peak_phase;                   // backward, optimizer_step, generation, load
  // Who holds the memory: "pytorch" (its caching allocator: the three totals are what torch.cuda
  // and nvidia-smi report) or "llama_cpp" (llama.cpp's own buffers: allocated = reserved = the
  // buffer sizes it logs).
  std::string allocator = "pytorch";
  // Who prepared a bitsandbytes base for LoRA (the job's kbit_upcast, stated or assumed): "all",
  // "norms", or "none" (also for every job without such a base).
  std::string kbit_upcast = "none";
  std::string precision;                    // the job's precision as the estimator resolved it (bf16, fp16_mixed, ...)
  std::string dominant_component;
  double uncertainty_fraction = 0;          // +- band on device_used_bytes from what inputs leave open
  std::vector<std::string> assumptions;     // every default the estimator chose
  std::vector<std::string> warnings;        // inputs that look wrong (a length beyond the model's context, ...)
  // Why the job cannot start whatever the memory (a sequence past learned position embeddings);
  // each is among the warnings too.
  std::vector<std::string> will_not_run;
  // Every component the estimator computed, whether or not it is live at the peak moment
  // (activations are gone by the optimizer step, gradients absent at the end of the first
  // forward): what fit and the calibration tests read.
  std::vector<MemoryComponent> breakdown;
};

}  // namespace oomdoc
