#include "core/text.h"

#include <gtest/gtest.h>

namespace oomdoc {
namespace {

TEST(Text, ToLowerIsAsciiOnly) {
  EXPECT_EQ(to_lower("Meta-Llama/Llama-3.1-8B"), "meta-llama/llama-3.1-8b");
  EXPECT_EQ(to_lower("H100 SXM\xC3\x89"), "h100 sxm\xC3\x89");  // UTF-8 bytes pass through
}

TEST(Text, EditDistance) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("4090", "4080"), 1u);
  EXPECT_EQ(edit_distance("llama-2-7b", "llama-2-7b-hf"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("4900", "4090"), 1u);  // a swap of neighbours is one edit
}

}  // namespace
}  // namespace oomdoc
