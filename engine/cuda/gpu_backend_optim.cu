// GpuBackend's optimizer updates (kernels in kernels/optim.cuh), queued on
// stream(): one fused pass per parameter tensor.
#include <cmath>

#include "gpu_backend.h"
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

}  // namespace baton::gpu
