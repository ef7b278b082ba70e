// A compact, immutable-once-complete value tree for plain-data pickles (and JSON of the same shape).
//
// Why not a node-per-object tree: a 1 GB memory snapshot holds tens of millions of small dicts and
// frames shared hundreds of thousands of times. Here every value is 8 bytes (tagged), strings are
// interned by content, containers are chunk lists in one item pool, and a memo reference is just
// the same container id again, so sharing stays sharing. A Folder may turn each container into a
// compact domain record the moment it is complete ("sealed": consumed into its parent), and its
// items are released, which keeps memory bounded by the distinct data rather than by the file.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace oomdoc::pickle {

enum class Tag : uint8_t {
  kInt = 0,        // signed integer that fits in 61 bits, stored inline
  kSpecial = 1,    // None / False / True
  kBigInt = 2,     // wider integer, index into Tree::big_ints
  kFloat = 3,      // index into Tree::floats
  kStr = 4,        // interned string id
  kBytes = 5,      // interned byte string id (same table as strings)
  kContainer = 6,  // container id
  kRecord = 7,     // a container folded into a caller-defined record (kind, index)
};

class Value {
 public:
  constexpr Value() : raw_(kNoneRaw) {}
  static constexpr Value none() { return Value(kNoneRaw); }
  static constexpr Value boolean(bool b) { return Value((uint64_t(b ? 2 : 1) << 3) | 1); }
  // Marks a memo slot that a gap in BINPUT indices skipped: no opcode produces this payload.
  static constexpr Value unset_memo() { return Value((uint64_t(7) << 3) | 1); }
  static constexpr bool fits_inline(int64_t v) { return v >= kMinInline && v <= kMaxInline; }
  static Value small_int(int64_t v) { return Value((uint64_t(v) << 3) | uint64_t(Tag::kInt)); }
  static constexpr Value tagged(Tag tag, uint64_t payload) { return Value((payload << 3) | uint64_t(tag)); }
  static Value record(uint8_t kind, uint64_t index) {
    return tagged(Tag::kRecord, (index << 8) | kind);
  }

  Tag tag() const { return static_cast<Tag>(raw_ & 7); }
  uint64_t payload() const { return raw_ >> 3; }
  int64_t inline_int() const { return static_cast<int64_t>(raw_) >> 3; }
  bool is_none() const { return raw_ == kNoneRaw; }
  bool is_bool() const { return tag() == Tag::kSpecial && (payload() == 1 || payload() == 2); }
  bool bool_value() const { return payload() == 2; }
  uint32_t id() const { return static_cast<uint32_t>(payload()); }
  uint8_t record_kind() const { return static_cast<uint8_t>(payload() & 0xff); }
  uint64_t record_index() const { return payload() >> 8; }
  uint64_t raw() const { return raw_; }
  constexpr bool operator==(const Value& o) const { return raw_ == o.raw_; }

 private:
  static constexpr uint64_t kNoneRaw = 1;  // kSpecial, payload 0
  static constexpr int64_t kMaxInline = (int64_t(1) << 60) - 1;
  static constexpr int64_t kMinInline = -(int64_t(1) << 60);
  explicit constexpr Value(uint64_t raw) : raw_(raw) {}
  uint64_t raw_;
};

enum class ContainerKind : uint8_t { kList, kTuple, kDict, kSet, kFolded };

struct BigInt {
  // The value as the bits of a uint64 when non_negative, else as an int64.
  uint64_t bits = 0;
  bool non_negative = true;
  bool saturated = false;  // the integer did not fit in 64 bits and was clamped
};

// Interned strings (and byte strings): one copy of each distinct content, addressed by id.
class StringTable {
 public:
  uint32_t intern(std::string_view s);
  std::string_view get(uint32_t id) const { return views_[id]; }
  size_t size() const { return views_.size(); }

 private:
  std::deque<std::string> storage_;  // a deque never moves its elements: views stay valid
  std::vector<std::string_view> views_;
  std::unordered_map<std::string_view, uint32_t> ids_;
};

class Tree;

// What a folder's fast path for dicts sees right after an EMPTY_DICT opcode, and what it gives back
// when it takes the dict (Folder::take_dict).
struct DictBytes {
  // In: the bytes after EMPTY_DICT, as far as they are buffered, and the memo so far.
  const uint8_t* begin = nullptr;
  const uint8_t* end = nullptr;
  const std::vector<Value>* memo = nullptr;
  // Out: the bytes and opcodes the dict took, the value that stands for it, and the memo slots its
  // opcodes stored, in order (the VM stores them as if it had run those opcodes).
  size_t consumed = 0;
  uint64_t opcodes = 0;
  Value value;
  static constexpr size_t kMaxMemoStores = 8;
  std::array<std::pair<uint64_t, Value>, kMaxMemoStores> memo_stores;  // [0, memo_store_count)
  size_t memo_store_count = 0;
};

// Turns a just-completed container into a record (or leaves it as it is by returning nullopt).
class Folder {
 public:
  virtual ~Folder() = default;
  virtual std::optional<Value> fold(Tree& tree, uint32_t container) = 0;
  // Offered each batch of (sealed) values appended to a list, before they enter the item pool. A
  // folder that can stand for the batch by itself (a run of consecutive records, say: a 10-million
  // entry trace list is then two numbers, not 80 MB of items) returns true and must fold the list
  // when it is sealed. To stop absorbing a list, it gives the values back with Tree::store first.
  virtual bool absorb(Tree& tree, uint32_t list, const Value* values, size_t n) {
    (void)tree, (void)list, (void)values, (void)n;
    return false;
  }
  // Asked after a SETITEMS batch fills a dict: true when the dict is complete there (it is then
  // sealed and folded at once, and setting more items in it is an error, as for any sealed
  // container). pickle.dump writes a dict's items in one SETITEMS (up to 1000 items), so a folder
  // can number small records in file order this way; the fast path below takes dicts at this
  // point too, so both give the same records and refuse the same later changes.
  virtual bool complete_when_filled(Tree& tree, uint32_t dict) {
    (void)tree, (void)dict;
    return false;
  }
  // Optional fast path, offered the bytes that follow each EMPTY_DICT. A folder that recognizes a
  // whole dict there (through its closing SETITEMS) may decode it directly instead of the VM
  // building it item by item and folding it when sealed: tens of millions of trace entries are
  // read this way. It must give exactly what the general path would (the same record and memo
  // slots), and return false having stored nothing for anything it does not fully handle.
  virtual bool take_dict(Tree& tree, DictBytes& io) {
    (void)tree, (void)io;
    return false;
  }
};

class Tree {
 public:
  static constexpr uint32_t kNoChunk = 0xffffffffu;
  static constexpr uint32_t kDeadChunk = 0xfffffffeu;  // Chunk::next of a released chunk
  // The item pool holds at most this many values (32 GiB); beyond it the input is refused.
  static constexpr uint64_t kMaxItems = 0xfffffff0ull;

  static constexpr uint32_t kNoSlot = 0xffffffffu;
  struct Container {
    uint32_t first_chunk = kNoChunk;
    uint32_t last_chunk = kNoChunk;
    uint32_t count = 0;  // items (for dicts: keys + values)
    uint32_t memo_slot = kNoSlot;  // the one memo slot that refers to it, if any
    ContainerKind kind = ContainerKind::kList;
    bool sealed = false;
    bool pinned = false;  // referenced from more than one place: never recycled
  };
  struct Chunk {
    uint32_t offset;
    uint32_t count;
    uint32_t next;
  };

  // --- building (used by the pickle and JSON readers) ---
  uint32_t new_container(ContainerKind kind);
  // Appends values (already sealed) to a container as one chunk, unless the folder absorbs them.
  // False when the pool is full.
  bool append(uint32_t container, const Value* values, size_t n);
  // Puts values in the item pool without counting them again: for a folder giving back values it
  // absorbed (they were counted then). False when the pool is full.
  bool store(uint32_t container, const Value* values, size_t n);
  // Marks a value as complete because it is being stored in a parent; lets the folder fold it.
  // Returns the value to store (the record when folded).
  Value seal(Value v) {
    return v.tag() == Tag::kContainer ? seal_container(v) : v;  // scalars: nothing to do
  }
  // A container that was folded stands for its record wherever it is referenced again.
  Value resolve(Value v) const {
    if (v.tag() != Tag::kContainer) return v;
    const Container& c = containers_[v.id()];
    return c.kind == ContainerKind::kFolded ? folded_value(c) : v;
  }
  Value make_int(int64_t v);
  Value make_uint(uint64_t v);  // for values above INT64_MAX
  Value make_big(BigInt b);
  Value make_float(double d);
  Value make_str(std::string_view s) { return Value::tagged(Tag::kStr, strings_.intern(s)); }
  Value make_bytes(std::string_view s) { return Value::tagged(Tag::kBytes, strings_.intern(s)); }
  void set_folder(Folder* folder) { folder_ = folder; }
  Folder* folder() const { return folder_; }
  // Reserves address space in proportion to the input size (see Machine's constructor).
  void reserve_for_input(uint64_t input_bytes);

  // Memo bookkeeping, so that a folded container can give its id back: the memo slot that names
  // it is rewritten to the record, and the id is reused by the next container. A container seen
  // twice (two memo slots, DUP, a memo reference before it was complete) is pinned instead.
  void attach_memo(std::vector<Value>* memo) { memo_ = memo; }
  void note_memo(Value v, uint64_t slot) {
    if (v.tag() != Tag::kContainer) return;
    Container& c = containers_[v.id()];
    if (c.memo_slot == kNoSlot && slot < kNoSlot) {
      c.memo_slot = static_cast<uint32_t>(slot);
    } else {
      c.pinned = true;
    }
  }
  void pin(Value v) {
    if (v.tag() == Tag::kContainer) containers_[v.id()].pinned = true;
  }
  size_t live_containers() const { return containers_.size() - free_containers_.size(); }
  void set_root(Value root) { root_ = root; }

  // --- reading ---
  Value root() const { return root_; }
  const Container& container(uint32_t id) const { return containers_[id]; }
  size_t container_count() const { return containers_.size(); }
  std::string_view str(Value v) const { return strings_.get(v.id()); }
  StringTable& strings() { return strings_; }
  const StringTable& strings() const { return strings_; }
  double float_value(Value v) const { return floats_[v.id()]; }
  const BigInt& big(Value v) const { return big_ints_[v.id()]; }

  // Numeric views: nullopt when v is not a number (bools count as 0/1, as in Python).
  std::optional<int64_t> as_int(Value v) const;     // saturates values above INT64_MAX
  std::optional<uint64_t> as_uint(Value v) const;   // two's complement for negatives
  std::optional<double> as_double(Value v) const;
  bool is_container(Value v, ContainerKind kind) const {
    return v.tag() == Tag::kContainer && containers_[v.id()].kind == kind;
  }

  // Calls fn(const Value* items, size_t n) for each chunk of the container's items, in order.
  template <typename Fn>
  void for_each_chunk(uint32_t id, Fn&& fn) const {
    for (uint32_t c = containers_[id].first_chunk; c != kNoChunk; c = chunks_[c].next) {
      fn(items_.data() + chunks_[c].offset, static_cast<size_t>(chunks_[c].count));
    }
  }
  // Calls fn(Value item) for each item (fn(key, value) pairs for dicts: use for_each_pair).
  // Items were sealed when stored, so a folded child already reads as its record.
  template <typename Fn>
  void for_each_item(uint32_t id, Fn&& fn) const {
    for_each_chunk(id, [&](const Value* v, size_t n) {
      for (size_t i = 0; i < n; ++i) fn(v[i]);
    });
  }
  template <typename Fn>
  void for_each_pair(uint32_t id, Fn&& fn) const {
    for_each_chunk(id, [&](const Value* v, size_t n) {
      for (size_t i = 0; i + 1 < n; i += 2) fn(v[i], v[i + 1]);
    });
  }
  // Value of a dict's key (last assignment wins, as in Python); nullopt when absent.
  std::optional<Value> get(uint32_t dict, std::string_view key) const;
  // Item i of a list/tuple (linear in the number of chunks).
  std::optional<Value> at(uint32_t container, size_t index) const;

  size_t item_pool_size() const { return items_.size(); }

 private:
  Value folded_value(const Container& c) const;
  Value seal_container(Value v);
  void release_items(uint32_t container);

  std::vector<Container> containers_;
  std::vector<uint32_t> free_containers_;
  std::vector<Value>* memo_ = nullptr;
  std::vector<Chunk> chunks_;
  std::vector<Value> items_;
  std::vector<double> floats_;
  std::vector<BigInt> big_ints_;
  StringTable strings_;
  Folder* folder_ = nullptr;
  Value root_;
};

}  // namespace oomdoc::pickle
