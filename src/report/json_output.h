// Shared conventions for --json output: one document on stdout, stable field names, byte counts
// as integers, absent values as null (never 0 or -1). Field-level docs live in docs/json.md.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace oomdoc {

using Json = nlohmann::ordered_json;

// null when absent; an integer otherwise.
inline Json json_bytes(const std::optional<uint64_t>& bytes) {
  return bytes ? Json(*bytes) : Json(nullptr);
}

template <typename T>
Json json_optional(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
}

// Every document carries the tool and its version so consumers can check compatibility.
Json json_document_header(const std::string& command);

// Pretty-printed with a trailing newline; invalid UTF-8 in strings is replaced, never fatal.
std::string dump_json(const Json& doc);

}  // namespace oomdoc
