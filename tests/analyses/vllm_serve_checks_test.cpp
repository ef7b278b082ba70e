// QA's serve defects: KV caches sized outright, the block-count override, launches vLLM refuses,
// the engine variable, log lines of each era and the fixes that undo the launch's own choices.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "analyses/fix_catalog.h"
#include "analyses/vllm_serve.h"
#include "analyses/vllm_profile.h"
#include "core/units.h"
#include "readers/gpu_catalog.h"
#include "readers/model_resolver.h"
#include "readers/vllm_args.h"
#include "vllm_serve_test_support.h"

namespace oomdoc {
namespace {

using serve_test::inputs;
using serve_test::predict;

std::string error_of(const ServeInputs& in) {
  auto p = predict_vllm_startup(in);
  return p.ok() ? std::string("(no error)") : p.error().message;
}

bool has(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

// Llama 3.1 8B, bf16: 2 x 32 layers x 8 KV heads x 128 x 2 B = 128 KiB per token, 2 MiB per block
// of 16 tokens over all layers; weights 2 x 8,030,261,248 B plus the rotary cache (131,072
// positions x 128 x 2 B = 32 MiB) = 14.9888 GiB, as vLLM logs it.
constexpr uint64_t kLlamaBlockBytes = 2 * kMiB;
constexpr uint64_t kLlamaWeights = 2 * 8030261248ull + 131072ull * 128 * 2;

TEST(VllmServeChecks, KvCacheMemoryBytesLargerThanTheCardFailsToAllocate) {
  ServeInputs in = inputs({"vllm", "serve", "llama-3.1-8b", "--kv-cache-memory-bytes", "17179869184",
                           "--max-model-len", "8192"}, 24 * kGiB);
  auto report = analyze_serve(in);
  ASSERT_TRUE(report.ok());
  const ServePrediction& p = report->prediction;
  EXPECT_EQ(p.capacity.num_blocks, 8192u);                 // 16 GiB / 2 MiB
  EXPECT_EQ(p.capacity.bytes, 16 * kGiB);
  EXPECT_EQ(p.weights.bytes, kLlamaWeights);
  ASSERT_TRUE(p.error);
  EXPECT_FALSE(p.fits);
  EXPECT_EQ(p.error->kind, "kv_cache_oom");
  // 24 - 0.5 (context) - 14.9888 (weights) - 0.2930 (non-torch) = 8.2183 GiB left.
  EXPECT_EQ(p.error->message,
            "torch.OutOfMemoryError: CUDA out of memory while allocating the KV cache (16.00 GiB of KV tensors; "
            "the 24.00 GiB GPU has 8.22 GiB left after the CUDA context, the weights and non-torch memory)");
  // The first fix asks for what the card holds: 24 GiB - context - weights - non-torch - graphs - the
  // sampler warm-up that follows them (256 rows) - 0.25 GiB, in whole MiB; then dropping the flag.
  ASSERT_GE(report->fixes.size(), 2u);
  EXPECT_EQ(report->fixes[0].id, "vllm_kv_cache_size");
  const uint64_t warmup = profile_activation_bytes(in.model, 256, 256, 1, 2, true, /*sort_free_sampler=*/true);
  const uint64_t expected =
      ((24 * kGiB - kGiB / 2 - kLlamaWeights - 300 * kMiB - p.cuda_graphs.bytes - warmup) / kMiB - 256) * kMiB;
  EXPECT_EQ(report->fixes[0].flag, fmt::format("--kv-cache-memory-bytes {}", expected));
  EXPECT_EQ(report->fixes[0].kv_tokens, expected / kLlamaBlockBytes * 16);
  EXPECT_EQ(report->fixes[1].flag, "drop --kv-cache-memory-bytes");
  EXPECT_TRUE(report->fixes[1].fits);
}

TEST(VllmServeChecks, GraphCaptureAfterAnOutrightKvCacheUsesWhatIsReallyInUse) {
  // v0.20: graphs are captured after the KV cache. 7 GiB of KV leaves 24 - 0.5 - 14.99 - 0.29 - 7 =
  // 1.22 GiB for 2 GiB of graphs: the capture fails, though the budget (0.9 x 24) would say otherwise.
  ServeInputs in = inputs({"vllm", "serve", "llama-3.1-8b", "--kv-cache-memory-bytes", "7G",
                           "--max-model-len", "8192"}, 24 * kGiB, "0.20.1");
  in.overrides.cuda_graph_bytes = 2 * kGiB;
  ServePrediction p = predict(in);
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->kind, "graph_capture_oom");
  EXPECT_EQ(p.error->message,
            "torch.OutOfMemoryError: CUDA out of memory while capturing CUDA graphs (the KV cache already holds "
            "7.00 GiB; 2.00 GiB of graphs need more than the 1.22 GiB left)");
  // 5 GiB of KV leaves 3.25 GiB: it fits.
  in.config.kv_cache_memory_bytes = 5 * kGiB;
  EXPECT_TRUE(predict(in).fits);
}

TEST(VllmServeChecks, NumGpuBlocksOverrideSizesTokensConcurrencyAndBytes) {
  ServeInputs in = inputs({"vllm", "serve", "llama-3.1-8b", "--num-gpu-blocks-override", "1000",
                           "--max-model-len", "8192"}, 24 * kGiB);
  ServePrediction p = predict(in);
  EXPECT_EQ(p.capacity.num_blocks, 1000u);
  EXPECT_EQ(p.capacity.tokens, 16000u);
  EXPECT_EQ(p.capacity.blocks_per_request, 512u);
  EXPECT_DOUBLE_EQ(p.capacity.max_concurrency, 1000.0 / 512.0);
  EXPECT_EQ(p.capacity.bytes, 1000 * kLlamaBlockBytes);
  EXPECT_TRUE(p.fits);
  EXPECT_EQ(p.max_model_len_that_fits, 16000u);   // every block for one request
  EXPECT_TRUE(has(p.log_lines, fmt::format("Overriding num_gpu_blocks={} with num_gpu_blocks_override=1000",
                                           p.blocks_from_memory)))
      << p.log_lines.size();
  EXPECT_TRUE(has(p.log_lines, "GPU KV cache size: 16,000 tokens"));
  EXPECT_TRUE(has(p.log_lines, "Maximum concurrency for 8,192 tokens per request: 1.95x"));
  // 10,000 blocks are 19.53 GiB: more than the card holds next to the weights.
  in.config.num_gpu_blocks_override = 10000;
  ServePrediction big = predict(in);
  ASSERT_TRUE(big.error);
  EXPECT_EQ(big.error->kind, "kv_cache_oom");
  EXPECT_EQ(big.capacity.bytes, 10000 * kLlamaBlockBytes);
  auto report = analyze_serve(in);
  ASSERT_TRUE(report.ok());
  ASSERT_GE(report->fixes.size(), 2u);
  // 24 GiB - context - weights - non-torch - graphs - the sampler warm-up, in blocks of 2 MiB, less
  // 0.25 GiB of them.
  const uint64_t warmup = profile_activation_bytes(in.model, 256, 256, 1, 2, true, /*sort_free_sampler=*/true);
  const uint64_t blocks = (24 * kGiB - kGiB / 2 - kLlamaWeights - 300 * kMiB - big.cuda_graphs.bytes - warmup) /
                              kLlamaBlockBytes - 128;
  EXPECT_EQ(report->fixes[0].flag, fmt::format("--num-gpu-blocks-override {}", blocks));
  EXPECT_EQ(report->fixes[0].kv_tokens, blocks * 16);
  EXPECT_EQ(report->fixes[1].flag, "drop --num-gpu-blocks-override");
}

// Figures from a log follow a fix that moves them: a logged weight figure equal to oomdoc's own gives
// the same fixes as no figure at all (TP 4 halves it), and one 10% above scales by the same change.
TEST(VllmServeChecks, LoggedFiguresScaleWithTheFix) {
  const std::vector<std::string> launch = {"vllm", "serve", "llama-3.1-8b"};
  ServeInputs plain = inputs(launch, 24 * kGiB);
  auto computed = analyze_serve(plain);
  ASSERT_TRUE(computed.ok());
  ServeInputs logged = plain;
  logged.overrides.weights_bytes = computed->prediction.weights.bytes;
  auto same = analyze_serve(logged);
  ASSERT_TRUE(same.ok());
  ASSERT_EQ(same->fixes.size(), computed->fixes.size());
  for (size_t i = 0; i < same->fixes.size(); ++i) {
    EXPECT_EQ(same->fixes[i].flag, computed->fixes[i].flag);
    EXPECT_EQ(same->fixes[i].kv_tokens, computed->fixes[i].kv_tokens) << same->fixes[i].flag;
  }
  auto tp2 = std::find_if(same->fixes.begin(), same->fixes.end(),
                          [](const ServeFix& f) { return f.flag == "--tensor-parallel-size 2"; });
  ASSERT_NE(tp2, same->fixes.end());
  // 10% more weights than computed: at TP 2 each GPU holds half of that, 5% of the weights over
  // the computed split, in whole 16-token blocks of 2 x 32 layers x 4 KV heads x 128 x 2 B.
  ServeInputs heavier = plain;
  heavier.overrides.weights_bytes = computed->prediction.weights.bytes * 11 / 10;
  ServeInputs heavier_tp2 = heavier;
  heavier_tp2.config.tensor_parallel_size = 2;
  ServeInputs computed_tp2 = plain;
  computed_tp2.config.tensor_parallel_size = 2;
  const uint64_t split = predict(computed_tp2).weights.bytes;
  heavier_tp2.overrides.weights_bytes = static_cast<uint64_t>(
      std::llround(static_cast<long double>(*heavier.overrides.weights_bytes) * split / computed->prediction.weights.bytes));
  auto scaled = analyze_serve(heavier);
  ASSERT_TRUE(scaled.ok());
  auto fix = std::find_if(scaled->fixes.begin(), scaled->fixes.end(),
                          [](const ServeFix& f) { return f.flag == "--tensor-parallel-size 2"; });
  ASSERT_NE(fix, scaled->fixes.end());
  EXPECT_EQ(fix->kv_tokens, predict(heavier_tp2).capacity.tokens);
  EXPECT_LT(fix->kv_tokens, tp2->kv_tokens);
  // A logged activation peak keeps its difference from oomdoc's: 1 GiB above the computed peak on
  // one GPU is 1 GiB above it at TP 2, not a multiple of it.
  ServeInputs logged_peak = plain;
  logged_peak.overrides.activation_bytes = computed->prediction.activation.bytes + kGiB;
  ServeInputs peak_tp2 = computed_tp2;
  peak_tp2.overrides.activation_bytes = predict(computed_tp2).activation.bytes + kGiB;
  auto shifted = analyze_serve(logged_peak);
  ASSERT_TRUE(shifted.ok());
  auto peak_fix = std::find_if(shifted->fixes.begin(), shifted->fixes.end(),
                               [](const ServeFix& f) { return f.flag == "--tensor-parallel-size 2"; });
  ASSERT_NE(peak_fix, shifted->fixes.end());
  EXPECT_EQ(peak_fix->kv_tokens, predict(peak_tp2).capacity.tokens);
}

// A KV cache sized outright too small for one request is fixed from its short side too: the
// bisection for the largest size the card holds asks with a one-block length, so an 8 GiB cache on
// a 4090 (too large) and a 1-block override (too small) both get a size the card holds.
TEST(VllmServeChecks, OutrightCacheSizesTooSmallOrTooLargeGetTheLargestThatHolds) {
  auto big = analyze_serve(inputs({"vllm", "serve", "llama-3.1-8b", "--kv-cache-memory-bytes", "8G",
                                   "--max-model-len", "32768", "--gpu-memory-utilization", "0.5"}, 24 * kGiB));
  ASSERT_TRUE(big.ok());
  ASSERT_FALSE(big->fixes.empty());
  EXPECT_EQ(big->fixes[0].flag.rfind("--kv-cache-memory-bytes ", 0), 0u) << big->fixes[0].flag;
  EXPECT_TRUE(big->fixes[0].fits);
  EXPECT_GT(big->fixes[0].kv_tokens, 32768u);

  // V1 checks the length against the profiled memory, then applies the override: a 1-block cache
  // starts and hangs on any request longer than 16 tokens, which is no fit.
  ServeInputs tiny = inputs({"vllm", "serve", "llama-3.1-8b", "--num-gpu-blocks-override", "1", "--max-model-len",
                             "8192"}, 24 * kGiB);
  ServePrediction hangs = predict(tiny);
  EXPECT_FALSE(hangs.error.has_value());
  EXPECT_TRUE(hangs.request_hangs);
  EXPECT_FALSE(hangs.fits);
  auto fixed = analyze_serve(tiny);
  ASSERT_TRUE(fixed.ok());
  ASSERT_EQ(fixed->fixes.size(), 2u);
  EXPECT_EQ(fixed->fixes[0].flag.rfind("--num-gpu-blocks-override ", 0), 0u);
  EXPECT_GE(fixed->fixes[0].kv_tokens, 8192u);
  EXPECT_EQ(fixed->fixes[1].flag, "drop --num-gpu-blocks-override");

  // At the model's whole context V1 refuses on the profiled memory and estimates the length from
  // it (not from the one block): the fix drops the override with that length.
  ServeInputs whole = inputs({"vllm", "serve", "llama-3.1-8b", "--num-gpu-blocks-override", "1"}, 24 * kGiB);
  ServePrediction refused = predict(whole);
  ASSERT_TRUE(refused.error.has_value());
  EXPECT_EQ(refused.error->kind, "max_len_too_long");
  ServeInputs unset = inputs({"vllm", "serve", "llama-3.1-8b"}, 24 * kGiB);
  const uint64_t memory_holds = predict(unset).max_model_len_that_fits;
  EXPECT_NE(refused.error->message.find(fmt::format("the estimated maximum model length is {}.", memory_holds)),
            std::string::npos) << refused.error->message;
  EXPECT_EQ(refused.max_model_len_that_fits, 16u);   // what runs: the one block
  auto dropped = analyze_serve(whole);
  ASSERT_TRUE(dropped.ok());
  ASSERT_EQ(dropped->fixes.size(), 1u);
  const std::string length = std::to_string(memory_holds / 1024 * 1024);
  EXPECT_EQ(dropped->fixes[0].flag, "drop --num-gpu-blocks-override --max-model-len " + length);
  EXPECT_EQ(dropped->fixes[0].vllm_args, (std::vector<std::string>{"--max-model-len", length}));
}

// --max-model-len auto: a fix whose auto-fitted context is far shorter than the model's is none.
TEST(VllmServeChecks, AutoFitFixesKeepAUsefulContext) {
  auto r = analyze_serve(inputs({"vllm", "serve", "gemma-2-9b", "--max-model-len", "auto",
                                 "--gpu-memory-utilization", "0.8"}, 24 * kGiB));
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(r->fixes.empty());
  for (const ServeFix& f : r->fixes) EXPECT_GE(f.max_model_len, 2048u) << f.flag;
}

TEST(VllmServeChecks, LaunchesVllmRefuses) {
  EXPECT_EQ(error_of(inputs({"vllm", "serve", "llama-3.1-8b", "--no-enable-chunked-prefill", "--max-num-batched-tokens",
                             "1024", "--max-model-len", "8192"}, 80 * kGiB, "0.6.0")),
            "--max-num-batched-tokens 1024 with --max-model-len 8192 and chunked prefill off: vLLM refuses it: "
            "\"max_num_batched_tokens (1024) is smaller than max_model_len (8192). This effectively limits the "
            "maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please "
            "increase max_num_batched_tokens or decrease max_model_len.\"");
  // V0 before v0.5.4 never chunks by itself: the same launch without the flag is refused too.
  // (Llama-3-8B: a 0.4.0 release cannot read Llama 3.1's rope scaling.)
  EXPECT_NE(error_of(inputs({"vllm", "serve", "llama-3-8b", "--max-num-batched-tokens", "1024", "--max-model-len",
                             "8192"}, 80 * kGiB, "0.4.0")).find("is smaller than max_model_len (8192)"),
            std::string::npos);
  // V1 engines up to v0.11.0 chunk whatever --no-enable-chunked-prefill says: the same launch is no
  // refusal there, the profile run stays at the token budget and a warning says the flag does nothing;
  // v0.11.1 respects the flag.
  const std::vector<std::string> unchunked = {"vllm", "serve", "llama-3.1-8b", "--no-enable-chunked-prefill",
                                              "--max-num-batched-tokens", "1024", "--max-model-len", "8192"};
  auto forced = predict(inputs(unchunked, 24 * kGiB, "0.10.1"));
  EXPECT_EQ(forced.settings.max_num_batched_tokens, 1024u);
  EXPECT_TRUE(forced.settings.chunked_prefill);
  ASSERT_FALSE(forced.warnings.empty());
  EXPECT_EQ(forced.warnings.back(), "--no-enable-chunked-prefill has no effect on vLLM 0.10.1: its V1 engine always "
                                    "chunks prefills (\"V1 always uses chunked prefills\"; the flag is respected from "
                                    "v0.11.1), so the profile run is 1024 tokens");
  EXPECT_NE(error_of(inputs(unchunked, 24 * kGiB, "0.11.1")).find("is smaller than max_model_len (8192)"),
            std::string::npos);
  auto unset = predict(inputs({"vllm", "serve", "llama-3.1-8b", "--no-enable-chunked-prefill", "--max-model-len",
                               "32768"}, 24 * kGiB, "0.11.1"));
  EXPECT_FALSE(unset.settings.chunked_prefill);
  EXPECT_EQ(unset.settings.max_num_batched_tokens, 32768u);
  // With chunked prefill (V1 always) a small token budget is fine.
  EXPECT_TRUE(predict(inputs({"vllm", "serve", "llama-3.1-8b", "--max-num-batched-tokens", "1024", "--max-model-len",
                              "8192"}, 80 * kGiB)).fits);
  // Current vLLM takes any positive size and finds a backend for it: a multiple of 16 on CUDA.
  EXPECT_EQ(error_of(inputs({"vllm", "serve", "llama-3.1-8b", "--block-size", "7"}, 80 * kGiB)),
            "--block-size 7: current vLLM refuses it: no CUDA attention backend pages by 7 tokens (\"No valid "
            "attention backend found ... block_size not supported\"); use a multiple of 16");
  EXPECT_EQ(predict(inputs({"vllm", "serve", "llama-3.1-8b", "--block-size", "48"}, 80 * kGiB)).kv.block_size, 48u);
  EXPECT_EQ(error_of(inputs({"vllm", "serve", "llama-3.1-8b", "--block-size", "7"}, 80 * kGiB, "0.16.0")),
            "--block-size 7: vLLM 0.16.0 refuses it: \"argument --block-size: invalid choice: 7 (choose from "
            "1, 8, 16, 32, 64, 128, 256)\"");
  EXPECT_EQ(error_of(inputs({"vllm", "serve", "llama-3.1-8b", "--block-size", "64"}, 80 * kGiB, "0.4.0")),
            "--block-size 64: vLLM 0.4.0 refuses it: \"argument --block-size: invalid choice: 64 (choose from "
            "8, 16, 32)\"");
  EXPECT_TRUE(predict(inputs({"vllm", "serve", "llama-3-8b", "--block-size", "32", "--max-model-len", "8192"},
                             80 * kGiB, "0.4.0")).fits);
}

TEST(VllmServeChecks, VllmUseV1ZeroIsIgnoredOnceV0IsGone) {
  ServeInputs in = inputs({"VLLM_USE_V1=0", "vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192"}, 80 * kGiB);
  ServePrediction current = predict(in);
  EXPECT_TRUE(current.behavior.v1_engine);
  EXPECT_TRUE(has(current.warnings,
                  "VLLM_USE_V1=0 is ignored: vLLM removed the V0 engine in v0.11.0, so a current vLLM runs V1; "
                  "give --vllm-version 0.10.2 (the last release with V0) to size a V0 launch"));
  in.version = parse_vllm_version("0.10.2").value();
  ServePrediction last_v0 = predict(in);
  EXPECT_FALSE(last_v0.behavior.v1_engine);
  EXPECT_TRUE(last_v0.warnings.empty());
  EXPECT_TRUE(has(last_v0.assumptions, "VLLM_USE_V1=0 selects the V0 engine"));
}

TEST(VllmServeChecks, LogLinesAreThoseOfTheVersionsEra) {
  auto lines = [](const std::string& version) {
    ServeInputs in = inputs({"vllm", "serve", "llama-2-7b", "--max-model-len", "4096"}, 80 * kGiB, version);
    in.overrides.weights_bytes = 12 * kGiB;
    in.overrides.activation_bytes = kGiB;
    in.overrides.non_torch_bytes = kGiB / 2;
    return predict(in).log_lines;
  };
  // Llama 2 7B: 2 x 32 x 32 heads x 128 x 2 B = 512 KiB per token, 8 MiB per block; 80 x 0.9 = 72 GiB
  // budget - 13.5 GiB = 58.5 GiB = 7488 blocks; 4 GiB of swap = 512 CPU blocks.
  EXPECT_EQ(lines("0.2.0"), (std::vector<std::string>{"# GPU blocks: 7488, # CPU blocks: 512"}));
  EXPECT_EQ(lines("0.4.0"), (std::vector<std::string>{"Loading model weights took 12.0000 GB",
                                                      "# GPU blocks: 7488, # CPU blocks: 512"}));
  EXPECT_EQ(lines("0.6.4"), (std::vector<std::string>{"Loading model weights took 12.0000 GB",
                                                      "# GPU blocks: 7488, # CPU blocks: 512",
                                                      "Maximum concurrency for 4096 tokens per request: 29.25x"}));
  const auto v065 = lines("0.6.5");
  ASSERT_EQ(v065.size(), 5u);
  EXPECT_EQ(v065[1], "the current vLLM instance can use total_gpu_memory (80.00GiB) x gpu_memory_utilization "
                     "(0.90) = 72.00GiB");
  // V1 forced on before v0.8: the early V1 lines.
  ServeInputs early = inputs({"VLLM_USE_V1=1", "vllm", "serve", "llama-2-7b", "--max-model-len", "4096"}, 80 * kGiB,
                             "0.7.3");
  early.overrides.weights_bytes = 12 * kGiB;
  const auto v1_early = predict(early).log_lines;
  ASSERT_EQ(v1_early.size(), 3u);
  EXPECT_EQ(v1_early[0], "Loading model weights took 12.0000 GB");
  EXPECT_EQ(v1_early[1].rfind("# GPU blocks: ", 0), 0u);
}

TEST(VllmServeChecks, FixesUndoTheLaunchsOwnChoicesFirst) {
  // A lowered --gpu-memory-utilization: back to the default comes first.
  ServeInputs low = inputs({"vllm", "serve", "llama-3.1-8b", "--gpu-memory-utilization", "0.7", "--max-model-len",
                            "8192"}, 24 * kGiB);
  auto report = analyze_serve(low);
  ASSERT_TRUE(report.ok());
  ASSERT_FALSE(report->prediction.fits);
  ASSERT_FALSE(report->fixes.empty());
  EXPECT_EQ(report->fixes[0].id, "vllm_restore_gpu_memory_utilization");
  EXPECT_EQ(report->fixes[0].flag.rfind("--gpu-memory-utilization 0.", 0), 0u);
  EXPECT_NE(report->fixes[0].cost.find("only when nothing else shares this GPU"), std::string::npos);
  for (size_t i = 1; i < report->fixes.size(); ++i) {
    EXPECT_NE(report->fixes[i].id, "vllm_gpu_memory_utilization") << report->fixes[i].flag;
  }
  // Lowered so far that the default alone is not enough (0.3 of 24 GiB under 15 GiB of weights, a
  // 131,072-token context): the default with the longest length it holds, on the same card.
  ServeInputs lower = inputs({"vllm", "serve", "llama-3.1-8b", "--gpu-memory-utilization", "0.3"}, 24 * kGiB);
  auto restored = analyze_serve(lower);
  ASSERT_TRUE(restored.ok());
  ASSERT_FALSE(restored->fixes.empty());
  EXPECT_EQ(restored->fixes[0].id, "vllm_restore_gpu_memory_utilization");
  const uint64_t len = restored->fixes[0].max_model_len;
  EXPECT_EQ(restored->fixes[0].flag, fmt::format("--gpu-memory-utilization 0.92 --max-model-len {}", len));
  EXPECT_EQ(restored->fixes[0].vllm_args, (std::vector<std::string>{"--gpu-memory-utilization", "0.92",
                                                                     "--max-model-len", std::to_string(len)}));
  EXPECT_EQ(len % 1024, 0u);
  EXPECT_GT(len, 16384u);
  EXPECT_TRUE(restored->fixes[0].fits);
  // --dtype float32 doubles the weights: dropping it comes before more GPUs.
  ServeInputs fp32 = inputs({"vllm", "serve", "llama-3.1-8b", "--dtype", "float32", "--max-model-len", "8192"},
                            24 * kGiB);
  auto wide = analyze_serve(fp32);
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(wide->prediction.weights.bytes, 2 * kLlamaWeights);
  ASSERT_FALSE(wide->fixes.empty());
  EXPECT_EQ(wide->fixes[0].id, "vllm_dtype");
  EXPECT_EQ(wide->fixes[0].flag, "--dtype bfloat16 (instead of float32)");
  EXPECT_TRUE(wide->fixes[0].fits);
}

TEST(VllmServeChecks, PipelineParallelHasItsOwnFixId) {
  ServeInputs in = inputs({"vllm", "serve", "llama-3.1-8b"}, 24 * kGiB);
  auto report = analyze_serve(in);
  ASSERT_TRUE(report.ok());
  bool tensor = false, pipeline = false;
  for (const auto& fix : report->fixes) {
    if (fix.flag.rfind("--tensor-parallel-size", 0) == 0) tensor = fix.id == "vllm_tensor_parallel";
    if (fix.flag.rfind("--pipeline-parallel-size", 0) == 0) pipeline = fix.id == "vllm_pipeline_parallel";
  }
  EXPECT_TRUE(tensor);
  EXPECT_TRUE(pipeline);
  EXPECT_EQ(fix_info("vllm_pipeline_parallel").snippet.find("--pipeline-parallel-size"), 0u);
  EXPECT_EQ(fix_info("vllm_tensor_parallel").snippet.find("pipeline"), std::string_view::npos);
}

// Qwen3-30B-A3B over DP 2 on 24 GiB cards: half the experts (27 GiB) and the rest (2.9 GiB) per GPU
// do not load; TP 2 spreads the experts over DP 2 x TP 2 and its cost counts all 4 GPUs.
TEST(VllmServeChecks, ParallelFixesCountTheDataParallelGpus) {
  ServeInputs in = inputs({"vllm", "serve", "Qwen/Qwen3-30B-A3B", "-dp", "2", "--max-model-len", "32768"}, 24 * kGiB);
  auto report = analyze_serve(in);
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_TRUE(report->prediction.error.has_value());
  EXPECT_EQ(report->prediction.error->kind, "weights_oom");
  const ServeFix* tp = nullptr;
  for (const auto& f : report->fixes) {
    if (f.id == "vllm_tensor_parallel") tp = &f;
  }
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(tp->flag, "--tensor-parallel-size 2");
  EXPECT_EQ(tp->cost, "4 GPUs; without NVLink every layer's all-reduce crosses PCIe");
}

using serve_test::inputs;

// Weights larger than the card: vLLM fails while loading, before its accounting, so none of its
// accounting lines are predicted; a 4-bit checkpoint of the model is among the fixes when it fits
// the one card (here after the two-GPU layouts, which cost less by the ladder's order).
TEST(VllmServeChecks, WeightsThatDoNotLoadLogNoAccountingAndAFourBitCheckpointIsOffered) {
  ServeInputs in = inputs({"vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"}, 12 * kGiB);
  in.target.fp8 = false;   // an RTX 3060: no fp8 to quantize to at load time
  auto report = analyze_serve(in);
  ASSERT_TRUE(report.ok());
  const ServePrediction& p = report->prediction;
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->kind, "weights_oom");
  EXPECT_TRUE(p.log_lines.empty());
  const auto awq = std::find_if(report->fixes.begin(), report->fixes.end(),
                                [](const ServeFix& f) { return f.id == "vllm_quantized_weights"; });
  ASSERT_NE(awq, report->fixes.end());
  EXPECT_EQ(awq->flag, "a 4-bit AWQ or GPTQ checkpoint of Qwen2.5-7B-Instruct (published separately)");
  EXPECT_TRUE(awq->fits);
  EXPECT_GE(awq->kv_tokens, 8192u);
}

// vLLM serves a float32 checkpoint in float16, except Gemma 2 and 3: bfloat16 where the GPU has it;
// without bfloat16, float32 from v0.9 (float16 is refused for them) and an error before.
TEST(VllmServeChecks, Gemma2Float32IsServedInBfloat16) {
  ServeInputs in = inputs({"vllm", "serve", "google/gemma-2-9b-it"}, 80 * kGiB);
  ASSERT_EQ(in.model.torch_dtype, "float32");
  auto p = predict_vllm_startup(in);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->settings.weights.dtype, "bfloat16");
  in.target.bf16 = false;   // a T4, V100: no bfloat16
  in.target.architecture = "Turing";
  auto t4 = predict_vllm_startup(in);
  ASSERT_TRUE(t4.ok());
  EXPECT_EQ(t4->settings.weights.dtype, "float32");
  in.version = parse_vllm_version("0.8.5").value();
  auto old = predict_vllm_startup(in);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.error().message.find("Your custom GPU has compute capability 7.5"), std::string::npos)
      << old.error().message;
  in.version = parse_vllm_version("0.9.0").value();
  in.config.dtype = "half";
  auto half = predict_vllm_startup(in);
  ASSERT_FALSE(half.ok());
  EXPECT_EQ(half.error().message, "--dtype half for google/gemma-2-9b-it: vLLM refuses it: \"The model type 'gemma2' does "
                                  "not support float16. Reason: Numerical instability. Please use bfloat16 or float32 "
                                  "instead.\"");
}

ServeInputs on_gpu(const std::vector<std::string>& command, const std::string& gpu, const std::string& version = "") {
  ServeInputs in = inputs(command, 24 * kGiB, version);
  in.target = serve_target(find_gpu(gpu).value());
  return in;
}

// QA round 3: the startup check of free memory is undone by asking for less, first.
TEST(VllmServeQa3, FreeMemoryCheckIsFixedByALowerUtilization) {
  auto report = analyze_serve(on_gpu({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "4096",
                                      "--gpu-memory-utilization", "0.98"}, "4090"));
  ASSERT_TRUE(report.ok());
  ASSERT_TRUE(report->prediction.error);
  EXPECT_EQ(report->prediction.error->kind, "free_memory");
  ASSERT_FALSE(report->fixes.empty());
  // 23.65 GiB less the 0.5 GiB context is 97.9% of the card.
  EXPECT_EQ(report->fixes[0].flag, "--gpu-memory-utilization 0.97");
  EXPECT_EQ(report->fixes[0].id, "vllm_lower_gpu_memory_utilization");
  EXPECT_TRUE(report->fixes[0].fits);
}

TEST(VllmServeQa3, SchedulerRefusesFewerBatchedTokensThanSequences) {
  EXPECT_EQ(error_of(inputs({"vllm", "serve", "llama-3.1-8b", "--max-num-seqs", "512", "--max-num-batched-tokens",
                            "256", "--max-model-len", "8192"}, 24 * kGiB)),
            "--max-num-batched-tokens 256 below --max-num-seqs 512: vLLM refuses it: \"max_num_batched_tokens (256) "
            "must be greater than or equal to max_num_seqs (512).\"");
  // And no fix proposes such a pair: H100's V1 default of 1024 sequences.
  auto report = analyze_serve(on_gpu({"vllm", "serve", "gemma-2-9b", "--gpu-memory-utilization", "0.34"},
                                     "H100 SXM 80GB", "0.10.0"));
  ASSERT_TRUE(report.ok());
  for (const ServeFix& fix : report->fixes) EXPECT_NE(fix.flag, "--max-num-batched-tokens 512") << fix.flag;
}

TEST(VllmServeQa3, QuantizationBelowItsComputeCapabilityIsRefused) {
  EXPECT_EQ(error_of(on_gpu({"vllm", "serve", "llama-3.1-8b", "--quantization", "fp8", "--max-model-len", "4096"}, "t4")),
            "fp8 weights on Tesla T4 16GB: vLLM refuses them: \"The quantization method fp8 is not supported for the "
            "current GPU. Minimum capability: 80. Current capability: 75.\"");
  // An AWQ checkpoint (its config's quantization_config): AWQ's own kernels need Turing.
  auto awq_on = [&](const std::string& gpu) {
    ServeInputs in = on_gpu({"vllm", "serve", "qwen2.5-7b", "--max-model-len", "4096"}, gpu);
    in.model.quantization = "awq";
    in.model.quantization_bits = 4;
    in.model.quantization_group_size = 128;
    return in;
  };
  EXPECT_EQ(error_of(awq_on("v100")),
            "awq weights on Tesla V100 SXM2 16GB: vLLM refuses them: \"The quantization method awq is not supported "
            "for the current GPU. Minimum capability: 75. Current capability: 70.\"");
  EXPECT_EQ(error_of(awq_on("t4")), "(no error)");
}

TEST(VllmServeQa3, ABiggerGpuHoldsMoreByBothTotals) {
  auto report = analyze_serve(on_gpu({"vllm", "serve", "gemma-2-9b"}, "4090"));
  ASSERT_TRUE(report.ok());
  for (const ServeFix& fix : report->fixes) {
    EXPECT_EQ(fix.flag.find("A5000"), std::string::npos) << fix.flag;   // 24 GB as well
  }
  // The A30's CUDA total is unknown: its nvidia-smi 24.00 GiB less the widest usual gap is below
  // the 4090's CUDA 23.65 GiB, so it is no bigger GPU for this launch (it fit only on that 0.35 GiB).
  auto sized = analyze_serve(on_gpu({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "16384",
                                     "--kv-cache-memory-bytes", "7.4g"}, "4090"));
  ASSERT_TRUE(sized.ok());
  bool bigger = false;
  for (const ServeFix& fix : sized->fixes) {
    EXPECT_EQ(fix.flag.find("A30"), std::string::npos) << fix.flag;
    if (fix.id == "bigger_gpu") {
      bigger = true;
      EXPECT_EQ(fix.flag, "--gpu \"Tesla V100 SXM2 32GB\"");
      EXPECT_TRUE(fix.fits);
    }
  }
  EXPECT_TRUE(bigger);
}

// A KV cache sized outright that leaves no room for the graph capture gets the same fixes as one
// that fails at its own allocation: the most the card holds, then dropping the flag.
TEST(VllmServeQa3, AKvCacheSizedOutrightThatStarvesTheGraphsIsShrunkFirst) {
  auto report = analyze_serve(on_gpu({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "16384",
                                      "--num-gpu-blocks-override", "3700"}, "4090"));
  ASSERT_TRUE(report.ok());
  ASSERT_TRUE(report->prediction.error);
  EXPECT_EQ(report->prediction.error->kind, "graph_capture_oom");
  ASSERT_GE(report->fixes.size(), 2u);
  EXPECT_EQ(report->fixes[0].flag, "--num-gpu-blocks-override 3233");
  EXPECT_TRUE(report->fixes[0].fits);
  EXPECT_EQ(report->fixes[0].kv_tokens, 51728u);
  EXPECT_EQ(report->fixes[1].flag, "drop --num-gpu-blocks-override");
}

// On a V100 (compute capability 7.0) AWQ's kernels are refused: the 4-bit checkpoint offered is a
// GPTQ one, which runs there (6.0) and is sized alike.
TEST(VllmServeQa3, AFourBitCheckpointOnAV100IsGptq) {
  auto report = analyze_serve(on_gpu({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "4096"}, "v100"));
  ASSERT_TRUE(report.ok());
  bool offered = false;
  for (const ServeFix& fix : report->fixes) {
    if (fix.id != "vllm_quantized_weights") continue;
    offered = true;
    EXPECT_EQ(fix.flag, "a 4-bit GPTQ checkpoint of llama-3.1-8b (published separately)");
    EXPECT_TRUE(fix.fits);
    EXPECT_EQ(fix.kv_tokens, 61808u);
  }
  EXPECT_TRUE(offered);
}

TEST(VllmServeQa3, AutoFitNeedsV012) {
  EXPECT_EQ(error_of(on_gpu({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "-1"}, "4090", "0.8.5")),
            "--max-model-len auto/-1: vLLM 0.8.5 has no auto-fit (it came in v0.12.0, vllm-project/vllm#29431); give "
            "a length");
  EXPECT_EQ(error_of(on_gpu({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "auto"}, "4090", "0.12.0")),
            "(no error)");
}

TEST(VllmServeQa3, ShorterLengthIsTheLongestThatFitsWithItsOwnProfile) {
  // V0 without chunked prefill profiles max_model_len tokens: a shorter length frees activation
  // memory too, so the longest that fits is longer than what the 32K profile leaves room for.
  auto report = analyze_serve(on_gpu({"VLLM_USE_V1=0", "vllm", "serve", "llama-3.1-8b", "--max-model-len", "32768"},
                                     "3090", "0.6.3"));
  ASSERT_TRUE(report.ok());
  ASSERT_FALSE(report->fixes.empty());
  EXPECT_EQ(report->fixes[0].flag, "--max-model-len 25600");
  ServeInputs longer = on_gpu({"VLLM_USE_V1=0", "vllm", "serve", "llama-3.1-8b", "--max-model-len", "26624"}, "3090",
                              "0.6.3");
  EXPECT_FALSE(predict_vllm_startup(longer)->fits);
}

TEST(VllmServeQa3, MlaBlocksFollowTheBackendVllmForces) {
  ServePrediction hopper = predict(on_gpu({"vllm", "serve", "deepseek-v3", "-tp", "8"}, "h200"));
  EXPECT_EQ(hopper.settings.block_size, 64u);
  EXPECT_EQ(hopper.capacity.tokens % 64, 0u);
  ServePrediction blackwell = predict(on_gpu({"vllm", "serve", "deepseek-v3", "-tp", "8"}, "b200"));
  EXPECT_EQ(blackwell.settings.block_size, 128u);
  ServePrediction chosen = predict(on_gpu({"VLLM_ATTENTION_BACKEND=TRITON_MLA", "vllm", "serve", "deepseek-v3", "-tp", "8"}, "h200"));
  EXPECT_EQ(chosen.settings.block_size, 16u);
  EXPECT_EQ(predict(on_gpu({"vllm", "serve", "llama-3.1-8b"}, "h200")).settings.block_size, 16u);
}

TEST(VllmServeQa3, SamplerWarmUpAfterAnOutrightKvCache) {
  ServePrediction p = predict(on_gpu({"vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192",
                                      "--kv-cache-memory-bytes", "7500000000"}, "4090"));
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->kind, "sampler_warmup_oom");
  EXPECT_EQ(p.error->message.rfind("torch.OutOfMemoryError: CUDA out of memory in the sampler warm-up after the KV "
                                   "cache and CUDA graphs (438.38 MiB of 256 sequences' logits", 0), 0u)
      << p.error->message;
}

TEST(VllmServeQa3, AFlagAgainstTheQuantizationANameSaysIsRefusedAsAMismatch) {
  ServeInputs in = serve_test::inputs({"vllm", "serve", "llama-3.1-70b", "-tp", "2", "-q", "awq"}, 80 * kGiB);
  in.config.model = "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8";
  auto p = predict_vllm_startup(in);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message,
            "--quantization awq on 'neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8', quantized with fp8 by its name "
            "(\"-fp8\"): vLLM refuses it: \"Quantization method specified in the model config (fp8) does not match the "
            "quantization method specified in the `quantization` argument (awq).\"");
}

// With the KV cache sized outright, V1 skips the profile's report and logs what it reserved
// (vllm/v1/worker/gpu_worker.py, its figures as format_gib prints them).
TEST(VllmServeQa4, KvCacheMemoryBytesLogsTheReservation) {
  ServeInputs in = inputs({"vllm", "serve", "llama-3.1-8b", "--kv-cache-memory-bytes", "6G", "--max-model-len", "8192"},
                          80 * kGiB);
  ServePrediction p = predict(in);
  ASSERT_FALSE(p.error);
  EXPECT_EQ(std::count_if(p.log_lines.begin(), p.log_lines.end(),
                          [](const std::string& l) { return l.rfind("Available KV cache memory", 0) == 0; }), 0);
  EXPECT_NE(std::find(p.log_lines.begin(), p.log_lines.end(),
                      "Initial free memory 79.5 GiB, reserved 6.0 GiB memory for KV Cache as specified by "
                      "kv_cache_memory_bytes config and skipped memory profiling. This does not respect the "
                      "gpu_memory_utilization config."),
            p.log_lines.end());
}

// v0.8-v0.10 default to V1 but fall back to V0 for what V1 did not run yet (_is_v1_supported_oracle).
TEST(VllmServeChecksQa5, V1FallsBackToV0WhereItCouldNotRunTheLaunch) {
  auto v = [](const char* text) { return parse_vllm_version(text).value(); };
  EXPECT_EQ(v1_oracle_fallback(v("0.8.5"), "Turing", "auto", "auto"), "Compute Capability < 8.0");
  EXPECT_EQ(v1_oracle_fallback(v("0.10.2"), "Turing", "auto", "auto"), std::nullopt);   // vllm-project/vllm#23614
  EXPECT_EQ(v1_oracle_fallback(v("0.9.2"), "Ada", "fp8", "auto"), "--kv-cache-dtype");
  EXPECT_EQ(v1_oracle_fallback(v("0.9.2"), "Hopper", "fp8", "auto"), std::nullopt);     // FlashAttention 3 reads fp8
  EXPECT_EQ(v1_oracle_fallback(v("0.8.1"), "Hopper", "fp8", "auto"), "--kv-cache-dtype");
  EXPECT_EQ(v1_oracle_fallback(v("0.9.1"), "Ampere", "auto", "float32"), "--dtype torch.float32");
  EXPECT_EQ(v1_oracle_fallback(v("0.9.2"), "Ampere", "auto", "float32"), std::nullopt);
  EXPECT_EQ(v1_oracle_fallback(v("0.7.3"), "Turing", "fp8", "float32"), std::nullopt);  // V0 already
  EXPECT_EQ(v1_oracle_fallback(v("0.11.0"), "Turing", "fp8", "float32"), std::nullopt); // no V0 left
  // A launch that falls back is sized and labelled as V0; VLLM_USE_V1=1 turns it into vLLM's error.
  ServeInputs in = inputs({"vllm", "serve", "llama-3.1-8b", "--kv-cache-dtype", "fp8", "--max-model-len", "8192"}, 24 * kGiB);
  in.target.architecture = "Ada";
  in.version = v("0.9.2");
  auto p = predict_vllm_startup(in);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_FALSE(p->behavior.v1_engine);
  in.config.env["VLLM_USE_V1"] = "1";
  auto forced = predict_vllm_startup(in);
  ASSERT_FALSE(forced.ok());
  EXPECT_EQ(forced.error().message, "VLLM_USE_V1=1 with --kv-cache-dtype: vLLM 0.9.2 refuses it: \"VLLM_USE_V1=1 is not "
                                    "supported with --kv-cache-dtype.\"");
}

// A pooling run (--runner pooling, --task embed) pools where a generator samples: the profile peak
// is the forward's alone, the KV cache gets the difference, and no sampler warm-up is predicted.
TEST(VllmServeChecks, PoolingRunnerProfilesWithoutTheSampler) {
  ServeInputs gen = inputs({"vllm", "serve", "Qwen/Qwen2.5-7B", "--max-model-len", "8192"}, 24 * kGiB);
  auto generating = predict_vllm_startup(gen);
  ASSERT_TRUE(generating.ok()) << generating.error().message;
  for (std::string flag : {"--runner=pooling", "--task=embed", "--convert=embed"}) {
    ServeInputs pool = inputs({"vllm", "serve", "Qwen/Qwen2.5-7B", "--max-model-len", "8192", flag}, 24 * kGiB);
    std::replace(flag.begin(), flag.end(), '=', ' ');   // reported as written, value after a space
    EXPECT_EQ(pool.config.pooling_flag, std::optional<std::string>(flag));
    auto pooled = predict_vllm_startup(pool);
    ASSERT_TRUE(pooled.ok()) << pooled.error().message;
    EXPECT_EQ(pooled->activation.bytes,
              profile_forward_bytes(pool.model, pooled->settings.max_num_batched_tokens, 1, 2)) << flag;
    // 256 rows x 152,064 logits of sampler peak are gone, and the KV cache has them.
    ASSERT_GT(generating->activation.bytes, pooled->activation.bytes);
    EXPECT_EQ(pooled->available_kv_bytes - generating->available_kv_bytes,
              static_cast<int64_t>(generating->activation.bytes - pooled->activation.bytes)) << flag;
    EXPECT_EQ(pooled->activation.detail, "profile run of 2048 tokens, pooled (no sampler)");
  }
  // A generating task is no pooling run.
  ServeInputs generate = inputs({"vllm", "serve", "Qwen/Qwen2.5-7B", "--task", "generate"}, 24 * kGiB);
  EXPECT_FALSE(generate.config.pooling_flag.has_value());
  EXPECT_TRUE(has(generate.config.ignored, "--task generate"));
}

// MLA's one latent per token arrived in v0.7.1; before, DeepSeek's K and V were cached per head,
// padded to 256 until v0.7.0 (vllm-project/vllm#12067), and VLLM_MLA_DISABLE=1 brings back the
// unpadded per-head cache. DeepSeek-V3 at TP 8: 16 heads per GPU, 61 layers.
TEST(VllmServeChecks, MlaCacheOnlyFromV071) {
  auto per_token = [](const std::string& version, bool disable) {
    ServeInputs in = inputs({"vllm", "serve", "deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "8",
                             "--max-model-len", "4096"}, 141 * kGiB, version);
    if (disable) in.config.env["VLLM_MLA_DISABLE"] = "1";
    return predict(in).kv.bytes_per_token;
  };
  EXPECT_EQ(per_token("0.6.6", false), 61u * 2 * 16 * 256 * 2);      // 999,424 B
  EXPECT_EQ(per_token("0.7.0", false), 61u * 2 * 16 * (128 + 64) * 2);  // 749,568 B
  EXPECT_EQ(per_token("0.7.1", false), 61u * (512 + 64) * 2);         // 70,272 B: the latent
  EXPECT_EQ(per_token("0.8.5", true), 61u * 2 * 16 * (128 + 64) * 2);
  EXPECT_EQ(per_token("0.6.6", true), 61u * 2 * 16 * 256 * 2);        // the variable came with MLA
}

// V0 padded each MLA latent entry to 256 bytes on CUDA from v0.7.2 (vllm-project/vllm#12676: 576
// elements -> 640) until v0.8 (#14842); VLLM_CUDA_MEM_ALIGN_KV_CACHE=0 turned it off. The log in
// #13109 (DeepSeek-Coder-V2-Lite, 27 layers) gives 7,767 CPU blocks for 4 GiB: 27 x 16 x 1280 B each.
TEST(VllmServeChecks, V0PadsMlaEntriesTo256Bytes) {
  auto per_token = [](const std::string& version, const char* align, const char* kv_dtype = nullptr) {
    std::vector<std::string> args = {"vllm", "serve", "deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "8",
                                      "--max-model-len", "4096"};
    if (kv_dtype) {
      args.push_back("--kv-cache-dtype");
      args.push_back(kv_dtype);
    }
    ServeInputs in = inputs(args, 141 * kGiB, version);
    if (align) in.config.env["VLLM_CUDA_MEM_ALIGN_KV_CACHE"] = align;
    return predict(in).kv.bytes_per_token;
  };
  EXPECT_EQ(per_token("0.7.1", nullptr), 61u * 576 * 2);
  EXPECT_EQ(per_token("0.7.2", nullptr), 61u * 640 * 2);     // 78,080 B
  EXPECT_EQ(per_token("0.7.3", "0"), 61u * 576 * 2);
  EXPECT_EQ(per_token("0.7.3", nullptr, "fp8"), 61u * 640);  // padded in the model's dtype: 128 elements
  EXPECT_EQ(per_token("0.8.0", nullptr), 61u * 576 * 2);
}

// Graphs captured after the KV cache (before v0.21) on a 24 GB card: what is left for them is under
// vLLM's own "1~3 GiB" figure, so the fit says so (vllm-project/vllm#17469: Qwen3-30B-A3B at TP 4 on
// A10s started only with --enforce-eager); with eager mode, or on an 80 GB card, no such warning.
TEST(VllmServeChecks, GraphsCapturedOutsideTheBudgetWarnBelowVllmsUpperFigure) {
  auto warned = [](uint64_t memory, bool eager) {
    std::vector<std::string> args = {"vllm", "serve", "Qwen/Qwen3-30B-A3B", "--tensor-parallel-size", "4",
                                     "--max-model-len", "1024", "--max-num-seqs", "1"};
    if (eager) args.push_back("--enforce-eager");
    const ServePrediction p = predict(inputs(args, memory, "0.8.5"));
    EXPECT_TRUE(p.fits);
    return std::any_of(p.warnings.begin(), p.warnings.end(), [](const std::string& w) {
      return w.find("vLLM warns they \"can take additional 1~3 GiB memory per GPU\"") != std::string::npos;
    });
  };
  EXPECT_TRUE(warned(22 * kGiB + kGiB / 2, false));
  EXPECT_FALSE(warned(22 * kGiB + kGiB / 2, true));
  EXPECT_FALSE(warned(80 * kGiB, false));
}

// VLLM_PP_LAYER_PARTITION places the layers by hand: the stage with more layers holds more weights
// and a bigger page, and binds the block count; a list vLLM refuses is refused in its words.
TEST(VllmServeChecks, PipelineLayerPartitionFromTheEnvironment) {
  auto run = [](const char* partition) {
    ServeInputs in = inputs({"vllm", "serve", "Qwen/Qwen3-8B", "-pp", "2", "--max-model-len", "8192"}, 24 * kGiB);
    if (partition) in.config.env["VLLM_PP_LAYER_PARTITION"] = partition;
    return analyze_serve(in);
  };
  const auto even = run(nullptr);
  ASSERT_TRUE(even.ok());
  EXPECT_EQ(even->prediction.kv.bytes_per_token, 2u * 18 * 8 * 128 * 2);
  const auto uneven = run("8,28");
  ASSERT_TRUE(uneven.ok()) << uneven.error().message;
  EXPECT_EQ(uneven->prediction.kv.bytes_per_token, 2u * 28 * 8 * 128 * 2);   // the 28-layer stage binds
  EXPECT_GT(uneven->prediction.weights.bytes, even->prediction.weights.bytes);
  EXPECT_LT(uneven->prediction.capacity.tokens, even->prediction.capacity.tokens);
  const auto wrong_sum = run("8,27");
  ASSERT_FALSE(wrong_sum.ok());
  EXPECT_EQ(wrong_sum.error().message, "VLLM_PP_LAYER_PARTITION=8,27: vLLM refuses it: \"sum(partitions)=35 does not "
                                       "match num_hidden_layers=36.\"");
  // A count beyond the model's layers (its sum would wrap around) and a stage without layers.
  const auto huge = run("18446744073709551615,33");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().message, "VLLM_PP_LAYER_PARTITION=18446744073709551615,33: a stage of 18446744073709551615 "
                                  "layers, more than the model's 36");
  EXPECT_FALSE(run("0,36").ok());
  const auto wrong_count = run("36");
  ASSERT_FALSE(wrong_count.ok());
  EXPECT_EQ(wrong_count.error().message, "VLLM_PP_LAYER_PARTITION=36: vLLM refuses it: \"len(partitions)=1 does not "
                                         "match pp_size=2.\"");
}

// vLLM checked one max_model_len request against the KV cache at startup from v0.2.7
// (vllm-project/vllm#2163); before, it started and such a request hung.
TEST(VllmServeChecks, MaxLenStartupCheckFromV027) {
  auto run = [](const std::string& version) {
    return predict(inputs({"python", "-m", "vllm.entrypoints.openai.api_server", "--model", "meta-llama/Llama-2-7b-hf"},
                          16 * kGiB, version));
  };
  const ServePrediction checked = run("0.2.7");
  ASSERT_TRUE(checked.error.has_value());
  EXPECT_EQ(checked.error->kind, "max_len_too_long");
  const ServePrediction unchecked = run("0.2.6");
  EXPECT_FALSE(unchecked.error.has_value());
  ASSERT_LT(unchecked.capacity.num_blocks * 16, 4096u);
  EXPECT_TRUE(std::any_of(unchecked.warnings.begin(), unchecked.warnings.end(), [](const std::string& w) {
    return w.find("does not check it at startup (the check came in v0.2.7, vllm-project/vllm#2163)") != std::string::npos;
  }));
  // It starts, but such a request hangs: no fit, and every fix holds one whole request.
  EXPECT_FALSE(unchecked.fits);
  EXPECT_TRUE(unchecked.request_hangs);
  ServeInputs in = inputs({"python", "-m", "vllm.entrypoints.openai.api_server", "--model", "meta-llama/Llama-2-7b-hf"},
                          16 * kGiB, "0.2.6");
  const ServeReport analysis = analyze_serve(in).value();
  ASSERT_FALSE(analysis.fixes.empty());
  for (const ServeFix& f : analysis.fixes) EXPECT_GE(f.max_concurrency, 1.0) << f.flag;
}

// An FP8 checkpoint that keeps modules in 16 bits (modules_to_not_convert, as Meta's FP8 Llama 3.1
// does): those Linears load at 2 bytes per weight (vLLM's is_layer_skipped), split over TP.
TEST(VllmServeChecks, UnquantizedModulesOfAnFp8CheckpointLoadIn16Bits) {
  auto weights = [](std::vector<std::string> kept) {
    ServeInputs in = inputs({"vllm", "serve", "llama-3.1-8b", "--tensor-parallel-size", "2", "--max-model-len", "8192"},
                            80 * kGiB, "0.9.0");
    in.model.quantization = "fbgemm_fp8";
    in.model.quantization_bits = 8;
    in.model.unquantized_modules = std::move(kept);
    return predict(in).weights.bytes;
  };
  const uint64_t all_fp8 = weights({});
  const uint64_t down = 14336ull * 4096, attention = 4096ull * 4096 * 2 + 4096ull * 1024 * 2;
  EXPECT_EQ(weights({"model.layers.0.self_attn", "model.layers.0.mlp.down_proj", "model.layers.31.mlp.down_proj"}) - all_fp8,
            (attention + 2 * down) / 2);   // one extra byte per weight, over 2 GPUs
}

// A multimodal model's encoder is profiled by vLLM but not sized here: a warning says so, unless
// every modality is limited to 0 (text only).
TEST(VllmServeChecks, MultimodalModelsWarnThatTheEncoderIsNotSized) {
  auto warned = [](std::vector<std::string> command) {
    const ServePrediction p = predict(inputs(command, 80 * kGiB));
    return std::any_of(p.warnings.begin(), p.warnings.end(),
                       [](const std::string& w) { return w.rfind("a multimodal model: vLLM's profile run", 0) == 0; });
  };
  EXPECT_TRUE(warned({"vllm", "serve", "Qwen/Qwen2.5-VL-3B-Instruct", "--max-model-len", "8192"}));
  // Qwen2.5-VL takes video too (video_token_id): images off alone still profiles the encoder on a video.
  EXPECT_TRUE(warned({"vllm", "serve", "Qwen/Qwen2.5-VL-3B-Instruct", "--max-model-len", "8192",
                      "--limit-mm-per-prompt", "{\"image\": 0}"}));
  EXPECT_FALSE(warned({"vllm", "serve", "Qwen/Qwen2.5-VL-3B-Instruct", "--max-model-len", "8192",
                       "--limit-mm-per-prompt", "{\"image\": 0, \"video\": 0}"}));
  const ServePrediction qwen = predict(inputs({"vllm", "serve", "Qwen/Qwen2.5-VL-3B-Instruct"}, 80 * kGiB));
  EXPECT_TRUE(std::any_of(qwen.warnings.begin(), qwen.warnings.end(), [](const std::string& w) {
    return w.ends_with("serving text only, --limit-mm-per-prompt '{\"image\": 0, \"video\": 0}' skips it");
  }));
  // Gemma 3 takes images only.
  EXPECT_FALSE(warned({"vllm", "serve", "google/gemma-3-4b-it", "--max-model-len", "8192",
                       "--limit-mm-per-prompt", "image=0"}));
  EXPECT_FALSE(warned({"vllm", "serve", "Qwen/Qwen2.5-7B", "--max-model-len", "8192"}));
  // Video off, images still on: the encoder is still profiled.
  EXPECT_TRUE(warned({"vllm", "serve", "Qwen/Qwen2.5-VL-3B-Instruct", "--max-model-len", "8192",
                      "--limit-mm-per-prompt", "{\"video\": 0}"}));
}

// V0's profile-peak accounting by release: max_memory_allocated until v0.2.4, total - free from
// v0.2.5 (#2031, the CUDA context counted), startup memory left out from v0.3.1 (#2863), torch's own
// peak from v0.6.4 (#9352); CUDA graphs from v0.2.6 (#1926).
TEST(VllmServeChecks, OldV0PeakAccountingByRelease) {
  auto behavior = [](const char* v) { return vllm_behavior(parse_vllm_version(v).value(), std::nullopt, std::nullopt); };
  const VllmBehavior v024 = behavior("0.2.4"), v025 = behavior("0.2.5"), v031 = behavior("0.3.1"), v064 = behavior("0.6.4");
  EXPECT_FALSE(v024.cuda_graphs);
  EXPECT_FALSE(v024.peak_from_used_memory);
  EXPECT_FALSE(v024.context_counts_against_budget);
  EXPECT_TRUE(v025.peak_from_used_memory);
  EXPECT_TRUE(v025.context_counts_against_budget);
  EXPECT_FALSE(v025.cuda_graphs);
  EXPECT_TRUE(v031.peak_from_used_memory);
  EXPECT_FALSE(v031.context_counts_against_budget);
  EXPECT_TRUE(v031.cuda_graphs);
  EXPECT_FALSE(v064.peak_from_used_memory);
  const ServePrediction old = predict(inputs({"vllm", "serve", "llama-3-8b", "--max-model-len", "8192"}, 80 * kGiB, "0.2.4"));
  EXPECT_EQ(old.cuda_graphs.bytes, 0u);
  // Its --enforce-eager came with the graphs.
  EXPECT_EQ(error_of(inputs({"vllm", "serve", "llama-3.1-8b", "--enforce-eager"}, 80 * kGiB, "0.2.5")),
            "--enforce-eager: vLLM 0.2.5 has no such flag (it came with CUDA graphs in v0.2.6, vllm-project/vllm#1926; "
            "the model already runs eagerly); argparse would exit with 'unrecognized arguments'");
}

// A version before vLLM's first release is refused; one past the newest oomdoc knows is sized with
// the newest accounting and says so.
TEST(VllmServeChecks, VersionsOutsideWhatOomdocKnows) {
  auto old = parse_vllm_version("0.0.9");
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.error().message, "--vllm-version: '0.0.9' is older than vLLM's first release (0.1.0)");
  EXPECT_TRUE(parse_vllm_version("0.1.0").ok());
  const VllmBehavior future = vllm_behavior(parse_vllm_version("99.0").value(), std::nullopt, std::nullopt);
  ASSERT_EQ(future.warnings.size(), 1u);
  EXPECT_EQ(future.warnings[0], "vLLM 99.0 is newer than any release oomdoc knows: sized with v0.24's accounting, "
                                "which may have changed since");
  EXPECT_TRUE(future.graph_memory_in_budget);
  EXPECT_TRUE(vllm_behavior(parse_vllm_version("0.24.1").value(), std::nullopt, std::nullopt).warnings.empty());
}

// --enable-chunked-prefill False: v0.5-v0.9 took the value (nargs="?"); from v0.10 the switch is a
// BooleanOptionalAction and argparse refuses the word after it.
TEST(VllmServeChecks, ChunkedPrefillValueOnlyBeforeV010) {
  const std::vector<std::string> command = {"vllm", "serve", "llama-3.1-8b", "--enable-chunked-prefill", "False"};
  EXPECT_EQ(error_of(inputs(command, 24 * kGiB)),
            "--enable-chunked-prefill False: a current vLLM takes no value after the switch (a BooleanOptionalAction "
            "from v0.10); argparse would exit with 'unrecognized arguments' (use --enable-chunked-prefill or "
            "--no-enable-chunked-prefill)");
  EXPECT_EQ(error_of(inputs(command, 24 * kGiB, "0.11.0")).rfind("--enable-chunked-prefill False: vLLM 0.11.0 takes no value", 0), 0u);
  ServePrediction old = predict(inputs(command, 24 * kGiB, "0.6.3"));
  EXPECT_FALSE(old.settings.chunked_prefill);
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

using serve_test::inputs;

std::vector<std::string> fix_ids_of(const ServeReport& report) {
  std::vector<std::string> ids;
  for (const auto& f : report.fixes) ids.push_back(f.id);
  return ids;
}

// Llama-3.1-70B in bf16 on one H100: more GPUs keep the model whole (TP first over NVLink); a 4-bit
// checkpoint with a shorter context fits the one card, and says which vLLM arguments it adds.
TEST(VllmServeQa9, QuantizedCheckpointWithAShorterContextFitsOneCard) {
  ServeInputs in = inputs({"vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct"}, 24 * kGiB);
  in.target = serve_target(find_gpu("h100-80").value());
  auto report = analyze_serve(in);
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(fix_ids_of(*report),
            (std::vector<std::string>{"vllm_tensor_parallel", "vllm_pipeline_parallel", "vllm_quantized_weights"}));
  EXPECT_EQ(report->fixes[0].vllm_args, (std::vector<std::string>{"--tensor-parallel-size", "4"}));
  const ServeFix& quantized = report->fixes[2];
  EXPECT_EQ(quantized.vllm_args, (std::vector<std::string>{"--max-model-len", "97280"}));
  EXPECT_EQ(quantized.max_model_len, 97280u);
  EXPECT_TRUE(quantized.fits);
}

// Mistral-Nemo's 1,024,000-token context on a 4090 (its 23 GiB of weights do not load): keeping it
// whole takes 16 GPUs, but two hold it at more than 100k tokens, offered first (fewest GPUs); a
// shorter context under 32k on fewer GPUs is not offered (Llama-3.1-70B above: TP 4 keeps 131,072).
TEST(VllmServeQa9, FewerGpusAtALongButShorterContextComeFirst) {
  ServeInputs in = inputs({"vllm", "serve", "mistralai/Mistral-Nemo-Instruct-2407"}, 24 * kGiB);
  in.target = serve_target(find_gpu("4090").value());
  auto report = analyze_serve(in);
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_GE(report->fixes.size(), 3u);
  EXPECT_EQ(report->fixes[0].vllm_args,
            (std::vector<std::string>{"--pipeline-parallel-size", "2", "--max-model-len", "114688"}));
  EXPECT_EQ(report->fixes[0].max_model_len, 114688u);
  EXPECT_EQ(report->fixes[0].kv_tokens, 114704u);
  EXPECT_EQ(report->fixes[1].vllm_args[0], "--tensor-parallel-size");
  EXPECT_EQ(report->fixes[1].vllm_args[1], "2");
  EXPECT_EQ(report->fixes[2].max_model_len, 1024000u);   // the whole context, on 16 GPUs
  EXPECT_TRUE(report->fixes[0].fits && report->fixes[1].fits);
}

// Without NVLink, pipeline stages come first among layouts of the same GPU count.
TEST(VllmServeQa9, PipelineFirstWithoutNvlink) {
  ServeInputs in = inputs({"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "131072"}, 24 * kGiB);
  in.target = serve_target(find_gpu("4090").value());
  auto report = analyze_serve(in);
  ASSERT_TRUE(report.ok()) << report.error().message;
  std::vector<std::string> layouts;
  for (const auto& f : report->fixes) {
    if (f.id == "vllm_tensor_parallel" || f.id == "vllm_pipeline_parallel") layouts.push_back(f.id);
  }
  ASSERT_GE(layouts.size(), 2u);
  EXPECT_EQ(layouts[0], "vllm_pipeline_parallel");
  // A TP group wider than a PCIe card's server is not called an NVLink domain.
  ServeInputs wide = inputs({"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "-tp", "16"}, 24 * kGiB);
  wide.target = serve_target(find_gpu("4090").value());
  auto p = predict_vllm_startup(wide);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_FALSE(p->warnings.empty());
  EXPECT_NE(p->warnings[0].find("more than one 8-GPU server of GeForce RTX 4090 24GB"), std::string::npos) << p->warnings[0];
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// vLLM 0.5.1 to 0.6.4 served Gemma 2 without its sliding window, capped at the window's 4096
// tokens (vllm-project/vllm#5908; full context from v0.6.5, #10584).
TEST(VllmServeQa9, Gemma2CappedAtItsWindowBeforeV065) {
  ServeInputs old_default = serve_test::inputs({"vllm", "serve", "google/gemma-2-9b"}, 80 * kGiB, "0.6.3");
  auto capped = predict_vllm_startup(old_default);
  ASSERT_TRUE(capped.ok()) << capped.error().message;
  EXPECT_EQ(capped->settings.max_model_len, 4096u);
  EXPECT_EQ(capped->settings.max_model_len_source, "model context: 8192 positions capped at the 4096-token sliding window");
  ServeInputs asked = serve_test::inputs({"vllm", "serve", "google/gemma-2-9b", "--max-model-len", "8192"}, 80 * kGiB,
                                         "0.6.3");
  auto refused = predict_vllm_startup(asked);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("greater than the derived max_model_len (sliding_window=4096"), std::string::npos)
      << refused.error().message;
  // Before v0.5.1 vLLM has no Gemma 2 at all; before v0.5.3 no Llama 3.1 rope scaling.
  auto none = predict_vllm_startup(serve_test::inputs({"vllm", "serve", "google/gemma-2-9b"}, 80 * kGiB, "0.5.0"));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("has no Gemma 2 (Gemma2ForCausalLM came in v0.5.1"), std::string::npos);
  auto llama31 = predict_vllm_startup(serve_test::inputs({"vllm", "serve", "meta-llama/Llama-3.1-8B"}, 80 * kGiB, "0.5.2"));
  ASSERT_FALSE(llama31.ok());
  EXPECT_NE(llama31.error().message.find("rope_type \"llama3\""), std::string::npos);
  EXPECT_TRUE(predict_vllm_startup(serve_test::inputs({"vllm", "serve", "meta-llama/Llama-3.1-8B", "--max-model-len", "8192"},
                                                      80 * kGiB, "0.5.3")).ok());
  ServeInputs fixed = serve_test::inputs({"vllm", "serve", "google/gemma-2-9b", "--max-model-len", "8192"}, 80 * kGiB,
                                         "0.6.5");
  auto full = predict_vllm_startup(fixed);
  ASSERT_TRUE(full.ok()) << full.error().message;
  EXPECT_EQ(full->settings.max_model_len, 8192u);
}

}  // namespace
}  // namespace oomdoc
