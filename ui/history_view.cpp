#include "ui/history_view.h"

namespace baton::ui {

HistoryView::HistoryView(const StudioContext& ctx, QWidget* parent) : QWidget(parent), ctx_(ctx) {}

void HistoryView::refresh() {}

}  // namespace baton::ui
