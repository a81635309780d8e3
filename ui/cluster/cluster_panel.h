// The Cluster view's side panel: the strategy (TPU shown, disabled, with
// the reason), what the topology makes of it (replicas, ranks, the
// per-replica batch for a global batch, the ring order), the selected
// host's name, port, role and devices, and the validation messages.
// Every edit is pushed to the undo stack as a command.
#pragma once

#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QSpinBox;
class QUndoStack;
class QGroupBox;

namespace baton::ui {

class TopologyModel;

class ClusterPanel : public QWidget {
  Q_OBJECT
 public:
  ClusterPanel(TopologyModel& model, QUndoStack& undo, QWidget* parent = nullptr);
  // The host (and device) the canvas has selected; 0 = none.
  void set_selection(int host_id, const QString& device);
  QComboBox* strategy_box() const { return strategy_; }
  QSpinBox* global_batch_box() const { return batch_; }
  QLabel* batch_label() const { return per_replica_; }
  QListWidget* problem_list() const { return problems_; }

 signals:
  void add_host_requested();

 private:
  void refresh();
  void refresh_host();
  void edit_name();
  void edit_port(int port);
  void edit_role(int index);
  void add_device(const QString& kind);
  void remove_device();
  void remove_host();

  TopologyModel& model_;
  QUndoStack& undo_;
  int host_id_ = 0;
  QString device_;
  QComboBox* strategy_ = nullptr;
  QComboBox* ps_mode_ = nullptr;
  QLabel* ps_mode_label_ = nullptr;
  QLabel* counts_ = nullptr;
  QSpinBox* batch_ = nullptr;
  QLabel* per_replica_ = nullptr;
  QListWidget* ring_ = nullptr;
  QGroupBox* host_box_ = nullptr;
  QLineEdit* name_ = nullptr;
  QSpinBox* port_ = nullptr;
  QComboBox* role_ = nullptr;
  QPushButton* remove_device_ = nullptr;
  QListWidget* problems_ = nullptr;
};

}  // namespace baton::ui
