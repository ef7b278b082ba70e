// llama.cpp command lines (readers/llama_cpp_args.h) into a llama.cpp job.
#include "readers/llama_cpp_args.h"

#include <gtest/gtest.h>

namespace oomdoc {
namespace {

TEST(LlamaCppArgs, FlagsBecomeTheJob) {
  auto c = parse_llama_cpp_command_line({"./build/bin/llama-server", "-m", "m.gguf", "--ctx-size=32768", "-ngl", "20",
                                         "-ub", "256", "-np", "4", "-fa", "auto", "-ctk", "q8_0", "-ctv", "q8_0",
                                         "--port", "8080", "--mlock"});
  ASSERT_TRUE(c.has_value());
  ASSERT_TRUE(c->ok()) << c->error().message;
  const LlamaCppCommand& cmd = c->value();
  EXPECT_EQ(cmd.launcher, "llama-server");
  EXPECT_EQ(cmd.model_path, "m.gguf");
  EXPECT_EQ(cmd.context, 32768u);
  EXPECT_EQ(cmd.job.implementation, "llama_cpp");
  EXPECT_EQ(cmd.job.gpu_layers, 20u);
  EXPECT_EQ(cmd.job.prefill_chunk, 256u);
  EXPECT_EQ(cmd.job.batch_size, 4u);
  EXPECT_EQ(cmd.job.attention_impl, "flash");   // -fa auto: taken as on, and said so
  ASSERT_EQ(cmd.notes.size(), 1u);
  EXPECT_EQ(cmd.job.kv_cache_dtype, "q8_0");
  EXPECT_EQ(cmd.ignored, (std::vector<std::string>{"--port 8080", "--mlock"}));
  // -c is shared by the slots: 32768 / 4 per sequence.
  EXPECT_EQ(llama_cpp_job_for(cmd, 131072).job.prompt_len, 8192u);
}

TEST(LlamaCppArgs, ContextZeroIsTheModelsAndOldProgramNamesAreRead) {
  auto c = parse_llama_cpp_command_line({"main -m m.gguf -c 0 -fa off -ngl -1"});   // one shell string
  ASSERT_TRUE(c.has_value() && c->ok());
  EXPECT_EQ(c->value().context, 0u);
  EXPECT_EQ(c->value().job.attention_impl, "eager");
  EXPECT_FALSE(c->value().job.gpu_layers.has_value());   // -1: every layer
  EXPECT_EQ(llama_cpp_job_for(c->value(), 8192).job.prompt_len, 8192u);
}

TEST(LlamaCppArgs, ArgCppForms) {
  auto parse = [](std::vector<std::string> words) {
    auto c = parse_llama_cpp_command_line(words);
    EXPECT_TRUE(c.has_value() && c->ok());
    return c->value();
  };
  // -fa with arg.cpp's falsy words is off; without -fa, current builds' auto (on), said so.
  for (const char* off : {"off", "0", "false", "disabled"}) {
    EXPECT_EQ(parse({"llama-server", "-m", "m.gguf", "-fa", off}).job.attention_impl, "eager") << off;
  }
  const LlamaCppCommand bare = parse({"llama-server", "-m", "m.gguf"});
  EXPECT_EQ(bare.job.attention_impl, "flash");
  EXPECT_FALSE(bare.gpu_layers_given);
  ASSERT_FALSE(bare.notes.empty());
  EXPECT_NE(bare.notes[0].find("-fa not given"), std::string::npos);
  // --ctx_size is --ctx-size; n_ubatch is min(-b, -ub).
  EXPECT_EQ(parse({"llama-server", "-m", "m.gguf", "--ctx_size", "4096"}).context, 4096u);
  EXPECT_EQ(parse({"llama-server", "-m", "m.gguf", "-ub", "4096", "-b", "2048"}).job.prefill_chunk, 2048u);
  EXPECT_EQ(parse({"llama-server", "-m", "m.gguf", "-b", "128"}).job.prefill_chunk, 128u);
  // -ngl all is given (not "not given"); flags that change memory without being sized are named.
  const LlamaCppCommand offload = parse({"llama-server", "-m", "m.gguf", "-ngl", "all", "-nkvo", "-ot", "exps=CPU", "--threads", "8"});
  EXPECT_TRUE(offload.gpu_layers_given);
  EXPECT_EQ(offload.not_modelled, (std::vector<std::string>{"-nkvo", "-ot exps=CPU"}));
  EXPECT_EQ(offload.ignored, (std::vector<std::string>{"--threads 8"}));
  // The report's notes: -c left out (the trained context), and the two lists.
  const auto notes = llama_cpp_job_for(offload, 8192).notes;
  EXPECT_EQ(notes, (std::vector<std::string>{
                       "-fa not given: auto, taken as on (current builds turn it on with CUDA; 2024 builds had it off: give -fa off)",
                       "-c not given: the model's trained context, 8192 tokens (current builds; 2024 builds used 4096)",
                       "not sized (they change GPU memory): -nkvo -ot exps=CPU",
                       "ignored (no effect on GPU memory): --threads 8"}));
  // K and V of different types: both sized at the larger; a quantized V needs flash attention.
  EXPECT_EQ(parse({"llama-server", "-m", "m.gguf", "-ctv", "q8_0"}).job.kv_cache_dtype, "f16");
  auto refused = parse_llama_cpp_command_line({"llama-server", "-m", "m.gguf", "-ctv", "q8_0", "-fa", "off"});
  ASSERT_TRUE(refused.has_value());
  EXPECT_FALSE(refused->ok());
}

TEST(LlamaCppArgs, NotLlamaCppOrBadFlags) {
  EXPECT_FALSE(parse_llama_cpp_command_line({"vllm", "serve", "m"}).has_value());
  EXPECT_FALSE(parse_llama_cpp_command_line({"python", "-m", "llama_cpp.server"}).has_value());
  auto missing = parse_llama_cpp_command_line({"llama-cli", "-c", "4096"});
  ASSERT_TRUE(missing.has_value());
  EXPECT_FALSE(missing->ok());
  auto ub = parse_llama_cpp_command_line({"llama-server", "-m", "m.gguf", "-ub", "0"});
  ASSERT_TRUE(ub.has_value());
  ASSERT_FALSE(ub->ok());
  EXPECT_EQ(ub->error().message, "llama-server: -ub '0' is not a batch size");
  auto dangling = parse_llama_cpp_command_line({"llama-server", "-m"});
  ASSERT_TRUE(dangling.has_value());
  EXPECT_FALSE(dangling->ok());
}

}  // namespace
}  // namespace oomdoc
