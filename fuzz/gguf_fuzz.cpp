// libFuzzer target: any bytes as a GGUF file's header, with the file claimed as long as the input
// or longer (a header followed by tensor data not read), then the model read from it and its
// llama.cpp estimate, as `oomdoc estimate FILE.gguf` runs them; and the same bytes as a llama.cpp
// command line. Must never crash, leak or hang.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "analyses/estimator.h"
#include "readers/gguf_header.h"
#include "readers/llama_cpp_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)oomdoc::parse_llama_cpp_command_line({"llama-server " + std::string(bytes.substr(0, 4096))});
  const uint64_t extra = size ? static_cast<uint64_t>(data[size - 1]) << 20 : 0;   // up to 255 MiB of unread data
  for (uint64_t file_size : {static_cast<uint64_t>(size), static_cast<uint64_t>(size) + extra}) {
    auto header = oomdoc::parse_gguf_header(bytes, file_size, "fuzz.gguf");
    if (!header) continue;
    auto model = oomdoc::model_from_gguf_header(*header, "fuzz.gguf");
    if (!model) continue;
    oomdoc::Job job;
    job.prompt_len = 4096;
    job.max_new_tokens = 0;
    (void)oomdoc::estimate_memory(*model, job);
  }
  return 0;
}
