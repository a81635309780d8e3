// HistorySink: records a run's telemetry into the run history (history.h).
//
// What is stored, per event (in the order emitted; every stored row has the
// event's sequence number `seq`, so a replay gives the events back in order):
//   run_start  a `runs` row, status running, with the config, the topology,
//              the hosts and the other run_start fields (start_info). The
//              run_start of a run already recorded (a --resume) sets it
//              running again and adds a `restart` event.
//   step       11 metric samples: loss, accuracy, lr, grad_norm,
//              samples_per_s, step_time_ms, data_ms, compute_ms, comm_ms,
//              optimizer_ms, rank_samples_per_s (with the step, epoch, rank
//              and wall time); a 12th, mfu, where known (GPUs)
//   epoch      train_loss, train_accuracy, [val_loss, val_accuracy],
//              epoch_samples_per_s, epoch_time_s
//   link       a link sample (src, dst, num_bytes, seconds, estimated)
//   log        an event (level, message); checkpoint: an event (path, bytes)
//   run_end    the run's status, end time, final metrics (and an `error`
//              event when it failed)
// Wall times are seconds since the run first started (a resumed run's
// samples continue the first attempt's clock).
//
// Threading: emit() may be called from any thread (Telemetry's rule). It
// copies the event into a queue and returns: it never touches SQLite. One
// writer thread drains the queue in batches, each one BEGIN IMMEDIATE ...
// COMMIT with prepared statements, committed every `commit_every_ms` or
// every `commit_every_rows` queued events, whichever comes first. If the
// queue holds `max_queued` events (the disk is slower than the run), emit
// waits for the writer: back-pressure rather than unbounded memory or lost
// samples.
//
// One sink records one run at a time: events of a run id other than the
// last run_start's are ignored; log and checkpoint events that arrive
// before the run_start are held and recorded after it.
#pragma once

#include <baton/core/process_identity.h>

#include <baton/telemetry/telemetry.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <vector>

namespace baton {

// Describes where a run runs; stored with its run_start.
struct HistoryRunInfo {
  std::vector<std::string> hosts;  // default: this host
  nlohmann::json topology = nlohmann::json::object();
  std::vector<std::string> tags;
};

struct HistorySinkOptions {
  int commit_every_ms = 250;
  int64_t commit_every_rows = 8192;
  int64_t max_queued = 1 << 20;
  // A batch that finds the database locked by another writer (a long
  // delete, a migration) waits this long for it: SQLite's busy timeout
  // for each try, and the batch is tried again, waiting up to
  // busy_patience_ms in all, before the database counts as failed.
  int busy_timeout_ms = 10000;
  int busy_patience_ms = 300000;
  // Called once, on the writer thread, when the database first fails (the
  // message names the database and says why); nothing is recorded after
  // that. For the run's log and the console: the run goes on.
  std::function<void(const std::string&)> on_error;
  // The process that answers for the run while it is `running` (the
  // interrupted rule marks it once that process is gone): this one when
  // unset; under `baton launch`, the launcher (baton/core/process_identity.h).
  std::optional<ProcessIdentity> owner;
};

class HistorySink final : public TelemetrySink {
 public:
  // Opens (creating if needed) the database at db_path and starts the
  // writer thread. InputError for a file that is not a Baton history or is
  // from a newer Baton; RuntimeError when it cannot be opened.
  explicit HistorySink(const std::string& db_path, HistoryRunInfo info = {},
                       HistorySinkOptions options = {});
  // Commits what is queued and stops the writer. Never throws: an error is
  // lost here, so call close() to see it.
  ~HistorySink() override;
  HistorySink(const HistorySink&) = delete;
  HistorySink& operator=(const HistorySink&) = delete;

  void emit(const Event& event) override;

  // Waits until every event emitted before the call is committed.
  // RuntimeError if the writer failed (the message names the database and
  // how many events were not recorded).
  void flush();
  // flush(), then stops the writer thread. Further events are ignored.
  void close();

  // Events committed so far (for tests and progress), and events not
  // recorded because the database failed (0 while it works).
  int64_t committed_events() const;
  int64_t lost_events() const;
  // The runs row of the run being recorded; 0 before its run_start is
  // committed.
  int64_t run_row_id() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace baton
