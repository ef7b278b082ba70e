#include "process/alloc_conf.h"

#include <gtest/gtest.h>

namespace oomdoc {
namespace {

std::string error_of(const std::string& settings) {
  Status s = check_alloc_conf(settings);
  return s ? std::string("ok") : s.error().message;
}

TEST(AllocConf, AcceptsWhatPyTorchAccepts) {
  EXPECT_EQ(error_of("expandable_segments:True"), "ok");
  EXPECT_EQ(error_of("expandable_segments:False, max_split_size_mb:128"), "ok");  // spaces are ignored
  EXPECT_EQ(error_of("garbage_collection_threshold:0.6,max_split_size_mb:20"), "ok");
  EXPECT_EQ(error_of("backend:cudaMallocAsync"), "ok");
  EXPECT_EQ(error_of("backend:native,roundup_power2_divisions:4"), "ok");
  EXPECT_EQ(error_of("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]"), "ok");
  EXPECT_EQ(error_of("roundup_power2_divisions:[>:0]"), "ok");
  EXPECT_EQ(error_of("pinned_use_cuda_host_register:True,pinned_num_register_threads:8"), "ok");
  EXPECT_EQ(error_of("release_lock_on_cudamalloc:True,per_process_memory_fraction:0.5"), "ok");
}

TEST(AllocConf, UnknownKeyIsNamedWithTheNearestKnownOne) {
  EXPECT_EQ(error_of("expandable_segment:True"),
            "--alloc-conf: unknown setting 'expandable_segment' (did you mean expandable_segments?); PyTorch's CUDA "
            "allocator knows backend, expandable_segments, max_split_size_mb, max_non_split_rounding_mb, "
            "garbage_collection_threshold, roundup_power2_divisions, large_segment_size_mb, "
            "release_lock_on_cudamalloc, release_lock_on_hipmalloc, pinned_use_cuda_host_register, "
            "pinned_use_hip_host_register, pinned_use_background_threads, pinned_num_register_threads, "
            "pinned_reserve_segment_size_mb, per_process_memory_fraction, graph_capture_record_stream_reuse, "
            "pinned_free_catch_all, throw_on_cudamalloc_oom");
  const std::string bogus = error_of("bogus");
  EXPECT_EQ(bogus.rfind("--alloc-conf: unknown setting 'bogus'; PyTorch's CUDA allocator knows backend, ", 0), 0u)
      << bogus;
}

TEST(AllocConf, ValuesPyTorchWouldRefuse) {
  EXPECT_EQ(error_of("expandable_segments:true"),
            "--alloc-conf: expandable_segments:true: must be True or False (with capitals)");
  EXPECT_EQ(error_of("expandable_segments"), "--alloc-conf: 'expandable_segments' has no value: write expandable_segments:VALUE");
  EXPECT_EQ(error_of("expandable_segments:,backend:native"),
            "--alloc-conf: 'expandable_segments' has no value: write expandable_segments:VALUE");
  EXPECT_EQ(error_of("max_split_size_mb:10"), "--alloc-conf: max_split_size_mb:10: must be a whole number of MiB, 20 or more");
  EXPECT_EQ(error_of("max_split_size_mb:128MB"),
            "--alloc-conf: max_split_size_mb:128MB: must be a whole number of MiB, 20 or more");
  EXPECT_EQ(error_of("garbage_collection_threshold:1"),
            "--alloc-conf: garbage_collection_threshold:1: must be a number between 0 and 1 (both excluded), e.g. 0.6");
  EXPECT_EQ(error_of("backend:async"), "--alloc-conf: backend:async: must be native or cudaMallocAsync");
  EXPECT_EQ(error_of("roundup_power2_divisions:3"),
            "--alloc-conf: roundup_power2_divisions:3: must be a power of two (1, 2, 4, 8, ...)");
  EXPECT_EQ(error_of("roundup_power2_divisions:[256:3]"),
            "--alloc-conf: roundup_power2_divisions: '3' must be a power of two, or 0 to disable rounding");
  EXPECT_EQ(error_of("roundup_power2_divisions:[300:2]"),
            "--alloc-conf: roundup_power2_divisions: '300' must be a power of two (an interval start in MiB) or >");
  EXPECT_EQ(error_of("roundup_power2_divisions:[256:2"), "--alloc-conf: roundup_power2_divisions: the list has no closing ]");
  EXPECT_EQ(error_of("pinned_num_register_threads:6"),
            "--alloc-conf: pinned_num_register_threads:6: must be a power of two (1, 2, 4, 8, ...)");
}

TEST(AllocConf, Punctuation) {
  EXPECT_EQ(error_of(""), "--alloc-conf: no setting given (e.g. expandable_segments:True)");
  EXPECT_EQ(error_of("expandable_segments:True,"), "--alloc-conf: a ',' ends the settings");
  EXPECT_EQ(error_of(",expandable_segments:True"),
            "--alloc-conf: ',' where a setting name was expected in ',expandable_segments:True'");
  EXPECT_EQ(error_of("expandable_segments:True:False"),
            "--alloc-conf: expected ',' after expandable_segments's value, found ':'");
}

}  // namespace
}  // namespace oomdoc
