// A PyTorch OOM message that a terminal, a log viewer or `fold -s` wrapped over several lines reads
// exactly as the same message on one line: every figure, the pid, the hint, the lines it spans.
#include <gtest/gtest.h>

#include "core/units.h"
#include "readers/formats/message_format.h"
#include "readers/log_line.h"
#include "readers/log_scanner.h"

namespace oomdoc {
namespace {

const std::string kMessage2x =
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 23.65 "
    "GiB of which 1.12 GiB is free. Process 12345 has 4.00 GiB memory in use. Including non-PyTorch memory, this "
    "process has 18.50 GiB memory in use. Of the allocated memory 14.20 GiB is allocated by PyTorch, and 3.90 GiB is "
    "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
    "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)";

const std::string kMessage1x =
    "RuntimeError: CUDA out of memory. Tried to allocate 8.13 GiB (GPU 0; 10.76 GiB total capacity; 643.57 MiB "
    "already allocated; 8.20 GiB free; 1.50 GiB reserved in total by PyTorch) If reserved memory is >> allocated "
    "memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
    "PYTORCH_CUDA_ALLOC_CONF";

// What `fold -s -w width` prints: breaks after the last space that fits (the space stays at the end
// of the line), or mid-word when a word is longer than the width. `trim` drops the trailing spaces
// as `sed 's/ *$//'` (and many viewers) do.
std::string fold(const std::string& text, size_t width, bool trim) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = std::min(width, text.size() - pos);
    if (pos + len < text.size()) {
      const size_t space = text.rfind(' ', pos + len - 1);
      if (space != std::string::npos && space >= pos) len = space - pos + 1;
    }
    std::string line = text.substr(pos, len);
    if (trim) {
      while (!line.empty() && line.back() == ' ') line.pop_back();
    }
    out += line + "\n";
    pos += len;
  }
  return out;
}

size_t count_lines(const std::string& text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

void expect_same_event(const OomEvent& wrapped, const OomEvent& one_line, const std::string& label) {
  ASSERT_EQ(wrapped.quantities.size(), one_line.quantities.size()) << label;
  for (size_t i = 0; i < one_line.quantities.size(); ++i) {
    EXPECT_EQ(wrapped.quantities[i].first, one_line.quantities[i].first) << label;
    EXPECT_EQ(wrapped.quantities[i].second.bytes, one_line.quantities[i].second.bytes) << label << " " << one_line.quantities[i].first;
  }
  ASSERT_EQ(wrapped.other_processes.size(), one_line.other_processes.size()) << label;
  for (size_t i = 0; i < one_line.other_processes.size(); ++i) {
    EXPECT_EQ(wrapped.other_processes[i].pid, one_line.other_processes[i].pid) << label;
    EXPECT_EQ(wrapped.other_processes[i].memory.bytes, one_line.other_processes[i].memory.bytes) << label;
  }
  EXPECT_EQ(wrapped.fields, one_line.fields) << label;
  EXPECT_EQ(wrapped.format, one_line.format) << label;
}

TEST(WrappedMessage, PyTorch2xAtEveryWidthReadsAsOneLine) {
  const ScanResult one = scan_text(kMessage2x + "\n");
  ASSERT_EQ(one.events.size(), 1u);
  const OomEvent& e = one.events[0];
  EXPECT_EQ(e.format, "pytorch_new");
  EXPECT_EQ(e.quantity("requested")->bytes, 3 * kGiB / 2);
  EXPECT_EQ(e.quantity("process")->bytes, 37 * kGiB / 2);
  ASSERT_EQ(e.other_processes.size(), 1u);
  EXPECT_EQ(e.other_processes[0].pid, 12345u);
  EXPECT_EQ(e.other_processes[0].memory.bytes, 4 * kGiB);
  ASSERT_NE(e.quantity("allocated"), nullptr);
  ASSERT_NE(e.quantity("reserved_unallocated"), nullptr);
  EXPECT_EQ(std::get<std::string>(*e.field("hint")), "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  for (size_t width : {40, 60, 80, 120, 160, 300}) {
    for (bool trim : {false, true}) {
      const std::string text = fold(kMessage2x, width, trim);
      const std::string label = "width " + std::to_string(width) + (trim ? " trimmed" : " with trailing spaces");
      const ScanResult wrapped = scan_text(text);
      ASSERT_EQ(wrapped.events.size(), 1u) << label;
      expect_same_event(wrapped.events[0], e, label);
      // The message runs to its documentation link: every line it was wrapped onto is its own.
      EXPECT_EQ(wrapped.events[0].line, 1u) << label;
      EXPECT_EQ(wrapped.events[0].end_line, count_lines(text)) << label;
    }
  }
}

TEST(WrappedMessage, PyTorch1xAtEveryWidthReadsAsOneLine) {
  const ScanResult one = scan_text(kMessage1x + "\n");
  ASSERT_EQ(one.events.size(), 1u);
  const OomEvent& e = one.events[0];
  EXPECT_EQ(e.format, "pytorch_old_reserved");
  EXPECT_EQ(e.quantity("reserved_total")->bytes, 3 * kGiB / 2);
  EXPECT_EQ(std::get<std::string>(*e.field("hint")), "max_split_size_mb");
  for (size_t width : {40, 60, 80, 120, 160, 300}) {
    for (bool trim : {false, true}) {
      const std::string text = fold(kMessage1x, width, trim);
      const std::string label = "width " + std::to_string(width) + (trim ? " trimmed" : " with trailing spaces");
      const ScanResult wrapped = scan_text(text);
      ASSERT_EQ(wrapped.events.size(), 1u) << label;
      expect_same_event(wrapped.events[0], e, label);
      EXPECT_EQ(wrapped.events[0].end_line, count_lines(text)) << label;
    }
  }
}

TEST(WrappedMessage, JoiningStopsAtABlankLineAndAtATraceback) {
  // The figures after a blank line belong to another message: the first stays truncated.
  const ScanResult blank = scan_text(
      "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB.\n\n"
      "GPU 0 has a total capacity of 23.65 GiB of which 1.12 GiB is free.\n");
  ASSERT_EQ(blank.events.size(), 1u);
  EXPECT_EQ(blank.events[0].format, "pytorch_new_truncated");
  EXPECT_EQ(blank.events[0].quantity("total"), nullptr);
  EXPECT_EQ(blank.events[0].end_line, 1u);
  const ScanResult traceback = scan_text(
      "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
      "Traceback (most recent call last):\n"
      "GPU 0 has a total capacity of 23.65 GiB of which 1.12 GiB is free.\n");
  ASSERT_EQ(traceback.events.size(), 1u);
  EXPECT_EQ(traceback.events[0].quantity("total"), nullptr);
}

// Collectors and logging formatters put a timestamp (and a level) before every line of a wrapped
// message: each is taken off, and the message reads as printed.
TEST(WrappedMessage, TimestampedLinesReadAsOneMessage) {
  const ScanResult plain = scan_text(kMessage2x + "\n");
  ASSERT_EQ(plain.events.size(), 1u);
  for (const std::string prefix : {"2024-05-01T10:00:00.123456789Z ", "2024-05-01T10:00:00+02:00 ", "2024-05-01 10:00:00,123 - ERROR - ",
                                   "2024-05-01 10:00:00,123 - trainer - ERROR - ", "2024-05-01 10:00:00.123 | ERROR    | train:main:42 - ",
                                   "2024-05-01 10:00:00 "}) {
    std::string log;
    const std::string folded = fold(kMessage2x, 100, true);
    size_t start = 0;
    for (size_t end = folded.find('\n'); end != std::string::npos; start = end + 1, end = folded.find('\n', start)) {
      log += prefix + folded.substr(start, end - start) + "\n";
    }
    const ScanResult scan = scan_text(log);
    ASSERT_EQ(scan.events.size(), 1u) << prefix;
    expect_same_event(scan.events[0], plain.events[0], prefix);
    EXPECT_EQ(scan.events[0].end_line, count_lines(folded)) << prefix;
  }
  // Only a whole date and time is a timestamp.
  EXPECT_EQ(clean_line("2024-05-01 the run").text, "2024-05-01 the run");
  EXPECT_EQ(clean_line("2024-05-01T10:00:00").text, "2024-05-01T10:00:00");
}

// Launcher labels in front of every line: Slurm's `srun --label` ("0: ", " 3: ") and Open MPI's
// `--tag-output` ("[1,3]<stderr>:") give the rank, as "[rank3]:" does.
TEST(LogLineQa5, SrunAndOpenMpiLabelsGiveTheRank) {
  CleanLine srun = clean_line("0:   File \"/w/train.py\", line 10, in <module>");
  EXPECT_EQ(srun.rank, 0);
  EXPECT_EQ(srun.text, "  File \"/w/train.py\", line 10, in <module>");
  CleanLine padded = clean_line(" 3: torch.OutOfMemoryError: CUDA out of memory.");
  EXPECT_EQ(padded.rank, 3);
  EXPECT_EQ(padded.text, "torch.OutOfMemoryError: CUDA out of memory.");
  CleanLine mpi = clean_line("[1,3]<stderr>:torch.OutOfMemoryError: CUDA out of memory.");
  EXPECT_EQ(mpi.rank, 3);
  EXPECT_EQ(mpi.text, "torch.OutOfMemoryError: CUDA out of memory.");
  // A multi-node launcher's "[host:rank]:" (huggingface/accelerate#1519).
  CleanLine host = clean_line("[gpu187:1]:torch.cuda.OutOfMemoryError: CUDA out of memory.");
  EXPECT_EQ(host.rank, 1);
  EXPECT_EQ(host.text, "torch.cuda.OutOfMemoryError: CUDA out of memory.");
  EXPECT_FALSE(clean_line("[12:00]: started").rank.has_value());
  // A clock is no label.
  CleanLine clock = clean_line("10:00:05 step 3");
  EXPECT_FALSE(clock.rank.has_value());
  // Interleaved ranks keep their own tracebacks: rank 0 failed loading, rank 1 in backward.
  const std::string oom = " torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total "
                          "capacity of 79.15 GiB of which 2.10 GiB is free. Including non-PyTorch memory, this process "
                          "has 77.04 GiB memory in use. Of the allocated memory 70.12 GiB is allocated by PyTorch, and "
                          "1.80 GiB is reserved by PyTorch but unallocated.\n";
  const std::string log =
      "0: Traceback (most recent call last):\n1: Traceback (most recent call last):\n"
      "0:   File \"/w/train.py\", line 10, in <module>\n1:   File \"/w/train.py\", line 80, in <module>\n"
      "0:     model = AutoModelForCausalLM.from_pretrained(name).cuda()\n1:     loss.backward()\n"
      "0:" + oom + "1:" + oom;
  ScanResult r = scan_text(log);
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].rank, 0);
  ASSERT_TRUE(r.events[0].traceback.has_value());
  EXPECT_EQ(r.events[0].traceback->operation, "model_loading");
  EXPECT_EQ(r.events[1].rank, 1);
  ASSERT_TRUE(r.events[1].traceback.has_value());
  EXPECT_EQ(r.events[1].traceback->operation, "backward");
}

// `fold -w N` (or a terminal's columns) cuts mid-word: "ha" / "s a total", or inside the trigger
// itself ("CUDA ou" / "t of memory"). At any width, with or without a rank prefix on the first line
// (cleaning takes it off, so that line is shorter than the others), the figures are all read; a
// line cut inside "Tried to allocate" is a message cut short, not nothing.
TEST(WrappedMessageQa5, HardWrapsAtAFixedWidthAreReadWhole) {
  const std::string message =
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of 79.15 GiB "
      "of which 2.10 GiB is free. Including non-PyTorch memory, this process has 77.04 GiB memory in use. Of the "
      "allocated memory 70.12 GiB is allocated by PyTorch, and 5.80 GiB is reserved by PyTorch but unallocated. If "
      "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
      "fragmentation.";
  ScanResult whole = scan_text(message + "\n");
  ASSERT_EQ(whole.events.size(), 1u);
  const OomEvent& reference = whole.events[0];
  ASSERT_TRUE(reference.bytes("allocated").has_value());
  for (const std::string prefix : {"", "[rank1]: "}) {
    const std::string printed = prefix + message;
    for (size_t width : {26u, 30u, 40u, 45u, 50u, 60u, 80u, 100u, 150u}) {
      std::string folded = "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n";
      for (size_t at = 0; at < printed.size(); at += width) folded += printed.substr(at, width) + "\n";
      folded += "step 10 done\n";
      ScanResult r = scan_text(folded);
      ASSERT_EQ(r.events.size(), 1u) << prefix << width;
      const OomEvent& e = r.events[0];
      EXPECT_EQ(e.format, "pytorch_new") << prefix << width;
      for (const char* figure : {"requested", "total", "free", "process", "allocated", "reserved_unallocated"}) {
        EXPECT_EQ(e.bytes(figure), reference.bytes(figure)) << prefix << width << " " << figure;
      }
      // The message starts on the first folded line and ends on the last.
      EXPECT_EQ(e.line, 3u) << prefix << width;
      EXPECT_EQ(e.end_line, 2 + (printed.size() + width - 1) / width) << prefix << width;
    }
  }
  ScanResult cut = scan_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocat\n");
  ASSERT_EQ(cut.events.size(), 1u);
  EXPECT_EQ(cut.events[0].format, "pytorch_new_truncated");
  // Prose that goes on after the words is no message.
  EXPECT_TRUE(scan_text("RuntimeError: CUDA out of memory. Try a smaller batch\n").events.empty());
}

// A hard-wrapped message stamped line by line by the runtime (`kubectl logs --timestamps`) is still
// glued back; lines that start a logger's own record (its level after the timestamp) are not the
// continuation of the one above, so equal-width warnings are not glued into one 40-line "message".
TEST(WrappedMessageQa5, LoggerRecordsDoNotContinueAHardWrap) {
  const std::string message =
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of 79.15 GiB "
      "of which 2.10 GiB is free. Including non-PyTorch memory, this process has 77.04 GiB memory in use.";
  std::string stamped;
  for (size_t at = 0; at < message.size(); at += 50) stamped += "2024-05-01T10:00:00.123456789Z " + message.substr(at, 50) + "\n";
  const ScanResult r = scan_text(stamped);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].bytes("requested"), 3584 * kMiB);
  EXPECT_EQ(r.events[0].bytes("process"), scan_text(message + "\n").events.at(0).bytes("process"));
  EXPECT_EQ(r.events[0].end_line, 5u);   // 210 characters over 5 lines of 50
  EXPECT_TRUE(clean_line("2024-05-01 10:00:00,123 - WARNING - train - skipping").logger_record);
  EXPECT_FALSE(clean_line("2024-05-01T10:00:00.123456789Z t of memory.").logger_record);
  EXPECT_TRUE(clean_line("2024-05-01T10:00:00.123456789Z t of memory.").log_record);
  // Equal-width logger warnings that mention the words: no event, and no line glued to another.
  std::string warnings;
  for (int i = 10; i < 60; ++i) {
    warnings += "2024-05-01 10:00:" + std::to_string(i) + ",123 - WARNING - train - skipping batch " + std::to_string(i) +
                ": CUDA out of memory, retrying with half batch\n";
  }
  EXPECT_TRUE(scan_text(warnings).events.empty());
  EXPECT_EQ(hard_wrapped_run({std::string(20, 'a'), std::string(20, 'b'), "c"}, 1), 0u);
  EXPECT_EQ(hard_wrapped_run({std::string(20, 'a'), std::string(20, 'b'), "c"}, 2), 2u);
  EXPECT_EQ(hard_wrapped_run({std::string(20, 'a'), std::string(20, 'b'), "c"}), 3u);
}

// A journald prefix on the first physical line only (the terminal cut the line as printed, prefix
// included): the first line is short once the prefix is off, yet the message reads whole glued.
TEST(WrappedMessageQa5, JournaldPrefixOnTheFirstLineOnlyStillGlues) {
  const std::string prefix = "Dec 31 01:55:57 gpu-node-7 python[12345]: ";
  const std::string printed =
      prefix + "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.70 GiB total capacity; 21.05 "
               "GiB already allocated; 812.50 MiB free; 22.10 GiB reserved in total by PyTorch) If reserved memory is >> "
               "allocated memory try setting max_split_size_mb to avoid fragmentation.";
  for (size_t width : {80u, 96u}) {
    std::string log;
    for (size_t at = 0; at < printed.size(); at += width) log += printed.substr(at, width) + "\n";
    const ScanResult r = scan_text(log);
    ASSERT_EQ(r.events.size(), 1u) << width;
    EXPECT_EQ(r.events[0].format, "pytorch_old_reserved") << width;
    EXPECT_EQ(r.events[0].bytes("requested"), 20 * kMiB) << width;
    EXPECT_EQ(r.events[0].bytes("reserved_total"), scan_text(printed.substr(prefix.size()) + "\n").events.at(0).bytes("reserved_total"));
  }
}

// Other formats cut by a fixed width: PyTorch 1.x's message at 80 columns ("by PyT" / "orch)",
// pytorch#35901 folded), and vLLM's KV check pasted at 120 columns in two lines ("KV cach" / "e is
// needed", a real report): the figures read as if the message were on one line. Two unrelated lines
// of which the first holds a trigger but ends on punctuation are not glued.
TEST(WrappedMessageQa5, OtherFormatsCutAtAFixedWidthAreReadWhole) {
  ScanResult old = scan_text(
      "CUDA out of memory. Tried to allocate 10.84 GiB (GPU 0; 23.65 GiB total capacity\n"
      "; 1.06 GiB already allocated; 10.26 GiB free; 12.53 GiB reserved in total by PyT\n"
      "orch)\n");
  ASSERT_EQ(old.events.size(), 1u);
  EXPECT_EQ(old.events[0].format, "pytorch_old_reserved");
  EXPECT_EQ(old.events[0].bytes("total"), parse_quantity("23.65 GiB")->bytes);
  EXPECT_EQ(old.events[0].bytes("reserved_total"), parse_quantity("12.53 GiB")->bytes);
  EXPECT_EQ(old.events[0].end_line, 3u);

  ScanResult kv = scan_text(
      "ValueError: To serve at least one request with the model's max seq len (100000), (4.26 GiB KV cach\n"
      "e is needed, which is larger than the available KV cache memory (4.25 GiB). Based on the available memory, "
      "the estimated maximum model length is 99760. Try increasing `gpu_memory_utilization` or decreasing "
      "`max_model_len` when initializing the engine.\n");
  ASSERT_EQ(kv.events.size(), 1u);
  EXPECT_EQ(kv.events[0].format, "vllm_kv_needed_gt_available");
  EXPECT_EQ(kv.events[0].bytes("kv_needed"), parse_quantity("4.26 GiB")->bytes);
  EXPECT_EQ(kv.events[0].int_field("estimated_max_model_len"), 99760);

  ScanResult free = scan_text(
      "ValueError: Free memory on device (0.49/79.32 GiB) on startup is less than desired GPU memor\n"
      "y utilization (0.6, 47.59 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n");
  ASSERT_EQ(free.events.size(), 1u);
  EXPECT_EQ(free.events[0].format, "vllm_startup_free_memory");
  EXPECT_EQ(free.events[0].bytes("requested"), parse_quantity("47.59 GiB")->bytes);
}

// Two ranks failing at once, each line of their wrapped messages behind its own "[rankN]:" prefix and
// the ranks' lines alternating: each message is read from its own rank's lines, with its own figures.
TEST(WrappedMessage, InterleavedRanksKeepTheirOwnFigures) {
  const ScanResult scan = scan_text(
      "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of\n"
      "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 1 has a total capacity of\n"
      "[rank0]: 79.15 GiB of which 1.25 GiB is free. Including non-PyTorch memory, this process has 77.88 GiB memory in\n"
      "[rank1]: 79.15 GiB of which 3.50 GiB is free. Including non-PyTorch memory, this process has 75.63 GiB memory in\n"
      "[rank0]: use. Of the allocated memory 70.00 GiB is allocated by PyTorch, and 6.50 GiB is reserved by PyTorch but\n"
      "[rank1]: use. Of the allocated memory 60.00 GiB is allocated by PyTorch, and 14.00 GiB is reserved by PyTorch but\n"
      "[rank0]: unallocated.\n"
      "[rank1]: unallocated.\n");
  ASSERT_EQ(scan.events.size(), 2u);
  const OomEvent& r0 = scan.events[0];
  EXPECT_EQ(r0.format, "pytorch_new");
  EXPECT_EQ(r0.rank, 0);
  EXPECT_EQ(r0.device, 0);
  EXPECT_EQ(r0.line, 1u);
  EXPECT_EQ(r0.end_line, 7u);
  EXPECT_EQ(r0.bytes("requested"), 2 * kGiB);
  EXPECT_EQ(r0.bytes("total"), 84986665370u);            // 79.15 GiB
  EXPECT_EQ(r0.bytes("free"), 1342177280u);              // 1.25 GiB
  EXPECT_EQ(r0.bytes("process"), 83623013253u);          // 77.88 GiB
  EXPECT_EQ(r0.bytes("allocated"), 70 * kGiB);
  EXPECT_EQ(r0.bytes("reserved_unallocated"), 6979321856u);   // 6.50 GiB
  const OomEvent& r1 = scan.events[1];
  EXPECT_EQ(r1.format, "pytorch_new");
  EXPECT_EQ(r1.rank, 1);
  EXPECT_EQ(r1.device, 1);
  EXPECT_EQ(r1.line, 2u);
  EXPECT_EQ(r1.end_line, 8u);
  EXPECT_EQ(r1.bytes("requested"), 4 * kGiB);
  EXPECT_EQ(r1.bytes("total"), 84986665370u);
  EXPECT_EQ(r1.bytes("free"), 3758096384u);              // 3.50 GiB
  EXPECT_EQ(r1.bytes("process"), 81207094149u);          // 75.63 GiB
  EXPECT_EQ(r1.bytes("allocated"), 60 * kGiB);
  EXPECT_EQ(r1.bytes("reserved_unallocated"), 14 * kGiB);
  EXPECT_EQ(r1.message,
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 1 has a total capacity of 79.15 "
            "GiB of which 3.50 GiB is free. Including non-PyTorch memory, this process has 75.63 GiB memory in use. Of the "
            "allocated memory 60.00 GiB is allocated by PyTorch, and 14.00 GiB is reserved by PyTorch but unallocated.");
}

// Two nodes of 8 GPUs failing at once, each message folded at 60 columns (10 lines): rank 0's
// lines are 16 physical lines apart, its last one 144 lines below its first. Each rank's message is
// read whole from its own lines, folded at spaces or cut at the width mid-word (a line then may
// start with the space it was cut before: "[rank0]:  100.00 MiB is free").
class SixteenRanks : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(WrappedMessage, SixteenRanks, ::testing::Bool());
TEST_P(SixteenRanks, InterleavedKeepTheirOwnFigures) {
  const bool hard_cut = GetParam();
  constexpr int kRanks = 16;
  std::vector<std::vector<std::string>> folded;
  for (int r = 0; r < kRanks; ++r) {
    std::string message = kMessage2x;
    message.replace(message.find("GPU 0"), 5, "GPU " + std::to_string(r % 8));
    std::string text = fold(message, 60, true);
    if (hard_cut) {
      text.clear();
      for (size_t at = 0; at < message.size(); at += 60) text += message.substr(at, 60) + "\n";
    }
    std::vector<std::string> lines;
    for (size_t at = 0; at < text.size();) {
      const size_t nl = text.find('\n', at);
      lines.push_back(text.substr(at, nl - at));
      at = nl + 1;
    }
    folded.push_back(lines);
  }
  std::string log;
  for (size_t i = 0; i < folded[0].size(); ++i) {
    for (int r = 0; r < kRanks; ++r) log += "[rank" + std::to_string(r) + "]: " + folded[r][i] + "\n";
  }
  const OomEvent one_line = scan_text(kMessage2x + "\n").events.at(0);
  const ScanResult scan = scan_text(log);
  ASSERT_EQ(scan.events.size(), static_cast<size_t>(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    const OomEvent& e = scan.events[static_cast<size_t>(r)];
    EXPECT_EQ(e.rank, r);
    EXPECT_EQ(e.device, r % 8);
    EXPECT_EQ(e.line, static_cast<uint64_t>(r + 1));
    EXPECT_EQ(e.end_line, static_cast<uint64_t>(r + 1 + kRanks * (folded[0].size() - 1)));
    OomEvent same = one_line;
    same.device = e.device;
    if (hard_cut) same.set_field("hard_wrapped", true);   // glued back from a fixed width
    expect_same_event(e, same, "rank " + std::to_string(r));
  }
  EXPECT_EQ(scan.events[3].bytes("reserved_unallocated"), 4187593114u);   // 3.90 GiB, rounded
}

// torchrun's own warning (glog's header, no rank prefix) between a rank's wrapped lines is no
// part of the message; a line without a prefix that starts no record (a terminal's wrap) still is.
TEST(WrappedMessage, ALaunchersLineBetweenARanksLines) {
  const std::string folded = fold(kMessage2x, 60, true);
  std::vector<std::string> lines;
  for (size_t at = 0; at < folded.size();) {
    const size_t nl = folded.find('\n', at);
    lines.push_back("[rank0]: " + folded.substr(at, nl - at));
    at = nl + 1;
  }
  lines.insert(lines.begin() + 1, "W0501 10:00:05.123000 1234 torch/distributed/elastic/multiprocessing/api.py:897] "
                                  "Sending process 1235 closing signal SIGTERM");
  std::string log;
  for (const auto& l : lines) log += l + "\n";
  const OomEvent one_line = scan_text(kMessage2x + "\n").events.at(0);
  const ScanResult scan = scan_text(log);
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].rank, 0);
  EXPECT_EQ(scan.events[0].line, 1u);
  EXPECT_EQ(scan.events[0].end_line, static_cast<uint64_t>(lines.size()));
  expect_same_event(scan.events[0], one_line, "launcher line");
}

// A line of another rank inside one rank's message (a warning printed meanwhile) is left out of it,
// and is read on its own afterwards.
TEST(WrappedMessage, AnotherRanksLineInsideAMessage) {
  const ScanResult scan = scan_text(
      "[rank0]: RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.80 GiB total capacity;\n"
      "[rank1]: RuntimeError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 1; 7.80 GiB total capacity; 7.10 GiB already allocated; 8.19 MiB free; 7.40 GiB reserved in total by PyTorch)\n"
      "[rank0]: 6.90 GiB already allocated; 10.19 MiB free; 7.02 GiB reserved in total by PyTorch)\n");
  ASSERT_EQ(scan.events.size(), 2u);
  EXPECT_EQ(scan.events[0].rank, 0);
  EXPECT_EQ(scan.events[0].format, "pytorch_old_reserved");
  EXPECT_EQ(scan.events[0].bytes("requested"), 20 * kMiB);
  EXPECT_EQ(scan.events[0].bytes("allocated"), 7408818586u);   // 6.90 GiB
  EXPECT_EQ(scan.events[0].end_line, 3u);
  EXPECT_EQ(scan.events[1].rank, 1);
  EXPECT_EQ(scan.events[1].line, 2u);
  EXPECT_EQ(scan.events[1].end_line, 2u);
  EXPECT_EQ(scan.events[1].bytes("requested"), 64 * kMiB);
  EXPECT_EQ(scan.events[1].bytes("allocated"), 7623566950u);   // 7.10 GiB
}

}  // namespace
}  // namespace oomdoc
