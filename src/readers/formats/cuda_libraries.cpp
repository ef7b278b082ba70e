// CUDA runtime/driver and library failures that mean (or usually hide) an allocation failure:
// cuBLAS/cuDNN status codes, the driver's CUDA_ERROR_OUT_OF_MEMORY and cudaErrorMemoryAllocation.
#include "core/text.h"
#include "readers/formats/message_format.h"
#include "readers/formats/regex_search.h"

namespace oomdoc {
namespace {

// PyTorch's (and ONNX Runtime's) "Unable to find a valid cuDNN algorithm to run convolution": it
// tries each algorithm cuDNN ranks and skips those whose workspace fails to allocate, so when the
// card is full none is left (fastai's memory retry treats it as an OOM, is_cudnn_conv_snafu). A
// cuDNN build that does not match the GPU raises it too: the diagnosis says both.
std::optional<FormatMatch> match_cudnn_no_algorithm(const MessageWindow& w) {
  if (w.lines[0].find("Unable to find a valid cuDNN algorithm to run convolution") == std::string::npos) return std::nullopt;
  FormatMatch m;
  m.event.framework = w.lines[0].find("onnxruntime") != std::string::npos ? "onnxruntime" : "pytorch";
  m.event.format = "library_status";
  m.event.set_field("status", std::string("no valid cuDNN algorithm"));
  return m;
}

std::optional<FormatMatch> match_library_status(const MessageWindow& w) {
  // CUDNN_STATUS_INTERNAL_ERROR and *_NOT_INITIALIZED are listed because cuDNN and cuBLAS report
  // a failed workspace or handle allocation with them when the device is full.
  // cuFFT, cuSOLVER, cuSPARSE, cuRAND and hipBLAS fail a plan's or handle's allocation with their
  // own codes (torch: "cuFFT error: CUFFT_ALLOC_FAILED", "cusolver error: CUSOLVER_STATUS_ALLOC_FAILED,
  // when calling `cusolverDnCreate(handle)`", "CUDA error: CUSPARSE_STATUS_ALLOC_FAILED when calling
  // `cusparseCreate(handle)`").
  static const RE2 re(R"((CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|CUDNN_STATUS_NOT_ALLOCATED|CUDNN_STATUS_INTERNAL_ERROR|CUDNN_STATUS_NOT_INITIALIZED|CUBLAS_STATUS_NOT_INITIALIZED|CUFFT_ALLOC_FAILED|CUSOLVER_STATUS_ALLOC_FAILED|CUSPARSE_STATUS_ALLOC_FAILED|CURAND_STATUS_ALLOCATION_FAILED|HIPBLAS_STATUS_ALLOC_FAILED))");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m;
  OomEvent& e = m.event;
  std::string status((*g)[1]);
  // The library, by its status code's prefix: its id (the framework when no framework's wording
  // names one) and its name as the evidence says it.
  struct Library {
    const char* prefix;
    const char* id;
    const char* name;
  };
  static constexpr Library kLibraries[] = {
      {"CUBLAS", "cublas", "cuBLAS"},       {"CUDNN", "cudnn", "cuDNN"},         {"CUFFT", "cufft", "cuFFT"},
      {"CUSOLVER", "cusolver", "cuSOLVER"}, {"CUSPARSE", "cusparse", "cuSPARSE"}, {"CURAND", "curand", "cuRAND"},
      {"HIPBLAS", "hipblas", "hipBLAS"}};
  const Library* library = &kLibraries[1];
  for (const Library& l : kLibraries) {
    if (status.rfind(l.prefix, 0) == 0) library = &l;
  }
  e.set_field("library", std::string(library->name));
  // Who reports it decides which fixes apply: PyTorch's c10 wording ("CUDA error: CUBLAS_STATUS_...
  // when calling `cublasCreate(handle)`", "cuDNN error: CUDNN_STATUS_..."), TensorFlow's
  // stream_executor ("could not create cudnn handle", "failed to create cublas handle"); CNTK's
  // "RuntimeError: CUBLAS failure 3", Caffe's and Lua Torch's lines are the library's alone.
  const std::string& line = w.lines[0];
  auto has = [&](const char* s) { return line.find(s) != std::string::npos; };
  if (has("CUDA error: CU") || has("cuDNN error: CUDNN_STATUS") || has("when calling `cu") || has("cuFFT error:") ||
      has("cusolver error:") || has("HIP error: HIPBLAS")) {
    e.framework = "pytorch";
  } else if (has("stream_executor") || has("create cudnn handle") || has("create cublas handle")) {
    e.framework = "tensorflow";
  } else {
    e.framework = library->id;
  }
  e.format = "library_status";
  e.set_field("status", status);
  static const RE2 gpu(R"(GPU=(\d+))");
  if (auto d = regex_search(gpu, w.lines[0])) e.device = parse_decimal<int64_t>((*d)[1]);
  return m;
}

std::optional<FormatMatch> match_driver_oom(const MessageWindow& w) {
  // Also ROCm's hipErrorOutOfMemory and Intel's (PyTorch on XPU: "UR backend failed. UR backend
  // returns:40 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)"; Level Zero's ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY).
  static const RE2 re(
      R"((CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|hipErrorOutOfMemory|UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY|ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY))");
  auto g = regex_search(re, w.lines[0]);
  if (!g) return std::nullopt;
  FormatMatch m;
  const std::string_view status = (*g)[1];
  m.event.framework = status == "hipErrorOutOfMemory" ? "hip" : status.find("_RESULT_") != std::string_view::npos ? "pytorch-xpu" : "cuda";
  m.event.format = "cuda_driver_oom";
  m.event.set_field("status", std::string((*g)[1]));
  // Java/JCuda and others print the failing driver call a few lines below.
  size_t ctx = w.flat.find("cuCtxCreate");
  if (ctx != std::string::npos && w.line_of(ctx) <= 6) {
    m.event.format = "cuda_driver_ctx_create";
    m.lines_used = w.line_of(ctx) + 1;
  }
  return m;
}

}  // namespace

void add_cuda_library_formats(std::vector<MessageFormat>& out) {
  out.push_back({"library_status",
                 {"CUBLAS_STATUS_", "CUDNN_STATUS_", "CUFFT_ALLOC_FAILED", "CUSOLVER_STATUS_ALLOC_FAILED",
                  "CUSPARSE_STATUS_ALLOC_FAILED", "CURAND_STATUS_ALLOCATION_FAILED", "HIPBLAS_STATUS_ALLOC_FAILED"},
                 match_library_status});
  out.push_back({"library_status", {"Unable to find a valid cuDNN algorithm"}, match_cudnn_no_algorithm});
  out.push_back({"cuda_driver_oom",
                 {"CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation", "hipErrorOutOfMemory",
                  "UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"},
                 match_driver_oom});
}

}  // namespace oomdoc
