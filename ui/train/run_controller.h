// Runs a training run for the Train view and streams its telemetry back.
//
// EmbeddedRun: single-process strategies (one_device, mirrored,
// central_storage) on the engine in this process, on a worker thread; Stop
// asks the trainer to end at the next step (a final checkpoint, status
// "interrupted").
// LaunchedRun: multi-process strategies (multi_worker_mirrored,
// parameter_server) as `mpirun ... baton train CONFIG --events -` in a child
// process (an argument list, never a shell string); every rank's JSON lines
// become events, anything else goes to the log. Stop sends mpirun SIGUSR1,
// which it passes on to the ranks: they stop together at the next step with
// a checkpoint (interrupted); a second Stop, or 60 s, terminates mpirun.
//
// Both hand events to the GUI thread in batches (EventPump) and say when the
// run is over through finished(); neither touches a widget.
#pragma once

#include <QObject>
#include <QProcess>
#include <QString>
#include <QTemporaryDir>
#include <QTimer>
#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "common/event_queue.h"
#include "common/studio_context.h"
#include "train/ranks_panel.h"

namespace baton::ui {

class RunController : public QObject {
  Q_OBJECT
 public:
  using QObject::QObject;
  ~RunController() override = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual bool running() const = 0;

 Q_SIGNALS:
  void events(const std::vector<baton::Event>& batch);
  // A line for the log console (launcher output, errors).
  void output(const QString& line);
  // status: completed | interrupted | failed; error: why it failed.
  void finished(const QString& status, const QString& error);
  // A failed attempt of run `run` (launched runs): the step its job had
  // reached, when the launcher saw it (Unix seconds), and why.
  void restarted(const QString& run, qint64 step, double unix_s, const QString& cause);
  // An elastic job stopped at `step` to go on with `to` workers instead of `from`.
  // A parameter-server worker replaced while the job went on (baton
  // launch's "replace" event).
  void replaced(const QString& run, qint64 step, double unix_s, int rank, const QString& cause);
  void rescaled(const QString& run, qint64 step, double unix_s, int from, int to,
                const QString& cause);
  // Every rank's state (launched runs, about once a second) for the Ranks
  // panel; `workers`: the attempt's rank count.
  void ranks(int attempt, int workers, const std::vector<baton::ui::RankRow>& rows);
  // The launcher is waiting for hosts, or an attempt started on these hosts.
  void ranks_note(const QString& note);
};

// The run config to train and where its relative paths resolve.
struct RunRequest {
  nlohmann::json config;
  QString config_path;  // where it came from: messages and relative paths
  QString run_id;       // "" = a new id from the config's name
  nlohmann::json topology = nlohmann::json::object();  // recorded with the run
};

class EmbeddedRun final : public RunController {
  Q_OBJECT
 public:
  EmbeddedRun(const StudioContext& ctx, RunRequest request, QObject* parent = nullptr);
  ~EmbeddedRun() override;  // stops and joins
  void start() override;
  void stop() override;
  bool running() const override { return running_; }
  QString run_id() const { return run_id_; }

 private:
  void work();
  const StudioContext& ctx_;
  RunRequest req_;
  QString run_id_;
  std::shared_ptr<EventQueue> queue_;
  EventPump* pump_ = nullptr;
  std::atomic<bool> stop_{false};
  bool running_ = false;
  std::thread thread_;
};

class LaunchedRun final : public RunController {
  Q_OBJECT
 public:
  // `ranks`: mpirun -n; `hostfile`: OpenMPI hostfile text ("" = this host).
  LaunchedRun(const StudioContext& ctx, RunRequest request, int ranks, std::string hostfile,
              QObject* parent = nullptr);
  ~LaunchedRun() override;
  void start() override;
  void stop() override;
  bool running() const override;
  // `baton launch`'s argument list (tests check it).
  QStringList arguments() const;
  QString program() const { return program_.isEmpty() ? ctx_.baton_exe : program_; }
  // The program to start instead of the studio's baton (tests: one that is
  // missing).
  void set_program(const QString& program) { program_ = program; }
  // Failed attempts the launcher restarted from (or gave up after).
  int restarts() const { return restarts_; }

 private:
  void read_stdout();
  void read_stderr();
  void flush_events();
  bool write_inputs(QString* error);

  const StudioContext& ctx_;
  RunRequest req_;
  int ranks_;
  std::string hostfile_;
  QString program_;                     // "" = ctx_.baton_exe
  std::unique_ptr<QTemporaryDir> tmp_;  // the hostfile (mpirun reads it, here)
  QString dir_;
  QProcess proc_;
  QByteArray out_buf_, err_buf_;
  std::vector<baton::Event> pending_;  // since the last batch
  QTimer flush_;                       // a batch every 30 ms
  QString last_status_, last_error_;
  QString launch_status_;  // launch_end's
  int restarts_ = 0;
  bool stopping_ = false;
};

}  // namespace baton::ui
