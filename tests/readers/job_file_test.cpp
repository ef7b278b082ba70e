#include "readers/job_file.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "analyses/estimator.h"
#include "readers/model_presets.h"
#include <nlohmann/json.hpp>

#include <fstream>

#include "support/test_support.h"

namespace oomdoc {
namespace {

TEST(JobFile, TheIssueExampleParses) {
  auto job = parse_job_json(R"({"model": "meta-llama/Llama-2-70b-hf", "task": "train_qlora", "precision": "bf16",
    "weight_quantization": "nf4", "double_quant": true, "optimizer": "paged_adamw_8bit", "micro_batch_size": 2,
    "grad_accum_steps": 4, "seq_len": 2048, "gradient_checkpointing": "full", "attention_impl": "flash",
    "lora": {"r": 16, "alpha": 32, "target_modules": "all_linear"}, "num_gpus": 2, "parallelism": "fsdp_full_shard",
    "tp": 1, "pp": 1, "offload": ["params"]})", "job.json");
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->model, "meta-llama/Llama-2-70b-hf");
  EXPECT_EQ(*job->task, "train_qlora");
  EXPECT_EQ(*job->weight_quantization, "nf4");
  EXPECT_TRUE(*job->double_quant);
  EXPECT_EQ(*job->micro_batch_size, 2u);
  EXPECT_EQ(*job->grad_accum_steps, 4u);
  ASSERT_TRUE(job->lora);
  EXPECT_EQ(job->lora->r, 16u);
  EXPECT_TRUE(job->lora->all_linear);
  EXPECT_EQ(job->offload, std::vector<std::string>{"params"});
  EXPECT_EQ(*job->num_gpus, 2u);
}

TEST(JobFile, LoraDropout) {
  auto job = parse_job_json(R"({"task": "train_lora", "lora": {"r": 8, "dropout": 0.05}})", "job.json");
  ASSERT_TRUE(job) << job.error().message;
  ASSERT_TRUE(job->lora);
  EXPECT_EQ(job->lora->dropout, 0.05);
  auto none = parse_job_json(R"({"task": "train_lora", "lora": {"r": 8}})", "job.json");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(none->lora->dropout, 0.0);  // PEFT's LoraConfig default
}

TEST(JobFile, InferenceJob) {
  auto job = parse_job_json(R"({"model": "llama-3.1-8b", "task": "inference", "batch_size": 4, "prompt_len": 1000,
                                "max_new_tokens": 0, "kv_cache_dtype": "fp8"})", "job.json");
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(*job->max_new_tokens, 0u);
  EXPECT_EQ(*job->kv_cache_dtype, "fp8");
}

TEST(JobFile, StackKeys) {
  auto job = parse_job_json(R"({"task": "train_lora", "optimizer_impl": "for_loop", "adapter_dtype": "model",
                                "compile": true, "loss_upcast": false, "zero_grad_to_none": false,
                                "lazy_module_loading": false})", "job.json");
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(*job->optimizer_impl, "for_loop");
  EXPECT_EQ(*job->adapter_dtype, "model");
  EXPECT_TRUE(*job->compile);
  EXPECT_FALSE(*job->loss_upcast);
  EXPECT_FALSE(*job->zero_grad_to_none);
  EXPECT_FALSE(*job->lazy_module_loading);
  auto bad = parse_job_json(R"({"optimizer_impl": "apex"})", "job.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "job.json: optimizer_impl: \"apex\" is not one of: for_loop, foreach, fused");
}

// A training framework's optimizer name is refused with the job values it stands for.
TEST(JobFile, TrainerOptimizerNamesPointToTheJobsOwn) {
  auto fused = parse_job_json(R"({"optimizer": "adamw_torch_fused"})", "job.json");
  ASSERT_FALSE(fused.ok());
  EXPECT_EQ(fused.error().message, "job.json: optimizer: \"adamw_torch_fused\" is a training framework's name for it: "
                                   "give optimizer adamw with optimizer_impl fused (--optimizer adamw --optimizer-impl "
                                   "fused)");
  auto bnb = parse_job_json(R"({"optimizer": "adamw_bnb_8bit"})", "job.json");
  ASSERT_FALSE(bnb.ok());
  EXPECT_EQ(bnb.error().message, "job.json: optimizer: \"adamw_bnb_8bit\" is a training framework's name for it: give "
                                 "optimizer adamw_8bit (--optimizer adamw_8bit)");
}

TEST(JobFile, ErrorsNameTheField) {
  auto expect_error = [](const std::string& text, const std::string& message) {
    auto job = parse_job_json(text, "job.json");
    ASSERT_FALSE(job) << text;
    EXPECT_EQ(job.error().message, message);
  };
  expect_error("{", "job.json: invalid JSON: line 1, column 2: syntax error while parsing object key - unexpected end of input; expected string literal");
  expect_error("[]", "job.json: a job file is one JSON object");
  expect_error(R"({"modle": "x"})", "job.json: unknown key \"modle\" (keys: adapter_dtype, attention_impl, autocast, batch_size, bnb_saves_input, compile, cp, double_quant, freeze_trainable_layers, fused_backward, "
               "gpu_layers, grad_accum_steps, gradient_checkpointing, group_size, implementation, kbit_upcast, kernels, kv_cache_dtype, kv_cache_impl, lazy_module_loading, "
               "lora, loss_impl, loss_upcast, max_new_tokens, micro_batch_size, model, num_gpus, objective, offload, "
               "optimizer, optimizer_impl, padding_free, parallelism, pp, precision, precompute_ref_log_probs, prefill_chunk, "
               "prompt_len, reference_dtype, seq_len, sync_each_batch, target_len, task, tp, weight_quantization, zero3_sub_group_size, zero_grad_to_none)");
  expect_error(R"({"task": "finetune"})",
               "job.json: task: \"finetune\" is not one of: inference, load, train_freeze, train_full, train_lora, train_qlora");
  // One wording for a count's range, whatever is wrong with it (the CLI's flags say the same).
  expect_error(R"({"micro_batch_size": 0})", "job.json: micro_batch_size: must be at least 1 (got 0)");
  expect_error(R"({"seq_len": -5})", "job.json: seq_len: must be at least 1 (got -5)");
  expect_error(R"({"max_new_tokens": -1})", "job.json: max_new_tokens: must be 0 or more (got -1)");
  expect_error(R"({"seq_len": "2048"})", "job.json: seq_len: must be an integer, at least 1 (got \"2048\")");
  // FlashAttention-2 has no fp32 kernels; transformers refuses the combination.
  expect_error(R"({"precision": "fp32", "attention_impl": "flash"})",
               "job.json: attention_impl: flash has no fp32 kernels (FlashAttention-2 runs fp16 and bf16 only; "
               "transformers refuses: \"Flash Attention 2.0 only supports torch.float16 and torch.bfloat16 dtypes\"): "
               "use sdpa, or precision bf16_mixed");
  expect_error(R"({"num_gpus": 6, "tp": 4})", "job.json: num_gpus: 6 GPUs is not a multiple of tp*pp*cp = 4");
  expect_error(R"({"task": "train_full", "weight_quantization": "nf4"})",
               "job.json: weight_quantization: full fine-tuning cannot train quantized weights (use train_qlora)");
  expect_error(R"({"task": "inference", "optimizer": "adamw"})",
               "job.json: task: inference takes no optimizer, micro_batch_size, grad_accum_steps or gradient_checkpointing");
  // seq_len is a training job's length: an inference job left with it would be sized without it.
  expect_error(R"({"task": "inference", "seq_len": 32000})",
               "job.json: seq_len: inference takes prompt_len and max_new_tokens (seq_len is a training job's length)");
  expect_error(R"({"task": "inference", "target_len": 8})",
               "job.json: target_len: inference takes prompt_len (the encoder's) and max_new_tokens (the decoder's)");
  expect_error(R"({"target_len": 0})", "job.json: target_len: must be at least 1 (got 0)");
  expect_error(R"({"lora": {"r": 0}})", "job.json: lora.r: must be a positive integer");
  expect_error(R"({"lora": {"dropout": 1.5}})", "job.json: lora.dropout: must be a number in [0, 1)");
  expect_error(R"({"lora": {"rank": 8}})", "job.json: lora: unknown key \"rank\" (r, alpha, dropout, target_modules, modules_to_save)");
  expect_error(R"({"offload": ["params"]})",
               "job.json: offload: params offload needs parameter sharding (zero3, fsdp_full_shard or hybrid_shard)");
}

// Every Linear as target_modules, in PEFT's spelling ("all-linear", what fit's snippets print) as
// in the job file's ("all_linear").
TEST(JobFile, AllLinearInEitherSpelling) {
  for (const char* text : {R"({"lora": {"target_modules": "all_linear"}})", R"({"lora": {"target_modules": "all-linear"}})",
                           R"({"lora": {"target_modules": ["all-linear"]}})"}) {
    auto job = parse_job_json(text, "job.json");
    ASSERT_TRUE(job) << job.error().message;
    ASSERT_TRUE(job->lora);
    EXPECT_TRUE(job->lora->all_linear) << text;
    EXPECT_TRUE(job->lora->target_modules.empty()) << text;
  }
}

// A job file with the CLI's flags on top: a flag replaces the file's key, LoRA settings merge key
// by key; without a file the flags alone, errors naming "command line".
TEST(JobFile, ReadJobPutsOverridesOnTheFile) {
  nlohmann::json flags = {{"micro_batch_size", 1}, {"lora", {{"r", 64}}}};
  auto job = read_job(testing::fixture_path("estimate/qlora_70b_job.json"), flags);
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(job->micro_batch_size, 1u);
  EXPECT_EQ(job->grad_accum_steps, 4u);  // from the file
  ASSERT_TRUE(job->lora.has_value());
  EXPECT_EQ(job->lora->r, 64u);
  EXPECT_DOUBLE_EQ(job->lora->alpha, 32);  // the file's, kept
  EXPECT_TRUE(job->lora->all_linear);
  auto alone = read_job("", {{"seq_len", 0}});
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.error().message, "command line: seq_len: must be at least 1 (got 0)");
}

// Mixed precision runs flash attention under autocast, and llama.cpp's -fa takes any cache type:
// only fp32 with a transformers model is refused.
TEST(JobFile, FlashWithFp32IsRefusedOnlyWithoutAutocast) {
  EXPECT_TRUE(parse_job_json(R"({"precision": "bf16_mixed", "attention_impl": "flash"})", "job.json"));
  EXPECT_TRUE(parse_job_json(R"({"precision": "fp32", "attention_impl": "sdpa"})", "job.json"));
  EXPECT_TRUE(parse_job_json(R"({"task": "inference", "precision": "fp32", "attention_impl": "flash",
                                 "implementation": "llama_cpp"})", "job.json"));
}

// nlohmann keeps the last of two equal keys: a job file that says two things is refused instead,
// naming the key (and where it is, inside lora).
TEST(JobFile, DuplicateKeysAreRefused) {
  const std::string dir = std::string(OOMDOC_BINARY_DIR);
  const std::string top = dir + "/job_duplicate_model.json";
  std::ofstream(top) << R"({"model": "llama-2-7b", "model": "gpt2"})";
  auto job = read_job(top, nlohmann::json::object());
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().message, top + ": key \"model\" appears twice (give each key once)");
  const std::string nested = dir + "/job_duplicate_lora_r.json";
  std::ofstream(nested) << R"({"model": "llama-2-7b", "lora": {"r": 8, "alpha": 16, "r": 64}})";
  job = read_job(nested, nlohmann::json::object());
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().message, nested + ": key \"lora.r\" appears twice (give each key once)");
  // The same key in two objects is two keys.
  const std::string fine = dir + "/job_same_key_two_objects.json";
  std::ofstream(fine) << R"({"model": "llama-2-7b", "task": "train_lora", "lora": {"r": 8}, "seq_len": 128})";
  EXPECT_TRUE(read_job(fine, nlohmann::json::object()));
}

// Combinations the training programs refuse: optimizer-in-backward with accumulation (torchtune),
// optimizer offload under plain DDP.
TEST(JobFile, CombinationsTheProgramsRefuse) {
  Job fused;
  fused.task = "train_full";
  fused.fused_backward = true;
  fused.grad_accum_steps = 4;
  auto accum = validate_job(fused, "job.json");
  ASSERT_FALSE(accum.ok());
  EXPECT_EQ(accum.error().message,
            "job.json: fused_backward: the optimizer steps inside backward, so gradients cannot accumulate over 4 steps "
            "(torchtune: \"Gradient accumulation is not supported with optimizer in bwd\"); use grad_accum_steps 1");
  fused.grad_accum_steps = 1;
  EXPECT_TRUE(validate_job(fused, "job.json").ok());
  Job ddp;
  ddp.task = "train_full";
  ddp.parallelism = "ddp";
  ddp.offload = {"optimizer"};
  auto offload = validate_job(ddp, "job.json");
  ASSERT_FALSE(offload.ok());
  EXPECT_EQ(offload.error().message, "job.json: offload: optimizer offload needs DeepSpeed ZeRO (zero1, zero2, zero3) or "
                                     "FSDP: plain DDP keeps the optimizer on each GPU");
  ddp.parallelism = "zero2";
  EXPECT_TRUE(validate_job(ddp, "job.json").ok());
  // Without a stated parallelism, an optimizer offload is ZeRO-Offload's: the estimator runs it under ZeRO-2.
  Job implicit;
  implicit.task = "train_full";
  implicit.offload = {"optimizer"};
  implicit.num_gpus = 2;
  implicit.seq_len = 256;
  auto e = estimate_memory(find_preset("meta-llama/Llama-3.2-1B")->value(), implicit);
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_NE(std::find(e->assumptions.begin(), e->assumptions.end(),
                      "parallelism: zero2 (offload optimizer is ZeRO-Offload's; not given)"), e->assumptions.end());
}

TEST(JobFile, CountKeysThatTakeZero) {
  EXPECT_TRUE(job_count_allows_zero("max_new_tokens"));
  EXPECT_TRUE(job_count_allows_zero("gpu_layers"));
  EXPECT_FALSE(job_count_allows_zero("seq_len"));
  EXPECT_FALSE(job_count_allows_zero("num_gpus"));
}

// Only the keys set in `over` replace base's, scalars through the same key list as the reader.
TEST(JobFile, OverlayTakesOnlyTheSetKeys) {
  Job base;
  base.model = "llama-2-7b";
  base.task = "train_lora";
  base.seq_len = 2048;
  base.micro_batch_size = 4;
  base.lora = LoraSettings{};
  Job over;
  over.micro_batch_size = 1;
  over.padding_free = false;
  over.max_new_tokens = 0;
  over.offload = {"optimizer"};
  overlay_job(base, over);
  EXPECT_EQ(base.model, "llama-2-7b");
  EXPECT_EQ(base.task, "train_lora");
  EXPECT_EQ(base.seq_len, 2048u);
  EXPECT_EQ(base.micro_batch_size, 1u);
  EXPECT_EQ(base.padding_free, false);
  EXPECT_EQ(base.max_new_tokens, 0u);
  EXPECT_EQ(base.offload, std::vector<std::string>{"optimizer"});
  ASSERT_TRUE(base.lora.has_value());
  // Every key a job file can hold goes across: an overlay on an empty job writes back the same file.
  auto full = parse_job_json(R"({"model": "m", "task": "inference", "precision": "bf16", "batch_size": 2,
      "prompt_len": 100, "max_new_tokens": 5, "kv_cache_dtype": "fp8", "num_gpus": 2, "tp": 2,
      "attention_impl": "sdpa", "compile": true})", "test");
  ASSERT_TRUE(full) << full.error().message;
  Job empty;
  overlay_job(empty, *full);
  EXPECT_EQ(job_to_json(empty), job_to_json(*full));
}

// "all_linear" among names: every linear layer and the others named (the output head), written
// back the same way.
TEST(JobFileQa4, AllLinearWithNamedModules) {
  auto job = parse_job_json(R"({"lora": {"target_modules": ["all-linear", "lm_head"]}})", "job.json");
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_TRUE(job->lora->all_linear);
  EXPECT_EQ(job->lora->target_modules, std::vector<std::string>{"lm_head"});
  EXPECT_EQ(job_to_json(*job)["lora"]["target_modules"], nlohmann::json::parse(R"(["all_linear", "lm_head"])"));
}

}  // namespace
}  // namespace oomdoc
