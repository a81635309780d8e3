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
#include "cublaslt_stand_in.h"

using namespace baton::simt::lt;

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
