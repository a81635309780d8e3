// The cuDNN stand-in's Find (cudnnFind*AlgorithmEx): every modelled
// algorithm of the pass run in turn on the caller's buffers and timed, as
// cuDNN's Find does, with the contract its API reference documents:
// - Blocking: the handle's stream is drained first, each trial runs on it
//   and is waited for; the time is the host's clock around that run (here:
//   the reference loops' time on the CPU, so the emulated ranking says
//   nothing about a GPU's).
// - The buffers: x, w and y (dy, dx, dw by pass) device memory over their
//   extents; the output is overwritten with whatever the last trial left;
//   the workspace, when one is given, device memory of the size given.
// - Results: the algorithms that ran, fastest first, status SUCCESS and
//   their time in ms; then those needing more workspace than given, status
//   ALLOC_FAILED and time -1, their memory the workspace they need; at most
//   requestedAlgoCount of them (at least 1, else BAD_PARAM).
// - A non-deterministic algorithm's trial sums in a random order, as its
//   runs do (cudnn_reference.cpp).
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "cudnn_stand_in.h"
#include "simt_host.h"

using namespace baton::simt::dnn;

namespace {

// The buffers of one Find call: the x side, the filter, the y side, and the
// workspace.
struct Buffers {
  const void* x;
  const void* w;
  const void* y;
  void* workspace;
  size_t workspace_bytes;
};

// One pass's Find: `model` gives an algorithm's workspace, `algorithms` the
// pass's modelled ones, `trial(g, algo, shuffled)` runs one on the buffers.
template <class Perf, class Algo, class Trial>
cudnnStatus_t find(const char* where, cudnnHandle_t h, const cudnnTensorStruct* x,
                   const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv,
                   const cudnnTensorStruct* y, const Buffers& b,
                   int64_t (*model)(const Geometry&, Algo),
                   const std::vector<Ranked<Algo>>& algorithms, int requested, int* returned,
                   Perf* out, Trial trial) {
  Geometry g;
  if (const auto st = geometry(h, x, w, conv, y, where, &g); st != CUDNN_STATUS_SUCCESS) return st;
  if (returned == nullptr || out == nullptr || requested < 1)
    return refuse(CUDNN_STATUS_BAD_PARAM, where, "no room for the results");
  if (!device_floats(b.x, tensor_bytes(g.x)) || !device_floats(b.w, filter_bytes(g.w)) ||
      !device_floats(b.y, tensor_bytes(g.y)))
    return refuse(CUDNN_STATUS_BAD_PARAM, where,
                  "a tensor or the filter is not device memory over its extent");
  if (b.workspace_bytes > 0 && !device_floats(b.workspace, b.workspace_bytes))
    return refuse(CUDNN_STATUS_BAD_PARAM, where, "the workspace is not device memory of that size");
  if (cudaStreamSynchronize(h->stream) != cudaSuccess)
    return refuse(CUDNN_STATUS_EXECUTION_FAILED, where, "the stream's earlier work failed");

  std::vector<Perf> ran, too_big;
  for (const Ranked<Algo>& r : algorithms) {
    const int64_t need = model(g, r.algo);
    if (need < 0) continue;  // not modelled for this geometry
    Perf p{};
    p.algo = r.algo;
    p.determinism = r.determinism;
    p.mathType = g.conv.math;
    p.memory = static_cast<size_t>(need);
    if (static_cast<size_t>(need) > b.workspace_bytes) {
      p.status = CUDNN_STATUS_ALLOC_FAILED;
      p.time = -1.0f;
      too_big.push_back(p);
      continue;
    }
    const bool shuffled = r.determinism == CUDNN_NON_DETERMINISTIC;
    void* ws = b.workspace;
    const auto start = std::chrono::steady_clock::now();
    if (baton::simt::enqueue(h->stream, where,
                             [&g, &trial, ws, need, algo = r.algo, shuffled] {
                               if (need > 0) spoil(ws, need);
                               trial(g, algo, shuffled);
                               return cudaSuccess;
                             }) != cudaSuccess ||
        cudaStreamSynchronize(h->stream) != cudaSuccess)
      return refuse(CUDNN_STATUS_EXECUTION_FAILED, where, "a trial run failed");
    p.status = CUDNN_STATUS_SUCCESS;
    p.time =
        std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - start).count();
    ran.push_back(p);
  }
  std::stable_sort(ran.begin(), ran.end(),
                   [](const Perf& a, const Perf& c) { return a.time < c.time; });
  ran.insert(ran.end(), too_big.begin(), too_big.end());
  *returned = std::min(requested, static_cast<int>(ran.size()));
  std::copy_n(ran.begin(), *returned, out);
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

cudnnStatus_t CUDNNWINAPI cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnFilterDescriptor_t wDesc, const void* w, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t yDesc, void* y, const int requestedAlgoCount,
    int* returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t* perfResults, void* workSpace,
    size_t workSpaceSizeInBytes) {
  const Buffers b{x, w, y, workSpace, workSpaceSizeInBytes};
  return find("cudnnFindConvolutionForwardAlgorithmEx", handle, xDesc, wDesc, convDesc, yDesc, b,
              forward_workspace, forward_algorithms(), requestedAlgoCount, returnedAlgoCount,
              perfResults, [=](const Geometry& g, cudnnConvolutionFwdAlgo_t, bool) {
                run_forward(g, 1.0f, static_cast<const float*>(x), static_cast<const float*>(w),
                            0.0f, static_cast<float*>(y));
              });
}

cudnnStatus_t CUDNNWINAPI cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const void* w,
    const cudnnTensorDescriptor_t dyDesc, const void* dy,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc, void* dx,
    const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t* perfResults, void* workSpace, size_t workSpaceSizeInBytes) {
  const Buffers b{dx, w, dy, workSpace, workSpaceSizeInBytes};
  return find(
      "cudnnFindConvolutionBackwardDataAlgorithmEx", handle, dxDesc, wDesc, convDesc, dyDesc, b,
      backward_data_workspace, backward_data_algorithms(), requestedAlgoCount, returnedAlgoCount,
      perfResults, [=](const Geometry& g, cudnnConvolutionBwdDataAlgo_t, bool shuffled) {
        run_backward_data(g, 1.0f, static_cast<const float*>(w), static_cast<const float*>(dy),
                          0.0f, static_cast<float*>(dx), shuffled);
      });
}

cudnnStatus_t CUDNNWINAPI cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnTensorDescriptor_t dyDesc, const void* y,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t dwDesc, void* dw,
    const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t* perfResults, void* workSpace,
    size_t workSpaceSizeInBytes) {
  const Buffers b{x, dw, y, workSpace, workSpaceSizeInBytes};
  return find("cudnnFindConvolutionBackwardFilterAlgorithmEx", handle, xDesc, dwDesc, convDesc,
              dyDesc, b, backward_filter_workspace, backward_filter_algorithms(),
              requestedAlgoCount, returnedAlgoCount, perfResults,
              [=](const Geometry& g, cudnnConvolutionBwdFilterAlgo_t, bool shuffled) {
                run_backward_filter(g, 1.0f, static_cast<const float*>(x),
                                    static_cast<const float*>(y), 0.0f, static_cast<float*>(dw),
                                    shuffled);
              });
}

}  // extern "C"
