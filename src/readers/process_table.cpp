#include "readers/process_table.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "core/text.h"

namespace oomdoc {

namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<std::string> read_link(const std::string& path) {
  char buffer[256];
  ssize_t n = ::readlink(path.c_str(), buffer, sizeof buffer - 1);
  if (n <= 0) return std::nullopt;
  return std::string(buffer, static_cast<size_t>(n));
}

std::string command_line_of(const std::string& dir) {
  auto text = read_text(dir + "/cmdline");
  if (!text) return "";
  while (!text->empty() && text->back() == '\0') text->pop_back();
  for (char& c : *text)
    if (c == '\0') c = ' ';
  return *text;
}

struct StatFields {
  char state = '?';
  uint32_t ppid = 0;
  uint32_t session = 0;
  uint64_t cpu_ticks = 0;    // utime + stime
  uint64_t start_ticks = 0;  // since boot
};

// /proc/<pid>/stat: "pid (comm) state ppid pgrp session ... utime stime ... starttime ...".
// comm may hold spaces and parentheses, so fields are counted after the last ')'.
std::optional<StatFields> parse_stat(const std::string& text) {
  auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(text.substr(close + 1));
  std::vector<std::string> f;
  std::string token;
  while (in >> token) f.push_back(token);
  if (f.size() < 20) return std::nullopt;
  auto ppid = parse_decimal<uint32_t>(f[1]);
  auto session = parse_decimal<uint32_t>(f[3]);
  auto utime = parse_decimal<uint64_t>(f[11]);
  auto stime = parse_decimal<uint64_t>(f[12]);
  auto start = parse_decimal<uint64_t>(f[19]);
  if (!ppid || !session || !utime || !stime || !start) return std::nullopt;
  StatFields s;
  s.state = f[0].empty() ? '?' : f[0][0];
  s.ppid = *ppid;
  s.session = *session;
  s.cpu_ticks = *utime + *stime;
  s.start_ticks = *start;
  return s;
}

std::optional<double> uptime_seconds(const std::string& root) {
  auto text = read_text(root + "/uptime");
  if (!text) return std::nullopt;
  // "350735.47 1379210.12\n": the first field is the uptime.
  std::string_view first(*text);
  first = first.substr(0, first.find_first_of(" \n"));
  return parse_decimal<double>(first);
}

std::string user_name(uint32_t uid) {
  struct passwd pw;
  struct passwd* found = nullptr;
  char buffer[4096];
  if (getpwuid_r(uid, &pw, buffer, sizeof buffer, &found) == 0 && found) return pw.pw_name;
  return std::to_string(uid);
}

}  // namespace

std::string container_id_from_cgroup(const std::string& cgroup_text) {
  // Scan for the first run of exactly 64 hex digits: docker-<id>.scope, /docker/<id>,
  // cri-containerd-<id>.scope, libpod-<id>.scope, kubepods/.../<id>.
  size_t run = 0;
  for (size_t i = 0; i <= cgroup_text.size(); ++i) {
    const bool hex = i < cgroup_text.size() && std::isxdigit(static_cast<unsigned char>(cgroup_text[i])) &&
                     !std::isupper(static_cast<unsigned char>(cgroup_text[i]));
    if (hex) {
      ++run;
      continue;
    }
    if (run == 64) return cgroup_text.substr(i - 64, 12);
    run = 0;
  }
  return "";
}

bool proc_hides_pids(const std::string& mounts_text, const std::string& proc_root) {
  std::istringstream in(mounts_text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string device, mount_point, type, options;
    if (!(fields >> device >> mount_point >> type >> options) || type != "proc" || mount_point != proc_root)
      continue;
    std::istringstream opts(options);
    std::string option;
    while (std::getline(opts, option, ','))
      if (option == "hidepid=1" || option == "hidepid=2" || option == "hidepid=noaccess" ||
          option == "hidepid=invisible")
        return true;
  }
  return false;
}

LinuxProcessTable::LinuxProcessTable(std::string proc_root, std::chrono::milliseconds cpu_window)
    : proc_root_(std::move(proc_root)), cpu_window_(cpu_window) {}

std::vector<ProcessDetails> LinuxProcessTable::describe(const std::vector<uint32_t>& pids) {
  const double ticks_per_second = static_cast<double>(sysconf(_SC_CLK_TCK));
  const auto uptime = uptime_seconds(proc_root_);
  const auto own_namespace = read_link(proc_root_ + "/self/ns/pid");
  const auto mounts = read_text(proc_root_ + "/self/mounts");
  const bool hidden_pids = mounts && proc_hides_pids(*mounts, proc_root_);
  std::vector<ProcessDetails> out;
  std::map<size_t, uint64_t> first_cpu_ticks;  // index in out -> utime+stime at the first reading
  for (uint32_t pid : pids) {
    ProcessDetails d;
    d.pid = pid;
    const std::string dir = proc_root_ + "/" + std::to_string(pid);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
      d.visibility = errno == EACCES || hidden_pids ? ProcessVisibility::kNoPermission
                                                    : ProcessVisibility::kGone;
      out.push_back(std::move(d));
      continue;
    }
    d.uid = st.st_uid;
    d.user = user_name(st.st_uid);
    auto stat_text = read_text(dir + "/stat");
    auto fields = stat_text ? parse_stat(*stat_text) : std::nullopt;
    if (!fields) {
      d.visibility = ProcessVisibility::kNoPermission;
      out.push_back(std::move(d));
      continue;
    }
    d.visibility = ProcessVisibility::kVisible;
    d.command_line = command_line_of(dir);
    d.state = fields->state;
    d.parent_pid = fields->ppid;
    d.session_id = fields->session;
    if (fields->ppid > 0) d.parent_command = command_line_of(proc_root_ + "/" + std::to_string(fields->ppid));
    if (uptime) d.elapsed_seconds = std::max(0.0, *uptime - fields->start_ticks / ticks_per_second);
    if (auto ns = read_link(dir + "/ns/pid"); ns && own_namespace) d.other_pid_namespace = *ns != *own_namespace;
    if (auto cgroup = read_text(dir + "/cgroup")) d.container_id = container_id_from_cgroup(*cgroup);
    first_cpu_ticks[out.size()] = fields->cpu_ticks;
    out.push_back(std::move(d));
  }
  if (first_cpu_ticks.empty() || cpu_window_.count() <= 0) return out;

  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(cpu_window_);
  const double window =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto [index, before] : first_cpu_ticks) {
    auto text = read_text(proc_root_ + "/" + std::to_string(out[index].pid) + "/stat");
    auto fields = text ? parse_stat(*text) : std::nullopt;
    if (!fields || fields->cpu_ticks < before) continue;
    out[index].recent_cpu_percent = 100.0 * (fields->cpu_ticks - before) / ticks_per_second / window;
  }
  return out;
}

}  // namespace oomdoc
