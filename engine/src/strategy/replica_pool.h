// Persistent threads, one per replica, that run a task on every replica at
// once and wait for all of them. Private to the engine.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace baton {

class ReplicaPool {
 public:
  // `on_failure` runs (on the failing thread) when a task throws, so peers
  // blocked in a collective can give up at once.
  ReplicaPool(int replicas, std::function<void()> on_failure);
  ~ReplicaPool();
  ReplicaPool(const ReplicaPool&) = delete;
  ReplicaPool& operator=(const ReplicaPool&) = delete;

  // Runs task(r) on replica r's thread for every r; returns when all are
  // done; rethrows the first exception a replica threw.
  void run(const std::function<void(int)>& task);

 private:
  void worker(int r);

  std::function<void()> on_failure_;
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void(int)>* task_ = nullptr;
  long generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace baton
