// The one catalogue of fixes that explain, fit and snapshot draw from: each fix's id, title, the
// snippet that applies it, and its cost rank (lower = cheaper to try: free settings first, then
// throughput, then quality or method changes, then hardware).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomdoc {

struct FixInfo {
  std::string_view id;
  std::string_view title;
  std::string_view snippet;   // what to write or run
  int cost_rank;              // order of the ladder; ties keep catalogue order
  std::string_view cost;      // what it costs the user, in a few words
};

const std::vector<FixInfo>& fix_catalog();

// PyTorch's allocator-settings variable under both its names: 2.8+ reads PYTORCH_ALLOC_CONF (and
// calls the CUDA name deprecated), but 2.9.1 and older read expandable_segments only from
// PYTORCH_CUDA_ALLOC_CONF (pytorch/pytorch#183387). Setting both works on every version; the
// expandable_segments snippet, fit's settings and `oomdoc run --alloc-conf` all set these two.
inline constexpr std::string_view kAllocatorConfVariables[] = {"PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"};
// Hugging Face TrainingArguments' accelerator_config that makes FSDP reduce-scatter gradients after
// every micro-batch instead of accumulating them unsharded under no_sync() (Accelerate's
// GradientAccumulationPlugin.sync_each_batch); the fsdp_sync_each_batch snippet and fit's settings.
inline constexpr std::string_view kSyncEachBatchAcceleratorConfig =
    R"({"gradient_accumulation_kwargs": {"sync_each_batch": True}})";
// Casting norms, embeddings and head of a QLoRA model back to bf16 after PEFT's
// prepare_model_for_kbit_training (as Axolotl does): explain's bf16_hidden_states fix and fit's
// step-4 change.
inline constexpr std::string_view kBf16HiddenStatesSnippet =
    "[m.to(torch.bfloat16) for n, m in model.named_modules() if 'norm' in n or 'embed_tokens' in n or "
    "'lm_head' in n]  # after peft.prepare_model_for_kbit_training (or skip that call), as Axolotl does";
// The same for a card without bf16 (torch.float16).
std::string half_hidden_states_snippet(bool bf16);
// The entry for id; aborts on an unknown id (a programming error, caught by tests).
const FixInfo& fix_info(std::string_view id);

// A fix chosen for one situation, with the numbers that situation gives.
struct Fix {
  std::string id;
  std::string title;
  std::string detail;    // one line: why and the concrete value ("--max-model-len 81536")
  std::string snippet;
  int cost_rank = 0;
};

Fix make_fix(std::string_view id, std::string detail, std::string snippet_override = "");

// Where a fix is written differently: the platform or framework the message came from. The
// catalogue keeps each variant's snippet next to the default one (fix_catalog.cpp).
enum class FixVariant {
  kDefault,
  kAmd,            // ROCm/HIP: rocm-smi, HIP_VISIBLE_DEVICES, PYTORCH_HIP_ALLOC_CONF
  kIntel,          // XPU: xpu-smi, ZE_AFFINITY_MASK
  kAscend,         // torch_npu: PYTORCH_NPU_ALLOC_CONF
  kTorch14,        // PyTorch 1.4 and older ("... cached)"): no allocator settings
  kVllmServer,     // a vLLM process: environment variables only
  kLlamaCpp,       // llama.cpp's pinned host buffers
  kLlamaCppHostRam,// llama.cpp's layers kept in system RAM (CPU buffers)
  kTensorFlowHost, // TensorFlow/XLA's pinned host pool
  kOllama,         // Ollama: llama.cpp's settings as Ollama parameters and environment variables
  kMlx,            // Apple MLX (mlx-lm)
  kPaddle,         // PaddlePaddle: paddle.set_device, its DataLoader and model configs
  kMxnet,          // MXNet: its data iterators and Gluon DataLoader
  kDeepStream,     // NVIDIA DeepStream's nvinfer: TensorRT's settings in its config file
  kDirectMl,       // DirectML on Windows: Task Manager, no nvidia-smi
  kDeepSpeed       // a script driving DeepSpeed's engine itself: its JSON config's keys
};

// The snippet of `id` written for `variant`, or nullopt when the variant writes it as the default.
std::optional<std::string_view> fix_variant_snippet(std::string_view id, FixVariant variant);
// The snippet of `id` for `variant`: its own, else the catalogue's default.
std::string_view fix_snippet(std::string_view id, FixVariant variant);

// The snippet of `id` for `variant` with a value the log gave in place of its N ("-c 65536  # half
// the n_ctx 131072 the log shows"): `value`, and `why` says where it came from. nullopt when the
// catalogue writes no such snippet for the id.
std::optional<std::string> fix_snippet_with_value(std::string_view id, FixVariant variant, std::string_view value,
                                                  std::string_view why);

// Sorts by cost rank (stable) and drops repeated ids.
void order_fixes(std::vector<Fix>& fixes);

}  // namespace oomdoc
