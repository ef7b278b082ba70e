// UTF-16 logs (PowerShell's `>`, Windows tools) are transcoded to UTF-8 piece by piece: every
// character, a surrogate pair or a byte split across the 128 KiB read pieces included, must come
// out as the UTF-8 log would give it, and the events, lines and figures must be the same.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "readers/log_scanner.h"

namespace oomdoc {
namespace {

std::string utf8(const std::u32string& text) {
  std::string out;
  for (char32_t c : text) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xc0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xe0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (c & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (c & 0x3f));
    }
  }
  return out;
}

std::string utf16(const std::u32string& text, bool big) {
  std::string out = big ? std::string("\xfe\xff") : std::string("\xff\xfe");
  auto unit = [&](uint32_t u) {
    const char hi = static_cast<char>(u >> 8), lo = static_cast<char>(u & 0xff);
    out += big ? hi : lo;
    out += big ? lo : hi;
  };
  for (char32_t c : text) {
    if (c >= 0x10000) {
      unit(0xd800 + ((c - 0x10000) >> 10));
      unit(0xdc00 + ((c - 0x10000) & 0x3ff));
    } else {
      unit(c);
    }
  }
  return out;
}

std::u32string widen(const std::string& ascii) { return std::u32string(ascii.begin(), ascii.end()); }

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(LogScannerUtf16, EveryCharacterAndEventSurvivesTheReadPieces) {
  // About 440 KiB of UTF-16: several 128 KiB pieces, with 1-, 2-, 3- and 4-byte characters
  // (é, €, 😀 as a surrogate pair) at every offset, so some straddle a piece's end.
  std::u32string text;
  for (int i = 0; i < 8000; ++i) {
    text += widen("step " + std::to_string(i) + " ") + U"d\u00e9j\u00e0 \u20ac " + (i % 3 == 0 ? U"\U0001F600" : U"") +
            widen(" loss 0.5\n");
  }
  text += widen("Traceback (most recent call last):\n  File \"/home/") + U"r\u00e9my\U0001F600" +
          widen("/train.py\", line 7, in <module>\n    loss.backward()\n");
  text += widen("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity "
                "of 7.80 GiB of which 10.19 MiB is free. Including non-PyTorch memory, this process has 7.70 GiB memory "
                "in use. Of the allocated memory 6.90 GiB is allocated by PyTorch, and 120.00 MiB is reserved by "
                "PyTorch but unallocated.\n");
  const std::string expected_file = "/home/r\xc3\xa9my\xf0\x9f\x98\x80/train.py";
  auto reference = scan_file(write_temp("utf8.log", utf8(text)));
  ASSERT_TRUE(reference.ok());
  ASSERT_EQ(reference->events.size(), 1u);
  for (bool big : {false, true}) {
    SCOPED_TRACE(big ? "UTF-16BE" : "UTF-16LE");
    const std::string bytes = utf16(text, big);
    ASSERT_GT(bytes.size(), 3u * 128 * 1024);
    auto scan = scan_file(write_temp(big ? "u16be.log" : "u16le.log", bytes));
    ASSERT_TRUE(scan.ok()) << scan.error().message;
    EXPECT_EQ(scan->lines, reference->lines);
    EXPECT_EQ(scan->lines, 8004u);
    ASSERT_EQ(scan->events.size(), 1u);
    const OomEvent& e = scan->events[0];
    EXPECT_EQ(e.line, 8004u);
    EXPECT_EQ(e.bytes("requested"), 20 * kMiB);
    EXPECT_EQ(e.message, reference->events[0].message);
    ASSERT_TRUE(e.traceback.has_value());
    ASSERT_EQ(e.traceback->frames.size(), 1u);
    EXPECT_EQ(e.traceback->frames[0].file, expected_file);
  }
}

// UTF-32 with its BOM is refused with the conversion to run, not read as an empty log.
// Without a BOM, a log that opens with Chinese progress lines has NUL high bytes only in its ASCII
// units (far fewer than half): still UTF-16, when every unit reads as text.
TEST(LogScannerUtf16, NonLatinTextWithoutABomIsUtf16) {
  std::u32string text;
  // (开, U+5F00, has a NUL low byte; 🤗 is a surrogate pair.)
  text += U"开始训练 🤗 Transformers\r\n";
  for (int i = 0; i < 60; ++i) text += U"训练进度 " + widen(std::to_string(i)) + U"%：正在加载数据集和模型权重\r\n";
  text += widen("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 1 has a total capacity of "
                "23.55 GiB of which 5.12 GiB is free.\r\n");
  for (bool big : {false, true}) {
    const std::string bytes = utf16(text, big).substr(2);   // without the BOM
    auto scan = scan_file(write_temp(big ? "zh_be.log" : "zh_le.log", bytes));
    ASSERT_TRUE(scan.ok()) << scan.error().message;
    ASSERT_EQ(scan->events.size(), 1u) << big;
    EXPECT_EQ(scan->events[0].line, 62u);
    EXPECT_EQ(scan->events[0].bytes("requested"), 8ull << 30);
  }
  // Nothing but Chinese and line breaks (a NUL high byte in one unit of 25).
  std::u32string chinese;
  for (int i = 0; i < 50; ++i) chinese += U"训练开始，批次大小为三十二，学习率为零点零零一\n第一轮训练完成，损失值下降\n";
  chinese += widen("RuntimeError: CUDA error: out of memory\n");
  auto dense = scan_file(write_temp("zh_dense.log", utf16(chinese, false).substr(2)));
  ASSERT_TRUE(dense.ok()) << dense.error().message;
  EXPECT_EQ(dense->events.size(), 1u);
  // Random bytes with no NUL on one side are not taken for it: a unit that is no text (a C0 control) fails it.
  std::string binary;
  for (int i = 0; i < 512; ++i) {
    binary += static_cast<char>(i % 3 == 0 ? 0 : 0x01);
    binary += static_cast<char>(0x05);
  }
  auto not_text = scan_file(write_temp("ctl.log", binary));
  EXPECT_FALSE(not_text.ok() && not_text->events.size() > 0);
}

TEST(LogScannerUtf16, Utf32IsRefusedWithTheWayOut) {
  std::string bytes("\xff\xfe\x00\x00", 4);
  for (char c : std::string("RuntimeError: CUDA out of memory.\n")) bytes += std::string{c, '\0', '\0', '\0'};
  const std::string path = write_temp("u32le.log", bytes);
  auto scan = scan_file(path);
  ASSERT_FALSE(scan.ok());
  EXPECT_EQ(scan.error().message, path + ": UTF-32 text, which explain does not read; convert it first: iconv -f "
                                         "UTF-32 -t UTF-8 '" + path + "' > '" + path + ".utf8.log'");
}

TEST(LogScannerUtf16, LoneSurrogatesBecomeReplacementCharacters) {
  // A high surrogate followed by an ASCII unit, and a lone low surrogate: U+FFFD each, the rest intact.
  std::string bytes = "\xff\xfe";
  for (uint32_t u : {0xd83du, uint32_t{'a'}, 0xde00u, uint32_t{'b'}, uint32_t{'\n'}}) {
    bytes += static_cast<char>(u & 0xff);
    bytes += static_cast<char>(u >> 8);
  }
  const std::string oom = "RuntimeError: CUDA error: out of memory\n";
  for (char c : oom) {
    bytes += c;
    bytes += '\0';
  }
  auto scan = scan_file(write_temp("surrogates.log", bytes));
  ASSERT_TRUE(scan.ok());
  EXPECT_EQ(scan->lines, 2u);
  ASSERT_EQ(scan->events.size(), 1u);
  EXPECT_EQ(scan->events[0].line, 2u);
}

}  // namespace
}  // namespace oomdoc
