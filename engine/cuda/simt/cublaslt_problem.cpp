// The cuBLASLt stand-in's checks and its reference product: the problem a
// product poses (types, layouts, epilogues) checked as cuBLASLt documents,
// the algorithm the heuristic hands out (with the alignment it needs), and
// the product itself in plain loops, run in stream order.
#include "cublaslt_stand_in.h"

namespace baton::simt::lt {

cublasStatus_t refuse(cublasStatus_t st, const char* where, const std::string& why) {
  const char* level = std::getenv("CUBLASLT_LOG_LEVEL");
  if (level != nullptr && std::atoi(level) >= 1)
    std::fprintf(stderr, "[cuBLASLt stand-in][%s] %s: %s\n", where, cublasLtGetStatusName(st),
                 why.c_str());
  return st;
}

size_t type_size(int32_t t) {
  switch (t) {
    case CUDA_R_32F:
      return 4;
    case CUDA_R_16BF:
    case CUDA_R_16F:
      return 2;
    case CUDA_R_64F:
      return 8;
    case CUDA_R_8I:
      return 1;
    default:
      return 0;
  }
}

int64_t pow2_divisor(uint64_t v, int64_t cap) {
  if (v == 0) return cap;
  int64_t a = 1;
  while (a < cap && v % static_cast<uint64_t>(a * 2) == 0) a *= 2;
  return a;
}

int64_t address_alignment(const void* p) {
  return pow2_divisor(reinterpret_cast<uintptr_t>(p), 256);
}

// ---- the problem, checked once for the heuristic and for the product

bool epilogue_known(uint32_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_RELU:
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_RELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX:
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_DGELU_BGRAD:
    case CUBLASLT_EPILOGUE_BGRADA:
    case CUBLASLT_EPILOGUE_BGRADB:
      return true;
    default:
      return false;
  }
}
bool epi_has_bias_input(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool epi_writes_bias(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADA ||
         e == CUBLASLT_EPILOGUE_BGRADB;
}
bool epi_uses_aux(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

const char* op_name(int32_t t) { return t == CUBLAS_OP_N ? "N" : "T"; }

cublasStatus_t check_layout(const Layout* l, const char* name, const char* where) {
  if (l == nullptr || l->magic != kLayoutMagic)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, where,
                  std::string(name) + "desc is null or not a layout descriptor");
  if (l->order != CUBLASLT_ORDER_COL)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, where,
                  std::string(name) + ": only CUBLASLT_ORDER_COL is modelled by the stand-in");
  if (l->rows == 0 || l->cols == 0)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, where,
                  std::string(name) + " is empty (" + std::to_string(l->rows) + " x " +
                      std::to_string(l->cols) + ")");
  if (l->ld < static_cast<int64_t>(l->rows))
    return refuse(
        CUBLAS_STATUS_INVALID_VALUE, where,
        std::string(name) + ": ld " + std::to_string(l->ld) + " < rows " + std::to_string(l->rows));
  if (l->batch < 1 || l->stride < 0)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, where,
                  std::string(name) + ": batch count < 1 or negative batch stride");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t make_problem(const MatmulDesc* desc, const Layout* a, const Layout* b,
                            const Layout* c, const Layout* d, const char* where, Problem* p) {
  if (desc == nullptr || desc->magic != kDescMagic)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, where, "computeDesc is not a matmul descriptor");
  for (auto [l, name] : {std::pair{a, "A"}, {b, "B"}, {c, "C"}, {d, "D"}})
    if (cublasStatus_t st = check_layout(l, name, where); st != CUBLAS_STATUS_SUCCESS) return st;
  p->a = *a;
  p->b = *b;
  p->c = *c;
  p->d = *d;
  p->compute = desc->compute;
  p->a_type = a->type;
  p->b_type = b->type;
  p->c_type = c->type;
  p->d_type = d->type;
  // Supported combinations (the subset of cublasLtMatmul()'s table modelled).
  const bool f32 = a->type == CUDA_R_32F && b->type == CUDA_R_32F && c->type == CUDA_R_32F &&
                   d->type == CUDA_R_32F;
  const bool bf16 = a->type == CUDA_R_16BF && b->type == CUDA_R_16BF &&
                    (c->type == CUDA_R_32F || c->type == CUDA_R_16BF) && d->type == c->type;
  bool ok = false;
  if (desc->scale == CUDA_R_32F) {
    if (desc->compute == CUBLAS_COMPUTE_32F) ok = f32 || bf16;
    if (desc->compute == CUBLAS_COMPUTE_32F_FAST_TF32) ok = f32;
  }
  if (!ok)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, where,
                  "unsupported combination: compute " + std::to_string(desc->compute) + ", scale " +
                      std::to_string(desc->scale) + ", A/B/C/D types " + std::to_string(a->type) +
                      "/" + std::to_string(b->type) + "/" + std::to_string(c->type) + "/" +
                      std::to_string(d->type));
  if (desc->trans_c != CUBLAS_OP_N)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, where, "TRANSC must be CUBLAS_OP_N");
  for (int32_t t : {desc->trans_a, desc->trans_b})
    if (t != CUBLAS_OP_N && t != CUBLAS_OP_T && t != CUBLAS_OP_C)
      return refuse(CUBLAS_STATUS_INVALID_VALUE, where, "TRANSA/TRANSB not a cublasOperation_t");
  p->ta = desc->trans_a != CUBLAS_OP_N;
  p->tb = desc->trans_b != CUBLAS_OP_N;
  const int64_t m = static_cast<int64_t>(p->ta ? a->cols : a->rows);
  const int64_t ka = static_cast<int64_t>(p->ta ? a->rows : a->cols);
  const int64_t kb = static_cast<int64_t>(p->tb ? b->cols : b->rows);
  const int64_t n = static_cast<int64_t>(p->tb ? b->rows : b->cols);
  if (ka != kb || static_cast<int64_t>(d->rows) != m || static_cast<int64_t>(d->cols) != n ||
      c->rows != d->rows || c->cols != d->cols)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, where,
                  std::string("shapes do not agree: op") + op_name(desc->trans_a) + "(A) " +
                      std::to_string(m) + "x" + std::to_string(ka) + ", op" +
                      op_name(desc->trans_b) + "(B) " + std::to_string(kb) + "x" +
                      std::to_string(n) + ", C " + std::to_string(c->rows) + "x" +
                      std::to_string(c->cols) + ", D " + std::to_string(d->rows) + "x" +
                      std::to_string(d->cols));
  if (a->batch != b->batch || a->batch != c->batch || a->batch != d->batch)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, where, "batch counts of A, B, C, D differ");
  p->m = m;
  p->n = n;
  p->k = ka;
  p->batch = a->batch;
  const uint32_t e = desc->epilogue;
  if (!epilogue_known(e))
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, where,
                  "epilogue " + std::to_string(e) + " is not modelled by the stand-in");
  p->epilogue = e;
  p->bias_type = desc->bias_type == -1 ? d->type : desc->bias_type;
  if (p->bias_type != d->type && p->bias_type != CUDA_R_32F)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, where, "bias type is neither D's type nor float");
  p->aux_type = desc->aux_type == -1 ? d->type : desc->aux_type;
  if (p->aux_type != d->type)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, where, "GELU aux type must be D's type");
  p->bias_len = e == CUBLASLT_EPILOGUE_BGRADB ? n : m;
  if ((epi_has_bias_input(e) || epi_writes_bias(e)) && desc->bias == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, where, "the epilogue needs BIAS_POINTER");
  if (epi_uses_aux(e)) {
    if (desc->aux == nullptr)
      return refuse(CUBLAS_STATUS_INVALID_VALUE, where, "the epilogue needs EPILOGUE_AUX_POINTER");
    if (desc->aux_ld < m || desc->aux_ld % 8 != 0)
      return refuse(CUBLAS_STATUS_INVALID_VALUE, where,
                    "EPILOGUE_AUX_LD " + std::to_string(desc->aux_ld) + " must be >= rows of D (" +
                        std::to_string(m) + ") and divisible by 8");
    if (desc->aux_batch_stride % 8 != 0 || desc->aux_batch_stride < 0)
      return refuse(CUBLAS_STATUS_INVALID_VALUE, where,
                    "EPILOGUE_AUX_BATCH_STRIDE must be divisible by 8");
  }
  return CUBLAS_STATUS_SUCCESS;
}

// Bytes from the first element a column-major layout touches to past its last.
size_t layout_bytes(const Layout& l) {
  const uint64_t elems = static_cast<uint64_t>(l.batch - 1) * static_cast<uint64_t>(l.stride) +
                         (l.cols - 1) * static_cast<uint64_t>(l.ld) + l.rows;
  return elems * type_size(l.type);
}

// The alignment an algorithm found for matrix `l` needs, given the
// preference's promise `promised`.
int64_t needed_alignment(const Layout& l, uint32_t promised) {
  const int64_t es = static_cast<int64_t>(type_size(l.type));
  int64_t need = std::min<int64_t>(promised, kVector);
  need = std::min(need, pow2_divisor(static_cast<uint64_t>(l.ld) * es, kVector));
  if (l.batch > 1)
    need = std::min(need, pow2_divisor(static_cast<uint64_t>(l.stride) * es, kVector));
  return std::max(need, es);
}

uint64_t fingerprint(const Problem& p) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t v :
       {uint64_t(p.compute), uint64_t(p.a_type), uint64_t(p.b_type), uint64_t(p.c_type),
        uint64_t(p.d_type), uint64_t(p.epilogue), uint64_t(p.ta), uint64_t(p.tb)}) {
    h ^= v;
    h *= 1099511628211ull;
  }
  return h;
}

size_t workspace_for(const Problem& p, uint64_t allowed) {
  const uint64_t want = static_cast<uint64_t>(p.m) * static_cast<uint64_t>(p.n) * 4 * sizeof(float);
  return p.k >= 1024 && allowed >= want ? static_cast<size_t>(want) : 0;
}

cublasStatus_t find_algo(const Problem& p, const MatmulDesc* desc, const Preference& pref,
                         const char* where, cublasLtMatmulAlgo_t* algo, size_t* workspace) {
  const Layout* ls[4] = {&p.a, &p.b, &p.c, &p.d};
  std::memset(algo, 0, sizeof *algo);
  algo->data[kWMagic] = kAlgoMagic;
  algo->data[kWFingerprint] = fingerprint(p);
  for (int i = 0; i < 4; ++i) {
    if (pref.align[i] < type_size(ls[i]->type))
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, where,
                    "no algorithm works with matrix " + std::string(1, "ABCD"[i]) + " aligned to " +
                        std::to_string(pref.align[i]) + " bytes");
    algo->data[kWAlignA + i] = static_cast<uint64_t>(needed_alignment(*ls[i], pref.align[i]));
  }
  // The heuristic reads the bias and aux pointers for their alignment.
  const int64_t bias_align =
      desc->bias != nullptr ? std::min<int64_t>(address_alignment(desc->bias), kVector) : 1;
  const int64_t aux_align =
      desc->aux != nullptr ? std::min<int64_t>(address_alignment(desc->aux), kVector) : 1;
  algo->data[kWBias] = static_cast<uint64_t>(bias_align) | static_cast<uint64_t>(aux_align) << 32;
  *workspace = workspace_for(p, pref.max_workspace);
  algo->data[kWWorkspace] = *workspace;
  return CUBLAS_STATUS_SUCCESS;
}

// ---- the reference product

float round_tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) {  // finite: round to nearest, ties away
    u += 0x1000u;
    u &= 0xffffe000u;
  }
  std::memcpy(&x, &u, 4);
  return x;
}

float load(const void* base, int32_t type, int64_t i) {
  if (type == CUDA_R_16BF) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
  return static_cast<const float*>(base)[i];
}
void store(void* base, int32_t type, int64_t i, float v) {
  if (type == CUDA_R_16BF)
    static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16(v);
  else
    static_cast<float*>(base)[i] = v;
}

double gelu_tanh(double x) {
  const double k = 0.7978845608028654;  // sqrt(2 / pi)
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double gelu_tanh_grad(double x) {
  const double k = 0.7978845608028654;
  const double t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

cudaError_t run_product(const Run& r) {
  const Problem& p = r.p;
  const float alpha = r.alpha_dev ? *r.alpha_dev : r.alpha;
  const float beta = r.beta_dev ? *r.beta_dev : r.beta;
  const bool tf32 = p.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const uint32_t e = p.epilogue;
  std::vector<double> acc(static_cast<size_t>(p.m * p.n));
  std::vector<float> arow(static_cast<size_t>(p.k));
  for (int64_t bt = 0; bt < p.batch; ++bt) {
    const int64_t oa = bt * p.a.stride, ob = bt * p.b.stride, oc = bt * p.c.stride,
                  od = bt * p.d.stride;
    auto a_at = [&](int64_t i, int64_t kk) {  // op(A)(i, kk)
      const int64_t idx = p.ta ? i * p.a.ld + kk : kk * p.a.ld + i;
      const float v = load(r.A, p.a_type, oa + idx);
      return tf32 ? round_tf32(v) : v;
    };
    auto b_at = [&](int64_t kk, int64_t j) {  // op(B)(kk, j)
      const int64_t idx = p.tb ? kk * p.b.ld + j : j * p.b.ld + kk;
      const float v = load(r.B, p.b_type, ob + idx);
      return tf32 ? round_tf32(v) : v;
    };
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t kk = 0; kk < p.k; ++kk) arow[static_cast<size_t>(kk)] = a_at(i, kk);
      for (int64_t j = 0; j < p.n; ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < p.k; ++kk)
          s += static_cast<double>(arow[static_cast<size_t>(kk)]) * b_at(kk, j);
        double v = alpha * s;
        if (beta != 0.0f) v += static_cast<double>(beta) * load(r.C, p.c_type, oc + j * p.c.ld + i);
        acc[static_cast<size_t>(i * p.n + j)] = v;
      }
    }
    const int64_t obias = bt * r.bias_stride;
    const int64_t oaux = bt * r.aux_stride;
    if (e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB) {
      const bool rows = e == CUBLASLT_EPILOGUE_BGRADA;
      for (int64_t x = 0; x < (rows ? p.m : p.n); ++x) {
        double s = 0;
        for (int64_t kk = 0; kk < p.k; ++kk) s += rows ? a_at(x, kk) : b_at(kk, x);
        store(const_cast<void*>(r.bias), p.bias_type, obias + x, static_cast<float>(s));
      }
    }
    std::vector<double> bgrad(e == CUBLASLT_EPILOGUE_DGELU_BGRAD ? static_cast<size_t>(p.m) : 0);
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        double v = acc[static_cast<size_t>(i * p.n + j)];
        if (epi_has_bias_input(e)) v += load(r.bias, p.bias_type, obias + i);
        const int64_t ai = oaux + j * r.aux_ld + i;
        switch (e) {
          case CUBLASLT_EPILOGUE_RELU:
          case CUBLASLT_EPILOGUE_RELU_BIAS:
            v = v > 0 ? v : 0;
            break;
          case CUBLASLT_EPILOGUE_GELU:
          case CUBLASLT_EPILOGUE_GELU_BIAS:
            v = gelu_tanh(v);
            break;
          case CUBLASLT_EPILOGUE_GELU_AUX:
          case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
            store(r.aux, p.aux_type, ai, static_cast<float>(v));
            v = gelu_tanh(v);
            break;
          case CUBLASLT_EPILOGUE_DGELU:
          case CUBLASLT_EPILOGUE_DGELU_BGRAD:
            v *= gelu_tanh_grad(load(r.aux, p.aux_type, ai));
            break;
          default:
            break;
        }
        const float out = static_cast<float>(v);
        store(r.D, p.d_type, od + j * p.d.ld + i, out);
        if (!bgrad.empty())
          bgrad[static_cast<size_t>(i)] += load(r.D, p.d_type, od + j * p.d.ld + i);
      }
    }
    for (size_t i = 0; i < bgrad.size(); ++i)
      store(const_cast<void*>(r.bias), p.bias_type, obias + static_cast<int64_t>(i),
            static_cast<float>(bgrad[i]));
  }
  return cudaSuccess;
}

const char* kStatusNames[10] = {"CUBLAS_STATUS_SUCCESS",          "CUBLAS_STATUS_NOT_INITIALIZED",
                                "CUBLAS_STATUS_ALLOC_FAILED",     "CUBLAS_STATUS_INVALID_VALUE",
                                "CUBLAS_STATUS_ARCH_MISMATCH",    "CUBLAS_STATUS_MAPPING_ERROR",
                                "CUBLAS_STATUS_EXECUTION_FAILED", "CUBLAS_STATUS_INTERNAL_ERROR",
                                "CUBLAS_STATUS_NOT_SUPPORTED",    "CUBLAS_STATUS_LICENSE_ERROR"};
int status_index(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return 0;
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return 1;
    case CUBLAS_STATUS_ALLOC_FAILED:
      return 2;
    case CUBLAS_STATUS_INVALID_VALUE:
      return 3;
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return 4;
    case CUBLAS_STATUS_MAPPING_ERROR:
      return 5;
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return 6;
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return 7;
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return 8;
    case CUBLAS_STATUS_LICENSE_ERROR:
      return 9;
    default:
      return -1;
  }
}

}  // namespace baton::simt::lt
