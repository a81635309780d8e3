// The cuDNN stand-in's insides (cudnn_reference.cpp: its API;
// cudnn_convolution.cpp: a convolution's geometry, the modelled algorithms'
// workspace and the reference loops): the structs behind cuDNN's opaque
// handles and descriptors, and what the two files share.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace baton::simt::dnn {

inline constexpr uint64_t kHandleMagic = 0x63646e6e48616e64ull;
inline constexpr uint64_t kTensorMagic = 0x63646e6e54656e73ull;
inline constexpr uint64_t kFilterMagic = 0x63646e6e46696c74ull;
inline constexpr uint64_t kConvMagic = 0x63646e6e436f6e76ull;

}  // namespace baton::simt::dnn

struct cudnnContext {
  uint64_t magic = baton::simt::dnn::kHandleMagic;
  cudaStream_t stream = nullptr;
};
struct cudnnTensorStruct {
  uint64_t magic = baton::simt::dnn::kTensorMagic;
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t sn = 0, sc = 0, sh = 0, sw = 0;  // strides in elements
};
struct cudnnFilterStruct {
  uint64_t magic = baton::simt::dnn::kFilterMagic;
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  int64_t k = 0, c = 0, r = 0, s = 0;
};
struct cudnnConvolutionStruct {
  uint64_t magic = baton::simt::dnn::kConvMagic;
  bool set = false;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  int64_t groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

namespace baton::simt::dnn {

// Returns st, printing why to stderr when CUDNN_LOGLEVEL_DBG >= 1.
cudnnStatus_t refuse(cudnnStatus_t st, const char* where, const std::string& why);

// A handle made by cudnnCreate and not destroyed.
bool live(cudnnHandle_t h);

// One convolution's geometry, from its descriptors, checked.
struct Geometry {
  cudnnTensorStruct x, y;
  cudnnFilterStruct w;
  cudnnConvolutionStruct conv;
  int64_t cig = 0, cog = 0;  // channels per group, in and out
  // Filter strides in elements (k, c, r, s).
  int64_t wk = 0, wc = 0, wr = 0, ws = 0;
  bool tf32 = false;
};

// The handle live, the descriptors live and set, their types, and their
// shapes one convolution's (x the input side, y the output side).
cudnnStatus_t geometry(cudnnHandle_t h, const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                       const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y,
                       const char* where, Geometry* g);

size_t tensor_bytes(const cudnnTensorStruct& t);
size_t filter_bytes(const cudnnFilterStruct& f);
// p not null, float aligned, and [p, p + bytes) device memory.
bool device_floats(const void* p, size_t bytes);

// The modelled algorithms: workspace bytes, or -1 where the algorithm is not
// modelled (or not for this geometry).
int64_t forward_workspace(const Geometry& g, cudnnConvolutionFwdAlgo_t a);
int64_t backward_data_workspace(const Geometry& g, cudnnConvolutionBwdDataAlgo_t a);
int64_t backward_filter_workspace(const Geometry& g, cudnnConvolutionBwdFilterAlgo_t a);

// The modelled algorithms of a pass in the stand-in's ranking (what its
// cudnnGet*Algorithm_v7 returns, and cudnnFind*AlgorithmEx times), each with
// its determinism.
template <class Algo>
struct Ranked {
  Algo algo;
  cudnnDeterminism_t determinism;
};
std::vector<Ranked<cudnnConvolutionFwdAlgo_t>> forward_algorithms();
std::vector<Ranked<cudnnConvolutionBwdDataAlgo_t>> backward_data_algorithms();
std::vector<Ranked<cudnnConvolutionBwdFilterAlgo_t>> backward_filter_algorithms();

// Overwrites `bytes` of workspace with NaN: what an algorithm leaves there
// is not the caller's.
void spoil(void* workspace, int64_t bytes);

// The reference passes: out = alpha * pass + beta * out (out not read when
// beta is 0). `shuffled`: a non-deterministic algorithm's random order of
// the sum.
void run_forward(const Geometry& g, float alpha, const float* x, const float* w, float beta,
                 float* y);
void run_backward_data(const Geometry& g, float alpha, const float* w, const float* dy, float beta,
                       float* dx, bool shuffled);
void run_backward_filter(const Geometry& g, float alpha, const float* x, const float* dy,
                         float beta, float* dw, bool shuffled);

}  // namespace baton::simt::dnn
