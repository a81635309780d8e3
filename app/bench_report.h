// Rank 0's output of `baton bench allreduce|reduce_scatter|allgather`: the
// nccl-tests table as it goes (text), or one JSON document at the end
// (--json).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "bench_plan.h"

namespace baton::cli {

class Reporter {
 public:
  explicit Reporter(const Plan& plan) : plan_(plan) {}
  // One algorithm's table: begin, a row per size, end.
  void begin(const std::string& comm, CommAlgorithm algorithm, int ranks);
  void row(const Row& r);
  void end();
  // After every algorithm: with several, their in-place times side by
  // side (text), or the array of their documents (--json); with one, its
  // document (--json).
  void finish();

 private:
  static void print_header_line(std::string line);

  const Plan& plan_;
  int ranks_ = 1;
  nlohmann::ordered_json doc_;
  nlohmann::ordered_json docs_ = nlohmann::ordered_json::array();
  double bus_sum_ = 0;
  int bus_n_ = 0;
  int64_t wrong_ = 0;
};

}  // namespace baton::cli
