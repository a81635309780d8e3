#include "cluster/cluster_panel.h"

#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QUndoStack>
#include <QVBoxLayout>

#include "cluster/topology_commands.h"
#include "cluster/topology_items.h"
#include "cluster/topology_model.h"

namespace baton::ui {
namespace {

QString strategy_title(const QString& s) {
  if (s == QLatin1String("one_device")) return QObject::tr("OneDevice");
  if (s == QLatin1String("mirrored")) return QObject::tr("Mirrored");
  if (s == QLatin1String("central_storage")) return QObject::tr("CentralStorage");
  if (s == QLatin1String("multi_worker_mirrored")) return QObject::tr("MultiWorkerMirrored");
  if (s == QLatin1String("parameter_server")) return QObject::tr("ParameterServer");
  return QObject::tr("TPU (unavailable)");
}

const TaskRole kRoles[] = {TaskRole::kChief, TaskRole::kWorker, TaskRole::kPs};

}  // namespace

ClusterPanel::ClusterPanel(TopologyModel& model, QUndoStack& undo, QWidget* parent)
    : QWidget(parent), model_(model), undo_(undo) {
  auto* col = new QVBoxLayout(this);
  col->setContentsMargins(6, 6, 6, 6);

  auto* strat = new QGroupBox(tr("Strategy"));
  auto* form = new QFormLayout(strat);
  strategy_ = new QComboBox;
  strategy_->setObjectName(QStringLiteral("strategy"));
  for (const QString& s : TopologyModel::strategies()) strategy_->addItem(strategy_title(s), s);
  if (auto* m = qobject_cast<QStandardItemModel*>(strategy_->model())) {
    const int tpu = strategy_->findData(QStringLiteral("tpu"));
    m->item(tpu)->setEnabled(false);
    strategy_->setItemData(tpu, TopologyModel::tpu_unavailable_reason(), Qt::ToolTipRole);
  }
  form->addRow(tr("Type"), strategy_);
  ps_mode_ = new QComboBox;
  ps_mode_->addItem(tr("async"), QStringLiteral("async"));
  ps_mode_->addItem(tr("sync"), QStringLiteral("sync"));
  ps_mode_label_ = new QLabel(tr("Updates"));
  form->addRow(ps_mode_label_, ps_mode_);
  auto* tpu_note = new QLabel(TopologyModel::tpu_unavailable_reason());
  tpu_note->setWordWrap(true);
  tpu_note->setForegroundRole(QPalette::PlaceholderText);
  form->addRow(tpu_note);
  counts_ = new QLabel;
  counts_->setObjectName(QStringLiteral("replicaCount"));
  form->addRow(tr("Replicas"), counts_);
  batch_ = new QSpinBox;
  batch_->setRange(1, 1 << 24);
  batch_->setValue(64);
  batch_->setObjectName(QStringLiteral("globalBatch"));
  form->addRow(tr("Global batch"), batch_);
  per_replica_ = new QLabel;
  per_replica_->setObjectName(QStringLiteral("perReplicaBatch"));
  per_replica_->setWordWrap(true);
  form->addRow(tr("Per replica"), per_replica_);
  col->addWidget(strat);

  host_box_ = new QGroupBox(tr("Selected host"));
  auto* hform = new QFormLayout(host_box_);
  name_ = new QLineEdit;
  port_ = new QSpinBox;
  port_->setRange(1, 65535);
  role_ = new QComboBox;
  for (TaskRole r : kRoles) role_->addItem(QString::fromLatin1(baton::to_string(r)));
  hform->addRow(tr("Name"), name_);
  hform->addRow(tr("Port"), port_);
  hform->addRow(tr("Role"), role_);
  auto* dev_row = new QHBoxLayout;
  auto* add_cpu = new QPushButton(tr("+ CPU"));
  auto* add_gpu = new QPushButton(tr("+ GPU"));
  remove_device_ = new QPushButton(tr("- Device"));
  remove_device_->setToolTip(tr("Remove the selected device"));
  dev_row->addWidget(add_cpu);
  dev_row->addWidget(add_gpu);
  dev_row->addWidget(remove_device_);
  hform->addRow(tr("Devices"), dev_row);
  auto* host_row = new QHBoxLayout;
  auto* add_host = new QPushButton(tr("Add host..."));
  auto* remove_host = new QPushButton(tr("Remove host"));
  host_row->addWidget(add_host);
  host_row->addWidget(remove_host);
  hform->addRow(host_row);
  col->addWidget(host_box_);

  col->addWidget(new QLabel(tr("Ring order")));
  ring_ = new QListWidget;
  ring_->setObjectName(QStringLiteral("ringOrder"));
  col->addWidget(ring_, 1);
  QString legend = tr("Links: ");
  for (LinkClass c : {LinkClass::kNvLink, LinkClass::kPcie, LinkClass::kCrossNuma,
                      LinkClass::kNetwork, LinkClass::kSharedMemory}) {
    legend += QStringLiteral("<span style=\"color:%1\">\u25a0</span> %2 &nbsp;")
                  .arg(LinkItem::class_colour(c).name(), to_string(c).toHtmlEscaped());
  }
  legend += tr("<br>Live: red (slow) to green (fast), thicker when faster.");
  auto* legend_label = new QLabel(legend);
  legend_label->setWordWrap(true);
  col->addWidget(legend_label);
  col->addWidget(new QLabel(tr("Problems")));
  problems_ = new QListWidget;
  problems_->setObjectName(QStringLiteral("problems"));
  problems_->setWordWrap(true);
  col->addWidget(problems_, 1);

  connect(strategy_, &QComboBox::currentIndexChanged, this, [this] {
    const QString s = strategy_->currentData().toString();
    if (s != model_.strategy()) undo_.push(new SetStrategyCommand(model_, s, model_.ps_mode()));
  });
  connect(ps_mode_, &QComboBox::currentIndexChanged, this, [this] {
    const QString m = ps_mode_->currentData().toString();
    if (m != model_.ps_mode()) undo_.push(new SetStrategyCommand(model_, model_.strategy(), m));
  });
  connect(batch_, &QSpinBox::valueChanged, this, &ClusterPanel::refresh);
  connect(name_, &QLineEdit::editingFinished, this, &ClusterPanel::edit_name);
  connect(port_, &QSpinBox::editingFinished, this, [this] { edit_port(port_->value()); });
  connect(role_, &QComboBox::activated, this, &ClusterPanel::edit_role);
  connect(add_cpu, &QPushButton::clicked, this, [this] { add_device(QStringLiteral("cpu")); });
  connect(add_gpu, &QPushButton::clicked, this, [this] { add_device(QStringLiteral("cuda")); });
  connect(remove_device_, &QPushButton::clicked, this, &ClusterPanel::remove_device);
  connect(add_host, &QPushButton::clicked, this, &ClusterPanel::add_host_requested);
  connect(remove_host, &QPushButton::clicked, this, &ClusterPanel::remove_host);
  connect(&model_, &TopologyModel::structure_changed, this, &ClusterPanel::refresh);
  refresh();
}

void ClusterPanel::set_selection(int host_id, const QString& device) {
  host_id_ = host_id;
  device_ = device;
  refresh_host();
}

void ClusterPanel::refresh() {
  {
    const QSignalBlocker b1(strategy_), b2(ps_mode_);
    strategy_->setCurrentIndex(strategy_->findData(model_.strategy()));
    ps_mode_->setCurrentIndex(ps_mode_->findData(model_.ps_mode()));
  }
  const bool ps = model_.strategy() == QLatin1String("parameter_server");
  ps_mode_->setVisible(ps);
  ps_mode_label_->setVisible(ps);
  const int n = model_.replica_count();
  QString counts = QString::number(n);
  if (model_.multi_process()) {
    counts += tr(" in %1 process(es)").arg(model_.process_count());
    if (model_.strategy() == QLatin1String("multi_worker_mirrored"))
      counts += tr(", %1 per worker").arg(model_.replicas_per_worker());
  } else {
    counts += tr(" in this process");
  }
  counts_->setText(counts);

  const int64_t global = batch_->value();
  const auto shares = model_.per_replica_batch(global);
  if (shares.empty()) {
    per_replica_->setText(tr("no replicas"));
  } else if (global < n) {
    per_replica_->setText(tr("the global batch is smaller than the %1 replicas").arg(n));
  } else {
    const int64_t base = global / n, extra = global % n;
    per_replica_->setText(
        extra == 0 ? tr("%1 each").arg(base)
                   : tr("%1 each, the first %2 get %3").arg(base).arg(extra).arg(base + 1));
  }

  ring_->clear();
  const QStringList ring = model_.ring_order();
  for (int i = 0; i < ring.size(); ++i)
    ring_->addItem(QStringLiteral("%1  %2").arg(i).arg(ring[i]));

  problems_->clear();
  const QStringList problems = model_.problems();
  for (const QString& p : problems) {
    auto* item = new QListWidgetItem(QStringLiteral("\u26a0 ") + p);
    item->setForeground(QColor(0xd0, 0x30, 0x30));  // semantic: a problem
    problems_->addItem(item);
  }
  if (problems.isEmpty()) problems_->addItem(tr("\u2713 ready to run"));
  refresh_host();
}

void ClusterPanel::refresh_host() {
  const TopologyHost* h = model_.host(host_id_);
  host_box_->setEnabled(h != nullptr);
  remove_device_->setEnabled(h != nullptr && !device_.isEmpty());
  if (h == nullptr) {
    host_box_->setTitle(tr("Selected host (click one on the canvas)"));
    return;
  }
  host_box_->setTitle(device_.isEmpty() ? tr("Host %1").arg(h->name)
                                        : tr("Host %1, device %2").arg(h->name, device_));
  const QSignalBlocker b1(name_), b2(port_), b3(role_);
  if (!name_->hasFocus()) name_->setText(h->name);
  port_->setValue(h->port);
  for (int i = 0; i < 3; ++i) {
    if (kRoles[i] == h->role) role_->setCurrentIndex(i);
  }
}

void ClusterPanel::edit_name() {
  const QString name = name_->text().trimmed();
  push_host_edit(undo_, model_, host_id_, tr("rename host"), [&](TopologyHost& h) {
    if (!name.isEmpty()) h.name = name;
  });
}

void ClusterPanel::edit_port(int port) {
  push_host_edit(undo_, model_, host_id_, tr("change port"),
                 [&](TopologyHost& h) { h.port = port; });
}

void ClusterPanel::edit_role(int index) {
  if (index < 0 || index > 2) return;
  push_host_edit(undo_, model_, host_id_, tr("set role %1").arg(role_->itemText(index)),
                 [&](TopologyHost& h) { h.role = kRoles[index]; });
}

void ClusterPanel::add_device(const QString& kind) {
  push_host_edit(undo_, model_, host_id_, tr("add %1 device").arg(kind),
                 [&](TopologyHost& h) { TopologyModel::add_device_to(h, kind); });
}

void ClusterPanel::remove_device() {
  const QString device = device_;
  push_host_edit(undo_, model_, host_id_, tr("remove %1").arg(device),
                 [&](TopologyHost& h) { TopologyModel::remove_device_from(h, device); });
  device_.clear();
  refresh_host();
}

void ClusterPanel::remove_host() {
  if (model_.host(host_id_) == nullptr) return;
  undo_.push(new RemoveHostCommand(model_, host_id_));
  set_selection(0, {});
}

}  // namespace baton::ui
