// GpuBackend's elementwise ops, activations, column sums and dropout masks
// (kernels in kernels/elementwise.cuh). Every op is queued on stream();
// sum_squares is the one that returns a value (a synchronisation point).
#include <algorithm>
#include <type_traits>

#include "gpu_backend.h"
#include "kernels/elementwise.cuh"

namespace baton::gpu {

namespace {

// Calls fn(std::integral_constant<Activation, A>{}) for the activation
// `act` (kUnset and kNone: the identity), so each kernel is compiled once
// per activation with no branch per element.
template <class Fn>
cudaError_t with_activation(Activation act, Fn&& fn) {
  switch (act) {
    case Activation::kRelu:
      return fn(std::integral_constant<Activation, Activation::kRelu>{});
    case Activation::kTanh:
      return fn(std::integral_constant<Activation, Activation::kTanh>{});
    case Activation::kGelu:
      return fn(std::integral_constant<Activation, Activation::kGelu>{});
    case Activation::kGeluTanh:
      return fn(std::integral_constant<Activation, Activation::kGeluTanh>{});
    default:
      return fn(std::integral_constant<Activation, Activation::kNone>{});
  }
}

// A (rows, units) row op's launch: blocks of 256 threads, blockDim.x
// columns wide (a multiple of 32, up to 256: coalesced along a row) and
// 256 / blockDim.x rows; the grid covers the columns once and strides over
// the rows.
struct RowLaunch {
  dim3 grid, block;
};
RowLaunch row_launch(int64_t units, int64_t rows) {
  const unsigned bx = units >= kThreads ? kThreads : static_cast<unsigned>((units + 31) / 32 * 32);
  const unsigned by = kThreads / bx;
  const unsigned gx = blocks_for(units, bx);
  int64_t gy = (rows + by - 1) / by;
  const int64_t most = std::max<int64_t>(1, kMaxMapBlocks / gx);
  if (gy > most) gy = most;
  if (gy > 65535) gy = 65535;
  return {dim3(gx, static_cast<unsigned>(gy)), dim3(bx, by)};
}

// y(rows, cols) = act(y + bias) (bias null: none): column tiles, or one
// flattened map when the columns do not fill a warp.
cudaError_t launch_bias_activation(float* y, const float* bias, int64_t rows, int64_t cols,
                                   Activation act, cudaStream_t stream) {
  const bool vec = cols % 4 == 0 && aligned16(y) && aligned16(bias);
  const int64_t units = vec ? cols / 4 : cols;
  const RowLaunch l = row_launch(units, rows);
  return with_activation(act, [&](auto a) {
    constexpr Activation A = decltype(a)::value;
    if (units < 32) {
      return launch_map(BiasActivationOp<A>{y, bias, cols}, rows * cols, false, stream);
    }
    return vec ? launch(bias_activation_kernel<A, true>, l.grid, l.block, 0, stream, y, bias, rows,
                        units)
               : launch(bias_activation_kernel<A, false>, l.grid, l.block, 0, stream, y, bias, rows,
                        units);
  });
}

// The deterministic column sums' split (elementwise.cuh,
// column_grad_sums_kernel): 32-column tiles, and chunks of rows enough
// for about 1,024 blocks in all, each chunk at least 64 rows, their
// partial sums within kColumnPartials doubles (GpuBackend's scratch holds
// that many from the start, so these ops never grow it).
constexpr int64_t kColumnPartials = int64_t{1} << 16;
struct ColumnPlan {
  unsigned tiles = 1;
  int64_t chunks = 1, rows_per_chunk = 1;
};
ColumnPlan plan_columns(int64_t rows, int64_t cols) {
  ColumnPlan p;
  p.tiles = blocks_for(cols, kColumnTile);
  int64_t chunks = std::max<int64_t>(1, 1024 / p.tiles);
  chunks = std::min(chunks, (rows + 63) / 64);
  chunks = std::min(chunks, kColumnPartials / std::max<int64_t>(cols, 1));
  chunks = std::max<int64_t>(chunks, 1);
  p.rows_per_chunk = std::max<int64_t>(1, (rows + chunks - 1) / chunks);
  p.chunks = std::max<int64_t>(1, (rows + p.rows_per_chunk - 1) / p.rows_per_chunk);
  return p;
}

// out[c] (+)= sum over rows of act_grad(in, y, dy) (and dpre = those
// values when dpre is not null); `partial` holds plan.chunks * cols
// doubles when plan.chunks > 1.
cudaError_t launch_column_sums(const ColumnPlan& plan, Activation act, const float* in,
                               const float* y, const float* dy, float* dpre, double* partial,
                               float* out, bool accumulate, int64_t rows, int64_t cols,
                               cudaStream_t stream) {
  const dim3 grid(plan.tiles, static_cast<unsigned>(plan.chunks));
  const dim3 block(kColumnTile, kColumnRows);
  double* const first_pass = plan.chunks > 1 ? partial : nullptr;
  const cudaError_t st = with_activation(act, [&](auto a) {
    constexpr Activation A = decltype(a)::value;
    return launch(column_grad_sums_kernel<A>, grid, block, 0, stream, in, y, dy, dpre, first_pass,
                  out, accumulate ? 1 : 0, rows, cols, plan.rows_per_chunk);
  });
  if (st != cudaSuccess || first_pass == nullptr) return st;
  return launch(column_finish_kernel, dim3(blocks_for(cols, kThreads)), dim3(kThreads), 0, stream,
                static_cast<const double*>(first_pass), plan.chunks, cols, out, accumulate ? 1 : 0);
}

}  // namespace

void GpuBackend::bias_activation(float* y, const float* bias, int64_t rows, int64_t cols,
                                 Activation act) const {
  if (rows <= 0 || cols <= 0) return;
  if ((act == Activation::kNone || act == Activation::kUnset) && bias == nullptr) return;
  check(launch_bias_activation(y, bias, rows, cols, act, stream_), "bias_activation");
}

void GpuBackend::activation_backward_bias(const float* y, const float* pre, const float* dy,
                                          float* dpre, float* dbias, int64_t rows, int64_t cols,
                                          Activation act) const {
  if (rows <= 0 || cols <= 0) return;
  // ReLU's gradient tests the output (as the CPU's does); the GELUs'
  // differentiate at the pre-activation.
  const float* in = act == Activation::kRelu ? y : pre;
  if (dbias == nullptr) {
    const bool vec = aligned16(in) && aligned16(y) && aligned16(dy) && aligned16(dpre);
    check(with_activation(
              act,
              [&](auto a) {
                constexpr Activation A = decltype(a)::value;
                return launch_map(ActBackwardOp<A>{in, y, dy, dpre}, rows * cols, vec, stream_);
              }),
          "activation_backward_bias");
    return;
  }
  // dpre and dbias += its column sums in one pass over the rows, then the
  // chunks' sums added in order: no atomics, the same sums every run.
  const ColumnPlan plan = plan_columns(rows, cols);
  double* partial = plan.chunks > 1 ? partials(plan.chunks * cols) : nullptr;
  check(launch_column_sums(plan, act, in, y, dy, dpre, partial, dbias, true, rows, cols, stream_),
        "activation_backward_bias");
}

void GpuBackend::activation_forward(const float* x, float* y, int64_t n, Activation act) const {
  if ((act == Activation::kNone || act == Activation::kUnset) && x == y) return;
  const bool vec = aligned16(x) && aligned16(y);
  check(with_activation(act,
                        [&](auto a) {
                          constexpr Activation A = decltype(a)::value;
                          return launch_map(ActForwardOp<A>{x, y}, n, vec, stream_);
                        }),
        "activation_forward");
}

void GpuBackend::activation_backward(const float* x, const float* y, const float* dy, float* dx,
                                     int64_t n, Activation act) const {
  const bool vec = aligned16(x) && aligned16(y) && aligned16(dy) && aligned16(dx);
  check(with_activation(act,
                        [&](auto a) {
                          constexpr Activation A = decltype(a)::value;
                          return launch_map(ActBackwardOp<A>{x, y, dy, dx}, n, vec, stream_);
                        }),
        "activation_backward");
}

void GpuBackend::copy(const float* x, float* y, int64_t n) const {
  if (n <= 0 || x == y) return;
  check(cudaMemcpyAsync(y, x, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice,
                        stream_),
        "copy (cudaMemcpyAsync device to device)");
}

void GpuBackend::fill(float* y, int64_t n, float value) const {
  check(launch_map(FillOp{y, value}, n, aligned16(y), stream_), "fill");
}

void GpuBackend::add(const float* a, const float* b, float* y, int64_t n) const {
  const bool vec = aligned16(a) && aligned16(b) && aligned16(y);
  check(launch_map(BinaryOp<AddF>{a, b, y, {}}, n, vec, stream_), "add");
}

void GpuBackend::add_relu(const float* a, const float* b, float* y, int64_t n) const {
  const bool vec = aligned16(a) && aligned16(b) && aligned16(y);
  check(launch_map(BinaryOp<AddReluF>{a, b, y, {}}, n, vec, stream_), "add_relu");
}

void GpuBackend::add_inplace(float* y, const float* x, int64_t n) const {
  const bool vec = aligned16(x) && aligned16(y);
  check(launch_map(BinaryOp<AddF>{y, x, y, {}}, n, vec, stream_), "add_inplace");
}

void GpuBackend::multiply(const float* a, const float* b, float* y, int64_t n) const {
  const bool vec = aligned16(a) && aligned16(b) && aligned16(y);
  check(launch_map(BinaryOp<MulF>{a, b, y, {}}, n, vec, stream_), "multiply");
}

void GpuBackend::scale(float* x, int64_t n, float s) const {
  check(launch_map(ScaleOp{x, s}, n, aligned16(x), stream_), "scale");
}

double GpuBackend::sum_squares(const float* x, int64_t n) const {
  if (n <= 0) return 0.0;
  // A grid fixed by n alone (at most 1,024 blocks), so the partial sums
  // and their order are the same on any device.
  constexpr unsigned kMaxBlocks = 1024;
  const bool vec = aligned16(x);
  unsigned blocks = blocks_for(vec ? (n + 3) / 4 : n, kThreads);
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  double* partial = partials(blocks);
  check(launch(sum_squares_kernel, dim3(blocks), dim3(kThreads), 0, stream_, x, n, vec ? 1 : 0,
               partial),
        "sum_squares");
  return sum_partials(partial, blocks);
}

void GpuBackend::add_repeated(float* y, const float* x, int64_t repeats, int64_t n) const {
  if (repeats <= 0 || n <= 0) return;
  // y as (repeats, n) rows plus x as a bias: the bias kernel's identity case.
  check(launch_bias_activation(y, x, repeats, n, Activation::kNone, stream_), "add_repeated");
}

void GpuBackend::column_sums(const float* x, int64_t rows, int64_t cols, float* out) const {
  if (cols <= 0) return;
  const ColumnPlan plan = plan_columns(rows, cols);
  double* partial = plan.chunks > 1 ? partials(plan.chunks * cols) : nullptr;
  check(launch_column_sums(plan, Activation::kNone, nullptr, nullptr, x, nullptr, partial, out,
                           false, rows, cols, stream_),
        "column_sums");
}

void GpuBackend::dropout_mask(float* mask, int64_t rows, int64_t cols, float p, uint64_t seed,
                              int64_t first_row) const {
  if (rows <= 0 || cols <= 0) return;
  const float keep_scale = 1.0f / (1.0f - p);  // as the CPU computes it
  check(launch(dropout_mask_kernel, dim3(blocks_for(rows, kDropoutRows)), dim3(kDropoutRows), 0,
               stream_, mask, rows, cols, p, keep_scale, seed, first_row),
        "dropout_mask");
}

}  // namespace baton::gpu
