// One test per diagnosis rule, on messages written for the rule.
#include "analyses/diagnose.h"

#include <gtest/gtest.h>

#include <set>

#include "analyses/explain.h"
#include "support/test_support.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

using testing::explain_text;

Diagnosis first_error(const std::string& text) {
  ExplainReport report = explain_text(text);
  for (const auto& e : report.events) {
    if (e.event.is_error) return e.diagnosis;
  }
  ADD_FAILURE() << "no error event";
  return {};
}

using testing::find_fix;
using testing::has_fix;

std::string new_format(const std::string& req, const std::string& total, const std::string& free,
                       const std::string& process_part, const std::string& alloc, const std::string& unalloc) {
  return "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate " + req + ". GPU 0 has a total capacity of " +
         total + " of which " + free + " is free. " + process_part + "Of the allocated memory " + alloc +
         " is allocated by PyTorch, and " + unalloc + " is reserved by PyTorch but unallocated.\n";
}

TEST(Diagnose, RequestLargerThanTheCard) {
  Diagnosis d = first_error(new_format("30.00 GiB", "23.65 GiB", "20.00 GiB", "", "1.00 GiB", "0 bytes"));
  EXPECT_EQ(d.cause, "request_exceeds_total_capacity");
  EXPECT_TRUE(has_fix(d, "smaller_input"));
}

TEST(Diagnose, CloseToTheLimitGivesTheShortfall) {
  Diagnosis d = first_error(new_format("1.00 GiB", "23.65 GiB", "200.00 MiB",
                                       "Including non-PyTorch memory, this process has 23.30 GiB memory in use. ",
                                       "22.80 GiB", "100.00 MiB"));
  EXPECT_EQ(d.cause, "capacity_exhausted");
  const Fix* batch = find_fix(d, "smaller_batch");
  ASSERT_NE(batch, nullptr);
  EXPECT_NE(batch->detail.find("must drop by at least 824.00 MiB"), std::string::npos) << batch->detail;
  // Cheapest first: the batch comes before checkpointing, which comes before a bigger GPU.
  size_t batch_at = 0, ckpt_at = 0, gpu_at = 0;
  for (size_t i = 0; i < d.fixes.size(); ++i) {
    if (d.fixes[i].id == "smaller_batch") batch_at = i;
    if (d.fixes[i].id == "gradient_checkpointing") ckpt_at = i;
    if (d.fixes[i].id == "bigger_gpu") gpu_at = i;
  }
  EXPECT_LT(batch_at, ckpt_at);
  EXPECT_LT(ckpt_at, gpu_at);
}

TEST(Diagnose, FragmentationSuggestsExpandableSegmentsFirst) {
  Diagnosis d = first_error(new_format("2.00 GiB", "23.65 GiB", "50.00 MiB",
                                       "Including non-PyTorch memory, this process has 23.40 GiB memory in use. ",
                                       "18.00 GiB", "5.00 GiB"));
  EXPECT_EQ(d.cause, "fragmentation");
  ASSERT_FALSE(d.fixes.empty());
  EXPECT_EQ(d.fixes.front().id, "expandable_segments");
  EXPECT_NE(d.fixes.front().snippet.find("PYTORCH_ALLOC_CONF=expandable_segments:True"), std::string::npos);
  EXPECT_NE(d.fixes.front().snippet.find("PYTORCH_CUDA_ALLOC_CONF"), std::string::npos);
}

TEST(Diagnose, AnotherProcessHoldsTheCard) {
  Diagnosis d = first_error(new_format("500.00 MiB", "23.65 GiB", "100.00 MiB",
                                       "Process 111 has 12.00 GiB memory in use. Including non-PyTorch memory, this "
                                       "process has 11.40 GiB memory in use. ",
                                       "10.50 GiB", "400.00 MiB"));
  EXPECT_EQ(d.cause, "other_processes");
  ASSERT_FALSE(d.evidence.empty());
  EXPECT_NE(d.evidence[0].find("pid 111 holds 12.00 GiB"), std::string::npos) << d.evidence[0];
  EXPECT_TRUE(has_fix(d, "end_other_processes"));
}

TEST(Diagnose, SingleProcessLineIsThisProcessInAContainer) {
  ExplainReport r = explain_text(new_format("500.00 MiB", "14.75 GiB", "100.00 MiB",
                                            "Process 20398 has 14.50 GiB memory in use. ", "13.80 GiB", "300.00 MiB"));
  MemoryBreakdown m = breakdown(r.events[0].event);
  EXPECT_EQ(m.likely_self_pid, 20398u);
  EXPECT_EQ(m.other_processes, 0u);
  EXPECT_EQ(r.events[0].diagnosis.cause, "capacity_exhausted");
}

TEST(Diagnose, FreeCoversTheRequestYetItFailed) {
  Diagnosis d = first_error(
      "RuntimeError: CUDA out of memory. Tried to allocate 50.00 MiB (GPU 0; 6.00 GiB total capacity; 600.00 MiB "
      "already allocated; 4.00 GiB free; 20.00 MiB cached)\n");
  EXPECT_EQ(d.cause, "free_exceeds_request_yet_failed");
  EXPECT_TRUE(has_fix(d, "check_device_and_limits"));
}

TEST(Diagnose, MemoryOutsideTheAllocator) {
  Diagnosis d = first_error(
      "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 5.80 GiB total capacity; 3.00 GiB already "
      "allocated; 6.00 MiB free; 3.10 GiB reserved in total by PyTorch)\n");
  EXPECT_EQ(d.cause, "memory_outside_allocator");
}

// One tensor of most of the card beside a little memory held elsewhere: the tensor's size is the
// cause (freeing the rest would still leave it most of the card), the memory elsewhere secondary;
// with memory elsewhere comparable to the tensor, freeing it is the cause (PyTorch ≤ 1.4's form,
// where "cached" is reserved but unallocated).
TEST(Diagnose, OneTensorOfMostOfTheCardBesideMemoryElsewhere) {
  // 10.00 GiB card, 2.00 GiB free, PyTorch 300 MiB allocated + 100 MiB cached: 10 - 2 - 0.390625 =
  // 7.609375 GiB held elsewhere, more than half the 9.00 GiB request: memory elsewhere is the cause.
  Diagnosis comparable = first_error(
      "RuntimeError: CUDA out of memory. Tried to allocate 9.00 GiB (GPU 0; 10.00 GiB total capacity; 300.00 MiB "
      "already allocated; 2.00 GiB free; 100.00 MiB cached)\n");
  EXPECT_EQ(comparable.cause, "memory_outside_allocator");
  EXPECT_TRUE(comparable.secondary_causes.empty());
  // With 8.00 GiB free, 10 - 8 - 0.390625 = 1.609375 GiB (16%, over the 15% rule) is held
  // elsewhere, under half the 7.90 GiB request: the tensor dominates.
  Diagnosis dominant = first_error(
      "RuntimeError: CUDA out of memory. Tried to allocate 7.90 GiB (GPU 0; 10.00 GiB total capacity; 300.00 MiB "
      "already allocated; 8.00 GiB free; 100.00 MiB cached)\n");
  EXPECT_EQ(dominant.cause, "capacity_exhausted");
  EXPECT_EQ(dominant.secondary_causes, (std::vector<std::string>{"memory_outside_allocator"}));
  ASSERT_EQ(dominant.evidence.size(), 3u);
  EXPECT_EQ(dominant.evidence[0], "This process holds 400.00 MiB of 10.00 GiB (4%); 8.00 GiB was free.");
  EXPECT_EQ(dominant.evidence[1], "The one 7.90 GiB allocation is 79% of the card: a single tensor (attention scores, "
                                  "logits, an image batch) far larger than the rest.");
  EXPECT_EQ(dominant.evidence[2], "1.61 GiB (16% of the card) is held neither by this process's PyTorch allocator nor "
                                  "by a listed process: another container's processes, the display, or other CUDA "
                                  "contexts.");
  EXPECT_TRUE(has_fix(dominant, "smaller_input"));
  EXPECT_TRUE(has_fix(dominant, "end_other_processes"));
}

// A CUDA context is the first thing a process puts on the card: failing to create it for memory
// means others filled the card (the JCuda driver's report, with its cuCtxCreate frame).
TEST(Diagnose, ContextCreationOutOfMemoryIsOtherProcesses) {
  Diagnosis d = first_error(
      "jcuda.CudaException: CUDA_ERROR_OUT_OF_MEMORY\n"
      "    at jcuda.driver.JCudaDriver.checkResult(JCudaDriver.java:337)\n"
      "    at jcuda.driver.JCudaDriver.cuCtxCreate(JCudaDriver.java:1514)\n");
  EXPECT_EQ(d.cause, "other_processes");
  EXPECT_EQ(d.secondary_causes, (std::vector<std::string>{"driver_oom_no_details"}));
  EXPECT_EQ(d.evidence.at(0), "Creating the CUDA context failed: the process had nothing on the card yet, so the card "
                              "was already full, held by other processes (or another CUDA context of this program).");
  ASSERT_FALSE(d.fixes.empty());
  EXPECT_EQ(d.fixes[0].id, "end_other_processes");
}

TEST(Diagnose, EvaluationWithoutNoGradComesFirst) {
  Diagnosis d = first_error(
      "Traceback (most recent call last):\n"
      "  File \"/home/me/train.py\", line 40, in evaluate\n"
      "    logits = model(batch)\n" +
      new_format("1.00 GiB", "23.65 GiB", "200.00 MiB",
                 "Including non-PyTorch memory, this process has 23.30 GiB memory in use. ", "22.80 GiB", "100.00 MiB"));
  EXPECT_EQ(d.cause, "evaluation_with_grad");
  ASSERT_FALSE(d.fixes.empty());
  EXPECT_EQ(d.fixes.front().id, "no_grad_for_eval");
}

// Trainer's evaluation loop runs the model under no_grad (prediction_step) but keeps every batch's
// logits on the GPU unless eval_accumulation_steps moves them: the OOM in appending them is that.
std::string trainer_eval_traceback(const std::string& inner_frames) {
  return "Traceback (most recent call last):\n"
         "  File \"/workspace/train.py\", line 120, in <module>\n"
         "    trainer.train()\n"
         "  File \"/usr/lib/python3/dist-packages/transformers/trainer.py\", line 3467, in evaluate\n"
         "    output = eval_loop(\n"
         "  File \"/usr/lib/python3/dist-packages/transformers/trainer.py\", line 3672, in evaluation_loop\n" +
         inner_frames +
         new_format("7.83 GiB", "79.15 GiB", "3.91 GiB",
                    "Including non-PyTorch memory, this process has 75.23 GiB memory in use. ", "70.10 GiB", "4.61 GiB");
}

TEST(Diagnose, TrainerEvaluationKeepingLogitsOnTheGpu) {
  Diagnosis d = first_error(trainer_eval_traceback(
      "    all_preds.add(logits)\n"
      "  File \"/usr/lib/python3/dist-packages/transformers/trainer_pt_utils.py\", line 327, in add\n"
      "    self.tensors = nested_concat(self.tensors, tensors, padding_index=self.padding_index)\n"
      "  File \"/usr/lib/python3/dist-packages/transformers/trainer_pt_utils.py\", line 99, in torch_pad_and_concatenate\n"
      "    return torch.cat((tensor1, tensor2), dim=0)\n"));
  EXPECT_EQ(d.cause, "eval_predictions_on_gpu");
  EXPECT_EQ(std::find(d.secondary_causes.begin(), d.secondary_causes.end(), "evaluation_with_grad"),
            d.secondary_causes.end());
  ASSERT_GE(d.fixes.size(), 3u);
  EXPECT_EQ(d.fixes[0].id, "eval_accumulation_steps");
  EXPECT_EQ(d.fixes[1].id, "preprocess_logits_for_metrics");
  EXPECT_EQ(d.fixes[2].id, "prediction_loss_only");
  EXPECT_FALSE(has_fix(d, "no_grad_for_eval"));
  EXPECT_FALSE(has_fix(d, "smaller_inference_batch"));   // every batch's logits are kept whatever the batch
  EXPECT_NE(d.evidence.back().find("(the 7.83 GiB request is the concatenated copy"), std::string::npos);
}

TEST(Diagnose, TrainerEvaluationGatheringLogits) {
  Diagnosis d = first_error(trainer_eval_traceback("    logits = self.gather_function((logits))\n"));
  EXPECT_EQ(d.cause, "eval_predictions_on_gpu");
  ASSERT_GE(d.fixes.size(), 2u);
  EXPECT_EQ(d.fixes[0].id, "preprocess_logits_for_metrics");
  EXPECT_EQ(d.fixes[1].id, "eval_accumulation_steps");    // the predictions gathered so far leave the GPU
  EXPECT_EQ(d.fixes[2].id, "prediction_loss_only");
  auto batch = std::find_if(d.fixes.begin(), d.fixes.end(), [](const Fix& f) { return f.id == "smaller_inference_batch"; });
  ASSERT_NE(batch, d.fixes.end());
  EXPECT_EQ(batch->snippet, "per_device_eval_batch_size=B/2  # TrainingArguments; B = the current value");
  EXPECT_EQ(batch->detail, "The failed request is 7.83 GiB with 3.91 GiB free. The gathered logits scale with the "
                           "evaluation batch; halve it.");
}

// TRL's trainers run their own prediction_step under no_grad, as Trainer's does.
TEST(Diagnose, TrlPredictionStepIsNoEvidenceOfAutograd) {
  Diagnosis d = first_error(trainer_eval_traceback(
      "    losses, logits, labels = self.prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)\n"
      "  File \"/usr/lib/python3/dist-packages/trl/trainer/dpo_trainer.py\", line 1590, in prediction_step\n"
      "    loss, metrics = self.get_batch_loss_metrics(model, inputs, train_eval=\"eval\")\n"));
  EXPECT_NE(d.cause, "evaluation_with_grad");
  EXPECT_FALSE(has_fix(d, "no_grad_for_eval"));
}

TEST(Diagnose, TrainerEvaluationLoopIsNoEvidenceOfAutograd) {
  // Failing in the loop elsewhere (a metric computed on the GPU): the model ran under no_grad.
  Diagnosis plain = first_error(trainer_eval_traceback("    metrics = self.compute_metrics(EvalPrediction(...))\n"));
  EXPECT_NE(plain.cause, "evaluation_with_grad");
  EXPECT_FALSE(has_fix(plain, "no_grad_for_eval"));
  // A Trainer subclass's own prediction_step may record gradients.
  Diagnosis own = first_error(trainer_eval_traceback(
      "    losses, logits, labels = self.prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)\n"
      "  File \"/workspace/my_trainer.py\", line 30, in prediction_step\n"
      "    outputs = model(**inputs)\n"));
  EXPECT_EQ(own.cause, "evaluation_with_grad");
}

TEST(Diagnose, LoadingTheModelMeansItDoesNotFit) {
  Diagnosis d = first_error(
      "Traceback (most recent call last):\n"
      "  File \"/home/me/serve.py\", line 3, in <module>\n"
      "    model = AutoModelForCausalLM.from_pretrained(name).cuda()\n" +
      new_format("1.00 GiB", "23.65 GiB", "200.00 MiB",
                 "Including non-PyTorch memory, this process has 23.30 GiB memory in use. ", "22.80 GiB", "100.00 MiB"));
  EXPECT_EQ(d.cause, "model_does_not_fit");
  EXPECT_TRUE(has_fix(d, "quantize_model"));
}

TEST(Diagnose, MemoryClimbingAcrossReadings) {
  std::string log;
  for (int i = 0; i < 12; ++i) log += "step " + std::to_string(i) + " max_memory_allocated=" + std::to_string(10 + i) + ".00 GiB\n";
  log += new_format("1.00 GiB", "23.65 GiB", "200.00 MiB",
                    "Including non-PyTorch memory, this process has 23.30 GiB memory in use. ", "22.80 GiB", "100.00 MiB");
  ExplainReport r = explain_text(log);
  ASSERT_EQ(r.climbing.size(), 1u);
  EXPECT_EQ(r.climbing[0].first_bytes, 10 * kGiB);
  EXPECT_EQ(r.climbing[0].last_bytes, 21 * kGiB);
  const Diagnosis& d = r.events.back().diagnosis;
  EXPECT_NE(std::find(d.secondary_causes.begin(), d.secondary_causes.end(), "memory_climbing"), d.secondary_causes.end());
  EXPECT_EQ(d.fixes.front().id, "release_references");
}

TEST(Diagnose, Fp32HiddenStatesWarningSuggestsBf16Norms) {
  // transformers' warning when flash attention gets fp32 states (PEFT's k-bit preparation upcast
  // the embeddings and norms), then a training OOM on the same rank.
  const std::string warning =
      "[rank0]: The input hidden states seems to be silently casted in float32, this might be related to the fact you "
      "have upcasted embedding or layer norm layers in float32. We will cast back the input in torch.bfloat16.\n";
  const std::string oom = "[rank0]: " + new_format("1.00 GiB", "23.65 GiB", "200.00 MiB",
                                                   "Including non-PyTorch memory, this process has 23.30 GiB memory in use. ",
                                                   "22.80 GiB", "100.00 MiB");
  ExplainReport r = explain_text("step 1\n" + warning + "step 2\n" + oom);
  ASSERT_EQ(r.events.size(), 1u);
  const Diagnosis& d = r.events[0].diagnosis;
  EXPECT_NE(std::find(d.secondary_causes.begin(), d.secondary_causes.end(), "fp32_hidden_states"), d.secondary_causes.end());
  const Fix* f = find_fix(d, "bf16_hidden_states");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(std::find_if(d.evidence.begin(), d.evidence.end(),
                         [](const std::string& s) { return s.rfind("Line 2: transformers warns", 0) == 0; }),
            d.evidence.end());
  // Cheaper than the training ladder's precision and checkpointing steps, after the free ones.
  auto at = [&](const std::string& id) {
    for (size_t i = 0; i < d.fixes.size(); ++i) if (d.fixes[i].id == id) return i;
    return d.fixes.size();
  };
  EXPECT_LT(at("bf16_hidden_states"), at("gradient_checkpointing"));
  EXPECT_LT(at("smaller_batch"), d.fixes.size());
  // The warning after the error, or on another rank, says nothing about it.
  EXPECT_FALSE(has_fix(first_error(oom + warning), "bf16_hidden_states"));
  EXPECT_FALSE(has_fix(first_error("[rank1]: " + warning.substr(9) + oom), "bf16_hidden_states"));
  EXPECT_FALSE(has_fix(first_error(oom), "bf16_hidden_states"));
  // transformers' newer wording of the same warning.
  EXPECT_TRUE(has_fix(first_error("[rank0]: Casting fp32 inputs back to torch.bfloat16 for flash-attn compatibility.\n" + oom),
                      "bf16_hidden_states"));
}

TEST(Diagnose, MemoryClimbingAcrossSeveralErrors) {
  std::string log;
  for (const char* alloc : {"10.00 GiB", "12.00 GiB", "14.00 GiB"}) {
    log += new_format("1.00 GiB", "15.00 GiB", "200.00 MiB", "", alloc, "100.00 MiB") + "retrying\n";
  }
  ExplainReport r = explain_text(log);
  ASSERT_EQ(r.climbing.size(), 1u);
  EXPECT_EQ(r.climbing[0].source, "events");
  EXPECT_EQ(r.climbing[0].samples, 3u);
}

TEST(Diagnose, VllmMaxModelLenFromTheKvTokens) {
  Diagnosis d = first_error(
      "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV "
      "cache (20480). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n");
  EXPECT_EQ(d.cause, "kv_cache_insufficient");
  const Fix* len = find_fix(d, "vllm_max_model_len");
  ASSERT_NE(len, nullptr);
  EXPECT_EQ(len->snippet, "--max-model-len 20480");
  const Fix* fp8 = find_fix(d, "vllm_kv_cache_dtype");
  ASSERT_NE(fp8, nullptr);
  EXPECT_NE(fp8->detail.find("about 40960 tokens, enough for 32768"), std::string::npos) << fp8->detail;
}

TEST(Diagnose, VllmUtilizationComputedFromTheLoggedBudget) {
  Diagnosis d = first_error(
      "INFO worker.py:1] the current vLLM instance can use total_gpu_memory (23.58GiB) x gpu_memory_utilization (0.90) = 21.22GiB\n"
      "INFO worker.py:1] model weights take 14.99GiB; non_torch_memory takes 0.35GiB; PyTorch activation peak memory takes "
      "2.99GiB; the rest of the memory reserved for KV Cache is 2.89GiB.\n"
      "ValueError: The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV "
      "cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n");
  const Fix* util = find_fix(d, "vllm_gpu_memory_utilization");
  ASSERT_NE(util, nullptr);
  // 2.89 GiB for 23648 tokens -> 5352 more tokens need 0.654 GiB: 0.90 + 0.654/23.58 = 0.928 -> 0.93.
  EXPECT_EQ(util->snippet, "--gpu-memory-utilization 0.93");
}

// Weights 7.48 + non-torch 0.12 + activations 1.06 = 8.66 GiB of a 7.88 GiB budget: the accounting
// itself says no KV cache fits, before vLLM raises.
TEST(Diagnose, VllmNegativeKvCacheIsNoKvCacheMemory) {
  ExplainReport report = explain_text(testing::read_file(testing::fixture_path("explain/vllm_negative_kv.log")));
  ASSERT_EQ(report.events.size(), 1u);
  ASSERT_EQ(report.error_count(), 1u);
  const Diagnosis& d = report.events[0].diagnosis;
  EXPECT_EQ(d.cause, "no_kv_cache_memory");
  ASSERT_GE(d.evidence.size(), 4u);
  EXPECT_EQ(d.evidence[0], "vLLM's budget minus weights and the profiling peak leaves -798.72 MiB for the KV cache: the "
                           "budget is 798.72 MiB too small for even an empty cache.");
  EXPECT_EQ(d.evidence[1], "vLLM allocated 0 GPU blocks for the KV cache.");
  EXPECT_EQ(d.evidence[2], "Maximum concurrency for 8192 tokens per request is 0.00x: not one request fits.");
  EXPECT_EQ(d.evidence[3], "Weights 7.48 GiB + non-torch 122.88 MiB + activations 1.06 GiB = 8.66 GiB of a 7.88 GiB "
                           "budget leave nothing for the KV cache.");
  const Fix* util = find_fix(d, "vllm_gpu_memory_utilization");
  ASSERT_NE(util, nullptr);
  // (8.66 + 1) GiB / 15.77 GiB = 0.6126 -> 0.62
  EXPECT_EQ(util->snippet, "--gpu-memory-utilization 0.62");
}

// XLA's BufferAssignment total counts the temporaries it failed to allocate: it is the program's
// whole need (a 3.13 GiB temp of a 7.13 GiB total), not what was assigned before the request.
TEST(Diagnose, XlaTotalAllocationIncludesTheRequest) {
  ExplainReport report = explain_text(testing::read_file(testing::fixture_path("explain/jax_bfc_then_xla.log")));
  ASSERT_EQ(report.events.size(), 1u);
  const Diagnosis& d = report.events[0].diagnosis;
  EXPECT_EQ(d.cause, "capacity_exhausted");
  ASSERT_FALSE(d.evidence.empty());
  EXPECT_EQ(d.evidence[0], "XLA could not allocate 3.13 GiB; the compiled program needs 7.13 GiB in all (3.13 GiB "
                           "temporaries, 2.00 GiB parameters, 2.00 GiB outputs).");
  EXPECT_TRUE(has_fix(d, "xla_preallocation"));
  EXPECT_FALSE(has_fix(d, "mixed_precision"));  // no tf.keras advice for a JAX program
}

// An OOM inside generate() has no micro-batch to accumulate over: the inference ladder.
TEST(Diagnose, GenerationGetsTheInferenceLadder) {
  ExplainReport report = explain_text(
      "Traceback (most recent call last):\n"
      "  File \"/app/infer.py\", line 40, in <module>\n"
      "    out = model.generate(**inputs, max_new_tokens=512)\n"
      "  File \"/usr/lib/python3/site-packages/transformers/generation/utils.py\", line 2215, in generate\n"
      "    result = self._sample(\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 23.64 GiB "
      "of which 2.10 GiB is free. Including non-PyTorch memory, this process has 21.52 GiB memory in use. Of the "
      "allocated memory 20.90 GiB is allocated by PyTorch, and 180.00 MiB is reserved by PyTorch but unallocated.\n");
  ASSERT_EQ(report.events.size(), 1u);
  const Diagnosis& d = report.events[0].diagnosis;
  EXPECT_EQ(testing::fix_ids(d), (std::vector<std::string>{"smaller_inference_batch", "shorter_generation", "quantized_kv_cache",
                                           "quantize_model", "bigger_gpu"}));
  EXPECT_EQ(d.fixes[0].detail, "The failed request is 4.00 GiB with 2.10 GiB free: the peak must drop by at least 1.90 GiB. "
                               "The KV cache and the logits scale with the sequences run at once; halve them.");
}

// The TPU compiler's "memory space hbm" is the chip's main memory: the whole program does not fit
// (its figures read, the batch share that fits), unlike vmem, where a kernel's tiles do not.
TEST(Diagnose, TpuHbmCompileErrorIsTheWholeProgram) {
  ExplainReport report = explain_text(
      "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
      "space hbm. Used 20.00G of 15.48G hbm. Exceeded hbm capacity by 4.52G.\n");
  ASSERT_EQ(report.events.size(), 1u);
  const OomEvent& e = report.events[0].event;
  EXPECT_EQ(e.format, "xla_tpu_hbm_compile");
  EXPECT_EQ(e.bytes("xla_memory_needed"), uint64_t{20} << 30);
  EXPECT_EQ(e.bytes("total"), uint64_t{16621523436});                 // 15.48 x 2^30, rounded
  EXPECT_EQ(e.bytes("xla_memory_exceeded"), uint64_t{4853313044});     // 4.52 x 2^30
  const Diagnosis& d = report.events[0].diagnosis;
  EXPECT_EQ(d.cause, "capacity_exhausted");
  EXPECT_EQ(d.capacity_title, "the compiled program needs more HBM than the TPU has");
  ASSERT_FALSE(d.evidence.empty());
  EXPECT_EQ(d.evidence[0], "XLA's compiler needs 20.00 GiB of HBM for the program on a TPU with 15.48 GiB, 4.52 GiB over: "
                           "it stopped at compile time, before any step ran.");
  ASSERT_GE(d.fixes.size(), 4u);
  EXPECT_EQ(d.fixes[0].id, "smaller_input");
  EXPECT_NE(d.fixes[0].detail.find("try at most 77% of the batch"), std::string::npos) << d.fixes[0].detail;
  EXPECT_TRUE(has_fix(d, "gradient_checkpointing"));
  EXPECT_TRUE(has_fix(d, "shard_model"));

  Diagnosis vmem = first_error("RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. "
                               "Ran out of memory in memory space vmem.\n");
  EXPECT_EQ(vmem.cause, "compile_time_oom");
}

TEST(Diagnose, VllmStartupFreeMemory) {
  Diagnosis d = first_error(
      "ValueError: Free memory on device (30.50/79.19 GiB) on startup is less than desired GPU memory utilization (0.9, "
      "71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n");
  EXPECT_EQ(d.cause, "startup_free_memory_below_budget");
  const Fix* util = find_fix(d, "vllm_gpu_memory_utilization");
  ASSERT_NE(util, nullptr);
  EXPECT_EQ(util->snippet, "--gpu-memory-utilization 0.37");  // 30.50/79.19 = 0.385 - 0.01 margin
  // Newer versions name the device (vllm-omni#276, club-3090#4); with 0.6% of the card free no
  // utilization helps: only freeing the card (never a negative --gpu-memory-utilization).
  ScanResult named = scan_text(
      "ValueError: Free memory on device cuda:3 (0.49/79.32 GiB) on startup is less than desired GPU memory utilization "
      "(0.6, 47.59 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n");
  ASSERT_EQ(named.events.size(), 1u);
  EXPECT_EQ(named.events[0].device, 3);
  ExplainReport report;
  add_to_report(report, named);
  const Diagnosis& full = report.events[0].diagnosis;
  EXPECT_EQ(full.cause, "startup_free_memory_below_budget");
  EXPECT_EQ(testing::fix_ids(full), (std::vector<std::string>{"end_other_processes"}));
  EXPECT_EQ(full.evidence.back(), "0.6% of the card is free: too little for any --gpu-memory-utilization, so the card must be "
                                  "freed first.");
}

// vLLM's V1 check without its own estimate (v0.8, vllm#16118): the length that fits is the available
// share of the needed cache, in 16-token blocks. V0's wording: its CUDA graphs are captured after
// the KV cache is sized, so eager mode is no fix there.
TEST(Diagnose, VllmKvCheckWithoutEstimateAndV0WithoutEagerMode) {
  Diagnosis v1 = first_error(
      "ERROR 04-05 01:12:55 [core.py:390] ValueError: To serve at least one request with the models's max seq len "
      "(1048576), (24.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.97 GiB). Try "
      "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n");
  ASSERT_NE(find_fix(v1, "vllm_max_model_len"), nullptr);
  EXPECT_EQ(find_fix(v1, "vllm_max_model_len")->snippet, "--max-model-len 435584");   // 1048576 x 9.97 / 24.00, in 16s
  EXPECT_NE(find_fix(v1, "vllm_enforce_eager"), nullptr);
  Diagnosis v0 = first_error(
      "ValueError: The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV "
      "cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n");
  EXPECT_EQ(find_fix(v0, "vllm_max_model_len")->snippet, "--max-model-len 23648");
  EXPECT_EQ(find_fix(v0, "vllm_enforce_eager"), nullptr);
}

// TensorRT-LLM's failed CUDA call (TensorRT-LLM#1556): its own runtime settings, not PyTorch's.
TEST(Diagnose, TensorrtLlmCudaRuntimeOom) {
  ScanResult scan = scan_text(
      "RuntimeError: [TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaStream->get()): out of "
      "memory (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:118)\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].framework, "tensorrt-llm");
  EXPECT_EQ(scan.events[0].string_field("cuda_call"), "::cudaMallocAsync");
  ExplainReport report;
  add_to_report(report, scan);
  EXPECT_EQ(report.events[0].diagnosis.cause, "driver_oom_no_details");
  EXPECT_EQ(testing::fix_ids(report.events[0].diagnosis),
            (std::vector<std::string>{"end_other_processes", "trtllm_kv_cache_fraction", "trtllm_max_num_tokens"}));
}

TEST(Diagnose, VllmSamplerWarmupHalvesMaxNumSeqs) {
  Diagnosis d = first_error(
      "RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try lowering "
      "`max_num_seqs` or `gpu_memory_utilization` when initializing the engine.\n");
  EXPECT_EQ(d.cause, "sampler_warmup_oom");
  EXPECT_EQ(find_fix(d, "vllm_max_num_seqs")->snippet, "--max-num-seqs 512");
  // With the utilization logged, 0.05 lower: 0.95 - 0.05 is 0.8999999999999999 in binary, still 0.90.
  Diagnosis logged = first_error(
      "INFO worker.py:1] the current vLLM instance can use total_gpu_memory (79.10GiB) x gpu_memory_utilization (0.95) = 75.14GiB\n"
      "RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try lowering "
      "`max_num_seqs` or `gpu_memory_utilization` when initializing the engine.\n");
  EXPECT_EQ(find_fix(logged, "vllm_gpu_memory_utilization")->snippet, "--gpu-memory-utilization 0.90");
}

TEST(Diagnose, OtherFrameworks) {
  EXPECT_EQ(first_error("MPS backend out of memory (MPS allocated: 8.00 GB, other allocations: 2.00 GB, max allowed: "
                        "10.00 GB). Tried to allocate 512.00 MB on private pool.\n").cause,
            "mps_high_watermark_exceeded");
  // One request above MPS's whole limit: said of the limit, not of a card.
  Diagnosis over = first_error("RuntimeError: MPS backend out of memory (MPS allocated: 1.20 GB, other allocations: 2.30 GB, "
                               "max allowed: 18.13 GB). Tried to allocate 20.00 GB on private pool.\n");
  EXPECT_EQ(over.cause, "request_exceeds_total_capacity");
  EXPECT_EQ(over.cause_title, "one allocation is larger than MPS's whole limit (a shape far too large)");
  EXPECT_EQ(first_error("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n").cause,
            "library_workspace_alloc");
  EXPECT_EQ(first_error("failed to allocate 3.77G (4046333952 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY\n").cause,
            "framework_preallocation");
  EXPECT_EQ(first_error("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1073741824 bytes.\n").cause,
            "capacity_exhausted");
  EXPECT_EQ(first_error("RuntimeError: CUDA error: out of memory\n").cause, "driver_oom_no_details");
  EXPECT_EQ(first_error("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 300000.00 MiB on device 0: cudaMalloc "
                        "failed: out of memory\n").cause,
            "garbage_request_size");
}

TEST(FixCatalog, HiddenStatesSnippetFollowsTheCardsHalfDtype) {
  EXPECT_EQ(half_hidden_states_snippet(true), std::string(kBf16HiddenStatesSnippet));
  const std::string fp16 = half_hidden_states_snippet(false);
  EXPECT_NE(fp16.find("m.to(torch.float16)"), std::string::npos);
  EXPECT_EQ(fp16.find("bfloat16"), std::string::npos);
  EXPECT_EQ(fix_info("bf16_hidden_states").snippet, kBf16HiddenStatesSnippet);  // explain's fix: the same line
}

TEST(FixCatalog, EveryIdIsUniqueAndRanked) {
  std::set<std::string_view> ids;
  for (const auto& f : fix_catalog()) {
    EXPECT_TRUE(ids.insert(f.id).second) << f.id;
    EXPECT_FALSE(f.title.empty());
    EXPECT_FALSE(f.snippet.empty());
  }
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// llama.cpp: only the fixes that shrink the buffer that failed, cheapest first.
// Memory this process holds outside PyTorch's allocator is not cuBLAS's or cuDNN's workspace (those
// come from PyTorch's cache): the first fix says how to find the holder; a rank's adds NCCL's.
TEST(Diagnose, MemoryOutsideTheAllocatorInThisProcessPointsAtItsHolder) {
  const std::string message =
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB. GPU 0 has a total capacity of 23.65 GiB of "
      "which 1.50 GiB is free. Including non-PyTorch memory, this process has 22.13 GiB memory in use. Of the allocated "
      "memory 15.80 GiB is allocated by PyTorch, and 200.00 MiB is reserved by PyTorch but unallocated.\n";
  auto ids = [](const std::string& text) {
    const ExplainReport r = explain_text(text);
    EXPECT_EQ(r.events.size(), 1u);
    EXPECT_EQ(r.events[0].diagnosis.cause, "non_pytorch_memory_in_process");
    return testing::fix_ids(r.events[0].diagnosis);
  };
  const auto single = ids(message);
  ASSERT_FALSE(single.empty());
  EXPECT_EQ(single[0], "outside_allocator_holder");
  EXPECT_EQ(std::count(single.begin(), single.end(), "library_workspace"), 0);
  EXPECT_EQ(std::count(single.begin(), single.end(), "nccl_buffers"), 0);
  const auto rank = ids("[rank1]: " + message);
  EXPECT_EQ(rank[0], "outside_allocator_holder");
  EXPECT_EQ(std::count(rank.begin(), rank.end(), "nccl_buffers"), 1);
  EXPECT_EQ(std::count(rank.begin(), rank.end(), "nccl_nvls_off"), 1);
}

TEST(Diagnose, LlamaCppFixesFollowTheBufferThatFailed) {
  auto fixes = [](const std::string& text) {
    std::vector<std::string> ids;
    for (const auto& f : first_error(text).fixes) ids.push_back(f.id);
    return ids;
  };
  const std::string alloc = "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 8192.00 MiB on device 0: cudaMalloc failed: out of memory\n";
  EXPECT_EQ(fixes(alloc + "llama_kv_cache_init: failed to allocate buffer for kv cache\n"),
            (std::vector<std::string>{"ggml_kv_cache_type", "ggml_smaller_context", "ggml_smaller_quant", "ggml_fewer_layers"}));
  EXPECT_EQ(fixes(alloc + "llama_model_load: error loading model: unable to allocate CUDA0 buffer\n"),
            (std::vector<std::string>{"ggml_smaller_quant", "ggml_fewer_layers"}));
  EXPECT_EQ(fixes(alloc + "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 8589934592\n"),
            (std::vector<std::string>{"ggml_flash_attention", "ggml_kv_cache_type", "ggml_smaller_context",
                                      "ggml_smaller_quant", "ggml_fewer_layers"}));
}


// ---- QA round 2: missing figures, vLLM workers, generate(), allocator settings, JAX, cuBLAS ----

using testing::fix_ids;

TEST(Diagnose, MessageCutAfterTheFreeFigureIsNotMemoryOutsidePyTorch) {
  // No "this process has", no allocated figures: 44.53 GiB minus 448 KiB is unexplained, not "held
  // outside PyTorch".
  Diagnosis d = first_error("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB. GPU 6 has a total "
                            "capacity of 44.53 GiB of which 448.00 KiB is free.\n");
  EXPECT_EQ(d.cause, "insufficient_information");
  EXPECT_TRUE(d.secondary_causes.empty());
  ASSERT_EQ(d.evidence.size(), 1u);
  EXPECT_EQ(d.evidence[0], "The message was cut after the free figure (448.00 KiB free of 44.53 GiB, 2.00 MiB requested): "
                           "it does not say what this process or others hold, so the cause cannot be told; the full "
                           "message (or `oomdoc snapshot`) can.");
  EXPECT_FALSE(has_fix(d, "end_other_processes"));
  EXPECT_EQ(d.fixes.front().id, "smaller_batch");
  MemoryBreakdown m = breakdown(explain_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB. "
                                             "GPU 6 has a total capacity of 44.53 GiB of which 448.00 KiB is free.\n")
                                    .events[0].event);
  EXPECT_FALSE(m.unattributed.has_value());
}

TEST(Diagnose, DecimalCommaMessageWithoutTheProcessPartIsInsufficientInformation) {
  Diagnosis d = first_error("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1900,00 MiB. GPU 0 has a total "
                            "capacity of 23,65 GiB of which 1,20 GiB is free.\n");
  EXPECT_EQ(d.cause, "insufficient_information");
}

// A 2.x message cut inside its last sentence (an issue title) keeps every figure printed whole, says
// it was cut (message_cut), and rests no cause on the missing reserve.
TEST(Diagnose, CutTwoXMessageKeepsItsWholeFiguresAndSaysWhatIsMissing) {
  const std::string head =
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB "
      "of which 1.05 GiB is free. Including non-PyTorch memory, this process has 78.09 GiB ";
  const ExplainReport allocated = explain_text(head + "memory in use. Of the allocated memory 70.00 GiB is allocated by "
                                                      "PyTorch, and 7.50 GiB is rese\n");
  ASSERT_EQ(allocated.events.size(), 1u);
  const OomEvent& e = allocated.events[0].event;
  EXPECT_EQ(e.bytes("process"), static_cast<uint64_t>(78.09 * (1ull << 30)));
  EXPECT_EQ(e.bytes("allocated"), 70ull << 30);
  EXPECT_FALSE(e.bytes("reserved_unallocated").has_value());
  EXPECT_NE(e.field("message_cut"), nullptr);
  const Diagnosis& d = allocated.events[0].diagnosis;
  EXPECT_EQ(d.cause, "insufficient_information");
  EXPECT_EQ(d.evidence.at(0), "The message was cut before PyTorch's reserve: this process held 78.09 GiB of 79.15 GiB "
                              "(99%), PyTorch had 70.00 GiB of 79.15 GiB allocated (88%), so how much of this process's "
                              "memory is PyTorch's cache (fragmentation) and how much lies outside PyTorch cannot be told; "
                              "the full message (or `oomdoc snapshot`) can.");
  const ExplainReport process = explain_text(head + "memo\n");
  ASSERT_EQ(process.events.size(), 1u);
  EXPECT_EQ(process.events[0].event.bytes("process"), static_cast<uint64_t>(78.09 * (1ull << 30)));
  EXPECT_EQ(process.events[0].diagnosis.cause, "insufficient_information");
  // The whole message is not cut.
  const ExplainReport full = explain_text(head + "memory in use. Of the allocated memory 70.00 GiB is allocated by "
                                                 "PyTorch, and 7.50 GiB is reserved by PyTorch but unallocated.\n");
  EXPECT_EQ(full.events[0].event.field("message_cut"), nullptr);
  EXPECT_NE(full.events[0].diagnosis.cause, "insufficient_information");
}

TEST(Diagnose, CutMessageStillTellsWhatTheFiguresPresentProve) {
  // The request alone is larger than the card: that needs no process figures.
  Diagnosis d = first_error("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 50.00 GiB. GPU 0 has a total "
                            "capacity of 44.53 GiB of which 40.00 GiB is free.\n");
  EXPECT_EQ(d.cause, "request_exceeds_total_capacity");
}

TEST(Diagnose, OldShortFormAndBareExceptionAreEvents) {
  Diagnosis a = first_error("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n");
  EXPECT_EQ(a.cause, "insufficient_information");
  EXPECT_EQ(a.evidence, std::vector<std::string>{"The message was cut after the request (2.00 GiB): it gives no capacity, "
                                                 "free or allocated figures."});
  Diagnosis b = first_error("torch.OutOfMemoryError: CUDA out of memory.\n");
  EXPECT_EQ(b.cause, "insufficient_information");
}

// PyTorch skips each cuDNN algorithm whose workspace fails to allocate: none left is the usual
// disguised OOM of a convolution (fastai retries it as one); a cuDNN mismatch is named as the other reading.
TEST(Diagnose, NoValidCudnnAlgorithmIsAWorkspaceShortage) {
  Diagnosis d = first_error("Traceback (most recent call last):\n  File \"train.py\", line 60, in <module>\n"
                            "    out = net(images)\nRuntimeError: Unable to find a valid cuDNN algorithm to run convolution\n");
  EXPECT_EQ(d.cause, "library_workspace_alloc");
  EXPECT_EQ(d.evidence.at(0), "No cuDNN convolution algorithm could run: each one whose workspace fails to allocate is "
                              "skipped, so a (nearly) full card leaves none. If memory was not short, the cuDNN build "
                              "does not match this GPU or CUDA version.");
  EXPECT_TRUE(has_fix(d, "library_workspace"));
}

// The launch line already set expandable segments: they are not advised again, and the evidence
// says they were on.
TEST(Diagnose, ExpandableSegmentsAlreadyOnAreNotAdvisedAgain) {
  const std::string oom = new_format("1.53 GiB", "39.39 GiB", "912.56 MiB", "Including non-PyTorch memory, this process has "
                                     "38.49 GiB memory in use. ", "35.12 GiB", "2.67 GiB");
  EXPECT_TRUE(has_fix(first_error(oom), "expandable_segments"));
  for (const std::string launch : {"+ PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True torchrun train.py\n",
                                   "export PYTORCH_CUDA_ALLOC_CONF=\"max_split_size_mb:256,expandable_segments:true\"\n",
                                   "os.environ[\"PYTORCH_CUDA_ALLOC_CONF\"] = \"expandable_segments:True\"\n",
                                   "env: {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'}\n"}) {
    Diagnosis d = first_error(launch + oom);
    EXPECT_FALSE(has_fix(d, "expandable_segments")) << launch;
    EXPECT_EQ(d.evidence.back(), "Expandable segments were already on for this run (the log sets "
                                 "expandable_segments:True in the allocator's settings before the error).") << launch;
  }
  EXPECT_TRUE(has_fix(first_error("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False python x.py\n" + oom), "expandable_segments"));
  // PYTORCH_ALLOC_CONF alone: PyTorch up to 2.9.1 reads expandable_segments from the CUDA name only.
  EXPECT_TRUE(has_fix(first_error("PYTORCH_ALLOC_CONF=expandable_segments:True torchrun x.py\n" + oom), "expandable_segments"));
}

// Host RAM as three more programs report it: XLA's GPU client over its own host limit (the setting
// it names, with a value above the request), gcc's compiler killed while building a CUDA extension,
// and BuildKit's build step that exited 137 (both: fewer compiler jobs first).
TEST(Diagnose, HostMemoryOfXlaAndOfBuilds) {
  const ExplainReport xla = explain_text(
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of host memory while trying to allocate 73014444032 "
      "bytes. Please set the environment variable XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB to allocate larger host memory than "
      "the default 64 GB.\n");
  ASSERT_EQ(xla.events.size(), 1u);
  EXPECT_EQ(xla.events[0].event.format, "xla_host_oom");
  EXPECT_EQ(xla.events[0].event.bytes("requested"), 73014444032u);
  EXPECT_EQ(xla.events[0].event.int_field("host_memory_limit_gb"), 64);
  EXPECT_EQ(xla.events[0].diagnosis.cause, "host_memory");
  EXPECT_EQ(fix_ids(xla.events[0].diagnosis), (std::vector<std::string>{"xla_host_memory_limit", "more_host_memory"}));
  EXPECT_EQ(xla.events[0].diagnosis.fixes[0].snippet,
            "export XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB=80  # the request is 68.00 GiB (74 GB); the machine must have that "
            "much RAM free");

  const ExplainReport gcc = explain_text("c++: fatal error: Killed signal terminated program cc1plus\n");
  ASSERT_EQ(gcc.events.size(), 1u);
  EXPECT_EQ(gcc.events[0].event.format, "process_killed");
  EXPECT_EQ(gcc.events[0].event.string_field("kill_report"), "compiler");
  EXPECT_EQ(gcc.events[0].event.string_field("process_name"), "cc1plus");
  EXPECT_EQ(fix_ids(gcc.events[0].diagnosis), (std::vector<std::string>{"build_max_jobs", "add_swap", "more_host_memory"}));

  const ExplainReport docker = explain_text(
      "#12 ERROR: process \"/bin/sh -c pip install flash-attn --no-build-isolation\" did not complete successfully: exit "
      "code: 137\n");
  ASSERT_EQ(docker.events.size(), 1u);
  EXPECT_EQ(docker.events[0].event.int_field("exit_code"), 137);
  EXPECT_EQ(fix_ids(docker.events[0].diagnosis)[0], "build_max_jobs");
}

// Older Slurm's polling kill prints the job's use and limit in KiB: both are read, and the limit to
// ask for is a quarter above the use, in whole GiB.
TEST(Diagnose, SlurmMemoryLimitKillGivesTheLimitToAskFor) {
  const ExplainReport r = explain_text(
      "slurmstepd: error: Job 4242 exceeded memory limit (67108864 > 65536000), being killed\n");
  ASSERT_EQ(r.events.size(), 1u);
  const OomEvent& e = r.events[0].event;
  EXPECT_EQ(e.bytes("job_memory_used"), 67108864ull * 1024);
  EXPECT_EQ(e.bytes("job_memory_limit"), 65536000ull * 1024);
  const Diagnosis& d = r.events[0].diagnosis;
  EXPECT_EQ(d.evidence.at(0).rfind("Slurm killed the job: it used 64.00 GiB against its 62.50 GiB memory limit", 0), 0u);
  const Fix* more = find_fix(d, "more_host_memory");
  ASSERT_NE(more, nullptr);
  EXPECT_EQ(more->snippet, "#SBATCH --mem=80G  # or srun --mem=80G; the job used 64.00 GiB");
}

// NumPy's _ArrayMemoryError (binary units, as numpy prints them) is host RAM, with its shape.
TEST(Diagnose, NumpyArrayMemoryErrorIsHostMemory) {
  const ExplainReport r = explain_text(
      "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 74.5 GiB for an array with shape (100000, 100000) "
      "and data type float64\n");
  ASSERT_EQ(r.events.size(), 1u);
  const OomEvent& e = r.events[0].event;
  EXPECT_EQ(e.format, "numpy_array_alloc");
  EXPECT_EQ(e.framework, "numpy");
  EXPECT_EQ(e.bytes("requested"), static_cast<uint64_t>(74.5 * 1024 * 1024 * 1024));
  EXPECT_EQ(e.string_field("shape"), "(100000, 100000)");
  EXPECT_EQ(e.string_field("dtype"), "float64");
  EXPECT_EQ(r.events[0].diagnosis.cause, "host_memory");
  EXPECT_EQ(fix_ids(r.events[0].diagnosis), std::vector<std::string>{"host_memory"});
}

TEST(Diagnose, DefaultCpuAllocatorIsHostMemory) {
  Diagnosis d = first_error("RuntimeError: [enforce fail at alloc_cpu.cpp:83] data. DefaultCPUAllocator: can't allocate "
                            "memory: you tried to allocate 21474836480 bytes. Error code 12 (Cannot allocate memory)\n");
  EXPECT_EQ(d.cause, "host_memory");
  EXPECT_EQ(d.evidence, std::vector<std::string>{"Host (CPU) memory ran out allocating 20.00 GiB: system RAM, not GPU memory."});
  EXPECT_EQ(fix_ids(d), std::vector<std::string>{"host_memory"});
  // While from_pretrained loads: what lowers the load's RAM peak, not offloading to CPU memory
  // (which needs more of it) or a bigger GPU.
  Diagnosis loading = first_error(
      "Traceback (most recent call last):\n  File \"train.py\", line 40, in <module>\n"
      "    model = AutoModelForCausalLM.from_pretrained(\"meta-llama/Llama-2-13b-hf\")\n"
      "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you tried to "
      "allocate 13107200000 bytes.\n");
  EXPECT_EQ(loading.cause, "host_memory");
  EXPECT_EQ(fix_ids(loading), (std::vector<std::string>{"load_in_bf16", "low_cpu_mem_usage", "host_memory"}));
}

const std::string kVllmWorkerOom =
    "(VllmWorker rank=1 pid=4731) ERROR 05-09 10:47:36 [multiproc_executor.py:470] torch.OutOfMemoryError: CUDA out of "
    "memory. Tried to allocate 150.00 MiB. GPU 1 has a total capacity of 21.99 GiB of which 39.00 MiB is free. Process "
    "1779404 has 21.94 GiB memory in use. Of the allocated memory 15.75 GiB is allocated by PyTorch, with 35.88 MiB "
    "allocated in private pools (e.g., CUDA Graphs), and 92.31 MiB is reserved by PyTorch but unallocated.\n";

TEST(Diagnose, OomInsideAVllmWorkerGetsVllmFlagsNotTrainingArguments) {
  Diagnosis d = first_error(kVllmWorkerOom);
  EXPECT_EQ(d.cause, "non_pytorch_memory_in_process");
  // A vLLM worker leaves room for NCCL by its memory share, among vLLM's own flags.
  EXPECT_EQ(fix_ids(d), (std::vector<std::string>{"outside_allocator_holder", "vllm_max_model_len", "vllm_max_num_seqs", "vllm_kv_cache_dtype",
                                                  "vllm_enforce_eager", "vllm_gpu_memory_utilization",
                                                  "vllm_tensor_parallel", "vllm_quantized_weights"}));
  ASSERT_NE(find_fix(d, "vllm_gpu_memory_utilization"), nullptr);
  EXPECT_EQ(find_fix(d, "vllm_gpu_memory_utilization")->snippet, "--gpu-memory-utilization 0.87  # 0.85 with a vLLM before v0.21");
  for (const auto& f : d.fixes) EXPECT_EQ(f.snippet.find("TrainingArguments"), std::string::npos) << f.id;
}

TEST(Diagnose, EngineCoreTagAndVllmTracebackMeanVllm) {
  Diagnosis a = first_error("(EngineCore_DP0 pid=1094) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                            "2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.06 GiB is free. Including "
                            "non-PyTorch memory, this process has 78.12 GiB memory in use. Of the allocated memory 75.50 "
                            "GiB is allocated by PyTorch, and 1.61 GiB is reserved by PyTorch but unallocated.\n");
  EXPECT_EQ(a.cause, "capacity_exhausted");
  EXPECT_FALSE(has_fix(a, "smaller_batch"));
  EXPECT_FALSE(has_fix(a, "mixed_precision"));
  EXPECT_TRUE(has_fix(a, "vllm_max_num_seqs"));
  Diagnosis b = first_error(
      "Traceback (most recent call last):\n"
      "  File \"/usr/lib/python3/site-packages/vllm/worker/model_runner.py\", line 1500, in capture_model\n"
      "    graph_runner.capture(**capture_inputs)\n" +
      new_format("20.00 MiB", "23.65 GiB", "10.00 MiB",
                 "Including non-PyTorch memory, this process has 23.60 GiB memory in use. ", "22.80 GiB", "100.00 MiB"));
  // vLLM's capture_model frame is its CUDA-graph capture (QA round 3: it used to read as an
  // ordinary capacity_exhausted).
  EXPECT_EQ(b.cause, "cuda_graph_capture_oom");
  EXPECT_FALSE(has_fix(b, "eight_bit_optimizer"));
  EXPECT_TRUE(has_fix(b, "vllm_enforce_eager"));
}

TEST(Diagnose, GenerateRunsWithoutGradSoItIsNotEvaluationWithGrad) {
  Diagnosis d = first_error(
      "Traceback (most recent call last):\n"
      "  File \"/w/train.py\", line 60, in evaluate\n"
      "    out = model.generate(**batch)\n"
      "  File \"/usr/lib/python3/site-packages/transformers/generation/utils.py\", line 1500, in generate\n"
      "    return self._sample(...)\n" +
      new_format("2.00 GiB", "79.19 GiB", "1.06 GiB",
                 "Including non-PyTorch memory, this process has 78.12 GiB memory in use. ", "75.50 GiB", "1.61 GiB"));
  EXPECT_EQ(d.cause, "capacity_exhausted");
  // (1.06 GiB free and 1.61 GiB cached would together hold the 2 GiB: some fragmentation, no more.)
  EXPECT_EQ(d.secondary_causes, std::vector<std::string>{"fragmentation_minor"});
  EXPECT_FALSE(has_fix(d, "no_grad_for_eval"));
  // A user's generate() call with the library frame cut off is no evidence either.
  Diagnosis cut = first_error(
      "Traceback (most recent call last):\n"
      "  File \"/w/infer.py\", line 12, in main\n"
      "    out = model.generate(**batch)\n" +
      new_format("2.00 GiB", "79.19 GiB", "1.06 GiB",
                 "Including non-PyTorch memory, this process has 78.12 GiB memory in use. ", "75.50 GiB", "1.61 GiB"));
  EXPECT_FALSE(has_fix(cut, "no_grad_for_eval"));
  // Trainer.prediction_step runs under torch.no_grad().
  Diagnosis trainer = first_error(
      "Traceback (most recent call last):\n"
      "  File \"/usr/lib/python3/site-packages/transformers/trainer.py\", line 4200, in evaluation_loop\n"
      "    losses, logits, labels = self.prediction_step(model, inputs)\n"
      "  File \"/usr/lib/python3/site-packages/transformers/trainer.py\", line 4400, in prediction_step\n"
      "    outputs = model(**inputs)\n" +
      new_format("2.00 GiB", "79.19 GiB", "1.06 GiB",
                 "Including non-PyTorch memory, this process has 78.12 GiB memory in use. ", "75.50 GiB", "1.61 GiB"));
  EXPECT_EQ(trainer.cause, "capacity_exhausted");
}

TEST(Diagnose, AllocatorSettingFollowsTheMessagesPyTorchAndDevice) {
  // 1.x form (reserved in total): max_split_size_mb, never expandable_segments.
  Diagnosis old = first_error(
      "RuntimeError: CUDA out of memory. Tried to allocate 1.00 GiB (GPU 0; 23.65 GiB total capacity; 15.00 GiB already "
      "allocated; 500.00 MiB free; 22.00 GiB reserved in total by PyTorch)\n");
  EXPECT_EQ(old.cause, "fragmentation");
  EXPECT_FALSE(has_fix(old, "expandable_segments"));
  ASSERT_NE(find_fix(old, "max_split_size"), nullptr);
  EXPECT_EQ(find_fix(old, "max_split_size")->snippet.rfind("export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128", 0), 0u);
  // Ascend NPU: PYTORCH_NPU_ALLOC_CONF.
  Diagnosis npu = first_error(
      "RuntimeError: NPU out of memory. Tried to allocate 5.03 GiB (NPU 3; 60.96 GiB total capacity; 49.47 GiB already "
      "allocated; 49.47 GiB current active; 1.32 GiB free; 57.55 GiB reserved in total by PyTorch)\n");
  ASSERT_NE(find_fix(npu, "expandable_segments"), nullptr);
  const std::string& snippet = find_fix(npu, "expandable_segments")->snippet;
  EXPECT_EQ(snippet.rfind("export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True", 0), 0u);
  EXPECT_EQ(snippet.find("PYTORCH_CUDA_ALLOC_CONF="), std::string::npos);
  // 2.x form: expandable_segments under both variable names.
  Diagnosis current = first_error(new_format("1.00 GiB", "23.65 GiB", "200.00 MiB",
                                             "Including non-PyTorch memory, this process has 23.30 GiB memory in use. ",
                                             "15.00 GiB", "8.00 GiB"));
  EXPECT_EQ(current.fixes.front().id, "expandable_segments");
}

// AMD and Intel cards get their vendors' tools and variables, not nvidia-smi and CUDA's.
TEST(Diagnose, AmdAndIntelGetTheirOwnTools) {
  Diagnosis hip = first_error(
      "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 3.31 GiB. GPU 0 has a total capacity of 128.00 GiB "
      "of which 780.24 MiB is free. Of the allocated memory 57.70 GiB is allocated by PyTorch, and 75.82 MiB is "
      "reserved by PyTorch but unallocated.\n");
  ASSERT_NE(find_fix(hip, "end_other_processes"), nullptr);
  EXPECT_EQ(find_fix(hip, "end_other_processes")->snippet, "rocm-smi --showpids  # or amd-smi process; then kill <pid>");
  EXPECT_EQ(find_fix(hip, "end_other_processes")->detail.find("nvidia-smi"), std::string::npos);
  Diagnosis xpu = first_error(
      "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 4.66 GiB. GPU 0 has a total capacity of 5.65 GiB "
      "of which 5.65 GiB is free. Of the allocated memory 195.50 KiB is allocated by PyTorch, and 1.81 MiB is reserved "
      "by PyTorch but unallocated.\n");
  ASSERT_NE(find_fix(xpu, "check_device_and_limits"), nullptr);
  EXPECT_EQ(find_fix(xpu, "check_device_and_limits")->snippet,
            "ZE_AFFINITY_MASK (which devices the process sees), the tensor's .device");
  // PyTorch 1.4's "cached" form: no allocator settings to set, an upgrade is the snippet.
  Diagnosis cached = first_error(
      "RuntimeError: CUDA out of memory. Tried to allocate 26.00 MiB (GPU 0; 1024.00 MiB total capacity; 435.61 MiB "
      "already allocated; 24.17 MiB free; 26.39 MiB cached)\n");
  ASSERT_NE(find_fix(cached, "max_split_size"), nullptr);
  EXPECT_EQ(find_fix(cached, "max_split_size")->snippet, fix_snippet("max_split_size", FixVariant::kTorch14));
  for (const Fix& f : cached.fixes) {
    EXPECT_EQ(f.snippet.find("PYTORCH_CUDA_ALLOC_CONF=max_split_size"), std::string::npos) << f.id;
  }
  // Fixes without a vendor variant keep what the diagnosis wrote.
  ASSERT_NE(find_fix(xpu, "smaller_input"), nullptr);
  EXPECT_NE(find_fix(xpu, "smaller_input")->snippet.find("batch"), std::string::npos);
}

// Variant snippets live in the catalogue beside the default: a variant without its own snippet
// falls back to the default, one with its own differs from it.
TEST(FixCatalog, VariantSnippetsFallBackToTheDefault) {
  EXPECT_FALSE(fix_variant_snippet("smaller_batch", FixVariant::kAmd).has_value());
  EXPECT_EQ(fix_snippet("smaller_batch", FixVariant::kAmd), fix_info("smaller_batch").snippet);
  ASSERT_TRUE(fix_variant_snippet("end_other_processes", FixVariant::kAmd).has_value());
  EXPECT_NE(*fix_variant_snippet("end_other_processes", FixVariant::kAmd), fix_info("end_other_processes").snippet);
  EXPECT_EQ(fix_snippet("host_memory", FixVariant::kLlamaCpp),
            "export GGML_CUDA_NO_PINNED=1  # skip pinned buffers; or free RAM, or a smaller -c / -b");
}

// Host-memory advice follows who ran out: llama.cpp's pinned buffers (it falls back to pageable
// memory), TensorFlow/XLA's pinned host pool; a DataLoader is PyTorch's.
TEST(Diagnose, HostMemoryAdviceFollowsTheFramework) {
  ExplainReport llama = explain_text("ggml_cuda_host_malloc: failed to allocate 1900.00 MiB of pinned memory: out of memory\n");
  ASSERT_FALSE(llama.events.empty());
  const Diagnosis& d = llama.events[0].diagnosis;
  ASSERT_NE(find_fix(d, "host_memory"), nullptr);
  EXPECT_EQ(find_fix(d, "host_memory")->snippet,
            "export GGML_CUDA_NO_PINNED=1  # skip pinned buffers; or free RAM, or a smaller -c / -b");
}

TEST(FixCatalog, CublasWorkspaceSnippetShrinksTheWorkspace) {
  const std::string snippet(fix_info("library_workspace").snippet);
  EXPECT_NE(snippet.find("CUBLAS_WORKSPACE_CONFIG=:16:8 "), std::string::npos) << snippet;
  EXPECT_EQ(snippet.find(":4096:8"), std::string::npos) << snippet;
}

TEST(FixCatalog, JaxFractionComesBeforeDisablingPreallocation) {
  const std::string snippet(fix_info("xla_preallocation").snippet);
  EXPECT_EQ(snippet.rfind("export XLA_PYTHON_CLIENT_MEM_FRACTION=.95", 0), 0u) << snippet;
  EXPECT_LT(snippet.find("XLA_PYTHON_CLIENT_MEM_FRACTION"), snippet.find("XLA_PYTHON_CLIENT_PREALLOCATE"));
  Diagnosis d = first_error("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
                            "allocate 1073741824 bytes.\n");
  EXPECT_EQ(d.fixes.front().id, "xla_preallocation");
  EXPECT_EQ(d.fixes.front().snippet.rfind("export XLA_PYTHON_CLIENT_MEM_FRACTION=.95", 0), 0u);
}

// The memory-fraction rule only when raising the fraction could help: a reserve plus request
// larger than the whole card is the card's limit, not the cap's (no "fraction of at least 1.2").
TEST(Diagnose, MemoryFractionNeedsARequestTheCardCouldHold) {
  Diagnosis capped = first_error(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB "
      "of which 13.00 GiB is free. 10.00 GiB allowed; Of the allocated memory 9.50 GiB is allocated by PyTorch, and "
      "0.00 GiB is reserved by PyTorch but unallocated.");
  EXPECT_EQ(capped.cause, "memory_fraction_limit");
  Diagnosis beyond_card = first_error(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 GiB. GPU 0 has a total capacity of 23.65 GiB "
      "of which 13.00 GiB is free. 10.00 GiB allowed; Of the allocated memory 9.50 GiB is allocated by PyTorch, and "
      "0.00 GiB is reserved by PyTorch but unallocated.");
  EXPECT_NE(beyond_card.cause, "memory_fraction_limit");
  for (const auto& f : beyond_card.fixes) EXPECT_EQ(f.detail.find("a fraction of at least"), std::string::npos);
}

}  // namespace
}  // namespace oomdoc
