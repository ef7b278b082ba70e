// Causes and fixes on real out-of-memory logs (tests/fixtures/explain/real/README.md names each
// thread): the advice must be written in the settings of the program that failed, with the values
// its numbers give, cheapest first.
#include <gtest/gtest.h>

#include <algorithm>

#include "analyses/diagnose.h"
#include "analyses/explain.h"
#include "support/explain_support.h"

namespace oomdoc {
namespace {

using testing::fix;
using testing::fix_ids;

ExplainedEvent first_error(const std::string& fixture) {
  return testing::first_error_event(testing::explain_fixture(fixture));
}

// No fix of a non-training program may be written as a training recipe.
void expect_no_training_recipe(const Diagnosis& d) {
  for (const auto& f : d.fixes) {
    EXPECT_EQ(f.snippet.find("TrainingArguments"), std::string::npos) << f.id;
    EXPECT_EQ(f.snippet.find("per_device_train_batch_size"), std::string::npos) << f.id;
    EXPECT_EQ(f.snippet.find("paged_adamw"), std::string::npos) << f.id;
  }
}

// torchrun's failure summary lists each rank again ("Failures:", then "Root Cause") after its own
// "failed (exitcode: -9) ... (pid: 12345)" line: two killed processes, two events, one per pid.
TEST(DiagnoseRealLogs, TorchrunSummaryReportsEachKilledProcessOnce) {
  const ExplainReport r = testing::explain_text(testing::read_file(testing::fixture_path("explain/torchrun_failure_summary.log")));
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].event.line, 2u);
  EXPECT_EQ(r.events[0].event.int_field("pid"), 12345);
  EXPECT_EQ(r.events[0].event.end_line, 26u);   // its Root Cause entry
  EXPECT_EQ(r.events[1].event.line, 17u);
  EXPECT_EQ(r.events[1].event.int_field("pid"), 12346);
  // The same pid on two nodes (Slurm's task labels) is two processes.
  const ExplainReport nodes = testing::explain_text(
      "0: E0501 10:00:00.123000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) "
      "local_rank: 0 (pid: 45) of binary: /usr/bin/python3\n"
      "1: E0501 10:00:00.123000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) "
      "local_rank: 0 (pid: 45) of binary: /usr/bin/python3\n");
  EXPECT_EQ(nodes.events.size(), 2u);
}

// The ollama CLI's line alone quotes the runner's error: said as the GPU running out, not a guess.
TEST(DiagnoseRealLogs, OllamaRunnerErrorWithoutASizeIsQuoted) {
  const ExplainReport r = testing::explain_text(
      "$ ollama run llama3:70b\nError: llama runner process has terminated: cudaMalloc failed: out of memory\n");
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].diagnosis.evidence.at(0), "The runner exited with \"cudaMalloc failed: out of memory\": the GPU ran "
                                                  "out while it loaded or ran the model; no size is printed.");
}

TEST(DiagnoseRealLogs, OllamaRunnerGetsOllamaSettingsForTheComputeBuffer) {
  ExplainedEvent x = first_error("ollama_runner_terminated.log");
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.evidence.at(0),
            "Ollama's runner could not allocate a 799.61 MiB compute buffer on CUDA0: the model's layers and KV cache "
            "already on the GPU left less than that.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"ggml_flash_attention", "ggml_kv_cache_type",
                                                            "ggml_smaller_quant", "ggml_smaller_context",
                                                            "ggml_fewer_layers"}));
  EXPECT_EQ(fix(x.diagnosis, "ggml_flash_attention").snippet, "OLLAMA_FLASH_ATTENTION=1 ollama serve  # in the server's environment");
  EXPECT_EQ(fix(x.diagnosis, "ggml_smaller_context").snippet.rfind("/set parameter num_ctx N", 0), 0u);
  EXPECT_EQ(fix(x.diagnosis, "ggml_fewer_layers").snippet.rfind("/set parameter num_gpu N", 0), 0u);
  for (const auto& f : x.diagnosis.fixes) EXPECT_EQ(f.snippet.find("-ngl"), std::string::npos) << f.id;
}

TEST(DiagnoseRealLogs, MetalOutOfMemoryGetsTheWiredLimitAndTheToolsOwnSettings) {
  ExplainedEvent mlx = first_error("metal_mlx.log");
  EXPECT_EQ(mlx.diagnosis.cause, "metal_working_set_exceeded");
  EXPECT_EQ(fix_ids(mlx.diagnosis), (std::vector<std::string>{"metal_wired_limit", "shorter_sequence", "quantize_model"}));
  EXPECT_EQ(fix(mlx.diagnosis, "metal_wired_limit").snippet.rfind("sudo sysctl iogpu.wired_limit_mb=N", 0), 0u);
  EXPECT_EQ(fix(mlx.diagnosis, "quantize_model").snippet,
            "mlx_lm.convert --hf-path <model> -q --q-bits 4  # or an mlx-community 4-bit model");
  ExplainedEvent ggml = first_error("metal_llama_cpp.log");
  EXPECT_EQ(ggml.diagnosis.cause, "metal_working_set_exceeded");
  EXPECT_EQ(fix_ids(ggml.diagnosis), (std::vector<std::string>{"metal_wired_limit", "ggml_kv_cache_type",
                                                               "ggml_smaller_quant", "ggml_smaller_context"}));
}

TEST(DiagnoseRealLogs, MemoryFractionIsTheCauseWhenTheCardIsFree) {
  ExplainedEvent rocm = first_error("rocm_memory_fraction.log");
  EXPECT_EQ(rocm.diagnosis.cause, "memory_fraction_limit");
  EXPECT_EQ(rocm.diagnosis.evidence.at(0),
            "PyTorch may use only 1.05 GiB of this 287.98 GiB GPU (a per-process memory fraction of 0.00365): it reserves "
            "1.05 GiB and the 2.00 MiB request reaches the limit, while 275.86 GiB of the card is free.");
  ASSERT_EQ(fix_ids(rocm.diagnosis), (std::vector<std::string>{"check_device_and_limits"}));
  EXPECT_EQ(rocm.diagnosis.fixes[0].detail,
            "Raise or remove torch.cuda.set_per_process_memory_fraction() (or the framework setting that calls it): the "
            "reserve plus this request needs 1.05 GiB, a fraction of at least 0.00366.");   // never the one in use
  // ROCm: the HIP variables, not CUDA_VISIBLE_DEVICES.
  EXPECT_EQ(rocm.diagnosis.fixes[0].snippet.rfind("HIP_VISIBLE_DEVICES", 0), 0u);
  ExplainedEvent xpu = first_error("xpu_memory_fraction.log");
  EXPECT_EQ(xpu.diagnosis.cause, "memory_fraction_limit");
  // The printed figures fit under the limit (8.11 of 8.27 GiB): the fix asks for more than the fraction in
  // use, not for a smaller one, and names XPU's setter.
  EXPECT_EQ(xpu.diagnosis.fixes.at(0).detail,
            "Raise or remove torch.xpu.set_per_process_memory_fraction() (or the framework setting that calls it): the "
            "printed reserve plus request (8.11 GiB) is just under the limit, but the allocator rounds the request up "
            "to its blocks; give more than the 0.500 in use.");
}

TEST(DiagnoseRealLogs, ComfyUiGetsItsLaunchFlagsNotATrainingRecipe) {
  for (const char* fixture : {"comfyui_error_report.log", "comfyui_exception.log"}) {
    SCOPED_TRACE(fixture);
    ExplainedEvent x = first_error(fixture);
    EXPECT_EQ(x.diagnosis.cause, "generic_no_details");
    EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"comfyui_lowvram", "smaller_image", "comfyui_fp8_weights"}));
    EXPECT_EQ(fix(x.diagnosis, "comfyui_lowvram").snippet.rfind("python main.py --lowvram", 0), 0u);
    expect_no_training_recipe(x.diagnosis);
  }
}

TEST(DiagnoseRealLogs, WebuiFlagFollowsTheCardsSize) {
  // 3.81 GiB card, failing in the VAE decode: --lowvram, and the decode is named.
  ExplainedEvent small = first_error("sd_webui_decode.log");
  EXPECT_EQ(small.diagnosis.cause, "memory_outside_allocator");
  EXPECT_EQ(fix_ids(small.diagnosis), (std::vector<std::string>{"end_other_processes", "max_split_size",
                                                                "webui_low_vram", "smaller_image"}));
  EXPECT_EQ(fix(small.diagnosis, "webui_low_vram").snippet,
            "set COMMANDLINE_ARGS=--lowvram --xformers  # webui-user.bat (export COMMANDLINE_ARGS=... in webui-user.sh)");
  EXPECT_EQ(fix(small.diagnosis, "webui_low_vram").detail,
            "On a 3.81 GiB card: --lowvram keeps only the part of the model in use on the GPU.");
  EXPECT_EQ(fix(small.diagnosis, "smaller_image").detail,
            "It failed decoding the image: a smaller size or batch shrinks that peak.");
  expect_no_training_recipe(small.diagnosis);
  ExplainedEvent tiny = first_error("sd_webui_2gb_load.log");
  EXPECT_EQ(fix(tiny.diagnosis, "webui_low_vram").detail,
            "On a 2.00 GiB card: --lowvram keeps only the part of the model in use on the GPU.");
  expect_no_training_recipe(tiny.diagnosis);
}

TEST(DiagnoseRealLogs, VllmCaptureWithoutWorkerTagsIsAGraphCaptureOom) {
  ExplainedEvent untagged = first_error("vllm_graph_capture_untagged.log");
  EXPECT_EQ(untagged.diagnosis.cause, "cuda_graph_capture_oom");
  EXPECT_EQ(fix_ids(untagged.diagnosis),
            (std::vector<std::string>{"end_other_processes", "vllm_max_num_seqs", "vllm_gpu_memory_utilization",
                                      "vllm_enforce_eager", "vllm_tensor_parallel", "vllm_quantized_weights"}));
  EXPECT_EQ(fix(untagged.diagnosis, "end_other_processes").detail,
            "It failed mid-run (cuda_graph_capture): other processes' memory is missing here too.");
  expect_no_training_recipe(untagged.diagnosis);

  // The title-only message of a Ray worker: the accounting above gives the utilization in use.
  ExplainedEvent ray = first_error("vllm_capture_model_ray.log");
  EXPECT_EQ(ray.diagnosis.cause, "cuda_graph_capture_oom");
  EXPECT_EQ(fix(ray.diagnosis, "vllm_gpu_memory_utilization").snippet, "--gpu-memory-utilization 0.93");
  expect_no_training_recipe(ray.diagnosis);

  ExplainedEvent async = first_error("vllm_graph_capture_async_error.log");
  EXPECT_EQ(async.event.rank, 3);
  EXPECT_EQ(async.diagnosis.cause, "cuda_graph_capture_oom");
  expect_no_training_recipe(async.diagnosis);
}

TEST(DiagnoseRealLogs, AccountingLinesBeforeACaptureStayInformational) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/vllm_capture_model_ray.log")));
  ExplainReport report;
  add_to_report(report, scan);
  ASSERT_EQ(report.events.size(), 2u);
  EXPECT_FALSE(report.events[0].event.is_error);
  EXPECT_EQ(report.events[0].diagnosis.cause, "not_an_error");
  EXPECT_EQ(report.events[1].diagnosis.cause, "cuda_graph_capture_oom");
}

TEST(DiagnoseRealLogs, NonPytorchLibraryFailuresGetNoPytorchRecipe) {
  ExplainedEvent tf = first_error("tf_cudnn_handle.log");
  EXPECT_EQ(tf.diagnosis.cause, "library_workspace_alloc");
  EXPECT_EQ(fix_ids(tf.diagnosis), (std::vector<std::string>{"end_other_processes", "tf_memory_growth", "smaller_input"}));
  ExplainedEvent lua = first_error("lua_torch_cudnn.log");
  EXPECT_EQ(lua.diagnosis.cause, "library_workspace_alloc");
  EXPECT_EQ(fix_ids(lua.diagnosis), (std::vector<std::string>{"end_other_processes", "smaller_input"}));
  for (const auto& f : lua.diagnosis.fixes) EXPECT_EQ(f.snippet.find("torch."), std::string::npos) << f.id;
  expect_no_training_recipe(lua.diagnosis);
}

TEST(DiagnoseRealLogs, MoreHeldThanTheCardIsSharedMemoryFallback) {
  ExplainedEvent x = first_error("sysmem_fallback.log");
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.evidence.back(),
            "This process holds 14.58 GiB, more than the card's 8.00 GiB: the driver already spilled 6.58 GiB into shared "
            "system memory (Windows' sysmem fallback, much slower than the card), and the 50.00 MiB request found no "
            "room even there.");
}

TEST(DiagnoseRealLogs, OneTensorOfMostOfTheCardPointsAtItsShape) {
  ExplainedEvent x = first_error("deepspeed_mii_single_tensor.log");
  EXPECT_EQ(x.diagnosis.cause, "capacity_exhausted");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "This process holds 2.52 GiB of 22.03 GiB (11%); 19.51 GiB was free.");
  EXPECT_EQ(x.diagnosis.evidence.at(1),
            "The one 19.75 GiB allocation is 90% of the card: a single tensor (attention scores, logits, an image batch) "
            "far larger than the rest.");
  ASSERT_FALSE(x.diagnosis.fixes.empty());
  EXPECT_EQ(x.diagnosis.fixes[0].id, "smaller_input");
  EXPECT_EQ(x.diagnosis.fixes[0].detail,
            "Find the 19.75 GiB tensor's shape and shrink the dimension that makes it (batch, sequence, resolution).");
}

// Written for the rule (PyTorch 2.x's wording, figures chosen so the numbers decide nothing else):
// CUDA-graph pools and no sign of training mean an engine that captures graphs, not a training
// recipe; a backward frame keeps the training ladder.
TEST(DiagnoseRealLogs, CudaGraphPoolsWithoutTrainingGetEngineNeutralFixes) {
  const std::string message =
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 524.00 MiB. GPU 0 has a total capacity of 23.55 GiB "
      "of which 300.00 MiB is free. Including non-PyTorch memory, this process has 23.25 GiB memory in use. Of the "
      "allocated memory 22.00 GiB is allocated by PyTorch, with 1.00 GiB allocated in private pools (e.g., CUDA Graphs), "
      "and 200.00 MiB is reserved by PyTorch but unallocated.\n";
  ScanResult scan = scan_text(message);
  ExplainReport report;
  add_to_report(report, scan);
  ASSERT_EQ(report.events.size(), 1u);
  const Diagnosis& d = report.events[0].diagnosis;
  EXPECT_EQ(d.cause, "capacity_exhausted");
  EXPECT_EQ(fix_ids(d), (std::vector<std::string>{"smaller_input", "cuda_graphs", "quantize_model", "bigger_gpu"}));
  EXPECT_EQ(fix(d, "cuda_graphs").detail,
            "1.00 GiB sit in CUDA-graph private pools: the process captures CUDA graphs (an inference engine such as vLLM "
            "or SGLang, or torch.compile's reduce-overhead mode), memory outside its KV-cache or batch budget.");
  expect_no_training_recipe(d);

  ScanResult training = scan_text(
      "Traceback (most recent call last):\n  File \"/home/u/train.py\", line 9, in <module>\n    loss.backward()\n" + message);
  ExplainReport training_report;
  add_to_report(training_report, training);
  ASSERT_EQ(training_report.events.size(), 1u);
  const Diagnosis& t = training_report.events[0].diagnosis;
  EXPECT_EQ(t.fixes.at(0).id, "smaller_batch");
  EXPECT_EQ(std::count_if(t.fixes.begin(), t.fixes.end(), [](const Fix& f) { return f.id == "cuda_graphs"; }), 0);
}

TEST(DiagnoseRealLogs, SigkilledWorkerIsASuspectedHostOomWithHowToCheck) {
  ExplainedEvent x = first_error("torchrun_sigkill.log");
  EXPECT_EQ(x.diagnosis.cause, "killed_host_oom_suspected");
  EXPECT_NE(x.diagnosis.evidence.at(0).find("`dmesg | grep -i 'killed process'`"), std::string::npos);
  EXPECT_EQ(x.diagnosis.evidence.at(0).rfind("The process was killed with SIGKILL (signal 9) and printed no error of its own.", 0), 0u);
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"low_cpu_mem_usage", "fewer_dataloader_workers", "add_swap",
                                                            "more_host_memory"}));
  EXPECT_EQ(fix(x.diagnosis, "more_host_memory").detail, "When the peak is real: more RAM, or a higher limit for the job.");
}

TEST(DiagnoseRealLogs, TensorflowBatchAdviceHalvesTheFirstDimension) {
  ScanResult scan = scan_text(
      "ResourceExhaustedError (see above for traceback): OOM when allocating tensor with shape[128,3,8,128,8,128] and "
      "type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n");
  ExplainReport report;
  add_to_report(report, scan);
  ASSERT_EQ(report.events.size(), 1u);
  EXPECT_EQ(fix(report.events[0].diagnosis, "smaller_input").detail,
            "The first dimension (128) is usually the batch: at 64 this tensor takes 768.00 MiB instead of 1.50 GiB.");
}

// Graph mode names the node after the message: a variable's initializer is the model's weights, not
// a batch (the shape is a kernel's, [in, out]).
TEST(DiagnoseRealLogs, TensorflowVariableInitializerIsTheWeightsNotTheBatch) {
  ScanResult scan = scan_text(
      "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[25088,4096] "
      "and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
      "\t [[{{node fc1/kernel/Initializer/random_uniform/RandomUniform}}]]\n"
      "Hint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom to "
      "RunOptions for current allocation info.\n");
  ExplainReport report;
  add_to_report(report, scan);
  ASSERT_EQ(report.events.size(), 1u);
  const ExplainedEvent& x = report.events[0];
  EXPECT_EQ(x.event.string_field("op"), "fc1/kernel/Initializer/random_uniform/RandomUniform");
  EXPECT_EQ(x.event.bytes("requested"), 25088ull * 4096 * 4);
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"end_other_processes", "shard_model"}));
  EXPECT_NE(std::find(x.diagnosis.evidence.begin(), x.diagnosis.evidence.end(),
                      "The tensor is a model variable or optimizer slot being created (node fc1/kernel/Initializer/"
                      "random_uniform/RandomUniform): the model's weights and optimizer state do not fit, whatever the batch."),
            x.diagnosis.evidence.end());
}

// Eager mode prints the op on the message's own line; a 2-D activation's first dimension may be
// batch x sequence.
TEST(DiagnoseRealLogs, TensorflowEagerMatmulKeepsTheBatchAdvice) {
  ScanResult scan = scan_text(
      "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[65536,50257] "
      "and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc [Op:MatMul]\n");
  ExplainReport report;
  add_to_report(report, scan);
  ASSERT_EQ(report.events.size(), 1u);
  const ExplainedEvent& x = report.events[0];
  EXPECT_EQ(x.event.string_field("op"), "MatMul");
  EXPECT_EQ(fix(x.diagnosis, "smaller_input").detail,
            "The first dimension (65536) is usually the batch (or batch x sequence length): at 32768 this tensor takes "
            "6.13 GiB instead of 12.27 GiB.");
}

TEST(DiagnoseRealLogs, NcclEvidenceNamesTheBufferSize) {
  ExplainedEvent x = first_error("nccl_calloc.log");
  EXPECT_EQ(x.diagnosis.cause, "nccl_buffer_alloc");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "NCCL could not allocate a 6.00 MiB communication buffer: the card was already "
                                        "full when it set up a channel or peer connection.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"nccl_buffers", "nccl_nvls_off", "nccl_headroom", "smaller_input"}));
}

TEST(DiagnoseRealLogs, HostAllocatorOnWindowsIsHostMemory) {
  EXPECT_EQ(first_error("cpu_allocator_windows.log").diagnosis.cause, "host_memory");
}

// DDP's Reducer allocates gradient-sized buckets while it wraps the model: nothing has run, so
// batch and sequence fixes are wrong; sharding, LoRA or a bigger card are the answers.
TEST(DiagnoseRealLogs, DdpReducerAtWrapTimeIsAReplicaThatDoesNotFit) {
  const ExplainedEvent e = first_error("ddp_reducer_init.log");
  ASSERT_TRUE(e.event.traceback.has_value());
  EXPECT_EQ(e.event.traceback->operation, "ddp_setup");
  EXPECT_EQ(e.diagnosis.cause, "ddp_replica_does_not_fit");
  EXPECT_EQ(e.diagnosis.secondary_causes, std::vector<std::string>{"capacity_exhausted"});
  EXPECT_EQ(fix_ids(e.diagnosis), (std::vector<std::string>{"shard_model", "lora", "bigger_gpu"}));
  ASSERT_EQ(e.diagnosis.evidence.size(), 2u);
  EXPECT_EQ(e.diagnosis.evidence[1],
            "It failed while DistributedDataParallel wrapped the model (the 25.10 GiB request is the buckets): DDP "
            "allocates gradient buckets as large as all trainable parameters' gradients, on top of the full model "
            "every GPU holds.");
}

// ---- A process the OOM killer ended (host RAM), as each program reports it ----

// oobabooga/textgen#2509: a bare "Killed" under transformers' "Loading checkpoint shards: 0%" bar.
TEST(DiagnoseRealLogs, BareKilledWhileLoadingShardsIsAHostOomWithLoadingFixesFirst) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/killed_loading_shards.log")));
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].line, 6u);
  EXPECT_EQ(scan.events[0].framework, "shell");
  EXPECT_EQ(scan.events[0].string_field("kill_report"), "shell");
  EXPECT_EQ(scan.events[0].string_field("log_operation"), "model_loading");
  ExplainedEvent x = first_error("killed_loading_shards.log");
  EXPECT_EQ(x.diagnosis.cause, "killed_host_oom_suspected");
  ASSERT_EQ(x.diagnosis.evidence.size(), 2u);
  EXPECT_EQ(x.diagnosis.evidence[0].rfind("The shell reports the process Killed: it got SIGKILL and printed no error of "
                                          "its own. On Linux that is usually the kernel's OOM killer", 0), 0u);
  EXPECT_EQ(x.diagnosis.evidence[1], "It was killed while the checkpoint's shards were loading.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"low_cpu_mem_usage", "add_swap", "more_host_memory"}));
  EXPECT_EQ(fix(x.diagnosis, "low_cpu_mem_usage").detail,
            "A plain load builds the model in RAM and reads the whole state dict beside it: about twice the weights at "
            "its peak, per process.");
}

// InternLandMark/LandMark#65: "Killed" glued to a training progress bar, in two runs.
TEST(DiagnoseRealLogs, KilledAfterAProgressBarIsOneKillPrintedTwice) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/killed_after_progress_bar.log")));
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].line, 3u);
  EXPECT_EQ(scan.events[0].repeats, 2u);
  EXPECT_EQ(scan.events[0].last_repeat_line, 6u);
  EXPECT_NE(scan.events[0].field("after_progress_bar"), nullptr);
  ExplainedEvent x = first_error("killed_after_progress_bar.log");
  EXPECT_EQ(x.diagnosis.cause, "killed_host_oom_suspected");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"low_cpu_mem_usage", "fewer_dataloader_workers", "add_swap",
                                                            "more_host_memory"}));
}

// 2U1/Qwen-VL-Series-Finetune#135: DeepSpeed's launcher kills its children; the user's dmesg line
// says the kernel's OOM killer began it, with the victim's resident memory.
TEST(DiagnoseRealLogs, KernelOomKillerLineGivesTheVictimsMemory) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/dmesg_oom_killer_deepspeed.log")));
  ASSERT_EQ(scan.events.size(), 1u);  // "Killing subprocess N" is the launcher's cleanup, not a kill report
  const OomEvent& e = scan.events[0];
  EXPECT_EQ(e.line, 5u);
  EXPECT_EQ(e.framework, "linux");
  EXPECT_EQ(e.string_field("kill_report"), "kernel_oom_killer");
  EXPECT_EQ(e.int_field("pid"), 410126);
  EXPECT_EQ(e.string_field("process_name"), "python");
  EXPECT_EQ(e.bytes("anon_rss"), 23508078592u);   // 22957108 kB
  EXPECT_EQ(e.bytes("shmem_rss"), 15506599936u);  // 15143164 kB
  EXPECT_EQ(e.bytes("file_rss"), 73764864u);      // 72036 kB
  EXPECT_EQ(e.bytes("total_vm"), 81822720000u);   // 79905000 kB
  EXPECT_EQ(e.quantity("anon_rss")->text, "22957108kB");
  ExplainedEvent x = first_error("dmesg_oom_killer_deepspeed.log");
  EXPECT_EQ(x.diagnosis.cause, "killed_host_oom_suspected");
  EXPECT_EQ(x.diagnosis.evidence.at(0),
            "The kernel's OOM killer ended process 410126 (python), which held 21.89 GiB of its own memory (anon-rss) and "
            "14.44 GiB of shared memory (shmem-rss): host (CPU) RAM ran out, not GPU memory.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"low_cpu_mem_usage", "fewer_dataloader_workers", "add_swap",
                                                            "more_host_memory"}));
  EXPECT_EQ(fix(x.diagnosis, "more_host_memory").detail,
            "The process held 36.34 GiB when it was killed: the machine, or the job's memory limit, needs more than that "
            "beside everything else it runs.");
}

// The shell's "Killed" and the kernel's line for the same kill are one event with both reports.
TEST(DiagnoseRealLogs, ShellAndKernelReportsOfOneKillAreOneEvent) {
  ScanResult scan = scan_text(
      "Loading checkpoint shards:   0%|          | 0/2 [00:00<?, ?it/s]\n"
      "Killed\n"
      "[856341.770960] Out of memory: Killed process 410126 (python) total-vm:79905000kB, anon-rss:22957108kB, "
      "file-rss:72036kB, shmem-rss:15143164kB, UID:1000 pgtables:78032kB oom_score_adj:0\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].line, 2u);
  EXPECT_EQ(scan.events[0].end_line, 3u);
  EXPECT_EQ(scan.events[0].int_field("kernel_report_line"), 3);
  EXPECT_EQ(scan.events[0].bytes("anon_rss"), 23508078592u);
  // Two kills of different processes stay two events.
  ScanResult two = scan_text(
      "[ 518.050606] Out of memory: Killed process 15784 (python3) total-vm:11964kB, anon-rss:4288kB, file-rss:3028kB, shmem-rss:0kB\n"
      "[ 518.070786] Out of memory: Killed process 15783 (python3) total-vm:11964kB, anon-rss:4288kB, file-rss:3028kB, shmem-rss:0kB\n");
  ASSERT_EQ(two.events.size(), 2u);  // docker/for-linux#1001
  EXPECT_EQ(two.events[0].int_field("pid"), 15784);
  EXPECT_EQ(two.events[1].int_field("pid"), 15783);
}

// CASIA-LMC-Lab/AnomalyGPT#43: DeepSpeed's launcher reports the child's -9.
TEST(DiagnoseRealLogs, DeepSpeedReturnCodeMinusNineIsAKill) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/deepspeed_return_code_9.log")));
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].line, 7u);
  EXPECT_EQ(scan.events[0].string_field("kill_report"), "deepspeed_launcher");
  EXPECT_EQ(scan.events[0].int_field("exit_code"), -9);
  ExplainedEvent x = first_error("deepspeed_return_code_9.log");
  EXPECT_EQ(x.diagnosis.evidence.at(0).rfind("DeepSpeed's launcher reports its child exited with -9: killed by SIGKILL, "
                                             "with no error of its own.", 0), 0u);
}

// hpcaitech/ColossalAI#3514: torchrun's agent reports the rank's exit code -9 before its summary.
TEST(DiagnoseRealLogs, TorchrunExitcodeMinusNineNamesTheRankAndPid) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/torchrun_exitcode_9.log")));
  ASSERT_EQ(scan.events.size(), 1u);  // the SIGTERM lines are torchrun stopping the other ranks
  EXPECT_EQ(scan.events[0].line, 6u);
  EXPECT_EQ(scan.events[0].string_field("kill_report"), "torchrun");
  EXPECT_EQ(scan.events[0].int_field("pid"), 812917);
  EXPECT_EQ(scan.events[0].int_field("local_rank"), 3);
  EXPECT_EQ(first_error("torchrun_exitcode_9.log").diagnosis.cause, "killed_host_oom_suspected");
}

// neptune-ai/open-solution-mapping-challenge#189: a DataLoader worker killed: fewer workers first.
// Another worker's bus error in shared memory comes just before it: that one died of SIGBUS (its
// own "killed by signal: Bus error"), so the two are two failures.
TEST(DiagnoseRealLogs, KilledDataLoaderWorkerPutsFewerWorkersFirst) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/dataloader_worker_killed.log")));
  ASSERT_EQ(scan.events.size(), 2u);
  EXPECT_EQ(scan.events[0].line, 2u);
  EXPECT_EQ(scan.events[0].format, "dataloader_shm");
  EXPECT_EQ(scan.events[1].line, 3u);
  EXPECT_EQ(scan.events[1].int_field("pid"), 3521);
  const ExplainedEvent x = testing::explain_fixture("dataloader_worker_killed.log").events.at(1);
  EXPECT_EQ(x.diagnosis.cause, "killed_host_oom_suspected");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"fewer_dataloader_workers", "add_swap", "more_host_memory"}));
  EXPECT_EQ(x.diagnosis.evidence.at(0).rfind("A DataLoader worker (pid 3521) was killed by SIGKILL", 0), 0u);
}

// kimbring2/AlphaStar_Implementation#10 (the title): an IDE's exit code 137.
TEST(DiagnoseRealLogs, ExitCode137IsAKill) {
  ScanResult scan = scan_text("Process finished with exit code 137 (interrupted by signal 9: SIGKILL)\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].format, "process_killed");
  EXPECT_EQ(scan.events[0].int_field("exit_code"), 137);
  EXPECT_EQ(scan.events[0].string_field("kill_report"), "exit_code");
  ExplainReport report;
  add_to_report(report, scan);
  EXPECT_EQ(report.events[0].diagnosis.evidence.at(0).rfind("Exit code 137 is 128 + 9", 0), 0u);
}

// Lines that only mention the word are no kill.
TEST(DiagnoseRealLogs, OrdinaryLinesWithKilledAreNoEvent) {
  ScanResult scan = scan_text(
      "Killed 3 zombie workers\n"
      "tests/test_runner.py::test_child_Killed PASSED\n"
      "INFO: worker 7 was Killed by the supervisor, restarting\n"
      "[2023-11-13 16:59:54,760] [INFO] [launch.py:314:sigkill_handler] Killing subprocess 9439\n"
      "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 812914 closing signal SIGTERM\n"
      "Killed: 0, Survived: 12\n"
      "step 10 loss 1.2e-9 lr 3.0e-9 exit code 1370\n"
      "[2024-04-29] Out of memory: Kill process 7748 (python) score 1031 or sacrifice child\n");
  EXPECT_EQ(scan.events.size(), 0u);
}

// PromtEngineer/localGPT#73: zsh's "killed" glued to transformers' loading bar: a kill while loading.
TEST(DiagnoseRealLogs, ZshKilledWhileLoadingShards) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/zsh_killed_loading_shards.log")));
  ASSERT_EQ(scan.events.size(), 1u);
  const OomEvent& e = scan.events[0];
  EXPECT_EQ(e.format, "process_killed");
  EXPECT_EQ(e.line, 1u);
  EXPECT_EQ(e.string_field("kill_report"), "shell");
  EXPECT_TRUE(e.field("after_progress_bar") != nullptr);
  EXPECT_FALSE(e.int_field("pid").has_value());
  ExplainedEvent x = first_error("zsh_killed_loading_shards.log");
  EXPECT_EQ(x.diagnosis.cause, "killed_host_oom_suspected");
  EXPECT_EQ(x.diagnosis.evidence.at(0).rfind("The shell reports the process Killed: it got SIGKILL and printed no error of "
                                             "its own. On Linux that is usually the kernel's OOM killer", 0), 0u);
  EXPECT_EQ(x.diagnosis.evidence.at(1), "It was killed while the checkpoint's shards were loading.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"low_cpu_mem_usage", "add_swap", "more_host_memory"}));
}

// baichuan-inc/Baichuan2#138: zsh's job-control form names the pid.
TEST(DiagnoseRealLogs, ZshJobKilledNamesThePid) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/zsh_job_killed.log")));
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].line, 2u);
  EXPECT_EQ(scan.events[0].int_field("pid"), 26478);
  EXPECT_EQ(scan.events[0].string_field("kill_report"), "shell");
  EXPECT_EQ(first_error("zsh_job_killed.log").diagnosis.cause, "killed_host_oom_suspected");
  // zsh's plain form on a line of its own, and after a command whose output ended with a newline.
  ScanResult plain = scan_text("Start training...\nzsh: killed     python train.py\n");
  ASSERT_EQ(plain.events.size(), 1u);
  EXPECT_EQ(plain.events[0].line, 2u);
  EXPECT_EQ(plain.events[0].string_field("kill_report"), "shell");
  // Prose about the word is no kill.
  EXPECT_TRUE(scan_text("the worker was killed  by the supervisor\nzsh: killed\n").events.empty());
}

// oven-sh/bun#22608 (the title's form): fish names the signal.
TEST(DiagnoseRealLogs, FishTerminatedBySigkill) {
  ScanResult scan = scan_text("fish: Job 1, 'python train.py' terminated by signal SIGKILL (Forced quit)\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].format, "process_killed");
  EXPECT_EQ(scan.events[0].string_field("kill_report"), "shell");
  ExplainReport report;
  add_to_report(report, scan);
  EXPECT_EQ(report.events[0].diagnosis.cause, "killed_host_oom_suspected");
  // fish's other signals are not a kill for memory.
  EXPECT_TRUE(scan_text("fish: Job 1, 'python train.py' terminated by signal SIGTERM (Polite quit request)\n").events.empty());
}

// nephila/djangocms-installer#298: Python 2's subprocess error for a child killed by SIGKILL;
// hollowstrawberry/kohya-colab#106: Python 3's, as accelerate launch raises it (rich's traceback
// prints the exception without its module).
TEST(DiagnoseRealLogs, SubprocessErrorsForAKilledChild) {
  ScanResult py2 = scan_text("subprocess.CalledProcessError: Command '['/home/ashr/env/bin/python', u'-W', u'ignore', "
                             "u'manage.py', u'migrate']' returned non-zero exit status -9\n");
  ASSERT_EQ(py2.events.size(), 1u);
  EXPECT_EQ(py2.events[0].format, "process_killed");
  EXPECT_EQ(py2.events[0].framework, "python");
  EXPECT_EQ(py2.events[0].string_field("kill_report"), "subprocess");
  EXPECT_EQ(py2.events[0].int_field("exit_code"), -9);
  ScanResult py3 = scan_text("CalledProcessError: Command '['/usr/bin/python3', 'train_network.py', "
                             "'--dataset_config=/content/dataset_config.toml']' died with <Signals.SIGKILL: 9>.\n");
  ASSERT_EQ(py3.events.size(), 1u);
  EXPECT_EQ(py3.events[0].string_field("kill_report"), "subprocess");
  for (ScanResult* scan : {&py2, &py3}) {
    ExplainReport report;
    add_to_report(report, *scan);
    const Diagnosis& d = report.events[0].diagnosis;
    EXPECT_EQ(d.cause, "killed_host_oom_suspected");
    EXPECT_EQ(d.evidence.at(0).rfind("The process was killed with SIGKILL (signal 9) and printed no error of its own. On "
                                     "Linux that is usually the kernel's OOM killer ending it for host (CPU) RAM", 0), 0u);
    EXPECT_EQ(fix_ids(d), (std::vector<std::string>{"low_cpu_mem_usage", "fewer_dataloader_workers", "add_swap",
                                                    "more_host_memory"}));
  }
  // Another exit status is no kill.
  EXPECT_TRUE(scan_text("subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.\n")
                  .events.empty());
  EXPECT_TRUE(scan_text("returned non-zero exit status -91\n").events.empty());
}

// ---- SGLang: its own messages and PyTorch's inside it get SGLang's flags ----

// sgl-project/sglang#4330 (the issue body's error line).
TEST(DiagnoseRealLogs, SglangNotEnoughMemoryRaisesTheStaticFraction) {
  ScanResult scan = scan_text("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n");
  ExplainReport report;
  add_to_report(report, scan);
  ASSERT_EQ(report.events.size(), 1u);
  const Diagnosis& d = report.events[0].diagnosis;
  EXPECT_EQ(d.cause, "mem_fraction_static_too_low");
  EXPECT_EQ(fix_ids(d), (std::vector<std::string>{"sglang_mem_fraction", "sglang_tensor_parallel"}));
  EXPECT_EQ(fix(d, "sglang_tensor_parallel").snippet, "--tp-size N");
}

// sgl-project/sglang#5285 and #11218: SGLang wraps PyTorch's OOM during CUDA-graph capture.
TEST(DiagnoseRealLogs, SglangCaptureFailureGetsSglangsCaptureFlags) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/sglang_capture_oom.log")));
  ASSERT_EQ(scan.events.size(), 1u);
  const OomEvent& e = scan.events[0];
  EXPECT_EQ(e.line, 18u);
  EXPECT_EQ(e.framework, "pytorch");
  EXPECT_EQ(e.format, "pytorch_new_truncated");   // cut after "total capacity of 95.00"
  EXPECT_EQ(e.bytes("requested"), 469762048u);   // 448.00 MiB
  EXPECT_EQ(e.string_field("application"), "sglang");
  EXPECT_EQ(e.string_field("log_operation"), "cuda_graph_capture");
  ExplainedEvent x = first_error("sglang_capture_oom.log");
  EXPECT_EQ(x.diagnosis.cause, "cuda_graph_capture_oom");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"sglang_lower_mem_fraction", "sglang_cuda_graph_max_bs",
                                                            "sglang_disable_cuda_graph", "sglang_tensor_parallel"}));
  expect_no_training_recipe(x.diagnosis);
}

// sgl-project/sglang#1087: the frames of an OOM while decoding (the thread's excerpt stops inside
// flashinfer, mid-line, as kept here; PyTorch's bare exception line ends it): SGLang's serving flags, not a recipe.
TEST(DiagnoseRealLogs, SglangServingOomGetsSglangsServingFlags) {
  ScanResult scan = scan_text(
      "Exception in ControllerSingle:\n"
      "Traceback (most recent call last):\n"
      "  File \"/opt/tiger/sglang_src/python/sglang/srt/managers/controller_single.py\", line 166, in start_controller_process\n"
      "    controller.loop_for_forward()\n"
      "  File \"/opt/tiger/sglang_src/python/sglang/srt/managers/tp_worker.py\", line 612, in forward_decode_batch\n"
      "    next_token_ids = batch.sample(output.next_token_logits)\n"
      "  File \"/opt/tiger/sglang_src/python/sglang/srt/managers/schedule_batch.py\", line 760, in sample\n"
      "    batch_next_token_ids, success = top_k_top_p_sampling_from_probs(\n"
      "  File \"/home/tiger/.local/lib/python3.9/site-packages/flashinfer/sampling.py\", line 483, in top_k_top_p_sampling_from_probs\n"
      "    renorm_probs = top_k_renor\n"
      "torch.OutOfMemoryError: CUDA out of memory.\n");
  ExplainReport report;
  add_to_report(report, scan);
  ASSERT_EQ(report.events.size(), 1u);
  EXPECT_EQ(report.events[0].event.string_field("application"), "sglang");
  const Diagnosis& d = report.events[0].diagnosis;
  EXPECT_EQ(fix_ids(d), (std::vector<std::string>{"sglang_lower_mem_fraction", "sglang_chunked_prefill_size",
                                                  "sglang_max_running_requests", "sglang_tensor_parallel"}));
  expect_no_training_recipe(d);
}

// sgl-project/sglang#4489's command line (--mem-fraction-static 0.8) before the capture failure:
// the fix names the value to use.
TEST(DiagnoseRealLogs, SglangCaptureFailureLowersTheLoggedStaticFraction) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/sglang_capture_oom_mem_fraction.log")));
  ASSERT_EQ(scan.notices.size(), 1u);
  EXPECT_EQ(scan.notices[0].kind, "sglang_mem_fraction_static");
  EXPECT_EQ(scan.notices[0].line, 1u);
  EXPECT_EQ(scan.notices[0].value, 0.8);
  ExplainedEvent x = first_error("sglang_capture_oom_mem_fraction.log");
  EXPECT_EQ(x.diagnosis.cause, "cuda_graph_capture_oom");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"sglang_lower_mem_fraction", "sglang_cuda_graph_max_bs",
                                                            "sglang_disable_cuda_graph", "sglang_tensor_parallel"}));
  const Fix& lower = fix(x.diagnosis, "sglang_lower_mem_fraction");
  EXPECT_EQ(lower.snippet, "--mem-fraction-static 0.75");
  EXPECT_EQ(lower.detail, "Lower --mem-fraction-static from 0.80 (the value this server ran with) to 0.75. The static "
                          "pool (weights and KV cache) is allocated before the graphs are captured: a smaller share "
                          "leaves them room.");
  // Without the command line the step stays general.
  EXPECT_EQ(fix(first_error("sglang_capture_oom.log").diagnosis, "sglang_lower_mem_fraction").snippet.rfind(
                "--mem-fraction-static 0.8  # 0.05-0.1 below the value in use", 0), 0u);
}

// SGLang's server_args dump (its form as sgl-project/sglang#1100 prints it, shortened), then the
// serving OOM of sgl-project/sglang#1087: the last value stated before the error counts, here after
// SGLang's own reduction for a multimodal model (its wording, sgl-project/sglang#6881).
TEST(DiagnoseRealLogs, SglangServerArgsDumpGivesTheFractionInUse) {
  const std::string log =
      "[2024-08-14 12:40:01] server_args=ServerArgs(model_path='qwen/Qwen2-57B-A14B-Instruct-GPTQ-Int4', "
      "tokenizer_mode='auto', host='127.0.0.1', port=8000, additional_ports=[8001, 8002, 8003, 8004], "
      "mem_fraction_static=0.87, max_running_requests=None, max_num_reqs=None, max_total_tokens=None, "
      "chunked_prefill_size=None, max_prefill_tokens=16384, schedule_policy='lpm', tp_size=2)\n"
      "[2024-08-14 12:40:02 TP0] Automatically reduce --mem-fraction-static to 0.828 because this is a multimodal model.\n"
      "Exception in ControllerSingle:\n"
      "Traceback (most recent call last):\n"
      "  File \"/opt/tiger/sglang_src/python/sglang/srt/managers/controller_single.py\", line 166, in start_controller_process\n"
      "    controller.loop_for_forward()\n"
      "  File \"/opt/tiger/sglang_src/python/sglang/srt/managers/tp_worker.py\", line 612, in forward_decode_batch\n"
      "    next_token_ids = batch.sample(output.next_token_logits)\n"
      "torch.OutOfMemoryError: CUDA out of memory.\n";
  ScanResult scan = scan_text(log);
  ASSERT_EQ(scan.notices.size(), 2u);
  EXPECT_EQ(scan.notices[0].value, 0.87);
  EXPECT_EQ(scan.notices[1].value, 0.828);
  ExplainReport report;
  add_to_report(report, scan);
  ASSERT_EQ(report.events.size(), 1u);
  const Fix& lower = fix(report.events[0].diagnosis, "sglang_lower_mem_fraction");
  EXPECT_EQ(lower.snippet, "--mem-fraction-static 0.77");
  EXPECT_EQ(lower.detail.rfind("Lower --mem-fraction-static from 0.828 (the value this server ran with) to 0.77. ", 0), 0u);
  // SGLang's advice names no value in use.
  ScanResult advice = scan_text("2. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n");
  EXPECT_TRUE(advice.notices.empty());
}

// sgl-project/sglang#4330: "Not enough memory" at --mem-fraction-static 0.84 (the reporter's
// value, on SGLang's command line): raise it from there; at 0.95 there is nothing left to give.
TEST(DiagnoseRealLogs, SglangNotEnoughMemoryRaisesTheLoggedFraction) {
  auto diagnose = [](const std::string& fraction) {
    ScanResult scan = scan_text("python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                                "--speculative-algorithm EAGLE --mem-fraction-static " + fraction + "\n"
                                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n");
    ExplainReport report;
    add_to_report(report, scan);
    EXPECT_EQ(report.events.size(), 1u);
    return report.events.at(0).diagnosis;
  };
  Diagnosis d = diagnose("0.84");
  EXPECT_EQ(d.cause, "mem_fraction_static_too_low");
  EXPECT_EQ(fix_ids(d), (std::vector<std::string>{"sglang_mem_fraction", "sglang_tensor_parallel"}));
  EXPECT_EQ(fix(d, "sglang_mem_fraction").snippet, "--mem-fraction-static 0.89");
  EXPECT_EQ(fix(d, "sglang_mem_fraction").detail, "Raise --mem-fraction-static from 0.84 (the value this server ran "
                                                  "with) to 0.89: the static pool gets a larger share of the card.");
  Diagnosis full = diagnose("0.95");
  EXPECT_EQ(fix_ids(full), (std::vector<std::string>{"sglang_tensor_parallel"}));
  EXPECT_EQ(full.evidence.at(1), "--mem-fraction-static is already 0.95: a larger share would leave too little for "
                                 "activations and CUDA graphs.");
}

// ---- vLLM: the logging prefix alone says it is vLLM ----

// vllm-project/vllm#12529: the OOM as vLLM's engine core logged it, no tag, no vLLM frame.
TEST(DiagnoseRealLogs, VllmLoggingPrefixAloneGivesVllmFlags) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/vllm_logger_prefix_only.log")));
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].framework, "pytorch");
  EXPECT_EQ(scan.events[0].string_field("application"), "vllm");
  EXPECT_EQ(scan.events[0].bytes("requested"), 1245540516u);   // 1.16 GiB
  ExplainedEvent x = first_error("vllm_logger_prefix_only.log");
  EXPECT_EQ(x.diagnosis.cause, "memory_outside_allocator");
  EXPECT_EQ(fix_ids(x.diagnosis),
            (std::vector<std::string>{"end_other_processes", "vllm_max_model_len", "vllm_max_num_seqs",
                                      "vllm_kv_cache_dtype", "vllm_gpu_memory_utilization", "vllm_enforce_eager",
                                      "vllm_tensor_parallel", "vllm_quantized_weights"}));
  expect_no_training_recipe(x.diagnosis);
}

// ---- A CUDA call's own out of memory in a PyTorch program ----

// sicxu/Deep3DFaceRecon_pytorch#147 (as posted: the frame line's start cut off): moving the model to
// the card failed in a CUDA call, not in the caching allocator.
TEST(DiagnoseRealLogs, CudaErrorOutOfMemoryInPytorchGetsTheDriverLevelSteps) {
  ScanResult scan = scan_text(
      "/miniconda3/envs/deep3d_pytorch/lib/python3.6/site-packages/torch/nn/modules/module.py\", line 605, in convert\n"
      "    return t.to(device, dtype if t.is_floating_point() else None, non_blocking)\n"
      "RuntimeError: CUDA error: out of memory\n");
  ExplainReport report;
  add_to_report(report, scan);
  ASSERT_EQ(report.events.size(), 1u);
  EXPECT_EQ(report.events[0].event.format, "cuda_error_oom");
  const Diagnosis& d = report.events[0].diagnosis;
  EXPECT_EQ(d.cause, "driver_oom_no_details");
  EXPECT_EQ(fix_ids(d), (std::vector<std::string>{"end_other_processes", "check_device_and_limits", "cuda_launch_blocking",
                                                  "no_caching_allocator_debug", "smaller_batch"}));
  EXPECT_EQ(fix(d, "end_other_processes").detail, "A full card at startup means other processes hold it.");
  EXPECT_EQ(fix(d, "cuda_launch_blocking").snippet,
            "CUDA_LAUNCH_BLOCKING=1 python train.py  # synchronous kernels: the traceback points at the real call "
            "(slower; for one debugging run)");
  // IDKiro/DehazeFormer#6: the message with PyTorch's advice lines, during training (no traceback).
  ScanResult dehaze = scan_text(
      "RuntimeError: CUDA error: out of memory\n"
      "CUDA kernel errors might be asynchronously reported at some other API call,so the stacktrace below might be "
      "incorrect.\n"
      "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.\n");
  ExplainReport dehaze_report;
  add_to_report(dehaze_report, dehaze);
  ASSERT_EQ(dehaze_report.events.size(), 1u);
  EXPECT_EQ(fix_ids(dehaze_report.events[0].diagnosis), fix_ids(d));
}

// Written for the rule (no real thread found with this pairing): the driver's status name raised
// through PyTorch's frames (framework "cuda") gets the same steps, where it used to get only the batch.
TEST(DiagnoseRealLogs, DriverStatusUnderPytorchFramesGetsTheDriverLevelSteps) {
  ScanResult scan = scan_text(
      "Traceback (most recent call last):\n"
      "  File \"/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py\", line 1501, in _call_impl\n"
      "    return forward_call(*args, **kwargs)\n"
      "RuntimeError: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n");
  ExplainReport report;
  add_to_report(report, scan);
  ASSERT_EQ(report.events.size(), 1u);
  EXPECT_EQ(report.events[0].event.format, "cuda_driver_oom");
  EXPECT_EQ(fix_ids(report.events[0].diagnosis),
            (std::vector<std::string>{"end_other_processes", "check_device_and_limits", "cuda_launch_blocking",
                                      "no_caching_allocator_debug", "smaller_batch"}));
  // Without PyTorch around it (JCuda, a C++ program), the step every program has.
  ScanResult bare = scan_text("jcuda.CudaException: CUDA_ERROR_OUT_OF_MEMORY\n");
  ExplainReport bare_report;
  add_to_report(bare_report, bare);
  ASSERT_EQ(bare_report.events.size(), 1u);
  EXPECT_EQ(fix_ids(bare_report.events[0].diagnosis), (std::vector<std::string>{"end_other_processes", "smaller_input"}));
}

}  // namespace
}  // namespace oomdoc
