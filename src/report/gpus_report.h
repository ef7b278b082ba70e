// Renderers for `oomdoc gpus`: the terminal table and the --json document. They format the
// GpuProcessReport built by analyses/stale_processes and compute nothing.
#pragma once

#include <string>

#include <vector>

#include "analyses/stale_processes.h"
#include "model/gpu.h"
#include "report/json_output.h"
#include "report/style.h"

namespace oomdoc {

std::string render_gpus_text(const GpuProcessReport& report, const Style& style);

// Fields documented in docs/json.md under "gpus".
Json gpus_json(const GpuProcessReport& report);

// `oomdoc gpus --catalog`: the bundled GPU catalog (readers/gpu_catalog.h) as a table / JSON.
std::string render_catalog_text(const std::vector<GpuSpec>& catalog, const Style& style);
Json catalog_json(const std::vector<GpuSpec>& catalog);

// "45s", "12m03s", "3h12m", "2d04h".
std::string format_duration(double seconds);

}  // namespace oomdoc
