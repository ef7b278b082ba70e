// QA's serve command lines end to end: the exact figures and ids they print.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace oomdoc {
namespace {

using testing::run_cli;

TEST(ServeQaCli, KvCacheMemoryBytesLargerThanThe4090DoesNotFit) {
  auto r = run_cli({"serve", "--gpu", "4090", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                    "--kv-cache-memory-bytes", "17179869184", "--max-model-len", "8192"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("Does not fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CUDA out of memory while allocating the KV cache (16.00 GiB of KV tensors;"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("drop --kv-cache-memory-bytes"), std::string::npos) << r.out;
}

TEST(ServeQaCli, NumGpuBlocksOverrideIsAppliedEverywhere) {
  auto r = run_cli({"serve", "--gpu", "4090", "--json", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                    "--num-gpu-blocks-override", "1000", "--max-model-len", "8192"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["kv_cache"]["num_blocks"], 1000);
  EXPECT_EQ(doc["kv_cache"]["tokens"], 16000);
  EXPECT_DOUBLE_EQ(doc["kv_cache"]["max_concurrency"].get<double>(), 1000.0 / 512.0);
  EXPECT_EQ(doc["kv_cache"]["allocated_bytes"], 1000ull * (2ull << 20));
}

TEST(ServeQaCli, InstructVariantsUseTheirOwnContext) {
  for (const char* id : {"Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-72B-Instruct"}) {
    auto r = run_cli({"serve", "--gpu", "h100", "--json", "--", "vllm", "serve", id});
    auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["settings"]["model_context"], 32768) << id;
    EXPECT_EQ(doc["settings"]["max_model_len"], 32768) << id;
  }
  auto base = run_cli({"serve", "--gpu", "h100", "--json", "--", "vllm", "serve", "Qwen/Qwen2.5-7B"});
  EXPECT_EQ(nlohmann::json::parse(base.out)["settings"]["model_context"], 131072);
}

TEST(ServeQaCli, MisspelledFlagsAreErrorsUnknownOnesAreListed) {
  auto typo = run_cli({"serve", "--gpu", "4090", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                       "--max-model-length", "8192", "--gpu-memory-utilisation", "0.5", "--tensor-paralel-size", "2"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_EQ(typo.err, "oomdoc: serve: --max-model-length: not a vLLM flag (did you mean --max-model-len?); vLLM would "
                      "exit with 'unrecognized arguments'\n");
  EXPECT_TRUE(typo.out.empty());
  auto unknown = run_cli({"serve", "--gpu", "4090", "--json", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                          "--max-model-len", "8192", "--port", "8000", "--my-plugin-flag", "on"});
  ASSERT_EQ(unknown.exit_code, 0) << unknown.err;
  auto doc = nlohmann::json::parse(unknown.out);
  EXPECT_EQ(doc["ignored_flags"], nlohmann::json::array({"--port 8000"}));
  EXPECT_EQ(doc["unknown_flags"], nlohmann::json::array({"--my-plugin-flag on"}));
  EXPECT_EQ(doc["warnings"], nlohmann::json::array({"unknown to oomdoc, not checked (vLLM may refuse or use them): "
                                                    "--my-plugin-flag on"}));
  auto text = run_cli({"serve", "--gpu", "4090", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                       "--max-model-len", "8192", "--my-plugin-flag", "on"});
  EXPECT_NE(text.out.find("Unknown to oomdoc (not checked): --my-plugin-flag on"), std::string::npos) << text.out;
}

TEST(ServeQaCli, PipelineParallelFixHasItsOwnId) {
  auto r = run_cli({"serve", "--gpu", "4090", "--json", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  int pipeline = 0;
  for (const auto& fix : doc["fixes"]) {
    const std::string flag = fix["flag"];
    if (flag.rfind("--pipeline-parallel-size", 0) == 0) {
      EXPECT_EQ(fix["fix_id"], "vllm_pipeline_parallel");
      ++pipeline;
    }
  }
  EXPECT_EQ(pipeline, 1) << r.out;
}

TEST(ServeQaCli, VllmErrorsGetVllmFixesNotTransformersCode) {
  const std::string log =
      "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that can be stored "
      "in KV cache (43920). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
      "the engine.\n";
  auto r = run_cli({"explain"}, log);
  EXPECT_EQ(r.out.find("from_pretrained"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("BitsAndBytesConfig"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--quantization"), std::string::npos) << r.out;
}

TEST(ServeQaCli, OldVersionsPrintOnlyTheirOwnLines) {
  auto r = run_cli({"serve", "--gpu", "h100", "--vllm-version", "0.2.0", "--", "vllm", "serve",
                    "meta-llama/Llama-2-7b-hf"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("the current vLLM instance can use"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("model weights take"), std::string::npos);
  EXPECT_EQ(r.out.find("Maximum concurrency"), std::string::npos);
  EXPECT_EQ(r.out.find("Loading model weights took"), std::string::npos);
  EXPECT_NE(r.out.find("# GPU blocks: "), std::string::npos);
}

TEST(ServeQaCli, VllmUseV1ZeroWithoutAVersionIsSaidToBeIgnored) {
  auto r = run_cli({"serve", "--gpu", "h100", "--", "VLLM_USE_V1=0", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                    "--max-model-len", "8192"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("V1 engine"), std::string::npos);
  EXPECT_NE(r.out.find("warning: VLLM_USE_V1=0 is ignored: vLLM removed the V0 engine in v0.11.0"), std::string::npos)
      << r.out;
}

// Round 2: abbreviations of memory flags, offline-quantized methods on a 16-bit checkpoint, and an
// override smaller than one request (V1 starts, with a warning).
TEST(ServeQaCli, AbbreviationsAndOfflineQuantizationAreRefused) {
  auto abbreviated = run_cli({"serve", "--gpu", "4090", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                              "--max-model-len", "8192", "--tensor-parallel", "2"});
  EXPECT_EQ(abbreviated.exit_code, 2);
  EXPECT_EQ(abbreviated.err, "oomdoc: serve: --tensor-parallel: an abbreviation of --tensor-parallel-size; write it "
                             "out (vLLM's argument parser expands or refuses abbreviations depending on its version)\n");
  auto awq = run_cli({"serve", "--gpu", "4090", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                      "--max-model-len", "8192", "--quantization", "awq"});
  EXPECT_EQ(awq.exit_code, 2);
  EXPECT_THAT(awq.err, ::testing::HasSubstr("--quantization awq needs a checkpoint quantized with awq"));
  auto fp8 = run_cli({"serve", "--gpu", "4090", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                      "--max-model-len", "8192", "--quantization", "fp8"});
  EXPECT_EQ(fp8.exit_code, 0) << fp8.err;
}

TEST(ServeQaCli, OverrideSmallerThanOneRequestWarnsInV1) {
  auto r = run_cli({"serve", "--gpu", "4090", "--json", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                    "--max-model-len", "8192", "--num-gpu-blocks-override", "100"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  bool warned = false;
  for (const auto& w : doc["warnings"]) {
    if (w.get<std::string>().find("requests longer than 1600 tokens can never be scheduled") != std::string::npos) warned = true;
  }
  EXPECT_TRUE(warned) << doc["warnings"].dump();
}

}  // namespace
}  // namespace oomdoc
