// The `local` backend: replicas are threads of one process, and the
// collectives work directly on their buffers through shared memory.
#pragma once

#include <baton/comm/communicator.h>

#include <memory>
#include <vector>

namespace baton {

// A group of `size` local ranks sharing memory; rank(r) is the handle for
// the thread running replica r. The group must outlive its handles.
class LocalGroup {
 public:
  LocalGroup(int size, CommOptions options);
  ~LocalGroup();
  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;
  int size() const;
  Communicator& rank(int r);
  // Marks the group failed: every rank waiting in (or entering) a
  // collective throws CommError at once instead of waiting for a timeout.
  void abort();

  struct Shared;  // opaque: the published buffers, barrier and mailboxes

 private:
  std::unique_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Communicator>> ranks_;
};

}  // namespace baton
