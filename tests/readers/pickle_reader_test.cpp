#include "readers/pickle_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "support/test_support.h"

namespace oomdoc::pickle {
namespace {

using ::testing::HasSubstr;

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

Status parse(const std::string& data, Tree& tree) { return read_pickle(std::string_view(data), tree); }

std::string error_of(const std::string& data) {
  Tree tree;
  Status st = parse(data, tree);
  return st ? std::string("<ok>") : st.error().message;
}

Value get(const Tree& t, Value dict, std::string_view key) {
  auto v = t.get(dict.id(), key);
  EXPECT_TRUE(v.has_value()) << key;
  return v.value_or(Value::none());
}

class ValuesTest : public ::testing::TestWithParam<int> {};

TEST_P(ValuesTest, DecodesEveryPlainType) {
  std::string data = testing::read_file(testing::fixture_path(
      "snapshot/values_p" + std::to_string(GetParam()) + ".pickle"));
  Tree t;
  ReadInfo info;
  ASSERT_TRUE(read_pickle(std::string_view(data), t, {}, &info));
  EXPECT_EQ(info.protocol, GetParam());
  EXPECT_EQ(info.bytes_read, data.size());
  Value root = t.root();
  ASSERT_TRUE(t.is_container(root, ContainerKind::kDict));

  // ints at every boundary; beyond 64 bits they saturate.
  Value ints = get(t, root, "ints");
  std::vector<Value> v;
  t.for_each_item(ints.id(), [&](Value x) { v.push_back(x); });
  ASSERT_EQ(v.size(), 19u);
  EXPECT_EQ(*t.as_int(v[0]), 0);
  EXPECT_EQ(*t.as_int(v[2]), 255);
  EXPECT_EQ(*t.as_int(v[3]), 256);
  EXPECT_EQ(*t.as_int(v[4]), 65535);
  EXPECT_EQ(*t.as_int(v[5]), 65536);
  EXPECT_EQ(*t.as_int(v[6]), -1);
  EXPECT_EQ(*t.as_int(v[7]), -256);
  EXPECT_EQ(*t.as_int(v[8]), 2147483647);
  EXPECT_EQ(*t.as_int(v[9]), -2147483648LL);
  EXPECT_EQ(*t.as_int(v[10]), 2147483648LL);
  EXPECT_EQ(*t.as_int(v[11]), (1LL << 48) + 5);
  EXPECT_EQ(*t.as_int(v[12]), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(*t.as_int(v[13]), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*t.as_uint(v[14]), 1ull << 63);  // 2**63: a 9-byte LONG1
  EXPECT_EQ(*t.as_uint(v[15]), ~0ull);       // 2**64-1, the frame line seen in real files
  EXPECT_TRUE(t.big(v[16]).saturated);       // 2**64
  EXPECT_EQ(*t.as_uint(v[16]), ~0ull);
  EXPECT_TRUE(t.big(v[17]).saturated);       // -2**63-1
  EXPECT_EQ(*t.as_int(v[17]), std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(t.big(v[18]).saturated);       // 10**30

  std::vector<double> floats;
  t.for_each_item(get(t, root, "floats").id(), [&](Value x) { floats.push_back(*t.as_double(x)); });
  ASSERT_EQ(floats.size(), 4u);
  EXPECT_EQ(floats[0], 0.5);
  EXPECT_TRUE(std::signbit(floats[1]));
  EXPECT_EQ(floats[2], 1e300);
  EXPECT_TRUE(std::isinf(floats[3]));

  std::vector<std::string> strings;
  t.for_each_item(get(t, root, "strings").id(), [&](Value x) { strings.emplace_back(t.str(x)); });
  ASSERT_EQ(strings.size(), 4u);
  EXPECT_EQ(strings[2], "ünïcödé ✓");
  EXPECT_EQ(strings[3], std::string(300, 'x'));
  if (GetParam() >= 4) {
    Value b = get(t, root, "bytes");
    EXPECT_EQ(b.tag(), Tag::kBytes);
    EXPECT_EQ(t.str(b), std::string("\x00\x01\xff", 3));
    EXPECT_EQ(t.container(get(t, root, "set").id()).count, 3u);
    EXPECT_EQ(t.container(get(t, root, "frozenset").id()).kind, ContainerKind::kSet);
  } else {
    EXPECT_FALSE(t.get(root.id(), "bytes").has_value());
  }

  // Tuples of every size, empty containers.
  std::vector<uint32_t> sizes;
  t.for_each_item(get(t, root, "nested").id(), [&](Value x) { sizes.push_back(t.container(x.id()).count); });
  EXPECT_EQ(sizes, (std::vector<uint32_t>{1, 0, 0, 1, 2, 3, 4}));

  // Memo references are the same container, never a copy.
  std::vector<Value> shared;
  t.for_each_item(get(t, root, "shared").id(), [&](Value x) { shared.push_back(x); });
  ASSERT_EQ(shared.size(), 3u);
  EXPECT_EQ(shared[0], shared[1]);
  EXPECT_EQ(*t.at(shared[2].id(), 0), shared[0]);

  // Batches of 1000 (APPENDS / SETITEMS) are joined.
  Value big = get(t, root, "big_list");
  EXPECT_EQ(t.container(big.id()).count, 2500u);
  EXPECT_EQ(*t.as_int(*t.at(big.id(), 2499)), 2499);
  Value dict = get(t, root, "big_dict");
  EXPECT_EQ(t.container(dict.id()).count, 2400u);
  EXPECT_EQ(*t.as_int(get(t, dict, "k1199")), 1199);

  std::vector<Value> flags;
  t.for_each_item(get(t, root, "flags").id(), [&](Value x) { flags.push_back(x); });
  EXPECT_TRUE(flags[0].is_bool() && flags[0].bool_value());
  EXPECT_TRUE(flags[1].is_bool() && !flags[1].bool_value());
  EXPECT_TRUE(flags[2].is_none());
}

INSTANTIATE_TEST_SUITE_P(Protocols, ValuesTest, ::testing::Values(2, 4, 5));

TEST(PickleReader, ReadsTorchCppPicklerStyle) {
  // Protocol 2, BINPUT memo, BINUNICODE keys, 8-byte LONG1 (torch's Pickler) and a 9-byte LONG1.
  std::string data = bytes({0x80, 2, '}', 'q', 0, '(', 'X', 4, 0, 0, 0}) + "addr" +
                     bytes({'q', 1, 0x8a, 8, 0x00, 0x10, 0x00, 0x00, 0xe7, 0x7f, 0x00, 0x00}) + "h" +
                     bytes({1}) /* BINGET 1: the same key again */ +
                     bytes({0x8a, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 'u', '.'});
  Tree t;
  ASSERT_TRUE(parse(data, t)) << error_of(data);
  // Later assignment of the same key wins, as in Python.
  EXPECT_EQ(*t.as_uint(get(t, t.root(), "addr")), ~0ull);
  std::vector<uint64_t> values;
  t.for_each_pair(t.root().id(), [&](Value, Value v) { values.push_back(*t.as_uint(v)); });
  EXPECT_EQ(values, (std::vector<uint64_t>{0x7fe700001000ull, ~0ull}));
}

TEST(PickleReader, RefusesCodeBuildingOpcodesWithTheirOffset) {
  std::string global = bytes({0x80, 4}) + "cos\nsystem\n" + "X" + bytes({2, 0, 0, 0}) + "id" +
                       bytes({0x85, 'R', '.'});
  EXPECT_THAT(error_of(global), HasSubstr("offset 2: GLOBAL: refused"));
  EXPECT_THAT(error_of(bytes({0x80, 4, 'N', 'N', 0x93})), HasSubstr("offset 4: STACK_GLOBAL: refused: this opcode"));
  // The import is named (read as text, never resolved), so a pickle of tensors says so.
  EXPECT_THAT(error_of(global), HasSubstr("offset 2: GLOBAL: refused (imports os.system): this opcode"));
  std::string stack_global = bytes({0x80, 4, 0x8c, 12}) + "torch._utils" + bytes({0x8c, 18}) + "_rebuild_tensor_v2" +
                             bytes({0x93, ')', 'R', '.'});
  EXPECT_THAT(error_of(stack_global),
              HasSubstr("offset 36: STACK_GLOBAL: refused (imports torch._utils._rebuild_tensor_v2): this opcode"));
  EXPECT_THAT(error_of(bytes({0x80, 2, 'N', ')', 'R', '.'})), HasSubstr("offset 4: REDUCE: refused"));
  EXPECT_THAT(error_of(bytes({0x80, 2, 'N', 'N', 'b'})), HasSubstr("offset 4: BUILD: refused"));
  EXPECT_THAT(error_of(bytes({0x80, 2, 'N', ')', 0x81})), HasSubstr("NEWOBJ: refused"));
  EXPECT_THAT(error_of(bytes({0x80, 2, 'P'})), HasSubstr("PERSID: refused"));
  EXPECT_THAT(error_of(bytes({0x80, 5, 0x97})), HasSubstr("NEXT_BUFFER: refused"));
  EXPECT_THAT(error_of(bytes({0x80, 2, 'i'})), HasSubstr("INST: refused"));
}

TEST(PickleReader, ClearErrorsOnBadInput) {
  EXPECT_THAT(error_of(""), HasSubstr("empty"));
  EXPECT_THAT(error_of("hello"), HasSubstr("not a pickle of protocol 2 to 5 (starts with byte 0x68"));
  EXPECT_THAT(error_of(bytes({0x80, 1, 'N', '.'})), HasSubstr("protocol 1 is not supported"));
  EXPECT_THAT(error_of(bytes({0x80, 6, 'N', '.'})), HasSubstr("protocol 6 is not supported"));
  EXPECT_THAT(error_of(bytes({0x80, 4, 'N'})), HasSubstr("ends before the pickle's STOP"));
  EXPECT_THAT(error_of(bytes({0x80, 4, 'J', 1, 2})), HasSubstr("offset 2: BININT: the file ends in the middle"));
  // Huge length prefixes are checked against the input before anything is allocated.
  EXPECT_THAT(error_of(bytes({0x80, 4, 'X', 0xf0, 0xff, 0xff, 0xff, 'a', '.'})),
              HasSubstr("offset 2: BINUNICODE: length 4294967280 is larger than the rest of the file"));
  EXPECT_THAT(error_of(bytes({0x80, 4, 0x8d, 0, 0, 0, 0, 0, 0, 0, 0x80, '.'})),
              HasSubstr("BINUNICODE8: length 9223372036854775808 is larger than the rest"));
  {  // Without a known size (a stream), the per-value cap applies.
    std::string data = bytes({0x80, 4, 0x8d, 0, 0, 0, 0, 0, 0, 0, 0x80, '.'});
    ByteReader read = [&, pos = size_t(0)](char* b, size_t n) mutable {
      size_t k = std::min(n, data.size() - pos);
      std::memcpy(b, data.data() + pos, k);
      pos += k;
      return k;
    };
    Tree t;
    Status st = read_pickle(read, 0, t);
    ASSERT_FALSE(st);
    EXPECT_THAT(st.error().message, HasSubstr("over the 1073741824-byte limit"));
  }
  EXPECT_THAT(error_of(bytes({0x80, 4, 0x95, 0, 0, 0, 0, 1, 0, 0, 0, 'N', '.'})),
              HasSubstr("FRAME: frame of 4294967296 bytes is larger than the rest of the file"));
  EXPECT_THAT(error_of(bytes({0x80, 4, 'h', 5, '.'})), HasSubstr("offset 2: BINGET: memo slot 5 was never stored"));
  EXPECT_THAT(error_of(bytes({0x80, 4, 'N', 'r', 0xff, 0xff, 0xff, 0x7f, '.'})), HasSubstr("far beyond"));
  EXPECT_THAT(error_of(bytes({0x80, 4, '.'})), HasSubstr("the stack is empty at STOP"));
  EXPECT_THAT(error_of(bytes({0x80, 4, '}', '(', 'N', 'u', '.'})), HasSubstr("SETITEMS: odd number of items (1)"));
  EXPECT_THAT(error_of(bytes({0x80, 4, 'N', '(', 'N', 'e', '.'})), HasSubstr("APPENDS: the target below the MARK is not a list"));
  EXPECT_THAT(error_of(bytes({0x80, 4, 'e'})), HasSubstr("APPENDS: no MARK before it"));
  EXPECT_THAT(error_of(bytes({0x80, 4, ']', 0x94, 'h', 0, 'a', '.'})), HasSubstr("recursive"));
  EXPECT_THAT(error_of(bytes({0x80, 4, 0xff})), HasSubstr("offset 2: unknown opcode 0xff"));
  EXPECT_THAT(error_of(bytes({0x80, 2, 'I'})), HasSubstr("INT: protocol 0/1 text opcodes"));
}

TEST(PickleReader, DeepNestingIsAnErrorNotACrash) {
  std::string marks = bytes({0x80, 4}) + std::string(200000, '(');
  EXPECT_THAT(error_of(marks), HasSubstr("nesting deeper than 100000 levels"));
  // A million nested lists (no marks): built iteratively, no recursion anywhere.
  std::string nested = bytes({0x80, 4, ']'});
  for (int i = 0; i < 1000000; ++i) nested += "]a";
  nested += '.';
  EXPECT_THAT(error_of(nested), HasSubstr("<ok>"));
  // Nesting without MARK that keeps every level open ("]]]...aaa"): bounded, at one value past
  // the limit, before it holds gigabytes.
  std::string open = bytes({0x80, 4}) + std::string(1000001, ']') + std::string(1000000, 'a') + ".";
  EXPECT_THAT(error_of(open), HasSubstr("offset 1000002: EMPTY_LIST: more than 1000000 values open on the stack "
                                        "(nesting too deep)"));
}

TEST(PickleReader, EveryTruncationFailsCleanly) {
  std::string data = testing::read_file(testing::fixture_path("snapshot/values_p4.pickle"));
  for (size_t n = 0; n < data.size(); n += (n < 2000 ? 1 : 97)) {
    Tree t;
    Status st = read_pickle(std::string_view(data.data(), n), t);
    ASSERT_FALSE(st) << "prefix " << n;
    // One message naming the place and saying the file is cut short: it ends inside an opcode or
    // before STOP, or a length (a FRAME's) runs past its end.
    const std::string& m = st.error().message;
    ASSERT_EQ(m.rfind("offset ", 0), 0u) << m;
    if (n > 0) {
      EXPECT_TRUE(m.find("truncated") != std::string::npos ||
                  m.find("larger than the rest of the file") != std::string::npos)
          << "prefix " << n << ": " << m;
    }
  }
}

TEST(PickleReader, TenMillionElementList) {
  // MARK + 1000 x None + APPENDS, 10^4 times: 10 MB in, 80 MB of values, bounded and fast.
  std::string data = bytes({0x80, 4, ']'});
  std::string batch = "(" + std::string(1000, 'N') + "e";
  for (int i = 0; i < 10000; ++i) data += batch;
  data += '.';
  Tree t;
  ASSERT_TRUE(parse(data, t));
  EXPECT_EQ(t.container(t.root().id()).count, 10000000u);
}

TEST(PickleReader, StreamsFromAByteReader) {
  std::string data = testing::read_file(testing::fixture_path("snapshot/values_p5.pickle"));
  size_t pos = 0;
  ByteReader read = [&](char* buffer, size_t size) {
    size_t n = std::min<size_t>({size, data.size() - pos, 7});  // tiny pieces: every refill path
    std::memcpy(buffer, data.data() + pos, n);
    pos += n;
    return n;
  };
  Tree t;
  ASSERT_TRUE(read_pickle(read, data.size(), t));
  EXPECT_EQ(*t.as_int(*t.at(get(t, t.root(), "big_list").id(), 1234)), 1234);
  EXPECT_EQ(t.str(*t.at(get(t, t.root(), "strings").id(), 3)), std::string(300, 'x'));
}

}  // namespace
}  // namespace oomdoc::pickle
