#include "bench_command.h"

#include <baton/comm.h>
#include <baton/comm_mpi.h>
#include <baton/comm_nccl.h>
#include <baton/error.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

namespace baton::cli {
namespace {

using Clock = std::chrono::steady_clock;

// What run_bench settled from the flags: the same on every rank.
struct Plan {
  CommBackend backend = CommBackend::kLocal;
  CommAlgorithm algorithm = CommAlgorithm::kNative;
  int local_ranks = 2;          // local; nccl alone: 0 means every GPU
  std::string cuda_library;     // nccl
  std::vector<int64_t> counts;  // floats per size, ascending
  int64_t min_bytes = 0, max_bytes = 0;
  double step_factor = 2;
  int iters = 20, warmup = 5;
  bool json = false;
};

// One size's results, already combined over the ranks. [0] out-of-place,
// [1] in-place.
struct Row {
  int64_t bytes = 0, count = 0;
  double time_us[2] = {0, 0};
  int64_t wrong[2] = {0, 0};
};

double busbw_factor(int n) { return n > 0 ? 2.0 * (n - 1) / n : 0.0; }
double algbw_gbs(int64_t bytes, double time_us) {
  return time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e-6) / 1e9 : 0.0;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}
std::string fmt_time(double us) { return fmt(us < 1e4 ? "%.2f" : us < 1e6 ? "%.1f" : "%.0f", us); }

// The table, one line per size, in the layout of nccl-tests' all_reduce_perf
// (without its root column): size, count, type, redop, then time, algbw,
// busbw and #wrong out-of-place and in-place.
std::string table_line(const std::string& size, const std::string& count, const std::string& type,
                       const std::string& redop, const std::string (&cells)[8]) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%12s  %12s  %8s  %6s  %9s  %7s  %7s  %6s  %9s  %7s  %7s  %6s",
                size.c_str(), count.c_str(), type.c_str(), redop.c_str(), cells[0].c_str(),
                cells[1].c_str(), cells[2].c_str(), cells[3].c_str(), cells[4].c_str(),
                cells[5].c_str(), cells[6].c_str(), cells[7].c_str());
  return buf;
}
constexpr int kLeadWidth = 12 + 2 + 12 + 2 + 8 + 2 + 6;    // size .. redop
constexpr int kModeWidth = 2 + 9 + 2 + 7 + 2 + 7 + 2 + 6;  // time .. #wrong

std::string centered(const std::string& s, int width) {
  const int pad = std::max(0, width - static_cast<int>(s.size()));
  return std::string(static_cast<size_t>(pad - pad / 2), ' ') + s +
         std::string(static_cast<size_t>(pad / 2), ' ');
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

// Rank 0's output: the table as it goes (text), or one JSON document at the
// end (--json).
class Reporter {
 public:
  explicit Reporter(const Plan& plan) : plan_(plan) {}

  void begin(const std::string& comm, int ranks) {
    ranks_ = ranks;
    doc_ = {{"benchmark", "allreduce"},
            {"communicator", comm},
            {"backend", comm_backend_name(plan_.backend)},
            {"algorithm", comm_algorithm_name(plan_.algorithm)},
            {"ranks", ranks},
            {"type", "float"},
            {"redop", "sum"},
            {"min_bytes", plan_.min_bytes},
            {"max_bytes", plan_.max_bytes},
            {"step_factor", plan_.step_factor},
            {"warmup", plan_.warmup},
            {"iters", plan_.iters},
            {"time", "mean over the iterations, then mean over the ranks"},
            {"busbw", "algbw * 2(n-1)/n"},
            {"rows", nlohmann::ordered_json::array()}};
    if (plan_.json) return;
    std::printf("# baton bench allreduce: %s, %d rank%s", comm.c_str(), ranks,
                ranks == 1 ? "" : "s");
    if (plan_.backend == CommBackend::kLocal ||
        (plan_.backend == CommBackend::kNccl && !MpiRuntime::in_mpi_job())) {
      std::printf(" (threads of pid %d on %s)\n", static_cast<int>(::getpid()),
                  host_name().c_str());
    } else {
      std::printf(" (rank 0: pid %d on %s)\n", static_cast<int>(::getpid()), host_name().c_str());
    }
    std::printf(
        "# minBytes %lld maxBytes %lld step: %g(factor) warmup iters: %d iters: %d validation: 1\n",
        static_cast<long long>(plan_.min_bytes), static_cast<long long>(plan_.max_bytes),
        plan_.step_factor, plan_.warmup, plan_.iters);
    std::printf(
        "# time: mean over the iterations, then mean over the ranks (nccl-tests takes the max "
        "over ranks); busbw = algbw * 2(n-1)/n\n");
    if (ranks == 1) std::printf("# note: 1 rank, so nothing moves and busbw is 0\n");
    std::printf("#\n");
    const std::string group = std::string(static_cast<size_t>(kLeadWidth), ' ') + "  " +
                              centered("out-of-place", kModeWidth - 2) + "  " +
                              centered("in-place", kModeWidth - 2);
    print_header_line(group);
    const std::string names[8] = {"time", "algbw", "busbw", "#wrong",
                                  "time", "algbw", "busbw", "#wrong"};
    print_header_line(table_line("size", "count", "type", "redop", names));
    const std::string units[8] = {"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""};
    print_header_line(table_line("(B)", "(elements)", "", "", units));
    std::fflush(stdout);
  }

  void row(const Row& r) {
    nlohmann::ordered_json row = {
        {"size", r.bytes}, {"count", r.count}, {"type", "float"}, {"redop", "sum"}};
    std::string cells[8];
    for (int k = 0; k < 2; ++k) {
      const double alg = algbw_gbs(r.bytes, r.time_us[k]);
      const double bus = alg * busbw_factor(ranks_);
      bus_sum_ += bus;
      ++bus_n_;
      wrong_ += r.wrong[k];
      row[k == 0 ? "out_of_place" : "in_place"] = {
          {"time_us", r.time_us[k]}, {"algbw", alg}, {"busbw", bus}, {"wrong", r.wrong[k]}};
      cells[4 * k + 0] = fmt_time(r.time_us[k]);
      cells[4 * k + 1] = fmt("%.2f", alg);
      cells[4 * k + 2] = fmt("%.2f", bus);
      cells[4 * k + 3] = std::to_string(r.wrong[k]);
    }
    doc_["rows"].push_back(std::move(row));
    if (plan_.json) return;
    std::printf("%s\n",
                table_line(std::to_string(r.bytes), std::to_string(r.count), "float", "sum", cells)
                    .c_str());
    std::fflush(stdout);
  }

  void end() {
    const double avg = bus_n_ > 0 ? bus_sum_ / bus_n_ : 0.0;
    if (plan_.json) {
      doc_["wrong"] = wrong_;
      doc_["avg_busbw"] = avg;
      std::printf("%s\n", doc_.dump(2).c_str());
    } else {
      std::printf("# Wrong values      : %lld %s\n", static_cast<long long>(wrong_),
                  wrong_ == 0 ? "OK" : "FAILED");
      std::printf("# Avg bus bandwidth : %.3f GB/s\n", avg);
    }
    std::fflush(stdout);
  }

 private:
  static void print_header_line(std::string line) {
    line[0] = '#';
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
  }

  const Plan& plan_;
  int ranks_ = 1;
  nlohmann::ordered_json doc_;
  double bus_sum_ = 0;
  int bus_n_ = 0;
  int64_t wrong_ = 0;
};

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

int64_t count_wrong(const float* data, int64_t count, int n) {
  float expected[31];
  for (int j = 0; j < 31; ++j)
    expected[j] = static_cast<float>(0.5 * n * (n - 1) + static_cast<double>(n) * j);
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) wrong += data[i] != expected[i % 31];
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
  if (reporter != nullptr) reporter->begin(comm.describe(), n);

  int64_t total_wrong = 0;
  for (const int64_t count : plan.counts) {
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

// This process's rank in an MPI job, from the launcher's environment (0
// outside one).
int env_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoi(v);
  }
  return 0;
}

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
  MpiRuntime mpi;
  // The communicator goes before the runtime finalises MPI.
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
    MpiRuntime mpi;
    MpiCommunicator boot;
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

Plan make_plan(const BenchArgs& args, const std::string& cuda_library) {
  const BenchAllreduceArgs& a = args.allreduce;
  Plan p;
  const std::string backend = !a.backend.empty()         ? a.backend
                              : MpiRuntime::in_mpi_job() ? "mpi"
                                                         : "local";
  try {
    p.backend = parse_comm_backend(backend);
  } catch (const InputError& e) {
    throw InputError(std::string("--backend: ") + e.what());
  }
  try {
    p.algorithm = parse_comm_algorithm(a.algorithm);
  } catch (const InputError& e) {
    throw InputError(std::string("--algorithm: ") + e.what());
  }
  if (a.ranks < 1)
    throw InputError("--ranks: expected an integer >= 1, got " + std::to_string(a.ranks));
  if (a.ranks > 1024)
    throw InputError("--ranks: at most 1024 local ranks, got " + std::to_string(a.ranks));
  if (a.min_bytes < 4) {
    throw InputError("--min-bytes: expected at least 4 (one float), got " +
                     std::to_string(a.min_bytes));
  }
  if (a.max_bytes < a.min_bytes) {
    throw InputError("--min-bytes " + std::to_string(a.min_bytes) + " is larger than --max-bytes " +
                     std::to_string(a.max_bytes));
  }
  if (!(a.step_factor > 1.0) || a.step_factor > 1e6) {
    throw InputError("--step-factor: expected a number > 1, got " + fmt("%g", a.step_factor));
  }
  if (a.iters < 1)
    throw InputError("--iters: expected an integer >= 1, got " + std::to_string(a.iters));
  if (a.warmup < 0)
    throw InputError("--warmup: expected an integer >= 0, got " + std::to_string(a.warmup));

  const bool ranks_given = args.ranks_opt != nullptr && args.ranks_opt->count() > 0;
  if (p.backend == CommBackend::kNccl) {
    // What this build lacks is bad input (exit 2); what this machine lacks
    // (the library, a driver, GPUs) is found when the run starts (exit 1).
    if (const std::string why = nccl_build_unavailable_reason(); !why.empty()) {
      throw InputError("--backend nccl: " + why);
    }
    if (p.algorithm == CommAlgorithm::kHierarchical) {
      throw InputError(
          "--algorithm hierarchical: not available with --backend nccl (NCCL's own collectives "
          "already follow the NVLink/PCIe/network hierarchy); use native or ring");
    }
    if (MpiRuntime::in_mpi_job() && !MpiRuntime::available()) {
      throw InputError(
          "--backend nccl under mpirun: this build has no MPI backend to send NCCL's id over "
          "(configure with BATON_WITH_MPI=ON), or run without mpirun (one process, every GPU)");
    }
    if (MpiRuntime::in_mpi_job() && ranks_given) {
      throw InputError(
          "--ranks: not with --backend nccl under mpirun (the ranks are mpirun's -n, one GPU "
          "each)");
    }
    p.cuda_library = cuda_library;
  }
  if (p.backend == CommBackend::kMpi) {
    if (!MpiRuntime::available()) {
      throw InputError(
          "--backend mpi: this build has no MPI backend (configure with BATON_WITH_MPI=ON "
          "and Open MPI installed)");
    }
    if (ranks_given) {
      throw InputError(
          "--ranks: applies to the local backend only (with mpi the ranks are mpirun's -n)");
    }
  }
  // nccl alone: every GPU unless --ranks says how many.
  p.local_ranks = p.backend == CommBackend::kNccl && !ranks_given ? 0 : a.ranks;
  p.min_bytes = a.min_bytes;
  p.max_bytes = a.max_bytes;
  p.step_factor = a.step_factor;
  p.iters = a.iters;
  p.warmup = a.warmup;
  p.json = a.json;
  // Sizes min, min*F, min*F^2, ... <= max, each rounded down to whole floats.
  for (long double s = static_cast<long double>(a.min_bytes);
       s <= static_cast<long double>(a.max_bytes);) {
    const int64_t count = static_cast<int64_t>(s) / 4;
    if (p.counts.empty() || p.counts.back() != count) p.counts.push_back(count);
    s = std::max(s * a.step_factor, s + 1);
  }
  return p;
}

}  // namespace

void add_bench_command(CLI::App& app, BenchArgs& args) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmark the collectives");
  bench->require_subcommand(1);
  BenchAllreduceArgs& a = args.allreduce;
  CLI::App* ar = bench->add_subcommand(
      "allreduce", "Allreduce bandwidth over a range of sizes (like nccl-tests' all_reduce_perf)");
  ar->footer(
      "Per size (float, sum), out-of-place and in-place: time (us), algbw = bytes / time and\n"
      "busbw = algbw * 2(n-1)/n (GB/s), and #wrong: every result is checked against its closed\n"
      "form, summed over the ranks. Time is the mean over the iterations, then the mean over the\n"
      "ranks (nccl-tests reports the max over the ranks). Out-of-place copies the input into the\n"
      "output buffer and reduces it in place; the copy is timed. Only rank 0 prints.\n"
      "Run alone (local backend: --ranks threads) or under mpirun (mpi backend):\n"
      "  baton bench allreduce --ranks 4 --algorithm ring\n"
      "  mpirun -n 2 baton bench allreduce --min-bytes 1M --max-bytes 64M\n"
      "nccl (GPU buffers; needs a build with CUDA and NCCL): alone, one thread per GPU (every\n"
      "GPU, or --ranks of them), or under mpirun, one GPU per rank:\n"
      "  baton bench allreduce --backend nccl --min-bytes 1M --max-bytes 64M\n"
      "  mpirun -n 2 baton bench allreduce --backend nccl\n"
      "Exit codes: 0 all values right, 1 a wrong value, a failed collective, or no GPU/driver,\n"
      "2 bad flags or a backend this build lacks.");
  ar->add_option("--backend", a.backend,
                 "local|mpi|nccl (default: mpi inside an MPI job, local otherwise)");
  ar->add_option("--algorithm", a.algorithm, "native|ring|hierarchical")->capture_default_str();
  args.ranks_opt = ar->add_option("--ranks", a.ranks,
                                  "Number of ranks (local: threads; nccl alone: GPUs, default all)")
                       ->capture_default_str();
  // Sizes take binary suffixes, as in nccl-tests: 4K, 1M, 64MiB.
  ar->add_option("--min-bytes", a.min_bytes,
                 "Smallest size in bytes (suffixes K, M, G: powers of 1024)")
      ->capture_default_str()
      ->transform(CLI::AsSizeValue(false).description(""))
      ->type_name("BYTES");
  ar->add_option("--max-bytes", a.max_bytes, "Largest size in bytes (suffixes K, M, G)")
      ->capture_default_str()
      ->transform(CLI::AsSizeValue(false).description(""))
      ->type_name("BYTES");
  ar->add_option("--step-factor", a.step_factor,
                 "Multiply the size by this from one row to the next")
      ->capture_default_str();
  ar->add_option("--iters", a.iters, "Timed iterations per size")->capture_default_str();
  ar->add_option("--warmup", a.warmup, "Untimed warm-up iterations per size")
      ->capture_default_str();
  ar->add_flag("--json", a.json, "Print one JSON document with all rows");
  args.allreduce_app = ar;
}

int run_bench(const BenchArgs& args, const std::string& cuda_library) {
  if (args.allreduce_app == nullptr || !args.allreduce_app->parsed())
    return 2;  // CLI11 requires one
  const Plan plan = make_plan(args, cuda_library);
  // Only rank 0 prints: the MPI backend's rank 0, or, for the local backend
  // started under mpirun anyway, the first process.
  Reporter reporter(plan);
  const int64_t wrong = plan.backend == CommBackend::kMpi    ? bench_mpi(plan, reporter)
                        : plan.backend == CommBackend::kNccl ? bench_nccl(plan, reporter)
                                                             : bench_local(plan, reporter);
  if (wrong != 0) {
    if (env_rank() == 0) {
      std::fprintf(stderr, "baton: failed: bench allreduce: %lld wrong values\n",
                   static_cast<long long>(wrong));
    }
    return 1;
  }
  return 0;
}

}  // namespace baton::cli
