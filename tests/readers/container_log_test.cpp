// Logs as container runtimes and JSON loggers store them: each line of output wrapped in a record
// (Docker's json-file driver, Kubernetes' CRI files, {"msg": ...} loggers). Unwrapped, they must read
// as the plain log does: the same figures, the same frames, the same cause.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyses/explain.h"
#include "readers/log_line.h"
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
  EXPECT_EQ(x.event.line, 12u);       // the record that starts the message's line
  EXPECT_EQ(x.event.end_line, 13u);
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

// Docker's json-file driver splits at 16 KiB too: a "log" without its final newline continues.
TEST(ContainerLogs, DockerRecordWithoutNewlineContinuesOnTheNext) {
  const CleanLine first = clean_line(R"({"log":"  File \"/app/tr","stream":"stderr","time":"2024-05-01T10:00:00.1Z"})");
  EXPECT_EQ(first.text, "  File \"/app/tr");
  EXPECT_TRUE(first.continues);
  EXPECT_FALSE(first.json_record);
  const CleanLine last = clean_line(R"({"log":"[rank1]: \u001b[31mdone\u001b[0m\r\n","stream":"stdout","time":"2024-05-01T10:00:00.2Z"})");
  EXPECT_EQ(last.text, "done");   // colours and the launcher's prefix inside the record come off too
  EXPECT_EQ(last.rank, 1);
  EXPECT_FALSE(last.continues);
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
