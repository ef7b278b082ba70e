// fit against reality: the measured-memory records whose result is an outcome (fits / OOM), the
// largest micro-batch that fit, or the longest context that fit on a stated GPU.
//
// Each record becomes a Job through readers/measured_memory.h (general rules, no per-record
// cases), the same reader the estimator's corpus test uses. "Fits" here means the predicted
// device memory is within the card's total (a real job runs out of memory at 100%, not at
// fit's 92% budget); the agreement at the 92% budget is printed too.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iostream>
#include <sstream>

#include "analyses/estimator.h"
#include "analyses/fit_search.h"
#include "core/units.h"
#include "readers/gpu_catalog.h"
#include "readers/measured_memory.h"
#include "readers/model_resolver.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

using nlohmann::json;

// Regression floors, set from the measured agreement reported in docs/fit.md (not tuned per record).
// measured 13/15 (86%): 101 agrees since transformers < 4.36 reads as eager attention, LitGPT
// records 128 and 152 since LitGPT's own modules are modelled, 103 since PEFT's k-bit preparation
// (fp32 embeddings, norms, head and hidden states) is modelled; 107 and 154 disagree (docs/fit.md).
constexpr int kMinOutcomeAgreementPercent = 86;
// measured 4/5 at or above, 1/5 within +25% (what must fit excludes the allocator's reclaimable
// cache, oom_view): 115 +8%; 113 +27% (QLoRA on transformers/PEFT reads as checkpointed,
// prepare_model_for_kbit_training's default, and with its fp32 upcast); 116 +35% (Unsloth's
// kernels and offloaded checkpointing, kernels: unsloth); 110 above (the source did not try
// larger batches); 112 (DeBERTa-v2-xlarge, ZeRO-2) below: 37 against 40, with the record's
// max_length 128 taken as every batch's length (run_glue_no_trainer pads per batch).
constexpr int kMinCapacityAtOrAbovePercent = 80;
constexpr int kMinCapacityJustAbovePercent = 20;

struct Case {
  int64_t id = 0;
  std::string kind;
  ModelSpec model;
  Job job;
  uint64_t capacity_bytes = 0;
  std::string outcome;
};

// Records become jobs through the estimator's reader (readers/measured_memory.h): one set of rules
// for every corpus test.
Result<Case> case_of(const std::string& line) {
  auto record = parse_measured_record(line, "dev.jsonl");
  if (!record) return record.error();
  Case c;
  c.id = record->id;
  c.kind = record->measurement_kind;
  c.outcome = record->outcome.value_or("");
  auto model = resolve_model(record->model);
  if (!model) return model.error();
  c.model = *model;
  c.job = record->job;
  std::optional<uint64_t> capacity = record->gpu_total_bytes;
  // "seq_len is the longest context that fit in `value` GB of VRAM" (README).
  if (c.kind == "max_context_at_capacity" && record->measured_bytes) capacity = record->measured_bytes;
  if (!capacity) return make_error(fmt::format("record {}: no GPU capacity", c.id));
  c.capacity_bytes = *capacity;
  return c;
}

std::vector<std::string> records() {
  const std::string path = testing::corpus_path("measured-memory/dev.jsonl");
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "missing corpus file " << path;
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json r = json::parse(line);
    const std::string kind = r["measurement_kind"].get<std::string>();
    if (kind == "oom_outcome" || kind == "max_batch_at_capacity" || kind == "max_context_at_capacity") {
      out.push_back(line);
    }
  }
  return out;
}

TEST(FitCorpus, AgreesWithMeasuredOutcomesAndCapacities) {
  const auto all = records();
  ASSERT_GE(all.size(), 20u);
  int outcomes = 0, agree = 0, agree_budget = 0, not_expressible = 0;
  int capacity_cases = 0, capacity_at_or_above = 0, capacity_just_above = 0;
  std::ostringstream table;
  for (const auto& r : all) {
    auto c = case_of(r);
    if (!c) {
      ++not_expressible;
      table << fmt::format("  not expressible: {}\n", c.error().message);
      continue;
    }
    auto est = estimate_memory(c->model, c->job);
    if (!est) {
      ++not_expressible;
      table << fmt::format("  {:>4}  estimator refused: {}\n", c->id, est.error().message);
      continue;
    }
    const uint64_t used = oom_view(*est).device_used_bytes;  // what must fit: no reclaimable cache
    if (c->kind == "oom_outcome") {
      ++outcomes;
      const bool predicted_fits = used <= c->capacity_bytes;
      const bool predicted_fits_budget = used <= static_cast<uint64_t>(c->capacity_bytes * kDefaultMemoryBudget);
      const bool real_fits = c->outcome == "fits";
      agree += predicted_fits == real_fits;
      agree_budget += predicted_fits_budget == real_fits;
      table << fmt::format("  {:>4}  {:<13} {:<34} predicted {:>10} of {:>10} -> {:<12} real {:<4} {}\n",
                           c->id, "outcome", c->model.id.substr(0, 34), format_bytes(used),
                           format_bytes(c->capacity_bytes), predicted_fits ? "fits" : "does not fit",
                           c->outcome, predicted_fits == real_fits ? "agree" : "DISAGREE");
      continue;
    }
    ++capacity_cases;
    const bool batch = c->kind == "max_batch_at_capacity";
    const uint64_t reported = batch ? c->job.micro_batch_size.value_or(1) : c->job.seq_len.value_or(0);
    auto solved = solve_largest(c->model, c->job, batch ? &Job::micro_batch_size : &Job::seq_len,
                                c->capacity_bytes, batch ? 1u << 16 : 1u << 23);
    const uint64_t got = solved.value_or(0);
    // "Just above": within 25% of the reported maximum (sources try few sizes, so the true
    // maximum can sit above the one reported).
    const bool at_or_above = got >= reported;
    const bool just_above = at_or_above && got <= reported + reported / 4;
    capacity_at_or_above += at_or_above;
    capacity_just_above += just_above;
    table << fmt::format("  {:>4}  {:<13} {:<34} reported {:>7}, solved {:>7} ({:+.0f}%) {}\n", c->id,
                         batch ? "max batch" : "max context", c->model.id.substr(0, 34), reported,
                         got, reported ? 100.0 * (static_cast<double>(got) - reported) / reported : 0.0,
                         just_above ? "at/just above" : at_or_above ? "above (>25%)" : "BELOW");
  }
  std::cout << "fit corpus (" << all.size() << " records)\n" << table.str();
  std::cout << fmt::format(
      "outcome agreement at 100% of the card: {}/{}; at the 92% budget: {}/{}\n"
      "capacity records: {}/{} solved at or above the reported maximum, {}/{} within +25%\n"
      "not expressible or refused: {}\n",
      agree, outcomes, agree_budget, outcomes, capacity_at_or_above, capacity_cases,
      capacity_just_above, capacity_cases, not_expressible);
  // Every record must turn into a job the estimator accepts.
  EXPECT_EQ(not_expressible, 0);
  EXPECT_GE(outcomes, 15);
  EXPECT_GE(capacity_cases, 5);
  // Floors stated in docs/fit.md with the numbers measured; they guard against regressions.
  EXPECT_GE(agree * 100, outcomes * kMinOutcomeAgreementPercent);
  EXPECT_GE(capacity_at_or_above * 100, capacity_cases * kMinCapacityAtOrAbovePercent);
  EXPECT_GE(capacity_just_above * 100, capacity_cases * kMinCapacityJustAbovePercent);
}

}  // namespace
}  // namespace oomdoc
