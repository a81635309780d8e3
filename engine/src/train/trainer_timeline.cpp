// Trainer timelines (TrainOptions::timeline): the recorder, the clock
// alignment at the start, and every process's spans gathered to the chief
// at the end.
#include <baton/comm/communicator.h>
#include <baton/core/error.h>
#include <baton/telemetry/chrome_trace.h>
#include <baton/train/trainer.h>
#include <unistd.h>

#include <algorithm>

#include "trainer_internal.h"

namespace baton {

void Trainer::make_timeline() {
  size_t capacity = opt_.timeline_capacity;
  if (capacity == 0) {
    // A step's spans: the loop's six phases, forward and backward per
    // replica, and a bucket allreduce each (a few dozen buckets at most);
    // a server records one update per worker push.
    const int64_t per_step =
        8 + static_cast<int64_t>(strategy_->local_replicas()) * 34 + strategy_->num_replicas();
    // The whole job's spans meet on the chief (and travel as one event):
    // 2^19 spans at most over its processes, about 25 MB of JSON.
    const int64_t processes =
        std::max(1, strategy_->num_replicas() / std::max(1, strategy_->local_replicas()));
    const int64_t share = std::max<int64_t>(1024, (int64_t{1} << 19) / processes);
    capacity = static_cast<size_t>(
        std::clamp<int64_t>(per_step * std::max<int64_t>(total_steps_, 1) + 64, 1024, share));
  }
  timeline_ = std::make_unique<Timeline>(capacity);
  strategy_->set_timeline(timeline_.get());
}

void Trainer::sync_timeline_clock() {
  if (!timeline_) return;
  clock_ = strategy_->clock_offset_to_chief([tl = timeline_.get()] { return tl->now_ns(); });
  // The pings are not training traffic: off the links' figures.
  (void)strategy_->drain_links();
}

void Trainer::emit_timeline() {
  if (!timeline_) return;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string mine = timeline_part(*timeline_, strategy_->process_rank(), host,
                                         clock_.offset_ns, clock_.round_trip_ns)
                               .dump();
  const std::vector<std::string> parts = strategy_->gather_to_chief(mine);
  (void)strategy_->drain_links();
  if (!strategy_->is_chief()) return;
  std::vector<nlohmann::json> all;
  int64_t dropped = 0;
  for (const std::string& p : parts) {
    all.push_back(nlohmann::json::parse(p));
    dropped += all.back().value("dropped", int64_t{0});
  }
  const bool alone = parts.size() <= 1;
  TimelineEvent e;
  e.run = opt_.run_id;
  e.trace = timeline_record(
      std::move(all), timeline_->base_unix_s(),
      alone ? "one process: its monotonic clock"
            : "each process's monotonic clock moved onto the chief's by the offset of its "
              "fastest of 16 pings (Cristian's algorithm; error at most half that round trip)");
  if (dropped > 0) {
    log(LogLevel::kWarning, "timeline: " + std::to_string(dropped) +
                                " spans did not fit in the processes' buffers and were dropped "
                                "(the trace holds each process's first ones)");
  }
  emit(e);
}

}  // namespace baton
