#include <baton/comm/peer_auth.h>
#include <baton/discovery/discovery.h>
#include <baton/launch/mpirun_command.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace baton {

std::vector<std::string> mpirun_arguments(const MpirunSpec& spec) {
  std::vector<std::string> a{"-n", std::to_string(spec.ranks)};
  // OpenMPI gives a host as many slots as it has physical cores (or what
  // the hostfile says) and refuses more ranks unless told.
  const int slots = spec.available_slots > 0 ? spec.available_slots : probe_cpus().cores;
  if (spec.ranks > slots) a.emplace_back("--oversubscribe");
  if (spec.tag_output) a.emplace_back("--tag-output");
  if (spec.bind_none) a.insert(a.end(), {"--bind-to", "none"});
  if (!spec.hostfile.empty()) {
    a.emplace_back("--hostfile");
    a.push_back(spec.hostfile);
    // The job's secret (mpirun_environment()) to the ranks on other hosts
    // too: by name here, its value stays in the environment.
    if (spec.send_secret) a.insert(a.end(), {"-x", peer_auth::kSecretEnv});
  } else {
    // Every rank on this host: OpenMPI's own traffic stays on loopback
    // (its out-of-band messages; the ranks' shared memory and self, no TCP
    // transport listening on every interface).
    a.insert(a.end(), {"--mca", "oob_tcp_if_include", "lo", "--mca", "btl", "self,vader"});
  }
  a.insert(a.end(), spec.wrapper.begin(), spec.wrapper.end());
  a.push_back(spec.baton);
  a.emplace_back("train");
  a.push_back(spec.config);
  if (!spec.events.empty()) {
    a.emplace_back("--events");
    a.push_back(spec.events);
  }
  if (spec.quiet) a.emplace_back("--quiet");
  if (!spec.runs_dir.empty()) {
    a.emplace_back("--runs-dir");
    a.push_back(spec.runs_dir);
  }
  if (!spec.history_db.empty()) {
    a.emplace_back("--db");
    a.push_back(spec.history_db);
  }
  a.insert(a.end(), spec.train_args.begin(), spec.train_args.end());
  return a;
}

std::vector<std::pair<std::string, std::string>> mpirun_environment(JobSecret secret) {
  std::vector<std::pair<std::string, std::string>> env;
  if (::geteuid() == 0) {
    env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
  }
  // OpenMPI 4.1's daemons share the topology through memory mapped at an
  // address they guess is free ("the biggest hole"); seen here to segfault
  // a daemon (hwloc_shmem_topology_write: address not mapped) when several
  // start on one machine, which ends the job. Without the hole each process
  // reads the topology itself (milliseconds). The caller's setting wins.
  if (std::getenv("OMPI_MCA_rtc_hwloc_vmhole") == nullptr) {
    env.emplace_back("OMPI_MCA_rtc_hwloc_vmhole", "none");
  }
  // A fresh secret for this job: the parameter servers and their workers
  // prove it to each other (peer_auth.h). In the environment, which only
  // this user can read, never on a command line.
  if (secret == JobSecret::kMade) {
    env.emplace_back(peer_auth::kSecretEnv, peer_auth::to_hex(peer_auth::make_secret()));
  }
  return env;
}

std::vector<std::string> without_secret(const std::vector<std::string>& env) {
  const std::string key = std::string(peer_auth::kSecretEnv) + "=";
  std::vector<std::string> out;
  for (const auto& kv : env) {
    if (kv.rfind(key, 0) != 0) out.push_back(kv);
  }
  return out;
}

namespace {

// A path, a glob, or a list of them (a dataset of several files).
void make_absolute(nlohmann::json& value, const std::filesystem::path& base) {
  if (value.is_array()) {
    for (auto& v : value) make_absolute(v, base);
    return;
  }
  if (!value.is_string()) return;
  const std::filesystem::path p(value.get<std::string>());
  if (p.empty() || p.is_absolute()) return;
  value = (base / p).lexically_normal().string();
}

}  // namespace

nlohmann::json absolutize_paths(nlohmann::json config, const std::string& base_dir) {
  const std::filesystem::path base(base_dir);
  if (!config.is_object()) return config;
  if (auto d = config.find("data"); d != config.end() && d->is_object()) {
    for (const char* part : {"train", "validation"}) {
      auto p = d->find(part);
      if (p == d->end() || !p->is_object()) continue;
      for (const char* key : {"path", "images", "labels"}) {
        if (auto it = p->find(key); it != p->end()) make_absolute(*it, base);
      }
    }
  }
  if (auto c = config.find("checkpoint"); c != config.end() && c->is_object()) {
    if (auto it = c->find("dir"); it != c->end()) make_absolute(*it, base);
  }
  return config;
}

}  // namespace baton
