// Serving engines and communication libraries other than vLLM: SGLang and NCCL.
#include "readers/formats/message_format.h"
#include "readers/formats/regex_search.h"

namespace oomdoc {
namespace {

std::optional<FormatMatch> match_sglang(const MessageWindow& w) {
  if (w.lines[0].find("Not enough memory. Please try to increase --mem-fraction-static") == std::string::npos) {
    return std::nullopt;
  }
  FormatMatch m;
  m.event.framework = "sglang";
  m.event.format = "sglang_not_enough_memory";
  return m;
}

std::optional<FormatMatch> match_nccl(const MessageWindow& w) {
  static const RE2 re(R"(NCCL WARN.*(?:Cuda failure|cudaMalloc).*out of memory)");
  if (!regex_search(re, w.lines[0])) return std::nullopt;
  FormatMatch m;
  m.event.framework = "nccl";
  m.event.format = "nccl_cuda_oom";
  return m;
}

}  // namespace

void add_other_formats(std::vector<MessageFormat>& out) {
  out.push_back({"sglang_not_enough_memory", {"Not enough memory"}, match_sglang});
  out.push_back({"nccl_cuda_oom", {"NCCL WARN"}, match_nccl});
}

}  // namespace oomdoc
