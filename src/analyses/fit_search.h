// `oomdoc fit`: does a job fit a GPU, and if not, the cheapest change that makes it fit.
//
// Every effect is the estimator's (estimate_memory on the changed job); nothing here knows a byte
// per parameter. The search tries the changes in order of what they cost (docs/fit.md), keeps
// each one that lowers the prediction, stops at the first combination under the target, and then
// drops any earlier change the combination does not need.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyses/estimator.h"
#include "analyses/length_analysis.h"
#include "core/result.h"
#include "model/estimate.h"
#include "model/gpu.h"
#include "model/job.h"
#include "model/model_spec.h"
#include "readers/gpu_catalog.h"

namespace oomdoc {

// Share of the card a plan aims at, leaving room for the occasional longer batch.
inline constexpr double kDefaultFitTarget = 0.80;

// Extra compute of full gradient checkpointing: one more forward pass per step, and a forward is
// about a third of a step's FLOPs (Chen et al. 2016, arXiv:1604.06174). Hugging Face's guide
// (transformers docs, grad_checkpointing) observes "~20% slower" wall-clock.
inline constexpr double kCheckpointingComputeCost = 0.33;

// DeepSpeed's own estimators add this factor on the host side "to be conservative"
// (deepspeed/runtime/zero/stage_1_and_2.py, stage3.py: additional_buffer_factor=1.5).
inline constexpr double kHostBufferFactor = 1.5;

struct FitOptions {
  std::string gpu_name;            // for messages; "24.00 GiB GPU" with --memory
  uint64_t total_bytes = 0;        // per GPU, as nvidia-smi reports it
  // What CUDA itself reports (GpuSpec::cuda_total_bytes) when the catalog knows it: the driver keeps
  // the difference, so no budget can give a job more than this.
  std::optional<uint64_t> allocatable_bytes;
  bool gpu_has_bf16 = true;        // decides bf16 vs fp16 mixed precision
  std::string gpu_vendor;          // nvidia, amd, apple; "" with --memory (other GPUs: nvidia, amd)
  std::string gpu_architecture;    // the catalog's (Ampere, Hopper, ...); "" with --memory
  bool gpu_nvlink = false;         // the catalog's NVLink flag: decides TP before or after PP
  std::string gpu_interconnect;    // the catalog's interconnect note, quoted in TP's cost
  uint64_t gpu_tensor_parallel_domain = 8;   // the most GPUs TP spans (GpuSpec::tensor_parallel_domain)
  uint64_t num_gpus = 1;
  double budget = kDefaultMemoryBudget;   // fits: device_used <= budget x total
  double target = kDefaultFitTarget;
  bool solve_max_batch = false;
  bool solve_max_seq = false;
  std::optional<std::vector<uint64_t>> lengths;   // --lengths
  std::map<std::string, double> prices;           // catalog GPU name -> price per GPU-hour
};

struct FitSetting {
  std::string target;   // TrainingArguments, SFTConfig, LoraConfig, BitsAndBytesConfig, environment...
  std::string name;
  std::string value;    // as written in Python / the shell
};

// A prediction's totals as `oomdoc estimate` defines them, and what fit decides on.
struct PredictedTotals {
  uint64_t peak_allocated_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  uint64_t device_used_bytes = 0;   // what nvidia-smi would show at the peak
  uint64_t needed_bytes = 0;        // device used without the allocator's reclaimable cache: what must fit
};

struct FitChange {
  std::string id;          // stable: expandable_segments, micro_batch, padding_free, seq_len, ...
  std::string fix_id;      // the fix catalogue entry it belongs to (analyses/fix_catalog.h), or ""
  int step = 0;            // position in the cost order (1 = free ... 9 = hardware)
  std::string title;       // what changes: "micro-batch 8 -> 2, accumulation 1 -> 4"
  std::string cost;        // what it costs
  std::vector<FitSetting> settings;
  bool advice_only = false;                  // changes nothing in the prediction
  std::optional<PredictedTotals> predicted;  // the job with this change (and those before it)
  // In a plan: no lower than the job before it, since the peak is at another moment until a later
  // change moves it (checkpointing while the optimizer step peaks); the plan needs it all the same.
  bool saves_nothing_here = false;
  std::optional<uint64_t> host_ram_bytes;    // offload: host memory it needs
};

// A change that splits the model across GPUs (tensor and/or pipeline parallel layouts).
bool is_model_parallel(const FitChange& change);

struct FitPlan {
  std::vector<FitChange> changes;   // in cost order; each predicted total is cumulative
  PredictedTotals predicted;
  bool fits_budget = false;
  bool fits_target = false;
  Job job;                          // the job with every change applied
  std::optional<std::string> gpu_name;   // when the plan moves to another GPU
  uint64_t total_bytes = 0;              // per GPU, of the GPU the plan runs on
  uint64_t num_gpus = 1;
};

struct FitAlternative {
  std::string description;          // "fits at micro-batch 2 x accumulation 8"
  FitChange change;
  PredictedTotals predicted;
  bool fits_target = false;
  std::optional<std::string> gpu_name;
  std::optional<uint64_t> gpu_total_bytes;  // per GPU, for hardware alternatives
  std::optional<uint64_t> num_gpus;
  std::optional<double> price_per_hour;   // count x price per GPU-hour, with --prices
  std::optional<Job> job;                 // the changed job, for a combination (same_method)
};

struct FitReport {
  Job job;                          // as given (defaults the estimator chose are in estimate)
  std::string model_id;             // as the user named it
  std::string model_config;         // the config behind it when its id differs ("" otherwise)
  Estimate estimate;                // the job as given
  std::string gpu_name;
  uint64_t num_gpus = 1;
  uint64_t total_bytes = 0;
  uint64_t usable_bytes = 0;        // budget x total, at most what CUDA can allocate (allocatable_bytes)
  bool usable_is_allocatable = false;   // the budget reached that cap: usable_bytes is all CUDA can allocate
  uint64_t target_bytes = 0;        // target x total, the same
  double budget = 0;
  double target = 0;
  uint64_t needed_bytes = 0;        // the estimate without its reclaimable cache (oom_view): what must fit
  bool fits = false;                // needed <= usable, as given
  bool fits_target = false;
  std::vector<FitChange> free_advice;
  std::optional<FitPlan> plan;      // when the job does not fit the target as given
  std::vector<FitAlternative> alternatives;
  std::optional<uint64_t> max_micro_batch;   // --max-batch: largest that fits the budget
  std::optional<uint64_t> max_seq_len;       // --max-seq
  // Whether --max-batch / --max-seq were asked: asked with no answer means even 1 does not fit.
  bool solved_max_micro_batch = false;
  bool solved_max_seq_len = false;
  std::optional<LengthAnalysis> lengths;
  std::vector<std::string> notes;
  // Why the job as given cannot start whatever the memory (the estimate's, and this GPU's: bf16 or
  // FlashAttention-2 below compute capability 8.0); each is also a note or a warning.
  std::vector<std::string> will_not_run;
  // Why --max-seq has no answer when memory is not the reason (no room for a prompt in the context).
  std::string max_seq_len_unanswered;
};

// The card's part of FitOptions, in one place: a catalog GPU (name, memory, bf16, vendor,
// interconnect), or a bare capacity (--memory: "24.00 GiB GPU").
void set_fit_gpu(FitOptions& options, const GpuSpec& gpu);
// How many GPUs the machine has for `job`: --gpus when given, else the job's num_gpus, else what
// its TP/PP/CP layout needs (as the estimator assumes).
uint64_t fit_gpu_count(const Job& job, std::optional<uint64_t> gpus_flag);
void set_fit_memory(FitOptions& options, uint64_t total_bytes);

// The prediction the search uses: estimate_memory, or a stand-in in tests of the search itself.
using EstimateFn = std::function<Result<Estimate>(const ModelSpec&, const Job&)>;

// Fails when the job cannot be estimated as given (the estimator's message) or options are out of
// range (budget/target outside (0,1], no memory size).
Result<FitReport> fit_job(const ModelSpec& model, const Job& job, const FitOptions& options,
                          const EstimateFn& estimator = estimate_memory);

// Largest value of one job field that fits `limit_bytes` (device used), searching 1..upper.
// nullopt when even 1 does not fit. Used by --max-batch and --max-seq.
std::optional<uint64_t> solve_largest(const ModelSpec& model, const Job& job,
                                      std::optional<uint64_t> Job::*field, uint64_t limit_bytes,
                                      uint64_t upper, const EstimateFn& estimator = estimate_memory);

// GPU-hour prices: "NAME,PRICE" or "NAME PRICE" per line (# comments), names matched with
// find_gpu. Errors name the file and line. A short name that also names cards of other sizes
// ("A100") adds a note to `notes` (when given) saying which card it was read as, as --gpu does.
Result<std::map<std::string, double>> parse_prices(std::string_view text, const std::string& display_name,
                                                   std::vector<std::string>* notes = nullptr);

}  // namespace oomdoc
