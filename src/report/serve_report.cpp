#include "report/serve_report.h"

#include <fmt/format.h>

#include "core/units.h"

namespace oomdoc {
namespace {

std::string engine_name(const VllmBehavior& b) { return b.v1_engine ? "V1" : "V0"; }

std::string version_name(const VllmBehavior& b) {
  return b.version.given ? fmt::format("vLLM {}", b.version.text) : std::string("current vLLM");
}

Json component_json(const ServeComponent& c) {
  Json j;
  j["bytes"] = c.bytes;
  j["from_log"] = c.from_log;
  j["detail"] = c.detail;
  return j;
}

}  // namespace

std::string render_serve_text(const ServeReport& r, const Style& st) {
  const ServePrediction& p = r.prediction;
  const ServeSettings& s = p.settings;
  std::string out;
  uint64_t gpus = s.tensor_parallel_size * s.pipeline_parallel_size * s.data_parallel_size;
  out += fmt::format("{} {} on {}{} ({}, {} engine)\n", st.bold("oomdoc serve:"), r.model_id,
                     gpus > 1 ? fmt::format("{} x ", gpus) : "", r.target.name, version_name(p.behavior),
                     engine_name(p.behavior));
  out += fmt::format("  model config: {}\n", r.model_source);
  out += fmt::format("  max_model_len {} ({}), max_num_seqs {}, max_num_batched_tokens {}, KV dtype {}, "
                     "weights {}{}\n",
                     s.max_model_len, s.max_model_len_source, s.max_num_seqs, s.max_num_batched_tokens,
                     s.kv_cache_dtype, s.weights.method.empty() ? s.weights.dtype : s.weights.method,
                     gpus > 1 ? fmt::format(", TP {} x PP {}{}", s.tensor_parallel_size, s.pipeline_parallel_size,
                                            s.data_parallel_size > 1 ? fmt::format(" x DP {}", s.data_parallel_size) : "")
                              : "");
  out += "\n";
  // The fraction as given (shortest form): 0.925 is not rounded to 0.93, nor 1e-4 to 0.00.
  out += fmt::format("{}  {} total x {}{} = {}\n", st.bold("Budget per GPU"), format_bytes(p.total_bytes),
                     s.gpu_memory_utilization,
                     s.utilization_is_default ? fmt::format(" (default of {})", version_name(p.behavior)) : "",
                     format_bytes(p.budget_bytes));
  auto row = [&](const char* name, const ServeComponent& c, const char* suffix = "") {
    out += fmt::format("  {:<18} {:>11}  {}{}{}\n", name, format_bytes(c.bytes), c.detail,
                       c.from_log ? "" : "", suffix);
  };
  row("weights", p.weights);
  row("activation peak", p.activation);
  row("non-torch", p.non_torch);
  if (!s.enforce_eager) {
    row("CUDA graphs", p.cuda_graphs, p.graphs_in_budget ? "" : " (captured after the KV cache, outside the budget)");
  }
  if (p.no_kv_cache) {
    out += fmt::format("  {:<18} {:>11}  encoder-only model: no KV cache (the budget sizes nothing)\n", "KV cache", "none");
    out += fmt::format("  {:<18} {:>11}  of the card after all of the above\n", "left", format_signed_bytes(p.left_bytes));
  } else if (p.blocks_overridden) {
    out += fmt::format("  {:<18} {:>11}  = {} tokens of {} ({}); --num-gpu-blocks-override {} ({} available)\n",
                       "KV cache", format_bytes(p.capacity.bytes), format_exact_count(p.capacity.tokens),
                       format_bytes(p.kv.bytes_per_token), p.kv.formula, p.capacity.num_blocks,
                       format_signed_bytes(p.available_kv_bytes));
  } else if (p.error && p.error->kind == "profile_oom") {
    out += fmt::format("  {:<18} {:>11}  not reached: the profile run runs out of memory first\n", "KV cache", "none");
  } else {
    // The equation is the pool's tokens (blocks over the groups); from v0.20 vLLM logs a hybrid
    // model's tokens as max_model_len x concurrency, which counts the sliding layers' reuse.
    const bool logged_differs = p.capacity.tokens != p.capacity.pool_tokens;
    // Groups padded to a common size (Gemma 3's 52 sliding layers in 6 groups of 10) cost more
    // page slots than the model has layers: the pool token's own cost, so the line multiplies out.
    const bool padded = p.capacity.pool_bytes_per_token > p.kv.bytes_per_token && p.capacity.num_groups > 1;
    const uint64_t layers = p.kv.full_layers + p.kv.sliding_layers;
    const std::string per_token =
        padded ? fmt::format("{} ({} groups x {} layer pages for {} layers; {} = {})",
                             format_bytes(p.capacity.pool_bytes_per_token), p.capacity.num_groups,
                             p.capacity.layers_per_group, layers, p.kv.formula, format_bytes(p.kv.bytes_per_token))
               : fmt::format("{} ({})", format_bytes(p.kv.bytes_per_token), p.kv.formula);
    out += fmt::format("  {:<18} {:>11}  = {} tokens of {}{}\n", "KV cache", format_signed_bytes(p.available_kv_bytes),
                       format_exact_count(p.capacity.pool_tokens), per_token,
                       logged_differs ? fmt::format("; vLLM reports {} tokens (max_model_len x concurrency)",
                                                    format_exact_count(p.capacity.tokens))
                                      : "");
  }
  if (p.speculative) {
    const SpeculativeSizing& z = *p.speculative;
    const std::string name = fmt::format("drafter ({})", z.method);
    const std::string tokens = z.num_speculative_tokens
                                   ? fmt::format("{} speculative token{}", z.num_speculative_tokens,
                                                 z.num_speculative_tokens == 1 ? "" : "s")
                                   : std::string("speculative tokens not given");
    if (!z.loads_model) {
      out += fmt::format("  {:<18} {:>11}  nothing to load or cache (proposes from the request's own text), {}\n", name,
                         format_bytes(0), tokens);
    } else if (!z.sized) {
      out += fmt::format("  {:<18} {:>11}  {}: not sized, its weights and KV cache come on top, {}\n", name, "?",
                         z.model.empty() ? z.method : z.model, tokens);
    } else {
      out += fmt::format("  {:<18} {:>11}  in the weights above: {}{}; KV {} per token ({}), in the KV cache; {}\n",
                         name, format_bytes(z.weights_bytes), z.model.empty() ? "" : z.model + ", ", z.weights_detail,
                         format_bytes(z.kv.bytes_per_token), z.kv.formula, tokens);
    }
  }
  out += fmt::format("\n{}\n", st.bold("vLLM would log"));
  for (const auto& line : p.log_lines) out += fmt::format("  {}\n", line);
  if (p.log_lines.empty() && p.error) out += "  none of its memory accounting: it stops before (below)\n";
  out += "\n";
  if (p.fits && p.no_kv_cache) {
    out += st.green("Fits") + fmt::format(": served as a pooling model, no KV cache; {} left; up to {} requests of {} "
                                          "tokens at once (max_num_seqs {}, max_num_batched_tokens {} / {}).\n",
                                          format_signed_bytes(p.left_bytes), p.requests_at_once, s.max_model_len,
                                          s.max_num_seqs, s.max_num_batched_tokens, s.max_model_len);
  } else if (p.fits) {
    out += st.green("Fits") + fmt::format(": {} tokens of KV cache, {:.2f} requests of {} tokens at once.\n",
                                          format_exact_count(p.capacity.tokens), p.capacity.max_concurrency,
                                          s.max_model_len);
  } else if (p.error) {
    out += fmt::format("{}: vLLM stops at startup with\n  {}\n", st.red("Does not fit"), p.error->message);
  } else {
    out += fmt::format("{}: vLLM starts, but its KV cache holds {} tokens: a request of {} tokens never gets its "
                       "blocks and hangs.\n", st.red("Does not fit"), format_exact_count(p.capacity.tokens),
                       s.max_model_len);
  }
  for (const auto& w : p.warnings) out += fmt::format("{}{}\n", st.yellow("warning: "), w);
  if (!r.fixes.empty()) {
    out += fmt::format("\n{} (each re-predicted)\n", st.bold("Fixes, cheapest first"));
    for (const auto& f : r.fixes) {
      out += fmt::format("  {:<34} {} tokens, {:.2f}x at {} tokens; {}{}\n", f.flag, format_exact_count(f.kv_tokens),
                         f.max_concurrency, f.max_model_len, f.cost, f.note.empty() ? std::string() : fmt::format(" ({})", f.note));
    }
  } else if (!p.fits) {
    out += "\nNo single change found that makes it fit.\n";
  }
  if (!p.assumptions.empty()) {
    out += fmt::format("\n{}\n", st.dim("Assumed:"));
    for (const auto& a : p.assumptions) out += fmt::format("{}\n", st.dim(fmt::format("  - {}", a)));
  }
  if (!r.not_modeled_flags.empty()) {
    std::string list;
    for (const auto& f : r.not_modeled_flags) list += (list.empty() ? "" : ", ") + f;
    out += fmt::format("{}\n", st.dim(fmt::format("Not modeled (they change memory): {}", list)));
  }
  if (!r.ignored_flags.empty()) {
    std::string list;
    for (const auto& f : r.ignored_flags) list += (list.empty() ? "" : ", ") + f;
    out += fmt::format("{}\n", st.dim(fmt::format("Ignored (no effect on GPU memory): {}", list)));
  }
  // Unknown flags are said once, as the prediction's warning (above).
  return out;
}

Json serve_json(const ServeReport& r) {
  const ServePrediction& p = r.prediction;
  const ServeSettings& s = p.settings;
  Json doc = json_document_header("serve");
  doc["model"] = {{"id", r.model_id}, {"source", r.model_source}};
  doc["launcher"] = r.launcher;
  doc["gpu"] = {{"name", r.target.name},
                {"total_bytes", p.total_bytes},
                {"total_source", r.target.total_source},
                {"count", s.tensor_parallel_size * s.pipeline_parallel_size * s.data_parallel_size}};
  doc["vllm"] = {{"version", p.behavior.version.given ? Json(p.behavior.version.text) : Json(nullptr)},
                 {"engine", engine_name(p.behavior)},
                 {"default_gpu_memory_utilization", p.behavior.default_gpu_memory_utilization},
                 {"graph_memory_in_budget", p.graphs_in_budget},
                 {"hybrid_kv_groups", p.behavior.hybrid_kv_groups}};
  doc["settings"] = {{"gpu_memory_utilization", s.gpu_memory_utilization},
                     {"gpu_memory_utilization_is_default", s.utilization_is_default},
                     {"max_model_len", s.max_model_len},
                     {"max_model_len_source", s.max_model_len_source},
                     {"model_context", s.model_context},
                     {"max_num_seqs", s.max_num_seqs},
                     {"max_num_batched_tokens", s.max_num_batched_tokens},
                     {"chunked_prefill", s.chunked_prefill},
                     {"block_size", s.block_size},
                     {"kv_cache_dtype", s.kv_cache_dtype},
                     {"dtype", s.weights.dtype},
                     {"quantization", s.weights.method.empty() ? Json(nullptr) : Json(s.weights.method)},
                     {"tensor_parallel_size", s.tensor_parallel_size},
                     {"pipeline_parallel_size", s.pipeline_parallel_size},
                     {"data_parallel_size", s.data_parallel_size},
                     {"enforce_eager", s.enforce_eager}};
  doc["budget_bytes"] = p.budget_bytes;
  doc["cuda_context_bytes"] = p.context_bytes;
  doc["free_at_startup_bytes"] = p.free_at_startup_bytes;
  Json components;
  components["weights"] = component_json(p.weights);
  components["activation_peak"] = component_json(p.activation);
  components["non_torch"] = component_json(p.non_torch);
  components["cuda_graphs"] = component_json(p.cuda_graphs);
  components["cuda_graphs"]["in_budget"] = p.graphs_in_budget;
  doc["components"] = components;
  doc["no_kv_cache"] = p.no_kv_cache;
  doc["available_kv_cache_bytes"] = p.no_kv_cache ? Json(nullptr) : Json(p.available_kv_bytes);
  doc["non_sampling_ranks"] = p.non_sampling_ranks
      ? Json{{"activation_peak_bytes", p.non_sampling_ranks->activation_bytes},
             {"available_kv_cache_bytes", p.non_sampling_ranks->available_kv_bytes}}
      : Json(nullptr);
  doc["left_bytes"] = p.no_kv_cache ? Json(p.left_bytes) : Json(nullptr);
  doc["requests_at_once"] = p.no_kv_cache ? Json(p.requests_at_once) : Json(nullptr);
  doc["kv_cache"] = {{"bytes_per_token", p.kv.bytes_per_token},
                     {"formula", p.kv.formula},
                     {"dtype_bytes", p.kv.dtype_bytes},
                     {"latent", p.kv.latent},
                     {"kv_heads_per_gpu", p.kv.kv_heads_per_gpu},
                     {"head_size", p.kv.head_size},
                     {"full_layers", p.kv.full_layers},
                     {"sliding_layers", p.kv.sliding_layers},
                     {"block_size", p.kv.block_size},
                     {"page_bytes", p.kv.page_bytes},
                     {"num_blocks", p.capacity.num_blocks},
                     {"num_groups", p.capacity.num_groups},
                     {"tokens", p.capacity.tokens},
                     {"pool_tokens", p.capacity.pool_tokens},
                     {"layers_per_group", p.capacity.layers_per_group},
                     {"pool_bytes_per_token", p.capacity.pool_bytes_per_token},
                     {"blocks_per_request", p.capacity.blocks_per_request},
                     {"bytes_per_request", p.capacity.bytes_per_request},
                     {"allocated_bytes", p.capacity.bytes},
                     {"max_concurrency", p.capacity.max_concurrency},
                     {"binding_pipeline_stage", p.binding_stage},
                     {"draft_layers", p.kv.draft_layers},
                     {"extra_page_bytes", p.kv.extra_page_bytes}};
  if (p.speculative) {
    const SpeculativeSizing& z = *p.speculative;
    auto or_null = [](uint64_t v, bool known) { return known ? Json(v) : Json(nullptr); };
    const bool sized_model = z.sized && z.loads_model;
    doc["speculative"] = {
        {"method", z.method},
        {"model", z.model.empty() ? Json(nullptr) : Json(z.model)},
        {"model_source", z.model_source.empty() ? Json(nullptr) : Json(z.model_source)},
        {"num_speculative_tokens", or_null(z.num_speculative_tokens, z.num_speculative_tokens > 0)},
        {"sized", z.sized},
        {"loads_model", z.loads_model},
        {"draft_tensor_parallel_size", or_null(z.draft_tensor_parallel_size, sized_model)},
        {"draft_layers", or_null(z.draft_layers, sized_model)},
        {"shares_embedding", sized_model ? Json(z.shares_embedding) : Json(nullptr)},
        {"shares_lm_head", sized_model ? Json(z.shares_lm_head) : Json(nullptr)},
        {"draft_weights_bytes", or_null(z.weights_bytes, z.sized)},
        {"draft_kv_bytes_per_token", or_null(z.kv.bytes_per_token, z.sized)},
        {"draft_kv_formula", sized_model ? Json(z.kv.formula) : Json(nullptr)},
        {"sampler_extra_bytes_per_logit", z.sampler_extra_bytes_per_logit},
        {"weights_detail", z.weights_detail.empty() ? Json(nullptr) : Json(z.weights_detail)},
        {"assumptions", z.assumptions}};
  } else {
    doc["speculative"] = nullptr;
  }
  if (p.no_kv_cache) doc["kv_cache"] = nullptr;
  doc["max_model_len_that_fits"] = p.no_kv_cache ? Json(nullptr) : Json(p.max_model_len_that_fits);
  doc["fits"] = p.fits;
  doc["error"] = p.error ? Json{{"kind", p.error->kind}, {"message", p.error->message}} : Json(nullptr);
  doc["log_lines"] = p.log_lines;
  Json fixes = Json::array();
  for (const auto& f : r.fixes) {
    fixes.push_back({{"fix_id", f.id},
                     {"flag", f.flag},
                     {"vllm_args", f.vllm_args},
                     {"cost", f.cost},
                     {"fits", f.fits},
                     {"kv_tokens", f.kv_tokens},
                     {"max_concurrency", f.max_concurrency},
                     {"max_model_len", f.max_model_len},
                     {"note", f.note.empty() ? Json(nullptr) : Json(f.note)}});
  }
  doc["fixes"] = fixes;
  doc["warnings"] = p.warnings;
  doc["assumptions"] = p.assumptions;
  doc["ignored_flags"] = r.ignored_flags;
  doc["not_modeled_flags"] = r.not_modeled_flags;
  doc["unknown_flags"] = r.unknown_flags;
  return doc;
}

}  // namespace oomdoc
