// PyTorch's allocator messages (CUDA, ROCm/HIP, XPU, Ascend NPU, MPS), as printed by
// c10/cuda/CUDACachingAllocator.cpp and its ports across releases:
//  - new (2.x): "CUDA out of memory. Tried to allocate X. GPU N has a total capacity of T of which F
//    is free. [Process P has M memory in use.] [Including non-PyTorch memory, this process has M
//    memory in use.] Of the allocated memory A is allocated by PyTorch, [with P allocated in private
//    pools (e.g., CUDA Graphs),] and R is reserved by PyTorch but unallocated."
//  - old (<= 1.x): "CUDA out of memory. Tried to allocate X (GPU N; T total capacity; A already
//    allocated; F free; R reserved in total by PyTorch)" — or "R cached" before 1.5, where the
//    figure is reserved minus allocated.
//  - cudaMallocAsync backend, MPS, the 1EB garbage-size message, THC and TH (CPU) errors.
#include <fmt/format.h>

#include "core/text.h"
#include "readers/formats/message_format.h"
#include "readers/formats/regex_search.h"

namespace oomdoc {
namespace {

const std::string kSize(kSizePattern);

std::string framework_for_backend(std::string_view backend) {
  if (backend == "HIP") return "pytorch-rocm";
  if (backend == "XPU") return "pytorch-xpu";
  if (backend == "NPU") return "pytorch-npu";
  if (backend == "MPS") return "pytorch-mps";
  return "pytorch";
}

// The part of the window's joined text (MessageWindow::joined: a wrapped message reads as one
// line) a message may extend over: up to the next "out of memory" (another message) or 3000
// characters.
size_t message_limit(const MessageWindow& w, size_t from) {
  size_t next = w.joined.find("out of memory", from);
  size_t limit = std::min(w.joined.size(), from + 3000);
  return next == std::string::npos ? limit : std::min(limit, next);
}

// Where the message's known end is, when it follows `end` closely: the pointer to the
// documentation (2.x: "See documentation for Memory Management  (https://pytorch.org/docs/...)";
// 1.x: "... Memory Management and PYTORCH_CUDA_ALLOC_CONF"), so the lines it wrapped onto belong to
// the message. The URL may be cut mid-word by the wrapping (a space inside it once joined).
size_t known_end(const MessageWindow& w, size_t end, size_t limit) {
  static const RE2 tail(R"(^[^()]{0,300}?See documentation for Memory Management(?: and PYTORCH_\w*ALLOC_CONF)?(?: ?\(https://pytorch\.org/docs/[^)]{0,200}\))?)");
  std::string_view rest(w.joined.data() + end, std::min(limit, w.joined.size()) - end);
  if (auto g = regex_search(tail, rest)) return end + (*g)[0].size();
  return end;
}

// The allocator's fragmentation hint, as the message words it.
void read_hint(OomEvent& event, std::string_view text) {
  static const RE2 conf(R"((PYTORCH_\w*ALLOC_CONF=expandable_segments:True))");
  // A narrow wrap can cut the setting mid-word ("expandable_segme nts:True").
  std::string compact;
  for (char c : text) {
    if (c != ' ') compact += c;
  }
  if (auto g = regex_search(conf, compact)) {
    event.set_field("hint", std::string((*g)[1]));
  } else if (text.find("max_split_size_mb") != std::string_view::npos) {
    event.set_field("hint", std::string("max_split_size_mb"));
  } else if (text.find("empty_cache") != std::string_view::npos) {
    event.set_field("hint", std::string("empty_cache"));
  }
}

// Backend named before "out of memory" on the candidate line ("CUDA", "HIP", "XPU", "NPU").
std::optional<std::string> backend_before(std::string_view line) {
  static const RE2 re(R"((CUDA|HIP|XPU|NPU|MTIA)\s*out of memory)");
  if (auto g = regex_search(re, line)) return std::string((*g)[1]);
  return std::nullopt;
}

// The exception with no figures at all: "torch.OutOfMemoryError: CUDA out of memory." (a message
// cut by a log viewer, an issue title). Only the exception form, alone on its line, so that prose
// mentioning "CUDA out of memory" is not an event.
std::optional<FormatMatch> match_bare(const MessageWindow& w) {
  // Also cut inside the sentence that follows, at a terminal's or viewer's width ("... out of
  // memory. Tried to allocat").
  // Or inside the request's figure ("Tried to allocate 3.3"), which is then left out.
  static const RE2 re(R"(^\s*(?:[\w.]*(?:Error|Exception):\s*)?(CUDA|HIP|XPU|NPU) out of memory\.?\s*([A-Za-z ]*)( [\d.]+)?$)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  static constexpr std::string_view kNext = "Tried to allocate";
  const std::string_view cut = (*g)[2];
  if (matched((*g)[3]) && cut != kNext) return std::nullopt;
  if (!cut.empty() && (cut.size() > kNext.size() || kNext.substr(0, cut.size()) != cut)) return std::nullopt;
  FormatMatch m;
  const std::string backend((*g)[1]);
  m.event.framework = framework_for_backend(backend);
  m.event.format = "pytorch_new_truncated";
  m.event.set_field("backend", backend);
  return m;
}

std::optional<FormatMatch> match_new_in(const MessageWindow& w);

// `match` read over the window with its hard-wrapped run glued back (hard_wrapped_run), its line
// count in the window's lines: PyTorch's formats retry this way themselves, because a cut after
// their trigger ("Tried t" / "o allocate") leaves a match the scanner would not retry.
std::optional<FormatMatch> read_glued(const MessageWindow& w,
                                      std::optional<FormatMatch> (*match)(const MessageWindow&)) {
  const size_t run = hard_wrapped_run(w.lines, w.continuable_lines, w.first_line_width);
  if (run < 2) return std::nullopt;
  MessageWindow glued_window = MessageWindow::from_lines(glue_hard_wrapped(w.lines, run));
  glued_window.continuable_lines = continuable_after_glue(w.continuable_lines, run);
  auto glued = match(glued_window);
  if (!glued) return std::nullopt;
  glued->lines_used += run - 1;
  glued->event.set_field("hard_wrapped", true);
  return glued;
}

// A message hard-wrapped at a fixed width is also read glued back together, and that reading wins
// when it gives the full figures.
std::optional<FormatMatch> match_new(const MessageWindow& w) {
  auto m = match_new_in(w);
  auto whole = [](const std::optional<FormatMatch>& r) {
    return r && r->event.format == "pytorch_new" && r->event.field("message_cut") == nullptr;
  };
  if (whole(m)) return m;
  auto alt = read_glued(w, match_new_in);
  if (!alt || alt->event.format != "pytorch_new") return m;
  if (m && m->event.format == "pytorch_new" && !whole(alt)) return m;
  return alt;
}

std::optional<FormatMatch> match_new_in(const MessageWindow& w) {
  // The period after the request is optional: PyTorch 1.x's short form and quoted messages end
  // there ("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB").
  // PyTorch main's device-generic allocator (c10/core/CachingDeviceAllocator.h) says "Out of memory."
  // without the backend. XPU's allocator before 2.7 printed no free figure: "GPU 0 has a total
  // capacity of 15.11 GiB. Of the allocated memory ..." (c10/xpu/XPUCachingAllocator.cpp).
  static const RE2 head("[Oo]ut of memory\\.\\s*Tried to allocate (" + kSize +
                        ")\\.?(?:\\s*(GPU|NPU|XPU)\\s+(\\d+)\\s+has a total (capacity|capacty) of (" + kSize +
                        ")(?:\\s+of which (" + kSize + ")\\s+is free)?\\.)?");
  auto g = regex_search(head, w.joined);
  if (!g || w.joined_line_of(joined_offset_in(w, (*g)[0])) != 0) return match_bare(w);
  FormatMatch m;
  OomEvent& e = m.event;
  std::string backend = backend_before(w.lines[0]).value_or("CUDA");
  e.framework = framework_for_backend(backend);
  e.set_field("backend", backend);
  set_printed_size(e, "requested", (*g)[1]);
  size_t end = joined_offset_in(w, (*g)[0]) + (*g)[0].size();
  if (matched((*g)[2])) {
    e.format = "pytorch_new";
    e.device = parse_decimal<int64_t>((*g)[3]);
    e.set_field("device_kind", std::string((*g)[2]));
    e.set_field("capacity_spelling", std::string((*g)[4]));
    set_printed_size(e, "total", (*g)[5]);
    set_printed_size(e, "free", (*g)[6]);
  } else {
    e.format = "pytorch_new_truncated";
    // Cut inside the capacity sentence: the device, and the total when its figure is whole.
    static const RE2 partial("^\\s*(GPU|NPU|XPU)\\s+(\\d+)\\s+has a total (?:capacity|capacty) of(?:\\s+(" + kSize +
                             ")\\s+of which)?");
    std::string_view after(w.joined.data() + end, w.joined.size() - end);
    if (auto p = regex_search(partial, after); p && w.joined_line_of(joined_offset_in(w, (*p)[0])) == 0) {
      e.device = parse_decimal<int64_t>((*p)[2]);
      e.set_field("device_kind", std::string((*p)[1]));
      if (matched((*p)[3])) set_printed_size(e, "total", (*p)[3]);
    }
  }
  const size_t limit = message_limit(w, end);
  std::string_view rest(w.joined.data() + end, limit - end);

  static const RE2 other("Process (\\d+) has (" + kSize + ") memory in use");
  size_t from = 0;
  while (auto p = regex_search(other, rest, from)) {
    OtherProcess proc;
    proc.pid = parse_decimal<uint64_t>((*p)[1]);
    if (auto memory = parse_printed_size((*p)[2])) {
      proc.memory = *memory;
      e.other_processes.push_back(proc);
    }
    from = static_cast<size_t>((*p)[0].data() - rest.data()) + (*p)[0].size();
    end = std::max(end, joined_offset_in(w, (*p)[0]) + (*p)[0].size());
  }
  static const RE2 self("this process has (" + kSize + ") memory in use");
  // Cut inside the words after the figure (an issue title: "this process has 78.09 GiB memo"): the
  // figure is whole.
  static const RE2 self_cut("this process has (" + kSize + ")(?: [a-z ]*)?$");
  if (auto p = regex_search(self, rest)) {
    set_printed_size(e, "process", (*p)[1]);
    end = std::max(end, joined_offset_in(w, (*p)[0]) + (*p)[0].size());
  } else if (auto c = regex_search(self_cut, rest)) {
    set_printed_size(e, "process", (*c)[1]);
    end = std::max(end, joined_offset_in(w, (*c)[0]) + (*c)[0].size());
  }
  // torch.cuda.set_per_process_memory_fraction() adds "<limit> allowed; " before the figures.
  static const RE2 allowed("(" + kSize + ") allowed;");
  if (auto p = regex_search(allowed, rest)) {
    set_printed_size(e, "pytorch_limit", (*p)[1]);
    end = std::max(end, joined_offset_in(w, (*p)[0]) + (*p)[0].size());
  }
  // ROCm builds print "(e.g., HIP Graphs)" (the message is hipified with the rest of the allocator).
  static const RE2 allocated("Of the allocated memory (" + kSize +
                             ") is allocated by PyTorch,(?:\\s*with (" + kSize +
                             ") allocated in private pools \\(e\\.g\\., (?:CUDA|HIP) Graphs\\),)?\\s*and (" + kSize +
                             ") is reserved by PyTorch but unallocated");
  if (auto p = regex_search(allocated, rest)) {
    set_printed_size(e, "allocated", (*p)[1]);
    set_printed_size(e, "private_pools", (*p)[2]);
    set_printed_size(e, "reserved_unallocated", (*p)[3]);
    end = std::max(end, joined_offset_in(w, (*p)[0]) + (*p)[0].size());
    // The hint sentence follows the figures.
    size_t hint_end = std::min(limit, end + 400);
    std::string_view hint_text(w.joined.data() + end, hint_end - end);
    read_hint(e, hint_text);
    if (e.field("hint") != nullptr) {
      size_t period = w.joined.find("avoid fragmentation", end);
      if (period != std::string::npos && period < hint_end) end = period;
    }
  }
  // A 2.x message always prints its allocated figures: without them it was cut short (an issue
  // title, a viewer's width). The allocated figure printed whole before the cut is kept, and the
  // event says the reserve is missing (`message_cut`), so no cause rests on its absence.
  if (e.format == "pytorch_new" && !e.bytes("reserved_unallocated")) {
    static const RE2 allocated_cut("Of the allocated memory (" + kSize + ") is allocated by PyTorch");
    if (auto p = regex_search(allocated_cut, rest)) {
      set_printed_size(e, "allocated", (*p)[1]);
      end = std::max(end, joined_offset_in(w, (*p)[0]) + (*p)[0].size());
    }
    e.set_field("message_cut", true);
  }
  end = known_end(w, end, w.joined.size());
  m.lines_used = w.joined_line_of(end == 0 ? 0 : end - 1) + 1;
  return m;
}

std::optional<FormatMatch> match_old_in(const MessageWindow& w);
std::optional<FormatMatch> match_old_cut(const MessageWindow& w);

// PyTorch 1.x's message hard-wrapped at a fixed width ("... by PyT" / "orch)") reads only glued
// back together, as match_new's does; one cut short keeps what was printed whole before the cut.
std::optional<FormatMatch> match_old(const MessageWindow& w) {
  if (auto m = match_old_in(w)) return m;
  if (auto m = read_glued(w, match_old_in)) return m;
  return match_old_cut(w);
}

// PyTorch 1.x's message cut short (a log viewer's width, an issue title): "CUDA out of memory. Tried
// to allocate 20.00 MiB (GPU 0; 23.70 GiB total capacity; 21.05 GiB already allocated; 812.5". The
// device and every figure printed whole before the cut are read, in the order 1.x prints them; the
// figure the cut fell in is not. A figure is whole once its unit is printed. It is named by its label,
// or, when the line ends before or inside the label, by its place where only one field can stand
// there (the capacity, then the allocated memory) or by the part of the label printed when that names
// one. Format pytorch_old_truncated.
std::optional<FormatMatch> match_old_cut(const MessageWindow& w) {
  static const RE2 head("out of memory\\.\\s*Tried to allocate (" + kSize + ")\\s*\\(\\s*(GPU|NPU|XPU)\\s+(\\d+)\\s*;");
  auto g = regex_search(head, w.joined);
  if (!g || w.joined_line_of(joined_offset_in(w, (*g)[0])) != 0) return std::nullopt;
  FormatMatch m;
  OomEvent& e = m.event;
  e.format = "pytorch_old_truncated";
  auto backend = backend_before(w.lines[0]);
  const std::string kind((*g)[2]);
  if (!backend && kind == "NPU") backend = "NPU";
  e.framework = framework_for_backend(backend.value_or(kind == "XPU" ? "XPU" : "CUDA"));
  if (backend) e.set_field("backend", *backend);
  e.set_field("device_kind", kind);
  e.device = parse_decimal<int64_t>((*g)[3]);
  set_printed_size(e, "requested", (*g)[1]);
  size_t end = joined_offset_in(w, (*g)[0]) + (*g)[0].size();

  struct Field {
    std::string_view label;
    const char* name;
  };
  // The fields that may stand at each place: 1.x prints the capacity, the allocated memory, then
  // (some ports) the active memory, the free memory and PyTorch's reserve ("cached" before 1.5:
  // reserved minus allocated).
  static const std::vector<std::vector<Field>> places = {
      {{"total capacity", "total"}},
      {{"already allocated", "allocated"}},
      {{"current active", "active"}, {"free", "free"}, {"reserved in total by PyTorch", "reserved_total"},
       {"cached", "reserved_unallocated"}}};
  static const RE2 figure("^\\s*(" + kSize + ")\\s*");
  const size_t limit = message_limit(w, end);
  size_t place = 0;
  while (place < places.size()) {
    std::string_view rest(w.joined.data() + end, limit - end);
    auto f = regex_search(figure, rest);
    if (!f) break;
    const size_t after = end + (*f)[0].size();
    // The rest of the figure's line: where a cut shows.
    const size_t line = w.joined_line_of(after > 0 ? after - 1 : 0);
    const size_t line_end = std::min(limit, line + 1 < w.joined_starts.size() ? w.joined_starts[line + 1] : w.joined.size());
    std::string_view tail(w.joined.data() + after, limit - after);
    std::string_view on_line(w.joined.data() + after, line_end > after ? line_end - after : 0);
    while (!on_line.empty() && on_line.back() == ' ') on_line.remove_suffix(1);
    const Field* whole = nullptr;    // the label printed in full
    const Field* cut = nullptr;      // a label the line's end can be the start of
    size_t cut_candidates = 0;
    for (const Field& field : places[place]) {
      if (tail.starts_with(field.label)) whole = &field;
      if (field.label.starts_with(on_line)) {
        cut = &field;
        ++cut_candidates;
      }
    }
    if (whole != nullptr) {
      set_printed_size(e, whole->name, (*f)[1]);
      end = after + whole->label.size();
      std::string_view next(w.joined.data() + end, limit - end);
      const size_t skip = next.find_first_not_of(' ');
      if (skip == std::string_view::npos || (next[skip] != ';' && next[skip] != ')')) break;
      end += skip + 1;
      // The remaining fields may stand at the last place in any order.
      if (place + 1 < places.size()) ++place;
      continue;
    }
    // Cut before its label or inside it: the figure is whole, and the place or the label's start names it.
    if (cut_candidates == 1) {
      set_printed_size(e, cut->name, (*f)[1]);
      end = after + on_line.size();
    }
    break;
  }
  m.lines_used = w.joined_line_of(end == 0 ? 0 : end - 1) + 1;
  return m;
}

std::optional<FormatMatch> match_old_in(const MessageWindow& w) {
  static const RE2 re("Tried to allocate (" + kSize + ")\\s*\\(\\s*(GPU|NPU|XPU)\\s+(\\d+)\\s*;\\s*(" + kSize +
                      ") total capacity\\s*;\\s*(" + kSize + ") already allocated\\s*;(?:\\s*(" + kSize +
                      ") current active\\s*;)?(?:\\s*(" + kSize + ") free\\s*;)?\\s*(" + kSize +
                      ") (reserved in total by PyTorch|cached)\\s*\\)");
  auto g = regex_search(re, w.joined);
  if (!g || w.joined_line_of(joined_offset_in(w, (*g)[0])) != 0) return std::nullopt;
  FormatMatch m;
  OomEvent& e = m.event;
  const bool cached = (*g)[9] == "cached";
  e.format = cached ? "pytorch_old_cached" : "pytorch_old_reserved";
  auto backend = backend_before(w.lines[0]);
  std::string kind((*g)[2]);
  if (!backend && kind == "NPU") backend = "NPU";
  e.framework = framework_for_backend(backend.value_or(kind == "XPU" ? "XPU" : "CUDA"));
  if (backend) e.set_field("backend", *backend);
  e.set_field("device_kind", kind);
  e.device = parse_decimal<int64_t>((*g)[3]);
  set_printed_size(e, "requested", (*g)[1]);
  set_printed_size(e, "total", (*g)[4]);
  set_printed_size(e, "allocated", (*g)[5]);
  set_printed_size(e, "active", (*g)[6]);
  set_printed_size(e, "free", (*g)[7]);
  // Before PyTorch 1.5 "cached" printed reserved minus allocated; later "reserved in total" is the total.
  set_printed_size(e, cached ? "reserved_unallocated" : "reserved_total", (*g)[8]);
  size_t end = joined_offset_in(w, (*g)[0]) + (*g)[0].size();
  static const RE2 limit_re(R"(larger than (\d+\s?[KMGT]B)!)");
  if (auto l = regex_search(limit_re, w.lines[0])) {
    e.format = "xpu_4gb_block_limit";
    // Only Intel's extension prints this (the message names no backend, so none is claimed).
    e.framework = "pytorch-xpu";
    e.set_field("allocation_limit_text", std::string((*l)[1]));
  }
  const size_t limit = message_limit(w, end);
  std::string_view rest(w.joined.data() + end, std::min(limit, end + 300) - end);
  read_hint(e, rest);
  if (e.field("hint") != nullptr) {
    size_t hint_at = w.joined.find("max_split_size_mb", end);
    if (hint_at != std::string::npos && hint_at < limit) end = hint_at;
  }
  end = known_end(w, end, w.joined.size());
  m.lines_used = w.joined_line_of(end == 0 ? 0 : end - 1) + 1;
  return m;
}

std::optional<FormatMatch> match_cuda_malloc_async(const MessageWindow& w) {
  static const RE2 full("Allocation on device (\\d+) would exceed allowed memory\\.\\s*\\(out of memory\\)"
                        "(?:\\s*Currently allocated\\s*:\\s*(" + kSize + "))?"
                        "(?:\\s*Requested\\s*:\\s*(" + kSize + "))?"
                        "(?:\\s*Device limit\\s*:\\s*(" + kSize + "))?"
                        "(?:\\s*Free \\(according to CUDA\\)\\s*:\\s*(" + kSize + "))?"
                        "(?:\\s*PyTorch limit \\(set by user-supplied memory fraction\\)\\s*:\\s*(" + kSize + "))?");
  FormatMatch m;
  OomEvent& e = m.event;
  e.framework = "pytorch";
  e.set_field("backend", std::string("CUDA"));
  auto g = regex_search(full, w.flat);
  if (g && w.line_of(offset_in(w, (*g)[0])) == 0) {
    e.format = "pytorch_cudamallocasync";
    e.device = parse_decimal<int64_t>((*g)[1]);
    set_printed_size(e, "allocated", (*g)[2]);
    set_printed_size(e, "requested", (*g)[3]);
    set_printed_size(e, "total", (*g)[4]);
    set_printed_size(e, "free", (*g)[5]);
    if (set_printed_size(e, "pytorch_limit", (*g)[6]) && e.quantity("pytorch_limit")->overflow) {
      e.set_field("pytorch_limit_is_unlimited", true);
    }
    m.lines_used = w.line_of(offset_in(w, (*g)[0]) + (*g)[0].size() - 1) + 1;
    return m;
  }
  // ComfyUI shortens the exception to "Allocation on device" with nothing after it.
  if (w.lines[0].find("Allocation on device") == std::string::npos) return std::nullopt;
  e.format = "pytorch_cudamallocasync_short";
  return m;
}

std::optional<FormatMatch> match_mps(const MessageWindow& w) {
  // MPS prints "GB"/"MB" but means GiB/MiB (aten/src/ATen/mps/MPSAllocator.mm uses format_size).
  static const RE2 re("MPS backend out of memory \\(MPS allocated: (" + kSize + "), other allocations: (" + kSize +
                      "), max allowed: (" + kSize + ")\\)\\.?(?:\\s*Tried to allocate (" + kSize +
                      ") on (private|shared) pool)?");
  auto g = regex_search(re, w.joined);
  if (!g || w.joined_line_of(joined_offset_in(w, (*g)[0])) != 0) return std::nullopt;
  FormatMatch m;
  OomEvent& e = m.event;
  e.framework = "pytorch-mps";
  e.format = "mps";
  e.set_field("backend", std::string("MPS"));
  set_printed_size(e, "mps_allocated", (*g)[1], LabelMeaning::kBinary);
  set_printed_size(e, "other_allocations", (*g)[2], LabelMeaning::kBinary);
  set_printed_size(e, "max_allowed", (*g)[3], LabelMeaning::kBinary);
  set_printed_size(e, "requested", (*g)[4], LabelMeaning::kBinary);
  if (matched((*g)[5])) e.set_field("pool", std::string((*g)[5]));
  m.lines_used = w.joined_line_of(joined_offset_in(w, (*g)[0]) + (*g)[0].size() - 1) + 1;
  return m;
}

std::optional<FormatMatch> match_garbage_size(const MessageWindow& w) {
  static const RE2 re(R"(Tried to allocate (more than (\d+)(EB|PB)) memory)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m;
  OomEvent& e = m.event;
  e.framework = framework_for_backend(backend_before(w.lines[0]).value_or("CUDA"));
  e.format = "pytorch_garbage_size";
  e.set_field("backend", backend_before(w.lines[0]).value_or("CUDA"));
  e.set_field("requested_text", std::string((*g)[1]));
  e.set_field("requested_unit", std::string((*g)[3]));
  // The bound is count x 2^60 (EB) or 2^50 (PB); one that does not fit in int64 stays null.
  const auto count = parse_decimal<int64_t>((*g)[2]);
  const int shift = (*g)[3] == "EB" ? 60 : 50;
  if (count && *count <= (INT64_MAX >> shift)) {
    e.set_field("requested_lower_bound_bytes", static_cast<int64_t>(*count << shift));
  }
  return m;
}

std::optional<FormatMatch> match_thc(const MessageWindow& w) {
  static const RE2 re(R"(cuda runtime err(?:or)?\s*\(?(\d+)\)?\s*:\s*out of memory)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m;
  m.event.framework = "pytorch";
  m.event.format = "pytorch_thc_cuda_runtime_oom";
  if (auto code = parse_decimal<int64_t>((*g)[1])) m.event.set_field("cuda_error_code", *code);
  return m;
}

std::optional<FormatMatch> match_th_host(const MessageWindow& w) {
  // Lua Torch / early PyTorch TH: "$ Torch: not enough memory: you tried to allocate 72GB. Buy new RAM!"
  // THGeneral.c prints the size divided by 2^30 with a "GB" label.
  static const RE2 re(R"(not enough memory: you tried to allocate (\d+(?:\.\d+)?\s?[KMGT]B))");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m;
  m.event.framework = "pytorch";
  m.event.format = "torch_th_host_oom";
  m.event.set_field("device_kind", std::string("CPU"));
  set_printed_size(m.event, "requested", (*g)[1], LabelMeaning::kBinary);
  return m;
}

// c10's DefaultCPUAllocator: "DefaultCPUAllocator: can't allocate memory: you tried to allocate
// 21474836480 bytes. Error code 12 (Cannot allocate memory)" (posix_memalign on Linux/macOS), or
// "DefaultCPUAllocator: not enough memory: you tried to allocate 1073741824 bytes." (_aligned_malloc
// on Windows) — host RAM, not the GPU.
std::optional<FormatMatch> match_cpu_allocator(const MessageWindow& w) {
  static const RE2 re(R"(DefaultCPUAllocator: (?:can't allocate memory|not enough memory): you tried to allocate (\d+) bytes)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m;
  m.event.framework = "pytorch";
  m.event.format = "pytorch_cpu_allocator";
  m.event.set_field("device_kind", std::string("CPU"));
  set_printed_bytes(m.event, "requested", (*g)[1]);
  return m;
}

std::optional<FormatMatch> match_cuda_error(const MessageWindow& w) {
  static const RE2 re(R"((CUDA|HIP) error:\s*out of memory)");
  // TensorRT-LLM's check of a CUDA runtime call (tensorrt_llm/common/cudaUtils.h check()):
  // "[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, stream): out of memory".
  static const RE2 runtime_re(R"(CUDA runtime error in (::\w+|\w+)\(.*\): out of memory)");
  auto g = regex_search(re, w.lines[0]);
  if (!g) {
    auto r = regex_search(runtime_re, w.lines[0]);
    if (!r) return std::nullopt;
    FormatMatch m;
    const bool trtllm = w.lines[0].find("[TensorRT-LLM]") != std::string::npos;
    m.event.framework = trtllm ? "tensorrt-llm" : "cuda";
    m.event.format = "cuda_error_oom";
    m.event.set_field("backend", std::string("CUDA"));
    m.event.set_field("cuda_call", std::string((*r)[1]));
    return m;
  }
  FormatMatch m;
  m.event.framework = (*g)[1] == "HIP" ? "pytorch-rocm" : "pytorch";
  // A C++ program's own check names its source file on the line ("CUDA error: out of memory
  // (c:\projects\lc0\src\neural\cuda\network_cudnn.cc:442"); PyTorch's names none there (its
  // "Exception raised from" lines come later and point into c10).
  static const RE2 source(R"(\(([^()\s]+\.(?:cc|cu|cpp|cuh|cxx)):\d+)");
  if (auto file = regex_search(source, w.lines[0]); file && (*g)[1] == "CUDA") {
    const std::string path = to_lower(std::string((*file)[1]));
    // A PyTorch extension's kernel (csrc/x.cu) raised through torch stays PyTorch's.
    const bool raised_by_torch = w.lines[0].find("RuntimeError") != std::string::npos ||
                                 w.lines[0].find("torch") != std::string::npos;
    if (!raised_by_torch && path.find("c10") == std::string::npos && path.find("aten") == std::string::npos &&
        path.find("torch") == std::string::npos) {
      m.event.framework = "cuda";
      m.event.set_field("source_file", std::string((*file)[1]));
    }
  }
  m.event.format = "cuda_error_oom";
  m.event.set_field("backend", std::string((*g)[1]));
  return m;
}

}  // namespace

void add_pytorch_formats(std::vector<MessageFormat>& out) {
  out.push_back({"pytorch_garbage_size", {"more than"}, match_garbage_size});
  out.push_back({"pytorch_old", {"Tried to allocate"}, match_old});
  out.push_back({"pytorch_new", {"out of memory", "Out of memory. Tried to allocate"}, match_new});
  out.push_back({"pytorch_cudamallocasync", {"Allocation on device"}, match_cuda_malloc_async});
  out.push_back({"mps", {"MPS backend out of memory"}, match_mps});
  out.push_back({"pytorch_thc_cuda_runtime_oom", {"out of memory"}, match_thc});
  out.push_back({"torch_th_host_oom", {"not enough memory"}, match_th_host});
  out.push_back({"pytorch_cpu_allocator", {"DefaultCPUAllocator"}, match_cpu_allocator});
  out.push_back({"cuda_error_oom", {"out of memory"}, match_cuda_error});
}

}  // namespace oomdoc
