// Explain QA review 21, finding 10: advice that must fit the case. llama.cpp's fixes name the values
// its log printed (the context, the file type); a network outside Hugging Face's stack gets no
// KV-cache, generate() or BitsAndBytesConfig advice; a small request gets no fragmentation fix.
// Finding 12's cosmetics: TensorFlow's 8-bit float types are sized.
#include <gtest/gtest.h>

#include "analyses/diagnose.h"
#include "analyses/explain.h"
#include "model/gguf_types.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

using testing::explain_text;
using testing::fix_ids;

const std::string kLlamaHeader =
    "llama_model_loader: loaded meta data with 29 key-value pairs and 292 tensors from "
    "models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf (version GGUF V3 (latest))\n"
    "print_info: file type   = Q4_K - Medium\n"
    "print_info: file size   = 4.58 GiB (4.89 BPW)\n"
    "llama_context: n_ctx         = 131072\n"
    "llama_context: n_ctx_per_seq = 131072\n"
    "llama_context: flash_attn    = 0\n"
    "llama_kv_cache_unified:      CUDA0 KV buffer size = 16384.00 MiB\n"
    "llama_kv_cache_unified: size = 16384.00 MiB (131072 cells,  32 layers,  1 seqs), K (f16): 8192.00 MiB, V (f16): "
    "8192.00 MiB\n";

const std::string kComputeFailure =
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 8464.01 MiB on device 0: cudaMalloc failed: out of memory\n"
    "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 8875216896\n"
    "graph_reserve: failed to allocate compute buffers\n";

// A Q4_K_M model is offered the next file down, Q3_K_M; the context fix halves the n_ctx printed,
// with what that saves of the 16 GiB KV cache.
TEST(DiagnoseQa21Advice, LlamaCppFixesNameTheLogsFileTypeAndContext) {
  const ExplainReport r = explain_text(kLlamaHeader + kComputeFailure);
  ASSERT_EQ(r.events.size(), 1u);
  const OomEvent& e = r.events[0].event;
  EXPECT_EQ(e.int_field("llama_n_ctx"), 131072);
  EXPECT_EQ(e.string_field("llama_file_type"), "q4_k_m");
  EXPECT_EQ(e.int_field("llama_kv_cache_bytes"), 16384ll << 20);
  const Diagnosis& d = r.events[0].diagnosis;
  EXPECT_EQ(fix_ids(d), (std::vector<std::string>{"ggml_flash_attention", "ggml_kv_cache_type", "ggml_smaller_context",
                                                  "ggml_smaller_quant", "ggml_fewer_layers"}));
  const Fix& quant = testing::fix(d, "ggml_smaller_quant");
  EXPECT_EQ(quant.detail, "The model is Q4_K_M; a Q3_K_M file of it leaves room for layers and context.");
  EXPECT_EQ(quant.snippet, "a Q3_K_M GGUF instead of Q4_K_M; size it first: oomdoc fit MODEL --implementation llama_cpp "
                           "--weight-quantization q3_k_m --prompt-len N --gpu NAME");
  const Fix& context = testing::fix(d, "ggml_smaller_context");
  EXPECT_EQ(context.detail, "The compute buffer grows with the context (-c) and micro-batch (-ub); the KV cache with -c. "
                            "The KV cache is 16.00 GiB at n_ctx 131072: -c 65536 saves 8.00 GiB of it.");
  EXPECT_EQ(context.snippet, "-c 65536  # half the n_ctx 131072 the log shows; -ub 256 shrinks the compute buffer");
}

// The KV cache's own failure (2024 builds' names, no size line): the request is the KV cache.
TEST(DiagnoseQa21Advice, LlamaCppKvCacheFailureHalvesTheContextFromTheRequest) {
  const ExplainReport r = explain_text(
      "llm_load_print_meta: model ftype      = Q3_K - Medium\n"
      "llama_new_context_with_model: n_ctx      = 32768\n"
      "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc failed: out of memory\n"
      "llama_kv_cache_init: failed to allocate buffer for kv cache\n");
  ASSERT_EQ(r.events.size(), 1u);
  const Diagnosis& d = r.events[0].diagnosis;
  // Q3_K_M is the bottom of the ladder: no smaller file is offered.
  EXPECT_EQ(fix_ids(d), (std::vector<std::string>{"ggml_kv_cache_type", "ggml_smaller_context", "ggml_fewer_layers"}));
  EXPECT_EQ(testing::fix(d, "ggml_smaller_context").snippet,
            "-c 16384  # half the n_ctx 32768 the log shows; -ub 256 shrinks the compute buffer");
  EXPECT_NE(testing::fix(d, "ggml_smaller_context").detail.find("The KV cache is 4.00 GiB at n_ctx 32768: -c 16384 saves "
                                                                "2.00 GiB of it."),
            std::string::npos);
}

// Without those lines the fixes say what N is and give an example type.
TEST(DiagnoseQa21Advice, LlamaCppWithoutSettingsSaysWhatNIs) {
  const ExplainReport r = explain_text(kComputeFailure);
  ASSERT_EQ(r.events.size(), 1u);
  const Diagnosis& d = r.events[0].diagnosis;
  EXPECT_EQ(testing::fix(d, "ggml_smaller_context").snippet,
            "-c N  # N: the context in tokens, below the n_ctx llama.cpp printed (KV cache and compute buffer); "
            "-ub 256 (smaller compute buffer)");
  EXPECT_EQ(testing::fix(d, "ggml_smaller_quant").detail, "A smaller quantization (Q4_K_M) leaves room for layers and context.");
}

// What the device had free at load, less the model's and the KV cache's buffers, says what was left
// for the compute buffer that failed.
TEST(DiagnoseQa21Advice, LlamaCppFreeAtLoadAndBuffersSayWhatWasLeft) {
  const ExplainReport r = explain_text(
      "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 3090) - 23306 MiB free\n"
      "load_tensors:        CUDA0 model buffer size =  4403.49 MiB\n"
      "llama_context: n_ctx         = 131072\n"
      "llama_kv_cache_unified:      CUDA0 KV buffer size = 16384.00 MiB\n"
      "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 8480.01 MiB on device 0: cudaMalloc failed: out of memory\n"
      "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 8892006400\n"
      "llama_init_from_model: failed to initialize the context: failed to allocate compute buffers\n");
  ASSERT_EQ(r.events.size(), 1u);
  const OomEvent& e = r.events[0].event;
  EXPECT_EQ(e.int_field("llama_device_free_bytes"), 23306ll << 20);
  EXPECT_EQ(e.int_field("llama_kv_buffer_bytes"), 16384ll << 20);
  EXPECT_EQ(e.int_field("llama_model_buffer_bytes"), static_cast<int64_t>(4403.49 * (1 << 20)));
  const Diagnosis& d = r.events[0].diagnosis;
  EXPECT_EQ(d.cause, "capacity_exhausted");
  EXPECT_EQ(d.evidence.at(1), "At load the device had 22.76 GiB free: the model's 4.30 GiB and the KV cache's 16.00 GiB "
                              "left 2.46 GiB; the 8.28 GiB buffer needed 5.82 GiB more.");
}

TEST(DiagnoseQa21Advice, GgufFileTypesReadAndStepDown) {
  EXPECT_EQ(gguf_file_type_from_printed("Q4_K - Medium"), "q4_k_m");
  EXPECT_EQ(gguf_file_type_from_printed("Q2_K - Medium"), "q2_k");
  EXPECT_EQ(gguf_file_type_from_printed("Q5_K - Small (guessed)"), "q5_k_s");
  EXPECT_EQ(gguf_file_type_from_printed("mostly Q4_K - Medium"), "q4_k_m");   // older builds
  EXPECT_EQ(gguf_file_type_from_printed("all F32"), "f32");
  EXPECT_EQ(gguf_file_type_from_printed("IQ4_XS - 4.25 bpw"), "iq4_xs");
  EXPECT_EQ(gguf_file_type_from_printed("something else"), std::nullopt);
  EXPECT_EQ(smaller_gguf_file_type("bf16"), "q8_0");
  EXPECT_EQ(smaller_gguf_file_type("q8_0"), "q6_k");
  // Q4_K_S shares Q4_K_M's base type: the next smaller is Q3_K_M.
  EXPECT_EQ(smaller_gguf_file_type("q4_k_s"), "q3_k_m");
  EXPECT_EQ(smaller_gguf_file_type("q3_k_m"), std::nullopt);
  EXPECT_EQ(smaller_gguf_file_type("iq4_xs"), std::nullopt);
}

const std::string kEvalOom =
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 392.00 MiB. GPU 0 has a total capacity of "
    "10.75 GiB of which 187.62 MiB is free. Including non-PyTorch memory, this process has 10.56 GiB memory in use. Of "
    "the allocated memory 10.18 GiB is allocated by PyTorch, and 177.94 MiB is reserved by PyTorch but unallocated.\n";

std::string eval_traceback(const std::string& model_frame) {
  return "Traceback (most recent call last):\n"
         "  File \"/home/u/train.py\", line 140, in <module>\n"
         "    val_loss = evaluate(model, val_loader)\n"
         "  File \"/home/u/train.py\", line 98, in evaluate\n"
         "    outputs = model(images)\n" +
         model_frame + kEvalOom;
}

// llama.cpp under Ollama: the halved context as Ollama's num_ctx, with the value, and the next smaller
// file as an Ollama tag.
TEST(DiagnoseQa21Advice, OllamaContextFixNamesNumCtx) {
  const ExplainReport r = explain_text(
      "time=2024-11-02T10:00:00.000Z level=INFO source=server.go:105 msg=\"system memory\" total=\"31.3 GiB\"\n"
      "llm_load_print_meta: model ftype      = mostly Q4_K - Medium\n"
      "llama_new_context_with_model: n_ctx      = 32768\n"
      "llama_new_context_with_model: KV self size  = 4096.00 MiB, K (f16): 2048.00 MiB, V (f16): 2048.00 MiB\n"
      "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 2240.00 MiB on device 0: cudaMalloc failed: out of memory\n"
      "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 2348810240\n"
      "llama_new_context_with_model: failed to allocate compute buffers\n"
      "time=2024-11-02T10:00:05.000Z level=ERROR source=sched.go:455 msg=\"error loading llama server\" "
      "error=\"llama runner process has terminated: error:failed to create context with model\"\n");
  ASSERT_EQ(r.events.size(), 1u);
  const Fix& context = testing::fix(r.events[0].diagnosis, "ggml_smaller_context");
  EXPECT_EQ(context.snippet,
            "/set parameter num_ctx 16384  # half the n_ctx 32768 the log shows, in `ollama run`; PARAMETER num_ctx 16384 "
            "in a Modelfile, \"options\": {\"num_ctx\": 16384} in the API, OLLAMA_CONTEXT_LENGTH=16384 for the server's "
            "default");
  EXPECT_NE(context.detail.find("num_ctx 16384 saves 2.00 GiB"), std::string::npos) << context.detail;
  // The smaller file as an Ollama tag, the next one down from the loaded Q4_K_M.
  EXPECT_EQ(testing::fix(r.events[0].diagnosis, "ggml_smaller_quant").snippet,
            "ollama pull <model>:<tag>-q3_K_M  # the next quantization below Q4_K_M");
}

// A torchvision ResNet evaluating: a smaller batch, no KV cache, generate() or from_pretrained.
TEST(DiagnoseQa21Advice, VisionEvaluationGetsNoLanguageModelFixes) {
  const ExplainReport r = explain_text(eval_traceback(
      "  File \"/usr/local/lib/python3.10/site-packages/torchvision/models/resnet.py\", line 285, in forward\n"
      "    return self._forward_impl(x)\n"));
  ASSERT_EQ(r.events.size(), 1u);
  const Diagnosis& d = r.events[0].diagnosis;
  EXPECT_EQ(fix_ids(d), (std::vector<std::string>{"no_grad_for_eval", "smaller_input", "bigger_gpu"}));
  EXPECT_EQ(testing::fix(d, "smaller_input").detail,
            "The failed request is 392.00 MiB with 187.62 MiB free: the peak must drop by at least 204.38 MiB. "
            "Activations scale with the inputs run at once (batch, image size, sequence length); halve the evaluation "
            "batch.");
}

// The same evaluation through a transformers model keeps the language-model ladder.
TEST(DiagnoseQa21Advice, TransformersEvaluationKeepsTheLanguageModelFixes) {
  const ExplainReport r = explain_text(eval_traceback(
      "  File \"/usr/local/lib/python3.10/site-packages/transformers/models/llama/modeling_llama.py\", line 1189, in "
      "forward\n"
      "    logits = self.lm_head(hidden_states)\n"));
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(fix_ids(r.events[0].diagnosis),
            (std::vector<std::string>{"no_grad_for_eval", "smaller_inference_batch", "quantize_model", "bigger_gpu"}));
  // So does LitGPT's own model, on a Windows path.
  const ExplainReport lit = explain_text(eval_traceback(
      "  File \"C:\\venv\\Lib\\site-packages\\litgpt\\model.py\", line 94, in forward\n"
      "    return self.lm_head(x)\n"));
  ASSERT_EQ(lit.events.size(), 1u);
  EXPECT_EQ(fix_ids(lit.events[0].diagnosis),
            (std::vector<std::string>{"no_grad_for_eval", "smaller_inference_batch", "quantize_model", "bigger_gpu"}));
}

// A 512-byte request comes from PyTorch's small pool, which cached large blocks never serve: no
// max_split_size_mb, no fragmentation cause; the same cache beside a 64 MiB request keeps the fix.
TEST(DiagnoseQa21Advice, SmallPoolRequestGetsNoFragmentationFix) {
  const ExplainReport small = explain_text(
      "RuntimeError: CUDA out of memory. Tried to allocate 512 bytes (GPU 0; 3.95 GiB total capacity; 3.41 GiB already "
      "allocated; 0 bytes free; 3.45 GiB reserved in total by PyTorch)\n");
  ASSERT_EQ(small.events.size(), 1u);
  const Diagnosis& d = small.events[0].diagnosis;
  EXPECT_EQ(d.cause, "capacity_exhausted");
  EXPECT_TRUE(d.secondary_causes.empty());
  EXPECT_FALSE(testing::has_fix(d, "max_split_size"));
  EXPECT_EQ(d.evidence[0], "The 40.96 MiB reserved but unallocated sits in partly used cached segments with no room for it; "
                           "a request of 1 MiB or less needs a new 2 MiB segment of PyTorch's small pool, which "
                           "max_split_size_mb does not affect: no allocator setting helps.");

  const ExplainReport large = explain_text(
      "RuntimeError: CUDA out of memory. Tried to allocate 32.00 MiB (GPU 0; 3.95 GiB total capacity; 3.41 GiB already "
      "allocated; 0 bytes free; 3.45 GiB reserved in total by PyTorch)\n");
  ASSERT_EQ(large.events.size(), 1u);
  EXPECT_EQ(large.events[0].diagnosis.secondary_causes, (std::vector<std::string>{"fragmentation_minor"}));
  EXPECT_EQ(fix_ids(large.events[0].diagnosis)[0], "max_split_size");
}

// TensorFlow's float8 types are one byte an element: 1024 x 1024 x 256 of them is 256 MiB.
TEST(DiagnoseQa21Advice, TensorFlowFloat8TensorIsSized) {
  for (const std::string type : {"float8_e4m3fn", "float8_e5m2"}) {
    const ExplainReport r = explain_text(
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
        "shape[1024,1024,256] and type " + type + " on /job:localhost/replica:0/task:0/device:GPU:0 by allocator "
        "GPU_0_bfc [Op:AddV2]\n");
    ASSERT_EQ(r.events.size(), 1u);
    EXPECT_EQ(r.events[0].event.bytes("requested"), 256ull << 20) << type;
  }
}

}  // namespace
}  // namespace oomdoc
