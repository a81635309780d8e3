#include <cstdlib>

#include "cudnn_loader.h"
#include "loaded_table.h"

namespace baton_cuda {
namespace {

#if defined(__CUDACC__)
#define BATON_CUDNN_BIND(fn) bind_symbol(lib, "cudnn" #fn, f.fn, missing)
#else
#define BATON_CUDNN_BIND(fn) f.fn = &cudnn##fn
#endif

void load(LoadedTable<CudnnFns>& l) {
  CudnnFns& f = l.fns;
#if defined(__CUDACC__)
  const char* env = std::getenv("BATON_CUDNN_LIBRARY");
  const std::string path = env != nullptr && *env != '\0' ? env : "libcudnn.so.9";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    l.why = "cannot load " + path + ": " + (e != nullptr ? e : "unknown error") +
            (env != nullptr ? " (from BATON_CUDNN_LIBRARY)" : "");
    return;
  }
  std::string missing;
#endif
  BATON_CUDNN_BIND(GetVersion);
  BATON_CUDNN_BIND(GetErrorString);
  BATON_CUDNN_BIND(Create);
  BATON_CUDNN_BIND(Destroy);
  BATON_CUDNN_BIND(SetStream);
  BATON_CUDNN_BIND(CreateTensorDescriptor);
  BATON_CUDNN_BIND(SetTensor4dDescriptor);
  BATON_CUDNN_BIND(DestroyTensorDescriptor);
  BATON_CUDNN_BIND(CreateFilterDescriptor);
  BATON_CUDNN_BIND(SetFilter4dDescriptor);
  BATON_CUDNN_BIND(DestroyFilterDescriptor);
  BATON_CUDNN_BIND(CreateConvolutionDescriptor);
  BATON_CUDNN_BIND(SetConvolution2dDescriptor);
  BATON_CUDNN_BIND(SetConvolutionGroupCount);
  BATON_CUDNN_BIND(SetConvolutionMathType);
  BATON_CUDNN_BIND(DestroyConvolutionDescriptor);
  BATON_CUDNN_BIND(FindConvolutionForwardAlgorithmEx);
  BATON_CUDNN_BIND(FindConvolutionBackwardDataAlgorithmEx);
  BATON_CUDNN_BIND(FindConvolutionBackwardFilterAlgorithmEx);
  BATON_CUDNN_BIND(GetConvolutionForwardWorkspaceSize);
  BATON_CUDNN_BIND(GetConvolutionBackwardDataWorkspaceSize);
  BATON_CUDNN_BIND(GetConvolutionBackwardFilterWorkspaceSize);
  BATON_CUDNN_BIND(ConvolutionForward);
  BATON_CUDNN_BIND(ConvolutionBackwardData);
  BATON_CUDNN_BIND(ConvolutionBackwardFilter);
#if defined(__CUDACC__)
  if (!missing.empty()) {
    l.why = path + " has no " + missing + " (a cuDNN older than 9?)";
    return;
  }
  // cuDNN 9's legacy convolution API: an 8.x library has other sonames and
  // layouts of its structures.
  if (f.GetVersion() < 90000) {
    l.why = path + " is cuDNN " + std::to_string(f.GetVersion()) + ", not 9 or later";
    return;
  }
#endif
  l.ok = true;
}
#undef BATON_CUDNN_BIND

}  // namespace

const CudnnFns* load_cudnn(std::string* why) { return load_once<CudnnFns>(load, why); }

}  // namespace baton_cuda
