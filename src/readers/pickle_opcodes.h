// Pickle opcode bytes and the little-endian fields that follow them, for the reader's VM and for
// folders that decode common shapes directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace oomdoc::pickle::opcode {

// Opcode bytes (CPython Lib/pickle.py; the same values in torch's pickler_helper.h).
enum Op : uint8_t {
  MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', DUP = '2', FLOAT = 'F', INT = 'I',
  BININT = 'J', BININT1 = 'K', LONG = 'L', BININT2 = 'M', NONE = 'N', PERSID = 'P',
  BINPERSID = 'Q', REDUCE = 'R', STRING = 'S', BINSTRING = 'T', SHORT_BINSTRING = 'U',
  UNICODE = 'V', BINUNICODE = 'X', APPEND = 'a', BUILD = 'b', GLOBAL = 'c', DICT = 'd',
  EMPTY_DICT = '}', APPENDS = 'e', GET = 'g', BINGET = 'h', INST = 'i', LONG_BINGET = 'j',
  LIST = 'l', EMPTY_LIST = ']', OBJ = 'o', PUT = 'p', BINPUT = 'q', LONG_BINPUT = 'r',
  SETITEM = 's', TUPLE = 't', EMPTY_TUPLE = ')', SETITEMS = 'u', BINFLOAT = 'G',
  PROTO = 0x80, NEWOBJ = 0x81, EXT1 = 0x82, EXT2 = 0x83, EXT4 = 0x84, TUPLE1 = 0x85,
  TUPLE2 = 0x86, TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, LONG4 = 0x8b,
  BINBYTES = 'B', SHORT_BINBYTES = 'C', SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d,
  BINBYTES8 = 0x8e, EMPTY_SET = 0x8f, ADDITEMS = 0x90, FROZENSET = 0x91, NEWOBJ_EX = 0x92,
  STACK_GLOBAL = 0x93, MEMOIZE = 0x94, FRAME = 0x95, BYTEARRAY8 = 0x96, NEXT_BUFFER = 0x97,
  READONLY_BUFFER = 0x98,
};

// n (at most 8) little-endian bytes (x86-64 and aarch64 hosts are little-endian).
inline uint64_t load_le(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  std::memcpy(&v, p, n);
  return v;
}

// A LONG1 payload of n <= 7 bytes (two's complement) as an int64. When 8 bytes are readable it
// loads them at once and masks: copying n bytes one by one into a word and reading the word back
// stalls the CPU (a failed store-to-load forward), which showed in profiles of trace entries,
// whose addresses and times are all LONG1.
inline int64_t decode_small_long(const uint8_t* p, size_t n, size_t readable) {
  if (n == 0) return 0;
  uint64_t bits = readable >= 8 ? load_le(p, 8) & (~uint64_t(0) >> (64 - 8 * n)) : load_le(p, n);
  if (p[n - 1] & 0x80) bits |= ~uint64_t(0) << (8 * n);  // sign-extend
  return static_cast<int64_t>(bits);
}

}  // namespace oomdoc::pickle::opcode
