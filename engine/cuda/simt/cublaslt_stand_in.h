// The cuBLASLt stand-in's insides, shared by its API (cublaslt_reference.cpp)
// and its checks and reference product (cublaslt_problem.cpp): the
// descriptors behind cuBLASLt's opaque handles, the problem a product
// poses, and the refusals.
#pragma once

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

namespace baton::simt::lt {

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

inline MatmulDesc* desc_of(cublasLtMatmulDesc_t d) { return reinterpret_cast<MatmulDesc*>(d); }
inline Layout* layout_of(cublasLtMatrixLayout_t l) { return reinterpret_cast<Layout*>(l); }
inline Preference* pref_of(cublasLtMatmulPreference_t p) {
  return reinterpret_cast<Preference*>(p);
}

// A refusal: its status, and why (printed with CUBLASLT_LOG_LEVEL >= 1).
cublasStatus_t refuse(cublasStatus_t st, const char* where, const std::string& why);
size_t type_size(int32_t t);
int64_t address_alignment(const void* p);

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

bool epi_has_bias_input(uint32_t e);
bool epi_writes_bias(uint32_t e);
bool epi_uses_aux(uint32_t e);

struct Problem {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool ta = false, tb = false;
  int32_t compute = 0, a_type = 0, b_type = 0, c_type = 0, d_type = 0;
  int32_t bias_type = 0, aux_type = 0;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  Layout a, b, c, d;
  int64_t bias_len = 0;
};

cublasStatus_t make_problem(const MatmulDesc* desc, const Layout* a, const Layout* b,
                            const Layout* c, const Layout* d, const char* where, Problem* p);
// Bytes from the first element a column-major layout touches to past its last.
size_t layout_bytes(const Layout& l);
// Which problem an algorithm was found for (its types, transposes, epilogue).
uint64_t fingerprint(const Problem& p);
cublasStatus_t find_algo(const Problem& p, const MatmulDesc* desc, const Preference& pref,
                         const char* where, cublasLtMatmulAlgo_t* algo, size_t* workspace);

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

cudaError_t run_product(const Run& r);

// x rounded to TF32 (10-bit mantissa) as cvt.rna.tf32.f32 does: to nearest,
// ties away. The cuDNN stand-in rounds with it too.
float round_tf32(float x);

extern const char* kStatusNames[10];
int status_index(cublasStatus_t s);

}  // namespace baton::simt::lt
