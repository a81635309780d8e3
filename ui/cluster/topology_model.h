// The cluster topology the user composes: hosts, their devices, roles and
// the distribution strategy. A plain model (no scene, no widgets): the
// Cluster view observes it, the Train view reads the strategy from it.
//
// Every derived figure (replicas, ranks, the ring, the run config's
// "strategy" object, TF_CONFIG, the hostfile) is computed from the hosts and
// the strategy, and the cluster rules are the engine's (baton/cluster.h).
//
// Which devices a host's replicas run on: its cuda:* devices when it has
// any, else its cpu:* devices (one replica per physical core, as the
// engine's mirrored strategy does).
//
// Mutations go through the model's setters; undo is the business of the
// QUndoCommands in topology_commands.h, which call these setters.
#pragma once

#include <QObject>
#include <QPointF>
#include <QStringList>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/engine_cluster.h"

namespace baton {
struct HostInfo;  // baton/discovery.h
}

namespace baton::ui {

// What the topology keeps of a probe: its own copy of baton::HostInfo's
// devices and links, so topology files and the canvas do not follow every
// change of the probe's structs (topology_probe.cpp converts).
struct TopologyDevice {
  std::string name;    // "cpu:<i>" or "cuda:<i>"
  std::string kind;    // "cpu" or "cuda"
  int index = 0;       // i in the name
  int numa_node = -1;  // -1 when unknown
  std::string model;   // a GPU's model name
  bool operator==(const TopologyDevice&) const = default;
};

struct TopologyGpuLink {
  std::string type;  // nvidia-smi topo -m: "X", "NV<n>", "PIX", "PXB", "PHB", "NODE", "SYS", ""
  int nvlinks = 0;
  bool p2p = false;
  bool operator==(const TopologyGpuLink&) const = default;
};

struct TopologyHostInfo {
  std::string hostname;
  std::string cpu_model = "unknown";
  int packages = 0, cores = 0, threads = 0, numa_nodes = 0;
  uint64_t memory_bytes = 0;
  std::vector<TopologyDevice> devices;  // cpu:* first, then cuda:*
  std::string gpu_note;
  std::vector<std::vector<TopologyGpuLink>> gpu_links;  // over the cuda devices
  int cpu_count() const;
  int gpu_count() const;
  bool operator==(const TopologyHostInfo&) const = default;
};

// Conversions to and from the engine's probe (topology_probe.cpp).
TopologyHostInfo from_host_info(const HostInfo& info);
HostInfo to_host_info(const TopologyHostInfo& info);

// One task box on the canvas: a machine (or one task on it) and its devices.
struct TopologyHost {
  int id = 0;       // stable inside a model; 0 = "give me one" to add_host
  QString name;     // host name or address, as mpirun and TF_CONFIG use it
  int port = 2222;  // the TF_CONFIG task port
  TaskRole role = TaskRole::kWorker;
  TopologyHostInfo info;  // devices and GPU links (a probe's, or typed in)
  bool probed = false;    // info came from a probe, not from the user
  bool local = false;     // the machine the studio runs on
  QPointF pos;            // top-left on the canvas
  bool operator==(const TopologyHost&) const = default;
};

// How two replicas talk, in the words of `nvidia-smi topo -m` and the
// network.
enum class LinkClass : int {
  kUnknown = 0,
  kSharedMemory = 1,  // CPU cores on one NUMA node
  kNvLink = 2,        // NV<n>
  kPcie = 3,          // PIX, PXB, PHB, NODE
  kCrossNuma = 4,     // SYS, or CPU cores on different NUMA nodes
  kNetwork = 5,       // between hosts (tasks)
};
QString to_string(LinkClass c);

// One replica in global rank order (the engine's link events name these
// ranks).
struct Replica {
  int host_id = 0;
  QString device;     // "cpu:3", "cuda:0"
  int task_rank = 0;  // the MPI rank (0 for the single-process strategies)
};

// A link of the ring (replica `src` sends to `dst`).
struct TopologyLink {
  int src = 0, dst = 0;  // global replica ranks
  LinkClass cls = LinkClass::kUnknown;
  QString detail;  // "NV4", "PXB", "" ...
};

struct TopologyProblem {
  int host_id = -1;  // -1: about the whole topology
  QString text;
};

class TopologyModel : public QObject {
  Q_OBJECT
 public:
  // Everything that can be undone, as one value.
  struct State {
    QString strategy = QStringLiteral("mirrored");
    QString ps_mode = QStringLiteral("async");
    std::vector<TopologyHost> hosts;
    bool operator==(const State&) const = default;
  };

  // Starts as the first-start default: "localhost" with one cpu device per
  // hardware thread under mirrored, until set_local_host brings the probe.
  explicit TopologyModel(QObject* parent = nullptr);

  // ---- the strategy ----
  // "one_device", "mirrored", "central_storage", "multi_worker_mirrored",
  // "parameter_server" ("tpu" is shown, unavailable).
  QString strategy() const { return state_.strategy; }
  void set_strategy(const QString& s);
  static QStringList strategies();  // the five that run, then "tpu"
  static QString tpu_unavailable_reason();
  // parameter_server: "async" or "sync".
  QString ps_mode() const { return state_.ps_mode; }
  void set_ps_mode(const QString& mode);

  // ---- hosts and devices ----
  const std::vector<TopologyHost>& hosts() const { return state_.hosts; }
  const TopologyHost* host(int id) const;
  int host_index(int id) const;  // -1 when absent
  // Adds (at `index`, -1 = the end) and returns the id. A host with id 0
  // gets a fresh one; an id in use is an error (std::invalid_argument).
  int add_host(TopologyHost h, int index = -1);
  // Removes and returns it; nullopt when absent.
  std::optional<TopologyHost> remove_host(int id);
  // Replaces the host with that id (role, name, port, devices...); the id
  // is kept. False when absent.
  bool replace_host(const TopologyHost& h);
  void move_host(int id, QPointF pos);
  void set_host_role(int id, TaskRole role);
  // Adds "<kind>:<next free index>" (kind "cpu" or "cuda") and returns its
  // name; "" when the host is absent.
  QString add_device(int host_id, const QString& kind);
  bool remove_device(int host_id, const QString& device);
  // The same on a host value (for commands that edit a copy).
  static QString add_device_to(TopologyHost& h, const QString& kind);
  static bool remove_device_from(TopologyHost& h, const QString& device);
  // A fresh host named `name` with `cpus` cpu and `gpus` cuda devices (not
  // probed), placed right of the others.
  TopologyHost make_host(const QString& name, int cpus, int gpus, TaskRole role) const;

  // This host, with all its devices, alone under mirrored: the first-start
  // default. Emits reset().
  void set_local_host(const HostInfo& info);
  void set_local_host(const TopologyHostInfo& info);
  // True until anything but set_local_host changed the model.
  bool pristine() const { return pristine_; }

  const State& state() const { return state_; }
  void set_state(State s);  // emits reset()

  // ---- what the topology makes ----
  std::vector<Replica> replicas() const;
  int replica_count() const;  // replicas in sync (parameter_server: workers)
  int process_count() const;  // MPI ranks: 1 for the single-process strategies
  bool multi_process() const;
  // multi_worker_mirrored: replicas each rank runs (the fewest any of its
  // hosts offers); 1 otherwise.
  int replicas_per_worker() const;
  // global / n each, the first global % n one more (Strategy::split_batch).
  std::vector<int64_t> per_replica_batch(int64_t global_batch) const;
  // "host/device" of every replica in ring order (= global rank order).
  QStringList ring_order() const;
  // The ring's links: replica i -> i+1 (mod n); none for one replica and
  // for parameter_server (workers talk to the ps, not to each other).
  std::vector<TopologyLink> ring_links() const;
  // The class of the link between two replicas (global ranks).
  TopologyLink link_between(int src, int dst) const;
  // The run config's "strategy" object (passes parse_run_config when the
  // topology has no problems).
  nlohmann::json strategy_json() const;

  // The TF_CONFIG cluster of the tasks (chief, workers, ps in host order).
  ClusterSpec cluster_spec() const;
  // One task's TF_CONFIG; InputError when the topology is invalid or the
  // task is not in it.
  std::string tf_config(TaskRole role, int index) const;
  // An OpenMPI hostfile for the ranks (one line per machine, slots = its
  // ranks); "" when the topology has problems.
  std::string hostfile() const;

  // Validation: messages with the host they are about; empty = runnable.
  std::vector<TopologyProblem> problem_list() const;
  QStringList problems() const;
  QStringList problems_of(int host_id) const;

  // ---- files (topology_file.cpp) ----
  nlohmann::json to_json() const;
  // Reads a document written by to_json. InputError naming `source` and the
  // key on any problem; the model is left unchanged then.
  void load_json(const nlohmann::json& doc, const std::string& source);
  void save_file(const QString& path) const;  // RuntimeError on I/O failure
  void load_file(const QString& path);        // InputError/RuntimeError
  // Hosts (tasks) read from hostfile text: `slots` tasks per entry on
  // successive ports, the first one chief, one cpu device each (not probed).
  std::vector<TopologyHost> hosts_from_hostfile(const std::string& text,
                                                const std::string& source) const;
  // Hosts from a TF_CONFIG document (the evaluator is left out).
  std::vector<TopologyHost> hosts_from_tf_config(const std::string& text,
                                                 const std::string& source) const;

  // The devices a host's replicas run on (cuda when it has any, else cpu).
  static std::vector<const TopologyDevice*> replica_devices(const TopologyHost& h);

 signals:
  // Anything changed.
  void changed();
  // Anything but a host's position changed (followed by changed()).
  void structure_changed();
  // Only a host's position changed (followed by changed()).
  void host_moved(int id);
  // The whole topology was replaced (load, set_local_host).
  void reset();

 private:
  void touch();  // marks not pristine, emits changed()
  TopologyHost* find(int id);
  std::vector<int> task_hosts() const;  // host indices taking part, in rank order
  bool single_process() const { return !multi_process(); }

  State state_;
  int next_id_ = 1;
  bool pristine_ = true;
};

}  // namespace baton::ui
