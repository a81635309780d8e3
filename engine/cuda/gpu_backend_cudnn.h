// GpuBackend's convolutions through cuDNN (gpu_backend_cudnn.cu): plan_conv
// (gpu_backend_conv.cu) takes these for ConvAlgorithm::kAuto when cuDNN is
// there and has deterministic algorithms for the shape, Baton's own kernels
// otherwise.
#pragma once

#include <baton/nn/backend.h>

#include <cstdint>
#include <memory>
#include <string>

namespace baton::gpu {

class GpuBackend;

// A cuDNN convolution planned for s (algorithms and workspace chosen now),
// or null with *why set: no cuDNN, or no deterministic algorithm within the
// workspace a layer may hold.
std::unique_ptr<ConvKernel> plan_cudnn_conv(GpuBackend& be, const ConvShape& s, std::string* why);

// The workspace bytes plan_cudnn_conv(be, s) would hold, or -1 where it
// would return null.
int64_t cudnn_conv_scratch_bytes(const GpuBackend& be, const ConvShape& s);

}  // namespace baton::gpu
