// Asks the kernel to back a large, not yet touched buffer with transparent huge pages (where THP
// is in "madvise" mode, the Debian default). Readers of multi-GB inputs fill arrays of hundreds of
// MB: with 4 KiB pages every first touch is a page fault, which dominates on virtual machines.
#pragma once

#include <atomic>
#include <cstddef>
#include <thread>

namespace oomdoc {

// No-op for buffers under 4 MiB or where madvise is unavailable; never fails.
void advise_huge_pages(const void* data, size_t bytes);

template <typename Vector>
void reserve_huge(Vector& v, size_t count) {
  v.reserve(count);
  advise_huge_pages(v.data(), v.capacity() * sizeof(typename Vector::value_type));
}

// Faults in the pages of a large reserved buffer from a second thread, a little ahead of the thread
// that fills it. On virtual machines the first touch of fresh memory (the kernel zeroing it) costs
// about as much as filling it; this way that cost runs beside the reader instead of inside it. It
// uses madvise(MADV_POPULATE_WRITE) (Linux 5.14+), which faults pages in without writing to them,
// so it never touches the buffer's contents; where that is unavailable it does nothing.
class PageWarmer {
 public:
  PageWarmer() = default;
  ~PageWarmer() { stop(); }
  PageWarmer(const PageWarmer&) = delete;
  PageWarmer& operator=(const PageWarmer&) = delete;

  // Starts warming [data, data + capacity_bytes) (no-op for small buffers).
  void start(const void* data, size_t capacity_bytes);
  // The owner has filled `filled_bytes` of the buffer now at `data`; a different address means the
  // buffer moved (it outgrew its reservation) and warming stops.
  void advance(const void* data, size_t filled_bytes) {
    if (data != base_) {
      stop_.store(true, std::memory_order_relaxed);
      return;
    }
    filled_.store(filled_bytes, std::memory_order_relaxed);
  }
  void stop();

  // Owners report progress every this many bytes (cheap enough, fine enough for the lookahead).
  static constexpr size_t kReportEvery = 1u << 20;

 private:
  void run();

  const void* base_ = nullptr;
  size_t capacity_ = 0;
  std::atomic<size_t> filled_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace oomdoc
