#include "readers/served_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "readers/model_resolver.h"

namespace oomdoc {
namespace {

// Suffixes quantizers append to the base model's name (longest first).
constexpr const char* kQuantizedSuffixes[] = {
    "-quantized.w8a8", "-quantized.w4a16", "-quantized.w8a16", "-gptq-int4", "-gptq-int8",
    "-fp8-dynamic", "-bnb-4bit", "-autoround", "-auto-round", "-nvfp4", "-mxfp4", "-gptq", "-awq",
    "-int4", "-int8", "-w8a8", "-w4a16", "-fp8", "-fp4"};

bool ends_with_icase(const std::string& text, std::string_view suffix) {
  if (text.size() < suffix.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), text.end() - static_cast<long>(suffix.size()),
                    [](char a, char b) {
                      return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
                    });
}

}  // namespace

Result<ServedModel> resolve_served_model(const std::string& name) {
  auto direct = resolve_model(name);
  if (direct) return ServedModel{std::move(direct.value()), ""};
  std::string base = name;
  while (!base.empty() && base.back() == '/') base.pop_back();
  bool stripped = false;
  for (bool again = true; again;) {
    again = false;
    for (const char* suffix : kQuantizedSuffixes) {
      if (ends_with_icase(base, suffix)) {
        base.resize(base.size() - std::string_view(suffix).size());
        stripped = again = true;
        break;
      }
    }
  }
  if (stripped) {
    auto fallback = resolve_model(base);
    if (fallback) {
      std::string id = fallback->id;
      // The named checkpoint is quantized its own way; the base config's format does not apply.
      fallback->quantization.clear();
      fallback->quantization_bits = 0;
      fallback->quantization_group_size = 0;
      return ServedModel{std::move(fallback.value()),
                         fmt::format("'{}' was not found; sized as its base model {} with the quantization its name says", name, id)};
    }
  }
  return direct.error();
}

}  // namespace oomdoc
