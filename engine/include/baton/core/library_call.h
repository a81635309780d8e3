// Marks a call into a third-party library on the calling thread. Baton's
// training step allocates nothing (buffers are planned once); a library
// may still allocate inside its own calls (oneDNN builds a small argument
// map each time a primitive runs). The scope lets the allocation test
// count those apart from Baton's own and report both.
//
// State: one depth counter per thread, read only by diagnostics; it
// changes no result.
#pragma once

namespace baton {

class LibraryCall {
 public:
  LibraryCall();
  ~LibraryCall();
  LibraryCall(const LibraryCall&) = delete;
  LibraryCall& operator=(const LibraryCall&) = delete;
};

// Whether the calling thread is inside a LibraryCall.
bool inside_library_call();

}  // namespace baton
