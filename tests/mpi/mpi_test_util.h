// Helpers of the tests that run as MPI jobs.
#pragma once

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <stdlib.h>

#include <string>

namespace baton::mpi_test {

// A fresh folder under /tmp that every rank knows: rank 0 makes it (mkdtemp,
// "/tmp/<prefix>_XXXXXX") and sends its name; "" on every rank when it
// cannot. A collective.
inline std::string shared_temp_dir(const std::string& prefix) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string dir;
  if (rank == 0) {
    std::string pattern = "/tmp/" + prefix + "_XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) dir = pattern;
  }
  int len = static_cast<int>(dir.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(static_cast<size_t>(len));
  MPI_Bcast(dir.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  return dir;
}

}  // namespace baton::mpi_test
