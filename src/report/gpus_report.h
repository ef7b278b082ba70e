// Renderers for `oomdoc gpus`: the terminal table and the --json document. They format the
// GpuProcessReport built by analyses/stale_processes and compute nothing.
#pragma once

#include <string>

#include "analyses/stale_processes.h"
#include "report/json_output.h"
#include "report/style.h"

namespace oomdoc {

std::string render_gpus_text(const GpuProcessReport& report, const Style& style);

// Fields documented in docs/json.md under "gpus".
Json gpus_json(const GpuProcessReport& report);

// "45s", "12m03s", "3h12m", "2d04h".
std::string format_duration(double seconds);

}  // namespace oomdoc
