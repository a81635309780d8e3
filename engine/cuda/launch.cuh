// Launching a kernel: one helper for both builds. Under nvcc it is the
// <<<grid, block, shared, stream>>> launch; under the emulator it queues the
// kernel on the emulated stream. Returns the launch's error (a launch the
// GPU would refuse returns the runtime's error in both builds).
#pragma once

#include "kernel_language.cuh"

#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#if !defined(__CUDACC__)
#include "simt/simt_host.h"
#endif

namespace baton::gpu {

template <class... P, class... A>
cudaError_t launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t dynamic_smem,
                   cudaStream_t stream, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "a kernel launched with the wrong argument count");
#if defined(__CUDACC__)
  // An earlier call's error left on this thread is not this launch's.
  (void)cudaGetLastError();
  kernel<<<grid, block, dynamic_smem, stream>>>(std::forward<A>(args)...);
  return cudaGetLastError();
#else
  std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  // The pointer arguments, for the emulator's check that each is device
  // (or pinned) memory, as a GPU requires.
  std::vector<std::pair<int, const void*>> pointers;
  std::apply(
      [&pointers](const auto&... p) {
        int index = 0;
        (
            [&] {
              if constexpr (std::is_pointer_v<std::decay_t<decltype(p)>>)
                pointers.emplace_back(index, static_cast<const void*>(p));
              ++index;
            }(),
            ...);
      },
      params);
  return simt::launch(
      reinterpret_cast<const void*>(kernel), grid, block, dynamic_smem, stream,
      [kernel, params = std::move(params)] { std::apply(kernel, params); }, pointers);
#endif
}

// Blocks of `threads` covering n items.
inline unsigned blocks_for(long long n, unsigned threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

// The grid of a grid-stride kernel over n items: blocks of `threads`
// covering them, at most `max_blocks` (each thread then takes several).
inline unsigned grid_stride_blocks(long long n, unsigned threads, unsigned max_blocks = 4096) {
  const unsigned b = blocks_for(n, threads);
  return b < max_blocks ? b : max_blocks;
}

}  // namespace baton::gpu
