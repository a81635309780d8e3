// The History view: the runs in the store (sortable, filtered as you type,
// status, strategy, replicas, final metrics, tags); select several to
// overlay their curves on the dashboard; a key-by-key config diff of two;
// replay of one through the live dashboard's path at 1x-100x with pause and
// a scrubber; tag, note, delete; export the plots as PNG and their data as
// CSV. The run list and overlays load off the GUI thread; a stale result
// (a newer load started) is dropped.
#pragma once

#include <QWidget>
#include <functional>

#include "common/studio_context.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSlider;
class QSortFilterProxyModel;
class QTableView;

namespace baton::ui {

class Dashboard;
class ReplayController;
class RunTableModel;

class HistoryView : public QWidget {
  Q_OBJECT
 public:
  explicit HistoryView(const StudioContext& ctx, QWidget* parent = nullptr);
  ~HistoryView() override;

  QString db_path() const;
  RunTableModel& model() { return *model_; }
  QTableView& table() { return *table_; }
  Dashboard& dashboard() { return *dashboard_; }
  ReplayController& replay() { return *replay_; }
  // Row ids of the selected runs, in table order.
  std::vector<int64_t> selected_runs() const;
  void select_runs(const std::vector<int64_t>& ids);
  // Loads the runs' curves onto the dashboard (off the GUI thread);
  // overlay_loaded() says when they are there.
  void overlay(const std::vector<int64_t>& ids);
  // The key-by-key differences of two runs' configs, as text lines.
  QStringList diff(int64_t a, int64_t b, QString* error) const;
  // Opens run `id` for replay off the GUI thread: the replay controller's
  // opened() or failed() says how it went (the view shows either).
  void replay_run(int64_t id, double speed);
  // Off the GUI thread, then a refresh (refreshed()); errors are messages.
  void tag_runs(const std::vector<int64_t>& ids, const QString& tag);
  void note_run(int64_t id, const QString& note);
  void delete_runs(const std::vector<int64_t>& ids);
  QString message() const;

 public Q_SLOTS:
  // Re-reads the run list (after a run ends, or on F5), off the GUI thread.
  void refresh();

 Q_SIGNALS:
  void replay_requested();
  void refreshed(int runs);
  void overlay_loaded(int runs);

 private:
  void build_actions();
  // Runs `work` on a worker thread (what it throws becomes the error), then
  // `done` on the GUI thread.
  void run_off_gui(std::function<void(QStringList*)> work,
                   std::function<void(const QString&, const QStringList&)> done);
  void show_diff(int64_t a, int64_t b, const QStringList& lines);
  void show_message(const QString& text, bool error = false);
  void on_selection();

  const StudioContext& ctx_;
  RunTableModel* model_ = nullptr;
  QSortFilterProxyModel* proxy_ = nullptr;
  QTableView* table_ = nullptr;
  QLineEdit* filter_ = nullptr;
  Dashboard* dashboard_ = nullptr;
  ReplayController* replay_ = nullptr;
  QLabel* message_ = nullptr;
  QPushButton *compare_ = nullptr, *diff_ = nullptr, *replay_button_ = nullptr, *pause_ = nullptr,
              *tag_ = nullptr, *note_ = nullptr, *delete_ = nullptr, *export_png_ = nullptr,
              *export_csv_ = nullptr;
  QComboBox* speed_ = nullptr;
  QSlider* scrubber_ = nullptr;
  QLabel* position_ = nullptr;
  bool marked_interrupted_ = false;  // the first list stores the interrupted rule
  quint64 list_job_ = 0, overlay_job_ = 0;  // the newest load; older results are dropped
};

}  // namespace baton::ui
