// XLA (JAX, PyTorch/XLA) RESOURCE_EXHAUSTED errors, with the BufferAssignment statistics that
// follow them (xla/service/buffer_assignment.cc) and the device allocator's failed requests.
#include "core/text.h"
#include "readers/formats/message_format.h"
#include "readers/formats/regex_search.h"

namespace oomdoc {
namespace {

const std::string kSize(kSizePattern);


std::optional<FormatMatch> match_oom_bytes(const MessageWindow& w) {
  // "while trying to allocate" (BFC-era XLA) or "allocating" (the GPU client's direct allocation,
  // e.g. jax-ml/jax issues of 2023: "Out of memory allocating 20029400304 bytes.").
  static const RE2 re(R"((?:RESOURCE_EXHAUSTED|Resource exhausted):\s*Out\s+of\s+memory (?:while trying to allocate|allocating) (\d+) bytes)");
  auto g = regex_search(re, w.flat);
  if (!g || w.line_of(offset_in(w, (*g)[0])) != 0) return std::nullopt;
  auto m = new_match("jax", "xla_oom_bytes");
  OomEvent& e = m.event;
  set_printed_bytes(e, "requested", (*g)[1]);
  size_t end = offset_in(w, (*g)[0]) + (*g)[0].size();
  // "BufferAssignment stats:" lines: each "<kind> allocation: <size>" and the total.
  static const RE2 stat("\\n\\s*(parameter|constant|maybe_live_out|preallocated temp|total) allocation:\\s*(" + kSize + ")");
  size_t from = end;
  while (auto s = regex_search(stat, w.flat, from)) {
    std::string kind((*s)[1]);
    for (char& c : kind) if (c == ' ') c = '_';
    set_printed_size(e, "xla_" + kind + "_allocation", (*s)[2], LabelMeaning::kBinary);
    from = offset_in(w, (*s)[0]) + (*s)[0].size();
    end = from;
  }
  static const RE2 frag("\\n\\s*total fragmentation:\\s*(" + kSize + ")");
  if (auto f = regex_search(frag, w.flat, end)) {
    if (w.line_of(offset_in(w, (*f)[0]) + 1) <= w.line_of(end) + 1) {
      set_printed_size(e, "xla_total_fragmentation", (*f)[1], LabelMeaning::kBinary);
      end = offset_in(w, (*f)[0]) + (*f)[0].size();
    }
  }
  m.lines_used = w.line_of(end - 1) + 1;
  // "Peak buffers:" (within the window) list each buffer's "Size:" and then its "Shape:" or "Entry
  // Parameter Subshape:" with the element type first: the bytes of 64-bit floats (f64, c128) are
  // those that float32 would halve (JAX's jax_enable_x64).
  static const RE2 size_re("^\\s*Size:\\s*(" + kSize + ")");
  static const RE2 shape_re(R"(^\s*(?:Entry Parameter Subshape|Shape):\s*(f64|c128)\[)");
  std::optional<uint64_t> size;
  uint64_t wide = 0;
  for (size_t i = m.lines_used; i < w.lines.size(); ++i) {
    if (auto s = regex_search(size_re, w.lines[i])) {
      auto q = parse_printed_size((*s)[1], LabelMeaning::kBinary);
      size = q ? std::optional<uint64_t>(q->bytes) : std::nullopt;
    } else if (size && regex_search(shape_re, w.lines[i])) {
      wide += *size;
      size.reset();
    }
  }
  if (wide > 0) e.set_field("xla_f64_peak_buffer_bytes", static_cast<int64_t>(wide));
  return m;
}

std::optional<FormatMatch> match_failed_request(const MessageWindow& w) {
  static const RE2 re("Failed to allocate request for (" + kSize + ")(?: \\((\\d+)B\\))? on device ordinal (\\d+)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  auto m = new_match("jax", "xla_failed_request");
  // A size beyond what parse_printed_size reads (40 digits) leaves the request out.
  if (auto q = parse_printed_size((*g)[1], LabelMeaning::kBinary)) {
    if (matched((*g)[2])) {
      m.event.set_field("requested_bytes_from_text", static_cast<int64_t>(q->bytes));
      if (auto exact = parse_decimal<uint64_t>((*g)[2])) {
        q->bytes = *exact;
        q->tolerance_bytes = 0;
      }
    }
    m.event.set_quantity("requested", *q);
  }
  m.event.device = parse_decimal<int64_t>((*g)[3]);
  return m;
}

// XLA's cudaMallocAsync allocator (xla/stream_executor/gpu/gpu_cudamallocasync_allocator.cc, used
// by JAX and by TensorFlow under TF_GPU_ALLOCATOR=cuda_malloc_async): "cuMemAllocAsync failed to
// allocate N bytes: RESOURCE_EXHAUSTED: ... CUDA_ERROR_OUT_OF_MEMORY", then the driver's view on
// the next line, " Reported by CUDA: Free memory/Total memory: F/T", and the allocator's Stats.
std::optional<FormatMatch> match_cuda_async_alloc(const MessageWindow& w) {
  static const RE2 re(R"(cuMemAllocAsync failed to allocate (\d+) bytes)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  // Its file sits under tensorflow/ (or TensorFlow's vendored external/local_xla, local_tsl) when
  // TensorFlow printed it; JAX's (and a bare glog path) otherwise.
  const bool tensorflow = w.lines[0].find("tensorflow/") != std::string::npos ||
                          w.lines[0].find("external/local_") != std::string::npos;
  auto m = new_match(tensorflow ? "tensorflow" : "jax", "xla_cuda_async_alloc");
  set_printed_bytes(m.event, "requested", (*g)[1]);
  static const RE2 driver(R"(Free memory/Total memory:\s*(\d+)/(\d+))");
  for (size_t i = 0; i < std::min<size_t>(w.lines.size(), 3); ++i) {
    auto d = regex_search(driver, w.lines[i]);
    if (!d) continue;
    for (auto [name, text] : {std::pair{"free", (*d)[1]}, std::pair{"total", (*d)[2]}}) {
      set_printed_bytes(m.event, name, text);
    }
    m.lines_used = i + 1;
    break;
  }
  m.lines_used = read_allocator_stats(w, m.lines_used, m.event);
  return m;
}

// The TPU compiler's "Ran out of memory in memory space <space>.": vmem (and smem, cmem) are the
// core's on-chip memories, where a kernel's tiles must fit; hbm is the chip's main memory, where
// the whole program's buffers must (xla_tpu_hbm_compile). Both may go on with "Used 20.00G of
// 15.48G hbm. Exceeded hbm capacity by 4.52G." (XLA prints sizes in binary units.)
std::optional<FormatMatch> match_tpu_compile(const MessageWindow& w) {
  static const RE2 re(R"(Ran out of memory in memory space (\w+))");
  auto g = regex_search(re, w.flat);
  if (!g || w.line_of(offset_in(w, (*g)[0])) != 0) return std::nullopt;
  const std::string space((*g)[1]);
  auto m = new_match("jax", space == "hbm" ? "xla_tpu_hbm_compile" : "xla_tpu_vmem_compile");
  m.event.set_field("memory_space", space);
  size_t end = offset_in(w, (*g)[0]) + (*g)[0].size();
  static const RE2 used(R"(\.?\s*Used\s+()" + kSize + R"()\s+of\s+()" + kSize + R"()\s+(\w+)\.)");
  if (auto u = regex_search(used, w.flat, end); u && offset_in(w, (*u)[0]) == end && std::string((*u)[3]) == space) {
    set_printed_size(m.event, "xla_memory_needed", (*u)[1], LabelMeaning::kBinary);
    set_printed_size(m.event, "total", (*u)[2], LabelMeaning::kBinary);
    end = offset_in(w, (*u)[0]) + (*u)[0].size();
    static const RE2 over(R"(\s*Exceeded\s+(\w+)\s+capacity\s+by\s+()" + kSize + ")");
    if (auto x = regex_search(over, w.flat, end); x && offset_in(w, (*x)[0]) == end && std::string((*x)[1]) == space) {
      set_printed_size(m.event, "xla_memory_exceeded", (*x)[2], LabelMeaning::kBinary);
      end = offset_in(w, (*x)[0]) + (*x)[0].size();
    }
  }
  m.lines_used = w.line_of(end - 1) + 1;
  return m;
}

// The TPU runtime prints the same words under TensorFlow, JAX and PyTorch/XLA: "torch_xla" when
// PyTorch/XLA's client names itself on the first lines (xla_client, torch_xla, its XRT ops), else "xla".
const char* tpu_runtime_framework(const MessageWindow& w) {
  for (size_t i = 0; i < w.lines.size() && i <= 3; ++i) {
    if (contains(w.lines[i], "xla_client") || contains(w.lines[i], "torch_xla") || contains(w.lines[i], "XRTExecute")) {
      return "torch_xla";
    }
  }
  return "xla";
}

// The TPU runtime's reservation of a program's memory at the bottom of HBM (TensorFlow, PyTorch/XLA and
// JAX on TPU): "Attempting to reserve 6.48G at the bottom of memory. That was not possible. There are
// 6.78G free, 0B reserved, and 3.33G reservable." — the program needs one contiguous region there, so
// free memory above the request with too little of it reservable means buffers that outlive a step sit
// in the way. It may go on with "HBM capacity 8.00G:" and the breakdown "Currently allocated: 6.08G
// (6,532,939,776 bytes)", "Program requirement: 3.95G (4,237,689,856 bytes)". Sizes are binary.
std::optional<FormatMatch> match_tpu_reserve(const MessageWindow& w) {
  static const RE2 re("Attempting to reserve (" + kSize + ") at the bottom of memory\\. That was not possible\\. There are (" +
                      kSize + ") free, (" + kSize + ") reserved, and (" + kSize + ") reservable");
  auto g = regex_search(re, w.joined);
  if (!g || w.joined_line_of(joined_offset_in(w, (*g)[0])) != 0) return std::nullopt;
  auto m = new_match(tpu_runtime_framework(w), "xla_tpu_hbm_reserve");
  OomEvent& e = m.event;
  e.set_field("device_kind", std::string("TPU"));
  set_printed_size(e, "requested", (*g)[1], LabelMeaning::kBinary);
  set_printed_size(e, "free", (*g)[2], LabelMeaning::kBinary);
  set_printed_size(e, "hbm_reserved", (*g)[3], LabelMeaning::kBinary);
  set_printed_size(e, "reservable", (*g)[4], LabelMeaning::kBinary);
  size_t last = w.joined_line_of(joined_offset_in(w, (*g)[0]) + (*g)[0].size() - 1);
  // The breakdown, within the next lines (exact bytes where printed).
  static const RE2 capacity("HBM capacity (" + kSize + ")");
  static const RE2 row(R"(^\s*(Top-of-Memory reserved|Currently allocated|Program requirement):\s+\S+\s+\(\s*([\d,]+) bytes\))");
  constexpr size_t kLinesAfter = 10;
  for (size_t i = 1; i < w.lines.size() && i <= kLinesAfter; ++i) {
    if (auto c = regex_search(capacity, w.lines[i])) {
      set_printed_size(e, "total", (*c)[1], LabelMeaning::kBinary);
      last = i;
    } else if (auto r = regex_search(row, w.lines[i])) {
      std::string digits;
      for (char ch : (*r)[2]) {
        if (ch != ',') digits += ch;
      }
      const std::string name = (*r)[1] == "Currently allocated" ? "hbm_allocated"
                               : (*r)[1] == "Program requirement" ? "xla_memory_needed" : "hbm_top_reserved";
      set_printed_bytes(e, name, digits, (*r)[2]);   // (its text with the thousands separators printed)
      last = i;
    }
  }
  m.lines_used = last + 1;
  return m;
}

// The TPU runtime's allocator refusing one device buffer: "RESOURCE_EXHAUSTED: Error allocating device
// buffer: Attempting to allocate 129.50M. That was not possible. There are 78.17M free.; (0x0x0_HBM0)"
// (or "Resource exhausted: Attempting to allocate ..."). The memory space closes it: a chip's
// coordinates and which of its HBMs. Sizes are binary, as XLA prints them (M = MiB).
std::optional<FormatMatch> match_tpu_hbm_alloc(const MessageWindow& w) {
  static const RE2 re("Attempting to allocate (" + kSize + ")\\. That was not possible\\. There are (" + kSize +
                      ") free\\.(?:;?\\s*\\((\\w+_HBM\\d+)\\))?");
  auto g = regex_search(re, w.joined);
  if (!g || w.joined_line_of(joined_offset_in(w, (*g)[0])) != 0) return std::nullopt;
  auto m = new_match(tpu_runtime_framework(w), "xla_tpu_hbm_alloc");
  OomEvent& e = m.event;
  e.set_field("device_kind", std::string("TPU"));
  set_printed_size(e, "requested", (*g)[1], LabelMeaning::kBinary);
  set_printed_size(e, "free", (*g)[2], LabelMeaning::kBinary);
  // Not a device index: HBM0 of one chip and HBM0 of another are different memories.
  if (matched((*g)[3])) e.set_field("device_string", std::string((*g)[3]));
  m.lines_used = w.joined_line_of(joined_offset_in(w, (*g)[0]) + (*g)[0].size() - 1) + 1;
  return m;
}

// The GPU client's host memory (pinned buffers for host offloading and transfers) has its own
// limit: "RESOURCE_EXHAUSTED: Out of host memory while trying to allocate 73014444032 bytes. Please
// set the environment variable XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB to allocate larger host memory
// than the default 64 GB."
std::optional<FormatMatch> match_host_oom(const MessageWindow& w) {
  static const RE2 re(R"((?:RESOURCE_EXHAUSTED|Resource exhausted):\s*Out\s+of\s+host\s+memory (?:while trying to allocate|allocating) (\d+) bytes)");
  auto g = regex_search(re, w.flat);
  if (!g || w.line_of(offset_in(w, (*g)[0])) != 0) return std::nullopt;
  auto m = new_match("jax", "xla_host_oom");
  set_printed_bytes(m.event, "requested", (*g)[1]);
  m.event.set_field("device_kind", std::string("CPU"));
  static const RE2 limit(R"(XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB to allocate larger host memory than the default (\d+) ?GB)");
  if (auto l = regex_search(limit, w.lines[0])) {
    if (auto gb = parse_decimal<int64_t>((*l)[1])) m.event.set_field("host_memory_limit_gb", *gb);
  }
  return m;
}

}  // namespace

void add_xla_formats(std::vector<MessageFormat>& out) {
  out.push_back({"xla_host_oom", {"Out of host memory"}, match_host_oom});
  out.push_back({"xla_oom_bytes", {"xhausted", "XHAUSTED"}, match_oom_bytes});
  out.push_back({"xla_failed_request", {"Failed to allocate request for"}, match_failed_request});
  out.push_back({"xla_cuda_async_alloc", {"cuMemAllocAsync failed to allocate"}, match_cuda_async_alloc});
  out.push_back({"xla_tpu_hbm_reserve", {"at the bottom of memory"}, match_tpu_reserve});
  out.push_back({"xla_tpu_hbm_alloc", {"Attempting to allocate"}, match_tpu_hbm_alloc});
  out.push_back({"xla_tpu_vmem_compile", {"Ran out of memory in memory space"}, match_tpu_compile});
}

}  // namespace oomdoc
