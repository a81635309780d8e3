#include "strategy_factory.h"

#include <baton/cluster/cluster_spec.h>
#include <baton/comm/communicator.h>
#include <baton/comm/mpi.h>
#include <baton/comm/nccl.h>
#include <baton/core/error.h>

#include <cstdlib>

namespace baton {

std::unique_ptr<Strategy> make_strategy(const StrategyConfig& s, const std::string& file,
                                        const PsJoin& ps_join, const std::string& device,
                                        const std::vector<int>& gpus,
                                        const std::string& gpu_library) {
  if (ps_join.workers > 0 && s.type != "parameter_server") {
    throw InputError(file + ": strategy.type: " + s.type +
                     "; --ps-workers is for a parameter_server job (mode async)");
  }
  if (s.type == "one_device") return std::make_unique<OneDeviceStrategy>(device);
  CommOptions comm;
  comm.algorithm = parse_comm_algorithm(s.algorithm);
  comm.timeout_ms = s.timeout_ms;
  GradientOptions grads{s.bucket_bytes, s.overlap, s.first_bucket_bytes};
  if (s.type == "multi_worker_mirrored") {
#ifdef BATON_HAVE_MPI
    if (!MpiRuntime::is_initialized()) {
      throw InputError(file +
                       ": strategy.type: multi_worker_mirrored runs one process per MPI "
                       "rank: start it with mpirun, e.g. mpirun -n 2 baton train " +
                       file);
    }
    if (!gpus.empty()) {
      // One rank per GPU (device_placement.cpp chose it by the rank's place
      // on its host): MPI carries NCCL's id and the step's figures, NCCL
      // the gradients, from the library the backend came from.
      auto host = std::make_unique<MpiCommunicator>(CommOptions{});
      auto nccl =
          std::make_unique<NcclCommunicator>(NcclLibrary::load(gpu_library), *host, gpus[0], comm);
      return std::make_unique<MultiWorkerMirroredStrategy>(std::move(host), std::move(nccl), device,
                                                           grads);
    }
    // Another thread than the main one calls MPI when replicas are threads or
    // buckets are reduced during backward: that needs MPI_THREAD_SERIALIZED.
    const bool threads_ok =
        MpiRuntime::current_thread_level() >= MpiRuntime::ThreadLevel::kSerialized;
    if (!threads_ok && s.replicas > 1) {
      throw InputError(file +
                       ": strategy.replicas_per_worker: several replicas per worker need an MPI "
                       "with MPI_THREAD_SERIALIZED support; this one has less (use 1)");
    }
    grads.overlap = grads.overlap && threads_ok;
    return std::make_unique<MultiWorkerMirroredStrategy>(std::make_unique<MpiCommunicator>(comm),
                                                         s.replicas, grads, comm);
#else
    throw InputError(file +
                     ": strategy.type: multi_worker_mirrored needs MPI, and this build "
                     "has none (BATON_WITH_MPI=OFF)");
#endif
  }
  if (s.type == "parameter_server") {
    // num_ps by default: TF_CONFIG's ps tasks when it is set, else 1.
    int num_ps = s.num_ps;
    if (num_ps == 0) {
      num_ps = 1;
      if (const char* tf = std::getenv("TF_CONFIG"); tf != nullptr && *tf != '\0') {
        const ClusterSpec spec = parse_tf_config(std::string(tf), "TF_CONFIG");
        if (!spec.ps.empty()) num_ps = static_cast<int>(spec.ps.size());
      }
    }
    PsJoin join = ps_join;
    if (s.peer_timeout_s > 0) {
      if (join.workers == 0) {
        throw InputError(file +
                         ": strategy.peer_timeout_s: applies to workers that reach their servers "
                         "over TCP (baton launch of a mode async job); this job runs as one MPI "
                         "job, where it would change nothing: remove it");
      }
      join.timeout_s = s.peer_timeout_s;
    }
    return std::make_unique<ParameterServerStrategy>(num_ps, s.mode == "sync", s.max_staleness,
                                                     file, join);
  }
  // On GPUs (mirrored, central_storage): one NCCL rank per GPU, in this
  // process (ncclCommInitAll), from the library the replicas' backends
  // came from.
  std::vector<std::string> names;
  for (const int g : gpus) {
    names.push_back(std::string(device.rfind("gpu_emulated:", 0) == 0 ? "gpu_emulated:" : "gpu:") +
                    std::to_string(g));
  }
  const auto group = [&] {
    return std::make_unique<NcclGroup>(NcclLibrary::load(gpu_library), gpus, comm);
  };
  if (s.type == "central_storage") {
    // No allreduce (run_config refuses its keys): the replicas' group
    // carries only the first broadcast and SyncBatchNorm's statistics,
    // with the communicators' defaults.
    if (!gpus.empty()) {
      comm = CommOptions{};
      return std::make_unique<CentralStorageStrategy>(group(), std::move(names));
    }
    return std::make_unique<CentralStorageStrategy>(s.replicas, CommOptions{}, GradientOptions{});
  }
  if (!gpus.empty()) {
    if (s.type != "mirrored") {
      throw RuntimeError(s.type + " on GPUs is not built yet");
    }
    return std::make_unique<MirroredStrategy>(group(), std::move(names), grads);
  }
  return std::make_unique<MirroredStrategy>(s.replicas, comm, grads);
}

}  // namespace baton
