#include "core/units.h"

#include <gtest/gtest.h>

namespace oomdoc {
namespace {

TEST(ParseQuantity, BinaryUnitsRoundToNearestByte) {
  auto q = parse_quantity("12.50 MiB");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->bytes, 13107200u);
  EXPECT_EQ(q->unit, "MiB");
  EXPECT_EQ(q->text, "12.50 MiB");
  EXPECT_DOUBLE_EQ(q->value, 12.5);
  // 10.92 GiB = 11725260718.08 -> 11725260718 (the corpus README's rounding).
  EXPECT_EQ(parse_quantity("10.92 GiB")->bytes, 11725260718u);
  EXPECT_EQ(parse_quantity("23.65 GiB")->bytes, 25393994138u);
  EXPECT_EQ(parse_quantity("194.87 MiB")->bytes, 204336005u);
}

TEST(ParseQuantity, KeepsPrintedPrecision) {
  auto q = parse_quantity("2.00 GiB");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->tolerance_bytes, kGiB / 200);  // 0.005 GiB
  EXPECT_TRUE(q->matches(2 * kGiB + kGiB / 300));
  EXPECT_FALSE(q->matches(2 * kGiB + kGiB / 100));
  EXPECT_EQ(parse_quantity("16160MiB")->tolerance_bytes, kMiB / 2);
  EXPECT_EQ(parse_quantity("6727663616B")->tolerance_bytes, 0u);
}

TEST(ParseQuantity, NoSpaceAndByteForms) {
  EXPECT_EQ(parse_quantity("16160MiB")->bytes, 16160ull * kMiB);
  EXPECT_EQ(parse_quantity("6727663616B")->bytes, 6727663616ull);
  EXPECT_EQ(parse_quantity("2120187392 bytes")->bytes, 2120187392ull);
}

TEST(ParseQuantity, DecimalLabelsFollowTheFormat) {
  EXPECT_EQ(parse_quantity("1.5 GB")->bytes, 1500000000ull);
  EXPECT_EQ(parse_quantity("1.5 GB", LabelMeaning::kBinary)->bytes, 1610612736ull);
  // TensorFlow's bare suffixes are binary.
  EXPECT_EQ(parse_quantity("1.97G")->bytes, 2115271393ull);
  EXPECT_EQ(parse_quantity("378.60M")->bytes, 396990874ull);
}

TEST(ParseQuantity, OverflowSaturatesAndSaysSo) {
  auto q = parse_quantity("17179869184.00 GiB");
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->overflow);
  EXPECT_EQ(q->bytes, UINT64_MAX);
}

TEST(ParseQuantity, RejectsNonQuantities) {
  EXPECT_FALSE(parse_quantity(""));
  EXPECT_FALSE(parse_quantity("GiB"));
  EXPECT_FALSE(parse_quantity("12.5 parsecs"));
  EXPECT_FALSE(parse_quantity("12.5 GiB extra"));
  EXPECT_FALSE(parse_quantity("12 b"));  // bits are not bytes
}

TEST(ParseUserSize, CommonSpellings) {
  EXPECT_EQ(parse_user_size("24GiB"), 24 * kGiB);
  EXPECT_EQ(parse_user_size("24 gib"), 24 * kGiB);
  EXPECT_EQ(parse_user_size("80GB"), 80'000'000'000ull);
  EXPECT_EQ(parse_user_size("1024"), 1024u);
  EXPECT_FALSE(parse_user_size("lots"));
}

TEST(FormatBytes, HumanUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(13107200), "12.50 MiB");
  EXPECT_EQ(format_bytes(2 * kGiB), "2.00 GiB");
  EXPECT_EQ(format_bytes(kGiB - 1), "1.00 GiB");
  EXPECT_EQ(format_signed_bytes(-static_cast<int64_t>(kGiB)), "-1.00 GiB");
  EXPECT_EQ(format_signed_bytes(static_cast<int64_t>(kMiB), true), "+1.00 MiB");
}

TEST(Counts, ParseAndFormat) {
  EXPECT_EQ(parse_count("7B"), 7'000'000'000ull);
  EXPECT_EQ(parse_count("350M"), 350'000'000ull);
  EXPECT_EQ(parse_count("1.5b"), 1'500'000'000ull);
  EXPECT_EQ(parse_count("6738415616"), 6738415616ull);
  EXPECT_FALSE(parse_count("seven"));
  EXPECT_EQ(format_exact_count(6738415616ull), "6,738,415,616");
  EXPECT_EQ(format_count(6738415616ull), "6.74B");
}

}  // namespace
}  // namespace oomdoc
