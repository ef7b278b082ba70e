// End-to-end: the oomdoc binary's explain command, its exit codes, JSON and errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <tuple>

#include "support/test_support.h"

namespace oomdoc {
namespace {

using testing::run_cli;

const std::string kOom =
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.80 GiB total capacity; 6.90 GiB already "
    "allocated; 10.19 MiB free; 7.02 GiB reserved in total by PyTorch)\n";

std::string temp_file(const std::string& name, const std::string& content) {
  std::string path = std::string(OOMDOC_BINARY_DIR) + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(ExplainCli, ExampleLogExplainsAndExitsZero) {
  auto r = run_cli({"explain", std::string(OOMDOC_SOURCE_DIR) + "/examples/train-oom.log"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Cause: fragmentation"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expandable_segments:True"), std::string::npos);
  EXPECT_EQ(r.out.find("\x1b["), std::string::npos) << "no colour when stdout is not a terminal";
}

TEST(ExplainCli, JsonGroupsErrorsThatSayTheSameThing) {
  // The same failure from three ranks, then a different one.
  std::string log;
  for (int rank = 0; rank < 3; ++rank) log += "[rank" + std::to_string(rank) + "]: " + kOom;
  log += "RuntimeError: CUDA out of memory. Tried to allocate 6.00 GiB (GPU 0; 7.80 GiB total capacity; 1.00 GiB already "
         "allocated; 6.50 GiB free; 1.02 GiB reserved in total by PyTorch)\n";
  auto r = run_cli({"explain", "--json"}, log);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["events"].size(), 4u);
  ASSERT_EQ(doc["error_groups"].size(), 2u);
  EXPECT_EQ(doc["error_groups"][0]["events"], nlohmann::json::array({0, 1, 2}));
  EXPECT_EQ(doc["error_groups"][0]["prints"], 3);
  EXPECT_EQ(doc["error_groups"][1]["events"], nlohmann::json::array({3}));

  auto text = run_cli({"explain"}, log);
  EXPECT_NE(text.out.find("4 out-of-memory errors in <stdin>, 2 distinct"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("+ 2 more like it: ranks 0-2"), std::string::npos) << text.out;
  auto each = run_cli({"explain", "--each"}, log);
  EXPECT_EQ(each.out.find("more like it"), std::string::npos) << each.out;
  EXPECT_NE(each.out.find("(rank 2)"), std::string::npos) << each.out;
}

TEST(ExplainCli, QloraExampleNamesTheFp32HiddenStates) {
  auto r = run_cli({"explain", "--json", std::string(OOMDOC_SOURCE_DIR) + "/examples/qlora-oom.log"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["events"].size(), 1u);
  const auto& e = doc["events"][0];
  EXPECT_EQ(e["cause"], "capacity_exhausted");
  EXPECT_EQ(e["secondary_causes"], nlohmann::json::array({"fp32_hidden_states"}));
  ASSERT_FALSE(e["fixes"].empty());
  EXPECT_EQ(e["fixes"][0]["id"], "bf16_hidden_states");
}

TEST(ExplainCli, JsonUsesCorpusFieldNames) {
  auto r = run_cli({"explain", "--json"}, kOom);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["events"].size(), 1u);
  const auto& e = doc["events"][0];
  EXPECT_EQ(e["requested_bytes"], 20971520);
  EXPECT_EQ(e["requested_unit"], "MiB");
  EXPECT_EQ(e["requested_text"], "20.00 MiB");
  EXPECT_EQ(e["total_bytes"], 8375186227);
  EXPECT_EQ(e["reserved_total_bytes"], 7537667604);
  EXPECT_TRUE(e["process_bytes"].is_null());
  EXPECT_TRUE(e["max_model_len"].is_null());
  EXPECT_EQ(e["line"], 1);
  EXPECT_EQ(e["device"], 0);
  EXPECT_EQ(e["is_error"], true);
  EXPECT_EQ(e["format"], "pytorch_old_reserved");
  EXPECT_EQ(e["cause"], "capacity_exhausted");
  ASSERT_FALSE(e["fixes"].empty());
  EXPECT_TRUE(e["fixes"][0].contains("id"));
  EXPECT_TRUE(e["fixes"][0].contains("title"));
  EXPECT_TRUE(e["fixes"][0].contains("detail"));
}

TEST(ExplainCli, NothingFoundExitsOne) {
  auto r = run_cli({"explain"}, "all good\nloss 0.1\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("No out-of-memory error found"), std::string::npos);
  auto empty = run_cli({"explain", "--json"}, "");
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_EQ(nlohmann::json::parse(empty.out)["events"].size(), 0u);
}

TEST(ExplainCli, BadInputsGiveOneLineErrorsAndExitTwo) {
  auto missing = run_cli({"explain", "/nonexistent/train.log"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "oomdoc: /nonexistent/train.log: no such file\n");
  EXPECT_TRUE(missing.out.empty()) << "no partial output";

  auto dir = run_cli({"explain", OOMDOC_SOURCE_DIR});
  EXPECT_EQ(dir.exit_code, 2);
  EXPECT_NE(dir.err.find("is a directory"), std::string::npos);

  std::string binary = temp_file("binary.bin", std::string("\x7f" "ELF\0\0\0\x01", 8) + std::string(100, '\0'));
  auto bin = run_cli({"explain", binary});
  EXPECT_EQ(bin.exit_code, 2);
  EXPECT_NE(bin.err.find("binary file"), std::string::npos);

  std::string pickle = temp_file("snap.pickle", std::string("\x80\x04\x95\x10\0\0\0\0\0\0\0}", 12));
  auto pk = run_cli({"explain", pickle});
  EXPECT_EQ(pk.exit_code, 2);
  EXPECT_NE(pk.err.find("oomdoc snapshot"), std::string::npos);

  auto usage = run_cli({"explain", "--no-such-flag"});
  EXPECT_EQ(usage.exit_code, 2);
}

TEST(ExplainCli, SeveralFilesAndStdinDash) {
  std::string a = temp_file("a.log", kOom);
  auto r = run_cli({"explain", "--json", a, "-"}, "nothing\n" + kOom);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["events"].size(), 2u);
  EXPECT_EQ(doc["events"][1]["input"], "<stdin>");
  EXPECT_EQ(doc["events"][1]["line"], 2);
}

// One unreadable input among several: the readable ones are reported, the bad one is one line on
// stderr, the output says it is partial, and the exit status is 2.
TEST(ExplainCli, AnUnreadableInputDoesNotHideTheOthers) {
  std::string good = temp_file("good.log", "step 1\n" + kOom);
  auto r = run_cli({"explain", good, "/nonexistent/missing.log"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "oomdoc: /nonexistent/missing.log: no such file\n");
  EXPECT_NE(r.out.find(good + ":2  PyTorch out of memory on GPU 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Partial result: 1 of 2 inputs could not be read (/nonexistent/missing.log)."), std::string::npos)
      << r.out;

  auto j = run_cli({"explain", "--json", "/nonexistent/missing.log", good});
  EXPECT_EQ(j.exit_code, 2);
  EXPECT_EQ(j.err, "oomdoc: /nonexistent/missing.log: no such file\n");
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["inputs"], nlohmann::json::array({good}));
  EXPECT_EQ(doc["complete"], false);
  ASSERT_EQ(doc["errors"].size(), 1u);
  EXPECT_EQ(doc["errors"][0]["input"], "/nonexistent/missing.log");
  EXPECT_EQ(doc["errors"][0]["message"], "/nonexistent/missing.log: no such file");
  ASSERT_EQ(doc["events"].size(), 1u);
  EXPECT_EQ(doc["events"][0]["line"], 2);

  // Every input readable: complete, no errors.
  auto ok = run_cli({"explain", "--json", good});
  EXPECT_EQ(ok.exit_code, 0);
  auto okdoc = nlohmann::json::parse(ok.out);
  EXPECT_EQ(okdoc["complete"], true);
  EXPECT_TRUE(okdoc["errors"].empty());
}

TEST(ExplainCli, RetryLoopPrintsOneEventWithItsCountAndLines) {
  auto r = run_cli({"explain", std::string(OOMDOC_SOURCE_DIR) + "/tests/fixtures/explain/retry_loop.log"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("retry_loop.log:2  PyTorch out of memory on GPU 0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  (printed 6 times, lines 2-12)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("retry_loop.log:14  "), std::string::npos);
  // Line 16 prints line 2's failure again after a different one: counted with it, listed by --each.
  EXPECT_NE(r.out.find("  + 1 more like it: GPU 0, lines 2-16, 7 prints in all\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("retry_loop.log:16  "), std::string::npos);
  auto each = run_cli({"explain", "--each", std::string(OOMDOC_SOURCE_DIR) + "/tests/fixtures/explain/retry_loop.log"});
  EXPECT_NE(each.out.find("retry_loop.log:16  "), std::string::npos);
  auto j = run_cli({"explain", "--json", std::string(OOMDOC_SOURCE_DIR) + "/tests/fixtures/explain/retry_loop.log"});
  auto doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["events"].size(), 3u);
  EXPECT_EQ(doc["events"][0]["repeats"], 6);
  EXPECT_EQ(doc["events"][0]["last_repeat_line"], 12);
  EXPECT_EQ(doc["events"][1]["repeats"], 1);
  EXPECT_TRUE(doc["events"][1]["last_repeat_line"].is_null());
}

// --all shows what vLLM's accounting read, and a failing accounting is an error either way.
TEST(ExplainCli, VllmAccountingShowsItsFigures) {
  const std::string path = std::string(OOMDOC_SOURCE_DIR) + "/tests/fixtures/explain/vllm_negative_kv.log";
  auto r = run_cli({"explain", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("vllm_negative_kv.log:1  vLLM out of memory\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  utilization 0.50 · GPU total 15.77 GiB · budget 7.88 GiB · weights loaded 7.48 GiB · weights "
                       "7.48 GiB · non-torch 122.88 MiB · activation peak 1.06 GiB · KV cache -798.72 MiB · GPU blocks 0 "
                       "· CPU blocks 2048 · max concurrency 0.00x\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Cause: no memory is left for the KV cache"), std::string::npos);
  EXPECT_EQ(r.out.find("No out-of-memory error found"), std::string::npos);

  auto info = run_cli({"explain", "--all"},
                      "INFO worker.py:267] the current vLLM instance can use total_gpu_memory (15.77GiB) x "
                      "gpu_memory_utilization (0.90) = 14.19GiB\nINFO executor_base.py:111] # cuda blocks: 2330, # CPU "
                      "blocks: 2048\n");
  EXPECT_EQ(info.exit_code, 1);  // nothing failed
  EXPECT_NE(info.out.find("<stdin>:1  vLLM memory report\n  utilization 0.90 · GPU total 15.77 GiB · budget 14.19 GiB "
                          "· GPU blocks 2330 · CPU blocks 2048\n"),
            std::string::npos)
      << info.out;
}

TEST(Cli, VersionAndHelp) {
  auto v = run_cli({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out.rfind("oomdoc ", 0), 0u);
  auto h = run_cli({"help", "explain"});
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("--json"), std::string::npos);
  // The same text as `oomdoc explain --help`, usage line included.
  EXPECT_EQ(h.out, run_cli({"explain", "--help"}).out);
  EXPECT_NE(h.out.find("Usage: oomdoc explain"), std::string::npos) << h.out;
  auto bad = run_cli({"help", "nosuch"});
  EXPECT_EQ(bad.exit_code, 2);
}

// NUL bytes are common in real logs (a file truncated under its writer, preallocated space): the
// OOM is still found. A binary file is still refused, in one line.
TEST(ExplainCli, LogsWithNulBytesAreText) {
  const std::string log = testing::read_file(std::string(OOMDOC_SOURCE_DIR) + "/examples/train-oom.log");
  for (const auto& [name, content] : std::vector<std::pair<std::string, std::string>>{
           {"trailing_nuls.log", log + std::string(4, '\0')},
           {"leading_nuls.log", std::string(100000, '\0') + log},
           {"nuls_inside.log", std::string(4, '\0') + "step 1\n" + std::string(3, '\0') + log}}) {
    auto r = run_cli({"explain", temp_file(name, content)});
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_NE(r.out.find("Cause: fragmentation"), std::string::npos) << name;
    EXPECT_EQ(r.out.find('\0'), std::string::npos) << name;
  }
}

TEST(ExplainCli, BinaryFilesAreRefusedInOneLine) {
  std::string noise;
  uint32_t x = 12345;
  for (int i = 0; i < 4000; ++i) {
    x = x * 1103515245u + 12345u;
    noise.push_back(static_cast<char>(x >> 24));
  }
  const std::string gz = temp_file("log.gz", std::string("\x1f\x8b\x08\x00", 4) + noise);
  auto r = run_cli({"explain", gz});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "oomdoc: " + gz + ": binary file (gzip), not a text log\n");
  const std::string random = temp_file("random.bin", noise);
  auto rr = run_cli({"explain", random});
  EXPECT_EQ(rr.exit_code, 2);
  EXPECT_EQ(rr.err, "oomdoc: " + random + ": binary file (mostly non-text bytes), not a text log\n");
}

TEST(ExplainCli, EmptyFileNameIsAnErrorNotStdin) {
  auto r = run_cli({"explain", ""}, kOom);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "oomdoc: \"\": no such file (an empty name; '-' reads stdin)\n");
  EXPECT_TRUE(r.out.empty());
}

// UTF-16 as PowerShell's `>` writes it (little-endian, no BOM) and with a BOM in either order.
std::string utf16(const std::string& ascii, bool big, bool bom) {
  std::string out;
  if (bom) out += big ? std::string("\xfe\xff", 2) : std::string("\xff\xfe", 2);
  for (char c : ascii) {
    if (big) out += '\0';
    out += c;
    if (!big) out += '\0';
  }
  return out;
}

TEST(ExplainCli, Utf16LogsAreDecoded) {
  const std::string log = "step 1\n" + kOom;
  for (const auto& [name, big, bom] : {std::tuple{"u16le.log", false, false}, std::tuple{"u16le_bom.log", false, true},
                                       std::tuple{"u16be_bom.log", true, true}}) {
    auto r = run_cli({"explain", "--json", temp_file(name, utf16(log, big, bom))});
    ASSERT_EQ(r.exit_code, 0) << name << r.err;
    auto doc = nlohmann::json::parse(r.out);
    ASSERT_EQ(doc["events"].size(), 1u) << name;
    EXPECT_EQ(doc["events"][0]["line"], 2) << name;
    EXPECT_EQ(doc["events"][0]["requested_bytes"], 20971520) << name;
    EXPECT_EQ(doc["events"][0]["total_text"], "7.80 GiB") << name;
  }
}

TEST(ExplainCli, BytesFfFeBeforeUtf8TextStayUtf8) {
  auto r = run_cli({"explain", "--json", temp_file("fffe_utf8.log", std::string("\xff\xfe garbage \xc3\x28\n") + kOom)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["events"].size(), 1u);
  EXPECT_EQ(doc["events"][0]["line"], 2);
}

TEST(ExplainCli, HostMemoryErrorSaysItIsNotTheGpu) {
  auto r = run_cli({"explain", "-"}, "DefaultCPUAllocator: can't allocate memory: you tried to allocate 21474836480 bytes. "
                                     "Error code 12 (Cannot allocate memory)\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Host (CPU) memory ran out allocating 20.00 GiB: system RAM, not GPU memory."), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("<stdin>:1  PyTorch out of memory on the host (CPU RAM, not the GPU)\n"), std::string::npos) << r.out;
}

TEST(ExplainCli, RayDeduplicatedLineSaysHowManyPrints) {
  auto r = run_cli({"explain", "-"}, "(RayWorkerWrapper pid=77, ip=10.0.0.1) RuntimeError: CUDA out of memory. Tried to "
                                     "allocate 2.00 GiB [repeated 7x across cluster]\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("  (printed 7 times, line 1)\n"), std::string::npos) << r.out;
}

// A vLLM worker OOM: the utilization the server ran with comes from its args dump or command
// line, so the fix lowers that value instead of nudging a default the user did not use.
TEST(ExplainCliQa5, VllmUtilizationComesFromTheLaunch) {
  const std::string oom =
      "(VllmWorker rank=1 pid=4731) ERROR 05-09 10:47:36 [multiproc_executor.py:470] torch.OutOfMemoryError: CUDA out of "
      "memory. Tried to allocate 150.00 MiB. GPU 1 has a total capacity of 21.99 GiB of which 39.00 MiB is free. Process "
      "1779404 has 21.94 GiB memory in use. Of the allocated memory 15.75 GiB is allocated by PyTorch, with 35.88 MiB "
      "allocated in private pools (e.g., CUDA Graphs), and 92.31 MiB is reserved by PyTorch but unallocated.\n";
  for (const std::string& launch :
       {std::string("INFO 05-09 10:40:01 [api_server.py:1044] args: Namespace(model='Qwen/Qwen3-30B-A3B', "
                    "tensor_parallel_size=4, gpu_memory_utilization=0.7, max_model_len=8192)\n"),
        std::string("INFO 05-09 10:40:01 [utils.py:326] non-default args: {'model': 'Qwen/Qwen3-30B-A3B', "
                    "'gpu_memory_utilization': 0.7}\n"),
        std::string("$ vllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 4 --gpu-memory-utilization 0.7\n")}) {
    auto r = run_cli({"explain", temp_file("vllm_util.log", launch + oom)});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("--gpu-memory-utilization 0.65"), std::string::npos) << launch << r.out;
    EXPECT_EQ(r.out.find("--gpu-memory-utilization 0.87"), std::string::npos) << r.out;
  }
}

// An evaluate() decorated with @torch.no_grad(): its decorate_context frame is evidence that
// autograd was off, so no "evaluation recorded gradients".
TEST(ExplainCliQa5, ADecoratedEvaluationRecordsNoGradients) {
  const std::string frames_tail =
      "  File \"/home/u/train.py\", line 150, in evaluate\n"
      "    logits = model(batch[\"input_ids\"])\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of 79.15 GiB of "
      "which 2.10 GiB is free. Including non-PyTorch memory, this process has 77.04 GiB memory in use. Of the allocated "
      "memory 70.12 GiB is allocated by PyTorch, and 5.80 GiB is reserved by PyTorch but unallocated.\n";
  const std::string head = "Traceback (most recent call last):\n  File \"/home/u/train.py\", line 200, in <module>\n"
                           "    val_loss = evaluate(model, val_loader)\n";
  auto plain = run_cli({"explain", "--json", temp_file("eval_grad.log", head + frames_tail)});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("evaluation_with_grad"), std::string::npos) << plain.out;
  const std::string decorated =
      head + "  File \"/usr/lib/python3.10/site-packages/torch/utils/_contextlib.py\", line 115, in decorate_context\n"
             "    return func(*args, **kwargs)\n" + frames_tail;
  auto r = run_cli({"explain", "--json", temp_file("eval_no_grad.log", decorated)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("evaluation_with_grad"), std::string::npos) << r.out;
}

// A log written in a legacy Windows code page (cp1251 Russian around an ASCII OOM) is text: high
// bytes that are not UTF-8 but no control bytes, and lines. Random bytes stay binary.
TEST(ExplainCliQa5, LegacyCodePageLogsAreText) {
  std::string log;
  // "Эпоха 1: потеря 0.001" in cp1251.
  const std::string russian = "\xdd\xef\xee\xf5\xe0 1: \xef\xee\xf2\xe5\xf0\xff 0.001, \xf1\xea\xee\xf0\xee\xf1\xf2\xfc\n";
  for (int i = 0; i < 50; ++i) log += russian;
  log += kOom;
  auto r = run_cli({"explain", temp_file("cp1251.log", log)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("requested 20.00 MiB"), std::string::npos) << r.out;
  std::string noise;
  uint32_t x = 12345;
  for (int i = 0; i < 65536; ++i) {
    x = x * 1103515245u + 12345u;
    noise += static_cast<char>(x >> 24);
  }
  auto binary = run_cli({"explain", temp_file("noise.bin", noise)});
  EXPECT_EQ(binary.exit_code, 2);
  EXPECT_NE(binary.err.find("binary file (mostly non-text bytes)"), std::string::npos) << binary.err;
}

// Slurm's and Kubernetes' own OOM reports are host-memory kills at the job's limit.
TEST(ExplainCliQa5, ClusterOomReportsAreHostMemoryKills) {
  auto slurm = run_cli({"explain", "--json", temp_file("slurm.log",
      "step 10 loss 2.1\nslurmstepd: error: Detected 1 oom_kill event in StepId=123456.0. Some of the step tasks have "
      "been OOM Killed.\nsrun: error: gpu01: task 0: Out Of Memory\n")});
  ASSERT_EQ(slurm.exit_code, 0) << slurm.err;
  auto doc = nlohmann::json::parse(slurm.out);
  ASSERT_EQ(doc["events"].size(), 1u);   // srun's line joins slurmstepd's report
  EXPECT_EQ(doc["events"][0]["format"], "process_killed");
  EXPECT_EQ(doc["events"][0]["framework"], "slurm");
  EXPECT_NE(slurm.out.find("--mem-per-gpu"), std::string::npos);
  EXPECT_EQ(slurm.out.find("fallocate"), std::string::npos);   // no swap: the limit is the job's
  auto k8s = run_cli({"explain", temp_file("k8s.log", "Last State:     Terminated\n      Reason:       OOMKilled\n"
                                                      "      Exit Code:    137\n")});
  ASSERT_EQ(k8s.exit_code, 0) << k8s.err;
  EXPECT_NE(k8s.out.find("reported by Kubernetes (OOMKilled)"), std::string::npos) << k8s.out;
  // Slurm's usual cgroup wording ("oom-kill event(s)") and its older kill line; its end-of-step
  // warning "Exceeded step memory limit at some point." is no kill.
  auto plural = run_cli({"explain", temp_file("slurm2.log",
      "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=14604003.batch cgroup. Some of your processes may have "
      "been killed by the cgroup out-of-memory handler.\n")});
  EXPECT_EQ(plural.exit_code, 0) << plural.out;
  auto old_kill = run_cli({"explain", temp_file("slurm3.log",
      "slurmstepd: error: Job 123 exceeded memory limit (1234 > 1000), being killed\n")});
  EXPECT_EQ(old_kill.exit_code, 0) << old_kill.out;
  auto warning = run_cli({"explain", temp_file("slurm4.log",
      "training complete\nslurmstepd: error: Exceeded step memory limit at some point.\n")});
  EXPECT_EQ(warning.exit_code, 1) << warning.out;
  // A mention in prose is no report.
  auto prose = run_cli({"explain", temp_file("prose.log", "docs: a pod can be OOMKilled when it exceeds its limit\n")});
  EXPECT_EQ(prose.exit_code, 1) << prose.out;
}

// torchrun killing the other workers after rank 0's CUDA OOM ("Sending process 1235 closing signal
// SIGKILL") is teardown: its "Signal 9 (SIGKILL) received by PID 1235" is no host-memory kill.
TEST(ExplainCliQa5, TheLaunchersOwnKillIsTeardown) {
  const std::string log =
      "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of "
      "79.15 GiB of which 2.10 GiB is free. Including non-PyTorch memory, this process has 77.04 GiB memory in use. Of "
      "the allocated memory 70.12 GiB is allocated by PyTorch, and 5.80 GiB is reserved by PyTorch but unallocated.\n"
      "W0501 10:00:05.000000 140 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 1235 closing "
      "signal SIGTERM\n"
      "W0501 10:00:35.000000 140 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 1235 closing "
      "signal SIGKILL\n"
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
      "  exitcode  : -9 (pid: 1235)\n"
      "  traceback : Signal 9 (SIGKILL) received by PID 1235\n";
  auto r = run_cli({"explain", "--json", temp_file("teardown.log", log)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["events"].size(), 1u) << r.out;
  EXPECT_EQ(doc["events"][0]["framework"], "pytorch");
  // Without the launcher's own kill, the same report is a suspected host-memory kill.
  auto alone = run_cli({"explain", "--json", temp_file("sigkill.log", "  traceback : Signal 9 (SIGKILL) received by PID 1235\n")});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_EQ(nlohmann::json::parse(alone.out)["events"][0]["format"], "process_killed");
}

// TensorFlow's BFC warning, its allocator dump (hundreds of lines) with the totals at its end, and
// the op's OOM error are one failure; the totals say how full the pool was.
TEST(ExplainCliQa5, TensorflowsWarningDumpAndErrorAreOneReport) {
  std::string log =
      "2023-03-01 10:00:05.000001: W tensorflow/tsl/framework/bfc_allocator.cc:485] Allocator (GPU_0_bfc) ran out of "
      "memory trying to allocate 1.50GiB (rounded to 1610612736)requested by op MatMul\n"
      "2023-03-01 10:00:05.000002: I tensorflow/tsl/framework/bfc_allocator.cc:1039] BFCAllocator dump for GPU_0_bfc\n";
  for (int i = 0; i < 250; ++i) {
    log += "2023-03-01 10:00:05.000003: I tensorflow/tsl/framework/bfc_allocator.cc:1062] InUse at 7f0000000000 of size "
           "256 next 1\n";
  }
  log += "2023-03-01 10:00:05.000301: I tensorflow/tsl/framework/bfc_allocator.cc:1114] Sum Total of in-use chunks: "
         "14.52GiB\n"
         "2023-03-01 10:00:05.000302: I tensorflow/tsl/framework/bfc_allocator.cc:1116] total_region_allocated_bytes_: "
         "15918104576 memory_limit_: 15918104576 available bytes: 0 curr_region_allocation_bytes_: 31836209152\n"
         "2023-03-01 10:00:05.000305: W tensorflow/core/framework/op_kernel.cc:1830] OP_REQUIRES failed at "
         "matmul_op_impl.h:728 : RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[128,3072,1024] and type float "
         "on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n";
  auto r = run_cli({"explain", "--json", temp_file("tf_dump.log", log)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["events"].size(), 1u) << r.out;
  EXPECT_EQ(doc["events"][0]["format"], "tf_oom_tensor");
  auto text = run_cli({"explain", temp_file("tf_dump.log", log)});
  EXPECT_NE(text.out.find("Cause: TensorFlow's allocator pool was full (14.52 GiB of its 14.82 GiB limit in use)"),
            std::string::npos) << text.out;
  // A pool far from its limit is not called full.
  std::string roomy = log;
  roomy.replace(roomy.find("14.52GiB"), 8, "2.00GiB");
  auto partial = run_cli({"explain", temp_file("tf_roomy.log", roomy)});
  EXPECT_NE(partial.out.find("TensorFlow's allocator could not provide the request with 2.00 GiB of its 14.82 GiB limit "
                             "in use"), std::string::npos) << partial.out;
  // A BFC warning from TensorFlow's own source is TensorFlow's, even with a JAX error nearby.
  auto mixed = run_cli({"explain", "--json", temp_file("tf_jax.log",
      "2023-03-01 10:00:05.000001: W tensorflow/tsl/framework/bfc_allocator.cc:485] Allocator (GPU_0_bfc) ran out of "
      "memory trying to allocate 1.50GiB (rounded to 1610612736)requested by op MatMul\n"
      "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: something else\n")});
  ASSERT_EQ(mixed.exit_code, 0) << mixed.err;
  EXPECT_EQ(nlohmann::json::parse(mixed.out)["events"][0]["framework"], "tensorflow");
}

}  // namespace
}  // namespace oomdoc
