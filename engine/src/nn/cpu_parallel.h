// Splitting the CPU backend's loops over the OpenMP team. Each thread gets
// one contiguous range, so a result never depends on how many threads ran
// (every element, row or column is computed by the same code in the same
// order). An exception thrown in a range (a bad label, a failed product) is
// carried out of the parallel region and rethrown, never left to terminate
// the process.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>

namespace baton::cpu {

// Runs body(begin, end) over [0, n) split into one range per thread, each
// at least `grain` long (and a multiple of `align` where it can be: column
// ranges stay on cache lines); on the calling thread alone when n is small,
// one thread is set, or the caller is already inside a parallel region.
template <class Body>
void parallel_range(int64_t n, int64_t grain, const Body& body, int64_t align = 1) {
  const int64_t team = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t parts = std::min<int64_t>(team, n / std::max<int64_t>(grain, 1));
  if (parts <= 1) {
    if (n > 0) body(int64_t{0}, n);
    return;
  }
  std::exception_ptr error;
  std::mutex mu;
#pragma omp parallel num_threads(static_cast <int>(parts))
  {
    const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    int64_t chunk = (n + threads - 1) / threads;
    chunk = (chunk + align - 1) / align * align;
    const int64_t begin = std::min(n, t * chunk), end = std::min(n, begin + chunk);
    if (begin < end) {
      try {
        body(begin, end);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

// Runs body(i) for i in [0, n), the items spread over the team.
template <class Body>
void parallel_items(int64_t n, const Body& body) {
  parallel_range(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) body(i);
  });
}

// Work below this many floats per thread is not worth waking a thread for.
constexpr int64_t kMinFloatsPerThread = 32 * 1024;

// Items of `floats` values each per thread worth splitting for (rows,
// images): the grain for parallel_range.
inline int64_t items_per_thread(int64_t floats) {
  return std::max<int64_t>(1, kMinFloatsPerThread / std::max<int64_t>(floats, 1));
}

// Runs body(c0, c1) over column ranges of a (rows, cols) matrix, each on
// whole cache lines (16 floats) and summed over every row by one thread.
template <class Body>
void parallel_columns(int64_t cols, int64_t rows, const Body& body) {
  parallel_range(cols, std::max<int64_t>(16, kMinFloatsPerThread / std::max<int64_t>(rows, 1)),
                 body, 16);
}

// Column sums of a (rows, cols) matrix into up to two outputs (out_a,
// out_b: cols floats each, already zeroed, either may be null), split over
// the team by a rule that depends on the shape alone, so the sums are the
// same on any number of threads:
// - wide matrices (kWideColumns columns or more) by columns, each column
//   summed over every row in row order by one thread;
// - narrow ones (a convolution's channels: whole rows are a cache line or
//   two, and too few to split) by rows: chunks of rows fixed by the shape
//   each sum into their own slots, which are then added in chunk order.
// part(r0, r1, c0, c1, a, b) adds rows [r0, r1) of columns [c0, c1) into
// a[c] and b[c] (a or b null where that output is).
constexpr int64_t kWideColumns = 256;
constexpr int64_t kMaxRowChunks = 16;
template <class Part>
void column_sums(int64_t rows, int64_t cols, float* out_a, float* out_b, const Part& part) {
  if (rows <= 0 || cols <= 0) return;
  if (cols >= kWideColumns) {
    parallel_columns(cols, rows, [&](int64_t c0, int64_t c1) {
      part(int64_t{0}, rows, c0, c1, out_a, out_b);
    });
    return;
  }
  const int64_t min_rows = std::max<int64_t>(1, 4096 / cols);
  const int64_t chunk = std::max(min_rows, (rows + kMaxRowChunks - 1) / kMaxRowChunks);
  const int64_t chunks = (rows + chunk - 1) / chunk;
  float slots[kMaxRowChunks][2][kWideColumns];
  parallel_range(chunks, std::max<int64_t>(1, kMinFloatsPerThread / (chunk * cols)),
                 [&](int64_t k0, int64_t k1) {
                   for (int64_t k = k0; k < k1; ++k) {
                     float* a = out_a != nullptr ? slots[k][0] : nullptr;
                     float* b = out_b != nullptr ? slots[k][1] : nullptr;
                     for (int64_t c = 0; c < cols; ++c) {
                       if (a != nullptr) a[c] = 0.0f;
                       if (b != nullptr) b[c] = 0.0f;
                     }
                     part(k * chunk, std::min(rows, (k + 1) * chunk), int64_t{0}, cols, a, b);
                   }
                 });
  for (int64_t k = 0; k < chunks; ++k) {
    for (int64_t c = 0; c < cols; ++c) {
      if (out_a != nullptr) out_a[c] += slots[k][0][c];
      if (out_b != nullptr) out_b[c] += slots[k][1][c];
    }
  }
}

// A sum over [0, n) in chunks fixed by n alone (at least `min_chunk`, at
// most kMaxChunks of them): part(begin, end) gives a chunk's sum; the
// chunks run over the team and their sums are added in chunk order, so
// the total is the same on any number of threads. `floats_per_item` sizes
// the work for the thread decision.
constexpr int64_t kMaxChunks = 64;
template <class T, class Part>
T chunked_sum(int64_t n, int64_t min_chunk, int64_t floats_per_item, const Part& part) {
  if (n <= 0) return T{};
  const int64_t chunk = std::max(min_chunk, (n + kMaxChunks - 1) / kMaxChunks);
  const int64_t chunks = (n + chunk - 1) / chunk;
  T sums[kMaxChunks] = {};
  const int64_t per_chunk = std::max<int64_t>(1, chunk * floats_per_item);
  parallel_range(chunks, std::max<int64_t>(1, kMinFloatsPerThread / per_chunk),
                 [&](int64_t c0, int64_t c1) {
                   for (int64_t c = c0; c < c1; ++c) {
                     sums[c] = part(c * chunk, std::min(n, (c + 1) * chunk));
                   }
                 });
  T total{};
  for (int64_t c = 0; c < chunks; ++c) total += sums[c];
  return total;
}

}  // namespace baton::cpu
