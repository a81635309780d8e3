// The studio's main window: three views - Cluster, Train, History - picked
// from a side bar (Ctrl+1/2/3), a status bar with this host's device
// summary (probed off the GUI thread), and window state kept in QSettings.
#pragma once

#include <QMainWindow>

#include "common/studio_context.h"

class QLabel;
class QListWidget;
class QStackedWidget;

namespace baton::ui {

class ClusterView;
class HistoryView;
class TopologyModel;
class TrainView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(StudioContext ctx, QWidget* parent = nullptr);
  ~MainWindow() override;

  enum class View : int { kCluster = 0, kTrain = 1, kHistory = 2 };
  void show_view(View v);
  View current_view() const;

  TopologyModel& topology() { return *topology_; }
  ClusterView& cluster_view() { return *cluster_; }
  TrainView& train_view() { return *train_; }
  HistoryView& history_view() { return *history_; }

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void build_menus();
  void probe_devices();

  StudioContext ctx_;
  TopologyModel* topology_ = nullptr;
  QListWidget* nav_ = nullptr;
  QStackedWidget* stack_ = nullptr;
  ClusterView* cluster_ = nullptr;
  TrainView* train_ = nullptr;
  HistoryView* history_ = nullptr;
  QLabel* devices_label_ = nullptr;
};

}  // namespace baton::ui
