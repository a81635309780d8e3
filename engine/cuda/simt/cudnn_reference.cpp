// The cuDNN stand-in of the GPU emulator: cuDNN 9's legacy convolution API
// (cudnn_cnn.h) and what it needs, with the real header's signatures,
// computing with plain reference loops (cudnn_convolution.cpp) on the
// stream's thread and checking the contract the cuDNN API reference
// documents, so that the backend's misuse fails here as it would on a GPU:
// - Handles and descriptors: a null or destroyed one is BAD_PARAM (a null
//   handle NOT_INITIALIZED); a descriptor used before it is set, BAD_PARAM.
// - Types: FLOAT data and compute only (others NOT_SUPPORTED here); tensor
//   and filter formats NCHW or NHWC; cross-correlation or convolution; any
//   padding, stride and dilation; a group count dividing both channel
//   counts (the filter's C is the input's channels per group).
// - Shapes: y's dimensions are cudnnGetConvolution2dForwardOutputDim's
//   ((h + 2 pad - dil (r - 1) - 1) / stride + 1), batches equal, else
//   BAD_PARAM.
// - Pointers: every tensor over its whole extent in device memory, float
//   aligned; the workspace, when the algorithm needs one, in device memory
//   and at least its cudnnGet*WorkspaceSize (else BAD_PARAM); alpha and
//   beta host pointers; y is read only when beta is not 0.
// - Algorithms (modelled: what the real heuristics rank differs by GPU):
//   forward IMPLICIT_PRECOMP_GEMM (an index table of workspace),
//   IMPLICIT_GEMM (none), GEMM (groups 1: the im2col matrix); backward
//   data ALGO_0 (non-deterministic) ranked before ALGO_1 (workspace);
//   backward filter ALGO_0 and ALGO_3 (non-deterministic) ranked before
//   ALGO_1 (workspace), as cuDNN often ranks them. A non-deterministic
//   algorithm sums the batch in a random order each call, so its results
//   differ in their last bits run to run, as atomics make them on a GPU;
//   the others are refused with NOT_SUPPORTED. While an algorithm runs its
//   workspace is overwritten with NaN, so data kept there is lost. Find
//   (cudnnFind*AlgorithmEx) runs and times them: cudnn_find.cpp.
// - Math: FMA_MATH computes in float; DEFAULT and TENSOR_OP math round the
//   operands to TF32 first (what Ampere and later do for float data).
// With CUDNN_LOGLEVEL_DBG >= 1 in the environment (the vendor's switch) a
// refusal prints why to stderr.
#include <cudnn.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "cudnn_stand_in.h"
#include "simt_host.h"

using namespace baton::simt::dnn;

namespace {

template <class Perf, class Algo>
void add_perf(Perf* out, int requested, int* count, Algo algo, int64_t workspace,
              cudnnDeterminism_t det, cudnnMathType_t math) {
  if (workspace < 0 || *count >= requested) return;
  Perf p{};
  p.algo = algo;
  p.status = CUDNN_STATUS_SUCCESS;
  p.time = -1.0f;  // a heuristic's answer: nothing was timed
  p.memory = static_cast<size_t>(workspace);
  p.determinism = det;
  p.mathType = math;
  out[(*count)++] = p;
}

// The execution-time checks every pass shares: pointers, workspace, scalars.
cudnnStatus_t check_run(const char* where, const void* alpha, const void* beta, void* workspace,
                        size_t given, int64_t needed) {
  if (needed < 0)
    return refuse(CUDNN_STATUS_NOT_SUPPORTED, where,
                  "this algorithm is not modelled here for this convolution");
  if (alpha == nullptr || beta == nullptr)
    return refuse(CUDNN_STATUS_BAD_PARAM, where, "alpha or beta is null");
  if (given < static_cast<size_t>(needed))
    return refuse(CUDNN_STATUS_BAD_PARAM, where,
                  "the algorithm needs " + std::to_string(needed) + " bytes of workspace, given " +
                      std::to_string(given));
  if (needed > 0 && !device_floats(workspace, static_cast<size_t>(needed)))
    return refuse(CUDNN_STATUS_BAD_PARAM, where, "the workspace is not device memory of that size");
  return CUDNN_STATUS_SUCCESS;
}

cudaError_t enqueue(cudnnHandle_t h, const char* what, std::function<void()> body) {
  return baton::simt::enqueue(h->stream, what, [body = std::move(body)] {
    body();
    return cudaSuccess;
  });
}

// A 4-d descriptor's setting: live, every dimension at least 1, a format
// the stand-in models.
cudnnStatus_t check_4d(const char* where, bool live, std::initializer_list<int> dims,
                       cudnnTensorFormat_t format) {
  if (!live) return refuse(CUDNN_STATUS_BAD_PARAM, where, "not a live descriptor");
  for (const int d : dims)
    if (d < 1) return refuse(CUDNN_STATUS_BAD_PARAM, where, "a dimension below 1");
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
    return refuse(CUDNN_STATUS_NOT_SUPPORTED, where, "NCHW or NHWC only here");
  return CUDNN_STATUS_SUCCESS;
}

// A descriptor's creation and destruction (T: one of the structs above,
// whose default magic marks a live one).
template <class T>
cudnnStatus_t create_descriptor(T** d, const char* where) {
  if (d == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, where, "null");
  *d = new T;
  return CUDNN_STATUS_SUCCESS;
}
template <class T>
cudnnStatus_t destroy_descriptor(T* d, const char* where) {
  if (d == nullptr) return CUDNN_STATUS_SUCCESS;
  if (d->magic != T{}.magic) return refuse(CUDNN_STATUS_BAD_PARAM, where, "not a live descriptor");
  d->magic = 0;
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

// A cudnnGet*Algorithm_v7: the geometry checked, then the modelled
// algorithms in the stand-in's ranking (those `model` gives a workspace
// for this geometry), as many as asked for.
template <class Perf, class Algo>
cudnnStatus_t rank(const char* where, cudnnHandle_t h, const cudnnTensorStruct* x,
                   const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv,
                   const cudnnTensorStruct* y, int64_t (*model)(const Geometry&, Algo),
                   const std::vector<Ranked<Algo>>& ranking, int requested, int* returned,
                   Perf* out) {
  Geometry g;
  if (const auto st = geometry(h, x, w, conv, y, where, &g); st != CUDNN_STATUS_SUCCESS) return st;
  if (returned == nullptr || out == nullptr || requested < 1)
    return refuse(CUDNN_STATUS_BAD_PARAM, where, "no room for the results");
  *returned = 0;
  for (const Ranked<Algo>& r : ranking)
    add_perf(out, requested, returned, r.algo, model(g, r.algo), r.determinism, g.conv.math);
  return CUDNN_STATUS_SUCCESS;
}

// A cudnnGet*WorkspaceSize: the geometry checked, then the pass's
// modelled size for `algo` (`model`).
template <class Algo>
cudnnStatus_t workspace_size(const char* where, cudnnHandle_t h, const cudnnTensorStruct* x,
                             const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv,
                             const cudnnTensorStruct* y, int64_t (*model)(const Geometry&, Algo),
                             Algo algo, size_t* out) {
  Geometry g;
  if (const auto st = geometry(h, x, w, conv, y, where, &g); st != CUDNN_STATUS_SUCCESS) return st;
  if (out == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, where, "sizeInBytes is null");
  const int64_t bytes = model(g, algo);
  if (bytes < 0) return refuse(CUDNN_STATUS_NOT_SUPPORTED, where, "algorithm not modelled here");
  *out = static_cast<size_t>(bytes);
  return CUDNN_STATUS_SUCCESS;
}

// What a pass's call gives: its scalars, workspace, and the x-side,
// filter-side and y-side tensors (input or output by pass).
struct Run {
  const char* where;
  const void *alpha, *beta;
  void* workspace;
  size_t workspace_bytes;
  const void *x, *w, *y;
};

// A pass: the geometry, the workspace and scalars checked, the tensors in
// device memory over their extents; then, on the handle's stream, the
// workspace spoiled and `body(geometry, alpha, beta)` run.
template <class Algo, class Body>
cudnnStatus_t execute(const Run& r, cudnnHandle_t h, const cudnnTensorStruct* x,
                      const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv,
                      const cudnnTensorStruct* y, int64_t (*model)(const Geometry&, Algo),
                      Algo algo, Body body) {
  Geometry g;
  if (const auto st = geometry(h, x, w, conv, y, r.where, &g); st != CUDNN_STATUS_SUCCESS)
    return st;
  const int64_t need = model(g, algo);
  if (const auto st = check_run(r.where, r.alpha, r.beta, r.workspace, r.workspace_bytes, need);
      st != CUDNN_STATUS_SUCCESS)
    return st;
  if (!device_floats(r.x, tensor_bytes(g.x)) || !device_floats(r.w, filter_bytes(g.w)) ||
      !device_floats(r.y, tensor_bytes(g.y)))
    return refuse(CUDNN_STATUS_BAD_PARAM, r.where,
                  "a tensor or the filter is not device memory over its extent");
  const float a = *static_cast<const float*>(r.alpha), b = *static_cast<const float*>(r.beta);
  void* ws = r.workspace;
  if (enqueue(h, r.where, [=] {
        if (need > 0) spoil(ws, need);
        body(g, a, b);
      }) != cudaSuccess)
    return refuse(CUDNN_STATUS_EXECUTION_FAILED, r.where, "the stream refused the work");
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

size_t CUDNNWINAPI cudnnGetVersion(void) { return CUDNN_VERSION; }

const char* CUDNNWINAPI cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS:
      return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED:
      return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM:
      return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED:
      return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_EXECUTION_FAILED:
      return "CUDNN_STATUS_EXECUTION_FAILED";
    default:
      return "CUDNN_STATUS_UNKNOWN";
  }
}

cudnnStatus_t CUDNNWINAPI cudnnCreate(cudnnHandle_t* handle) {
  if (handle == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, "cudnnCreate", "handle is null");
  *handle = new cudnnContext;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnDestroy(cudnnHandle_t handle) {
  if (!live(handle))
    return refuse(CUDNN_STATUS_NOT_INITIALIZED, "cudnnDestroy", "not a live handle");
  handle->magic = 0;
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
  if (!live(handle))
    return refuse(CUDNN_STATUS_NOT_INITIALIZED, "cudnnSetStream", "not a live handle");
  handle->stream = streamId;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) {
  return create_descriptor(d, "cudnnCreateTensorDescriptor");
}

cudnnStatus_t CUDNNWINAPI cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d,
                                                     cudnnTensorFormat_t format,
                                                     cudnnDataType_t dataType, int n, int c, int h,
                                                     int w) {
  if (const auto st = check_4d("cudnnSetTensor4dDescriptor",
                               d != nullptr && d->magic == kTensorMagic, {n, c, h, w}, format);
      st != CUDNN_STATUS_SUCCESS)
    return st;
  d->type = dataType;
  d->n = n;
  d->c = c;
  d->h = h;
  d->w = w;
  if (format == CUDNN_TENSOR_NHWC) {
    d->sc = 1;
    d->sw = c;
    d->sh = int64_t{w} * c;
    d->sn = int64_t{h} * w * c;
  } else {
    d->sw = 1;
    d->sh = w;
    d->sc = int64_t{h} * w;
    d->sn = int64_t{c} * h * w;
  }
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
  return destroy_descriptor(d, "cudnnDestroyTensorDescriptor");
}

cudnnStatus_t CUDNNWINAPI cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) {
  return create_descriptor(d, "cudnnCreateFilterDescriptor");
}

cudnnStatus_t CUDNNWINAPI cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d,
                                                     cudnnDataType_t dataType,
                                                     cudnnTensorFormat_t format, int k, int c,
                                                     int h, int w) {
  if (const auto st = check_4d("cudnnSetFilter4dDescriptor",
                               d != nullptr && d->magic == kFilterMagic, {k, c, h, w}, format);
      st != CUDNN_STATUS_SUCCESS)
    return st;
  d->type = dataType;
  d->format = format;
  d->k = k;
  d->c = c;
  d->r = h;
  d->s = w;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
  return destroy_descriptor(d, "cudnnDestroyFilterDescriptor");
}

cudnnStatus_t CUDNNWINAPI cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) {
  return create_descriptor(d, "cudnnCreateConvolutionDescriptor");
}

cudnnStatus_t CUDNNWINAPI cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h,
                                                          int pad_w, int u, int v, int dilation_h,
                                                          int dilation_w,
                                                          cudnnConvolutionMode_t mode,
                                                          cudnnDataType_t computeType) {
  const char* where = "cudnnSetConvolution2dDescriptor";
  if (d == nullptr || d->magic != kConvMagic)
    return refuse(CUDNN_STATUS_BAD_PARAM, where, "not a live descriptor");
  if (pad_h < 0 || pad_w < 0 || u < 1 || v < 1 || dilation_h < 1 || dilation_w < 1)
    return refuse(CUDNN_STATUS_BAD_PARAM, where,
                  "negative padding or a stride or dilation below 1");
  if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION)
    return refuse(CUDNN_STATUS_BAD_PARAM, where, "unknown mode");
  d->pad_h = pad_h;
  d->pad_w = pad_w;
  d->stride_h = u;
  d->stride_w = v;
  d->dil_h = dilation_h;
  d->dil_w = dilation_w;
  d->mode = mode;
  d->compute = computeType;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d,
                                                        int groupCount) {
  if (d == nullptr || d->magic != kConvMagic)
    return refuse(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionGroupCount", "not a live descriptor");
  if (groupCount < 1)
    return refuse(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionGroupCount", "below 1");
  d->groups = groupCount;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d,
                                                      cudnnMathType_t mathType) {
  if (d == nullptr || d->magic != kConvMagic)
    return refuse(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionMathType", "not a live descriptor");
  if (mathType != CUDNN_DEFAULT_MATH && mathType != CUDNN_TENSOR_OP_MATH &&
      mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && mathType != CUDNN_FMA_MATH)
    return refuse(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionMathType", "unknown math type");
  d->math = mathType;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
  return destroy_descriptor(d, "cudnnDestroyConvolutionDescriptor");
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t* perfResults) {
  return rank("cudnnGetConvolutionForwardAlgorithm_v7", handle, srcDesc, filterDesc, convDesc,
              destDesc, forward_workspace, forward_algorithms(), requestedAlgoCount,
              returnedAlgoCount, perfResults);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t* perfResults) {
  return rank("cudnnGetConvolutionBackwardDataAlgorithm_v7", handle, gradDesc, filterDesc, convDesc,
              diffDesc, backward_data_workspace, backward_data_algorithms(), requestedAlgoCount,
              returnedAlgoCount, perfResults);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t* perfResults) {
  return rank("cudnnGetConvolutionBackwardFilterAlgorithm_v7", handle, srcDesc, gradDesc, convDesc,
              diffDesc, backward_filter_workspace, backward_filter_algorithms(), requestedAlgoCount,
              returnedAlgoCount, perfResults);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
    cudnnConvolutionFwdAlgo_t algo, size_t* sizeInBytes) {
  return workspace_size("cudnnGetConvolutionForwardWorkspaceSize", handle, xDesc, wDesc, convDesc,
                        yDesc, forward_workspace, algo, sizeInBytes);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc,
    cudnnConvolutionBwdDataAlgo_t algo, size_t* sizeInBytes) {
  return workspace_size("cudnnGetConvolutionBackwardDataWorkspaceSize", handle, dxDesc, wDesc,
                        convDesc, dyDesc, backward_data_workspace, algo, sizeInBytes);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc,
    cudnnConvolutionBwdFilterAlgo_t algo, size_t* sizeInBytes) {
  return workspace_size("cudnnGetConvolutionBackwardFilterWorkspaceSize", handle, xDesc, gradDesc,
                        convDesc, dyDesc, backward_filter_workspace, algo, sizeInBytes);
}

cudnnStatus_t CUDNNWINAPI cudnnConvolutionForward(
    cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnFilterDescriptor_t wDesc, const void* w, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionFwdAlgo_t algo, void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
    const cudnnTensorDescriptor_t yDesc, void* y) {
  const Run r{"cudnnConvolutionForward", alpha, beta, workSpace, workSpaceSizeInBytes, x, w, y};
  return execute(r, handle, xDesc, wDesc, convDesc, yDesc, forward_workspace, algo,
                 [=](const Geometry& g, float a, float b) {
                   run_forward(g, a, static_cast<const float*>(x), static_cast<const float*>(w), b,
                               static_cast<float*>(y));
                 });
}

cudnnStatus_t CUDNNWINAPI cudnnConvolutionBackwardData(
    cudnnHandle_t handle, const void* alpha, const cudnnFilterDescriptor_t wDesc, const void* w,
    const cudnnTensorDescriptor_t dyDesc, const void* dy,
    const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionBwdDataAlgo_t algo,
    void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
    const cudnnTensorDescriptor_t dxDesc, void* dx) {
  const Run r{"cudnnConvolutionBackwardData", alpha, beta, workSpace,
              workSpaceSizeInBytes,           dx,    w,    dy};
  const bool shuffled = algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  return execute(r, handle, dxDesc, wDesc, convDesc, dyDesc, backward_data_workspace, algo,
                 [=](const Geometry& g, float a, float b) {
                   run_backward_data(g, a, static_cast<const float*>(w),
                                     static_cast<const float*>(dy), b, static_cast<float*>(dx),
                                     shuffled);
                 });
}

cudnnStatus_t CUDNNWINAPI cudnnConvolutionBackwardFilter(
    cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnTensorDescriptor_t dyDesc, const void* dy,
    const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionBwdFilterAlgo_t algo,
    void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
    const cudnnFilterDescriptor_t dwDesc, void* dw) {
  const Run r{
      "cudnnConvolutionBackwardFilter", alpha, beta, workSpace, workSpaceSizeInBytes, x, dw, dy};
  const bool shuffled = algo != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  return execute(r, handle, xDesc, dwDesc, convDesc, dyDesc, backward_filter_workspace, algo,
                 [=](const Geometry& g, float a, float b) {
                   run_backward_filter(g, a, static_cast<const float*>(x),
                                       static_cast<const float*>(dy), b, static_cast<float*>(dw),
                                       shuffled);
                 });
}

}  // extern "C"
