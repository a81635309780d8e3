// The Cluster view: this host's devices (probed off the GUI thread) and more
// hosts - added by name, imported from a hostfile or a TF_CONFIG, or probed
// through mpirun (`baton probe --json --hosts ...` as a child process) - on a
// canvas over the TopologyModel; the side panel (strategy, roles, devices,
// replicas, batch, ring, problems); save/open of the topology and exports of
// TF_CONFIG per task and an MPI hostfile. Every edit is one undo step.
#pragma once

#include <QPointer>
#include <QWidget>

#include "common/studio_context.h"

class QAction;
class QComboBox;
class QGraphicsView;
class QLabel;
class QPlainTextEdit;
class QProcess;
class QTabWidget;
class QVBoxLayout;
class QUndoStack;

namespace baton::ui {

class ClusterPanel;
class PredictionPanel;
class TopologyModel;
class TopologyScene;

class ClusterView : public QWidget {
  Q_OBJECT
 public:
  ClusterView(const StudioContext& ctx, TopologyModel& model, QWidget* parent = nullptr);
  ~ClusterView() override;
  QAction* undo_action() const { return undo_; }
  QAction* redo_action() const { return redo_; }
  QUndoStack& undo_stack() const { return *undo_stack_; }
  TopologyScene& scene() const { return *scene_; }
  ClusterPanel& panel() const { return *panel_; }
  // The Prediction tab (modelled step time, throughput, scaling chart).
  PredictionPanel& prediction() const { return *prediction_; }
  // Shows the Prediction tab (for the screenshot).
  void show_prediction_tab();
  QGraphicsView& canvas() const { return *canvas_; }
  // The last message shown in the view's message line ("" = none).
  QString message() const;

  // The file forms of the dialogs' actions; false (and a message) on error.
  bool open_topology_file(const QString& path);
  bool save_topology_file(const QString& path);
  bool import_hostfile(const QString& path);
  bool import_tf_config(const QString& path);
  bool export_hostfile(const QString& path);
  // One TF_CONFIG file per task in `dir`: tf_config_<role>_<index>.json.
  bool export_tf_configs(const QString& dir);
  // Adds the hosts of `baton probe --json --hosts` output (merged by name).
  bool add_probed_hosts(const QByteArray& json, const QStringList& requested);
  // Probes `hosts` through `baton probe --hosts` (off the GUI thread, in a
  // child process), and stops a probe in progress.
  void start_mpirun_probe(const QStringList& hosts);
  void cancel_probe();
  bool probing() const;
  QAction* cancel_probe_action() const { return cancel_probe_; }

 public slots:
  // Colours and thickens the src -> dst link (global replica ranks) by its
  // live bandwidth.
  // estimated: the figure is a traffic model's (drawn dashed, "\u2248");
  // eager: a latency-bound rate (drawn dotted; see LinkItem::set_bandwidth).
  void show_link_bandwidth(int src, int dst, double gbps, bool estimated = false,
                           bool eager = false);
  // Back to the links' plain look (a run started or ended; edits do it too).
  void clear_link_bandwidth();
  // A running job's GPU figures (a device event) on its tile
  // (TopologyScene::show_device_figures); cleared when a run starts.
  void show_device_figures(const QString& device, double utilization_pct, double memory_used_mib,
                           double memory_total_mib, bool emulated);
  void clear_device_figures();
  void open_topology();
  void save_topology();
  void add_host();
  void import_hostfile_dialog();
  void import_tf_config_dialog();
  void export_hostfile_dialog();
  void export_tf_configs_dialog();
  void probe_hosts_dialog();
  void probe_this_host();

 private:
  void build_toolbar(QVBoxLayout* col);
  void show_message(const QString& text, bool error);
  void refresh_preview();
  void show_context_menu(int host_id, const QString& device, QPoint screen_pos);

  const StudioContext& ctx_;
  TopologyModel& model_;
  QUndoStack* undo_stack_ = nullptr;
  QAction* undo_ = nullptr;
  QAction* redo_ = nullptr;
  QAction* probe_hosts_ = nullptr;
  QAction* cancel_probe_ = nullptr;
  TopologyScene* scene_ = nullptr;
  QGraphicsView* canvas_ = nullptr;
  ClusterPanel* panel_ = nullptr;
  PredictionPanel* prediction_ = nullptr;
  QTabWidget* preview_ = nullptr;
  QLabel* message_ = nullptr;
  QComboBox* task_ = nullptr;
  QPlainTextEdit* tf_text_ = nullptr;
  QPlainTextEdit* hostfile_text_ = nullptr;
  QPlainTextEdit* strategy_text_ = nullptr;
  QPointer<QProcess> probe_process_;
  int local_probe_job_ = 0;
};

}  // namespace baton::ui
