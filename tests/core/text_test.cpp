#include "core/text.h"

#include <gtest/gtest.h>

namespace oomdoc {
namespace {

TEST(Text, ToLowerIsAsciiOnly) {
  EXPECT_EQ(to_lower("Meta-Llama/Llama-3.1-8B"), "meta-llama/llama-3.1-8b");
  EXPECT_EQ(to_lower("H100 SXM\xC3\x89"), "h100 sxm\xC3\x89");  // UTF-8 bytes pass through
}

TEST(Text, CountNoun) {
  EXPECT_EQ(count_noun(0, "line"), "0 lines");
  EXPECT_EQ(count_noun(1, "line"), "1 line");
  EXPECT_EQ(count_noun(2, "free"), "2 frees");
  EXPECT_EQ(count_noun(1, "process", "processes"), "1 process");
  EXPECT_EQ(count_noun(3, "process", "processes"), "3 processes");
}

TEST(Text, WithArticleFollowsTheSpokenNumber) {
  EXPECT_EQ(with_article("8.00 GiB buffer"), "an 8.00 GiB buffer");
  EXPECT_EQ(with_article("80.00 MiB request"), "an 80.00 MiB request");
  EXPECT_EQ(with_article("800 B block"), "an 800 B block");
  EXPECT_EQ(with_article("11.50 MiB"), "an 11.50 MiB");
  EXPECT_EQ(with_article("18 B"), "an 18 B");
  EXPECT_EQ(with_article("16.00 MiB"), "a 16.00 MiB");
  EXPECT_EQ(with_article("1.00 GiB"), "a 1.00 GiB");
  EXPECT_EQ(with_article("118 B"), "a 118 B");     // one hundred eighteen
  EXPECT_EQ(with_article("110.00 MiB"), "a 110.00 MiB");
  EXPECT_EQ(with_article("2 B"), "a 2 B");
}

TEST(Text, IntegerRangesCollapseRuns) {
  EXPECT_EQ(integer_ranges({}), "");
  EXPECT_EQ(integer_ranges({4}), "4");
  EXPECT_EQ(integer_ranges({7, 0, 1, 2, 3, 5, 8, 3}), "0-3, 5, 7-8");
  EXPECT_EQ(integer_ranges({-2, -1, 1}), "-2--1, 1");
  EXPECT_EQ(integer_ranges({INT64_MAX, INT64_MIN, INT64_MAX - 1}), "-9223372036854775808, 9223372036854775806-9223372036854775807");
}

TEST(Text, PrintableEscapesControlAndBrokenBytes) {
  EXPECT_EQ(printable("llama.rope.freq_base"), "llama.rope.freq_base");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80");  // UTF-8 kept
  EXPECT_EQ(printable(std::string("a\0b\x07\r\n\x7f", 7)), "a\\x00b\\x07\\x0d\\x0a\\x7f");
  // C1 controls (CSI U+009B, NEL U+0085) as valid UTF-8 are escaped too; U+00A0 on is text.
  EXPECT_EQ(printable("a\xc2\x9b" "31mb\xc2\x85" "c\xc2\xa0"), "a\\u009b31mb\\u0085c\xc2\xa0");
  EXPECT_EQ(printable("\xff\xc3(\xe2\x80"), "\\xff\\xc3(\\xe2\\x80");                // stray, cut sequences
  EXPECT_EQ(printable("\xc0\xaf\xed\xa0\x80"), "\\xc0\\xaf\\xed\\xa0\\x80");       // overlong, surrogate
  EXPECT_EQ(printable("abcdef", 4), "abcd...");
  EXPECT_EQ(printable("ab\xc3\xa9", 3), "ab...");   // never half a character
  EXPECT_EQ(printable("abc", 3), "abc");
}

TEST(Text, HasShapeReadsDigitsAndSeparators) {
  EXPECT_TRUE(has_shape("2024-05-01 10:00:00 x", 0, "0000-00-00 00:00:00"));
  EXPECT_TRUE(has_shape("INFO 05-01 12:00:00", 4, " 00-00 00:00:00"));
  EXPECT_FALSE(has_shape("2024-05-0a", 0, "0000-00-00"));
  EXPECT_FALSE(has_shape("2024-05", 0, "0000-00-00"));   // too short
  EXPECT_FALSE(has_shape("ab", 3, "0"));                  // past the end
}

TEST(Text, EditDistance) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("4090", "4080"), 1u);
  EXPECT_EQ(edit_distance("llama-2-7b", "llama-2-7b-hf"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("4900", "4090"), 1u);  // a swap of neighbours is one edit
}

// "Did you mean" for flags (vLLM's and llama.cpp's readers): 1 edit below 8 characters, 2 from 8, 3 from 12.
TEST(Text, ClosestSpelling) {
  const std::vector<std::string> flags = {"-c", "--ctx-size", "--n-gpu-layers", "max-model-len", "dtype"};
  EXPECT_EQ(closest_spelling("--ctx-sise", flags), "--ctx-size");
  EXPECT_EQ(closest_spelling("--n-gpu-layer", flags), "--n-gpu-layers");
  EXPECT_EQ(closest_spelling("max-model-length", flags), "max-model-len");   // 3 edits at 13 characters
  EXPECT_EQ(closest_spelling("dtyp", flags), "dtype");
  EXPECT_EQ(closest_spelling("dtp", flags), std::nullopt);                   // 2 edits below 8 characters
  EXPECT_EQ(closest_spelling("--frobnicate", flags), std::nullopt);
}

}  // namespace
}  // namespace oomdoc
