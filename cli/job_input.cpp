#include "job_input.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <filesystem>
#include <string_view>

#include "core/file_input.h"
#include "readers/gguf_header.h"
#include "readers/job_file.h"

namespace oomdoc::cli {
namespace {

bool is_regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A job file is a JSON object with a "model" key; training configs never have one.
bool looks_like_job_file(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return !j.is_discarded() && j.is_object() && j.contains("model");
}

// A name that can only be a file: a YAML or JSON file name. Model ids have no such suffix.
bool looks_like_config_path(const std::string& input) {
  return input.ends_with(".yml") || input.ends_with(".yaml") || input.ends_with(".json");
}

// A model's weights file (GGUF, or a .safetensors inside a model folder), not a training config.
// A model's config.json is a model too.
bool is_model_file(const std::string& path) {
  return is_gguf_file(path) || path.ends_with(".safetensors") ||
         std::filesystem::path(path).filename() == "config.json";
}

// A Hugging Face model config saved under another name (qwen2.json): a JSON object with a
// "model_type" and no job "model". Training configs and TrainingArguments dumps have neither.
bool is_model_config_json(const std::string& path) {
  if (!path.ends_with(".json") || !is_regular_file(path)) return false;
  auto text = read_small_file(path, 4ull << 20);
  if (!text) return false;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  // (Axolotl's configs carry a model_type too, beside base_model.)
  return !j.is_discarded() && j.is_object() && j.contains("model_type") && j["model_type"].is_string() &&
         !j.contains("model") && !j.contains("base_model") && !j.contains("model_name_or_path");
}

}  // namespace

Result<JobInput> read_job_input(const std::string& input, const std::string& model_flag,
                                const std::string& job_file_flag, const nlohmann::json& flags) {
  JobInput out;
  std::string job_file = job_file_flag;
  std::string model_override = model_flag;  // over the job file's and the config's model
  if (!input.empty()) {
    if (!is_regular_file(input) || is_model_file(input) || is_model_config_json(input)) {
      if (!model_flag.empty()) {
        // Two models named: a model file or folder given as INPUT is not a config --model can go with.
        // A name that is no file is a model name: the model given twice.
        std::error_code ec;
        if (is_regular_file(input) || std::filesystem::is_directory(input, ec)) {
          return make_error(input + ": not a training config or job file, and --model already names the model; give one of them");
        }
        if (looks_like_config_path(input)) return make_error(input + ": no such file (and --model is given)");
        return make_error(fmt::format("the model is given twice, as '{}' and as --model {}: give one", input, model_flag));
      }
      if (looks_like_config_path(input)) {
        // The error_code form: a name the system refuses (too long) is an input error, not an exception.
        std::error_code ec;
        if (!std::filesystem::exists(input, ec)) {
          return make_error(input + (ec && ec != std::errc::no_such_file_or_directory
                                         ? ": " + ec.message()
                                         : ": no such file (a training config or job file was expected)"));
        }
      }
      out.job.model = input;  // a model id, alias, folder, config.json or .gguf file
      // With --job, the positional model overrides the file's, as --model and every flag do.
      model_override = input;
    } else {
      auto text = read_small_file(input, 4ull << 20);
      if (!text) return text.error();
      // A .json file that is not JSON: say where it breaks (YAML would only say "not a config").
      if (input.ends_with(".json")) {
        if (auto parsed = parse_json_document(*text, input); !parsed) return parsed.error();
      }
      if (looks_like_job_file(*text)) {
        if (!job_file.empty()) return make_error("give one job file, not " + input + " and --job");
        job_file = input;
      } else {
        auto read = read_training_config(input);
        if (!read) return read.error();
        out.config = std::move(*read);
        out.job = out.config->job;
        out.source = input;
      }
    }
  }
  nlohmann::json given = flags;
  if (!model_override.empty()) given["model"] = model_override;
  // The LoRA settings override the config's field by field too (--lora-r 64 keeps the config's
  // target modules): config, then the job file's lora, then the flags' (read_job puts the
  // result over the job file's own lora, a subset of it).
  if (out.config && out.job.lora) {
    nlohmann::json file_lora;
    if (!job_file.empty()) {
      if (auto text = read_small_file(job_file); text) {
        auto parsed = nlohmann::json::parse(*text, nullptr, false);
        if (parsed.is_object() && parsed.contains("lora") && parsed["lora"].is_object()) file_lora = parsed["lora"];
      }
    }
    const bool flag_lora = given.contains("lora") && given["lora"].is_object();
    if (flag_lora || !file_lora.is_null()) {
      nlohmann::json lora = job_to_json(out.job)["lora"];
      if (!file_lora.is_null()) lora.update(file_lora);
      if (flag_lora) lora.update(given["lora"]);
      given["lora"] = lora;
    }
  }
  auto given_job = read_job(job_file, given);
  if (!given_job) return given_job.error();
  // A relative model path in a job file is the file's own: found beside the file first, then from
  // the current directory (as a training config's deepspeed: path is).
  if (!job_file.empty() && model_override.empty() && !given_job->model.empty() && given_job->model[0] != '~') {
    const std::filesystem::path model(given_job->model), beside = std::filesystem::path(job_file).parent_path() / model;
    std::error_code ec;
    if (model.is_relative() && std::filesystem::exists(beside, ec)) given_job->model = beside.lexically_normal().string();
  }
  overlay_job(out.job, *given_job);
  if (out.job.weight_quantization == "none") {   // unquantized, said outright: its settings go with it
    out.job.weight_quantization.reset();
    out.job.double_quant.reset();
    out.job.group_size.reset();
  }
  if (!job_file.empty()) out.source = job_file;
  // The model came from the file unless the command line named one.
  out.model_from_file = (out.config || !job_file.empty()) && model_flag.empty() && model_override.empty() &&
                        !flags.contains("model");
  return out;
}

std::string model_error(const JobInput& input, const std::string& message) {
  return input.model_from_file ? input.source + ": " + message : message;   // (the message names the model)
}

}  // namespace oomdoc::cli
