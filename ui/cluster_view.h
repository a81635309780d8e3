// The Cluster view: this host's devices and more hosts, drawn on a canvas
// over the TopologyModel; the strategy, roles and exports.
#pragma once

#include <QWidget>

#include "ui/studio_context.h"

class QAction;
class QUndoStack;

namespace baton::ui {

class TopologyModel;

class ClusterView : public QWidget {
  Q_OBJECT
 public:
  ClusterView(const StudioContext& ctx, TopologyModel& model, QWidget* parent = nullptr);
  QAction* undo_action() const { return undo_; }
  QAction* redo_action() const { return redo_; }

 public slots:
  // Colours and thickens the src -> dst link (global replica ranks) by its
  // live bandwidth.
  void show_link_bandwidth(int src, int dst, double gbps);
  void open_topology();
  void save_topology();

 private:
  const StudioContext& ctx_;
  TopologyModel& model_;
  QUndoStack* undo_stack_ = nullptr;
  QAction* undo_ = nullptr;
  QAction* redo_ = nullptr;
};

}  // namespace baton::ui
