#include "report/estimate_report.h"

#include <fmt/format.h>

#include "analyses/estimator.h"
#include "core/saturating.h"
#include "core/units.h"
#include "readers/job_file.h"
#include "report/config_report.h"

namespace oomdoc {

std::string format_predicted_bytes(uint64_t bytes) {
  return is_saturated(bytes) ? "over 16 EiB" : format_bytes(bytes);
}

std::string render_estimate_text(const ModelSpec& model, const Estimate& est, const Style& style,
                                 const TrainingConfig* config) {
  std::string out;
  out += style.bold(model.label());
  out += fmt::format(" ({} params, {}{})\n", format_count(model.total_params),
                     model.base_model_id.empty() ? "" : "base model " + model.base_model_id + ", ", model.source);
  if (config) out += render_config_summary(*config, style);
  const std::string phase = est.peak_phase == "forward" ? "the forward pass" : est.peak_phase;
  out += fmt::format("Peak per GPU during {}: {}{}\n\n", phase, style.bold(format_predicted_bytes(est.device_used_bytes)),
                     is_saturated(est.device_used_bytes) ? style.red(" (beyond any GPU)") : "");
  size_t width = 10;
  for (const auto& c : est.components) width = std::max(width, c.name.size());
  for (const auto& c : est.components) {
    std::string line = fmt::format("  {:<{}}  {:>11}  ", c.name, width, format_predicted_bytes(c.bytes));
    out += (c.name == est.dominant_component ? style.bold(line) : line) + style.dim(c.detail) + "\n";
  }
  double band = est.uncertainty_fraction;
  out += "\n";
  const bool llama_cpp = est.allocator == "llama_cpp";
  out += fmt::format("  {:<{}}  {:>11}  {}\n", "allocated", width, format_predicted_bytes(est.peak_allocated_bytes),
                     llama_cpp ? "llama.cpp's buffers (model, KV, compute), as it logs them" : "torch.cuda.max_memory_allocated()");
  out += fmt::format("  {:<{}}  {:>11}  {}\n", "reserved", width, format_predicted_bytes(est.peak_reserved_bytes),
                     llama_cpp ? "the same: no caching allocator" : "torch.cuda.max_memory_reserved()");
  if (is_saturated(est.device_used_bytes)) {
    out += fmt::format("  {:<{}}  {:>11}  nvidia-smi\n", "device", width, format_predicted_bytes(est.device_used_bytes));
  } else {
    out += fmt::format("  {:<{}}  {:>11}  nvidia-smi, +-{:.0f}% ({} to {})\n", "device", width, format_bytes(est.device_used_bytes),
                       band * 100, format_bytes(saturated_bytes(static_cast<double>(est.device_used_bytes) * (1 - band))),
                       format_predicted_bytes(saturated_bytes(static_cast<double>(est.device_used_bytes) * (1 + band))));
  }
  if (est.reclaimable_bytes > 0 && !is_saturated(est.device_used_bytes)) {
    out += fmt::format("  {:<{}}  {:>11}  to fit: device less the allocator's reclaimable cache ({})\n", "needed",
                       width, format_bytes(oom_view(est).device_used_bytes), format_bytes(est.reclaimable_bytes));
  }
  for (const auto& w : est.warnings) out += "\nwarning: " + w + "\n";
  if (!est.assumptions.empty()) {
    out += "\nAssumed:\n";
    for (const auto& a : est.assumptions) out += "  - " + a + "\n";
  }
  return out;
}

Json estimate_to_json(const ModelSpec& model, const Job& job, const Estimate& est,
                      const TrainingConfig* config) {
  Json doc = json_document_header("estimate");
  Json m;
  m["id"] = model.id.empty() ? Json(nullptr) : Json(model.id);
  m["name"] = model.label();
  m["model_type"] = model.model_type;
  m["source"] = model.source;
  m["base_model"] = model.base_model_id.empty() ? Json(nullptr) : Json(model.base_model_id);
  m["total_params"] = model.total_params;
  m["num_layers"] = model.num_layers;
  m["hidden_size"] = model.hidden_size;
  m["vocab_size"] = model.vocab_size;
  doc["model"] = m;
  doc["job"] = job_to_json(job);
  Json components = Json::array();
  for (const auto& c : est.components) {
    components.push_back(Json{{"name", c.name}, {"bytes", c.bytes}, {"detail", c.detail}});
  }
  doc["components"] = components;
  Json breakdown = Json::array();
  for (const auto& c : est.breakdown) {
    breakdown.push_back(Json{{"name", c.name}, {"bytes", c.bytes}, {"detail", c.detail}});
  }
  doc["breakdown"] = breakdown;
  doc["peak_allocated_bytes"] = est.peak_allocated_bytes;
  doc["peak_reserved_bytes"] = est.peak_reserved_bytes;
  doc["device_used_bytes"] = est.device_used_bytes;
  doc["reclaimable_bytes"] = est.reclaimable_bytes;
  doc["needed_bytes"] = oom_view(est).device_used_bytes;
  doc["peak_phase"] = est.peak_phase;
  doc["allocator"] = est.allocator;
  doc["dominant_component"] = est.dominant_component;
  doc["uncertainty_fraction"] = est.uncertainty_fraction;
  // A saturated total has no band: it is at least 2^64-1 whatever the fraction.
  const double device = static_cast<double>(est.device_used_bytes);
  const bool saturated = is_saturated(est.device_used_bytes);
  doc["device_used_low_bytes"] = saturated ? kSaturatedBytes : saturated_bytes(device * (1 - est.uncertainty_fraction));
  doc["device_used_high_bytes"] = saturated ? kSaturatedBytes : saturated_bytes(device * (1 + est.uncertainty_fraction));
  doc["saturated"] = saturated;
  doc["assumptions"] = est.assumptions;
  doc["config"] = training_config_json(config);
  std::vector<std::string> warnings = config ? config->warnings : std::vector<std::string>{};
  warnings.insert(warnings.end(), est.warnings.begin(), est.warnings.end());
  doc["warnings"] = warnings;
  doc["will_not_run"] = est.will_not_run;
  return doc;
}

}  // namespace oomdoc
