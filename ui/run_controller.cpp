#include "ui/run_controller.h"

#include <baton/history.h>
#include <baton/history_sink.h>
#include <baton/registry.h>
#include <baton/run_config.h>
#include <baton/run_dir.h>
#include <baton/trainer.h>
#include <unistd.h>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTimer>
#include <chrono>
#include <csignal>

namespace baton::ui {

nlohmann::json absolutize_paths(nlohmann::json config, const QString& base_dir) {
  const QDir base(base_dir);
  for (const char* part : {"train", "validation"}) {
    if (!config.contains("data") || !config["data"].is_object()) break;
    auto& d = config["data"];
    if (!d.contains(part) || !d[part].is_object()) continue;
    for (const char* key : {"path", "images", "labels"}) {
      auto it = d[part].find(key);
      if (it == d[part].end() || !it->is_string()) continue;
      const QString p = QString::fromStdString(it->get<std::string>());
      if (QDir::isRelativePath(p)) *it = QDir::cleanPath(base.filePath(p)).toStdString();
    }
  }
  if (config.contains("checkpoint") && config["checkpoint"].is_object()) {
    auto it = config["checkpoint"].find("dir");
    if (it != config["checkpoint"].end() && it->is_string()) {
      const QString p = QString::fromStdString(it->get<std::string>());
      if (!p.isEmpty() && QDir::isRelativePath(p)) {
        *it = QDir::cleanPath(base.filePath(p)).toStdString();
      }
    }
  }
  return config;
}

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
    const RunConfig cfg = parse_run_config(req_.config, req_.config_path.toStdString());
    Registry registry;
    registry.load_plugin_dir(ctx_.plugin_dir.toStdString());
    Telemetry telemetry;
    telemetry.add(std::make_shared<QueueSink>(queue_));
    const std::string root =
        ctx_.runs_dir.isEmpty() ? default_runs_root() : ctx_.runs_dir.toStdString();
    const RunDir planned{run_id_.toStdString(), root + "/" + run_id_.toStdString()};
    TrainOptions opt;
    opt.run_id = planned.id;
    opt.checkpoint_dir = cfg.checkpoint.dir.empty() ? planned.checkpoints() : cfg.checkpoint.dir;
    opt.stop = &stop_;
    // A history file that is not Baton's fails the run before anything is
    // built or written.
    const std::string db =
        ctx_.history_db.isEmpty() ? default_history_db_path() : ctx_.history_db.toStdString();
    { const HistoryStore check(db); }
    // Building validates the model and data against the plugins: a bad
    // config fails here, before a run directory exists.
    Trainer trainer(cfg, registry, telemetry, opt);
    HistoryRunInfo info;
    info.topology = {{"world_size", 1},
                     {"replicas", trainer.strategy().num_replicas()},
                     {"communication", trainer.strategy().communication()},
                     {"launcher", "baton-studio"},
                     {"cluster", req_.topology}};
    auto history = std::make_shared<HistorySink>(db, info);
    telemetry.add(history);
    const RunDir dir = create_run_dir(root, planned.id);
    telemetry.add(std::make_shared<JsonLinesSink>(dir.events()));
    write_file_atomic(dir.config(), cfg.raw.dump(2) + "\n");
    try {
      status = QString::fromStdString(trainer.run().status);
    } catch (...) {
      // The run_end "failed" is recorded before the error goes up; a
      // recording error must not hide the run's own.
      try {
        history->close();
      } catch (const std::exception&) {
      }
      throw;
    }
    history->close();
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
                    tr("cannot start %1 (%2): install OpenMPI (openmpi-bin) to run "
                       "multi-process strategies")
                        .arg(program_, proc_.errorString()));
  });
  connect(&proc_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus how) {
    read_stdout();
    read_stderr();
    if (!out_buf_.isEmpty()) Q_EMIT output(QString::fromUtf8(out_buf_));
    out_buf_.clear();
    QString status = last_status_;
    QString error = last_error_;
    if (stopping_) {
      status = QStringLiteral("interrupted");
    } else if (how != QProcess::NormalExit || code != 0) {
      status = QStringLiteral("failed");
      if (error.isEmpty()) error = tr("mpirun exited with code %1 (see the log)").arg(code);
    } else if (status.isEmpty()) {
      status = QStringLiteral("completed");
    }
    Q_EMIT finished(status, error);
  });
}

LaunchedRun::~LaunchedRun() {
  if (proc_.state() != QProcess::NotRunning) {
    proc_.terminate();
    if (!proc_.waitForFinished(5000)) proc_.kill();
    proc_.waitForFinished(2000);
  }
}

bool LaunchedRun::running() const { return proc_.state() != QProcess::NotRunning; }

QStringList LaunchedRun::arguments() const {
  QStringList a{QStringLiteral("-n"), QString::number(ranks_), QStringLiteral("--oversubscribe")};
  if (!hostfile_.empty())
    a << QStringLiteral("--hostfile") << QDir(dir_).filePath(QStringLiteral("hostfile"));
  a << ctx_.baton_exe << QStringLiteral("train")
    << QDir(dir_).filePath(QStringLiteral("config.json")) << QStringLiteral("--events")
    << QStringLiteral("-") << QStringLiteral("--quiet");
  if (!ctx_.runs_dir.isEmpty()) a << QStringLiteral("--runs-dir") << ctx_.runs_dir;
  // The chief records the run in the same history the studio shows.
  if (!ctx_.history_db.isEmpty()) a << QStringLiteral("--db") << ctx_.history_db;
  return a;
}

bool LaunchedRun::write_inputs(QString* error) {
  if (!tmp_->isValid()) {
    *error = tr("cannot create a temporary directory for the launch (%1)").arg(tmp_->errorString());
    return false;
  }
  const QString base = QFileInfo(req_.config_path).absolutePath();
  const std::string text = absolutize_paths(req_.config, base).dump(2) + "\n";
  QFile cfg(QDir(dir_).filePath(QStringLiteral("config.json")));
  if (!cfg.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
      cfg.write(text.data(), static_cast<qint64>(text.size())) < 0) {
    *error = tr("%1: cannot write (%2)").arg(cfg.fileName(), cfg.errorString());
    return false;
  }
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
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  // OpenMPI refuses to run as root unless told; the studio may be root in a
  // container.
  if (::geteuid() == 0) {
    env.insert(QStringLiteral("OMPI_ALLOW_RUN_AS_ROOT"), QStringLiteral("1"));
    env.insert(QStringLiteral("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"), QStringLiteral("1"));
  }
  proc_.setProcessEnvironment(env);
  stopping_ = false;
  last_status_.clear();
  last_error_.clear();
  proc_.start(program_, arguments());
}

void LaunchedRun::stop() {
  if (proc_.state() == QProcess::NotRunning) return;
  if (stopping_) {  // asked twice: end it now
    proc_.terminate();
    return;
  }
  stopping_ = true;
  // mpirun passes SIGUSR1 on to every rank; `baton train` then stops all
  // ranks at the same step, checkpoints and records the run as interrupted.
  // If that takes too long, mpirun is terminated.
  ::kill(static_cast<pid_t>(proc_.processId()), SIGUSR1);
  QTimer::singleShot(std::chrono::seconds(60), this, [this] {
    if (proc_.state() != QProcess::NotRunning) proc_.terminate();
  });
}

void LaunchedRun::read_stdout() {
  out_buf_ += proc_.readAllStandardOutput();
  std::vector<Event> batch;
  qsizetype nl;
  while ((nl = out_buf_.indexOf('\n')) >= 0) {
    const QByteArray line = out_buf_.left(nl).trimmed();
    out_buf_.remove(0, nl + 1);
    if (line.isEmpty()) continue;
    std::optional<Event> e;
    if (line.startsWith('{')) {
      const auto j =
          nlohmann::json::parse(line.constData(), line.constData() + line.size(), nullptr,
                                /*allow_exceptions=*/false);
      try {
        if (!j.is_discarded()) e = event_from_json(j);
      } catch (const std::exception&) {
        e.reset();
      }
    }
    if (!e) {
      Q_EMIT output(QString::fromUtf8(line));
      continue;
    }
    if (const auto* end = std::get_if<RunEndEvent>(&*e)) {
      last_status_ = QString::fromStdString(end->status);
      if (!end->error.empty()) last_error_ = QString::fromStdString(end->error);
    }
    if (const auto* log = std::get_if<LogEvent>(&*e)) {
      Q_EMIT output(QString::fromStdString(log->message));
    }
    batch.push_back(std::move(*e));
  }
  if (!batch.empty()) Q_EMIT events(batch);
}

void LaunchedRun::read_stderr() {
  const QString text = QString::fromUtf8(proc_.readAllStandardError());
  for (const QString& line : text.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
    Q_EMIT output(line);
    if (last_error_.isEmpty() && line.contains(QLatin1String("error"))) last_error_ = line;
  }
}

}  // namespace baton::ui
