// A safe, streaming reader for plain-data pickles (protocols 2 to 5), as written by
// `pickle.dump` (CPython) and torch's C++ Pickler for PyTorch memory snapshots.
//
// It understands the opcodes that build dicts, lists, tuples, sets, strings, bytes, ints of any
// width, floats, bools and None, with the memo kept as shared references (a memo hit is the same
// container again, never a copy). Opcodes that would import, build objects or call code (GLOBAL,
// STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, PERSID, EXT*, out-of-band buffers) are refused
// with an error naming the opcode and its byte offset: opening a hostile file is safe. The VM is a
// loop over an explicit stack (no recursion), every length is checked before anything is
// allocated, and input is read in 1 MiB pieces, so memory follows the decoded data, not the file.
#pragma once

#include <cstdint>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "core/file_input.h"
#include "core/result.h"
#include "readers/pickle_tree.h"

namespace oomdoc::pickle {

struct ReadOptions {
  uint64_t max_string_bytes = 1ull << 30;  // one string/bytes object or LONG4 payload
  uint64_t max_marks = 100000;             // nesting depth of MARK ... (lists of lists of ...)
  // Values on the stack when an empty container is opened: nesting without MARK. Real snapshots
  // stay far below (Python's pickler batches APPENDS/SETITEMS by 1000, nesting is a few levels).
  uint64_t max_stack = 1000000;
  uint64_t max_memo_gap = 1ull << 20;      // how far BINPUT may jump past the memo's end
  // Called about every 64 MiB with (bytes read, total bytes or 0 when unknown).
  std::function<void(uint64_t, uint64_t)> progress;
};

struct ReadInfo {
  int protocol = 0;
  uint64_t bytes_read = 0;
  uint64_t opcodes = 0;
};

// Reads one pickle into tree (its root is set on success). Error messages have the form
// "offset 1834: SETITEMS: odd number of items (3) after MARK"; callers prefix the file name.
Status read_pickle(InputFile& input, Tree& tree, const ReadOptions& options = {},
                   ReadInfo* info = nullptr);
// From any byte source: read(buffer, size) returns the count read, 0 at the end. size_hint is the
// total size when known (lengths are then checked against it), else 0.
using ByteReader = std::function<size_t(char*, size_t)>;
Status read_pickle(const ByteReader& read, uint64_t size_hint, Tree& tree,
                   const ReadOptions& options = {}, ReadInfo* info = nullptr);
Status read_pickle(std::string_view bytes, Tree& tree, const ReadOptions& options = {},
                   ReadInfo* info = nullptr);

// "SETITEMS", "GLOBAL", ...; "0x.." for bytes that are no opcode.
std::string opcode_name(uint8_t op);

}  // namespace oomdoc::pickle
