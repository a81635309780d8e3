// The CPU backend's convolutions: oneDNN's direct convolution primitives
// (brgconv/jit on AVX2 and AVX-512, a reference kernel elsewhere), about
// twice as fast on the ResNet's layers as im2col + sgemm, and with no
// patch matrices to hold; and, where the shape suits it and the layer's
// algorithm is kAuto, oneDNN's Winograd F(4x4, 3x3) kernels (AVX-512):
// 3x3, stride 1, no groups, 32 or more channels in and out in multiples of
// 16. Measured per layer on one core (AMD EPYC, batch 64): 32 channels at
// 16x16 and 64 at 8x8 run forward + both backward passes in about half the
// direct kernels' time, even with the layout changes below; 16 channels at
// 32x32 do not gain, so they stay direct. Winograd's products round
// differently from the direct sums (about 1e-6 relative here); kDirect
// keeps every layer direct.
//
// Activations are oneDNN's nhwc, as Baton's image rows are; the Winograd
// kernels want nChw16c, so each of their calls reorders its activations in
// and its result out (planned buffers, no allocation). The weights
// stay in Baton's plain layout (gohwi); each call reorders them into the
// blocked layout the chosen kernel wants (a few thousand floats), and
// backward_weights reorders its blocked result back.
//
// A primitive is fixed to one batch size and is tuned for the thread count
// it was made under, so plans are made on first use, per (batch, threads),
// on the thread that runs them, and kept: the steady-state step reuses
// them. Execution goes through the C API with argument arrays; oneDNN
// itself still builds a small argument map per call (library_call.h).
#include <baton/core/error.h>
#include <baton/core/library_call.h>
#include <baton/core/tensor.h>
#include <omp.h>

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "cpu_backend.h"

namespace baton {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;

// One batch size's primitives, made under one thread count.
struct Plan {
  int64_t n = 0;
  int threads = 0;
  bool blocked = false;  // the primitives take nChw16c activations (Winograd)
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_weights;
  dnnl::reorder to_fwd_weights, to_bwd_weights, from_diff_weights;
  // Blocked plans only: Baton's nhwc tensors into and out of nChw16c.
  dnnl::reorder src_in, dst_in, src_out, dst_out;
  // Handles whose data pointers are set per call: Baton's tensors (nhwc),
  // their blocked copies, the weights in each layout.
  memory src, dst, diff_src, diff_dst, src_blk, dst_blk;
  memory plain_w, fwd_w, bwd_w, diff_w, plain_dw, scratch;
  std::string impl;
};

// Whether a layer's shape is one the Winograd kernels serve and gain on.
bool suits_winograd(const ConvShape& s) {
  return s.algorithm == ConvAlgorithm::kAuto && s.kh == 3 && s.kw == 3 && s.stride == 1 &&
         s.groups == 1 && s.c_in >= 32 && s.c_out >= 32 && s.c_in % 16 == 0 && s.c_out % 16 == 0 &&
         s.oh() * s.ow() >= 16;
}

class OnednnConv final : public ConvKernel {
 public:
  explicit OnednnConv(const ConvShape& s) : s_(s), engine_(dnnl::engine::kind::cpu, 0) {
    stream_ = dnnl::stream(engine_);
  }

  void forward(const float* x, const float* w, float* y, int64_t n) override {
    Plan& p = plan_for(n);
    reorder(p.to_fwd_weights, p.plain_w, w, p.fwd_w, fwd_w_.data());
    run(p.fwd, {{DNNL_ARG_SRC, input(p, p.src_in, p.src, x, p.src_blk, src_blk_)},
                {DNNL_ARG_WEIGHTS, bind(p.fwd_w, fwd_w_.data())},
                {DNNL_ARG_DST, output(p, p.dst, y, p.dst_blk, dst_blk_)},
                {DNNL_ARG_SCRATCHPAD, bind(p.scratch, scratch_.data())}});
    if (p.blocked) reorder(p.dst_out, p.dst_blk, dst_blk_.data(), p.dst, y);
  }

  void backward_data(const float* dy, const float* w, float* dx, int64_t n) override {
    Plan& p = plan_for(n);
    reorder(p.to_bwd_weights, p.plain_w, w, p.bwd_w, bwd_w_.data());
    run(p.bwd_data, {{DNNL_ARG_DIFF_DST, input(p, p.dst_in, p.diff_dst, dy, p.dst_blk, dst_blk_)},
                     {DNNL_ARG_WEIGHTS, bind(p.bwd_w, bwd_w_.data())},
                     {DNNL_ARG_DIFF_SRC, output(p, p.diff_src, dx, p.src_blk, src_blk_)},
                     {DNNL_ARG_SCRATCHPAD, bind(p.scratch, scratch_.data())}});
    if (p.blocked) reorder(p.src_out, p.src_blk, src_blk_.data(), p.diff_src, dx);
  }

  void backward_weights(const float* x, const float* dy, float* dw, int64_t n) override {
    Plan& p = plan_for(n);
    run(p.bwd_weights,
        {{DNNL_ARG_SRC, input(p, p.src_in, p.src, x, p.src_blk, src_blk_)},
         {DNNL_ARG_DIFF_DST, input(p, p.dst_in, p.diff_dst, dy, p.dst_blk, dst_blk_)},
         {DNNL_ARG_DIFF_WEIGHTS, bind(p.diff_w, diff_w_.data())},
         {DNNL_ARG_SCRATCHPAD, bind(p.scratch, scratch_.data())}});
    reorder(p.from_diff_weights, p.diff_w, diff_w_.data(), p.plain_dw, dw);
  }

  std::string describe() const override {
    return plans_.empty() ? std::string("oneDNN convolution (not yet planned)") : plans_[0]->impl;
  }

 private:
  static void check(dnnl_status_t st, const char* what) {
    if (st != dnnl_success) {
      throw RuntimeError(std::string("oneDNN ") + what + " failed (status " +
                         std::to_string(static_cast<int>(st)) + ")");
    }
  }

  static const memory& bind(const memory& m, const void* data) {
    check(dnnl_memory_set_data_handle(m.get(), const_cast<void*>(data)), "set_data_handle");
    return m;
  }

  struct Arg {
    int id;
    const memory& m;
  };
  void run(const dnnl::primitive& prim, std::initializer_list<Arg> args) {
    dnnl_exec_arg_t a[8];
    int count = 0;
    for (const Arg& x : args) a[count++] = {x.id, x.m.get()};
    LibraryCall scope;
    check(dnnl_primitive_execute(prim.get(), stream_.get(), count, a), "convolution");
    check(dnnl_stream_wait(stream_.get()), "stream wait");
  }

  void reorder(const dnnl::reorder& r, const memory& from, const float* from_data, const memory& to,
               float* to_data) {
    run(r, {{DNNL_ARG_FROM, bind(from, from_data)}, {DNNL_ARG_TO, bind(to, to_data)}});
  }

  // An activation the primitive reads: Baton's tensor itself, or (blocked
  // plans) its copy in `blk`, made here.
  const memory& input(const Plan& p, const dnnl::reorder& in, const memory& user, const float* data,
                      const memory& blk, Tensor& buf) {
    if (!p.blocked) return bind(user, data);
    reorder(in, user, data, blk, buf.data());
    return blk;
  }
  // An activation the primitive writes: Baton's tensor, or (blocked plans)
  // `blk`, which the caller then reorders into it.
  static const memory& output(const Plan& p, const memory& user, float* data, const memory& blk,
                              Tensor& buf) {
    return p.blocked ? bind(blk, buf.data()) : bind(user, data);
  }

  Plan& plan_for(int64_t n) {
    const int threads = omp_get_max_threads();
    for (auto& p : plans_) {
      if (p->n == n && p->threads == threads) return *p;
    }
    if (n < 1 || n > s_.n) {
      throw RuntimeError("convolution: a batch of " + std::to_string(n) +
                         " images, planned for at most " + std::to_string(s_.n));
    }
    // Winograd where the shape suits it and this CPU has the kernels (its
    // primitives cannot be made otherwise: then direct).
    if (suits_winograd(s_)) {
      try {
        plans_.push_back(make_plan(n, threads, true));
        return *plans_.back();
      } catch (const dnnl::error&) {
      }
    }
    try {
      plans_.push_back(make_plan(n, threads, false));
    } catch (const dnnl::error& e) {
      throw RuntimeError(std::string("oneDNN has no convolution for this layer: ") + e.what());
    }
    return *plans_.back();
  }

  static size_t scratchpad_of(const dnnl::primitive_desc_base& fwd,
                              const dnnl::primitive_desc_base& bwd_data,
                              const dnnl::primitive_desc_base& bwd_weights) {
    return std::max({fwd.scratchpad_desc().get_size(), bwd_data.scratchpad_desc().get_size(),
                     bwd_weights.scratchpad_desc().get_size()});
  }

  std::unique_ptr<Plan> make_plan(int64_t n, int threads, bool winograd) {
    auto p = std::make_unique<Plan>();
    p->n = n;
    p->threads = threads;
    p->blocked = winograd;
    const int64_t g = s_.groups;
    const memory::desc user_src({n, s_.c_in, s_.h, s_.w}, kF32, Tag::nhwc);
    const memory::desc user_dst({n, s_.c_out, s_.oh(), s_.ow()}, kF32, Tag::nhwc);
    const Tag act = winograd ? Tag::nChw16c : Tag::nhwc;
    const memory::desc src({n, s_.c_in, s_.h, s_.w}, kF32, act);
    const memory::desc dst({n, s_.c_out, s_.oh(), s_.ow()}, kF32, act);
    const dnnl::algorithm alg =
        winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
    const memory::dims wdims = g == 1 ? memory::dims{s_.c_out, s_.c_in, s_.kh, s_.kw}
                                      : memory::dims{g, s_.c_out / g, s_.c_in / g, s_.kh, s_.kw};
    const memory::desc plain_w(wdims, kF32, g == 1 ? Tag::ohwi : Tag::gohwi);
    const memory::desc any_w(wdims, kF32, Tag::any);
    const memory::dims strides{s_.stride, s_.stride}, pad{s_.pad, s_.pad};
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

    // The operation descriptors outlive their primitive descriptors: oneDNN
    // 2.6's implementation iterator (next_impl) reads the one it was made
    // from.
    const dnnl::convolution_forward::desc fwd_op(dnnl::prop_kind::forward_training, alg, src, any_w,
                                                 dst, strides, pad, pad);
    const dnnl::convolution_backward_data::desc bwd_data_op(alg, src, any_w, dst, strides, pad,
                                                            pad);
    const dnnl::convolution_backward_weights::desc bwd_weights_op(alg, src, any_w, dst, strides,
                                                                  pad, pad);
    const dnnl::convolution_forward::primitive_desc fwd(fwd_op, attr, engine_);
    const dnnl::convolution_backward_data::primitive_desc bwd_data(bwd_data_op, attr, engine_, fwd);
    dnnl::convolution_backward_weights::primitive_desc bwd_weights(bwd_weights_op, attr, engine_,
                                                                   fwd);
    // oneDNN 2.6's strided 1x1 backward-weights kernel (jit_1x1:avx2, its
    // "reduce to unit stride" copy) writes whole SIMD blocks of input
    // channels into a scratchpad sized for the channels alone: with a
    // channel tail it runs past its buffer, and with two threads one
    // thread's copy lands in the other's (wrong, run-to-run different
    // weight gradients; a double free in the ResNet's step on an AVX2
    // machine). Such a layer takes the next implementation (the general
    // direct kernel, jit:avx2 / jit:avx512_core), on every ISA alike.
    if (s_.stride > 1 && (s_.c_in / s_.groups) % 16 != 0) {
      while (std::string(bwd_weights.impl_info_str()).rfind("jit_1x1", 0) == 0 &&
             bwd_weights.next_impl()) {
      }
    }
    p->fwd = dnnl::convolution_forward(fwd);
    p->bwd_data = dnnl::convolution_backward_data(bwd_data);
    p->bwd_weights = dnnl::convolution_backward_weights(bwd_weights);

    size_t scratch = scratchpad_of(fwd, bwd_data, bwd_weights);
    const auto reorder_of = [&](const memory::desc& a, const memory::desc& b) {
      const dnnl::reorder::primitive_desc pd(engine_, a, engine_, b, attr);
      scratch = std::max(scratch, pd.scratchpad_desc().get_size());
      return dnnl::reorder(pd);
    };
    p->to_fwd_weights = reorder_of(plain_w, fwd.weights_desc());
    p->to_bwd_weights = reorder_of(plain_w, bwd_data.weights_desc());
    p->from_diff_weights = reorder_of(bwd_weights.diff_weights_desc(), plain_w);
    if (winograd) {
      p->src_in = reorder_of(user_src, src);
      p->dst_in = reorder_of(user_dst, dst);
      p->src_out = reorder_of(src, user_src);
      p->dst_out = reorder_of(dst, user_dst);
    }

    const auto handle = [&](const memory::desc& d) { return memory(d, engine_, DNNL_MEMORY_NONE); };
    p->src = handle(user_src);
    p->diff_src = handle(user_src);
    p->dst = handle(user_dst);
    p->diff_dst = handle(user_dst);
    if (winograd) {
      p->src_blk = handle(src);
      p->dst_blk = handle(dst);
      grow(src_blk_, src.get_size());
      grow(dst_blk_, dst.get_size());
    }
    p->plain_w = handle(plain_w);
    p->plain_dw = handle(plain_w);
    p->fwd_w = handle(fwd.weights_desc());
    p->bwd_w = handle(bwd_data.weights_desc());
    p->diff_w = handle(bwd_weights.diff_weights_desc());

    grow(fwd_w_, fwd.weights_desc().get_size());
    grow(bwd_w_, bwd_data.weights_desc().get_size());
    grow(diff_w_, bwd_weights.diff_weights_desc().get_size());
    grow(scratch_, scratch);
    p->scratch = handle(memory::desc({static_cast<memory::dim>(std::max<size_t>(1, scratch))},
                                     memory::data_type::u8, Tag::x));
    p->impl = std::string("oneDNN ") + fwd.impl_info_str() + " / " + bwd_data.impl_info_str() +
              " / " + bwd_weights.impl_info_str();
    return p;
  }

  // Buffers (64-byte aligned) sized for the largest plan.
  static void grow(Tensor& buf, size_t bytes) {
    const auto floats = static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
    if (buf.numel() < floats) buf = Tensor({std::max<int64_t>(1, floats)});
  }

  ConvShape s_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<std::unique_ptr<Plan>> plans_;
  Tensor fwd_w_, bwd_w_, diff_w_, scratch_, src_blk_, dst_blk_;
};

}  // namespace

std::unique_ptr<ConvKernel> CpuBackend::plan_conv(const ConvShape& s) const {
  return std::make_unique<OnednnConv>(s);
}

}  // namespace baton
