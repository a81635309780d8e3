#include <baton/cluster/cluster_spec.h>
#include <baton/comm/communicator.h>
#include <baton/comm/mpi.h>
#include <baton/core/error.h>
#include <baton/launch/job_place.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#ifdef BATON_HAVE_MPI
// The C API only (not OpenMPI's deprecated C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace baton {

JobPlace place_in_job([[maybe_unused]] const std::string& strategy) {
  JobPlace p;
#ifdef BATON_HAVE_MPI
  if (MpiRuntime::is_initialized()) {
    MpiCommunicator world;
    p.rank = world.rank();
    p.size = world.size();
  }
#endif
  if (const char* tf = std::getenv("TF_CONFIG"); tf != nullptr && *tf != '\0') {
    const ClusterSpec spec = parse_tf_config(std::string(tf), "TF_CONFIG");
    validate_for_strategy(spec, strategy, "TF_CONFIG");
    if (spec.num_tasks() != p.size) {
      throw InputError("TF_CONFIG: cluster: lists " + std::to_string(spec.num_tasks()) +
                       " tasks, but the job has " + std::to_string(p.size) + " process(es)");
    }
    if (spec.task_type != TaskRole::kUnset &&
        spec.rank_of(spec.task_type, spec.task_index) != p.rank) {
      throw InputError("TF_CONFIG: task: " + std::string(to_string(spec.task_type)) + " " +
                       std::to_string(spec.task_index) + " is rank " +
                       std::to_string(spec.rank_of(spec.task_type, spec.task_index)) +
                       " of the cluster, but this process is rank " + std::to_string(p.rank));
    }
  }
  return p;
}

std::string agree_on_run_id([[maybe_unused]] const JobPlace& place, std::string id) {
#ifdef BATON_HAVE_MPI
  if (place.size > 1) {
    MpiCommunicator world;
    broadcast_string(world, id, 0);
  }
#endif
  return id;
}

std::vector<std::string> job_hosts([[maybe_unused]] const JobPlace& place) {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) std::strcpy(name, "unknown");
  std::vector<std::string> hosts{name};
#ifdef BATON_HAVE_MPI
  if (place.size > 1) {
    std::vector<char> all(static_cast<size_t>(place.size) * sizeof(name));
    const int rc = MPI_Allgather(name, sizeof(name), MPI_CHAR, all.data(), sizeof(name), MPI_CHAR,
                                 MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
      char text[MPI_MAX_ERROR_STRING] = {};
      int len = 0;
      MPI_Error_string(rc, text, &len);
      throw CommError(std::string("mpi: MPI_Allgather of the ranks' host names failed: ") + text);
    }
    hosts.clear();
    for (int r = 0; r < place.size; ++r) {
      std::string h(all.data() + static_cast<size_t>(r) * sizeof(name));
      if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
    }
  }
#endif
  return hosts;
}

}  // namespace baton
