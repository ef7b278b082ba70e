// `oomdoc gpus`: who holds each GPU's memory right now, and which holders look stale.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "command.h"
#include "analyses/stale_processes.h"
#include "core/exit_codes.h"
#include "readers/gpu_catalog.h"
#include "readers/nvml_backend.h"
#include "readers/process_table.h"
#include "report/gpus_report.h"

namespace oomdoc::cli {
namespace {

struct GpusOptions {
  bool json = false;
  double watch_seconds = 0;
  bool catalog = false;
};

int run_gpus(const GpusOptions& options) {
  if (options.catalog) {
    if (options.json) {
      std::cout << dump_json(catalog_json(gpu_catalog()));
    } else {
      std::cout << render_catalog_text(gpu_catalog(), Style::for_fd(1));
    }
    return kExitOk;
  }
  auto backend = open_nvml_backend();
  if (!backend) return fail(backend.error().message);
  LinuxProcessTable table;
  StaleRules rules;
  rules.viewer_uid = static_cast<uint32_t>(getuid());
  const bool terminal = isatty(1) == 1;
  const Style style = Style::for_fd(1);
  for (bool first = true;; first = false) {
    auto state = (*backend)->read_state();
    if (!state) return fail(state.error().message);
    GpuProcessReport report = find_stale_processes(*state, table, rules);
    if (options.json) {
      // One document; under --watch one compact document per line (JSON Lines).
      if (options.watch_seconds > 0) {
        std::cout << gpus_json(report).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                  << std::endl;
      } else {
        std::cout << dump_json(gpus_json(report));
      }
    } else {
      std::string text = render_gpus_text(report, style);
      if (options.watch_seconds > 0 && terminal) {
        // Home, draw, clear what is left of the previous frame: refresh in place without flicker.
        std::cout << "\x1b[H" << (first ? "\x1b[2J" : "");
        std::string framed;
        for (char c : text) {
          if (c == '\n') framed += "\x1b[K";
          framed += c;
        }
        std::cout << framed << "\x1b[J" << std::flush;
      } else {
        if (!first) std::cout << "\n";
        std::cout << text << std::flush;
      }
    }
    if (options.watch_seconds <= 0) return kExitOk;
    std::this_thread::sleep_for(std::chrono::duration<double>(options.watch_seconds));
  }
}

void setup(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<GpusOptions>();
  CLI::App* cmd = app.add_subcommand(
      "gpus", "Show who holds each GPU's memory now, flag stale holders and how to end them");
  cmd->add_flag("--json", options->json, "Print one JSON document (JSON Lines under --watch)");
  cmd->add_option("--watch", options->watch_seconds, "Refresh every SECONDS (in place on a terminal)")
      ->check(CLI::Number)   // "abc" is not a number, before the range
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            // (CLI11's own Range says "Value 0 not in range 0.100000 to 86400.000000".)
            const double seconds = std::strtod(value.c_str(), nullptr);
            if (seconds >= 0.1 && seconds <= 86400.0) return std::string();
            return "must be between 0.1 and 86400 seconds (got " + value + ")";
          },
          ""));
  cmd->add_flag("--catalog", options->catalog,
                "List the bundled GPU catalog (names and aliases that --gpu options accept)")
      ->excludes("--watch");
  cmd->callback([options, exit_code]() { *exit_code = run_gpus(*options); });
}

CommandRegistration reg{60, "gpus", setup};

}  // namespace
}  // namespace oomdoc::cli
