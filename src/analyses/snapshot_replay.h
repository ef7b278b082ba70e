// Internal to the snapshot analyses: an open-addressing map from block address to what is live
// there. The replay touches it once per trace event, so it avoids node allocation.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "analyses/snapshot_analysis.h"
#include "model/snapshot.h"

namespace oomdoc::detail {

struct LiveEntry {
  uint64_t size = 0;
  uint64_t event_index = 0;
  StackId stack = kNoStack;
};

class AddressMap {
 public:
  AddressMap() { rehash(1024); }

  LiveEntry* find(uint64_t addr) {
    size_t i = slot(addr);
    while (used_[i]) {
      if (keys_[i] == addr) return &values_[i];
      i = (i + 1) & mask_;
    }
    return nullptr;
  }
  void put(uint64_t addr, const LiveEntry& value) {
    if ((count_ + 1) * 4 > capacity() * 3) rehash(capacity() * 2);
    size_t i = slot(addr);
    while (used_[i]) {
      if (keys_[i] == addr) {
        values_[i] = value;
        return;
      }
      i = (i + 1) & mask_;
    }
    used_[i] = 1;
    keys_[i] = addr;
    values_[i] = value;
    ++count_;
  }
  // Removes addr; returns false when it was not there. Backward-shift deletion (no tombstones).
  bool erase(uint64_t addr, LiveEntry* out = nullptr) {
    size_t i = slot(addr);
    while (used_[i] && keys_[i] != addr) i = (i + 1) & mask_;
    if (!used_[i]) return false;
    if (out) *out = values_[i];
    size_t hole = i;
    size_t j = i;
    for (;;) {
      j = (j + 1) & mask_;
      if (!used_[j]) break;
      size_t home = slot(keys_[j]);
      // Move j into the hole when its home position is not in (hole, j] (cyclically).
      bool between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!between) {
        keys_[hole] = keys_[j];
        values_[hole] = values_[j];
        hole = j;
      }
    }
    used_[hole] = 0;
    --count_;
    return true;
  }
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (used_[i]) fn(keys_[i], values_[i]);
    }
  }
  size_t size() const { return count_; }

 private:
  size_t capacity() const { return keys_.size(); }
  size_t slot(uint64_t addr) const {
    return static_cast<size_t>((addr >> 9) * 0x9e3779b97f4a7c15ull >> shift_) & mask_;
  }
  void rehash(size_t n) {
    std::vector<uint64_t> keys = std::move(keys_);
    std::vector<LiveEntry> values = std::move(values_);
    std::vector<uint8_t> used = std::move(used_);
    keys_.assign(n, 0);
    values_.assign(n, LiveEntry{});
    used_.assign(n, 0);
    mask_ = n - 1;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(n));
    count_ = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (used[i]) put(keys[i], values[i]);
    }
  }
  std::vector<uint64_t> keys_;
  std::vector<LiveEntry> values_;
  std::vector<uint8_t> used_;
  size_t mask_ = 0;
  unsigned shift_ = 54;
  size_t count_ = 0;
};

// Seconds from start_us to time_us (trace clocks are microseconds since the epoch).
double seconds_since(int64_t time_us, int64_t start_us);

// Allocations grouped by stack key, largest first, at most `top` groups: (stack, bytes) items plus
// the pre-recording allocations still live just after event `at` (those without a stack of their
// own form the kBeforeRecordingKey group).
std::vector<StackGroup> group_live(std::span<const std::pair<StackId, uint64_t>> live,
                                   std::span<const PreRecordingAllocation> pre_recording, uint64_t at,
                                   StackLabeler& labeler, size_t top);
// The allocations of a live map (after event `at`) and the pre-recording ones live then, grouped.
std::vector<StackGroup> live_stacks_in(const AddressMap& live, std::span<const PreRecordingAllocation> pre_recording,
                                       uint64_t at, StackLabeler& labeler, size_t top);

// What is live after each trace event, replayed forward. Analyses that need several moments
// (every OOM of a device) ask in increasing order and share one pass over the trace.
class LiveReplay {
 public:
  explicit LiveReplay(std::span<const TraceEvent> trace) : trace_(trace) {}
  // The allocations live just after event `at` (inclusive).
  const AddressMap& at(uint64_t at) {
    if (at + 1 < next_) {  // earlier than asked before: start again
      live_ = AddressMap{};
      next_ = 0;
    }
    for (; next_ < trace_.size() && next_ <= at; ++next_) {
      const TraceEvent& e = trace_[next_];
      if (e.action == TraceAction::kAlloc) live_.put(e.addr, {e.size, next_, e.stack});
      if (e.action == TraceAction::kFreeCompleted) live_.erase(e.addr);
    }
    return live_;
  }

 private:
  std::span<const TraceEvent> trace_;
  AddressMap live_;
  uint64_t next_ = 0;  // events [0, next_) are applied
};

}  // namespace oomdoc::detail
