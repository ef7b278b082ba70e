#include "readers/measured_memory.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace oomdoc {
namespace {

TEST(MeasuredMemory, TrainingRecordBecomesAJob) {
  auto r = parse_measured_record(R"js({"id": 7, "model": "meta-llama/Llama-2-7b-hf (LoRA)", "task": "train_lora",
    "framework": "lit-gpt finetune/lora.py", "precision": "bf16-true (weights in bf16)", "weight_quantization": null,
    "optimizer": "torch AdamW", "micro_batch_size": 2, "grad_accum_steps": null, "seq_len": 1304,
    "gradient_checkpointing": false, "attention_impl": "default (sdpa)",
    "peft": {"method": "LoRA", "r": 8, "alpha": 16, "target_modules": ["query", "value"]},
    "num_gpus": 1, "parallelism": null, "offload": null, "gpu_memory_total_mib": 40960,
    "measurement_kind": "torch_max_memory_allocated", "value_gib": 2.0, "outcome": null})js", "dev.jsonl");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->id, 7);
  EXPECT_EQ(r->model, "meta-llama/Llama-2-7b-hf");
  EXPECT_EQ(*r->job.task, "train_lora");
  EXPECT_EQ(*r->job.precision, "bf16");
  EXPECT_EQ(*r->job.optimizer, "adamw");
  EXPECT_EQ(*r->job.micro_batch_size, 2u);
  EXPECT_EQ(*r->job.gradient_checkpointing, "none");
  EXPECT_EQ(*r->job.attention_impl, "sdpa");
  EXPECT_EQ(*r->job.loss_impl, "chunked");  // LitGPT's chunked cross-entropy
  ASSERT_TRUE(r->job.lora);
  EXPECT_EQ(r->job.lora->target_modules, (std::vector<std::string>{"query", "value"}));
  EXPECT_EQ(*r->measured_bytes, 2ull << 30);
  EXPECT_EQ(*r->gpu_total_bytes, 40960ull << 20);
}

TEST(MeasuredMemory, PrecisionAndQuantizationWords) {
  auto read = [](const std::string& precision, const std::string& quant) {
    nlohmann::json j = {{"id", 1}, {"model", "m"}, {"task", "train_qlora"}, {"framework", "x"},
                        {"precision", precision}, {"optimizer", "AdamW"}, {"micro_batch_size", 1}, {"seq_len", 512},
                        {"measurement_kind", "oom_outcome"}, {"outcome", "oom"}};
    j["weight_quantization"] = quant.empty() ? nlohmann::json(nullptr) : nlohmann::json(quant);
    auto r = parse_measured_record(j.dump(), "dev.jsonl");
    EXPECT_TRUE(r) << r.error().message;
    return r->job;
  };
  EXPECT_EQ(*read("fp16 AMP (fp32 master weights)", "").precision, "fp16_mixed");
  EXPECT_EQ(*read("bf16 weights (dtype=bfloat16, use_amp=false); adapters fp32", "").precision, "bf16");
  EXPECT_EQ(*read("fp16 (weights loaded with torch_dtype=float16, no AMP)", "").precision, "fp16");
  EXPECT_EQ(*read("32-true (fp32)", "").precision, "fp32");
  auto dq = read("bf16 compute", "bnb.nf4-dq (double quant)");
  EXPECT_EQ(*dq.weight_quantization, "nf4");
  EXPECT_TRUE(*dq.double_quant);
  EXPECT_EQ(*read("bf16", "bitsandbytes 4-bit (load_in_4bit=True, default quant type fp4)").weight_quantization, "fp4");
  auto int4 = read("bf16", "torchao int4wo-64");
  EXPECT_EQ(*int4.weight_quantization, "int4");
  EXPECT_EQ(*int4.group_size, 64u);
  auto unknown = parse_measured_record(R"js({"id": 2, "model": "m", "task": "train_qlora", "precision": "bf16",
    "weight_quantization": "HQQ 3-bit", "measurement_kind": "oom_outcome"})js", "dev.jsonl");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message, "dev.jsonl: record 2: weight_quantization \"HQQ 3-bit\" cannot be expressed");
}

TEST(MeasuredMemory, InferenceLengthsFromTheSequenceDescription) {
  auto r = parse_measured_record(R"js({"id": 3, "model": "m", "task": "inference_generate", "precision": "bf16",
    "micro_batch_size": 1, "seq_len": 106, "seq_len_kind": "prompt (~6 tokens) + max_new_tokens 100 (defaults)",
    "measurement_kind": "torch_max_memory_reserved", "value_gib": 15.3})js", "dev.jsonl");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r->job.task, "inference");
  EXPECT_EQ(*r->job.max_new_tokens, 100u);
  EXPECT_EQ(*r->job.prompt_len, 6u);
  EXPECT_EQ(*r->job.batch_size, 1u);
}

TEST(MeasuredMemory, ShardingAndOffloadWords) {
  auto r = parse_measured_record(R"js({"id": 4, "model": "m", "task": "train_full", "precision": "bf16 (pure)",
    "optimizer": "torch AdamW (fused), optimizer_in_bwd per footnote", "micro_batch_size": 2, "seq_len": 2048,
    "gradient_checkpointing": true, "num_gpus": 8, "parallelism": "FSDP (full_finetune_distributed)",
    "offload": "fsdp_cpu_offload=True", "measurement_kind": "unspecified_peak", "value_gib": 13.9})js", "dev.jsonl");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r->job.parallelism, "fsdp_full_shard");
  EXPECT_EQ(*r->job.num_gpus, 8u);
  EXPECT_TRUE(*r->job.fused_backward);
  EXPECT_EQ(r->job.offload, (std::vector<std::string>{"optimizer", "params"}));
  EXPECT_EQ(*r->job.gradient_checkpointing, "full");
}

}  // namespace
}  // namespace oomdoc
