// The emulator's stand-in for cuBLASLt: the functions of cublasLt.h the
// backend uses, with the header's exact signatures, computing the product
// with plain reference loops (double accumulation) in stream order, and
// refusing what the library documents as refused, with the status it
// returns. Test infrastructure: slow, small shapes.
//
// What is modelled, and from where (cublasLt.h of the toolkit here, the
// cuBLAS documentation's cublasLtMatmul() section, and the behaviour
// reported by its users where the documentation is silent):
// - Types (cublasLtMatmul()'s table of supported combinations, the subset
//   the backend uses): COMPUTE_32F with A/B/C/D float, A/B bf16 with C/D
//   float or bf16; COMPUTE_32F_FAST_TF32 with A/B/C/D float (A and B are
//   rounded to TF32, 10-bit mantissa, round to nearest with ties away, as
//   cvt.rna.tf32.f32 does, before multiplying). Scale type float. Anything
//   else: CUBLAS_STATUS_NOT_SUPPORTED.
// - Layouts: column order only (others NOT_SUPPORTED here), ld >= rows
//   (cublasLt.h, CUBLASLT_MATRIX_LAYOUT_LD) else INVALID_VALUE; C and D the
//   same type, rows, columns, batch (ld may differ) and, in place (C == D),
//   the same ld; every batch count equal. Zero-sized problems are refused
//   with INVALID_VALUE (the vendor's behaviour is not documented; callers
//   here skip them, so nothing depends on it).
// - Pointers: A, B, C, D, bias, aux and the workspace must lie in device
//   memory over the exact ranges their layouts imply (INVALID_VALUE).
// - Alignment: the preference's MIN_ALIGNMENT_{A,B,C,D}_BYTES (default 256)
//   tell the heuristic how aligned the buffers will be; the algorithm it
//   returns needs min(that, 16 bytes: one vector load, what tensor-core
//   kernels read) further limited by what ld and the batch stride allow,
//   and never less than the element size. cublasLtMatmul() with a buffer
//   less aligned than its algorithm needs returns NOT_SUPPORTED (what
//   PyTorch met with mixed 2-byte alignments, pytorch#92201, and fixed by
//   passing the alignments, pytorch#98975). The bias and aux pointers are
//   read by the heuristic (cublasLt.h says so) and need what they had then,
//   up to 16 bytes. The workspace must be 256-byte aligned and at least
//   the algorithm's workspaceSize (INVALID_VALUE, as the header says).
// - Workspace: an algorithm uses workspace (a modelled split-K) when
//   k >= 1024 and the preference allows m * n * 4 floats; then less
//   workspace at cublasLtMatmul() is INVALID_VALUE.
// - Epilogues: DEFAULT, RELU, BIAS, RELU_BIAS, GELU, GELU_BIAS, GELU_AUX,
//   GELU_AUX_BIAS, DGELU, DGELU_BGRAD, BGRADA, BGRADB; D = epi(alpha op(A)
//   op(B) + beta C + bias). The ReLU bit-mask epilogues (RELU_AUX, DRELU)
//   are not modelled: NOT_SUPPORTED here. cuBLASLt's GELU is the tanh
//   approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): the
//   cuBLAS documentation does not give the formula; PyTorch applies
//   gelu(approximate="tanh") wherever it cannot use the GELU epilogue
//   (aten/src/ATen/native/cuda/Blas.cpp), so the two agree. GELU aux: ld
//   >= rows and a multiple of 8, batch stride a multiple of 8 (cublasLt.h).
// - Pointer modes HOST and DEVICE; null handle: NOT_INITIALIZED.
// With CUBLASLT_LOG_LEVEL >= 1 in the environment (the vendor's switch) a
// refusal prints why to stderr.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "simt_host.h"

struct cublasLtContext {
  uint64_t magic = 0;
};

namespace {

constexpr uint64_t kHandleMagic = 0x62746c7448616e64ull;
constexpr uint64_t kDescMagic = 0x62746c7444657363ull;
constexpr uint64_t kLayoutMagic = 0x62746c744c61796full;
constexpr uint64_t kPrefMagic = 0x62746c7450726566ull;
constexpr uint64_t kAlgoMagic = 0x62746c74416c676full;
constexpr int64_t kVector = 16;  // bytes of one vector load

struct MatmulDesc {
  uint64_t magic = kDescMagic;
  int32_t compute = CUBLAS_COMPUTE_32F;
  int32_t scale = CUDA_R_32F;
  int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  int32_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N, trans_c = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int64_t bias_batch_stride = 0;
  int32_t bias_type = -1;
  void* aux = nullptr;
  int64_t aux_ld = 0, aux_batch_stride = 0;
  int32_t aux_type = -1;
};

struct Layout {
  uint64_t magic = kLayoutMagic;
  int32_t type = CUDA_R_32F;
  int32_t order = CUBLASLT_ORDER_COL;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct Preference {
  uint64_t magic = kPrefMagic;
  uint32_t search_mode = CUBLASLT_SEARCH_BEST_FIT;
  uint64_t max_workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D
};

// What cublasLtMatmulAlgo_t's 8 words hold here.
enum AlgoWord {
  kWMagic,
  kWFingerprint,
  kWAlignA,
  kWAlignB,
  kWAlignC,
  kWAlignD,
  kWWorkspace,
  kWBias
};

MatmulDesc* desc_of(cublasLtMatmulDesc_t d) { return reinterpret_cast<MatmulDesc*>(d); }
Layout* layout_of(cublasLtMatrixLayout_t l) { return reinterpret_cast<Layout*>(l); }
Preference* pref_of(cublasLtMatmulPreference_t p) { return reinterpret_cast<Preference*>(p); }

// A refusal: its status, and why (printed with CUBLASLT_LOG_LEVEL >= 1).
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

template <class T>
cublasStatus_t set_value(T* field, const void* buf, size_t size, const char* where) {
  if (buf == nullptr || size != sizeof(T))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, where,
                  "buf is null or sizeInBytes " + std::to_string(size) + " is not " +
                      std::to_string(sizeof(T)));
  std::memcpy(field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

template <class T>
cublasStatus_t get_value(const T& field, void* buf, size_t size, size_t* written,
                         const char* where) {
  if (size == 0) {
    if (written == nullptr)
      return refuse(CUBLAS_STATUS_INVALID_VALUE, where, "sizeInBytes 0 and sizeWritten null");
    *written = sizeof(T);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (buf == nullptr || size != sizeof(T))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, where, "buf null or size mismatch");
  std::memcpy(buf, &field, sizeof(T));
  if (written != nullptr) *written = sizeof(T);
  return CUBLAS_STATUS_SUCCESS;
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

struct Problem {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool ta = false, tb = false;
  int32_t compute = 0, a_type = 0, b_type = 0, c_type = 0, d_type = 0;
  int32_t bias_type = 0, aux_type = 0;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  Layout a, b, c, d;
  int64_t bias_len = 0;
};

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

struct Run {
  Problem p;
  float alpha = 1, beta = 0;
  const float* alpha_dev = nullptr;
  const float* beta_dev = nullptr;
  const void *A = nullptr, *B = nullptr, *C = nullptr;
  void* D = nullptr;
  const void* bias = nullptr;
  int64_t bias_stride = 0;
  void* aux = nullptr;
  int64_t aux_ld = 0, aux_stride = 0;
};

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

const char* kStatusNames[] = {"CUBLAS_STATUS_SUCCESS",          "CUBLAS_STATUS_NOT_INITIALIZED",
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

}  // namespace

extern "C" {

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* lightHandle) {
  if (lightHandle == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate", "lightHandle is null");
  *lightHandle = new cublasLtContext{kHandleMagic};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (lightHandle == nullptr || lightHandle->magic != kHandleMagic)
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy", "not a live handle");
  lightHandle->magic = 0;
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}

const char* CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) {
  const int i = status_index(status);
  return i < 0 ? "CUBLAS_STATUS_UNKNOWN" : kStatusNames[i];
}

const char* CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
  static const char* const kText[] = {"success",
                                      "the library was not initialized",
                                      "the resource allocation failed",
                                      "an invalid numeric value was used as an argument",
                                      "an absent device architectural feature is required",
                                      "an access to GPU memory space failed",
                                      "the GPU program failed to execute",
                                      "an internal operation failed",
                                      "the functionality requested is not supported",
                                      "an error detected trying to check the current licensing"};
  const int i = status_index(status);
  return i < 0 ? "unknown error" : kText[i];
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                                     cublasComputeType_t computeType,
                                                     cudaDataType_t scaleType) {
  if (matmulDesc == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate", "matmulDesc is null");
  auto* d = new MatmulDesc;
  d->compute = computeType;
  d->scale = scaleType;
  *matmulDesc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  MatmulDesc* d = desc_of(matmulDesc);
  if (d == nullptr) return CUBLAS_STATUS_SUCCESS;
  if (d->magic != kDescMagic)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescDestroy", "not a descriptor");
  d->magic = 0;
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           const void* buf, size_t sizeInBytes) {
  constexpr const char* kWhere = "cublasLtMatmulDescSetAttribute";
  MatmulDesc* d = desc_of(matmulDesc);
  if (d == nullptr || d->magic != kDescMagic)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, kWhere, "not a matmul descriptor");
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
      return set_value(&d->compute, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
      return set_value(&d->scale, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
      return set_value(&d->pointer_mode, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return set_value(&d->trans_a, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return set_value(&d->trans_b, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_DESC_TRANSC:
      return set_value(&d->trans_c, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return set_value(&d->epilogue, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return set_value(&d->bias, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
      return set_value(&d->bias_batch_stride, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return set_value(&d->bias_type, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      return set_value(&d->aux, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      return set_value(&d->aux_ld, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
      return set_value(&d->aux_batch_stride, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
      return set_value(&d->aux_type, buf, sizeInBytes, kWhere);
    default:
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, kWhere,
                    "attribute " + std::to_string(attr) + " is not modelled by the stand-in");
  }
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           void* buf, size_t sizeInBytes,
                                                           size_t* sizeWritten) {
  constexpr const char* kWhere = "cublasLtMatmulDescGetAttribute";
  const MatmulDesc* d = desc_of(matmulDesc);
  if (d == nullptr || d->magic != kDescMagic)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, kWhere, "not a matmul descriptor");
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
      return get_value(d->compute, buf, sizeInBytes, sizeWritten, kWhere);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
      return get_value(d->scale, buf, sizeInBytes, sizeWritten, kWhere);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
      return get_value(d->pointer_mode, buf, sizeInBytes, sizeWritten, kWhere);
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return get_value(d->trans_a, buf, sizeInBytes, sizeWritten, kWhere);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return get_value(d->trans_b, buf, sizeInBytes, sizeWritten, kWhere);
    case CUBLASLT_MATMUL_DESC_TRANSC:
      return get_value(d->trans_c, buf, sizeInBytes, sizeWritten, kWhere);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return get_value(d->epilogue, buf, sizeInBytes, sizeWritten, kWhere);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return get_value(d->bias, buf, sizeInBytes, sizeWritten, kWhere);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
      return get_value(d->bias_batch_stride, buf, sizeInBytes, sizeWritten, kWhere);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return get_value(d->bias_type, buf, sizeInBytes, sizeWritten, kWhere);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      return get_value(d->aux, buf, sizeInBytes, sizeWritten, kWhere);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      return get_value(d->aux_ld, buf, sizeInBytes, sizeWritten, kWhere);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
      return get_value(d->aux_batch_stride, buf, sizeInBytes, sizeWritten, kWhere);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
      return get_value(d->aux_type, buf, sizeInBytes, sizeWritten, kWhere);
    default:
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, kWhere,
                    "attribute " + std::to_string(attr) + " is not modelled by the stand-in");
  }
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout,
                                                       cudaDataType type, uint64_t rows,
                                                       uint64_t cols, int64_t ld) {
  if (matLayout == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate", "matLayout is null");
  auto* l = new Layout;
  l->type = type;
  l->rows = rows;
  l->cols = cols;
  l->ld = ld;
  *matLayout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  Layout* l = layout_of(matLayout);
  if (l == nullptr) return CUBLAS_STATUS_SUCCESS;
  if (l->magic != kLayoutMagic)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutDestroy", "not a layout");
  l->magic = 0;
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                             cublasLtMatrixLayoutAttribute_t attr,
                                                             const void* buf, size_t sizeInBytes) {
  constexpr const char* kWhere = "cublasLtMatrixLayoutSetAttribute";
  Layout* l = layout_of(matLayout);
  if (l == nullptr || l->magic != kLayoutMagic)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, kWhere, "not a layout descriptor");
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE:
      return set_value(&l->type, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
      return set_value(&l->order, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
      return set_value(&l->rows, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATRIX_LAYOUT_COLS:
      return set_value(&l->cols, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATRIX_LAYOUT_LD:
      return set_value(&l->ld, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      return set_value(&l->batch, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
      return set_value(&l->stride, buf, sizeInBytes, kWhere);
    default:
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, kWhere,
                    "attribute " + std::to_string(attr) + " is not modelled by the stand-in");
  }
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (pref == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate", "pref is null");
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  Preference* p = pref_of(pref);
  if (p == nullptr) return CUBLAS_STATUS_SUCCESS;
  if (p->magic != kPrefMagic)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceDestroy", "not a pref");
  p->magic = 0;
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
    size_t sizeInBytes) {
  constexpr const char* kWhere = "cublasLtMatmulPreferenceSetAttribute";
  Preference* p = pref_of(pref);
  if (p == nullptr || p->magic != kPrefMagic)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, kWhere, "not a preference descriptor");
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE:
      return set_value(&p->search_mode, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return set_value(&p->max_workspace, buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
      return set_value(&p->align[0], buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
      return set_value(&p->align[1], buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
      return set_value(&p->align[2], buf, sizeInBytes, kWhere);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return set_value(&p->align[3], buf, sizeInBytes, kWhere);
    default:
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, kWhere,
                    "attribute " + std::to_string(attr) + " is not modelled by the stand-in");
  }
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  constexpr const char* kWhere = "cublasLtMatmulAlgoGetHeuristic";
  if (lightHandle == nullptr || lightHandle->magic != kHandleMagic)
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, kWhere, "not a live handle");
  if (requestedAlgoCount <= 0 || heuristicResultsArray == nullptr || returnAlgoCount == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, kWhere,
                  "requestedAlgoCount <= 0 or a null result pointer");
  *returnAlgoCount = 0;
  const Preference* pref = pref_of(preference);
  if (pref == nullptr || pref->magic != kPrefMagic)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, kWhere, "not a preference descriptor");
  Problem p;
  const MatmulDesc* desc = desc_of(operationDesc);
  if (cublasStatus_t st = make_problem(desc, layout_of(Adesc), layout_of(Bdesc), layout_of(Cdesc),
                                       layout_of(Ddesc), kWhere, &p);
      st != CUBLAS_STATUS_SUCCESS)
    return st;
  cublasLtMatmulHeuristicResult_t& r = heuristicResultsArray[0];
  std::memset(&r, 0, sizeof r);
  if (cublasStatus_t st = find_algo(p, desc, *pref, kWhere, &r.algo, &r.workspaceSize);
      st != CUBLAS_STATUS_SUCCESS)
    return st;
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
    const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
    const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
    cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
    size_t workspaceSizeInBytes, cudaStream_t stream) {
  constexpr const char* kWhere = "cublasLtMatmul";
  if (lightHandle == nullptr || lightHandle->magic != kHandleMagic)
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, kWhere, "not a live handle");
  Run run;
  Problem& p = run.p;
  const MatmulDesc* desc = desc_of(computeDesc);
  if (cublasStatus_t st = make_problem(desc, layout_of(Adesc), layout_of(Bdesc), layout_of(Cdesc),
                                       layout_of(Ddesc), kWhere, &p);
      st != CUBLAS_STATUS_SUCCESS)
    return st;
  if (alpha == nullptr || beta == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, kWhere, "alpha or beta is null");
  if (desc->pointer_mode == CUBLASLT_POINTER_MODE_HOST) {
    std::memcpy(&run.alpha, alpha, sizeof(float));
    std::memcpy(&run.beta, beta, sizeof(float));
  } else if (desc->pointer_mode == CUBLASLT_POINTER_MODE_DEVICE) {
    if (!baton::simt::is_device_range(alpha, sizeof(float)) ||
        !baton::simt::is_device_range(beta, sizeof(float)))
      return refuse(CUBLAS_STATUS_INVALID_VALUE, kWhere,
                    "POINTER_MODE_DEVICE with alpha or beta not in device memory");
    run.alpha_dev = static_cast<const float*>(alpha);
    run.beta_dev = static_cast<const float*>(beta);
  } else {
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, kWhere,
                  "pointer mode " + std::to_string(desc->pointer_mode) + " is not modelled");
  }
  // In-place needs Cdesc == Ddesc; out of place, ld may differ (make_problem
  // checked type, rows, columns and batch).
  if (C == D && (p.c.ld != p.d.ld || p.c.stride != p.d.stride))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, kWhere,
                  "in-place (C == D) with a different ld or batch stride for C and D");
  // The buffers, over the exact ranges their layouts imply.
  const bool reads_c = desc->pointer_mode != CUBLASLT_POINTER_MODE_HOST || run.beta != 0.0f;
  struct Range {
    const void* p;
    size_t bytes;
    const char* name;
  };
  std::vector<Range> ranges = {
      {A, layout_bytes(p.a), "A"}, {B, layout_bytes(p.b), "B"}, {D, layout_bytes(p.d), "D"}};
  if (reads_c) ranges.push_back({C, layout_bytes(p.c), "C"});
  const uint32_t e = p.epilogue;
  if (epi_has_bias_input(e) || epi_writes_bias(e)) {
    const size_t es = type_size(p.bias_type);
    const uint64_t elems =
        static_cast<uint64_t>(p.batch - 1) * static_cast<uint64_t>(desc->bias_batch_stride) +
        static_cast<uint64_t>(p.bias_len);
    ranges.push_back({desc->bias, elems * es, "bias"});
  }
  if (epi_uses_aux(e)) {
    Layout aux;
    aux.type = p.aux_type;
    aux.rows = static_cast<uint64_t>(p.m);
    aux.cols = static_cast<uint64_t>(p.n);
    aux.ld = desc->aux_ld;
    aux.batch = static_cast<int32_t>(p.batch);
    aux.stride = desc->aux_batch_stride;
    ranges.push_back({desc->aux, layout_bytes(aux), "aux"});
  }
  for (const Range& r : ranges)
    if (r.p == nullptr || !baton::simt::is_device_range(r.p, r.bytes))
      return refuse(CUBLAS_STATUS_INVALID_VALUE, kWhere,
                    std::string(r.name) + " (" + std::to_string(r.bytes) +
                        " bytes from its pointer) is not inside one device allocation");
  // The algorithm: given, or the implicit heuristic with default preferences
  // and the workspace given.
  cublasLtMatmulAlgo_t chosen;
  if (algo == nullptr) {
    Preference pref;
    pref.max_workspace = workspaceSizeInBytes;
    size_t ws = 0;
    if (cublasStatus_t st = find_algo(p, desc, pref, kWhere, &chosen, &ws);
        st != CUBLAS_STATUS_SUCCESS)
      return st;
  } else {
    chosen = *algo;
    if (chosen.data[kWMagic] != kAlgoMagic)
      return refuse(CUBLAS_STATUS_INVALID_VALUE, kWhere, "algo is not one the heuristic returned");
    if (chosen.data[kWFingerprint] != fingerprint(p))
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, kWhere,
                    "algo was found for another compute type, data types, transposes or "
                    "epilogue");
  }
  const void* mats[4] = {A, B, C, D};
  for (int i = 0; i < 4; ++i) {
    if (i == 2 && !reads_c) continue;
    const int64_t need = static_cast<int64_t>(chosen.data[kWAlignA + i]);
    if (address_alignment(mats[i]) < need)
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, kWhere,
                    std::string("matrix ") + "ABCD"[i] + " is aligned to " +
                        std::to_string(address_alignment(mats[i])) +
                        " bytes; the algorithm needs " + std::to_string(need) +
                        " (set CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES)");
  }
  const int64_t bias_need = static_cast<int64_t>(chosen.data[kWBias] & 0xffffffffu);
  const int64_t aux_need = static_cast<int64_t>(chosen.data[kWBias] >> 32);
  if (desc->bias != nullptr && address_alignment(desc->bias) < bias_need)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, kWhere,
                  "the bias pointer is less aligned than when the algorithm was found");
  if (desc->aux != nullptr && address_alignment(desc->aux) < aux_need)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, kWhere,
                  "the aux pointer is less aligned than when the algorithm was found");
  const size_t ws_need = chosen.data[kWWorkspace];
  if (workspaceSizeInBytes < ws_need)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, kWhere,
                  "workspaceSizeInBytes " + std::to_string(workspaceSizeInBytes) +
                      " < the algorithm's " + std::to_string(ws_need));
  if (workspaceSizeInBytes > 0) {
    if (workspace == nullptr || !baton::simt::is_device_range(workspace, workspaceSizeInBytes))
      return refuse(CUBLAS_STATUS_INVALID_VALUE, kWhere, "the workspace is not device memory");
    if (address_alignment(workspace) < 256)
      return refuse(CUBLAS_STATUS_INVALID_VALUE, kWhere, "the workspace is not 256-byte aligned");
  }
  run.A = A;
  run.B = B;
  run.C = reads_c ? C : nullptr;
  run.D = D;
  run.bias = desc->bias;
  run.bias_stride = desc->bias_batch_stride;
  run.aux = desc->aux;
  run.aux_ld = desc->aux_ld;
  run.aux_stride = desc->aux_batch_stride;
  if (!reads_c) run.beta = 0.0f;
  const cudaError_t st =
      baton::simt::enqueue(stream, "cublasLtMatmul", [run] { return run_product(run); });
  return st == cudaSuccess
             ? CUBLAS_STATUS_SUCCESS
             : refuse(CUBLAS_STATUS_EXECUTION_FAILED, kWhere,
                      std::string("the stream refused the work: ") + cudaGetErrorString(st));
}

}  // extern "C"
