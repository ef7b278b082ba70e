// llama.cpp's buffers (analyses/llama_cpp_estimate.h), hand-computed for Llama-2-7B's shape.
// The same shape is open_llama_7b_v2's, whose llama.cpp CI logs (ggml-org/ci, build 2459) print
// a CUDA0 model buffer of 3577.56 MiB (Q4_0), KV 256 MiB and compute 70.50 MiB at n_ctx 512.
#include "analyses/llama_cpp_estimate.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "analyses/estimator.h"
#include "readers/job_file.h"
#include "readers/model_presets.h"

namespace oomdoc {
namespace {

ModelSpec llama2_7b() { return find_preset("meta-llama/Llama-2-7b-hf")->value(); }

Job llama_cpp_job(const char* file_type, uint64_t context) {
  Job job;
  job.task = "inference";
  job.implementation = "llama_cpp";
  job.weight_quantization = file_type;
  job.prompt_len = context;
  job.max_new_tokens = 0;
  return job;
}

uint64_t component(const Estimate& e, const std::string& name) {
  for (const auto& c : e.components) if (c.name == name) return c.bytes;
  return 0;
}

constexpr uint64_t kLinear = 32ull * (4 * 4096 * 4096 + 3 * 4096 * 11008);   // 6,476,005,376 weights
constexpr uint64_t kVocabMatrix = 32000ull * 4096;
constexpr uint64_t kNormsF32 = (2ull * 4096 * 32 + 4096) * 4;

TEST(LlamaCppEstimate, Q4_0BuffersAtContext512) {
  auto e = estimate_memory(llama2_7b(), llama_cpp_job("q4_0", 512));
  ASSERT_TRUE(e.ok()) << e.error().message;
  // Blocks in Q4_0 (18 B per 32), the output matrix in Q6_K (210 B per 256), norms in f32; the
  // token embeddings stay in host memory.
  EXPECT_EQ(component(*e, "weights"), kLinear * 18 / 32 + kVocabMatrix * 210 / 256 + kNormsF32);   // 3577.55 MiB
  EXPECT_EQ(component(*e, "kv_cache"), 512ull * 32 * 2 * 4096 * 2);                               // 256 MiB
  // Widest moment: the output's logits for all 512 positions and the last hidden state, f32.
  EXPECT_EQ(component(*e, "compute_buffer"), 512ull * 4 * (4096 + 32000));                         // 70.5 MiB
  EXPECT_EQ(e->peak_allocated_bytes, e->peak_reserved_bytes);
  EXPECT_EQ(e->peak_allocated_bytes,
            component(*e, "weights") + component(*e, "kv_cache") + component(*e, "compute_buffer"));
  EXPECT_EQ(e->device_used_bytes, e->peak_allocated_bytes + cuda_context_bytes());
  EXPECT_EQ(e->allocator, "llama_cpp");
}

TEST(LlamaCppEstimate, LongerContextMakesTheKqScoresTheWidestMoment) {
  auto e = estimate_memory(llama2_7b(), llama_cpp_job("q8_0", 2048));
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(component(*e, "weights"), kLinear * 34 / 32 + kVocabMatrix * 34 / 32 + kNormsF32);   // output stays Q8_0
  EXPECT_EQ(component(*e, "kv_cache"), 2048ull * 32 * 2 * 4096 * 2);                             // 1 GiB
  // f32 KQ scores of 32 heads and the mask over 2048 cells, plus the residual, Q, K and V: 164 MiB.
  EXPECT_EQ(component(*e, "compute_buffer"), 512ull * 2048 * 4 * 33 + 512ull * 4 * 4 * 4096);
  // Flash attention never materialises the scores: the f16 mask only, and the feed-forward is wider.
  Job flash = llama_cpp_job("q8_0", 2048);
  flash.attention_impl = "flash";
  auto f = estimate_memory(llama2_7b(), flash);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(component(*f, "compute_buffer"), 512ull * 4 * (4096 + 32000));   // the output logits again
}

TEST(LlamaCppEstimate, PartialOffloadKeepsTheRestInHostMemory) {
  Job job = llama_cpp_job("q4_0", 512);
  job.gpu_layers = 16;   // the last 16 blocks; the output layer stays on the CPU
  auto e = estimate_memory(llama2_7b(), job);
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(component(*e, "weights"), kLinear / 2 * 18 / 32 + (2ull * 4096 * 16) * 4);
  EXPECT_EQ(component(*e, "kv_cache"), 512ull * 16 * 2 * 4096 * 2);
  // No output on the GPU: the widest moment is attention (65 MiB) rather than the logits.
  EXPECT_EQ(component(*e, "compute_buffer"), 512ull * 512 * 4 * 33 + 512ull * 4 * 4 * 4096);
}

TEST(LlamaCppEstimate, QuantizedKvCacheAndDefaults) {
  Job job = llama_cpp_job("q4_k_m", 8192);
  job.kv_cache_dtype = "q8_0";
  auto e = estimate_memory(llama2_7b(), job);
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(component(*e, "kv_cache"), 8192ull * 32 * 2 * 4096 * 34 / 32);
  Job bare;
  bare.implementation = "llama_cpp";
  auto d = estimate_memory(llama2_7b(), bare);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(component(*d, "kv_cache"), 4096ull * 32 * 2 * 4096 * 2);   // -c 4096, f16
  EXPECT_EQ(component(*d, "weights"), kLinear * 2 + kVocabMatrix * 2 + kNormsF32);   // f16 file
  // The default -c is the whole context: generated tokens do not add cells to it.
  bare.max_new_tokens = 100;
  auto generating = estimate_memory(llama2_7b(), bare);
  ASSERT_TRUE(generating.ok()) << generating.error().message;
  EXPECT_EQ(component(*generating, "kv_cache"), 4096ull * 32 * 2 * 4096 * 2);
  // More tokens to generate than -c 4096 holds: the context holds them all.
  bare.max_new_tokens = 16384;
  auto longer = estimate_memory(llama2_7b(), bare);
  ASSERT_TRUE(longer.ok()) << longer.error().message;
  EXPECT_EQ(component(*longer, "kv_cache"), 16384ull * 32 * 2 * 4096 * 2);
  // A prompt length alone is the context, and it is said that no generated tokens were added.
  Job prompt_only;
  prompt_only.implementation = "llama_cpp";
  prompt_only.prompt_len = 2048;
  auto p = estimate_memory(llama2_7b(), prompt_only);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(component(*p, "kv_cache"), 2048ull * 32 * 2 * 4096 * 2);
  EXPECT_NE(std::find(p->assumptions.begin(), p->assumptions.end(),
                      "max_new_tokens: 0 (the context -c is prompt_len + max_new_tokens per sequence: give "
                      "max_new_tokens to count the generated tokens)"),
            p->assumptions.end());
}

// A Q4_K_M mix, against a public llama.cpp log of a Llama-3-8B Q4_K_M file (llama-cpp-python on
// an RTX 3070, n_ctx 512: "CPU buffer size = 281.81 MiB", "CUDA0 buffer size = 4403.49 MiB",
// "KV buffer size = 64.00 MiB", "CUDA0 compute buffer size = 258.50 MiB"; 193 q4_K tensors, 33 q6_K).
TEST(LlamaCppEstimate, Q4KMMixMatchesLlamaCppsLogForLlama3_8B) {
  auto e = estimate_memory(find_preset("meta-llama/Meta-Llama-3-8B")->value(), llama_cpp_job("q4_k_m", 512));
  ASSERT_TRUE(e.ok()) << e.error().message;
  auto mib = [](uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  EXPECT_NEAR(mib(component(*e, "weights")), 4403.49, 0.005);
  EXPECT_EQ(component(*e, "kv_cache"), 64ull << 20);
  EXPECT_EQ(component(*e, "compute_buffer"), 517ull << 19);   // 258.50 MiB: 512 x (4096 + 128256) x 4 B
  EXPECT_NE(e->components.front().detail.find("281.81 MiB in host memory"), std::string::npos) << e->components.front().detail;
}

TEST(LlamaCppEstimate, SlidingWindowOnlyWhereLlamaCppSlides) {
  // Mistral-7B-v0.1's config has a 4096-token window, but llama.cpp runs it as llama: full cache.
  auto mistral = estimate_memory(find_preset("mistralai/Mistral-7B-v0.1")->value(), llama_cpp_job("q4_k_m", 32768));
  ASSERT_TRUE(mistral.ok()) << mistral.error().message;
  EXPECT_EQ(component(*mistral, "kv_cache"), 32768ull * 32 * 2 * 8 * 128 * 2);   // 4 GiB
  // Gemma-2-9B: 21 global layers hold the context, 21 local ones 4096 + 512 cells.
  auto gemma = estimate_memory(find_preset("google/gemma-2-9b")->value(), llama_cpp_job("q4_k_m", 32768));
  ASSERT_TRUE(gemma.ok()) << gemma.error().message;
  EXPECT_EQ(component(*gemma, "kv_cache"), (21ull * 32768 + 21ull * 4608) * 2 * 8 * 256 * 2);
}

TEST(LlamaCppEstimate, RefusesWhatLlamaCppDoesNotDo) {
  Job train = llama_cpp_job("q4_0", 512);
  train.task = "train_lora";
  EXPECT_FALSE(estimate_memory(llama2_7b(), train).ok());
  Job bnb = llama_cpp_job("nf4", 512);
  auto e = estimate_memory(llama2_7b(), bnb);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("not a GGUF file type"), std::string::npos);
  // Job files: a GGUF type or a llama.cpp cache type needs the implementation.
  auto no_impl = parse_job_json(R"({"model": "llama-2-7b", "task": "inference", "weight_quantization": "q4_k_m"})", "job.json");
  ASSERT_FALSE(no_impl.ok());
  EXPECT_NE(no_impl.error().message.find("add implementation llama_cpp"), std::string::npos);
  auto ok = parse_job_json(R"({"model": "llama-2-7b", "implementation": "llama_cpp", "weight_quantization": "q4_k_m",
                               "kv_cache_dtype": "q8_0", "gpu_layers": 20, "task": "inference"})", "job.json");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->gpu_layers, 20u);
}

}  // namespace
}  // namespace oomdoc
