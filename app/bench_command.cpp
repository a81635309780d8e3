#include "bench_command.h"

#include <baton/comm/communicator.h>
#include <baton/comm/mpi.h>
#include <baton/comm/nccl.h>
#include <baton/core/error.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "bench_allreduce.h"
#include "bench_plan.h"
#include "bench_report.h"

namespace baton::cli {
namespace {

Plan make_plan(const BenchArgs& args, const std::string& cuda_library,
               const CLI::Option* ranks_opt) {
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
  p.algorithms.clear();
  for (size_t at = 0; at <= a.algorithm.size();) {
    const size_t comma = std::min(a.algorithm.find(',', at), a.algorithm.size());
    const std::string name = a.algorithm.substr(at, comma - at);
    CommAlgorithm alg = CommAlgorithm::kUnset;
    try {
      alg = parse_comm_algorithm(name);
    } catch (const InputError& e) {
      throw InputError(std::string("--algorithm: ") + e.what());
    }
    if (std::find(p.algorithms.begin(), p.algorithms.end(), alg) != p.algorithms.end()) {
      throw InputError("--algorithm: " + name + " is named twice in '" + a.algorithm + "'");
    }
    p.algorithms.push_back(alg);
    at = comma + 1;
  }
  p.algorithm = p.algorithms.front();
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

  const bool ranks_given = ranks_opt != nullptr && ranks_opt->count() > 0;
  if (p.backend == CommBackend::kNccl) {
    // What this build lacks is bad input (exit 2); what this machine lacks
    // (the library, a driver, GPUs) is found when the run starts (exit 1).
    // BATON_CUDA_EMULATE=1: the emulator's devices (BATON_SIMT_DEVICES of
    // them) and its NCCL stand-in, in baton_cuda_emu.so beside the real
    // library: what it measures is the stand-in's copies, not a GPU's.
    const char* emulate = std::getenv("BATON_CUDA_EMULATE");
    p.emulated = emulate != nullptr && std::string(emulate) == "1";
    p.cuda_library = cuda_library;
    if (p.emulated) {
      p.cuda_library =
          (std::filesystem::path(cuda_library).parent_path() / "baton_cuda_emu.so").string();
      if (!std::filesystem::exists(p.cuda_library)) {
        throw InputError("--backend nccl with BATON_CUDA_EMULATE=1: this build has no " +
                         p.cuda_library + " (it needs the CUDA toolkit's headers and nccl.h)");
      }
    } else if (const std::string why = nccl_build_unavailable_reason(); !why.empty()) {
      throw InputError("--backend nccl: " + why);
    }
    if (std::count(p.algorithms.begin(), p.algorithms.end(), CommAlgorithm::kHierarchical) > 0) {
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
  const char* names[3] = {"allreduce", "reduce_scatter", "allgather"};
  const char* helps[3] = {
      "Allreduce bandwidth over a range of sizes (like nccl-tests' all_reduce_perf)",
      "Reduce-scatter bandwidth over a range of sizes (like nccl-tests' reduce_scatter_perf)",
      "Allgather bandwidth over a range of sizes (like nccl-tests' all_gather_perf)"};
  for (int c = 0; c < 3; ++c) {
    CLI::App* ar = bench->add_subcommand(names[c], helps[c]);
    if (c == 0) {
      ar->footer(
          "Per size (float, sum), out-of-place and in-place: time (us), algbw = bytes / time "
          "and\n"
          "busbw = algbw * 2(n-1)/n (GB/s), and #wrong: every result is checked against its "
          "closed\n"
          "form, summed over the ranks. Time is the mean over the iterations, then the mean over "
          "the\n"
          "ranks (nccl-tests reports the max over the ranks). Out-of-place copies the input into "
          "the\n"
          "output buffer and reduces it in place; the copy is timed. Only rank 0 prints.\n"
          "Run alone (local backend: --ranks threads) or under mpirun (mpi backend):\n"
          "  baton bench allreduce --ranks 4 --algorithm ring\n"
          "Several algorithms (a comma list) run one after the other in the same job, then side "
          "by\n"
          "side (--json: an array of their documents):\n"
          "  mpirun -n 4 baton bench allreduce --algorithm ring,hierarchical --min-bytes 1M\n"
          "  mpirun -n 2 baton bench allreduce --min-bytes 1M --max-bytes 64M\n"
          "nccl (GPU buffers; needs a build with CUDA and NCCL): alone, one thread per GPU "
          "(every\n"
          "GPU, or --ranks of them), or under mpirun, one GPU per rank:\n"
          "  baton bench allreduce --backend nccl --min-bytes 1M --max-bytes 64M\n"
          "  mpirun -n 2 baton bench allreduce --backend nccl\n"
          "Exit codes: 0 all values right, 1 a wrong value, a failed collective, or no GPU/"
          "driver,\n"
          "2 bad flags or a backend this build lacks.");
    } else {
      ar->footer(
          std::string("As bench allreduce (its flags, backends and exit codes), out-of-place "
                      "only: size is the whole buffer, every rank's piece of it (nccl-tests' "
                      "count), busbw = algbw * (n-1)/n, every value checked. E.g.\n"
                      "  baton bench ") +
          names[c] + " --ranks 4\n  mpirun -n 2 baton bench " + names[c] +
          " --min-bytes 1M --max-bytes 64M");
    }
    ar->add_option("--backend", a.backend,
                   "local|mpi|nccl (default: mpi inside an MPI job, local otherwise)");
    ar->add_option("--algorithm", a.algorithm,
                   "native|ring|hierarchical, or a comma list of them to compare in one job")
        ->capture_default_str();
    args.ranks_opts[c] =
        ar->add_option("--ranks", a.ranks,
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
    args.apps[c] = ar;
  }
}

int run_bench(const BenchArgs& args, const std::string& cuda_library) {
  int parsed = -1;
  for (int c = 0; c < 3; ++c) {
    if (args.apps[c] != nullptr && args.apps[c]->parsed()) parsed = c;
  }
  if (parsed < 0) return 2;  // CLI11 requires one
  const Collective collective = static_cast<Collective>(parsed);
  Plan plan = make_plan(args, cuda_library, args.ranks_opts[parsed]);
  plan.collective = collective;
  // Only rank 0 prints: the MPI backend's rank 0, or, for the local backend
  // started under mpirun anyway, the first process.
  Reporter reporter(plan);
  const int64_t wrong = bench_allreduce(plan, reporter);
  if (wrong != 0) {
    if (env_rank() == 0) {
      std::fprintf(stderr, "baton: failed: bench %s: %lld wrong values\n",
                   collective_name(collective), static_cast<long long>(wrong));
    }
    return 1;
  }
  return 0;
}

}  // namespace baton::cli
