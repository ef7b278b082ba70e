#include "readers/length_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace oomdoc {
namespace {

using ::testing::ElementsAre;

TEST(LengthFile, PlainCountsAndJsonLines) {
  auto lengths = parse_lengths(
      "12\n\n 40 \n{\"length\": 7}\n{\"num_tokens\": 9, \"text\": \"x\"}\n{\"input_ids\": [1,2,3]}\n",
      "l.txt");
  ASSERT_TRUE(lengths.ok()) << lengths.error().message;
  EXPECT_THAT(*lengths, ElementsAre(12u, 40u, 7u, 9u, 3u));
}

// A UTF-8 byte-order mark before the first count (Notepad, PowerShell) is skipped, in either form.
TEST(LengthFile, LeadingByteOrderMarkIsSkipped) {
  auto plain = parse_lengths("\xEF\xBB\xBF" "100\n200\n", "l.txt");
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(*plain, (std::vector<uint64_t>{100, 200}));
  auto json = parse_lengths("\xEF\xBB\xBF" "{\"length\": 7}\n", "l.jsonl");
  ASSERT_TRUE(json.ok()) << json.error().message;
  EXPECT_EQ(*json, (std::vector<uint64_t>{7}));
}

TEST(LengthFile, ErrorsNameFileAndLine) {
  auto bad = parse_lengths("12\nabc\n", "l.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "l.txt: line 2: expected a token count, got 'abc'");
  auto negative = parse_lengths("-5\n", "l.txt");
  ASSERT_FALSE(negative.ok());
  auto no_field = parse_lengths("{\"text\": \"hi\"}\n", "l.jsonl");
  ASSERT_FALSE(no_field.ok());
  EXPECT_EQ(no_field.error().message, "l.jsonl: line 1: no length, num_tokens or input_ids field");
  auto broken = parse_lengths("{\"length\": 3\n", "l.jsonl");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().message, "l.jsonl: line 1: invalid JSON");
  auto neg_json = parse_lengths("{\"length\": -3}\n", "l.jsonl");
  ASSERT_FALSE(neg_json.ok());
  auto empty = parse_lengths("\n\n", "l.txt");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().message, "l.txt: no lengths in the file");
  auto huge = parse_lengths("99999999999999\n", "l.txt");
  ASSERT_FALSE(huge.ok());
  // A tokenized batch is not one example: its size would be the batch's.
  auto batched = parse_lengths("{\"input_ids\": [[1, 2, 3], [4, 5]]}\n", "l.jsonl");
  ASSERT_FALSE(batched.ok());
  EXPECT_EQ(batched.error().message,
            "l.jsonl: line 1: \"input_ids\" is a list of lists (a batch); give one example per line");
}

}  // namespace
}  // namespace oomdoc
