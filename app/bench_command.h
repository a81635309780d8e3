// `baton bench allreduce|reduce_scatter|allgather`: a collective's
// bandwidth over a range of sizes, in the style of nccl-tests'
// all_reduce_perf, reduce_scatter_perf and all_gather_perf, on the local
// backend (threads of this process), the MPI one (under mpirun) or NCCL
// (GPU buffers: one thread per GPU, or one GPU per mpirun rank), with the
// results checked in the same run.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace baton::cli {

struct BenchAllreduceArgs {
  std::string backend;  // empty: mpi inside an MPI job, else local
  std::string algorithm = "native";
  int ranks = 2;  // local; nccl alone (default there: every GPU)
  int64_t min_bytes = 1024;
  int64_t max_bytes = 16 << 20;
  double step_factor = 2.0;
  int iters = 20;
  int warmup = 5;
  bool json = false;
};

struct BenchArgs {
  BenchAllreduceArgs allreduce;  // every collective's flags (one is parsed)
  // Set by add_bench_command: each collective's subcommand (allreduce,
  // reduce_scatter, allgather) and its --ranks (whether it was given).
  const CLI::App* apps[3] = {nullptr, nullptr, nullptr};
  const CLI::Option* ranks_opts[3] = {nullptr, nullptr, nullptr};
};

void add_bench_command(CLI::App& app, BenchArgs& args);
// Returns the process exit code (1 when the check found wrong values);
// throws InputError (a bad flag value, a backend this build lacks) and
// RuntimeError / CommError (a failed collective; for nccl also no CUDA
// library, driver or GPU on this machine) upward. cuda_library: the CUDA
// backend library the nccl backend loads (default_cuda_library()).
int run_bench(const BenchArgs& args, const std::string& cuda_library);

}  // namespace baton::cli
