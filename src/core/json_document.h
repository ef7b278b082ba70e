// JSON text parsed with the error a person can act on: the source, the line and the column.
// Shared by the readers of job files, model configs and the CLI's inputs.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace oomdoc {

// Any JSON text, or an error naming `source` and where the syntax breaks ("job.json: invalid
// JSON: line 3, column 1: syntax error while parsing object - unexpected '}'...").
Result<nlohmann::json> parse_json_document(std::string_view text, const std::string& source);

}  // namespace oomdoc
