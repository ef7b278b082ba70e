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
    "peft": {"method": "LoRA", "r": 8, "alpha": 16, "dropout": 0.05, "target_modules": ["query", "value"]},
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
  EXPECT_EQ(*r->job.adapter_dtype, "model");  // LitGPT creates LoRA weights in the model dtype
  EXPECT_EQ(r->job.loss_upcast, false);       // and runs its chunked cross-entropy in bf16
  EXPECT_FALSE(r->job.compile.has_value());
  EXPECT_FALSE(r->job.lazy_module_loading.has_value());
  EXPECT_FALSE(r->job.optimizer_impl.has_value());
  ASSERT_TRUE(r->job.lora);
  EXPECT_EQ(r->job.lora->target_modules, (std::vector<std::string>{"query", "value"}));
  EXPECT_EQ(r->job.lora->dropout, 0.05);
  EXPECT_EQ(*r->job.implementation, "litgpt");  // LitGPT's own modules, not transformers'
  EXPECT_EQ(*r->measured_bytes, 2ull << 30);
  EXPECT_EQ(*r->gpu_total_bytes, 40960ull << 20);
}

TEST(MeasuredMemory, OnlyPeftPreparesAQuantizedBase) {
  auto read = [](const std::string& framework) {
    nlohmann::json j = {{"id", 1}, {"model", "m"}, {"task", "train_qlora"}, {"framework", framework},
                        {"precision", "bf16"}, {"weight_quantization", "bnb 4-bit NF4"}, {"optimizer", "AdamW"},
                        {"micro_batch_size", 1}, {"seq_len", 512}, {"gradient_checkpointing", true},
                        {"peft", {{"method", "QLoRA"}, {"r", 8}}}, {"measurement_kind", "unspecified_peak"}};
    auto r = parse_measured_record(j.dump(), "dev.jsonl");
    EXPECT_TRUE(r) << r.error().message;
    return r->job;
  };
  // Transformers + PEFT: left to the estimator's default (prepare_model_for_kbit_training).
  EXPECT_FALSE(read("TRL SFTTrainer + PEFT LoRA on quantized base").kbit_upcast.has_value());
  for (const char* own : {"torchtune", "LLaMA-Factory (HF transformers Trainer)", "Axolotl"}) {
    EXPECT_EQ(read(own).kbit_upcast, "none") << own;
  }
  // Unsloth: its kernels, whose defaults (no preparation, its fused loss, its offloaded
  // checkpointing when unstated) live in the estimator.
  const Job unsloth = read("Unsloth (fused kernels)");
  EXPECT_EQ(unsloth.kernels, "unsloth");
  EXPECT_FALSE(unsloth.kbit_upcast.has_value());
  EXPECT_FALSE(unsloth.loss_impl.has_value());
  EXPECT_EQ(read("HF Trainer + Liger kernels").kernels, "liger");
}

TEST(MeasuredMemory, BitsandbytesVersionAndTrainerAutocast) {
  auto read = [](const std::string& framework, const std::string& version, const std::string& precision) {
    nlohmann::json j = {{"id", 1}, {"model", "m"}, {"task", "train_qlora"}, {"framework", framework},
                        {"framework_version", version}, {"precision", precision},
                        {"weight_quantization", "bnb 4-bit NF4"}, {"optimizer", "AdamW"}, {"micro_batch_size", 1},
                        {"seq_len", 512}, {"measurement_kind", "unspecified_peak"}};
    auto r = parse_measured_record(j.dump(), "dev.jsonl");
    EXPECT_TRUE(r) << r.error().message;
    return r->job;
  };
  // bitsandbytes#1270 (0.43.3): the version named, a lower bound, or the stack's date.
  EXPECT_EQ(read("TRL SFTTrainer", "transformers ~4.30, bitsandbytes 0.39, peft ~0.3", "fp16").bnb_saves_input, true);
  EXPECT_EQ(read("lit-gpt", "lit-gpt 8641822, PyTorch 2.1.0, bnb 0.41.1", "bf16-true").bnb_saves_input, true);
  EXPECT_FALSE(read("TRL SFTTrainer", "peft>0.13, bnb>=0.43.3", "bf16").bnb_saves_input.has_value());
  EXPECT_FALSE(read("TRL SFTTrainer", "bnb>=0.41.1 (2025)", "bf16").bnb_saves_input.has_value());  // a bound says nothing
  EXPECT_EQ(read("LLaMA-Factory (HF transformers Trainer)", "early 2024", "bf16").bnb_saves_input, true);
  EXPECT_FALSE(read("LLaMA-Factory (HF transformers Trainer)", "late 2024", "bf16").bnb_saves_input.has_value());
  EXPECT_EQ(read("custom", "May 2023", "bf16").bnb_saves_input, true);
  // The Trainer's autocast over a 16-bit model; not for pure runs, custom loops or no_trainer scripts.
  EXPECT_EQ(read("TRL SFTTrainer + PEFT", "2025", "bf16 compute dtype").autocast, true);
  EXPECT_FALSE(read("TRL SFTTrainer + PEFT", "2025", "bf16 (pure)").autocast.has_value());
  EXPECT_FALSE(read("Accelerate + DeepSpeed (no_trainer example scripts)", "2022", "bf16").autocast.has_value());
  EXPECT_FALSE(read("PEFT benchmark (custom torch loop)", "2025", "bf16 weights (use_amp=false)").autocast.has_value());
}

TEST(MeasuredMemory, TorchtuneAdamWIsFused) {
  auto read = [](const std::string& framework, const std::string& optimizer) {
    nlohmann::json j = {{"id", 1}, {"model", "m"}, {"task", "train_full"}, {"framework", framework},
                        {"precision", "bf16 (pure)"}, {"optimizer", optimizer}, {"micro_batch_size", 2},
                        {"seq_len", 4096}, {"measurement_kind", "torch_peak_active"}};
    auto r = parse_measured_record(j.dump(), "dev.jsonl");
    EXPECT_TRUE(r) << r.error().message;
    return r->job;
  };
  EXPECT_EQ(read("torchtune", "torch.optim.AdamW").optimizer_impl, "fused");  // its configs: fused: True
  EXPECT_FALSE(read("torchtune", "torch.optim.AdamW fused into backward (optimizer_in_bwd=True)").optimizer_impl);
  EXPECT_FALSE(read("torchtune", "8-bit AdamW (bitsandbytes)").optimizer_impl);
  EXPECT_FALSE(read("custom loop", "torch.optim.AdamW").optimizer_impl);  // torch's default: foreach
  EXPECT_EQ(read("torchtune", "torch.optim.AdamW (foreach)").optimizer_impl, "foreach");
  EXPECT_FALSE(read("torchtune", "torch.optim.AdamW, fused: False").optimizer_impl);  // said otherwise: torch's default
}

TEST(MeasuredMemory, TheStackVersionSetsItsDefaults) {
  auto read = [](const std::string& framework, const std::string& version, const std::string& optimizer) {
    nlohmann::json j = {{"id", 1}, {"model", "m"}, {"task", "train_full"}, {"framework", framework},
                        {"framework_version", version}, {"precision", "fp32"}, {"optimizer", optimizer},
                        {"micro_batch_size", 1}, {"seq_len", 512}, {"measurement_kind", "nvidia_smi_used"}};
    auto r = parse_measured_record(j.dump(), "dev.jsonl");
    EXPECT_TRUE(r) << r.error().message;
    return r->job;
  };
  // CUDA 11.2 predates lazy module loading; a 2022 stack is PyTorch 1.x.
  Job old = read("transformers Trainer", "~4.18-4.27 (doc written 2022; nvidia driver 460.91.03, CUDA 11.2)",
                 "AdamW (Trainer default adamw_hf, fp32 states)");
  EXPECT_EQ(old.lazy_module_loading, false);
  EXPECT_EQ(old.zero_grad_to_none, false);
  EXPECT_EQ(*old.optimizer_impl, "for_loop");
  Job torch112 = read("custom loop", "PyTorch 1.12.1", "AdamW");
  EXPECT_EQ(torch112.lazy_module_loading, false);
  EXPECT_EQ(torch112.zero_grad_to_none, false);
  Job modern = read("litgpt", "litgpt (2024), CUDA 12.1", "torch AdamW (fused)");
  EXPECT_FALSE(modern.lazy_module_loading.has_value());
  EXPECT_FALSE(modern.zero_grad_to_none.has_value());
  EXPECT_EQ(*modern.optimizer_impl, "fused");
  Job in_backward = read("torchtune", "torchtune ~0.3 (Sept 2024)", "torch AdamW (fused), optimizer_in_bwd per footnote");
  EXPECT_EQ(in_backward.fused_backward, true);
  EXPECT_FALSE(in_backward.optimizer_impl.has_value());
  // transformers before v4.36 had no SDPA path: eager attention unless the record names one.
  EXPECT_EQ(*read("TRL SFTTrainer", "transformers ~4.30, bitsandbytes 0.39 (May 2023)", "AdamW").attention_impl, "eager");
  EXPECT_EQ(*read("transformers pipeline", "~4.34 (Sept 2023)", "AdamW").attention_impl, "eager");
  EXPECT_FALSE(read("TRL", "peft>0.13, transformers>4.44.2", "AdamW").attention_impl.has_value());
  EXPECT_FALSE(read("PEFT", "torch 2.13.0+cu130, transformers 5.13.1", "AdamW").attention_impl.has_value());
  EXPECT_FALSE(read("transformers (benchmark)", "PyTorch 2.4.0 (transformers ~4.44)", "AdamW").attention_impl.has_value());
  // The runtime baseline record keeps its stack too (its context is what is measured).
  nlohmann::json base = {{"id", 1}, {"model", "(none: CUDA context only)"}, {"task", "runtime_baseline"},
                         {"framework", "transformers Trainer"}, {"framework_version", "CUDA 11.2"},
                         {"measurement_kind", "nvidia_smi_used"}, {"value_gib", 1.3}};
  auto r = parse_measured_record(base.dump(), "dev.jsonl");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->runtime_baseline);
  EXPECT_EQ(r->job.lazy_module_loading, false);
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
  EXPECT_FALSE(read("fp16", "bitsandbytes 4-bit (load_in_4bit=True, fp4, no double quant)").double_quant.has_value());
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
  EXPECT_FALSE(r->job.implementation.has_value());  // transformers' modules unless the record says otherwise
  auto litgpt = parse_measured_record(R"js({"id": 4, "model": "m", "task": "inference_generate",
    "framework": "lit-gpt generate/base.py", "precision": "32-true (fp32)", "micro_batch_size": 1,
    "measurement_kind": "torch_max_memory_allocated", "value_gib": 27.0})js", "dev.jsonl");
  ASSERT_TRUE(litgpt) << litgpt.error().message;
  EXPECT_EQ(*litgpt->job.implementation, "litgpt");  // inference too: LitGPT's untied head
  auto ggml = parse_measured_record(R"js({"id": 5, "model": "m", "task": "inference_generate", "precision": "F16",
    "micro_batch_size": 1, "seq_len": 512, "seq_len_kind": "n_ctx 512", "attention_impl": "ggml (non-flash)",
    "measurement_kind": "framework_allocation_log", "value_gib": 12.6})js", "dev.jsonl");
  ASSERT_TRUE(ggml) << ggml.error().message;
  EXPECT_EQ(*ggml->job.attention_impl, "eager");  // "non-flash" is not flash attention
  EXPECT_FALSE(ggml->job.prefill_chunk.has_value());
  auto ubatch = parse_measured_record(R"js({"id": 6, "model": "m", "task": "inference_generate", "precision": "F16",
    "micro_batch_size": 1, "seq_len": 2048, "seq_len_kind": "n_ctx 2048, n_batch 512, n_ubatch 512",
    "measurement_kind": "framework_allocation_log", "value_gib": 7.7})js", "dev.jsonl");
  ASSERT_TRUE(ubatch) << ubatch.error().message;
  EXPECT_EQ(*ubatch->job.prompt_len, 2048u);
  EXPECT_EQ(*ubatch->job.prefill_chunk, 512u);
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

TEST(MeasuredMemory, OversizedNumbersInDescriptionsAreUnknownNotAnAbort) {
  // Each of these reached std::stoull / std::stod with 20+ digits or a lone ".".
  auto fresh = parse_measured_record(R"js({"id": 3, "model": "m", "task": "inference_generate", "precision": "bf16",
    "micro_batch_size": 1, "seq_len": 106, "seq_len_kind": "max_new_tokens 99999999999999999999",
    "measurement_kind": "torch_max_memory_reserved", "value_gib": 15.3})js", "dev.jsonl");
  ASSERT_TRUE(fresh) << fresh.error().message;
  EXPECT_EQ(*fresh->job.prompt_len, 106u);       // the new-token count is unknown: all of seq_len is prompt
  EXPECT_EQ(*fresh->job.max_new_tokens, 0u);
  auto cuda = parse_measured_record(R"js({"id": 1, "model": "m", "task": "train_full", "framework": "custom",
    "framework_version": "CUDA 11.99999999999999999999", "precision": "fp32", "micro_batch_size": 1, "seq_len": 8,
    "measurement_kind": "nvidia_smi_used"})js", "dev.jsonl");
  ASSERT_TRUE(cuda) << cuda.error().message;
  EXPECT_FALSE(cuda->job.lazy_module_loading.has_value());   // the CUDA minor is unknown: no claim
  auto dot = parse_measured_record(R"js({"id": 1, "model": "m", "task": "train_full", "precision": "fp32",
    "micro_batch_size": 1, "seq_len_kind": "typically < .k tokens, longest ~1.3k", "measurement_kind": "nvidia_smi_used"})js",
                                   "dev.jsonl");
  ASSERT_TRUE(dot) << dot.error().message;
  EXPECT_EQ(*dot->job.seq_len, 1300u);   // "< ." is skipped; "~1.3k" is read
  auto id = parse_measured_record(R"js({"id": "seven", "model": "m", "task": "train_full"})js", "dev.jsonl");
  ASSERT_FALSE(id);
  EXPECT_EQ(id.error().message, "dev.jsonl: \"id\" must be an integer");   // was an uncaught type_error
}

}  // namespace
}  // namespace oomdoc
