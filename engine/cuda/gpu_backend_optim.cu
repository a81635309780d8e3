// GpuBackend's optimizer updates (kernels in kernels/optim.cuh and
// kernels/multi_tensor.cuh), queued on stream(): one fused pass per
// parameter tensor, or over lists of them (the *_many ops).
#include <cmath>

#include "gpu_backend.h"
#include "kernels/multi_tensor.cuh"
#include "kernels/optim.cuh"

namespace baton::gpu {

void GpuBackend::adam_update(float* p, const float* g, float* m, float* v, int64_t n,
                             const cpu::AdamArgs& a) const {
  // The step's scalars as the CPU computes them (adam_update in
  // kernels_elementwise_loops.inc).
  AdamOp op{p,
            g,
            m,
            v,
            a.lr / a.bias_correction1,
            1.0f / std::sqrt(a.bias_correction2),
            1.0f - a.lr * a.decoupled_wd,
            a.beta1,
            a.beta2,
            1.0f - a.beta1,
            1.0f - a.beta2,
            a.l2_wd,
            a.eps};
  const bool vec = aligned16(p) && aligned16(g) && aligned16(m) && aligned16(v);
  check(launch_map(op, n, vec, stream_), "adam_update");
}

void GpuBackend::sgd_update(float* p, const float* g, float* buf, int64_t n, float lr,
                            float momentum, float weight_decay, bool nesterov) const {
  if (buf == nullptr) {
    const bool vec = aligned16(p) && aligned16(g);
    check(launch_map(SgdOp{p, g, lr, weight_decay}, n, vec, stream_), "sgd_update");
    return;
  }
  const bool vec = aligned16(p) && aligned16(g) && aligned16(buf);
  check(launch_map(SgdMomentumOp{p, g, buf, lr, momentum, weight_decay, nesterov ? 1 : 0}, n, vec,
                   stream_),
        "sgd_update");
}

namespace {

int64_t chunks_of(int64_t n) { return (n + multi::kChunk - 1) / multi::kChunk; }

// Calls launch_list(list, first) for each list of the slots' chunks in
// order (tensors of no elements left out; a tensor may span two lists),
// `first` the number of chunks in the lists before. Returns the chunk count.
template <class LaunchList>
int64_t for_each_list(const std::vector<Backend::ParamSlot>& slots, LaunchList&& launch_list) {
  multi::TensorList l{};
  int tensors = 0;
  int64_t done = 0;
  const auto flush = [&] {
    launch_list(l, done);
    done += l.chunks;
    l.chunks = 0;
    tensors = 0;
  };
  for (const Backend::ParamSlot& s : slots) {
    if (s.n <= 0) continue;
    const int64_t chunks = chunks_of(s.n);
    for (int64_t c = 0; c < chunks; ++c) {
      if (c == 0 || tensors == 0) {  // the tensor's first chunk in this list
        l.value[tensors] = s.value;
        l.grad[tensors] = s.grad;
        l.m[tensors] = s.m;
        l.v[tensors] = s.v;
        l.n[tensors] = s.n;
        l.weight_decay[tensors] = s.weight_decay;
        ++tensors;
      }
      l.chunk_tensor[l.chunks] = tensors - 1;
      l.chunk_index[l.chunks] = static_cast<int32_t>(c);
      ++l.chunks;
      if (l.chunks == multi::kListChunks || (tensors == multi::kListTensors && c == chunks - 1))
        flush();
    }
  }
  if (l.chunks > 0) flush();
  return done;
}

}  // namespace

double GpuBackend::clip_grad_norm(const std::vector<ParamSlot>& slots, float max_norm) const {
  int64_t total = 0;
  for (const ParamSlot& s : slots)
    if (s.n > 0) total += chunks_of(s.n);
  if (total == 0) return 0.0;
  // Each chunk's sum of squares, then their total and the clipping factor
  // (partial[total], partial[total + 1]), all on the device; the factor
  // scales the gradients there too, and only the total comes back.
  double* partial = partials(total + 2);
  for_each_list(slots, [&](const multi::TensorList& l, int64_t first) {
    check(launch(multi::grad_squares_kernel, dim3(static_cast<unsigned>(l.chunks)),
                 dim3(multi::kThreads), 0, stream_, l, partial, first),
          "clip_grad_norm (squares)");
  });
  check(launch(multi::clip_factor_kernel, dim3(1), dim3(multi::kThreads), 0, stream_, partial,
               total, max_norm),
        "clip_grad_norm (factor)");
  if (max_norm > 0.0f) {
    const double* factor = partial + total + 1;
    for_each_list(slots, [&](const multi::TensorList& l, int64_t) {
      check(launch(multi::scale_grads_kernel, dim3(static_cast<unsigned>(l.chunks)),
                   dim3(multi::kThreads), 0, stream_, l, factor),
            "clip_grad_norm (scale)");
    });
  }
  check(cudaMemcpyAsync(host_partials_, partial + total, sizeof(double), cudaMemcpyDeviceToHost,
                        stream_),
        "clip_grad_norm (cudaMemcpyAsync device to host)");
  check(cudaStreamSynchronize(stream_), "clip_grad_norm (cudaStreamSynchronize)");
  return std::sqrt(host_partials_[0]);
}

void GpuBackend::adam_update_many(const std::vector<ParamSlot>& slots, const cpu::AdamArgs& a,
                                  bool decoupled) const {
  // The scalars as adam_update (and the CPU) computes them.
  const multi::AdamScalars s{a.lr,
                             a.lr / a.bias_correction1,
                             1.0f / std::sqrt(a.bias_correction2),
                             a.beta1,
                             a.beta2,
                             1.0f - a.beta1,
                             1.0f - a.beta2,
                             a.eps,
                             decoupled ? 1 : 0};
  for_each_list(slots, [&](const multi::TensorList& l, int64_t) {
    check(launch(multi::adam_kernel, dim3(static_cast<unsigned>(l.chunks)), dim3(multi::kThreads),
                 0, stream_, l, s),
          "adam_update_many");
  });
}

void GpuBackend::sgd_update_many(const std::vector<ParamSlot>& slots, float lr, float momentum,
                                 bool nesterov) const {
  for_each_list(slots, [&](const multi::TensorList& l, int64_t) {
    check(launch(multi::sgd_kernel, dim3(static_cast<unsigned>(l.chunks)), dim3(multi::kThreads),
                 0, stream_, l, lr, momentum, nesterov ? 1 : 0),
          "sgd_update_many");
  });
}

}  // namespace baton::gpu
