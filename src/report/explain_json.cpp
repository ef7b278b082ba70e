#include "report/explain_json.h"

namespace oomdoc {
namespace {

// Quantities every event carries (null when the message does not print them).
constexpr const char* kStandardQuantities[] = {"requested", "total", "free", "process", "allocated",
                                               "reserved_total", "reserved_unallocated", "private_pools"};
// vLLM keys every event carries.
constexpr const char* kVllmQuantities[] = {"kv_needed", "kv_available"};
constexpr const char* kVllmFields[] = {"max_model_len", "kv_cache_tokens", "estimated_max_model_len",
                                       "gpu_memory_utilization"};

Json field_to_json(const FieldValue& value) {
  return std::visit([](const auto& v) { return Json(v); }, value);
}

void put_quantity(Json& out, const std::string& name, const Quantity* q) {
  if (q == nullptr) {
    out[name + "_bytes"] = nullptr;
    return;
  }
  // A value beyond 2^64-1 (cudaMallocAsync's "no limit") has no integer: null plus the text.
  out[name + "_bytes"] = q->overflow ? Json(nullptr) : Json(q->bytes);
  out[name + "_unit"] = q->unit;
  out[name + "_text"] = q->text;
}

// Figures computed from the printed ones (never a printed figure again).
Json derived_to_json(const OomEvent& e, const MemoryBreakdown& m) {
  Json d = Json::object();
  if (m.pytorch_reserved && !e.quantity("reserved_total")) d["reserved_total_bytes_derived"] = *m.pytorch_reserved;
  if (m.reserved_unallocated && !e.quantity("reserved_unallocated")) {
    d["reserved_unallocated_bytes_derived"] = *m.reserved_unallocated;
  }
  if (m.other_processes > 0) d["other_processes_total_bytes_derived"] = m.other_processes;
  if (m.non_pytorch_in_process) d["non_pytorch_in_process_bytes_derived"] = *m.non_pytorch_in_process;
  if (m.unattributed) d["unattributed_bytes_derived"] = *m.unattributed;
  if (m.likely_self_pid) d["likely_self_pid"] = *m.likely_self_pid;
  return d;
}

Json traceback_to_json(const Traceback& tb) {
  Json out;
  Json frames = Json::array();
  for (const auto& f : tb.frames) {
    frames.push_back({{"file", f.file}, {"line", json_optional(f.line)}, {"function", f.function}, {"code", f.code}});
  }
  out["frames"] = frames;
  if (tb.innermost_user_frame) {
    const auto& f = *tb.innermost_user_frame;
    out["user_frame"] = {{"file", f.file}, {"line", json_optional(f.line)}, {"function", f.function}, {"code", f.code}};
  } else {
    out["user_frame"] = nullptr;
  }
  out["operation"] = tb.operation.empty() ? Json(nullptr) : Json(tb.operation);
  return out;
}

}  // namespace

Json event_to_json(const ExplainedEvent& item) {
  const OomEvent& e = item.event;
  Json out;
  out["input"] = item.input;
  out["line"] = e.line;
  out["end_line"] = e.end_line;
  out["framework"] = e.framework;
  out["format"] = e.format;
  out["is_error"] = e.is_error;
  out["device"] = json_optional(e.device);
  out["rank"] = json_optional(e.rank);
  out["backend"] = e.field("backend") ? field_to_json(*e.field("backend")) : Json(nullptr);
  out["device_kind"] = e.field("device_kind") ? field_to_json(*e.field("device_kind")) : Json(nullptr);
  if (e.format == "tf_bfc_oom" && e.field("fatal") == nullptr) out["fatal"] = nullptr;
  for (const char* name : kStandardQuantities) put_quantity(out, name, e.quantity(name));
  Json others = Json::array();
  for (const auto& p : e.other_processes) {
    others.push_back({{"pid", json_optional(p.pid)}, {"bytes", p.memory.bytes}, {"text", p.memory.text}});
  }
  out["other_processes"] = others;
  for (const char* name : kVllmQuantities) {
    // A negative KV budget is kept as plain fields (<name>_bytes below zero, _text, _unit): they take
    // the quantity's keys below.
    if (e.quantity(name) == nullptr && e.int_field(std::string(name) + "_bytes").value_or(0) < 0) continue;
    put_quantity(out, name, e.quantity(name));
  }
  for (const char* name : kVllmFields) {
    const FieldValue* v = e.field(name);
    out[name] = v ? field_to_json(*v) : Json(nullptr);
  }
  // Everything else the message carries, under its own name.
  for (const auto& [name, q] : e.quantities) {
    if (!out.contains(name + "_bytes")) put_quantity(out, name, &q);
  }
  for (const auto& [name, value] : e.fields) {
    if (!out.contains(name)) out[name] = field_to_json(value);
  }
  out["repeats"] = e.repeats;
  out["last_repeat_line"] = e.repeats > 1 ? Json(e.last_repeat_line) : Json(nullptr);
  out["derived"] = derived_to_json(e, breakdown(e));
  out["message"] = e.message;
  out["traceback"] = e.traceback ? traceback_to_json(*e.traceback) : Json(nullptr);
  const Diagnosis& d = item.diagnosis;
  out["cause"] = d.cause;
  out["secondary_causes"] = d.secondary_causes;
  out["evidence"] = d.evidence;
  Json fixes = Json::array();
  for (const auto& f : d.fixes) {
    fixes.push_back({{"id", f.id}, {"title", f.title}, {"detail", f.detail}, {"snippet", f.snippet}, {"cost_rank", f.cost_rank}});
  }
  out["fixes"] = fixes;
  return out;
}

Json explain_to_json(const ExplainReport& report) {
  Json doc = json_document_header("explain");
  doc["inputs"] = report.inputs;
  doc["bytes_scanned"] = report.bytes_scanned;
  doc["lines"] = report.lines;
  doc["error_count"] = report.error_count();
  doc["truncated"] = report.truncated;
  doc["messages_beyond_cap"] = report.messages_beyond_cap;
  // Inputs that could not be read: the document then covers only `inputs` (exit status 2).
  Json errors = Json::array();
  for (const auto& err : report.errors) errors.push_back({{"input", err.input}, {"message", err.message}});
  doc["errors"] = errors;
  doc["complete"] = report.errors.empty();
  Json events = Json::array();
  for (const auto& item : report.events) events.push_back(event_to_json(item));
  doc["events"] = events;
  // Errors that say the same thing (analyses/explain.h): indices into `events`.
  Json groups = Json::array();
  for (const auto& g : report.groups) {
    if (!report.events[g.members.front()].event.is_error) continue;
    groups.push_back({{"events", g.members}, {"shown", g.shown}, {"prints", g.prints}});
  }
  doc["error_groups"] = groups;
  Json climbing = Json::array();
  for (const auto& c : report.climbing) {
    climbing.push_back({{"source", c.source}, {"samples", c.samples}, {"first_bytes", c.first_bytes},
                        {"last_bytes", c.last_bytes}, {"first_line", c.first_line}, {"last_line", c.last_line}});
  }
  doc["memory_climbing"] = climbing;
  return doc;
}

}  // namespace oomdoc
