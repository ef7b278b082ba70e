#include "readers/job_file.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "core/file_input.h"
#include "model/gguf_types.h"
#include "readers/gguf_header.h"
#include "readers/training_config.h"

namespace oomdoc {
namespace {

using nlohmann::json;

const std::set<std::string> kTasks = {"train_full", "train_lora", "train_qlora", "train_freeze", "inference", "load"};
const std::set<std::string> kPrecisions = {"fp32", "fp16_mixed", "bf16_mixed", "bf16", "fp16"};
const std::set<std::string> kQuantizations = [] {
  // "none" turns a job file's (or a config's) quantization off from the command line; read_job_input
  // (cli/job_input.cpp) clears it once every layer is applied.
  std::set<std::string> q = {"none", "nf4", "fp4", "int8", "int4", "fp8", "gptq4", "gptq8", "awq4", "nvfp4"};
  for (const auto& t : gguf_file_types()) q.insert(t);   // llama.cpp's file types (implementation llama_cpp)
  return q;
}();
const std::set<std::string> kOptimizers = {"adamw", "adamw_8bit", "paged_adamw_8bit", "paged_adamw_32bit", "adamw_4bit", "adafactor",
                                           "sgd", "sgd_momentum", "lion", "none"};
const std::set<std::string> kCheckpointing = {"none", "full", "selective"};
const std::set<std::string> kAttention = {"eager", "sdpa", "flash"};
const std::set<std::string> kParallelism = {"ddp", "zero1", "zero2", "zero3", "fsdp_full_shard",
                                            "fsdp_shard_grad_op", "hybrid_shard"};
const std::set<std::string> kOffload = {"optimizer", "params", "activations"};
const std::set<std::string> kLossImpl = {"standard", "chunked", "fused_linear"};
const std::set<std::string> kObjectives = {"sft", "dpo", "ipo", "kto", "orpo", "simpo", "cpo", "reward"};
const std::set<std::string> kKvDtypes = {"auto", "fp32", "bf16", "fp16", "f16", "fp8", "int8", "q8_0", "q4_0"};
const std::set<std::string> kImplementations = {"transformers", "litgpt", "llama_cpp"};
const std::set<std::string> kOptimizerImpl = {"foreach", "fused", "for_loop"};
const std::set<std::string> kKvCacheImpl = {"dynamic", "legacy", "static"};
const std::set<std::string> kAdapterDtype = {"fp32", "model"};
const std::set<std::string> kReferenceDtype = {"model", "bf16", "fp16", "fp32"};
const std::set<std::string> kKbitUpcast = {"all", "norms", "none"};
const std::set<std::string> kKernels = {"none", "liger", "unsloth"};
std::string join(const std::set<std::string>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : ", ") + v;
  return out;
}

class Reader {
 public:
  Reader(const json& j, const std::string& source) : j_(j), source_(source) {}

  Status text(const char* key, std::optional<std::string>& out, const std::set<std::string>* allowed) {
    if (!present(key)) return Ok{};
    const json& v = j_.at(key);
    if (!v.is_string()) return error(key, "must be a string, got " + v.dump());
    std::string s = v.get<std::string>();
    if (allowed && !allowed->count(s)) {
      // A trainer's own optimizer name: say which job values it stands for.
      if (std::string_view(key) == "optimizer") {
        if (auto named = trainer_optimizer(s); named && allowed->count(named->kind)) {
          return error(key, fmt::format("\"{}\" is a training framework's name for it: give optimizer {}{} (--optimizer "
                                        "{}{})", s, named->kind, named->impl ? " with optimizer_impl " + *named->impl : "",
                                        named->kind, named->impl ? " --optimizer-impl " + *named->impl : ""));
        }
      }
      return error(key, fmt::format("\"{}\" is not one of: {}", s, join(*allowed)));
    }
    out = s;
    return Ok{};
  }
  Status count(const char* key, std::optional<uint64_t>& out, bool allow_zero = false) {
    if (!present(key)) return Ok{};
    const json& v = j_.at(key);
    // One wording for the range, as the CLI's count flags say it (cli/job_flags.cpp count_range).
    const std::string range = allow_zero ? "0 or more" : "at least 1";
    if (!v.is_number_integer()) return error(key, fmt::format("must be an integer, {} (got {})", range, v.dump()));
    if (!v.is_number_unsigned() && v.get<int64_t>() < 0) return error(key, fmt::format("must be {} (got {})", range, v.dump()));
    uint64_t n = v.get<uint64_t>();
    if (n == 0 && !allow_zero) return error(key, "must be at least 1 (got 0)");
    out = n;
    return Ok{};
  }
  Status flag(const char* key, std::optional<bool>& out) {
    if (!present(key)) return Ok{};
    const json& v = j_.at(key);
    if (!v.is_boolean()) return error(key, "must be true or false, got " + v.dump());
    out = v.get<bool>();
    return Ok{};
  }
  // Every key is asked for by name, so what was asked is the set of known keys.
  bool present(const char* key) {
    asked_.insert(key);
    return j_.contains(key) && !j_.at(key).is_null();
  }
  // The first key of the file that nothing asked for.
  Status no_unknown_keys() const {
    for (const auto& [key, value] : j_.items()) {
      if (!asked_.count(key)) {
        return make_error(fmt::format("{}: unknown key \"{}\" (keys: {})", source_, key, join(asked_)));
      }
    }
    return Ok{};
  }
  Error error(const std::string& key, const std::string& what) const {
    return make_error(fmt::format("{}: {}: {}", source_, key, what));
  }

 private:
  const json& j_;
  const std::string& source_;
  std::set<std::string> asked_;
};

#define TRY(expr)                 \
  do {                            \
    auto _s = (expr);             \
    if (!_s) return _s.error();   \
  } while (0)

// The scalar job keys, in job-file order: one list that the reader, the writer and overlay_job walk, so a
// key cannot be readable and missing from the JSON output (or the other way round).
template <class Fields>
Status visit_scalar_fields(Job& job, Fields& f) {
  TRY(f.text("task", job.task, &kTasks));
  TRY(f.text("precision", job.precision, &kPrecisions));
  TRY(f.text("weight_quantization", job.weight_quantization, &kQuantizations));
  TRY(f.flag("double_quant", job.double_quant));
  TRY(f.count("group_size", job.group_size));
  TRY(f.text("optimizer", job.optimizer, &kOptimizers));
  TRY(f.flag("fused_backward", job.fused_backward));
  TRY(f.count("micro_batch_size", job.micro_batch_size));
  TRY(f.count("grad_accum_steps", job.grad_accum_steps));
  TRY(f.count("seq_len", job.seq_len));
  TRY(f.count("target_len", job.target_len));
  TRY(f.flag("padding_free", job.padding_free));
  TRY(f.text("gradient_checkpointing", job.gradient_checkpointing, &kCheckpointing));
  TRY(f.text("attention_impl", job.attention_impl, &kAttention));
  TRY(f.count("num_gpus", job.num_gpus));
  TRY(f.text("parallelism", job.parallelism, &kParallelism));
  TRY(f.count("tp", job.tp));
  TRY(f.count("pp", job.pp));
  TRY(f.count("cp", job.cp));
  TRY(f.text("loss_impl", job.loss_impl, &kLossImpl));
  TRY(f.text("objective", job.objective, &kObjectives));
  TRY(f.flag("precompute_ref_log_probs", job.precompute_ref_log_probs));
  TRY(f.text("reference_dtype", job.reference_dtype, &kReferenceDtype));
  TRY(f.count("batch_size", job.batch_size));
  TRY(f.count("prompt_len", job.prompt_len));
  TRY(f.count("max_new_tokens", job.max_new_tokens, /*allow_zero=*/true));
  TRY(f.text("kv_cache_dtype", job.kv_cache_dtype, &kKvDtypes));
  TRY(f.text("kv_cache_impl", job.kv_cache_impl, &kKvCacheImpl));
  TRY(f.text("optimizer_impl", job.optimizer_impl, &kOptimizerImpl));
  TRY(f.text("adapter_dtype", job.adapter_dtype, &kAdapterDtype));
  TRY(f.count("freeze_trainable_layers", job.freeze_trainable_layers));
  TRY(f.count("zero3_sub_group_size", job.zero3_sub_group_size, /*allow_zero=*/true));
  TRY(f.text("kbit_upcast", job.kbit_upcast, &kKbitUpcast));
  TRY(f.text("kernels", job.kernels, &kKernels));
  TRY(f.flag("bnb_saves_input", job.bnb_saves_input));
  TRY(f.flag("autocast", job.autocast));
  TRY(f.flag("compile", job.compile));
  TRY(f.flag("loss_upcast", job.loss_upcast));
  TRY(f.flag("zero_grad_to_none", job.zero_grad_to_none));
  TRY(f.flag("sync_each_batch", job.sync_each_batch));
  TRY(f.flag("lazy_module_loading", job.lazy_module_loading));
  TRY(f.count("prefill_chunk", job.prefill_chunk));
  TRY(f.text("implementation", job.implementation, &kImplementations));
  TRY(f.count("gpu_layers", job.gpu_layers, /*allow_zero=*/true));
  return Ok{};
}

// Writes the set fields of a Job as job-file keys (the reader's counterpart).
class Writer {
 public:
  explicit Writer(json& out) : out_(out) {}
  Status text(const char* key, const std::optional<std::string>& v, const std::set<std::string>*) { return put(key, v); }
  Status count(const char* key, const std::optional<uint64_t>& v, bool = false) { return put(key, v); }
  Status flag(const char* key, const std::optional<bool>& v) { return put(key, v); }

 private:
  template <class T>
  Status put(const char* key, const std::optional<T>& v) {
    if (v) out_[key] = *v;
    return Ok{};
  }
  json& out_;
};

// Sets the fields a Writer wrote (the overlay's counterpart of the reader, without its checks:
// the values came from a Job).
class Overlay {
 public:
  explicit Overlay(const json& given) : given_(given) {}
  Status text(const char* key, std::optional<std::string>& v, const std::set<std::string>*) { return take(key, v); }
  Status count(const char* key, std::optional<uint64_t>& v, bool = false) { return take(key, v); }
  Status flag(const char* key, std::optional<bool>& v) { return take(key, v); }

 private:
  template <class T>
  Status take(const char* key, std::optional<T>& v) {
    if (given_.contains(key)) v = given_[key].get<T>();
    return Ok{};
  }
  const json& given_;
};

// Which count keys take 0: asks visit_scalar_fields, the one list.
class ZeroAllowed {
 public:
  explicit ZeroAllowed(const std::string& key) : key_(key) {}
  Status text(const char*, std::optional<std::string>&, const std::set<std::string>*) { return Ok{}; }
  Status count(const char* key, std::optional<uint64_t>&, bool allow_zero = false) {
    if (key_ == key) allows_ = allow_zero;
    return Ok{};
  }
  Status flag(const char*, std::optional<bool>&) { return Ok{}; }
  bool allows() const { return allows_; }

 private:
  const std::string& key_;
  bool allows_ = false;
};

// The first key that appears twice in one object, with its path ("lora.r"); nlohmann keeps the
// last silently, so a file that says two things would be read as one of them.
std::optional<std::string> duplicate_key(std::string_view text) {
  std::vector<std::set<std::string>> objects;
  std::vector<std::string> path;  // the key that opened each nested object ("" for arrays and the top)
  std::string last_key;
  std::optional<std::string> found;
  json::parser_callback_t cb = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (found) return true;
    switch (event) {
      case json::parse_event_t::object_start:
        objects.emplace_back();
        path.push_back(last_key);
        last_key.clear();
        break;
      case json::parse_event_t::object_end:
        if (!objects.empty()) objects.pop_back();
        if (!path.empty()) path.pop_back();
        break;
      case json::parse_event_t::array_start:
        last_key.clear();
        break;
      case json::parse_event_t::key: {
        last_key = parsed.get<std::string>();
        if (!objects.empty() && !objects.back().insert(last_key).second) {
          std::string where;
          for (const auto& p : path) if (!p.empty()) where += p + ".";
          found = where + last_key;
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  auto parsed = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
  (void)parsed;
  return found;
}

}  // namespace

std::string flash_attention_dtype_problem(const std::string& precision, const std::string& attention) {
  if (precision != "fp32" || attention != "flash") return "";
  return "flash has no fp32 kernels (FlashAttention-2 runs fp16 and bf16 only; transformers refuses: \"Flash "
         "Attention 2.0 only supports torch.float16 and torch.bfloat16 dtypes\"): use sdpa, or precision bf16_mixed";
}

bool job_count_allows_zero(const std::string& key) {
  Job job;
  ZeroAllowed probe(key);
  (void)visit_scalar_fields(job, probe);
  return probe.allows();
}

Result<Job> parse_job_json(std::string_view text, const std::string& source) {
  auto parsed = parse_json_document(text, source);
  if (!parsed) return parsed.error();
  json& j = *parsed;
  if (!j.is_object()) return make_error(fmt::format("{}: a job file is one JSON object", source));
  Reader r(j, source);
  Job job;
  if (r.present("model")) {
    if (!j["model"].is_string()) return r.error("model", "must be a string");
    job.model = j["model"].get<std::string>();
  }
  TRY(visit_scalar_fields(job, r));
  if (r.present("offload")) {
    const json& v = j["offload"];
    if (!v.is_array()) return r.error("offload", "must be a list such as [\"optimizer\"]");
    for (const auto& item : v) {
      if (!item.is_string() || !kOffload.count(item.get<std::string>())) {
        return r.error("offload", fmt::format("{} is not one of: {}", item.dump(), join(kOffload)));
      }
      job.offload.push_back(item.get<std::string>());
    }
  }
  if (r.present("lora")) {
    const json& v = j["lora"];
    if (!v.is_object()) return r.error("lora", "must be an object such as {\"r\": 16, \"alpha\": 32}");
    LoraSettings lora;
    for (const auto& [key, value] : v.items()) {
      if (key == "r") {
        if (!value.is_number_integer() || value.get<int64_t>() <= 0) return r.error("lora.r", "must be a positive integer");
        lora.r = value.get<uint64_t>();
      } else if (key == "alpha") {
        if (!value.is_number()) return r.error("lora.alpha", "must be a number");
        lora.alpha = value.get<double>();
      } else if (key == "dropout") {
        if (!value.is_number() || value.get<double>() < 0 || value.get<double>() >= 1) {
          return r.error("lora.dropout", "must be a number in [0, 1)");
        }
        lora.dropout = value.get<double>();
      } else if (key == "target_modules") {
        if ((value.is_string() && names_all_linear(value.get<std::string>())) ||
            (value.is_array() && value.size() == 1 && value[0].is_string() && names_all_linear(value[0].get<std::string>()))) {
          lora.all_linear = true;
        } else if (value.is_array() && !value.empty()) {
          // "all_linear" among names: every linear layer and the named others (the output head,
          // the embeddings), as Axolotl's lora_target_linear with lora_target_modules.
          for (const auto& m : value) {
            if (!m.is_string()) return r.error("lora.target_modules", "must list module names");
            if (names_all_linear(m.get<std::string>())) lora.all_linear = true;
            else lora.target_modules.push_back(m.get<std::string>());
          }
        } else {
          return r.error("lora.target_modules", "must be \"all_linear\" (or PEFT's \"all-linear\") or a non-empty list of module names");
        }
      } else if (key == "modules_to_save") {
        if (!value.is_array()) return r.error("lora.modules_to_save", "must list module names such as [\"embed_tokens\", \"lm_head\"]");
        for (const auto& m : value) {
          if (!m.is_string() || m.get<std::string>().empty()) return r.error("lora.modules_to_save", "must list module names");
          lora.modules_to_save.push_back(m.get<std::string>());
        }
      } else {
        return r.error("lora", fmt::format("unknown key \"{}\" (r, alpha, dropout, target_modules, modules_to_save)", key));
      }
    }
    job.lora = lora;
  }
  TRY(r.no_unknown_keys());
  TRY(validate_job(job, source));
  return job;
}

namespace {

// A training config (Axolotl, LLaMA-Factory, TrainingArguments) that fails as a job file is said to
// be one, with where it goes, rather than blamed for its first odd key.
Error as_training_config(std::string_view text, const std::string& job_file, Error job_error) {
  auto config = parse_training_config(text, job_file);
  if (!config || config->used_keys.empty() || config->unknown_keys.size() >= config->used_keys.size()) return job_error;
  return Error{fmt::format("{}: a training config ({}), not a job file: give it as the input (oomdoc estimate {}), "
                           "not with --job", job_file, training_config_format_name(config->format), job_file)};
}

}  // namespace

Result<Job> read_job(const std::string& job_file, const nlohmann::json& overrides) {
  json job_json = json::object();
  std::string source = "command line";
  std::string text;   // the job file's, for what a failure says
  if (!job_file.empty()) {
    auto read = read_small_file(job_file);
    if (!read) return read.error();
    text = std::move(*read);
    auto parsed = parse_json_document(text, job_file);
    if (!parsed) return as_training_config(text, job_file, parsed.error());
    if (!parsed->is_object()) return Error{job_file + ": not a JSON object (a job file is one flat JSON object)"};
    if (auto key = duplicate_key(text)) {
      return Error{fmt::format("{}: key \"{}\" appears twice (give each key once)", job_file, *key)};
    }
    job_json = std::move(*parsed);
    source = job_file;
  }
  for (const auto& item : overrides.items()) {
    if (item.key() == "lora" && job_json.contains("lora") && job_json["lora"].is_object()) {
      job_json["lora"].update(item.value());
    } else {
      job_json[item.key()] = item.value();
    }
  }
  auto job = parse_job_json(job_json.dump(), source);
  if (!job && !job_file.empty()) return as_training_config(text, job_file, job.error());
  return job;
}

Status validate_job(const Job& job, const std::string& source) {
  auto fail = [&](const std::string& field, const std::string& what) {
    return make_error(fmt::format("{}: {}: {}", source, field, what));
  };
  const std::string task = job.task.value_or("");
  const bool training = task.rfind("train_", 0) == 0;
  const bool inference = task == "inference" || task == "load";
  if (task == "train_qlora" && job.weight_quantization &&
      !(*job.weight_quantization == "nf4" || *job.weight_quantization == "fp4" ||
        *job.weight_quantization == "int8" || *job.weight_quantization == "int4" ||
        *job.weight_quantization == "gptq4" || *job.weight_quantization == "gptq8" ||
        *job.weight_quantization == "awq4")) {
    return fail("weight_quantization", fmt::format("{} is not a QLoRA base format", *job.weight_quantization));
  }
  // A .gguf model runs in llama.cpp whether or not the job says so (the estimator dispatches on the
  // file); its llama.cpp keys are valid here, before the model is read.
  const bool gguf_model = !job.model.empty() && is_gguf_file(job.model);
  const bool llama_cpp = (job.implementation && *job.implementation == "llama_cpp") || (gguf_model && !job.implementation);
  if (job.weight_quantization && is_gguf_file_type(*job.weight_quantization) && !llama_cpp) {
    return fail("weight_quantization", fmt::format("{} is a GGUF (llama.cpp) file type: add implementation llama_cpp",
                                                   *job.weight_quantization));
  }
  if (job.kv_cache_dtype && (*job.kv_cache_dtype == "q8_0" || *job.kv_cache_dtype == "q4_0") && !llama_cpp) {
    return fail("kv_cache_dtype", fmt::format("{} is a llama.cpp cache type: add implementation llama_cpp", *job.kv_cache_dtype));
  }
  if (job.gpu_layers && !llama_cpp) return fail("gpu_layers", "is llama.cpp's -ngl: add implementation llama_cpp");
  if (llama_cpp) {
    if (training) return fail("implementation", "llama_cpp runs inference (task inference or load)");
    if (job.weight_quantization && !is_gguf_file_type(*job.weight_quantization)) {
      return fail("weight_quantization", fmt::format("{} is not a GGUF file type (q8_0, q6_k, q5_k_m, q4_k_m, q4_0, ...)",
                                                     *job.weight_quantization));
    }
    if (job.kv_cache_dtype && !llama_cache_type(*job.kv_cache_dtype)) {
      return fail("kv_cache_dtype", fmt::format("{} is not a llama.cpp cache type ({})", *job.kv_cache_dtype,
                                                kLlamaCacheTypeNames));
    }
    if (job.num_gpus.value_or(1) > 1 || job.tp.value_or(1) > 1 || job.pp.value_or(1) > 1) {
      return fail("num_gpus", "llama.cpp jobs are sized one GPU at a time (--tensor-split shares the layers: "
                              "size each GPU's share with gpu_layers)");
    }
  }
  // FlashAttention-2 has no fp32 kernels ("fp32 is not supported", Dao-AILab/flash-attention#622):
  // transformers refuses an fp32 model with flash_attention_2 ("Flash Attention 2.0 only supports
  // torch.float16 and torch.bfloat16 dtypes", huggingface/transformers#28052) and flash-attn itself
  // raises "FlashAttention only support fp16 and bf16 data type". *_mixed runs it under autocast.
  if (!llama_cpp && job.precision && job.attention_impl) {
    if (std::string problem = flash_attention_dtype_problem(*job.precision, *job.attention_impl); !problem.empty()) {
      return fail("attention_impl", problem);
    }
  }
  if (task == "train_full" && job.weight_quantization) {
    return fail("weight_quantization", "full fine-tuning cannot train quantized weights (use train_qlora)");
  }
  if (job.lora && !(task == "train_lora" || task == "train_qlora" || task.empty())) {
    return fail("lora", fmt::format("LoRA settings given for task {}", task));
  }
  if (inference && (job.optimizer || job.micro_batch_size || job.grad_accum_steps || job.gradient_checkpointing)) {
    return fail("task", fmt::format("{} takes no optimizer, micro_batch_size, grad_accum_steps or gradient_checkpointing", task));
  }
  if (inference && job.seq_len) {
    // (Read for training only: left in an inference job it would change nothing, silently.)
    return fail("seq_len", fmt::format("{} takes prompt_len and max_new_tokens (seq_len is a training job's length)", task));
  }
  if (inference && job.target_len) {
    return fail("target_len", fmt::format("{} takes prompt_len (the encoder's) and max_new_tokens (the decoder's)", task));
  }
  if (training && (job.batch_size || job.max_new_tokens || job.prompt_len)) {
    return fail("task", fmt::format("{} takes micro_batch_size and seq_len, not batch_size/prompt_len/max_new_tokens", task));
  }
  if (job.double_quant && *job.double_quant && job.weight_quantization && *job.weight_quantization != "none" &&
      *job.weight_quantization != "nf4" && *job.weight_quantization != "fp4") {
    return fail("double_quant", "applies to bitsandbytes nf4/fp4 only");
  }
  // Bounds far beyond any real job keep every byte count inside 64 bits.
  struct Limit { const char* name; std::optional<uint64_t> value; uint64_t max; };
  for (const Limit& l : {Limit{"micro_batch_size", job.micro_batch_size, 1u << 20}, Limit{"seq_len", job.seq_len, 1u << 24}, Limit{"target_len", job.target_len, 1u << 24},
                         Limit{"batch_size", job.batch_size, 1u << 20}, Limit{"prompt_len", job.prompt_len, 1u << 24},
                         Limit{"max_new_tokens", job.max_new_tokens, 1u << 24}, Limit{"num_gpus", job.num_gpus, 1u << 20},
                         Limit{"tp", job.tp, 1u << 12}, Limit{"pp", job.pp, 1u << 12}, Limit{"cp", job.cp, 1u << 12},
                         Limit{"grad_accum_steps", job.grad_accum_steps, 1u << 24}, Limit{"group_size", job.group_size, 1u << 20},
                         Limit{"gpu_layers", job.gpu_layers, 1u << 16}, Limit{"prefill_chunk", job.prefill_chunk, 1u << 24}}) {
    if (l.value && *l.value > l.max) return fail(l.name, fmt::format("{} is implausibly large (limit {})", *l.value, l.max));
  }
  if (job.lora && job.lora->r > (1u << 16)) return fail("lora.r", fmt::format("{} is implausibly large", job.lora->r));
  const uint64_t model_parallel = job.tp.value_or(1) * job.pp.value_or(1) * job.cp.value_or(1);
  const uint64_t gpus = job.num_gpus.value_or(model_parallel);
  if (gpus % model_parallel) {
    return fail("num_gpus", fmt::format("{} GPUs is not a multiple of tp*pp*cp = {}", gpus, model_parallel));
  }
  if (job.parallelism && gpus / model_parallel == 1 && *job.parallelism != "ddp") {
    // Sharding over one data-parallel rank is legal (it changes nothing); no error.
  }
  // torchtune's optimizer-in-backward steps each parameter as its gradient is ready: nothing is
  // left to accumulate ("Gradient accumulation is not supported with optimizer in bwd").
  if (job.fused_backward.value_or(false) && job.grad_accum_steps.value_or(1) > 1) {
    return fail("fused_backward", fmt::format("the optimizer steps inside backward, so gradients cannot accumulate over "
                                              "{} steps (torchtune: \"Gradient accumulation is not supported with "
                                              "optimizer in bwd\"); use grad_accum_steps 1", *job.grad_accum_steps));
  }
  for (const auto& o : job.offload) {
    // Offloading the optimizer is ZeRO-Offload's or FSDP's: plain DDP keeps a whole optimizer on each GPU.
    if (o == "optimizer" && job.parallelism && *job.parallelism == "ddp") {
      return fail("offload", "optimizer offload needs DeepSpeed ZeRO (zero1, zero2, zero3) or FSDP: plain DDP keeps "
                             "the optimizer on each GPU");
    }
    if (o == "params" && !(job.parallelism && (*job.parallelism == "zero3" || *job.parallelism == "fsdp_full_shard" ||
                                               *job.parallelism == "hybrid_shard"))) {
      return fail("offload", "params offload needs parameter sharding (zero3, fsdp_full_shard or hybrid_shard)");
    }
    if (o == "optimizer" && inference) return fail("offload", "optimizer offload in an inference job");
  }
  return Ok{};
}

void overlay_job(Job& base, const Job& over) {
  if (!over.model.empty()) base.model = over.model;
  // The scalar keys through the one list (visit_scalar_fields): those set in `over`, as the writer
  // gives them, replace base's.
  json given = json::object();
  Job over_copy = over;
  Writer writer(given);
  (void)visit_scalar_fields(over_copy, writer);
  Overlay overlay(given);
  (void)visit_scalar_fields(base, overlay);
  if (over.lora) base.lora = over.lora;
  if (!over.offload.empty()) base.offload = over.offload;
}

nlohmann::json job_to_json(const Job& job) {
  json out = json::object();
  if (!job.model.empty()) out["model"] = job.model;
  Job copy = job;  // the visitor takes the fields by reference, for the reader
  Writer w(out);
  (void)visit_scalar_fields(copy, w);
  if (!job.offload.empty()) out["offload"] = job.offload;
  if (job.lora) {
    json lora = json::object();
    lora["r"] = job.lora->r;
    lora["alpha"] = job.lora->alpha;
    lora["dropout"] = job.lora->dropout;
    if (job.lora->all_linear && job.lora->target_modules.empty()) {
      lora["target_modules"] = "all_linear";
    } else if (!job.lora->target_modules.empty()) {
      json names = job.lora->target_modules;
      if (job.lora->all_linear) names.insert(names.begin(), "all_linear");
      lora["target_modules"] = names;
    }
    if (!job.lora->modules_to_save.empty()) lora["modules_to_save"] = job.lora->modules_to_save;
    out["lora"] = lora;
  }
  return out;
}

}  // namespace oomdoc
