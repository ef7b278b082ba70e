#include "readers/vllm_args.h"

#include <gtest/gtest.h>

#include <fstream>

namespace oomdoc {
namespace {

ServeConfig parse_ok(const std::vector<std::string>& words) {
  auto config = parse_vllm_command_line(words);
  EXPECT_TRUE(config.ok()) << config.error().message;
  return config.ok() ? config.value() : ServeConfig{};
}

TEST(VllmArgs, VllmServeWithEveryMemoryFlag) {
  ServeConfig c = parse_ok({"vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "32768",
                            "--kv-cache-dtype", "fp8", "--tensor-parallel-size", "2",
                            "--gpu-memory-utilization=0.85", "--max_num_seqs", "64",
                            "--max-num-batched-tokens", "4096", "--block-size", "32", "--dtype",
                            "half", "-q", "awq", "-pp", "2", "--enforce-eager", "--cpu-offload-gb",
                            "4", "--enable-prefix-caching", "--limit-mm-per-prompt",
                            "{\"image\": 2, \"audio\": 0}", "--port", "8000"});
  EXPECT_EQ(c.launcher, "vllm serve");
  EXPECT_EQ(c.model, "Qwen/Qwen3-8B");
  EXPECT_EQ(c.max_model_len, 32768u);
  EXPECT_EQ(c.kv_cache_dtype, "fp8");
  EXPECT_EQ(c.tensor_parallel_size, 2u);
  EXPECT_EQ(c.pipeline_parallel_size, 2u);
  EXPECT_DOUBLE_EQ(*c.gpu_memory_utilization, 0.85);
  EXPECT_EQ(c.max_num_seqs, 64u);
  EXPECT_EQ(c.max_num_batched_tokens, 4096u);
  EXPECT_EQ(c.block_size, 32u);
  EXPECT_EQ(c.dtype, "half");
  EXPECT_EQ(c.quantization, "awq");
  EXPECT_TRUE(c.enforce_eager);
  EXPECT_DOUBLE_EQ(c.cpu_offload_gb, 4);
  EXPECT_EQ(c.enable_prefix_caching, true);
  EXPECT_EQ(c.limit_mm_per_prompt.at("image"), 2u);
  EXPECT_EQ(c.limit_mm_per_prompt.at("audio"), 0u);
  ASSERT_EQ(c.ignored.size(), 1u);
  EXPECT_EQ(c.ignored[0], "--port 8000");
}

// A missing space glues a memory flag onto the value before it (vllm-project/vllm#28228's command).
TEST(VllmArgs, MemoryFlagGluedToTheValueBeforeItIsRefused) {
  auto config = parse_vllm_command_line({"vllm", "serve", "Qwen/Qwen3-8B", "--port", "8111--gpu-memory-utilization",
                                         "0.95", "--max_model_len", "32768"});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().message, "--port 8111--gpu-memory-utilization: --gpu-memory-utilization is glued to the "
                                    "value before it (a missing space?); vLLM would not read it as a flag");
  // A value that only contains two dashes is a value.
  EXPECT_TRUE(parse_vllm_command_line({"vllm", "serve", "Qwen/Qwen3-8B", "--served-model-name", "qwen--8b"}).ok());
  EXPECT_TRUE(parse_vllm_command_line({"vllm", "serve", "Qwen/Qwen3-8B", "--served-model-name", "my--model"}).ok());
  // A name or a path may hold any double dash, a flag's name included.
  EXPECT_TRUE(parse_vllm_command_line({"vllm", "serve", "Qwen/Qwen3-8B", "--served-model-name", "my--max-model-len"}).ok());
  EXPECT_TRUE(parse_vllm_command_line({"vllm", "serve", "Qwen/Qwen3-8B", "--download-dir", "/data/x--max-num-seqs"}).ok());
  // A numeric flag's value with a flag glued on is still refused.
  EXPECT_FALSE(parse_vllm_command_line({"vllm", "serve", "Qwen/Qwen3-8B", "--max-num-seqs", "8--max-model-len", "4096"}).ok());
}

// `--config FILE` (vLLM's YAML of arguments) is read: its settings first, the command line's own
// flags over them; true is the bare switch, false leaves it out; an unreadable or invalid file is
// refused with the reason.
TEST(VllmArgs, ConfigFileSettingsUnderTheCommandLine) {
  const std::string path = ::testing::TempDir() + "vllm_config.yaml";
  {
    std::ofstream f(path);
    f << "max-model-len: 16384\ngpu_memory_utilization: 0.8\nenforce-eager: true\nenable-prefix-caching: false\n"
         "tensor-parallel-size: 2\nlimit-mm-per-prompt:\n  image: 0\n";
  }
  ServeConfig c = parse_ok({"vllm", "serve", "Qwen/Qwen3-8B", "--config", path, "--max-model-len", "8192"});
  EXPECT_EQ(c.max_model_len, 8192u);                 // the command line wins
  EXPECT_DOUBLE_EQ(*c.gpu_memory_utilization, 0.8);
  EXPECT_TRUE(c.enforce_eager);
  EXPECT_EQ(c.tensor_parallel_size, 2u);
  EXPECT_EQ(c.limit_mm_per_prompt.at("image"), 0u);
  EXPECT_EQ(c.config_file, path);
  auto missing = parse_vllm_command_line({"vllm", "serve", "Qwen/Qwen3-8B", "--config=/nonexistent/v.yaml"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "--config /nonexistent/v.yaml: cannot read the file; oomdoc reads it to see the "
                                     "settings vLLM would take from it (give its path on this machine)");
  // PyYAML's booleans (yes/on), an empty list left out, a float and a quoted number in a mapping kept
  // as they are; two files, or none, refused in vLLM's words.
  {
    std::ofstream f(path);
    f << "enforce-eager: yes\nlora-modules: []\nhf-overrides:\n  rope_scaling:\n    rope_type: yarn\n    factor: 4.0\n"
         "    original_max_position_embeddings: 32768\n  note: \"7\"\n";
  }
  ServeConfig typed = parse_ok({"vllm", "serve", "Qwen/Qwen2.5-7B", "--config", path});
  EXPECT_EQ(typed.model, "Qwen/Qwen2.5-7B");
  EXPECT_TRUE(typed.enforce_eager);
  ASSERT_TRUE(typed.rope_scaling_override.has_value());
  EXPECT_NE(typed.rope_scaling_override->find("\"factor\":4.0"), std::string::npos) << *typed.rope_scaling_override;
  auto twice = parse_vllm_command_line({"vllm", "serve", "Qwen/Qwen3-8B", "--config", path, "--config", path});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().message, "--config: vLLM refuses it: \"More than one config file specified!\"");
  auto none = parse_vllm_command_line({"vllm", "serve", "Qwen/Qwen3-8B", "--config"});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message, "--config: vLLM refuses it: \"No config file specified!\"");
  auto directory = parse_vllm_command_line({"vllm", "serve", "Qwen/Qwen3-8B", "--config", ::testing::TempDir()});
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.error().message.find("cannot read the file"), std::string::npos);
  {
    std::ofstream f(path);
    f << "a: [1,\n";
  }
  auto invalid = parse_vllm_command_line({"vllm", "serve", "Qwen/Qwen3-8B", "--config", path});
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.error().message.find("not valid YAML (line 2"), std::string::npos) << invalid.error().message;
}

TEST(VllmArgs, BooleanFlagBeforeTheModelDoesNotEatIt) {
  ServeConfig c = parse_ok({"vllm", "serve", "--trust-remote-code", "--tensor_parallel_size", "2",
                            "--gpu_memory_utilization=0.98", "/models/DeepSeek-R1-Distill-Qwen-14B"});
  EXPECT_EQ(c.model, "/models/DeepSeek-R1-Distill-Qwen-14B");
  EXPECT_EQ(c.tensor_parallel_size, 2u);
  EXPECT_DOUBLE_EQ(*c.gpu_memory_utilization, 0.98);
}

TEST(VllmArgs, PythonModuleFormAndEnvironment) {
  ServeConfig c = parse_ok({"CUDA_VISIBLE_DEVICES=0,1", "VLLM_USE_V1=0", "python3", "-m",
                            "vllm.entrypoints.openai.api_server", "--model=/cm/deepseek-coder-6.7b-instruct/",
                            "--tensor-parallel-size=2", "--dtype=float16", "--max-model-len", "-1"});
  EXPECT_EQ(c.launcher, "python -m vllm.entrypoints.openai.api_server");
  EXPECT_EQ(c.model, "/cm/deepseek-coder-6.7b-instruct/");
  EXPECT_EQ(c.env.at("VLLM_USE_V1"), "0");
  EXPECT_EQ(c.env.at("CUDA_VISIBLE_DEVICES"), "0,1");
  EXPECT_TRUE(c.max_model_len_auto);
  EXPECT_FALSE(c.max_model_len);
}

TEST(VllmArgs, WholeCommandInOneQuotedWord) {
  ServeConfig c = parse_ok({"vllm serve 'meta-llama/Llama-3.1-8B' --max-model-len 32k --kv-cache-memory-bytes 8G "
                            "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 3}'"});
  EXPECT_EQ(c.model, "meta-llama/Llama-3.1-8B");
  EXPECT_EQ(c.max_model_len, 32000u);  // vLLM: lower-case k is 1000
  EXPECT_EQ(c.kv_cache_memory_bytes, 8ull << 30);
  EXPECT_EQ(c.num_speculative_tokens, 3u);
  EXPECT_EQ(c.speculative_method, "mtp");
}

// Shell text pasted whole: the launch is the first command that runs vLLM; redirections, a
// trailing '&' and comments are shell syntax, not flags; exports before it and wrappers (nohup,
// env, uv run) give its environment.
TEST(VllmArgs, ShellTextAroundTheLaunch) {
  ServeConfig redirected = parse_ok({"vllm serve m --max-model-len 8192 > log.txt 2>&1 & # background"});
  EXPECT_EQ(redirected.model, "m");
  EXPECT_EQ(redirected.max_model_len, 8192u);
  EXPECT_TRUE(redirected.unknown.empty());
  ServeConfig exported = parse_ok({"export VLLM_USE_V1=0 HF_HOME=/data; cd /srv && nohup env CUDA_VISIBLE_DEVICES=0,1 "
                                   "vllm serve m --tensor-parallel-size 2 &>> out.log | tee x"});
  EXPECT_EQ(exported.env.at("VLLM_USE_V1"), "0");
  EXPECT_EQ(exported.env.at("HF_HOME"), "/data");
  EXPECT_EQ(exported.env.at("CUDA_VISIBLE_DEVICES"), "0,1");
  EXPECT_EQ(exported.tensor_parallel_size, 2u);
  EXPECT_TRUE(exported.unknown.empty());
  ServeConfig uv = parse_ok({"uv", "run", "--with", "vllm", "vllm", "serve", "m", "--max-model-len", "4096"});
  EXPECT_EQ(uv.launcher, "vllm serve");
  EXPECT_EQ(uv.max_model_len, 4096u);
  // Quoted, the same characters are arguments.
  ServeConfig quoted = parse_ok({"vllm serve m --chat-template '#{x} > y & z'"});
  EXPECT_EQ(quoted.model, "m");
  EXPECT_TRUE(quoted.unknown.empty());
}

// Each wrapper's own options (review of qa21): sudo -n and -S take no value, time -p none, pixi
// run -e one; the first command that launches vLLM is read, not the first python or docker one; a
// host's exports do not reach a container; a Windows CR LF continuation and flags on lines of their
// own (their backslash lost) stay the launch's.
TEST(VllmArgs, ShellTextWrappersAndLaunchChoice) {
  for (const char* line : {"sudo -n vllm serve m --max-model-len 8192", "sudo -S -u ml vllm serve m --max-model-len 8192",
                           "time -p vllm serve m --max-model-len 8192", "pixi run -e cuda vllm serve m --max-model-len 8192",
                           "python download.py && vllm serve m --max-model-len 8192",
                           "vllm serve m \\\r\n  --max-model-len 8192\r\n",
                           "vllm serve m\n  --max-model-len 8192\n"}) {
    ServeConfig c = parse_ok({line});
    EXPECT_EQ(c.model, "m") << line;
    EXPECT_EQ(c.max_model_len, 8192u) << line;
    EXPECT_TRUE(c.unknown.empty()) << line;
  }
  ServeConfig docker = parse_ok({"export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; docker pull vllm/vllm-openai:latest && "
                                 "HF_TOKEN=x docker run --gpus all -e VLLM_USE_V1=1 vllm/vllm-openai:latest --model m"});
  EXPECT_EQ(docker.launcher, "docker vllm/vllm-openai:latest");
  EXPECT_EQ(docker.env, (std::map<std::string, std::string>{{"VLLM_USE_V1", "1"}}));
  ServeConfig host = parse_ok({"export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; vllm serve m"});
  EXPECT_EQ(host.env.at("VLLM_ALLOW_LONG_MAX_MODEL_LEN"), "1");
  // `-e NAME` without a value passes the host's into the container.
  ServeConfig passed = parse_ok({"export VLLM_USE_V1=0; docker run -e VLLM_USE_V1 --env HF_HOME vllm/vllm-openai:v0.8.5 "
                                 "--model m"});
  EXPECT_EQ(passed.env, (std::map<std::string, std::string>{{"VLLM_USE_V1", "0"}}));
  // A here-document's body is data, not a launch; python's own options come before -m; a docker
  // run of another image (with a vllm-named volume) is not the launch.
  for (const char* text : {"cat > unit.conf <<'END'\nvllm serve other --max-model-len 100\nEND\nvllm serve m --max-model-len 8192",
                           "cat <<-EOF > x\n\tvllm serve other\n\tEOF\nvllm serve m --max-model-len 8192",
                           "cd /srv && python3 -u -X dev -m vllm.entrypoints.openai.api_server --model m --max-model-len 8192",
                           "docker run -v /data/vllm-models:/models busybox ls && vllm serve m --max-model-len 8192"}) {
    ServeConfig c = parse_ok({text});
    EXPECT_EQ(c.model, "m") << text;
    EXPECT_EQ(c.max_model_len, 8192u) << text;
  }
}

TEST(VllmArgs, ShellCommandsSplitLikeAShell) {
  auto commands = split_shell_commands("A=1 a 'b;c' d#e; f && g || h | i 2>&1 > out <in &>> both & j # k l\nm");
  ASSERT_TRUE(commands.ok());
  EXPECT_EQ(*commands, (std::vector<std::vector<std::string>>{
                           {"A=1", "a", "b;c", "d#e"}, {"f"}, {"g"}, {"h"}, {"i"}, {"j"}, {"m"}}));
}

// Variables the text sets are expanded where used (unquoted values split into words, quoted ones
// kept whole); what oomdoc cannot know stays one literal word, a command substitution's `|`
// included, and the error says it is a shell expansion.
TEST(VllmArgs, ShellVariablesTheTextSetsAreExpanded) {
  auto commands = split_shell_commands(
      "export TP=2\nmodel=org/m; ARGS=\"--max-model-len 8192  -pp 2\"\n"
      "vllm serve $model -tp ${TP} $ARGS \"$ARGS\" ${LEN:-4096} ${UTIL:=0.85} $UTIL ${NONE} $1 '$TP' \\$TP "
      "$(nvidia-smi -L | wc -l) `nproc` ${#TP} $EMPTY_UNSET end");
  ASSERT_TRUE(commands.ok());
  ASSERT_EQ(commands->size(), 4u);
  EXPECT_EQ((*commands)[3], (std::vector<std::string>{"vllm", "serve", "org/m", "-tp", "2", "--max-model-len", "8192",
                                                      "-pp", "2", "--max-model-len 8192  -pp 2", "4096", "0.85", "0.85",
                                                      "${NONE}", "$1", "$TP", "$TP", "$(nvidia-smi -L | wc -l)",
                                                      "`nproc`", "${#TP}", "$EMPTY_UNSET", "end"}));
  // `VAR=value program` sets the program's environment only, not the shell's variable.
  auto scoped = split_shell_commands("TP=4 true; echo $TP");
  ASSERT_TRUE(scoped.ok());
  EXPECT_EQ(scoped->back(), (std::vector<std::string>{"echo", "$TP"}));

  ServeConfig c = parse_ok({"MODEL=Qwen/Qwen3-8B\nTP=2\nvllm serve \"$MODEL\" --tensor-parallel-size $TP"});
  EXPECT_EQ(c.model, "Qwen/Qwen3-8B");
  EXPECT_EQ(c.tensor_parallel_size, 2u);
  // An assignment's value is not split (bash expands it whole), so ARGS keeps both flags; a default
  // is itself expanded and unquoted, nested braces included.
  ServeConfig assigned = parse_ok({"OPTS=\"--max-model-len 4096 -tp 2\"\nARGS=$OPTS\nvllm serve m $ARGS"});
  EXPECT_EQ(assigned.max_model_len, 4096u);
  EXPECT_EQ(assigned.tensor_parallel_size, 2u);
  EXPECT_EQ(parse_ok({"LEN=4096; vllm serve m --max-model-len ${LEN:-${DEF}}"}).max_model_len, 4096u);
  EXPECT_EQ(parse_ok({"DEF=8192; vllm serve m --max-model-len ${LEN:-\"$DEF\"}"}).max_model_len, 8192u);
  EXPECT_EQ(parse_ok({"vllm serve m --max-model-len ${LEN:-${DEF:-2048}}"}).max_model_len, 2048u);
  // Defaults nested past 32 levels stay as written (and are refused), whatever their depth.
  std::string deep;
  for (int k = 0; k < 5000; ++k) deep += "${A:-";
  deep += "8";
  for (int k = 0; k < 5000; ++k) deep += "}";
  auto nested = parse_vllm_command_line({"vllm serve m --max-model-len " + deep});
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.error().message.find("a shell expansion oomdoc cannot fill in"), std::string::npos);
  // A word left unexpanded anywhere (a positional $ARGS may hold any flags) is refused.
  auto positional = parse_vllm_command_line({"vllm serve m $ARGS"});
  ASSERT_FALSE(positional.ok());
  EXPECT_EQ(positional.error().message, "'$ARGS': a shell expansion oomdoc cannot fill in (it runs no command and knows "
                                        "only the variables the command text sets); give its value");
  // Quoted, the same expansion is one argument that vLLM's argparse refuses.
  auto quoted = parse_vllm_command_line({"ARGS=\"--max-model-len 8192 -tp 2\"; vllm serve m \"$ARGS\""});
  ASSERT_FALSE(quoted.ok());
  EXPECT_EQ(quoted.error().message.rfind("'--max-model-len 8192 -tp 2': one argument holding several words", 0), 0u)
      << quoted.error().message;
  auto unknown = parse_vllm_command_line({"vllm serve m --tensor-parallel-size $(nvidia-smi -L | wc -l)"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message,
            "--tensor-parallel-size: '$(nvidia-smi -L | wc -l)': a shell expansion oomdoc cannot fill in (it runs no "
            "command and knows only the variables the command text sets); give its value");
}

TEST(VllmArgs, LlmKeywordArguments) {
  ServeConfig c = parse_ok({"LLM(model=\"Qwen/Qwen2.5-7B-Instruct\", tensor_parallel_size=2, "
                            "gpu_memory_utilization=0.8, enforce_eager=True, max_model_len=8192, "
                            "limit_mm_per_prompt={'image': 1}, seed=0)"});
  EXPECT_EQ(c.launcher, "LLM(...)");
  EXPECT_EQ(c.model, "Qwen/Qwen2.5-7B-Instruct");
  EXPECT_EQ(c.tensor_parallel_size, 2u);
  EXPECT_DOUBLE_EQ(*c.gpu_memory_utilization, 0.8);
  EXPECT_TRUE(c.enforce_eager);
  EXPECT_EQ(c.max_model_len, 8192u);
  EXPECT_EQ(c.limit_mm_per_prompt.at("image"), 1u);
  ASSERT_EQ(c.ignored.size(), 1u);
  EXPECT_EQ(c.ignored[0], "seed=0");
}

// What Python refuses in a call, oomdoc refuses too: a repeated keyword, a dashed one.
TEST(VllmArgs, LlmCallThatPythonRefuses) {
  auto twice = parse_vllm_command_line({"LLM(model=\"m\", max_model_len=8192, max_model_len=4096)"});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().message, "LLM(...): max_model_len given twice (Python: SyntaxError: keyword argument repeated)");
  auto dashed = parse_vllm_command_line({"LLM(model=\"m\", max-model-len=8192)"});
  ASSERT_FALSE(dashed.ok());
  EXPECT_EQ(dashed.error().message,
            "LLM(...): 'max-model-len=' is no Python keyword (Python: SyntaxError); write it with underscores");
}

// LLM(...) errors name the keyword as written; Python expressions are not guessed at.
TEST(VllmArgs, LlmKeywordErrorsUseThePythonSpelling) {
  // vllm#18550's call, as pasted.
  auto expr = parse_vllm_command_line({"LLM(model=\"Qwen/Qwen2.5-VL-72B-Instruct-AWQ\", "
                                       "tensor_parallel_size=torch.cuda.device_count(), gpu_memory_utilization=0.95, "
                                       "max_model_len=32768, max_num_seqs=1, limit_mm_per_prompt={\"image\": 12, \"video\": 0})"});
  ASSERT_FALSE(expr.ok());
  EXPECT_EQ(expr.error().message,
            "LLM(...): tensor_parallel_size=torch.cuda.device_count() is a Python expression; oomdoc does not run "
            "Python: write the value it stands for (tensor_parallel_size=a number)");
  auto name = parse_vllm_command_line({"LLM(model=MODEL_PATH, max_model_len=4096)"});
  ASSERT_FALSE(name.ok());
  EXPECT_EQ(name.error().message,
            "LLM(...): model=MODEL_PATH is a Python expression; oomdoc does not run Python: write the value it stands "
            "for (model=\"org/name\" or a path)");
  auto len = parse_vllm_command_line({"LLM(model='m', max_model_len='lots')"});
  ASSERT_FALSE(len.ok());
  EXPECT_EQ(len.error().message, "LLM(...): max_model_len: 'lots' is not a positive whole number");
  auto util = parse_vllm_command_line({"LLM(model='m', gpu_memory_utilization=1.5)"});
  ASSERT_FALSE(util.ok());
  EXPECT_EQ(util.error().message, "LLM(...): gpu_memory_utilization: 1.5 is outside (0, 1]");
  auto flag = parse_vllm_command_line({"LLM(model='m', max_model_len=True)"});
  ASSERT_FALSE(flag.ok());
  EXPECT_EQ(flag.error().message, "LLM(...): max_model_len needs a value");
  // Literals still read: negative and scientific numbers, None, dicts.
  ServeConfig c = parse_ok({"LLM(model='m', max_model_len=-1, cpu_offload_gb=1e1, quantization=None, "
                            "speculative_config={'method': 'ngram', 'num_speculative_tokens': 5})"});
  EXPECT_TRUE(c.max_model_len_auto);
  EXPECT_DOUBLE_EQ(c.cpu_offload_gb, 10.0);
  EXPECT_EQ(c.num_speculative_tokens, 5u);
}

// Context extension: the rope object of --hf-overrides (rope_scaling, or transformers v5's
// rope_parameters, vLLM's context-extension docs) or the older --rope-scaling flag is kept.
TEST(VllmArgs, RopeScalingOverridesAreRead) {
  ServeConfig docs = parse_ok({"vllm", "serve", "Qwen/Qwen3-0.6B", "--hf-overrides",
                               "{\"rope_parameters\": {\"factor\": 4.0, \"original_max_position_embeddings\": 32768, "
                               "\"rope_theta\": 1000000, \"rope_type\": \"yarn\"}}",
                               "--max-model-len", "131072"});
  ASSERT_TRUE(docs.rope_scaling_override.has_value());
  EXPECT_EQ(*docs.rope_scaling_override,
            R"({"factor":4.0,"original_max_position_embeddings":32768,"rope_theta":1000000,"rope_type":"yarn"})");
  EXPECT_TRUE(docs.not_modeled.empty());
  ServeConfig old = parse_ok({"vllm", "serve", "m", "--rope-scaling",
                              "{\"rope_type\":\"yarn\",\"factor\":4.0,\"original_max_position_embeddings\":32768}"});
  EXPECT_EQ(*old.rope_scaling_override, R"({"factor":4.0,"original_max_position_embeddings":32768,"rope_type":"yarn"})");
  // Not a JSON object: listed as not modeled, nothing read.
  ServeConfig bad = parse_ok({"vllm", "serve", "m", "--rope-scaling", "yarn"});
  EXPECT_FALSE(bad.rope_scaling_override.has_value());
  EXPECT_EQ(bad.not_modeled, (std::vector<std::string>{"--rope-scaling yarn"}));
}

// vLLM's bool fields take a --no- form (argparse's BooleanOptionalAction): the last one wins.
TEST(VllmArgs, NoEnforceEagerTurnsItOff) {
  EXPECT_FALSE(parse_ok({"vllm", "serve", "m", "--no-enforce-eager"}).enforce_eager);
  EXPECT_FALSE(parse_ok({"vllm", "serve", "m", "--enforce-eager", "--no-enforce-eager"}).enforce_eager);
  EXPECT_TRUE(parse_ok({"vllm", "serve", "m", "--no-enforce-eager", "--enforce-eager"}).enforce_eager);
}

TEST(VllmArgs, UnmodeledFlagsAreListedApart) {
  ServeConfig c = parse_ok({"vllm", "serve", "m", "--enable-lora", "--max-lora-rank", "16",
                            "--swap-space", "8", "--served-model-name", "x"});
  EXPECT_TRUE(c.enable_lora);
  EXPECT_EQ(c.not_modeled, (std::vector<std::string>{"--enable-lora", "--max-lora-rank 16", "--swap-space 8"}));
  EXPECT_EQ(c.ignored, (std::vector<std::string>{"--served-model-name x"}));
  // EPLB's redundant experts add expert weights on every GPU; enabling EPLB alone adds none.
  ServeConfig eplb = parse_ok({"vllm", "serve", "m", "--enable-expert-parallel", "--enable-eplb",
                               "--num-redundant-experts", "32", "--eplb-config", "{\"window_size\": 1000}"});
  EXPECT_EQ(eplb.not_modeled, (std::vector<std::string>{"--enable-expert-parallel", "--num-redundant-experts 32",
                                                        "--eplb-config {\"window_size\": 1000}"}));
  EXPECT_EQ(eplb.ignored, (std::vector<std::string>{"--enable-eplb"}));
}

TEST(VllmArgs, BadInputGivesOneClearError) {
  auto not_vllm = parse_vllm_command_line({"python", "train.py", "--lr", "1e-4"});
  ASSERT_FALSE(not_vllm.ok());
  EXPECT_NE(not_vllm.error().message.find("not a vLLM command line: 'python train.py --lr 1e-4'"), std::string::npos);

  auto no_model = parse_vllm_command_line({"vllm", "serve", "--port", "8000"});
  ASSERT_FALSE(no_model.ok());
  EXPECT_EQ(no_model.error().message, "vllm serve: no model given (the MODEL argument or --model)");

  auto util = parse_vllm_command_line({"vllm", "serve", "m", "--gpu-memory-utilization", "1.5"});
  ASSERT_FALSE(util.ok());
  EXPECT_EQ(util.error().message, "--gpu-memory-utilization: 1.5 is outside (0, 1]");

  auto len = parse_vllm_command_line({"vllm", "serve", "m", "--max-model-len", "lots"});
  ASSERT_FALSE(len.ok());
  EXPECT_EQ(len.error().message, "--max-model-len: 'lots' is not a positive whole number");

  auto kv = parse_vllm_command_line({"vllm", "serve", "m", "--kv-cache-dtype", "int3"});
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.error().message.find("--kv-cache-dtype: 'int3'"), std::string::npos);

  auto missing = parse_vllm_command_line({"vllm", "serve", "m", "--max-model-len"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "--max-model-len needs a value");

  auto quote = parse_vllm_command_line({"vllm serve 'm --port 1"});
  ASSERT_FALSE(quote.ok());
  EXPECT_EQ(quote.error().message, "unterminated ' quote in the command line");

  auto llm = parse_vllm_command_line({"LLM(model='m', max_model_len=(1"});
  ASSERT_FALSE(llm.ok());
}

TEST(VllmTokenCount, HumanReadableLikeVllm) {
  EXPECT_EQ(parse_vllm_token_count("32768"), 32768u);
  EXPECT_EQ(parse_vllm_token_count("1k"), 1000u);
  EXPECT_EQ(parse_vllm_token_count("1K"), 1024u);
  EXPECT_EQ(parse_vllm_token_count("25.6k"), 25600u);
  EXPECT_EQ(parse_vllm_token_count("1M"), 1048576u);
  EXPECT_FALSE(parse_vllm_token_count("1.5"));
  EXPECT_FALSE(parse_vllm_token_count("k"));
  EXPECT_FALSE(parse_vllm_token_count("-5"));
  EXPECT_FALSE(parse_vllm_token_count("99999999999999999999G"));
}

// The image tag names the vLLM version (its defaults differ): with or without an org, with a
// registry port, and none at all.
TEST(VllmArgs, DockerImageTag) {
  auto tag = [](const std::string& image) {
    return parse_ok({"docker", "run", "--gpus", "all", image, "--model", "m"}).image_tag;
  };
  EXPECT_EQ(tag("vllm/vllm-openai:v0.6.0"), "v0.6.0");
  EXPECT_EQ(tag("vllm-openai:v0.6.0"), "v0.6.0");
  EXPECT_EQ(tag("registry:5000/vllm/vllm-openai:v0.8.5"), "v0.8.5");
  EXPECT_FALSE(tag("registry:5000/vllm/vllm-openai").has_value());
  EXPECT_FALSE(tag("vllm/vllm-openai").has_value());
}

// SpeculativeConfig's fields (vllm/config/speculative.py) and the older flags.
TEST(VllmArgsSpeculative, ReadsTheDraftModelItsParallelismAndFormat) {
  auto config = parse_vllm_command_line(
      {"vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--speculative-config",
       R"({"model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 5, "draft_tensor_parallel_size": 1, "quantization": "fp8"})"});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->speculative_model, "meta-llama/Llama-3.2-1B");
  EXPECT_FALSE(config->speculative_method);
  EXPECT_EQ(config->num_speculative_tokens, 5u);
  EXPECT_EQ(config->draft_tensor_parallel_size, 1u);
  EXPECT_EQ(config->speculative_quantization, "fp8");
  auto old = parse_vllm_command_line({"vllm", "serve", "m", "--speculative-model", "meta-llama/Llama-3.2-1B",
                                      "--num-speculative-tokens", "4", "--speculative-draft-tensor-parallel-size", "1"});
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_EQ(old->speculative_model, "meta-llama/Llama-3.2-1B");
  EXPECT_EQ(old->draft_tensor_parallel_size, 1u);
  EXPECT_TRUE(old->not_modeled.empty());
}

TEST(VllmArgsSpeculative, RefusesWhatVllmRefuses) {
  auto message = [](const std::string& json) {
    auto config = parse_vllm_command_line({"vllm", "serve", "m", "--speculative-config", json});
    return config.ok() ? std::string("accepted") : config.error().message;
  };
  EXPECT_EQ(message(R"({"model": "d", "num_speculative_tokens": 3, "tensor_parallel_size": 1})"),
            "--speculative-config: vLLM refuses it: \"'tensor_parallel_size' is not a valid argument in the "
            "speculative_config. Please pass 'draft_tensor_parallel_size' instead.\"");
  EXPECT_EQ(message(R"({"model": "d", "num_speculative_tokens": 0})"),
            "--speculative-config: num_speculative_tokens: '0' is not a positive whole number");
  EXPECT_EQ(message(R"({"model": "d", "num_speculative_tokens": "3"})"),
            "--speculative-config: num_speculative_tokens: '\"3\"' is not a positive whole number");
}

}  // namespace
}  // namespace oomdoc

// QA round 3 of serve's command-line reading: docker's own options and environment, the positional
// model against --model, boolean flags with an explicit value, vLLM's number and flag spellings.
namespace oomdoc {
namespace {

std::string error_of(const std::vector<std::string>& words) {
  auto config = parse_vllm_command_line(words);
  return config.ok() ? std::string("(parsed)") : config.error().message;
}

TEST(VllmArgsDocker, TheImageIsTheFirstWordAfterDockersOptions) {
  // A container named like the image, and docker's own flags with values, are not vLLM's.
  ServeConfig c = parse_ok({"docker", "run", "-d", "--name", "vllm-openai-server", "--gpus", "all", "-p", "8000:8000",
                            "--ipc=host", "-v", "/models:/models", "vllm/vllm-openai:v0.6.3", "--model", "m"});
  EXPECT_EQ(c.launcher, "docker vllm/vllm-openai:v0.6.3");
  EXPECT_EQ(c.image_tag, "v0.6.3");
  EXPECT_EQ(c.model, "m");
  EXPECT_TRUE(c.unknown.empty());
  EXPECT_EQ(error_of({"docker", "run", "--gpus", "all", "ubuntu:22.04", "vllm", "serve", "m"}),
            "not a vLLM command line: docker runs 'ubuntu:22.04', not the vllm/vllm-openai image");
  EXPECT_EQ(error_of({"docker", "ps"}), "not a vLLM command line: a docker command other than `docker run`");
}

TEST(VllmArgsDocker, SudoRunsTheSameCommand) {
  ServeConfig c = parse_ok({"sudo", "-E", "-u", "ml", "docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.8.5",
                            "--model", "m", "--max-model-len", "4096"});
  EXPECT_EQ(c.launcher, "docker vllm/vllm-openai:v0.8.5");
  EXPECT_EQ(c.model, "m");
  EXPECT_EQ(c.max_model_len, 4096u);
  ServeConfig env = parse_ok({"sudo", "VLLM_USE_V1=0", "vllm", "serve", "m"});
  EXPECT_EQ(env.env.at("VLLM_USE_V1"), "0");
  EXPECT_EQ(env.launcher, "vllm serve");
}

TEST(VllmArgsDocker, EnvironmentOptionsReachTheContainer) {
  ServeConfig c = parse_ok({"docker", "run", "--gpus", "all", "-e", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
                            "--env=VLLM_USE_V1=0", "-eHF_TOKEN=x", "--env", "HOST_VAR", "vllm/vllm-openai:v0.9.2",
                            "--model", "m"});
  EXPECT_EQ(c.env.at("VLLM_ALLOW_LONG_MAX_MODEL_LEN"), "1");
  EXPECT_EQ(c.env.at("VLLM_USE_V1"), "0");
  EXPECT_EQ(c.env.at("HF_TOKEN"), "x");
  EXPECT_EQ(c.env.count("HOST_VAR"), 0u);   // taken from the host: no value here
}

TEST(VllmArgsQa3, ThePositionalModelWinsOverModel) {
  ServeConfig c = parse_ok({"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--model", "Qwen/Qwen2.5-7B-Instruct"});
  EXPECT_EQ(c.model, "meta-llama/Llama-3.1-8B-Instruct");
  ASSERT_EQ(c.ignored.size(), 1u);
  EXPECT_EQ(c.ignored[0], "--model Qwen/Qwen2.5-7B-Instruct (the positional meta-llama/Llama-3.1-8B-Instruct wins, as in "
                          "vllm serve)");
  // --model alone (no positional) still names it.
  EXPECT_EQ(parse_ok({"vllm", "serve", "--model", "m2"}).model, "m2");
}

TEST(VllmArgsQa3, BooleanFlagTakesAnExplicitValue) {
  // v0.5/v0.6 declared it with nargs="?": "False" is its value, not a stray word.
  ServeConfig off = parse_ok({"vllm", "serve", "m", "--enable-chunked-prefill", "False"});
  EXPECT_EQ(off.enable_chunked_prefill, false);
  EXPECT_TRUE(off.unknown.empty());
  EXPECT_EQ(parse_ok({"vllm", "serve", "m", "--enable-chunked-prefill", "true"}).enable_chunked_prefill, true);
  // A model after a boolean flag is still the model.
  EXPECT_EQ(parse_ok({"vllm", "serve", "--enforce-eager", "m"}).model, "m");
}

TEST(VllmArgsQa3, SpellingsVllmRefuses) {
  EXPECT_EQ(error_of({"vllm", "serve", "m", "--tp", "2"}),
            "--tp: not a vLLM flag; its short form is -tp (or --tensor-parallel-size); vLLM would exit with "
            "'unrecognized arguments'");
  EXPECT_EQ(parse_ok({"vllm", "serve", "m", "-tp", "2"}).tensor_parallel_size, 2u);
  EXPECT_EQ(error_of({"vllm", "serve", "m", "--max-model-len", "1.5K"}),
            "--max-model-len: '1.5K': vLLM refuses it: \"Decimals are not allowed with binary suffixes like K. Did you "
            "mean to use 1.5k instead?\" (1.5k is 1.5 x 10^3; or a whole number of K)");
  EXPECT_EQ(error_of({"vllm", "serve", "m", "--kv-cache-memory-bytes", "2.5G"}),
            "--kv-cache-memory-bytes: '2.5G': vLLM refuses it: \"Decimals are not allowed with binary suffixes like G. "
            "Did you mean to use 2.5g instead?\" (2.5g is 2.5 x 10^9; or a whole number of G)");
  EXPECT_EQ(parse_ok({"vllm", "serve", "m", "--max-model-len", "25.6k"}).max_model_len, 25600u);
  EXPECT_EQ(parse_ok({"vllm", "serve", "m", "--max-model-len", "32K"}).max_model_len, 32768u);
  EXPECT_EQ(parse_ok({"vllm", "serve", "m", "--kv-cache-memory-bytes", "1T"}).kv_cache_memory_bytes.value(), 1ull << 40);
  // Python's int(float(...) * 1000): truncated, not rounded.
  EXPECT_EQ(parse_ok({"vllm", "serve", "m", "--max-model-len", "1.0005k"}).max_model_len, 1000u);
  // --max-num-seqs is a plain int in vLLM: no suffixes.
  EXPECT_EQ(error_of({"vllm", "serve", "m", "--max-num-seqs", "1k"}),
            "--max-num-seqs: '1k' is not a whole number (vLLM reads it with int(); k/K suffixes are taken by "
            "--max-model-len, --max-num-batched-tokens and --kv-cache-memory-bytes only)");
}

// A short memory flag with its value glued on, or a letter too many: argparse has no such option,
// so vLLM exits; read as an unknown flag, the sizing would take one GPU.
TEST(VllmArgs, MisspeltShortMemoryFlagsAreRefused) {
  EXPECT_EQ(error_of({"vllm", "serve", "m", "-tp2"}),
            "-tp2: not a vLLM flag (did you mean -tp 2?); vLLM would exit with 'unrecognized arguments'");
  EXPECT_EQ(error_of({"vllm", "serve", "m", "-pp4"}),
            "-pp4: not a vLLM flag (did you mean -pp 4?); vLLM would exit with 'unrecognized arguments'");
  EXPECT_EQ(error_of({"vllm", "serve", "m", "-tpp", "2"}),
            "-tpp: not a vLLM flag (did you mean -tp?); vLLM would exit with 'unrecognized arguments'");
  EXPECT_EQ(parse_ok({"vllm", "serve", "m", "-pp", "2", "-O3"}).pipeline_parallel_size, 2u);
  // vLLM's own three-letter short flags near them are real flags.
  for (const char* real : {"-dpp", "-dpa", "-dpn", "-pcp"}) {
    EXPECT_EQ(parse_ok({"vllm", "serve", "m", "-dp", "2", real, "13345"}).data_parallel_size, 2u) << real;
  }
}

// LLM(...) takes Python's digit grouping (8_192); a misplaced underscore is still refused.
TEST(VllmArgs, LlmKeywordNumbersWithDigitGrouping) {
  ServeConfig c = parse_ok({"LLM(model=\"m\", max_model_len=131_072, gpu_memory_utilization=0.8_5)"});
  EXPECT_EQ(c.max_model_len, 131072u);
  EXPECT_DOUBLE_EQ(*c.gpu_memory_utilization, 0.85);
  EXPECT_EQ(error_of({"LLM(model=\"m\", max_model_len=8__192)"}),
            "LLM(...): max_model_len: '8__192' is not a positive whole number");
}

TEST(VllmArgsQa4, OnlyChunkedPrefillTakesTrueOrFalse) {
  // store_true and BooleanOptionalAction switches take no value: argparse leaves "True" unrecognized.
  EXPECT_EQ(error_of({"vllm", "serve", "m", "--enforce-eager", "True"}),
            "--enforce-eager True: the flag takes no value; vLLM would exit with 'unrecognized arguments: True'");
  EXPECT_EQ(error_of({"vllm", "serve", "m", "--enable-prefix-caching", "False"}),
            "--enable-prefix-caching False: the flag takes no value; vLLM would exit with 'unrecognized arguments: "
            "False' (to turn it off: --no-enable-prefix-caching)");
  EXPECT_EQ(parse_ok({"vllm", "serve", "m", "--enable-chunked-prefill", "False"}).enable_chunked_prefill, false);
}

TEST(VllmArgsQa3, FlagsAreListedAsWritten) {
  ServeConfig c = parse_ok({"vllm", "serve", "m", "-O3", "--port", "8000"});
  ASSERT_EQ(c.not_modeled.size(), 1u);
  EXPECT_EQ(c.not_modeled[0], "-O3");
  ASSERT_EQ(c.ignored.size(), 1u);
  EXPECT_EQ(c.ignored[0], "--port 8000");
}

// `--entrypoint vllm` puts `serve MODEL` after the image; podman takes docker's options.
TEST(VllmArgs, DockerEntrypointServeAndPodman) {
  ServeConfig entry = parse_ok({"docker", "run", "--gpus", "all", "--entrypoint", "vllm", "vllm/vllm-openai:v0.8.5", "serve",
                                "meta-llama/Llama-2-7b-hf", "--max-model-len", "2048"});
  EXPECT_EQ(entry.model, "meta-llama/Llama-2-7b-hf");
  EXPECT_EQ(entry.max_model_len, 2048u);
  EXPECT_EQ(entry.image_tag, "v0.8.5");
  ServeConfig podman = parse_ok({"podman", "run", "--device", "nvidia.com/gpu=all", "vllm/vllm-openai:latest", "--model",
                                 "meta-llama/Llama-2-7b-hf"});
  EXPECT_EQ(podman.model, "meta-llama/Llama-2-7b-hf");
  EXPECT_EQ(podman.launcher, "podman vllm/vllm-openai:latest");
}

}  // namespace
}  // namespace oomdoc
