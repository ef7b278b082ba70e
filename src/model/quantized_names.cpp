#include "model/quantized_names.h"

#include <algorithm>
#include <cctype>

namespace oomdoc {
namespace {

// Longest first, so "-gptq-int4" wins over "-int4". Formats as the quantizers publish them:
// AutoAWQ / GPTQ 4-bit in groups of 128, bitsandbytes NF4 with 64-weight blocks, compressed-tensors
// W8A8 per output channel, NVFP4 with an fp8 scale per 16 values, MXFP4 with one per 32.
constexpr QuantizedNameFormat kQuantizedNameFormats[] = {
    {"-awq-int4", "awq", 4, 128},
    {"-quantized.w8a8", "compressed-tensors", 8, 0},  {"-quantized.w4a16", "compressed-tensors", 4, 128},
    {"-quantized.w8a16", "compressed-tensors", 8, 128}, {"-gptq-int4", "gptq", 4, 128},
    {"-gptq-int8", "gptq", 8, 128},                  {"-fp8-dynamic", "fp8", 8, 0},
    {"-unsloth-bnb-4bit", "bitsandbytes", 4, 64, true}, {"-bnb-4bit", "bitsandbytes", 4, 64, true},
    {"-autoround", "gptq", 4, 128},                  {"-auto-round", "gptq", 4, 128},
    {"-nvfp4", "modelopt_fp4", 4, 16},               {"-mxfp4", "mxfp4", 4, 32},
    {"-gptq", "gptq", 4, 128},                       {"-awq", "awq", 4, 128},
    {"-int4", "gptq", 4, 128},                       {"-int8", "compressed-tensors", 8, 0},
    {"-w8a8", "compressed-tensors", 8, 0},           {"-w4a16", "gptq", 4, 128},
    {"-fp8", "fp8", 8, 0},                           {"-fp4", "modelopt_fp4", 4, 16}};

bool ends_with_icase(std::string_view text, std::string_view suffix) {
  if (text.size() < suffix.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), text.end() - static_cast<long>(suffix.size()),
                    [](char a, char b) {
                      return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
                    });
}

}  // namespace

std::optional<QuantizedName> split_quantized_name(std::string_view name) {
  while (!name.empty() && name.back() == '/') name.remove_suffix(1);
  const QuantizedNameFormat* outermost = nullptr;
  for (bool again = true; again;) {
    again = false;
    for (const auto& format : kQuantizedNameFormats) {
      if (ends_with_icase(name, format.suffix)) {
        name.remove_suffix(format.suffix.size());
        if (!outermost) outermost = &format;
        again = true;
        break;
      }
    }
  }
  if (!outermost) return std::nullopt;
  return QuantizedName{std::string(name), outermost};
}

}  // namespace oomdoc
