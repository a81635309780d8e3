// The multi-host test bed (testbed.sh) for a test suite: its hosts made in
// SetUpTestSuite (an earlier run's removed first), removed in
// TearDownTestSuite, and the environment mpirun needs to reach them.
#pragma once

#include <baton/core/child_process.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace baton::testbed {

inline const std::string kScript = BATON_SOURCE_DIR "/tests/multihost/testbed.sh";

class TestBed {
 public:
  TestBed() = default;
  // Hosts named prefix1, prefix2 ...; the suite's files in `work`.
  TestBed(std::string prefix, std::filesystem::path work)
      : prefix_(std::move(prefix)), work_(std::move(work)) {}

  // Empties the work folder and brings up `hosts` hosts, with agent.sh
  // there (OpenMPI's rsh agent into them). `needs` says what root is needed
  // for, `tools` what must be on PATH. False, and skip() says why, where the
  // test bed cannot be had here.
  bool up(int hosts, const std::string& needs, const std::vector<std::string>& tools) {
    std::filesystem::remove_all(work_);
    std::filesystem::create_directories(work_);
    if (::geteuid() != 0) {
      skip_ = "the test bed needs root (" + needs + ")";
      return false;
    }
    for (const auto& tool : tools) {
      if (find_on_path(tool).empty()) {
        skip_ = (tool == "ip" ? "ip (iproute2)" : tool) + " is not on PATH";
        return false;
      }
    }
    run_child(kScript, {"testbed.sh", "down", prefix_}, {}, 60);
    const ChildResult r =
        run_child(kScript, {"testbed.sh", "up", std::to_string(hosts), prefix_}, {}, 60);
    if (!exited_ok(r.status)) {
      skip_ = "network namespaces cannot be made here: " + excerpt(r.err);
      run_child(kScript, {"testbed.sh", "down", prefix_}, {}, 60);
      return false;
    }
    hostfile_ = r.out;
    std::ofstream(work_ / "agent.sh") << "#!/bin/sh\nexec " << kScript << " agent \"$@\"\n";
    std::filesystem::permissions(work_ / "agent.sh", std::filesystem::perms::owner_all);
    return true;
  }

  // Removes the hosts, where up() made them.
  void down() const {
    if (skip_.empty()) run_child(kScript, {"testbed.sh", "down", prefix_}, {}, 60);
  }

  const std::string& skip() const { return skip_; }
  const std::string& prefix() const { return prefix_; }
  // The hostfile testbed.sh up wrote ("bt-t1 slots=2" ...).
  const std::string& hostfile() const { return hostfile_; }
  std::string path(const std::string& name) const { return (work_ / name).string(); }

  // mpirun's environment on the test bed.
  std::vector<std::string> env() const {
    return {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
            "OMPI_MCA_plm_rsh_agent=" + path("agent.sh"),
            // Only the test bed's own network, between the hosts and to mpirun.
            "OMPI_MCA_oob_tcp_if_include=10.77.0.0/24", "OMPI_MCA_btl_tcp_if_include=10.77.0.0/24",
            // Ranks on 2 cores: a rank waiting in MPI lets the others run.
            "OMPI_MCA_mpi_yield_when_idle=1",
            // As baton launch sets it (launch/mpirun_command.h): OpenMPI's
            // shared topology mapping crashed daemons on one machine.
            "OMPI_MCA_rtc_hwloc_vmhole=none"};
  }

 private:
  std::string prefix_;
  std::filesystem::path work_;
  std::string skip_;
  std::string hostfile_;
};

}  // namespace baton::testbed
