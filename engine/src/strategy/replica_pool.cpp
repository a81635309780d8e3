#include "replica_pool.h"

#include <baton/nn/kernels.h>

namespace baton {

ReplicaPool::ReplicaPool(int replicas, std::function<void()> on_failure)
    : on_failure_(std::move(on_failure)) {
  for (int r = 0; r < replicas; ++r) threads_.emplace_back([this, r] { worker(r); });
}

ReplicaPool::~ReplicaPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ReplicaPool::run(const std::function<void(int)>& task) {
  std::unique_lock<std::mutex> lock(mu_);
  task_ = &task;
  error_ = nullptr;
  pending_ = static_cast<int>(threads_.size());
  ++generation_;
  cv_.notify_all();
  cv_.wait(lock, [this] { return pending_ == 0; });
  task_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void ReplicaPool::worker(int r) {
  // Each replica computes on its own core: one BLAS thread, and denormals
  // flushed as on the trainer thread.
  cpu::set_num_threads(1);
  const cpu::ScopedFlushDenormals ftz;
  long seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const std::function<void(int)>* task = task_;
    lock.unlock();
    std::exception_ptr failed;
    try {
      (*task)(r);
    } catch (...) {
      failed = std::current_exception();
      if (on_failure_) on_failure_();
    }
    lock.lock();
    if (failed && !error_) error_ = failed;
    if (--pending_ == 0) cv_.notify_all();
  }
}

}  // namespace baton
