#include "readers/snapshot_reader.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <map>
#include <span>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/file_input.h"
#include "core/huge_pages.h"
#include "core/saturating.h"
#include "readers/pickle_opcodes.h"
#include "readers/pickle_reader.h"
#include "readers/pickle_tree.h"

namespace oomdoc {

using pickle::ContainerKind;
using pickle::Tag;
using pickle::Tree;
using pickle::Value;

namespace {

// Keys the decoder looks at, interned first so that their ids are 0..kKeyCount-1 and a key test
// is one integer comparison. Index 0 is "" so that string id 0 means "empty" in the model too.
enum Key : uint32_t {
  kKeyEmpty, kAction, kAddr, kSize, kStream, kTimeUs, kFrames, kDeviceFree, kCompileContext,
  kUserMetadata, kFilename, kName, kLine, kKeyCount
};
constexpr std::array<std::string_view, kKeyCount> kKeyNames = {
    "", "action", "addr", "size", "stream", "time_us", "frames", "device_free",
    "compile_context", "user_metadata", "filename", "name", "line"};

enum RecordKind : uint8_t { kFrameRecord = 1, kStackRecord = 2, kTraceRecord = 3, kTraceListRecord = 4 };

TraceAction parse_action(std::string_view s) {
  if (s == "alloc") return TraceAction::kAlloc;
  if (s == "free_requested") return TraceAction::kFreeRequested;
  if (s == "free_completed") return TraceAction::kFreeCompleted;
  if (s == "segment_alloc") return TraceAction::kSegmentAlloc;
  if (s == "segment_free") return TraceAction::kSegmentFree;
  if (s == "segment_map") return TraceAction::kSegmentMap;
  if (s == "segment_unmap") return TraceAction::kSegmentUnmap;
  if (s == "snapshot") return TraceAction::kSnapshot;
  if (s == "oom") return TraceAction::kOom;
  if (s == "user_defined") return TraceAction::kUserDefined;
  if (s == "annotate") return TraceAction::kAnnotate;
  return TraceAction::kOther;
}

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// 2^50 bytes (1 PiB): far above any device, far below where 2^13 such sizes would overflow int64.
constexpr uint64_t kMaxTraceSizeBytes = 1ull << 50;

// Sizes are byte counts: a negative one means a damaged file, not 2^64 - 5 bytes. (Tree::as_uint
// keeps two's complement on purpose, for addresses, which are read as they are.)
std::optional<int64_t> negative_size(const Tree& tree, Value v) {
  auto x = v.tag() == Tag::kInt ? std::optional<int64_t>(v.inline_int()) : tree.as_int(v);
  if (x && *x < 0) return x;
  return std::nullopt;
}

// Decodes frames, stacks and trace entries as soon as each is complete, and interns them.
class SnapshotFolder : public pickle::Folder {
 public:
  explicit SnapshotFolder(Tree& tree) {
    for (auto name : kKeyNames) tree.strings().intern(name);
    action_cache_.assign(kKeyCount, TraceAction::kOther);
  }

  std::optional<Value> fold(Tree& tree, uint32_t id) override {
    const auto& c = tree.container(id);
    if (c.kind == ContainerKind::kDict) return fold_dict(tree, id);
    if (c.kind == ContainerKind::kList) {
      if (auto run = find_absorbed(id); run != absorbed_.end()) {
        trace_ranges_.push_back(run->range);
        absorbed_.erase(run);
        return Value::record(kTraceListRecord, trace_ranges_.size() - 1);
      }
      if (c.count == 0) return std::nullopt;
      if (auto trace = fold_trace_list(tree, id)) return trace;
      return fold_stack(tree, id);
    }
    return std::nullopt;
  }

  // The fast path for trace entries (Folder::take_dict). After the first few, torch's entries
  // are all alike: a dict of small ints, memo references to the key and action strings, and a
  // frame list of memo references to frames already seen. Such a dict is decoded straight from
  // the bytes, with the same checks (decode_trace) and the same memo slots as the general path;
  // anything else (a frame seen for the first time, a FRAME opcode inside the entry, a dict that
  // is not a trace entry) is declined with nothing stored, and the VM reads it as usual.
  bool take_dict(Tree& tree, pickle::DictBytes& io) override {
    if (!take_dicts_ || !EntryScanner{*this, tree, io}.entry()) return false;
    ++dicts_taken_;
    return true;
  }
  bool take_dicts_ = true;  // off: every dict goes through the VM (tests compare both paths)
  uint64_t dicts_taken_ = 0;

 private:
  class EntryScanner {
   public:
    EntryScanner(SnapshotFolder& folder, Tree& tree, pickle::DictBytes& io)
        : folder_(folder), tree_(tree), io_(io), p_(io.begin), end_(io.end),
          memo_size_(io.memo->size()) {}

    bool entry() {
      using namespace pickle::opcode;
      // The dict's own memo slot, when the pickler memoized it (pickletools.optimize and other
      // writers leave unreferenced dicts without one: the first store inside is then not its).
      const size_t before = io_.memo_store_count;
      if (!memo_opcode(kPending)) return false;
      const bool memoized = io_.memo_store_count > before;
      if (!take(MARK)) return false;
      Fields f;
      while (!take(SETITEMS)) {
        Value key, value;
        if (!scalar(key) || key.tag() != Tag::kStr) return false;
        // A frame's key: a frame dict (seen once each; the VM folds it). Declined at once rather
        // than after its strings are interned twice.
        if (key.id() == kFilename || key.id() == kName || key.id() == kLine) return false;
        bool frame_list = key.id() == kFrames && p_ != end_ && *p_ == EMPTY_LIST;
        if (!(frame_list ? frames(value) : scalar(value))) return false;
        if (key.id() < kKeyCount) {
          f.value[key.id()] = value;
          f.seen |= 1u << key.id();
        }
      }
      if (!f.has(kAction)) return false;
      auto decoded = folder_.decode_trace(tree_, f);
      if (!decoded) return false;  // the VM's path keeps it as a dict and reports the problem
      folder_.push_event(*decoded);
      io_.value = Value::record(kTraceRecord, folder_.events_.size() - 1);
      if (memoized) io_.memo_stores[before].second = io_.value;
      io_.consumed = static_cast<size_t>(p_ - io_.begin);
      io_.opcodes = opcodes_;
      return true;
    }

   private:
    // Stands in the memo for the dict or list being read until its record is known; a reference
    // to it from inside (a recursive structure) is declined.
    static constexpr Value kPending = Value::tagged(Tag::kContainer, 0);

    bool take(uint8_t op) {
      if (p_ == end_ || *p_ != op) return false;
      ++p_;
      ++opcodes_;
      return true;
    }
    size_t left() const { return static_cast<size_t>(end_ - p_); }

    // A memo opcode, if one follows, stores v (the pickler memoizes strings and containers).
    [[gnu::always_inline]] bool memo_opcode(Value v) {
      using namespace pickle::opcode;
      if (p_ == end_) return false;
      uint64_t index = 0;
      if (*p_ == MEMOIZE) {
        index = memo_size_;
        p_ += 1;
      } else if (*p_ == BINPUT && left() >= 2) {
        index = p_[1];
        p_ += 2;
      } else if (*p_ == LONG_BINPUT && left() >= 5) {
        index = load_le(p_ + 1, 4);
        p_ += 5;
      } else {
        return *p_ != BINPUT && *p_ != LONG_BINPUT;  // none follows (or it is cut off: decline)
      }
      ++opcodes_;
      // Slots past the end (a gap) are the VM's to check; the store list is short.
      if (index > memo_size_ || io_.memo_store_count == io_.memo_stores.size()) return false;
      io_.memo_stores[io_.memo_store_count++] = {index, v};
      if (index == memo_size_) ++memo_size_;
      lowest_store_ = std::min(lowest_store_, index);
      return true;
    }

    [[gnu::always_inline]] bool memo_get(uint64_t index, Value& out) const {
      for (size_t i = index >= lowest_store_ ? io_.memo_store_count : 0; i-- > 0;) {
        if (io_.memo_stores[i].first == index) {
          out = io_.memo_stores[i].second;
          return out.tag() != Tag::kContainer;
        }
      }
      if (index >= io_.memo->size()) return false;
      out = (*io_.memo)[index];
      if (out.tag() == Tag::kContainer) out = tree_.resolve(out);  // a folded one: its record
      // A container still being built (the VM pins it) or a slot a memo gap skipped: decline.
      return out.tag() != Tag::kContainer && !(out == Value::unset_memo());
    }

    [[gnu::always_inline]] bool memo_reference(Value& out) {
      using namespace pickle::opcode;
      if (p_ != end_ && *p_ == BINGET && left() >= 2) {
        uint64_t index = p_[1];
        p_ += 2;
        ++opcodes_;
        return memo_get(index, out);
      }
      if (p_ != end_ && *p_ == LONG_BINGET && left() >= 5) {
        uint64_t index = load_le(p_ + 1, 4);
        p_ += 5;
        ++opcodes_;
        return memo_get(index, out);
      }
      return false;
    }

    // One key or value: a memo reference, a small int, None/True/False or a string.
    [[gnu::always_inline]] bool scalar(Value& out) {
      using namespace pickle::opcode;
      if (p_ == end_) return false;
      const uint8_t op = *p_;
      if (op == BINGET || op == LONG_BINGET) return memo_reference(out) && memo_opcode(out);
      if (op == BININT1 && left() >= 2) {
        out = Value::small_int(p_[1]);
        p_ += 2;
      } else if (op == BININT2 && left() >= 3) {
        out = Value::small_int(static_cast<int64_t>(load_le(p_ + 1, 2)));
        p_ += 3;
      } else if (op == BININT && left() >= 5) {
        int32_t v;
        std::memcpy(&v, p_ + 1, 4);
        out = Value::small_int(v);
        p_ += 5;
      } else if (op == LONG1 && left() >= 2 && p_[1] <= 7 && left() >= 2u + p_[1]) {
        size_t n = p_[1];  // up to 7 bytes: always an inline int, as the VM makes it
        out = Value::small_int(decode_small_long(p_ + 2, n, left() - 2));
        p_ += 2 + n;
      } else if (op == NONE || op == NEWTRUE || op == NEWFALSE) {
        out = op == NONE ? Value::none() : Value::boolean(op == NEWTRUE);
        p_ += 1;
      } else if (op == SHORT_BINUNICODE && left() >= 2 && left() >= 2u + p_[1]) {
        out = tree_.make_str({reinterpret_cast<const char*>(p_ + 2), p_[1]});
        p_ += 2 + p_[1];
      } else if (op == BINUNICODE && left() >= 5 && left() - 5 >= load_le(p_ + 1, 4)) {
        size_t n = load_le(p_ + 1, 4);
        out = tree_.make_str({reinterpret_cast<const char*>(p_ + 5), n});
        p_ += 5 + n;
      } else {
        return false;
      }
      ++opcodes_;
      return memo_opcode(out);
    }

    // A frame list of memo references to frames: EMPTY_LIST, its memo opcode, then batches of
    // MARK ... APPENDS or single items with APPEND (a one-frame list).
    bool frames(Value& out) {
      using namespace pickle::opcode;
      if (!take(EMPTY_LIST)) return false;
      const size_t before = io_.memo_store_count;
      if (!memo_opcode(kPending)) return false;
      const bool memoized = io_.memo_store_count > before;
      frame_count_ = 0;
      for (;;) {
        if (take(MARK)) {
          if (!frame_run()) return false;
        } else if (p_ != end_ && ((*p_ == BINGET && left() >= 3 && p_[2] == APPEND) ||
                                  (*p_ == LONG_BINGET && left() >= 6 && p_[5] == APPEND))) {
          if (!frame_reference() || !take(APPEND)) return false;
        } else {
          break;
        }
      }
      if (frame_count_ == 0) return false;  // an empty list stays a list on the VM's path
      out = Value::record(kStackRecord, folder_.intern_stack({frames_, frame_count_}));
      if (memoized) io_.memo_stores[before].second = out;
      return true;
    }

    // Memo references to frames up to the APPENDS that closes the run.
    bool frame_run() {
      using namespace pickle::opcode;
      for (;;) {
        if (p_ == end_) return false;
        if (*p_ == APPENDS) {
          ++p_;
          ++opcodes_;
          return true;
        }
        if (!frame_reference()) return false;
      }
    }
    [[gnu::always_inline]] bool frame_reference() {
      Value v;
      if (frame_count_ == kMaxFrames || !memo_reference(v) || v.tag() != Tag::kRecord ||
          v.record_kind() != kFrameRecord) {
        return false;
      }
      frames_[frame_count_++] = static_cast<FrameId>(v.record_index());
      return true;
    }

    SnapshotFolder& folder_;
    Tree& tree_;
    pickle::DictBytes& io_;
    const uint8_t* p_;
    const uint8_t* end_;
    uint64_t memo_size_;  // the memo's size with the stores so far
    uint64_t lowest_store_ = UINT64_MAX;  // references below every store read the memo directly
    uint64_t opcodes_ = 0;
    // The entry's frame ids; deeper stacks than this are left to the VM.
    static constexpr size_t kMaxFrames = 1024;
    FrameId frames_[kMaxFrames];
    size_t frame_count_ = 0;
  };

 public:

  // A device's trace list arrives in batches of consecutive trace records (pickle's APPENDS of
  // up to 1000): keep it as the range of events_ it covers instead of one item per entry.
  bool absorb(Tree& tree, uint32_t list, const Value* v, size_t n) override {
    auto run = find_absorbed(list);
    uint64_t next = 0;
    if (run != absorbed_.end()) {
      next = run->range.second;
    } else if (tree.container(list).count == 0 && v[0].tag() == Tag::kRecord &&
               v[0].record_kind() == kTraceRecord) {
      next = v[0].record_index();
    } else {
      return false;
    }
    for (size_t i = 0; i < n; ++i) {
      if (v[i].tag() != Tag::kRecord || v[i].record_kind() != kTraceRecord ||
          v[i].record_index() != next + i) {
        if (run != absorbed_.end()) give_back(tree, list, run);
        return false;
      }
    }
    if (run == absorbed_.end()) {
      absorbed_.push_back({list, {next, next + n}});
    } else {
      run->range.second = next + n;
    }
    return true;
  }

  // A device's trace list whose entries were decoded in order (as pickle writes them) is just a
  // range of events_: recorded as such, so the entries are never copied.
  std::optional<Value> fold_trace_list(Tree& tree, uint32_t id) {
    uint64_t count = tree.container(id).count;
    std::optional<uint64_t> first;
    uint64_t expected = 0;
    bool in_order = true;
    tree.for_each_chunk(id, [&](const Value* v, size_t n) {
      for (size_t i = 0; i < n && in_order; ++i) {
        if (v[i].tag() != Tag::kRecord || v[i].record_kind() != kTraceRecord) {
          in_order = false;
        } else if (!first) {
          first = expected = v[i].record_index();
        }
        in_order = in_order && v[i].record_index() == expected++;
      }
    });
    if (!in_order || !first || *first + count > events_.size()) return std::nullopt;
    trace_ranges_.emplace_back(*first, *first + count);
    return Value::record(kTraceListRecord, trace_ranges_.size() - 1);
  }

  // A frame list (or None / an empty list) as a stack id; nullopt when it is something else.
  std::optional<StackId> stack_of(const Tree& tree, Value v) {
    if (v.tag() == Tag::kRecord && v.record_kind() == kStackRecord) {
      return static_cast<StackId>(v.record_index());
    }
    if (v.is_none()) return kNoStack;
    if (v.tag() == Tag::kContainer && tree.container(v.id()).count == 0) return kNoStack;
    return std::nullopt;
  }

  // The known keys of a dict in one pass (the last assignment wins, as in Python).
  struct Fields {
    std::array<Value, kKeyCount> value;
    uint32_t seen = 0;
    bool has(Key key) const { return (seen >> key) & 1; }
  };
  static Fields fields_of(const Tree& tree, uint32_t id) {
    Fields f;
    tree.for_each_pair(id, [&](Value k, Value v) {
      if (k.tag() == Tag::kStr && k.id() < kKeyCount) {
        f.value[k.id()] = v;
        f.seen |= 1u << k.id();
      }
    });
    return f;
  }

  // Decodes a trace entry dict (also used by the converter to explain what is wrong).
  // The entry and its rarely set fields (extra.event is left for the caller to fill).
  struct DecodedTrace {
    TraceEvent event;
    TraceEventExtra extra;
  };
  Result<DecodedTrace> decode_trace(const Tree& tree, uint32_t id) { return decode_trace(tree, fields_of(tree, id)); }
  Result<DecodedTrace> decode_trace(const Tree& tree, const Fields& f) {
    DecodedTrace decoded;
    TraceEvent& e = decoded.event;
    TraceEventExtra& extra = decoded.extra;
    if (!f.has(kAction) || f.value[kAction].tag() != Tag::kStr) {
      return Error{"'action' is missing or not a string"};
    }
    e.action = action_of(tree, f.value[kAction]);
    auto read_uint = [&](Key key, uint64_t& out) -> bool {
      if (!f.has(key)) return true;
      Value v = f.value[key];
      if (v.tag() == Tag::kInt) {  // the common case, without a call
        out = static_cast<uint64_t>(v.inline_int());
        return true;
      }
      auto x = tree.as_uint(v);
      if (!x) return false;
      out = *x;
      return true;
    };
    auto read_int = [&](Key key, int64_t& out) -> bool {
      if (!f.has(key)) return true;
      Value v = f.value[key];
      if (v.tag() == Tag::kInt) {
        out = v.inline_int();
        return true;
      }
      auto x = tree.as_int(v);
      if (!x) return false;
      out = *x;
      return true;
    };
    if (!read_uint(kSize, e.size)) return Error{"'size' is not an integer"};
    if (f.has(kSize)) {
      if (auto negative = negative_size(tree, f.value[kSize])) {
        return Error{fmt::format("'size' is negative ({})", *negative)};
      }
    }
    // The replay sums sizes in signed 64-bit counters: a size no device has is a damaged file, and
    // refusing it keeps those sums from overflowing.
    if (e.size > kMaxTraceSizeBytes) {
      // (A pickled integer past 64 bits is read saturated: said as such, not as 2^64 - 1.)
      const bool beyond_64_bits = f.has(kSize) && f.value[kSize].tag() == Tag::kBigInt && e.size == UINT64_MAX;
      return Error{beyond_64_bits ? std::string("'size' does not fit in 64 bits, more than any device holds")
                                  : fmt::format("'size' is {} bytes, more than any device holds", e.size)};
    }
    // A block or segment event without its address would be replayed at address 0, and an OOM
    // without device_free would read as a full device: torch writes both, so a file without them
    // is damaged (or not torch's), and said so rather than replayed wrong.
    const bool block_event = e.action == TraceAction::kAlloc || e.action == TraceAction::kFreeRequested ||
                             e.action == TraceAction::kFreeCompleted || e.action == TraceAction::kSegmentAlloc ||
                             e.action == TraceAction::kSegmentFree || e.action == TraceAction::kSegmentMap ||
                             e.action == TraceAction::kSegmentUnmap;
    if (block_event && !f.has(kAddr)) return Error{"'addr' is missing"};
    if (block_event && !f.has(kSize)) return Error{"'size' is missing"};
    if (e.action == TraceAction::kOom && !f.has(kDeviceFree)) return Error{"'device_free' is missing from an oom entry"};
    if (!read_uint(e.action == TraceAction::kOom ? kDeviceFree : kAddr, e.addr)) {
      return Error{"'addr' / 'device_free' is not an integer"};
    }
    if (!read_int(kStream, extra.stream)) return Error{"'stream' is not an integer"};
    if (f.has(kTimeUs)) {
      if (!read_int(kTimeUs, e.time_us)) return Error{"'time_us' is not an integer"};
      e.has_time = true;
    }
    if (f.has(kFrames)) {
      auto s = stack_of(tree, f.value[kFrames]);
      if (!s) return Error{"'frames' is not a list of frames"};
      e.stack = *s;
    }
    if (f.has(kCompileContext) && f.value[kCompileContext].tag() == Tag::kStr) {
      extra.compile_context = f.value[kCompileContext].id();
    }
    if (f.has(kUserMetadata) && f.value[kUserMetadata].tag() == Tag::kStr) {
      extra.user_metadata = f.value[kUserMetadata].id();
    }
    return decoded;
  }

  // A frame list (innermost first) as a stack id: equal lists get the same id.
  StackId intern_stack(std::span<const FrameId> frames) {
    if (frames.empty()) return kNoStack;
    uint64_t h = frames.size();
    for (FrameId f : frames) h = mix(h, f);
    // Most lookups find a stack seen moments ago: try the direct-mapped cache before the map.
    StackId& recent = recent_stacks_[h % recent_stacks_.size()];
    if (recent != kNoStack && same_stack(recent, frames)) return recent;
    auto [it, inserted] = stack_heads_.try_emplace(h, kNoStack);
    for (StackId s = it->second; s != kNoStack; s = stack_next_[s]) {
      if (same_stack(s, frames)) return recent = s;
    }
    auto id = static_cast<StackId>(stack_offsets_.size() - 1);
    stack_frames_.insert(stack_frames_.end(), frames.begin(), frames.end());
    stack_offsets_.push_back(static_cast<uint32_t>(stack_frames_.size()));
    stack_next_.push_back(it->second);
    it->second = id;
    return recent = id;
  }
  bool same_stack(StackId s, std::span<const FrameId> frames) const {
    uint32_t begin = stack_offsets_[s], end = stack_offsets_[s + 1];
    return end - begin == frames.size() &&
           std::equal(frames.begin(), frames.end(), stack_frames_.begin() + begin);
  }

  FrameId intern_frame(const SnapshotFrame& f) {
    uint64_t key = mix(mix(f.filename, f.name), f.line);
    auto [it, inserted] = frame_heads_.try_emplace(key, kNoFrame);
    for (FrameId id = it->second; id != kNoFrame; id = frame_next_[id]) {
      const SnapshotFrame& g = frames_[id];
      if (g.filename == f.filename && g.name == f.name && g.line == f.line) return id;
    }
    auto id = static_cast<FrameId>(frames_.size());
    frames_.push_back(f);
    frame_next_.push_back(it->second);
    it->second = id;
    return id;
  }

  // A frame's line number; 0 (unknown) for one that is not a positive integer, such as the -1 a
  // hostile or odd file may give (read as unsigned it would print as 18446744073709551615).
  static uint64_t frame_line(const Tree& tree, Value v) {
    const auto line = tree.as_int(v);
    if (!line || *line <= 0) return 0;
    return tree.as_uint(v).value_or(0);   // above INT64_MAX too: 2^64-1 (unsigned -1 from symbolization)
  }

  SnapshotFrame decode_frame(const Tree& tree, uint32_t id) const {
    SnapshotFrame f;
    tree.for_each_pair(id, [&](Value k, Value v) {
      if (k.tag() != Tag::kStr) return;
      if (k.id() == kFilename && v.tag() == Tag::kStr) f.filename = v.id();
      if (k.id() == kName && v.tag() == Tag::kStr) f.name = v.id();
      if (k.id() == kLine) f.line = frame_line(tree, v);
    });
    return f;
  }

  void push_event(const DecodedTrace& decoded) {
    if (!decoded.extra.empty()) {
      extras_.push_back(decoded.extra);
      extras_.back().event = events_.size();
    }
    events_.push_back(decoded.event);
    if (events_.size() % kEventsPerReport == 0) warmer_.advance(events_.data(), events_.size() * sizeof(TraceEvent));
  }
  // A copy of events_[index] at the end (a trace list that could not be taken as a range).
  void push_copy(size_t index) {
    DecodedTrace decoded{events_[index], {}};
    auto it = std::lower_bound(extras_.begin(), extras_.end(), index,
                               [](const TraceEventExtra& x, size_t i) { return x.event < i; });
    if (it != extras_.end() && it->event == index) decoded.extra = *it;
    push_event(decoded);
  }

  std::vector<TraceEvent> events_;
  static constexpr size_t kEventsPerReport = PageWarmer::kReportEvery / sizeof(TraceEvent);
  PageWarmer warmer_;  // faults in events_'s reserved pages beside the reader (core/huge_pages.h)
  std::vector<TraceEventExtra> extras_;  // sorted by event
  // Lists being built whose items so far are consecutive trace records: [first, end) of events_.
  // A handful at most (one per device being read), so a vector.
  struct AbsorbedList {
    uint32_t list;
    std::pair<size_t, size_t> range;
  };
  std::vector<AbsorbedList> absorbed_;
  std::vector<AbsorbedList>::iterator find_absorbed(uint32_t list) {
    return std::find_if(absorbed_.begin(), absorbed_.end(),
                        [&](const AbsorbedList& a) { return a.list == list; });
  }
  std::vector<std::pair<size_t, size_t>> trace_ranges_;  // taken by fold_trace_list
  std::vector<SnapshotFrame> frames_;
  std::vector<uint32_t> stack_offsets_{0, 0};  // stack 0 = the empty stack
  std::vector<FrameId> stack_frames_;

 private:
  static constexpr FrameId kNoFrame = 0xffffffffu;

  TraceAction action_of(const Tree& tree, Value v) {
    uint32_t id = v.id();
    if (id >= action_cache_.size()) action_cache_.resize(id + 1, TraceAction::kOther);
    if (id >= action_known_.size()) action_known_.resize(id + 1, false);
    if (!action_known_[id]) {
      action_cache_[id] = parse_action(tree.str(v));
      action_known_[id] = true;
    }
    return action_cache_[id];
  }

  // A trace entry is complete at its SETITEMS: decoded then, in file order like the fast path's.
  bool complete_when_filled(Tree& tree, uint32_t id) override {
    return fields_of(tree, id).has(kAction);
  }

  std::optional<Value> fold_dict(Tree& tree, uint32_t id) {
    Fields f = fields_of(tree, id);
    if (f.has(kAction)) {
      auto event = decode_trace(tree, f);
      if (!event) return std::nullopt;  // left as a dict; the converter reports the problem
      push_event(*event);
      return Value::record(kTraceRecord, events_.size() - 1);
    }
    if (f.has(kFilename)) {
      SnapshotFrame frame;
      if (f.value[kFilename].tag() == Tag::kStr) frame.filename = f.value[kFilename].id();
      if (f.has(kName) && f.value[kName].tag() == Tag::kStr) frame.name = f.value[kName].id();
      if (f.has(kLine)) frame.line = frame_line(tree, f.value[kLine]);
      return Value::record(kFrameRecord, intern_frame(frame));
    }
    return std::nullopt;
  }

  // The list turned out to hold something else: its absorbed records go to the item pool after all.
  void give_back(Tree& tree, uint32_t list, std::vector<AbsorbedList>::iterator run) {
    auto [i, end] = run->range;
    std::vector<Value> batch;
    while (i < end) {
      batch.clear();
      while (i < end && batch.size() < 4096) batch.push_back(Value::record(kTraceRecord, i++));
      tree.store(list, batch.data(), batch.size());
    }
    absorbed_.erase(run);
  }

  std::optional<Value> fold_stack(Tree& tree, uint32_t id) {
    scratch_.clear();
    bool all_frames = true;
    tree.for_each_item(id, [&](Value v) {
      if (v.tag() == Tag::kRecord && v.record_kind() == kFrameRecord) {
        scratch_.push_back(static_cast<FrameId>(v.record_index()));
      } else {
        all_frames = false;
      }
    });
    if (!all_frames) return std::nullopt;
    return Value::record(kStackRecord, intern_stack(scratch_));
  }

  std::vector<TraceAction> action_cache_;
  std::vector<bool> action_known_;
  std::vector<FrameId> scratch_;
  std::unordered_map<uint64_t, FrameId> frame_heads_;
  std::vector<FrameId> frame_next_;
  std::unordered_map<uint64_t, StackId> stack_heads_;
  std::array<StackId, 4096> recent_stacks_{};  // by hash; kNoStack (0) when empty
  std::vector<StackId> stack_next_{kNoStack};  // indexed by stack id
};

// A memo reference is the same container again, so one list can be referenced from thousands of
// places ("billion laughs"): a 757 KB file whose 20000-block list is named by every segment would
// otherwise become 100 million blocks (54 s, 4 GB). The converter counts what it materialises or
// walks per reference (segments, blocks, trace entries, frames, and the fields of segment and
// block dicts). Without sharing each of those costs at least 3 bytes of pickle, and a real
// snapshot's segment, block or trace entry with its fields 40 to 570 bytes (the corpus), so one
// object per byte of input leaves a wide margin; the floor keeps small hand-made files readable.
constexpr uint64_t kMinExpansionBudget = 1ull << 20;
uint64_t expansion_budget(uint64_t input_bytes) {
  return std::max(kMinExpansionBudget, input_bytes);
}

// Walks the (small) rest of the tree: segments, blocks, settings, annotations.
class Converter {
 public:
  Converter(const Tree& tree, SnapshotFolder& folder, Snapshot& out, uint64_t input_bytes)
      : tree_(tree), folder_(folder), out_(out), budget_(expansion_budget(input_bytes)) {}

  Status convert(Value root) {
    Status status = convert_root(root);
    if (over_budget_) return *over_budget_;  // also when met where no status is returned
    return status;
  }

 private:
  Status convert_root(Value root) {
    if (tree_.is_container(root, ContainerKind::kList)) {
      out_.layout = SnapshotLayout::kSegmentList;
      return read_segments(root.id());
    }
    if (!tree_.is_container(root, ContainerKind::kDict)) {
      return Error{"the top level is neither a dict nor a list of segments"};
    }
    out_.layout = SnapshotLayout::kDeviceTraces;
    bool has_segments = false, has_traces = false;
    Status status = Ok{};
    tree_.for_each_pair(root.id(), [&](Value k, Value v) {
      if (!status || k.tag() != Tag::kStr) return;
      std::string_view key = tree_.str(k);
      if (key == "segments") {
        has_segments = true;
        if (!tree_.is_container(v, ContainerKind::kList)) {
          status = Error{"'segments' is not a list"};
          return;
        }
        status = read_segments(v.id());
      } else if (key == "device_traces") {
        has_traces = true;
        status = read_traces(v);
      } else if (key == "allocator_settings") {
        if (tree_.is_container(v, ContainerKind::kDict)) read_settings(v.id());
      } else if (key == "external_annotations") {
        if (tree_.is_container(v, ContainerKind::kList)) read_annotations(v.id());
      }
    });
    if (!status) return status;
    if (!has_segments && !has_traces) {
      return Error{"neither 'segments' nor 'device_traces' found: not a memory snapshot"};
    }
    if (!has_traces) out_.layout = SnapshotLayout::kSegmentsDict;
    if (saw_history_) out_.layout = SnapshotLayout::kHistory;
    return Ok{};
  }

  std::optional<uint64_t> uint_field(uint32_t dict, std::string_view key) const {
    auto v = tree_.get(dict, key);
    if (!v) return std::nullopt;
    return tree_.as_uint(*v);
  }

  // Counts n objects about to be materialised; false (and the error set) past the budget.
  bool charge(uint64_t n) {
    expanded_ += n;
    if (expanded_ <= budget_) return true;
    if (!over_budget_) {
      over_budget_ = Error{fmt::format("the segments, blocks and trace entries expand to more than {} "
                                       "objects through shared references (a hostile or corrupt "
                                       "snapshot)",
                                       budget_)};
    }
    return false;
  }

  Status read_segments(uint32_t list) {
    if (!charge(tree_.container(list).count)) return *over_budget_;
    Status status = Ok{};
    size_t index = 0;
    // The figures are sums of segment and block sizes in 64 bits: a device whose segments or
    // blocks add up to more than any device holds is a damaged file (as a trace size is), and
    // refusing it keeps the sums from wrapping to a small number.
    std::map<int, uint64_t> reserved, in_blocks;
    tree_.for_each_item(list, [&](Value v) {
      if (!status) return;
      if (!tree_.is_container(v, ContainerKind::kDict)) {
        status = Error{fmt::format("segments[{}] is not a dict", index)};
      } else {
        auto seg = read_segment(v.id(), index);
        if (!seg) {
          status = seg.error();
        } else {
          uint64_t& total = reserved[seg->device];
          uint64_t& blocks = in_blocks[seg->device];
          total = saturating_add(total, seg->total_size);
          for (const SnapshotBlock& b : seg->blocks) blocks = saturating_add(blocks, b.size);
          if (total > kMaxTraceSizeBytes || blocks > kMaxTraceSizeBytes) {
            status = Error{fmt::format("segments[{}]: the {} of cuda:{} add up to more than any device holds", index,
                                       total > kMaxTraceSizeBytes ? "segments" : "blocks", seg->device)};
            return;
          }
          out_.segments.push_back(std::move(*seg));
        }
      }
      ++index;
    });
    return status;
  }

  Result<SnapshotSegment> read_segment(uint32_t dict, size_t index) {
    if (!charge(tree_.container(dict).count / 2)) return *over_budget_;  // its fields, for a dict named often
    SnapshotSegment s;
    std::optional<Value> blocks;
    bool has_total = false;
    std::string bad;
    std::string negative_field;  // the first size field below zero (or device out of range), as the error names it
    tree_.for_each_pair(dict, [&](Value k, Value v) {
      if (k.tag() != Tag::kStr) return;
      std::string_view key = tree_.str(k);
      auto as_u = [&](uint64_t& out) {
        auto x = tree_.as_uint(v);
        if (x) {
          out = *x;
        } else {
          bad = key;
        }
      };
      auto as_size = [&](uint64_t& out) {
        if (auto negative = negative_size(tree_, v); negative && negative_field.empty()) {
          negative_field = fmt::format("segments[{}].{} is negative ({})", index, key, *negative);
        }
        as_u(out);
      };
      if (key == "device") {
        // A CUDA ordinal is 0 or more: a negative one ("cuda:-1") or one past int is a damaged file,
        // not a device to report (--device refuses them too).
        const std::optional<int64_t> device = tree_.as_int(v);
        if (!device) {
          // (None or a string: which card the segment was on is unknown, not cuda:0.)
          if (negative_field.empty()) negative_field = fmt::format("segments[{}].device is not an integer", index);
        } else if (*device < 0 || *device > std::numeric_limits<int>::max()) {
          if (negative_field.empty()) {
            negative_field = fmt::format("segments[{}].device is {}: not a CUDA device ordinal", index, *device);
          }
        } else {
          s.device = static_cast<int>(*device);
        }
      } else if (key == "address") {
        as_u(s.address);
      } else if (key == "total_size") {
        as_size(s.total_size);
        has_total = true;
      } else if (key == "allocated_size") {
        as_size(s.allocated_size);
      } else if (key == "active_size") {
        as_size(s.active_size);
      } else if (key == "requested_size") {
        uint64_t r = 0;
        as_size(r);
        s.requested_size = r;
      } else if (key == "stream") {
        s.stream = tree_.as_int(v).value_or(0);
      } else if (key == "segment_type") {
        s.is_large = !(v.tag() == Tag::kStr && tree_.str(v) == "small");
      } else if (key == "segment_pool_id") {
        if (v.tag() == Tag::kContainer) {
          s.pool_id.first = tree_.as_int(tree_.at(v.id(), 0).value_or(Value::none())).value_or(0);
          s.pool_id.second = tree_.as_int(tree_.at(v.id(), 1).value_or(Value::none())).value_or(0);
        }
      } else if (key == "is_expandable") {
        s.is_expandable = v.is_bool() && v.bool_value();
      } else if (key == "frames") {
        s.stack = stack_or_empty(v);
      } else if (key == "blocks") {
        blocks = v;
      }
    });
    if (!bad.empty()) return Error{fmt::format("segments[{}]: '{}' is not an integer", index, bad)};
    if (!negative_field.empty()) return Error{negative_field};
    if (!has_total) return Error{fmt::format("segments[{}]: 'total_size' is missing", index)};
    if (blocks) {
      if (!tree_.is_container(*blocks, ContainerKind::kList)) {
        return Error{fmt::format("segments[{}]: 'blocks' is not a list", index)};
      }
      if (!charge(tree_.container(blocks->id()).count)) return *over_budget_;
      uint64_t running = s.address;  // older files: blocks are contiguous from the segment base
      size_t block_index = 0;
      tree_.for_each_item(blocks->id(), [&](Value b) {
        if (!bad.empty()) return;
        if (!tree_.is_container(b, ContainerKind::kDict)) {
          bad = fmt::format("segments[{}].blocks[{}] is not a dict", index, block_index);
          return;
        }
        SnapshotBlock block = read_block(b.id(), running, bad);
        if (!bad.empty()) {
          // read_block names a negative size as ".size is ..." to be appended to the place.
          bad = fmt::format("segments[{}].blocks[{}]{}{}", index, block_index, bad[0] == '.' ? "" : ": ", bad);
          return;
        }
        running = block.address + block.size;
        s.blocks.push_back(block);
        ++block_index;
      });
      if (!bad.empty()) return Error{bad};
    }
    return s;
  }

  SnapshotBlock read_block(uint32_t dict, uint64_t running, std::string& bad) {
    SnapshotBlock b;
    if (!charge(tree_.container(dict).count / 2)) return b;  // its fields; convert() reports it
    b.address = running;
    std::optional<Value> history;
    tree_.for_each_pair(dict, [&](Value k, Value v) {
      if (k.tag() != Tag::kStr) return;
      std::string_view key = tree_.str(k);
      if (key == "size" || key == "requested_size" || key == "address") {
        auto x = tree_.as_uint(v);
        if (!x) {
          bad = fmt::format("'{}' is not an integer", key);
          return;
        }
        if (key != "address") {
          if (auto negative = negative_size(tree_, v)) {
            bad = fmt::format(".{} is negative ({})", key, *negative);
            return;
          }
        }
        if (key == "size") b.size = *x;
        if (key == "requested_size") b.requested_size = *x;
        if (key == "address") b.address = *x;
      } else if (key == "state" && v.tag() == Tag::kStr) {
        std::string_view st = tree_.str(v);
        b.state = st == "active_allocated" ? BlockState::kActiveAllocated
                  : (st == "active_pending_free" || st == "active_awaiting_free")
                      ? BlockState::kActivePendingFree
                  : st == "inactive" ? BlockState::kInactive
                                     : BlockState::kUnknown;
      } else if (key == "frames") {
        b.stack = stack_or_empty(v);
      } else if (key == "history") {
        history = v;
      }
    });
    if (history && tree_.is_container(*history, ContainerKind::kList)) {
      // 2.0 and earlier: the first history entry is the allocation (frames, real_size).
      saw_history_ = true;
      if (auto first = tree_.at(history->id(), 0);
          first && tree_.is_container(*first, ContainerKind::kDict)) {
        if (b.stack == kNoStack) {
          if (auto frames = tree_.get(first->id(), "frames")) b.stack = stack_or_empty(*frames);
        }
        if (!b.requested_size) {
          if (auto real = tree_.get(first->id(), "real_size")) {
            if (auto r = tree_.as_uint(*real)) b.requested_size = *r;
          }
        }
      }
    }
    return b;
  }

  StackId stack_or_empty(Value v) {
    if (auto s = folder_.stack_of(tree_, v)) return *s;
    // A list the folder left alone (frames without 'filename'): intern what it has.
    if (!tree_.is_container(v, ContainerKind::kList)) return kNoStack;
    if (!charge(tree_.container(v.id()).count)) return kNoStack;  // convert() reports it
    std::vector<FrameId> frames;
    tree_.for_each_item(v.id(), [&](Value f) {
      if (f.tag() == Tag::kRecord && f.record_kind() == kFrameRecord) {
        frames.push_back(static_cast<FrameId>(f.record_index()));
      } else if (tree_.is_container(f, ContainerKind::kDict)) {
        frames.push_back(folder_.intern_frame(folder_.decode_frame(tree_, f.id())));
      }
    });
    return folder_.intern_stack(frames);
  }

  Status read_traces(Value v) {
    if (!tree_.is_container(v, ContainerKind::kList)) return Error{"'device_traces' is not a list"};
    if (!charge(tree_.container(v.id()).count)) return *over_budget_;
    Status status = Ok{};
    size_t device = 0;
    tree_.for_each_item(v.id(), [&](Value trace) {
      if (!status) return;
      if (trace.tag() == Tag::kRecord && trace.record_kind() == kTraceListRecord) {
        const auto range = folder_.trace_ranges_[trace.record_index()];
        if (!charge(range.second - range.first)) {  // a list named twice is walked twice
          status = *over_budget_;
          return;
        }
        out_.trace_ranges.push_back(range);
        ++device;
        return;
      }
      // Entries that were not folded as one run: decoded again, appended after the others.
      auto& events = folder_.events_;
      size_t begin = events.size();
      if (!tree_.is_container(trace, ContainerKind::kList)) {
        status = Error{fmt::format("device_traces[{}] is not a list", device)};
        return;
      }
      if (!charge(tree_.container(trace.id()).count)) {
        status = *over_budget_;
        return;
      }
      events.reserve(events.size() + tree_.container(trace.id()).count);
      size_t i = 0;
      tree_.for_each_item(trace.id(), [&](Value e) {
        if (!status) return;
        if (e.tag() == Tag::kRecord && e.record_kind() == kTraceRecord) {
          folder_.push_copy(e.record_index());
        } else if (tree_.is_container(e, ContainerKind::kDict)) {
          auto event = folder_.decode_trace(tree_, e.id());
          if (!event) {
            status = Error{fmt::format("device_traces[{}][{}]: {}", device, i, event.error().message)};
            return;
          }
          folder_.push_event(*event);
        } else {
          status = Error{fmt::format("device_traces[{}][{}] is not a dict", device, i)};
        }
        ++i;
      });
      out_.trace_ranges.emplace_back(begin, events.size());
      ++device;
    });
    return status;
  }

  std::string text_of(Value v) {
    switch (v.tag()) {
      case Tag::kStr: return std::string(tree_.str(v));
      case Tag::kInt:
      case Tag::kBigInt: {
        if (v.tag() == Tag::kBigInt && tree_.big(v).non_negative) {
          return std::to_string(tree_.big(v).bits);
        }
        return std::to_string(*tree_.as_int(v));
      }
      case Tag::kFloat: return fmt::format("{}", tree_.float_value(v));
      case Tag::kSpecial: return v.is_none() ? "None" : (v.bool_value() ? "True" : "False");
      case Tag::kContainer: {
        // Small dicts of scalars (roundup_power2_divisions): "{'1': 0, ...}".
        std::string out;
        const auto& c = tree_.container(v.id());
        if (!charge(c.count)) return "...";  // convert() reports it
        bool dict = c.kind == ContainerKind::kDict;
        if (dict) {
          tree_.for_each_pair(v.id(), [&](Value k, Value x) {
            if (!out.empty()) out += ", ";
            out += text_of_scalar(k) + ": " + text_of_scalar(x);
          });
          return "{" + out + "}";
        }
        tree_.for_each_item(v.id(), [&](Value x) {
          if (!out.empty()) out += ", ";
          out += text_of_scalar(x);
        });
        return "[" + out + "]";
      }
      default: return "?";
    }
  }
  std::string text_of_scalar(Value v) {
    if (v.tag() == Tag::kContainer || v.tag() == Tag::kRecord) return "...";
    if (v.tag() == Tag::kStr) return fmt::format("'{}'", tree_.str(v));
    return text_of(v);
  }

  void read_settings(uint32_t dict) {
    if (!charge(tree_.container(dict).count)) return;  // convert() reports it
    AllocatorSettings s;
    tree_.for_each_pair(dict, [&](Value k, Value v) {
      if (k.tag() != Tag::kStr) return;
      std::string key(tree_.str(k));
      s.entries.emplace_back(key, text_of(v));
      if (key == "PYTORCH_CUDA_ALLOC_CONF" && v.tag() == Tag::kStr) s.alloc_conf = tree_.str(v);
      if (key == "max_split_size") s.max_split_size = tree_.as_int(v);
      if (key == "garbage_collection_threshold") s.garbage_collection_threshold = tree_.as_double(v);
      if (key == "expandable_segments" && v.is_bool()) s.expandable_segments = v.bool_value();
      if (key == "trace_alloc_overflowed" && v.is_bool()) s.trace_alloc_overflowed = v.bool_value();
      if (key == "trace_alloc_max_entries") s.trace_alloc_max_entries = tree_.as_uint(v);
    });
    out_.allocator_settings = std::move(s);
  }

  void read_annotations(uint32_t list) {
    if (!charge(tree_.container(list).count)) return;  // convert() reports it
    tree_.for_each_item(list, [&](Value a) {
      if (!tree_.is_container(a, ContainerKind::kDict)) return;
      SnapshotAnnotation ann;
      tree_.for_each_pair(a.id(), [&](Value k, Value v) {
        if (k.tag() != Tag::kStr) return;
        std::string_view key = tree_.str(k);
        if (key == "name" && v.tag() == Tag::kStr) ann.name = v.id();
        if (key == "stage" && v.tag() == Tag::kStr) ann.stage = v.id();
        if (key == "device") ann.device = static_cast<int>(tree_.as_int(v).value_or(0));
        if (key == "time_us") ann.time_us = tree_.as_int(v);
      });
      out_.annotations.push_back(ann);
    });
  }

  const Tree& tree_;
  SnapshotFolder& folder_;
  Snapshot& out_;
  bool saw_history_ = false;
  const uint64_t budget_;
  uint64_t expanded_ = 0;
  std::optional<Error> over_budget_;
};

// JSON of the same shape, fed into the same tree (and folder) as a pickle would be.
class JsonTreeBuilder : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit JsonTreeBuilder(Tree& tree) : tree_(tree) {}
  bool null() override { return push(Value::none()); }
  bool boolean(bool b) override { return push(Value::boolean(b)); }
  bool number_integer(number_integer_t v) override { return push(tree_.make_int(v)); }
  bool number_unsigned(number_unsigned_t v) override { return push(tree_.make_uint(v)); }
  bool number_float(number_float_t v, const string_t&) override { return push(tree_.make_float(v)); }
  bool string(string_t& s) override { return push(tree_.make_str(s)); }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override { return open(ContainerKind::kDict); }
  bool key(string_t& s) override { return push(tree_.make_str(s)); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(ContainerKind::kList); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    // nlohmann's text without its "[json.exception.parse_error.101] parse error at line 1, column
    // N: " preamble: the offset says where, the rest what ("unexpected end of input").
    std::string_view what = e.what();
    if (const size_t at = what.find("column "); at != std::string_view::npos && what.find(": ", at) != std::string_view::npos) {
      what.remove_prefix(what.find(": ", at) + 2);
    } else if (what.starts_with("[json.exception.") && what.find("] ") != std::string_view::npos) {
      what.remove_prefix(what.find("] ") + 2);   // "[json.exception.out_of_range.406] number overflow ..."
    }
    error_ = fmt::format("offset {}: invalid JSON: {}", position, what);
    return false;
  }
  const std::string& error() const { return error_; }
  Value root() const { return stack_.empty() ? Value::none() : stack_.back(); }

 private:
  static constexpr size_t kMaxDepth = 10000;
  bool push(Value v) {
    stack_.push_back(v);
    return true;
  }
  bool open(ContainerKind kind) {
    if (open_.size() >= kMaxDepth) {
      error_ = fmt::format("nesting deeper than {} levels", kMaxDepth);
      return false;
    }
    open_.push_back({tree_.new_container(kind), stack_.size()});
    return true;
  }
  // An object's keys and values alternate on the stack (the parser guarantees the pairing).
  bool close() {
    auto [id, first] = open_.back();
    open_.pop_back();
    for (size_t i = first; i < stack_.size(); ++i) stack_[i] = tree_.seal(stack_[i]);
    if (!tree_.append(id, stack_.data() + first, stack_.size() - first)) {
      error_ = "too many values";
      return false;
    }
    stack_.resize(first);
    stack_.push_back(Value::tagged(Tag::kContainer, id));
    return true;
  }
  Tree& tree_;
  std::vector<Value> stack_;
  std::vector<std::pair<uint32_t, size_t>> open_;
  std::string error_;
};

// The replay sums each device's trace in signed 64-bit counters (analyses/snapshot_timeline.cpp):
// each size is at most 1 PiB, and so must the running sums of allocations and of segments be, or
// 2^13 entries wrap them (live bytes gone negative, a peak stuck at 8 EiB). Frees of memory held
// before recording count too: a baseline beyond any device is as damaged.
Status check_trace_sums(const Snapshot& snapshot) {
  const auto limit = static_cast<int64_t>(kMaxTraceSizeBytes);
  for (size_t d = 0; d < snapshot.trace_ranges.size(); ++d) {
    const auto [begin, end] = snapshot.trace_ranges[d];
    int64_t live = 0, reserved = 0;
    for (size_t i = begin; i < end; ++i) {
      const TraceEvent& e = snapshot.trace_events[i];   // each size at most 1 PiB (decode_trace)
      live += live_delta(e);
      reserved += reserved_delta(e);
      if (live > limit || live < -limit || reserved > limit || reserved < -limit) {
        const bool segments = reserved > limit || reserved < -limit;
        return Error{fmt::format("device_traces[{}][{}]: the trace's {} on cuda:{} add up to more than any device holds",
                                 d, i - begin, segments ? "segments" : "allocations", d)};
      }
    }
  }
  return Ok{};
}

Result<Snapshot> finish(Tree& tree, SnapshotFolder& folder, std::string format, uint64_t input_bytes) {
  Snapshot snapshot;
  snapshot.source_format = std::move(format);
  Converter converter(tree, folder, snapshot, input_bytes);
  if (auto ok = converter.convert(tree.root()); !ok) return ok.error();
  snapshot.trace_events = std::move(folder.events_);
  if (auto sums = check_trace_sums(snapshot); !sums) return sums.error();
  snapshot.trace_extras = std::move(folder.extras_);
  snapshot.frames = std::move(folder.frames_);
  snapshot.stack_offsets = std::move(folder.stack_offsets_);
  snapshot.stack_frames = std::move(folder.stack_frames_);
  const auto& strings = tree.strings();
  snapshot.strings.clear();
  snapshot.strings.reserve(strings.size());
  for (size_t i = 0; i < strings.size(); ++i) snapshot.strings.emplace_back(strings.get(uint32_t(i)));
  return snapshot;
}

bool looks_like_json(std::string_view head) {
  // (PowerShell and Windows editors start UTF-8 text with a byte order mark; JSON parsers skip it.)
  if (head.starts_with("\xef\xbb\xbf")) head.remove_prefix(3);
  for (char c : head) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    return c == '{' || c == '[';
  }
  return false;
}

Result<Snapshot> read_json(std::string_view text, std::string_view name) {
  Tree tree;
  SnapshotFolder folder(tree);
  tree.set_folder(&folder);
  JsonTreeBuilder builder(tree);
  bool ok = nlohmann::json::sax_parse(text, &builder, nlohmann::json::input_format_t::json, true);
  if (!ok) {
    return Error{fmt::format("{}: {}", name, builder.error().empty() ? "invalid JSON" : builder.error())};
  }
  tree.set_root(tree.seal(builder.root()));
  auto result = finish(tree, folder, "json", text.size());
  if (!result) return Error{fmt::format("{}: {}", name, result.error().message)};
  return result;
}

// The pickle path shared by files and bytes: run(tree, options, info) streams the pickle in and
// returns its error already naming the input.
// size_hint (0 when unknown) sizes the address space reserved for trace entries.
template <typename Run>
Result<Snapshot> read_pickle_snapshot(std::string_view name, const SnapshotReadOptions& options,
                                      uint64_t size_hint, Run&& run) {
  Tree tree;
  SnapshotFolder folder(tree);
  folder.take_dicts_ = options.fast_trace_entries;
  tree.set_folder(&folder);
  pickle::ReadOptions pickle_options;
  pickle_options.progress = options.progress;
  pickle::ReadInfo info;
  if (size_hint != 0) {
    reserve_huge(folder.events_, std::min<uint64_t>(size_hint / 48, 1ull << 27));  // address space
    folder.warmer_.start(folder.events_.data(), folder.events_.capacity() * sizeof(TraceEvent));
  }
  uint64_t trailing = 0;   // bytes found after the pickle's STOP
  Status status = run(tree, pickle_options, info, trailing);
  folder.warmer_.stop();
  if (options.fast_entries_taken != nullptr) *options.fast_entries_taken = folder.dicts_taken_;
  if (!status) return status.error();
  auto result = finish(tree, folder, fmt::format("pickle protocol {}", info.protocol), info.bytes_read);
  if (!result) return Error{fmt::format("{}: {}", name, result.error().message)};
  result->bytes_after_end = trailing;
  return result;
}

Error not_a_snapshot(std::string_view name, std::string_view head) {
  // Files people mistake for a snapshot, by their magic bytes: say what the file is and what to do.
  struct Known {
    std::string_view magic;
    std::string_view what;
  };
  static constexpr Known kKnown[] = {
      {"\x1f\x8b", "it is gzip-compressed: decompress it first (zcat FILE | oomdoc snapshot -)"},
      {"\x28\xb5\x2f\xfd", "it is zstd-compressed: decompress it first (zstdcat FILE | oomdoc snapshot -)"},
      {"\xfd" "7zXZ", "it is xz-compressed: decompress it first (xzcat FILE | oomdoc snapshot -)"},
      {"BZh", "it is bzip2-compressed: decompress it first (bzcat FILE | oomdoc snapshot -)"},
      {"PK\x03\x04", "it is a zip archive, as torch.save writes for tensors and checkpoints; a snapshot is "
                       "the pickle torch.cuda.memory._dump_snapshot() writes"},
  };
  for (const Known& k : kKnown) {
    if (head.starts_with(k.magic)) return Error{fmt::format("{}: not a memory snapshot: {}", name, k.what)};
  }
  return Error{fmt::format("{}: not a memory snapshot (neither a pickle of protocol 2 to 5 nor "
                           "JSON; starts with byte 0x{:02x})",
                           name, head.empty() ? 0 : static_cast<uint8_t>(head[0]))};
}

}  // namespace

std::string_view trace_action_name(TraceAction action) {
  switch (action) {
    case TraceAction::kAlloc: return "alloc";
    case TraceAction::kFreeRequested: return "free_requested";
    case TraceAction::kFreeCompleted: return "free_completed";
    case TraceAction::kSegmentAlloc: return "segment_alloc";
    case TraceAction::kSegmentFree: return "segment_free";
    case TraceAction::kSegmentMap: return "segment_map";
    case TraceAction::kSegmentUnmap: return "segment_unmap";
    case TraceAction::kSnapshot: return "snapshot";
    case TraceAction::kOom: return "oom";
    case TraceAction::kUserDefined: return "user_defined";
    case TraceAction::kAnnotate: return "annotate";
    case TraceAction::kOther: return "other";
  }
  return "other";
}

std::string_view snapshot_layout_name(SnapshotLayout layout) {
  switch (layout) {
    case SnapshotLayout::kSegmentList: return "list of segments (1.13 / memory_snapshot())";
    case SnapshotLayout::kHistory: return "dict with block history (2.0)";
    case SnapshotLayout::kDeviceTraces: return "dict with device_traces (2.1+)";
    case SnapshotLayout::kSegmentsDict: return "dict with segments, no device_traces";
  }
  return "?";
}

TraceEventExtra Snapshot::trace_extra(size_t event) const {
  auto it = std::lower_bound(trace_extras.begin(), trace_extras.end(), event,
                             [](const TraceEventExtra& x, size_t i) { return x.event < i; });
  if (it != trace_extras.end() && it->event == event) return *it;
  TraceEventExtra none;
  none.event = event;
  return none;
}

std::vector<int> Snapshot::devices() const {
  std::vector<int> out;
  for (const auto& s : segments) out.push_back(s.device);
  for (size_t d = 0; d < trace_ranges.size(); ++d) {
    if (trace_ranges[d].second > trace_ranges[d].first) out.push_back(static_cast<int>(d));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<Snapshot> read_snapshot_bytes(std::string_view bytes, std::string_view name,
                                     const SnapshotReadOptions& options) {
  if (bytes.empty()) return Error{fmt::format("{}: the file is empty", name)};
  if (looks_like_json(bytes.substr(0, 64))) return read_json(bytes, name);
  if (static_cast<uint8_t>(bytes[0]) != 0x80) return not_a_snapshot(name, bytes);
  return read_pickle_snapshot(name, options, 0, [&](Tree& tree, const pickle::ReadOptions& o,
                                                    pickle::ReadInfo& info, uint64_t& trailing) {
    Status status = pickle::read_pickle(bytes, tree, o, &info);
    if (!status) return Status{Error{fmt::format("{}: {}", name, status.error().message)}};
    trailing = bytes.size() > info.bytes_read ? bytes.size() - info.bytes_read : 0;
    return status;
  });
}

Result<Snapshot> read_snapshot_file(const std::string& path, const SnapshotReadOptions& options) {
  auto opened = InputFile::open(path);
  if (!opened) return opened.error();
  InputFile& input = **opened;
  const std::string& name = input.display_name();
  // Look at the first bytes to choose the reader, then hand them over before the rest.
  std::string head(4096, '\0');
  size_t got = 0;
  while (got < head.size()) {
    size_t n = input.read(head.data() + got, head.size() - got);
    if (n == 0) break;
    got += n;
  }
  if (input.failed()) return Error{input.error_message()};
  head.resize(got);
  if (head.empty()) return Error{fmt::format("{}: the file is empty", name)};
  if (looks_like_json(head.substr(0, 64))) {
    std::string text = head;
    char buffer[1 << 16];
    while (size_t n = input.read(buffer, sizeof buffer)) text.append(buffer, n);
    if (input.failed()) return Error{input.error_message()};
    return read_json(text, name);
  }
  if (static_cast<uint8_t>(head[0]) != 0x80) return not_a_snapshot(name, head);

  size_t head_pos = 0;
  uint64_t fetched = 0;   // bytes handed to the pickle reader (it reads ahead in blocks)
  pickle::ByteReader read = [&](char* buffer, size_t size) -> size_t {
    size_t n = 0;
    if (head_pos < head.size()) {
      n = std::min(size, head.size() - head_pos);
      std::memcpy(buffer, head.data() + head_pos, n);
      head_pos += n;
    } else {
      n = input.read(buffer, size);
    }
    fetched += n;
    return n;
  };
  return read_pickle_snapshot(name, options, input.size_hint(),
                              [&](Tree& tree, const pickle::ReadOptions& o, pickle::ReadInfo& info, uint64_t& trailing) {
                                Status status = pickle::read_pickle(read, input.size_hint(), tree, o, &info);
                                // A read error explains the rest (and names the file).
                                if (input.failed()) return Status{Error{input.error_message()}};
                                if (!status) return Status{Error{fmt::format("{}: {}", name, status.error().message)}};
                                // What the reader fetched past STOP, and a look at what is left (not all
                                // of it: a second snapshot of gigabytes need not be read to be noticed).
                                trailing = fetched > info.bytes_read ? fetched - info.bytes_read : 0;
                                char probe[4096];
                                trailing += read(probe, sizeof probe);
                                return status;
                              });
}

}  // namespace oomdoc
