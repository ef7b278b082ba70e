// Every real snapshot in ../shared/data/snapshots opens and gives the reference figures of
// ../shared/docs/snapshot-format.md §6 exactly; protocol 2/3/5 and JSON re-encodings of each
// (made with Python's standard pickle/json by tools/gen_corpus_variants.py) give identical results.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyses/snapshot_report.h"
#include "readers/snapshot_reader.h"
#include "report/snapshot_render.h"
#include "support/snapshot_equality.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

struct Reference {
  const char* file;
  int device;
  size_t segments;
  uint64_t reserved, allocated, active, requested, inactive, largest_inactive;
  uint64_t trace_events;
  int64_t trace_peak;
};

// snapshot-format.md §6 (no file has oom entries).
const Reference kReference[] = {
    {"charran78__docubox_segments_only.pickle", 0, 12, 109051904, 90861056, 90861056, 90861056, 18190848, 11534336, 0, 0},
    {"cranberrii__v2_1_no_time_us.pickle", 0, 215, 6471811072, 2297283072, 2297283072, 2285408452, 4174528000, 130023424, 10307, 4780407592},
    {"felixburton7__voxelflex_segments_only.pickle", 0, 3, 46137344, 21002752, 21002752, 20981596, 25134592, 14548992, 0, 0},
    {"kkaitlyn111__stacks_all_ctx128_forward.pickle", 0, 516, 19667091456, 19498420224, 19498420224, 19352504320, 168671232, 4194304, 4657, 5723951104},
    {"kkaitlyn111__stacks_all_ctx128_fullstep_annotations.pickle", 0, 1010, 61111009280, 54873829888, 54873829888, 54597857284, 6237179392, 104857600, 19342, 41174114308},
    {"lfielike__v2_3_legacy_1entry_trace.pickle", 0, 259, 17133731840, 16397578240, 16397578240, 16380108168, 736153600, 452984832, 1, 0},
    {"magma27__newest_compile_context_user_metadata_windows.pickle", 0, 216, 14180941824, 1377753600, 1377753600, 1373919236, 12803188224, 329252864, 5163, 12550078464},
    {"muduard__memory_snapshot_list_format.pkl", 1, 255, 3649044480, 3353639424, 3353639424, 3308174782, 295405056, 31457280, 0, 0},
    {"silmont2000__small_stacks_all.pickle", 0, 9, 3781165056, 31719936, 31719936, 31719428, 3749445120, 536870912, 97, 3249143816},
    {"yiyi__v2_0_history_1.3b_snapshot.pickle", 0, 257, 7608467456, 5683450880, 5683450880, 5683449864, 1925016576, 207618048, 1, 0},
    {"yiyi__v2_0_history_oom_snapshot.pickle", 0, 176, 11844714496, 11840159744, 11840159744, 11840159744, 4554752, 2080768, 1, 0},
};

void expect_reference(const SnapshotReport& report, const Reference& ref, const std::string& label) {
  ASSERT_EQ(report.devices.size(), 1u) << label;
  const DeviceReport& d = report.devices[0];
  EXPECT_EQ(d.memory.device, ref.device) << label;
  EXPECT_EQ(d.memory.segments, ref.segments) << label;
  EXPECT_EQ(d.memory.reserved_bytes, ref.reserved) << label;
  EXPECT_EQ(d.memory.allocated_bytes, ref.allocated) << label;
  EXPECT_EQ(d.memory.active_bytes, ref.active) << label;
  EXPECT_EQ(d.memory.requested_bytes, ref.requested) << label;
  EXPECT_EQ(d.memory.inactive_bytes, ref.inactive) << label;
  EXPECT_EQ(d.memory.largest_free_block_bytes, ref.largest_inactive) << label;
  EXPECT_EQ(d.timeline.events, ref.trace_events) << label;
  EXPECT_EQ(d.timeline.peak_live_delta, ref.trace_peak) << label;
  EXPECT_TRUE(d.ooms.empty()) << label;
}

TEST(SnapshotCorpus, EveryFileMatchesTheReferenceTable) {
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::corpus_path("snapshots"))) {
    std::string name = entry.path().filename().string();
    if (name == "SOURCES.md") continue;
    ++files;
    bool listed = false;
    for (const Reference& ref : kReference) listed = listed || name == ref.file;
    EXPECT_TRUE(listed) << name << " has no reference row";
  }
  EXPECT_EQ(files, std::size(kReference));
  for (const Reference& ref : kReference) {
    auto report = analyze_snapshot_file(testing::corpus_path(std::string("snapshots/") + ref.file));
    ASSERT_TRUE(report.ok()) << report.error().message;
    expect_reference(*report, ref, ref.file);
  }
}

// Memory allocated before recording, computed with Python (pickle.load, then: unmatched
// free_completed sizes + requested sizes of active_allocated blocks not live at the end of the
// alloc/free_completed replay), and what is listed as live: with every group shown, the stacks at
// the peak add up to baseline + peak delta, and at dump to the requested bytes of the live blocks.
struct BaselineReference {
  const char* file;
  uint64_t baseline, unmatched_free_bytes;
  uint64_t unmatched_frees;
};
const BaselineReference kBaselines[] = {
    {"charran78__docubox_segments_only.pickle", 90861056, 0, 0},
    {"cranberrii__v2_1_no_time_us.pickle", 1095725248, 0, 0},
    {"felixburton7__voxelflex_segments_only.pickle", 20981596, 0, 0},
    {"kkaitlyn111__stacks_all_ctx128_forward.pickle", 13628553216, 0, 0},
    {"kkaitlyn111__stacks_all_ctx128_fullstep_annotations.pickle", 13628553216, 0, 0},
    {"lfielike__v2_3_legacy_1entry_trace.pickle", 16380108176, 8, 1},
    {"magma27__newest_compile_context_user_metadata_windows.pickle", 1373919236, 327680004, 2},
    {"muduard__memory_snapshot_list_format.pkl", 3308174782, 0, 0},
    {"silmont2000__small_stacks_all.pickle", 0, 0, 0},
    {"yiyi__v2_0_history_1.3b_snapshot.pickle", 5692346376, 8896512, 1},
    {"yiyi__v2_0_history_oom_snapshot.pickle", 11840159744, 0, 0},
};

TEST(SnapshotCorpus, LiveStacksAddUpToTheLiveBytesBaselineIncluded) {
  static_assert(std::size(kBaselines) == std::size(kReference));
  SnapshotOptions all;
  all.top = 1u << 30;
  for (size_t i = 0; i < std::size(kBaselines); ++i) {
    const BaselineReference& ref = kBaselines[i];
    ASSERT_STREQ(ref.file, kReference[i].file);
    auto report = analyze_snapshot_file(testing::corpus_path(std::string("snapshots/") + ref.file), all);
    ASSERT_TRUE(report.ok()) << report.error().message;
    const DeviceReport& d = report->devices.at(0);
    EXPECT_EQ(d.timeline.baseline_bytes, ref.baseline) << ref.file;
    EXPECT_EQ(d.timeline.unmatched_free_bytes, ref.unmatched_free_bytes) << ref.file;
    EXPECT_EQ(d.timeline.unmatched_frees, ref.unmatched_frees) << ref.file;
    EXPECT_EQ(d.timeline.live_at_peak_bytes, ref.baseline + uint64_t(kReference[i].trace_peak)) << ref.file;
    uint64_t listed = 0;
    for (const StackGroup& g : d.top_stacks) listed += g.bytes;
    if (d.top_stacks_when == "peak") {
      EXPECT_EQ(listed, d.timeline.live_at_peak_bytes) << ref.file;
    } else {
      EXPECT_EQ(listed, kReference[i].requested) << ref.file;  // every live block's requested bytes
    }
  }
}

TEST(SnapshotCorpus, ReencodingsGiveIdenticalResults) {
  std::string out = std::string(OOMDOC_BINARY_DIR) + "/corpus_variants";
  std::string command = "python3 " + std::string(OOMDOC_SOURCE_DIR) + "/tools/gen_corpus_variants.py " + out;
  for (const Reference& ref : kReference) {
    command += ' ';  // appended alone: g++ 12 warns falsely (-Wrestrict) on " " + std::string
    command += testing::corpus_path(std::string("snapshots/") + ref.file);
  }
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  for (const Reference& ref : kReference) {
    auto original = analyze_snapshot_file(testing::corpus_path(std::string("snapshots/") + ref.file));
    ASSERT_TRUE(original.ok());
    for (const char* suffix : {".p2.pickle", ".p3.pickle", ".p5.pickle", ".json"}) {
      std::string path = out + "/" + ref.file + suffix;
      auto variant = analyze_snapshot_file(path);
      ASSERT_TRUE(variant.ok()) << variant.error().message;
      expect_reference(*variant, ref, path);
      // Beyond the table: stacks, leaks and the verdict line agree too.
      ASSERT_EQ(variant->devices[0].top_stacks.size(), original->devices[0].top_stacks.size()) << path;
      for (size_t i = 0; i < original->devices[0].top_stacks.size(); ++i) {
        EXPECT_EQ(variant->devices[0].top_stacks[i].key, original->devices[0].top_stacks[i].key) << path;
        EXPECT_EQ(variant->devices[0].top_stacks[i].bytes, original->devices[0].top_stacks[i].bytes) << path;
      }
      EXPECT_EQ(variant->verdict, original->verdict) << path;
      EXPECT_EQ(variant->distinct_stacks, original->distinct_stacks) << path;
    }
  }
}

// The trace-entry fast path gives, on every real file, exactly the model the general pickle VM
// gives (SnapshotReadOptions::fast_trace_entries off).
TEST(SnapshotCorpus, TheFastPathGivesTheModelTheVmGives) {
  SnapshotReadOptions vm_only;
  vm_only.fast_trace_entries = false;
  uint64_t taken = 0, events = 0;
  for (const Reference& ref : kReference) {
    std::string path = testing::corpus_path(std::string("snapshots/") + ref.file);
    uint64_t file_taken = 0;
    SnapshotReadOptions fast_path;
    fast_path.fast_entries_taken = &file_taken;
    auto fast = read_snapshot_file(path, fast_path);
    auto vm = read_snapshot_file(path, vm_only);
    ASSERT_TRUE(fast.ok() && vm.ok()) << ref.file;
    EXPECT_EQ(testing::first_snapshot_difference(*fast, *vm), "") << ref.file;
    taken += file_taken;
    events += ref.trace_events;
  }
  // And the fast path does carry real files: most of their trace entries (89% when written).
  EXPECT_GE(taken * 10, events * 8) << taken << " of " << events;
}

// Side by side with PyTorch's own `_memory_viz.py stats` (Debian's python3-torch 1.13 ships it;
// tools/memory_viz_stats.py runs its stats() on the segment list): the same totals, to the byte.
TEST(SnapshotCorpus, SameTotalsAsPytorchsMemoryViz) {
  const char* memory_viz = "/usr/lib/python3/dist-packages/torch/cuda/_memory_viz.py";
  ASSERT_TRUE(std::filesystem::exists(memory_viz)) << "python3-torch is not installed (scripts/setup.sh)";
  std::vector<std::string> files;
  for (const Reference& ref : kReference) files.push_back(testing::corpus_path(std::string("snapshots/") + ref.file));
  for (const char* f : {"train_p4.pickle", "expandable_p4.pickle", "list_1_13_p2.pickle", "history_2_0_p4.pickle"}) {
    files.push_back(testing::fixture_path(std::string("snapshot/") + f));
  }
  for (const std::string& file : files) {
    std::string out = std::string(OOMDOC_BINARY_DIR) + "/memory_viz_stats.json";
    std::string command = "/usr/bin/python3 " + std::string(OOMDOC_SOURCE_DIR) + "/tools/memory_viz_stats.py " +
                          file + " > " + out;
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    auto peer = nlohmann::json::parse(testing::read_file(out));
    auto report = analyze_snapshot_file(file);
    ASSERT_TRUE(report.ok()) << report.error().message;
    uint64_t segments = 0, reserved = 0, allocated = 0, inactive = 0, pending = 0;
    for (const DeviceReport& d : report->devices) {
      segments += d.memory.segments;
      reserved += d.memory.reserved_bytes;
      allocated += d.memory.allocated_bytes;
      inactive += d.memory.inactive_bytes;
      pending += d.memory.pending_free_bytes;
    }
    EXPECT_EQ(peer["segments"], segments) << file;
    EXPECT_EQ(peer["total_size"], reserved) << file;
    EXPECT_EQ(peer.value("active_allocated", uint64_t(0)), allocated) << file;
    EXPECT_EQ(peer.value("inactive", uint64_t(0)), inactive) << file;
    EXPECT_EQ(peer.value("active_pending_free", uint64_t(0)), pending) << file;
  }
}

// The per-segment fragmentation view at dump time (no corpus file has an OOM), against figures
// tools/snapshot_segments.py computed with /usr/bin/python3 (pickle.load, then loops): each
// segment's inactive blocks are its free blocks, and those of a segment with live blocks are
// stranded ("unusable"), most of them first.
struct SegmentRow {
  uint64_t address, size;
  const char* type;
  uint64_t allocated, free, largest_free, blocks, free_blocks, unusable;
};
struct FragmentationReference {
  const char* file;
  size_t segments;
  uint64_t free, unusable, largest_free;
  std::vector<SegmentRow> first_rows;
};

const FragmentationReference kFragmentation[] = {
    {"silmont2000__small_stacks_all.pickle", 9, 3749445120, 528219648, 536870912,
     {{139780180410368, 536870912, "large", 12713984, 524156928, 522059776, 5, 2, 524156928},
      {139780117495808, 2097152, "small", 512, 2096640, 2096640, 2, 1, 2096640},
      {139781763760128, 20971520, "large", 19005440, 1966080, 1966080, 7, 1, 1966080},
      {139777059848192, 536870912, "large", 0, 536870912, 536870912, 1, 1, 0},
      {139777630273536, 536870912, "large", 0, 536870912, 536870912, 1, 1, 0},
      {139778167144448, 536870912, "large", 0, 536870912, 536870912, 1, 1, 0},
      {139778704015360, 536870912, "large", 0, 536870912, 536870912, 1, 1, 0},
      {139779341549568, 536870912, "large", 0, 536870912, 536870912, 1, 1, 0},
      {139780784390144, 536870912, "large", 0, 536870912, 536870912, 1, 1, 0}}},
    {"charran78__docubox_segments_only.pickle", 12, 18190848, 18190848, 11534336,
     {{34469576704, 20971520, "large", 9437184, 11534336, 11534336, 5, 1, 11534336},
      {34438119424, 20971520, "large", 18874368, 2097152, 2097152, 9, 1, 2097152},
      {34385690624, 48234496, "large", 46881792, 1352704, 1352704, 2, 1, 1352704},
      {34492645376, 2097152, "small", 1179648, 917504, 917504, 3, 1, 917504},
      {34459090944, 2097152, "small", 1769472, 327680, 327680, 4, 1, 327680},
      {34461188096, 2097152, "small", 1769472, 327680, 327680, 4, 1, 327680},
      {34463285248, 2097152, "small", 1769472, 327680, 327680, 4, 1, 327680},
      {34465382400, 2097152, "small", 1769472, 327680, 327680, 4, 1, 327680},
      {34467479552, 2097152, "small", 1769472, 327680, 327680, 4, 1, 327680},
      {34490548224, 2097152, "small", 1769472, 327680, 327680, 4, 1, 327680},
      {34436022272, 2097152, "small", 1774080, 323072, 323072, 7, 1, 323072},
      {34433925120, 2097152, "small", 2097152, 0, 0, 66, 0, 0}}},
    {"cranberrii__v2_1_no_time_us.pickle", 215, 4174528000, 1616002560, 130023424,
     {{139927954128896, 132120576, "large", 24576000, 107544576, 40960000, 7, 4, 107544576},
      {139936040747008, 132120576, "large", 38912000, 93208576, 45596672, 7, 4, 93208576},
      {139930269384704, 46137344, "large", 8192000, 37945344, 29753344, 3, 2, 37945344}}},
    {"muduard__memory_snapshot_list_format.pkl", 255, 295405056, 295405056, 31457280,
     {{139987513245696, 134217728, "large", 71303168, 62914560, 31457280, 44, 4, 62914560},
      {139987949453312, 134217728, "large", 83886080, 50331648, 18350080, 48, 4, 50331648},
      {139987379027968, 134217728, "large", 87818240, 46399488, 13107200, 55, 14, 46399488}}},
    {"kkaitlyn111__stacks_all_ctx128_fullstep_annotations.pickle", 1010, 6237179392, 174312960, 104857600,
     {{139775851888640, 104857600, "large", 26214400, 78643200, 78643200, 2, 1, 78643200},
      {139824069607424, 165675008, "large", 135954432, 29720576, 25722880, 4, 2, 29720576},
      {139809137885184, 102760448, "large", 78643200, 24117248, 24117248, 4, 1, 24117248}}},
};

TEST(SnapshotCorpus, SegmentsMatchThePythonReference) {
  for (const FragmentationReference& ref : kFragmentation) {
    auto report = analyze_snapshot_file(testing::corpus_path(std::string("snapshots/") + ref.file));
    ASSERT_TRUE(report.ok()) << report.error().message;
    const DeviceReport& d = report->devices.at(0);
    const Fragmentation& f = d.fragmentation;
    EXPECT_FALSE(f.oom_event_index.has_value()) << ref.file;
    ASSERT_EQ(f.segments.size(), ref.segments) << ref.file;
    EXPECT_EQ(f.free_bytes, ref.free) << ref.file;
    EXPECT_EQ(f.unusable_free_bytes, ref.unusable) << ref.file;
    EXPECT_EQ(f.unusable_free_bytes, d.memory.stranded_bytes) << ref.file;
    EXPECT_EQ(f.largest_free_block_bytes, ref.largest_free) << ref.file;
    EXPECT_EQ(f.meaning, FragmentationMeaning::kStranded) << ref.file;
    for (size_t i = 0; i < ref.first_rows.size(); ++i) {
      const SegmentRow& want = ref.first_rows[i];
      const SegmentUse& got = f.segments[i];
      const std::string at = std::string(ref.file) + " row " + std::to_string(i);
      EXPECT_EQ(got.address, want.address) << at;
      EXPECT_EQ(got.size_bytes, want.size) << at;
      EXPECT_EQ(got.is_large, std::string(want.type) == "large") << at;
      EXPECT_EQ(got.allocated_bytes, want.allocated) << at;
      EXPECT_EQ(got.free_bytes, want.free) << at;
      EXPECT_EQ(got.largest_free_block_bytes, want.largest_free) << at;
      EXPECT_EQ(got.blocks, want.blocks) << at;
      EXPECT_EQ(got.free_blocks, want.free_blocks) << at;
      EXPECT_EQ(got.unusable_free_bytes, want.unusable) << at;
    }
  }
}

// The time axis: seconds from the first event where every entry has time_us (first/last time_us
// and the peak's, from pickle.load in Python), the event index where none has.
TEST(SnapshotCorpus, TimelineAgainstTimeWhenTheTraceHasIt) {
  struct TimeReference {
    const char* file;
    std::optional<int64_t> start_time_us;
    double duration, peak_seconds;
    uint64_t peak_index;
  };
  const TimeReference refs[] = {
      {"silmont2000__small_stacks_all.pickle", 1772688692031317, 0.970162, 0.951991, 52},
      {"magma27__newest_compile_context_user_metadata_windows.pickle", 1776479641085368, 0.248181, 0.13807, 1402},
      {"kkaitlyn111__stacks_all_ctx128_fullstep_annotations.pickle", 1748730219596671, 0.562977, 0.562948, 19335},
      {"cranberrii__v2_1_no_time_us.pickle", std::nullopt, 0, 0, 0},
  };
  for (const TimeReference& ref : refs) {
    auto report = analyze_snapshot_file(testing::corpus_path(std::string("snapshots/") + ref.file));
    ASSERT_TRUE(report.ok()) << report.error().message;
    const Timeline& t = report->devices.at(0).timeline;
    Json timeline = snapshot_report_json(*report)["devices"][0]["timeline"];
    if (!ref.start_time_us) {
      EXPECT_FALSE(t.time_axis) << ref.file;
      EXPECT_EQ(timeline["x_axis"], "event_index") << ref.file;
      EXPECT_TRUE(timeline["seconds"][0].is_null()) << ref.file;
      continue;
    }
    EXPECT_TRUE(t.time_axis) << ref.file;
    EXPECT_EQ(t.start_time_us, ref.start_time_us) << ref.file;
    EXPECT_DOUBLE_EQ(t.duration_seconds.value_or(-1), ref.duration) << ref.file;
    EXPECT_EQ(t.peak_index, ref.peak_index) << ref.file;
    EXPECT_DOUBLE_EQ(t.peak_seconds.value_or(-1), ref.peak_seconds) << ref.file;
    EXPECT_EQ(timeline["x_axis"], "seconds") << ref.file;
    // Each plotted point (a bucket's highest, so not always event 0): its time_us, in seconds from the start.
    ASSERT_EQ(timeline["seconds"].size(), timeline["event_index"].size()) << ref.file;
    double previous = 0;
    for (size_t i = 0; i < timeline["seconds"].size(); ++i) {
      const double seconds = timeline["seconds"][i].get<double>();
      EXPECT_DOUBLE_EQ(seconds, double(timeline["time_us"][i].get<int64_t>() - *ref.start_time_us) / 1e6) << ref.file;
      EXPECT_GE(seconds, previous) << ref.file;
      previous = seconds;
    }
  }
}

TEST(SnapshotCorpus, CliOpensEveryFile) {
  for (const Reference& ref : kReference) {
    auto r = testing::run_cli({"snapshot", "--json", testing::corpus_path(std::string("snapshots/") + ref.file)});
    EXPECT_EQ(r.exit_code, 0) << ref.file << ": " << r.err;
  }
}

}  // namespace
}  // namespace oomdoc
