// Reads the Python traceback printed above an exception: its frames, the innermost frame of the
// user's own code, and what the program was doing (backward, optimizer step, generation, ...).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/oom_event.h"

namespace oomdoc {

// `lines` are the cleaned lines before the exception line, oldest first. Returns nullopt when no
// "Traceback (most recent call last):" block ends right above.
std::optional<Traceback> parse_traceback(const std::vector<std::string>& lines);

// What a failing frame was doing, from function names and source lines; "" if unknown.
std::string classify_operation(const std::vector<TracebackFrame>& frames);

}  // namespace oomdoc
