// ParameterServerStrategy over MPI (see strategy.h). The protocol, on a
// duplicate of MPI_COMM_WORLD (its own message space):
//   worker -> server  kTagHeader: double[4] {kind (kPush|kDone), the version
//                     the worker's values of this shard came from, the rows
//                     of the worker's batch, the rows of the global batch};
//                     then for a push kTagGrad: the shard's gradients (floats,
//                     the shard's parameters in model order, flattened).
//   server -> worker  kTagReplyHeader: double[3] {new version, staleness,
//                     sync: the round's gradient norm over all shards};
//                     kTagReply: the shard's current values.
//   chief -> server   kTagHeader {kSnapshot, 0, 0, 0}: for a checkpoint;
//   server -> chief   kTagSnapHeader: double[1] {version}; kTagSnap: the
//                     shard's values, then each kind of its optimizer state
//                     (m, v) over the shard's parameters, in model order.
// A resume gives every process the chief's restored tensors (MPI_Bcast on
// the duplicate): the servers take their shard's values and optimizer
// state from them, and the update count they had at the checkpoint.
// Synchronous servers agree on a round's norm over their own communicator
// (one allreduce of a double per round: every server has the same rounds).
// A worker posts its receives before its sends, so a server's (blocking)
// reply always finds its receive posted: no cycle of blocked sends.
#include <baton/comm/mpi.h>
#include <baton/core/error.h>
#include <baton/nn/kernels.h>
#include <baton/strategy/strategy.h>

#include "ps_bind.h"
#include "ps_shard.h"
#include "ps_tcp.h"

#ifdef BATON_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>

namespace baton {

#ifdef BATON_HAVE_MPI
namespace {
constexpr int kTagHeader = 11, kTagGrad = 12, kTagReplyHeader = 13, kTagReply = 14;
constexpr int kTagSnapHeader = 15, kTagSnap = 16;
constexpr double kPush = 1, kDone = 2, kSnapshot = 3;
}  // namespace

struct ParameterServerStrategy::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm servers = MPI_COMM_NULL;                // the servers among themselves
  std::vector<MPI_Request> requests;               // 4 per server
  std::vector<std::array<double, 4>> send_header;  // per server
  std::vector<std::array<double, 3>> recv_header;  // per server
  std::vector<std::vector<float>> values;          // per server: received values
  ~Impl() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (servers != MPI_COMM_NULL) MPI_Comm_free(&servers);
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

namespace {
void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw CommError(std::string("parameter_server: ") + what + ": " + std::string(text, len));
}
int count_of(int64_t n) {
  if (n > INT_MAX) throw CommError("parameter_server: a shard of more than 2^31 floats");
  return static_cast<int>(n);
}
}  // namespace
#else
struct ParameterServerStrategy::Impl {};
#endif

void ParameterServerStrategy::check_staleness(const std::string& file) const {
  if (max_staleness_ >= 0 && max_staleness_ < num_workers_ - 1) {
    // Every push is one update: once each worker has pushed, some push is
    // always at least workers - 1 versions stale.
    throw InputError(file + ": strategy.max_staleness: " + std::to_string(max_staleness_) +
                     " is below workers - 1 = " + std::to_string(num_workers_ - 1) + " (" +
                     std::to_string(num_workers_) +
                     " asynchronous workers take turns, so a push is that many updates stale at "
                     "best); use at least " +
                     std::to_string(num_workers_ - 1) + ", or mode sync");
  }
}

ParameterServerStrategy::ParameterServerStrategy(int num_ps, bool sync, int64_t max_staleness,
                                                 const std::string& file, PsJoin join)
    : num_ps_(num_ps), sync_(sync), max_staleness_(max_staleness), join_(std::move(join)) {
  if (tcp()) {
    start_tcp(file);
    return;
  }
#ifdef BATON_HAVE_MPI
  if (!MpiRuntime::is_initialized()) {
    throw InputError(file +
                     ": strategy.type: parameter_server runs one process per MPI rank "
                     "(workers, then num_ps servers): start it with mpirun, e.g. mpirun -n 3 "
                     "baton train " +
                     file);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  mpi_rank_ = rank_;
  mpi_size_ = size_;
  if (num_ps_ < 1 || num_ps_ >= size_) {
    throw InputError(file + ": strategy.num_ps: " + std::to_string(num_ps_) +
                     " parameter server(s) in a job of " + std::to_string(size_) +
                     " process(es) leave no worker; start at least " + std::to_string(num_ps_ + 1) +
                     " ranks or lower num_ps");
  }
  num_workers_ = size_ - num_ps_;
  check_staleness(file);
  is_ps_ = rank_ >= num_workers_;
  impl_ = std::make_unique<Impl>();
  check(MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm), "MPI_Comm_dup");
  check(MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check(MPI_Comm_split(impl_->comm, is_ps_ ? 1 : MPI_UNDEFINED, rank_, &impl_->servers),
        "MPI_Comm_split");
  if (impl_->servers != MPI_COMM_NULL) {
    check(MPI_Comm_set_errhandler(impl_->servers, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  }
  impl_->requests.assign(static_cast<size_t>(4 * num_ps_), MPI_REQUEST_NULL);
  impl_->send_header.assign(static_cast<size_t>(num_ps_), {0, 0, 0, 0});
  impl_->recv_header.assign(static_cast<size_t>(num_ps_), {0, 0, 0});
#else
  (void)sync_;
  (void)max_staleness_;
  throw InputError(file +
                   ": strategy.type: parameter_server needs MPI, and this build has "
                   "none (BATON_WITH_MPI=OFF)");
#endif
}

ParameterServerStrategy::~ParameterServerStrategy() = default;

void ParameterServerStrategy::start_tcp(const std::string& file) {
  const auto take_secret = [&] {
    // Whoever reaches a server's port could read and write the model: only
    // peers that prove the job's secret get in (ps_tcp_server.h).
    if (join_.secret) {
      secret_ = *join_.secret;
    } else if (const auto s = peer_auth::secret_from_environment()) {
      secret_ = *s;
    } else {
      throw InputError(std::string("--ps-workers: ") + peer_auth::kSecretEnv +
                       " is not set: the servers and workers of a job over TCP prove to each "
                       "other that they hold the job's secret (baton launch makes one; to start "
                       "them by hand, export the same 64 hex digits to each, e.g. from "
                       "`openssl rand -hex 32`)");
    }
  };
  num_workers_ = join_.workers;
  size_ = num_workers_ + num_ps_;
  if (num_ps_ < 1) {
    throw InputError(file + ": strategy.num_ps: " + std::to_string(num_ps_) +
                     " parameter servers; expected at least 1");
  }
  if (sync_) {
    throw InputError(file +
                     ": strategy.mode: sync; workers that join their servers over TCP "
                     "(--ps-workers) need mode async (a synchronous round would wait for a "
                     "dead worker)");
  }
  check_staleness(file);
  if (!(join_.timeout_s > 0)) {
    throw InputError(file + ": strategy.peer_timeout_s: " + std::to_string(join_.timeout_s) +
                     "; expected a positive number of seconds");
  }
  tcp_ = std::make_unique<Tcp>();
  impl_ = std::make_unique<Impl>();
  // The worker's own options first (its slot, its servers), then the secret.
  if (outside_job()) {
    if (join_.worker >= num_workers_) {
      throw InputError("--ps-worker " + std::to_string(join_.worker) + ": the job has " +
                       std::to_string(num_workers_) + " worker slots (--ps-workers): 1 to " +
                       std::to_string(num_workers_ - 1) + " (0 is the chief, in the MPI job)");
    }
    if (static_cast<int>(join_.servers.size()) != num_ps_) {
      throw InputError("--ps-servers: " + std::to_string(join_.servers.size()) +
                       " address(es), but strategy.num_ps is " + std::to_string(num_ps_));
    }
    take_secret();
    rank_ = join_.worker;
    addresses_ = join_.servers;
    return;
  }
  take_secret();
#ifdef BATON_HAVE_MPI
  if (!MpiRuntime::is_initialized()) {
    throw InputError(file + ": --ps-workers: the chief and the servers run as one MPI job (" +
                     std::to_string(1 + num_ps_) + " ranks): start them with mpirun");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size_);
  if (mpi_size_ != 1 + num_ps_) {
    throw InputError(file +
                     ": strategy.num_ps: with --ps-workers the MPI job holds the chief and " +
                     std::to_string(num_ps_) + " server(s), " + std::to_string(1 + num_ps_) +
                     " ranks; this one has " + std::to_string(mpi_size_));
  }
  is_ps_ = mpi_rank_ >= 1;
  rank_ = is_ps_ ? num_workers_ + mpi_rank_ - 1 : 0;
  // Every rank checks the list (each server takes its own entry below).
  if (!join_.bind.empty()) ps_bind::placed_host(join_.bind, 0, num_ps_, "--ps-bind");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm), "MPI_Comm_dup");
  check(MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  // Each server listens; the chief learns where ("address:port") and
  // passes it on (its run_start names them).
  constexpr int kRecord = 320;
  std::array<char, kRecord> mine{};
  if (is_ps_) {
    // Only on the address the job places it on (join_.bind: loopback when
    // every task is on this host, else its host's name in the hostfile or
    // TF_CONFIG, as resolved here), which is also what the workers are told.
    // Without one (a job started by hand): every address, named by this
    // host's name.
    std::string at;
    if (!join_.bind.empty()) {
      at = ps_bind::local_address(
          ps_bind::placed_host(join_.bind, mpi_rank_ - 1, num_ps_, "--ps-bind"), "--ps-bind");
    }
    tcp_->listener = tcp::listen_on(at, &tcp_->port, "--ps-bind");
    if (at.empty()) {
      char host[256] = {};
      ::gethostname(host, sizeof(host) - 1);
      at = host;
    } else if (at.find(':') != std::string::npos) {
      at = "[" + at + "]";
    }
    std::snprintf(mine.data(), mine.size(), "%s:%d", at.c_str(), tcp_->port);
  }
  std::vector<char> all(mpi_rank_ == 0 ? static_cast<size_t>(kRecord * mpi_size_) : 0);
  check(MPI_Gather(mine.data(), kRecord, MPI_CHAR, all.data(), kRecord, MPI_CHAR, 0, impl_->comm),
        "MPI_Gather");
  if (mpi_rank_ == 0) {
    char here[256] = {};
    ::gethostname(here, sizeof(here) - 1);
    for (int r = 1; r < mpi_size_; ++r) {
      std::string record(all.data() + static_cast<size_t>(r) * kRecord);
      const size_t colon = record.rfind(':');
      // A server on every address of this host: reached over loopback.
      if (record.substr(0, colon) == here) record = "127.0.0.1" + record.substr(colon);
      addresses_.push_back(record);
    }
  }
#else
  throw InputError(file +
                   ": --ps-workers: the chief and the servers run as one MPI job, and "
                   "this build has no MPI (BATON_WITH_MPI=OFF)");
#endif
}

std::vector<std::string> ParameterServerStrategy::devices() const {
  if (is_ps_) return {"ps:" + std::to_string(rank_ - num_workers_) + "/cpu:0"};
  return {"worker:" + std::to_string(rank_) + "/" + device_};
}

std::string ParameterServerStrategy::communication() const {
  return std::string("mpi/ps-") + (sync_ ? "sync" : "async");
}

void ParameterServerStrategy::run(const std::function<void(const ReplicaContext&)>& step_fn) {
  step_fn(ReplicaContext{0, num_workers_});
}

void ParameterServerStrategy::plan(const std::vector<Param*>& params) {
  // By size: the largest tensor first, each to the least-loaded server (ties
  // to the lower index). Every rank computes the same plan from the same
  // model.
  shard_of_.assign(params.size(), 0);
  shard_size_.assign(static_cast<size_t>(num_ps_), 0);
  std::vector<size_t> order(params.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return params[a]->value.numel() > params[b]->value.numel();
  });
  for (size_t i : order) {
    const int s = static_cast<int>(std::min_element(shard_size_.begin(), shard_size_.end()) -
                                   shard_size_.begin());
    shard_of_[i] = s;
    shard_size_[static_cast<size_t>(s)] += params[i]->value.numel();
  }
  version_.assign(static_cast<size_t>(num_ps_), 0);
  if (restored_updates_.size() == static_cast<size_t>(num_ps_)) version_ = restored_updates_;
  buf_.resize(static_cast<size_t>(num_ps_));
  for (int s = 0; s < num_ps_; ++s) {
    buf_[static_cast<size_t>(s)].assign(static_cast<size_t>(shard_size_[static_cast<size_t>(s)]),
                                        0.0f);
  }
#ifdef BATON_HAVE_MPI
  impl_->values = buf_;
#endif
}

void ParameterServerStrategy::reduce_gradients(const PerReplica<std::vector<Param*>>& /*pr*/) {
  // Nothing to combine among workers: the servers do it (apply_updates).
}

void ParameterServerStrategy::apply_updates(const PerReplica<std::vector<Param*>>& per_replica,
                                            const std::function<void(int)>& apply) {
  // Clipping (and the norm for telemetry); the trainer does not step its own
  // optimizer under remote updates.
  apply(0);
  if (tcp()) {
    push_pull_tcp(per_replica[0]);
    return;
  }
#ifdef BATON_HAVE_MPI
  const std::vector<Param*>& params = per_replica[0];
  if (shard_of_.size() != params.size()) plan(params);
  // One span for the push of every shard and the pull of its new values.
  const TimelineScope span(timeline_, "push and pull", "comm",
                           timeline_lane(TimelineLane::kReplicaComm), -1,
                           2 * static_cast<int64_t>(sizeof(float)) *
                               std::accumulate(shard_size_.begin(), shard_size_.end(), int64_t{0}));
  Impl& m = *impl_;
  for (int s = 0; s < num_ps_; ++s) {
    const size_t us = static_cast<size_t>(s);
    const int server = num_workers_ + s;
    const int n = count_of(shard_size_[us]);
    check(MPI_Irecv(m.recv_header[us].data(), 3, MPI_DOUBLE, server, kTagReplyHeader, m.comm,
                    &m.requests[4 * us]),
          "MPI_Irecv");
    check(MPI_Irecv(m.values[us].data(), n, MPI_FLOAT, server, kTagReply, m.comm,
                    &m.requests[4 * us + 1]),
          "MPI_Irecv");
    ps_pack(params, shard_of_, s, true, buf_[us].data());
    m.send_header[us] = {kPush, static_cast<double>(version_[us]), static_cast<double>(rows_),
                         static_cast<double>(global_rows_)};
    check(MPI_Isend(m.send_header[us].data(), 4, MPI_DOUBLE, server, kTagHeader, m.comm,
                    &m.requests[4 * us + 2]),
          "MPI_Isend");
    check(
        MPI_Isend(buf_[us].data(), n, MPI_FLOAT, server, kTagGrad, m.comm, &m.requests[4 * us + 3]),
        "MPI_Isend");
  }
  check(MPI_Waitall(static_cast<int>(m.requests.size()), m.requests.data(), MPI_STATUSES_IGNORE),
        "MPI_Waitall");
  for (int s = 0; s < num_ps_; ++s) {
    const size_t us = static_cast<size_t>(s);
    ps_unpack(params, shard_of_, s, false, m.values[us].data());
    version_[us] = static_cast<int64_t>(m.recv_header[us][0]);
    const auto stale = static_cast<int64_t>(m.recv_header[us][1]);
    window_.add(stale);
    total_.add(stale);
  }
  remote_norm_ = m.recv_header[0][2];
#else
  (void)per_replica;
#endif
}

void ParameterServerStrategy::finish() {
  if (is_ps_ || finished_) return;
  finished_ = true;
  if (tcp()) {
    finish_tcp();
    return;
  }
#ifdef BATON_HAVE_MPI
  for (int s = 0; s < num_ps_; ++s) {
    const std::array<double, 4> done{kDone, 0, 0, 0};
    check(MPI_Send(done.data(), 4, MPI_DOUBLE, num_workers_ + s, kTagHeader, impl_->comm),
          "MPI_Send");
  }
#endif
}

void ParameterServerStrategy::share_from_chief(std::string& text) const {
  if (outside_job()) return;  // no collective reaches it
#ifdef BATON_HAVE_MPI
  // Every process, the servers too (they resume before they serve).
  uint64_t n = text.size();
  check(MPI_Bcast(&n, 1, MPI_UINT64_T, 0, impl_->comm), "MPI_Bcast");
  text.resize(n);
  check(MPI_Bcast(text.data(), count_of(static_cast<int64_t>(n)), MPI_CHAR, 0, impl_->comm),
        "MPI_Bcast");
#else
  (void)text;
#endif
}

ClockOffset ParameterServerStrategy::clock_offset_to_chief(const std::function<int64_t()>& now_ns) {
  if (outside_job()) return {};
#ifdef BATON_HAVE_MPI
  // Every process, the servers too (their serving shows on the timeline).
  constexpr int kTagClock = 17;
  ClockLink link;
  link.send = [this](int peer, int64_t v) {
    check(MPI_Send(&v, 1, MPI_INT64_T, peer, kTagClock, impl_->comm), "MPI_Send");
  };
  link.recv = [this](int peer) {
    int64_t v = 0;
    check(MPI_Recv(&v, 1, MPI_INT64_T, peer, kTagClock, impl_->comm, MPI_STATUS_IGNORE),
          "MPI_Recv");
    return v;
  };
  return clock_offset_to_root(mpi_rank_, mpi_size_, 0, link, now_ns);
#else
  (void)now_ns;
  return {};
#endif
}

std::vector<std::string> ParameterServerStrategy::gather_to_chief(const std::string& text) {
  if (outside_job()) return {};
#ifdef BATON_HAVE_MPI
  const int n = count_of(static_cast<int64_t>(text.size()));
  std::vector<int> sizes(static_cast<size_t>(mpi_size_), 0);
  check(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, impl_->comm), "MPI_Gather");
  std::vector<int> offsets(sizes.size(), 0);
  int64_t total = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    offsets[r] = count_of(total);
    total += sizes[r];
  }
  std::string all(mpi_rank_ == 0 ? static_cast<size_t>(total) : 0, '\0');
  check(MPI_Gatherv(text.data(), n, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, 0,
                    impl_->comm),
        "MPI_Gatherv");
  if (mpi_rank_ != 0) return {};
  std::vector<std::string> parts;
  for (size_t r = 0; r < sizes.size(); ++r) {
    parts.push_back(all.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(sizes[r])));
  }
  return parts;
#else
  return {text};
#endif
}

void ParameterServerStrategy::broadcast_tensors_from_chief(const std::vector<Tensor*>& tensors) {
  if (outside_job()) return;
#ifdef BATON_HAVE_MPI
  for (Tensor* t : tensors) {
    check(MPI_Bcast(t->data(), count_of(t->numel()), MPI_FLOAT, 0, impl_->comm), "MPI_Bcast");
  }
#else
  (void)tensors;
#endif
}

std::vector<int64_t> ParameterServerStrategy::fetch_remote_state(
    const std::vector<Param*>& params, const std::vector<Tensor*>& values,
    const std::vector<Tensor*>& optimizer) {
  std::vector<int64_t> updates;
  if (is_ps_) return updates;
  if (shard_of_.size() != params.size()) plan(params);
  if (tcp()) return snapshot_tcp(params, values, optimizer);
#ifdef BATON_HAVE_MPI
  const size_t np = params.size();
  if (values.size() != np || (np > 0 && optimizer.size() % np != 0)) {
    throw RuntimeError("parameter_server: a snapshot's tensors do not match the model");
  }
  const size_t kinds = np == 0 ? 0 : optimizer.size() / np;
  std::vector<float> payload;  // a checkpoint's: allocated here, not in a step
  for (int s = 0; s < num_ps_; ++s) {
    const int server = num_workers_ + s;
    const std::array<double, 4> ask{kSnapshot, 0, 0, 0};
    check(MPI_Send(ask.data(), 4, MPI_DOUBLE, server, kTagHeader, impl_->comm), "MPI_Send");
    double version = 0;
    payload.resize(static_cast<size_t>(shard_size_[static_cast<size_t>(s)]) * (1 + kinds));
    check(MPI_Recv(&version, 1, MPI_DOUBLE, server, kTagSnapHeader, impl_->comm, MPI_STATUS_IGNORE),
          "MPI_Recv");
    check(MPI_Recv(payload.data(), count_of(static_cast<int64_t>(payload.size())), MPI_FLOAT,
                   server, kTagSnap, impl_->comm, MPI_STATUS_IGNORE),
          "MPI_Recv");
    updates.push_back(static_cast<int64_t>(version));
    const float* in = payload.data();
    for (size_t c = 0; c <= kinds; ++c) {
      for (size_t i = 0; i < np; ++i) {
        if (shard_of_[i] != s) continue;
        Tensor& t = c == 0 ? *values[i] : *optimizer[(c - 1) * np + i];
        std::memcpy(t.data(), in, sizeof(float) * static_cast<size_t>(t.numel()));
        in += t.numel();
      }
    }
  }
#else
  (void)params;
  (void)values;
  (void)optimizer;
#endif
  return updates;
}

StalenessStats ParameterServerStrategy::drain_staleness() {
  StalenessStats out = window_;
  window_ = StalenessStats{};
  return out;
}

int64_t ParameterServerStrategy::serve(
    const std::vector<Param*>& params, const OptimizerOptions& opt,
    const std::function<float(int64_t)>& lr_of_update,
    const std::vector<std::pair<std::string, Tensor*>>& restored) {
  plan(params);
  const int me = rank_ - num_workers_;
  PsShard shard(params, shard_of_, me, opt, restored,
                restored.empty() ? 0 : version_[static_cast<size_t>(me)]);
  if (tcp()) return serve_tcp(shard, lr_of_update);
  int64_t version = shard.version();
#ifdef BATON_HAVE_MPI
  const int n = count_of(shard_size_[static_cast<size_t>(me)]);
  const bool bounded = !sync_ && max_staleness_ >= 0;
  // A slot per worker holds a push the bound keeps waiting (one otherwise).
  std::vector<std::vector<float>> slot(bounded ? static_cast<size_t>(num_workers_) : 1,
                                       std::vector<float>(static_cast<size_t>(n)));
  std::vector<float> acc(static_cast<size_t>(n));
  struct Pending {
    int source;
    int64_t read;  // the version the worker's values came from
  };
  std::vector<Pending> pending;  // sync: this round's; async: held by the bound
  pending.reserve(static_cast<size_t>(num_workers_));
  std::vector<int64_t> read_of(static_cast<size_t>(num_workers_), version);
  std::vector<char> live(static_cast<size_t>(num_workers_), 1);
  std::vector<int64_t> reads;
  reads.reserve(static_cast<size_t>(num_workers_));
  double round_rows = 0, round_global = 0;  // sync: the rows pushed this round, and of the batch
  const MPI_Comm comm = impl_->comm;
  // Applies the gradient in `g`, one step at this server's update count,
  // and replies to the workers in `to`.
  auto update_and_reply = [&](const float* g, const Pending* to, size_t count, double norm) {
    // On the timeline: the server's update k as "step" k (its own count).
    const TimelineScope span(timeline_, "update", "optimizer",
                             timeline_lane(TimelineLane::kStepLoop), version,
                             n * static_cast<int64_t>(sizeof(float)));
    shard.apply(g, lr_of_update(version));
    version = shard.version();
    for (size_t k = 0; k < count; ++k) {
      const int64_t stale = version - 1 - to[k].read;
      window_.add(stale);
      total_.add(stale);
      read_of[static_cast<size_t>(to[k].source)] = version;
      const std::array<double, 3> header{static_cast<double>(version), static_cast<double>(stale),
                                         norm};
      check(MPI_Send(header.data(), 3, MPI_DOUBLE, to[k].source, kTagReplyHeader, comm),
            "MPI_Send");
      check(MPI_Send(shard.out(), n, MPI_FLOAT, to[k].source, kTagReply, comm), "MPI_Send");
    }
  };
  // Bounded: applies held pushes, oldest first, while the bound allows.
  auto apply_held = [&] {
    for (;;) {
      size_t pick = pending.size();
      for (size_t k = 0; k < pending.size(); ++k) {
        if (pick != pending.size() && pending[k].read >= pending[pick].read) continue;
        reads.clear();
        for (int w = 0; w < num_workers_; ++w) {
          if (live[static_cast<size_t>(w)] && w != pending[k].source) {
            reads.push_back(read_of[static_cast<size_t>(w)]);
          }
        }
        if (ps_keeps_bound(version, reads, max_staleness_)) pick = k;
      }
      if (pick == pending.size()) return;
      const Pending p = pending[pick];
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(pick));
      update_and_reply(slot[static_cast<size_t>(p.source)].data(), &p, 1, -1.0);
    }
  };
  int active = num_workers_;
  while (active > 0) {
    std::array<double, 4> header{};
    MPI_Status st;
    check(MPI_Recv(header.data(), 4, MPI_DOUBLE, MPI_ANY_SOURCE, kTagHeader, comm, &st),
          "MPI_Recv");
    const int source = st.MPI_SOURCE;
    if (header[0] == kSnapshot) {
      // The chief checkpoints: this shard as it is now (between updates).
      shard.pack_snapshot();
      const std::vector<float>& snap = shard.snapshot();
      const double v = static_cast<double>(version);
      check(MPI_Send(&v, 1, MPI_DOUBLE, source, kTagSnapHeader, comm), "MPI_Send");
      check(MPI_Send(snap.data(), count_of(static_cast<int64_t>(snap.size())), MPI_FLOAT, source,
                     kTagSnap, comm),
            "MPI_Send");
      continue;
    }
    if (header[0] == kDone) {
      --active;
      live[static_cast<size_t>(source)] = 0;
      if (bounded) apply_held();  // a worker gone relaxes the bound
    } else {
      float* in = slot[bounded ? static_cast<size_t>(source) : 0].data();
      check(MPI_Recv(in, n, MPI_FLOAT, source, kTagGrad, comm, MPI_STATUS_IGNORE), "MPI_Recv");
      const Pending p{source, static_cast<int64_t>(header[1])};
      if (!sync_) {
        // Each push is one step on that worker's mean gradient: at once, or
        // when the bound allows.
        if (!bounded) {
          update_and_reply(in, &p, 1, -1.0);
        } else {
          pending.push_back(p);
          apply_held();
        }
        continue;
      }
      // sync: each gradient is scaled by 1/(global batch): their sum is the
      // global batch's mean gradient.
      if (pending.empty()) {
        std::copy(in, in + n, acc.begin());
        round_rows = 0;
      } else {
        for (size_t i = 0; i < acc.size(); ++i) acc[i] += in[i];
      }
      pending.push_back(p);
      round_rows += header[2];
      round_global = header[3];
    }
    if (sync_ && !pending.empty() && static_cast<int>(pending.size()) >= active) {
      // A round short of a worker that has finished: the sum covers fewer
      // rows than the global batch it was scaled for - rescale it to the
      // mean over the rows that are there.
      if (round_rows > 0 && round_global > round_rows) {
        const auto k = static_cast<float>(round_global / round_rows);
        for (float& v : acc) v *= k;
      }
      // The round's norm over all shards (every server has this round), and
      // clipping by it, as one device clips the whole gradient.
      double sq = cpu::sum_squares(acc.data(), n);
      check(MPI_Allreduce(MPI_IN_PLACE, &sq, 1, MPI_DOUBLE, MPI_SUM, impl_->servers),
            "MPI_Allreduce");
      const double norm = std::sqrt(sq);
      if (opt.clip_global_norm > 0.0f && norm > opt.clip_global_norm) {
        cpu::scale(acc.data(), n, static_cast<float>(opt.clip_global_norm / (norm + 1e-6)));
      }
      update_and_reply(acc.data(), pending.data(), pending.size(), norm);
      pending.clear();
    }
  }
#else
  (void)lr_of_update;
#endif
  return version;
}

}  // namespace baton
