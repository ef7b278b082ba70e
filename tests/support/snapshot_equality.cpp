#include "support/snapshot_equality.h"

#include <fmt/format.h>

namespace oomdoc::testing {

namespace {

// Compares one field; on a difference, sets `out` (first one wins) and returns false.
template <typename T>
bool same(const T& x, const T& y, const std::string& what, std::string& out) {
  if (x == y) return true;
  if (out.empty()) {
    if constexpr (fmt::is_formattable<T>::value) {
      out = fmt::format("{}: {} vs {}", what, x, y);
    } else {
      out = what + " differ";
    }
  }
  return false;
}

}  // namespace

std::string first_snapshot_difference(const Snapshot& a, const Snapshot& b) {
  std::string d;
  same(int(a.layout), int(b.layout), "layout", d);
  same(a.strings, b.strings, "strings", d);
  if (same(a.frames.size(), b.frames.size(), "frames.size", d)) {
    for (size_t i = 0; i < a.frames.size() && d.empty(); ++i) {
      const auto &x = a.frames[i], &y = b.frames[i];
      same(x.filename, y.filename, fmt::format("frames[{}].filename", i), d);
      same(x.name, y.name, fmt::format("frames[{}].name", i), d);
      same(x.line, y.line, fmt::format("frames[{}].line", i), d);
    }
  }
  same(a.stack_offsets, b.stack_offsets, "stack_offsets", d);
  same(a.stack_frames, b.stack_frames, "stack_frames", d);
  same(a.trace_ranges.size(), b.trace_ranges.size(), "trace_ranges.size", d);
  for (size_t dev = 0; dev < a.trace_ranges.size() && d.empty(); ++dev) {
    auto x = a.trace(int(dev)), y = b.trace(int(dev));
    if (!same(x.size(), y.size(), fmt::format("trace({}).size", dev), d)) break;
    for (size_t i = 0; i < x.size() && d.empty(); ++i) {
      std::string at = fmt::format("trace({})[{}]", dev, i);
      same(x[i].addr, y[i].addr, at + ".addr", d);
      same(x[i].size, y[i].size, at + ".size", d);
      same(x[i].time_us, y[i].time_us, at + ".time_us", d);
      same(x[i].has_time, y[i].has_time, at + ".has_time", d);
      same(x[i].stack, y[i].stack, at + ".stack", d);
      same(int(x[i].action), int(y[i].action), at + ".action", d);
      size_t xi = size_t(&x[i] - a.trace_events.data()), yi = size_t(&y[i] - b.trace_events.data());
      TraceEventExtra ex = a.trace_extra(xi), ey = b.trace_extra(yi);
      same(ex.stream, ey.stream, at + ".stream", d);
      same(ex.compile_context, ey.compile_context, at + ".compile_context", d);
      same(ex.user_metadata, ey.user_metadata, at + ".user_metadata", d);
    }
  }
  if (same(a.segments.size(), b.segments.size(), "segments.size", d)) {
    for (size_t i = 0; i < a.segments.size() && d.empty(); ++i) {
      const auto &x = a.segments[i], &y = b.segments[i];
      std::string at = fmt::format("segments[{}]", i);
      same(x.device, y.device, at + ".device", d);
      same(x.address, y.address, at + ".address", d);
      same(x.total_size, y.total_size, at + ".total_size", d);
      same(x.allocated_size, y.allocated_size, at + ".allocated_size", d);
      same(x.active_size, y.active_size, at + ".active_size", d);
      same(x.requested_size, y.requested_size, at + ".requested_size", d);
      same(x.stream, y.stream, at + ".stream", d);
      same(x.is_large, y.is_large, at + ".is_large", d);
      same(x.pool_id, y.pool_id, at + ".pool_id", d);
      same(x.is_expandable, y.is_expandable, at + ".is_expandable", d);
      same(x.stack, y.stack, at + ".stack", d);
      if (!same(x.blocks.size(), y.blocks.size(), at + ".blocks.size", d)) break;
      for (size_t j = 0; j < x.blocks.size() && d.empty(); ++j) {
        const auto &p = x.blocks[j], &q = y.blocks[j];
        std::string bt = fmt::format("{}.blocks[{}]", at, j);
        same(p.address, q.address, bt + ".address", d);
        same(p.size, q.size, bt + ".size", d);
        same(p.requested_size, q.requested_size, bt + ".requested_size", d);
        same(int(p.state), int(q.state), bt + ".state", d);
        same(p.stack, q.stack, bt + ".stack", d);
      }
    }
  }
  same(a.annotations.size(), b.annotations.size(), "annotations.size", d);
  same(a.allocator_settings.has_value(), b.allocator_settings.has_value(), "allocator_settings", d);
  return d;
}

}  // namespace oomdoc::testing
