#include "readers/log_scanner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <re2/re2.h>

#include "readers/formats/message_format.h"
#include "readers/keyword_filter.h"
#include "readers/log_line.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

const std::string kNewOom =
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 23.65 GiB of "
    "which 100.00 MiB is free. Including non-PyTorch memory, this process has 23.50 GiB memory in use. Of the allocated "
    "memory 22.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated.";

std::string training_noise(int lines) {
  std::string out;
  for (int i = 0; i < lines; ++i) out += "step " + std::to_string(i) + " loss 1.234 lr 0.0003 grad_norm 0.9\n";
  return out;
}

TEST(LogLine, StripsColoursAndLauncherPrefixes) {
  EXPECT_EQ(strip_ansi("\x1b[31mERROR\x1b[0m done\r"), "ERROR done");
  CleanLine a = clean_line("[rank3]: RuntimeError: boom");
  EXPECT_EQ(a.text, "RuntimeError: boom");
  EXPECT_EQ(a.rank, 3);
  CleanLine b = clean_line("(VllmWorker rank=1 pid=123) ERROR x");
  EXPECT_EQ(b.text, "ERROR x");
  EXPECT_EQ(b.rank, 1);
  EXPECT_TRUE(b.rank_is_worker);
  CleanLine c = clean_line("vllm-1  | (EngineCore_DP0 pid=9) ValueError: y");
  EXPECT_EQ(c.text, "ValueError: y");
  EXPECT_FALSE(c.rank);
  CleanLine d = clean_line("[default2]:torch.OutOfMemoryError: z");
  EXPECT_EQ(d.rank, 2);
  EXPECT_EQ(clean_line("a | b").text, "a | b");  // not a compose prefix: the name has no padding
}

TEST(KeywordFilter, FindsEveryNeedleAtEveryAlignment) {
  const KeywordFilter& filter = KeywordFilter::standard();
  for (const auto& needle : filter.needles()) {
    for (size_t pad = 0; pad < 70; pad += 7) {
      std::string text(pad, 'x');
      text += needle.text;
      text += std::string(40, 'y');
      EXPECT_EQ(filter.find(text, 0), pad) << needle.text << " at " << pad;
    }
  }
  EXPECT_EQ(filter.find(std::string(1000, 'a'), 0), std::string::npos);
  // Runs of one character share nibbles with needles' pairs (Teddy's buckets): none is a keyword.
  for (int c = 0x20; c < 0x7f; ++c) {
    EXPECT_EQ(filter.find(std::string(1000, static_cast<char>(c)), 0), std::string::npos) << static_cast<char>(c);
  }
  // A needle cut at the end of the text is not reported.
  EXPECT_EQ(filter.find("xxxxOutOfMem", 0), std::string::npos);
}

TEST(LogScanner, LineNumbersCrlfAndTqdmCarriageReturns) {
  std::string log = training_noise(5);
  for (auto& c : log) if (c == '\n') c = '\n';
  std::string crlf;
  for (char c : training_noise(3)) {
    if (c == '\n') crlf += "\r\n"; else crlf += c;
  }
  std::string text = crlf + " 10%|#         | 10/100 [00:01<00:09]\r 20%|##        | 20/100\r" + kNewOom + "\r\nmore\n";
  auto scan = scan_text(text);
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].line, 4u);
  EXPECT_EQ(scan.events[0].bytes("requested"), kGiB);
  EXPECT_EQ(scan.lines, 5u);
}

TEST(LogScanner, SameResultWhateverTheChunking) {
  std::string text = training_noise(3000) + "\x1b[31m" + kNewOom + "\x1b[0m\n" + training_noise(3000) + "[rank1]: " + kNewOom + "\n";
  auto whole = scan_text(text);
  ASSERT_EQ(whole.events.size(), 2u);
  EXPECT_EQ(whole.events[0].line, 3001u);
  EXPECT_EQ(whole.events[1].line, 6002u);
  EXPECT_EQ(whole.events[1].rank, 1);
  for (size_t chunk : {1u, 7u, 4096u, 65537u}) {
    LogScanner scanner;
    for (size_t i = 0; i < text.size(); i += chunk) scanner.feed(std::string_view(text).substr(i, chunk));
    scanner.finish();
    const auto& r = scanner.result();
    ASSERT_EQ(r.events.size(), 2u) << "chunk " << chunk;
    EXPECT_EQ(r.events[0].line, 3001u);
    EXPECT_EQ(r.events[1].line, 6002u);
    EXPECT_EQ(r.events[1].bytes("free"), 100 * kMiB);
  }
}

TEST(LogScanner, InterleavedRanksAreSeparateEventsWithTheirTracebacks) {
  std::string text =
      "[rank0]: Traceback (most recent call last):\n"
      "[rank1]: Traceback (most recent call last):\n"
      "[rank0]:   File \"/home/me/train.py\", line 88, in train_step\n"
      "[rank0]:     loss.backward()\n"
      "[rank1]:   File \"/home/me/train.py\", line 120, in evaluate\n"
      "[rank1]:     out = model.generate(**batch)\n"
      "[rank0]:   File \"/usr/lib/python3/dist-packages/torch/_tensor.py\", line 522, in backward\n"
      "[rank0]:     torch.autograd.backward(\n"
      "[rank0]: " + kNewOom + "\n"
      "[rank1]: " + kNewOom + "\n";
  auto scan = scan_text(text);
  ASSERT_EQ(scan.events.size(), 2u);
  ASSERT_TRUE(scan.events[0].traceback);
  EXPECT_EQ(scan.events[0].rank, 0);
  EXPECT_EQ(scan.events[0].traceback->operation, "backward");
  ASSERT_TRUE(scan.events[0].traceback->innermost_user_frame);
  EXPECT_EQ(scan.events[0].traceback->innermost_user_frame->line, 88u);
  ASSERT_TRUE(scan.events[1].traceback);
  EXPECT_EQ(scan.events[1].traceback->operation, "generation");  // generate() inside evaluate()
}

TEST(LogScanner, RepeatedMessageIsOneEventWithACount) {
  auto scan = scan_text("ERROR " + kNewOom + "\nTraceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n" + kNewOom + "\n");
  // Different prefixes make different message texts only when the message itself differs.
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].repeats, 2u);
  EXPECT_EQ(scan.events[0].last_repeat_line, 4u);
  EXPECT_FALSE(scan.events[0].field("repeats"));  // bookkeeping, not a figure the message printed
}

// A retry loop: the same OOM six times, one line apart, is one event with its count and line range
// (it used to come out as pairs); a different OOM is its own event, and the first one printed again
// after it is a new event too.
TEST(LogScanner, RetryLoopIsOneEventWithItsLineRange) {
  auto scan = scan_text(testing::read_file(testing::fixture_path("explain/retry_loop.log")));
  ASSERT_EQ(scan.events.size(), 3u);
  EXPECT_EQ(scan.events[0].line, 2u);
  EXPECT_EQ(scan.events[0].repeats, 6u);
  EXPECT_EQ(scan.events[0].last_repeat_line, 12u);
  EXPECT_EQ(scan.events[0].bytes("requested"), 1536 * kMiB);
  EXPECT_EQ(scan.events[1].line, 14u);
  EXPECT_EQ(scan.events[1].repeats, 1u);
  EXPECT_EQ(scan.events[1].last_repeat_line, 0u);
  EXPECT_EQ(scan.events[1].bytes("requested"), 3 * kGiB);
  EXPECT_EQ(scan.events[2].line, 16u);
  EXPECT_EQ(scan.events[2].repeats, 1u);
}

// Thousands of repeats stay one event; the traceback above the first print is kept (repeats do not
// read theirs: that is what made 20,000 repeats take seconds).
TEST(LogScanner, ThousandsOfRepeatsAreOneEvent) {
  std::string text = "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    loss.backward()\n";
  for (int i = 0; i < 20000; ++i) text += kNewOom + "\n";
  auto scan = scan_text(text);
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].line, 4u);
  EXPECT_EQ(scan.events[0].repeats, 20000u);
  EXPECT_EQ(scan.events[0].last_repeat_line, 20003u);
  ASSERT_TRUE(scan.events[0].traceback);
  EXPECT_EQ(scan.events[0].traceback->operation, "backward");
  EXPECT_FALSE(scan.events_truncated);
}

// The message starts 20 KB (and 300 KB) into one line: the scanner reads the window around the
// keyword, not the line's first 16 KiB.
TEST(LogScanner, MessageDeepInsideAVeryLongLineIsFound) {
  const std::string old_oom =
      "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.65 GiB total capacity; 20.00 GiB "
      "already allocated; 1.00 GiB free; 21.00 GiB reserved in total by PyTorch)";
  for (size_t lead : {20000u, 300000u}) {
    auto scan = scan_text("step 1\n" + std::string(lead, 'x') + " " + old_oom + "\nnext\n");
    ASSERT_EQ(scan.events.size(), 1u) << lead;
    EXPECT_EQ(scan.events[0].line, 2u);
    EXPECT_EQ(scan.events[0].format, "pytorch_old_reserved");
    EXPECT_EQ(scan.events[0].bytes("requested"), 2 * kGiB);
    EXPECT_EQ(scan.events[0].bytes("reserved_total"), 21 * kGiB);
    EXPECT_EQ(scan.lines, 3u);
  }
}

// JAX prints the BFC allocator's warning, then raises XlaRuntimeError for the same request: one
// JAX event (the XLA error, with the allocator's name), never a TensorFlow one.
// One JAX failure on two GPUs (an openpi log): each device's BFC warning and PjRt "Execution of
// replica 0 failed", then one XlaRuntimeError for the same request: one event, the raised one,
// with the devices the replicas named.
TEST(LogScanner, JaxReplicaFailuresOnSeveralDevicesAreTheRaisedError) {
  const std::string bfc = "W external/xla/xla/tsl/framework/bfc_allocator.cc:501] Allocator (GPU_{}_bfc) ran out of memory "
                          "trying to allocate 4.50GiB (rounded to 4831838208)requested by op \n";
  const std::string pjrt = "E0314 21:29:02.854727  957629 pjrt_stream_executor_client.cc:3045] Execution of replica 0 failed: "
                           "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4831838208 bytes. "
                           "[tf-allocator-allocation-error='']\n";
  std::string log;
  for (const char* device : {"0", "1"}) {
    std::string warning = bfc;
    warning.replace(warning.find("{}"), 2, device);
    log += warning + pjrt;
  }
  log += "Traceback (most recent call last):\n  File \"train.py\", line 125, in init_train_state\n    train_state = jax.jit(\n"
         "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4831838208 bytes.: "
         "while running replica 0 and partition 0 of a replicated computation (other replicas may have failed as well).\n";
  auto scan = scan_text(log);
  ASSERT_EQ(scan.events.size(), 1u);
  const OomEvent& e = scan.events[0];
  EXPECT_EQ(e.line, 8u);
  EXPECT_EQ(e.bytes("requested"), 4831838208u);
  EXPECT_EQ(e.string_field("replica_devices"), "0, 1");
  EXPECT_EQ(e.int_field("replica_report_line"), 2);
  ASSERT_TRUE(e.traceback);
  // A retry loop of the same failure is one event with its count.
  auto loop = scan_text(log + log + log);
  ASSERT_EQ(loop.events.size(), 1u);
  EXPECT_EQ(loop.events[0].repeats, 3u);
  EXPECT_EQ(loop.events[0].last_repeat_line, 24u);
  // A report of another request (device 0's here) stays its own event.
  std::string other = log;
  other.replace(other.find("4831838208 bytes. [tf"), 10, "4831838000");
  EXPECT_EQ(scan_text(other).events.size(), 2u);
}

TEST(LogScanner, JaxBfcWarningAndXlaErrorAreOneJaxEvent) {
  auto scan = scan_text(testing::read_file(testing::fixture_path("explain/jax_bfc_then_xla.log")));
  ASSERT_EQ(scan.events.size(), 1u);
  const OomEvent& e = scan.events[0];
  EXPECT_EQ(e.framework, "jax");
  EXPECT_EQ(e.format, "xla_oom_bytes");
  EXPECT_EQ(e.line, 6u);
  EXPECT_EQ(e.bytes("requested"), 3358720000u);              // the exact figure, not the warning's 3.13 GiB
  EXPECT_EQ(e.bytes("xla_total_allocation"), 7655779205u);   // 7.13 GiB
  EXPECT_EQ(e.int_field("requested_rounded_bytes"), 3358720000);
  EXPECT_EQ(e.string_field("allocator"), "GPU_0_bfc");
  EXPECT_EQ(e.int_field("allocator_warning_line"), 2);
  EXPECT_EQ(e.device, 0);
  ASSERT_TRUE(e.traceback);
  ASSERT_TRUE(e.traceback->innermost_user_frame);
  EXPECT_EQ(e.traceback->innermost_user_frame->line, 57u);
  // TensorFlow's own copy of the allocator (external/local_tsl) stays TensorFlow's.
  auto tf = scan_text("2024-01-01 W external/local_tsl/tsl/framework/bfc_allocator.cc:485] Allocator (GPU_0_bfc) ran out "
                      "of memory trying to allocate 1.50GiB (rounded to 1610612736)requested by op MatMul\n");
  ASSERT_EQ(tf.events.size(), 1u);
  EXPECT_EQ(tf.events[0].framework, "tensorflow");
  // A JAX warning on its own (no XLA error follows) is JAX's too, from the file's path.
  auto alone = scan_text("W external/xla/xla/tsl/framework/bfc_allocator.cc:497] Allocator (GPU_0_bfc) ran out of memory "
                         "trying to allocate 1.50GiB (rounded to 1610612736)requested by op \n");
  ASSERT_EQ(alone.events.size(), 1u);
  EXPECT_EQ(alone.events[0].framework, "jax");
  EXPECT_EQ(alone.events[0].format, "tf_bfc_oom");
}

// The memory-reading matcher is written by hand for speed: it reads what the pattern it replaces
// reads, the name and the size, on lines built from the pattern's pieces and its near misses.
TEST(LogScanner, MemoryReadingsMatchThePatternTheyReplace) {
  const RE2 pattern("(?i)((?:max[_ ]?)?(?:gpu[_ ]?|cuda[_ ]?)?mem(?:ory)?(?:[_ ](?:allocated|reserved|usage|used|alloc))?)"
                    "['\"]?\\s*[:=]\\s*['\"]?(" + std::string(kSizePattern) + ")");
  const std::vector<std::string> names = {"mem", "Memory", "MEM", "max_mem", "maxmem", "gpu_mem", "GPU mem",
                                          "cuda_memory", "max_gpu_memory", "max cuda mem", "memory_allocated",
                                          "mem reserved", "memory alloc", "memory_allocatedx", "memo", "xmem", "memmem",
                                          "mem_usage", "mem used", "gpumemory", "cudamem"};
  const std::vector<std::string> glue = {":", "=", ": ", " = ", "'=", "\": '", "\t:\t", " ", "::", "-"};
  const std::vector<std::string> sizes = {"12.3G", "12.3GB", "12,5 GiB", "5 gib", "512MB", "7B", "7 bytes", "3K", "3Ki",
                                          "2.5 GiBs", "40", "1.2.3GB", "9 T", "8P", "8PB", "6 m", "x5GB"};
  size_t compared = 0;
  for (const auto& name : names) {
    for (const auto& g : glue) {
      for (const auto& size : sizes) {
        const std::string line = "step 10 " + name + g + size + " tail";
        std::string want_name, want_size;
        // (Only a line with a scanner keyword is read at all: "MEM:" alone is not.)
        if (KeywordFilter::standard().find(line, 0) == std::string::npos) continue;
        const bool want = RE2::PartialMatch(line, pattern, &want_name, &want_size);
        ScanResult scan = scan_text(line + "\n");
        ASSERT_EQ(scan.readings.size(), want && parse_printed_size(want_size, LabelMeaning::kBinary) ? 1u : 0u) << line;
        if (!scan.readings.empty()) {
          EXPECT_EQ(scan.readings[0].label, want_name) << line;
          EXPECT_EQ(scan.readings[0].bytes, parse_printed_size(want_size, LabelMeaning::kBinary)->bytes) << line;
        }
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, names.size() * glue.size() * sizes.size() * 3 / 4);
}

// A markdown quote of the error above it (a GitHub comment) is a mention, not a second failure; a
// quoted error with other figures, or with nothing before it, is one.
TEST(LogScanner, MarkdownQuoteOfAnEarlierErrorIsAMention) {
  const std::string full =
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity of 23.64 GiB "
      "of which 4.33 GiB is free. Including non-PyTorch memory, this process has 19.29 GiB memory in use. Of the "
      "allocated memory 18.80 GiB is allocated by PyTorch, and 43.81 MiB is reserved by PyTorch but unallocated.\n";
  const std::string quote = "> torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB\n";
  auto mention = scan_text(full + "\nSame here:\n\n" + quote);
  ASSERT_EQ(mention.events.size(), 1u);
  EXPECT_EQ(mention.events[0].line, 1u);
  EXPECT_EQ(scan_text(full + "\n> torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB\n").events.size(), 2u);
  EXPECT_EQ(scan_text(quote).events.size(), 1u);
  // A whole multi-rank log pasted as a quotation: every rank's error stays an event.
  const std::string gpu1 =
      "> [rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB. GPU 1 has a total capacity of "
      "23.64 GiB of which 4.33 GiB is free. Including non-PyTorch memory, this process has 19.29 GiB memory in use. Of the "
      "allocated memory 18.80 GiB is allocated by PyTorch, and 43.81 MiB is reserved by PyTorch but unallocated.\n";
  std::string gpu0 = gpu1;
  gpu0.replace(gpu0.find("[rank1]"), 7, "[rank0]");
  gpu0.replace(gpu0.find("GPU 1"), 5, "GPU 0");
  EXPECT_EQ(scan_text(gpu0 + "> \n" + gpu1).events.size(), 2u);
}

// Keras's usual output: the BFC warning, its dump and stats, the failed kernel's log line, then the
// raised ResourceExhaustedError repeating it: one failure, the raised error with its traceback and
// the pool's figures. A dump of 100,000 chunk lines (a large pool) changes nothing.
TEST(LogScanner, TensorflowKernelLogAndRaisedErrorAreOneEvent) {
  const std::string text = testing::read_file(testing::fixture_path("explain/tf_keras_op_then_raise.log"));
  const size_t at = text.find("@DUMP@\n");
  ASSERT_NE(at, std::string::npos);
  for (size_t chunks : {size_t{1}, size_t{100000}}) {
    std::string dump;
    for (size_t i = 0; i < chunks; ++i) {
      dump += fmt::format("2024-05-01 10:00:00.000003: I tensorflow/core/common_runtime/bfc_allocator.cc:1066] InUse at "
                          "7f{:010x} of size 1048576 next {}\n", i, i + 1);
    }
    std::string log = text;
    log.replace(at, 7, dump);
    auto scan = scan_text(log);
    ASSERT_EQ(scan.events.size(), 1u) << chunks;
    const OomEvent& e = scan.events[0];
    EXPECT_EQ(e.format, "tf_oom_tensor");
    EXPECT_EQ(e.line, chunks + 25);   // the raised error's message line
    EXPECT_EQ(e.int_field("kernel_log_line"), static_cast<int64_t>(chunks + 18));
    EXPECT_EQ(e.int_field("allocator_warning_line"), 1);
    EXPECT_EQ(e.int_field("allocator_stats_line"), static_cast<int64_t>(chunks + 5));
    EXPECT_EQ(e.int_field("memory_limit_bytes"), 15510929408);
    EXPECT_EQ(e.bytes("requested"), 1644167168u);
    ASSERT_TRUE(e.traceback);
    ASSERT_TRUE(e.traceback->innermost_user_frame);
    EXPECT_EQ(e.traceback->innermost_user_frame->line, 30u);
  }
}

// vLLM's accounting lines of one startup are one report; a negative KV budget, 0 cuda blocks and
// 0.00x concurrency make it an error, and the ValueError raised right after is the same failure.
TEST(LogScanner, VllmNegativeKvCacheIsOneErrorWithItsFigures) {
  auto scan = scan_text(testing::read_file(testing::fixture_path("explain/vllm_negative_kv.log")));
  ASSERT_EQ(scan.events.size(), 1u);
  const OomEvent& e = scan.events[0];
  EXPECT_EQ(e.format, "vllm_memory_info");
  EXPECT_TRUE(e.is_error);
  EXPECT_EQ(e.line, 1u);
  EXPECT_EQ(e.end_line, 7u);
  EXPECT_EQ(e.bytes("total_gpu_memory"), 16932908564u);   // 15.77 GiB
  EXPECT_EQ(e.bytes("usable_budget"), 8461085573u);       // 7.88 GiB
  EXPECT_EQ(e.bytes("weights"), 8031588844u);             // 7.48 GiB
  EXPECT_EQ(e.int_field("kv_cache_bytes"), -837518623);   // -0.78 GiB
  EXPECT_EQ(e.int_field("gpu_blocks"), 0);
  EXPECT_EQ(e.int_field("cpu_blocks"), 2048);
  EXPECT_EQ(e.int_field("concurrency_tokens_per_request"), 8192);
  EXPECT_EQ(e.int_field("error_line"), 7);
  // Without the failing figures the same lines stay one informational report.
  auto fine = scan_text(
      "INFO worker.py:267] the current vLLM instance can use total_gpu_memory (15.77GiB) x gpu_memory_utilization (0.90) = 14.19GiB\n"
      "INFO executor_base.py:111] # cuda blocks: 2330, # CPU blocks: 2048\n");
  ASSERT_EQ(fine.events.size(), 1u);
  EXPECT_FALSE(fine.events[0].is_error);
  EXPECT_EQ(fine.events[0].int_field("gpu_blocks"), 2330);
  EXPECT_EQ(fine.events[0].bytes("usable_budget"), 15236396483u);  // 14.19 GiB
}

TEST(LogScanner, JsonLinesRecordsAreDecoded) {
  std::string record = R"({"ts": "2026-01-01T00:00:00", "level": "ERROR", "msg": "step failed", "exc": "Traceback (most recent call last):\n  File \"train.py\", line 5, in <module>\n    loss.backward()\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of 7.79 GiB of which 1.00 MiB is free."})";
  auto scan = scan_text("{\"ts\": 1, \"msg\": \"ok\"}\n" + record + "\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].line, 2u);
  EXPECT_EQ(scan.events[0].bytes("requested"), 2 * kMiB);
}

// A JSON logger's retry loop: from the third print on, a record whose one message is the last
// event's is counted without matching it again (12,000 such records took 0.85 s, now 0.14 s); a
// record that holds a second message besides it is still read whole, and a record of another rank
// is its own event.
TEST(LogScanner, RepeatedJsonRecordsAreCountedAndOtherMessagesStillRead) {
  const std::string oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.05 GiB is free.";
  const std::string other = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.05 GiB is free.";
  std::string text;
  for (int i = 0; i < 3000; ++i) {
    text += R"({"level": "ERROR", "msg": ")" + oom + "\"}\n";
    text += R"({"level": "INFO", "msg": "step )" + std::to_string(i) + "\"}\n";
  }
  text += R"({"level": "ERROR", "msg": ")" + oom + R"(", "detail": ")" + other + "\"}\n";   // line 6001
  text += R"({"level": "ERROR", "msg": "[rank1]: )" + oom + "\"}\n";                        // line 6002
  auto scan = scan_text(text);
  ASSERT_EQ(scan.events.size(), 4u);
  EXPECT_EQ(scan.events[0].line, 1u);
  EXPECT_EQ(scan.events[0].repeats, 3000u);
  EXPECT_EQ(scan.events[0].last_repeat_line, 5999u);
  // The two-message record's strings are read in key order ("detail" before "msg"): the 4 GiB
  // message comes between, so its 2 GiB one is a new event, not a 3001st print.
  EXPECT_EQ(scan.events[1].line, 6001u);
  EXPECT_EQ(scan.events[1].bytes("requested"), 4 * kGiB);
  EXPECT_EQ(scan.events[2].line, 6001u);
  EXPECT_EQ(scan.events[2].bytes("requested"), 2 * kGiB);
  EXPECT_EQ(scan.events[2].repeats, 1u);
  EXPECT_EQ(scan.events[3].line, 6002u);
  EXPECT_EQ(scan.events[3].rank, 1);
  EXPECT_EQ(scan.events[3].repeats, 1u);
}

TEST(LogScanner, MemoryReadingsAreCollected) {
  std::string text;
  for (int i = 0; i < 10; ++i) text += "step " + std::to_string(i) + " loss 1.0 mem: " + std::to_string(10 + i) + ".00 GiB\n";
  auto scan = scan_text(text);
  EXPECT_TRUE(scan.events.empty());
  ASSERT_EQ(scan.readings.size(), 10u);
  EXPECT_EQ(scan.readings[0].bytes, 10 * kGiB);
  EXPECT_EQ(scan.readings[9].line, 10u);
}

TEST(LogScanner, Fp32HiddenStatesNoticeIsKeptWithItsLineAndRank) {
  const std::string old_wording =
      "The input hidden states seems to be silently casted in float32, this might be related to the fact you have "
      "upcasted embedding or layer norm layers in float32. We will cast back the input in torch.bfloat16.\n";
  const std::string new_wording = "Casting fp32 inputs back to torch.bfloat16 for flash-attn compatibility.\n";
  std::string text = "loading\n[rank3]: " + old_wording;
  for (int i = 0; i < 40; ++i) text += old_wording;  // repeated every step: the first per rank is kept
  text += "[rank17]: " + new_wording;
  auto scan = scan_text(text);
  EXPECT_TRUE(scan.events.empty());
  ASSERT_EQ(scan.notices.size(), 3u);
  EXPECT_EQ(scan.notices[0].line, 2u);
  EXPECT_EQ(scan.notices[0].rank, 3);
  EXPECT_EQ(scan.notices[0].kind, "fp32_hidden_states");
  EXPECT_EQ(scan.notices[1].line, 3u);
  EXPECT_FALSE(scan.notices[1].rank.has_value());
  EXPECT_EQ(scan.notices[2].line, 43u);
  EXPECT_EQ(scan.notices[2].rank, 17);
  EXPECT_TRUE(scan_text("the cast was silently casted in bfloat16\n").notices.empty());
  EXPECT_TRUE(scan_text("Casting fp32 inputs back to torch.bfloat16 for speed\n").notices.empty());
}

TEST(LogScanner, HugeSingleLineAndCutMessagesAreSafe) {
  std::string line(50u << 20, 'a');
  auto scan = scan_text(line);
  EXPECT_TRUE(scan.events.empty());
  EXPECT_EQ(scan.lines, 1u);
  // A message cut in the middle: what is printed is read, nothing is made up.
  auto cut = scan_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU ");
  ASSERT_EQ(cut.events.size(), 1u);
  EXPECT_EQ(cut.events[0].format, "pytorch_new_truncated");
  EXPECT_EQ(cut.events[0].bytes("requested"), 512 * kMiB);
  EXPECT_FALSE(cut.events[0].bytes("total"));
}

// journald's and syslog's prefix ("Dec 31 01:55:57 FORGE ollama[555324]: ", or with an ISO time
// from `journalctl -o short-iso`) is taken off every line: ggml's "  current device: 0, in
// function alloc at ...ggml-cuda.cu" after it was not read, and the error was called PyTorch's
// (wording of ollama#8271). Rust's tracing ("<time> ERROR target: ") keeps its target.
TEST(LogScanner, JournaldPrefixIsTakenOff) {
  const std::string prefix = "Dec 31 01:55:57 FORGE ollama[555324]: ";
  const auto scan = scan_text(prefix + "INFO [            update_slots] kv cache rm [p0, end) | id_slot=0\n" + prefix +
                              "CUDA error: out of memory\n" + prefix +
                              "  current device: 0, in function alloc at /src/ggml/src/ggml-cuda.cu:384\n" + prefix +
                              "  cuMemCreate(&handle, reserve_size, &prop, 0)\n" + prefix +
                              "/src/ggml/src/ggml-cuda.cu:110: CUDA error\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].format, "ggml_cuda_error");
  EXPECT_EQ(scan.events[0].framework, "llama.cpp");
  EXPECT_EQ(scan.events[0].device, 0);
  EXPECT_EQ(scan.events[0].line, 2u);
  EXPECT_EQ(clean_line("Feb  1 01:55:57 host kernel: Out of memory: Killed process 7 (python)").text,
            "Out of memory: Killed process 7 (python)");
  EXPECT_EQ(clean_line("2024-12-31T01:55:57+0100 FORGE llama-server[2211]: CUDA error: out of memory").text,
            "CUDA error: out of memory");
  EXPECT_EQ(clean_line("2023-07-07T17:55:43.805488Z ERROR text_generation_launcher: Webserver Crashed").text,
            "ERROR text_generation_launcher: Webserver Crashed");
  EXPECT_EQ(clean_line("Dec 31 the run failed").text, "Dec 31 the run failed");
  EXPECT_TRUE(clean_line(prefix + "x").log_record);
  EXPECT_FALSE(clean_line(prefix + "x").logger_record);
}

TEST(LogScanner, InvalidUtf8DoesNotMatter) {
  auto scan = scan_text(std::string("\xff\xfe garbage \xc3\x28\n") + kNewOom + "\n");
  ASSERT_EQ(scan.events.size(), 1u);
}

}  // namespace
}  // namespace oomdoc

namespace oomdoc {
namespace {

// A message a sentence quotes is a mention (qa21 t21, line 5); a program quoting its own error (a
// repr, logfmt, NCCL's quoted CUDA string at the line's end, a quote with a parenthesis after it)
// is still read, and so is a message after a quoted mention on the same line.
TEST(LogScanner, MessageQuotedInProseIsAMention) {
  const ScanResult mention = scan_text(
      "The test expects: \"CUDA error: out of memory\" to be handled\n"
      "Docs say \xe2\x80\x9c" "CUDA error: out of memory\xe2\x80\x9d is raised when the card is full\n"
      "We saw 'CUDA error: out of memory' twice\n");
  EXPECT_TRUE(mention.events.empty());

  const ScanResult real = scan_text(
      "ERROR 03-19 10:55:18 [engine.py:158] OutOfMemoryError('" + kNewOom + "')\n"
      "time=2024-05-01T10:00:00 level=ERROR msg=\"load failed\" error=\"CUDA error: out of memory\"\n"
      "NCCL WARN Cuda failure 'out of memory'\n"
      "step failed: \"CUDA error: out of memory\" (code 2)\n"
      "note: \"out of memory\" means what it says; RuntimeError: HIP error: out of memory\n");
  ASSERT_EQ(real.events.size(), 5u);
  EXPECT_EQ(real.events[0].format, "pytorch_new");
  EXPECT_EQ(real.events[0].line, 1u);
  EXPECT_EQ(real.events[1].format, "cuda_error_oom");
  EXPECT_EQ(real.events[1].line, 2u);
  EXPECT_EQ(real.events[2].line, 3u);
  // (The same CUDA error again: a repeat of line 2's, after the NCCL one came between.)
  EXPECT_EQ(real.events[3].format, "cuda_error_oom");
  EXPECT_EQ(real.events[3].line, 4u);
  EXPECT_EQ(real.events[4].line, 5u);
  EXPECT_EQ(real.events[4].framework, "pytorch-rocm");

  // A quotation with figures is the error itself, quoted by a retry loop, then prose: still read.
  const ScanResult retried = scan_text(
      "2024-05-01 10:00:00 WARNING attempt 3/3 failed with \"CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
      "a total capacity of 23.65 GiB of which 1.00 GiB is free. Of the allocated memory 20.00 GiB is allocated by "
      "PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated.\" giving up on job 17\n");
  ASSERT_EQ(retried.events.size(), 1u);
  // One size in the quotation is a test's assertion or a pattern, not the error.
  EXPECT_TRUE(scan_text("E       assert \"CUDA out of memory. Tried to allocate 2.00 GiB\" in err.message\n"
                        "watching for \"CUDA out of memory. Tried to allocate 2.00 GiB\" lines\n")
                  .events.empty());
  EXPECT_EQ(retried.events[0].format, "pytorch_new");
  EXPECT_EQ(retried.events[0].bytes("requested"), 2 * kGiB);
}

}  // namespace
}  // namespace oomdoc
