#include "model/oom_event.h"

namespace oomdoc {

bool names_a_line(std::string_view name) {
  return name == "allocator_warning_line" || name == "replica_report_line" || name == "allocator_stats_line" ||
         name == "kernel_report_line" || name == "launcher_summary_line" ||
         name == "nccl_warning_line";
}

const Quantity* OomEvent::quantity(std::string_view name) const {
  for (const auto& [key, q] : quantities) {
    if (key == name) return &q;
  }
  return nullptr;
}

std::optional<uint64_t> OomEvent::bytes(std::string_view name) const {
  const Quantity* q = quantity(name);
  if (q == nullptr) return std::nullopt;
  return q->bytes;
}

const FieldValue* OomEvent::field(std::string_view name) const {
  for (const auto& [key, value] : fields) {
    if (key == name) return &value;
  }
  return nullptr;
}

std::optional<int64_t> OomEvent::int_field(std::string_view name) const {
  const FieldValue* v = field(name);
  if (v != nullptr && std::holds_alternative<int64_t>(*v)) return std::get<int64_t>(*v);
  return std::nullopt;
}

std::optional<std::string> OomEvent::string_field(std::string_view name) const {
  const FieldValue* v = field(name);
  if (v != nullptr && std::holds_alternative<std::string>(*v)) return std::get<std::string>(*v);
  return std::nullopt;
}

void OomEvent::set_quantity(std::string name, Quantity q) {
  for (auto& [key, existing] : quantities) {
    if (key == name) {
      existing = std::move(q);
      return;
    }
  }
  quantities.emplace_back(std::move(name), std::move(q));
}

void OomEvent::set_field(std::string name, FieldValue value) {
  for (auto& [key, existing] : fields) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  fields.emplace_back(std::move(name), std::move(value));
}

}  // namespace oomdoc
