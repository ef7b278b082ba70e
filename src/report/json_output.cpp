#include "report/json_output.h"

namespace oomdoc {

Json json_document_header(const std::string& command) {
  Json header;
  header["tool"] = "oomdoc";
  header["version"] = OOMDOC_VERSION;
  header["command"] = command;
  return header;
}

std::string dump_json(const Json& doc) {
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace oomdoc
