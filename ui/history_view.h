// The History view: the runs in the store, filtered and sorted; several
// overlaid on the dashboard plots; a key-by-key config diff of two; replay
// of one through the live dashboard's code path; export and delete.
#pragma once

#include <QWidget>

#include "ui/studio_context.h"

namespace baton::ui {

class HistoryView : public QWidget {
  Q_OBJECT
 public:
  explicit HistoryView(const StudioContext& ctx, QWidget* parent = nullptr);

 public slots:
  // Re-reads the run list (after a run ends, or on F5).
  void refresh();

 signals:
  void replay_requested();

 private:
  const StudioContext& ctx_;
};

}  // namespace baton::ui
