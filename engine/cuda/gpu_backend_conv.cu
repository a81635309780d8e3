// GpuBackend's convolutions: plan_conv returns a ConvKernel that runs on the
// backend's stream with the CPU's contract (onednn_conv.cpp): channels-last
// rows, w (c_out, kh * kw * c_in / groups) in (ky, kx, channel) order,
// groups, stride, padding; each call overwrites its output; a call's batch
// n is 1 .. the planned one. Kernels in kernels/conv.cuh; no atomics, so
// every result (backward_weights' sum over the batch included) is the same
// bits run after run.
#include <baton/core/error.h>

#include <string>
#include <utility>

#include "gpu_backend.h"
#include "gpu_backend_cudnn.h"
#include "kernels/conv.cuh"
#include "launch.cuh"

namespace baton::gpu {

namespace {

unsigned grid_for(int64_t n) { return grid_stride_blocks(n, conv::kThreads); }

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

// Which kernels a layer's passes use: the implicit GEMMs where the channel
// side of their tile holds at least kGemmMinChannels of a group's
// channels, the direct kernels otherwise (depthwise and such).
constexpr int64_t kGemmMinChannels = 8;
// backward_weights splits the sum over the output pixels until its grid
// has about kTargetBlocks blocks (two waves of an H100/H200's 132 SMs),
// each split at least kMinSplitPixels pixels.
constexpr int64_t kTargetBlocks = 264;
constexpr int64_t kMinSplitPixels = 64;
constexpr int64_t kMaxGridYZ = 65535;

int64_t tiles(int64_t n, int64_t tile) { return (n + tile - 1) / tile; }

// Whether backward_weights runs the implicit GEMM (else the direct kernel).
bool gemm_backward_weights(const conv::Shape& s) { return s.cog >= kGemmMinChannels; }

// backward_weights' pixel splits at batch n (at most the planned batch's,
// which the scratch holds).
int64_t splits_for(const conv::Shape& s, int64_t n) {
  const int64_t blocks = tiles(s.cog, conv::kTileM) * tiles(s.k, conv::kTileN) * s.groups;
  int64_t splits = tiles(kTargetBlocks, blocks);
  const int64_t by_pixels = n * s.oh * s.ow / kMinSplitPixels;
  if (splits > by_pixels) splits = by_pixels;
  if (splits > kMaxGridYZ) splits = kMaxGridYZ;
  return splits < 1 ? 1 : splits;
}

// The partial sums a layer of shape s holds (its planned batch's splits of
// every weight), or 0 where backward_weights writes dw directly: what the
// kernel allocates and what the memory plan counts.
size_t partials_bytes(const conv::Shape& s) {
  if (!gemm_backward_weights(s)) return 0;
  const int64_t splits = splits_for(s, s.n);
  return splits > 1 ? static_cast<size_t>(splits * s.c_out * s.k) * sizeof(float) : 0;
}

class GpuConv final : public ConvKernel {
 public:
  // `not_cudnn`: why these kernels run rather than cuDNN's (for describe).
  GpuConv(GpuBackend& be, const ConvShape& shape, std::string not_cudnn)
      : be_(be), s_(shape_of(shape)), not_cudnn_(std::move(not_cudnn)) {
    gemm_forward_ = s_.cog >= kGemmMinChannels;
    gemm_backward_data_ = s_.cig >= kGemmMinChannels;
    gemm_backward_weights_ = gemm_backward_weights(s_);
    if (s_.groups > kMaxGridYZ) {
      throw RuntimeError("convolution: " + std::to_string(s_.groups) +
                         " groups, more than the GPU kernels' grid holds (" +
                         std::to_string(kMaxGridYZ) + ")");
    }
    if (gemm_backward_weights_) max_splits_ = splits_for(s_, s_.n);
    if (const size_t bytes = partials_bytes(s_); bytes > 0) {
      partials_ = static_cast<float*>(be_.allocate(bytes));  // counted; planned once
    }
  }
  ~GpuConv() override { be_.release(partials_); }
  GpuConv(const GpuConv&) = delete;
  GpuConv& operator=(const GpuConv&) = delete;

  void forward(const float* x, const float* w, float* y, int64_t n) override {
    const conv::Shape s = at_batch(n);
    const int64_t pixels = s.n * s.oh * s.ow;
    if (gemm_forward_) {
      const dim3 grid(static_cast<unsigned>(tiles(pixels, conv::kTileM)),
                      static_cast<unsigned>(tiles(s.cog, conv::kTileN)),
                      static_cast<unsigned>(s.groups));
      check(launch(conv::gemm_forward_kernel, grid, dim3(conv::kThreads), 0, be_.stream(), x, w, y,
                   s),
            "convolution forward (implicit GEMM)");
    } else {
      check(launch(conv::direct_forward_kernel, dim3(grid_for(pixels * s.c_out)),
                   dim3(conv::kThreads), 0, be_.stream(), x, w, y, s),
            "convolution forward (direct)");
    }
  }

  void backward_data(const float* dy, const float* w, float* dx, int64_t n) override {
    const conv::Shape s = at_batch(n);
    const int64_t pixels = s.n * s.h * s.w;
    if (gemm_backward_data_) {
      const dim3 grid(static_cast<unsigned>(tiles(pixels, conv::kTileM)),
                      static_cast<unsigned>(tiles(s.cig, conv::kTileN)),
                      static_cast<unsigned>(s.groups));
      check(launch(conv::gemm_backward_data_kernel, grid, dim3(conv::kThreads), 0, be_.stream(), dy,
                   w, dx, s),
            "convolution backward_data (implicit GEMM)");
    } else {
      check(launch(conv::direct_backward_data_kernel, dim3(grid_for(pixels * s.c_in)),
                   dim3(conv::kThreads), 0, be_.stream(), dy, w, dx, s),
            "convolution backward_data (direct)");
    }
  }

  void backward_weights(const float* x, const float* dy, float* dw, int64_t n) override {
    const conv::Shape s = at_batch(n);
    if (!gemm_backward_weights_) {
      check(launch(conv::direct_backward_weights_kernel, dim3(grid_for(s.c_out * s.k)),
                   dim3(conv::kThreads), 0, be_.stream(), x, dy, dw, s),
            "convolution backward_weights (direct)");
      return;
    }
    // The splits depend on the shape and n alone: the same bits every run.
    const int64_t pixels = s.n * s.oh * s.ow;
    const int64_t splits = splits_for(s_, n);
    const int64_t chunk = tiles(tiles(pixels, splits), conv::kTileK) * conv::kTileK;
    const int64_t used = tiles(pixels, chunk);  // splits with pixels
    const dim3 grid(static_cast<unsigned>(tiles(s.cog, conv::kTileM) * tiles(s.k, conv::kTileN)),
                    static_cast<unsigned>(used), static_cast<unsigned>(s.groups));
    float* out = used > 1 ? partials_ : dw;
    check(launch(conv::gemm_backward_weights_kernel, grid, dim3(conv::kThreads), 0, be_.stream(), x,
                 dy, out, s, chunk),
          "convolution backward_weights (implicit GEMM)");
    if (used > 1) {
      check(launch(conv::reduce_splits_kernel, dim3(grid_for(s.c_out * s.k)), dim3(conv::kThreads),
                   0, be_.stream(), static_cast<const float*>(partials_), dw, s.c_out * s.k, used),
            "convolution backward_weights (ordered sum of the splits)");
    }
  }

  std::string describe() const override {
    const auto name = [](bool gemm) { return gemm ? "implicit GEMM 64x64" : "direct"; };
    std::string d = std::string("GPU convolution: forward ") + name(gemm_forward_) +
                    ", backward_data " + name(gemm_backward_data_) + ", backward_weights " +
                    name(gemm_backward_weights_);
    if (gemm_backward_weights_ && max_splits_ > 1) {
      d += " (up to " + std::to_string(max_splits_) + " pixel splits, summed in order)";
    }
    return d + "; not cuDNN: " + not_cudnn_;
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

  GpuBackend& be_;
  conv::Shape s_;
  std::string not_cudnn_;
  bool gemm_forward_ = false, gemm_backward_data_ = false, gemm_backward_weights_ = false;
  int64_t max_splits_ = 1;
  float* partials_ = nullptr;  // max_splits_ x (c_out, k) when max_splits_ > 1
};

}  // namespace

// ConvAlgorithm::kAuto: cuDNN (gpu_backend_cudnn.cu) where it is there and
// has deterministic algorithms for the shape; kDirect, and kAuto otherwise:
// Baton's own kernels, whose description then says why not cuDNN.
std::unique_ptr<ConvKernel> GpuBackend::plan_conv(const ConvShape& s) const {
  // Planning allocates the kernel's scratch through allocate() (counted),
  // which is not const; a plan is made outside the step, one layer at a
  // time, and allocate() itself is safe to call from any thread.
  auto& self = const_cast<GpuBackend&>(*this);
  (void)shape_of(s);  // refuses what no kernel computes, cuDNN's included
  std::string why = "conv_algorithm direct";
  if (s.algorithm == ConvAlgorithm::kAuto) {
    if (auto k = plan_cudnn_conv(self, s, &why)) return k;
  }
  return std::make_unique<GpuConv>(self, s, why);
}

int64_t GpuBackend::conv_scratch_bytes(const ConvShape& s) const {
  const conv::Shape checked = shape_of(s);
  if (s.algorithm == ConvAlgorithm::kAuto) {
    if (const int64_t bytes = cudnn_conv_scratch_bytes(*this, s); bytes >= 0) return bytes;
  }
  return static_cast<int64_t>(partials_bytes(checked));
}

}  // namespace baton::gpu
