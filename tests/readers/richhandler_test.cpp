// Logs written through Python's rich.logging.RichHandler: each record laid out in columns, the time
// (blank when it repeats), the level, the message wrapped inside its column, the file and line
// right-aligned on the record's first line. The fixtures (tests/fixtures/explain/richhandler/README.md)
// read as the same message printed on one line.
#include <gtest/gtest.h>

#include "core/units.h"
#include "readers/log_line.h"
#include "readers/log_scanner.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

const std::string kMessage2x =
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 3 has a total capacity of 79.15 GiB "
    "of which 1.71 GiB is free. Process 48213 has 77.43 GiB memory in use. Of the allocated memory 72.06 GiB is "
    "allocated by PyTorch, and 4.12 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
    "large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
    "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)";

const std::string kMessage1x =
    "RuntimeError: CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 15.78 GiB total capacity; 13.92 GiB "
    "already allocated; 301.44 MiB free; 14.47 GiB reserved in total by PyTorch) If reserved memory is >> allocated "
    "memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
    "PYTORCH_CUDA_ALLOC_CONF";

std::string fixture(const std::string& name) {
  return testing::read_file(testing::fixture_path("explain/richhandler/" + name));
}

// Every figure, the other processes and the fields of the message as read on one line.
void expect_as_one_line(const OomEvent& e, const std::string& one_line_message) {
  const ScanResult one = scan_text(one_line_message + "\n");
  ASSERT_EQ(one.events.size(), 1u);
  const OomEvent& o = one.events[0];
  EXPECT_EQ(e.format, o.format);
  ASSERT_EQ(e.quantities.size(), o.quantities.size());
  for (size_t i = 0; i < o.quantities.size(); ++i) {
    EXPECT_EQ(e.quantities[i].first, o.quantities[i].first);
    EXPECT_EQ(e.quantities[i].second.bytes, o.quantities[i].second.bytes) << o.quantities[i].first;
  }
  ASSERT_EQ(e.other_processes.size(), o.other_processes.size());
  // (What the lines above say, the operation a record before names, is the log's, not the message's.)
  auto fields = e.fields;
  std::erase_if(fields, [](const auto& f) { return f.first == "log_operation"; });
  EXPECT_EQ(fields, o.fields);
}

TEST(RichHandler, CleanLineTakesTheColumnsOff) {
  // The time, the level, and the path column after a run of spaces.
  CleanLine c = clean_line("[05/01/24 10:00:00] ERROR    torch.OutOfMemoryError: CUDA out of memory. Tried   train.py:40");
  EXPECT_EQ(c.text, "torch.OutOfMemoryError: CUDA out of memory. Tried");
  EXPECT_EQ(c.rich_message_column, 29u);
  EXPECT_TRUE(c.log_record);
  EXPECT_TRUE(c.logger_record);
  // A repeated time is printed as spaces of its width; the padding after the path is the console's.
  c = clean_line("                    INFO     Saving checkpoint              callbacks.py:57   ");
  EXPECT_EQ(c.text, "Saving checkpoint");
  EXPECT_EQ(c.rich_message_column, 29u);
  // show_time=False; a message line that fills its column leaves one space before a long path.
  c = clean_line("CRITICAL torch.OutOfMemoryError: CUDA out of megatron_gpt_sft_finetuning_with_packed_sequences.py:1234");
  EXPECT_EQ(c.text, "torch.OutOfMemoryError: CUDA out of");
  EXPECT_EQ(c.rich_message_column, 9u);
  // Another log_time_format: "[%X]", and a date and time that strip_timestamp reads.
  c = clean_line("[10:00:00] WARNING  low memory on GPU 0   utils.py:12");
  EXPECT_EQ(c.text, "low memory on GPU 0");
  EXPECT_EQ(c.rich_message_column, 20u);
  c = clean_line("2024-05-01 10:00:00 ERROR    CUDA out of memory.   train.py:40");
  EXPECT_EQ(c.text, "CUDA out of memory.");
  EXPECT_EQ(c.rich_message_column, 29u);
  // Behind a launcher's prefix, measured from after it (the wrapped lines carry it too).
  c = clean_line("[rank1]: [05/01/24 10:00:00] ERROR    CUDA out of memory.   train.py:40");
  EXPECT_EQ(c.text, "CUDA out of memory.");
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.rich_message_column, 29u);
  // A last word that is no Python file and line stays: it is the message's.
  c = clean_line("ERROR    failed to read /data/shard.bin:12");
  EXPECT_EQ(c.text, "failed to read /data/shard.bin:12");
  c = clean_line("ERROR    train.py:40");
  EXPECT_EQ(c.text, "train.py:40");
}

TEST(RichHandler, OtherPrefixesAreNoRichRecord) {
  // vLLM's logging prefix, a level with one space, a level and a colon.
  for (const char* line : {"ERROR 05-01 10:00:20 [core.py:396] CUDA out of memory.   train.py:40",
                           "CRITICAL 03-13 09:00:43 [core_client.py:260] Got fatal signal   train.py:40",
                           "ERROR  CUDA out of memory.   train.py:40", "ERROR: CUDA out of memory.   train.py:40",
                           "[05/01/24] ERROR    CUDA out of memory.   train.py:40"}) {
    SCOPED_TRACE(line);
    const CleanLine c = clean_line(line);
    EXPECT_EQ(c.rich_message_column, 0u);
    EXPECT_NE(c.text.find("train.py:40"), std::string::npos);
  }
}

// RichHandler's default columns, written padded as a console writes them: the path column cuts the
// first line between "Tried" and "to allocate"; the records around it are read on their own.
TEST(RichHandler, TimeAndPathColumnsPadded) {
  const ScanResult scan = scan_text(fixture("time_path_padded.log"));
  ASSERT_EQ(scan.events.size(), 1u);
  const OomEvent& e = scan.events[0];
  EXPECT_EQ(e.format, "pytorch_new");
  EXPECT_EQ(e.line, 6u);
  EXPECT_EQ(e.end_line, 13u);   // not the INFO record after it
  EXPECT_EQ(e.device, 3);
  EXPECT_EQ(e.quantity("requested")->bytes, 5 * kGiB / 2);
  ASSERT_EQ(e.other_processes.size(), 1u);
  EXPECT_EQ(e.other_processes[0].pid, 48213u);
  EXPECT_EQ(std::get<std::string>(*e.field("hint")), "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  EXPECT_EQ(e.field("hard_wrapped"), nullptr);
  // (The fixture's wrap put the URL on a line of its own: one of the two spaces before it went with it.)
  EXPECT_EQ(e.message, "Training step 118 failed: " + std::string(kMessage2x).replace(kMessage2x.find("  (https"), 2, " "));
  EXPECT_EQ(std::get<std::string>(*e.field("log_operation")), "model_loading");   // "Loading checkpoint shards" above
  expect_as_one_line(e, kMessage2x);
  const ExplainedEvent x = testing::only_event(testing::explain_text(fixture("time_path_padded.log")));
  EXPECT_EQ(x.diagnosis.cause, "fragmentation");
}

// show_time=False, the lines without their padding: the path column between "(GPU" and "0;".
TEST(RichHandler, NoTimeColumn) {
  const ScanResult scan = scan_text(fixture("no_time.log"));
  ASSERT_EQ(scan.events.size(), 1u);
  const OomEvent& e = scan.events[0];
  EXPECT_EQ(e.format, "pytorch_old_reserved");
  EXPECT_EQ(e.line, 2u);
  EXPECT_EQ(e.end_line, 5u);
  EXPECT_EQ(e.device, 0);
  EXPECT_EQ(e.quantity("requested")->bytes, 512 * kMiB);
  EXPECT_EQ(e.quantity("total")->text, "15.78 GiB");
  EXPECT_EQ(e.quantity("free")->text, "301.44 MiB");
  EXPECT_EQ(e.message, "Exception in training step, aborting: " + std::string(kMessage1x).replace(kMessage1x.find("  See"), 2, " "));
  expect_as_one_line(e, kMessage1x);
  const ExplainedEvent x = testing::only_event(testing::explain_text(fixture("no_time.log")));
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
}

// A long path column and a narrow message column: the first line fills it (one space before the
// path) and ends inside the trigger ("CUDA out of" / "memory."); the hint is folded mid-word.
TEST(RichHandler, LongPathColumn) {
  const ScanResult scan = scan_text(fixture("long_path.log"));
  ASSERT_EQ(scan.events.size(), 1u);
  const OomEvent& e = scan.events[0];
  EXPECT_EQ(e.format, "pytorch_new");
  EXPECT_EQ(e.line, 3u);
  EXPECT_EQ(e.end_line, 20u);
  EXPECT_EQ(e.device, 3);
  EXPECT_EQ(e.quantity("requested")->bytes, 5 * kGiB / 2);
  EXPECT_EQ(e.quantity("free")->text, "1.71 GiB");
  EXPECT_EQ(e.quantity("total")->text, "79.15 GiB");
  EXPECT_EQ(e.quantity("reserved_unallocated")->text, "4.12 GiB");
  ASSERT_EQ(e.other_processes.size(), 1u);
  EXPECT_EQ(e.other_processes[0].memory.bytes, parse_quantity("77.43 GiB")->bytes);
  // The message keeps the fold as a space; the hint is read from its setting's name all the same.
  EXPECT_NE(e.message.find("expandable_ segments:True"), std::string::npos);
  EXPECT_EQ(std::get<std::string>(*e.field("hint")), "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  const ExplainedEvent x = testing::only_event(testing::explain_text(fixture("long_path.log")));
  EXPECT_EQ(x.diagnosis.cause, "fragmentation");
}

// The QA report's case: the message wrapped at 80 columns without trailing spaces.
TEST(RichHandler, WrappedAtEightyColumns) {
  const std::string log =
      "[05/01/24 10:00:00] ERROR    torch.OutOfMemoryError: CUDA out of memory. Tried   train.py:40\n"
      "                             to allocate 1.53 GiB. GPU 0 has a total capacity\n"
      "                             of 23.64 GiB of which 1.02 GiB is free. Including\n"
      "                             non-PyTorch memory, this process has 22.60 GiB\n"
      "                             memory in use. Of the allocated memory 20.11 GiB\n"
      "                             is allocated by PyTorch, and 2.03 GiB is reserved\n"
      "                             by PyTorch but unallocated.\n";
  const ScanResult scan = scan_text(log);
  ASSERT_EQ(scan.events.size(), 1u);
  const OomEvent& e = scan.events[0];
  EXPECT_EQ(e.line, 1u);
  EXPECT_EQ(e.end_line, 7u);
  EXPECT_EQ(e.quantity("requested")->text, "1.53 GiB");
  EXPECT_EQ(e.quantity("process")->text, "22.60 GiB");
  EXPECT_EQ(e.quantity("allocated")->text, "20.11 GiB");
  EXPECT_EQ(e.quantity("reserved_unallocated")->text, "2.03 GiB");
}

}  // namespace
}  // namespace oomdoc
