#include "ui/cluster_view.h"

#include <QAction>
#include <QUndoStack>

#include "ui/topology_model.h"

namespace baton::ui {

ClusterView::ClusterView(const StudioContext& ctx, TopologyModel& model, QWidget* parent)
    : QWidget(parent), ctx_(ctx), model_(model) {
  undo_stack_ = new QUndoStack(this);
  undo_ = undo_stack_->createUndoAction(this, tr("&Undo"));
  undo_->setShortcut(QKeySequence::Undo);
  redo_ = undo_stack_->createRedoAction(this, tr("&Redo"));
  redo_->setShortcut(QKeySequence::Redo);
}

void ClusterView::show_link_bandwidth(int, int, double) {}
void ClusterView::open_topology() {}
void ClusterView::save_topology() {}

}  // namespace baton::ui
