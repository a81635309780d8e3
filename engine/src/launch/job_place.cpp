#include <baton/cluster/cluster_spec.h>
#include <baton/comm/communicator.h>
#include <baton/comm/mpi.h>
#include <baton/core/config.h>
#include <baton/core/error.h>
#include <baton/launch/job_place.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

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

std::string read_on_chief(const std::string& path) {
#ifdef BATON_HAVE_MPI
  if (MpiRuntime::is_initialized()) {
    MpiCommunicator world;
    if (world.size() > 1) {
      // "T" + the text, or "E" + the error every rank then reports.
      std::string message;
      if (world.rank() == 0) {
        try {
          message = "T" + read_text_file(path);
        } catch (const InputError& e) {
          message = std::string("E") + e.what();
        }
      }
      broadcast_string(world, message, 0);
      if (message.empty() || message[0] != 'T') {
        throw InputError(message.empty() ? path + ": the chief sent nothing" : message.substr(1));
      }
      return message.substr(1);
    }
  }
#endif
  return read_text_file(path);
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

std::vector<std::string> unique_hosts(const std::vector<std::string>& rank_hosts) {
  std::vector<std::string> hosts;
  for (const auto& h : rank_hosts) {
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  }
  return hosts;
}

std::vector<std::string> job_rank_hosts([[maybe_unused]] const JobPlace& place) {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) std::strcpy(name, "unknown");
  std::vector<std::string> hosts{name};
#ifdef BATON_HAVE_MPI
  if (place.size > 1) {
    // The names travel as floats (bytes 0..255 are exact) over the MPI
    // communicator, which reports a failed collective as a CommError.
    constexpr int64_t kLen = sizeof(name);
    std::vector<float> mine(kLen), all(static_cast<size_t>(place.size * kLen));
    for (int64_t i = 0; i < kLen; ++i) mine[i] = static_cast<unsigned char>(name[i]);
    MpiCommunicator world;
    world.allgather(mine.data(), all.data(), kLen);
    hosts.clear();
    for (int r = 0; r < place.size; ++r) {
      std::string h;
      for (int64_t i = 0; i < kLen; ++i) {
        const auto c = static_cast<char>(static_cast<int>(all[static_cast<size_t>(r * kLen + i)]));
        if (c == '\0') break;
        h += c;
      }
      hosts.push_back(h);
    }
  }
#endif
  return hosts;
}

}  // namespace baton
