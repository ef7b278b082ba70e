#include <algorithm>

#include <fmt/format.h>

#include "core/text.h"
#include "core/units.h"
#include "report/snapshot_render.h"

namespace oomdoc {

namespace {

void append_stacks(std::string& out, const std::vector<StackGroup>& groups, const Style& style,
                   const std::string& indent) {
  for (const StackGroup& g : groups) {
    out += fmt::format("{}{:>11}  {:>6}x  {}\n", indent, format_bytes(g.bytes), g.count, printable(g.key));
  }
}

// The per-segment fragmentation table (the first `rows`) and what it means, in one line.
void append_fragmentation(std::string& out, const Fragmentation& f, size_t rows, const Style& style) {
  if (f.segments.empty()) return;
  const size_t shown = std::min(rows, f.segments.size());
  out += "\n  ";  // appended alone: g++ 12 warns falsely (-Wrestrict) on "\n  " + std::string
  out += style.bold(fragmentation_heading_text(f));
  out += fmt::format(": {} of {}{}\n", shown, f.segments.size(),
                     shown < f.segments.size() ? " (--segments N for more, --json for all)" : "");
  if (shown > 0) {
    out += fmt::format("    {:<16} {:>11} {:<6} {:>6} {:>11} {:>11} {:>12} {:>6} {:>11}\n", "address", "size", "pool",
                       "stream", "allocated", "free", "largest free", "blocks", "unusable");
    for (size_t i = 0; i < shown; ++i) {
      const SegmentUse& s = f.segments[i];
      out += fmt::format("    {:<16} {:>11} {:<6} {:>6} {:>11} {:>11} {:>12} {:>6} {:>11}\n",
                         fmt::format("{:#x}", s.address), format_bytes(s.size_bytes), segment_pool_text(s), s.stream,
                         format_bytes(s.allocated_bytes), format_bytes(s.free_bytes),
                         format_bytes(s.largest_free_block_bytes), s.blocks, format_bytes(s.unusable_free_bytes));
    }
  }
  out += "    " + fragmentation_summary_text(f) + "\n";
  out += "    ";
  out += style.yellow(fmt::format("=> {}", f.explanation));
  out += '\n';
}

// "1.00 MiB -> 3.00 MiB (+2.00 MiB)"; a value a file lacks is named instead, without a change.
std::string change_text(const std::optional<uint64_t>& before, const std::optional<uint64_t>& after,
                        std::string_view before_missing, std::string_view after_missing) {
  std::string text = fmt::format("{} -> {}", before ? format_bytes(*before) : std::string(before_missing),
                                 after ? format_bytes(*after) : std::string(after_missing));
  if (before && after) {
    text += fmt::format(" ({})", format_signed_bytes(static_cast<int64_t>(*after) - static_cast<int64_t>(*before), true));
  }
  return text;
}

// "12.345 s": seconds from the trace's first event.
std::string seconds_text(double seconds) { return fmt::format("{:.3f} s", seconds); }

}  // namespace

std::string segment_pool_text(const SegmentUse& s) {
  std::string pool = s.is_large ? (*s.is_large ? "large" : "small") : "?";
  if (s.private_pool) pool += ",private";
  if (s.expandable) pool += ",expandable";
  return pool;
}

std::string fragmentation_heading_text(const Fragmentation& f) {
  if (!f.oom_event_index) return "segments at dump time, most free memory stranded beside live blocks first";
  return fmt::format("segments at the {} (event {}), most free memory in pieces smaller than the request first",
                     f.device_ooms > 1 ? fmt::format("first of {} OOMs", f.device_ooms) : std::string("OOM"),
                     *f.oom_event_index);
}

std::string fragmentation_summary_text(const Fragmentation& f) {
  if (f.requested_bytes) {
    return fmt::format("{} of {} had a free block of {} (the request); the largest free block was {}, "
                       "{} free in all",
                       f.segments_fitting_request.value_or(0), count_noun(f.segments.size(), "segment"),
                       format_bytes(*f.requested_bytes),
                       format_bytes(f.largest_free_block_bytes), format_bytes(f.free_bytes));
  }
  return fmt::format("{} free in {}, {} of it stranded; largest free block {}", format_bytes(f.free_bytes),
                     count_noun(f.segments.size(), "segment"), format_bytes(f.unusable_free_bytes), format_bytes(f.largest_free_block_bytes));
}

std::string render_snapshot_text(const SnapshotReport& r, const Style& style, size_t segment_rows) {
  std::string out;
  // Stack keys, frames and setting values come from the file: escaped (printable) so that a name
  // holding ESC, BEL or a newline cannot drive the terminal or fake a line of the report.
  out += style.bold(printable(r.verdict)) + "\n";
  for (const std::string& warning : r.warnings) out += "warning: " + printable(warning) + "\n";
  out += "\n";
  out += style.dim(fmt::format("{}: {}, {}; {}, {}", printable(r.file), r.source_format, snapshot_layout_name(r.layout),
                               count_noun(r.distinct_stacks, "distinct stack"),
                               count_noun(r.distinct_frames, "distinct frame"))) + "\n";
  for (const DeviceReport& d : r.devices) {
    const DeviceMemory& m = d.memory;
    const Timeline& t = d.timeline;
    out += '\n';  // appended alone: g++ 12 warns falsely (-Wrestrict) on "\n" + std::string here
    out += style.bold(fmt::format("cuda:{}", m.device)) +
           fmt::format("  {}{}{}\n", count_noun(m.segments, "segment"),
                       m.expandable_segments ? fmt::format(", {} expandable", m.expandable_segments) : "",
                       m.private_pool_segments ? fmt::format(", {} in private pools", m.private_pool_segments) : "");
    out += fmt::format("  reserved   {:>11}   allocated {:>11}   active {:>11}\n", format_bytes(m.reserved_bytes),
                       format_bytes(m.allocated_bytes), format_bytes(m.active_bytes));
    out += fmt::format("  requested  {:>11}   rounding  {:>11}   cached free (inactive) {}\n",
                       m.requested_bytes ? format_bytes(*m.requested_bytes) : "unknown",
                       m.rounding_waste_bytes ? format_bytes(*m.rounding_waste_bytes) : "unknown",
                       format_bytes(m.inactive_bytes));
    out += fmt::format("  largest free block {}; releasable (whole free segments) {}; stranded in partly "
                       "used segments {}\n",
                       format_bytes(m.largest_free_block_bytes), format_bytes(m.releasable_bytes),
                       format_bytes(m.stranded_bytes));
    if (t.events == 0) {
      out += "  trace: none recorded (enable torch.cuda.memory._record_memory_history())\n";
    } else {
      std::string span = t.time_axis ? fmt::format(" over {}", seconds_text(*t.duration_seconds))
                         : t.has_time    ? " (time_us missing on some entries or going back: event index as time)"
                                         : " (no time_us: event index as time)";
      out += fmt::format("  trace: {}{}; live before recording (baseline) {}; trace peak +{}",
                         count_noun(t.events, "event"), span,
                         format_bytes(t.baseline_bytes), format_bytes(uint64_t(t.peak_live_delta)));
      if (t.peak_index) out += fmt::format(" at event {}", *t.peak_index);
      if (t.peak_seconds) out += fmt::format(" ({})", seconds_text(*t.peak_seconds));
      out += fmt::format(" (live {}); reserved peak {}\n",
                         format_bytes(t.live_at_peak_bytes),
                         format_bytes(uint64_t(std::max<int64_t>(0, t.peak_reserved_bytes))));
      if (t.unmatched_frees) {
        out += fmt::format("  {} of memory allocated before recording ({})\n", count_noun(t.unmatched_frees, "free"),
                           format_bytes(t.unmatched_free_bytes));
      }
      if (t.truncated) out += "  " + style.yellow("trace truncated: " + t.truncation_reason) + "\n";
    }
    for (const OomReport& o : d.ooms) {
      out += "\n  " + style.red(fmt::format("OOM at event {}{}: {}", o.event_index,
                                            o.seconds ? fmt::format(" ({})", seconds_text(*o.seconds)) : "",
                                            oom_verdict_name(o.verdict))) + "\n";
      out += "    " + o.explanation + "\n";
      out += fmt::format("    requested {}, device free {}, live {}, reserved {}, largest free block {}\n",
                         format_bytes(o.requested_bytes), format_bytes(o.device_free_bytes),
                         format_bytes(o.live_bytes), format_bytes(o.reserved_bytes),
                         format_bytes(o.largest_free_block_bytes));
      if (!o.stack.empty()) {
        out += "    failing allocation:\n";
        for (const std::string& frame : o.stack) out += "      " + printable(frame) + "\n";
      }
      if (!o.releases_before.empty()) {
        uint64_t total = 0;
        for (const auto& c : o.releases_before) total += c.bytes;
        out += fmt::format("    cache released just before: {}, {}\n", count_noun(o.releases_before.size(), "segment"),
                           format_bytes(total));
      }
      if (!o.biggest_live.empty()) {
        out += "    biggest live allocations:\n";
        for (const auto& b : o.biggest_live) {
          out += fmt::format("      {:>11}  {}\n", format_bytes(b.bytes), printable(b.stack_key));
        }
      }
      if (!o.top_stacks.empty()) {
        out += "    live by stack at the OOM:\n";
        append_stacks(out, o.top_stacks, style, "      ");
      }
      out += "    fixes:\n";
      for (const auto& f : o.fixes) out += fmt::format("      - {} [{}]\n", f.title, f.id);
    }
    if (d.oom_count > d.ooms.size()) {
      out += fmt::format("\n  ({} not analysed: only the first {} of {} are)\n",
                         count_noun(d.oom_count - d.ooms.size(), "more OOM event"), d.ooms.size(), d.oom_count);
    }
    append_fragmentation(out, d.fragmentation, segment_rows, style);
    if (!d.top_stacks.empty()) {
      out += fmt::format("\n  top stacks {}:\n", d.top_stacks_when == "peak" ? "at the trace peak" : "live at dump time");
      append_stacks(out, d.top_stacks, style, "    ");
    }
    if (!d.growth.leaks.empty()) {
      out += fmt::format("\n  {} (steps from {}):\n", style.yellow("possible leaks"), d.growth.iteration_source);
      for (const LeakCandidate& l : d.growth.leaks) {
        out += fmt::format("    {:>11}  {:>6}x  left by {} steps  {}\n", format_bytes(l.bytes), l.count,
                           l.iterations, printable(l.stack_key));
      }
    } else if (d.growth.iteration_source.empty() && t.events > 0) {
      out += fmt::format("\n  leak check: not done, the trace marks {} (ProfilerStep#N or Optimizer.step "
                         "annotations) and growth needs 3 or more; one step legitimately keeps activations for "
                         "backward, gradients and optimizer state\n",
                         count_noun(d.growth.steps_marked, "step"));
    } else if (!d.growth.iteration_source.empty()) {
      out += fmt::format("\n  leak check: no stack left allocations behind in 3 or more of the {} steps ({})\n",
                         d.growth.iterations, d.growth.iteration_source);
    }
  }
  if (!r.allocator_settings.empty()) {
    out += "\nallocator settings:\n";
    for (const SettingNote& s : r.allocator_settings) {
      out += fmt::format("  {} = {}: {}\n", printable(s.key), printable(s.value), printable(s.meaning));
    }
  }
  return out;
}

std::string render_comparison_text(const SnapshotComparison& c, const std::string& before,
                                   const std::string& after, const Style& style) {
  std::string out = style.bold(fmt::format("{} -> {}", printable(before), printable(after))) + "\n";
  for (const DeviceDelta& d : c.devices) {
    // A device one file does not hold is "absent" there; a held device without a trace has "no trace" peak.
    const std::string_view no_peak_before = d.reserved_before ? "no trace" : "absent";
    const std::string_view no_peak_after = d.reserved_after ? "no trace" : "absent";
    out += fmt::format("cuda:{}  reserved {}  allocated {}  peak live {}\n", d.device,
                       change_text(d.reserved_before, d.reserved_after, "absent", "absent"),
                       change_text(d.allocated_before, d.allocated_after, "absent", "absent"),
                       change_text(d.peak_live_before, d.peak_live_after, no_peak_before, no_peak_after));
  }
  if (!c.stacks.empty()) {
    out += "\nlive at dump, by stack (largest change first):\n";
    for (const StackDelta& s : c.stacks) {
      out += fmt::format("  {:>12}  {}\n", format_signed_bytes(s.delta_bytes, true), printable(s.key));
    }
    if (c.changed_stacks > c.stacks.size()) {
      out += fmt::format("  ({}; --top to see more)\n", count_noun(c.changed_stacks - c.stacks.size(), "more changed stack"));
    }
  }
  return out;
}

}  // namespace oomdoc
