#include "readers/gpu_catalog.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>

#include "core/units.h"

namespace oomdoc {
namespace {

TEST(GpuCatalog, HasTheGpusUsersRentAndOwn) {
  const auto& catalog = gpu_catalog();
  EXPECT_GE(catalog.size(), 30u);
  std::set<std::string> names;
  for (const auto& gpu : catalog) {
    EXPECT_TRUE(names.insert(gpu.name).second) << "duplicate " << gpu.name;
    EXPECT_GT(gpu.total_bytes, 4 * kGiB) << gpu.name;
    EXPECT_FALSE(gpu.source.empty()) << gpu.name;
    EXPECT_FALSE(gpu.architecture.empty()) << gpu.name;
    EXPECT_FALSE(gpu.interconnect.empty()) << gpu.name;
    EXPECT_TRUE(gpu.vendor == "nvidia" || gpu.vendor == "amd" || gpu.vendor == "apple") << gpu.name;
    if (gpu.cuda_total_bytes) {
      // CUDA sees less than nvidia-smi's total, but never less than ~95% of it.
      EXPECT_LT(*gpu.cuda_total_bytes, gpu.total_bytes) << gpu.name;
      EXPECT_GT(*gpu.cuda_total_bytes, gpu.total_bytes / 100 * 95) << gpu.name;
      EXPECT_FALSE(gpu.cuda_total_source.empty()) << gpu.name;
    }
    if (gpu.fp4) {
      EXPECT_TRUE(gpu.fp8) << gpu.name;
    }
    if (gpu.fp8) {
      EXPECT_TRUE(gpu.bf16) << gpu.name;
    }
  }
}

TEST(GpuCatalog, MemoryIsWhatNvidiaSmiReportsNotTheMarketingNumber) {
  EXPECT_EQ(find_gpu("t4")->total_bytes, 15360 * kMiB);
  EXPECT_EQ(find_gpu("4090")->total_bytes, 24564 * kMiB);
  EXPECT_EQ(find_gpu("3090")->total_bytes, 24576 * kMiB);
  EXPECT_EQ(find_gpu("h100")->total_bytes, 81559 * kMiB);
  EXPECT_EQ(find_gpu("a100 40gb")->total_bytes, 40960 * kMiB);
  EXPECT_EQ(find_gpu("l40s")->total_bytes, 46068 * kMiB);
  EXPECT_EQ(find_gpu("a10g")->total_bytes, 23028 * kMiB);
  EXPECT_EQ(find_gpu("l4")->total_bytes, 23034 * kMiB);
  // PyTorch's "total capacity" is smaller: 14.75 GiB on a T4.
  EXPECT_EQ(find_gpu("t4")->cuda_total_bytes, parse_quantity("14.75 GiB")->bytes);
}

// The totals vLLM itself logs as total_gpu_memory (what `oomdoc serve` budgets from), each cited
// in data/gpus.json: H100 and L40S from ../shared/data/vllm-logs, V100 32GB from a PyTorch OOM.
TEST(GpuCatalog, CudaTotalsAreTheOnesVllmLogs) {
  EXPECT_EQ(find_gpu("h100")->cuda_total_bytes, parse_quantity("79.22 GiB")->bytes);
  EXPECT_EQ(find_gpu("l40s")->cuda_total_bytes, parse_quantity("44.53 GiB")->bytes);
  EXPECT_EQ(find_gpu("3090")->cuda_total_bytes, parse_quantity("23.58 GiB")->bytes);
  EXPECT_EQ(find_gpu("v100 32gb")->cuda_total_bytes, parse_quantity("31.72 GiB")->bytes);
  EXPECT_FALSE(find_gpu("h100 pcie")->cuda_total_bytes.has_value());  // not seen in a log: nvidia-smi's total
}

TEST(GpuCatalog, CapabilitiesFollowTheArchitecture) {
  auto t4 = find_gpu("t4");
  EXPECT_FALSE(t4->bf16);
  auto a100 = find_gpu("a100");
  EXPECT_TRUE(a100->bf16);
  EXPECT_FALSE(a100->fp8);
  auto h100 = find_gpu("h100");
  EXPECT_TRUE(h100->fp8);
  EXPECT_FALSE(h100->fp4);
  EXPECT_TRUE(find_gpu("b200")->fp4);
  EXPECT_TRUE(find_gpu("5090")->fp4);
  EXPECT_FALSE(find_gpu("4090")->nvlink);
  EXPECT_TRUE(find_gpu("h100 sxm")->nvlink);
  // One tensor-parallel group spans an HGX board's 8 GPUs (tp_domain_gpus absent: 8), for fit and serve.
  EXPECT_EQ(find_gpu("h100 sxm")->tensor_parallel_domain, 8u);
  for (const GpuSpec& gpu : gpu_catalog()) EXPECT_GE(gpu.tensor_parallel_domain, 1u) << gpu.name;
}

struct FuzzyCase {
  const char* query;
  const char* expected;
};

class FindGpuFuzzy : public ::testing::TestWithParam<FuzzyCase> {};

TEST_P(FindGpuFuzzy, ResolvesWhatUsersType) {
  auto gpu = find_gpu(GetParam().query);
  ASSERT_TRUE(gpu.ok()) << gpu.error().message;
  EXPECT_EQ(gpu->name, GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Names, FindGpuFuzzy,
    ::testing::Values(FuzzyCase{"4090", "GeForce RTX 4090 24GB"},
                      FuzzyCase{"RTX4090", "GeForce RTX 4090 24GB"},
                      FuzzyCase{"NVIDIA GeForce RTX 4090", "GeForce RTX 4090 24GB"},
                      FuzzyCase{"h100-80", "H100 SXM 80GB"},
                      FuzzyCase{"H100", "H100 SXM 80GB"},
                      FuzzyCase{"h100 pcie", "H100 PCIe 80GB"},
                      FuzzyCase{"h100 nvl", "H100 NVL 94GB"},
                      FuzzyCase{"NVIDIA H100 80GB HBM3", "H100 SXM 80GB"},
                      FuzzyCase{"a100 40gb", "A100 SXM4 40GB"},
                      FuzzyCase{"A100-40", "A100 SXM4 40GB"},
                      FuzzyCase{"a100", "A100 SXM4 80GB"},
                      FuzzyCase{"NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"},
                      FuzzyCase{"a10", "A10 24GB"},
                      FuzzyCase{"a10g", "A10G 24GB"},
                      FuzzyCase{"L40", "L40 48GB"},
                      FuzzyCase{"l40s", "L40S 48GB"},
                      FuzzyCase{"Tesla T4", "Tesla T4 16GB"},
                      FuzzyCase{"v100 32gb", "Tesla V100 SXM2 32GB"},
                      FuzzyCase{"mi300x", "Instinct MI300X 192GB"},
                      FuzzyCase{"rtx 6000 ada", "RTX 6000 Ada 48GB"},
                      FuzzyCase{"rtx pro 6000", "RTX PRO 6000 Blackwell 96GB"},
                      FuzzyCase{"m2 ultra", "Apple M-series 192GB"},
                      FuzzyCase{"mac 64gb", "Apple M-series 64GB"},
                      FuzzyCase{"m2 ultra 128gb", "Apple M-series 128GB"}, FuzzyCase{"m2 ultra 64gb", "Apple M-series 64GB"},
                      FuzzyCase{"m3 ultra 256gb", "Apple M-series 256GB"}, FuzzyCase{"m4 pro 24gb", "Apple M-series 24GB"},
                      FuzzyCase{"gh200", "GH200 96GB"},
                      FuzzyCase{"h20", "H20 96GB"}, FuzzyCase{"NVIDIA H20", "H20 96GB"},
                      FuzzyCase{"h200", "H200 SXM 141GB"},
                      // A trailing size picks among the cards of that name, however it is written.
                      FuzzyCase{"4090 24gb", "GeForce RTX 4090 24GB"},
                      FuzzyCase{"3090 24gb", "GeForce RTX 3090 24GB"},
                      FuzzyCase{"4080 16gb", "GeForce RTX 4080 16GB"},
                      FuzzyCase{"3060 12gb", "GeForce RTX 3060 12GB"},
                      FuzzyCase{"4090-24", "GeForce RTX 4090 24GB"},
                      FuzzyCase{"4090 24", "GeForce RTX 4090 24GB"},
                      FuzzyCase{"a100-40g", "A100 SXM4 40GB"},
                      FuzzyCase{"a100 pcie 40g", "A100 PCIe 40GB"},
                      FuzzyCase{"a6000 48gb", "RTX A6000 48GB"},
                      FuzzyCase{"l4 24gb", "L4 24GB"},
                      FuzzyCase{"a40", "A40 48GB"}));

// A size no card of that name has is said as such, naming the sizes there are.
TEST(FindGpu, TrailingSizeThatNoCardOfTheNameHas) {
  auto gpu = find_gpu("4090 48gb");
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.error().message,
            "unknown GPU '4090 48gb': no '4090' card in the catalog has 48 GB (GeForce RTX 4090 24GB); `oomdoc gpus "
            "--catalog` lists the cards, or give --memory SIZE");
}

// Letters and digits typed as one word stay together: "a40" is the A40, not an A100 with 40 GB.
TEST(FindGpu, OtherSizesKeepTheWordsTypedAsOne) {
  auto a40 = find_gpu("a40");
  ASSERT_TRUE(a40.ok());
  EXPECT_TRUE(other_sizes_named("a40", *a40).empty());
  auto a100 = find_gpu("a100");
  ASSERT_TRUE(a100.ok());
  std::vector<std::string> others;
  for (const GpuSpec* g : other_sizes_named("a100", *a100)) others.push_back(g->name);
  EXPECT_EQ(others, (std::vector<std::string>{"A100 SXM4 40GB", "A100 PCIe 40GB"}));
}

TEST(FindGpu, UnknownNameNamesTheClosestEntries) {
  auto gpu = find_gpu("h300");
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.error().message.find("unknown GPU 'h300'"), std::string::npos);
  EXPECT_NE(gpu.error().message.find("H100"), std::string::npos) << gpu.error().message;
  auto empty = find_gpu("  --  ");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("names no GPU"), std::string::npos);
}

// A query that fits several different cards equally is an error listing them, not the first in
// the file; a bare number is a card only when it is that card's alias ("4090").
TEST(FindGpu, AmbiguousNamesListTheCandidates) {
  auto rtx = find_gpu("rtx");
  ASSERT_FALSE(rtx.ok());
  EXPECT_EQ(rtx.error().message,
            "ambiguous GPU 'rtx': it fits 7 cards equally (GeForce RTX 3060 12GB, GeForce RTX 3080 10GB, "
            "GeForce RTX 3090 24GB, GeForce RTX 4060 8GB, GeForce RTX 4080 16GB, GeForce RTX 4090 24GB and 1 more); "
            "name one (`oomdoc gpus --catalog` lists all)");
  auto sixteen = find_gpu("16");
  ASSERT_FALSE(sixteen.ok());
  EXPECT_EQ(sixteen.error().message.rfind("ambiguous GPU '16': a number alone names no card (Apple M-series 16GB, ", 0),
            0u) << sixteen.error().message;
  EXPECT_NE(sixteen.error().message.find("Tesla T4 16GB"), std::string::npos);
  auto hundred = find_gpu("100");
  ASSERT_FALSE(hundred.ok());
  EXPECT_NE(hundred.error().message.find("ambiguous GPU '100'"), std::string::npos);
  EXPECT_NE(hundred.error().message.find("H100 SXM 80GB"), std::string::npos);
  // A card the catalog lacks, whose name is a unit word and a number: said as unknown, not as "a
  // number alone" the user never typed.
  auto gb200 = find_gpu("NVIDIA GB200");
  ASSERT_FALSE(gb200.ok());
  EXPECT_EQ(gb200.error().message,
            "unknown GPU 'NVIDIA GB200': no catalog card has that name, and the number 200 alone names none "
            "(H200 SXM 141GB, GH200 96GB, B200 180GB); `oomdoc gpus --catalog` lists the cards, or give --memory SIZE");
  auto sxm = find_gpu("sxm");
  ASSERT_FALSE(sxm.ok());
  EXPECT_NE(sxm.error().message.find("ambiguous GPU 'sxm': it fits "), std::string::npos);
  // The names the docs promise stay unambiguous.
  EXPECT_EQ(find_gpu("4090")->name, "GeForce RTX 4090 24GB");
  EXPECT_EQ(find_gpu("3090")->name, "GeForce RTX 3090 24GB");
  EXPECT_EQ(find_gpu("h100")->name, "H100 SXM 80GB");
  EXPECT_EQ(find_gpu("h100-80")->name, "H100 SXM 80GB");
  EXPECT_EQ(find_gpu("a100-80")->name, "A100 SXM4 80GB");
  EXPECT_EQ(find_gpu("Tesla T4")->name, "Tesla T4 16GB");
  EXPECT_EQ(find_gpu("NVIDIA H100 80GB HBM3")->name, "H100 SXM 80GB");
  // A fuller name than any alias still resolves when one card fits it best.
  EXPECT_EQ(find_gpu("h100 hbm3")->name, "H100 SXM 80GB");
}

TEST(FindGpu, SuggestionsAreOnlyCloseNames) {
  auto far = find_gpu("xyzzy 9000");
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.error().message,
            "unknown GPU 'xyzzy 9000'; no catalog entry is close (`oomdoc gpus --catalog` lists all, or give "
            "--memory SIZE)");
  auto typo = find_gpu("rtx 4900");
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.error().message.rfind("unknown GPU 'rtx 4900'; closest catalog entries: GeForce RTX 4090 24GB", 0), 0u)
      << typo.error().message;
  // A card with the typed model number comes first, the letters typed onto the number included.
  for (const char* name : {"4090ti", "4090 ti"}) {
    auto ti = find_gpu(name);
    ASSERT_FALSE(ti.ok());
    EXPECT_EQ(ti.error().message, fmt::format("unknown GPU '{}'; closest catalog entries: GeForce RTX 4090 24GB, GeForce "
                                              "RTX 3090 24GB, GeForce RTX 4060 Ti 16GB (`oomdoc gpus --catalog` lists "
                                              "all, or give --memory SIZE)", name));
  }
  auto h300 = find_gpu("h300");
  ASSERT_FALSE(h300.ok());
  EXPECT_EQ(h300.error().message, "unknown GPU 'h300'; closest catalog entries: H100 SXM 80GB, H200 SXM 141GB "
                                  "(`oomdoc gpus --catalog` lists all, or give --memory SIZE)");
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// Cards of two kinds in one job are refused with what to give instead.
TEST(GpuCatalog, MixedCardsAreRefusedWithTheWayOut) {
  for (const char* name : {"4090,3090", "5070ti+5090"}) {
    auto gpu = find_gpu(name);
    ASSERT_FALSE(gpu.ok()) << name;
    EXPECT_EQ(gpu.error().message, std::string("GPU name '") + name + "': one kind of card per job; mixed GPUs are not "
                                   "sized. Give the card with the least memory: every GPU then gets at least what the "
                                   "prediction says");
  }
}

}  // namespace
}  // namespace oomdoc
