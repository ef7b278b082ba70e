// PaddlePaddle's GPU out-of-memory errors. Paddle 1.6+ (memory/allocation/cuda_allocator.cc,
// memory/detail/system_allocator.cc): "Out of memory error on GPU 0. Cannot allocate 98.000244MB memory
// on GPU 0, 6.000000GB memory has been allocated and available memory is only 0.000000B." (the
// "has been allocated" clause from Paddle 2.x; 1.x: "Cannot allocate 145.468994MB GPU memory, available
// memory is 72.312500MB." with the FLAGS_fraction_of_gpu_memory_to_use it ran with). Sizes come from
// string::HumanReadableSize, which divides by 1024 and labels "B", "kB", "MB", "GB", "TB": binary.
// Paddle 0.x/1.0 fluid checked its first chunk at startup (platform/gpu_info.cc GpuMaxChunkSize):
// "enforce allocating <= available failed, 10513462067 > 1369702144", in bytes.
#include <algorithm>

#include "core/text.h"
#include "readers/formats/message_format.h"
#include "readers/formats/regex_search.h"

namespace oomdoc {
namespace {

std::optional<FormatMatch> match_paddle_gpu(const MessageWindow& w) {
  const std::string size(kSizePattern);   // HumanReadableSize: six decimals, "kB"/"MB" without a space
  static const RE2 re("Out of memory error on GPU (\\d+)\\. Cannot allocate (" + size + ") (?:GPU )?memory(?: on GPU \\d+)?, (?:(" +
                      size + ") memory has been allocated and )?available memory is (?:only )?(" + size + ")");
  // A terminal may wrap it: the joined text reads it as printed.
  auto g = regex_search(re, w.joined);
  if (!g || w.joined_line_of(joined_offset_in(w, (*g)[0])) != 0) return std::nullopt;
  auto m = new_match("paddle", "paddle_gpu_oom");
  OomEvent& e = m.event;
  e.device = parse_decimal<int64_t>((*g)[1]);
  set_printed_size(e, "requested", (*g)[2], LabelMeaning::kBinary);
  if (matched((*g)[3])) set_printed_size(e, "gpu_allocated", (*g)[3], LabelMeaning::kBinary);
  set_printed_size(e, "free", (*g)[4], LabelMeaning::kBinary);
  const size_t end = joined_offset_in(w, (*g)[0]) + (*g)[0].size();
  m.lines_used = w.joined_line_of(end - 1) + 1;
  // Paddle 1.x names the share of the card it reserves: "Currently, it is 0.980000." (or "...is 0.92 now").
  static const RE2 fraction(R"(FLAGS_fraction_of_gpu_memory_to_use (?:is ([01]\.\d+) now|.*?Currently, it is ([01]\.\d+)))");
  if (auto f = regex_search(fraction, w.joined, end)) {
    const std::string_view value = matched((*f)[1]) ? (*f)[1] : (*f)[2];
    if (auto v = parse_decimal<double>(value)) e.set_field("fraction_of_gpu_memory_to_use", *v);
    m.lines_used = std::max(m.lines_used, w.joined_line_of(joined_offset_in(w, (*f)[0]) + (*f)[0].size() - 1) + 1);
  }
  // A cap set with FLAGS_gpu_memory_limit_mb: "Currently `FLAGS_gpu_memory_limit_mb` is 4096".
  static const RE2 limit(R"(Currently `FLAGS_gpu_memory_limit_mb` is (\d+))");
  if (auto l = regex_search(limit, w.joined, end)) {
    if (auto mb = parse_decimal<int64_t>((*l)[1])) e.set_field("gpu_memory_limit_mb", *mb);
  }
  return m;
}

std::optional<FormatMatch> match_paddle_enforce(const MessageWindow& w) {
  static const RE2 re(R"(enforce allocating <= available failed, (\d+) > (\d+))");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  auto m = new_match("paddle", "paddle_enforce_allocating");
  set_printed_bytes(m.event, "requested", (*g)[1]);
  set_printed_bytes(m.event, "free", (*g)[2]);
  return m;
}

}  // namespace

void add_paddle_formats(std::vector<MessageFormat>& out) {
  out.push_back({"paddle_gpu_oom", {"Out of memory error on GPU"}, match_paddle_gpu});
  out.push_back({"paddle_enforce_allocating", {"enforce allocating <= available"}, match_paddle_enforce});
}

}  // namespace oomdoc
