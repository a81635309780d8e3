// Matrix products through oneDNN's sgemm, and the thread/ISA reporting.
#include <baton/core/error.h>
#include <baton/nn/kernels.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <string>

namespace baton {

Activation parse_activation(const std::string& name) {
  if (name == "none" || name == "linear") return Activation::kNone;
  if (name == "relu") return Activation::kRelu;
  if (name == "gelu") return Activation::kGelu;
  if (name == "tanh") return Activation::kTanh;
  if (name == "gelu_tanh") return Activation::kGeluTanh;
  throw InputError("activation \"" + name + "\" is not one of none, relu, gelu, gelu_tanh, tanh");
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kNone:
      return "none";
    case Activation::kRelu:
      return "relu";
    case Activation::kGelu:
      return "gelu";
    case Activation::kTanh:
      return "tanh";
    case Activation::kGeluTanh:
      return "gelu_tanh";
    default:
      return "unset";
  }
}

namespace cpu {

namespace {

// Below this many flops a product runs on one thread: waking OpenMP workers
// costs more than they save (a 64x128x128 product is ~2 MFLOP, ~12 us).
constexpr double kParallelMinFlops = 16e6;

// Runs `fn` with the calling thread's OpenMP team limited to one thread.
template <class Fn>
dnnl_status_t single_threaded(Fn fn) {
  const int saved = omp_get_max_threads();
  if (saved == 1) return fn();
  omp_set_num_threads(1);
  const dnnl_status_t st = fn();
  omp_set_num_threads(saved);
  return st;
}

}  // namespace

void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // op(A) op(B) is an empty sum, so C = beta * C. oneDNN's sgemm leaves C
    // untouched for k == 0, which would keep stale values (e.g. the weight
    // gradient of a replica whose shard of the batch has no rows).
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
    return;
  }
  auto call = [&] {
    return dnnl_sgemm(ta == Trans::kYes ? 'T' : 'N', tb == Trans::kYes ? 'T' : 'N', m, n, k, alpha,
                      a, lda, b, ldb, beta, c, ldc);
  };
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const dnnl_status_t st = flops < kParallelMinFlops ? single_threaded(call) : call();
  if (st != dnnl_success) {
    throw RuntimeError("dnnl_sgemm failed (status " + std::to_string(static_cast<int>(st)) +
                       ") for m=" + std::to_string(m) + " n=" + std::to_string(n) +
                       " k=" + std::to_string(k));
  }
}

#if defined(__x86_64__)
// MXCSR bits: flush-to-zero (15) and denormals-are-zero (6).
constexpr unsigned kFtzDaz = 0x8040;
ScopedFlushDenormals::ScopedFlushDenormals() : saved_(_mm_getcsr()) {
  _mm_setcsr(saved_ | kFtzDaz);
}
ScopedFlushDenormals::~ScopedFlushDenormals() { _mm_setcsr(saved_); }
#else
ScopedFlushDenormals::ScopedFlushDenormals() = default;
ScopedFlushDenormals::~ScopedFlushDenormals() = default;
#endif

void set_num_threads(int threads) { omp_set_num_threads(threads < 1 ? 1 : threads); }

int num_threads() { return omp_get_max_threads(); }

const char* elementwise_isa();  // kernels_elementwise.cpp

std::string kernel_path() {
  const dnnl_version_t* v = dnnl_version();
  std::string s = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                  std::to_string(v->patch) + " sgemm (" +
                  dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa()) + ")";
  s += ", elementwise ";
  s += elementwise_isa();
  return s;
}

}  // namespace cpu
}  // namespace baton
