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
