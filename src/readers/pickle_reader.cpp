#include "readers/pickle_reader.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/huge_pages.h"
#include "readers/pickle_opcodes.h"

namespace oomdoc::pickle {

namespace {

using namespace opcode;  // the VM names every opcode

constexpr size_t kBufferSize = 1 << 20;
constexpr uint64_t kProgressStep = 64ull << 20;
constexpr Value kUnsetMemo = Value::unset_memo();

// LONG1/LONG4 payload: little-endian two's complement of any length, mapped to 64 bits.
BigInt decode_long(const uint8_t* p, size_t n) {
  BigInt b;
  if (n == 0) return b;
  bool negative = (p[n - 1] & 0x80) != 0;
  size_t low = n < 8 ? n : 8;
  uint64_t bits = load_le(p, low);
  if (n < 8 && negative) bits |= ~uint64_t(0) << (8 * n);  // sign-extend
  b.bits = bits;
  b.non_negative = !negative;
  const uint8_t fill = negative ? 0xff : 0x00;
  bool fits = true;
  for (size_t i = 8; i < n; ++i) fits = fits && p[i] == fill;
  if (negative && n > 8 && (bits >> 63) == 0) fits = false;  // below INT64_MIN
  if (!fits) {
    b.saturated = true;
    b.bits = negative ? uint64_t(1) << 63 : ~uint64_t(0);
  }
  return b;
}

class Machine {
 public:
  Machine(const ByteReader* input, uint64_t size_hint, std::string_view memory, Tree& tree,
          const ReadOptions& options)
      : input_(input), tree_(tree), options_(options) {
    if (input_ == nullptr) {
      begin_ = reinterpret_cast<const uint8_t*>(memory.data());
      p_ = begin_;
      end_ = begin_ + memory.size();
      eof_ = true;
      total_ = memory.size();
    } else {
      buffer_.resize(kBufferSize);
      begin_ = p_ = end_ = buffer_.data();
      total_ = size_hint;
    }
    stack_.reserve(1024);
    // Address space only (pages are touched as they fill): saves the copy-and-fault of every
    // doubling on big files. A container or memo slot costs at least one byte of input.
    reserve_huge(memo_, std::min<uint64_t>(total_ / 8, 1ull << 28));
    memo_warmer_.start(memo_.data(), memo_.capacity() * sizeof(Value));
    tree_.reserve_for_input(total_);
    tree_.attach_memo(&memo_);
  }

  ~Machine() { tree_.attach_memo(nullptr); }
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  Status run(ReadInfo* info);

 private:
  uint64_t offset_of(const uint8_t* p) const { return base_ + uint64_t(p - begin_); }
  // Bytes of the file after p_ (when its size is known).
  uint64_t bytes_left() const { return total_ - std::min(total_, offset_of(p_)); }
  Error fail(std::string what) const {
    return Error{fmt::format("offset {}: {}: {}", op_offset_, opcode_name(op_), what)};
  }
  Error truncated() const {
    return Error{fmt::format("offset {}: {}: the file ends in the middle of this opcode "
                             "(truncated after {} bytes)",
                             op_offset_, opcode_name(op_), offset_of(end_))};
  }
  // " (imports os.system)" for GLOBAL / STACK_GLOBAL, so the user sees what the file would have run
  // (torch._utils._rebuild_tensor_v2: a pickle of tensors); read as text, never resolved.
  std::string imported_name() const;
  bool refill();
  bool need(size_t n) {
    if (size_t(end_ - p_) >= n) return true;
    while (!eof_ && size_t(end_ - p_) < n) refill();
    return size_t(end_ - p_) >= n;
  }
  // Reads a length-prefixed payload; the view lives until the next read.
  Result<std::string_view> read_payload(uint64_t length);
  Status check_length(uint64_t length) const;

  inline Status push_memo_get(uint64_t index);
  inline Status put_memo(uint64_t index);
  inline void store_memo(uint64_t index, Value v);
  // The folder's fast path for a whole dict (Folder::take_dict); false when it declines.
  bool take_dict(Folder& folder, uint64_t& opcodes);
  Result<size_t> pop_mark();
  Status fill_container(size_t first, uint32_t target, bool pairs);
  Status build_from_mark(ContainerKind kind);
  std::string too_deep() const;
  Status build_tuple(size_t n);

  const ByteReader* input_;
  Tree& tree_;
  const ReadOptions& options_;
  std::vector<uint8_t> buffer_;
  std::string scratch_;
  const uint8_t* begin_ = nullptr;
  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
  uint64_t base_ = 0;  // file offset of begin_
  uint64_t total_ = 0;
  uint64_t next_progress_ = kProgressStep;
  bool eof_ = false;
  uint8_t op_ = 0;
  uint64_t op_offset_ = 0;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::vector<Value> memo_;
  static constexpr size_t kMemoPerReport = PageWarmer::kReportEvery / sizeof(Value);
  PageWarmer memo_warmer_;  // faults in memo_'s reserved pages beside the VM (core/huge_pages.h)
};

bool Machine::refill() {
  if (eof_) return false;
  size_t keep = size_t(end_ - p_);
  base_ += uint64_t(p_ - begin_);
  std::memmove(buffer_.data(), p_, keep);
  size_t filled = keep;
  while (filled < buffer_.size()) {
    size_t n = (*input_)(reinterpret_cast<char*>(buffer_.data() + filled), buffer_.size() - filled);
    if (n == 0) {
      eof_ = true;
      break;
    }
    filled += n;
  }
  begin_ = p_ = buffer_.data();
  end_ = begin_ + filled;
  if (options_.progress && base_ + filled >= next_progress_) {
    options_.progress(base_ + filled, total_);
    next_progress_ = base_ + filled + kProgressStep;
  }
  return true;
}

Status Machine::check_length(uint64_t length) const {
  if (total_ != 0 && length > bytes_left()) {
    return fail(fmt::format("length {} is larger than the rest of the file ({} bytes)", length,
                            bytes_left()));
  }
  if (length > options_.max_string_bytes) {
    return fail(fmt::format("length {} is over the {}-byte limit for one value", length,
                            options_.max_string_bytes));
  }
  return Ok{};
}

Result<std::string_view> Machine::read_payload(uint64_t length) {
  if (auto ok = check_length(length); !ok) return ok.error();
  if (uint64_t(end_ - p_) >= length) {
    std::string_view view(reinterpret_cast<const char*>(p_), size_t(length));
    p_ += length;
    return view;
  }
  // Longer than what is buffered: gather it piece by piece (grows only as data really arrives).
  scratch_.clear();
  while (scratch_.size() < length) {
    if (p_ == end_ && !refill()) return truncated();
    if (p_ == end_) return truncated();
    size_t take = size_t(std::min<uint64_t>(length - scratch_.size(), uint64_t(end_ - p_)));
    scratch_.append(reinterpret_cast<const char*>(p_), take);
    p_ += take;
  }
  return std::string_view(scratch_);
}

inline Status Machine::push_memo_get(uint64_t index) {
  if (index >= memo_.size() || memo_[index] == kUnsetMemo) {
    return fail(fmt::format("memo slot {} was never stored (the memo holds {} slot{})", index, memo_.size(),
                            memo_.size() == 1 ? "" : "s"));
  }
  Value v = tree_.resolve(memo_[index]);
  tree_.pin(v);  // a second reference to a container that is not complete yet
  stack_.push_back(v);
  return Ok{};
}

inline Status Machine::put_memo(uint64_t index) {
  if (stack_.empty()) return fail("nothing on the stack to store in the memo");
  if (index >= memo_.size() && index - memo_.size() > options_.max_memo_gap) {
    return fail(fmt::format("memo slot {} is far beyond the {} slot{} used so far", index, memo_.size(),
                            memo_.size() == 1 ? "" : "s"));
  }
  store_memo(index, stack_.back());
  return Ok{};
}

inline void Machine::store_memo(uint64_t index, Value v) {
  if (index >= memo_.size()) {
    size_t before = memo_.size();
    memo_.resize(index + 1, kUnsetMemo);
    if (memo_.size() / kMemoPerReport != before / kMemoPerReport) {
      memo_warmer_.advance(memo_.data(), memo_.size() * sizeof(Value));
    }
  }
  memo_[index] = v;
  tree_.note_memo(v, index);
}

bool Machine::take_dict(Folder& folder, uint64_t& opcodes) {
  // A dict must be buffered whole to be taken: top up when little is left (rarely: 1 MiB buffer).
  if (end_ - p_ < 4096 && !eof_) refill();
  DictBytes io;
  io.begin = p_;
  io.end = end_;
  io.memo = &memo_;
  if (!folder.take_dict(tree_, io)) return false;
  for (size_t i = 0; i < io.memo_store_count; ++i) {
    store_memo(io.memo_stores[i].first, io.memo_stores[i].second);
  }
  stack_.push_back(io.value);
  p_ += io.consumed;
  opcodes += io.opcodes;
  return true;
}

Result<size_t> Machine::pop_mark() {
  if (marks_.empty()) return fail("no MARK before it");
  size_t mark = marks_.back();
  marks_.pop_back();
  if (mark > stack_.size()) return fail("the stack was popped below its MARK");
  return mark;
}

// Moves stack_[first..] into the target container, sealing each item in order (records folded out
// of a batch are decoded in list order; their pool items are given back as the tail frees up).
Status Machine::fill_container(size_t first, uint32_t target, bool pairs) {
  size_t n = stack_.size() - first;
  if (pairs && n % 2 != 0) return fail(fmt::format("odd number of items ({}) for a dict", n));
  for (size_t i = first; i < stack_.size(); ++i) stack_[i] = tree_.seal(stack_[i]);
  if (tree_.container(target).sealed) {
    return fail("the container was already complete (recursive or re-opened containers are "
                "not supported)");
  }
  if (!tree_.append(target, stack_.data() + first, n)) {
    return fail("too many items (over the 4-billion-value limit)");
  }
  stack_.resize(first);
  return Ok{};
}

std::string Machine::too_deep() const {
  return fmt::format("more than {} values open on the stack (nesting too deep)", options_.max_stack);
}

Status Machine::build_from_mark(ContainerKind kind) {
  auto mark = pop_mark();
  if (!mark) return mark.error();
  uint32_t id = tree_.new_container(kind);
  if (auto ok = fill_container(*mark, id, kind == ContainerKind::kDict); !ok) return ok;
  stack_.push_back(Value::tagged(Tag::kContainer, id));
  return Ok{};
}

Status Machine::build_tuple(size_t n) {
  if (stack_.size() < n) return fail("not enough values on the stack");
  uint32_t id = tree_.new_container(ContainerKind::kTuple);
  if (auto ok = fill_container(stack_.size() - n, id, false); !ok) return ok;
  stack_.push_back(Value::tagged(Tag::kContainer, id));
  return Ok{};
}

#define OOMDOC_NEED(n) \
  if (!need(n)) return truncated()
#define OOMDOC_TRY(expr)          \
  do {                            \
    auto status_ = (expr);        \
    if (!status_) return status_; \
  } while (0)

std::string Machine::imported_name() const {
  auto printable = [](std::string_view text) {
    constexpr size_t kMax = 120;
    if (text.empty() || text.size() > kMax) return false;
    return std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c < 0x7f; });
  };
  std::string module, name;
  if (op_ == GLOBAL) {
    // The argument is "module\nname\n" right after the opcode (in the bytes read so far).
    std::string_view rest(reinterpret_cast<const char*>(p_), static_cast<size_t>(end_ - p_));
    size_t first = rest.find('\n');
    size_t second = first == std::string_view::npos ? first : rest.find('\n', first + 1);
    if (second == std::string_view::npos) return "";
    module = rest.substr(0, first);
    name = rest.substr(first + 1, second - first - 1);
  } else if (op_ == STACK_GLOBAL && stack_.size() >= 2) {
    Value m = stack_[stack_.size() - 2], n = stack_.back();
    if (m.tag() != Tag::kStr || n.tag() != Tag::kStr) return "";
    module = tree_.str(m);
    name = tree_.str(n);
  } else {
    return "";
  }
  if (!printable(module) || !printable(name)) return "";
  return fmt::format(" (imports {}.{})", module, name);
}

Status Machine::run(ReadInfo* info) {
  if (input_ != nullptr) refill();
  if (p_ == end_) return Error{"offset 0: the file is empty"};
  if (*p_ != PROTO) {
    return Error{fmt::format("offset 0: not a pickle of protocol 2 to 5 (starts with byte 0x{:02x}, "
                             "expected PROTO 0x80)",
                             *p_)};
  }
  uint64_t opcodes = 0;
  int protocol = 0;
  for (;;) {
    if (end_ - p_ < 16 && !eof_) refill();
    op_offset_ = offset_of(p_);
    if (p_ == end_) {
      op_ = STOP;
      return Error{fmt::format("offset {}: the file ends before the pickle's STOP (truncated)",
                               op_offset_)};
    }
    op_ = *p_++;
    ++opcodes;
    switch (op_) {
      case PROTO: {
        OOMDOC_NEED(1);
        protocol = *p_++;
        if (protocol < 2 || protocol > 5) {
          return fail(fmt::format("protocol {} is not supported (2 to 5 are)", protocol));
        }
        break;
      }
      case FRAME: {
        OOMDOC_NEED(8);
        uint64_t length = load_le(p_, 8);
        p_ += 8;
        if (total_ != 0 && length > bytes_left()) {
          return fail(fmt::format("frame of {} bytes is larger than the rest of the file ({} bytes)",
                                  length, bytes_left()));
        }
        break;  // a framing hint only: the opcodes inside are read as usual
      }
      case STOP: {
        if (stack_.empty()) return fail("the stack is empty at STOP");
        tree_.set_root(tree_.seal(stack_.back()));
        if (info != nullptr) {
          info->protocol = protocol;
          info->bytes_read = offset_of(p_);
          info->opcodes = opcodes;
        }
        if (options_.progress) options_.progress(offset_of(p_), total_);
        return Ok{};
      }
      case MARK:
        if (marks_.size() >= options_.max_marks) {
          return fail(fmt::format("nesting deeper than {} levels", options_.max_marks));
        }
        marks_.push_back(stack_.size());
        break;
      case POP:
        if (stack_.empty()) return fail("the stack is empty");
        stack_.pop_back();
        break;
      case POP_MARK: {
        auto mark = pop_mark();
        if (!mark) return mark.error();
        stack_.resize(*mark);
        break;
      }
      case DUP:
        if (stack_.empty()) return fail("the stack is empty");
        tree_.pin(stack_.back());
        stack_.push_back(stack_.back());
        break;
      case NONE: stack_.push_back(Value::none()); break;
      case NEWTRUE: stack_.push_back(Value::boolean(true)); break;
      case NEWFALSE: stack_.push_back(Value::boolean(false)); break;
      case BININT1:
        OOMDOC_NEED(1);
        stack_.push_back(Value::small_int(*p_++));
        break;
      case BININT2:
        OOMDOC_NEED(2);
        stack_.push_back(Value::small_int(int64_t(load_le(p_, 2))));
        p_ += 2;
        break;
      case BININT: {
        OOMDOC_NEED(4);
        int32_t v;
        std::memcpy(&v, p_, 4);
        p_ += 4;
        stack_.push_back(Value::small_int(v));
        break;
      }
      case LONG1: {
        OOMDOC_NEED(1);
        size_t n = *p_++;
        OOMDOC_NEED(n);
        if (n <= 7) {  // fits the inline range: no side table needed
          stack_.push_back(Value::small_int(decode_small_long(p_, n, size_t(end_ - p_))));
        } else {
          stack_.push_back(tree_.make_big(decode_long(p_, n)));
        }
        p_ += n;
        break;
      }
      case LONG4: {
        OOMDOC_NEED(4);
        int32_t n;
        std::memcpy(&n, p_, 4);
        p_ += 4;
        if (n < 0) return fail(fmt::format("negative length {}", n));
        auto payload = read_payload(uint64_t(n));
        if (!payload) return payload.error();
        stack_.push_back(tree_.make_big(decode_long(
            reinterpret_cast<const uint8_t*>(payload->data()), payload->size())));
        break;
      }
      case BINFLOAT: {
        OOMDOC_NEED(8);
        uint64_t bits = __builtin_bswap64(load_le(p_, 8));  // big-endian on the wire
        p_ += 8;
        double d;
        std::memcpy(&d, &bits, 8);
        stack_.push_back(tree_.make_float(d));
        break;
      }
      case SHORT_BINUNICODE:
      case SHORT_BINBYTES: {
        OOMDOC_NEED(1);
        size_t n = *p_++;
        OOMDOC_NEED(n);
        std::string_view s(reinterpret_cast<const char*>(p_), n);
        p_ += n;
        stack_.push_back(op_ == SHORT_BINUNICODE ? tree_.make_str(s) : tree_.make_bytes(s));
        break;
      }
      case BINUNICODE:
      case BINBYTES:
      case BINUNICODE8:
      case BINBYTES8:
      case BYTEARRAY8: {
        size_t width = (op_ == BINUNICODE || op_ == BINBYTES) ? 4 : 8;
        OOMDOC_NEED(width);
        uint64_t n = load_le(p_, width);
        p_ += width;
        auto payload = read_payload(n);
        if (!payload) return payload.error();
        bool text = op_ == BINUNICODE || op_ == BINUNICODE8;
        stack_.push_back(text ? tree_.make_str(*payload) : tree_.make_bytes(*payload));
        break;
      }
      // An empty container opened and left on the stack is how a pickle nests without MARK
      // ("]]]]...aaaa"): bounded like MARK's nesting, or 20 million of them hold gigabytes.
      case EMPTY_LIST:
        if (stack_.size() >= options_.max_stack) return fail(too_deep());
        stack_.push_back(Value::tagged(Tag::kContainer, tree_.new_container(ContainerKind::kList)));
        break;
      case EMPTY_DICT:
        if (Folder* folder = tree_.folder(); folder != nullptr && take_dict(*folder, opcodes)) break;
        if (stack_.size() >= options_.max_stack) return fail(too_deep());
        stack_.push_back(Value::tagged(Tag::kContainer, tree_.new_container(ContainerKind::kDict)));
        break;
      case EMPTY_SET:
        if (stack_.size() >= options_.max_stack) return fail(too_deep());
        stack_.push_back(Value::tagged(Tag::kContainer, tree_.new_container(ContainerKind::kSet)));
        break;
      case EMPTY_TUPLE:
        if (stack_.size() >= options_.max_stack) return fail(too_deep());
        stack_.push_back(Value::tagged(Tag::kContainer, tree_.new_container(ContainerKind::kTuple)));
        break;
      case APPEND:
      case SETITEM: {
        size_t n = op_ == APPEND ? 1 : 2;
        if (stack_.size() < n + 1) return fail("not enough values on the stack");
        Value target = stack_[stack_.size() - n - 1];
        ContainerKind want = op_ == APPEND ? ContainerKind::kList : ContainerKind::kDict;
        if (!tree_.is_container(target, want)) {
          return fail(op_ == APPEND ? "the target is not a list" : "the target is not a dict");
        }
        OOMDOC_TRY(fill_container(stack_.size() - n, target.id(), op_ == SETITEM));
        break;
      }
      case APPENDS:
      case SETITEMS:
      case ADDITEMS: {
        auto mark = pop_mark();
        if (!mark) return mark.error();
        if (*mark == 0) return fail("no container below the MARK");
        Value target = stack_[*mark - 1];
        ContainerKind want = op_ == APPENDS    ? ContainerKind::kList
                             : op_ == SETITEMS ? ContainerKind::kDict
                                               : ContainerKind::kSet;
        if (!tree_.is_container(target, want)) {
          return fail(fmt::format("the target below the MARK is not a {}",
                                  want == ContainerKind::kList   ? "list"
                                  : want == ContainerKind::kDict ? "dict"
                                                                 : "set"));
        }
        OOMDOC_TRY(fill_container(*mark, target.id(), op_ == SETITEMS));
        if (op_ == SETITEMS && tree_.folder() != nullptr &&
            tree_.folder()->complete_when_filled(tree_, target.id())) {
          stack_[*mark - 1] = tree_.seal(target);
        }
        break;
      }
      case LIST: OOMDOC_TRY(build_from_mark(ContainerKind::kList)); break;
      case DICT: OOMDOC_TRY(build_from_mark(ContainerKind::kDict)); break;
      case TUPLE: OOMDOC_TRY(build_from_mark(ContainerKind::kTuple)); break;
      case FROZENSET: OOMDOC_TRY(build_from_mark(ContainerKind::kSet)); break;
      case TUPLE1: OOMDOC_TRY(build_tuple(1)); break;
      case TUPLE2: OOMDOC_TRY(build_tuple(2)); break;
      case TUPLE3: OOMDOC_TRY(build_tuple(3)); break;
      case MEMOIZE:  // the hot memo opcodes take their common path inline
        if (!stack_.empty()) {
          memo_.push_back(stack_.back());
          if (memo_.size() % kMemoPerReport == 0) memo_warmer_.advance(memo_.data(), memo_.size() * sizeof(Value));
          tree_.note_memo(stack_.back(), memo_.size() - 1);
          break;
        }
        OOMDOC_TRY(put_memo(memo_.size()));
        break;
      case BINPUT:
        OOMDOC_NEED(1);
        OOMDOC_TRY(put_memo(*p_++));
        break;
      case LONG_BINPUT: {
        OOMDOC_NEED(4);
        uint64_t index = load_le(p_, 4);
        p_ += 4;
        OOMDOC_TRY(put_memo(index));
        break;
      }
      case BINGET:
      case LONG_BINGET: {
        size_t width = op_ == BINGET ? 1 : 4;
        OOMDOC_NEED(width);
        uint64_t index = width == 1 ? *p_ : load_le(p_, 4);
        p_ += width;
        if (index < memo_.size() && !(memo_[index] == kUnsetMemo)) {
          Value v = tree_.resolve(memo_[index]);
          tree_.pin(v);  // a second reference to a container that is not complete yet
          stack_.push_back(v);
          break;
        }
        OOMDOC_TRY(push_memo_get(index));  // reports the missing slot
        break;
      }
      case GLOBAL: case STACK_GLOBAL: case REDUCE: case BUILD: case INST: case OBJ:
      case NEWOBJ: case NEWOBJ_EX: case PERSID: case BINPERSID: case EXT1: case EXT2:
      case EXT4: case NEXT_BUFFER: case READONLY_BUFFER:
        return fail(fmt::format("refused{}: this opcode imports, builds objects or calls code, which a "
                                "memory snapshot never needs (oomdoc reads plain data only)",
                                imported_name()));
      case INT: case LONG: case FLOAT: case STRING: case BINSTRING: case SHORT_BINSTRING:
      case UNICODE: case PUT: case GET:
        return fail("protocol 0/1 text opcodes are not supported (snapshots use protocol 2 to 5)");
      default:
        return Error{fmt::format("offset {}: unknown opcode 0x{:02x}", op_offset_, op_)};
    }
  }
}

#undef OOMDOC_NEED
#undef OOMDOC_TRY

}  // namespace

std::string opcode_name(uint8_t op) {
  switch (op) {
    case MARK: return "MARK"; case STOP: return "STOP"; case POP: return "POP";
    case POP_MARK: return "POP_MARK"; case DUP: return "DUP"; case FLOAT: return "FLOAT";
    case INT: return "INT"; case BININT: return "BININT"; case BININT1: return "BININT1";
    case LONG: return "LONG"; case BININT2: return "BININT2"; case NONE: return "NONE";
    case PERSID: return "PERSID"; case BINPERSID: return "BINPERSID"; case REDUCE: return "REDUCE";
    case STRING: return "STRING"; case BINSTRING: return "BINSTRING";
    case SHORT_BINSTRING: return "SHORT_BINSTRING"; case UNICODE: return "UNICODE";
    case BINUNICODE: return "BINUNICODE"; case APPEND: return "APPEND"; case BUILD: return "BUILD";
    case GLOBAL: return "GLOBAL"; case DICT: return "DICT"; case EMPTY_DICT: return "EMPTY_DICT";
    case APPENDS: return "APPENDS"; case GET: return "GET"; case BINGET: return "BINGET";
    case INST: return "INST"; case LONG_BINGET: return "LONG_BINGET"; case LIST: return "LIST";
    case EMPTY_LIST: return "EMPTY_LIST"; case OBJ: return "OBJ"; case PUT: return "PUT";
    case BINPUT: return "BINPUT"; case LONG_BINPUT: return "LONG_BINPUT";
    case SETITEM: return "SETITEM"; case TUPLE: return "TUPLE"; case EMPTY_TUPLE: return "EMPTY_TUPLE";
    case SETITEMS: return "SETITEMS"; case BINFLOAT: return "BINFLOAT"; case PROTO: return "PROTO";
    case NEWOBJ: return "NEWOBJ"; case EXT1: return "EXT1"; case EXT2: return "EXT2";
    case EXT4: return "EXT4"; case TUPLE1: return "TUPLE1"; case TUPLE2: return "TUPLE2";
    case TUPLE3: return "TUPLE3"; case NEWTRUE: return "NEWTRUE"; case NEWFALSE: return "NEWFALSE";
    case LONG1: return "LONG1"; case LONG4: return "LONG4"; case BINBYTES: return "BINBYTES";
    case SHORT_BINBYTES: return "SHORT_BINBYTES"; case SHORT_BINUNICODE: return "SHORT_BINUNICODE";
    case BINUNICODE8: return "BINUNICODE8"; case BINBYTES8: return "BINBYTES8";
    case EMPTY_SET: return "EMPTY_SET"; case ADDITEMS: return "ADDITEMS";
    case FROZENSET: return "FROZENSET"; case NEWOBJ_EX: return "NEWOBJ_EX";
    case STACK_GLOBAL: return "STACK_GLOBAL"; case MEMOIZE: return "MEMOIZE"; case FRAME: return "FRAME";
    case BYTEARRAY8: return "BYTEARRAY8"; case NEXT_BUFFER: return "NEXT_BUFFER";
    case READONLY_BUFFER: return "READONLY_BUFFER";
    default: return fmt::format("0x{:02x}", op);
  }
}

Status read_pickle(const ByteReader& read, uint64_t size_hint, Tree& tree,
                   const ReadOptions& options, ReadInfo* info) {
  Machine machine(&read, size_hint, {}, tree, options);
  return machine.run(info);
}

Status read_pickle(InputFile& input, Tree& tree, const ReadOptions& options, ReadInfo* info) {
  ByteReader read = [&input](char* buffer, size_t size) { return input.read(buffer, size); };
  Status status = read_pickle(read, input.size_hint(), tree, options, info);
  if (input.failed()) return Error{input.error_message()};  // a read error explains the rest
  return status;
}

Status read_pickle(std::string_view bytes, Tree& tree, const ReadOptions& options, ReadInfo* info) {
  Machine machine(nullptr, 0, bytes, tree, options);
  return machine.run(info);
}

}  // namespace oomdoc::pickle
