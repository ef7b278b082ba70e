// Causes and fixes on real out-of-memory logs (tests/fixtures/explain/real/README.md names each
// thread): the advice must be written in the settings of the program that failed, with the values
// its numbers give, cheapest first.
#include <gtest/gtest.h>

#include <algorithm>

#include "analyses/diagnose.h"
#include "analyses/explain.h"
#include "support/test_support.h"

namespace oomdoc {
namespace {

ExplainedEvent first_error(const std::string& fixture) {
  ScanResult scan = scan_text(testing::read_file(testing::fixture_path("explain/real/" + fixture)));
  scan.input = fixture;
  ExplainReport report;
  add_to_report(report, scan);
  for (const auto& e : report.events) {
    if (e.event.is_error) return e;
  }
  ADD_FAILURE() << "no error event in " << fixture;
  return {};
}

std::vector<std::string> fix_ids(const Diagnosis& d) {
  std::vector<std::string> ids;
  for (const auto& f : d.fixes) ids.push_back(f.id);
  return ids;
}

const Fix& fix(const Diagnosis& d, const std::string& id) {
  for (const auto& f : d.fixes) {
    if (f.id == id) return f;
  }
  static const Fix none;
  ADD_FAILURE() << "no fix " << id;
  return none;
}

// No fix of a non-training program may be written as a training recipe.
void expect_no_training_recipe(const Diagnosis& d) {
  for (const auto& f : d.fixes) {
    EXPECT_EQ(f.snippet.find("TrainingArguments"), std::string::npos) << f.id;
    EXPECT_EQ(f.snippet.find("per_device_train_batch_size"), std::string::npos) << f.id;
    EXPECT_EQ(f.snippet.find("paged_adamw"), std::string::npos) << f.id;
  }
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
            "PyTorch may use only 1.05 GiB of this 287.98 GiB GPU (a per-process memory fraction of 0.004): it reserves "
            "1.05 GiB and the 2.00 MiB request reaches the limit, while 275.86 GiB of the card is free.");
  ASSERT_EQ(fix_ids(rocm.diagnosis), (std::vector<std::string>{"check_device_and_limits"}));
  EXPECT_EQ(rocm.diagnosis.fixes[0].detail,
            "Raise or remove torch.cuda.set_per_process_memory_fraction() (or the framework setting that calls it): the "
            "reserve plus this request needs 1.05 GiB, a fraction of at least 0.004.");
  // ROCm: the HIP variables, not CUDA_VISIBLE_DEVICES.
  EXPECT_EQ(rocm.diagnosis.fixes[0].snippet.rfind("HIP_VISIBLE_DEVICES", 0), 0u);
  ExplainedEvent xpu = first_error("xpu_memory_fraction.log");
  EXPECT_EQ(xpu.diagnosis.cause, "memory_fraction_limit");
  EXPECT_EQ(xpu.diagnosis.fixes.at(0).detail,
            "Raise or remove torch.cuda.set_per_process_memory_fraction() (or the framework setting that calls it): the "
            "reserve plus this request needs 8.11 GiB, a fraction of at least 0.491.");
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
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"host_memory"}));
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

TEST(DiagnoseRealLogs, NcclEvidenceNamesTheBufferSize) {
  ExplainedEvent x = first_error("nccl_calloc.log");
  EXPECT_EQ(x.diagnosis.cause, "nccl_buffer_alloc");
  EXPECT_EQ(x.diagnosis.evidence.at(0), "NCCL could not allocate a 6.00 MiB communication buffer: the card was already "
                                        "full when it set up a channel or peer connection.");
  EXPECT_EQ(fix_ids(x.diagnosis), (std::vector<std::string>{"nccl_buffers", "smaller_input"}));
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

}  // namespace
}  // namespace oomdoc
