// Every startup log in ../shared/data/vllm-logs/dev.jsonl, replayed through `serve`: the record's
// model, GPU, version and flags become a vLLM command line; the predicted KV cache (tokens and
// GiB) is compared with what vLLM logged, once with the log's own profile figures (weights,
// activation, non-torch, total memory) as overrides and once from oomdoc's estimates alone.
// Prints the per-log error table (docs/serve.md keeps a copy).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <regex>
#include <sstream>

#include "analyses/vllm_serve.h"
#include "readers/gpu_catalog.h"
#include "readers/served_model.h"
#include "readers/vllm_args.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

using nlohmann::json;

std::optional<std::string> first_match(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex(pattern, std::regex::icase))) return m[1].str();
  return std::nullopt;
}

std::optional<uint64_t> int_field(const json& j, const char* key) {
  if (j.contains(key) && j[key].is_number_integer()) return j[key].get<uint64_t>();
  return std::nullopt;
}

// The record's setup as a vLLM command line. `flags` is a transcription in prose, so only
// unambiguous "name value" pairs are read from it; expected.* values win where both exist.
std::vector<std::string> command_for(const json& r, const std::string& model) {
  const json& e = r["expected"];
  std::string flags = r.value("flags", "");
  std::vector<std::string> words;
  // The engine the log format shows (0.8.x fell back to V0 for some models).
  std::string engine = r["engine"].is_string() ? r["engine"].get<std::string>() : "";
  if (engine == "V0" || engine == "V1") words.push_back(engine == "V0" ? "VLLM_USE_V1=0" : "VLLM_USE_V1=1");
  words.insert(words.end(), {"vllm", "serve", model});
  auto add = [&](const std::string& flag, const std::optional<std::string>& value) {
    if (value) words.insert(words.end(), {flag, *value});
  };
  auto number_or = [&](const char* key, const std::string& pattern) -> std::optional<std::string> {
    if (e.contains(key) && e[key].is_number()) {
      return e[key].is_number_integer() ? std::to_string(e[key].get<uint64_t>()) : fmt::format("{}", e[key].get<double>());
    }
    return first_match(flags, pattern);
  };
  add("--max-model-len", number_or("max_model_len", R"(max[_-]model[_-]len[ =]+(\d+))"));
  add("--tensor-parallel-size", number_or("tensor_parallel_size", R"((?:tensor[_-]parallel[_-]size|TP)[ =]+(\d+))"));
  auto pp = number_or("pipeline_parallel_size", R"(pipeline[_-]parallel[_-]size[ =]+(\d+))");
  auto tp = number_or("tensor_parallel_size", R"((?:tensor[_-]parallel[_-]size|TP)[ =]+(\d+))");
  // Unstated pipeline size: the GPUs the record names beyond the tensor-parallel group.
  if (!pp && tp && r["gpu_count"].is_number_integer() && r["gpu_count"].get<uint64_t>() > std::stoull(*tp)) {
    pp = std::to_string(r["gpu_count"].get<uint64_t>() / std::stoull(*tp));
  }
  add("--pipeline-parallel-size", pp);
  add("--gpu-memory-utilization", number_or("gpu_memory_utilization", R"(gpu[_-]memory[_-]utilization[ =]+([0-9.]+))"));
  add("--kv-cache-dtype", first_match(flags, R"((?:kv[_-]cache[_-]dtype|\bKV)[ =]+(fp8\w*))"));
  add("--quantization", first_match(flags, R"(quantization[ =]+([\w-]+))"));
  add("--dtype", first_match(flags, R"((?:^|[\s,(])(?:--)?dtype[ =]+"?([a-z0-9]+))"));
  add("--max-num-batched-tokens", first_match(flags, R"(max[_-]num[_-]batched[_-]tokens[ =]+(\d+))"));
  add("--max-num-seqs", first_match(flags, R"(max[_-]num[_-]seqs[ =]+(\d+))"));
  if (std::regex_search(flags, std::regex(R"(enable[_-]lora)"))) words.push_back("--enable-lora");
  if (std::regex_search(flags, std::regex(R"(enforce[_-]eager)"))) words.push_back("--enforce-eager");
  return words;
}

// "NVIDIA V100 16GB (15.77 GiB)", "2x NVIDIA T4 (16 GB)" -> the catalog entry.
std::optional<GpuSpec> gpu_for(const json& r) {
  if (!r["gpu"].is_string()) return std::nullopt;
  std::string text = r["gpu"].get<std::string>();
  text = text.substr(0, text.find_first_of("(,"));
  text = std::regex_replace(text, std::regex(R"(^\s*\d+x\s*)"), "");
  auto gpu = find_gpu(text);
  if (!gpu) return std::nullopt;
  return gpu.value();
}

// The version the record states, else the one its version_note infers from the log format or
// the date ("distributed_gpu_executor.py:45 suggests ~v0.4.3-0.5.0": the first one named).
std::string version_for(const json& r) {
  for (const char* key : {"framework_version", "version_note"}) {
    std::string text = r[key].is_string() ? r[key].get<std::string>() : "";
    if (auto v = first_match(text, R"((\d+\.\d+(?:\.\d+)?))")) return *v;
  }
  // Unstated: the last release whose default engine was V0, or the newest for V1 logs.
  return r.value("engine", "") == "V0" ? "0.7.3" : "";
}

struct Row {
  int id = 0;
  std::string model, gpu, version, status;
  std::optional<uint64_t> expected_tokens;
  std::optional<int64_t> expected_kv;
  std::optional<uint64_t> tokens_with_log, tokens_estimated;
  std::optional<int64_t> kv_with_log, kv_estimated;
  std::optional<uint64_t> logged_weights, weights_estimated;  // "Model loading took" / "model weights take"
  std::string log_figures;  // which figures the log supplied
  bool logged_failure = false;              // the thread shows the startup failed
  std::string outcome_with_log, outcome_estimated;  // "fits" or the predicted error kind
};

double relative_error(double predicted, double expected) {
  if (expected == 0) return predicted == 0 ? 0 : 1;
  return std::fabs(predicted - expected) / std::fabs(expected);
}

std::string percent(const std::optional<uint64_t>& p, const std::optional<uint64_t>& e) {
  if (!p || !e) return "-";
  return fmt::format("{:+.1f}%", (static_cast<double>(*p) - static_cast<double>(*e)) /
                                     std::max(1.0, static_cast<double>(*e)) * 100);
}

std::vector<Row> replay_corpus() {
  std::string text = testing::read_file(testing::corpus_path("vllm-logs/dev.jsonl"));
  std::vector<Row> rows;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    json r = json::parse(line);
    const json& e = r["expected"];
    Row row;
    row.id = r["id"].get<int>();
    row.model = r["model"].is_string() ? r["model"].get<std::string>() : "";
    row.gpu = r["gpu"].is_string() ? r["gpu"].get<std::string>().substr(0, 28) : "";
    row.version = version_for(r);
    uint64_t block = 16;
    if (auto b = first_match(r.value("flags", ""), R"(block[_-]size[ =]+(\d+))")) block = std::stoull(*b);
    if (auto t = int_field(e, "kv_cache_tokens")) row.expected_tokens = t;
    else if (auto blocks = int_field(e, "gpu_blocks")) row.expected_tokens = *blocks * block;
    if (e.contains("kv_cache_bytes")) row.expected_kv = e["kv_cache_bytes"].get<int64_t>();

    if (r.value("framework", "") != "vllm") {
      row.status = "not vLLM itself (" + r.value("framework", "") + ")";
      rows.push_back(row);
      continue;
    }
    if (!row.expected_tokens && !row.expected_kv) {
      row.status = "log has no KV figure";
      rows.push_back(row);
      continue;
    }
    // "Llama 3.1 8B (local path)" -> "Llama-3.1-8B": the transcription's prose to a model name.
    std::string name = std::regex_replace(row.model.substr(0, row.model.find(" (")), std::regex(R"(\s+)"), "-");
    auto model = resolve_served_model(name);
    if (!model) {
      row.status = "model not resolvable";
      rows.push_back(row);
      continue;
    }
    auto config = parse_vllm_command_line(command_for(r, name));
    EXPECT_TRUE(config.ok()) << row.id << ": " << config.error().message;
    if (!config) continue;
    auto version = parse_vllm_version(row.version);
    EXPECT_TRUE(version.ok());

    ServeInputs base;
    base.model = model->spec;
    base.model_note = model->note;
    base.checkpoint_kv_cache_dtype = model->checkpoint_kv_cache_dtype;
    base.checkpoint_kv_cache_source = model->checkpoint_kv_cache_source;
    base.config = config.value();
    base.version = version.value();
    auto gpu = gpu_for(r);
    std::optional<uint64_t> logged_total = int_field(e, "total_gpu_memory_bytes");

    row.logged_failure = e.value("startup_fails", false);
    // V0 workers other than the driver log their own profile ("(VllmWorkerProcess pid=N) ... the
    // rest of the memory reserved for KV Cache is"); they do not sample, so their figure is theirs,
    // not the driver's. When every such line in the log is a worker's, compare with those ranks.
    const bool kv_logged_by_other_ranks = [&] {
      std::istringstream log(r.value("log", ""));
      std::string l;
      bool any = false;
      while (std::getline(log, l)) {
        if (l.find("reserved for KV Cache") == std::string::npos) continue;
        if (l.find("(VllmWorkerProcess") == std::string::npos) return false;
        any = true;
      }
      return any;
    }();
    auto run = [&](const ServeInputs& in, std::optional<uint64_t>& tokens, std::optional<int64_t>& kv,
                   std::string& outcome, std::optional<uint64_t>* weights = nullptr) {
      auto p = predict_vllm_startup(in);
      if (!p) {
        row.status = p.error().message.substr(0, 60);
        return;
      }
      tokens = p->behavior.v1_engine ? p->capacity.tokens : p->capacity.num_blocks * p->settings.block_size;
      kv = kv_logged_by_other_ranks && p->non_sampling_ranks ? p->non_sampling_ranks->available_kv_bytes
                                                              : p->available_kv_bytes;
      outcome = p->error ? p->error->kind : "fits";
      if (weights) *weights = p->weights.bytes;
    };
    row.logged_weights = int_field(e, "weights_bytes") ? int_field(e, "weights_bytes") : int_field(e, "model_loading_bytes");
    // From oomdoc's estimates: the GPU from the catalog.
    if (gpu) {
      ServeInputs in = base;
      in.target = serve_target(*gpu);
      run(in, row.tokens_estimated, row.kv_estimated, row.outcome_estimated, &row.weights_estimated);
    }
    // With the log's own figures.
    ServeInputs in = base;
    if (logged_total) in.target = serve_target_memory(*logged_total);
    else if (gpu) in.target = serve_target(*gpu);
    if (logged_total) row.log_figures += "total ";
    if (auto w = int_field(e, "weights_bytes") ? int_field(e, "weights_bytes") : int_field(e, "model_loading_bytes")) {
      in.overrides.weights_bytes = w;
      row.log_figures += "weights ";
    }
    if (auto a = int_field(e, "activation_peak_bytes")) {
      in.overrides.activation_bytes = a;
      row.log_figures += "activation ";
    } else if (auto peak = int_field(e, "peak_torch_memory_bytes"); peak && in.overrides.weights_bytes) {
      in.overrides.activation_bytes = *peak - *in.overrides.weights_bytes;  // v0.6.4: peak includes weights
      row.log_figures += "activation ";
    }
    if (auto n = int_field(e, "non_torch_bytes")) {
      in.overrides.non_torch_bytes = n;
      row.log_figures += "non_torch ";
    }
    if (auto g = int_field(e, "cudagraph_memory_bytes")) {
      in.overrides.cuda_graph_bytes = g;
      row.log_figures += "graphs ";
    }
    if (in.target.total_bytes) run(in, row.tokens_with_log, row.kv_with_log, row.outcome_with_log);
    if (row.status.empty()) {
      row.status = !in.target.total_bytes ? "GPU not stated" : gpu ? "compared" : "compared (GPU not in catalog)";
    }
    rows.push_back(row);
  }
  return rows;
}

const std::vector<Row>& corpus_rows() {
  static const std::vector<Row> rows = replay_corpus();
  return rows;
}

bool has_full_profile(const Row& row) {
  return row.log_figures.find("total") != std::string::npos &&
         row.log_figures.find("weights") != std::string::npos &&
         row.log_figures.find("activation") != std::string::npos &&
         row.log_figures.find("non_torch") != std::string::npos;
}

TEST(ServeCorpus, PrintsThePerLogErrorTable) {
  const auto& rows = corpus_rows();
  ASSERT_GE(rows.size(), 20u);
  auto gib = [](const std::optional<int64_t>& b) {
    return b ? fmt::format("{:.2f}", static_cast<double>(*b) / static_cast<double>(1ull << 30)) : std::string("-");
  };
  auto kv_err = [](const std::optional<int64_t>& p, const std::optional<int64_t>& e) {
    if (!p || !e) return std::string("-");
    return fmt::format("{:+.1f}%", static_cast<double>(*p - *e) / std::fabs(static_cast<double>(*e)) * 100);
  };
  std::string table = "| id | model | GPU | version | logged tokens | with log figures | err | estimated | err | logged KV GiB | with log | err | estimated | err | logged outcome | predicted (log figures / estimated) | status |\n"
                      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    table += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r.id,
                         r.model.substr(0, 40), r.gpu, r.version.empty() ? "current" : r.version,
                         r.expected_tokens ? std::to_string(*r.expected_tokens) : "-",
                         r.tokens_with_log ? std::to_string(*r.tokens_with_log) : "-",
                         percent(r.tokens_with_log, r.expected_tokens),
                         r.tokens_estimated ? std::to_string(*r.tokens_estimated) : "-",
                         percent(r.tokens_estimated, r.expected_tokens), gib(r.expected_kv),
                         gib(r.kv_with_log), kv_err(r.kv_with_log, r.expected_kv), gib(r.kv_estimated),
                         kv_err(r.kv_estimated, r.expected_kv), r.logged_failure ? "fails" : "-",
                         r.outcome_with_log.empty() && r.outcome_estimated.empty()
                             ? std::string("-")
                             : (r.outcome_with_log.empty() ? "-" : r.outcome_with_log) + " / " +
                                   (r.outcome_estimated.empty() ? "-" : r.outcome_estimated),
                         r.status);
  }
  std::cout << table;
}

// With the log's budget, weights, activation and non-torch figures, the rest is vLLM's own
// arithmetic: KV bytes and tokens within 2% (the log rounds each figure to 0.01 GiB).
TEST(ServeCorpus, WithTheLoggedProfileKvIsWithinTwoPercent) {
  int compared = 0;
  for (const Row& r : corpus_rows()) {
    if (!has_full_profile(r)) continue;
    ++compared;
    if (r.expected_kv && r.kv_with_log) {
      double slack = 0.03 * (1ull << 30);  // four figures each rounded to 0.005 GiB
      EXPECT_LE(std::fabs(static_cast<double>(*r.kv_with_log - *r.expected_kv)),
                std::max(0.02 * std::fabs(static_cast<double>(*r.expected_kv)), slack)) << "record " << r.id;
    }
    if (r.expected_tokens && r.tokens_with_log && *r.expected_tokens > 0) {
      EXPECT_LE(relative_error(static_cast<double>(*r.tokens_with_log), static_cast<double>(*r.expected_tokens)), 0.02)
          << "record " << r.id;
    }
  }
  EXPECT_GE(compared, 5);
}

// Where the thread shows the startup failed, serve should predict a startup error. One of the
// five is missed today (docs/serve.md: a graph-capture OOM at 0.98 on a Ray cluster); this guards
// the four it predicts (the T4 log's max-length error since the rope-scaled default length).
TEST(ServeCorpus, PredictsMostLoggedStartupFailures) {
  int failures = 0, predicted = 0;
  for (const Row& r : corpus_rows()) {
    if (!r.logged_failure || r.outcome_with_log.empty()) continue;
    ++failures;
    if (r.outcome_with_log != "fits") ++predicted;
  }
  std::cout << fmt::format("logged startup failures predicted: {} of {}\n", predicted, failures);
  EXPECT_EQ(failures, 5);
  EXPECT_GE(predicted, 4);
}

// The weights oomdoc computes for each GPU (the TP/PP share, what every rank keeps whole, the
// quantized format) against the "Model loading took" / "model weights take" figure the log
// prints: vLLM measures this one, so it checks the weight model on its own.
TEST(ServeCorpus, ComputedWeightsMatchTheLoggedModelLoading) {
  int compared = 0, within = 0;
  std::string report;
  for (const Row& r : corpus_rows()) {
    if (!r.logged_weights || !r.weights_estimated) continue;
    ++compared;
    double error = (static_cast<double>(*r.weights_estimated) - static_cast<double>(*r.logged_weights)) /
                   static_cast<double>(*r.logged_weights);
    if (std::fabs(error) <= 0.02) ++within;
    report += fmt::format("  {:>3}  {:<42} logged {:7.2f} GiB  computed {:7.2f} GiB  {:+.1f}%\n", r.id,
                          r.model.substr(0, 42), static_cast<double>(*r.logged_weights) / (1ull << 30),
                          static_cast<double>(*r.weights_estimated) / (1ull << 30), error * 100);
  }
  std::cout << "weights per GPU, computed against logged:\n" << report
            << fmt::format("computed weights within 2%: {} of {}\n", within, compared);
  // 8 of 10 today (docs/serve.md): record 11's model is the annotator's guess from its per-token KV
  // size (its `uncertain` names the model), and Gemma-2-9B on v0.5.4 (13) logs 0.19 GiB per GPU
  // more than its parameters take, which oomdoc does not place.
  EXPECT_GE(compared, 10);
  EXPECT_GE(within, 8);
}

// From oomdoc's own estimates (catalog GPU, computed weights and activations): the issue's target
// is 10%. docs/serve.md lists each log's error and, for the misses, what the log shows that the
// model does not know (LMCache buffers, an NCCL accounting change in a dev build, logs whose
// own figures disagree). This guards against regressions: the logs within 10% stay within it.
TEST(ServeCorpus, EstimatesWithoutLogFiguresAreWithinTenPercentForMostLogs) {
  int compared = 0, within = 0;
  for (const Row& r : corpus_rows()) {
    std::optional<double> error;
    if (r.expected_tokens && r.tokens_estimated) {
      error = relative_error(static_cast<double>(*r.tokens_estimated), static_cast<double>(*r.expected_tokens));
    } else if (r.expected_kv && r.kv_estimated) {
      error = relative_error(static_cast<double>(*r.kv_estimated), static_cast<double>(*r.expected_kv));
    }
    if (!error) continue;
    ++compared;
    if (*error <= 0.10) ++within;
  }
  std::cout << fmt::format("estimates within 10%: {} of {} compared logs\n", within, compared);
  EXPECT_GE(compared, 14);
  EXPECT_GE(within, 9);    // 9 of 14 today (docs/serve.md); raise it as the model improves
}

}  // namespace
}  // namespace oomdoc
