#include "cluster/cluster_view.h"

#include <baton/core/error.h>
#include <baton/discovery/discovery.h>

#include <QAction>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QFutureWatcher>
#include <QGraphicsView>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QPlainTextEdit>
#include <QProcess>
#include <QSaveFile>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QToolBar>
#include <QUndoStack>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <optional>

#include "cluster/cluster_panel.h"
#include "cluster/prediction_panel.h"
#include "cluster/topology_commands.h"
#include "cluster/topology_model.h"
#include "cluster/topology_scene.h"

namespace baton::ui {
namespace {

struct LocalProbe {
  std::optional<HostInfo> host;
  QString error;
};

}  // namespace

ClusterView::ClusterView(const StudioContext& ctx, TopologyModel& model, QWidget* parent)
    : QWidget(parent), ctx_(ctx), model_(model) {
  undo_stack_ = new QUndoStack(this);
  undo_ = undo_stack_->createUndoAction(this, tr("&Undo"));
  undo_->setShortcut(QKeySequence::Undo);
  redo_ = undo_stack_->createRedoAction(this, tr("&Redo"));
  redo_->setShortcut(QKeySequence::Redo);

  auto* col = new QVBoxLayout(this);
  col->setContentsMargins(0, 0, 0, 0);
  build_toolbar(col);
  message_ = new QLabel;
  message_->setObjectName(QStringLiteral("clusterMessage"));
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  message_->setContentsMargins(8, 4, 8, 4);
  message_->hide();
  col->addWidget(message_);

  scene_ = new TopologyScene(model_, this);
  canvas_ = new QGraphicsView(scene_);
  canvas_->setObjectName(QStringLiteral("topologyCanvas"));
  canvas_->setRenderHint(QPainter::Antialiasing);
  canvas_->setDragMode(QGraphicsView::RubberBandDrag);
  canvas_->setAlignment(Qt::AlignLeft | Qt::AlignTop);

  auto* preview = new QTabWidget;
  auto* tf_page = new QWidget;
  auto* tf_col = new QVBoxLayout(tf_page);
  task_ = new QComboBox;
  tf_text_ = new QPlainTextEdit;
  tf_text_->setReadOnly(true);
  tf_col->addWidget(task_);
  tf_col->addWidget(tf_text_);
  hostfile_text_ = new QPlainTextEdit;
  hostfile_text_->setReadOnly(true);
  strategy_text_ = new QPlainTextEdit;
  strategy_text_->setReadOnly(true);
  preview->addTab(tf_page, tr("TF_CONFIG"));
  preview->addTab(hostfile_text_, tr("Hostfile"));
  preview->addTab(strategy_text_, tr("Run config \"strategy\""));
  prediction_ = new PredictionPanel(ctx_, model_);
  preview->addTab(prediction_, tr("Prediction (modelled)"));
  preview_ = preview;

  auto* left = new QSplitter(Qt::Vertical);
  left->addWidget(canvas_);
  left->addWidget(preview);
  left->setStretchFactor(0, 3);
  left->setStretchFactor(1, 1);
  panel_ = new ClusterPanel(model_, *undo_stack_);
  panel_->setMinimumWidth(300);
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(left);
  split->addWidget(panel_);
  split->setStretchFactor(0, 1);
  col->addWidget(split, 1);

  connect(scene_, &TopologyScene::host_dragged, this,
          [this](int id, QPointF from, QPointF to, int drag) {
            undo_stack_->push(new MoveHostCommand(model_, id, from, to, drag));
          });
  connect(scene_, &QGraphicsScene::selectionChanged, this,
          [this] { panel_->set_selection(scene_->selected_host(), scene_->selected_device()); });
  connect(scene_, &TopologyScene::context_menu_requested, this, &ClusterView::show_context_menu);
  connect(panel_, &ClusterPanel::add_host_requested, this, &ClusterView::add_host);
  connect(&model_, &TopologyModel::structure_changed, this, &ClusterView::refresh_preview);
  connect(task_, &QComboBox::currentIndexChanged, this, &ClusterView::refresh_preview);
  refresh_preview();
  probe_this_host();
}

void ClusterView::show_prediction_tab() { preview_->setCurrentWidget(prediction_); }

ClusterView::~ClusterView() {
  // Nothing of this view may run once it goes: the probe's handlers are
  // disconnected before it is stopped.
  if (probe_process_) probe_process_->disconnect(this);
  cancel_probe();
}

void ClusterView::build_toolbar(QVBoxLayout* col) {
  auto* bar = new QToolBar;
  bar->setToolButtonStyle(Qt::ToolButtonTextOnly);
  bar->addAction(tr("Open..."), this, &ClusterView::open_topology);
  bar->addAction(tr("Save..."), this, &ClusterView::save_topology);
  bar->addSeparator();
  // Short words on the bar (the menu's actions say what they undo).
  QAction* undo = bar->addAction(tr("Undo"), undo_stack_, &QUndoStack::undo);
  QAction* redo = bar->addAction(tr("Redo"), undo_stack_, &QUndoStack::redo);
  undo->setEnabled(false);
  redo->setEnabled(false);
  connect(undo_stack_, &QUndoStack::canUndoChanged, undo, &QAction::setEnabled);
  connect(undo_stack_, &QUndoStack::canRedoChanged, redo, &QAction::setEnabled);
  bar->addSeparator();
  bar->addAction(tr("Add host..."), this, &ClusterView::add_host);
  QMenu* import = new QMenu(this);
  import->addAction(tr("Hostfile..."), this, &ClusterView::import_hostfile_dialog);
  import->addAction(tr("TF_CONFIG..."), this, &ClusterView::import_tf_config_dialog);
  QAction* imp = bar->addAction(tr("Import"));
  imp->setMenu(import);
  connect(imp, &QAction::triggered, this, &ClusterView::import_hostfile_dialog);
  probe_hosts_ =
      bar->addAction(tr("Probe hosts (mpirun)..."), this, &ClusterView::probe_hosts_dialog);
  cancel_probe_ = bar->addAction(tr("Cancel probe"), this, &ClusterView::cancel_probe);
  cancel_probe_->setEnabled(false);
  bar->addAction(tr("Probe this host"), this, &ClusterView::probe_this_host);
  bar->addSeparator();
  QMenu* exp = new QMenu(this);
  exp->addAction(tr("TF_CONFIG per task..."), this, &ClusterView::export_tf_configs_dialog);
  exp->addAction(tr("MPI hostfile..."), this, &ClusterView::export_hostfile_dialog);
  QAction* ex = bar->addAction(tr("Export"));
  ex->setMenu(exp);
  connect(ex, &QAction::triggered, this, &ClusterView::export_tf_configs_dialog);
  bar->addAction(tr("Fit"), this, [this] {
    canvas_->fitInView(scene_->itemsBoundingRect().adjusted(-20, -20, 20, 20), Qt::KeepAspectRatio);
  });
  col->addWidget(bar);
}

QString ClusterView::message() const {
  return message_->isVisible() ? message_->text() : QString();
}

void ClusterView::show_message(const QString& text, bool error) {
  message_->setText(text);
  message_->setVisible(!text.isEmpty());
  QPalette pal = palette();
  if (error) pal.setColor(QPalette::WindowText, QColor(0xd0, 0x30, 0x30));  // semantic: an error
  message_->setPalette(pal);
}

void ClusterView::show_link_bandwidth(int src, int dst, double gbps, bool estimated, bool eager) {
  scene_->show_link_bandwidth(src, dst, gbps, estimated, eager);
}

void ClusterView::clear_link_bandwidth() { scene_->clear_link_bandwidth(); }

void ClusterView::show_device_figures(const QString& device, double utilization_pct,
                                      double memory_used_mib, double memory_total_mib,
                                      bool emulated) {
  scene_->show_device_figures(device, utilization_pct, memory_used_mib, memory_total_mib, emulated);
}

void ClusterView::clear_device_figures() { scene_->clear_device_figures(); }

// ---- this host, off the GUI thread ----

void ClusterView::probe_this_host() {
  // A newer probe makes an older one's answer stale: it is dropped.
  const int job = ++local_probe_job_;
  auto* watcher = new QFutureWatcher<LocalProbe>(this);
  connect(watcher, &QFutureWatcher<LocalProbe>::finished, this, [this, watcher, job] {
    watcher->deleteLater();
    if (job != local_probe_job_) return;
    const LocalProbe r = watcher->result();
    if (!r.host) {
      show_message(tr("Probing this host failed: %1").arg(r.error), true);
      return;
    }
    if (model_.pristine()) {
      model_.set_local_host(*r.host);
      undo_stack_->clear();  // the default is the start, not a step
      return;
    }
    // The user has edited already: refresh this host's devices, as a step.
    for (const TopologyHost& h : model_.hosts()) {
      if (!h.local) continue;
      push_host_edit(*undo_stack_, model_, h.id, tr("probe this host"), [&](TopologyHost& x) {
        x.info = from_host_info(*r.host);
        x.probed = true;
      });
    }
  });
  const std::string cuda = default_cuda_library(ctx_.baton_exe.toStdString());
  watcher->setFuture(QtConcurrent::run([cuda]() -> LocalProbe {
    try {
      ProbeOptions opt;
      opt.cuda_library = cuda;
      return {probe_local_host(opt), {}};
    } catch (const std::exception& e) {
      return {std::nullopt, QString::fromUtf8(e.what())};
    }
  }));
}

// ---- more hosts ----

void ClusterView::add_host() {
  QDialog dlg(this);
  dlg.setWindowTitle(tr("Add host"));
  auto* form = new QFormLayout(&dlg);
  auto* name = new QLineEdit;
  name->setPlaceholderText(tr("node1, 10.0.0.5, ..."));
  auto* cpus = new QSpinBox;
  cpus->setRange(0, 1024);
  cpus->setValue(1);
  auto* gpus = new QSpinBox;
  gpus->setRange(0, 64);
  auto* role = new QComboBox;
  role->addItems({QStringLiteral("worker"), QStringLiteral("chief"), QStringLiteral("ps")});
  form->addRow(tr("Host name or address"), name);
  form->addRow(tr("CPU devices"), cpus);
  form->addRow(tr("GPU devices"), gpus);
  form->addRow(tr("Role"), role);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  form->addRow(buttons);
  connect(buttons, &QDialogButtonBox::accepted, &dlg, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, &dlg, &QDialog::reject);
  if (dlg.exec() != QDialog::Accepted || name->text().trimmed().isEmpty()) return;
  const TaskRole roles[] = {TaskRole::kWorker, TaskRole::kChief, TaskRole::kPs};
  auto* cmd =
      new AddHostCommand(model_, model_.make_host(name->text().trimmed(), cpus->value(),
                                                  gpus->value(), roles[role->currentIndex()]));
  undo_stack_->push(cmd);
  scene_->rebuild();
  scene_->select_host(cmd->host_id());
}

void ClusterView::open_topology() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open a topology"), QString(),
                                                    tr("Topology (*.json);;All files (*)"));
  if (!path.isEmpty()) open_topology_file(path);
}

void ClusterView::save_topology() {
  const QString path = QFileDialog::getSaveFileName(
      this, tr("Save the topology"), QStringLiteral("topology.json"), tr("Topology (*.json)"));
  if (!path.isEmpty()) save_topology_file(path);
}

void ClusterView::export_hostfile_dialog() {
  const QString path =
      QFileDialog::getSaveFileName(this, tr("Export an MPI hostfile"), QStringLiteral("hostfile"));
  if (!path.isEmpty()) export_hostfile(path);
}

void ClusterView::export_tf_configs_dialog() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Export TF_CONFIG per task to"));
  if (!dir.isEmpty()) export_tf_configs(dir);
}

// ---- preview and context menu ----

void ClusterView::refresh_preview() {
  const ClusterSpec spec = model_.cluster_spec();
  const QString keep = task_->currentText();
  {
    const QSignalBlocker block(task_);
    task_->clear();
    for (TaskRole role : {TaskRole::kChief, TaskRole::kWorker, TaskRole::kPs}) {
      for (int i = 0; i < static_cast<int>(spec.tasks(role).size()); ++i) {
        task_->addItem(
            QStringLiteral("%1 %2").arg(QString::fromLatin1(baton::to_string(role))).arg(i),
            QVariantList{static_cast<int>(role), i});
      }
    }
    const int at = task_->findText(keep);
    task_->setCurrentIndex(at >= 0 ? at : 0);
  }
  const QVariantList t = task_->currentData().toList();
  QString tf;
  if (t.size() == 2) {
    try {
      tf = QString::fromStdString(
          nlohmann::json::parse(model_.tf_config(static_cast<TaskRole>(t[0].toInt()), t[1].toInt()))
              .dump(2));
    } catch (const std::exception& e) {
      tf = QString::fromUtf8(e.what());
    }
  }
  tf_text_->setPlainText(tf);
  const std::string hf = model_.hostfile();
  hostfile_text_->setPlainText(
      hf.empty() ? tr("# not runnable yet: %1").arg(model_.problems().join(QStringLiteral("; ")))
                 : QString::fromStdString(hf));
  strategy_text_->setPlainText(QString::fromStdString(model_.strategy_json().dump(2)));
}

void ClusterView::show_context_menu(int host_id, const QString& device, QPoint screen_pos) {
  QMenu menu(this);
  if (host_id == 0) {
    menu.addAction(tr("Add host..."), this, &ClusterView::add_host);
  } else if (!device.isEmpty()) {
    menu.addAction(tr("Remove %1").arg(device), this, [this, host_id, device] {
      push_host_edit(*undo_stack_, model_, host_id, tr("remove %1").arg(device),
                     [&](TopologyHost& h) { TopologyModel::remove_device_from(h, device); });
    });
  } else {
    QMenu* roles = menu.addMenu(tr("Role"));
    for (TaskRole r : {TaskRole::kChief, TaskRole::kWorker, TaskRole::kPs}) {
      const QString name = QString::fromLatin1(baton::to_string(r));
      roles->addAction(name, this, [this, host_id, r, name] {
        push_host_edit(*undo_stack_, model_, host_id, tr("set role %1").arg(name),
                       [&](TopologyHost& h) { h.role = r; });
      });
    }
    for (const QString& kind : {QStringLiteral("cpu"), QStringLiteral("cuda")}) {
      menu.addAction(tr("Add %1 device").arg(kind), this, [this, host_id, kind] {
        push_host_edit(*undo_stack_, model_, host_id, tr("add %1 device").arg(kind),
                       [&](TopologyHost& h) { TopologyModel::add_device_to(h, kind); });
      });
    }
    menu.addAction(tr("Remove host"), this,
                   [this, host_id] { undo_stack_->push(new RemoveHostCommand(model_, host_id)); });
  }
  menu.exec(screen_pos);
}

}  // namespace baton::ui
