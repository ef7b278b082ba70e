#include "readers/safetensors_header.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include <unistd.h>

namespace oomdoc {
namespace {

std::string with_length(const std::string& header, uint64_t length) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return out + header;
}
std::string file_bytes(const std::string& header, size_t data_bytes) {
  return with_length(header, header.size()) + std::string(data_bytes, '\0');
}

TEST(SafetensorsHeader, CountsElementsAndBytesPerDtype) {
  std::string header = R"({"__metadata__": {"format": "pt"},
    "a": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]},
    "b": {"dtype": "F32", "shape": [4], "data_offsets": [12, 28]},
    "q": {"dtype": "I32", "shape": [2, 2], "data_offsets": [28, 44]}})";
  std::string bytes = file_bytes(header, 44);
  auto s = parse_safetensors_header(bytes, bytes.size(), "model.safetensors");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->total_elements, 14u);
  EXPECT_EQ(s->total_bytes, 44u);
  EXPECT_EQ(s->elements_by_dtype.at("BF16"), 6u);
  EXPECT_EQ(s->elements_by_dtype.at("F32"), 4u);
  EXPECT_EQ(s->tensors.size(), 3u);
}

TEST(SafetensorsHeader, HeaderLongerThanTheFile) {
  std::string bytes = with_length("{}", 9000000000000000000ull);
  auto s = parse_safetensors_header(bytes, 123, "model.safetensors");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "model.safetensors: header length 9000000000000000000 is larger than the file (123 bytes)");
}

TEST(SafetensorsHeader, MalformedHeadersAreClearErrors) {
  auto check = [](const std::string& header, size_t data, const std::string& expected) {
    std::string bytes = file_bytes(header, data);
    auto s = parse_safetensors_header(bytes, bytes.size(), "m.safetensors");
    ASSERT_FALSE(s) << header;
    EXPECT_EQ(s.error().message, expected);
  };
  check("{not json", 0, "m.safetensors: header is not valid JSON");
  check("[1, 2]", 0, "m.safetensors: header is not a JSON object");
  check(R"({"w": {"dtype": "F32", "shape": [-2, 3], "data_offsets": [0, 24]}})", 24,
        "m.safetensors: tensor \"w\": invalid shape [-2,3]");
  check(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 24,
        "m.safetensors: tensor \"w\": 6 elements of F32 need 24 bytes, data_offsets give 20");
  check(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}})", 10,
        "m.safetensors: tensor \"w\": data_offsets [0, 24] outside the 10 data bytes");
  check(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [24, 0]}})", 24,
        "m.safetensors: tensor \"w\": data_offsets [24, 0] end before they begin");
  check(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4, "m.safetensors: tensor \"w\": missing dtype");
  check(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 4]}})", 4,
        "m.safetensors: tensor \"w\": shape overflows");
  auto tiny = parse_safetensors_header("abc", 3, "m.safetensors");
  ASSERT_FALSE(tiny);
  EXPECT_EQ(tiny.error().message, "m.safetensors: too short for a safetensors file (3 bytes)");
}

TEST(SafetensorsHeader, FolderWithIndexReadsEveryShard) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "oomdoc_safetensors_index_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir / name, std::ios::binary) << content;
  };
  write("model-00001-of-00002.safetensors",
        file_bytes(R"({"a": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]}})", 16));
  write("model-00002-of-00002.safetensors",
        file_bytes(R"({"b": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}})", 8));
  write("model.safetensors.index.json",
        R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
  auto s = read_safetensors_folder(dir.string());
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->total_elements, 12u);
  EXPECT_EQ(s->total_bytes, 24u);
  // A name stored in two shards counts once, from the file the index names.
  write("model-00002-of-00002.safetensors",
        file_bytes(R"({"a": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]},
                       "b": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [16, 24]}})", 24));
  auto twice = read_safetensors_folder(dir.string());
  ASSERT_TRUE(twice) << twice.error().message;
  EXPECT_EQ(twice->total_elements, 12u);
  EXPECT_EQ(twice->total_bytes, 24u);
  EXPECT_EQ(twice->tensors.size(), 2u);
  // An index that lists a name no shard holds (the safetensors conversion keeps the original index
  // and drops tied copies such as lm_head.weight) reads as the shards hold it: nothing counted for it.
  write("model-00002-of-00002.safetensors",
        file_bytes(R"({"b": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}})", 8));
  write("model.safetensors.index.json",
        R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",
                           "lm_head.weight": "model-00001-of-00002.safetensors"}})");
  auto tied = read_safetensors_folder(dir.string());
  ASSERT_TRUE(tied) << tied.error().message;
  EXPECT_EQ(tied->total_elements, 12u);
  // A name the index puts in a shard that does not hold it is counted from the shard that does.
  write("model.safetensors.index.json",
        R"({"weight_map": {"a": "model-00002-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
  write("model-00001-of-00002.safetensors",
        file_bytes(R"({"a": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]}})", 16));
  auto misplaced = read_safetensors_folder(dir.string());
  ASSERT_TRUE(misplaced) << misplaced.error().message;
  EXPECT_EQ(misplaced->total_elements, 4u);   // (the index lists only shard 2: shard 1 is not read)
  write("model.safetensors.index.json", R"({"weight_map": {"a": "../etc/passwd"}})");
  auto escape = read_safetensors_folder(dir.string());
  ASSERT_FALSE(escape);
  EXPECT_NE(escape.error().message.find("outside the folder"), std::string::npos);
  fs::remove_all(dir);
}

// Without an index, model.safetensors is what transformers loads: a consolidated.safetensors beside
// it (Mistral's own format, the same weights) is not counted twice.
TEST(SafetensorsHeader, ModelSafetensorsBesideAConsolidatedCopyIsTheModel) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("oomdoc_safetensors_copy_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string weights = file_bytes(R"({"a": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]}})", 16);
  std::ofstream(dir / "model.safetensors", std::ios::binary) << weights;
  std::ofstream(dir / "consolidated.safetensors", std::ios::binary) << weights;
  auto s = read_safetensors_folder(dir.string());
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->total_elements, 8u);
  EXPECT_EQ(s->total_bytes, 16u);
  fs::remove_all(dir);
}

// A dtype the format does not define has no width: refused, naming the file, tensor and the list.
TEST(SafetensorsHeader, UnknownDtypeIsRefusedNamingFileAndTensor) {
  std::string bytes = file_bytes(R"({"w": {"dtype": "BF17", "shape": [2], "data_offsets": [0, 4]}})", 4);
  auto s = parse_safetensors_header(bytes, bytes.size(), "m.safetensors");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message,
            "m.safetensors: tensor \"w\": unknown dtype \"BF17\" (the safetensors dtypes: BOOL, F4, F6_E2M3, F6_E3M2, "
            "U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64)");
}

// F4 (MXFP4) packs two elements per byte, the F6 formats four per three bytes; shapes are elements.
TEST(SafetensorsHeader, SubByteDtypesArePacked) {
  std::string header = R"({"blocks": {"dtype": "F4", "shape": [3, 4], "data_offsets": [0, 6]},
    "six": {"dtype": "F6_E2M3", "shape": [8], "data_offsets": [6, 12]},
    "scales": {"dtype": "F8_E8M0", "shape": [3], "data_offsets": [12, 15]}})";
  std::string bytes = file_bytes(header, 15);
  auto s = parse_safetensors_header(bytes, bytes.size(), "m.safetensors");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->total_elements, 23u);
  EXPECT_EQ(s->total_bytes, 15u);
  EXPECT_EQ(s->elements_by_dtype.at("F4"), 12u);
  std::string wrong = file_bytes(R"({"blocks": {"dtype": "F4", "shape": [3, 4], "data_offsets": [0, 12]}})", 12);
  auto w = parse_safetensors_header(wrong, wrong.size(), "m.safetensors");
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().message, "m.safetensors: tensor \"blocks\": 12 elements of F4 need 6 bytes, data_offsets give 12");
  std::string odd = file_bytes(R"({"blocks": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}})", 2);
  auto o = parse_safetensors_header(odd, odd.size(), "m.safetensors");
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().message, "m.safetensors: tensor \"blocks\": 3 elements of F4 are 12 bits, not whole bytes (the "
                               "safetensors library refuses it: MisalignedSlice)");
  EXPECT_EQ(safetensors_dtype_bits("F6_E3M2"), 6u);
  EXPECT_EQ(safetensors_dtype_bits("C64"), 64u);
  EXPECT_EQ(safetensors_dtype_bits("bf16"), 0u);  // names are upper case in the format
}

// Numbered shards say how many files there are: one missing is an incomplete download, with or
// without the index, named in the same one-line error.
TEST(SafetensorsHeader, AMissingShardIsAnErrorNamingIt) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("oomdoc_safetensors_shards_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir / name, std::ios::binary) << content;
  };
  auto shard = [](const char* name) {
    return file_bytes(fmt::format(R"({{"{}": {{"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]}}}})", name), 16);
  };
  write("model-00001-of-00003.safetensors", shard("a"));
  write("model-00003-of-00003.safetensors", shard("c"));
  auto no_index = read_safetensors_folder(dir.string());
  ASSERT_FALSE(no_index);
  EXPECT_EQ(no_index.error().message, (dir / "model-00002-of-00003.safetensors").string() +
                                          ": missing (the shard names say 3 files, 2 are here): an incomplete download?");
  write("model.safetensors.index.json",
        R"({"weight_map": {"a": "model-00001-of-00003.safetensors", "b": "model-00002-of-00003.safetensors",
                           "c": "model-00003-of-00003.safetensors"}})");
  auto index = read_safetensors_folder(dir.string());
  ASSERT_FALSE(index);
  EXPECT_EQ(index.error().message,
            (dir / "model-00002-of-00003.safetensors").string() +
                ": missing (model.safetensors.index.json lists 3 files, 2 are here): an incomplete download?");
  write("model-00002-of-00003.safetensors", shard("b"));
  auto complete = read_safetensors_folder(dir.string());
  ASSERT_TRUE(complete) << complete.error().message;
  EXPECT_EQ(complete->total_elements, 24u);
  fs::remove(dir / "model.safetensors.index.json");
  EXPECT_TRUE(read_safetensors_folder(dir.string()));
  // Names that only look numbered are not shard sets.
  fs::remove(dir / "model-00002-of-00003.safetensors");
  fs::rename(dir / "model-00001-of-00003.safetensors", dir / "model-of-00003.safetensors");
  fs::rename(dir / "model-00003-of-00003.safetensors", dir / "adapter-x-of-y.safetensors");
  EXPECT_TRUE(read_safetensors_folder(dir.string()));
  fs::remove_all(dir);
}

// What the safetensors library refuses on load (Metadata::validate), oomdoc refuses too: the
// tensors must tile the data exactly, and __metadata__ holds strings only.
TEST(SafetensorsHeader, TensorsMustTileTheDataAsTheLibraryChecks) {
  struct Case {
    std::string header;
    size_t data_bytes;
    std::string message;
  };
  const std::string two = R"("a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, )";
  for (const Case& c : std::vector<Case>{
           {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, )"
            R"("b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})", 12,
            "m.safetensors: tensor \"b\" starts at data byte 8 where the previous tensor ends at 4 (a gap); the "
            "safetensors library refuses it (InvalidOffset)"},
           {"{" + two + R"("b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4,
            "m.safetensors: tensor \"b\" starts at data byte 0 where the previous tensor ends at 4 (an overlap); the "
            "safetensors library refuses it (InvalidOffset)"},
           // A name given twice: JSON parsing keeps one entry, and the other's bytes are a gap.
           {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, )"
            R"("w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})", 16,
            "m.safetensors: tensor \"w\" starts at data byte 8 where the previous tensor ends at 0 (a gap); the "
            "safetensors library refuses it (InvalidOffset)"},
           {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 100,
            "m.safetensors: the tensors end at data byte 4 of 100; the safetensors library refuses the unused bytes "
            "(MetadataIncompleteBuffer)"},
           {R"({"__metadata__": {"format": 5}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4,
            "m.safetensors: __metadata__ is not a map of strings"},
       }) {
    const std::string bytes = file_bytes(c.header, c.data_bytes);
    auto s = parse_safetensors_header(bytes, bytes.size(), "m.safetensors");
    ASSERT_FALSE(s) << c.header;
    EXPECT_EQ(s.error().message, c.message);
  }
  // No metadata at all is the library's Option::None.
  const std::string null_metadata =
      file_bytes(R"({"__metadata__": null, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4);
  EXPECT_TRUE(parse_safetensors_header(null_metadata, null_metadata.size(), "m.safetensors"));
}

}  // namespace
}  // namespace oomdoc
