// A communicator over processes x threads: `outer` spans the processes (MPI
// ranks, one handle per process), and inside each process `local_size`
// threads share a LocalGroup. Global rank g = outer.rank() * local_size +
// local rank, so a process's replicas are consecutive.
//
// Collectives are two-level, like the `hierarchical` algorithm one level
// up: reduce (or gather) inside the process through shared memory, combine
// across processes on the process leader (local rank 0, the only thread that
// calls `outer`), then share the result inside the process. The outer
// communicator therefore needs MPI_THREAD_SERIALIZED or better when the
// leader is not the main thread.
//
// Point-to-point calls (send/recv/sendrecv) work between the replicas of
// one process; between processes they would need one MPI tag space per
// thread pair and throw CommError instead. Nothing in the strategies uses
// them (the ring algorithm runs inside `outer`).
#pragma once

#include <baton/comm/communicator.h>
#include <baton/comm/local.h>

#include <memory>
#include <vector>

namespace baton {

class NestedGroup {
 public:
  NestedGroup(std::unique_ptr<Communicator> outer, int local_size, CommOptions local_options);
  ~NestedGroup();
  NestedGroup(const NestedGroup&) = delete;
  NestedGroup& operator=(const NestedGroup&) = delete;

  int local_size() const;
  Communicator& outer();
  // The handle for the thread running local replica r.
  Communicator& rank(int r);
  // Wakes every local replica waiting in a collective (they throw).
  void abort();
  // Per-link traffic since the last call, in global ranks: local links as
  // (g_a -> g_b) inside this process, outer links between the leaders.
  std::vector<LinkSample> drain_links();

 private:
  std::unique_ptr<Communicator> outer_;
  std::unique_ptr<LocalGroup> local_;
  std::vector<std::unique_ptr<Communicator>> ranks_;
};

}  // namespace baton
