#include "train/run_form.h"

#include <baton/core/config.h>
#include <baton/train/run_config.h>

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

namespace baton::ui {
namespace {

// "64, 128,10" -> [64, 128, 10]; false on anything else.
bool parse_layers(const QString& text, nlohmann::json* out) {
  nlohmann::json a = nlohmann::json::array();
  for (const QString& part : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    bool ok = false;
    const int v = part.trimmed().toInt(&ok);
    if (!ok || v < 1) return false;
    a.push_back(v);
  }
  if (a.size() < 2) return false;
  *out = a;
  return true;
}

QString layers_text(const nlohmann::json& a) {
  QStringList parts;
  if (a.is_array()) {
    for (const auto& v : a) parts << QString::fromStdString(v.dump());
  }
  return parts.join(QStringLiteral(", "));
}

}  // namespace

RunForm::RunForm(const StudioContext& ctx, QWidget* parent) : QWidget(parent), ctx_(ctx) {
  auto* form = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  auto add = [&](const QString& label, QWidget* field, const QString& key) {
    auto* box = new QVBoxLayout;
    box->setSpacing(1);
    box->addWidget(field);
    box->addWidget(error_label(key));
    form->addRow(label, box);
  };

  auto* source_row = new QWidget;
  auto* sr = new QHBoxLayout(source_row);
  sr->setContentsMargins(0, 0, 0, 0);
  examples_ = new QComboBox;
  examples_->setObjectName(QStringLiteral("examples"));
  const QDir ex(ctx_.examples_dir);
  for (const QString& f : ex.entryList({QStringLiteral("*.json")}, QDir::Files, QDir::Name)) {
    examples_->addItem(QFileInfo(f).completeBaseName(), ex.filePath(f));
  }
  auto* open = new QPushButton(tr("Open..."));
  sr->addWidget(examples_, 1);
  sr->addWidget(open);
  source_ = new QLabel;
  source_->setWordWrap(true);
  source_->setForegroundRole(QPalette::PlaceholderText);
  auto* source_box = new QVBoxLayout;
  source_box->addWidget(source_row);
  source_box->addWidget(source_);
  source_box->addWidget(error_label(QStringLiteral("form")));
  form->addRow(tr("Config"), source_box);

  name_ = new QLineEdit;
  name_->setObjectName(QStringLiteral("name"));
  add(tr("Name"), name_, QStringLiteral("name"));
  layers_ = new QLineEdit;
  layers_->setObjectName(QStringLiteral("layers"));
  layers_->setToolTip(tr("MLP widths, input first: 64, 128, 128, 10"));
  add(tr("Model (MLP)"), layers_, QStringLiteral("model"));
  activation_ = new QComboBox;
  activation_->setObjectName(QStringLiteral("activation"));
  activation_->addItems({QStringLiteral("relu"), QStringLiteral("gelu"), QStringLiteral("tanh"),
                         QStringLiteral("none")});
  form->addRow(tr("Activation"), activation_);
  dataset_ = new QLabel;
  dataset_->setWordWrap(true);
  add(tr("Dataset"), dataset_, QStringLiteral("data"));
  batch_ = new QSpinBox;
  batch_->setObjectName(QStringLiteral("globalBatch"));
  batch_->setRange(1, 1 << 24);  // the engine's range
  per_replica_ = new QLabel;
  per_replica_->setForegroundRole(QPalette::PlaceholderText);
  auto* batch_box = new QVBoxLayout;
  batch_box->setSpacing(1);
  batch_box->addWidget(batch_);
  batch_box->addWidget(per_replica_);
  batch_box->addWidget(error_label(QStringLiteral("batch")));
  form->addRow(tr("Global batch"), batch_box);
  epochs_ = new QSpinBox;
  epochs_->setObjectName(QStringLiteral("epochs"));
  epochs_->setRange(0, 1000000);
  add(tr("Epochs"), epochs_, QStringLiteral("epochs"));
  optimizer_ = new QComboBox;
  optimizer_->setObjectName(QStringLiteral("optimizer"));
  optimizer_->addItems({QStringLiteral("sgd"), QStringLiteral("adam"), QStringLiteral("adamw")});
  add(tr("Optimizer"), optimizer_, QStringLiteral("optimizer"));
  lr_ = new QLineEdit;
  lr_->setObjectName(QStringLiteral("learningRate"));
  add(tr("Learning rate"), lr_, QStringLiteral("lr"));
  ckpt_epoch_ = new QCheckBox(tr("every epoch"));
  ckpt_keep_ = new QSpinBox;
  ckpt_keep_->setRange(0, 1000);
  ckpt_keep_->setPrefix(tr("keep "));
  auto* ck = new QWidget;
  auto* ckl = new QHBoxLayout(ck);
  ckl->setContentsMargins(0, 0, 0, 0);
  ckl->addWidget(ckpt_epoch_);
  ckl->addWidget(ckpt_keep_);
  ckl->addStretch(1);
  add(tr("Checkpoints"), ck, QStringLiteral("checkpoint"));
  strategy_label_ = new QLabel;
  strategy_label_->setObjectName(QStringLiteral("strategyLabel"));
  strategy_label_->setWordWrap(true);
  strategy_pick_ = new QWidget;
  auto* pick = new QHBoxLayout(strategy_pick_);
  pick->setContentsMargins(0, 0, 0, 0);
  auto* use_config = new QPushButton(tr("Use the config's"));
  use_config->setObjectName(QStringLiteral("useConfigStrategy"));
  auto* use_cluster = new QPushButton(tr("Use the Cluster view's"));
  use_cluster->setObjectName(QStringLiteral("useClusterStrategy"));
  pick->addWidget(use_config);
  pick->addWidget(use_cluster);
  pick->addStretch(1);
  strategy_pick_->hide();
  auto* strategy_box = new QVBoxLayout;
  strategy_box->setSpacing(1);
  strategy_box->addWidget(strategy_label_);
  strategy_box->addWidget(strategy_pick_);
  strategy_box->addWidget(error_label(QStringLiteral("strategy")));
  form->addRow(tr("Strategy"), strategy_box);
  connect(use_config, &QPushButton::clicked, this, &RunForm::use_config_strategy);
  connect(use_cluster, &QPushButton::clicked, this, &RunForm::use_cluster_strategy);

  auto* outer = new QVBoxLayout(this);
  outer->addLayout(form);
  outer->addStretch(1);

  for (auto* e : {name_, layers_, lr_})
    connect(e, &QLineEdit::textChanged, this, &RunForm::validate);
  for (auto* s : {batch_, epochs_, ckpt_keep_})
    connect(s, &QSpinBox::valueChanged, this, &RunForm::validate);
  for (auto* c : {activation_, optimizer_})
    connect(c, &QComboBox::currentIndexChanged, this, &RunForm::validate);
  connect(ckpt_epoch_, &QCheckBox::toggled, this, &RunForm::validate);
  connect(examples_, &QComboBox::activated, this, [this](int i) {
    QString error;
    if (!load(examples_->itemData(i).toString(), &error)) {
      error_labels_[QStringLiteral("form")]->setText(error);
      error_labels_[QStringLiteral("form")]->show();
    }
  });
  connect(open, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("Open a run config"), ctx_.examples_dir,
                                                   tr("Run configs (*.json)"));
    QString error;
    if (!f.isEmpty() && !load(f, &error)) {
      error_labels_[QStringLiteral("form")]->setText(error);
      error_labels_[QStringLiteral("form")]->show();
    }
  });

  // The embedded default: the digits example, ready to train.
  const int digits = examples_->findText(QStringLiteral("digits"));
  if (digits >= 0) {
    examples_->setCurrentIndex(digits);
    QString error;
    load(examples_->itemData(digits).toString(), &error);
  }
}

QLabel* RunForm::error_label(const QString& field) {
  auto* l = new QLabel;
  l->setObjectName(QStringLiteral("error_") + field);
  l->setWordWrap(true);
  QPalette p = l->palette();
  p.setColor(QPalette::WindowText, QColor(0xd0, 0x30, 0x30));
  l->setPalette(p);
  l->hide();
  error_labels_.insert(field, l);
  return l;
}

bool RunForm::load(const QString& path, QString* error) {
  nlohmann::json doc;
  try {
    doc = read_json_file(path.toStdString());
    (void)parse_run_config(doc, path.toStdString());
  } catch (const std::exception& e) {
    *error = QString::fromUtf8(e.what());
    return false;
  }
  path_ = path;
  base_ = doc;
  strategy_from_ = base_.contains("strategy") ? StrategySource::kConfig : StrategySource::kCluster;
  source_->setText(QDir::toNativeSeparators(path));
  error_labels_[QStringLiteral("form")]->hide();
  fill_from_base();
  Q_EMIT config_loaded();
  return true;
}

namespace {
const char* optimizer_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdamW:
      return "adamw";
    default:
      return "adam";
  }
}
}  // namespace

void RunForm::fill_from_base() {
  filling_ = true;
  // The engine's reading of the file: its values, its defaults where the
  // file says nothing (load() checked that it parses).
  RunConfig rc;
  try {
    rc = parse_run_config(base_, path_.toStdString());
  } catch (const std::exception&) {
  }
  name_->setText(QString::fromStdString(rc.name));
  const nlohmann::json model = base_.value("model", nlohmann::json::object());
  layers_->setText(layers_text(model.value("layers", nlohmann::json::array())));
  // The MLP plugin's default activation; a value the combo lacks is added
  // as it is (the parser then names it if it is wrong).
  const QString act =
      QString::fromStdString(model.contains("activation") && model["activation"].is_string()
                                 ? model["activation"].get<std::string>()
                                 : std::string("relu"));
  if (activation_->findText(act) < 0) activation_->addItem(act);
  activation_->setCurrentText(act);
  const nlohmann::json data = base_.value("data", nlohmann::json::object());
  const nlohmann::json train = data.value("train", nlohmann::json::object());
  QString ds = QString::fromStdString(train.value("type", std::string("?")));
  if (train.contains("path"))
    ds += QStringLiteral(": ") + QString::fromStdString(train["path"].dump());
  dataset_->setText(ds);
  batch_->setValue(static_cast<int>(std::min<int64_t>(rc.global_batch, batch_->maximum())));
  epochs_->setValue(static_cast<int>(std::min<int64_t>(rc.epochs, epochs_->maximum())));
  optimizer_->setCurrentText(QString::fromLatin1(optimizer_name(rc.optimizer.kind)));
  lr_->setText(QString::number(rc.optimizer.lr, 'g', 6));
  ckpt_epoch_->setChecked(rc.checkpoint.every_epoch);
  ckpt_keep_->setValue(rc.checkpoint.keep);
  shown_ = Shown{name_->text(),
                 layers_->text(),
                 activation_->currentText(),
                 optimizer_->currentText(),
                 lr_->text(),
                 batch_->value(),
                 epochs_->value(),
                 ckpt_keep_->value(),
                 ckpt_epoch_->isChecked()};
  filling_ = false;
  update_strategy_label();
  validate();
}

void RunForm::set_strategy(const nlohmann::json& strategy, const QString& description,
                           int replicas) {
  strategy_ = strategy;
  cluster_description_ = description;
  replicas_ = std::max(1, replicas);
  update_strategy_label();
  validate();
}

bool RunForm::strategy_conflict() const {
  if (strategy_from_ != StrategySource::kConfig || !base_.contains("strategy")) return false;
  const nlohmann::json& mine = base_["strategy"];
  const std::string type = mine.is_object() ? mine.value("type", std::string("one_device")) : "";
  return type != strategy_.value("type", std::string("one_device"));
}

void RunForm::update_strategy_label() {
  const bool from_config = strategy_from_ == StrategySource::kConfig && base_.contains("strategy");
  const std::string type = from_config && base_["strategy"].is_object()
                               ? base_["strategy"].value("type", std::string("one_device"))
                               : std::string();
  if (!from_config) {
    strategy_label_->setText(cluster_description_ + tr(" (from the Cluster view)"));
  } else if (strategy_conflict()) {
    strategy_label_->setText(tr("The config says %1; the Cluster view says %2. Pick one:")
                                 .arg(QString::fromStdString(type), cluster_description_));
  } else {
    strategy_label_->setText(QString::fromStdString(type) + tr(" (from the config)"));
  }
  strategy_pick_->setVisible(strategy_conflict());
}

void RunForm::use_cluster_strategy() {
  strategy_from_ = StrategySource::kCluster;
  update_strategy_label();
  validate();
}

void RunForm::use_config_strategy() {
  strategy_from_ = StrategySource::kConfig;
  if (base_.contains("strategy") && base_["strategy"].is_object()) {
    Q_EMIT strategy_adopted(
        QString::fromStdString(base_["strategy"].value("type", std::string("one_device"))));
  }
  update_strategy_label();
  validate();
}

nlohmann::json RunForm::config() const {
  nlohmann::json doc = base_;
  // Only what the user changed; the rest is the file's, key for key.
  if (name_->text() != shown_.name) doc["name"] = name_->text().toStdString();
  if (layers_->text() != shown_.layers) {
    nlohmann::json layers;
    if (parse_layers(layers_->text(), &layers)) {
      doc["model"]["layers"] = layers;
    } else {
      doc["model"]["layers"] = layers_->text().toStdString();  // the parser names it
    }
  }
  if (activation_->currentText() != shown_.activation) {
    doc["model"]["activation"] = activation_->currentText().toStdString();
  }
  if (batch_->value() != shown_.batch) doc["train"]["global_batch_size"] = batch_->value();
  if (epochs_->value() != shown_.epochs) doc["train"]["epochs"] = epochs_->value();
  if (optimizer_->currentText() != shown_.optimizer) {
    doc["optimizer"]["type"] = optimizer_->currentText().toStdString();
  }
  if (lr_->text() != shown_.lr) {
    bool ok = false;
    const double lr = lr_->text().toDouble(&ok);
    if (ok) {
      doc["optimizer"]["lr"] = lr;
    } else {
      doc["optimizer"]["lr"] = lr_->text().toStdString();
    }
  }
  if (ckpt_epoch_->isChecked() != shown_.every_epoch) {
    doc["checkpoint"]["every_epoch"] = ckpt_epoch_->isChecked();
  }
  if (ckpt_keep_->value() != shown_.keep) doc["checkpoint"]["keep"] = ckpt_keep_->value();
  if (strategy_from_ == StrategySource::kCluster || !base_.contains("strategy")) {
    doc["strategy"] = strategy_;
  }
  return doc;
}

QString RunForm::field_for(const std::string& message) const {
  // "<file>: <key.path>: <what>" -> the key path's field.
  const QString m = QString::fromStdString(message);
  const QString file = path_.isEmpty() ? QString() : path_ + QStringLiteral(": ");
  const QString rest = m.startsWith(file) ? m.mid(file.size()) : m;
  const QString key = rest.section(QStringLiteral(": "), 0, 0);
  if (key.startsWith(QLatin1String("name"))) return QStringLiteral("name");
  if (key.startsWith(QLatin1String("model"))) return QStringLiteral("model");
  if (key.startsWith(QLatin1String("data"))) return QStringLiteral("data");
  if (key.startsWith(QLatin1String("train.global_batch"))) return QStringLiteral("batch");
  if (key.startsWith(QLatin1String("train.epochs"))) return QStringLiteral("epochs");
  if (key.startsWith(QLatin1String("optimizer.lr"))) return QStringLiteral("lr");
  if (key.startsWith(QLatin1String("optimizer"))) return QStringLiteral("optimizer");
  if (key.startsWith(QLatin1String("checkpoint"))) return QStringLiteral("checkpoint");
  if (key.startsWith(QLatin1String("strategy"))) return QStringLiteral("strategy");
  return QStringLiteral("form");
}

void RunForm::validate() {
  if (filling_) return;
  const bool was = valid();
  errors_.clear();
  nlohmann::json layers;
  if (!parse_layers(layers_->text(), &layers)) {
    errors_.insert(QStringLiteral("model"),
                   tr("expected at least two widths >= 1, separated by commas (64, 128, 10)"));
  }
  bool lr_ok = false;
  lr_->text().toDouble(&lr_ok);
  if (!lr_ok) errors_.insert(QStringLiteral("lr"), tr("expected a number, e.g. 0.001"));
  if (strategy_conflict()) {
    errors_.insert(QStringLiteral("strategy"),
                   tr("the config and the Cluster view name different strategies: pick one"));
  }
  if (errors_.isEmpty()) {
    try {
      const RunConfig rc = parse_run_config(config(), path_.toStdString());
      (void)rc;
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      const QString file = path_ + QStringLiteral(": ");
      QString text = QString::fromStdString(msg);
      if (text.startsWith(file)) text = text.mid(file.size());
      errors_.insert(field_for(msg), text);
    }
  }
  for (auto it = error_labels_.begin(); it != error_labels_.end(); ++it) {
    const QString text = errors_.value(it.key());
    it.value()->setText(text);
    it.value()->setVisible(!text.isEmpty());
  }
  // The per-replica share of the global batch, by the strategy's rule.
  int replicas = replicas_;
  if (strategy_from_ == StrategySource::kConfig && base_.contains("strategy") &&
      base_["strategy"].is_object()) {
    // The config's strategy: its replicas (threads), one for one_device;
    // multi-process strategies take the Cluster view's processes.
    const nlohmann::json& s = base_["strategy"];
    if (s.value("type", std::string("one_device")) == "one_device") {
      replicas = 1;
    } else if (s.contains("replicas") && s["replicas"].is_number_integer()) {
      replicas = std::max(1, s["replicas"].get<int>());
    }
  }
  const int global = batch_->value();
  per_replica_->setText(
      replicas > 1
          ? tr("%1 per replica (%2 replicas%3)")
                .arg(global / replicas)
                .arg(replicas)
                .arg(global % replicas ? tr(", the first %1 take one more").arg(global % replicas)
                                       : QString())
          : QString());
  per_replica_->setVisible(replicas > 1);
  if (was != valid()) Q_EMIT validity_changed(valid());
}

QString RunForm::first_error() const {
  for (const char* k : {"form", "name", "model", "data", "batch", "epochs", "optimizer", "lr",
                        "checkpoint", "strategy"}) {
    const QString v = errors_.value(QString::fromLatin1(k));
    if (!v.isEmpty()) return v;
  }
  return {};
}

}  // namespace baton::ui
