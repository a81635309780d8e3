// cuDNN for the convolutions (gpu_backend_cudnn.cu), loaded on first use
// rather than linked: cuDNN ships apart from the CUDA runtime, and a machine
// without it still loads baton_cuda.so and trains, its convolutions on
// Baton's own kernels (the reason is in the layer's description).
// Searched: $BATON_CUDNN_LIBRARY when set, then libcudnn.so.9 on the loader's
// path (this library's RUNPATH includes the toolkit's library folder).
// In the emulation build (baton_cuda_emu.so) the table holds the emulator's
// reference stand-in (simt/cudnn_reference.cpp), which implements the same
// functions with cuDNN's header's signatures and checks their contract.
#pragma once

#include <cudnn.h>

#include <string>

namespace baton_cuda {

// The legacy convolution API of cuDNN 9 (cudnn_cnn.h), and what it needs.
struct CudnnFns {
  decltype(&cudnnGetVersion) GetVersion;
  decltype(&cudnnGetErrorString) GetErrorString;
  decltype(&cudnnCreate) Create;
  decltype(&cudnnDestroy) Destroy;
  decltype(&cudnnSetStream) SetStream;
  decltype(&cudnnCreateTensorDescriptor) CreateTensorDescriptor;
  decltype(&cudnnSetTensor4dDescriptor) SetTensor4dDescriptor;
  decltype(&cudnnDestroyTensorDescriptor) DestroyTensorDescriptor;
  decltype(&cudnnCreateFilterDescriptor) CreateFilterDescriptor;
  decltype(&cudnnSetFilter4dDescriptor) SetFilter4dDescriptor;
  decltype(&cudnnDestroyFilterDescriptor) DestroyFilterDescriptor;
  decltype(&cudnnCreateConvolutionDescriptor) CreateConvolutionDescriptor;
  decltype(&cudnnSetConvolution2dDescriptor) SetConvolution2dDescriptor;
  decltype(&cudnnSetConvolutionGroupCount) SetConvolutionGroupCount;
  decltype(&cudnnSetConvolutionMathType) SetConvolutionMathType;
  decltype(&cudnnDestroyConvolutionDescriptor) DestroyConvolutionDescriptor;
  decltype(&cudnnFindConvolutionForwardAlgorithmEx) FindConvolutionForwardAlgorithmEx;
  decltype(&cudnnFindConvolutionBackwardDataAlgorithmEx) FindConvolutionBackwardDataAlgorithmEx;
  decltype(&cudnnFindConvolutionBackwardFilterAlgorithmEx) FindConvolutionBackwardFilterAlgorithmEx;
  decltype(&cudnnGetConvolutionForwardWorkspaceSize) GetConvolutionForwardWorkspaceSize;
  decltype(&cudnnGetConvolutionBackwardDataWorkspaceSize) GetConvolutionBackwardDataWorkspaceSize;
  decltype(&cudnnGetConvolutionBackwardFilterWorkspaceSize)
      GetConvolutionBackwardFilterWorkspaceSize;
  decltype(&cudnnConvolutionForward) ConvolutionForward;
  decltype(&cudnnConvolutionBackwardData) ConvolutionBackwardData;
  decltype(&cudnnConvolutionBackwardFilter) ConvolutionBackwardFilter;
};

// The functions, or null with *why set (the path tried and dlerror's text,
// or the missing symbol). Loaded once per process; thread-safe.
const CudnnFns* load_cudnn(std::string* why);

}  // namespace baton_cuda
