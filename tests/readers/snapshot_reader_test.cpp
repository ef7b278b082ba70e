#include "readers/snapshot_reader.h"

#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyses/snapshot_analysis.h"
#include "support/snapshot_equality.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

using ::testing::HasSubstr;

nlohmann::json expected() {
  return nlohmann::json::parse(testing::read_file(testing::fixture_path("snapshot/expected.json")));
}

// The figures tools/snapshot_totals.py computes, from oomdoc's model and analyses.
nlohmann::json totals(const Snapshot& s) {
  nlohmann::json out = nlohmann::json::array();
  SnapshotOptions options;
  for (int d : s.devices()) {
    DeviceMemory m = summarize_device(s, d);
    Timeline t = replay_timeline(s, d, options);
    nlohmann::json ooms = nlohmann::json::array();
    {
      const auto trace = s.trace(d);
      for (size_t i = 0; i < trace.size(); ++i) {
        if (trace[i].action == TraceAction::kOom) {
          ooms.push_back({{"device_free_bytes", trace[i].device_free()}, {"event_index", i},
                          {"requested_bytes", trace[i].size}});
        }
      }
    }
    out.push_back({{"active_bytes", m.active_bytes}, {"allocated_bytes", m.allocated_bytes},
                   {"baseline_bytes", t.baseline_bytes}, {"device", d},
                   {"inactive_bytes", m.inactive_bytes}, {"largest_free_block_bytes", m.largest_free_block_bytes},
                   {"ooms", ooms}, {"peak_live_bytes", t.peak_live_delta},
                   {"requested_bytes", m.requested_bytes.value_or(0)}, {"reserved_bytes", m.reserved_bytes},
                   {"segments", m.segments}, {"trace_events", t.events}});
  }
  return out;
}

Snapshot read_fixture(const std::string& name) {
  auto s = read_snapshot_file(testing::fixture_path("snapshot/" + name));
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return s.ok() ? std::move(s.value()) : Snapshot{};
}

class TrainVariants : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainVariants, EveryEncodingGivesTheReferenceFigures) {
  Snapshot s = read_fixture(GetParam());
  EXPECT_EQ(totals(s), expected()["train"]);
  EXPECT_EQ(s.layout, SnapshotLayout::kDeviceTraces);
  EXPECT_EQ(s.trace_device_count(), 2u);
  ASSERT_TRUE(s.allocator_settings.has_value());
  EXPECT_EQ(s.allocator_settings->max_split_size, -1);
  EXPECT_EQ(s.allocator_settings->expandable_segments, false);
  EXPECT_EQ(s.annotations.size(), 6u);  // ProfilerStep#0..2 on each device
}

INSTANTIATE_TEST_SUITE_P(Encodings, TrainVariants,
                         ::testing::Values("train_p2.pickle", "train_p3.pickle", "train_p4.pickle",
                                           "train_p5.pickle", "train_p4_optimized.pickle", "train.json"));

TEST(SnapshotReader, EncodingsAgreeEventForEvent) {
  Snapshot a = read_fixture("train_p2.pickle"), b = read_fixture("train.json");
  ASSERT_EQ(a.trace_device_count(), b.trace_device_count());
  for (int d = 0; d < int(a.trace_device_count()); ++d) {
    ASSERT_EQ(a.trace(d).size(), b.trace(d).size());
    for (size_t i = 0; i < a.trace(d).size(); ++i) {
      const TraceEvent &x = a.trace(d)[i], &y = b.trace(d)[i];
      ASSERT_EQ(x.addr, y.addr);
      ASSERT_EQ(x.size, y.size);
      ASSERT_EQ(x.time_us, y.time_us);
      ASSERT_EQ(a.stack(x.stack).size(), b.stack(y.stack).size());
    }
  }
  // Interning: JSON expands every shared frame, yet both end with the same distinct tables.
  EXPECT_EQ(a.frames.size(), b.frames.size());
  EXPECT_EQ(a.stack_count(), b.stack_count());
}

TEST(SnapshotReader, ListLayoutOf113) {
  Snapshot s = read_fixture("list_1_13_p2.pickle");
  EXPECT_EQ(s.layout, SnapshotLayout::kSegmentList);
  // A dict with segments and no device_traces is not called a 2.1 trace dump.
  auto segments_only = read_snapshot_bytes(R"({"segments": []})", "segments.json");
  ASSERT_TRUE(segments_only.ok()) << segments_only.error().message;
  EXPECT_EQ(segments_only->layout, SnapshotLayout::kSegmentsDict);
  EXPECT_EQ(snapshot_layout_name(segments_only->layout), "dict with segments, no device_traces");
  // A cut JSON file: where, and what, without the JSON library's own preamble.
  auto cut = read_snapshot_bytes(R"({"segments": [)", "cut.json");
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.error().message.find("json.exception"), std::string::npos) << cut.error().message;
  EXPECT_NE(cut.error().message.find("invalid JSON: syntax error while parsing value - unexpected end of input"),
            std::string::npos) << cut.error().message;
  EXPECT_EQ(s.trace_device_count(), 0u);
  EXPECT_EQ(totals(s), expected()["list_1_13_p2.pickle"]);
  // Block addresses are rebuilt as running sums; requested sizes come from history.
  const SnapshotSegment& seg = s.segments.front();
  EXPECT_FALSE(seg.requested_size.has_value());
  EXPECT_EQ(seg.blocks.front().address, seg.address);
  if (seg.blocks.size() > 1) {
    EXPECT_EQ(seg.blocks[1].address, seg.address + seg.blocks[0].size);
  }
}

TEST(SnapshotReader, HistoryLayoutOf20) {
  Snapshot s = read_fixture("history_2_0_p4.pickle");
  EXPECT_EQ(s.layout, SnapshotLayout::kHistory);
  EXPECT_EQ(totals(s), expected()["history_2_0_p4.pickle"]);
  size_t with_stack = 0;
  for (const auto& seg : s.segments) {
    for (const auto& b : seg.blocks) with_stack += b.stack != kNoStack;
  }
  EXPECT_GT(with_stack, 0u);  // frames taken from history[0]
  ASSERT_EQ(s.trace(0).size(), 1u);
  EXPECT_EQ(s.trace(0)[0].action, TraceAction::kSnapshot);
}

TEST(SnapshotReader, ExpandableSegmentsPrivatePoolsAndWrappedTrace) {
  Snapshot s = read_fixture("expandable_p4.pickle");
  EXPECT_EQ(totals(s), expected()["expandable_p4.pickle"]);
  size_t maps = 0, expandable = 0, private_pools = 0;
  for (const auto& e : s.trace(0)) maps += e.action == TraceAction::kSegmentMap;
  for (const auto& seg : s.segments) {
    expandable += seg.is_expandable;
    private_pools += seg.private_pool();
  }
  EXPECT_GT(maps, 0u);
  EXPECT_GT(expandable, 0u);
  EXPECT_EQ(private_pools, 1u);
  EXPECT_EQ(s.allocator_settings->trace_alloc_overflowed, true);
  EXPECT_EQ(s.allocator_settings->trace_alloc_max_entries, 100u);
  EXPECT_EQ(s.trace(0).size(), 100u);
}

TEST(SnapshotReader, UnknownKeysAreIgnoredAndNewFieldsRead) {
  std::string json = R"({"segments": [{"device": 0, "address": 4096, "total_size": 2097152,
      "allocated_size": 512, "active_size": 512, "requested_size": 100, "stream": 0,
      "segment_type": "small", "future_key": {"x": [1, 2]},
      "blocks": [{"address": 4096, "size": 512, "requested_size": 100, "state": "active_allocated",
                  "frames": [{"filename": "a.py", "line": 3, "name": "f", "fx_node_op": "call"}]},
                 {"address": 4608, "size": 2096640, "requested_size": 0, "state": "inactive"}]}],
    "device_traces": [[{"action": "alloc", "addr": 4096, "size": 100, "stream": 0, "time_us": 5,
                        "compile_context": "N/A", "user_metadata": "step 1", "pool_id": [0, 0],
                        "frames": [{"filename": "a.py", "line": 3, "name": "f"}]},
                       {"action": "annotate", "addr": 4096, "size": 0, "stream": 7}]],
    "host_segments": [], "categories": ["x"]})";
  auto s = read_snapshot_bytes(json, "t.json");
  ASSERT_TRUE(s.ok()) << s.error().message;
  const TraceEvent& e = s->trace(0)[0];
  EXPECT_EQ(s->str(s->trace_extra(0).compile_context), "N/A");
  EXPECT_EQ(s->str(s->trace_extra(0).user_metadata), "step 1");
  EXPECT_EQ(s->trace_extra(0).stream, 0);
  EXPECT_EQ(s->trace_extra(1).stream, 7);  // only the entries with a field set are stored
  EXPECT_EQ(s->trace_extras.size(), 2u);
  EXPECT_TRUE(e.has_time);
  EXPECT_EQ(s->trace(0)[1].action, TraceAction::kAnnotate);
  // The block's and the event's stacks are one interned stack.
  EXPECT_EQ(s->segments[0].blocks[0].stack, e.stack);
  EXPECT_FALSE(s->segments[0].is_large);
}

// A line that is not a positive integer is unknown (0), not a negative read as unsigned.
TEST(SnapshotReader, ANegativeFrameLineIsUnknown) {
  std::string json = R"({"segments": [], "device_traces": [[{"action": "alloc", "addr": 4096, "size": 100,
      "stream": 0, "frames": [{"filename": "a.py", "line": -1, "name": "f"}]}]]})";
  auto s = read_snapshot_bytes(json, "t.json");
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(s->frames.size(), 1u);
  EXPECT_EQ(s->frames[0].line, 0u);
  // Above INT64_MAX a line is kept as written: 2^64-1 (unsigned -1 from C++ symbolization), 2^63.
  for (const char* line : {"18446744073709551615", "9223372036854775808"}) {
    auto big = read_snapshot_bytes(std::string(R"({"segments": [], "device_traces": [[{"action": "alloc", "addr": 4096,
        "size": 100, "stream": 0, "frames": [{"filename": "a.py", "line": )") + line + R"(, "name": "f"}]}]]})",
                                   "t.json");
    ASSERT_TRUE(big.ok()) << big.error().message;
    EXPECT_EQ(std::to_string(big->frames.at(0).line), line);
  }
}

TEST(SnapshotReader, ErrorsNameTheFileAndThePlace) {
  auto err = [](std::string_view data) {
    auto s = read_snapshot_bytes(data, "x.pickle");
    return s.ok() ? std::string("<ok>") : s.error().message;
  };
  EXPECT_EQ(err(""), "x.pickle: the file is empty");
  EXPECT_THAT(err("GIF89a"), HasSubstr("x.pickle: not a memory snapshot"));
  // Compressed snapshots and torch.save archives are named as such, not by their first byte.
  EXPECT_EQ(err(std::string("\x1f\x8b\x08\x00", 4)),
            "x.pickle: not a memory snapshot: it is gzip-compressed: decompress it first (zcat FILE | oomdoc snapshot -)");
  EXPECT_EQ(err(std::string("\x28\xb5\x2f\xfd\x00", 5)),
            "x.pickle: not a memory snapshot: it is zstd-compressed: decompress it first (zstdcat FILE | oomdoc snapshot -)");
  EXPECT_EQ(err("PK\x03\x04" "archive/data.pkl"),
            "x.pickle: not a memory snapshot: it is a zip archive, as torch.save writes for tensors and checkpoints; "
            "a snapshot is the pickle torch.cuda.memory._dump_snapshot() writes");
  EXPECT_THAT(err("{\"a\": 1}"), HasSubstr("x.pickle: neither 'segments' nor 'device_traces' found"));
  EXPECT_THAT(err("[1, 2]"), HasSubstr("x.pickle: segments[0] is not a dict"));
  EXPECT_THAT(err("{\"device_traces\": [[{\"action\": \"alloc\", \"addr\": \"x\", \"size\": 1}]]}"),
              HasSubstr("x.pickle: device_traces[0][0]: 'addr' / 'device_free' is not an integer"));
  EXPECT_THAT(err("{\"segments\": [{\"device\": 0}]}"), HasSubstr("segments[0]: 'total_size' is missing"));
  // torch writes an address with every block and segment event, and device_free with every OOM:
  // without them the replay would put the block at address 0, or call the device full.
  EXPECT_EQ(err("{\"device_traces\": [[{\"action\": \"alloc\", \"address\": 4096, \"size\": 512}]]}"),
            "x.pickle: device_traces[0][0]: 'addr' is missing");
  EXPECT_EQ(err("{\"device_traces\": [[{\"action\": \"free_requested\", \"addr\": 4096}]]}"),
            "x.pickle: device_traces[0][0]: 'size' is missing");
  EXPECT_EQ(err("{\"device_traces\": [[{\"action\": \"oom\", \"size\": 512}]]}"),
            "x.pickle: device_traces[0][0]: 'device_free' is missing from an oom entry");
  EXPECT_THAT(err("{\"segments\": [{\"device\": null, \"address\": 0, \"total_size\": 512, \"blocks\": []}]}"),
              HasSubstr("x.pickle: segments[0].device is not an integer"));
  // A UTF-8 byte order mark before JSON (PowerShell's output) is skipped, as JSON parsers do.
  EXPECT_EQ(err("\xef\xbb\xbf{\"segments\": []}"), "<ok>");
  EXPECT_THAT(err("{\"segments\": [1, 2"), HasSubstr("x.pickle: offset"));
  EXPECT_THAT(err(std::string(20000, '[')), HasSubstr("nesting deeper than 10000 levels"));
  EXPECT_THAT(err(std::string("\x80\x04\x63os\nsystem\n", 12)), HasSubstr("x.pickle: offset 2: GLOBAL: refused: this opcode"));
  EXPECT_THAT(err(std::string("\x80\x04\x63os\nsystem\n", 13)),
              HasSubstr("x.pickle: offset 2: GLOBAL: refused (imports os.system): this opcode imports"));
}

// A protocol-2 pickle of {"device_traces": [[entry...]]}, its list written in batches of 1000
// (APPENDS) as pickle.dump writes it. An entry is an alloc of `size` bytes at `addr`, or a
// reference to entry `again` (memo slot = its index, as if the pickler had seen it before).
struct TraceEntry {
  int64_t addr = 0;
  int64_t size = 0;
  int again = -1;
  bool bad_addr = false;
};
std::string trace_pickle(const std::vector<TraceEntry>& entries) {
  std::string out = "\x80\x02}(";
  auto str = [&](std::string_view s) {
    out += 'X';
    uint32_t n = static_cast<uint32_t>(s.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    out += s;
  };
  auto binint = [&](int32_t v) {
    out += 'J';
    out.append(reinterpret_cast<const char*>(&v), 4);
  };
  str("device_traces");
  out += "](](";
  for (size_t i = 0; i < entries.size(); ++i) {
    const TraceEntry& e = entries[i];
    if (e.again >= 0) {
      out += 'j';  // LONG_BINGET
      uint32_t slot = static_cast<uint32_t>(e.again);
      out.append(reinterpret_cast<const char*>(&slot), 4);
    } else {
      out += "}r";  // EMPTY_DICT, LONG_BINPUT i
      uint32_t slot = static_cast<uint32_t>(i);
      out.append(reinterpret_cast<const char*>(&slot), 4);
      out += '(';
      str("action"), str("alloc"), str("addr");
      if (e.bad_addr) {
        str("x");
      } else {
        binint(static_cast<int32_t>(e.addr));
      }
      str("size"), binint(static_cast<int32_t>(e.size));
      out += 'u';
    }
    if (i % 1000 == 999 || i + 1 == entries.size()) out += i + 1 == entries.size() ? "e" : "e(";
  }
  out += "eu.";  // close the device list, device_traces, the top dict
  return out;
}

TEST(SnapshotReader, LongTraceListsInBatchesKeepEveryEntryInOrder) {
  std::vector<TraceEntry> entries;
  for (int i = 0; i < 2500; ++i) entries.push_back({4096 + 512 * i, i + 1});
  auto s = read_snapshot_bytes(trace_pickle(entries), "t.pickle");
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(s->trace(0).size(), 2500u);
  EXPECT_EQ(s->trace(0)[1999].addr, 4096u + 512 * 1999);
  EXPECT_EQ(s->trace(0)[2499].size, 2500u);
}

TEST(SnapshotReader, AnEntryReferencedTwiceIsCopiedInPlace) {
  // The second batch repeats entry 5: the list is no longer one run of entries, so it is read
  // item by item (the folder gives back what it had taken as a run).
  std::vector<TraceEntry> entries;
  for (int i = 0; i < 1500; ++i) entries.push_back({4096 + 512 * i, i + 1});
  entries[1200] = TraceEntry{0, 0, 5};
  auto s = read_snapshot_bytes(trace_pickle(entries), "t.pickle");
  ASSERT_TRUE(s.ok()) << s.error().message;
  const auto trace = s->trace(0);
  ASSERT_EQ(trace.size(), 1500u);
  EXPECT_EQ(trace[1199].addr, 4096u + 512 * 1199);
  EXPECT_EQ(trace[1200].addr, 4096u + 512 * 5);
  EXPECT_EQ(trace[1200].size, 6u);
  EXPECT_EQ(trace[1201].addr, 4096u + 512 * 1201);
}

// {"segments": [segment_count segments], "device_traces": [[]]} where every segment's 'blocks'
// is the same memoized list of block_count blocks (a memo reference, as pickle writes for an object
// named twice): a few bytes per segment that the model would copy in full.
std::string shared_blocks_pickle(int segment_count, int block_count) {
  auto str = [](std::string_view s) {  // SHORT_BINUNICODE (appended piece by piece: g++ 12 warns falsely otherwise)
    std::string out(1, '\x8c');
    out += char(s.size());
    out += s;
    return out;
  };
  auto int32 = [](uint32_t v) {
    std::string out = "J";
    for (int i = 0; i < 4; ++i) out += char((v >> (8 * i)) & 0xff);
    return out;
  };
  std::string out = "\x80\x04}(";
  out += str("segments") + "](";
  for (int k = 0; k < segment_count; ++k) {
    out += "}(" + str("address") + int32(uint32_t(k) << 20) + str("total_size") + int32(block_count * 512) +
           str("blocks");
    if (k == 0) {
      out += "]\x94(";  // EMPTY_LIST MEMOIZE (slot 0) MARK
      for (int i = 0; i < block_count; ++i) {
        out += "}(" + str("size") + int32(512) + str("state") + str("active_allocated") + "u";
      }
      out += "e";
    } else {
      out += std::string("h\x00", 2);  // BINGET 0: the same list again
    }
    out += "u";
  }
  out += 'e';
  out += str("device_traces") + "]]au.";
  return out;
}

TEST(SnapshotReader, SharedSubObjectsAreReadWithinABudget) {
  auto fine = read_snapshot_bytes(shared_blocks_pickle(100, 2000), "t.pickle");
  ASSERT_TRUE(fine.ok()) << fine.error().message;
  ASSERT_EQ(fine->segments.size(), 100u);
  EXPECT_EQ(fine->segments[99].blocks.size(), 2000u);
  EXPECT_EQ(fine->segments[99].blocks[1999].address, (99u << 20) + 1999u * 512);

  // 1000 references to 2000 blocks: 2 million blocks from 122 KB, over the 1Mi-object floor.
  const std::string hostile = shared_blocks_pickle(1000, 2000);
  EXPECT_EQ(hostile.size(), 122039u);
  auto s = read_snapshot_bytes(hostile, "t.pickle");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "t.pickle: the segments, blocks and trace entries expand to more than 1048576 objects "
            "through shared references (a hostile or corrupt snapshot)");
}

TEST(SnapshotReader, ABadEntryInALaterBatchIsNamedByItsIndex) {
  std::vector<TraceEntry> entries;
  for (int i = 0; i < 1500; ++i) entries.push_back({4096 + 512 * i, i + 1});
  entries[1234].bad_addr = true;
  auto s = read_snapshot_bytes(trace_pickle(entries), "t.pickle");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "t.pickle: device_traces[0][1234]: 'addr' / 'device_free' is not an integer");
}

// Sizes are byte counts: a negative one is a damaged file, never 2^64 - 5 bytes ("16.00 EiB").
// Addresses keep their two's complement reading.
TEST(SnapshotReader, NegativeSizesAreErrorsNamingTheField) {
  auto err = [](std::string_view data) {
    auto s = read_snapshot_bytes(data, "x.json");
    return s.ok() ? std::string("<ok>") : s.error().message;
  };
  auto segment = [](const std::string& fields, const std::string& block = "") {
    return R"({"segments": [{"device": 0, "address": 4096, "total_size": 2097152, "stream": 0)" + fields +
           R"(, "blocks": [{"address": 4096, "size": 512, "state": "active_allocated")" + block + "}]}]}";
  };
  EXPECT_EQ(err(R"({"segments": [{"device": 0, "address": 4096, "total_size": 2097152}, {"device": 0,
                "address": 8192, "total_size": 2097152}, {"device": 0, "address": 9999, "total_size": 1},
                {"device": 0, "address": 0, "total_size": -5}]})"),
            "x.json: segments[3].total_size is negative (-5)");
  EXPECT_EQ(err(segment(R"(, "allocated_size": -1)")), "x.json: segments[0].allocated_size is negative (-1)");
  EXPECT_EQ(err(segment(R"(, "active_size": -2)")), "x.json: segments[0].active_size is negative (-2)");
  EXPECT_EQ(err(segment(R"(, "requested_size": -3)")), "x.json: segments[0].requested_size is negative (-3)");
  EXPECT_EQ(err(segment("", R"(, "requested_size": -7)")), "x.json: segments[0].blocks[0].requested_size is negative (-7)");
  EXPECT_EQ(err(R"({"segments": [{"device": 0, "address": 0, "total_size": 1024, "blocks": [{"size": 512},
                {"size": -512}]}]})"),
            "x.json: segments[0].blocks[1].size is negative (-512)");
  EXPECT_EQ(err(R"({"device_traces": [[{"action": "alloc", "addr": 1, "size": -5}]]})"),
            "x.json: device_traces[0][0]: 'size' is negative (-5)");
  // Sizes beyond any device (here 2^63) are a damaged file, not a number to sum in the replay.
  EXPECT_EQ(err(R"({"device_traces": [[{"action": "alloc", "addr": 1, "size": 9223372036854775808}]]})"),
            "x.json: device_traces[0][0]: 'size' is 9223372036854775808 bytes, more than any device holds");
  // So are segments, or blocks, that add up past it: four segments of 2^62 bytes would wrap the
  // device's 64-bit total to 0.
  std::string four = R"({"segments": [)";
  for (int i = 0; i < 4; ++i) {
    four += fmt::format(R"({}{{"device": 0, "address": {}, "total_size": 4611686018427387904, "blocks": [{{"address": {},
                        "size": 4611686018427387904, "state": "active_allocated"}}]}})", i ? ", " : "",
                        (uint64_t{1} << 62) * static_cast<uint64_t>(i), (uint64_t{1} << 62) * static_cast<uint64_t>(i));
  }
  four += "]}";
  EXPECT_EQ(err(four), "x.json: segments[0]: the segments of cuda:0 add up to more than any device holds");
  std::string many_blocks = R"({"segments": [{"device": 1, "address": 0, "total_size": 1048576, "blocks": [)";
  for (int i = 0; i < 3; ++i) many_blocks += fmt::format(R"({}{{"size": 562949953421312}})", i ? ", " : "");   // 2^49 each
  many_blocks += "]}]}";
  EXPECT_EQ(err(many_blocks), "x.json: segments[0]: the blocks of cuda:1 add up to more than any device holds");
  // A pickled size past 64 bits (LONG1, 2^70) is said as such, not as its saturated 2^64 - 1.
  auto text = [](std::string_view s) {
    std::string out = "X";
    const uint32_t n = static_cast<uint32_t>(s.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    return out + std::string(s);
  };
  const std::string huge = std::string("\x80\x02}(") + text("device_traces") + "](](}(" + text("action") + text("alloc") +
                           text("addr") + "K\x01" + text("size") + std::string("\x8a\x09\0\0\0\0\0\0\0\0\x40", 11) +
                           "ueeu.";
  auto big = read_snapshot_bytes(huge, "x.pickle");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().message,
            "x.pickle: device_traces[0][0]: 'size' does not fit in 64 bits, more than any device holds");
  // And a trace's running sums: three allocations (or segments) of 2^49 bytes pass 1 PiB at the third
  // entry (2^13 of them wrapped the replay's 64-bit sums: live negative, a peak stuck at 8 EiB);
  // frees of memory allocated before recording count as well.
  for (const char* action : {"alloc", "segment_alloc", "free_completed"}) {
    std::string trace = R"({"device_traces": [[)";
    for (int i = 0; i < 3; ++i) {
      trace += fmt::format(R"({}{{"action": "{}", "addr": {}, "size": 562949953421312}})", i ? ", " : "", action, i + 1);
    }
    trace += "]]}";
    EXPECT_EQ(err(trace), fmt::format("x.json: device_traces[0][2]: the trace's {} on cuda:0 add up to more than any "
                                      "device holds", std::string(action) == "segment_alloc" ? "segments" : "allocations"));
  }
  // A negative address is read as the unsigned value the allocator printed.
  auto s = read_snapshot_bytes(segment("", "").replace(segment("", "").find("\"address\": 4096"), 15,
                                                       "\"address\": -4096"),
                               "x.json");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->segments[0].address, static_cast<uint64_t>(-4096));
}

TEST(SnapshotReader, NegativeTraceSizeInAPickleIsNamedByItsIndex) {
  std::vector<TraceEntry> entries;
  for (int i = 0; i < 20; ++i) entries.push_back({4096 + 512 * i, i + 1});
  entries[12].size = -5;
  auto s = read_snapshot_bytes(trace_pickle(entries), "t.pickle");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "t.pickle: device_traces[0][12]: 'size' is negative (-5)");
}

// A device ordinal is 0 or more (--device refuses -1 too): a file claiming "cuda:-1" is damaged.
TEST(SnapshotReader, NegativeOrHugeDeviceIsAnErrorNamingTheFile) {
  auto err = [](std::string_view data) {
    auto s = read_snapshot_bytes(data, "x.json");
    return s.ok() ? std::string("<ok>") : s.error().message;
  };
  EXPECT_EQ(err(R"({"segments": [{"device": 0, "address": 0, "total_size": 1024}, {"device": -1, "address": 4096,
                "total_size": 1024}]})"),
            "x.json: segments[1].device is -1: not a CUDA device ordinal");
  EXPECT_EQ(err(R"({"segments": [{"device": 4294967296, "address": 0, "total_size": 1024}]})"),
            "x.json: segments[0].device is 4294967296: not a CUDA device ordinal");
  for (const char* name : {"snapshot/negative_device_p4.pickle", "snapshot/negative_device.json"}) {
    const std::string path = testing::fixture_path(name);
    auto s = read_snapshot_file(path);
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_EQ(s.error().message, path + ": segments[0].device is -1: not a CUDA device ordinal");
  }
}

TEST(SnapshotReader, MissingFile) {
  auto s = read_snapshot_file("/nonexistent/snap.pickle");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "/nonexistent/snap.pickle: no such file");
}

// The trace-entry fast path (SnapshotReadOptions::fast_trace_entries) decodes the common entry
// shape straight from the bytes; it must give exactly the model the general pickle VM gives,
// for every fixture encoding (protocol 2 and 3 memoize with BINPUT, 4 and 5 with MEMOIZE) and
// every odd case below, errors included.
TEST(SnapshotReader, TheFastPathGivesTheModelTheVmGives) {
  SnapshotReadOptions vm_only;
  vm_only.fast_trace_entries = false;
  std::map<std::string, uint64_t> fast_taken;
  for (const char* name : {"train_p2.pickle", "train_p3.pickle", "train_p4.pickle", "train_p5.pickle",
                           "train_p4_optimized.pickle", "expandable_p4.pickle", "history_2_0_p4.pickle", "list_1_13_p2.pickle"}) {
    std::string path = testing::fixture_path(std::string("snapshot/") + name);
    uint64_t taken = 0;
    SnapshotReadOptions fast_path;
    fast_path.fast_entries_taken = &taken;
    auto fast = read_snapshot_file(path, fast_path);
    auto vm = read_snapshot_file(path, vm_only);
    ASSERT_TRUE(fast.ok() && vm.ok()) << name;
    EXPECT_EQ(testing::first_snapshot_difference(*fast, *vm), "") << name;
    fast_taken[name] = taken;
  }
  // The comparison means something only where the fast path ran: the training fixtures' entries
  // after their frames are first seen (the 1.13 list and 2.0 history layouts have no trace).
  EXPECT_EQ(fast_taken["train_p4.pickle"], 168u);
  EXPECT_EQ(fast_taken["train_p2.pickle"], fast_taken["train_p4.pickle"]);
  // pickletools.optimize leaves the entry dicts without a memo store: the fast path still takes
  // them, and must not give their first inner store (an action string's) the entry's record.
  EXPECT_EQ(fast_taken["train_p4_optimized.pickle"], fast_taken["train_p4.pickle"]);
  EXPECT_EQ(fast_taken["list_1_13_p2.pickle"], 0u);
  auto both = [&](const std::string& bytes, const char* what) {
    auto fast = read_snapshot_bytes(bytes, "t.pickle");
    auto vm = read_snapshot_bytes(bytes, "t.pickle", vm_only);
    ASSERT_EQ(fast.ok(), vm.ok()) << what;
    if (!fast.ok()) {
      EXPECT_EQ(fast.error().message, vm.error().message) << what;
    } else {
      EXPECT_EQ(testing::first_snapshot_difference(*fast, *vm), "") << what;
    }
  };
  std::vector<TraceEntry> entries;
  for (int i = 0; i < 1500; ++i) entries.push_back({4096 + 512 * i, i + 1});
  both(trace_pickle(entries), "plain entries");
  auto again = entries;
  again[1200] = TraceEntry{0, 0, 5};
  both(trace_pickle(again), "an entry referenced twice");
  auto bad = entries;
  bad[1234].bad_addr = true;
  both(trace_pickle(bad), "a bad address");
  auto negative = entries;
  negative[12].size = -5;
  both(trace_pickle(negative), "a negative size");
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// Bytes after the pickle's STOP (two snapshots concatenated, a damaged tail) are not read, as
// pickle.load does not read them, but they are counted, from a file and from a stream alike, and the
// report warns; a whole file has none.
TEST(SnapshotReader, BytesAfterThePicklesEndAreCounted) {
  const std::string one = testing::read_file(testing::fixture_path("snapshot/train_p4.pickle"));
  auto whole = read_snapshot_bytes(one, "one.pickle");
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  EXPECT_EQ(whole->bytes_after_end, 0u);
  auto two = read_snapshot_bytes(one + one, "two.pickle");
  ASSERT_TRUE(two.ok()) << two.error().message;
  EXPECT_EQ(two->bytes_after_end, one.size());
  const std::string path =
      (std::filesystem::temp_directory_path() / ("oomdoc-two-snapshots-" + std::to_string(::getpid()) + ".pickle")).string();
  {
    std::ofstream out(path, std::ios::binary);
    out << one << "garbage";
  }
  auto file = read_snapshot_file(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->bytes_after_end, 7u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// The JSON parser's own tag ("[json.exception.out_of_range.406]") stays out of the message.
TEST(SnapshotReader, JsonNumberOverflowIsSaidPlainly) {
  auto s = read_snapshot_bytes(R"({"segments": [{"device": 1e400}]})", "n.json");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "n.json: offset 30: invalid JSON: number overflow parsing '1e400'");
}

}  // namespace
}  // namespace oomdoc
