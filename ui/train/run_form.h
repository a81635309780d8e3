// The run form: the run config's common fields (model, dataset, global
// batch, epochs, optimizer, learning rate, checkpointing) over a base config
// file, validated as the user types by the engine's own config parser. Each
// message is shown under the field it is about. A field shows what the file
// says, or the engine's own default where it says nothing, and only a field
// the user changed is written into the config (config() is the file
// otherwise, key for key). The strategy: the file's, when it has one, else
// the Cluster view's (set_strategy); when the two name different types the
// form says so and the run waits for the user to pick one.
#pragma once

#include <QHash>
#include <QTimer>
#include <QWidget>
#include <nlohmann/json.hpp>

#include "common/studio_context.h"

class QCheckBox;
class QComboBox;
class QPushButton;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QStackedWidget;

namespace baton::ui {

class RunForm : public QWidget {
  Q_OBJECT
 public:
  explicit RunForm(const StudioContext& ctx, QWidget* parent = nullptr);

  // Loads a config file as the base; false (and *error) when it cannot be
  // read or parsed - the form keeps what it had.
  bool load(const QString& path, QString* error);
  QString config_path() const { return path_; }
  // The run config the form describes now, with `strategy_` in it.
  nlohmann::json config() const;
  // The Cluster view's strategy; `replicas`: how many replicas share the
  // global batch.
  void set_strategy(const nlohmann::json& strategy, const QString& description, int replicas);
  enum class StrategySource : int { kConfig = 0, kCluster = 1 };
  StrategySource strategy_source() const { return strategy_from_; }
  // Whether the file's strategy and the Cluster view's name different types
  // while the file's is chosen (the run waits for a pick).
  bool strategy_conflict() const;

 public Q_SLOTS:
  // The user's pick: the Cluster view's strategy replaces the file's, or the
  // file's is kept and the Cluster view is asked to match it
  // (strategy_adopted).
  void use_cluster_strategy();
  void use_config_strategy();

  // Whether the config passes the engine's validation, and the messages by
  // field ("name", "model", "data", "batch", "epochs", "optimizer", "lr",
  // "checkpoint", "strategy", "form").
  bool valid() const { return errors_.isEmpty(); }
  QHash<QString, QString> errors() const { return errors_; }
  QString first_error() const;

  // The widgets, for tests.
  QComboBox* model_combo() const { return model_type_; }
  QSpinBox* gpt_layers_spin() const { return gpt_layers_; }
  QSpinBox* gpt_heads_spin() const { return gpt_heads_; }
  QSpinBox* gpt_width_spin() const { return gpt_width_; }
  QDoubleSpinBox* gpt_dropout_spin() const { return gpt_dropout_; }
  // "842,496 parameters; 23.4 GFLOP per step (counted)": the model the
  // config builds, worked out off the GUI thread after each change.
  QLabel* figures_label() const { return figures_; }
  QLineEdit* layers_edit() const { return layers_; }
  QSpinBox* batch_spin() const { return batch_; }
  QSpinBox* epochs_spin() const { return epochs_; }
  QSpinBox* steps_spin() const { return steps_; }
  QLineEdit* lr_edit() const { return lr_; }
  QComboBox* optimizer_combo() const { return optimizer_; }
  // strategy.sharding (mirrored and multi_worker_mirrored), and the button
  // that applies the cheapest layout that fits when the chosen one does
  // not (shown then, named for it).
  QComboBox* sharding_combo() const { return sharding_; }
  QPushButton* apply_sharding_button() const { return apply_sharding_; }

 Q_SIGNALS:
  void validity_changed(bool valid);
  // The file's strategy type, for the Cluster view to take.
  void strategy_adopted(const QString& type);
  // A config file was loaded (load() succeeded).
  void config_loaded();
  // The figures label has the figures of the config as it is now.
  void figures_updated();

 private:
  void fill_from_base();
  void update_strategy_label();
  void validate();
  QLabel* error_label(const QString& field);
  QString field_for(const std::string& message) const;
  void show_model_page();
  void update_figures();  // starts the background computation

  const StudioContext& ctx_;
  QString path_;
  nlohmann::json base_;
  nlohmann::json strategy_ = {{"type", "one_device"}};  // the Cluster view's
  QString cluster_description_;
  StrategySource strategy_from_ = StrategySource::kCluster;
  int replicas_ = 1;
  // What fill_from_base() showed: a field still showing it is not written.
  struct Shown {
    QString name, model_type, layers, activation, optimizer, lr;
    int batch = 0, epochs = 0, steps = 0, keep = 0;
    int gpt_layers = 0, gpt_heads = 0, gpt_width = 0;
    double gpt_dropout = 0;
    bool every_epoch = false;
    QString sharding;
  } shown_;
  QTimer figures_timer_;      // debounces update_figures()
  uint64_t figures_job_ = 0;  // the newest computation: older results are dropped
  bool filling_ = false;
  QHash<QString, QString> errors_;
  QHash<QString, QLabel*> error_labels_;
  QComboBox* examples_ = nullptr;
  QLabel* source_ = nullptr;
  QLineEdit* name_ = nullptr;
  QComboBox* model_type_ = nullptr;
  QStackedWidget* model_pages_ = nullptr;  // 0: mlp fields, 1: gpt fields
  QLineEdit* layers_ = nullptr;
  QComboBox* activation_ = nullptr;
  QSpinBox* gpt_layers_ = nullptr;
  QSpinBox* gpt_heads_ = nullptr;
  QSpinBox* gpt_width_ = nullptr;
  QDoubleSpinBox* gpt_dropout_ = nullptr;
  QLabel* figures_ = nullptr;
  QLabel* dataset_ = nullptr;
  QSpinBox* batch_ = nullptr;
  QLabel* per_replica_ = nullptr;
  QSpinBox* epochs_ = nullptr;
  QSpinBox* steps_ = nullptr;  // shown instead of epochs_ for a config with train.steps
  QComboBox* optimizer_ = nullptr;
  QLineEdit* lr_ = nullptr;
  QCheckBox* ckpt_epoch_ = nullptr;
  QSpinBox* ckpt_keep_ = nullptr;
  QLabel* strategy_label_ = nullptr;
  QWidget* strategy_pick_ = nullptr;  // the two buttons, shown on a conflict
  QComboBox* sharding_ = nullptr;
  QPushButton* apply_sharding_ = nullptr;
  QString suggested_sharding_;  // what apply_sharding_ sets
  // The strategy type the run takes (the config's or the Cluster view's).
  std::string effective_strategy_type() const;
};

}  // namespace baton::ui
