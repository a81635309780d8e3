// Where this process sits in its job: its MPI rank and the job's size
// (rank 0, size 1 outside mpirun), checked against TF_CONFIG when it is set.
#pragma once

#include <string>
#include <vector>

namespace baton {

struct JobPlace {
  int rank = 0, size = 1;
  bool chief() const { return rank == 0; }
};

// Under mpirun (MPI initialised): this rank and the job's size; TF_CONFIG,
// when set, must list as many tasks as the job has processes and name this
// rank's task (chief = rank 0, then workers, then ps). InputError otherwise.
// `strategy` is the run config's strategy.type (TF_CONFIG's roles depend on
// it).
JobPlace place_in_job(const std::string& strategy);

// A file's text as the chief reads it ("-": its standard input, which
// mpirun gives rank 0 alone), given to every rank: under mpirun only the
// chief needs the file. A failed read is the same InputError on every rank.
// Needs only MPI (called before the run config, and so the job's place, is
// known); outside an MPI job it reads the file.
std::string read_on_chief(const std::string& path);

// The chief's run id, given to every rank (a collective under mpirun).
std::string agree_on_run_id(const JobPlace& place, std::string id);

// The host of each rank, in rank order (a collective under mpirun: every
// rank calls it).
std::vector<std::string> job_rank_hosts(const JobPlace& place);
// The same hosts without repeats, in order of their first rank.
std::vector<std::string> unique_hosts(const std::vector<std::string>& rank_hosts);

}  // namespace baton
