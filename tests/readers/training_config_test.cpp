#include "readers/training_config.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <filesystem>
#include <fstream>

#include "model/architecture.h"
#include "readers/model_resolver.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::IsSupersetOf;
using ::testing::Not;
using oomdoc::testing::fixture_path;

// A number or a boolean is no module name: said with the file and line.
TEST(TrainingConfig, LoraTargetThatIsNoNameIsRefusedWhereItIsWritten) {
  auto config = parse_training_config("base_model: meta-llama/Llama-2-7b-hf\nadapter: lora\nlora_target_modules: 5\n",
                                      "bad.yml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().message,
            "bad.yml: line 3: lora_target_modules: expected module names (q_proj,v_proj or a list), got 5");
}

// Packing keys say the job pads no batch (padding_free), and count as used.
TEST(TrainingConfig, PackingKeysArePaddingFree) {
  for (const auto& [text, name] : std::vector<std::pair<std::string, std::string>>{
           {"base_model: meta-llama/Llama-3.1-8B\nsample_packing: true\nsequence_len: 4096\n", "ax.yml"},
           {"model_name_or_path: meta-llama/Llama-3.1-8B\nstage: sft\nneat_packing: true\ncutoff_len: 4096\n", "lf.yaml"},
           {"{\"model_name_or_path\": \"meta-llama/Llama-3.1-8B\", \"packing\": true, \"max_length\": 4096}", "trl.json"}}) {
    auto config = parse_training_config(text, name);
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_EQ(config->job.padding_free, true) << name;
    EXPECT_THAT(config->ignored_keys, Not(Contains(::testing::HasSubstr("packing")))) << name;
  }
}

// LoRA on a checkpoint that is already bitsandbytes 4-bit (unsloth/...-bnb-4bit): the config asks for
// no quantization, yet each framework prepares that base its own way, as for QLoRA: no PEFT fp32
// upcast for Axolotl, LLaMA-Factory or TRL.
TEST(TrainingConfig, LoraOnAPreQuantizedBaseIsPreparedAsItsFrameworkDoes) {
  auto axolotl = parse_training_config("base_model: unsloth/Meta-Llama-3.1-8B-bnb-4bit\nadapter: lora\nlora_r: 16\n"
                                       "sequence_len: 2048\nmicro_batch_size: 1\n", "ax.yml");
  ASSERT_TRUE(axolotl.ok()) << axolotl.error().message;
  EXPECT_EQ(axolotl->job.task, "train_lora");
  EXPECT_EQ(axolotl->job.kbit_upcast, "none");
  auto factory = parse_training_config("model_name_or_path: unsloth/Meta-Llama-3.1-8B-bnb-4bit\nstage: sft\n"
                                       "finetuning_type: lora\ncutoff_len: 2048\nbf16: true\n", "lf.yaml");
  ASSERT_TRUE(factory.ok()) << factory.error().message;
  EXPECT_EQ(factory->job.kbit_upcast, "none");
  auto trl = parse_training_config("{\"model_name_or_path\": \"unsloth/Meta-Llama-3.1-8B-bnb-4bit\", \"use_peft\": true, "
                                   "\"lora_r\": 16, \"max_length\": 2048}", "trl.json");
  ASSERT_TRUE(trl.ok()) << trl.error().message;
  EXPECT_EQ(trl->job.kbit_upcast, "none");
  EXPECT_EQ(trl->job.adapter_dtype, "model");
}

TEST(TrainingConfig, AxolotlQloraExample) {
  auto config = read_training_config(fixture_path("fit/axolotl_llama3_qlora.yml"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Job& job = config->job;
  EXPECT_EQ(config->format, TrainingConfigFormat::kAxolotl);
  EXPECT_EQ(job.model, "NousResearch/Meta-Llama-3-8B");
  EXPECT_EQ(job.task, "train_qlora");
  EXPECT_EQ(job.weight_quantization, "nf4");
  EXPECT_EQ(job.double_quant, true);
  EXPECT_EQ(job.kbit_upcast, "none");  // Axolotl casts norms and embeddings back after PEFT's preparation
  ASSERT_TRUE(job.lora.has_value());
  EXPECT_EQ(job.lora->r, 32u);
  EXPECT_EQ(job.lora->alpha, 64);
  EXPECT_TRUE(job.lora->all_linear);
  EXPECT_EQ(job.lora->dropout, 0.05);
  EXPECT_EQ(job.seq_len, 4096u);
  EXPECT_EQ(job.micro_batch_size, 1u);
  EXPECT_EQ(job.grad_accum_steps, 4u);
  EXPECT_EQ(job.optimizer, "paged_adamw_8bit");
  EXPECT_EQ(job.precision, "bf16");  // Axolotl loads the model in the autocast dtype
  EXPECT_EQ(job.gradient_checkpointing, "full");
  EXPECT_EQ(job.attention_impl, "flash");
  EXPECT_FALSE(job.parallelism.has_value());
  EXPECT_EQ(job.padding_free, true);   // sample_packing: true
  EXPECT_THAT(config->used_keys,
              ElementsAre("base_model", "load_in_8bit", "load_in_4bit", "adapter", "sequence_len", "sample_packing",
                          "lora_r", "lora_alpha", "lora_dropout", "lora_target_linear",
                          "gradient_accumulation_steps", "micro_batch_size", "optimizer", "bf16",
                          "gradient_checkpointing", "flash_attention"));
  // Null values (fp16:, deepspeed:) are ignored, as are known keys without a memory effect.
  EXPECT_THAT(config->ignored_keys, Contains("fp16"));
  EXPECT_THAT(config->ignored_keys, Contains("deepspeed"));
  EXPECT_THAT(config->ignored_keys, Contains("learning_rate"));
  EXPECT_THAT(config->unknown_keys, IsEmpty());
  EXPECT_THAT(config->warnings, IsEmpty());
}

TEST(TrainingConfig, AxolotlFullFineTuneWithDeepSpeedNameAndUnknownKey) {
  auto config = read_training_config(fixture_path("fit/axolotl_full_zero3.yml"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Job& job = config->job;
  EXPECT_EQ(job.task, "train_full");
  EXPECT_FALSE(job.lora.has_value());
  EXPECT_EQ(job.optimizer, "adamw");
  EXPECT_EQ(job.seq_len, 8192u);
  EXPECT_EQ(job.loss_impl, "fused_linear");
  EXPECT_EQ(job.precision, "bf16_mixed");  // DeepSpeed bf16 keeps fp32 master weights
  // The DeepSpeed file is not next to the config: stage and offload come from its name.
  EXPECT_EQ(job.parallelism, "zero3");
  EXPECT_THAT(job.offload, ElementsAre("optimizer", "params"));
  EXPECT_THAT(config->unknown_keys, ElementsAre("my_custom_flag"));
  ASSERT_EQ(config->warnings.size(), 2u);
  EXPECT_THAT(config->warnings[0], HasSubstr("line 27: deepspeed: 'deepspeed_configs/zero3_bf16_cpuoffload_all.json' was not found"));
  EXPECT_THAT(config->warnings[1], HasSubstr("axolotl_full_zero3.yml: line 28: unknown key 'my_custom_flag' ignored"));
}

// YAML merge keys, as PyYAML applies them: the map's own keys win, then the sources in order.
TEST(TrainingConfig, MergeKeysAreApplied) {
  auto config = parse_training_config("defaults: &defaults\n  micro_batch_size: 4\n  gradient_accumulation_steps: 2\n"
                                      "base_model: mistralai/Mistral-7B-v0.1\nadapter: lora\nsequence_len: 2048\n"
                                      "<<: [*defaults, {micro_batch_size: 16, lora_r: 32}]\ngradient_accumulation_steps: 8\n",
                                      "ax.yml", "");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->job.micro_batch_size, 4u);    // the first source's
  EXPECT_EQ(config->job.grad_accum_steps, 8u);    // the map's own
  ASSERT_TRUE(config->job.lora);
  EXPECT_EQ(config->job.lora->r, 32u);            // the second source's
  EXPECT_EQ(std::count(config->unknown_keys.begin(), config->unknown_keys.end(), "<<"), 0);
}

// torchtune's recipe configs build Python components: refused, not read as TrainingArguments.
TEST(TrainingConfig, TorchtuneRecipesAreRefused) {
  auto config = parse_training_config("model:\n  _component_: torchtune.models.llama3.lora_llama3_8b\n  lora_rank: 8\n"
                                      "batch_size: 2\ngradient_accumulation_steps: 8\ndtype: bf16\n"
                                      "enable_activation_checkpointing: True\n", "8B_lora_single_device.yaml", "");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().message,
            "8B_lora_single_device.yaml: a torchtune recipe config ('model' names a _component_), which oomdoc does not "
            "read; give the job as flags or a --job file (docs/estimate.md)");
}

TEST(TrainingConfig, LlamaFactoryLoraExample) {
  auto config = read_training_config(fixture_path("fit/llamafactory_llama3_lora_sft.yaml"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Job& job = config->job;
  EXPECT_EQ(config->format, TrainingConfigFormat::kLlamaFactory);
  EXPECT_EQ(job.model, "meta-llama/Meta-Llama-3-8B-Instruct");
  EXPECT_EQ(job.task, "train_lora");
  EXPECT_FALSE(job.weight_quantization.has_value());
  EXPECT_EQ(job.lora->r, 8u);
  EXPECT_TRUE(job.lora->all_linear);
  EXPECT_EQ(job.seq_len, 2048u);
  EXPECT_EQ(job.micro_batch_size, 1u);
  EXPECT_EQ(job.grad_accum_steps, 8u);
  EXPECT_EQ(job.precision, "bf16");  // LoRA: the frozen base is loaded in bf16
  // LLaMA-Factory checkpoints unless disable_gradient_checkpointing is set.
  EXPECT_EQ(job.gradient_checkpointing, "full");
  EXPECT_THAT(config->unknown_keys, IsEmpty());
  EXPECT_THAT(config->warnings, IsEmpty());
}

// LLaMA-Factory's own example without lora_rank: its defaults (LoraArguments: rank 8, alpha
// rank * 2, target "all"), not PEFT's r 16 / q,v. Llama-3-8B, r 8 on every linear layer:
// 32 x 8 x (2 x (4096 + 4096) + 2 x (4096 + 1024) + 3 x (4096 + 14336)) = 20,971,520 params.
TEST(TrainingConfig, LlamaFactoryLoraDefaultsAreItsOwn) {
  auto config = read_training_config(fixture_path("fit/llamafactory_llama3_lora_sft_awq.yaml"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Job& job = config->job;
  EXPECT_EQ(job.task, "train_lora");
  ASSERT_TRUE(job.lora.has_value());
  EXPECT_EQ(job.lora->r, 8u);
  EXPECT_EQ(job.lora->alpha, 16);
  EXPECT_TRUE(job.lora->all_linear);
  EXPECT_EQ(job.lora->dropout, 0);
  auto spec = resolve_model("meta-llama/Meta-Llama-3-8B");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(lora_parameter_count(*spec, *job.lora), 20971520u);

  // Without lora_target either, every linear layer; a given rank sets the alpha default too.
  auto bare = parse_training_config("model_name_or_path: m\nfinetuning_type: lora\nlora_rank: 32\n", "lf.yml", "");
  ASSERT_TRUE(bare.ok()) << bare.error().message;
  ASSERT_TRUE(bare->job.lora.has_value());
  EXPECT_EQ(bare->job.lora->r, 32u);
  EXPECT_EQ(bare->job.lora->alpha, 64);
  EXPECT_TRUE(bare->job.lora->all_linear);
  EXPECT_THAT(bare->job.lora->target_modules, IsEmpty());
}

// Freeze tuning: freeze_trainable_layers is read, and with bf16 the model loads in bf16 with only
// the trainable blocks upcast to fp32 (LLaMA-Factory's _setup_freeze_tuning).
TEST(TrainingConfig, LlamaFactoryFreezeTuningReadsItsLayersAndUpcastsOnlyThem) {
  auto config = parse_training_config("model_name_or_path: Qwen/Qwen2.5-7B\nfinetuning_type: freeze\n"
                                      "freeze_trainable_layers: 4\nbf16: true\n", "lf.yml", "");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Job& job = config->job;
  EXPECT_EQ(job.task, "train_freeze");
  EXPECT_EQ(job.freeze_trainable_layers, 4u);
  EXPECT_EQ(job.precision, "bf16");
  EXPECT_EQ(job.autocast, true);
  EXPECT_EQ(job.adapter_dtype, "fp32");
  EXPECT_THAT(config->used_keys, Contains("freeze_trainable_layers"));
  EXPECT_THAT(config->ignored_keys, Not(Contains("freeze_trainable_layers")));
  EXPECT_THAT(config->warnings, IsEmpty());
  // pure_bf16 keeps the trainable blocks in bf16 too; a negative count trains the first blocks.
  auto pure = parse_training_config("model_name_or_path: m\nfinetuning_type: freeze\npure_bf16: true\n"
                                    "freeze_trainable_layers: -3\n", "lf.yml", "");
  ASSERT_TRUE(pure.ok()) << pure.error().message;
  EXPECT_EQ(pure->job.precision, "bf16");
  EXPECT_FALSE(pure->job.adapter_dtype.has_value());
  EXPECT_EQ(pure->job.freeze_trainable_layers, 3u);
  EXPECT_THAT(pure->warnings, ElementsAre(HasSubstr("-3 trains the first 3 blocks")));
  EXPECT_FALSE(pure->job.autocast.value_or(false));
  // With bf16: true as well the Trainer runs the bf16 model under autocast (fit's own plans print both).
  auto both = parse_training_config("model_name_or_path: m\nfinetuning_type: lora\npure_bf16: true\nbf16: true\n",
                                    "lf.yml", "");
  ASSERT_TRUE(both.ok()) << both.error().message;
  EXPECT_EQ(both->job.precision, "bf16");
  EXPECT_TRUE(both->job.autocast.value_or(false));
  auto zero = parse_training_config("model_name_or_path: m\nfinetuning_type: freeze\nfreeze_trainable_layers: 0\n",
                                    "lf.yml", "");
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.error().message, HasSubstr("freeze_trainable_layers: must not be 0"));
}

TEST(TrainingConfig, LlamaFactoryQloraReadsTheDeepSpeedFile) {
  auto config = read_training_config(fixture_path("fit/llamafactory_qlora_ds.yaml"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Job& job = config->job;
  EXPECT_EQ(job.task, "train_qlora");
  EXPECT_EQ(job.weight_quantization, "nf4");
  EXPECT_EQ(job.double_quant, false);
  EXPECT_THAT(job.lora->target_modules, ElementsAre("q_proj", "v_proj"));
  EXPECT_FALSE(job.lora->all_linear);
  EXPECT_EQ(job.gradient_checkpointing, "none");
  EXPECT_EQ(job.attention_impl, "flash");
  EXPECT_EQ(job.kernels, "liger");  // enable_liger_kernel (its fused loss is the estimator's default)
  EXPECT_FALSE(job.loss_impl.has_value());
  EXPECT_EQ(job.parallelism, "zero2");
  EXPECT_THAT(job.offload, ElementsAre("optimizer"));
  EXPECT_EQ(job.kbit_upcast, "none");  // LLaMA-Factory does not call prepare_model_for_kbit_training
  EXPECT_THAT(config->warnings, IsEmpty());
}

TEST(TrainingConfig, KernelKeysNameTheirKernels) {
  auto read = [](const std::string& text, const std::string& name) {
    auto config = parse_training_config(text, name, "");
    EXPECT_TRUE(config.ok()) << config.error().message;
    return *config;
  };
  // LLaMA-Factory through Unsloth, with its offloaded checkpointing.
  auto lf = read("model_name_or_path: meta-llama/Llama-3.1-8B\nfinetuning_type: lora\nquantization_bit: 4\n"
                 "use_unsloth: true\nuse_unsloth_gc: true\nbf16: true\n", "lf.yaml");
  EXPECT_EQ(lf.job.kernels, "unsloth");
  EXPECT_EQ(lf.job.gradient_checkpointing, "full");
  EXPECT_THAT(lf.job.offload, ElementsAre("activations"));
  EXPECT_THAT(lf.used_keys, IsSupersetOf({"use_unsloth", "use_unsloth_gc"}));
  // LLaMA-Factory passes use_gradient_checkpointing="unsloth" to Unsloth whatever use_unsloth_gc
  // says: its checkpointing (on by default) is the offloaded one.
  auto lf_default = read("model_name_or_path: meta-llama/Llama-3.1-8B\nfinetuning_type: lora\nuse_unsloth: true\n",
                         "lf.yaml");
  EXPECT_EQ(lf_default.job.gradient_checkpointing, "full");
  EXPECT_THAT(lf_default.job.offload, ElementsAre("activations"));
  // Axolotl's Liger plugin: each kernel by its own key; the fused loss only when its key says so,
  // in either order.
  auto norms_only = read("base_model: meta-llama/Llama-3.1-8B\nliger_rms_norm: true\nliger_glu_activation: true\n",
                         "axolotl.yaml");
  EXPECT_EQ(norms_only.job.kernels, "liger");
  EXPECT_EQ(norms_only.job.loss_impl, "standard");
  for (const char* text : {"base_model: m\nliger_rms_norm: true\nliger_fused_linear_cross_entropy: true\n",
                           "base_model: m\nliger_fused_linear_cross_entropy: true\nliger_rms_norm: true\n"}) {
    auto both = read(text, "axolotl.yaml");
    EXPECT_EQ(both.job.kernels, "liger") << text;
    EXPECT_EQ(both.job.loss_impl, "fused_linear") << text;
  }
  // The Trainer's use_liger_kernel.
  auto hf = read(R"({"per_device_train_batch_size": 2, "use_liger_kernel": true, "bf16": true})", "args.json");
  EXPECT_EQ(hf.job.kernels, "liger");
}

TEST(TrainingConfig, LlamaFactoryUpcastLayernormKeepsNormsInFp32) {
  auto config = parse_training_config("model_name_or_path: meta-llama/Llama-2-7b-hf\nfinetuning_type: lora\n"
                                      "quantization_bit: 4\nupcast_layernorm: true\nbf16: true\n",
                                      "lf.yaml", "");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->job.kbit_upcast, "norms");
  EXPECT_EQ(config->job.autocast, true);  // bf16 over 16-bit weights: the Trainer's autocast
  EXPECT_EQ(config->job.adapter_dtype, "fp32");  // cast_trainable_params_to_fp32
  EXPECT_THAT(config->used_keys, Contains("upcast_layernorm"));
}

TEST(TrainingConfig, TrainingArgumentsJsonDump) {
  auto config = read_training_config(fixture_path("fit/hf_training_args.json"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Job& job = config->job;
  EXPECT_EQ(config->format, TrainingConfigFormat::kHfTrainingArguments);
  EXPECT_EQ(job.model, "");  // a TrainingArguments dump names no model
  EXPECT_EQ(job.task, "train_full");
  EXPECT_EQ(job.micro_batch_size, 4u);
  EXPECT_EQ(job.grad_accum_steps, 2u);
  EXPECT_EQ(job.precision, "bf16");  // model_init_kwargs torch_dtype bfloat16 + bf16 autocast
  EXPECT_EQ(job.optimizer, "adamw");
  EXPECT_EQ(job.gradient_checkpointing, "full");
  EXPECT_EQ(job.seq_len, 2048u);
  EXPECT_EQ(job.attention_impl, "flash");
  EXPECT_FALSE(job.parallelism.has_value());   // fsdp: [] and fsdp_config without FSDP
  EXPECT_FALSE(job.loss_impl.has_value());     // use_liger_kernel: false
  EXPECT_THAT(config->ignored_keys, Contains("deepspeed"));  // null
  EXPECT_THAT(config->unknown_keys, IsEmpty());
}

// accelerator_config.gradient_accumulation_kwargs.sync_each_batch: FSDP without no_sync.
TEST(TrainingConfig, TrainingArgumentsSyncEachBatch) {
  auto config = read_training_config(fixture_path("fit/hf_training_args_fsdp_sync.json"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->job.parallelism, "fsdp_full_shard");
  EXPECT_EQ(config->job.grad_accum_steps, 8u);
  EXPECT_EQ(config->job.sync_each_batch, true);
  EXPECT_THAT(config->unknown_keys, IsEmpty());
  auto dump = read_training_config(fixture_path("fit/hf_training_args.json"));
  ASSERT_TRUE(dump.ok());
  EXPECT_FALSE(dump->job.sync_each_batch.has_value());
  // transformers also accepts a JSON file's path there: not read, said so, not an error.
  auto path = read_training_config(fixture_path("fit/hf_training_args_accelerator_path.yaml"));
  ASSERT_TRUE(path.ok()) << path.error().message;
  EXPECT_FALSE(path->job.sync_each_batch.has_value());
  EXPECT_THAT(path->warnings, Contains(HasSubstr("accelerator_config: the file 'accel.json' is not read")));
}

TEST(TrainingConfig, TrlCliYamlWithModelConfigKeys) {
  auto config = read_training_config(fixture_path("fit/trl_sft_qlora.yaml"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Job& job = config->job;
  EXPECT_EQ(config->format, TrainingConfigFormat::kHfTrainingArguments);
  EXPECT_EQ(job.model, "Qwen/Qwen2.5-7B");
  EXPECT_EQ(job.task, "train_qlora");
  EXPECT_EQ(job.weight_quantization, "nf4");
  EXPECT_EQ(job.double_quant, true);
  EXPECT_TRUE(job.lora->all_linear);
  EXPECT_EQ(job.lora->r, 32u);
  EXPECT_EQ(job.padding_free, true);
  EXPECT_EQ(job.seq_len, 4096u);
  EXPECT_EQ(job.micro_batch_size, 8u);
  EXPECT_EQ(job.optimizer, "paged_adamw_8bit");
  EXPECT_EQ(job.attention_impl, "flash");
  EXPECT_EQ(job.precision, "bf16_mixed");  // no torch_dtype: loaded in fp32, bf16 autocast
  EXPECT_FALSE(job.autocast.has_value());  // fp32 weights: bf16_mixed is autocast already
  // TRL's SFTTrainer no longer prepares a quantized model and casts the adapters to bf16.
  EXPECT_EQ(job.kbit_upcast, "none");
  EXPECT_EQ(job.adapter_dtype, "model");
}

// What a TRL recipe leaves out takes SFTConfig's defaults, not TrainingArguments' (or oomdoc's
// 2048 tokens): max_length 1024, and since TRL 0.20 gradient checkpointing and bf16.
TEST(TrainingConfig, TrlRecipeTakesSftConfigDefaults) {
  auto config = read_training_config(fixture_path("fit/trl_sft_recipe_defaults.yaml"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Job& job = config->job;
  EXPECT_EQ(job.model, "Qwen/Qwen2.5-0.5B");
  EXPECT_EQ(job.seq_len, 1024u);
  EXPECT_EQ(job.gradient_checkpointing, "full");
  EXPECT_EQ(job.precision, "bf16_mixed");  // no dtype: fp32 weights under bf16 autocast
  EXPECT_THAT(config->framework_defaults,
              ElementsAre("max_length 1024: TRL's default",
                          "gradient_checkpointing true: TRL's default since TRL 0.20 (set it false for older TRL)",
                          "bf16 true: TRL's default since TRL 0.20 (fp16 off)",
                          "loss_type nll (full logits): SFTConfig's default before TRL 1.7; from 1.7 it is "
                          "chunked_nll, which keeps no full logits: write loss_type: chunked_nll to size that"));
  EXPECT_FALSE(job.loss_impl.has_value());
  // TRL's chunked NLL keeps no full logits: the fused-linear loss.
  auto chunked = parse_training_config("model_name_or_path: Qwen/Qwen2.5-0.5B\nloss_type: chunked_nll\n", "trl.yaml");
  ASSERT_TRUE(chunked.ok());
  EXPECT_EQ(chunked->job.loss_impl, "fused_linear");
  EXPECT_THAT(chunked->used_keys, Contains("loss_type"));
  auto offloaded = parse_training_config("model_name_or_path: x\nactivation_offloading: true\n", "trl.yaml");
  ASSERT_TRUE(offloaded.ok());
  EXPECT_THAT(offloaded->job.offload, ElementsAre("activations"));
  // Other TRL trainers' losses (DPO's "sigmoid", or a list of them in a DPOConfig dump; CPO's
  // "simpo"; KTO's; GRPO's "dr_grpo") set no loss implementation, and name the trainer's objective.
  for (auto [other, objective] : std::vector<std::pair<const char*, const char*>>{
           {"loss_type: sigmoid\n", "dpo"}, {"loss_type: ipo\n", "ipo"}, {"loss_type: dr_grpo\n", ""},
           {"loss_type: [sigmoid, bco_pair]\n", "dpo"}, {"loss_type: simpo\n", "simpo"},
           {"loss_type: apo_zero_unpaired\n", "kto"}}) {
    auto dpo = parse_training_config(std::string("model_name_or_path: x\nper_device_train_batch_size: 2\n") + other,
                                     "dpo.yaml");
    ASSERT_TRUE(dpo.ok()) << other << dpo.error().message;
    EXPECT_FALSE(dpo->job.loss_impl.has_value()) << other;
    EXPECT_EQ(dpo->job.objective.value_or(""), objective) << other;
  }
  // A recipe that says them keeps its own values; only the loss is left to TRL.
  const std::string loss_note = config->framework_defaults.back();
  auto given = read_training_config(fixture_path("fit/trl_sft_qlora.yaml"));
  ASSERT_TRUE(given.ok());
  // (and TRL's own lora_dropout, 0.05, which the recipe leaves unsaid)
  EXPECT_THAT(given->framework_defaults, ElementsAre(loss_note, "lora_dropout 0.05: TRL ModelConfig's default"));
  ASSERT_TRUE(given->job.lora.has_value());
  EXPECT_DOUBLE_EQ(given->job.lora->dropout, 0.05);
  // `max_length: null` is TRL's "no truncation": no length is assumed for it.
  auto untruncated = parse_training_config("model_name_or_path: Qwen/Qwen2.5-0.5B\nmax_length: null\nfp16: true\n"
                                           "gradient_checkpointing: false\n", "trl.yaml");
  ASSERT_TRUE(untruncated.ok());
  EXPECT_FALSE(untruncated->job.seq_len.has_value());
  EXPECT_EQ(untruncated->job.gradient_checkpointing, "none");
  EXPECT_THAT(untruncated->framework_defaults, ElementsAre(loss_note));
  // fp16: false leaves TRL's bf16 = not fp16 on.
  auto fp16_off = parse_training_config("model_name_or_path: x\npacking: false\nfp16: false\n", "trl.yaml");
  ASSERT_TRUE(fp16_off.ok());
  EXPECT_THAT(fp16_off->framework_defaults, Contains("bf16 true: TRL's default since TRL 0.20 (fp16 off)"));
  // transformers' own example scripts (run_clm.py) take model_name_or_path, dataset_name and
  // max_seq_length too, with TrainingArguments' defaults: not read as TRL.
  auto run_clm = parse_training_config(R"({"model_name_or_path": "Qwen/Qwen2.5-0.5B", "dataset_name": "wikitext",
                                           "dataset_config_name": "wikitext-2-raw-v1", "per_device_train_batch_size": 8,
                                           "do_train": true, "output_dir": "/tmp/test-clm", "max_seq_length": 128})",
                                       "run_clm.json");
  ASSERT_TRUE(run_clm.ok()) << run_clm.error().message;
  const std::string fp32_note = "precision fp32: neither bf16 nor fp16 is on, so the model is loaded and trained in float32";
  EXPECT_THAT(run_clm->framework_defaults, ElementsAre(fp32_note));   // without --bf16 run_clm trains in fp32
  EXPECT_EQ(run_clm->job.precision, "fp32");
  EXPECT_FALSE(run_clm->job.gradient_checkpointing.has_value());
  // A plain TrainingArguments file (no TRL key) keeps TrainingArguments' defaults.
  auto plain = parse_training_config("per_device_train_batch_size: 4\noutput_dir: out\n", "args.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->job.seq_len.has_value());
  EXPECT_FALSE(plain->job.gradient_checkpointing.has_value());
  EXPECT_THAT(plain->framework_defaults, ElementsAre(fp32_note));
  // Axolotl with both flags off loads and trains the model in float32; bf16: auto is autocast.
  auto axolotl_fp32 = parse_training_config("base_model: x\nadapter: lora\nbf16: false\nfp16: false\n", "axolotl.yml");
  ASSERT_TRUE(axolotl_fp32.ok());
  EXPECT_EQ(axolotl_fp32->job.precision, "fp32");
  auto axolotl_auto = parse_training_config("base_model: x\nadapter: lora\nbf16: auto\n", "axolotl.yml");
  ASSERT_TRUE(axolotl_auto.ok());
  EXPECT_EQ(axolotl_auto->job.precision, "bf16");
}

TEST(TrainingConfig, InvalidYamlNamesFileAndLine) {
  auto config = read_training_config(fixture_path("fit/invalid.yml"));
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.error().message, HasSubstr("invalid.yml: line 4"));
  EXPECT_THAT(config.error().message, HasSubstr("invalid YAML"));
  // A quoted value without its closing quote: yaml-cpp would read on to the end, PyYAML refuses it.
  auto open_quote = parse_training_config("base_model: \"meta-llama/Llama-3.1-8B\nadapter: lora\n", "a.yml");
  ASSERT_FALSE(open_quote.ok());
  EXPECT_EQ(open_quote.error().message, "a.yml: line 1, column 13: invalid YAML: the double quoted value starting here "
                                        "never closes (found the end of the file first)");
  auto open_single = parse_training_config("base_model: x\ndatasets:\n  - path: 'data.jsonl\n", "a.yml");
  ASSERT_FALSE(open_single.ok());
  EXPECT_EQ(open_single.error().message, "a.yml: line 3, column 11: invalid YAML: the single quoted value starting here "
                                         "never closes (found the end of the file first)");
  // A byte order mark before the file, an alias of a node inside itself, and nested aliases: read once each.
  auto bom = parse_training_config("\xef\xbb\xbf'base_model': \"meta-llama/Llama-3.1-8B\"\nadapter: lora\n", "a.yml");
  EXPECT_TRUE(bom.ok()) << bom.error().message;
  std::string laughs = "base_model: x\nadapter: lora\na0: &a0 [\"lol\", \"lol\"]\n";
  for (int i = 1; i < 12; ++i) {
    laughs += fmt::format("a{}: &a{} [*a{}, *a{}, *a{}, *a{}, *a{}, *a{}, *a{}, *a{}, *a{}]\n", i, i, i - 1, i - 1, i - 1,
                          i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
  }
  auto nested = parse_training_config(laughs, "laughs.yml");   // (finishes at once, whatever it reports)
  (void)nested;
  auto self = parse_training_config("base_model: x\nadapter: lora\nfoo: &x [1, *x]\n", "self.yml");
  (void)self;
  // Escaped and doubled quotes inside closed values are fine.
  auto closed = parse_training_config("base_model: \"x\"\nwandb_name: \"a \\\" b\"\nwandb_project: 'it''s'\n", "a.yml");
  ASSERT_TRUE(closed.ok()) << closed.error().message;
}

TEST(TrainingConfig, BadValueNamesKeyAndLine) {
  auto config = read_training_config(fixture_path("fit/bad_value.yml"));
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.error().message,
              HasSubstr("bad_value.yml: line 2: micro_batch_size: expected a whole number, got '-2'"));
}

TEST(TrainingConfig, UnrecognisedFileIsAnError) {
  auto config = read_training_config(fixture_path("fit/not_a_config.yml"));
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.error().message, HasSubstr("not a recognised training config"));
  auto scalar = parse_training_config("just text", "x.yml");
  ASSERT_FALSE(scalar.ok());
  EXPECT_EQ(scalar.error().message,
            "x.yml: not a training config (expected a map of settings at the top level)");
  auto missing = read_training_config(fixture_path("fit/does_not_exist.yml"));
  ASSERT_FALSE(missing.ok());
}

TEST(TrainingConfig, OptimizerNotModelledWarns) {
  auto config = parse_training_config("base_model: x\noptimizer: galore_adamw\n", "c.yml");
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(config->job.optimizer.has_value());
  ASSERT_EQ(config->warnings.size(), 1u);
  EXPECT_THAT(config->warnings[0], HasSubstr("c.yml: line 2: optimizer: optimizer 'galore_adamw' is not modelled"));
}

// torchao's low-bit AdamW, as TrainingArguments names it: 4-bit is adamw_4bit, 8-bit the
// 8-bit blockwise state (two 8-bit states and a scale per 256), without a warning.
TEST(TrainingConfig, TorchaoLowBitAdamw) {
  for (const auto& [name, kind] : std::vector<std::pair<std::string, std::string>>{{"adamw_torch_4bit", "adamw_4bit"},
                                                                                   {"adamw_torch_8bit", "adamw_8bit"}}) {
    auto config = parse_training_config(R"({"per_device_train_batch_size": 1, "optim": ")" + name + R"("})", "args.json");
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_EQ(config->job.optimizer, kind) << name;
    EXPECT_THAT(config->warnings, IsEmpty()) << name;
  }
}

TEST(TrainingConfig, GradientCheckpointingOffloadMovesActivationsToHost) {
  auto config = parse_training_config("base_model: x\ngradient_checkpointing: offload\n", "c.yml");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->job.gradient_checkpointing, "full");
  EXPECT_THAT(config->job.offload, ElementsAre("activations"));
}

TEST(TrainingConfigHostile, DeepNestingBinaryAndHugeNumbersAreErrors) {
  std::string deep = "base_model: x\nfoo: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  auto nested = parse_training_config(deep, "deep.yml");
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.error().message.rfind("deep.yml: line 2", 0), 0u) << nested.error().message;
  std::string binary = "base_model: \"\\\xff\xfe\"\n";
  auto bytes = parse_training_config(binary, "bin.yml");
  ASSERT_FALSE(bytes.ok());
  for (unsigned char c : bytes.error().message) EXPECT_TRUE(c >= 0x20 && c < 0x7f);
  auto huge = parse_training_config("base_model: x\nmicro_batch_size: 99999999999999999999\n", "big.yml");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().message,
            "big.yml: line 2: micro_batch_size: 99999999999999999999 is implausibly large (more than 12 digits)");
  // Aliases are shared nodes in yaml-cpp, not copies: no exponential blow-up.
  auto alias = parse_training_config("a: &a [1,2]\nb: &b [*a,*a,*a,*a]\nc: [*b,*b,*b,*b]\nbase_model: x\n",
                                     "alias.yml");
  ASSERT_TRUE(alias.ok());
  EXPECT_EQ(alias->unknown_keys.size(), 3u);
}

// Settings the frameworks themselves refuse together are refused, naming the file, line and key:
// bf16 and fp16 (TrainingArguments), load_in_4bit and load_in_8bit (BitsAndBytesConfig), and a
// DeepSpeed stage that is not 0 to 3.
TEST(TrainingConfig, ContradictorySettingsAreErrors) {
  auto both_halves = parse_training_config(R"({"per_device_train_batch_size": 1, "bf16": true, "fp16": true})", "args.json");
  ASSERT_FALSE(both_halves.ok());
  EXPECT_EQ(both_halves.error().message,
            "args.json: line 1: fp16: bf16 and fp16 are both true; at most one can be (transformers refuses the pair)");
  auto one_off = parse_training_config(R"({"per_device_train_batch_size": 1, "bf16": true, "fp16": false})", "args.json");
  ASSERT_TRUE(one_off.ok()) << one_off.error().message;
  // Axolotl's own QLoRA validation.
  auto eight = parse_training_config("base_model: x\nadapter: qlora\nload_in_8bit: true\n", "ax.yml");
  ASSERT_FALSE(eight.ok());
  EXPECT_EQ(eight.error().message, "ax.yml: adapter: qlora with load_in_8bit: Axolotl refuses it (\"Can't load qlora in "
                                   "8bit\"); use adapter: lora for an 8-bit base");
  auto unquantized = parse_training_config("base_model: x\nadapter: qlora\n", "ax.yml");
  ASSERT_FALSE(unquantized.ok());
  EXPECT_EQ(unquantized.error().message, "ax.yml: adapter: qlora without load_in_4bit: true: Axolotl refuses it "
                                         "(\"Require cfg.load_in_4bit to be True for qlora\")");
  auto both_bits = parse_training_config("base_model: x\nadapter: qlora\nload_in_8bit: true\nload_in_4bit: true\n", "ax.yml");
  ASSERT_FALSE(both_bits.ok());
  EXPECT_EQ(both_bits.error().message, "ax.yml: line 4: load_in_4bit: load_in_4bit and load_in_8bit are both true; only one can be");
  for (const char* stage : {"\"three\"", "5", "-1"}) {
    auto ds = parse_training_config(fmt::format(R"({{"per_device_train_batch_size": 1, "deepspeed": {{"zero_optimization": {{"stage": {}}}}}}})", stage),
                                    "args.json");
    ASSERT_FALSE(ds.ok()) << stage;
    EXPECT_THAT(ds.error().message, HasSubstr("args.json: line 1: deepspeed: zero_optimization.stage: '"));
    EXPECT_THAT(ds.error().message, HasSubstr("' is not a ZeRO stage (0, 1, 2 or 3)"));
  }
  auto three = parse_training_config(R"({"per_device_train_batch_size": 1, "deepspeed": {"zero_optimization": {"stage": 3}}})", "args.json");
  ASSERT_TRUE(three.ok()) << three.error().message;
  EXPECT_EQ(three->job.parallelism, "zero3");
}

// transformers 4.x dumps still carry the deprecated fp16_backend: known, no effect on memory.
TEST(TrainingConfig, DeprecatedFp16BackendIsKnown) {
  auto config = parse_training_config(R"({"per_device_train_batch_size": 1, "fp16_backend": "auto"})", "args.json");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_THAT(config->ignored_keys, Contains("fp16_backend"));
  EXPECT_THAT(config->unknown_keys, IsEmpty());
}

// FSDP's own activation checkpointing (fsdp_config.activation_checkpointing) checkpoints whatever
// gradient_checkpointing says, in either key order; both true is what the Trainer refuses.
TEST(TrainingConfig, FsdpActivationCheckpointingInATrainingArgumentsDump) {
  for (const char* text :
       {R"({"per_device_train_batch_size": 1, "fsdp": "full_shard auto_wrap", "fsdp_config": {"activation_checkpointing": true}, "gradient_checkpointing": false})",
        R"({"per_device_train_batch_size": 1, "gradient_checkpointing": false, "fsdp": "full_shard auto_wrap", "fsdp_config": {"activation_checkpointing": true}})"}) {
    auto config = parse_training_config(text, "args.json");
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_EQ(config->job.gradient_checkpointing, "full") << text;
    EXPECT_EQ(config->job.parallelism, "fsdp_full_shard") << text;
  }
  auto both = parse_training_config(
      R"({"per_device_train_batch_size": 1, "fsdp": "full_shard", "fsdp_config": {"activation_checkpointing": true}, "gradient_checkpointing": true})",
      "args.json");
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.error().message,
            "args.json: gradient_checkpointing with fsdp_config's activation_checkpointing: the Trainer refuses it (\"The "
            "activation_checkpointing in FSDP config and the gradient_checkpointing in training arg can't be set to True "
            "simultaneously. Please use FSDP's activation_checkpointing logic when using FSDP.\"); set "
            "gradient_checkpointing false");
  // Without FSDP the Trainer never reads fsdp_config: the key changes nothing, and says so.
  auto off = parse_training_config(
      R"({"per_device_train_batch_size": 1, "fsdp": "", "fsdp_config": {"activation_checkpointing": true}, "gradient_checkpointing": true})",
      "args.json");
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_EQ(off->job.gradient_checkpointing, "full");   // from gradient_checkpointing
  EXPECT_THAT(off->warnings, Contains(HasSubstr("fsdp_config's activation_checkpointing has no effect without fsdp")));
  auto off_false = parse_training_config(
      R"({"per_device_train_batch_size": 1, "fsdp": [], "fsdp_config": {"activation_checkpointing": true}, "gradient_checkpointing": false})",
      "args.json");
  ASSERT_TRUE(off_false.ok()) << off_false.error().message;
  EXPECT_EQ(off_false->job.gradient_checkpointing, "none");
}

// A DeepSpeed config that names its optimizer: DeepSpeed builds that one, and `optim` has no effect.
TEST(TrainingConfig, DeepSpeedsOptimizerBlockReplacesOptim) {
  auto c = parse_training_config(R"({"per_device_train_batch_size": 1, "optim": "adamw_bnb_8bit", "bf16": true,
      "deepspeed": {"zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}}})",
                                 "args.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->job.optimizer, "adamw");
  EXPECT_EQ(c->job.parallelism, "zero2");
  EXPECT_THAT(c->warnings.back(), HasSubstr("the DeepSpeed config's optimizer (AdamW) is the one that runs, not adamw_8bit"));
  // ZeRO-3's sub_group_size is read (0 in Axolotl's stock zero3 configs; 1e9 written as a float).
  auto z3 = parse_training_config(R"({"per_device_train_batch_size": 1, "deepspeed": {"zero_optimization": {"stage": 3,
      "sub_group_size": 0}}})", "args.json");
  ASSERT_TRUE(z3.ok());
  EXPECT_EQ(z3->job.zero3_sub_group_size, 0u);
  auto z3_float = parse_training_config(R"({"per_device_train_batch_size": 1, "deepspeed": {"zero_optimization": {"stage": 3,
      "sub_group_size": 1e9}}})", "args.json");
  ASSERT_TRUE(z3_float.ok());
  EXPECT_EQ(z3_float->job.zero3_sub_group_size, 1000000000u);
  auto lion = parse_training_config(R"({"per_device_train_batch_size": 1, "deepspeed": {"zero_optimization": {"stage": 1},
      "optimizer": {"type": "Lion"}}})", "args.json");
  ASSERT_TRUE(lion.ok());
  EXPECT_EQ(lion->job.optimizer, "lion");
}

// deepspeed: PATH is read when it is there; only a missing path falls back to reading its name.
TEST(TrainingConfig, DeepSpeedFileThatIsNotAConfigIsAnError) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(OOMDOC_BINARY_DIR) / "training_config_ds";
  fs::remove_all(dir);
  fs::create_directories(dir / "ds_dir.json");
  std::ofstream(dir / "scalar.json") << "zero3\n";
  std::ofstream(dir / "list.json") << "[1, 2]\n";
  std::ofstream(dir / "empty.json") << "";
  std::ofstream(dir / "comment.yaml") << "# nothing here\n";
  auto err = [&](const std::string& name) {
    auto c = parse_training_config("model_name_or_path: gpt2\ndeepspeed: " + name + "\n", "train.yaml", dir.string());
    return c ? std::string("<ok>") : c.error().message;
  };
  const std::string d = dir.string() + "/";
  EXPECT_EQ(err("scalar.json"), d + "scalar.json: not a DeepSpeed config (expected an object)");
  EXPECT_EQ(err("list.json"), d + "list.json: not a DeepSpeed config (expected an object)");
  EXPECT_EQ(err("ds_dir.json"), d + "ds_dir.json: is a directory");
  // DeepSpeed refuses an empty config: it cannot stand for plain DDP.
  EXPECT_EQ(err("empty.json"), d + "empty.json: the file is empty (expected a DeepSpeed config object)");
  EXPECT_EQ(err("comment.yaml"), d + "comment.yaml: the file is empty (expected a DeepSpeed config object)");
  // Still a warning, with the stage read from the name, when the file is not there at all.
  auto missing = parse_training_config("model_name_or_path: gpt2\ndeepspeed: zero2_missing.json\n", "train.yaml",
                                       dir.string());
  ASSERT_TRUE(missing) << missing.error().message;
  EXPECT_EQ(missing->job.parallelism, "zero2");
  EXPECT_THAT(missing->warnings, Contains(HasSubstr("'zero2_missing.json' was not found")));
}

// LoRA is on only where the framework turns it on: Axolotl with `adapter`, a TrainingArguments /
// TRL config with use_peft, LLaMA-Factory by default (finetuning_type "lora").
TEST(TrainingConfig, LoraKeysAloneDoNotTurnLoraOn) {
  auto axolotl = parse_training_config("base_model: meta-llama/Meta-Llama-3-8B\nsequence_len: 2048\n"
                                       "lora_r: 8\nlora_alpha: 16\nadapter:\n", "ax.yml", "");
  ASSERT_TRUE(axolotl.ok()) << axolotl.error().message;
  EXPECT_EQ(axolotl->job.task, "train_full");
  EXPECT_FALSE(axolotl->job.lora.has_value());
  ASSERT_EQ(axolotl->warnings.size(), 1u);
  EXPECT_EQ(axolotl->warnings[0], "ax.yml: LoRA settings are given but LoRA is not turned on (no `adapter: lora` "
                                  "or `adapter: qlora`): read as full fine-tuning");

  auto trl = parse_training_config("model_name_or_path: meta-llama/Meta-Llama-3-8B\nlora_r: 16\n", "trl.yml", "");
  ASSERT_TRUE(trl.ok()) << trl.error().message;
  EXPECT_EQ(trl->job.task, "train_full");
  auto trl_peft = parse_training_config("model_name_or_path: meta-llama/Meta-Llama-3-8B\nlora_r: 16\nuse_peft: true\n",
                                        "trl.yml", "");
  ASSERT_TRUE(trl_peft.ok());
  EXPECT_EQ(trl_peft->job.task, "train_lora");
  EXPECT_EQ(trl_peft->job.lora->r, 16u);

  auto factory = parse_training_config("model_name_or_path: meta-llama/Meta-Llama-3-8B\ncutoff_len: 1024\n",
                                       "lf.yml", "");
  ASSERT_TRUE(factory.ok());
  EXPECT_EQ(factory->job.task, "train_lora");
}

// The optimizer's name fixes its implementation where it says so: the fused kernels keep no
// state-sized temporary (the foreach default does), transformers' own AdamW loops per parameter.
TEST(TrainingConfig, OptimizerNamesCarryTheirImplementation) {
  struct Case {
    const char* text;
    const char* optimizer;
    std::optional<std::string> impl;
  };
  for (const Case& c : {Case{"base_model: m\noptimizer: adamw_torch_fused\n", "adamw", "fused"},
                        Case{"base_model: m\noptimizer: adamw_torch\n", "adamw", std::nullopt},
                        Case{"output_dir: o\noptim: adamw_torch_fused\n", "adamw", "fused"},
                        Case{"output_dir: o\noptim: adamw_hf\n", "adamw", "for_loop"},
                        Case{"output_dir: o\noptim: adamw_bnb_8bit\n", "adamw_8bit", std::nullopt}}) {
    auto config = parse_training_config(c.text, "c.yml", "");
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_EQ(config->job.optimizer, c.optimizer) << c.text;
    EXPECT_EQ(config->job.optimizer_impl, c.impl) << c.text;
  }
}

TEST(TrainingConfig, LoraDropoutIsReadInEveryFormat) {
  for (const char* text : {"base_model: m\nadapter: lora\nlora_dropout: 0.1\n",
                           "model_name_or_path: m\nfinetuning_type: lora\nlora_dropout: 0.1\n",
                           "model_name_or_path: m\nuse_peft: true\nlora_dropout: 0.1\n"}) {
    auto config = parse_training_config(text, "c.yml", "");
    ASSERT_TRUE(config.ok()) << config.error().message;
    ASSERT_TRUE(config->job.lora.has_value()) << text;
    EXPECT_EQ(config->job.lora->dropout, 0.1) << text;
    EXPECT_THAT(config->used_keys, Contains("lora_dropout")) << text;
  }
  auto bad = parse_training_config("base_model: m\nadapter: lora\nlora_dropout: 1.5\n", "c.yml", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "c.yml: line 3: lora_dropout: expected a probability in [0, 1), got 1.5");
}

// A JSON dump and a TRL CLI YAML hold the same keys; the syntax decides how advice is written back.
TEST(TrainingConfig, RecordsWhetherTheFileIsYamlOrJson) {
  auto yaml = parse_training_config("model_name_or_path: m\nper_device_train_batch_size: 2\n", "c.yaml", "");
  auto json = parse_training_config("  {\"output_dir\": \"o\", \"per_device_train_batch_size\": 2}", "c.json", "");
  ASSERT_TRUE(yaml.ok() && json.ok());
  EXPECT_TRUE(yaml->yaml_syntax);
  EXPECT_FALSE(json->yaml_syntax);
  EXPECT_EQ(json->job.micro_batch_size, 2u);
}

// Newer Axolotl names the attention backend in one key (`attention: flash` in its examples,
// `attn_implementation` since PR #3602); kernels that never hold the scores read as flash.
TEST(TrainingConfig, AxolotlAttentionBackendKeys) {
  struct Case {
    const char* text;
    const char* impl;
  };
  for (const Case& c : {Case{"base_model: m\nattention: flash\n", "flash"},
                        Case{"base_model: m\nattention: sdpa\n", "sdpa"},
                        Case{"base_model: m\nattention: eager\n", "eager"},
                        Case{"base_model: m\nattn_implementation: flex_attention\n", "flash"},
                        Case{"base_model: m\nattn_implementation: xformers\n", "sdpa"},
                        Case{"base_model: m\nattn_implementation: flash_attention_2\n", "flash"}}) {
    auto config = parse_training_config(c.text, "ax.yml", "");
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_EQ(config->format, TrainingConfigFormat::kAxolotl) << c.text;
    EXPECT_EQ(config->job.attention_impl, c.impl) << c.text;
    EXPECT_THAT(config->unknown_keys, IsEmpty()) << c.text;
  }
}

// PEFT's modules_to_save under every framework's name for it.
TEST(TrainingConfigQa3, ModulesToSaveAreRead) {
  auto axolotl = parse_training_config("base_model: x\nadapter: lora\nbf16: auto\nlora_modules_to_save:\n  - embed_tokens\n"
                                       "  - lm_head\n", "axolotl.yml");
  ASSERT_TRUE(axolotl.ok()) << axolotl.error().message;
  ASSERT_TRUE(axolotl->job.lora.has_value());
  EXPECT_EQ(axolotl->job.lora->modules_to_save, (std::vector<std::string>{"embed_tokens", "lm_head"}));
  auto factory = parse_training_config("model_name_or_path: x\nstage: sft\nfinetuning_type: lora\n"
                                       "additional_target: embed_tokens,lm_head\n", "llamafactory.yaml");
  ASSERT_TRUE(factory.ok()) << factory.error().message;
  ASSERT_TRUE(factory->job.lora.has_value());
  EXPECT_EQ(factory->job.lora->modules_to_save, (std::vector<std::string>{"embed_tokens", "lm_head"}));
}

TEST(TrainingConfigQa3, PreferenceStagesAreRead) {
  auto objective_of = [](const std::string& text, const std::string& name) -> std::string {
    auto c = parse_training_config(text, name);
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
    return c.ok() && c->job.objective ? *c->job.objective : std::string("sft");
  };
  EXPECT_EQ(objective_of("model_name_or_path: x\nstage: dpo\nfinetuning_type: lora\n", "lf.yaml"), "dpo");
  EXPECT_EQ(objective_of("model_name_or_path: x\nstage: dpo\npref_loss: orpo\nfinetuning_type: lora\n", "lf.yaml"), "orpo");
  EXPECT_EQ(objective_of("model_name_or_path: x\nstage: rm\nfinetuning_type: lora\n", "lf.yaml"), "reward");
  EXPECT_EQ(objective_of("model_name_or_path: x\nstage: sft\nfinetuning_type: lora\n", "lf.yaml"), "sft");
  EXPECT_EQ(objective_of("base_model: x\nadapter: lora\nbf16: auto\nrl: dpo\n", "axolotl.yml"), "dpo");
  EXPECT_EQ(objective_of("model_name_or_path: x\nper_device_train_batch_size: 2\nbeta: 0.1\nprecompute_ref_log_probs: false\n",
                         "dpo.yaml"), "dpo");
  // TRL's DPO example keys without a reference-model key: DPO, with a warning naming the others.
  auto keys = parse_training_config("model_name_or_path: x\nper_device_train_batch_size: 2\nbeta: 0.1\n"
                                    "max_prompt_length: 512\nmax_length: 1024\n", "dpo.yaml");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->job.objective.value_or(""), "dpo");
  EXPECT_THAT(keys->used_keys, Contains("beta"));
  EXPECT_THAT(keys->used_keys, Contains("max_prompt_length"));
  EXPECT_THAT(keys->ignored_keys, Not(Contains("beta")));
  EXPECT_THAT(keys->warnings, Contains("dpo.yaml: keys of TRL's preference trainers (beta, max_prompt_length...) but no "
                                       "loss_type naming one; read as DPO (pairs and a reference model, the largest of "
                                       "them); pass --objective orpo, cpo or kto for those"));
  // CPOConfig shares DPO's loss names (its default is sigmoid), without a reference model.
  EXPECT_EQ(objective_of("{\"model_name_or_path\": \"x\", \"beta\": 0.1, \"cpo_alpha\": 1.0, \"loss_type\": \"sigmoid\"}",
                         "cpo.json"), "cpo");
  // GKD (a teacher) and PRM (a step classifier) share keys with DPO: not read as DPO.
  EXPECT_EQ(objective_of("model_name_or_path: x\nbeta: 0.5\nlmbda: 0.5\n", "gkd.yaml"), "sft");
  EXPECT_EQ(objective_of("model_name_or_path: x\nmax_prompt_length: 512\nstep_separator: \"\\n\"\n", "prm.yaml"), "sft");
  // GRPO shares beta and the lengths but generates: not read as DPO, by its keys or by its loss_type.
  EXPECT_EQ(objective_of("model_name_or_path: x\nloss_type: dr_grpo\nbeta: 0.04\nmax_prompt_length: 512\n", "grpo.yaml"),
            "sft");
  EXPECT_EQ(objective_of("model_name_or_path: x\nbeta: 0.04\nmax_completion_length: 256\nnum_generations: 8\n",
                         "grpo.yaml"), "sft");
}

// LLaMA-Factory's quantization_method and the combinations it refuses (hparams/parser.py,
// model_utils/quantization.py).
TEST(TrainingConfigQa23, LlamaFactoryQuantizationMethodsAndRefusals) {
  const std::string base = "model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\nstage: sft\n";
  auto full = parse_training_config(base + "finetuning_type: full\nquantization_bit: 4\n", "lf.yaml");
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().message, "lf.yaml: quantization_bit with finetuning_type full: LLaMA-Factory refuses it "
                                  "(\"Quantization is only compatible with the LoRA method.\")");
  auto eetq4 = parse_training_config(base + "quantization_bit: 4\nquantization_method: eetq\n", "lf.yaml");
  ASSERT_FALSE(eetq4.ok());
  EXPECT_EQ(eetq4.error().message, "lf.yaml: line 4: quantization_method: eetq with quantization_bit 4: LLaMA-Factory "
                                   "refuses it (\"EETQ only accepts 8-bit quantization.\")");
  auto eetq8 = parse_training_config(base + "quantization_bit: 8\nquantization_method: eetq\n", "lf.yaml");
  ASSERT_TRUE(eetq8.ok()) << eetq8.error().message;
  EXPECT_EQ(eetq8->job.weight_quantization, "int8");
  EXPECT_THAT(eetq8->used_keys, Contains("quantization_method"));
  auto hqq = parse_training_config(base + "quantization_bit: 4\nquantization_method: hqq\n", "lf.yaml");
  ASSERT_TRUE(hqq.ok()) << hqq.error().message;
  EXPECT_EQ(hqq->job.task, "train_qlora");
  EXPECT_THAT(hqq->warnings, Contains("lf.yaml: line 4: quantization_method: HQQ is not modelled (group 64, a 16-bit "
                                      "scale and zero per group); sized as bitsandbytes 4-bit, a little smaller"));
  auto gptq = parse_training_config(base + "quantization_bit: 4\nquantization_method: gptq\n", "lf.yaml");
  ASSERT_FALSE(gptq.ok());
  auto bnb = parse_training_config(base + "quantization_bit: 4\nquantization_method: bnb\n", "lf.yaml");
  ASSERT_TRUE(bnb.ok());
  EXPECT_EQ(bnb->job.weight_quantization, "nf4");
}

TEST(TrainingConfigQa3, AKeyGivenTwiceKeepsTheLastAndSaysSo) {
  auto c = parse_training_config("base_model: x\nadapter: lora\nbf16: auto\nmicro_batch_size: 2\nmicro_batch_size: 8\n",
                                 "axolotl.yml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->job.micro_batch_size, 8u);
  EXPECT_EQ(std::count(c->used_keys.begin(), c->used_keys.end(), "micro_batch_size"), 1);
  ASSERT_FALSE(c->warnings.empty());
  EXPECT_EQ(c->warnings.front(), "axolotl.yml: line 5: 'micro_batch_size' is given again (first on line 4); the last "
                                 "value is used, as PyYAML does");
  // A TrainingArguments JSON dump is read with Python's json, which also keeps the last value.
  auto j = parse_training_config("{\"model_name_or_path\": \"x\",\n\"per_device_train_batch_size\": 2,\n"
                                 "\"per_device_train_batch_size\": 4}\n", "args.json");
  ASSERT_TRUE(j.ok()) << j.error().message;
  EXPECT_EQ(j->job.micro_batch_size, 4u);
  ASSERT_FALSE(j->warnings.empty());
  EXPECT_EQ(j->warnings.front(), "args.json: line 3: 'per_device_train_batch_size' is given again (first on line 2); "
                                 "the last value is used, as Python's json module does");
}

TEST(TrainingConfigQa3, Bf16AutoFallsBackToFp16WithoutBf16) {
  auto c = parse_training_config("base_model: x\nadapter: lora\nbf16: auto\n", "axolotl.yml");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->bf16_auto);
  Job job = c->job;
  EXPECT_FALSE(fp16_where_no_bf16(*c, job, /*gpu_has_bf16=*/true, "A100").has_value());
  EXPECT_EQ(job.precision, "bf16");
  auto note = fp16_where_no_bf16(*c, job, /*gpu_has_bf16=*/false, "Tesla T4 16GB");
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(job.precision, "fp16");
  EXPECT_EQ(*note, "bf16: auto on Tesla T4 16GB (no bfloat16): trained in fp16 as Axolotl falls back (fp16)");
  // bf16: true is what the file asks for: left alone (fit says it will not run).
  auto explicit_bf16 = parse_training_config("base_model: x\nadapter: lora\nbf16: true\n", "axolotl.yml");
  ASSERT_TRUE(explicit_bf16.ok());
  Job kept = explicit_bf16->job;
  EXPECT_FALSE(fp16_where_no_bf16(*explicit_bf16, kept, false, "T4").has_value());
}

// Only the last occurrence of a repeated key takes effect: the first value's side effects
// (rl's objective, adapter's task) do not persist.
TEST(TrainingConfigQa4, ARepeatedKeyKeepsNoEffectOfTheFirst) {
  auto c = parse_training_config("base_model: x\nadapter: lora\nbf16: true\nrl: dpo\nrl:\n", "axolotl.yml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FALSE(c->job.objective.has_value());
  auto q = parse_training_config("base_model: x\nadapter: qlora\nload_in_4bit: true\nbf16: true\nadapter: lora\nload_in_4bit: false\n",
                                 "axolotl.yml");
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q->job.task, "train_lora");
  EXPECT_FALSE(q->job.weight_quantization.has_value());
}

TEST(TrainingConfigQa4, DpoPrecomputedReferenceAndBetaAreRead) {
  auto c = parse_training_config("model_name_or_path: x\nper_device_train_batch_size: 2\nbeta: 0.1\n"
                                 "precompute_ref_log_probs: true\n", "dpo.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->job.objective, "dpo");
  EXPECT_EQ(c->job.precompute_ref_log_probs, true);
  EXPECT_TRUE(c->unknown_keys.empty());
}

TEST(TrainingConfigQa5, LlamaFactoryLoadsTheReferenceInTheComputeDtype) {
  auto c = parse_training_config("model_name_or_path: x\nstage: dpo\nfinetuning_type: full\nbf16: true\n", "lf.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->job.objective, "dpo");
  EXPECT_EQ(c->job.reference_dtype, "bf16");
  // LoRA keeps no reference copy; simpo keeps no reference at all.
  auto lora = parse_training_config("model_name_or_path: x\nstage: dpo\nfinetuning_type: lora\nbf16: true\n", "lf.yaml");
  ASSERT_TRUE(lora.ok());
  EXPECT_FALSE(lora->job.reference_dtype.has_value());
  auto simpo = parse_training_config("model_name_or_path: x\nstage: dpo\npref_loss: simpo\nfinetuning_type: full\n"
                                     "bf16: true\n", "lf.yaml");
  ASSERT_TRUE(simpo.ok());
  EXPECT_FALSE(simpo->job.reference_dtype.has_value());
}

TEST(TrainingConfigQa4, AxolotlLoadsAnEightBitBaseInFp16) {
  auto c = parse_training_config("base_model: x\nadapter: lora\nload_in_8bit: true\n", "axolotl.yml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->job.precision, "fp16");
  auto plain = parse_training_config("base_model: x\nadapter: lora\n", "axolotl.yml");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->job.precision, "fp32");
}

// Axolotl's lora_target_linear adds every linear layer to lora_target_modules, in either order.
TEST(TrainingConfigQa4, AxolotlTargetLinearIsAUnionWithTheNamedModules) {
  for (const char* text : {"base_model: x\nadapter: lora\nbf16: true\nlora_target_linear: true\nlora_target_modules: [lm_head]\n",
                           "base_model: x\nadapter: lora\nbf16: true\nlora_target_modules: [lm_head]\nlora_target_linear: true\n"}) {
    auto c = parse_training_config(text, "axolotl.yml");
    ASSERT_TRUE(c.ok()) << c.error().message;
    ASSERT_TRUE(c->job.lora);
    EXPECT_TRUE(c->job.lora->all_linear) << text;
    EXPECT_EQ(c->job.lora->target_modules, std::vector<std::string>{"lm_head"}) << text;
  }
}

// Keys that change memory in ways oomdoc does not model are said aloud (QA round 8: Axolotl's
// unfrozen_parameters was filed as "ignored" while it left 35 GiB of optimizer state oversized);
// the same key off changes nothing; harmless keys fit advises (use_reentrant_gc) are known.
TEST(TrainingConfig, KeysThatChangeMemoryButAreNotModelledAreWarnings) {
  auto config = parse_training_config(R"(base_model: meta-llama/Llama-3.1-8B
sequence_len: 2048
micro_batch_size: 1
unfrozen_parameters:
  - ^lm_head.weight$
torch_compile: false
sequence_parallel_degree: 2
loss_watchdog_threshold: 5.0
)", "ax.yml");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_THAT(config->unmodeled_keys, ElementsAre("unfrozen_parameters"));
  EXPECT_THAT(config->ignored_keys, ElementsAre("torch_compile", "loss_watchdog_threshold"));
  EXPECT_THAT(config->unknown_keys, IsEmpty());
  EXPECT_THAT(config->warnings,
              ElementsAre("ax.yml: line 4: 'unfrozen_parameters' changes memory in a way oomdoc does not model; the "
                          "prediction is without it"));
  // Axolotl's parallel degrees and activation offloading are the job's own settings.
  EXPECT_THAT(config->used_keys, Contains("sequence_parallel_degree"));
  EXPECT_EQ(config->job.cp, 2u);
  auto offloading = parse_training_config("base_model: meta-llama/Llama-3.1-8B\nactivation_offloading: legacy\n"
                                          "tensor_parallel_size: 2\nuse_dora: 1\n", "ax2.yml");
  ASSERT_TRUE(offloading) << offloading.error().message;
  EXPECT_THAT(offloading->job.offload, ElementsAre("activations"));
  EXPECT_EQ(offloading->job.tp, 2u);
  EXPECT_THAT(offloading->unmodeled_keys, ElementsAre("use_dora"));   // 1 is true, as Python reads it
  auto factory = parse_training_config(R"(model_name_or_path: meta-llama/Llama-3.1-8B
stage: sft
finetuning_type: lora
cutoff_len: 1024
use_reentrant_gc: false
print_param_status: true
)", "lf.yaml");
  ASSERT_TRUE(factory) << factory.error().message;
  EXPECT_THAT(factory->unknown_keys, IsEmpty());
  EXPECT_THAT(factory->ignored_keys, IsSupersetOf({"use_reentrant_gc", "print_param_status"}));
}

}  // namespace
}  // namespace oomdoc
