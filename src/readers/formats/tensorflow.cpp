// TensorFlow's memory messages: the OOM-when-allocating-tensor error (core/framework/op_kernel.cc),
// the BFC allocator's warnings and stats (tsl/framework/bfc_allocator.cc), the stream executor's
// driver failures (stream_executor/cuda/cuda_driver.cc), host allocations and the device banner.
// TensorFlow's "M"/"G"/"MiB" sizes are binary (strings::HumanReadableNumBytes).
#include <fmt/format.h>

#include <map>

#include "core/text.h"
#include "readers/formats/message_format.h"
#include "readers/formats/regex_search.h"
#include "readers/log_line.h"

namespace oomdoc {
namespace {

const std::string kSize(kSizePattern);

// Bytes per element of TensorFlow dtype names as the message prints them.
std::optional<uint64_t> dtype_size(std::string_view dtype) {
  if (dtype == "float" || dtype == "int32" || dtype == "uint32" || dtype == "qint32") return 4;
  if (dtype == "double" || dtype == "int64" || dtype == "uint64" || dtype == "complex64") return 8;
  if (dtype == "half" || dtype == "bfloat16" || dtype == "int16" || dtype == "uint16" || dtype == "qint16" ||
      dtype == "quint16") {
    return 2;
  }
  if (dtype == "int8" || dtype == "uint8" || dtype == "bool" || dtype == "qint8" || dtype == "quint8") return 1;
  // The 8-bit floats (tensorflow/core/framework/types.cc DataTypeStringInternal: float8_e5m2,
  // float8_e4m3fn, float8_e4m3fnuz, float8_e4m3b11fnuz, float8_e5m2fnuz): one byte each (qa21 t64).
  if (dtype.starts_with("float8_")) return 1;
  if (dtype == "complex128") return 16;
  return std::nullopt;
}

// "/job:localhost/replica:0/task:0/device:GPU:1" -> ("GPU", 1)
void read_device_string(OomEvent& e, std::string_view device) {
  static const RE2 re(R"(device:(\w+):(\d+))");
  e.set_field("device_string", std::string(device));
  if (auto g = regex_search(re, device)) {
    e.set_field("device_kind", std::string((*g)[1]));
    e.device = parse_decimal<int64_t>((*g)[2]);
  }
}

// The op that asked for the tensor, printed after the message: "[[{{node dense/kernel/Initializer/
// random_uniform}}]]" (graph mode: TF 1.x, tf.function), "[[node model/dense/MatMul (defined at
// ...)]]" (TF 2.0-2.4), or "[Op:MatMul]" (eager, usually on the message's own line).
std::optional<std::string> tf_node_of(const MessageWindow& w) {
  static const RE2 re(R"(\[\[\{\{node ([^}\s]+)\}\}|\[\[node ([^\s\]]+)|\[Op:([\w.]+)\])");
  constexpr size_t kLinesAfter = 4;  // the node line follows the message, hints and a blank line aside
  for (size_t i = 0; i < w.lines.size() && i <= kLinesAfter; ++i) {
    if (auto g = regex_search(re, w.lines[i])) {
      for (size_t k = 1; k <= 3; ++k) {
        if (matched((*g)[k])) return std::string((*g)[k]);
      }
    }
  }
  return std::nullopt;
}

std::optional<FormatMatch> match_oom_tensor(const MessageWindow& w) {
  static const RE2 re(R"(OOM when allocating tensor (?:with|of) shape\s*\[([\d,\s]*)\](?:\s*and type (\w+))?(?:\s*on (/job:\S+?/device:\w+:\d+|/device:\w+:\d+))?(?:\s*by allocator (\w+))?)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  auto m = new_match("tensorflow", "tf_oom_tensor");
  OomEvent& e = m.event;
  std::vector<int64_t> shape;
  uint64_t elements = 1;
  bool overflow = false;      // the element count (or a dimension) beyond 64 bits: no bytes
  bool shape_known = true;    // false when a dimension is beyond 64 bits: no shape either
  std::string dims((*g)[1]);
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t comma = dims.find(',', pos);
    std::string part = dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    if (!part.empty()) {
      auto dim = parse_decimal<int64_t>(part);
      if (!dim) {
        shape_known = false;
        overflow = true;
      } else {
        shape.push_back(*dim);
        if (*dim != 0 && elements > UINT64_MAX / static_cast<uint64_t>(*dim)) overflow = true;
        elements *= static_cast<uint64_t>(*dim);
      }
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (shape_known) e.set_field("shape", shape);
  if (matched((*g)[2])) {
    std::string dtype((*g)[2]);
    e.set_field("dtype", dtype);
    if (auto size = dtype_size(dtype); size && !overflow) {
      Quantity q;
      q.bytes = elements * *size;
      q.value = static_cast<double>(q.bytes);
      q.unit = "bytes (shape x dtype)";
      // The text as printed: from "shape" to the dtype's name.
      const std::string_view whole = (*g)[0];
      const size_t from = whole.find("shape");
      const size_t to = static_cast<size_t>((*g)[2].data() + (*g)[2].size() - whole.data());
      q.text = std::string(whole.substr(from, to - from));
      e.set_quantity("requested", q);
    }
  } else if (!overflow) {
    // No dtype printed: say what it would be as float32 rather than guess the request.
    e.set_field("requested_bytes_if_float32", static_cast<int64_t>(elements * 4));
  }
  if (matched((*g)[3])) read_device_string(e, (*g)[3]);
  if (matched((*g)[4])) e.set_field("allocator", std::string((*g)[4]));
  if (auto node = tf_node_of(w)) e.set_field("op", *node);
  return m;
}

// The BFC allocator (tsl/framework/bfc_allocator.cc) is shared by TensorFlow and XLA: JAX prints
// the same warning before its XlaRuntimeError. JAX's builds name the file under external/xla/ or
// external/tsl/ (TensorFlow's under tensorflow/ or external/local_xla/, external/local_tsl/), and
// the lines after a JAX failure carry jaxlib / XlaRuntimeError.
bool window_is_jax(const MessageWindow& w) {
  const std::string& first = w.lines[0];
  // (jaxlib built XLA from a vendored TensorFlow until 2023: external/org_tensorflow/.)
  if (first.find("external/xla/") != std::string::npos || first.find("external/tsl/") != std::string::npos ||
      first.find("external/org_tensorflow/") != std::string::npos) {
    return true;
  }
  // TensorFlow's own source path on the line (tensorflow/tsl/..., tensorflow/core/...) names it,
  // whatever a JAX error nearby says.
  if (first.find("tensorflow/") != std::string::npos) return false;
  for (const std::string& line : w.lines) {
    if (line.find("XlaRuntimeError") != std::string::npos || line.find("jaxlib") != std::string::npos ||
        line.find("jax.errors") != std::string::npos) {
      return true;
    }
  }
  return false;
}

std::optional<FormatMatch> match_bfc_oom(const MessageWindow& w) {
  static const RE2 re("Allocator \\((\\w+)\\) ran out of memory trying to allocate (" + kSize +
                      ")(?:\\s*\\(rounded to (\\d+)\\))?(?:\\s*requested by op (\\S+))?");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  auto m = new_match(window_is_jax(w) ? "jax" : "tensorflow", "tf_bfc_oom");
  OomEvent& e = m.event;
  std::string allocator((*g)[1]);
  e.set_field("allocator", allocator);
  static const RE2 device_re(R"(^(GPU|CPU|TPU|XPU)_(\d+)_bfc$)");
  if (auto d = regex_search(device_re, allocator)) e.device = parse_decimal<int64_t>((*d)[2]);
  set_printed_size(e, "requested", (*g)[2], LabelMeaning::kBinary);
  if (auto rounded = parse_decimal<int64_t>((*g)[3])) e.set_field("requested_rounded_bytes", *rounded);
  if (matched((*g)[4])) e.set_field("op", std::string((*g)[4]));
  // "The caller indicates that this is not a failure" marks a retryable, non-fatal warning; the
  // allocation summary dump is printed when the allocation really failed.
  size_t used = 1;
  if (w.flat.find("not a failure") != std::string::npos &&
      w.line_of(w.flat.find("not a failure")) == 0) {
    e.set_field("fatal", false);
    e.is_error = false;
  } else {
    size_t summary = w.flat.find("Current allocation summary follows");
    if (summary != std::string::npos && w.line_of(summary) <= 3) {
      e.set_field("fatal", true);
      used = w.line_of(summary) + 1;
    }
  }
  size_t hint = w.flat.find("If the cause is memory fragmentation");
  if (hint != std::string::npos && w.line_of(hint) <= 2) {
    e.set_field("hint", std::string("TF_GPU_ALLOCATOR=cuda_malloc_async"));
    used = std::max(used, w.line_of(hint) + 1);
  }
  m.lines_used = used;
  return m;
}

// The totals at the end of the BFC allocator's dump: "Sum Total of in-use chunks: 14.52GiB", then
// "total_region_allocated_bytes_: R memory_limit_: L ..." (the pool grows region by region up to L).
std::optional<FormatMatch> match_bfc_stats(const MessageWindow& w) {
  static const RE2 chunks("Sum Total of in-use chunks: (" + kSize + ")");
  auto g = regex_search(chunks, w.lines[0]);
  if (!g) return std::nullopt;
  auto m = new_match(window_is_jax(w) ? "jax" : "tensorflow", "tf_bfc_stats");
  m.event.is_error = false;
  set_printed_size(m.event, "in_use_chunks", (*g)[1], LabelMeaning::kBinary);
  static const RE2 limit(R"((?:total_region_allocated_bytes_: (\d+) )?memory_limit_: (\d+))");
  if (auto l = regex_search(limit, w.flat); l && w.line_of(offset_in(w, (*l)[0])) <= 2) {
    if (auto bytes = parse_decimal<int64_t>((*l)[1])) m.event.set_field("region_allocated_bytes", *bytes);
    if (auto bytes = parse_decimal<int64_t>((*l)[2])) m.event.set_field("memory_limit_bytes", *bytes);
    m.lines_used = lines_through(w, (*l)[0]);
  }
  // The Stats block printed next (its InUse is the same total; Limit the same limit).
  m.lines_used = read_allocator_stats(w, m.lines_used, m.event);
  return m;
}

std::optional<FormatMatch> match_driver_alloc(const MessageWindow& w) {
  static const RE2 re("failed to allocate (" + kSize + ")(?: \\((\\d+) bytes\\))? from device: (CUDA_ERROR_OUT_OF_MEMORY|hipError_t\\(\\d+\\)|HIP_ERROR_OutOfMemory)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  // ROCm's driver status: hipError_t(N) in older TensorFlow, HIP_ERROR_OutOfMemory in newer.
  const bool rocm = (*g)[3].substr(0, 3) == "hip" || (*g)[3].substr(0, 3) == "HIP";
  auto m = new_match("tensorflow", rocm ? "tf_rocm_driver_alloc" : "tf_cuda_driver_alloc");
  OomEvent& e = m.event;
  // A size no one prints (40 digits) leaves the request out; the status stands.
  if (auto printed = parse_printed_size((*g)[1], LabelMeaning::kBinary)) {
    e.set_field("requested_bytes_from_text", static_cast<int64_t>(printed->bytes));
    // An exact byte count is printed beside the rounded one: the exact one is the request (when
    // it fits in 64 bits; otherwise the rounded one stands).
    if (auto exact = parse_decimal<uint64_t>((*g)[2])) {
      printed->bytes = *exact;
      printed->tolerance_bytes = 0;
    }
    e.set_quantity("requested", *printed);
  }
  if (rocm) e.set_field("status", std::string((*g)[3]));
  // The glog severity TensorFlow printed it at: I for the reservations its allocator retries
  // smaller or does without (a growth attempt mid-run, then "not a failure"), E for one it does
  // not. An INFO line is no failure of its own.
  // (TensorFlow's own "2025-03-17 17:48:09.854267: I tensorflow/.../cuda_driver.cc:739]", or glog's
  // header, readers/log_line.h.)
  static const RE2 severity(R"((?:^|[\s:])([IWEF]) [\w./-]+\.cc:\d+\] failed to allocate)");
  std::optional<std::string> level;
  if (auto found = regex_search(severity, w.lines[0])) level = std::string((*found)[1]);
  else if (auto glog = glog_severity(w.lines[0])) level = std::string(1, *glog);
  if (level) {
    e.set_field("log_severity", *level);
    if (*level == "I") {
      e.set_field("fatal", false);
      e.is_error = false;
    }
  }
  return m;
}

std::optional<FormatMatch> match_host_alloc(const MessageWindow& w) {
  static const RE2 re(R"(failed to alloc (\d+) bytes (on host|unified memory))");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  auto m = new_match("tensorflow", "host_or_unified_alloc");
  if (auto q = parse_quantity(std::string((*g)[1]) + " bytes")) {   // "N bytes", as printed
    m.event.set_quantity("requested", *q);
  }
  m.event.set_field("memory_kind", std::string((*g)[2]));
  // The pinned-host warning that follows repeats the same request.
  if (w.lines.size() > 1 && w.lines[1].find("could not allocate pinned host memory") != std::string::npos) {
    m.lines_used = 2;
  }
  return m;
}

std::optional<FormatMatch> match_device_info(const MessageWindow& w) {
  static const RE2 re("totalMemory: (" + kSize + ") freeMemory: (" + kSize + ")");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  auto m = new_match("tensorflow", "tf_device_info");
  m.event.is_error = false;
  set_printed_size(m.event, "total", (*g)[1], LabelMeaning::kBinary);
  set_printed_size(m.event, "free", (*g)[2], LabelMeaning::kBinary);
  static const RE2 created(R"(Created TensorFlow device \((\S+) with (\d+ MB) memory\))");
  if (auto c = regex_search(created, w.flat); c && w.line_of(offset_in(w, (*c)[0])) <= 3) {
    set_printed_size(m.event, "tf_device_memory_limit", (*c)[2], LabelMeaning::kBinary);
    m.lines_used = lines_through(w, (*c)[0]);
  }
  return m;
}

std::optional<FormatMatch> match_dst_tensor(const MessageWindow& w) {
  if (w.lines[0].find("Dst tensor is not initialized") == std::string::npos) return std::nullopt;
  return new_match("tensorflow", "tf_dst_tensor_not_initialized");
}

}  // namespace

size_t read_allocator_stats(const MessageWindow& w, size_t from, OomEvent& e) {
  static const RE2 stats(R"(\bStats:\s*(?:Limit:\s*(\d+))?\s*$)");
  static const RE2 entry(R"(^\s*(Limit|InUse|MaxInUse|NumAllocs|MaxAllocSize|Reserved|PeakReserved|LargestFreeBlock):\s*(\d+)\s*$)");
  constexpr size_t kLinesBefore = 3;   // the Stats line follows the totals within a few lines
  for (size_t i = from; i < w.lines.size() && i <= from + kLinesBefore; ++i) {
    auto g = regex_search(stats, w.lines[i]);
    if (!g) continue;
    std::map<std::string, uint64_t> values;
    if (auto limit = parse_decimal<uint64_t>((*g)[1])) values["Limit"] = *limit;
    size_t used = i + 1;
    for (size_t k = i + 1; k < w.lines.size(); ++k) {
      auto v = regex_search(entry, w.lines[k]);
      if (!v) break;
      if (auto n = parse_decimal<uint64_t>((*v)[2])) values[std::string((*v)[1])] = *n;
      used = k + 1;
    }
    // Without both figures this is some other "Stats:" line.
    if (!values.contains("Limit") || !values.contains("InUse")) return from;
    auto bytes = [&](const char* name, uint64_t v) {
      if (!e.quantity(name)) set_printed_bytes(e, name, std::to_string(v));
    };
    bytes("in_use_chunks", values["InUse"]);
    if (values["Limit"] > 0 && !e.field("memory_limit_bytes")) {
      e.set_field("memory_limit_bytes", static_cast<int64_t>(values["Limit"]));
    }
    if (values.contains("MaxInUse")) bytes("max_in_use", values["MaxInUse"]);
    if (values.contains("LargestFreeBlock") && values["LargestFreeBlock"] > 0) {
      bytes("largest_free_block", values["LargestFreeBlock"]);
    }
    return used;
  }
  return from;
}

void add_tensorflow_formats(std::vector<MessageFormat>& out) {
  out.push_back({"tf_oom_tensor", {"OOM when allocating tensor"}, match_oom_tensor});
  out.push_back({"tf_bfc_oom", {"ran out of memory trying to allocate"}, match_bfc_oom});
  out.push_back({"tf_bfc_stats", {"Sum Total of in-use chunks"}, match_bfc_stats});
  out.push_back({"tf_driver_alloc", {"failed to allocate"}, match_driver_alloc});
  out.push_back({"host_or_unified_alloc", {"failed to alloc "}, match_host_alloc});
  out.push_back({"tf_device_info", {"totalMemory:"}, match_device_info});
  out.push_back({"tf_dst_tensor_not_initialized", {"Dst tensor is not initialized"}, match_dst_tensor});
}

}  // namespace oomdoc
