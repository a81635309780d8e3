// Shared by the communicator tests: run one function per rank of an
// in-process group (LocalGroup, NcclGroup), each on its own thread; a rank
// that throws aborts the group so the others do not wait for it, and the
// first error is rethrown after every thread has joined.
#pragma once

#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace baton {

template <class Group, class Comm>
void on_ranks(Group& g, const std::function<void(Comm&)>& fn) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(g.size()));
  for (int r = 0; r < g.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(g.rank(r));
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
        g.abort();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// Values exact in float: rank r, element i holds r + (i % 64) * 0.5.
inline float value(int r, int64_t i) {
  return static_cast<float>(r) + static_cast<float>(i % 64) * 0.5f;
}

}  // namespace baton
