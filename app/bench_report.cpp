#include "bench_report.h"

#include <baton/comm/mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace baton::cli {
namespace {

// nccl-tests' bus bandwidth: an allreduce moves 2(n-1)/n of the buffer
// over each rank's link, a reduce_scatter or an allgather (n-1)/n.
double busbw_factor(Collective c, int n) {
  if (n <= 0) return 0.0;
  return (c == Collective::kAllreduce ? 2.0 : 1.0) * (n - 1) / n;
}
const char* busbw_text(Collective c) {
  return c == Collective::kAllreduce ? "algbw * 2(n-1)/n" : "algbw * (n-1)/n";
}
const char* redop_name(Collective c) { return c == Collective::kAllgather ? "none" : "sum"; }
double algbw_gbs(int64_t bytes, double time_us) {
  return time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e-6) / 1e9 : 0.0;
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

}  // namespace

void Reporter::begin(const std::string& comm, CommAlgorithm algorithm, int ranks) {
  ranks_ = ranks;
  bus_sum_ = 0;
  bus_n_ = 0;
  wrong_ = 0;
  const Collective c = plan_.collective;
  doc_ = {{"benchmark", collective_name(c)},
          {"communicator", comm},
          {"backend", comm_backend_name(plan_.backend)},
          {"algorithm", comm_algorithm_name(algorithm)},
          {"ranks", ranks},
          {"emulated", plan_.emulated},
          {"type", "float"},
          {"redop", redop_name(c)},
          {"min_bytes", plan_.min_bytes},
          {"max_bytes", plan_.max_bytes},
          {"step_factor", plan_.step_factor},
          {"warmup", plan_.warmup},
          {"iters", plan_.iters},
          {"time", "mean over the iterations, then mean over the ranks"},
          {"busbw", busbw_text(c)},
          {"rows", nlohmann::ordered_json::array()}};
  if (plan_.json) return;
  std::printf("# baton bench %s: %s, %d rank%s", collective_name(c), comm.c_str(), ranks,
              ranks == 1 ? "" : "s");
  if (plan_.backend == CommBackend::kLocal ||
      (plan_.backend == CommBackend::kNccl && !MpiRuntime::in_mpi_job())) {
    std::printf(" (threads of pid %d on %s)\n", static_cast<int>(::getpid()), host_name().c_str());
  } else {
    std::printf(" (rank 0: pid %d on %s)\n", static_cast<int>(::getpid()), host_name().c_str());
  }
  std::printf(
      "# minBytes %lld maxBytes %lld step: %g(factor) warmup iters: %d iters: %d validation: 1\n",
      static_cast<long long>(plan_.min_bytes), static_cast<long long>(plan_.max_bytes),
      plan_.step_factor, plan_.warmup, plan_.iters);
  std::printf(
      "# time: mean over the iterations, then mean over the ranks (nccl-tests takes the max "
      "over ranks); busbw = %s\n",
      busbw_text(c));
  if (c != Collective::kAllreduce) {
    std::printf(
        "# size: the whole buffer (every rank's piece), as nccl-tests counts it; in-place: not "
        "run (the communicator's %s reads one buffer and writes another)\n",
        collective_name(c));
  }
  if (ranks == 1) std::printf("# note: 1 rank, so nothing moves and busbw is 0\n");
  if (plan_.emulated) {
    std::printf(
        "# note: emulated GPUs (BATON_CUDA_EMULATE=1): NCCL's stand-in copies on the CPU; these "
        "figures say nothing of a GPU's\n");
  }
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

void Reporter::row(const Row& r) {
  const Collective c = plan_.collective;
  nlohmann::ordered_json row = {
      {"size", r.bytes}, {"count", r.count}, {"type", "float"}, {"redop", redop_name(c)}};
  std::string cells[8];
  for (int k = 0; k < 2; ++k) {
    if (k == 1 && c != Collective::kAllreduce) {
      row["in_place"] = nullptr;
      for (int i = 4; i < 8; ++i) cells[i] = "n/a";
      continue;
    }
    const double alg = algbw_gbs(r.bytes, r.time_us[k]);
    const double bus = alg * busbw_factor(c, ranks_);
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
  std::printf("%s\n", table_line(std::to_string(r.bytes), std::to_string(r.count), "float",
                                 redop_name(c), cells)
                          .c_str());
  std::fflush(stdout);
}

void Reporter::end() {
  const double avg = bus_n_ > 0 ? bus_sum_ / bus_n_ : 0.0;
  doc_["wrong"] = wrong_;
  doc_["avg_busbw"] = avg;
  docs_.push_back(doc_);
  if (!plan_.json) {
    std::printf("# Wrong values      : %lld %s\n", static_cast<long long>(wrong_),
                wrong_ == 0 ? "OK" : "FAILED");
    std::printf("# Avg bus bandwidth : %.3f GB/s\n", avg);
  }
  std::fflush(stdout);
}

void Reporter::finish() {
  if (plan_.json) {
    std::printf("%s\n", (docs_.size() == 1 ? docs_[0] : docs_).dump(2).c_str());
    std::fflush(stdout);
    return;
  }
  if (docs_.size() < 2) return;
  // The allreduce's in-place times; the others' out-of-place.
  const bool in_place = plan_.collective == Collective::kAllreduce;
  const char* mode = in_place ? "in_place" : "out_of_place";
  std::printf("#\n# side by side, %s time (us) per size:\n",
              in_place ? "in-place" : "out-of-place");
  std::string head = "#" + std::string(10, ' ') + "size";
  for (const auto& d : docs_) head += "  " + centered(d["algorithm"].get<std::string>(), 12);
  std::printf("%s\n", head.c_str());
  const auto& first = docs_[0]["rows"];
  for (size_t i = 0; i < first.size(); ++i) {
    char size[32];
    std::snprintf(size, sizeof(size), "%15lld", static_cast<long long>(first[i]["size"]));
    std::string line = size;
    for (const auto& d : docs_) {
      line += "  " + centered(fmt_time(d["rows"][i][mode]["time_us"].get<double>()), 12);
    }
    std::printf("%s\n", line.c_str());
  }
  std::fflush(stdout);
}

void Reporter::print_header_line(std::string line) {
  line[0] = '#';
  while (!line.empty() && line.back() == ' ') line.pop_back();
  std::printf("%s\n", line.c_str());
}

}  // namespace baton::cli
