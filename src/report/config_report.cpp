#include "report/config_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace oomdoc {

std::string render_config_summary(const TrainingConfig& config, const Style& style) {
  std::string out;
  out += style.dim(fmt::format("config ({}): used {}; ignored {}{}{}", training_config_format_name(config.format),
                               config.used_keys.size(), config.ignored_keys.size(),
                               config.unmodeled_keys.empty()
                                   ? std::string()
                                   : fmt::format("; not modelled {}", config.unmodeled_keys.size()),
                               config.unknown_keys.empty()
                                   ? std::string()
                                   : fmt::format("; unknown {}", config.unknown_keys.size()))) + "\n";
  out += style.dim(fmt::format("  used: {}", fmt::join(config.used_keys, ", "))) + "\n";
  if (!config.ignored_keys.empty()) {
    out += style.dim(fmt::format("  ignored (no effect on memory): {}", fmt::join(config.ignored_keys, ", "))) + "\n";
  }
  if (!config.unmodeled_keys.empty()) {
    out += style.dim(fmt::format("  not modelled: {}", fmt::join(config.unmodeled_keys, ", "))) + "\n";
  }
  for (const auto& d : config.framework_defaults) out += style.dim("  default: " + d) + "\n";
  for (const auto& w : config.warnings) out += style.yellow("warning: " + w) + "\n";
  return out;
}

Json training_config_json(const TrainingConfig* config) {
  if (!config) return nullptr;
  return {{"format", std::string(training_config_format_name(config->format))},
          {"used_keys", config->used_keys},
          {"ignored_keys", config->ignored_keys},
          {"unmodeled_keys", config->unmodeled_keys},
          {"unknown_keys", config->unknown_keys},
          {"framework_defaults", config->framework_defaults}};
}

}  // namespace oomdoc
