// fit's settings in the user's own config keys. The search speaks Hugging Face (TrainingArguments,
// SFTConfig, LoraConfig, BitsAndBytesConfig, from_pretrained); a job read from an Axolotl or
// LLaMA-Factory YAML gets each setting those tools have a key for rewritten into that key, so the
// advice can be pasted into the file the user gave. Settings without such a key stay as they are.
#pragma once

#include "analyses/fit_search.h"
#include "readers/training_config.h"

namespace oomdoc {

// The YAML key(s) for one Hugging Face setting in `format`, or an empty list when that tool has
// none. `format` kHfTrainingArguments returns the setting unchanged.
std::vector<FitSetting> config_keys_for(const FitSetting& setting, TrainingConfigFormat format);

// Rewrites every change's settings in the report (plan, alternatives) into the config's keys; a
// TrainingArguments/TRL config written as YAML (TRL's CLI) gets TRL's YAML keys.
void express_in_config_keys(FitReport& report, const TrainingConfig& config);

}  // namespace oomdoc
