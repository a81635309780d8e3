#include "train/run_controller.h"

#include <baton/launch/mpirun_command.h>
#include <baton/launch/run_session.h>
#include <baton/train/run_config.h>
#include <baton/train/run_dir.h>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTimer>
#include <chrono>
#include <csignal>

#include "common/engine_cluster.h"

namespace baton::ui {

// ---- EmbeddedRun ----------------------------------------------------------

EmbeddedRun::EmbeddedRun(const StudioContext& ctx, RunRequest request, QObject* parent)
    : RunController(parent), ctx_(ctx), req_(std::move(request)) {
  queue_ = std::make_shared<EventQueue>();
  pump_ = new EventPump(queue_, 30, this);
  connect(pump_, &EventPump::events, this, &RunController::events);
  run_id_ = req_.run_id;
  if (run_id_.isEmpty()) {
    const std::string name = req_.config.value("name", std::string("run"));
    run_id_ = QString::fromStdString(make_run_id(name));
  }
}

EmbeddedRun::~EmbeddedRun() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void EmbeddedRun::start() {
  if (running_) return;
  running_ = true;
  stop_ = false;
  pump_->start();
  thread_ = std::thread([this] { work(); });
}

void EmbeddedRun::stop() { stop_ = true; }

void EmbeddedRun::work() {
  QString status = QStringLiteral("failed"), error;
  try {
    // The engine's one way to start a run (launch/run_session.h), alone in
    // this process: the run directory, the history record and the config
    // copy as `baton train` makes them.
    baton::RunSpec spec;
    spec.config = parse_run_config(req_.config, req_.config_path.toStdString());
    spec.plugin_dir = ctx_.plugin_dir.toStdString();
    spec.runs_root = ctx_.runs_dir.toStdString();
    spec.run_id = run_id_.toStdString();
    spec.in_mpi_job = false;
    spec.history_db = ctx_.history_db.toStdString();
    spec.topology = {{"launcher", "baton-studio"}, {"cluster", req_.topology}};
    spec.stop = &stop_;
    Telemetry telemetry;
    telemetry.add(std::make_shared<QueueSink>(queue_));
    RunSession session(std::move(spec), telemetry);
    const RunOutcome outcome = session.run();
    status = QString::fromStdString(outcome.summary.status);
    if (!outcome.history_error.empty()) error = QString::fromStdString(outcome.history_error);
  } catch (const std::exception& e) {
    error = QString::fromUtf8(e.what());
  }
  // Back on the GUI thread (dropped if this object is gone).
  QMetaObject::invokeMethod(
      this,
      [this, status, error] {
        if (thread_.joinable()) thread_.join();
        pump_->pump();
        pump_->stop();
        running_ = false;
        Q_EMIT finished(status, error);
      },
      Qt::QueuedConnection);
}

// ---- LaunchedRun ----------------------------------------------------------

LaunchedRun::LaunchedRun(const StudioContext& ctx, RunRequest request, int ranks,
                         std::string hostfile, QObject* parent)
    : RunController(parent),
      ctx_(ctx),
      req_(std::move(request)),
      ranks_(ranks),
      hostfile_(std::move(hostfile)) {
  tmp_ =
      std::make_unique<QTemporaryDir>(QDir::temp().filePath(QStringLiteral("baton-launch-XXXXXX")));
  dir_ = tmp_->path();
  connect(&proc_, &QProcess::readyReadStandardOutput, this, &LaunchedRun::read_stdout);
  connect(&proc_, &QProcess::readyReadStandardError, this, &LaunchedRun::read_stderr);
  connect(&proc_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart) return;
    Q_EMIT finished(QStringLiteral("failed"),
                    tr("cannot start %1 (%2): the baton command line runs the launched jobs")
                        .arg(program_.isEmpty() ? ctx_.baton_exe : program_, proc_.errorString()));
  });
  flush_.setSingleShot(true);
  flush_.setInterval(std::chrono::milliseconds(30));
  connect(&flush_, &QTimer::timeout, this, &LaunchedRun::flush_events);
  connect(&proc_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus how) {
    read_stdout();
    read_stderr();
    if (!out_buf_.isEmpty()) Q_EMIT output(QString::fromUtf8(out_buf_));
    if (!err_buf_.isEmpty()) Q_EMIT output(QString::fromUtf8(err_buf_));
    out_buf_.clear();
    err_buf_.clear();
    flush_.stop();
    flush_events();  // every event before the end
    // The launcher's verdict over all attempts; the chief's last run_end
    // when there was none (it could not start).
    QString status = !launch_status_.isEmpty() ? launch_status_ : last_status_;
    QString error = last_error_;
    if (stopping_) {
      status = QStringLiteral("interrupted");
    } else if (how != QProcess::NormalExit || code != 0) {
      status = QStringLiteral("failed");
      if (error.isEmpty()) error = tr("baton launch exited with code %1 (see the log)").arg(code);
    } else if (status.isEmpty()) {
      status = QStringLiteral("completed");
    }
    Q_EMIT finished(status, error);
  });
}

LaunchedRun::~LaunchedRun() {
  // Waiting below still delivers the launcher's output: nothing of it may
  // reach this half-destroyed controller or its receivers.
  QObject::disconnect(&proc_, nullptr, this, nullptr);
  blockSignals(true);
  if (proc_.state() != QProcess::NotRunning) {
    proc_.terminate();
    if (!proc_.waitForFinished(5000)) proc_.kill();
    proc_.waitForFinished(2000);
  }
}

bool LaunchedRun::running() const { return proc_.state() != QProcess::NotRunning; }

QStringList LaunchedRun::arguments() const {
  // `baton launch` supervises the mpirun job: it restarts it from its
  // newest checkpoint when a rank dies or hangs (launch/launcher.h).
  QStringList a{QStringLiteral("launch"), QStringLiteral("-"), QStringLiteral("--np"),
                QString::number(ranks_)};
  if (!hostfile_.empty()) {
    a << QStringLiteral("--hostfile") << QDir(dir_).filePath(QStringLiteral("hostfile"));
  }
  // The config travels on the launcher's standard input, which it hands to
  // rank 0 through mpirun's: no file in this host's /tmp that other hosts
  // cannot read.
  a << QStringLiteral("--runs-dir") << ctx_.runs_dir;
  // The chief records the run in the same history the studio shows.
  a << QStringLiteral("--db") << ctx_.history_db;
  // Standard output: the chief's events, the other ranks' step and link
  // figures, the launcher's restarts - JSON lines only.
  a << QStringLiteral("--events") << QStringLiteral("-") << QStringLiteral("-q");
  return a;
}

bool LaunchedRun::write_inputs(QString* error) {
  if (!tmp_->isValid()) {
    *error = tr("cannot create a temporary directory for the launch (%1)").arg(tmp_->errorString());
    return false;
  }
  // mpirun alone reads the hostfile, on this host.
  if (!hostfile_.empty()) {
    QFile hf(QDir(dir_).filePath(QStringLiteral("hostfile")));
    if (!hf.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
        hf.write(hostfile_.data(), static_cast<qint64>(hostfile_.size())) < 0) {
      *error = tr("%1: cannot write (%2)").arg(hf.fileName(), hf.errorString());
      return false;
    }
  }
  return true;
}

void LaunchedRun::start() {
  QString error;
  if (!write_inputs(&error)) {
    Q_EMIT finished(QStringLiteral("failed"), error);
    return;
  }
  stopping_ = false;
  restarts_ = 0;
  launch_status_.clear();
  last_status_.clear();
  last_error_.clear();
  proc_.start(program_.isEmpty() ? ctx_.baton_exe : program_, arguments());
  // The config, its paths made absolute (the ranks' working folder is not
  // the config's), on the launcher's standard input.
  const QString base = QFileInfo(req_.config_path).absolutePath();
  const std::string text = absolutize_paths(req_.config, base.toStdString()).dump(2) + "\n";
  proc_.write(text.data(), static_cast<qint64>(text.size()));
  proc_.closeWriteChannel();
}

void LaunchedRun::stop() {
  if (proc_.state() == QProcess::NotRunning) return;
  if (stopping_) {  // asked twice: end it now
    proc_.terminate();
    return;
  }
  stopping_ = true;
  // The launcher passes SIGUSR1 on to mpirun, mpirun to every rank; `baton
  // train` then stops all ranks at the same step, checkpoints and records
  // the run as interrupted. If that takes too long, the launcher is
  // terminated (and its job with it).
  ::kill(static_cast<pid_t>(proc_.processId()), SIGUSR1);
  QTimer::singleShot(std::chrono::seconds(60), this, [this] {
    if (proc_.state() != QProcess::NotRunning) proc_.terminate();
  });
}

namespace {

// Calls fn(line) for each whole line in `buf` (without its newline), and
// leaves the unfinished rest there.
template <class F>
void take_lines(QByteArray& buf, F&& fn) {
  qsizetype nl;
  while ((nl = buf.indexOf('\n')) >= 0) {
    QByteArray line = buf.left(nl);
    buf.remove(0, nl + 1);
    fn(std::move(line));
  }
}

}  // namespace

void LaunchedRun::read_stdout() {
  out_buf_ += proc_.readAllStandardOutput();
  take_lines(out_buf_, [this](const QByteArray& raw) {
    const QByteArray line = raw.trimmed();
    if (line.isEmpty()) return;
    // The launcher's lines are another process's output: a field of the
    // wrong type shows the line in the log, never an exception out of a
    // slot (that would end the studio).
    try {
      const auto j = nlohmann::json::parse(line.constData(), line.constData() + line.size(), nullptr,
                                           /*allow_exceptions=*/false);
      if (!j.is_object()) {
        Q_EMIT output(QString::fromUtf8(line));
        return;
      }
      const std::string type = j.value("type", "");
      // The launcher's own: a failed attempt and what happens next, and the end.
      if (type == "restart" || type == "launch_failure") {
        Q_EMIT output(
            tr("attempt %1 failed: %2%3")
                .arg(j.value("attempt", 0))
                .arg(QString::fromStdString(j.value("cause", "")))
                .arg(type == "restart" ? tr("; restarting from the newest checkpoint") : QString()));
        ++restarts_;
        Q_EMIT restarted(QString::fromStdString(j.value("run", "")), j.value("step", qint64{0}),
                         j.value("detected", j.value("time", 0.0)),
                         QString::fromStdString(j.value("cause", "")));
        return;
      }
      if (type == "replace") {
        const QString cause = QString::fromStdString(j.value("cause", ""));
        Q_EMIT output(tr("attempt %1: %2; replaced, the servers and the other workers going on")
                          .arg(j.value("attempt", 0))
                          .arg(cause));
        Q_EMIT replaced(QString::fromStdString(j.value("run", "")), j.value("step", qint64{0}),
                        j.value("detected", j.value("time", 0.0)), j.value("rank", -1), cause);
        return;
      }
      if (type == "rescale") {
        const int from = j.value("from", 0), to = j.value("to", 0);
        const QString cause = QString::fromStdString(j.value("cause", ""));
        Q_EMIT output(tr("attempt %1 stopped at step %2: %3; going on with %4 worker(s)")
                          .arg(j.value("attempt", 0))
                          .arg(j.value("step", qint64{0}))
                          .arg(cause)
                          .arg(to));
        Q_EMIT rescaled(QString::fromStdString(j.value("run", "")), j.value("step", qint64{0}),
                        j.value("time", 0.0), from, to, cause);
        return;
      }
      if (type == "ranks") {
        const auto rows = rank_rows_from_json(j.value("ranks", nlohmann::json::array()));
        Q_EMIT ranks(j.value("attempt", 0), static_cast<int>(rows.size()), rows);
        return;
      }
      if (type == "attempt_start") {
        QStringList hosts;
        for (const auto& h : j.value("hosts", nlohmann::json::array())) {
          hosts << QStringLiteral("%1 (%2)")
                       .arg(QString::fromStdString(h.value("host", "")))
                       .arg(h.value("ranks", 0));
        }
        Q_EMIT ranks_note(hosts.isEmpty() ? tr("Attempt %1: starting %2 rank(s)")
                                                .arg(j.value("attempt", 0))
                                                .arg(j.value("workers", 0))
                                          : tr("Attempt %1: starting %2 rank(s) on %3")
                                                .arg(j.value("attempt", 0))
                                                .arg(j.value("workers", 0))
                                                .arg(hosts.join(QStringLiteral(", "))));
        return;
      }
      if (type == "waiting_for_hosts") {
        const QString note = tr("Waiting for hosts: %1 usable slot(s), at least %2 needed")
                                 .arg(j.value("slots", 0))
                                 .arg(j.value("min_workers", 0));
        Q_EMIT ranks_note(note);
        Q_EMIT output(note);
        return;
      }
      if (type == "launch_end") {
        launch_status_ = QString::fromStdString(j.value("status", ""));
        const std::string reason = j.value("reason", "");
        if (!reason.empty()) last_error_ = QString::fromStdString(reason);
        return;
      }
      std::optional<Event> e;
      try {
        e = event_from_json(j);
      } catch (const std::exception&) {
        e.reset();
      }
      if (!e) {
        Q_EMIT output(QString::fromUtf8(line));
        return;
      }
      if (const auto* end = std::get_if<RunEndEvent>(&*e)) {
        last_status_ = QString::fromStdString(end->status);
        if (!end->error.empty()) last_error_ = QString::fromStdString(end->error);
      }
      pending_.push_back(std::move(*e));
    } catch (const nlohmann::json::exception&) {
      Q_EMIT output(QString::fromUtf8(line));
    }
  });
  // Delivered in batches every 30 ms, as an embedded run's are.
  if (!pending_.empty() && !flush_.isActive()) flush_.start();
}

void LaunchedRun::flush_events() {
  if (pending_.empty()) return;
  std::vector<Event> batch;
  batch.swap(pending_);
  Q_EMIT events(batch);
}

void LaunchedRun::read_stderr() {
  err_buf_ += proc_.readAllStandardError();
  // The launcher's messages and the ranks' ("[rank 1] ..."), as they come.
  take_lines(err_buf_, [this](const QByteArray& raw) {
    const QString text = QString::fromUtf8(raw).trimmed();
    if (text.isEmpty()) return;
    Q_EMIT output(text);
    if (last_error_.isEmpty() && text.contains(QLatin1String("error"))) last_error_ = text;
  });
}

}  // namespace baton::ui
