// Logs as container runtimes and JSON loggers store them: each line of output wrapped in a record
// (Docker's json-file driver, Kubernetes' CRI files, {"msg": ...} loggers). Unwrapped, they must read
// as the plain log does: the same figures, the same frames, the same cause.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyses/explain.h"
#include "readers/container_log.h"
#include "readers/log_line.h"
#include "readers/log_scanner.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

using testing::explain_text;
using testing::fix_ids;
using testing::only_event;

// An evaluation loop run without torch.no_grad(), as PyTorch 2.x prints its failure.
const std::vector<std::string> kPlainLines = {
    "Evaluating: 100%|##########| 50/50",
    "Traceback (most recent call last):",
    "  File \"/app/train.py\", line 88, in <module>",
    "    metrics = evaluate(model, val_loader)",
    "  File \"/app/train.py\", line 40, in evaluate",
    "    outputs = model(**batch)",
    "  File \"/usr/local/lib/python3.10/site-packages/torch/nn/modules/module.py\", line 1518, in _wrapped_call_impl",
    "    return self._call_impl(*args, **kwargs)",
    "  File \"/usr/local/lib/python3.10/site-packages/torch/nn/modules/module.py\", line 1527, in _call_impl",
    "    return forward_call(*args, **kwargs)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB "
    "of which 1.08 GiB is free. Including non-PyTorch memory, this process has 22.56 GiB memory in use. Of the "
    "allocated memory 20.14 GiB is allocated by PyTorch, and 1.97 GiB is reserved by PyTorch but unallocated. See "
    "documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
};

std::string wrap_each(const std::vector<std::string>& lines, std::string (*wrap)(const std::string&, size_t)) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) out += wrap(lines[i], i) + "\n";
  return out;
}

std::string plain(const std::string& line, size_t) { return line; }

std::string docker_json_file(const std::string& line, size_t i) {
  return nlohmann::json{{"log", line + "\n"}, {"stream", "stderr"}, {"time", "2024-05-01T10:00:0" + std::to_string(i % 10) + ".123456789Z"}}
      .dump();
}

std::string kubernetes_cri(const std::string& line, size_t i) {
  return "2024-05-01T10:00:0" + std::to_string(i % 10) + ".123456789Z stderr F " + line;
}

std::string json_logger_msg(const std::string& line, size_t) {
  return nlohmann::json{{"time", "2024-05-01T10:00:00Z"}, {"level", "error"}, {"msg", line}}.dump();
}

std::string json_logger_message(const std::string& line, size_t) {
  return nlohmann::json{{"message", line}, {"logger", "train"}}.dump();
}

void expect_same_event(const ExplainedEvent& wrapped, const ExplainedEvent& plain_event) {
  const OomEvent& w = wrapped.event;
  const OomEvent& p = plain_event.event;
  EXPECT_EQ(w.format, p.format);
  EXPECT_EQ(w.line, p.line);
  EXPECT_EQ(w.end_line, p.end_line);
  EXPECT_EQ(w.message, p.message);
  ASSERT_EQ(w.quantities.size(), p.quantities.size());
  for (size_t i = 0; i < p.quantities.size(); ++i) {
    EXPECT_EQ(w.quantities[i].first, p.quantities[i].first);
    EXPECT_EQ(w.quantities[i].second.bytes, p.quantities[i].second.bytes);
  }
  EXPECT_EQ(w.rank, p.rank);
  ASSERT_TRUE(w.traceback);
  ASSERT_TRUE(p.traceback);
  ASSERT_EQ(w.traceback->frames.size(), p.traceback->frames.size());
  for (size_t i = 0; i < p.traceback->frames.size(); ++i) {
    EXPECT_EQ(w.traceback->frames[i].file, p.traceback->frames[i].file);
    EXPECT_EQ(w.traceback->frames[i].line, p.traceback->frames[i].line);
    EXPECT_EQ(w.traceback->frames[i].function, p.traceback->frames[i].function);
    EXPECT_EQ(w.traceback->frames[i].code, p.traceback->frames[i].code);
  }
  EXPECT_EQ(w.traceback->operation, p.traceback->operation);
  EXPECT_EQ(wrapped.diagnosis.cause, plain_event.diagnosis.cause);
  EXPECT_EQ(wrapped.diagnosis.secondary_causes, plain_event.diagnosis.secondary_causes);
  EXPECT_EQ(fix_ids(wrapped.diagnosis), fix_ids(plain_event.diagnosis));
}

TEST(ContainerLogs, PlainTracebackReadsEvaluationWithoutNoGrad) {
  const ExplainedEvent x = only_event(explain_text(wrap_each(kPlainLines, plain)));
  EXPECT_EQ(x.event.format, "pytorch_new");
  EXPECT_EQ(x.event.line, 11u);
  EXPECT_EQ(x.event.bytes("requested"), 2 * kGiB);
  ASSERT_TRUE(x.event.traceback);
  ASSERT_EQ(x.event.traceback->frames.size(), 4u);
  EXPECT_EQ(x.event.traceback->frames[1].function, "evaluate");
  EXPECT_EQ(x.event.traceback->frames[1].code, "outputs = model(**batch)");
  ASSERT_TRUE(x.event.traceback->innermost_user_frame);
  EXPECT_EQ(x.event.traceback->innermost_user_frame->line, 40u);
  EXPECT_EQ(x.event.traceback->operation, "evaluation");
  EXPECT_EQ(x.diagnosis.cause, "evaluation_with_grad");
  EXPECT_EQ(fix_ids(x.diagnosis).at(0), "no_grad_for_eval");
}

TEST(ContainerLogs, DockerJsonFileReadsAsThePlainLog) {
  expect_same_event(only_event(explain_text(wrap_each(kPlainLines, docker_json_file))),
                    only_event(explain_text(wrap_each(kPlainLines, plain))));
}

TEST(ContainerLogs, KubernetesCriReadsAsThePlainLog) {
  expect_same_event(only_event(explain_text(wrap_each(kPlainLines, kubernetes_cri))),
                    only_event(explain_text(wrap_each(kPlainLines, plain))));
}

TEST(ContainerLogs, JsonLoggerRecordsReadAsThePlainLog) {
  const ExplainedEvent p = only_event(explain_text(wrap_each(kPlainLines, plain)));
  expect_same_event(only_event(explain_text(wrap_each(kPlainLines, json_logger_msg))), p);
  expect_same_event(only_event(explain_text(wrap_each(kPlainLines, json_logger_message))), p);
}

// A CRI runtime splits a long line into "P" records, the last one "F": the parts are one line again,
// the message and a frame alike, even when the keyword falls in the second part.
TEST(ContainerLogs, CriPartialRecordsAreJoined) {
  std::vector<std::string> records;
  for (size_t i = 0; i < kPlainLines.size(); ++i) {
    const std::string& line = kPlainLines[i];
    const std::string stamp = "2024-05-01T10:00:00.123456789Z stderr ";
    if (i == 4 || i == 10) {
      const size_t cut = i == 4 ? 20 : 11;   // inside the frame's path; before "OutOfMemoryError"
      records.push_back(stamp + "P " + line.substr(0, cut));
      records.push_back(stamp + "F " + line.substr(cut));
    } else {
      records.push_back(stamp + "F " + line);
    }
  }
  std::string log;
  for (const auto& r : records) log += r + "\n";
  const ExplainedEvent x = only_event(explain_text(log));
  EXPECT_EQ(x.event.format, "pytorch_new");
  EXPECT_EQ(x.event.line, 12u);       // the record that starts the message's line, which is whole there
  EXPECT_EQ(x.event.end_line, 12u);
  EXPECT_EQ(x.event.message, kPlainLines.back());
  EXPECT_EQ(x.event.bytes("requested"), 2 * kGiB);
  ASSERT_TRUE(x.event.quantity("reserved_unallocated"));
  EXPECT_EQ(x.event.quantity("reserved_unallocated")->bytes, 2115271393u);   // 1.97 GiB
  ASSERT_TRUE(x.event.traceback);
  ASSERT_EQ(x.event.traceback->frames.size(), 4u);
  EXPECT_EQ(x.event.traceback->frames[1].file, "/app/train.py");
  EXPECT_EQ(x.event.traceback->frames[1].function, "evaluate");
  EXPECT_EQ(x.diagnosis.cause, "evaluation_with_grad");
}

// One record per line of output, whatever the runtime split: a split line comes out whole at its
// first part's place, each later part leaves an empty line, the other stream's lines between the
// parts keep theirs, and a line that is no record passes as it is.
TEST(ContainerLogDecoder, JoinsSplitLinesPerStreamAndKeepsTheLineCount) {
  const std::string docker =
      R"({"log":"Tried to alloc","stream":"stderr","time":"t1"})" "\n"
      R"({"log":"step 7 loss 2.1\n","stream":"stdout","time":"t2"})" "\n"
      R"({"log":"ate 2.00 GiB \u003e free\r\n","stream":"stderr","time":"t3"})" "\n"
      "not a record\n"
      R"({"log":"caf\u00e9 \ud83d\ude00\n","stream":"stdout","time":"t4"})" "\n";
  ContainerLogDecoder d(ContainerLogKind::kDockerJsonFile);
  std::string out;
  d.decode(docker, out);
  d.finish(out);
  EXPECT_EQ(out, "Tried to allocate 2.00 GiB > free\nstep 7 loss 2.1\n\nnot a record\ncaf\xc3\xa9 \xf0\x9f\x98\x80\n");

  const std::string cri =
      "2024-05-01T10:00:00.1Z stderr P CUDA out of mem\n"
      "2024-05-01T10:00:00.2Z stdout F epoch 1\n"
      "2024-05-01T10:00:00.3+02:00 stderr P ory. Tried\n"
      "2024-05-01T10:00:00.4Z stderr F  to allocate 20.00 MiB";   // no final newline
  ContainerLogDecoder c(ContainerLogKind::kKubernetesCri);
  out.clear();
  // Fed a byte at a time: the decoder holds what a record still lacks.
  for (char ch : cri) c.decode(std::string_view(&ch, 1), out);
  EXPECT_EQ(out, "");   // the first line waits for its last part
  c.finish(out);
  EXPECT_EQ(out, "CUDA out of memory. Tried to allocate 20.00 MiB\nepoch 1\n\n\n");
}

// A line never finished (a progress bar, a hostile file of partial records) is written out in
// pieces of at most 1 MiB as it comes, not held to the end of the input.
TEST(ContainerLogDecoder, AnUnfinishedLineIsWrittenOutAsItGrows) {
  const std::string record = R"({"log":"CUDA out of memory ","stream":"stderr"})" "\n";
  ContainerLogDecoder d(ContainerLogKind::kDockerJsonFile);
  std::string out;
  size_t records = 0;
  for (; records < 100000; ++records) d.decode(record, out);   // 1.9 MB of output text
  EXPECT_EQ(out.find("\n"), ((1u << 20) + 18) / 19 * 19);   // the first piece: the parts that pass 1 MiB
  d.finish(out);
  EXPECT_EQ(static_cast<size_t>(std::count(out.begin(), out.end(), '\n')), records);
}

// A line that grows past 1 MiB (a progress bar that never ends its line) is cut at its last
// redraw, so that what follows it, a kill report here, stays whole and is read.
TEST(ContainerLogDecoder, ALongLineIsCutAtARedraw) {
  std::string bar;
  while (bar.size() < (1u << 20) - 100) bar += "\r 42%|####      | 420/1000 [00:10<00:14, 41.2it/s]";
  bar.resize((1u << 20) - 4, ' ');
  const std::string line = bar + "\rKilled";   // 1 MiB + 3 bytes: the 1 MiB cut falls inside "Killed"
  std::string docker;
  for (size_t from = 0; from < line.size(); from += 16 << 10) {
    const bool last = from + (16 << 10) >= line.size();
    docker += nlohmann::json{{"log", line.substr(from, 16 << 10) + (last ? "\n" : "")}, {"stream", "stdout"}}.dump() + "\n";
  }
  const ScanResult scan = scan_text(docker);
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].format, "process_killed");
  EXPECT_EQ(scan.events[0].line, 64u);   // the part where the cut fell: the rest goes on there
  EXPECT_EQ(scan.lines, 65u);
}

// Docker writes only stdout and stderr; records naming other streams share one bucket, so a file
// of 50,000 invented streams holds one waiting line, not 50,000 (100,000 took 13 s).
TEST(ContainerLogDecoder, OtherStreamNamesShareOneBucket) {
  ContainerLogDecoder d(ContainerLogKind::kDockerJsonFile);
  std::string out;
  for (int i = 0; i < 50000; ++i) {
    d.decode(R"({"log":"y","stream":"s)" + std::to_string(i) + R"("})" "\n", out);
  }
  EXPECT_TRUE(out.empty());
  d.decode(R"({"log":"\n","stream":"other"})" "\n", out);
  EXPECT_EQ(out.find('\n'), 50000u);   // the 50,000 parts, one line
  EXPECT_EQ(out.find_first_not_of('y'), 50000u);
  EXPECT_EQ(static_cast<size_t>(std::count(out.begin(), out.end(), '\n')), 50001u);
}

TEST(ContainerLogDecoder, SniffsTheFirstLineWithText) {
  EXPECT_EQ(sniff_container_log("\n" R"({"log":"x\n","stream":"stderr","time":"t"})" "\n"), ContainerLogKind::kDockerJsonFile);
  EXPECT_EQ(sniff_container_log(R"({"time": "t", "stream": "stdout", "log": "x"})"), ContainerLogKind::kDockerJsonFile);
  EXPECT_EQ(sniff_container_log("2024-05-01T10:00:00.123456789Z stdout F x\n"), ContainerLogKind::kKubernetesCri);
  // A JSON logger that names its message "log" has no stream: its records are whole lines.
  EXPECT_EQ(sniff_container_log(R"({"log":"x","level":"info"})"), std::nullopt);
  EXPECT_EQ(sniff_container_log("2024-05-01 10:00:00,123 - ERROR - x\n"), std::nullopt);
  EXPECT_EQ(sniff_container_log("INFO start\n" R"({"log":"x\n","stream":"stderr"})"), std::nullopt);
  EXPECT_EQ(sniff_container_log("\xef\xbb\xbf" R"({"log":"x\n","stream":"stderr"})"), ContainerLogKind::kDockerJsonFile);
}

// What decides is the whole first line, up to 256 KiB: a first record of 150 KiB (a merged one)
// is read as a record, and a UTF-8 BOM before it changes nothing.
TEST(ContainerLogs, ALongFirstRecordAndABomStillReadAsRecords) {
  const std::string message = kPlainLines.back();
  const std::string first = nlohmann::json{{"log", std::string(150 << 10, '#') + "\r" + message + "\n"}, {"stream", "stderr"}}.dump();
  for (const std::string& log : {first + "\n", "\xef\xbb\xbf" + first + "\n"}) {
    const ExplainedEvent x = only_event(explain_text(log));
    EXPECT_EQ(x.event.message, message);
    EXPECT_EQ(x.event.line, 1u);
  }
}

// Docker splits a line at 16 KiB (moby's copier), CRI runtimes too: wherever the cut falls in the
// message, the event reads as in the plain log, on the same line.
TEST(ContainerLogs, AMessageCutAt16KiBAnywhereReadsAsThePlainLog) {
  constexpr size_t kCut = 16 << 10;
  std::vector<std::string> plain_lines = kPlainLines;
  const std::string message = plain_lines.back();
  // A progress bar's redraws run on the message's line ("\r" between them, no newline).
  plain_lines.back() = std::string(kCut - 1, '#') + "\r" + message;
  const ExplainedEvent p = only_event(explain_text(wrap_each(plain_lines, plain)));
  EXPECT_EQ(p.event.line, 11u);
  for (size_t at = 0; at < message.size(); at += 5) {
    const std::string long_line = std::string(kCut - 1 - at, '#') + "\r" + message;
    std::string docker, cri;
    for (size_t i = 0; i + 1 < kPlainLines.size(); ++i) {
      docker += docker_json_file(kPlainLines[i], i) + "\n";
      cri += kubernetes_cri(kPlainLines[i], i) + "\n";
    }
    for (size_t from = 0; from < long_line.size(); from += kCut) {
      const bool last = from + kCut >= long_line.size();
      const std::string part = long_line.substr(from, kCut);
      docker += nlohmann::json{{"log", part + (last ? "\n" : "")}, {"stream", "stderr"}, {"time", "t"}}.dump() + "\n";
      cri += std::string("2024-05-01T10:00:00.1Z stderr ") + (last ? "F " : "P ") + part + "\n";
    }
    SCOPED_TRACE(at);
    const ExplainedEvent from_docker = only_event(explain_text(docker));
    const ExplainedEvent from_cri = only_event(explain_text(cri));
    EXPECT_EQ(from_docker.event.message, message);
    EXPECT_EQ(from_cri.event.message, message);
    EXPECT_EQ(from_docker.event.bytes("requested"), 2 * kGiB);
    EXPECT_EQ(from_cri.event.quantity("reserved_unallocated")->bytes, 2115271393u);
    expect_same_event(from_docker, p);
    expect_same_event(from_cri, p);
  }
}

// A record whose "log" holds several lines (a shipper that merged them) reads as a JSON logger's
// message: the traceback in it is found.
TEST(ContainerLogs, ARecordHoldingSeveralLinesKeepsItsTraceback) {
  std::string all;
  for (const auto& line : kPlainLines) all += line + "\n";
  const std::string log = nlohmann::json{{"log", all}, {"stream", "stderr"}, {"time", "t"}}.dump() + "\n";
  const ExplainedEvent x = only_event(explain_text(log));
  EXPECT_EQ(x.event.line, 1u);
  EXPECT_EQ(x.event.bytes("requested"), 2 * kGiB);
  ASSERT_TRUE(x.event.traceback);
  ASSERT_EQ(x.event.traceback->frames.size(), 4u);
  EXPECT_EQ(x.event.traceback->frames[1].function, "evaluate");
  EXPECT_EQ(x.diagnosis.cause, "evaluation_with_grad");
}

// A JSON logger writes each line of a message as its own record (llama.cpp's server under a log
// shipper): the message reads across the records as in the plain log.
TEST(ContainerLogs, AMessageOverSeveralJsonRecordsReadsAsThePlainLog) {
  const std::vector<std::string> plain_lines = {
      "ggml_vulkan: Device memory allocation of size 118497280 failed.",
      "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory",
      "llama_kv_cache_init: failed to allocate buffer for kv cache",
  };
  std::string plain_log, json_log;
  for (const auto& line : plain_lines) {
    plain_log += line + "\n";
    json_log += nlohmann::json{{"level", "error"}, {"message", line}}.dump() + "\n";
  }
  for (const std::string& log : {plain_log, json_log}) {
    const ExplainedEvent x = only_event(explain_text(log));
    EXPECT_EQ(x.event.format, "ggml_backend_alloc");
    EXPECT_EQ(x.event.string_field("backend"), "Vulkan");
    EXPECT_EQ(x.event.bytes("requested"), 118497280u);
    EXPECT_EQ(x.event.string_field("llama_buffer"), "kv_cache");   // from the third record
    EXPECT_EQ(x.event.end_line, 2u);
    EXPECT_EQ(x.event.message, plain_lines[0] + " " + plain_lines[1]);
  }
}

// The program a JSON record's message names by its logger's prefix (vLLM's) is read as in the
// plain log.
TEST(ContainerLogs, AJsonRecordsLoggerPrefixNamesTheProgram) {
  const std::string line = "ERROR 05-01 10:00:07 [core.py:396] ValueError: No available memory for the cache blocks. "
                           "Try increasing `gpu_memory_utilization` when initializing the engine.";
  for (const std::string& log : {line + "\n", nlohmann::json{{"level", "error"}, {"message", line}}.dump() + "\n"}) {
    const ExplainedEvent x = only_event(explain_text(log));
    EXPECT_EQ(x.event.format, "vllm_no_cache_blocks");
    EXPECT_EQ(x.event.string_field("application"), "vllm");
  }
}

// A record holding several lines (a shipper's merge) may hold several errors: each is read, at the
// record's line, as from the plain lines.
TEST(ContainerLogs, EveryErrorInOneRecordIsRead) {
  const std::vector<std::string> plain_lines = {
      "step 10 loss 2.1",
      kPlainLines.back(),
      "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 1024.00 MiB on device 1: cudaMalloc failed: out of memory",
      "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
      "initializing the engine.",
  };
  std::string all;
  for (const auto& line : plain_lines) all += line + "\n";
  const std::string docker = nlohmann::json{{"log", all}, {"stream", "stderr"}}.dump() + "\n";
  const std::string logger = nlohmann::json{{"level", "error"}, {"message", all}}.dump() + "\n";
  for (const std::string& log : {all, docker, logger}) {
    const ScanResult scan = scan_text(log);
    ASSERT_EQ(scan.events.size(), 3u);
    EXPECT_EQ(scan.events[0].format, "pytorch_new");
    EXPECT_EQ(scan.events[0].bytes("requested"), 2 * kGiB);
    EXPECT_EQ(scan.events[1].format, "ggml_cuda_alloc");
    EXPECT_EQ(scan.events[1].bytes("requested"), kGiB);
    EXPECT_EQ(scan.events[2].format, "vllm_no_cache_blocks");
    for (const OomEvent& e : scan.events) {
      EXPECT_EQ(e.repeats, 1u);
      if (log != all) {
        EXPECT_EQ(e.line, 1u);
      }
    }
  }
}

// A message hard-wrapped at a fixed width and logged one record a line (every width from 30 to 99
// columns, 6 to 20 records) reads as the plain lines do.
TEST(ContainerLogs, AMessageFoldedOverJsonRecordsReadsAsThePlainLog) {
  const std::string message = kPlainLines.back();
  for (size_t width = 30; width < 100; width += 7) {
    std::string plain_log = "start\n", json_log = nlohmann::json{{"msg", "start"}}.dump() + "\n";
    for (size_t at = 0; at < message.size(); at += width) {
      plain_log += message.substr(at, width) + "\n";
      json_log += nlohmann::json{{"msg", message.substr(at, width)}}.dump() + "\n";
    }
    SCOPED_TRACE(width);
    const ExplainedEvent p = only_event(explain_text(plain_log));
    const ExplainedEvent j = only_event(explain_text(json_log));
    EXPECT_EQ(p.event.format, "pytorch_new");
    EXPECT_EQ(j.event.format, "pytorch_new");
    EXPECT_EQ(j.event.line, p.event.line);
    EXPECT_EQ(j.event.end_line, p.event.end_line);
    EXPECT_EQ(j.event.end_line, 2 + (message.size() - 1) / width);
    EXPECT_EQ(j.event.bytes("reserved_unallocated"), 2115271393u);   // 1.97 GiB, from the last lines
  }
}

// Ranks' lines merged into one record: each error takes its own rank's traceback, as in the plain log.
TEST(ContainerLogs, ARecordOfSeveralRanksGivesEachItsOwnTraceback) {
  const std::string message = kPlainLines.back().substr(kPlainLines.back().find("CUDA out of memory"));
  const std::string all = "[rank3]: Traceback (most recent call last):\n"
                          "[rank3]:   File \"/app/train.py\", line 40, in main\n"
                          "[rank3]:     loss.backward()\n"
                          "[rank3]: torch.OutOfMemoryError: " + message + "\n"
                          "[rank1]: torch.OutOfMemoryError: " + message + "\n";
  for (const std::string& log : {all, nlohmann::json{{"log", all}, {"stream", "stderr"}}.dump() + "\n"}) {
    const ScanResult scan = scan_text(log);
    ASSERT_EQ(scan.events.size(), 2u);
    EXPECT_EQ(scan.events[0].rank, 3);
    ASSERT_TRUE(scan.events[0].traceback);
    ASSERT_EQ(scan.events[0].traceback->frames.size(), 1u);
    EXPECT_EQ(scan.events[0].traceback->frames[0].function, "main");
    EXPECT_EQ(scan.events[1].rank, 1);
    EXPECT_TRUE(!scan.events[1].traceback || scan.events[1].traceback->frames.empty());
  }
}

// Past the event cap, a JSON record is counted for each of its lines that holds a message, as the
// plain lines are.
TEST(ContainerLogs, PastTheCapARecordCountsEachMessageLine) {
  std::string plain_log, json_log;
  for (int i = 0; i < 3; ++i) {
    const std::string two = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate " + std::to_string(i + 1) +
                            ".00 GiB.\nggml_backend_cuda_buffer_type_alloc_buffer: allocating " + std::to_string(i + 1) +
                            "024.00 MiB on device 1: cudaMalloc failed: out of memory\n";
    plain_log += two;
    json_log += nlohmann::json{{"message", two}}.dump() + "\n";
  }
  ScanOptions options;
  options.max_events = 2;
  for (const std::string& log : {plain_log, json_log}) {
    const ScanResult scan = scan_text(log, options);
    EXPECT_EQ(scan.events.size(), 2u);
    EXPECT_TRUE(scan.events_truncated);
    EXPECT_EQ(scan.messages_beyond_cap, 4u);
  }
}

// Records inside another log (after a launcher's prefix, or below plain lines) are unwrapped line
// by line.
TEST(ContainerLogs, CleanLineUnwrapsOneRecord) {
  const CleanLine last = clean_line(R"({"log":"[rank1]: \u001b[31mdone\u001b[0m\r\n","stream":"stdout","time":"2024-05-01T10:00:00.2Z"})");
  EXPECT_EQ(last.text, "done");   // colours and the launcher's prefix inside the record come off too
  EXPECT_EQ(last.rank, 1);
  EXPECT_FALSE(last.json_record);
  const CleanLine cri = clean_line("2024-05-01T10:00:00.123456789+02:00 stdout F [rank2]: x");
  EXPECT_EQ(cri.text, "x");
  EXPECT_EQ(cri.rank, 2);
  const CleanLine logger = clean_line(R"({"level": "info", "message": "step 3"})");
  EXPECT_EQ(logger.text, "step 3");
  EXPECT_TRUE(logger.json_record);
  const CleanLine other = clean_line(R"({"loss": 0.25})");
  EXPECT_EQ(other.text, R"({"loss": 0.25})");
  EXPECT_TRUE(other.json_record);
}

}  // namespace
}  // namespace oomdoc
