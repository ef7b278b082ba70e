// llama.cpp command lines (readers/llama_cpp_args.h) into a llama.cpp job.
#include "readers/llama_cpp_args.h"

#include <gtest/gtest.h>

#include <set>

#include "readers/llama_cpp_flags.h"

namespace oomdoc {
namespace {

TEST(LlamaCppArgs, FlagsBecomeTheJob) {
  auto c = parse_llama_cpp_command_line({"./build/bin/llama-server", "-m", "m.gguf", "--ctx-size", "32768", "-ngl", "20",
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

// Shell text: the command that runs llama.cpp, past cd, nohup and env, without its redirections.
TEST(LlamaCppArgs, ShellTextAroundTheProgram) {
  auto c = parse_llama_cpp_command_line({"cd ~/llama.cpp && nohup env CUDA_VISIBLE_DEVICES=1 ./llama-server -m m.gguf "
                                         "-c 8192 > server.log 2>&1 &"});
  ASSERT_TRUE(c.has_value());
  ASSERT_TRUE(c->ok()) << c->error().message;
  EXPECT_EQ(c->value().launcher, "llama-server");
  EXPECT_EQ(c->value().context, 8192u);
  EXPECT_TRUE(c->value().ignored.empty());
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

// llama.cpp refuses every word it does not know (common_params_parse_ex: "error: invalid
// argument: %s"), so a typo is an error with the flag it most likely meant, never "ignored".
TEST(LlamaCppArgs, UnknownFlagsAreRefusedWithTheFlagMeant) {
  auto error = [](std::vector<std::string> words) {
    auto c = parse_llama_cpp_command_line(words);
    EXPECT_TRUE(c.has_value());
    EXPECT_FALSE(c->ok());
    return c->ok() ? std::string() : c->error().message;
  };
  EXPECT_EQ(error({"llama-server", "-m", "m.gguf", "--ctx-sise", "65536"}),
            "llama-server: --ctx-sise: not a llama.cpp flag (did you mean --ctx-size?); it exits with \"error: invalid "
            "argument: --ctx-sise\"");
  EXPECT_EQ(error({"llama-cli", "-m", "m.gguf", "--n-gpu-layer", "5"}),
            "llama-cli: --n-gpu-layer: not a llama.cpp flag (did you mean --n-gpu-layers?); it exits with \"error: "
            "invalid argument: --n-gpu-layer\"");
  EXPECT_EQ(error({"llama-server", "-m", "m.gguf", "--frobnicate"}),
            "llama-server: --frobnicate: not a llama.cpp flag; it exits with \"error: invalid argument: --frobnicate\"");
  // It looks words up whole: --ctx-size=4096 is no flag to it; nor is a stray positional word.
  EXPECT_EQ(error({"llama-server", "-m", "m.gguf", "--ctx-size=4096"}),
            "llama-server: --ctx-size=4096: llama.cpp takes a value as the next word (--ctx-size 4096); it exits with "
            "\"error: invalid argument: --ctx-size=4096\"");
  EXPECT_EQ(error({"llama-server", "-m", "m.gguf", "4096"}),
            "llama-server: '4096': llama.cpp takes no positional arguments (a flag's value is missing its flag?); it "
            "exits with \"error: invalid argument: 4096\"");
  // Cache types: llama.cpp's exact names (kv_cache_types), f32 not fp32.
  EXPECT_EQ(error({"llama-server", "-m", "m.gguf", "-ctk", "fp32"}),
            "llama-server: -ctk fp32: llama.cpp's cache types are f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1; "
            "it exits with \"Unsupported cache type: fp32\"");
  EXPECT_EQ(error({"llama-server", "-m", "m.gguf", "-ctv", "Q8_0"}),
            "llama-server: -ctv Q8_0: llama.cpp's cache types are f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1; "
            "it exits with \"Unsupported cache type: Q8_0\"");
}

TEST(LlamaCppArgs, KnownFlagsTakeTheirValues) {
  auto parse = [](std::vector<std::string> words) {
    auto c = parse_llama_cpp_command_line(words);
    EXPECT_TRUE(c.has_value() && c->ok()) << (c && !c->ok() ? c->error().message : "");
    return c->value();
  };
  EXPECT_EQ(parse({"llama-server", "-m", "m.gguf", "-ctk", "f32", "-ctv", "f32"}).job.kv_cache_dtype, "fp32");
  EXPECT_EQ(parse({"llama-server", "-m", "m.gguf", "-ctk", "iq4_nl", "-ctv", "q5_1"}).job.kv_cache_dtype, "q5_1");
  // --log-colors: a switch in 2024 builds, on/off/auto after; --control-vector-layer-range takes two;
  // negative values are values; draft models are named as not sized.
  const LlamaCppCommand c = parse({"llama-server", "--log-colors", "-m", "m.gguf", "--seed", "-1", "--color", "auto",
                                   "--control-vector-layer-range", "3", "9", "-md", "draft.gguf", "--mlock"});
  EXPECT_EQ(c.model_path, "m.gguf");
  EXPECT_EQ(c.ignored, (std::vector<std::string>{"--log-colors", "--seed -1", "--color auto",
                                                 "--control-vector-layer-range 3 9", "--mlock"}));
  EXPECT_EQ(c.not_modelled, (std::vector<std::string>{"-md draft.gguf"}));
  auto dangling = parse_llama_cpp_command_line({"llama-server", "-m", "m.gguf", "--port"});
  ASSERT_TRUE(dangling.has_value());
  ASSERT_FALSE(dangling->ok());
  EXPECT_EQ(dangling->error().message, "llama-server: --port needs a value");
}

TEST(LlamaCppFlags, EverySpellingIsOneFlag) {
  const auto& spellings = llama_cpp_flag_spellings();
  std::set<std::string> unique(spellings.begin(), spellings.end());
  EXPECT_EQ(unique.size(), spellings.size());
  for (const std::string& s : spellings) EXPECT_EQ(s[0], '-') << s;
  EXPECT_EQ(find_llama_cpp_flag("--ctx-size")->values, 1);
  EXPECT_TRUE(find_llama_cpp_flag("-nkvo")->changes_memory);
  EXPECT_FALSE(find_llama_cpp_flag("--ctx-sise").has_value());
}

}  // namespace
}  // namespace oomdoc
