#include "report/snapshot_render.h"

namespace oomdoc {

namespace {

Json stack_groups_json(const std::vector<StackGroup>& groups) {
  Json out = Json::array();
  for (const StackGroup& g : groups) {
    out.push_back({{"stack", g.key}, {"live_bytes", g.bytes}, {"allocations", g.count}, {"frames", g.frames}});
  }
  return out;
}

Json oom_json(const OomReport& o) {
  Json j;
  j["event_index"] = o.event_index;
  j["time_us"] = json_optional(o.time_us);
  j["seconds"] = json_optional(o.seconds);
  j["requested_bytes"] = o.requested_bytes;
  j["device_free_bytes"] = o.device_free_bytes;
  j["live_bytes"] = o.live_bytes;
  j["allocated_bytes"] = o.allocated_bytes;
  j["reserved_bytes"] = o.reserved_bytes;
  j["largest_free_block_bytes"] = o.largest_free_block_bytes;
  j["outside_pytorch_bytes"] = json_bytes(o.outside_pytorch_bytes);
  j["verdict"] = std::string(oom_verdict_name(o.verdict));
  j["explanation"] = o.explanation;
  j["stack"] = o.stack;
  Json biggest = Json::array();
  for (const auto& b : o.biggest_live) {
    biggest.push_back({{"address", b.address}, {"live_bytes", b.bytes}, {"stack", b.stack_key}});
  }
  j["biggest_live"] = biggest;
  Json releases = Json::array();
  for (const auto& c : o.releases_before) {
    releases.push_back({{"event_index", c.event_index}, {"action", std::string(trace_action_name(c.action))},
                        {"released_bytes", c.bytes}});
  }
  j["cache_releases_before"] = releases;
  j["top_stacks"] = stack_groups_json(o.top_stacks);
  Json fixes = Json::array();
  for (const auto& f : o.fixes) fixes.push_back({{"id", f.id}, {"title", f.title}});
  j["fixes"] = fixes;
  return j;
}

// The plotted timeline, one column per field (per bucket of events its highest live and reserved
// points and its OOMs, see replay_timeline): compact, and what the HTML page draws.
Json timeline_json(const Timeline& t) {
  Json index = Json::array(), time = Json::array(), seconds = Json::array(), live = Json::array(),
       reserved = Json::array(), action = Json::array(), size = Json::array(), stack = Json::array();
  for (const TimelinePoint& p : t.points) {
    index.push_back(p.event_index);
    time.push_back(json_optional(p.time_us));
    seconds.push_back(json_optional(p.seconds));
    live.push_back(p.live_bytes);
    reserved.push_back(p.reserved_bytes);
    action.push_back(std::string(trace_action_name(p.action)));
    size.push_back(p.size);
    stack.push_back(p.stack_key);
  }
  return {{"x_axis", t.time_axis ? "seconds" : "event_index"}, {"start_time_us", json_optional(t.start_time_us)},
          {"event_index", index}, {"time_us", time}, {"seconds", seconds}, {"live_bytes", live},
          {"reserved_bytes", reserved}, {"action", action}, {"size_bytes", size}, {"stack", stack}};
}

// The segments as columns of equal length, like the timeline: a file can hold 100,000 segments,
// and one object per segment made --json twice as slow on the 1 GB benchmark file (docs/benchmarks.md).
Json segment_columns(const std::vector<SegmentUse>& segments) {
  Json address = Json::array(), size = Json::array(), type = Json::array(), stream = Json::array(),
       private_pool = Json::array(), expandable = Json::array(), allocated = Json::array(), free = Json::array(),
       largest = Json::array(), blocks = Json::array(), free_blocks = Json::array(), unusable = Json::array();
  for (Json* column : {&address, &size, &type, &stream, &private_pool, &expandable, &allocated, &free, &largest,
                       &blocks, &free_blocks, &unusable}) {
    column->get_ref<Json::array_t&>().reserve(segments.size());
  }
  for (const SegmentUse& s : segments) {
    address.push_back(s.address);
    size.push_back(s.size_bytes);
    type.push_back(s.is_large ? Json(*s.is_large ? "large" : "small") : Json(nullptr));
    stream.push_back(s.stream);
    private_pool.push_back(s.private_pool);
    expandable.push_back(s.expandable);
    allocated.push_back(s.allocated_bytes);
    free.push_back(s.free_bytes);
    largest.push_back(s.largest_free_block_bytes);
    blocks.push_back(s.blocks);
    free_blocks.push_back(s.free_blocks);
    unusable.push_back(s.unusable_free_bytes);
  }
  return {{"address", std::move(address)}, {"size_bytes", std::move(size)}, {"segment_type", std::move(type)},
          {"stream", std::move(stream)}, {"private_pool", std::move(private_pool)},
          {"expandable", std::move(expandable)}, {"allocated_bytes", std::move(allocated)},
          {"free_bytes", std::move(free)}, {"largest_free_block_bytes", std::move(largest)},
          {"blocks", std::move(blocks)}, {"free_blocks", std::move(free_blocks)},
          {"unusable_free_bytes", std::move(unusable)}};
}

Json fragmentation_json(const Fragmentation& f) {
  Json j;
  j["at"] = f.oom_event_index ? "oom" : "dump";
  j["oom_event_index"] = json_optional(f.oom_event_index);
  j["requested_bytes"] = json_bytes(f.requested_bytes);
  j["device_free_bytes"] = json_bytes(f.device_free_bytes);
  j["free_bytes"] = f.free_bytes;
  j["unusable_free_bytes"] = f.unusable_free_bytes;
  j["largest_free_block_bytes"] = f.largest_free_block_bytes;
  j["segments_fitting_request"] = json_optional(f.segments_fitting_request);
  j["expandable_segments"] = f.expandable_segments;
  j["meaning"] = std::string(fragmentation_meaning_name(f.meaning));
  j["explanation"] = f.explanation;
  j["segment_count"] = f.segments.size();
  j["segments"] = segment_columns(f.segments);
  return j;
}

}  // namespace

Json snapshot_report_json(const SnapshotReport& r) {
  Json doc = json_document_header("snapshot");
  doc["file"] = r.file;
  doc["format"] = r.source_format;
  doc["layout"] = std::string(snapshot_layout_name(r.layout));
  doc["verdict"] = r.verdict;
  doc["warnings"] = r.warnings;
  Json devices = Json::array();
  for (const DeviceReport& d : r.devices) {
    const DeviceMemory& m = d.memory;
    const Timeline& t = d.timeline;
    Json j;
    j["device"] = m.device;
    j["segments"] = m.segments;
    j["reserved_bytes"] = m.reserved_bytes;
    j["allocated_bytes"] = m.allocated_bytes;
    j["active_bytes"] = m.active_bytes;
    j["requested_bytes"] = json_bytes(m.requested_bytes);
    j["inactive_bytes"] = m.inactive_bytes;
    j["largest_free_block_bytes"] = m.largest_free_block_bytes;
    j["releasable_bytes"] = m.releasable_bytes;
    j["stranded_bytes"] = m.stranded_bytes;
    j["pending_free_bytes"] = m.pending_free_bytes;
    j["rounding_waste_bytes"] = json_bytes(m.rounding_waste_bytes);
    j["private_pool_segments"] = m.private_pool_segments;
    j["expandable_segments"] = m.expandable_segments;
    j["trace_events"] = t.events;
    j["peak_live_bytes"] = t.events ? Json(t.peak_live_delta) : Json(nullptr);
    j["peak_event_index"] = json_optional(t.peak_index);
    j["peak_time_us"] = json_optional(t.peak_time_us);
    j["peak_seconds"] = json_optional(t.peak_seconds);
    j["live_at_peak_bytes"] = t.events ? Json(t.live_at_peak_bytes) : Json(nullptr);
    j["trace_has_time"] = t.has_time;
    j["trace_time_axis"] = t.time_axis;
    j["trace_start_time_us"] = json_optional(t.start_time_us);
    j["trace_seconds"] = json_optional(t.duration_seconds);
    j["baseline_bytes"] = t.baseline_bytes;
    j["unmatched_frees"] = t.unmatched_frees;
    j["unmatched_free_bytes"] = t.unmatched_free_bytes;
    j["ghost_bytes"] = t.ghost_bytes;
    j["peak_reserved_bytes"] = t.events ? Json(t.peak_reserved_bytes) : Json(nullptr);
    j["trace_truncated"] = t.truncated;
    j["truncation_reason"] = t.truncated ? Json(t.truncation_reason) : Json(nullptr);
    Json ooms = Json::array();
    for (const OomReport& o : d.ooms) ooms.push_back(oom_json(o));
    j["ooms"] = ooms;
    j["oom_count"] = d.oom_count;  // "ooms" holds the first kMaxOomsAnalysed of them
    j["fragmentation"] = fragmentation_json(d.fragmentation);
    j["top_stacks_when"] = d.top_stacks_when;
    j["top_stacks"] = stack_groups_json(d.top_stacks);
    Json leaks = Json::array();
    for (const LeakCandidate& l : d.growth.leaks) {
      leaks.push_back({{"stack", l.stack_key}, {"live_bytes", l.bytes}, {"allocations", l.count},
                       {"iterations", l.iterations}, {"first_event_index", l.first_event},
                       {"last_event_index", l.last_event}, {"frames", l.frames}});
    }
    j["leaks"] = leaks;
    j["iterations_from"] = d.growth.iteration_source.empty() ? Json(nullptr) : Json(d.growth.iteration_source);
    j["steps_marked"] = d.growth.iteration_source.empty() ? d.growth.steps_marked : d.growth.iterations;
    j["timeline"] = timeline_json(t);
    devices.push_back(j);
  }
  doc["devices"] = devices;
  Json settings = Json::array();
  for (const SettingNote& s : r.allocator_settings) {
    settings.push_back({{"key", s.key}, {"value", s.value}, {"meaning", s.meaning}});
  }
  doc["allocator_settings"] = settings;
  doc["annotations"] = r.annotations;
  doc["distinct_stacks"] = r.distinct_stacks;
  doc["distinct_frames"] = r.distinct_frames;
  return doc;
}

Json comparison_json(const SnapshotComparison& c, const std::string& before, const std::string& after) {
  Json doc = json_document_header("snapshot");
  doc["before"] = before;
  doc["after"] = after;
  Json devices = Json::array();
  for (const DeviceDelta& d : c.devices) {
    devices.push_back({{"device", d.device},
                       {"reserved_before_bytes", json_bytes(d.reserved_before)},
                       {"reserved_after_bytes", json_bytes(d.reserved_after)},
                       {"allocated_before_bytes", json_bytes(d.allocated_before)},
                       {"allocated_after_bytes", json_bytes(d.allocated_after)},
                       {"peak_live_before_bytes", json_bytes(d.peak_live_before)},
                       {"peak_live_after_bytes", json_bytes(d.peak_live_after)}});
  }
  doc["devices"] = devices;
  Json stacks = Json::array();
  for (const StackDelta& s : c.stacks) {
    stacks.push_back({{"stack", s.key}, {"before_bytes", s.before_bytes}, {"after_bytes", s.after_bytes},
                      {"delta_bytes", s.delta_bytes}});
  }
  doc["stacks"] = stacks;
  doc["changed_stacks"] = c.changed_stacks;  // "stacks" holds the first --top of them
  return doc;
}

}  // namespace oomdoc
