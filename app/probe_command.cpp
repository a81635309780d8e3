#include "probe_command.h"

#include <baton/discovery.h>
#include <baton/error.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace baton::cli {
namespace {

// ---- the readable summary ----

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

// "cpu:0 .. cpu:63 (NUMA 0), cpu:64 .. cpu:127 (NUMA 1)": runs of
// consecutive cpu devices on one NUMA node.
std::string cpu_ranges(const HostInfo& h, bool with_numa) {
  std::string out;
  const DeviceInfo* start = nullptr;
  const DeviceInfo* prev = nullptr;
  auto flush = [&] {
    if (start == nullptr) return;
    if (!out.empty()) out += ", ";
    out += start->name;
    if (prev != start) out += " .. " + prev->name;
    if (with_numa && start->numa_node >= 0)
      out += " (NUMA " + std::to_string(start->numa_node) + ")";
  };
  for (const auto& d : h.devices) {
    if (d.kind != "cpu") continue;
    if (start != nullptr && with_numa && d.numa_node != start->numa_node) {
      flush();
      start = nullptr;
    }
    if (start == nullptr) start = &d;
    prev = &d;
  }
  flush();
  return out;
}

void print_summary(std::FILE* out, const HostInfo& h) {
  std::fprintf(out, "host        %s\n", h.hostname.c_str());
  std::fprintf(out, "cpu         %s (%d package%s)\n", h.cpu_model.c_str(), h.packages,
               h.packages == 1 ? "" : "s");
  std::fprintf(out, "cores       %d physical, %d hardware threads\n", h.cores, h.threads);
  std::fprintf(out, "numa nodes  %d\n", h.numa_nodes);
  std::fprintf(out, "memory      %s\n", gib(h.memory_bytes).c_str());
  std::fprintf(out, "devices     %s (one per physical core)\n",
               cpu_ranges(h, h.numa_nodes > 1).c_str());

  const int gpus = h.gpu_count();
  if (gpus == 0) {
    std::fprintf(out, "GPUs        none (%s)\n",
                 h.gpu_note.empty() ? "none found" : h.gpu_note.c_str());
    return;
  }
  std::fprintf(out, "GPUs        %d\n", gpus);
  std::vector<std::string> names;
  for (const auto& d : h.devices) {
    if (d.kind != "cuda") continue;
    names.push_back(d.name);
    std::fprintf(out, "  %-9s %s, %s, %d SMs, compute %d.%d, PCI %s", d.name.c_str(),
                 d.model.c_str(), gib(d.memory_bytes).c_str(), d.sm_count, d.compute_major,
                 d.compute_minor, d.pci_bus_id.c_str());
    if (d.numa_node >= 0) std::fprintf(out, ", NUMA %d", d.numa_node);
    std::fprintf(out, "\n");
    std::string live;
    if (d.utilization_pct) live += "utilisation " + std::to_string(*d.utilization_pct) + "%";
    if (d.memory_used_bytes)
      live += (live.empty() ? "" : ", ") + ("memory used " + gib(*d.memory_used_bytes));
    if (d.power_w) {
      char w[32];
      std::snprintf(w, sizeof(w), "power %.0f W", *d.power_w);
      live += (live.empty() ? "" : ", ") + std::string(w);
    }
    if (!live.empty()) std::fprintf(out, "            %s\n", live.c_str());
  }
  if (!h.gpu_note.empty()) std::fprintf(out, "note        %s\n", h.gpu_note.c_str());
  if (gpus > 1 && static_cast<int>(h.gpu_links.size()) == gpus) {
    std::fprintf(out, "links       nvidia-smi topo -m classes; * = no peer access (P2P)\n");
    auto print_row = [out](std::string row) {
      while (!row.empty() && row.back() == ' ') row.pop_back();
      std::fprintf(out, "%s\n", row.c_str());
    };
    auto pad = [](std::string cell, size_t width) {
      if (cell.size() < width) cell.resize(width, ' ');
      return cell;
    };
    std::string header = pad("", 11);
    for (const auto& n : names) header += " " + pad(n, 8);
    print_row(header);
    for (int i = 0; i < gpus; ++i) {
      std::string row = "  " + pad(names[i], 9);
      for (int j = 0; j < gpus; ++j) {
        const GpuLink& l = h.gpu_links[i][j];
        std::string cell = l.type.empty() ? "?" : l.type;
        if (i != j && !l.p2p) cell += "*";
        row += " " + pad(cell, 8);
      }
      print_row(row);
    }
  }
  if (!h.nvml_note.empty()) std::fprintf(out, "nvml        %s\n", h.nvml_note.c_str());
}

// ---- running mpirun ----

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return {};
}

struct ChildResult {
  int status = 0;  // as waitpid reports it
  std::string out, err;
};

// Runs `program` with `args` (no shell), with `extra_env` added to this
// process's environment and stdin from /dev/null; collects stdout and
// stderr.
ChildResult run_child(const std::string& program, const std::vector<std::string>& args,
                      const std::vector<std::string>& extra_env) {
  // Everything the child needs is built before fork: between fork and exec
  // only async-signal-safe calls are made.
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    const bool overridden = std::any_of(
        extra_env.begin(), extra_env.end(),
        [&](const std::string& x) { return x.compare(0, key.size() + 1, key + "=") == 0; });
    if (!overridden) env_store.push_back(entry);
  }
  env_store.insert(env_store.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw RuntimeError(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw RuntimeError(std::string("pipe: ") + std::strerror(e));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    throw RuntimeError(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execve(program.c_str(), argv.data(), envp.data());
    static const char msg[] = "cannot execute mpirun\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);

  ChildResult r;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      const ssize_t n = ::read(fds[k].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[k]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  while (::waitpid(pid, &r.status, 0) < 0) {
    if (errno != EINTR) throw RuntimeError(std::string("waitpid: ") + std::strerror(errno));
  }
  return r;
}

// mpirun's messages, blank lines dropped; the first lines (where ssh says
// what went wrong) and the last ones when there are many.
std::string excerpt(const std::string& text) {
  constexpr size_t kHead = 25, kTail = 5;
  std::vector<std::string> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines.size() > kHead + kTail && i == kHead) {
      out += "\n  ...";
      i = lines.size() - kTail;
    }
    out += (out.empty() ? "" : "\n") + lines[i];
  }
  return out;
}

// The MPI rank this process runs as under mpirun; -1 when not.
int mpi_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoi(v);
  }
  return -1;
}

// Probes every host through mpirun, one process per host, each this same
// binary printing one JSON line; returns the host documents in rank order.
std::vector<HostInfo> probe_cluster(const ProbeArgs& a, const std::string& exe_path) {
  std::vector<std::string> args = {"mpirun"};
  size_t expected = 0;  // 0: as many as the hostfile has nodes
  if (!a.hostfile.empty()) {
    if (!std::ifstream(a.hostfile)) throw InputError(a.hostfile + ": cannot open hostfile");
    args.insert(args.end(), {"--hostfile", a.hostfile, "--map-by", "ppr:1:node"});
  } else {
    std::stringstream list(a.hosts);
    std::string entry;
    while (std::getline(list, entry, ',')) {
      if (entry.empty() || entry.find_first_of(" \t") != std::string::npos) {
        throw InputError("--hosts \"" + a.hosts + "\": expected host names separated by commas");
      }
      ++expected;
    }
    if (expected == 0 || a.hosts.back() == ',') {
      throw InputError("--hosts \"" + a.hosts + "\": expected host names separated by commas");
    }
    // One process per entry, spread node by node: "h1,h2" puts one on
    // each, "localhost,localhost" two on this machine.
    args.insert(args.end(), {"-H", a.hosts, "-np", std::to_string(expected), "--map-by", "node"});
    if (expected > std::max(1u, std::thread::hardware_concurrency()))
      args.push_back("--oversubscribe");
  }
  args.insert(args.end(), {"--bind-to", "none", exe_path, "probe", "--json", "--single-line"});

  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty()) {
    throw InputError(
        "mpirun not found on PATH: --hosts and --hostfile run through Open MPI's "
        "mpirun (install openmpi-bin)");
  }
  std::vector<std::string> env;
  if (::geteuid() == 0) env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  const ChildResult r = run_child(mpirun, args, env);

  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
    const std::string how = WIFEXITED(r.status) ? "exit " + std::to_string(WEXITSTATUS(r.status))
                                                : "signal " + std::to_string(WTERMSIG(r.status));
    std::string why = excerpt(r.err);
    if (why.empty()) why = excerpt(r.out);
    throw RuntimeError("mpirun failed (" + how + "):\n" + why);
  }

  std::vector<std::pair<int, HostInfo>> ranked;
  std::stringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line.front() != '{') continue;  // anything else mpirun printed
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw RuntimeError(std::string("a probe sent a line that is not JSON: ") + e.what());
    }
    const int rank = doc.is_object() && doc.contains("rank") && doc["rank"].is_number_integer()
                         ? doc["rank"].get<int>()
                         : static_cast<int>(ranked.size());
    ranked.emplace_back(rank, host_info_from_json(doc));
  }
  if (ranked.empty() || (expected > 0 && ranked.size() != expected)) {
    throw RuntimeError("mpirun ran, but " + std::to_string(ranked.size()) + " probe(s) answered" +
                       (expected > 0 ? " of " + std::to_string(expected) : std::string()) +
                       (r.err.empty() ? std::string() : ":\n" + excerpt(r.err)));
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<HostInfo> hosts;
  for (auto& [rank, host] : ranked) hosts.push_back(std::move(host));
  return hosts;
}

}  // namespace

void add_probe_command(CLI::App& app, ProbeArgs& a) {
  CLI::App* probe = app.add_subcommand(
      "probe", "Show this machine's cores, NUMA nodes, memory and GPUs (or every cluster host's)");
  probe->add_flag("--json", a.json, "Print the probe as JSON");
  auto* hosts = probe->add_option(
      "--hosts", a.hosts,
      "Probe these hosts (comma-separated) through mpirun, one process each; baton must be "
      "installed at the same path on each");
  auto* hostfile = probe->add_option("--hostfile", a.hostfile,
                                     "Probe every node of this Open MPI hostfile through mpirun");
  hosts->excludes(hostfile);
  probe->add_flag("--single-line", a.single_line, "One compact JSON line (for mpirun's children)")
      ->group("");
}

int run_probe(const ProbeArgs& a, const std::string& exe_path) {
  std::vector<HostInfo> hosts;
  const bool cluster = !a.hosts.empty() || !a.hostfile.empty();
  if (cluster) {
    hosts = probe_cluster(a, exe_path);
  } else {
    ProbeOptions opt;
    opt.cuda_library = default_cuda_library(exe_path);
    hosts.push_back(probe_local_host(opt));
  }

  if (a.json || a.single_line) {
    nlohmann::json doc;
    if (cluster) {
      doc = {{"hosts", nlohmann::json::array()}};
      for (const auto& h : hosts) doc["hosts"].push_back(to_json(h));
    } else {
      doc = to_json(hosts.front());
      if (a.single_line && mpi_rank() >= 0) doc["rank"] = mpi_rank();
    }
    // Names from the system need not be valid UTF-8: replace, don't throw.
    const auto replace = nlohmann::json::error_handler_t::replace;
    const std::string text =
        a.single_line ? doc.dump(-1, ' ', false, replace) : doc.dump(2, ' ', false, replace);
    std::fputs(text.c_str(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (i > 0) std::fputc('\n', stdout);
    print_summary(stdout, hosts[i]);
  }
  return 0;
}

}  // namespace baton::cli
