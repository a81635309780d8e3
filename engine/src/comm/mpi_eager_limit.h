// The eager limits of the MPI library's transports: how many bytes a
// message may carry and still arrive whole with its envelope. The MPI
// communicator marks a received piece at or under its peer's limit as
// eager (LinkSample::eager): its transfer time is a copy out of MPI's
// buffer, not the link's. Compiled only with BATON_WITH_MPI.
#pragma once

#include <cstdint>
#include <string>

namespace baton {

struct MpiEagerLimits {
  int64_t same_host = 0;   // bytes, to a peer on this rank's host (shared memory)
  int64_t other_host = 0;  // bytes, to a peer on another host (network)
  // Where the two figures came from, e.g. "MPI_T: btl_vader_eager_limit 4096,
  // btl_vader_rndv_eager_limit 32768; btl_tcp_eager_limit 65536, ...".
  std::string source;
};

// OpenMPI's figures, read through the MPI tool interface (MPI_T control
// variables, which hold the MCA values the job runs with: defaults,
// OMPI_MCA_* environment, mpirun --mca): for each transport the larger of
// btl_<t>_eager_limit (sent eagerly) and btl_<t>_rndv_eager_limit (sent in
// a rendezvous's first fragment, with the envelope). Same host: the shared
// memory transport (vader in OpenMPI 4, sm in 5); other hosts: the largest
// of the network transports registered (tcp, openib, ofi, uct, usnic).
// MPICH: MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE for both. A class whose variables
// the library does not have gets kFallbackEagerBytes. (With OpenMPI's UCX
// messaging layer, pml ucx, the btl figures do not describe the transport;
// they are still what is used.) Needs MPI initialised; never throws.
MpiEagerLimits read_mpi_eager_limits();

// 64 KiB: OpenMPI's TCP eager limit, and no smaller than its shared-memory
// one (4 KiB eager, 32 KiB in a rendezvous's first fragment).
inline constexpr int64_t kFallbackEagerBytes = int64_t{64} << 10;

}  // namespace baton
