// GGUF files (llama.cpp's model format) read natively and safely: the header only — metadata
// key/values and the tensor table — never the tensor data. A .gguf path given as a model becomes
// a ModelSpec whose shape comes from the `<arch>.*` metadata and whose weights are the exact bytes
// of each tensor (analyses/llama_cpp_estimate.cpp places them on the GPU or the host).
//
// Layout (ggml/docs/gguf.md): "GGUF", u32 version (2 or 3), u64 tensor count, u64 metadata count;
// each metadata entry a string key, a u32 value type and the value (arrays: u32 item type, u64
// count, items); each tensor a string name, u32 n_dims, u64 dims, u32 ggml type, u64 offset into
// the data section, which starts at the next multiple of general.alignment (32 by default).
// Strings are a u64 length and the bytes. Everything little-endian.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "model/model_spec.h"

namespace oomdoc {

struct GgufValue {
  enum class Kind { kUnsigned, kSigned, kFloat, kBool, kString, kArray };
  Kind kind = Kind::kUnsigned;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  uint64_t array_length = 0;   // arrays keep their length (tokenizer vocabularies, ...)
  std::vector<int64_t> ints;   // and, for integer arrays of at most 65,536 items, the values (per-layer head counts)
};

struct GgufTensor {
  std::string name;
  std::vector<uint64_t> dims;   // ne[0] first (the row length)
  uint32_t type = 0;            // ggml_type id
  uint64_t offset = 0;          // within the data section
  uint64_t bytes = 0;           // from the type's block size, else up to the next tensor
};

struct GgufHeader {
  uint32_t version = 0;
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensor> tensors;
  uint64_t data_offset = 0;     // where the tensor data starts in the file
};

// A GGUF file by its name (.gguf, any case) or its magic, whatever its name (Ollama keeps them
// as sha256-... blobs).
bool is_gguf_file(const std::string& path);

// `head`: the file's first bytes (at least the whole header); `file_size`: the whole file's.
// Errors name `source` and what is wrong: "model.gguf: not a GGUF file (magic ...)".
Result<GgufHeader> parse_gguf_header(std::string_view head, uint64_t file_size, const std::string& source);
// Reads the first 8 MiB, then more while the header runs past what was read, up to 256 MiB
// (metadata with a tokenizer is a few MiB).
Result<GgufHeader> read_gguf_header(const std::string& path);

// The model a GGUF file holds: the shape for the KV cache and compute buffer, the exact bytes of
// each block's tensors, the token embeddings and the output matrix, and the file type.
Result<ModelSpec> model_from_gguf(const std::string& path);
Result<ModelSpec> model_from_gguf_header(const GgufHeader& header, const std::string& source);

}  // namespace oomdoc
