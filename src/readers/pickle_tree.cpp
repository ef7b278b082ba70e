#include "readers/pickle_tree.h"

#include "core/huge_pages.h"

#include <algorithm>
#include <limits>

namespace oomdoc::pickle {

uint32_t StringTable::intern(std::string_view s) {
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  storage_.emplace_back(s);
  std::string_view stored = storage_.back();
  auto id = static_cast<uint32_t>(views_.size());
  views_.push_back(stored);
  ids_.emplace(stored, id);
  return id;
}

void Tree::reserve_for_input(uint64_t input_bytes) {
  reserve_huge(containers_, std::min<uint64_t>(input_bytes / 256, 1ull << 24));  // ids are recycled
  reserve_huge(chunks_, std::min<uint64_t>(input_bytes / 64, 1ull << 26));
  reserve_huge(items_, std::min<uint64_t>(input_bytes / 64, 1ull << 26));
}

uint32_t Tree::new_container(ContainerKind kind) {
  Container c;
  c.kind = kind;
  if (!free_containers_.empty()) {
    uint32_t id = free_containers_.back();
    free_containers_.pop_back();
    containers_[id] = c;
    return id;
  }
  containers_.push_back(c);
  return static_cast<uint32_t>(containers_.size() - 1);
}

bool Tree::append(uint32_t id, const Value* values, size_t n) {
  if (n == 0) return true;
  if (containers_[id].count + n > 0xffffffffull) return false;
  if (folder_ != nullptr && containers_[id].kind == ContainerKind::kList &&
      folder_->absorb(*this, id, values, n)) {
    containers_[id].count += static_cast<uint32_t>(n);
    return true;
  }
  if (!store(id, values, n)) return false;
  containers_[id].count += static_cast<uint32_t>(n);
  return true;
}

bool Tree::store(uint32_t id, const Value* values, size_t n) {
  if (n == 0) return true;
  if (items_.size() + n > kMaxItems) return false;
  auto chunk_id = static_cast<uint32_t>(chunks_.size());
  chunks_.push_back(Chunk{static_cast<uint32_t>(items_.size()), static_cast<uint32_t>(n), kNoChunk});
  items_.insert(items_.end(), values, values + n);
  Container& c = containers_[id];
  if (c.last_chunk == kNoChunk) {
    c.first_chunk = chunk_id;
  } else {
    chunks_[c.last_chunk].next = chunk_id;
  }
  c.last_chunk = chunk_id;
  return true;
}

Value Tree::folded_value(const Container& c) const {
  // A folded container keeps its record's raw bits in the two chunk fields.
  uint64_t raw = (uint64_t(c.first_chunk) << 32) | c.last_chunk;
  return Value::tagged(Tag(raw & 7), raw >> 3);
}

void Tree::release_items(uint32_t id) {
  // A folded container's chunks are marked dead; dead chunks at the end of the pool are given
  // back at once (a batch of just-folded records frees its whole tail when its last one folds).
  for (uint32_t c = containers_[id].first_chunk; c != kNoChunk;) {
    uint32_t next = chunks_[c].next;
    chunks_[c].next = kDeadChunk;
    c = next;
  }
  while (!chunks_.empty() && chunks_.back().next == kDeadChunk) {
    items_.resize(chunks_.back().offset);
    chunks_.pop_back();
  }
}

Value Tree::seal_container(Value v) {
  Container& c = containers_[v.id()];
  if (c.kind == ContainerKind::kFolded) return folded_value(c);
  if (c.sealed) return v;
  c.sealed = true;
  if (folder_ == nullptr) return v;
  std::optional<Value> record = folder_->fold(*this, v.id());
  if (!record) return v;
  release_items(v.id());
  Container& folded = containers_[v.id()];  // fold() may have grown containers_
  folded.kind = ContainerKind::kFolded;
  folded.count = 0;
  folded.first_chunk = static_cast<uint32_t>(record->raw() >> 32);
  folded.last_chunk = static_cast<uint32_t>(record->raw());
  // Recycle the id when nothing but its single memo slot can still name it.
  if (!folded.pinned && memo_ != nullptr) {
    bool memo_points_here = folded.memo_slot != kNoSlot && folded.memo_slot < memo_->size() &&
                            (*memo_)[folded.memo_slot] == v;
    if (memo_points_here) (*memo_)[folded.memo_slot] = *record;
    if (memo_points_here || folded.memo_slot == kNoSlot) free_containers_.push_back(v.id());
  }
  return *record;
}

Value Tree::make_int(int64_t v) {
  if (Value::fits_inline(v)) return Value::small_int(v);
  big_ints_.push_back(BigInt{static_cast<uint64_t>(v), v >= 0, false});
  return Value::tagged(Tag::kBigInt, big_ints_.size() - 1);
}

Value Tree::make_uint(uint64_t v) {
  if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return make_int(static_cast<int64_t>(v));
  }
  big_ints_.push_back(BigInt{v, true, false});
  return Value::tagged(Tag::kBigInt, big_ints_.size() - 1);
}

Value Tree::make_big(BigInt b) {
  if (!b.saturated && !b.non_negative) return make_int(static_cast<int64_t>(b.bits));
  if (!b.saturated) return make_uint(b.bits);
  big_ints_.push_back(b);
  return Value::tagged(Tag::kBigInt, big_ints_.size() - 1);
}

Value Tree::make_float(double d) {
  floats_.push_back(d);
  return Value::tagged(Tag::kFloat, floats_.size() - 1);
}

std::optional<int64_t> Tree::as_int(Value v) const {
  switch (v.tag()) {
    case Tag::kInt: return v.inline_int();
    case Tag::kSpecial:
      if (v.is_bool()) return v.bool_value() ? 1 : 0;
      return std::nullopt;
    case Tag::kBigInt: {
      const BigInt& b = big_ints_[v.id()];
      if (!b.non_negative) return static_cast<int64_t>(b.bits);
      if (b.bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return std::numeric_limits<int64_t>::max();
      }
      return static_cast<int64_t>(b.bits);
    }
    default: return std::nullopt;
  }
}

std::optional<uint64_t> Tree::as_uint(Value v) const {
  if (v.tag() == Tag::kBigInt) return big_ints_[v.id()].bits;
  auto i = as_int(v);
  if (!i) return std::nullopt;
  return static_cast<uint64_t>(*i);
}

std::optional<double> Tree::as_double(Value v) const {
  if (v.tag() == Tag::kFloat) return floats_[v.id()];
  if (v.tag() == Tag::kBigInt) {
    const BigInt& b = big_ints_[v.id()];
    return b.non_negative ? static_cast<double>(b.bits) : static_cast<double>(int64_t(b.bits));
  }
  auto i = as_int(v);
  if (!i) return std::nullopt;
  return static_cast<double>(*i);
}

std::optional<Value> Tree::get(uint32_t dict, std::string_view key) const {
  std::optional<Value> found;
  for_each_pair(dict, [&](Value k, Value v) {
    if (k.tag() == Tag::kStr && str(k) == key) found = v;
  });
  return found;
}

std::optional<Value> Tree::at(uint32_t id, size_t index) const {
  std::optional<Value> found;
  size_t seen = 0;
  for (uint32_t c = containers_[id].first_chunk; c != kNoChunk; c = chunks_[c].next) {
    if (index < seen + chunks_[c].count) return items_[chunks_[c].offset + (index - seen)];
    seen += chunks_[c].count;
  }
  return found;
}

}  // namespace oomdoc::pickle
