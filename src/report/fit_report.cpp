#include "report/fit_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/saturating.h"
#include "core/units.h"
#include "report/estimate_report.h"
#include "readers/job_file.h"
#include "report/config_report.h"

namespace oomdoc {
namespace {

// "197.12 GiB per GPU, 1.54 TiB for the 8 GPUs": each rank offloads its own shard.
std::string host_ram(uint64_t per_gpu, uint64_t num_gpus) {
  if (num_gpus <= 1) return format_bytes(per_gpu);
  return fmt::format("{} per GPU, {} for the {} GPUs", format_bytes(per_gpu), format_bytes(per_gpu * num_gpus), num_gpus);
}

std::string percent_of(uint64_t part, uint64_t whole) {
  if (whole == 0 || is_saturated(part)) return "?";
  return fmt::format("{:.0f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

// "TrainingArguments(bf16=True, optim="adamw_bnb_8bit")", "environment: X=Y", in first-seen order.
std::vector<std::string> settings_lines(const std::vector<FitSetting>& settings) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> by_target;
  for (const auto& s : settings) {
    if (!by_target.count(s.target)) order.push_back(s.target);
    if (s.target == "environment") by_target[s.target].push_back(s.name + "=" + s.value);
    else if (s.value.size() > 0 && s.value[0] == '(') by_target[s.target].push_back(s.name + s.value);
    else by_target[s.target].push_back(s.name + "=" + s.value);
  }
  std::vector<std::string> lines;
  for (const auto& target : order) {
    const auto& items = by_target[target];
    if (target == "environment") {
      lines.push_back("export " + fmt::format("{}", fmt::join(items, " ")));
    } else if (!items.empty() && items.front().rfind("--", 0) == 0) {
      // Command-line flags (torchtitan, Megatron-LM, vllm serve): "target: --flag value ...".
      std::vector<std::string> flags;
      for (const auto& s : settings) {
        if (s.target == target) flags.push_back(s.value.empty() ? s.name : s.name + " " + s.value);
      }
      lines.push_back(fmt::format("{}: {}", target, fmt::join(flags, " ")));
    } else if (target == "GGUF file") {
      for (const auto& s : settings) {
        if (s.target == target) lines.push_back(fmt::format("a {} GGUF file (llama-quantize it, or download one)", s.name));
      }
    } else if (target == "python") {
      // A line of code, shown as it is.
      for (const auto& st : settings) {
        if (st.target == target) lines.push_back(st.name);
      }
    } else if (target.size() > 5 && target.compare(target.size() - 5, 5, " YAML") == 0) {
      // The user's own config file (Axolotl, LLaMA-Factory): its keys, as they are written there.
      std::vector<std::string> keys;
      for (const auto& st : settings) {
        if (st.target == target) keys.push_back(st.name + ": " + st.value);
      }
      lines.push_back(fmt::format("{}: {}", target, fmt::join(keys, "; ")));
    } else if (target == "peft") {
      for (const auto& i : items) lines.push_back("peft." + i);
    } else {
      lines.push_back(fmt::format("{}({})", target, fmt::join(items, ", ")));
    }
  }
  return lines;
}

void add_totals(Json& j, const PredictedTotals& t) {
  j["peak_allocated_bytes"] = t.peak_allocated_bytes;
  j["peak_reserved_bytes"] = t.peak_reserved_bytes;
  j["device_used_bytes"] = t.device_used_bytes;
  j["needed_bytes"] = t.needed_bytes;
}

// host_ram_bytes is per GPU (each rank offloads its own shard); the total is what the machine needs.
Json change_json(const FitChange& c, uint64_t num_gpus) {
  Json j;
  j["id"] = c.id;
  j["fix_id"] = c.fix_id.empty() ? Json(nullptr) : Json(c.fix_id);
  j["step"] = c.step;
  j["title"] = c.title;
  j["cost"] = c.cost;
  Json settings = Json::array();
  for (const auto& s : c.settings) {
    settings.push_back({{"target", s.target}, {"name", s.name}, {"value", s.value}});
  }
  j["settings"] = settings;
  j["advice_only"] = c.advice_only;
  if (c.predicted) {
    add_totals(j, *c.predicted);
  } else {
    j["peak_allocated_bytes"] = nullptr;
    j["peak_reserved_bytes"] = nullptr;
    j["device_used_bytes"] = nullptr;
    j["needed_bytes"] = nullptr;
  }
  j["host_ram_bytes"] = json_bytes(c.host_ram_bytes);
  j["host_ram_total_bytes"] = c.host_ram_bytes ? Json(*c.host_ram_bytes * num_gpus) : Json(nullptr);
  j["saves_nothing_here"] = c.saves_nothing_here;
  return j;
}

}  // namespace

Json fit_report_json(const FitReport& r, const TrainingConfig* config) {
  Json doc = json_document_header("fit");
  doc["model"] = r.model_id;
  doc["model_config"] = r.model_config.empty() ? Json(nullptr) : Json(r.model_config);
  doc["job"] = job_to_json(r.job);
  doc["gpu"] = r.gpu_name;
  doc["num_gpus"] = r.num_gpus;
  doc["total_bytes"] = r.total_bytes;
  doc["budget"] = r.budget;
  doc["target"] = r.target;
  doc["usable_bytes"] = r.usable_bytes;
  doc["target_bytes"] = r.target_bytes;
  doc["fits"] = r.fits;
  doc["runs"] = r.will_not_run.empty();
  doc["will_not_run"] = r.will_not_run;
  doc["fits_target"] = r.fits_target;
  doc["peak_allocated_bytes"] = r.estimate.peak_allocated_bytes;
  doc["peak_reserved_bytes"] = r.estimate.peak_reserved_bytes;
  doc["device_used_bytes"] = r.estimate.device_used_bytes;
  doc["needed_bytes"] = r.needed_bytes;
  doc["reclaimable_bytes"] = r.estimate.reclaimable_bytes;
  // null when the prediction is saturated (beyond 64 bits): no signed count says how far over it is.
  doc["headroom_bytes"] = is_saturated(r.needed_bytes)
                              ? Json(nullptr)
                              : Json(static_cast<int64_t>(r.usable_bytes) - static_cast<int64_t>(r.needed_bytes));
  doc["peak_phase"] = r.estimate.peak_phase;
  doc["dominant_component"] = r.estimate.dominant_component;
  doc["config"] = training_config_json(config);
  Json advice = Json::array();
  for (const auto& c : r.free_advice) advice.push_back(change_json(c, r.num_gpus));
  doc["free_advice"] = advice;
  if (r.plan) {
    Json plan;
    plan["fits_budget"] = r.plan->fits_budget;
    plan["fits_target"] = r.plan->fits_target;
    plan["gpu"] = r.plan->gpu_name ? Json(*r.plan->gpu_name) : Json(r.gpu_name);
    plan["num_gpus"] = r.plan->num_gpus;
    plan["total_bytes"] = r.plan->total_bytes;
    add_totals(plan, r.plan->predicted);
    Json changes = Json::array();
    for (const auto& c : r.plan->changes) changes.push_back(change_json(c, r.plan->num_gpus));
    plan["changes"] = changes;
    // The planned job as a job file (`oomdoc estimate --job` re-predicts it).
    plan["job"] = job_to_json(r.plan->job);
    doc["plan"] = plan;
  } else {
    doc["plan"] = nullptr;
  }
  Json alternatives = Json::array();
  for (const auto& a : r.alternatives) {
    Json j = change_json(a.change, a.num_gpus.value_or(r.num_gpus));
    j["description"] = a.description;
    j["fits_target"] = a.fits_target;
    j["gpu"] = json_optional(a.gpu_name);
    j["num_gpus"] = json_optional(a.num_gpus);
    j["price_per_hour"] = json_optional(a.price_per_hour);
    if (a.job) j["job"] = job_to_json(*a.job);
    else j["job"] = nullptr;
    add_totals(j, a.predicted);
    alternatives.push_back(j);
  }
  doc["alternatives"] = alternatives;
  doc["max_micro_batch"] = json_optional(r.max_micro_batch);
  doc["max_seq_len"] = json_optional(r.max_seq_len);
  if (r.lengths) {
    const auto& l = *r.lengths;
    Json lengths;
    lengths["count"] = l.stats.count;
    lengths["empty"] = l.stats.empty;
    lengths["min"] = l.stats.min;
    lengths["max"] = l.stats.max;
    lengths["mean"] = l.stats.mean;
    lengths["p50"] = l.stats.p50;
    lengths["p90"] = l.stats.p90;
    lengths["p95"] = l.stats.p95;
    lengths["p99"] = l.stats.p99;
    Json cuts = Json::array();
    for (const auto& c : l.cuts) {
      cuts.push_back({{"seq_len", c.seq_len},
                      {"truncated", c.truncated},
                      {"truncated_share", c.truncated_share},
                      {"needed_bytes", json_bytes(c.needed_bytes)}});
    }
    lengths["cuts"] = cuts;
    lengths["outlier_extra_bytes"] = json_bytes(l.outlier_extra_bytes);
    lengths["suggested_cut"] = json_optional(l.suggested_cut);
    lengths["advice"] = l.advice;
    doc["lengths"] = lengths;
  } else {
    doc["lengths"] = nullptr;
  }
  doc["assumptions"] = r.estimate.assumptions;
  std::vector<std::string> warnings = config ? config->warnings : std::vector<std::string>{};
  warnings.insert(warnings.end(), r.estimate.warnings.begin(), r.estimate.warnings.end());
  doc["warnings"] = warnings;
  doc["notes"] = r.notes;
  return doc;
}

std::string render_fit_text(const FitReport& r, const TrainingConfig* config, const Style& style) {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  const std::string gpus = r.num_gpus > 1 ? fmt::format("{} x ", r.num_gpus) : "";
  line(style.bold(fmt::format("{} on {}{} ({} each)", r.model_id, gpus, r.gpu_name,
                              format_bytes(r.total_bytes))));
  if (!r.model_config.empty()) line(style.dim("model config: " + r.model_config));
  if (config) out += render_config_summary(*config, style);
  for (const auto& w : r.estimate.warnings) line(style.yellow("warning: " + w));
  line("");
  const auto& e = r.estimate;
  // llama.cpp has no caching allocator: its buffers are one figure.
  const bool llama_cpp = e.allocator == "llama_cpp";
  auto inner = [&](uint64_t reserved, uint64_t allocated) {
    return llama_cpp ? fmt::format("llama.cpp buffers {}", format_bytes(allocated))
                     : fmt::format("reserved {}, allocated {}", format_predicted_bytes(reserved), format_predicted_bytes(allocated));
  };
  // What fit decides on is what the job needs (no reclaimable cache); nvidia-smi would show more.
  line(fmt::format("predicted peak  {} needed ({} of the card{}), at {}, mostly {}", format_predicted_bytes(r.needed_bytes),
                   percent_of(r.needed_bytes, r.total_bytes),
                   e.reclaimable_bytes ? std::string() : "; " + inner(e.peak_reserved_bytes, e.peak_allocated_bytes),
                   e.peak_phase.empty() ? "?" : e.peak_phase, e.dominant_component.empty() ? "?" : e.dominant_component));
  if (e.reclaimable_bytes) {
    line(fmt::format("                device used {} ({}; {} of it cache the allocator gives back when memory is short)",
                     format_predicted_bytes(e.device_used_bytes), inner(e.peak_reserved_bytes, e.peak_allocated_bytes),
                     format_bytes(e.reclaimable_bytes)));
  }
  // (A budget near 1 stops at what CUDA can allocate: the driver keeps the rest of the card.)
  line(fmt::format("usable          {} ({:.0f}% budget{})   target {} ({:.0f}%)",
                   format_bytes(r.usable_bytes), 100 * r.budget, r.usable_is_allocatable ? ", all CUDA can allocate" : "",
                   format_bytes(r.target_bytes), 100 * r.target));
  if (r.fits && !r.will_not_run.empty()) {
    line(style.red(fmt::format("FITS in memory as given ({} of headroom), but WILL NOT RUN: {}",
                               format_bytes(r.usable_bytes - r.needed_bytes), fmt::join(r.will_not_run, "; "))));
  } else if (r.fits) {
    line(style.green(fmt::format("FITS as given, {} of headroom under the budget{}",
                                 format_bytes(r.usable_bytes - r.needed_bytes),
                                 r.fits_target ? "" : " (but above the target)")));
  } else {
    line(style.red(is_saturated(r.needed_bytes)
                       ? std::string("DOES NOT FIT as given: beyond any GPU (over 16 EiB)")
                       : fmt::format("DOES NOT FIT as given: {} over the budget", format_bytes(r.needed_bytes - r.usable_bytes))));
  }

  if (r.lengths) {
    const auto& l = *r.lengths;
    line("");
    line(style.bold("Sequence lengths") +
         fmt::format(" ({} examples): min {}, median {}, p90 {}, p95 {}, p99 {}, max {}, mean {:.0f}",
                     l.stats.count, l.stats.min, l.stats.p50, l.stats.p90, l.stats.p95,
                     l.stats.p99, l.stats.max, l.stats.mean));
    line(fmt::format("  {:>10}  {:>10}  {:>9}  {}", "max length", "truncated", "share", "predicted peak"));
    for (const auto& c : l.cuts) {
      line(fmt::format("  {:>10}  {:>10}  {:>8.2f}%  {}", c.seq_len, c.truncated,
                       100 * c.truncated_share,
                       c.needed_bytes ? format_bytes(*c.needed_bytes) : "-"));
    }
    for (const auto& a : l.advice) line("  - " + a);
  }

  if (r.solved_max_micro_batch || r.solved_max_seq_len) line("");
  const bool serving = r.job.task && (*r.job.task == "inference" || *r.job.task == "load");
  // Asked and unanswered means even 1 does not fit: said, not left out.
  auto answer = [&](const std::optional<uint64_t>& v, const char* unit) {
    return v ? fmt::format("{}", *v)
             : fmt::format("none (even 1 {} does not fit the {:.0f}% budget)", unit, 100 * r.budget);
  };
  if (r.solved_max_micro_batch) {
    line(fmt::format("{} that fits: {}", serving ? "most sequences at once" : "largest micro-batch",
                     answer(r.max_micro_batch, "sequence")));
  }
  if (r.solved_max_seq_len) {
    line(fmt::format("{} that fits: {}", serving ? "longest prompt" : "longest sequence",
                     r.max_seq_len_unanswered.empty() ? answer(r.max_seq_len, "token")
                                                      : fmt::format("none ({})", r.max_seq_len_unanswered)));
  }

  if (!r.fits_target && !r.free_advice.empty()) {
    line("");
    line(style.bold("Free, always worth doing") + " (not counted in the prediction):");
    for (const auto& c : r.free_advice) {
      line("  - " + c.title);
      for (const auto& s : settings_lines(c.settings)) line("      " + style.cyan(s));
    }
  }

  if (r.plan) {
    const auto& p = *r.plan;
    line("");
    line(style.bold("Plan") +
         fmt::format(": {} needed, {} of the card, {} under the budget{}",
                     format_bytes(p.predicted.needed_bytes),
                     percent_of(p.predicted.needed_bytes, p.total_bytes),
                     format_bytes(static_cast<uint64_t>(std::max<double>(
                         0, std::floor(static_cast<double>(p.total_bytes) * r.budget) -
                                static_cast<double>(p.predicted.needed_bytes)))),
                     p.fits_target ? ", under the target"
                                   : style.yellow(", fits the budget but NOT the target")));
    int n = 1;
    for (const auto& c : p.changes) {
      line(fmt::format("  {}. {}", n++, c.title));
      line(fmt::format("     cost: {}", c.cost));
      for (const auto& s : settings_lines(c.settings)) line("     set:  " + style.cyan(s));
      if (c.predicted) {
        line(fmt::format("     then: {} needed ({}){}", format_predicted_bytes(c.predicted->needed_bytes),
                         inner(c.predicted->peak_reserved_bytes, c.predicted->peak_allocated_bytes),
                         c.saves_nothing_here ? "; no saving yet, as the peak is at another moment: the changes after "
                                                "it need it"
                                              : ""));
      }
      if (c.host_ram_bytes) {
        line(fmt::format("     host RAM: about {} (what leaves the GPU, x{:.1f} as DeepSpeed "
                         "budgets it)", host_ram(*c.host_ram_bytes, p.num_gpus), kHostBufferFactor));
      }
    }
  }

  if (!r.alternatives.empty()) {
    line("");
    line(style.bold("Alternatives"));
    for (const auto& a : r.alternatives) {
      std::string tail = fmt::format("{} needed{}", format_bytes(a.predicted.needed_bytes),
                                     a.fits_target ? "" : ", above the target");
      if (a.price_per_hour) tail += fmt::format(", {:.2f}/hour", *a.price_per_hour);
      line(fmt::format("  - {} ({})", a.description, tail));
      if (a.change.host_ram_bytes) {
        line(fmt::format("      host RAM: about {}", host_ram(*a.change.host_ram_bytes, a.num_gpus.value_or(r.num_gpus))));
      }
      // A combination's cost says what its settings cannot carry (a TP/PP layout's program has no
      // flag for 8-bit AdamW or pure bf16: the training script must do it).
      if (a.change.id == "same_method" && !a.change.cost.empty()) line("      cost: " + a.change.cost);
      for (const auto& s : settings_lines(a.change.settings)) line("      " + style.cyan(s));
    }
  }
  if (!r.notes.empty()) {
    line("");
    for (const auto& note : r.notes) line("note: " + note);
  }
  return out;
}

}  // namespace oomdoc
