// Large buffers (a layer's weights, an activation) mapped and unmapped on
// their own, so memory freed is given back to the system at once. glibc
// otherwise raises its mmap threshold to the largest block freed so far
// (up to 32 MiB) and serves later ones from the heap, whose middle it
// cannot give back: the layers' own tensors, freed once the model's
// parameters move into flat buffers, stayed resident beside those - a
// GPT of 25M parameters on 4 ranks peaked 160 MiB a rank above its plan
// for it. Called first thing in main() (a process-wide allocator setting,
// the program's, not the engine's).
#pragma once

#include <malloc.h>

namespace baton::cli {

inline void map_large_allocations() { mallopt(M_MMAP_THRESHOLD, 1 << 20); }

}  // namespace baton::cli
