// The Train view: the run form (validated as the user types), Start/Stop,
// progress with ETA, the live dashboard and the log console. Single-process
// strategies run embedded; multi-process ones are launched through mpirun
// (RunController). Failures - a bad config, a missing dataset, no mpirun, a
// run that fails - are shown in the window, never as a crash or a freeze.
#pragma once

#include <baton/telemetry/telemetry.h>

#include <QElapsedTimer>
#include <QPointer>
#include <QWidget>
#include <memory>

#include "common/studio_context.h"

class QAction;
class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;

namespace baton::ui {

class Dashboard;
class RunController;
class RanksPanel;
class RunForm;
class TopologyModel;

class TrainView : public QWidget {
  Q_OBJECT
 public:
  TrainView(const StudioContext& ctx, TopologyModel& topology, QWidget* parent = nullptr);
  ~TrainView() override;
  QAction* start_action() const { return start_; }
  QAction* stop_action() const { return stop_; }
  // Asks before closing the window over a running run; true = may close.
  bool confirm_close();

  RunForm& form() { return *form_; }
  Dashboard& dashboard() { return *dashboard_; }
  RanksPanel& ranks() { return *ranks_; }
  bool running() const;
  QString status_text() const;
  QString current_run() const { return run_id_; }

 public Q_SLOTS:
  void start();
  void stop();

 Q_SIGNALS:
  // estimated: the figure is a traffic model's, not a measurement. eager:
  // messages under MPI's eager limit, a buffer copy's rate (latency-bound,
  // not the link's bandwidth).
  void link_bandwidth(int src, int dst, double gbps, bool estimated, bool eager);
  // A GPU's figures (a device event: "gpu:N" or "gpu_emulated:N";
  // utilisation < 0: not known).
  void device_figures(const QString& device, double utilization_pct, double memory_used_mib,
                      double memory_total_mib, bool emulated);
  void run_started(const QString& run_id);
  void run_finished(const QString& run_id, const QString& status);

 private:
  void on_events(const std::vector<baton::Event>& batch);
  void on_finished(const QString& status, const QString& error);
  void update_strategy();
  // While the user has not chosen a strategy in the Cluster view (it is as
  // the studio started, or as a loaded config set it), the Cluster view
  // follows the config's strategy: an example runs as it says without a
  // question. Once the user picks another there, the form asks.
  void follow_config_strategy();
  bool following_config_ = false;
  QString adopted_;
  void set_status(const QString& text, bool error = false);
  void log_line(const QString& line);

  const StudioContext& ctx_;
  TopologyModel& topology_;
  RunForm* form_ = nullptr;
  Dashboard* dashboard_ = nullptr;
  QPlainTextEdit* log_ = nullptr;
  RanksPanel* ranks_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
  QPushButton* start_button_ = nullptr;
  QPushButton* stop_button_ = nullptr;
  QAction* start_ = nullptr;
  QAction* stop_ = nullptr;
  std::unique_ptr<RunController> run_;
  QString run_id_;
  int64_t total_steps_ = 0, start_step_ = 0;
  QElapsedTimer clock_;
};

}  // namespace baton::ui
