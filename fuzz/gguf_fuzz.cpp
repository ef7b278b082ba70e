// libFuzzer target: any bytes as a GGUF file's header (the tensor data after it is the rest of
// the input), then the model read from it and its llama.cpp estimate, as `oomdoc estimate
// FILE.gguf` runs them. Must never crash, leak or hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "analyses/estimator.h"
#include "readers/gguf_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto header = oomdoc::parse_gguf_header(bytes, size, "fuzz.gguf");
  if (!header) return 0;
  auto model = oomdoc::model_from_gguf_header(*header, "fuzz.gguf");
  if (!model) return 0;
  oomdoc::Job job;
  job.prompt_len = 4096;
  job.max_new_tokens = 0;
  (void)oomdoc::estimate_memory(*model, job);
  return 0;
}
