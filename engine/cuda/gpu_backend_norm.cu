// GpuBackend's normalisations: LayerNorm, RMSNorm and batch norm over the
// rows of (rows, f) (N*H*W rows for images, channels last). Kernels in
// kernels/norm.cuh; the CPU contracts are cpu_norm.cpp's.
#include "gpu_backend.h"
#include "kernels/norm.cuh"
#include "launch.cuh"

namespace baton::gpu {

namespace {

// Elementwise launches: at most this many blocks, grid-stride beyond.
constexpr unsigned kMaxBlocks = 4096;

unsigned grid_for(int64_t n) {
  const unsigned b = blocks_for(n, norm::kThreads);
  return b < kMaxBlocks ? b : kMaxBlocks;
}

// A row op a warp per row (narrow rows) or a block per row (wide ones);
// the kernels take (rows, f) first.
template <class WarpKernel, class BlockKernel, class... A>
void launch_rows(WarpKernel warp_kernel, BlockKernel block_kernel, int64_t n_rows, int64_t f,
                 cudaStream_t stream, const char* what, A... args) {
  if (n_rows <= 0 || f <= 0) return;
  if (f <= norm::kWarpRowMax) {
    constexpr int64_t kRowsPerBlock = norm::kThreads / reduce::kWarp;
    const unsigned grid = blocks_for(n_rows, kRowsPerBlock);
    // Fewer rows than a block holds: only the warps that have one.
    const unsigned threads =
        n_rows < kRowsPerBlock ? static_cast<unsigned>(n_rows) * reduce::kWarp : norm::kThreads;
    check(launch(warp_kernel, dim3(grid), dim3(threads), 0, stream, n_rows, f, args...), what);
  } else {
    check(launch(block_kernel, dim3(static_cast<unsigned>(n_rows)), dim3(norm::kThreads), 0, stream,
                 n_rows, f, args...),
          what);
  }
}

// Sums term(r, c) over the rows into out0[c], out1[c] (null: not wanted):
// the deterministic two-pass column reduction of norm.cuh through the
// partials scratch.
template <class Term>
void column_reduce(const GpuBackend& be, double* scratch, Term term, int64_t n_rows, int64_t cols,
                   int64_t chunks, int64_t rows_per_chunk, float* out0, float* out1) {
  const unsigned tiles = blocks_for(cols, norm::kColTile);
  check(launch(norm::column_partials_kernel<Term>, dim3(tiles, static_cast<unsigned>(chunks)),
               dim3(norm::kColTile, norm::kRowLanes), 0, be.stream(), term, n_rows, cols,
               rows_per_chunk, scratch),
        "column partial sums");
  check(launch(norm::column_finish_kernel, dim3(blocks_for(cols, norm::kThreads)),
               dim3(norm::kThreads), 0, be.stream(), static_cast<const double*>(scratch), chunks,
               cols, out0, out1),
        "column sums");
}

// How a column reduction splits its rows: chunks of at least 64 rows (8 a
// row lane), enough chunks that the grid fills the device (~512 blocks)
// when the columns alone do not.
struct Chunks {
  int64_t count, rows_per_chunk;
};
Chunks chunks_for(int64_t n_rows, int64_t cols) {
  constexpr int64_t kMinRows = 64, kTargetBlocks = 512;
  const int64_t tiles = (cols + norm::kColTile - 1) / norm::kColTile;
  int64_t count = (n_rows + kMinRows - 1) / kMinRows;
  const int64_t cap = tiles >= kTargetBlocks ? 1 : kTargetBlocks / tiles;
  if (count > cap) count = cap;
  if (count < 1) count = 1;
  const int64_t per = n_rows > 0 ? (n_rows + count - 1) / count : 1;
  return {n_rows > 0 ? (n_rows + per - 1) / per : 1, per};
}

}  // namespace

void GpuBackend::layer_norm_forward(const float* x, const float* gain, const float* bias, float* y,
                                    float* xhat, float* rstd, int64_t rows, int64_t f,
                                    float eps) const {
  launch_rows(norm::layer_norm_forward_kernel<true>, norm::layer_norm_forward_kernel<false>, rows,
              f, stream_, "layer_norm_forward", x, gain, bias, y, xhat, rstd, eps);
}

void GpuBackend::layer_norm_backward(const float* dy, const float* xhat, const float* rstd,
                                     const float* gain, float* dx, float* dgain, float* dbias,
                                     int64_t rows, int64_t f) const {
  if (f <= 0) return;
  const Chunks ch = chunks_for(rows, f);
  column_reduce(*this, partials(ch.count * 2 * f), norm::LayerNormGradTerm{dy, xhat, f}, rows, f,
                ch.count, ch.rows_per_chunk, dgain, dbias);
  if (dx == nullptr) return;
  launch_rows(norm::layer_norm_dx_kernel<true>, norm::layer_norm_dx_kernel<false>, rows, f, stream_,
              "layer_norm_backward (dx)", dy, xhat, rstd, gain, dx);
}

void GpuBackend::rms_norm_forward(const float* x, const float* gain, float* y, float* rstd,
                                  int64_t rows, int64_t f, float eps) const {
  launch_rows(norm::rms_norm_forward_kernel<true>, norm::rms_norm_forward_kernel<false>, rows, f,
              stream_, "rms_norm_forward", x, gain, y, rstd, eps);
}

void GpuBackend::rms_norm_backward(const float* dy, const float* x, const float* rstd,
                                   const float* gain, float* dx, float* dgain, int64_t rows,
                                   int64_t f) const {
  if (f <= 0) return;
  const Chunks ch = chunks_for(rows, f);
  column_reduce(*this, partials(ch.count * 2 * f), norm::RmsNormGradTerm{dy, x, rstd, f}, rows, f,
                ch.count, ch.rows_per_chunk, dgain, static_cast<float*>(nullptr));
  if (dx == nullptr) return;
  launch_rows(norm::rms_norm_dx_kernel<true>, norm::rms_norm_dx_kernel<false>, rows, f, stream_,
              "rms_norm_backward (dx)", dy, x, rstd, gain, dx);
}

void GpuBackend::column_centered_squares(const float* x, const float* mean, int64_t rows,
                                         int64_t cols, float* out) const {
  if (cols <= 0) return;
  const Chunks ch = chunks_for(rows, cols);
  column_reduce(*this, partials(ch.count * 2 * cols), norm::CenteredSquaresTerm{x, mean, cols},
                rows, cols, ch.count, ch.rows_per_chunk, out, static_cast<float*>(nullptr));
}

void GpuBackend::batch_norm_statistics(const float* sum, const float* m2, float rows,
                                       float momentum, float eps, float* mean, float* rstd,
                                       float* running_mean, float* running_var, int64_t f) const {
  if (f <= 0) return;
  check(launch(norm::batch_norm_statistics_kernel, dim3(grid_for(f)), dim3(norm::kThreads), 0,
               stream_, sum, m2, rows, momentum, eps, mean, rstd, running_mean, running_var, f),
        "batch_norm_statistics");
}

void GpuBackend::batch_norm_running(const float* running_mean, const float* running_var, float eps,
                                    float* mean, float* rstd, int64_t f) const {
  if (f <= 0) return;
  check(launch(norm::batch_norm_running_kernel, dim3(grid_for(f)), dim3(norm::kThreads), 0, stream_,
               running_mean, running_var, eps, mean, rstd, f),
        "batch_norm_running");
}

void GpuBackend::batch_norm_apply(const float* x, const float* mean, const float* rstd,
                                  const float* gain, const float* bias, float* xhat, float* y,
                                  int64_t rows, int64_t f, bool relu) const {
  const int64_t n = rows * f;
  if (n <= 0) return;
  check(launch(norm::batch_norm_apply_kernel, dim3(grid_for(n)), dim3(norm::kThreads), 0, stream_,
               x, mean, rstd, gain, bias, xhat, y, n, f, relu),
        "batch_norm_apply");
}

void GpuBackend::batch_norm_param_grads(const float* dy, const float* relu_y, const float* xhat,
                                        float* dgain, float* dbias, int64_t rows, int64_t f) const {
  if (f <= 0) return;
  const Chunks ch = chunks_for(rows, f);
  column_reduce(*this, partials(ch.count * 2 * f), norm::BatchNormGradTerm{dy, relu_y, xhat, f},
                rows, f, ch.count, ch.rows_per_chunk, dgain, dbias);
}

void GpuBackend::batch_norm_input_grad(const float* dy, const float* relu_y, const float* xhat,
                                       const float* gain, const float* rstd, const float* sum_dy,
                                       const float* sum_dy_xhat, float inv_rows, float* dx,
                                       int64_t rows, int64_t f) const {
  const int64_t n = rows * f;
  if (n <= 0) return;
  check(launch(norm::batch_norm_input_grad_kernel, dim3(grid_for(n)), dim3(norm::kThreads), 0,
               stream_, dy, relu_y, xhat, gain, rstd, sum_dy, sum_dy_xhat, inv_rows, dx, n, f),
        "batch_norm_input_grad");
}

}  // namespace baton::gpu
