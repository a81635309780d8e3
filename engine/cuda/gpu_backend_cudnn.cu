// GpuBackend's convolutions through cuDNN 9's convolution API, with the
// contract of ConvKernel (backend.h): channels-last images are NHWC
// tensors, w (c_out, kh * kw * c_in / groups) in (ky, kx, channel) order is
// an NHWC (KRSC) filter, cross-correlation, groups through the group count.
// Algorithms are chosen once, at plan time, by timing them: cuDNN's Find
// (cudnnFind*AlgorithmEx) runs every algorithm of each pass at the planned
// batch on trial buffers (allocated for the search and freed after it,
// never in a step), and the plan takes, by pick_timed (timed_choice.h), the
// fastest that is deterministic (with the same algorithms, backward_weights
// gives the same bits call after call, as Baton's kernels do; another run's
// Find may time another algorithm fastest, whose bits differ), whose
// workspace fits a layer's
// share (kMaxWorkspaceBytes), and in fp32 precision that does not use
// tensor cores (FMA math: no TF32 rounding). A plan is made per backend,
// so each replica times its own; the layer's description names what was
// taken. The workspace comes from the backend's allocate() (the arena) at
// plan time, and cudnn_conv_scratch_bytes tells the memory plan the same
// figure.
#include <baton/core/error.h>
#include <baton/nn/timed_choice.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cudnn_loader.h"
#include "gpu_backend.h"
#include "gpu_backend_cudnn.h"

namespace baton::gpu {

// The algorithms of one layer, and their workspace at the planned batch.
struct ConvChoice {
  cudnnConvolutionFwdAlgo_t forward{};
  cudnnConvolutionBwdDataAlgo_t backward_data{};
  cudnnConvolutionBwdFilterAlgo_t backward_filter{};
  size_t workspace = 0;  // the largest of the three
  std::string why;       // empty: chosen
};

// Choices per layer shape (all of ConvShape but the algorithm; the
// precision is the backend's), made once.
struct GpuBackend::ConvChoices {
  std::mutex mutex;
  std::map<std::array<int64_t, 10>, ConvChoice> made;
};

void GpuBackend::ConvChoicesDeleter::operator()(ConvChoices* p) const { delete p; }

GpuBackend::ConvChoices& GpuBackend::conv_choices() const {
  std::call_once(conv_choices_once_, [this] { conv_choices_.reset(new ConvChoices); });
  return *conv_choices_;
}

namespace {

using baton_cuda::CudnnFns;

// Why a choice was not made when Find's trial buffers did not fit: a
// passing shortage, so that choice is not kept.
constexpr const char* kNoRoomForTrials = "the device has no room for cuDNN Find's trial buffers";

// The most workspace one layer's algorithms may hold (each layer holds its
// own: the memory plan counts it).
constexpr size_t kMaxWorkspaceBytes = size_t{16} << 20;

void check_dnn(const CudnnFns& f, cudnnStatus_t st, const char* what) {
  if (st != CUDNN_STATUS_SUCCESS) {
    throw RuntimeError(std::string("cuDNN: ") + what + " failed: " + f.GetErrorString(st));
  }
}

const char* forward_name(cudnnConvolutionFwdAlgo_t a) {
  static const char* const kNames[] = {
      "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
      "WINOGRAD",      "WINOGRAD_NONFUSED"};
  const int i = static_cast<int>(a);
  return i >= 0 && i < 8 ? kNames[i] : "?";
}
const char* backward_data_name(cudnnConvolutionBwdDataAlgo_t a) {
  static const char* const kNames[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                       "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  const int i = static_cast<int>(a);
  return i >= 0 && i < 6 ? kNames[i] : "?";
}
const char* backward_filter_name(cudnnConvolutionBwdFilterAlgo_t a) {
  static const char* const kNames[] = {
      "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  const int i = static_cast<int>(a);
  return i >= 0 && i < 7 ? kNames[i] : "?";
}

// The descriptors of one layer: x and y at the batch of the last call (set
// again when it changes), the filter, and the convolution.
class Descriptors {
 public:
  Descriptors(const CudnnFns& f, const ConvShape& s, Precision precision) : f_(f), s_(s) {
    try {
      check_dnn(f_, f_.CreateTensorDescriptor(&x_), "cudnnCreateTensorDescriptor");
      check_dnn(f_, f_.CreateTensorDescriptor(&y_), "cudnnCreateTensorDescriptor");
      check_dnn(f_, f_.CreateFilterDescriptor(&w_), "cudnnCreateFilterDescriptor");
      check_dnn(f_, f_.CreateConvolutionDescriptor(&conv_), "cudnnCreateConvolutionDescriptor");
      check_dnn(f_,
                f_.SetFilter4dDescriptor(w_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, to_int(s.c_out),
                                         to_int(s.c_in / s.groups), to_int(s.kh), to_int(s.kw)),
                "cudnnSetFilter4dDescriptor");
      check_dnn(f_,
                f_.SetConvolution2dDescriptor(conv_, to_int(s.pad), to_int(s.pad), to_int(s.stride),
                                              to_int(s.stride), 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT),
                "cudnnSetConvolution2dDescriptor");
      check_dnn(f_, f_.SetConvolutionGroupCount(conv_, to_int(s.groups)),
                "cudnnSetConvolutionGroupCount");
      // fp32: no tensor cores (TF32 would round the operands); otherwise
      // cuDNN may use them (TF32 for float data).
      check_dnn(f_,
                f_.SetConvolutionMathType(
                    conv_, precision == Precision::kFp32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH),
                "cudnnSetConvolutionMathType");
      set_batch(s.n);
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~Descriptors() { destroy(); }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;

  void set_batch(int64_t n) {
    if (n == n_) return;
    check_dnn(f_,
              f_.SetTensor4dDescriptor(x_, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, to_int(n),
                                       to_int(s_.c_in), to_int(s_.h), to_int(s_.w)),
              "cudnnSetTensor4dDescriptor (x)");
    check_dnn(f_,
              f_.SetTensor4dDescriptor(y_, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, to_int(n),
                                       to_int(s_.c_out), to_int(s_.oh()), to_int(s_.ow())),
              "cudnnSetTensor4dDescriptor (y)");
    n_ = n;
  }

  cudnnTensorDescriptor_t x() const { return x_; }
  cudnnTensorDescriptor_t y() const { return y_; }
  cudnnFilterDescriptor_t w() const { return w_; }
  cudnnConvolutionDescriptor_t conv() const { return conv_; }

 private:
  static int to_int(int64_t v) {
    if (v > INT32_MAX) throw RuntimeError("cuDNN: a convolution dimension past 2^31");
    return static_cast<int>(v);
  }
  void destroy() {
    if (conv_ != nullptr) (void)f_.DestroyConvolutionDescriptor(conv_);
    if (w_ != nullptr) (void)f_.DestroyFilterDescriptor(w_);
    if (y_ != nullptr) (void)f_.DestroyTensorDescriptor(y_);
    if (x_ != nullptr) (void)f_.DestroyTensorDescriptor(x_);
    conv_ = nullptr;
    w_ = nullptr;
    y_ = nullptr;
    x_ = nullptr;
  }

  const CudnnFns& f_;
  ConvShape s_;
  int64_t n_ = -1;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
};

// A device buffer for Find's trial runs, zeroed on the stream, on the
// current device (plan() makes the backend's current): plan time only
// (cudaMalloc outside the arena, freed once the choice is made). ok() false
// where the device has no room, the error cleared.
class TrialBuffer {
 public:
  TrialBuffer(size_t bytes, cudaStream_t stream) {
    if (bytes == 0) return;
    if (cudaMalloc(&p_, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      p_ = nullptr;
      ok_ = false;
      return;
    }
    if (cudaMemsetAsync(p_, 0, bytes, stream) != cudaSuccess) {
      (void)cudaGetLastError();
      (void)cudaFree(p_);
      p_ = nullptr;
      ok_ = false;
    }
  }
  ~TrialBuffer() {
    if (p_ != nullptr) (void)cudaFree(p_);
  }
  TrialBuffer(const TrialBuffer&) = delete;
  TrialBuffer& operator=(const TrialBuffer&) = delete;
  void* get() const { return p_; }
  bool ok() const { return ok_; }

 private:
  void* p_ = nullptr;
  bool ok_ = true;
};

// Whether the plan may take an algorithm Find reported: it ran, it is
// deterministic, its workspace fits a layer's share, and in fp32 it does
// not use tensor cores.
template <class Perf>
bool usable(const Perf& p, bool fp32) {
  if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC) return false;
  if (p.memory > kMaxWorkspaceBytes) return false;
  return !(fp32 && (p.mathType == CUDNN_TENSOR_OP_MATH ||
                    p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION));
}

// One pass's choice: Find's results (`find`: the pass's
// cudnnFind*AlgorithmEx on the trial buffers), the one pick_timed takes,
// and its workspace (`size`: the pass's cudnnGet*WorkspaceSize, which the
// step checks against the plan). False, with c.why, when none is usable.
template <class Perf, int kCount, class Algo, class Find, class Size>
bool choose_pass(const CudnnFns& f, bool fp32, const char* pass, Find find, Size size, Algo* algo,
                 ConvChoice& c) {
  Perf r[kCount];
  int count = 0;
  check_dnn(f, find(kCount, &count, r), "cudnnFind*AlgorithmEx");
  std::vector<TimedCandidate> candidates;
  for (int i = 0; i < count; ++i) {
    candidates.push_back({r[i].status == CUDNN_STATUS_SUCCESS ? double{r[i].time} : -1.0,
                          r[i].memory, usable(r[i], fp32)});
  }
  const int i = pick_timed(candidates);
  if (i < 0) {
    c.why = std::string("cuDNN has no deterministic ") + pass + " algorithm for this layer";
    return false;
  }
  *algo = r[i].algo;
  size_t bytes = 0;
  check_dnn(f, size(r[i].algo, &bytes), "cudnnGetConvolution*WorkspaceSize");
  c.workspace = std::max({c.workspace, bytes, r[i].memory});
  return true;
}

// The most workspace any algorithm of the three passes asks for here within
// a layer's share: Find's trials get that much.
size_t trial_workspace(const CudnnFns& f, cudnnHandle_t h, const Descriptors& d) {
  size_t most = 0;
  // The size is read after the call has written it.
  const auto take = [&most](cudnnStatus_t st, const size_t& bytes) {
    if (st == CUDNN_STATUS_SUCCESS && bytes <= kMaxWorkspaceBytes) most = std::max(most, bytes);
  };
  for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
    size_t b = 0;
    const cudnnStatus_t st = f.GetConvolutionForwardWorkspaceSize(
        h, d.x(), d.w(), d.conv(), d.y(), static_cast<cudnnConvolutionFwdAlgo_t>(a), &b);
    take(st, b);
  }
  for (int a = 0; a < CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT; ++a) {
    size_t b = 0;
    const cudnnStatus_t st = f.GetConvolutionBackwardDataWorkspaceSize(
        h, d.w(), d.y(), d.conv(), d.x(), static_cast<cudnnConvolutionBwdDataAlgo_t>(a), &b);
    take(st, b);
  }
  for (int a = 0; a < CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT; ++a) {
    size_t b = 0;
    const cudnnStatus_t st = f.GetConvolutionBackwardFilterWorkspaceSize(
        h, d.x(), d.y(), d.conv(), d.w(), static_cast<cudnnConvolutionBwdFilterAlgo_t>(a), &b);
    take(st, b);
  }
  return most;
}

ConvChoice choose(const CudnnFns& f, cudnnHandle_t h, cudaStream_t stream, const ConvShape& s,
                  const Descriptors& d, bool fp32) {
  ConvChoice c;
  const size_t fl = sizeof(float);
  const TrialBuffer x(static_cast<size_t>(s.n * s.h * s.w * s.c_in) * fl, stream);
  const TrialBuffer w(static_cast<size_t>(s.c_out * s.kh * s.kw * (s.c_in / s.groups)) * fl,
                      stream);
  const TrialBuffer y(static_cast<size_t>(s.n * s.oh() * s.ow() * s.c_out) * fl, stream);
  const size_t ws_bytes = trial_workspace(f, h, d);
  const TrialBuffer ws(ws_bytes, stream);
  if (!x.ok() || !w.ok() || !y.ok() || !ws.ok()) {
    c.why = kNoRoomForTrials;
    return c;
  }
  // The passes in turn; the first with none usable ends it, c.why saying which.
  if (!choose_pass<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
          f, fp32, "forward",
          [&](int want, int* got, cudnnConvolutionFwdAlgoPerf_t* r) {
            return f.FindConvolutionForwardAlgorithmEx(h, d.x(), x.get(), d.w(), w.get(), d.conv(),
                                                       d.y(), y.get(), want, got, r, ws.get(),
                                                       ws_bytes);
          },
          [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
            return f.GetConvolutionForwardWorkspaceSize(h, d.x(), d.w(), d.conv(), d.y(), a, bytes);
          },
          &c.forward, c))
    return c;
  if (!choose_pass<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
          f, fp32, "backward-data",
          [&](int want, int* got, cudnnConvolutionBwdDataAlgoPerf_t* r) {
            return f.FindConvolutionBackwardDataAlgorithmEx(h, d.w(), w.get(), d.y(), y.get(),
                                                            d.conv(), d.x(), x.get(), want, got, r,
                                                            ws.get(), ws_bytes);
          },
          [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
            return f.GetConvolutionBackwardDataWorkspaceSize(h, d.w(), d.y(), d.conv(), d.x(), a,
                                                             bytes);
          },
          &c.backward_data, c))
    return c;
  choose_pass<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
      f, fp32, "backward-filter",
      [&](int want, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* r) {
        return f.FindConvolutionBackwardFilterAlgorithmEx(h, d.x(), x.get(), d.y(), y.get(),
                                                          d.conv(), d.w(), w.get(), want, got, r,
                                                          ws.get(), ws_bytes);
      },
      [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
        return f.GetConvolutionBackwardFilterWorkspaceSize(h, d.x(), d.y(), d.conv(), d.w(), a,
                                                           bytes);
      },
      &c.backward_filter, c);
  return c;
}

class CudnnConv final : public ConvKernel {
 public:
  CudnnConv(GpuBackend& be, const CudnnFns& f, cudnnHandle_t h, const ConvShape& s,
            std::unique_ptr<Descriptors> d, const ConvChoice& c)
      : be_(be), f_(f), h_(h), s_(s), d_(std::move(d)), c_(c) {
    if (c_.workspace > 0) workspace_ = be_.allocate(c_.workspace);  // counted; planned once
  }
  ~CudnnConv() override { be_.release(workspace_); }
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  void forward(const float* x, const float* w, float* y, int64_t n) override {
    run(
        n, "forward",
        [&](size_t* bytes) {
          return f_.GetConvolutionForwardWorkspaceSize(h_, d_->x(), d_->w(), d_->conv(), d_->y(),
                                                       c_.forward, bytes);
        },
        [&](const float* one, const float* zero) {
          return f_.ConvolutionForward(h_, one, d_->x(), x, d_->w(), w, d_->conv(), c_.forward,
                                       workspace_, c_.workspace, zero, d_->y(), y);
        });
  }

  void backward_data(const float* dy, const float* w, float* dx, int64_t n) override {
    run(
        n, "backward_data",
        [&](size_t* bytes) {
          return f_.GetConvolutionBackwardDataWorkspaceSize(h_, d_->w(), d_->y(), d_->conv(),
                                                            d_->x(), c_.backward_data, bytes);
        },
        [&](const float* one, const float* zero) {
          return f_.ConvolutionBackwardData(h_, one, d_->w(), w, d_->y(), dy, d_->conv(),
                                            c_.backward_data, workspace_, c_.workspace, zero,
                                            d_->x(), dx);
        });
  }

  void backward_weights(const float* x, const float* dy, float* dw, int64_t n) override {
    run(
        n, "backward_weights",
        [&](size_t* bytes) {
          return f_.GetConvolutionBackwardFilterWorkspaceSize(h_, d_->x(), d_->y(), d_->conv(),
                                                              d_->w(), c_.backward_filter, bytes);
        },
        [&](const float* one, const float* zero) {
          return f_.ConvolutionBackwardFilter(h_, one, d_->x(), x, d_->y(), dy, d_->conv(),
                                              c_.backward_filter, workspace_, c_.workspace, zero,
                                              d_->w(), dw);
        });
  }

  std::string describe() const override {
    const int v = static_cast<int>(f_.GetVersion());
    return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) +
           " convolution, algorithms timed by Find at plan time: forward " +
           forward_name(c_.forward) + ", backward_data " + backward_data_name(c_.backward_data) +
           ", backward_weights " + backward_filter_name(c_.backward_filter) + " (deterministic)";
  }

 private:
  void at_batch(int64_t n) {
    if (n < 1 || n > s_.n) {
      throw RuntimeError("convolution: a batch of " + std::to_string(n) +
                         " images, planned for at most " + std::to_string(s_.n));
    }
    d_->set_batch(n);
  }
  // One pass at batch n: the descriptors at n, its algorithm's workspace
  // at n within the planned one (`size`), then the call (`call(alpha,
  // beta)`: 1 and 0, overwriting the output).
  template <class Size, class Call>
  void run(int64_t n, const char* pass, Size size, Call call) {
    at_batch(n);
    size_t bytes = 0;
    check_dnn(f_, size(&bytes), "cudnnGetConvolution*WorkspaceSize");
    fits(bytes, pass);
    const float one = 1.0f, zero = 0.0f;
    check_dnn(f_, call(&one, &zero), pass);
  }
  void fits(size_t bytes, const char* pass) const {
    if (bytes > c_.workspace) {
      throw RuntimeError(std::string("cuDNN: the ") + pass + " algorithm wants " +
                         std::to_string(bytes) + " bytes of workspace at this batch, more than " +
                         "the " + std::to_string(c_.workspace) + " planned");
    }
  }

  GpuBackend& be_;
  const CudnnFns& f_;
  cudnnHandle_t h_;
  ConvShape s_;
  std::unique_ptr<Descriptors> d_;
  ConvChoice c_;
  void* workspace_ = nullptr;
};

// The handle and the layer's descriptors and choice, or null with *why.
struct Planned {
  const CudnnFns* f = nullptr;
  cudnnHandle_t h = nullptr;
  std::unique_ptr<Descriptors> d;
  ConvChoice c;
};

Planned plan(const GpuBackend& be, const ConvShape& s, std::string* why) {
  Planned p;
  std::string reason;
  p.h = be.cudnn(&reason);
  if (p.h == nullptr) {
    if (why != nullptr) *why = reason;
    return p;
  }
  p.f = baton_cuda::load_cudnn(nullptr);
  p.d = std::make_unique<Descriptors>(*p.f, s, be.precision());
  GpuBackend::ConvChoices& cache = be.conv_choices();
  const std::array<int64_t, 10> key{s.n,  s.h,  s.w,      s.c_in, s.c_out,
                                    s.kh, s.kw, s.stride, s.pad,  s.groups};
  {
    const std::lock_guard<std::mutex> lock(cache.mutex);
    const auto found = cache.made.find(key);
    if (found != cache.made.end()) {
      p.c = found->second;
    } else {
      check(cudaSetDevice(be.device_index()), "cudaSetDevice (cuDNN's Find)");
      p.c = choose(*p.f, p.h, be.stream(), s, *p.d, be.precision() == Precision::kFp32);
      if (p.c.why != kNoRoomForTrials) cache.made.emplace(key, p.c);
    }
  }
  if (!p.c.why.empty()) {
    if (why != nullptr) *why = p.c.why;
    p.h = nullptr;
  }
  return p;
}

}  // namespace

std::unique_ptr<ConvKernel> plan_cudnn_conv(GpuBackend& be, const ConvShape& s, std::string* why) {
  Planned p = plan(be, s, why);
  if (p.h == nullptr) return nullptr;
  return std::make_unique<CudnnConv>(be, *p.f, p.h, s, std::move(p.d), p.c);
}

int64_t cudnn_conv_scratch_bytes(const GpuBackend& be, const ConvShape& s) {
  const Planned p = plan(be, s, nullptr);
  return p.h == nullptr ? -1 : static_cast<int64_t>(p.c.workspace);
}

cudnnHandle_t GpuBackend::cudnn(std::string* why) const {
  std::call_once(cudnn_once_, [this] {
    std::string reason;
    const CudnnFns* f = baton_cuda::load_cudnn(&reason);
    if (f == nullptr) {
      cudnn_why_ = reason;
      return;
    }
    cudnnHandle_t h = nullptr;
    if (cudaSetDevice(device_) != cudaSuccess) {
      cudnn_why_ = "cudaSetDevice failed before cudnnCreate";
      return;
    }
    if (const cudnnStatus_t st = f->Create(&h); st != CUDNN_STATUS_SUCCESS) {
      cudnn_why_ = std::string("cudnnCreate failed: ") + f->GetErrorString(st);
      return;
    }
    if (const cudnnStatus_t st = f->SetStream(h, stream_); st != CUDNN_STATUS_SUCCESS) {
      cudnn_why_ = std::string("cudnnSetStream failed: ") + f->GetErrorString(st);
      (void)f->Destroy(h);
      return;
    }
    cudnn_ = h;
  });
  if (cudnn_ == nullptr && why != nullptr) *why = cudnn_why_;
  return cudnn_;
}

void GpuBackend::release_cudnn() {
  if (cudnn_ != nullptr) (void)baton_cuda::load_cudnn(nullptr)->Destroy(cudnn_);
  cudnn_ = nullptr;
}

}  // namespace baton::gpu
