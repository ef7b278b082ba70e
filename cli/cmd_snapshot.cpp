// oomdoc snapshot FILE: reads a PyTorch memory snapshot (pickle or JSON) and says what filled the
// card: per-device figures, the trace's peak and its stacks, each OOM with a verdict, leaks.
#include <unistd.h>

#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "analyses/snapshot_report.h"
#include "command.h"
#include "gpu_flags.h"
#include "output_file.h"
#include "core/exit_codes.h"
#include "core/units.h"
#include "readers/snapshot_reader.h"
#include "report/snapshot_render.h"

namespace oomdoc::cli {

namespace {

struct SnapshotArgs {
  std::string file;
  std::string compare_with;
  bool json = false;
  std::string html;
  std::optional<int> device;
  size_t top = 10;
  size_t segments = kDefaultSegmentRows;
  size_t depth = 2;
  std::string gpu_memory;
  bool quiet = false;
};

// A progress bar on stderr for big files, only when stderr is a terminal.
// A file as reports and comparisons name it: standard input is "<stdin>", as file_input names it.
std::string shown_name(const std::string& file) { return file == "-" ? std::string("<stdin>") : file; }

SnapshotReadOptions read_options(const SnapshotArgs& args) {
  SnapshotReadOptions options;
  if (!args.quiet && isatty(2) == 1) {
    options.progress = [](uint64_t done, uint64_t total) {
      if (total < (256ull << 20)) return;  // small files are read before a bar would help
      int percent = static_cast<int>(done * 100 / total);
      std::cerr << fmt::format("\rreading {} / {} ({}%)", format_bytes(done), format_bytes(total), percent);
      if (done >= total) std::cerr << "\r\x1b[K";
    };
  }
  return options;
}

int run(const SnapshotArgs& args) {
  if (args.file.empty()) return fail("snapshot: no file given; usage: oomdoc snapshot FILE [--json | --html OUT] (see oomdoc snapshot --help)");
  SnapshotOptions options;
  options.top = args.top;
  options.stack_depth = args.depth;
  // A stack's key is at least its innermost user frame: 0 frames would group everything as one.
  if (args.depth == 0) return fail("--depth: must be 1 or more (the user frames that name a stack)");
  if (args.device && *args.device < 0) return fail(fmt::format("--device: must be 0 or more (got {})", *args.device));
  options.device = args.device;
  if (!args.gpu_memory.empty()) {
    auto size = parse_gpu_capacity("--gpu-memory", args.gpu_memory);
    if (!size) return fail(size.error().message);
    options.device_total_bytes = *size;
  }
  if (!args.html.empty() && !args.compare_with.empty()) {
    return fail("--html: not available with --compare (the HTML report shows one snapshot; use --json for the comparison)");
  }
  if (args.file == "-" && args.compare_with == "-") {
    return fail("--compare: standard input (-) can be read once: give one of the two snapshots as a file");
  }
  if (!args.gpu_memory.empty() && !args.compare_with.empty()) {
    return fail("--gpu-memory: not available with --compare (the comparison gives no OOM verdicts)");
  }
  // The HTML path is checked before anything is read or printed: a report on stdout followed by a
  // failure would look complete. (--compare, the other input, was refused with --html above.)
  if (!args.html.empty()) {
    const InputFile snapshot_file{args.file == "-" ? "/dev/stdin" : args.file, "the snapshot being read"};
    if (auto writable = check_output_file(args.html, "the HTML report", {&snapshot_file, 1}); !writable) {
      return fail(writable.error().message);
    }
  }
  auto snapshot = read_snapshot_file(args.file, read_options(args));
  if (!snapshot) return fail(snapshot.error().message);

  if (!args.compare_with.empty()) {
    auto after = read_snapshot_file(args.compare_with, read_options(args));
    if (!after) return fail(after.error().message);
    // A device may appear or vanish between the two dumps; it must be in one of them.
    if (!check_device_present(*snapshot, options, args.file) && !check_device_present(*after, options, args.compare_with)) {
      return fail(check_device_present(*snapshot, options, args.file).error().message);
    }
    SnapshotComparison c = compare_snapshots(*snapshot, *after, options);
    if (args.json) {
      std::cout << dump_json(comparison_json(c, shown_name(args.file), shown_name(args.compare_with)));
    } else {
      std::cout << render_comparison_text(c, shown_name(args.file), shown_name(args.compare_with), Style::for_fd(1));
    }
    return kExitOk;
  }

  if (auto present = check_device_present(*snapshot, options, args.file); !present) {
    return fail(present.error().message);
  }
  SnapshotReport report = analyze_snapshot(*snapshot, options);
  report.file = shown_name(args.file);
  if (options.device_total_bytes) {
    if (auto fits = check_device_capacity(report, *options.device_total_bytes, report.file); !fits) {
      return fail(fits.error().message);
    }
  }
  if (!args.html.empty()) {
    if (auto written = write_output_file(args.html, render_snapshot_html(report), "the HTML report"); !written) {
      return fail(written.error().message);
    }
  }
  if (args.json) {
    std::cout << dump_json(snapshot_report_json(report));
  } else {
    std::cout << render_snapshot_text(report, Style::for_fd(1), args.segments);
    if (!args.html.empty()) std::cout << "\nHTML report: " << args.html << "\n";
  }
  return kExitOk;
}

void setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<SnapshotArgs>();
  CLI::App* cmd = app.add_subcommand(
      "snapshot", "Read a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) and say what filled the GPU");
  // Checked in run(), not by CLI11: a required positional would hide an unknown option
  // ("--bogus: unknown option") behind "file is required".
  cmd->add_option("file", args->file, "Snapshot pickle (protocol 2-5) or JSON; '-' for stdin");
  cmd->add_option("--compare", args->compare_with, "A second snapshot: show what changed (per stack)");
  cmd->add_flag("--json", args->json, "Print one JSON document (fields: docs/json.md)");
  cmd->add_option("--html", args->html, "Also write a self-contained HTML report with a timeline");
  cmd->add_option("--device", args->device, "Only this CUDA device");
  cmd->add_option("--top", args->top, "Stacks to list (default 10)");
  cmd->add_option("--segments", args->segments,
                  "Segments listed in the fragmentation table (default 10; --json has all, 0 lists none)");
  cmd->add_option("--depth", args->depth, "User frames in a stack's key (default 2)");
  cmd->add_option("--gpu-memory", args->gpu_memory,
                  "Device capacity (e.g. 80GiB), to detect memory used outside PyTorch at an OOM");
  cmd->add_flag("--quiet", args->quiet, "No progress bar");
  cmd->callback([args, exit_code]() { *exit_code = run(*args); });
}

CommandRegistration registration{50, "snapshot", setup};

}  // namespace

}  // namespace oomdoc::cli
