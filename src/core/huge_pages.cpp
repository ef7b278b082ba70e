#include "core/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace oomdoc {

void advise_huge_pages(const void* data, size_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = 2u << 20;
  if (data == nullptr || bytes < 2 * kHuge) return;
  uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

void PageWarmer::start(const void* data, size_t capacity_bytes) {
#ifdef MADV_POPULATE_WRITE
  stop();
  constexpr size_t kMinBytes = 64u << 20;  // below this, faulting as we go costs little
  if (data == nullptr || capacity_bytes < kMinBytes) return;
  base_ = data;
  capacity_ = capacity_bytes;
  filled_.store(0, std::memory_order_relaxed);
  stop_.store(false, std::memory_order_relaxed);
  thread_ = std::thread([this] { run(); });
#else
  (void)data;
  (void)capacity_bytes;
#endif
}

void PageWarmer::stop() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
  base_ = nullptr;
}

void PageWarmer::run() {
#ifdef MADV_POPULATE_WRITE
  constexpr uintptr_t kChunk = 4u << 20;       // two huge pages per call
  constexpr size_t kLookahead = 32u << 20;    // how far ahead of the writer to stay
  const uintptr_t begin = reinterpret_cast<uintptr_t>(base_);
  const uintptr_t end = begin + capacity_;
  uintptr_t warmed = (begin + 4095) & ~uintptr_t(4095);  // madvise wants page alignment
  while (!stop_.load(std::memory_order_relaxed) && warmed < end) {
    const uintptr_t target = std::min<uintptr_t>(end, begin + filled_.load(std::memory_order_relaxed) + kLookahead);
    if (warmed >= target) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    const uintptr_t size = std::min<uintptr_t>(kChunk, (target - warmed) & ~uintptr_t(4095));
    if (size == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    if (madvise(reinterpret_cast<void*>(warmed), size, MADV_POPULATE_WRITE) != 0) return;  // unsupported
    warmed += size;
  }
#endif
}

}  // namespace oomdoc
