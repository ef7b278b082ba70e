// Reads only the JSON header of *.safetensors files (8-byte little-endian length, then JSON):
// tensor names, dtypes and shapes, never the tensor data. Gives exact parameter counts and
// checkpoint bytes, including pre-quantized checkpoints (GPTQ/AWQ packed ints, bnb, FP8).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace oomdoc {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;               // "BF16", "F32", "I32", "U8", "F8_E4M3", ...
  std::vector<uint64_t> shape;
  uint64_t elements = 0;
  uint64_t bytes = 0;
};

struct SafetensorsSummary {
  std::vector<SafetensorsTensor> tensors;
  std::map<std::string, uint64_t> elements_by_dtype;
  uint64_t total_elements = 0;
  uint64_t total_bytes = 0;        // tensor data bytes
};

// Parses a header given the bytes of the file's start (at least 8 + header length) and the whole
// file size, so "header longer than the file" is caught without reading the data.
Result<SafetensorsSummary> parse_safetensors_header(std::string_view head, uint64_t file_size,
                                                    const std::string& source);

// Opens a file and reads its header (at most 100 MiB of header).
Result<SafetensorsSummary> read_safetensors_header(const std::string& path);

// Every *.safetensors in a folder (through model.safetensors.index.json when present), merged.
Result<SafetensorsSummary> read_safetensors_folder(const std::string& folder);

// Bits per element of a safetensors dtype (F4: 4, F6_*: 6, BF16: 16); 0 when it is not one.
uint64_t safetensors_dtype_bits(std::string_view dtype);

// The dtypes the safetensors format defines, comma separated (for errors).
std::string safetensors_dtype_names();

}  // namespace oomdoc
