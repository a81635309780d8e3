// The cluster a multi-machine run spans, in the two forms it arrives in:
//
// - TF_CONFIG, the JSON tf.distribute reads from the environment:
//     {"cluster": {"chief": ["a:2222"], "worker": ["b:2222", "c:2222"], "ps": ["d:2222"]},
//      "task": {"type": "worker", "index": 1}}
// - an MPI hostfile in OpenMPI syntax, one host per line:
//     node1 slots=4 max_slots=8   # comment
//
// Both are read strictly: every problem is an InputError that names the
// source (the "TF_CONFIG" variable or a file path), the key path or line,
// and what was expected:
//   TF_CONFIG: cluster.worker[1]: "host:99999" is not host:port (port must be 1..65535)
//   hosts.txt:3: max_slots: 2 is less than slots (4)
// Both are also written, and what is written reads back to the same value.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace baton {

enum class TaskRole : int { kUnset = 0, kChief = 1, kWorker = 2, kPs = 3, kEvaluator = 4 };

// "chief", "worker", "ps", "evaluator" ("unset" for kUnset).
const char* to_string(TaskRole role);

// One task address. `host` is a DNS name, an IPv4 address or an IPv6
// address; IPv6 is stored without brackets ("::1") and written with them.
struct HostPort {
  std::string host;
  int port = 0;
  bool operator==(const HostPort&) const = default;
};

// "host:port", or "[v6]:port" for an IPv6 host.
std::string to_string(const HostPort& hp);

// One task of a cluster.
struct TaskId {
  TaskRole role = TaskRole::kUnset;
  int index = 0;
  bool operator==(const TaskId&) const = default;
};

struct ClusterSpec {
  // The TF_CONFIG "cluster" lists; an absent list is empty.
  std::vector<HostPort> chief, worker, ps, evaluator;
  // The TF_CONFIG "task": which of the tasks this process is. kUnset when
  // the document has no "task".
  TaskRole task_type = TaskRole::kUnset;
  int task_index = 0;

  // The list for `role` (an empty list for kUnset).
  const std::vector<HostPort>& tasks(TaskRole role) const;
  // chief + worker + ps: the tasks that take part in training and get an
  // MPI rank. The evaluator runs beside the cluster and has no rank.
  int num_tasks() const;
  // MPI rank order: the chief first, then the workers, then the ps, each in
  // list order. rank_of throws InputError for an evaluator, kUnset or an
  // index outside its list; task_of for a rank outside 0..num_tasks()-1.
  int rank_of(TaskRole role, int index) const;
  TaskId task_of(int rank) const;

  bool operator==(const ClusterSpec&) const = default;
};

// Reads a TF_CONFIG document. `source` names where the text came from (the
// "TF_CONFIG" variable, a file path) and starts every message. Accepted:
//   "cluster"      required object with the lists "chief", "worker", "ps",
//                  "evaluator" of "host:port" strings (host a name, an IPv4
//                  address or a bracketed IPv6 address; port 1..65535);
//   "task"         optional {"type": chief|worker|ps|evaluator, "index": N},
//                  "index" defaulting to 0;
//   "environment", "rpc_layer"   optional strings that other TF_CONFIG
//                  writers (Kubeflow, TF) add; accepted and ignored.
// Any other key, at any level, is an error. The spec is then checked with
// validate_cluster.
ClusterSpec parse_tf_config(const std::string& json_text, const std::string& source);
ClusterSpec parse_tf_config(const nlohmann::json& doc, const std::string& source);
// For a string literal, which would otherwise convert to either overload.
inline ClusterSpec parse_tf_config(const char* json_text, const std::string& source) {
  return parse_tf_config(std::string(json_text), source);
}

// The cross-entry rules, for a spec from parse_tf_config or built in code:
// every host and port valid; at least one chief, worker or ps task; at most
// one chief and at most one evaluator; no host:port used twice (the message
// names both places); the task, when set, inside a non-empty list.
void validate_cluster(const ClusterSpec& spec, const std::string& source);

// What a strategy needs of the cluster (the spec is assumed valid):
//   parameter_server        at least one ps and at least one worker;
//   multi_worker_mirrored   no ps, at least one chief or worker;
//   one_device, mirrored, central_storage   one machine: at most one task;
//   tpu                     refused (no TPU backend); other names refused.
void validate_for_strategy(const ClusterSpec& spec, const std::string& strategy,
                           const std::string& source);

// One task's TF_CONFIG as compact JSON text: the whole cluster (empty lists
// left out) and "task": {"type", "index"} for (role, index); no "task" when
// role is kUnset. Throws InputError when the spec is invalid or the task is
// not in it. parse_tf_config reads the text back to the same spec with
// task_type = role and task_index = index.
std::string to_tf_config(const ClusterSpec& spec, TaskRole role, int index);

// One line of an OpenMPI hostfile. max_slots 0 means not given.
struct HostfileEntry {
  std::string host;
  int slots = 1;
  int max_slots = 0;
  bool operator==(const HostfileEntry&) const = default;
};

// Reads OpenMPI hostfile text: per line `host [slots=N] [max_slots=M]`
// (`max-slots=M` is accepted too), `#` starting a comment, blank lines
// skipped. The host is a name, an IPv4 or a bare IPv6 address. Errors name
// `source:line`: an unknown or repeated attribute, slots or max_slots not a
// positive integer, max_slots below slots, a host listed twice, a malformed
// host; and `source` alone for a file without hosts.
std::vector<HostfileEntry> parse_hostfile(const std::string& text, const std::string& source);
// Reads a host-discovery command's output (as Horovod's discovery scripts
// print it): per line `host:slots`, or `host` for one slot; a bracketed
// IPv6 address keeps its colons (`[fe80::1]:4`); `#` starts a comment and
// blank lines are skipped. No hosts at all is an empty list (every host
// may be gone for a while). Errors name `source:line`.
std::vector<HostfileEntry> parse_host_slots(const std::string& text, const std::string& source);
// Reads the file at `path` (InputError when it cannot be opened).
std::vector<HostfileEntry> read_hostfile(const std::string& path);

// The slots of all entries together (what mpirun may place ranks on).
int total_slots(const std::vector<HostfileEntry>& entries);

// OpenMPI syntax, one "host slots=N[ max_slots=M]\n" line per entry; ""
// for no entries. Throws InputError for an entry parse_hostfile would refuse.
std::string to_hostfile(const std::vector<HostfileEntry>& entries);

// One entry per distinct host of the ranked tasks (chief, worker, ps; not
// the evaluator), in rank order of first appearance, slots = the number of
// those tasks on that host. Throws InputError when there are none.
std::vector<HostfileEntry> hostfile_from_spec(const ClusterSpec& spec);

// Why `host` is not a usable host name, IPv4 or (bare) IPv6 address; ""
// when it is.
std::string host_problem(std::string_view host);
// The form two spellings of one host share: a name in lower case, an IPv6
// address in its canonical text. Used to find hosts listed twice.
std::string canonical_host(std::string_view host);

}  // namespace baton
