#include "core/saturating.h"

#include <gtest/gtest.h>

#include <cmath>

namespace oomdoc {
namespace {

TEST(Saturating, AddStopsAtTheTop) {
  EXPECT_EQ(saturating_add(2, 3), 5u);
  EXPECT_EQ(saturating_add(kSaturatedBytes - 1, 1), kSaturatedBytes);
  EXPECT_EQ(saturating_add(kSaturatedBytes - 1, 2), kSaturatedBytes);
  EXPECT_EQ(saturating_add(kSaturatedBytes, kSaturatedBytes), kSaturatedBytes);
}

TEST(Saturating, SubKeepsASaturatedCount) {
  EXPECT_EQ(saturating_sub(5, 3), 2u);
  EXPECT_EQ(saturating_sub(3, 5), 0u);
  EXPECT_EQ(saturating_sub(kSaturatedBytes, 5), kSaturatedBytes);
}

TEST(Saturating, DoublesRoundOrSaturate) {
  EXPECT_EQ(saturated_bytes(2.5), 3u);
  EXPECT_EQ(saturated_bytes(-1), 0u);
  EXPECT_EQ(saturated_bytes(0), 0u);
  EXPECT_EQ(saturated_bytes(1e19), 10000000000000000000ull);
  EXPECT_EQ(saturated_bytes(18446744073709551616.0), kSaturatedBytes);
  EXPECT_EQ(saturated_bytes(1e300), kSaturatedBytes);
  EXPECT_EQ(saturated_bytes(INFINITY), kSaturatedBytes);
  EXPECT_EQ(saturated_bytes(NAN), kSaturatedBytes);
  EXPECT_TRUE(is_saturated(saturated_bytes(1e20)));
  EXPECT_FALSE(is_saturated(saturated_bytes(1e19)));
}

}  // namespace
}  // namespace oomdoc
