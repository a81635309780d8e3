#include "ui/train_view.h"

#include <QAction>

namespace baton::ui {

TrainView::TrainView(const StudioContext& ctx, TopologyModel& topology, QWidget* parent)
    : QWidget(parent), ctx_(ctx), topology_(topology) {
  start_ = new QAction(tr("&Start"), this);
  stop_ = new QAction(tr("S&top"), this);
}

TrainView::~TrainView() = default;

bool TrainView::confirm_close() { return true; }

}  // namespace baton::ui
