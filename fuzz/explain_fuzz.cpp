// libFuzzer target: any bytes through the log scanner (every message format, tracebacks, memory
// readings, JSON-lines records), the diagnosis, and both renderers of `oomdoc explain`, as
// `oomdoc explain --json` and the terminal view run them. Must never crash, leak or hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "analyses/explain.h"
#include "readers/log_scanner.h"
#include "report/explain_json.h"
#include "report/explain_terminal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  oomdoc::ExplainReport report;
  oomdoc::add_to_report(report, oomdoc::scan_text(bytes));
  oomdoc::ExplainTerminalOptions terminal;
  terminal.show_info = true;   // informational events are rendered too
  (void)oomdoc::render_explain(report, oomdoc::Style::plain(), terminal);
  (void)oomdoc::dump_json(oomdoc::explain_to_json(report));
  return 0;
}
