#include "analyses/fit_config_keys.h"

#include <gtest/gtest.h>

namespace oomdoc {
namespace {

std::vector<std::string> keys(const FitSetting& s, TrainingConfigFormat format) {
  std::vector<std::string> out;
  for (const auto& k : config_keys_for(s, format)) out.push_back(k.target + " " + k.name + ": " + k.value);
  return out;
}

TEST(FitConfigKeys, AxolotlKeys) {
  const auto ax = TrainingConfigFormat::kAxolotl;
  EXPECT_EQ(keys({"TrainingArguments", "per_device_train_batch_size", "1"}, ax),
            std::vector<std::string>{"Axolotl YAML micro_batch_size: 1"});
  EXPECT_EQ(keys({"SFTConfig", "max_length", "2048"}, ax), std::vector<std::string>{"Axolotl YAML sequence_len: 2048"});
  EXPECT_EQ(keys({"TrainingArguments", "optim", "\"adamw_bnb_8bit\""}, ax),
            std::vector<std::string>{"Axolotl YAML optimizer: adamw_bnb_8bit"});
  EXPECT_EQ(keys({"TrainingArguments", "gradient_checkpointing_kwargs", "{\"use_reentrant\": False}"}, ax),
            std::vector<std::string>{"Axolotl YAML gradient_checkpointing_kwargs: {\"use_reentrant\": false}"});
  EXPECT_EQ(keys({"LoraConfig", "target_modules", "\"all-linear\""}, ax),
            std::vector<std::string>{"Axolotl YAML lora_target_linear: true"});
  EXPECT_EQ(keys({"BitsAndBytesConfig", "load_in_4bit", "True"}, ax),
            (std::vector<std::string>{"Axolotl YAML adapter: qlora", "Axolotl YAML load_in_4bit: true"}));
  // TrainingArguments' FSDP words are Axolotl's fsdp list (FSDP CPU offload included).
  EXPECT_EQ(keys({"TrainingArguments", "fsdp", "\"full_shard offload auto_wrap\""}, ax),
            std::vector<std::string>{"Axolotl YAML fsdp: [full_shard, offload, auto_wrap]"});
  EXPECT_EQ(keys({"TrainingArguments", "fsdp", "\"full_shard auto_wrap\""}, ax),
            std::vector<std::string>{"Axolotl YAML fsdp: [full_shard, auto_wrap]"});
  // No Axolotl key: the Hugging Face setting stays.
  EXPECT_EQ(keys({"TrainingArguments", "accelerator_config", "{}"}, ax),
            std::vector<std::string>{"TrainingArguments accelerator_config: {}"});
}

TEST(FitConfigKeys, LlamaFactoryKeys) {
  const auto lf = TrainingConfigFormat::kLlamaFactory;
  EXPECT_EQ(keys({"SFTConfig", "max_length", "2048"}, lf), std::vector<std::string>{"LLaMA-Factory YAML cutoff_len: 2048"});
  EXPECT_EQ(keys({"LoraConfig", "r", "16"}, lf),
            (std::vector<std::string>{"LLaMA-Factory YAML finetuning_type: lora", "LLaMA-Factory YAML lora_rank: 16"}));
  // (The method said outright: a file set to HQQ or EETQ would keep it, and EETQ refuses 4 bits.)
  EXPECT_EQ(keys({"BitsAndBytesConfig", "load_in_4bit", "True"}, lf),
            (std::vector<std::string>{"LLaMA-Factory YAML quantization_bit: 4", "LLaMA-Factory YAML quantization_method: bnb"}));
  EXPECT_EQ(keys({"TrainingArguments", "gradient_checkpointing", "True"}, lf),
            std::vector<std::string>{"LLaMA-Factory YAML disable_gradient_checkpointing: false"});
  EXPECT_EQ(keys({"from_pretrained", "attn_implementation", "\"flash_attention_2\""}, lf),
            std::vector<std::string>{"LLaMA-Factory YAML flash_attn: fa2"});
  // bf16 weights: LLaMA-Factory upcasts trainable weights to fp32 unless pure_bf16.
  EXPECT_EQ(keys({"from_pretrained", "torch_dtype", "torch.bfloat16"}, lf),
            std::vector<std::string>{"LLaMA-Factory YAML pure_bf16: true"});
  // A TrainingArguments dump keeps Hugging Face's names.
  EXPECT_EQ(keys({"SFTConfig", "max_length", "2048"}, TrainingConfigFormat::kHfTrainingArguments),
            std::vector<std::string>{"SFTConfig max_length: 2048"});
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

TEST(FitConfigKeys, DeepSpeedFileContentIsJsonAndReentrancyIsLlamaFactorys) {
  const FitSetting ds{"TrainingArguments", "deepspeed",
                      "{\"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": True}}}"};
  EXPECT_EQ(keys(ds, TrainingConfigFormat::kAxolotl),
            std::vector<std::string>{"Axolotl YAML deepspeed: a JSON file holding {\"zero_optimization\": {\"stage\": 3, "
                                     "\"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}}}"});
  EXPECT_EQ(keys({"TrainingArguments", "gradient_checkpointing_kwargs", "{\"use_reentrant\": False}"},
                 TrainingConfigFormat::kLlamaFactory),
            std::vector<std::string>{"LLaMA-Factory YAML use_reentrant_gc: false"});
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// A TrainingArguments/TRL config written as YAML (TRL's CLI) is advised in TRL's YAML keys.
TEST(FitConfigKeys, TrlYamlKeys) {
  FitReport report;
  FitAlternative a;
  a.change.settings = {{"SFTConfig", "max_length", "2048"},
                       {"LoraConfig", "r", "16"},
                       {"LoraConfig", "target_modules", "\"all-linear\""},
                       {"BitsAndBytesConfig", "bnb_4bit_use_double_quant", "True"}};
  report.alternatives.push_back(a);
  TrainingConfig trl;
  trl.format = TrainingConfigFormat::kHfTrainingArguments;
  trl.yaml_syntax = true;
  express_in_config_keys(report, trl);
  std::vector<std::string> got;
  for (const auto& s : report.alternatives[0].change.settings) got.push_back(s.target + " " + s.name + ": " + s.value);
  // lora_dropout 0 as the plan was sized (TRL's ModelConfig would default to 0.05).
  EXPECT_EQ(got, (std::vector<std::string>{"TRL YAML max_length: 2048", "TRL YAML use_peft: true", "TRL YAML lora_r: 16",
                                           "TRL YAML lora_dropout: 0", "TRL YAML lora_target_modules: all-linear",
                                           "TRL YAML use_bnb_nested_quant: true"}));
  // The same settings from a JSON dump stay in Hugging Face's Python form.
  FitReport json_report;
  json_report.alternatives.push_back(a);
  TrainingConfig dump = trl;
  dump.yaml_syntax = false;
  express_in_config_keys(json_report, dump);
  EXPECT_EQ(json_report.alternatives[0].change.settings[0].target, "SFTConfig");
}

// Axolotl's bnb_config_kwargs is one mapping: every BitsAndBytesConfig key joins it, none is lost
// (the quant storage sharding needs came after the quant type and was dropped).
TEST(FitConfigKeys, AxolotlBnbKwargsJoin) {
  FitReport report;
  FitAlternative a;
  a.change.settings = {{"BitsAndBytesConfig", "load_in_4bit", "True"},
                       {"BitsAndBytesConfig", "bnb_4bit_quant_type", "\"nf4\""},
                       {"BitsAndBytesConfig", "bnb_4bit_use_double_quant", "True"},
                       {"BitsAndBytesConfig", "bnb_4bit_quant_storage", "torch.bfloat16"}};
  report.alternatives.push_back(a);
  TrainingConfig axolotl;
  axolotl.format = TrainingConfigFormat::kAxolotl;
  express_in_config_keys(report, axolotl);
  std::vector<std::string> got;
  for (const auto& s : report.alternatives[0].change.settings) got.push_back(s.target + " " + s.name + ": " + s.value);
  EXPECT_EQ(got, (std::vector<std::string>{"Axolotl YAML adapter: qlora", "Axolotl YAML load_in_4bit: true",
                                           "Axolotl YAML bnb_config_kwargs: {bnb_4bit_quant_type: nf4, "
                                           "bnb_4bit_use_double_quant: true, bnb_4bit_quant_storage: bfloat16}"}));
}

}  // namespace
}  // namespace oomdoc
