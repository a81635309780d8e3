#include "train/train_view.h"

#include <QAction>
#include <QHBoxLayout>
#include <QLabel>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSplitter>
#include <QTabWidget>
#include <QVBoxLayout>
#include <map>

#include "cluster/topology_model.h"
#include "common/dashboard.h"
#include "train/ranks_panel.h"
#include "train/run_controller.h"
#include "train/run_form.h"

namespace baton::ui {
namespace {

QString mmss(double seconds) {
  const auto s = static_cast<qint64>(seconds + 0.5);
  return s >= 3600 ? QStringLiteral("%1:%2:%3")
                         .arg(s / 3600)
                         .arg(s / 60 % 60, 2, 10, QLatin1Char('0'))
                         .arg(s % 60, 2, 10, QLatin1Char('0'))
                   : QStringLiteral("%1:%2").arg(s / 60).arg(s % 60, 2, 10, QLatin1Char('0'));
}

}  // namespace

TrainView::TrainView(const StudioContext& ctx, TopologyModel& topology, QWidget* parent)
    : QWidget(parent), ctx_(ctx), topology_(topology) {
  start_ = new QAction(tr("&Start"), this);
  start_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  stop_ = new QAction(tr("S&top"), this);
  stop_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Period));
  stop_->setEnabled(false);
  connect(start_, &QAction::triggered, this, &TrainView::start);
  connect(stop_, &QAction::triggered, this, &TrainView::stop);

  start_button_ = new QPushButton(tr("Start"));
  start_button_->setObjectName(QStringLiteral("start"));
  stop_button_ = new QPushButton(tr("Stop"));
  stop_button_->setObjectName(QStringLiteral("stop"));
  stop_button_->setEnabled(false);
  connect(start_button_, &QPushButton::clicked, start_, &QAction::trigger);
  connect(stop_button_, &QPushButton::clicked, stop_, &QAction::trigger);
  progress_ = new QProgressBar;
  progress_->setRange(0, 1000);
  progress_->setValue(0);
  progress_->setTextVisible(true);
  progress_->setFormat(tr("idle"));
  status_ = new QLabel(tr("Ready: press Start to train"));
  status_->setObjectName(QStringLiteral("status"));
  status_->setWordWrap(true);

  auto* bar = new QHBoxLayout;
  bar->addWidget(start_button_);
  bar->addWidget(stop_button_);
  bar->addWidget(progress_, 1);

  form_ = new RunForm(ctx_);
  auto* scroll = new QScrollArea;
  scroll->setWidget(form_);
  scroll->setWidgetResizable(true);
  scroll->setMinimumWidth(300);
  scroll->setMaximumWidth(420);

  dashboard_ = new Dashboard;
  log_ = new QPlainTextEdit;
  log_->setObjectName(QStringLiteral("log"));
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(5000);
  log_->setPlaceholderText(tr("Run log"));

  ranks_ = new RanksPanel;
  ranks_->clear(tr("Ranks appear here for runs launched as processes (mpirun)."));
  auto* bottom = new QTabWidget;
  bottom->setObjectName(QStringLiteral("log_tabs"));
  bottom->addTab(log_, tr("Log"));
  bottom->addTab(ranks_, tr("Ranks"));
  auto* right = new QSplitter(Qt::Vertical);
  right->addWidget(dashboard_);
  right->addWidget(bottom);
  right->setStretchFactor(0, 4);
  right->setStretchFactor(1, 1);
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(scroll);
  split->addWidget(right);
  split->setStretchFactor(1, 1);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(bar);
  layout->addWidget(status_);
  layout->addWidget(split, 1);

  connect(&topology_, &TopologyModel::changed, this, &TrainView::update_strategy);
  // "Use the config's": the Cluster view takes the config's strategy, so
  // the processes it launches are the ones the config's strategy needs.
  connect(form_, &RunForm::strategy_adopted, this, [this](const QString& type) {
    adopted_ = type;
    following_config_ = true;
    topology_.set_strategy(type);
  });
  connect(form_, &RunForm::config_loaded, this, &TrainView::follow_config_strategy);
  following_config_ = topology_.pristine();
  connect(form_, &RunForm::validity_changed, this, [this](bool ok) {
    start_->setEnabled(ok && !running());
    start_button_->setEnabled(ok && !running());
  });
  update_strategy();
  follow_config_strategy();
}

void TrainView::follow_config_strategy() {
  if (following_config_ && form_->strategy_conflict()) form_->use_config_strategy();
}

TrainView::~TrainView() = default;

bool TrainView::running() const { return run_ && run_->running(); }

QString TrainView::status_text() const { return status_->text(); }

void TrainView::update_strategy() {
  const QString s = topology_.strategy();
  // The user picked another strategy in the Cluster view: the form asks
  // from now on.
  if (following_config_ && !adopted_.isEmpty() && s != adopted_) following_config_ = false;
  QString text = s;
  if (topology_.multi_process()) {
    text += tr(", %1 replicas in %2 processes (mpirun)")
                .arg(topology_.replica_count())
                .arg(topology_.process_count());
  } else if (s != QLatin1String("one_device")) {
    text += tr(", %1 replicas (threads)").arg(topology_.replica_count());
  }
  form_->set_strategy(topology_.strategy_json(), text, topology_.replica_count());
}

void TrainView::set_status(const QString& text, bool error) {
  status_->setText(text);
  QPalette p = status_->palette();
  p.setColor(QPalette::WindowText,
             error ? QColor(0xd0, 0x30, 0x30) : palette().color(QPalette::WindowText));
  status_->setPalette(p);
}

void TrainView::log_line(const QString& line) { log_->appendPlainText(line); }

void TrainView::start() {
  if (running()) return;
  const QStringList problems = topology_.problems();
  if (!problems.isEmpty()) {
    set_status(tr("The topology cannot run: %1").arg(problems.join(QStringLiteral("; "))), true);
    return;
  }
  if (!form_->valid()) {
    set_status(tr("Fix the run config first: %1").arg(form_->first_error()), true);
    return;
  }
  RunRequest req{form_->config(), form_->config_path(), {}, topology_.to_json()};
  run_.reset();
  if (topology_.multi_process()) {
    run_ =
        std::make_unique<LaunchedRun>(ctx_, req, topology_.process_count(), topology_.hostfile());
    run_id_.clear();
  } else {
    auto embedded = std::make_unique<EmbeddedRun>(ctx_, req);
    run_id_ = embedded->run_id();
    run_ = std::move(embedded);
  }
  connect(run_.get(), &RunController::events, this, &TrainView::on_events);
  connect(run_.get(), &RunController::output, this, &TrainView::log_line);
  connect(run_.get(), &RunController::finished, this, &TrainView::on_finished);
  connect(run_.get(), &RunController::restarted, this,
          [this](const QString& run, qint64 step, double unix_s, const QString& cause) {
            // Pending events first: the marker lands after the points before it.
            dashboard_->mark_restart(run, step, unix_s - dashboard_->start_unix_s(run), cause);
            set_status(tr("Restarting from the newest checkpoint: %1").arg(cause));
          });
  connect(run_.get(), &RunController::replaced, this,
          [this](const QString& run, qint64 step, double unix_s, int rank, const QString& cause) {
            dashboard_->mark_attempt_end(run, step, unix_s - dashboard_->start_unix_s(run),
                                         tr("worker %1 replaced: %2").arg(rank).arg(cause));
            set_status(tr("Worker %1 replaced; the job goes on: %2").arg(rank).arg(cause));
          });
  connect(run_.get(), &RunController::rescaled, this,
          [this](const QString& run, qint64 step, double unix_s, int from, int to,
                 const QString& cause) {
            dashboard_->mark_attempt_end(
                run, step, unix_s - dashboard_->start_unix_s(run),
                tr("%1 \u2192 %2 workers: %3").arg(from).arg(to).arg(cause));
            set_status(tr("Going on with %1 worker(s): %2").arg(to).arg(cause));
          });
  connect(run_.get(), &RunController::ranks, ranks_, &RanksPanel::set_ranks);
  connect(run_.get(), &RunController::ranks_note, ranks_, &RanksPanel::set_note);
  ranks_->reset_phases();
  if (topology_.multi_process()) {
    ranks_->clear(tr("Starting %1 rank(s)...").arg(topology_.process_count()));
  } else {
    ranks_->clear(tr("This run trains in the studio's process (threads): it has no ranks."));
  }
  dashboard_->clear();
  total_steps_ = start_step_ = 0;
  progress_->setValue(0);
  progress_->setFormat(tr("starting..."));
  clock_.start();
  start_->setEnabled(false);
  start_button_->setEnabled(false);
  stop_->setEnabled(true);
  stop_button_->setEnabled(true);
  set_status(tr("Starting %1...").arg(topology_.strategy()));
  log_line(tr("--- starting %1 (%2)")
               .arg(form_->config().value("name", std::string()).c_str(), topology_.strategy()));
  run_->start();
  if (!run_id_.isEmpty()) Q_EMIT run_started(run_id_);
}

void TrainView::stop() {
  if (!running()) return;
  set_status(tr("Stopping at the next step..."));
  run_->stop();
}

void TrainView::on_events(const std::vector<Event>& batch) {
  dashboard_->add_events(batch);
  // The newest figure per link, once per batch: the canvas is coloured at
  // the pump's pace, not per event. A link's bandwidth figure wins over its
  // eager one (latency-bound) of the same batch.
  struct Figure {
    double gbps = 0;
    bool estimated = false, eager = false;
  };
  std::map<std::pair<int, int>, Figure> links;
  for (const Event& ev : batch) {
    if (const auto* s = std::get_if<RunStartEvent>(&ev)) {
      if (run_id_.isEmpty()) {
        run_id_ = QString::fromStdString(s->run);
        Q_EMIT run_started(run_id_);
      }
      total_steps_ = s->total_steps;
      start_step_ = s->start_step;
      set_status(
          tr("Training %1: %2, %3 replica(s), %4")
              .arg(QString::fromStdString(s->name), QString::fromStdString(s->strategy))
              .arg(s->replicas)
              .arg(QString::fromStdString(s->communication.empty() ? s->model : s->communication)));
    } else if (const auto* s = std::get_if<StepEvent>(&ev)) {
      ranks_->take_step(*s);
      if (s->rank != 0 || total_steps_ <= 0) continue;
      const double done = static_cast<double>(s->step - start_step_);
      const double left = static_cast<double>(total_steps_ - s->step);
      const double elapsed = clock_.elapsed() / 1000.0;
      progress_->setValue(static_cast<int>(1000.0 * s->step / total_steps_));
      progress_->setFormat(tr("step %1 / %2 - loss %3 - ETA %4")
                               .arg(s->step)
                               .arg(total_steps_)
                               .arg(s->loss, 0, 'f', 4)
                               .arg(done > 0 ? mmss(elapsed / done * left) : QStringLiteral("?")));
    } else if (const auto* l = std::get_if<LogEvent>(&ev)) {
      log_line(QStringLiteral("[%1] %2").arg(log_level_name(l->level),
                                             QString::fromStdString(l->message)));
    } else if (const auto* e = std::get_if<EpochEvent>(&ev)) {
      QString line = tr("epoch %1: train loss %2, accuracy %3")
                         .arg(e->epoch)
                         .arg(e->train_loss, 0, 'f', 4)
                         .arg(e->train_accuracy, 0, 'f', 4);
      if (e->has_validation) {
        line += tr("; validation loss %1, accuracy %2")
                    .arg(e->val_loss, 0, 'f', 4)
                    .arg(e->val_accuracy, 0, 'f', 4);
      }
      log_line(line);
    } else if (const auto* c = std::get_if<CheckpointEvent>(&ev)) {
      log_line(tr("checkpoint at step %1: %2").arg(c->step).arg(QString::fromStdString(c->path)));
    } else if (const auto* g = std::get_if<DeviceEvent>(&ev)) {
      Q_EMIT device_figures(QString::fromStdString(g->device), g->utilization_pct,
                            g->memory_used_mib, g->memory_total_mib, g->emulated);
    } else if (const auto* k = std::get_if<LinkEvent>(&ev)) {
      const auto it = links.find({k->src, k->dst});
      if (!k->eager || it == links.end() || it->second.eager) {
        links[{k->src, k->dst}] = {k->bandwidth_gbps, k->estimated, k->eager};
      }
    }
  }
  for (const auto& [link, f] : links) {
    Q_EMIT link_bandwidth(link.first, link.second, f.gbps, f.estimated, f.eager);
  }
}

void TrainView::on_finished(const QString& status, const QString& error) {
  start_->setEnabled(form_->valid());
  start_button_->setEnabled(form_->valid());
  stop_->setEnabled(false);
  stop_button_->setEnabled(false);
  dashboard_->replot_now();
  if (status == QLatin1String("completed")) {
    progress_->setValue(1000);
    progress_->setFormat(tr("done in %1").arg(mmss(clock_.elapsed() / 1000.0)));
    set_status(tr("Run %1 completed").arg(run_id_));
  } else if (status == QLatin1String("interrupted")) {
    progress_->setFormat(tr("stopped"));
    set_status(tr("Run %1 stopped (interrupted; its last checkpoint can resume it)").arg(run_id_));
  } else {
    progress_->setFormat(tr("failed"));
    set_status(tr("Run failed: %1").arg(error.isEmpty() ? tr("see the log") : error), true);
  }
  if (!error.isEmpty()) log_line(tr("error: %1").arg(error));
  log_line(tr("--- %1").arg(status));
  Q_EMIT run_finished(run_id_, status);
}

bool TrainView::confirm_close() {
  if (!running()) return true;
  const auto answer = QMessageBox::question(this, tr("A run is in progress"),
                                            tr("Stop the run and quit? It ends interrupted."));
  if (answer != QMessageBox::Yes) return false;
  run_->stop();
  run_.reset();  // joins the worker / ends mpirun
  return true;
}

}  // namespace baton::ui
