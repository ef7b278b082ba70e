#include "analyses/vllm_serve.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "analyses/fix_catalog.h"
#include "analyses/vllm_profile.h"
#include "core/units.h"
#include "readers/gpu_catalog.h"
#include "readers/model_resolver.h"
#include "readers/vllm_args.h"
#include "support/test_support.h"
#include "vllm_serve_test_support.h"

namespace oomdoc {
namespace {

using serve_test::inputs;
using serve_test::predict;

// vLLM's rotary cos/sin cache, inside "Model loading took" (vllm_profile rotary_cache_bytes):
// Llama-3.1-8B 131,072 positions x 128 x 2 B; gpt-oss (YaRN 4,096 x 32 positions, rotary 64, fp32
// in vLLM's gpt_oss.py) 131,072 x 64 x 4 B; Qwen2.5-7B (base config) 131,072 x 128 x 2 B.
constexpr uint64_t kLlama31RopeCache = 131072ull * 128 * 2;
constexpr uint64_t kGptOssRopeCache = 131072ull * 64 * 4;
constexpr uint64_t kQwen25RopeCache = 131072ull * 128 * 2;

TEST(VllmServe, V0AccountingWithLoggedFigures) {
  ServeInputs in = inputs({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "20000",
                           "--gpu-memory-utilization", "0.9"}, 24 * kGiB, "0.6.5");
  in.overrides.weights_bytes = 15 * kGiB;
  in.overrides.activation_bytes = 2 * kGiB;
  in.overrides.non_torch_bytes = kGiB / 2;
  ServePrediction p = predict(in);
  EXPECT_FALSE(p.behavior.v1_engine);
  EXPECT_EQ(p.budget_bytes, 23192823398u);              // floor(24 GiB x 0.9)
  EXPECT_EQ(p.available_kv_bytes, 4402341478);          // budget - 15 - 2 - 0.5 GiB
  EXPECT_EQ(p.capacity.num_blocks, 2099u);              // / 2 MiB per block of 32 layers
  EXPECT_TRUE(p.fits);
  ASSERT_EQ(p.log_lines.size(), 5u);
  EXPECT_EQ(p.log_lines[0], "Loading model weights took 15.0000 GB");
  EXPECT_EQ(p.log_lines[1], "the current vLLM instance can use total_gpu_memory (24.00GiB) x "
                            "gpu_memory_utilization (0.90) = 21.60GiB");
  EXPECT_EQ(p.log_lines[2], "model weights take 15.00GiB; non_torch_memory takes 0.50GiB; PyTorch activation "
                            "peak memory takes 2.00GiB; the rest of the memory reserved for KV Cache is 4.10GiB.");
  EXPECT_EQ(p.log_lines[3], "# GPU blocks: 2099, # CPU blocks: 2048");
  EXPECT_EQ(p.log_lines[4], "Maximum concurrency for 20000 tokens per request: 1.68x");
}

TEST(VllmServe, WeightsFollowTheFormat) {
  // bf16: exactly 2 bytes per parameter on one GPU.
  ServePrediction p = predict(inputs({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "4096"}, 80 * kGiB));
  EXPECT_EQ(p.weights.bytes, 2 * 8030261248ull + kLlama31RopeCache);
  EXPECT_EQ(p.log_lines[0], "Model loading took 14.9888 GiB");  // as vLLM logs it (vllm-logs 1, 2, 10)
  // AWQ 4-bit (named checkpoint, base config): Qwen/Qwen2.5-7B-Instruct-AWQ's safetensors hold
  // 5.58 GB (5.20 GiB); embeddings and head stay in fp16.
  ServeInputs awq = inputs({"vllm", "serve", "qwen2.5-7b", "--quantization", "awq", "--max-model-len", "4096"}, 80 * kGiB);
  awq.config.model = "Qwen/Qwen2.5-7B-Instruct-AWQ";  // the name says AWQ; the preset gives the shape
  ServePrediction q = predict(awq);
  EXPECT_NEAR(static_cast<double>(q.weights.bytes), 5.58e9, 0.01 * 5.58e9);
  // Tensor parallel halves each GPU's share.
  ServePrediction tp = predict(inputs({"vllm", "serve", "llama-3.1-8b", "-tp", "2", "--max-model-len", "4096"}, 80 * kGiB));
  EXPECT_NEAR(static_cast<double>(tp.weights.bytes), 8030261248.0 + kLlama31RopeCache, 1e6);
  // --cpu-offload-gb takes its GiB off each GPU.
  ServePrediction off = predict(inputs({"vllm", "serve", "llama-3.1-8b", "--cpu-offload-gb", "4", "--max-model-len", "4096"}, 80 * kGiB));
  EXPECT_EQ(off.weights.bytes, 2 * 8030261248ull + kLlama31RopeCache - 4 * kGiB);
  // ... from the decoder layers only: the embedding, head, final norm and rotary cache stay.
  ServePrediction all = predict(inputs({"vllm", "serve", "llama-3.1-8b", "--cpu-offload-gb", "100", "--max-model-len", "4096"}, 80 * kGiB));
  EXPECT_EQ(all.weights.bytes, 2 * (2 * 128256ull * 4096 + 4096) + kLlama31RopeCache);
  ASSERT_FALSE(all.warnings.empty());
  EXPECT_EQ(all.warnings.back().rfind("--cpu-offload-gb 100: only the decoder layers can be offloaded", 0), 0u);
  EXPECT_NE(all.weights.detail.find("GiB offloaded to CPU (of the 100 asked)"), std::string::npos) << all.weights.detail;
}

TEST(VllmServe, NamedQuantizedCheckpointTakesItsNamesBitsAndGroups) {
  // A GPTQ-Int8 name over the base model's config: 8-bit weights in groups of 128 (one byte per
  // weight plus an fp16 scale and an 8-bit zero point per 128), not the 4-bit GPTQ default.
  ServeInputs gptq8 = inputs({"vllm", "serve", "qwen2.5-7b", "--max-model-len", "4096"}, 80 * kGiB);
  gptq8.config.model = "Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8";
  ServePrediction g = predict(gptq8);
  EXPECT_EQ(g.settings.weights.method, "gptq");
  EXPECT_EQ(g.settings.weights.description, "gptq 8-bit, group 128: 1.023 B per linear weight");
  bool said = false;
  for (const auto& a : g.assumptions) {
    said |= a == "'Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8' ends in \"-gptq-int8\" but its config has no "
                 "quantization_config: weights sized as gptq 8-bit, groups of 128";
  }
  EXPECT_TRUE(said);
  // compressed-tensors W8A8 quantizes per output channel: one byte per weight.
  ServeInputs w8a8 = inputs({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "4096"}, 80 * kGiB);
  w8a8.config.model = "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8";
  EXPECT_EQ(predict(w8a8).settings.weights.description, "compressed-tensors 8-bit, per channel: 1.000 B per linear weight");
  // RedHatAI's -quantized.w4a16 uploads are compressed-tensors: that flag is accepted.
  ServeInputs w4a16 = inputs({"vllm", "serve", "llama-3.1-8b", "--quantization", "compressed-tensors",
                              "--max-model-len", "4096"}, 80 * kGiB);
  w4a16.config.model = "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16";
  auto accepted = predict_vllm_startup(w4a16);
  ASSERT_TRUE(accepted.ok()) << accepted.error().message;
  EXPECT_EQ(accepted->settings.weights.description, "compressed-tensors 4-bit, group 128: 0.520 B per linear weight");
  // A flag the name contradicts, one that quantizes at load too: vLLM refuses it on the real
  // checkpoint (its quantization_config decides), so oomdoc does.
  ServeInputs contradicted = inputs({"vllm", "serve", "qwen2.5-7b", "--quantization", "fp8", "--max-model-len", "4096"},
                                    80 * kGiB);
  contradicted.config.model = "Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8";
  auto refused = predict_vllm_startup(contradicted);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message.rfind("--quantization fp8 on 'Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8', quantized with "
                                          "gptq by its name (\"-gptq-int8\"): vLLM refuses it", 0), 0u)
      << refused.error().message;
}

// Speculative decoding is sized in analyses/vllm_speculative.cpp: tests/analyses/vllm_speculative_test.cpp.

TEST(VllmServe, PreQuantizedCheckpointOnDiskGivesTheExactSize) {
  ServeInputs in = inputs({"vllm", "serve", "qwen2.5-7b", "--max-model-len", "4096"}, 80 * kGiB);
  in.model.quantization = "awq";
  in.model.quantization_bits = 4;
  in.model.quantization_group_size = 128;
  in.model.checkpoint_bytes = 5580000000;   // what the safetensors headers would sum to
  ServePrediction p = predict(in);
  EXPECT_NEAR(static_cast<double>(p.weights.bytes), 5580000000.0 + kQwen25RopeCache, 2.0);
  // Two GPUs: half each, the embedding and head split like the rest.
  in.config.tensor_parallel_size = 2;
  ServePrediction tp = predict(in);
  EXPECT_NEAR(static_cast<double>(tp.weights.bytes), 5580000000.0 / 2 + kQwen25RopeCache, 0.002 * 5580000000.0);
}

TEST(VllmServe, DefaultUtilizationDependsOnTheVersionAndIsSaid) {
  ServePrediction now = predict(inputs({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192"}, 80 * kGiB));
  EXPECT_DOUBLE_EQ(now.settings.gpu_memory_utilization, 0.92);
  EXPECT_TRUE(now.settings.utilization_is_default);
  ServePrediction old = predict(inputs({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192"}, 80 * kGiB, "0.8.5"));
  EXPECT_DOUBLE_EQ(old.settings.gpu_memory_utilization, 0.90);
  bool said = false;
  for (const auto& a : old.assumptions) {
    said |= a == "gpu_memory_utilization 0.90: the default of vLLM 0.8.5 (0.92 from v0.21, 0.9 before)";
  }
  EXPECT_TRUE(said);
}

TEST(VllmServe, CudaGraphsAreChargedFromV021AndEnforceEagerFreesThem) {
  auto command = std::vector<std::string>{"vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192"};
  ServePrediction graphs = predict(inputs(command, 80 * kGiB, "0.21.0"));
  EXPECT_TRUE(graphs.graphs_in_budget);
  EXPECT_GT(graphs.cuda_graphs.bytes, 0u);
  command.push_back("--enforce-eager");
  ServePrediction eager = predict(inputs(command, 80 * kGiB, "0.21.0"));
  EXPECT_EQ(eager.available_kv_bytes - graphs.available_kv_bytes, static_cast<int64_t>(graphs.cuda_graphs.bytes));
  ServePrediction before = predict(inputs({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192",
                                           "--gpu-memory-utilization", "0.92"}, 80 * kGiB, "0.20.1"));
  EXPECT_FALSE(before.graphs_in_budget);
  EXPECT_EQ(before.available_kv_bytes - graphs.available_kv_bytes, static_cast<int64_t>(graphs.cuda_graphs.bytes));
}

TEST(VllmServe, KvCacheMemoryBytesSkipsProfiling) {
  ServePrediction p = predict(inputs({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192",
                                      "--kv-cache-memory-bytes", "4G"}, 80 * kGiB));
  EXPECT_EQ(p.available_kv_bytes, static_cast<int64_t>(4 * kGiB));
  EXPECT_EQ(p.capacity.tokens, 32768u);   // 4 GiB / 128 KiB
}

// A model larger than any card: the answer is more GPUs (16 H100s for Llama-3.1-405B in bf16, TP 8
// inside a node and PP 2 across two), not 704 GiB of CPU offload per GPU, which used to be the only
// fix offered.
TEST(VllmServe, ModelLargerThanAnyCardGetsANodeLayoutNotOffload) {
  ServeInputs in = inputs({"vllm", "serve", "meta-llama/Llama-3.1-405B-Instruct", "--max-model-len", "8192"}, 80 * kGiB);
  in.target.nvlink = true;
  auto report = analyze_serve(in);
  ASSERT_TRUE(report.ok()) << report.error().message;
  std::vector<std::string> flags;
  for (const auto& fix : report->fixes) {
    EXPECT_TRUE(fix.fits) << fix.flag;
    flags.push_back(fix.flag);
  }
  EXPECT_EQ(flags, (std::vector<std::string>{"--pipeline-parallel-size 16",
                                             "--tensor-parallel-size 8 --pipeline-parallel-size 2"}));
  EXPECT_EQ(report->fixes[1].cost, "16 GPUs: 2 nodes of 8, TP 8 inside each node's NVLink, PP 2 across nodes");
}

TEST(VllmServe, TooLongForOneRequestInVllmsWords) {
  ServeInputs in = inputs({"vllm", "serve", "llama-3.1-8b"}, 24 * kGiB);
  auto report = analyze_serve(in);
  ASSERT_TRUE(report.ok());
  const ServePrediction& p = report->prediction;
  EXPECT_EQ(p.settings.max_model_len, 131072u);
  EXPECT_EQ(p.settings.max_model_len_source, "model context");
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->kind, "max_len_too_long");
  EXPECT_EQ(p.error->message.rfind("To serve at least one request with the models's max seq len (131072), "
                                   "(16.00 GiB KV cache is needed, which is larger than the available KV cache memory (", 0), 0u)
      << p.error->message;
  EXPECT_NE(p.error->message.find(fmt::format("the estimated maximum model length is {}. ", p.max_model_len_that_fits)),
            std::string::npos);
  EXPECT_EQ(p.max_model_len_that_fits, p.capacity.tokens);   // every block for one request
  // Fixes: the shorter context comes first, and every listed fix fits.
  ASSERT_FALSE(report->fixes.empty());
  EXPECT_EQ(report->fixes[0].flag.rfind("--max-model-len ", 0), 0u);
  EXPECT_LE(report->fixes[0].max_model_len, p.max_model_len_that_fits);
  EXPECT_EQ(report->fixes[0].max_model_len % 1024, 0u);
  for (const auto& fix : report->fixes) EXPECT_TRUE(fix.fits) << fix.flag;
  // The order is the fix catalogue's (one place, shared with explain): ranks never go down.
  std::vector<std::string> ids;
  for (size_t i = 0; i < report->fixes.size(); ++i) {
    ids.push_back(report->fixes[i].id);
    if (i > 0) {
      EXPECT_LE(fix_info(report->fixes[i - 1].id).cost_rank, fix_info(report->fixes[i].id).cost_rank)
          << report->fixes[i - 1].flag << " before " << report->fixes[i].flag;
    }
  }
  // More GPUs among themselves: fewest first, then the most KV tokens (PP 2 holds more than TP 2 here).
  EXPECT_EQ(ids, (std::vector<std::string>{"vllm_max_model_len", "vllm_pipeline_parallel", "vllm_tensor_parallel",
                                           "vllm_cpu_offload", "bigger_gpu"}));

  // V0 says it differently.
  ServePrediction v0 = predict(inputs({"vllm", "serve", "llama-3.1-8b"}, 24 * kGiB, "0.6.3"));
  ASSERT_TRUE(v0.error);
  EXPECT_EQ(v0.error->message,
            fmt::format("The model's max seq len (131072) is larger than the maximum number of tokens that can be "
                        "stored in KV cache ({}). Try increasing `gpu_memory_utilization` or decreasing "
                        "`max_model_len` when initializing the engine.", v0.capacity.num_blocks * 16));
}

TEST(VllmServe, OtherStartupErrors) {
  ServePrediction weights = predict(inputs({"vllm", "serve", "llama-3.1-70b", "--max-model-len", "4096"}, 24 * kGiB));
  ASSERT_TRUE(weights.error);
  EXPECT_EQ(weights.error->kind, "weights_oom");
  EXPECT_EQ(weights.error->message.rfind("Failed to load model - not enough GPU memory.", 0), 0u);

  ServePrediction free = predict(inputs({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "4096",
                                         "--gpu-memory-utilization", "0.99"}, 24 * kGiB));
  ASSERT_TRUE(free.error);
  EXPECT_EQ(free.error->message,
            "Free memory on device (23.50/24.00 GiB) on startup is less than desired GPU memory utilization "
            "(0.99, 23.76 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.");

  ServeInputs none = inputs({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "4096"}, 24 * kGiB);
  none.overrides.weights_bytes = 22 * kGiB;
  ServePrediction p = predict(none);
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->kind, "no_cache_blocks");
  EXPECT_EQ(p.error->message, "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                              "when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/"
                              "conserving_memory/ for more details.");
  EXPECT_LT(p.available_kv_bytes, 0);
}

// The profile run is a forward pass before any KV cache exists: weights, its activation peak and
// the non-torch memory must fit the card, or it dies there (a CUDA OOM) and logs only the weights,
// never reaching "No available memory for the cache blocks". Just under the card, the budget is
// what is short.
TEST(VllmServe, ProfileRunThatDoesNotFitTheCardIsACudaOom) {
  ServeInputs in = inputs({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "4096"}, 24 * kGiB);
  in.overrides.weights_bytes = 21 * kGiB;
  in.overrides.activation_bytes = 2 * kGiB;
  in.overrides.non_torch_bytes = kGiB / 2 + 1;   // with the 0.5 GiB context: one byte over 24 GiB
  ServePrediction p = predict(in);
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->kind, "profile_oom");
  EXPECT_EQ(p.error->message,
            "torch.OutOfMemoryError: CUDA out of memory in the profile run (21.00 GiB of weights and a 2.00 GiB "
            "activation peak for 2048 batched tokens, with the CUDA context and non-torch memory, need 0.00 GiB "
            "more than the 24.00 GiB GPU)");
  EXPECT_EQ(p.log_lines, std::vector<std::string>{"Model loading took 21.0000 GiB"});
  ServeInputs v0 = inputs({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "4096"}, 24 * kGiB, "0.6.5");
  v0.overrides = in.overrides;
  ServePrediction old = predict(v0);
  ASSERT_TRUE(old.error);
  EXPECT_EQ(old.error->kind, "profile_oom");
  EXPECT_EQ(old.log_lines, std::vector<std::string>{"Loading model weights took 21.0000 GB"});
  in.overrides.non_torch_bytes = kGiB / 2;       // exactly the card: the profile runs, the budget is short
  ServePrediction q = predict(in);
  ASSERT_TRUE(q.error);
  EXPECT_EQ(q.error->kind, "no_cache_blocks");
}

TEST(VllmServe, AutoFitMaxModelLen) {
  ServePrediction p = predict(inputs({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "-1"}, 24 * kGiB));
  EXPECT_TRUE(p.fits);
  EXPECT_EQ(p.settings.max_model_len, p.max_model_len_that_fits);
  EXPECT_LT(p.settings.max_model_len, 131072u);
  ASSERT_GE(p.log_lines.size(), 4u);
  EXPECT_EQ(p.log_lines[2].rfind("Available KV cache memory: ", 0), 0u);
  // Every block for one request: floor(available / 2 MiB) blocks of 16 tokens.
  EXPECT_EQ(p.settings.max_model_len, static_cast<uint64_t>(p.available_kv_bytes) / (2 * kMiB) * 16);
  EXPECT_EQ(p.log_lines[3], fmt::format("Auto-fit max_model_len: reduced from 131072 to {} to fit in available GPU "
                                        "memory ({:.2f} GiB available for KV cache)", p.settings.max_model_len,
                                        static_cast<double>(p.available_kv_bytes) / kGiB));
}

TEST(VllmServe, ContradictoryInputIsAnError) {
  auto too_long = predict_vllm_startup(inputs({"vllm", "serve", "llama-3-8b", "--max-model-len", "16384"}, 80 * kGiB));
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().message.rfind("--max-model-len 16384 is above meta-llama/Meta-Llama-3-8B's context of 8192 tokens; "
                                           "vLLM refuses it: \"User-specified max_model_len (16384) is greater than the derived "
                                           "max_model_len (max_position_embeddings=8192", 0), 0u)
      << too_long.error().message;
  auto allowed = predict_vllm_startup(inputs({"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "vllm", "serve", "llama-3-8b",
                                              "--max-model-len", "16384"}, 80 * kGiB));
  EXPECT_TRUE(allowed.ok());
  auto quant = predict_vllm_startup(inputs({"vllm", "serve", "deepseek-v3", "-q", "awq", "-tp", "16"}, 80 * kGiB));
  ASSERT_FALSE(quant.ok());
  EXPECT_EQ(quant.error().message, "Quantization method specified in the model config (fp8) does not match the "
                                   "quantization method specified in the `quantization` argument (awq).");
  ServeInputs t4 = inputs({"vllm", "serve", "llama-3-8b", "--dtype", "bfloat16"}, 16 * kGiB);
  t4.target.name = "Tesla T4 16GB";
  t4.target.bf16 = false;
  auto bf16 = predict_vllm_startup(t4);
  ASSERT_FALSE(bf16.ok());
  EXPECT_EQ(bf16.error().message.rfind("--dtype bfloat16 on Tesla T4 16GB: vLLM refuses it: \"Bfloat16 is only "
                                       "supported on GPUs with compute capability of at least 8.0.", 0), 0u);
  t4.config.dtype = "auto";   // auto serves the bf16 checkpoint in fp16 there
  auto fp16 = predict_vllm_startup(t4);
  ASSERT_TRUE(fp16.ok());
  EXPECT_EQ(fp16->settings.weights.dtype, "float16");
  auto tp = predict_vllm_startup(inputs({"vllm", "serve", "llama-3-8b", "-tp", "3"}, 80 * kGiB));
  ASSERT_FALSE(tp.ok());
  EXPECT_EQ(tp.error().message, "Total number of attention heads (32) must be divisible by tensor parallel size (3).");
}

ModelSpec llama_3_1_8b() { return inputs({"vllm", "serve", "llama-3.1-8b"}, 24 * kGiB).model; }

TEST(VllmServe, PipelineStagesBindOnTheFewestBlocks) {
  ServePrediction p = predict(inputs({"vllm", "serve", "llama-3.1-8b", "-pp", "2", "--max-model-len", "8192"}, 24 * kGiB));
  EXPECT_EQ(p.kv.bytes_per_token, 64 * kKiB);
  // Stage 0 holds the embedding, stage 1 the (untied) head of the same size: equal weights. Only
  // the last stage computes logits and samples in the profile run, so its peak is higher and it binds.
  EXPECT_EQ(p.binding_stage, 1u);
  EXPECT_EQ(p.activation.detail, "profile run of 2048 tokens and 256 sequences");
  // 32 layers over 3 stages: 11, 11, 10 (vLLM's get_pp_indices gives the remainder to the
  // earlier stages); the first stage's extra layer and embedding outweigh the sampler's peak.
  ServePrediction three = predict(inputs({"vllm", "serve", "llama-3.1-8b", "-pp", "3", "--max-model-len", "8192"},
                                         24 * kGiB));
  EXPECT_EQ(three.binding_stage, 0u);
  EXPECT_EQ(three.activation.bytes, profile_forward_bytes(llama_3_1_8b(), 2048, 1, 2));
  EXPECT_EQ(three.activation.detail,
            "profile run of 2048 tokens, forward pass only (this pipeline stage computes no logits)");
}

// V0: only each tensor-parallel group's driver samples (vllm/worker/model_runner.py), so the
// other ranks log a lower activation peak and more memory for the KV cache; the executor takes
// the fewest blocks, the driver's.
TEST(VllmServe, V0RanksThatDoNotSampleLogTheirOwnProfile) {
  ServePrediction p = predict(inputs({"VLLM_USE_V1=0", "vllm", "serve", "llama-3.1-8b", "-tp", "2",
                                      "--max-model-len", "8192"}, 24 * kGiB, "0.7.3"));
  ASSERT_TRUE(p.non_sampling_ranks.has_value());
  const uint64_t forward = profile_forward_bytes(llama_3_1_8b(), p.settings.max_num_batched_tokens, 2, 2);
  EXPECT_EQ(p.non_sampling_ranks->activation_bytes, forward);
  EXPECT_LT(forward, p.activation.bytes);
  EXPECT_EQ(p.non_sampling_ranks->available_kv_bytes,
            p.available_kv_bytes + static_cast<int64_t>(p.activation.bytes - forward));
  bool logged = false;
  for (const auto& line : p.log_lines) {
    if (line.rfind("(VllmWorkerProcess, the other rank) model weights take", 0) == 0) logged = true;
  }
  EXPECT_TRUE(logged);
  // V1 samples on every rank; one rank alone has no others.
  EXPECT_FALSE(predict(inputs({"vllm", "serve", "llama-3.1-8b", "-tp", "2", "--max-model-len", "8192"}, 24 * kGiB))
                   .non_sampling_ranks.has_value());
  EXPECT_FALSE(predict(inputs({"VLLM_USE_V1=0", "vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192"}, 24 * kGiB,
                              "0.7.3")).non_sampling_ranks.has_value());
  EXPECT_TRUE(p.fits);
}

TEST(VllmServe, SlidingWindowLayersGetTheirOwnGroupsFromV010) {
  auto command = std::vector<std::string>{"vllm", "serve", "gemma-2-9b"};
  ServePrediction now = predict(inputs(command, 48 * kGiB));
  EXPECT_EQ(now.kv.sliding_layers, 21u);
  EXPECT_EQ(now.capacity.num_groups, 2u);
  // Full groups need cdiv(8192, 16) = 512 blocks per request, sliding ones
  // cdiv(min(4095 + 2048, 8192), 16) + 1 = 385.
  EXPECT_EQ(now.capacity.blocks_per_request, 512u + 385u);
  ServePrediction v0 = predict(inputs(command, 48 * kGiB, "0.6.5"));
  EXPECT_EQ(v0.capacity.num_groups, 1u);
  EXPECT_EQ(v0.capacity.blocks_per_request, 512u);
  bool said = false;
  for (const auto& a : v0.assumptions) said |= a.find("sliding-window layers are sized as full attention") == 0;
  EXPECT_TRUE(said);
}

// Gemma 3 27B (google/gemma-3-27b-it's config.json, text_config of the VLM wrapper): 62 layers,
// every sixth global, so 10 full and 52 sliding (window 1024) layers of 16 KV heads of 128.
TEST(VllmServe, Gemma3HybridGroupsAtFullContext) {
  const std::string gemma = testing::fixture_path("serve/gemma-3-27b-it");
  ServeInputs in = inputs({"vllm", "serve", gemma, "--max-model-len", "131072", "--max-num-batched-tokens", "2048",
                           "--kv-cache-memory-bytes", "17179869184", "--limit-mm-per-prompt", "{\"image\": 4}"},
                          80 * kGiB);
  ServePrediction p = predict(in);
  EXPECT_EQ(p.kv.full_layers, 10u);
  EXPECT_EQ(p.kv.sliding_layers, 52u);
  // Groups of 10 layers (52 > 1.25 x 10): 1 full + cdiv(52, 10) = 6 sliding groups; a block of
  // one group is 10 layers x 16 tokens x 2 x 16 heads x 128 x 2 B = 1,310,720 B.
  EXPECT_EQ(p.capacity.num_groups, 7u);
  EXPECT_EQ(p.capacity.num_blocks, 13107u);                 // 16 GiB / 1,310,720
  EXPECT_EQ(p.capacity.pool_tokens, 1872u * 16);             // 13107 // 7 groups x 16
  // One request: cdiv(131072, 16) = 8192 full blocks + 6 x (cdiv(1023 + 2048, 16) + 1) = 6 x 193.
  EXPECT_EQ(p.capacity.blocks_per_request, 8192u + 6 * 193);
  EXPECT_NEAR(p.capacity.max_concurrency, 13107.0 / 9350.0, 1e-12);
  // The logged figure (v0.20+): int(131072 x 13107 / 9350) = 183,739 tokens.
  EXPECT_EQ(p.capacity.tokens, 183739u);
  // v0.19 logged the pool.
  ServeInputs older = inputs({"vllm", "serve", gemma, "--max-model-len", "131072", "--max-num-batched-tokens", "2048",
                              "--kv-cache-memory-bytes", "17179869184", "--limit-mm-per-prompt", "{\"image\": 4}"},
                             80 * kGiB, "0.19.0");
  EXPECT_EQ(predict(older).capacity.tokens, 1872u * 16);
  EXPECT_TRUE(p.fits);
  // Gemma 3's 131072 positions are not scaled again by its linear rope factor 8.
  EXPECT_EQ(p.settings.model_context, 131072u);
}

// gpt-oss: MXFP4 experts (0.5 B per value + one e8m0 byte per 32 = 0.53125 B), everything else bf16.
// 20b on one GPU (counts in tests/model/architecture_test.cpp):
//   expert matrices  24 x 32 x (2880x5760 + 2880x2880) = 19,110,297,600 x 0.53125 = 10,152,345,600
//   the rest         20,914,757,184 - 19,110,297,600   =  1,804,459,584 x 2       =  3,608,919,168
//                                                                                  13,761,264,768 B
// KV: 12 full + 12 sliding (window 128) layers of 8 KV heads of 64: 2 x 8 x 64 x 2 B = 2,048 B per
// token and layer, 49,152 B per token over the 24 layers; vLLM's hybrid manager puts the 12
// sliding layers in a group of their own (12 vs 12: one group each), a block of a group being
// 12 layers x 16 tokens x 2,048 B = 393,216 B.
// Real logs, as checks: gpt-oss-120b on one H100 "Model loading took 64.38 GiB" (Triton MXFP4
// backend, vllm-project/vllm#33155) and "65.9651 GiB" (Marlin, vLLM 0.10.1, vllm-project/vllm#23278):
// vLLM's MoE backends pad and swizzle the expert tensors (Marlin: intermediate to a multiple of
// 128, hidden of 256), so the logged figure is 5.5-8.5% above the format's own bytes. A card given
// only by its memory has no architecture: sized as stored (Marlin's padding: the tests below).
TEST(VllmServe, GptOssMxfp4ExpertsAndSlidingWindowGroups) {
  ServePrediction p = predict(inputs({"vllm", "serve", "openai/gpt-oss-20b", "--max-num-batched-tokens", "8192"}, 80 * kGiB));
  EXPECT_EQ(p.weights.bytes, 13761264768u + kGptOssRopeCache);
  EXPECT_EQ(p.log_lines[0], "Model loading took 12.8474 GiB");
  EXPECT_EQ(p.kv.full_layers, 12u);
  EXPECT_EQ(p.kv.sliding_layers, 12u);
  EXPECT_EQ(p.kv.bytes_per_token, 49152u);
  EXPECT_EQ(p.capacity.num_groups, 2u);
  // yarn: original_max_position_embeddings 4096 x factor 32 (vLLM logs "Using max model len 131072").
  EXPECT_EQ(p.settings.max_model_len, 131072u);
  // A request of 131072 tokens: cdiv(131072, 16) = 8192 full blocks + cdiv(127 + 8192, 16) + 1 = 521
  // sliding ones (the window plus a step of max_num_batched_tokens 8192).
  EXPECT_EQ(p.capacity.blocks_per_request, 8192u + 521u);
  EXPECT_TRUE(p.fits);
  bool said = false;
  for (const auto& a : p.assumptions) said |= a.find("mxfp4 experts sized as stored (0.53125 B per weight)") == 0;
  EXPECT_TRUE(said);

  // 120b over two GPUs: experts split over the 2 ranks, attention by heads, vocabulary by rows,
  // the router (2880 x 128 + 128) whole on each rank.
  //   non-expert Linears and sinks (115,670,679,552 - 114,661,785,600) x 2 B / 2 = 1,008,893,952
  //   expert matrices 114,661,785,600 x 0.53125 / 2                          = 30,457,036,800
  //   routers replicated: 36 x 368,768 x (2 - 1)                             =     13,275,648
  //   norms 36 x 5,760 x 2 + embeddings and head 2 x 579,133,440 + final norm 5,760
  //                                                                 total     32,637,893,760 B
  ServePrediction tp = predict(inputs({"vllm", "serve", "openai/gpt-oss-120b", "--tensor-parallel-size", "2"}, 80 * kGiB));
  EXPECT_EQ(tp.weights.bytes, 32637893760u + kGptOssRopeCache);
  EXPECT_EQ(tp.kv.full_layers, 18u);
  EXPECT_EQ(tp.kv.sliding_layers, 18u);
  EXPECT_EQ(tp.kv.bytes_per_token, 36u * 2 * 4 * 64 * 2);  // 4 of the 8 KV heads per GPU
  // The one-GPU figure against the logged ones (a check, not a constant): 60.77 GiB, below the
  // padded kernels' 64.38 and 65.97 GiB by the padding.
  ServePrediction one = predict(inputs({"vllm", "serve", "openai/gpt-oss-120b"}, 80 * kGiB));
  const double logged = 64.38 * static_cast<double>(kGiB);
  EXPECT_LT(static_cast<double>(one.weights.bytes), logged);
  EXPECT_GT(static_cast<double>(one.weights.bytes), 0.94 * logged);
}

// gpt-oss's MXFP4 experts as vLLM's MoE backends allocate them (Mxfp4MoEMethod.create_weights in
// vllm/model_executor/layers/quantization/mxfp4.py). Marlin pads the intermediate size per GPU to
// a multiple of 128 and the hidden size to 256 (2880 -> 2944 and 3072); per expert and layer:
//   w13 blocks 2 x 2944 x 3072/2 = 9,043,968  scales 2 x 2944 x 3072/32 = 565,248  bias 2 x 2944 x 2 = 11,776
//   w2  blocks 3072 x 2944/2     = 4,521,984  scales 3072 x 2944/32     = 282,624  bias 3072 x 2     =  6,144
//                                                                               total 14,431,744 B
// against the stored 3 x 2880 x 2880 x 0.53125 + (2 x 2880 + 2880) x 2 B = 13,236,480: 1,195,264 B more.
//   gpt-oss-20b, 24 layers x 32 experts, on an A100 / L40S / RTX 4090 (Ampere and Ada: Marlin in
//   every release): 13,761,264,768 + 768 x 1,195,264 = 13,761,264,768 + 917,962,752 = 14,679,227,520 B
//   gpt-oss-120b, 36 layers x 128 experts, on one H100 with v0.10.1 (Hopper ran Marlin before v0.12,
//   without triton_kernels): 65,248,815,744 + 4,608 x 1,195,264 = 70,756,592,256 B = 65.8972 GiB.
//   vllm-project/vllm#23278 (v0.10.1, one H100) logged "Model loading took 65.9651 GiB": 0.103%
//   (69.5 MiB) more, 32 MiB of it probably gpt_oss.py's fp32 YaRN cos/sin cache (131072 x 64 x 4 B), which
//   oomdoc counts for no model.
ServeInputs on_gpu(const std::vector<std::string>& command, const std::string& gpu, const std::string& version = "") {
  ServeInputs in = inputs(command, 80 * kGiB, version);
  auto spec = find_gpu(gpu);
  EXPECT_TRUE(spec.ok()) << gpu;
  if (spec.ok()) in.target = serve_target(spec.value());
  return in;
}

bool has_assumption_starting(const ServePrediction& p, const std::string& prefix) {
  for (const auto& a : p.assumptions) {
    if (a.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// gpt-oss-20b over 5 pipeline stages (5, 5, 5, 5, 4 layers; even layers slide): vLLM cuts the
// whole model's 12 + 12 layers into one group of each and projects them onto every stage
// (vllm-project/vllm#23974, v0.11). The binding stage holds 3 sliding and 2 full layers, so a block
// costs 3 pages of 16 x 2 x 8 x 64 x 2 = 32,768 B: 65,594,277,337 B for the KV cache (the H100's
// 0.92 budget less the given 10 + 1 + 0.5 GiB and 300 MiB non-torch) / 98,304 = 667,259 blocks,
// and a request of 131072 tokens takes the model's 2 groups' 8192 + 521 blocks. v0.10 grouped
// each stage's own layers (3 groups of 2 here).
TEST(VllmServe, PipelineStagesShareTheWholeModelsKvGroups) {
  auto sized = [](const std::string& version) {
    ServeInputs in = on_gpu({"vllm", "serve", "openai/gpt-oss-20b", "-pp", "5"}, "h100", version);
    in.overrides.weights_bytes = 10 * kGiB;
    in.overrides.activation_bytes = kGiB;
    in.overrides.cuda_graph_bytes = kGiB / 2;
    return predict(in);
  };
  ServePrediction p = sized("");
  EXPECT_EQ(p.kv.sliding_layers, 3u);
  EXPECT_EQ(p.kv.full_layers, 2u);
  EXPECT_EQ(p.capacity.num_groups, 2u);
  EXPECT_EQ(p.available_kv_bytes, 65594277337);
  EXPECT_EQ(p.capacity.num_blocks, 667259u);
  EXPECT_EQ(p.capacity.blocks_per_request, 8192u + 521u);
  EXPECT_EQ(sized("0.10.2").capacity.num_groups, 3u);
}

// MLA on Hopper: FlashMLA pages by 64 tokens and vLLM forces that size when none is given; from
// v0.17 (vllm-project/vllm#35122) a --block-size given by hand is kept and a backend that takes it is
// chosen instead.
TEST(VllmServe, MlaBlockSizeIsForcedOnlyWhenNotGiven) {
  const std::vector<std::string> launch = {"vllm", "serve", "deepseek-ai/DeepSeek-V3", "-tp", "8"};
  EXPECT_EQ(predict(on_gpu(launch, "h200")).kv.block_size, 64u);
  std::vector<std::string> given = launch;
  given.insert(given.end(), {"--block-size", "16"});
  EXPECT_EQ(predict(on_gpu(given, "h200")).kv.block_size, 16u);
  EXPECT_EQ(predict(on_gpu(given, "h200", "0.16.0")).kv.block_size, 64u);
}

TEST(VllmServe, Mxfp4ExpertsPaddedAsTheMoeBackendAllocatesThem) {
  for (const char* gpu : {"a100", "l40s", "4090"}) {
    ServePrediction p = predict(on_gpu({"vllm", "serve", "openai/gpt-oss-20b", "--max-model-len", "4096"}, gpu));
    EXPECT_EQ(p.weights.bytes, 14679227520u + kGptOssRopeCache) << gpu;
    EXPECT_EQ(p.weights.detail, "mxfp4: 0.53125 B per expert weight, the rest bfloat16, padded for Marlin") << gpu;
    EXPECT_TRUE(has_assumption_starting(p, "mxfp4 experts as vLLM's Marlin MoE backend allocates them")) << gpu;
  }
  ServePrediction l40s = predict(on_gpu({"vllm", "serve", "openai/gpt-oss-20b", "--max-model-len", "4096"}, "l40s"));
  EXPECT_TRUE(has_assumption_starting(
      l40s, "mxfp4 experts as vLLM's Marlin MoE backend allocates them (Ada GPUs run Marlin in every release): "
            "Mxfp4MoEMethod.create_weights pads the intermediate size per GPU 2880 to 2944 and the hidden size "
            "2880 to 3072"));

  // One H100, v0.10.1: Marlin, as in vllm-project/vllm#23278.
  ServePrediction h100 = predict(on_gpu({"vllm", "serve", "openai/gpt-oss-120b"}, "h100", "0.10.1"));
  EXPECT_EQ(h100.weights.bytes, 70756592256u + kGptOssRopeCache);
  EXPECT_EQ(h100.log_lines[0], "Model loading took 65.9285 GiB");
  const double logged = 65.9651 * static_cast<double>(kGiB);
  EXPECT_NEAR(static_cast<double>(h100.weights.bytes) / logged, 1.0, 0.0006);  // -0.055%
  EXPECT_FALSE(predict(on_gpu({"vllm", "serve", "openai/gpt-oss-120b"}, "h100", "0.11.2")).behavior.mxfp4_triton_on_hopper);

  // Two H100s, v0.10.1: 1440 intermediate values per GPU pad to 1536; per expert and layer
  //   w13 2 x 1536 x 1536 + 2 x 1536 x 96 + 2 x 1536 x 2 = 5,019,648
  //   w2  3072 x 768 + 3072 x 48 + 3072 x 2 (whole bias)  = 2,512,896      7,532,544 B
  // against 3 x 2880 x 2880 x 0.53125 / 2 + 8640 x 2 / 2 = 6,618,240 charged: 914,304 B more,
  // x 4,608 = 4,213,112,832 B over the stored 32,637,893,760.
  ServePrediction tp2 = predict(on_gpu({"vllm", "serve", "openai/gpt-oss-120b", "-tp", "2"}, "h100", "0.10.1"));
  EXPECT_EQ(tp2.weights.bytes, 32637893760u + 4213112832u + kGptOssRopeCache);
  EXPECT_TRUE(has_assumption_starting(tp2, "mxfp4 experts as vLLM's Marlin MoE backend allocates them (Hopper before "
                                           "v0.12 runs Marlin without triton_kernels, which vLLM bundles from v0.12"));

  // VLLM_MXFP4_USE_MARLIN=1 forces Marlin on a current vLLM's Hopper too.
  ServePrediction forced = predict(on_gpu({"VLLM_MXFP4_USE_MARLIN=1", "vllm", "serve", "openai/gpt-oss-120b"}, "h100"));
  EXPECT_EQ(forced.weights.bytes, 70756592256u + kGptOssRopeCache);
}

TEST(VllmServe, Mxfp4ExpertsStayAsStoredWhereThePaddingIsNotDerived) {
  // A current vLLM on Hopper runs Triton, whose swizzled layout the source does not size.
  ServePrediction h100 = predict(on_gpu({"vllm", "serve", "openai/gpt-oss-120b"}, "h100"));
  EXPECT_TRUE(h100.behavior.mxfp4_triton_on_hopper);
  EXPECT_EQ(h100.weights.bytes, 65248815744u + kGptOssRopeCache);
  EXPECT_EQ(h100.weights.detail, "mxfp4: 0.53125 B per expert weight, the rest bfloat16");
  EXPECT_TRUE(has_assumption_starting(h100, "mxfp4 experts sized as stored (0.53125 B per weight): Hopper runs the "
                                            "Triton backend"));
  ServePrediction triton = predict(on_gpu({"VLLM_MXFP4_USE_MARLIN=0", "vllm", "serve", "openai/gpt-oss-120b"}, "h100", "0.10.1"));
  EXPECT_EQ(triton.weights.bytes, 65248815744u + kGptOssRopeCache);
  // Blackwell: FlashInfer (B200) or Marlin (RTX 50): the catalog does not tell which.
  ServePrediction b200 = predict(on_gpu({"vllm", "serve", "openai/gpt-oss-120b"}, "b200"));
  EXPECT_EQ(b200.weights.bytes, 65248815744u + kGptOssRopeCache);
  EXPECT_TRUE(has_assumption_starting(b200, "mxfp4 experts sized as stored (0.53125 B per weight): on Blackwell"));
  // AMD: ROCm's alignment is the platform's.
  EXPECT_EQ(predict(on_gpu({"vllm", "serve", "openai/gpt-oss-120b"}, "mi300x")).weights.bytes, 65248815744u + kGptOssRopeCache);
  // Other formats and unquantized models do not move on a Marlin GPU.
  ServePrediction llama = predict(on_gpu({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "4096"}, "a100"));
  EXPECT_EQ(llama.weights.bytes, 2 * 8030261248ull + kLlama31RopeCache);
}

// --kv-cache-dtype auto takes a ModelOpt checkpoint's kv_cache_quant_algo (vLLM's
// resolve_kv_cache_dtype_string); an explicit dtype wins.
TEST(VllmServe, AutoKvCacheDtypeFollowsTheCheckpointsDirective) {
  ServeInputs in = inputs({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192"}, 80 * kGiB);
  in.checkpoint_kv_cache_dtype = "fp8_e4m3";
  in.checkpoint_kv_cache_source = "hf_quant_config.json";
  ServePrediction p = predict(in);
  EXPECT_EQ(p.settings.kv_cache_dtype, "fp8_e4m3");
  EXPECT_EQ(p.kv.bytes_per_token, 2u * 32 * 8 * 128);   // 1 byte per element, not bf16's 2
  bool said = false;
  for (const auto& a : p.assumptions) {
    said |= a == "KV cache fp8_e4m3: --kv-cache-dtype auto takes the checkpoint's kv_cache_quant_algo "
                 "(hf_quant_config.json); pass --kv-cache-dtype bfloat16 for a 16-bit cache";
  }
  EXPECT_TRUE(said);
  ServeInputs explicit_bf16 = in;
  explicit_bf16.config.kv_cache_dtype = "bfloat16";
  EXPECT_EQ(predict(explicit_bf16).kv.bytes_per_token, 2u * 32 * 8 * 128 * 2);
}

// Qwen's documented context extension: YaRN x4 over 32768 positions given on the command line makes
// vLLM's derived max_model_len 131072, so --max-model-len 131072 is accepted (it was refused as
// above the model's 32768 / 40960).
TEST(VllmServe, RopeScalingOverrideRaisesTheDerivedContext) {
  const std::string yarn = "{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
                           "\"original_max_position_embeddings\": 32768}}";
  for (const char* name : {"Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-8B"}) {
    ServeInputs in = inputs({"vllm", "serve", name, "--hf-overrides", yarn, "--max-model-len", "131072"}, 80 * kGiB);
    auto p = predict_vllm_startup(in);
    ASSERT_TRUE(p.ok()) << name << ": " << p.error().message;
    EXPECT_EQ(p->settings.model_context, 131072u) << name;
    EXPECT_EQ(p->settings.max_model_len, 131072u) << name;
    bool said = false;
    for (const auto& a : p->assumptions) {
      said |= a == "rope scaling from the command line (yarn x4): vLLM's derived max_model_len is 131072";
    }
    EXPECT_TRUE(said) << name;
  }
  // Without it the same length is refused in vLLM's words.
  auto refused = predict_vllm_startup(inputs({"vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "131072"},
                                             80 * kGiB));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("User-specified max_model_len (131072) is greater than the derived"),
            std::string::npos);
  // The default context follows the override too: the older --rope-scaling flag, factor 2.
  ServeInputs old = inputs({"vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--rope-scaling",
                            "{\"type\": \"yarn\", \"factor\": 2.0, \"original_max_position_embeddings\": 32768}"},
                           80 * kGiB);
  EXPECT_EQ(predict(old).settings.max_model_len, 65536u);
}

// vLLM's derived max_model_len scales max_position_embeddings by the rope_scaling factor for
// linear/dynamic/yarn rope (config.py _get_and_verify_max_len), not for llama3 rope.
TEST(VllmServe, DerivedMaxModelLenFollowsRopeScaling) {
  auto coder = resolve_model("deepseek-coder-6.7b");     // linear, factor 4, 16384 positions
  ASSERT_TRUE(coder.ok()) << coder.error().message;
  EXPECT_EQ(coder->rope_scaling_type, "linear");
  EXPECT_EQ(vllm_derived_max_model_len(*coder, std::nullopt), 65536u);
  EXPECT_EQ(vllm_derived_max_model_len(*coder, 4096), 16384u);   // --hf-overrides, then the factor
  auto llama = resolve_model("llama-3.1-8b");              // llama3 rope: the context as given
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(vllm_derived_max_model_len(*llama, std::nullopt), 131072u);
  ModelSpec yarn;
  yarn.max_position_embeddings = 163840;
  yarn.rope_scaling_type = "yarn";
  yarn.rope_scaling_factor = 40;
  yarn.rope_original_max_position = 4096;                  // DeepSeek-V3: 4096 x 40
  EXPECT_EQ(vllm_derived_max_model_len(yarn, std::nullopt), 163840u);
  yarn.model_type = "gemma3_text";                         // already scaled
  yarn.max_position_embeddings = 131072;
  EXPECT_EQ(vllm_derived_max_model_len(yarn, std::nullopt), 131072u);
}

// Before v0.5.4 V0 did not chunk long prefills by itself: the profile run took max_model_len
// tokens (here deepseek-coder-6.7b's derived 65536), and the activation peak with it.
TEST(VllmServe, OldV0ProfilesTheWholeContext) {
  ServeInputs old_v0 = inputs({"vllm", "serve", "deepseek-coder-6.7b", "--tensor-parallel-size", "2"},
                              15 * kGiB, "0.4.3");
  ServePrediction p = predict(old_v0);
  EXPECT_EQ(p.settings.max_model_len, 65536u);
  EXPECT_EQ(p.settings.max_model_len_source, "model context: 16384 positions x linear rope scaling 4");
  EXPECT_FALSE(p.settings.chunked_prefill);
  EXPECT_EQ(p.settings.max_num_batched_tokens, 65536u);
  // Forward of 65536 tokens: (3 x 4096 + 3 x 11008 / 2) x 65536 x 2 B.
  EXPECT_EQ(p.activation.bytes, (3ull * 4096 + 3 * 5504) * 65536 * 2);
  ServePrediction newer = predict(inputs({"vllm", "serve", "deepseek-coder-6.7b", "--tensor-parallel-size", "2"},
                                         15 * kGiB, "0.6.4"));
  EXPECT_TRUE(newer.settings.chunked_prefill);
  EXPECT_EQ(newer.settings.max_num_batched_tokens, 512u);      // vllm#10544 raised it in v0.6.5
  ServePrediction v065 = predict(inputs({"vllm", "serve", "deepseek-coder-6.7b", "--tensor-parallel-size", "2"},
                                        15 * kGiB, "0.6.5"));
  EXPECT_EQ(v065.settings.max_num_batched_tokens, 2048u);
}

// --vllm-version wins; without it a release tag of the docker image; else the current version.
TEST(VllmVersion, FlagThenImageTagThenCurrent) {
  auto v = vllm_version_for("0.6.4", std::string("v0.8.5"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->minor, 6);
  v = vllm_version_for("", std::string("v0.8.5"));
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->given);
  EXPECT_EQ(v->minor, 8);
  EXPECT_EQ(v->patch, 5);
  v = vllm_version_for("", std::string("latest"));
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->given);
  v = vllm_version_for("", std::nullopt);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->given);
  EXPECT_FALSE(vllm_version_for("banana", std::string("v0.8.5")).ok());
}

}  // namespace
}  // namespace oomdoc
