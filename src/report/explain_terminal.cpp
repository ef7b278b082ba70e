#include "report/explain_terminal.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/text.h"
#include "core/units.h"

namespace oomdoc {
namespace {

std::string framework_title(const OomEvent& e) {
  static const std::map<std::string, std::string> names = {
      {"pytorch", "PyTorch"}, {"pytorch-rocm", "PyTorch (ROCm)"}, {"pytorch-xpu", "PyTorch (XPU)"},
      {"pytorch-npu", "PyTorch (NPU)"}, {"pytorch-mps", "PyTorch (MPS)"}, {"vllm", "vLLM"},
      {"tensorflow", "TensorFlow"}, {"jax", "JAX/XLA"}, {"llama.cpp", "llama.cpp"}, {"ollama", "Ollama"}, {"mlx", "MLX"}, {"metal", "Metal"}, {"python", "Python"}, {"numpy", "NumPy"},
      {"sglang", "SGLang"}, {"tgi", "text-generation-inference"}, {"onnxruntime", "ONNX Runtime"}, {"tensorrt-llm", "TensorRT-LLM"}, {"paddle", "PaddlePaddle"}, {"mxnet", "MXNet"}, {"tensorrt", "TensorRT"}, {"directml", "DirectML"}, {"torch_xla", "PyTorch/XLA"}, {"xla", "XLA (TPU)"}, {"nccl", "NCCL"}, {"cuda", "CUDA"}, {"hip", "HIP (ROCm)"}, {"cublas", "cuBLAS"}, {"cudnn", "cuDNN"},
      {"cufft", "cuFFT"}, {"cusolver", "cuSOLVER"}, {"cusparse", "cuSPARSE"}, {"curand", "cuRAND"}, {"hipblas", "hipBLAS"}};
  auto it = names.find(e.framework);
  return it == names.end() ? e.framework : it->second;
}

std::string kill_reporter(const OomEvent& e) {
  static const std::map<std::string, std::string> names = {
      {"shell", "the shell"}, {"kernel_oom_killer", "the kernel's OOM killer"}, {"dataloader_worker", "PyTorch's DataLoader"},
      {"torchrun", "torchrun"}, {"deepspeed_launcher", "DeepSpeed's launcher"}, {"subprocess", "Python's subprocess"},
      {"exit_code", "its exit code (137)"}, {"slurm", "Slurm"}, {"srun", "Slurm's srun"},
      {"kubernetes", "Kubernetes (OOMKilled)"}, {"compiler", "the compiler driver (gcc)"},
      {"docker", "Docker (OOMKilled)"}, {"systemd", "systemd (oom-kill)"}, {"make", "make"}};
  const std::string report = e.string_field("kill_report").value_or("");
  // (Said by what the log printed: the exit code, the build tool.)
  if (report == "exit_code") return fmt::format("its exit code ({})", e.int_field("exit_code").value_or(137));
  if (report == "compiler") {
    const std::string name = e.string_field("process_name").value_or("");
    if (name == "cicc" || name == "ptxas") return "nvcc";
  }
  auto it = names.find(report);
  return it == names.end() ? framework_title(e) : it->second;
}

// The figures the headline shows, with their words, in this order.
const std::vector<std::pair<const char*, const char*>>& shown_figures() {
  static const std::vector<std::pair<const char*, const char*>> shown = {
      {"requested", "requested"}, {"total", "total"}, {"free", "free"}, {"process", "this process"},
      {"allocated", "allocated by PyTorch"}, {"gpu_allocated", "allocated on the GPU"}, {"reserved_total", "reserved by PyTorch"},
      {"reserved_unallocated", "reserved but unallocated"}, {"private_pools", "in CUDA-graph pools"},
      {"pytorch_limit", "allowed (memory fraction)"},
      {"mps_allocated", "MPS allocated"}, {"other_allocations", "other allocations"}, {"max_allowed", "max allowed"},
      {"kv_needed", "KV needed"}, {"kv_available", "KV available"}, {"in_use_chunks", "in use"},
      {"anon_rss", "resident (anon-rss)"}, {"shmem_rss", "shared (shmem-rss)"},
      {"job_memory_used", "the job used"}, {"job_memory_limit", "its memory limit"},
      {"xla_memory_needed", "needed by the program"}, {"max_buffer_size", "largest buffer allowed"}};
  return shown;
}

// The words for a figure: the headline's, else its name as the message's reader calls it.
std::string figure_label(const std::string& name) {
  for (const auto& [n, label] : shown_figures()) {
    if (name == n) return label;
  }
  std::string out = name;
  std::replace(out.begin(), out.end(), '_', ' ');
  return out;
}

// The numbers the message printed, in a compact line.
std::string numbers_line(const OomEvent& e) {
  std::string out;
  for (const auto& [name, label] : shown_figures()) {
    const Quantity* q = e.quantity(name);
    // A negative figure (vLLM's KV budget) is kept as printed: "KV available -2.35 GiB".
    if (q == nullptr && e.int_field(std::string(name) + "_bytes").value_or(0) < 0) {
      out += fmt::format("{}{} {}", out.empty() ? "" : " · ", label, e.string_field(std::string(name) + "_text").value_or(""));
      continue;
    }
    if (q == nullptr) continue;
    // Past 64 bits: a limit that large is none ("unlimited"); any other figure is said as printed.
    const std::string shown = !q->overflow                       ? format_bytes(q->bytes)
                              : name == std::string_view("pytorch_limit") ? std::string("unlimited")
                                                                          : q->text;
    out += fmt::format("{}{} {}", out.empty() ? "" : " · ", label, shown);
  }
  // The listed process the figures show to be this one (a container's host PID) is said to be.
  const auto self_pid = breakdown(e).likely_self_pid;
  for (const auto& p : e.other_processes) {
    out += fmt::format("{}pid {} {}{}", out.empty() ? "" : " · ", p.pid ? std::to_string(*p.pid) : "?",
                       format_bytes(p.memory.bytes), self_pid && p.pid == self_pid ? " (this process)" : "");
  }
  if (auto v = e.int_field("max_model_len")) out += fmt::format("{}max_model_len {}", out.empty() ? "" : " · ", *v);
  if (auto v = e.int_field("kv_cache_tokens")) out += fmt::format("{}KV cache {} tokens", out.empty() ? "" : " · ", *v);
  return out;
}

// The figures of vLLM's startup accounting (readers/formats/vllm.cpp), as printed.
std::string vllm_accounting_line(const OomEvent& e) {
  static const std::vector<std::pair<const char*, const char*>> sizes = {
      {"total_gpu_memory", "GPU total"}, {"usable_budget", "budget"}, {"model_loading", "weights loaded"},
      {"weights", "weights"}, {"non_torch", "non-torch"}, {"activation_peak", "activation peak"},
      {"peak_torch_memory", "torch peak"}, {"kv_cache", "KV cache"}, {"cudagraph_memory", "CUDA graphs"}};
  std::string out;
  auto add = [&](const std::string& item) { out += (out.empty() ? "" : " · ") + item; };
  if (const FieldValue* u = e.field("gpu_memory_utilization"); u && std::holds_alternative<double>(*u)) {
    add(fmt::format("utilization {:.2f}", std::get<double>(*u)));
  }
  for (const auto& [name, label] : sizes) {
    if (const Quantity* q = e.quantity(name)) {
      add(fmt::format("{} {}", label, format_bytes(q->bytes)));
    } else if (auto negative = e.int_field(std::string(name) + "_bytes"); negative && *negative < 0) {
      add(fmt::format("{} -{}", label, format_bytes(static_cast<uint64_t>(-*negative))));
    }
  }
  if (auto v = e.int_field("gpu_blocks")) add(fmt::format("GPU blocks {}", *v));
  if (auto v = e.int_field("cpu_blocks")) add(fmt::format("CPU blocks {}", *v));
  if (const FieldValue* c = e.field("max_concurrency"); c && std::holds_alternative<double>(*c)) {
    add(fmt::format("max concurrency {:.2f}x", std::get<double>(*c)));
  }
  return out;
}

}  // namespace

std::string cause_title(const std::string& cause) {
  static const std::map<std::string, std::string> titles = {
      {"capacity_exhausted", "the process filled the card (close to the limit)"},
      {"request_exceeds_total_capacity", "one allocation is larger than the whole card (a shape far too large)"},
      {"free_exceeds_request_yet_failed", "enough memory was free, yet the allocation failed"},
      {"fragmentation", "fragmentation: enough memory is free or cached, but no single block holds the request"},
      {"other_processes", "other processes hold the card"},
      {"memory_held_elsewhere", "memory held elsewhere: the program needs far less than the card"},
      {"memory_outside_allocator", "memory held outside PyTorch (other containers, display, CUDA contexts)"},
      {"non_pytorch_memory_in_process", "this process holds memory outside PyTorch's allocator"},
      {"mps_high_watermark_exceeded", "the MPS high-watermark limit"},
      {"metal_working_set_exceeded", "the Metal GPU's share of unified memory ran out"},
      {"allocation_size_limit", "a per-allocation size limit"},
      {"memory_fraction_limit", "the per-process memory fraction, not the card, ran out"},
      {"driver_oom_no_details", "the GPU driver ran out of memory (no figures)"},
      {"library_workspace_alloc", "a GPU library (cuBLAS, cuDNN...) could not get a workspace"},
      {"nccl_buffer_alloc", "NCCL could not allocate buffers"},
      {"garbage_request_size", "an impossible allocation size (a bug upstream)"},
      {"host_memory", "host (CPU) memory ran out"},
      {"not_an_oom_status", "the status is not out of memory"},
      {"killed_host_oom_suspected", "killed by SIGKILL: usually the OOM killer, for host (CPU) RAM"},
      {"framework_preallocation", "the framework reserves the card up front"},
      {"kv_cache_insufficient", "the KV cache cannot hold one request of max_model_len"},
      {"no_kv_cache_memory", "no memory is left for the KV cache"},
      {"gpu_memory_utilization_too_low", "gpu_memory_utilization is too low"},
      {"startup_free_memory_below_budget", "less memory is free than vLLM's budget"},
      {"cuda_graph_capture_oom", "out of memory while capturing CUDA graphs"},
      {"sampler_warmup_oom", "out of memory while warming up vLLM's sampler"},
      {"mem_fraction_static_too_low", "SGLang's mem_fraction_static is too low"},
      {"compile_time_oom", "the compiler ran out of on-chip memory"},
      {"warning_non_fatal", "a warning, not a failure"},
      {"not_an_error", "informational, not an error"},
      {"generic_no_details", "out of memory (the message gives no figures)"},
      {"insufficient_information", "the message is cut short"},
      {"evaluation_with_grad", "evaluation or generation may be recording gradients it does not need"},
      {"eval_predictions_on_gpu", "evaluation kept every batch's predictions (logits) on the GPU"},
      {"model_does_not_fit", "the model itself does not fit"},
      {"ddp_replica_does_not_fit", "a full replica and its DDP gradient buckets do not fit on one GPU"},
      {"memory_climbing", "memory climbs step after step (tensors kept alive)"},
      {"fragmentation_minor", "some fragmentation"}};
  auto it = titles.find(cause);
  return it == titles.end() ? cause : it->second;
}

namespace {

// "+ 799 more like it: ranks 0-7 (GPUs 0-7), lines 2-1098, 2400 prints in all; allocated by
// PyTorch 74.00 GiB to 74.90 GiB": what the group's other members add to the one shown.
std::string group_line(const ExplainReport& report, const EventGroup& group) {
  std::vector<int64_t> ranks, devices;
  uint64_t last_line = 0;
  for (size_t i : group.members) {
    const OomEvent& e = report.events[i].event;
    if (e.rank) ranks.push_back(*e.rank);
    if (e.device) devices.push_back(*e.device);
    last_line = std::max({last_line, e.line, e.last_repeat_line});
  }
  const OomEvent& first = report.events[group.members.front()].event;
  const OomEvent& shown = report.events[group.shown].event;
  std::string out = fmt::format("+ {} more like it:", group.members.size() - 1);
  std::string where;
  if (!ranks.empty()) where = "rank" + std::string(ranks.size() > 1 ? "s " : " ") + integer_ranges(ranks);
  if (!devices.empty()) {
    const std::string kind = first.string_field("device_kind").value_or("device");
    const std::string list = integer_ranges(devices);
    const std::string on = fmt::format("{}{} {}", kind, list.find_first_of(",-") == std::string::npos ? "" : "s", list);
    where = where.empty() ? on : fmt::format("{} ({})", where, on);
  }
  if (!where.empty()) out += " " + where + ",";
  out += fmt::format(" lines {}-{}", first.line, last_line);
  if (group.prints > group.members.size()) out += fmt::format(", {} prints in all", group.prints);
  // Every figure that differs from member to member, as a range (members print the same ones).
  std::string ranges;
  for (const auto& [name, q] : shown.quantities) {
    std::optional<uint64_t> low, high;
    for (size_t i : group.members) {
      if (auto b = report.events[i].event.bytes(name)) {
        low = std::min(low.value_or(*b), *b);
        high = std::max(high.value_or(*b), *b);
      }
    }
    if (low && *low != *high) {
      ranges += fmt::format("{}{} {} to {}", ranges.empty() ? "" : ", ", figure_label(name), format_bytes(*low),
                            format_bytes(*high));
    }
  }
  for (size_t k = 0; k < shown.other_processes.size(); ++k) {
    uint64_t low = UINT64_MAX, high = 0;
    for (size_t i : group.members) {
      const auto& others = report.events[i].event.other_processes;
      if (k < others.size()) {
        low = std::min(low, others[k].memory.bytes);
        high = std::max(high, others[k].memory.bytes);
      }
    }
    // PyTorch lists every process on the card, this one usually among them: name none as "other".
    if (low < high) {
      const std::string label = shown.other_processes.size() == 1 ? std::string("process memory in use")
                                                                  : fmt::format("listed process {} in use", k + 1);
      ranges += fmt::format("{}{} {} to {}", ranges.empty() ? "" : ", ", label, format_bytes(low), format_bytes(high));
    }
  }
  if (!ranges.empty()) out += "; " + ranges;
  return out;
}

}  // namespace

std::string render_explain(const ExplainReport& report, const Style& style, const ExplainTerminalOptions& options) {
  std::string out;
  size_t info_count = 0;
  size_t warning_count = 0;   // of those, non-fatal allocator warnings ("fatal": false)
  size_t shown = 0;
  std::vector<EventGroup> groups;
  if (options.group_similar) {
    groups = report.groups;
  } else {
    for (size_t i = 0; i < report.events.size(); ++i) groups.push_back({{i}, i, report.events[i].event.repeats});
  }
  // When errors were folded, say so first: the count the reader would otherwise scroll through.
  const size_t errors = report.error_count();
  size_t distinct = 0;
  for (const auto& g : groups) distinct += report.events[g.members.front()].event.is_error ? 1 : 0;
  if (distinct < errors) {
    // At the event cap the count is a floor: "at least".
    out += style.dim(fmt::format("{}{} in {}, {} distinct: each is shown once, with how many more are like it "
                                 "(oomdoc explain --each lists them all).",
                                 report.truncated ? "at least " : "", count_noun(errors, "out-of-memory error"),
                                 report.inputs.size() == 1 ? report.inputs.front() : count_noun(report.inputs.size(), "input"),
                                 distinct)) + "\n\n";
  }
  for (const auto& group : groups) {
    const ExplainedEvent& item = report.events[group.shown];
    const OomEvent& e = item.event;
    if (!e.is_error && !options.show_info) {
      ++info_count;
      if (const FieldValue* fatal = e.field("fatal"); fatal && *fatal == FieldValue(false)) ++warning_count;
      continue;
    }
    if (shown++ > 0) out += "\n";
    std::string where = fmt::format("{}:{}", item.input, e.line);
    std::string device;
    if (e.device) device += fmt::format(" on {} {}", e.string_field("device_kind").value_or("device"), *e.device);
    if (!e.device && e.string_field("device_kind") == "CPU") device += " on the host (CPU RAM, not the GPU)";
    // A TPU memory space has no index to show ("0x0x0_HBM0": a chip's coordinates and its HBM).
    if (!e.device && e.string_field("device_kind") == "TPU" && e.string_field("device_string")) {
      device += fmt::format(" on TPU {}", *e.string_field("device_string"));
    }
    if (e.rank) device += fmt::format(" (rank {})", *e.rank);
    if (auto node = e.string_field("node")) device += fmt::format(" on {}", *node);
    std::string headline = e.is_error ? fmt::format("{} out of memory{}", framework_title(e), device)
                                      : fmt::format("{} memory report{}", framework_title(e), device);
    // A kill is told by whoever saw it (the shell, the kernel, a launcher), not by the program.
    if (e.format == "process_killed") headline = fmt::format("Process killed (SIGKILL), reported by {}{}", kill_reporter(e), device);
    out += fmt::format("{}  {}\n", style.dim(where), style.bold(e.is_error ? style.red(headline) : headline));
    std::string numbers = numbers_line(e);
    if (!numbers.empty()) out += fmt::format("  {}\n", numbers);
    if (e.format == "vllm_memory_info") {
      std::string accounting = vllm_accounting_line(e);
      if (!accounting.empty()) out += fmt::format("  {}\n", accounting);
      if (auto line = e.int_field("error_line")) out += fmt::format("  raised at line {}: {}\n", *line, e.string_field("error_message").value_or(""));
    }
    if (e.traceback) {
      const Traceback& tb = *e.traceback;
      if (tb.innermost_user_frame) {
        const auto& f = *tb.innermost_user_frame;
        out += fmt::format("  at {}:{} in {}{}\n", f.file, f.line ? std::to_string(*f.line) : "?", f.function,
                           f.code.empty() ? "" : ": " + f.code);
      }
      if (!tb.operation.empty()) out += fmt::format("  during: {}\n", tb.operation);
    }
    if (e.repeats > 1 && e.last_repeat_line > e.line) {
      out += fmt::format("  (printed {} times, lines {}-{})\n", e.repeats, e.line, e.last_repeat_line);
    } else if (e.repeats > 1) {  // one line standing for several prints (Ray's deduplication)
      out += fmt::format("  (printed {} times, line {})\n", e.repeats, e.line);
    }
    if (group.members.size() > 1) out += fmt::format("  {}\n", group_line(report, group));
    const Diagnosis& d = item.diagnosis;
    auto title = [&](const std::string& cause) {
      return cause == "capacity_exhausted" && !d.capacity_title.empty() ? d.capacity_title : cause_title(cause);
    };
    out += fmt::format("\n  {} {}\n", style.bold("Cause:"), style.yellow(d.cause_title.empty() ? title(d.cause) : d.cause_title));
    for (const auto& s : d.secondary_causes) out += fmt::format("    also: {}\n", title(s));
    for (const auto& ev : d.evidence) out += fmt::format("    {}\n", ev);
    if (!d.fixes.empty()) {
      out += fmt::format("\n  {}\n", style.bold("Fixes, cheapest first:"));
      size_t n = 0;
      for (const auto& fix : d.fixes) {
        if (n++ >= options.max_fixes) break;
        out += fmt::format("    {}. {}\n", n, style.green(fix.title));
        if (!fix.detail.empty()) out += fmt::format("       {}\n", fix.detail);
        if (!fix.snippet.empty()) out += fmt::format("       {}\n", style.cyan(fix.snippet));
      }
      // The list is cut for reading; say what was left out and where it is.
      if (d.fixes.size() > options.max_fixes) {
        std::string rest;
        for (size_t i = options.max_fixes; i < d.fixes.size(); ++i) rest += (rest.empty() ? "" : "; ") + d.fixes[i].title;
        out += fmt::format("    (+{} more in --json, dearer: {})\n", d.fixes.size() - options.max_fixes, rest);
      }
    }
  }
  if (shown == 0 && !report.inputs.empty()) {
    out += "No out-of-memory error found";
    if (report.inputs.size() == 1) out += " in " + report.inputs.front();
    out += fmt::format(" ({}).\n", count_noun(report.lines, "line"));
  }
  if (!report.errors.empty()) {
    std::string names;
    for (const auto& err : report.errors) names += (names.empty() ? "" : ", ") + err.input;
    out += style.yellow(fmt::format("Partial result: {} of {} inputs could not be read ({}).",
                                    report.errors.size(), report.inputs.size() + report.errors.size(), names)) + "\n";
  }
  if (info_count > 0) {
    // Non-fatal allocator warnings (TensorFlow's "not a failure", TensorRT's skipped tactics) are named as such.
    std::string what;
    if (warning_count > 0) what = count_noun(warning_count, "non-fatal allocator warning");
    if (info_count > warning_count) {
      what += (what.empty() ? "" : " and ") +
              fmt::format("{} informational memory line{} (vLLM accounting, TensorFlow banners)", info_count - warning_count,
                          info_count - warning_count == 1 ? "" : "s");
    }
    out += fmt::format("\n{}\n", style.dim(what + " not shown; --all lists them."));
  }
  if (report.truncated) {
    out += style.yellow(fmt::format("Only the first events are listed: the input holds more ({} past them, "
                                    "counted but not read).\n", count_noun(report.messages_beyond_cap, "message line")));
  }
  return out;
}

}  // namespace oomdoc
