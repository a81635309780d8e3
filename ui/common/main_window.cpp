#include "common/main_window.h"

#include <baton/discovery/discovery.h>

#include <QAction>
#include <QCloseEvent>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QKeySequence>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QPointer>
#include <QSettings>
#include <QStackedWidget>
#include <QStatusBar>
#include <QtConcurrent/QtConcurrentRun>

#include "cluster/cluster_view.h"
#include "cluster/prediction_panel.h"
#include "cluster/topology_model.h"
#include "history/history_view.h"
#include "train/run_form.h"
#include "train/train_view.h"

namespace baton::ui {

MainWindow::MainWindow(StudioContext ctx, QWidget* parent)
    : QMainWindow(parent), ctx_(std::move(ctx)) {
  setWindowTitle(tr("Baton Studio"));
  setWindowIcon(QIcon(QStringLiteral(":/baton/icons/baton.png")));
  topology_ = new TopologyModel(this);

  nav_ = new QListWidget;
  nav_->setObjectName(QStringLiteral("navigation"));
  nav_->addItems({tr("Cluster"), tr("Train"), tr("History")});
  nav_->setFixedWidth(nav_->fontMetrics().horizontalAdvance(QStringLiteral("History")) * 2 + 24);
  nav_->setFrameShape(QFrame::NoFrame);

  stack_ = new QStackedWidget;
  cluster_ = new ClusterView(ctx_, *topology_);
  train_ = new TrainView(ctx_, *topology_);
  history_ = new HistoryView(ctx_);
  stack_->addWidget(cluster_);
  stack_->addWidget(train_);
  stack_->addWidget(history_);
  connect(nav_, &QListWidget::currentRowChanged, stack_, &QStackedWidget::setCurrentIndex);
  // A live run's per-link bandwidth colours the topology canvas.
  // The Prediction tab predicts for the Train view's config.
  cluster_->prediction().set_config_source(
      [this] { return std::make_pair(train_->form().config(), train_->form().config_path()); });
  connect(train_, &TrainView::link_bandwidth, cluster_, &ClusterView::show_link_bandwidth);
  // A run's colours are its own: gone when the next starts or it ends.
  connect(train_, &TrainView::run_started, cluster_, &ClusterView::clear_link_bandwidth);
  connect(train_, &TrainView::device_figures, cluster_, &ClusterView::show_device_figures);
  connect(train_, &TrainView::run_started, cluster_, &ClusterView::clear_device_figures);
  connect(train_, &TrainView::run_finished, cluster_, &ClusterView::clear_link_bandwidth);
  connect(train_, &TrainView::run_finished, history_, &HistoryView::refresh);
  connect(history_, &HistoryView::replay_requested, this, [this] { show_view(View::kHistory); });

  auto* central = new QWidget;
  auto* row = new QHBoxLayout(central);
  row->setContentsMargins(0, 0, 0, 0);
  row->setSpacing(0);
  row->addWidget(nav_);
  row->addWidget(stack_, 1);
  setCentralWidget(central);

  devices_label_ = new QLabel(tr("Probing devices..."));
  devices_label_->setObjectName(QStringLiteral("deviceSummary"));
  statusBar()->addPermanentWidget(devices_label_);
  build_menus();

  QSettings settings;
  restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
  nav_->setCurrentRow(settings.value(QStringLiteral("window/view"), 1).toInt());
  if (!settings.contains(QStringLiteral("window/geometry"))) resize(1280, 820);
  probe_devices();
}

MainWindow::~MainWindow() = default;

void MainWindow::show_view(View v) { nav_->setCurrentRow(static_cast<int>(v)); }

MainWindow::View MainWindow::current_view() const {
  return static_cast<View>(stack_->currentIndex());
}

void MainWindow::build_menus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open topology..."), QKeySequence::Open, cluster_,
                  &ClusterView::open_topology);
  file->addAction(tr("&Save topology..."), QKeySequence::Save, cluster_,
                  &ClusterView::save_topology);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  edit->addAction(cluster_->undo_action());
  edit->addAction(cluster_->redo_action());

  QMenu* view = menuBar()->addMenu(tr("&View"));
  const QString names[] = {tr("&Cluster"), tr("&Train"), tr("&History")};
  for (int i = 0; i < 3; ++i) {
    QAction* a = view->addAction(names[i], this, [this, i] { show_view(static_cast<View>(i)); });
    a->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
  }

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  run->addAction(train_->start_action());
  run->addAction(train_->stop_action());
}

void MainWindow::probe_devices() {
  // hwloc and the GPU probe take a moment: off the GUI thread; the result
  // comes back to this (still alive) window through the watcher's signal.
  auto* watcher = new QFutureWatcher<QString>(this);
  connect(watcher, &QFutureWatcher<QString>::finished, this, [this, watcher] {
    devices_label_->setText(watcher->result());
    watcher->deleteLater();
  });
  const std::string cuda = default_cuda_library(ctx_.baton_exe.toStdString());
  watcher->setFuture(QtConcurrent::run([cuda]() -> QString {
    try {
      ProbeOptions opt;
      opt.cuda_library = cuda;
      const HostInfo host = probe_local_host(opt);
      QString text = QStringLiteral("%1: %2 CPU cores")
                         .arg(QString::fromStdString(host.hostname))
                         .arg(host.cpu_count());
      if (host.gpu_count() > 0) {
        text += QStringLiteral(", %1 GPU(s)").arg(host.gpu_count());
      } else {
        text += QStringLiteral(", no GPU (%1)").arg(QString::fromStdString(host.gpu_note));
      }
      return text + QStringLiteral(", %1 GiB")
                        .arg(static_cast<double>(host.memory_bytes) / (1 << 30), 0, 'f', 1);
    } catch (const std::exception& e) {
      return QStringLiteral("device probe failed: %1").arg(QString::fromUtf8(e.what()));
    }
  }));
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (!train_->confirm_close()) {
    event->ignore();
    return;
  }
  QSettings settings;
  settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
  settings.setValue(QStringLiteral("window/view"), stack_->currentIndex());
  event->accept();
}

}  // namespace baton::ui
