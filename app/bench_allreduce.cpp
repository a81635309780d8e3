#include "bench_allreduce.h"

#include <baton/comm/communicator.h>
#include <baton/comm/local.h>
#include <baton/comm/mpi.h>
#include <baton/comm/nccl.h>
#include <baton/core/error.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <vector>

namespace baton::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Counts are summed over the ranks through the benchmarked communicator, in
// floats: split into 11-bit parts, each sum stays exact (< 2^24) up to 8192
// ranks.
constexpr int kPartBits = 11, kParts = 4;
void put_count(float* f, int64_t v) {
  for (int p = 0; p < kParts; ++p)
    f[p] = static_cast<float>((v >> (kPartBits * p)) & ((1 << kPartBits) - 1));
}
int64_t get_count(const float* f) {
  int64_t v = 0;
  for (int p = 0; p < kParts; ++p) v += static_cast<int64_t>(f[p]) << (kPartBits * p);
  return v;
}

// Rank r's input is r + (i % 31): small integers, so every partial sum is
// exact in float whatever the order, and the sum over n ranks has the closed
// form n(n-1)/2 + n(i % 31).
float input_value(int rank, int64_t i) {
  return static_cast<float>(rank + static_cast<int>(i % 31));
}

// A sum over n ranks of elements [first, first + count): data[i] is
// element first + i's.
int64_t count_wrong(const float* data, int64_t count, int n, int64_t first = 0) {
  float expected[31];
  for (int j = 0; j < 31; ++j)
    expected[j] = static_cast<float>(0.5 * n * (n - 1) + static_cast<double>(n) * j);
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) wrong += data[i] != expected[(first + i) % 31];
  return wrong;
}

// An allgather of every rank's first `per` input values: rank q's block
// holds q + (j % 31).
int64_t count_wrong_gathered(const float* data, int64_t per, int n) {
  int64_t wrong = 0;
  for (int q = 0; q < n; ++q) {
    for (int64_t j = 0; j < per; ++j) wrong += data[q * per + j] != input_value(q, j);
  }
  return wrong;
}

// Where a rank's buffers live: host memory (local, mpi) or the rank's GPU
// (nccl, whose collectives take device pointers). The benchmark fills and
// checks its buffers through host copies either way.
class Memory {
 public:
  virtual ~Memory() = default;
  // A buffer of `count` floats that lives as long as this object.
  virtual float* alloc(int64_t count) = 0;
  virtual void copy(float* dst, const float* src, int64_t count) = 0;  // both buffers here
  virtual void upload(float* dst, const float* host, int64_t count) = 0;
  virtual void download(float* host, const float* src, int64_t count) = 0;
};

class HostMemory final : public Memory {
 public:
  float* alloc(int64_t count) override {
    buffers_.emplace_back(static_cast<size_t>(count));
    return buffers_.back().data();
  }
  void copy(float* dst, const float* src, int64_t count) override {
    if (count > 0) std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
  }
  void upload(float* dst, const float* host, int64_t count) override { copy(dst, host, count); }
  void download(float* host, const float* src, int64_t count) override { copy(host, src, count); }

 private:
  std::vector<std::vector<float>> buffers_;
};

class DeviceMemory final : public Memory {
 public:
  explicit DeviceMemory(NcclCommunicator& comm) : comm_(comm) {}
  float* alloc(int64_t count) override {
    buffers_.push_back(comm_.alloc(count));
    return buffers_.back().data();
  }
  void copy(float* dst, const float* src, int64_t count) override {
    comm_.copy_on_device(dst, src, count);
  }
  void upload(float* dst, const float* host, int64_t count) override {
    comm_.copy_to_device(dst, host, count);
  }
  void download(float* host, const float* src, int64_t count) override {
    comm_.copy_to_host(host, src, count);
  }

 private:
  NcclCommunicator& comm_;
  std::vector<DeviceBuffer> buffers_;
};

// Warm-up, then `iters` timed calls between a barrier and this rank's
// return from the last one; the mean per call in microseconds.
template <class Op>
double time_op(Communicator& comm, const Plan& plan, Op op) {
  for (int w = 0; w < plan.warmup; ++w) op();
  comm.barrier();
  const auto t0 = Clock::now();
  for (int it = 0; it < plan.iters; ++it) op();
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / plan.iters;
}

// One rank's whole benchmark; every rank returns the total of wrong values.
int64_t bench_rank(Communicator& comm, Memory& mem, const Plan& plan, Reporter* reporter) {
  const int n = comm.size(), rank = comm.rank();
  const int64_t max_count = plan.counts.back();
  std::vector<float> host_in, host_check;
  float *in = nullptr, *out = nullptr, *inplace = nullptr, *stats_buf = nullptr;
  try {
    host_in.resize(static_cast<size_t>(max_count));
    host_check.resize(static_cast<size_t>(max_count));
    in = mem.alloc(max_count);
    out = mem.alloc(max_count);
    inplace = mem.alloc(max_count);
    stats_buf = mem.alloc(2 + 2 * kParts);
  } catch (const std::bad_alloc&) {
    throw RuntimeError("bench allreduce: cannot allocate 3 buffers of " +
                       std::to_string(max_count * 4) + " bytes for rank " + std::to_string(rank) +
                       " (lower --max-bytes)");
  }
  for (int64_t i = 0; i < max_count; ++i) host_in[static_cast<size_t>(i)] = input_value(rank, i);
  mem.upload(in, host_in.data(), max_count);
  if (reporter != nullptr) reporter->begin(comm.describe(), plan.algorithm, n);

  int64_t total_wrong = 0;
  const Collective collective = plan.collective;
  for (int64_t count : plan.counts) {
    if (collective != Collective::kAllreduce) {
      // Every rank's piece of the whole buffer: a whole number of floats.
      const int64_t per = std::max<int64_t>(1, count / n);
      count = per * n;
      if (count > max_count) break;
      const double us = time_op(comm, plan, [&] {
        if (collective == Collective::kReduceScatter) {
          comm.reduce_scatter(in, out, per, ReduceOp::kSum);
        } else {
          comm.allgather(in, out, per);
        }
      });
      int64_t wrong = 0;
      if (collective == Collective::kReduceScatter) {
        mem.download(host_check.data(), out, per);
        wrong = count_wrong(host_check.data(), per, n, rank * per);
      } else {
        mem.download(host_check.data(), out, count);
        wrong = count_wrong_gathered(host_check.data(), per, n);
      }
      float stats[1 + kParts];
      stats[0] = static_cast<float>(us);
      put_count(stats + 1, wrong);
      mem.upload(stats_buf, stats, 1 + kParts);
      comm.allreduce(stats_buf, 1 + kParts, ReduceOp::kSum);
      mem.download(stats, stats_buf, 1 + kParts);
      Row row;
      row.bytes = count * static_cast<int64_t>(sizeof(float));
      row.count = count;
      row.time_us[0] = stats[0] / n;
      row.wrong[0] = get_count(stats + 1);
      total_wrong += row.wrong[0];
      if (reporter != nullptr) reporter->row(row);
      continue;
    }
    const size_t bytes = static_cast<size_t>(count) * sizeof(float);
    // Out-of-place: the Communicator interface is in place, so the input is
    // copied into the output buffer first and the copy is part of the timed
    // operation (as an out-of-place collective would read one buffer and
    // write another). Each call starts from the untouched input, so the
    // last timed call's output is checked.
    const double oop_us = time_op(comm, plan, [&] {
      mem.copy(out, in, count);
      comm.allreduce(out, count, ReduceOp::kSum);
    });
    mem.download(host_check.data(), out, count);
    const int64_t oop_wrong = count_wrong(host_check.data(), count, n);
    // In-place: the timed calls keep reducing their own result (the values
    // grow, possibly to inf, which costs nothing extra), so the check is one
    // more call on a fresh copy of the input, untimed.
    mem.copy(inplace, in, count);
    const double ip_us =
        time_op(comm, plan, [&] { comm.allreduce(inplace, count, ReduceOp::kSum); });
    mem.copy(inplace, in, count);
    comm.allreduce(inplace, count, ReduceOp::kSum);
    mem.download(host_check.data(), inplace, count);
    const int64_t ip_wrong = count_wrong(host_check.data(), count, n);

    // Combine over the ranks: the mean time, the summed counts.
    float stats[2 + 2 * kParts];
    stats[0] = static_cast<float>(oop_us);
    stats[1] = static_cast<float>(ip_us);
    put_count(stats + 2, oop_wrong);
    put_count(stats + 2 + kParts, ip_wrong);
    mem.upload(stats_buf, stats, 2 + 2 * kParts);
    comm.allreduce(stats_buf, 2 + 2 * kParts, ReduceOp::kSum);
    mem.download(stats, stats_buf, 2 + 2 * kParts);
    Row row;
    row.bytes = static_cast<int64_t>(bytes);
    row.count = count;
    row.time_us[0] = stats[0] / n;
    row.time_us[1] = stats[1] / n;
    row.wrong[0] = get_count(stats + 2);
    row.wrong[1] = get_count(stats + 2 + kParts);
    total_wrong += row.wrong[0] + row.wrong[1];
    if (reporter != nullptr) reporter->row(row);
  }
  if (reporter != nullptr) reporter->end();
  return total_wrong;
}

}  // namespace

int env_rank() { return std::max(0, MpiRuntime::launcher_rank()); }

namespace {

// One thread per rank of a group (LocalGroup or NcclGroup); the first
// process's rank 0 reports. A rank that fails aborts the group so the others
// stop at once; its error is rethrown.
template <class Group, class Body>
int64_t bench_threads(Group& group, int ranks, Reporter& reporter, Body run_rank) {
  std::mutex mu;
  std::exception_ptr first_error;
  int64_t wrong = 0;
  auto body = [&](int r) {
    try {
      const bool prints = r == 0 && env_rank() == 0;
      const int64_t w = run_rank(r, prints ? &reporter : nullptr);
      if (r == 0) wrong = w;
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!first_error) first_error = std::current_exception();
      }
      group.abort();
    }
  };
  std::vector<std::thread> threads;
  try {
    for (int r = 1; r < ranks; ++r) threads.emplace_back(body, r);
  } catch (...) {
    group.abort();
    for (auto& t : threads) t.join();
    throw;
  }
  body(0);
  for (auto& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
  return wrong;
}

// The local backend: one thread per rank over a LocalGroup.
int64_t bench_local(const Plan& plan, Reporter& reporter) {
  LocalGroup group(plan.local_ranks, CommOptions{.algorithm = plan.algorithm});
  return bench_threads(group, plan.local_ranks, reporter, [&](int r, Reporter* rep) {
    HostMemory mem;
    return bench_rank(group.rank(r), mem, plan, rep);
  });
}

int64_t bench_mpi(const Plan& plan, Reporter& reporter) {
#ifdef BATON_HAVE_MPI
  // bench_allreduce holds the MPI runtime: the communicator goes first.
  MpiCommunicator comm(CommOptions{.algorithm = plan.algorithm});
  HostMemory mem;
  return bench_rank(comm, mem, plan, comm.rank() == 0 ? &reporter : nullptr);
#else
  (void)plan;
  (void)reporter;
  return 0;    // unreachable: run_bench refuses the mpi backend without MPI
#endif
}

// The nccl backend. Under mpirun: one rank per process, on GPU `host rank`,
// the NCCL id sent over MPI. Alone: one thread per GPU of this process
// (--ranks of them, or every GPU), ncclCommInitAll.
int64_t bench_nccl(const Plan& plan, Reporter& reporter) {
  auto lib = NcclLibrary::load(plan.cuda_library);
  const CommOptions options{.algorithm = plan.algorithm};
  if (MpiRuntime::in_mpi_job()) {
#ifdef BATON_HAVE_MPI
    MpiCommunicator boot;  // bench_allreduce holds the MPI runtime
    NcclCommunicator comm(lib, boot, boot.host_rank(), options);
    DeviceMemory mem(comm);
    return bench_rank(comm, mem, plan, comm.rank() == 0 ? &reporter : nullptr);
#else
    return 0;  // unreachable: make_plan refuses nccl under mpirun without MPI
#endif
  }
  const int ranks = plan.local_ranks > 0 ? plan.local_ranks : lib->require_devices();
  NcclGroup group(lib, ranks, options);
  return bench_threads(group, ranks, reporter, [&](int r, Reporter* rep) {
    DeviceMemory mem(group.rank(r));
    return bench_rank(group.rank(r), mem, plan, rep);
  });
}

}  // namespace

int64_t bench_allreduce(const Plan& plan, Reporter& reporter) {
#ifdef BATON_HAVE_MPI
  // MPI starts once for every algorithm of the job (it cannot start again
  // once finalised).
  std::optional<MpiRuntime> mpi;
  if (plan.backend == CommBackend::kMpi ||
      (plan.backend == CommBackend::kNccl && MpiRuntime::in_mpi_job())) {
    mpi.emplace();
  }
#endif
  int64_t wrong = 0;
  for (const CommAlgorithm a : plan.algorithms) {
    Plan one = plan;
    one.algorithm = a;
    wrong += plan.backend == CommBackend::kMpi    ? bench_mpi(one, reporter)
             : plan.backend == CommBackend::kNccl ? bench_nccl(one, reporter)
                                                  : bench_local(one, reporter);
  }
  if (env_rank() == 0) reporter.finish();
  return wrong;
}

}  // namespace baton::cli
