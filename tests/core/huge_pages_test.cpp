#include "core/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace oomdoc {
namespace {

// The warmer only faults pages in: what the owner writes, before or after, is what it reads.
TEST(PageWarmer, WarmsAheadWithoutTouchingTheContents) {
  std::vector<uint64_t> values;
  reserve_huge(values, 16u << 20);  // 128 MiB of address space
  values.push_back(42);
  PageWarmer warmer;
  warmer.start(values.data(), values.capacity() * sizeof(uint64_t));
  for (uint64_t i = 1; i < (8u << 20); ++i) {
    values.push_back(i * 3);
    if (values.size() % (PageWarmer::kReportEvery / sizeof(uint64_t)) == 0) {
      warmer.advance(values.data(), values.size() * sizeof(uint64_t));
    }
  }
  warmer.stop();
  EXPECT_EQ(values[0], 42u);
  for (uint64_t i = 1; i < values.size(); i += 4097) ASSERT_EQ(values[i], i * 3);
}

// A buffer that outgrows its reservation moves: the warmer stops instead of following it.
TEST(PageWarmer, StopsWhenTheBufferMoves) {
  std::vector<uint64_t> values;
  reserve_huge(values, 9u << 20);  // 72 MiB
  PageWarmer warmer;
  warmer.start(values.data(), values.capacity() * sizeof(uint64_t));
  values.resize(values.capacity() + 1, 7);  // reallocates
  warmer.advance(values.data(), values.size() * sizeof(uint64_t));
  warmer.stop();
  EXPECT_EQ(values.back(), 7u);
}

}  // namespace
}  // namespace oomdoc
