// The allocator settings a snapshot carries (since ~2.3), echoed with what each one means for
// memory (PyTorch docs, "Optimizing memory usage with PYTORCH_CUDA_ALLOC_CONF").
#include <fmt/format.h>

#include "analyses/snapshot_analysis.h"
#include "core/units.h"

namespace oomdoc {

std::vector<SettingNote> explain_allocator_settings(const AllocatorSettings& s) {
  std::vector<SettingNote> out;
  out.push_back({"PYTORCH_CUDA_ALLOC_CONF", s.alloc_conf.empty() ? "(unset)" : s.alloc_conf,
                 s.alloc_conf.empty() ? "the caching allocator runs with its defaults"
                                      : "the allocator configuration in effect"});
  if (s.expandable_segments) {
    out.push_back({"expandable_segments", *s.expandable_segments ? "True" : "False",
                   *s.expandable_segments
                       ? "segments grow and shrink by mapping pages, which avoids most fragmentation"
                       : "fixed-size segments: varying shapes can fragment the cache; "
                         "expandable_segments:True often helps"});
  }
  if (s.max_split_size) {
    out.push_back({"max_split_size",
                   *s.max_split_size < 0 ? "-1" : std::to_string(*s.max_split_size),
                   *s.max_split_size < 0
                       ? "no limit: any cached block may be split for a smaller request"
                       : fmt::format("blocks over {} are never split", format_bytes(uint64_t(*s.max_split_size)))});
  }
  if (s.garbage_collection_threshold) {
    out.push_back({"garbage_collection_threshold", fmt::format("{}", *s.garbage_collection_threshold),
                   *s.garbage_collection_threshold <= 0
                       ? "off: cached blocks are only released when a cudaMalloc fails"
                       : "cached blocks are reclaimed when usage passes this fraction of the device"});
  }
  if (s.trace_alloc_max_entries) {
    out.push_back({"trace_alloc_max_entries", std::to_string(*s.trace_alloc_max_entries),
                   "size of the trace ring buffer (keeps the newest events)"});
  }
  if (s.trace_alloc_overflowed) {
    out.push_back({"trace_alloc_overflowed", *s.trace_alloc_overflowed ? "True" : "False",
                   *s.trace_alloc_overflowed ? "the ring buffer wrapped: the oldest events are lost"
                                             : "the trace is complete"});
  }
  return out;
}

}  // namespace oomdoc
