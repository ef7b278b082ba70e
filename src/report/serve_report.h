// Renderers for `oomdoc serve`: the terminal text and the --json document (docs/json.md, "serve").
// They format a ServeReport; every number comes from analyses/vllm_serve.cpp.
#pragma once

#include <string>

#include "analyses/vllm_serve.h"
#include "report/json_output.h"
#include "report/style.h"

namespace oomdoc {

std::string render_serve_text(const ServeReport& report, const Style& style);
Json serve_json(const ServeReport& report);

}  // namespace oomdoc
