// TensorFlow's and XLA's allocator dumps end with totals ("Sum Total of in-use chunks", the regions
// and memory_limit_) and a "Stats:" block (Limit, InUse, MaxInUse, ..., LargestFreeBlock), read
// with the totals (and after XLA's cudaMallocAsync failure): they belong to the failure above them
// and tell a full pool from one that is fragmented or could not grow.
#include <gtest/gtest.h>

#include <string>

#include "analyses/diagnose.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

using testing::explain_text;
using testing::fix_ids;
using testing::only_event;

constexpr const char* kPrefix = "2023-03-01 10:00:05.000001: I tensorflow/tsl/framework/bfc_allocator.cc:1110] ";

// A TensorFlow 2.x failure: the BFC warning, a dump, the totals, the Stats block, then the op's error.
std::string tf_failure(const std::string& in_use_text, uint64_t region, uint64_t in_use, uint64_t largest_free) {
  std::string log =
      "2023-03-01 10:00:05.000001: W tensorflow/tsl/framework/bfc_allocator.cc:485] Allocator (GPU_0_bfc) ran out of "
      "memory trying to allocate 1.50GiB (rounded to 1610612736)requested by op MatMul\n"
      "2023-03-01 10:00:05.000002: I tensorflow/tsl/framework/bfc_allocator.cc:1039] BFCAllocator dump for GPU_0_bfc\n";
  for (int i = 0; i < 40; ++i) log += std::string(kPrefix) + "InUse at 7f0000000000 of size 256 next 1\n";
  log += std::string(kPrefix) + "Sum Total of in-use chunks: " + in_use_text + "\n" + kPrefix +
         "total_region_allocated_bytes_: " + std::to_string(region) +
         " memory_limit_: 15918104576 available bytes: 0 curr_region_allocation_bytes_: 31836209152\n";
  log += std::string(kPrefix) + "Stats: \n"
         "Limit:                     15918104576\n"
         "InUse:                     " + std::to_string(in_use) + "\n"
         "MaxInUse:                  " + std::to_string(in_use) + "\n"
         "NumAllocs:                        3053\n"
         "MaxAllocSize:               1811939328\n"
         "Reserved:                            0\n"
         "PeakReserved:                        0\n"
         "LargestFreeBlock:          " + std::to_string(largest_free) + "\n"
         "\n"
         "2023-03-01 10:00:05.000305: W tensorflow/core/framework/op_kernel.cc:1830] OP_REQUIRES failed at "
         "matmul_op_impl.h:728 : RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[128,3072,1024] and type float "
         "on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n";
  return log;
}

// The pool grew to its limit, 6 GiB of it is in use, but no free block holds 1.5 GiB.
TEST(DiagnoseAllocatorStats, LargestFreeBlockBelowTheRequestIsFragmentation) {
  const auto x = only_event(explain_text(tf_failure("6.00GiB", 15918104576, 6442450944, 536870912)));
  EXPECT_EQ(x.event.format, "tf_oom_tensor");
  EXPECT_EQ(x.event.bytes("largest_free_block"), 536870912u);
  EXPECT_EQ(x.event.int_field("region_allocated_bytes"), 15918104576);
  EXPECT_EQ(x.diagnosis.cause, "fragmentation");
  ASSERT_FALSE(x.diagnosis.fixes.empty());
  EXPECT_EQ(x.diagnosis.fixes[0].id, "tf_async_allocator");
  // The BFC warning's own hint is not repeated as a second fix.
  const auto ids = fix_ids(x.diagnosis);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), "tf_async_allocator"), 1);
  EXPECT_NE(std::find(x.diagnosis.evidence.begin(), x.diagnosis.evidence.end(),
                      "8.82 GiB of the pool is free, but its largest free block is 512.00 MiB, smaller than the 1.50 GiB "
                      "request: the pool is fragmented."),
            x.diagnosis.evidence.end());
}

// The pool stopped at 4 GiB of its 14.82 GiB limit: the driver refused the next region.
TEST(DiagnoseAllocatorStats, PoolThatCouldNotGrowSaysSo) {
  const auto x = only_event(explain_text(tf_failure("3.90GiB", 4294967296, 4187593113, 104857600)));
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.capacity_title,
            "TensorFlow's allocator pool could grow only to 4.00 GiB of its 14.82 GiB limit: the driver refused more "
            "(another process may hold the card)");
}

// The Stats block after the totals: MaxInUse read, LargestFreeBlock 0 (not tracked) left out, and
// a pool at its limit is full.
TEST(DiagnoseAllocatorStats, StatsBlockAfterTheTotals) {
  const auto x = only_event(explain_text(tf_failure("14.52GiB", 15918104576, 15590000000, 0)));
  EXPECT_EQ(x.event.bytes("max_in_use"), 15590000000u);
  EXPECT_EQ(x.event.int_field("memory_limit_bytes"), 15918104576);
  EXPECT_EQ(x.event.bytes("largest_free_block"), std::nullopt);   // 0: not tracked
  EXPECT_EQ(x.diagnosis.capacity_title, "TensorFlow's allocator pool was full (14.52 GiB of its 14.82 GiB limit in use)");
}

// JAX's BFC dump (XLA's files under external/xla/) belongs to the JAX failure.
TEST(DiagnoseAllocatorStats, JaxDumpTotalsBelongToTheJaxFailure) {
  const std::string log =
      "2024-05-01 10:00:00.000001: W external/xla/xla/tsl/framework/bfc_allocator.cc:482] Allocator (GPU_0_bfc) ran out "
      "of memory trying to allocate 2.00GiB (rounded to 2147483648)requested by op\n"
      "2024-05-01 10:00:00.000002: I external/xla/xla/tsl/framework/bfc_allocator.cc:1046] Sum Total of in-use chunks: "
      "30.50GiB\n"
      "2024-05-01 10:00:00.000003: I external/xla/xla/tsl/framework/bfc_allocator.cc:1048] total_region_allocated_bytes_: "
      "33285996544 memory_limit_: 33285996544 available bytes: 0 curr_region_allocation_bytes_: 66571993088\n"
      "2024-05-01 10:00:00.000004: I external/xla/xla/tsl/framework/bfc_allocator.cc:1053] Stats: \n"
      "Limit:                     33285996544\n"
      "InUse:                     32749125632\n"
      "MaxInUse:                  32749125632\n"
      "NumAllocs:                        1210\n"
      "MaxAllocSize:               2147483648\n"
      "Reserved:                            0\n"
      "PeakReserved:                        0\n"
      "LargestFreeBlock:                    0\n";
  const auto x = only_event(explain_text(log));
  EXPECT_EQ(x.event.framework, "jax");
  EXPECT_EQ(x.event.bytes("in_use_chunks"), 32749125632u);   // 30.50 GiB
  EXPECT_EQ(x.event.int_field("memory_limit_bytes"), 33285996544);
  // The headline says how full the pool was: 30.50 GiB in use + 2 GiB asked > the 31.00 GiB limit.
  EXPECT_EQ(x.diagnosis.capacity_title, "the request does not fit JAX's pool (30.50 GiB in use + 2.00 GiB asked > its 31.00 "
                                        "GiB limit)");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "JAX's BFC pool held 30.50 GiB of its 31.00 GiB limit (98%) when the request came: "
                                        "2.00 GiB more does not fit in the 512.00 MiB left.");
}

// XLA's cudaMallocAsync failure prints its Stats block (Limit 0: no pool limit) right after it.
TEST(DiagnoseAllocatorStats, AsyncAllocatorStatsStayWithItsFailure) {
  const auto x = only_event(testing::explain_fixture("xla_cuda_async_alloc.log"));
  EXPECT_EQ(x.event.format, "xla_cuda_async_alloc");
  EXPECT_EQ(x.event.bytes("in_use_chunks"), 61982909300u);
  EXPECT_EQ(x.event.int_field("memory_limit_bytes"), std::nullopt);
}

// "Stats:" elsewhere (a training loop's own summary) is no event.
TEST(DiagnoseAllocatorStats, OtherStatsLinesAreNoEvent) {
  EXPECT_TRUE(explain_text("Epoch 3 Stats: loss 0.31 acc 0.92\nStats:\nLimit: 10\nsteps: 4\n").events.empty());
}

}  // namespace
}  // namespace oomdoc
