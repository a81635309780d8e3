// GpuBackend's convolutions: plan_conv returns a ConvKernel that runs on the
// backend's stream with the CPU's contract (onednn_conv.cpp): channels-last
// rows, w (c_out, kh * kw * c_in / groups) in (ky, kx, channel) order,
// groups, stride, padding; each call overwrites its output; a call's batch
// n is 1 .. the planned one. Kernels in kernels/conv.cuh; no atomics, so
// every result (backward_weights' sum over the batch included) is the same
// bits run after run.
#include <baton/core/error.h>

#include <string>

#include "gpu_backend.h"
#include "kernels/conv.cuh"
#include "launch.cuh"

namespace baton::gpu {

namespace {

constexpr unsigned kMaxBlocks = 4096;

unsigned grid_for(int64_t n) {
  const unsigned b = blocks_for(n, conv::kThreads);
  return b < kMaxBlocks ? b : kMaxBlocks;
}

std::string shape_text(const ConvShape& s) {
  return "n " + std::to_string(s.n) + ", " + std::to_string(s.h) + "x" + std::to_string(s.w) +
         ", channels " + std::to_string(s.c_in) + " -> " + std::to_string(s.c_out) + ", kernel " +
         std::to_string(s.kh) + "x" + std::to_string(s.kw) + ", stride " +
         std::to_string(s.stride) + ", pad " + std::to_string(s.pad) + ", groups " +
         std::to_string(s.groups);
}

conv::Shape shape_of(const ConvShape& s) {
  if (s.n < 1 || s.h < 1 || s.w < 1 || s.c_in < 1 || s.c_out < 1 || s.kh < 1 || s.kw < 1 ||
      s.stride < 1 || s.pad < 0 || s.groups < 1 || s.c_in % s.groups != 0 ||
      s.c_out % s.groups != 0 || s.oh() < 1 || s.ow() < 1) {
    throw RuntimeError("convolution: no GPU convolution for this layer (" + shape_text(s) +
                       "): sizes must be positive, the groups must divide both channel "
                       "counts and the kernel must fit the padded image");
  }
  conv::Shape c{};
  c.n = s.n;
  c.h = s.h;
  c.w = s.w;
  c.c_in = s.c_in;
  c.c_out = s.c_out;
  c.kh = s.kh;
  c.kw = s.kw;
  c.stride = s.stride;
  c.pad = s.pad;
  c.groups = s.groups;
  c.oh = s.oh();
  c.ow = s.ow();
  c.cig = s.c_in / s.groups;
  c.cog = s.c_out / s.groups;
  c.k = s.kh * s.kw * c.cig;
  return c;
}

class GpuConv final : public ConvKernel {
 public:
  GpuConv(const GpuBackend& be, const ConvShape& s) : be_(be), s_(shape_of(s)) {}

  void forward(const float* x, const float* w, float* y, int64_t n) override {
    const conv::Shape s = at_batch(n);
    check(launch(conv::direct_forward_kernel, dim3(grid_for(s.n * s.oh * s.ow * s.c_out)),
                 dim3(conv::kThreads), 0, be_.stream(), x, w, y, s),
          "convolution forward");
  }

  void backward_data(const float* dy, const float* w, float* dx, int64_t n) override {
    const conv::Shape s = at_batch(n);
    check(launch(conv::direct_backward_data_kernel, dim3(grid_for(s.n * s.h * s.w * s.c_in)),
                 dim3(conv::kThreads), 0, be_.stream(), dy, w, dx, s),
          "convolution backward_data");
  }

  void backward_weights(const float* x, const float* dy, float* dw, int64_t n) override {
    const conv::Shape s = at_batch(n);
    check(launch(conv::direct_backward_weights_kernel, dim3(grid_for(s.c_out * s.k)),
                 dim3(conv::kThreads), 0, be_.stream(), x, dy, dw, s),
          "convolution backward_weights");
  }

  std::string describe() const override {
    return "direct convolution (a thread per output, input-gradient and weight-gradient value)";
  }

 private:
  conv::Shape at_batch(int64_t n) const {
    if (n < 1 || n > s_.n) {
      throw RuntimeError("convolution: a batch of " + std::to_string(n) +
                         " images, planned for at most " + std::to_string(s_.n));
    }
    conv::Shape s = s_;
    s.n = n;
    return s;
  }

  const GpuBackend& be_;
  conv::Shape s_;
};

}  // namespace

std::unique_ptr<ConvKernel> GpuBackend::plan_conv(const ConvShape& s) const {
  return std::make_unique<GpuConv>(*this, s);
}

}  // namespace baton::gpu
