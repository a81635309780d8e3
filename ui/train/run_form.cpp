#include "train/run_form.h"

#include <baton/core/config.h>
#include <baton/core/error.h>
#include <baton/train/model_figures.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QStackedWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

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

// A row of `widgets`, left to right, then space.
QWidget* row_of(std::initializer_list<QWidget*> widgets) {
  auto* row = new QWidget;
  auto* l = new QHBoxLayout(row);
  l->setContentsMargins(0, 0, 0, 0);
  for (QWidget* w : widgets) l->addWidget(w);
  l->addStretch(1);
  return row;
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
  model_type_ = new QComboBox;
  model_type_->setObjectName(QStringLiteral("modelType"));
  model_type_->addItem(tr("MLP"), QStringLiteral("mlp"));
  model_type_->addItem(tr("GPT (language model)"), QStringLiteral("gpt"));
  // Each type's own fields, on a page of their own.
  model_pages_ = new QStackedWidget;
  auto* mlp_page = new QWidget;
  auto* mlp_form = new QFormLayout(mlp_page);
  mlp_form->setContentsMargins(0, 0, 0, 0);
  layers_ = new QLineEdit;
  layers_->setObjectName(QStringLiteral("layers"));
  layers_->setToolTip(tr("MLP widths, input first: 64, 128, 128, 10"));
  mlp_form->addRow(tr("Widths"), layers_);
  activation_ = new QComboBox;
  activation_->setObjectName(QStringLiteral("activation"));
  activation_->addItems({QStringLiteral("relu"), QStringLiteral("gelu"), QStringLiteral("tanh"),
                         QStringLiteral("none")});
  mlp_form->addRow(tr("Activation"), activation_);
  auto* gpt_page = new QWidget;
  auto* gpt_form = new QFormLayout(gpt_page);
  gpt_form->setContentsMargins(0, 0, 0, 0);
  auto spin = [](const char* name, int lo, int hi) {
    auto* s = new QSpinBox;
    s->setObjectName(QLatin1String(name));
    s->setRange(lo, hi);
    return s;
  };
  gpt_layers_ = spin("gptLayers", 1, 1024);
  gpt_heads_ = spin("gptHeads", 1, 1024);
  gpt_width_ = spin("gptWidth", 1, 1 << 16);
  gpt_dropout_ = new QDoubleSpinBox;
  gpt_dropout_->setObjectName(QStringLiteral("gptDropout"));
  gpt_dropout_->setRange(0.0, 0.95);
  gpt_dropout_->setSingleStep(0.05);
  gpt_form->addRow(tr("Layers"), gpt_layers_);
  gpt_form->addRow(tr("Heads"), gpt_heads_);
  gpt_form->addRow(tr("Width (d_model)"), gpt_width_);
  gpt_form->addRow(tr("Dropout"), gpt_dropout_);
  model_pages_->addWidget(mlp_page);
  model_pages_->addWidget(gpt_page);
  figures_ = new QLabel;
  figures_->setObjectName(QStringLiteral("modelFigures"));
  figures_->setWordWrap(true);
  figures_->setForegroundRole(QPalette::PlaceholderText);
  auto* model_box = new QVBoxLayout;
  model_box->setSpacing(2);
  model_box->addWidget(model_type_);
  model_box->addWidget(model_pages_);
  model_box->addWidget(figures_);
  model_box->addWidget(error_label(QStringLiteral("model")));
  form->addRow(tr("Model"), model_box);
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
  // A config that counts steps (train.steps) is run for that many steps,
  // whatever its epochs: the field is then the steps.
  steps_ = new QSpinBox;
  steps_->setObjectName(QStringLiteral("steps"));
  steps_->setRange(1, 1 << 30);
  steps_->setSuffix(tr(" steps"));
  auto* length = new QWidget;
  auto* ll = new QHBoxLayout(length);
  ll->setContentsMargins(0, 0, 0, 0);
  ll->addWidget(epochs_);
  ll->addWidget(steps_);
  add(tr("Length"), length, QStringLiteral("epochs"));
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
  add(tr("Checkpoints"), row_of({ckpt_epoch_, ckpt_keep_}), QStringLiteral("checkpoint"));
  strategy_label_ = new QLabel;
  strategy_label_->setObjectName(QStringLiteral("strategyLabel"));
  strategy_label_->setWordWrap(true);
  auto* use_config = new QPushButton(tr("Use the config's"));
  use_config->setObjectName(QStringLiteral("useConfigStrategy"));
  auto* use_cluster = new QPushButton(tr("Use the Cluster view's"));
  use_cluster->setObjectName(QStringLiteral("useClusterStrategy"));
  strategy_pick_ = row_of({use_config, use_cluster});
  strategy_pick_->hide();
  auto* strategy_box = new QVBoxLayout;
  strategy_box->setSpacing(1);
  strategy_box->addWidget(strategy_label_);
  strategy_box->addWidget(strategy_pick_);
  strategy_box->addWidget(error_label(QStringLiteral("strategy")));
  form->addRow(tr("Strategy"), strategy_box);
  connect(use_config, &QPushButton::clicked, this, &RunForm::use_config_strategy);
  connect(use_cluster, &QPushButton::clicked, this, &RunForm::use_cluster_strategy);
  // strategy.sharding: ZeRO's stages, for the strategies that shard.
  sharding_ = new QComboBox;
  sharding_->setObjectName(QStringLiteral("sharding"));
  sharding_->addItem(tr("none: every replica holds the whole model"), QStringLiteral("none"));
  sharding_->addItem(tr("optimizer: its state split (ZeRO-1)"), QStringLiteral("optimizer"));
  sharding_->addItem(tr("gradients: and the gradients (ZeRO-2)"), QStringLiteral("gradients"));
  sharding_->addItem(tr("parameters: and the values (ZeRO-3, FSDP)"), QStringLiteral("parameters"));
  apply_sharding_ = new QPushButton;
  apply_sharding_->setObjectName(QStringLiteral("applySharding"));
  apply_sharding_->hide();
  form->addRow(tr("Sharding"), row_of({sharding_, apply_sharding_}));
  connect(sharding_, &QComboBox::currentIndexChanged, this, &RunForm::validate);
  connect(apply_sharding_, &QPushButton::clicked, this, [this] {
    const int i = sharding_->findData(suggested_sharding_);
    if (i >= 0) sharding_->setCurrentIndex(i);
  });

  auto* outer = new QVBoxLayout(this);
  outer->addLayout(form);
  outer->addStretch(1);

  for (auto* e : {name_, layers_, lr_})
    connect(e, &QLineEdit::textChanged, this, &RunForm::validate);
  for (auto* s : {batch_, epochs_, steps_, ckpt_keep_, gpt_layers_, gpt_heads_, gpt_width_})
    connect(s, &QSpinBox::valueChanged, this, &RunForm::validate);
  connect(gpt_dropout_, &QDoubleSpinBox::valueChanged, this, &RunForm::validate);
  connect(model_type_, &QComboBox::currentIndexChanged, this, [this] {
    show_model_page();
    validate();
  });
  figures_timer_.setSingleShot(true);
  figures_timer_.setInterval(200);
  connect(&figures_timer_, &QTimer::timeout, this, &RunForm::update_figures);
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
  const QString type = QString::fromStdString(model.value("type", std::string("mlp")));
  if (model_type_->findData(type) < 0) model_type_->addItem(type, type);
  model_type_->setCurrentIndex(model_type_->findData(type));
  show_model_page();
  // The gpt plugin's defaults where the file says nothing.
  gpt_layers_->setValue(static_cast<int>(model.value("n_layer", int64_t{4})));
  gpt_heads_->setValue(static_cast<int>(model.value("n_head", int64_t{4})));
  gpt_width_->setValue(static_cast<int>(model.value("d_model", int64_t{128})));
  gpt_dropout_->setValue(model.value("dropout", 0.0));
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
  steps_->setValue(static_cast<int>(std::clamp<int64_t>(rc.max_steps, 1, steps_->maximum())));
  epochs_->setSuffix(tr(" epochs"));
  epochs_->setVisible(rc.max_steps == 0);
  steps_->setVisible(rc.max_steps > 0);
  optimizer_->setCurrentText(QString::fromLatin1(optimizer_name(rc.optimizer.kind)));
  lr_->setText(QString::number(rc.optimizer.lr, 'g', 6));
  ckpt_epoch_->setChecked(rc.checkpoint.every_epoch);
  ckpt_keep_->setValue(rc.checkpoint.keep);
  const QString sharding = QString::fromStdString(rc.strategy.sharding);
  sharding_->setCurrentIndex(std::max(0, sharding_->findData(sharding)));
  shown_ = Shown{name_->text(),
                 model_type_->currentData().toString(),
                 layers_->text(),
                 activation_->currentText(),
                 optimizer_->currentText(),
                 lr_->text(),
                 batch_->value(),
                 epochs_->value(),
                 steps_->value(),
                 ckpt_keep_->value(),
                 gpt_layers_->value(),
                 gpt_heads_->value(),
                 gpt_width_->value(),
                 gpt_dropout_->value(),
                 ckpt_epoch_->isChecked(),
                 sharding_->currentData().toString()};
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
  const std::string effective = effective_strategy_type();
  const bool shards = effective == "mirrored" || effective == "multi_worker_mirrored";
  sharding_->setEnabled(shards);
  sharding_->setToolTip(shards ? QString()
                               : tr("mirrored and multi_worker_mirrored shard; %1 does not")
                                     .arg(QString::fromStdString(effective)));
}

std::string RunForm::effective_strategy_type() const {
  const nlohmann::json& s = strategy_from_ == StrategySource::kConfig && base_.contains("strategy")
                                ? base_["strategy"]
                                : strategy_;
  return s.is_object() ? s.value("type", std::string("one_device")) : std::string("one_device");
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
  const QString type = model_type_->currentData().toString();
  if (type != shown_.model_type) {
    // Another kind of model: its own keys only (the file's were another's).
    doc["model"] = {{"type", type.toStdString()}};
  }
  if (type == QLatin1String("gpt")) {
    const bool fresh = type != shown_.model_type;
    if (fresh || gpt_layers_->value() != shown_.gpt_layers)
      doc["model"]["n_layer"] = gpt_layers_->value();
    if (fresh || gpt_heads_->value() != shown_.gpt_heads)
      doc["model"]["n_head"] = gpt_heads_->value();
    if (fresh || gpt_width_->value() != shown_.gpt_width)
      doc["model"]["d_model"] = gpt_width_->value();
    if (fresh || gpt_dropout_->value() != shown_.gpt_dropout) {
      doc["model"]["dropout"] = gpt_dropout_->value();
    }
  } else if (type == QLatin1String("mlp") && layers_->text() != shown_.layers) {
    nlohmann::json layers;
    if (parse_layers(layers_->text(), &layers)) {
      doc["model"]["layers"] = layers;
    } else {
      doc["model"]["layers"] = layers_->text().toStdString();  // the parser names it
    }
  }
  if (type == QLatin1String("mlp") && activation_->currentText() != shown_.activation) {
    doc["model"]["activation"] = activation_->currentText().toStdString();
  }
  if (batch_->value() != shown_.batch) doc["train"]["global_batch_size"] = batch_->value();
  if (epochs_->value() != shown_.epochs) doc["train"]["epochs"] = epochs_->value();
  if (steps_->value() != shown_.steps) doc["train"]["steps"] = steps_->value();
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
  // The sharding when the user picked one (or the Cluster view's strategy
  // replaced the file's, which had it), for a strategy that shards.
  const QString sharding = sharding_->currentData().toString();
  const std::string strategy = effective_strategy_type();
  if ((strategy == "mirrored" || strategy == "multi_worker_mirrored") &&
      doc["strategy"].is_object() &&
      (sharding != shown_.sharding ||
       (sharding != QLatin1String("none") && !doc["strategy"].contains("sharding")))) {
    doc["strategy"]["sharding"] = sharding.toStdString();
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
  if (key.startsWith(QLatin1String("train.epochs")) || key == QLatin1String("train.steps")) {
    return QStringLiteral("epochs");
  }
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
  const bool mlp = model_type_->currentData().toString() == QLatin1String("mlp");
  if (mlp && !parse_layers(layers_->text(), &layers)) {
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
  if (valid()) {
    figures_timer_.start();
  } else {
    ++figures_job_;  // a result for an older config is not shown
    figures_->clear();
  }
}

void RunForm::show_model_page() {
  const int page = model_type_->currentData().toString() == QLatin1String("gpt") ? 1 : 0;
  // The stack takes the shown page's height, not its tallest page's.
  for (int i = 0; i < model_pages_->count(); ++i) {
    const auto policy = i == page ? QSizePolicy::Preferred : QSizePolicy::Ignored;
    model_pages_->widget(i)->setSizePolicy(policy, policy);
  }
  model_pages_->setCurrentIndex(page);
  model_pages_->adjustSize();
}

namespace {
QString mib_text(int64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  return mib >= 1024.0 ? QString::number(mib / 1024.0, 'f', 1) + QStringLiteral(" GiB")
                       : QString::number(mib, 'f', 1) + QStringLiteral(" MiB");
}

// The plan's memory for the config's sharding against what the machine
// has; when it does not fit, the cheapest layout that does (the first of
// ZeRO's stages in order, each communicating more than the last), which
// *suggestion names.
QString memory_text(const RunPlan& plan, const std::string& sharding, QString* suggestion) {
  const MemoryFigures* chosen = nullptr;
  for (const MemoryFigures& m : plan.modes) {
    if (m.sharding == sharding) chosen = &m;
  }
  if (chosen == nullptr) return {};
  QString text = QObject::tr("; memory %1 a replica, %2 this process (modelled)")
                     .arg(mib_text(chosen->per_replica()), mib_text(chosen->per_process()));
  if (plan.available_bytes <= 0) return text;
  if (chosen->per_process() <= plan.available_bytes) {
    return text + QObject::tr(", of %1 available").arg(mib_text(plan.available_bytes));
  }
  text += QObject::tr(": does not fit the %1 available").arg(mib_text(plan.available_bytes));
  for (const MemoryFigures& m : plan.modes) {
    if (m.per_process() > plan.available_bytes) continue;
    text += QObject::tr("; strategy.sharding \"%1\" fits (%2)")
                .arg(QString::fromStdString(m.sharding), mib_text(m.per_process()));
    *suggestion = QString::fromStdString(m.sharding);
    return text;
  }
  return text + QObject::tr("; no sharding fits: a smaller batch, or more processes");
}

QString flops_text(double flops) {
  const char* units[] = {"", "k", "M", "G", "T", "P", "E"};
  int u = 0;
  while (flops >= 1000.0 && u < 6) {
    flops /= 1000.0;
    ++u;
  }
  return QString::number(flops, 'g', 3) + QLatin1Char(' ') + QLatin1String(units[u]) +
         QStringLiteral("FLOP");
}
}  // namespace

void RunForm::update_figures() {
  // Reading the data (for its shape) and building the model take a moment:
  // off the GUI thread; only the newest job's result is shown.
  const uint64_t job = ++figures_job_;
  const nlohmann::json doc = config();
  const std::string path = path_.toStdString();
  const std::string plugins = ctx_.plugin_dir.toStdString();
  // The text, or the error building the model met (the model factory's
  // checks, d_model vs n_head say, go beyond the config parser's), and the
  // sharding that fits when the chosen one does not.
  struct Result {
    QString text;
    std::string error;
    QString suggestion;
  };
  const int64_t available = ctx_.memory_available_bytes;
  auto* watcher = new QFutureWatcher<Result>(this);
  connect(watcher, &QFutureWatcher<Result>::finished, this, [this, watcher, job] {
    watcher->deleteLater();
    if (job != figures_job_) return;
    const auto [text, error, suggestion] = watcher->result();
    figures_->setText(text);
    suggested_sharding_ = suggestion;
    const int i = sharding_->findData(suggestion);
    apply_sharding_->setText(i < 0 ? QString() : tr("Use \"%1\": it fits").arg(suggestion));
    apply_sharding_->setVisible(i >= 0 && sharding_->isEnabled());
    // A layout that does not fit is a warning, not a figure among others.
    figures_->setStyleSheet(text.contains(tr("does not fit")) ? QStringLiteral("color: #a40000;")
                                                              : QString());
    if (!error.empty()) {
      const bool was = valid();
      QString message = QString::fromStdString(error);
      const QString file = path_ + QStringLiteral(": ");
      if (message.startsWith(file)) message = message.mid(file.size());
      const QString field = field_for(error);
      errors_.insert(field, message);
      if (QLabel* l = error_labels_.value(field)) {
        l->setText(message);
        l->show();
      }
      if (was != valid()) Q_EMIT validity_changed(valid());
    }
    Q_EMIT figures_updated();
  });
  watcher->setFuture(QtConcurrent::run([doc, path, plugins, available]() -> Result {
    try {
      const RunConfig rc = parse_run_config(doc, path);
      Registry registry;
      registry.load_plugin_dir(plugins);
      const ModelFigures f = model_figures(rc, registry);
      QString text = tr("%L1 parameters; %2 per step (counted from the layer shapes)")
                         .arg(f.parameters)
                         .arg(flops_text(f.flops_per_step));
      if (f.tokens_per_sample > 0) {
        text += tr("; %L1 tokens per step").arg(f.tokens_per_sample * rc.global_batch);
      }
      RunPlan plan = f.plan;
      if (available > 0) plan.available_bytes = available;
      QString suggestion;
      text += memory_text(plan, rc.strategy.sharding, &suggestion);
      return {text, std::string(), suggestion};
    } catch (const InputError& e) {
      return {QString(), e.what(), QString()};
    } catch (const std::exception& e) {
      return {tr("(no figures: %1)").arg(QString::fromUtf8(e.what())), std::string(), QString()};
    }
  }));
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
