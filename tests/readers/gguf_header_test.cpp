// GGUF headers (readers/gguf_header.h) against files written by tools/gen_gguf.py: the tiny
// Llama-shaped file's metadata and tensor table, its estimate from the exact tensor bytes, and a
// one-line error for every broken variant.
#include "readers/gguf_header.h"

#include <gtest/gtest.h>

#include "analyses/estimator.h"
#include "core/text.h"
#include "readers/model_resolver.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

std::string gguf(const char* name) { return testing::fixture_path(std::string("gguf/") + name); }

// Per block of the tiny model: two f32 norms of 64, q and o 64x64 in Q8_0 (34 B per 32), k 64x32
// in Q8_0, v 64x32 in Q4_0 (18 B per 32), gate and up 64x128 in Q8_0, down 128x64 in f16.
constexpr uint64_t kBlock = 2 * 256 + 2 * 4352 + 2176 + 1152 + 2 * 8704 + 16384;   // 46,336
constexpr uint64_t kVocabMatrixQ8 = 64 * 256 / 32 * 34;                             // 17,408

TEST(GgufHeader, ReadsMetadataAndTheTensorTable) {
  auto h = read_gguf_header(gguf("tiny_llama_q8_0.gguf"));
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->version, 3u);
  EXPECT_EQ(h->tensors.size(), 1u + 2 * 9 + 2);
  EXPECT_EQ(h->metadata.at("general.architecture").s, "llama");
  EXPECT_EQ(h->metadata.at("test.every.i8").i, -3);
  EXPECT_EQ(h->metadata.at("test.every.u64").u, 1ull << 40);
  EXPECT_DOUBLE_EQ(h->metadata.at("test.every.f64").f, 0.5);
  EXPECT_EQ(h->metadata.at("tokenizer.ggml.tokens").array_length, 256u);
  EXPECT_EQ(h->data_offset % 32, 0u);
  EXPECT_EQ(h->tensors[0].name, "token_embd.weight");
  EXPECT_EQ(h->tensors[0].dims, (std::vector<uint64_t>{64, 256}));
  EXPECT_EQ(h->tensors[0].bytes, kVocabMatrixQ8);
}

TEST(GgufHeader, ModelShapeAndExactWeights) {
  auto m = resolve_model(gguf("tiny_llama_q8_0.gguf"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->id, "tiny-llama-test");
  EXPECT_EQ(m->model_type, "llama");
  EXPECT_EQ(m->num_layers, 2u);
  EXPECT_EQ(m->hidden_size, 64u);
  EXPECT_EQ(m->num_attention_heads, 4u);
  EXPECT_EQ(m->num_kv_heads, 2u);
  EXPECT_EQ(m->head_dim, 16u);
  EXPECT_EQ(m->intermediate_size, 128u);
  EXPECT_EQ(m->vocab_size, 256u);   // from the tokenizer's token list
  ASSERT_TRUE(m->gguf.has_value());
  EXPECT_EQ(m->gguf->file_type, "q8_0");
  EXPECT_EQ(m->gguf->layer_bytes, (std::vector<uint64_t>{kBlock, kBlock}));
  EXPECT_EQ(m->gguf->token_embd_bytes, kVocabMatrixQ8);
  EXPECT_EQ(m->gguf->output_bytes, kVocabMatrixQ8);
  EXPECT_EQ(m->gguf->other_bytes, 256u);   // output_norm
  EXPECT_FALSE(m->tie_word_embeddings);
}

TEST(GgufHeader, EstimateUsesTheFilesTensorsAndRunsInLlamaCpp) {
  auto m = resolve_model(gguf("tiny_llama_q8_0.gguf"));
  ASSERT_TRUE(m.ok());
  Job job;
  job.prompt_len = 512;
  job.max_new_tokens = 0;
  auto e = estimate_memory(*m, job);
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->allocator, "llama_cpp");
  EXPECT_EQ(e->components[0].name, "weights");
  EXPECT_EQ(e->components[0].bytes, 2 * kBlock + kVocabMatrixQ8 + 256);
  EXPECT_EQ(e->components[1].bytes, 512u * 2 * 2 * 2 * 16 * 2);   // cells x layers x (k, v) x 2 heads x 16 x f16
  // One block on the GPU (-ngl 1): the last block only, output and embeddings in host memory.
  job.gpu_layers = 1;
  auto partial = estimate_memory(*m, job);
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->components[0].bytes, kBlock);
  // A tied file duplicates the embeddings as the output layer.
  auto tied = resolve_model(gguf("tiny_llama_tied.gguf"));
  ASSERT_TRUE(tied.ok());
  EXPECT_TRUE(tied->tie_word_embeddings);
  job.gpu_layers.reset();
  auto t = estimate_memory(*tied, job);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->components[0].bytes, 2 * kBlock + kVocabMatrixQ8 + 256);
  // Another implementation is refused for a GGUF file.
  job.implementation = "transformers";
  auto refused = estimate_memory(*m, job);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("a GGUF file runs in llama.cpp"), std::string::npos);
}

TEST(GgufHeader, Gemma2SlidesEveryOtherLayerAsLlamaCppDoes) {
  auto m = resolve_model(gguf("tiny_gemma2_swa.gguf"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->model_type, "gemma2");
  EXPECT_EQ(m->sliding_window, 64u);
  EXPECT_EQ(m->layer_is_sliding, (std::vector<bool>{true, false}));
  Job job;
  job.prompt_len = 4096;
  job.max_new_tokens = 0;
  auto e = estimate_memory(*m, job);
  ASSERT_TRUE(e.ok()) << e.error().message;
  // Layer 0 keeps the window plus one micro-batch (64 + 512 cells), layer 1 all 4096; k and v of
  // 2 heads of 16 in f16 per cell.
  EXPECT_EQ(e->components[1].name, "kv_cache");
  EXPECT_EQ(e->components[1].bytes, (576u + 4096u) * 2 * 2 * 16 * 2);
}

TEST(GgufHeader, PerLayerKvHeadCountsAreRead) {
  auto m = resolve_model(gguf("kv_array.gguf"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->num_kv_heads, 2u);
}

TEST(GgufHeader, SplitFilesAreReadWhole) {
  // gguf-split shards: either shard gives the whole model (the metadata lives in the first).
  auto whole = resolve_model(gguf("tiny_llama_q8_0.gguf"));
  ASSERT_TRUE(whole.ok());
  for (const char* shard : {"tiny_llama-00001-of-00002.gguf", "tiny_llama-00002-of-00002.gguf"}) {
    auto m = resolve_model(gguf(shard));
    ASSERT_TRUE(m.ok()) << shard << ": " << m.error().message;
    EXPECT_EQ(m->total_params, whole->total_params) << shard;
    EXPECT_EQ(m->gguf->layer_bytes, whole->gguf->layer_bytes) << shard;
    EXPECT_EQ(m->gguf->output_bytes, whole->gguf->output_bytes) << shard;
    EXPECT_FALSE(m->tie_word_embeddings) << shard;
  }
  auto lonely = resolve_model(gguf("lonely-00001-of-00003.gguf"));
  ASSERT_FALSE(lonely.ok());
  EXPECT_NE(lonely.error().message.find("split 2 of 3 is missing"), std::string::npos) << lonely.error().message;
  // A missing .gguf path is a missing file, not a model name to look up.
  auto missing = resolve_model("no-such-model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "no-such-model.gguf: no such file");
}

TEST(GgufHeader, BrokenFilesGiveOneLineErrors) {
  struct Case { const char* file; const char* says; };
  for (const Case& c : {Case{"truncated.gguf", "truncated or corrupt GGUF header"},
                        Case{"bad_magic.gguf", "not a GGUF file"},
                        Case{"version_1.gguf", "GGUF version 1"},
                        Case{"huge_tensor_count.gguf", "implausible tensor count"},
                        Case{"string_past_end.gguf", "runs past byte"},
                        Case{"data_cut_short.gguf", "truncated or overlapping"},
                        Case{"absurd_shape.gguf", "implausible shape"},
                        Case{"no_architecture.gguf", "no general.architecture"},
                        Case{"dup_tensor.gguf", "appears twice"},
                        Case{"dup_key.gguf", "metadata key llama.block_count appears twice"},
                        Case{"hybrid_kv_array.gguf", "layers without attention"},
                        Case{"bert.gguf", "architecture bert is an encoder"}}) {
    auto m = resolve_model(gguf(c.file));
    ASSERT_FALSE(m.ok()) << c.file;
    EXPECT_NE(m.error().message.find(c.says), std::string::npos) << c.file << ": " << m.error().message;
    EXPECT_EQ(m.error().message.rfind(gguf(c.file), 0), 0u) << m.error().message;   // names the file
    EXPECT_EQ(m.error().message.find('\n'), std::string::npos);
  }
  // Every prefix of a good header fails cleanly (no crash, no partial model).
  std::string good = testing::read_file(gguf("tiny_llama_q8_0.gguf"));
  for (size_t n = 0; n < 2000 && n < good.size(); n += 7) {
    auto h = parse_gguf_header(std::string_view(good).substr(0, n), good.size(), "cut.gguf");
    EXPECT_FALSE(h.ok()) << n;
  }
  // Bytes of the header overwritten at random (a fixed seed): an error or a model, never a crash;
  // a model read from a damaged header still has a usable shape or is refused.
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state; };
  for (int round = 0; round < 5000; ++round) {
    std::string bad = good;
    for (int k = 0; k < 4; ++k) bad[next() % 1600] = static_cast<char>(next());
    auto h = parse_gguf_header(bad, bad.size(), "mutated.gguf");
    if (!h) {
      // A corrupt length turns a key into binary bytes: the message stays printable and short.
      const std::string& message = h.error().message;
      EXPECT_EQ(printable(message), message) << round;
      EXPECT_LT(message.size(), 400u) << message;
      continue;
    }
    auto m = model_from_gguf_header(*h, "mutated.gguf");
    if (!m) continue;
    EXPECT_GT(m->num_layers, 0u);
    Job job;
    job.prompt_len = 512;
    job.max_new_tokens = 0;
    auto e = estimate_memory(*m, job);
    if (!e) continue;
    // Whatever the numbers, the estimate adds up: llama.cpp's buffers are its components but the
    // CUDA context, and the device adds the context.
    uint64_t buffers = 0;
    for (const auto& c : e->components) buffers += c.name == "cuda_context" ? 0 : c.bytes;
    EXPECT_EQ(e->peak_allocated_bytes, buffers);
    EXPECT_EQ(e->device_used_bytes, buffers + cuda_context_bytes());
  }
}

}  // namespace
}  // namespace oomdoc
