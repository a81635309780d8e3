// The SIMT emulator's warp matrix functions: nvcuda::wmma as a kernel
// compiled by the host compiler sees it (kernel_language.cuh includes this
// where nvcc would include <mma.h>). The shape the kernels use only:
// m16n16k16, __nv_bfloat16 operands, float accumulators.
//
// As on a GPU every call is warp-collective: each one waits for all 32
// lanes (a lane that diverges, or has exited, is reported as for any warp
// intrinsic), and load/store check what the CUDA documentation requires
// of their arguments (the pointer 256-bit aligned, ldm a multiple of 16
// bytes; the launch fails otherwise).
//
// The element a lane holds is unspecified on a GPU; here lane l holds
// elements l, l + 32, ... of the tile in row-major order (x[i] is element
// 32 i + l), not the layout of any GPU, so code that assumes a layout
// gets wrong results here rather than on one machine only. mma_sync
// gathers both operands from every lane and sums each output element's 16
// products in float, k in order, onto the accumulator.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "simt_device.h"

namespace nvcuda::wmma {

struct row_major;
struct col_major;
struct matrix_a;
struct matrix_b;
struct accumulator;

enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
  static_assert(M == 16 && N == 16 && K == 16,
                "the emulator's wmma implements the m16n16k16 shape only");
  static_assert(std::is_same_v<Use, accumulator> ? std::is_same_v<T, float>
                                                 : std::is_same_v<T, __nv_bfloat16>,
                "the emulator's wmma implements bf16 operands and float accumulators only");

 public:
  static constexpr int num_elements = 8;  // 256 elements over 32 lanes
  T x[num_elements];
};

namespace emu {

constexpr int kTile = 16;
constexpr int kPerLane = 8;

// Row and column of element i of this lane's share.
inline void element(int i, int& r, int& c) {
  const int e = i * 32 + static_cast<int>(::baton::simt::lane_id());
  r = e / kTile;
  c = e % kTile;
}

// Every lane of the warp at this call, or the launch fails.
inline void collective(const char* what) {
  uint64_t all[32];
  ::baton::simt::warp_exchange(0xffffffffu, 0, all, what);
}

inline void check_args(const void* p, unsigned ldm, size_t elem, bool load) {
  if ((reinterpret_cast<uintptr_t>(p) & 31u) != 0) {
    ::baton::simt::report(load ? "wmma::load_matrix_sync: the pointer is not 256-bit aligned"
                               : "wmma::store_matrix_sync: the pointer is not 256-bit aligned");
  }
  if ((ldm * elem) % 16 != 0) {
    ::baton::simt::report(load ? "wmma::load_matrix_sync: ldm is not a multiple of 16 bytes"
                               : "wmma::store_matrix_sync: ldm is not a multiple of 16 bytes");
  }
}

// Every lane's operand fragments: one meeting exchanges the addresses of
// the lanes' a and b (the fibers share one address space), each lane reads
// all of them, and a second meeting keeps any lane from changing its
// fragments before every lane has read them.
template <class FragA, class FragB>
void gather(const FragA& a, const FragB& b, float (&ta)[kTile][kTile], float (&tb)[kTile][kTile]) {
  uint64_t pa[32], pb[32];
  const uintptr_t both[2] = {reinterpret_cast<uintptr_t>(&a), reinterpret_cast<uintptr_t>(&b)};
  uint64_t ptr[32];
  ::baton::simt::warp_exchange(0xffffffffu, reinterpret_cast<uintptr_t>(both), ptr,
                               "wmma::mma_sync");
  for (int l = 0; l < 32; ++l) {
    const auto* pair = reinterpret_cast<const uintptr_t*>(ptr[l]);
    pa[l] = pair[0];
    pb[l] = pair[1];
  }
  for (int l = 0; l < 32; ++l) {
    const auto& fa = *reinterpret_cast<const FragA*>(pa[l]);
    const auto& fb = *reinterpret_cast<const FragB*>(pb[l]);
    for (int i = 0; i < kPerLane; ++i) {
      const int e = i * 32 + l;
      ta[e / kTile][e % kTile] = __bfloat162float(fa.x[i]);
      tb[e / kTile][e % kTile] = __bfloat162float(fb.x[i]);
    }
  }
  collective("wmma::mma_sync");
}

}  // namespace emu

template <class Use, class T, class Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, T v) {
  emu::collective("wmma::fill_fragment");
  for (T& x : f.x) x = v;
}

// Operands: A is M x K, B is K x N; row_major means element (r, c) of the
// operand at p[r * ldm + c], col_major at p[c * ldm + r].
template <class Use, class Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, __nv_bfloat16, Layout>& f, const __nv_bfloat16* p,
                      unsigned ldm) {
  static_assert(std::is_same_v<Layout, row_major> || std::is_same_v<Layout, col_major>,
                "an operand fragment names its layout");
  emu::collective("wmma::load_matrix_sync");
  emu::check_args(p, ldm, sizeof(__nv_bfloat16), true);
  for (int i = 0; i < emu::kPerLane; ++i) {
    int r, c;
    emu::element(i, r, c);
    f.x[i] = std::is_same_v<Layout, row_major> ? p[r * ldm + c] : p[c * ldm + r];
  }
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p,
                             unsigned ldm, layout_t layout) {
  emu::collective("wmma::load_matrix_sync");
  emu::check_args(p, ldm, sizeof(float), true);
  for (int i = 0; i < emu::kPerLane; ++i) {
    int r, c;
    emu::element(i, r, c);
    f.x[i] = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
  }
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout) {
  emu::collective("wmma::store_matrix_sync");
  emu::check_args(p, ldm, sizeof(float), false);
  for (int i = 0; i < emu::kPerLane; ++i) {
    int r, c;
    emu::element(i, r, c);
    (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[i];
  }
}

// d = a b + c.
template <class LayoutA, class LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  float ta[emu::kTile][emu::kTile], tb[emu::kTile][emu::kTile];
  emu::gather(a, b, ta, tb);
  float out[emu::kPerLane];
  for (int i = 0; i < emu::kPerLane; ++i) {
    int r, n;
    emu::element(i, r, n);
    float s = c.x[i];
    for (int k = 0; k < emu::kTile; ++k) s = std::fma(ta[r][k], tb[k][n], s);
    out[i] = s;
  }
  std::memcpy(d.x, out, sizeof out);
}

}  // namespace nvcuda::wmma
