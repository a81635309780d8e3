// `baton train --sample-log DIR`: which samples each replica trained on at
// every step, so a run that was restarted or changed its worker count can
// be checked to have seen each sample of an epoch exactly once.
//
// Every process writes its own file, DIR/from<S>-replica<R>.samples (S: the
// step it started at, R: its first replica), made anew when it starts:
//   # baton sample log: start_step S start_time T replicas R..R+n-1 of N
//   <step> <epoch> <batch in epoch> <replica>: <dataset index> ...
// one line per replica and step, flushed at each step (a kill loses at most
// the line being written).
#pragma once

#include <baton/data/pipeline.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace baton {

class SampleLog {
 public:
  // RuntimeError naming the file when it cannot be made.
  SampleLog(const std::string& dir, int64_t start_step, int first_replica, int local_replicas,
            int num_replicas);
  ~SampleLog();
  SampleLog(const SampleLog&) = delete;
  SampleLog& operator=(const SampleLog&) = delete;

  void write(int64_t step, int replica, const Batch& batch);
  void flush();  // after the step's lines; RuntimeError when the write failed

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// A step as the sample logs of a folder tell it: what the attempt that ran
// it last read, all its replicas together. An attempt is the files with
// one start step and replica count; the newest start time orders them.
struct SampleLogStep {
  int64_t epoch = 0, batch = 0;
  int replicas = 0;              // the replicas of the attempt that ran it
  std::vector<int64_t> samples;  // every replica's, in no set order
};
// InputError naming the file and line for a line that is not one of the above.
std::map<int64_t, SampleLogStep> read_sample_logs(const std::string& dir);

}  // namespace baton
