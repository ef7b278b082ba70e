#include "report/gpus_report.h"

#include <cmath>

#include <fmt/format.h>

#include "core/text.h"
#include "core/units.h"

namespace oomdoc {

std::string format_duration(double seconds) {
  const uint64_t s = static_cast<uint64_t>(std::max(0.0, std::floor(seconds)));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}d{:02}h", s / 86400, (s % 86400) / 3600);
}

namespace {

std::string opt_bytes(const std::optional<uint64_t>& b) { return b ? format_bytes(*b) : "?"; }

// Command lines are arbitrary bytes: newlines would break the table and escape sequences could
// drive the terminal, so whitespace becomes a space and other control bytes are escaped.
std::string one_line(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  }
  return printable(out);
}

std::string shorten(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return s.substr(0, width - 3) + "...";
}

std::string command_of(const ProcessFinding& f) {
  switch (f.details.visibility) {
    case ProcessVisibility::kGone: return f.has(ProcessFlag::kHostPid) ? "(host pid)" : "(no such process)";
    case ProcessVisibility::kNoPermission: return "(no permission)";
    case ProcessVisibility::kVisible: break;
  }
  if (f.details.command_line.empty()) return f.details.state == 'Z' ? "(zombie)" : "(no command line)";
  return one_line(f.details.command_line);
}

void render_device(const DeviceFindings& df, const Style& style, std::string* out) {
  const GpuDevice& d = df.device;
  std::string title = fmt::format("GPU {}  {}", d.index, d.name.empty() ? "(unknown)" : d.name);
  if (d.utilization_percent) title += fmt::format("  util {}%", *d.utilization_percent);
  *out += style.bold(title) + "\n";
  if (d.memory_error) {
    *out += fmt::format("  memory: unavailable: {}\n", *d.memory_error);
  } else if (d.unified_memory) {
    *out += "  memory: shared with the system (unified memory): see `free -h`\n";
  } else {
    std::string line = fmt::format("  memory: {} total, {} used", opt_bytes(d.total_bytes), opt_bytes(d.used_bytes));
    if (d.reserved_bytes) line += fmt::format(", {} reserved by the driver", format_bytes(*d.reserved_bytes));
    line += fmt::format(", {} free", opt_bytes(d.free_bytes));
    if (!d.reserved_bytes) line += " (used includes the driver's reserve)";
    *out += line + "\n";
  }
  if (d.process_error) {
    *out += fmt::format("  processes: unavailable: {}\n", *d.process_error);
    return;
  }
  if (d.process_warning) *out += fmt::format("  note: {}\n", *d.process_warning);
  if (df.processes.empty()) {
    *out += "  no process holds memory on this GPU\n";
    return;
  }
  *out += style.dim(fmt::format("  {:<8} {:<10} {:>11} {:>4} {:>7} {:<4} {}", "PID", "USER", "GPU MEM",
                                "SM%", "TIME", "TYPE", "COMMAND")) + "\n";
  for (const auto& f : df.processes) {
    const auto& p = f.details;
    std::string row = fmt::format(
        "  {:<8} {:<10} {:>11} {:>4} {:>7} {:<4} {}", f.gpu.pid,
        shorten(p.user.empty() ? "?" : one_line(p.user), 10), opt_bytes(f.gpu.used_bytes),
        f.gpu.sm_percent ? std::to_string(*f.gpu.sm_percent) : "-", p.elapsed_seconds ? format_duration(*p.elapsed_seconds) : "?",
        f.gpu.kind_label(), shorten(command_of(f), 72));
    *out += (f.stale ? style.yellow(row) : row) + "\n";
    if (!f.explanation.empty()) {
      *out += fmt::format("  {:<8} {} {}\n", "", f.stale ? style.yellow("^ stale:") : style.dim("^"),
                          one_line(f.explanation));  // it may quote the parent's command line
    }
    for (const auto& s : f.suggestions) *out += fmt::format("  {:<8}   - {}\n", "", s);
  }
  if (df.unattributed_bytes && *df.unattributed_bytes > 0)
    *out += fmt::format("  {} of used memory is not attributed to any listed process\n",
                        format_bytes(*df.unattributed_bytes));
  if (df.stale_bytes > 0)
    *out += style.yellow(fmt::format("  {} is held by stale processes\n", format_bytes(df.stale_bytes)));
}

}  // namespace

std::string render_gpus_text(const GpuProcessReport& report, const Style& style) {
  std::string out;
  const DeviceState& s = report.state;
  out += fmt::format("NVIDIA driver {}", s.driver_version.value_or("(unknown version)"));
  if (s.cuda_version) out += fmt::format(", CUDA {}", *s.cuda_version);
  out += "\n";
  for (const auto& w : s.warnings) out += style.yellow("warning: " + w) + "\n";
  for (const auto& df : report.devices) {
    out += "\n";
    render_device(df, style, &out);
  }
  for (const auto& n : report.notes) {
    out += '\n';
    out += style.yellow("note: ");
    out += n;
    out += '\n';
  }
  return out;
}

Json gpus_json(const GpuProcessReport& report) {
  Json doc = json_document_header("gpus");
  const DeviceState& s = report.state;
  doc["library"] = s.library;
  doc["driver_version"] = json_optional(s.driver_version);
  doc["cuda_version"] = json_optional(s.cuda_version);
  doc["warnings"] = s.warnings;
  doc["notes"] = report.notes;
  Json devices = Json::array();
  for (const auto& df : report.devices) {
    const GpuDevice& d = df.device;
    Json dj;
    dj["index"] = d.index;
    dj["name"] = d.name;
    dj["uuid"] = d.uuid;
    dj["total_bytes"] = json_bytes(d.total_bytes);
    dj["used_bytes"] = json_bytes(d.used_bytes);
    dj["reserved_bytes"] = json_bytes(d.reserved_bytes);
    dj["free_bytes"] = json_bytes(d.free_bytes);
    dj["utilization_percent"] = json_optional(d.utilization_percent);
    dj["unified_memory"] = d.unified_memory;
    dj["memory_api"] = d.memory_api.empty() ? Json(nullptr) : Json(d.memory_api);
    dj["memory_error"] = json_optional(d.memory_error);
    dj["process_api"] = d.process_api.empty() ? Json(nullptr) : Json(d.process_api);
    dj["process_error"] = json_optional(d.process_error);
    dj["process_warning"] = json_optional(d.process_warning);
    dj["unattributed_bytes"] = json_bytes(df.unattributed_bytes);
    dj["stale_bytes"] = df.stale_bytes;
    Json processes = Json::array();
    for (const auto& f : df.processes) {
      const ProcessDetails& p = f.details;
      Json pj;
      pj["pid"] = f.gpu.pid;
      pj["used_bytes"] = json_bytes(f.gpu.used_bytes);
      pj["type"] = f.gpu.kind_label();
      pj["sm_percent"] = json_optional(f.gpu.sm_percent);
      pj["gpu_instance_id"] = json_optional(f.gpu.gpu_instance_id);
      pj["compute_instance_id"] = json_optional(f.gpu.compute_instance_id);
      const bool visible = p.visibility == ProcessVisibility::kVisible;
      pj["visible"] = visible;
      pj["user"] = visible && !p.user.empty() ? Json(p.user) : Json(nullptr);
      pj["uid"] = json_optional(p.uid);
      pj["command"] = visible ? Json(p.command_line) : Json(nullptr);
      pj["state"] = p.state ? Json(std::string(1, *p.state)) : Json(nullptr);
      pj["parent_pid"] = json_optional(p.parent_pid);
      pj["elapsed_seconds"] = json_optional(p.elapsed_seconds);
      pj["cpu_percent"] = json_optional(p.recent_cpu_percent);
      pj["container_id"] = p.container_id.empty() ? Json(nullptr) : Json(p.container_id);
      Json flags = Json::array();
      for (auto flag : f.flags) flags.push_back(std::string(flag_name(flag)));
      pj["flags"] = flags;
      pj["stale"] = f.stale;
      pj["explanation"] = f.explanation.empty() ? Json(nullptr) : Json(f.explanation);
      pj["suggestions"] = f.suggestions;
      processes.push_back(pj);
    }
    dj["processes"] = processes;
    devices.push_back(dj);
  }
  doc["devices"] = devices;
  return doc;
}

std::string render_catalog_text(const std::vector<GpuSpec>& catalog, const Style& style) {
  std::string out = style.dim(fmt::format("{:<28} {:<7} {:<12} {:>11} {:<13} {}", "GPU", "VENDOR",
                                          "ARCH", "MEMORY", "FORMATS", "ALIASES")) + "\n";
  for (const auto& g : catalog) {
    std::string formats = "fp16";
    if (g.bf16) formats += " bf16";
    if (g.fp8) formats += " fp8";
    if (g.fp4) formats += " fp4";
    std::string aliases;
    for (const auto& a : g.aliases) aliases += (aliases.empty() ? "" : ", ") + a;
    out += fmt::format("{:<28} {:<7} {:<12} {:>11} {:<13} {}\n", g.name, g.vendor, g.architecture,
                       format_bytes(g.total_bytes), formats, aliases);
  }
  out += fmt::format("{} GPUs. Memory is the total nvidia-smi / rocm-smi reports; `--json` adds sources.\n",
                     catalog.size());
  return out;
}

Json catalog_json(const std::vector<GpuSpec>& catalog) {
  Json doc = json_document_header("gpus");
  Json gpus = Json::array();
  for (const auto& g : catalog) {
    Json j;
    j["name"] = g.name;
    j["aliases"] = g.aliases;
    j["vendor"] = g.vendor;
    j["architecture"] = g.architecture;
    j["total_bytes"] = g.total_bytes;
    j["cuda_total_bytes"] = json_bytes(g.cuda_total_bytes);
    j["bf16"] = g.bf16;
    j["fp8"] = g.fp8;
    j["fp4"] = g.fp4;
    j["nvlink"] = g.nvlink;
    j["interconnect"] = g.interconnect;
    j["source"] = g.source;
    gpus.push_back(j);
  }
  doc["catalog"] = gpus;
  return doc;
}

}  // namespace oomdoc
