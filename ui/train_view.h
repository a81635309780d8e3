// The Train view: the run form (validated as the user types), Start/Stop,
// progress with ETA, the live dashboard and the log console.
#pragma once

#include <QWidget>

#include "ui/studio_context.h"

class QAction;

namespace baton::ui {

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

 signals:
  void link_bandwidth(int src, int dst, double gbps);
  void run_finished(const QString& run_id, const QString& status);

 private:
  const StudioContext& ctx_;
  TopologyModel& topology_;
  QAction* start_ = nullptr;
  QAction* stop_ = nullptr;
};

}  // namespace baton::ui
