// The Train view's Ranks panel: every rank of a launched run - its host,
// its state (starting, running, late, hung, dead, restarting, done,
// stopped), its last step and how long ago its last heartbeat came - as
// `baton launch` reports them in its "ranks" events, about once a second.
// A run in this process (threads) has no ranks: the panel says so.
// Stragglers are marked from each rank's latest step event: the phase of
// its own work (data, compute, optimizer) that lags the other ranks' median
// by more than a quarter (telemetry/stragglers.h).
#pragma once

#include <baton/telemetry/stragglers.h>
#include <baton/telemetry/telemetry.h>

#include <QString>
#include <QWidget>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

class QLabel;
class QTableWidget;
class QTimer;

namespace baton::ui {

struct RankRow {
  int rank = -1;
  QString host;
  QString state;
  qint64 step = -1;        // -1: none yet
  double beat_age_s = -1;  // -1: no heartbeat yet
  qint64 pid = 0;
};

// A "ranks" event's list; entries that are not objects with a rank are left out.
std::vector<RankRow> rank_rows_from_json(const nlohmann::json& ranks);

class RanksPanel : public QWidget {
  Q_OBJECT
 public:
  explicit RanksPanel(QWidget* parent = nullptr);
  // No ranks: `why` says so (a run in this process, or none yet).
  void clear(const QString& why);
  void set_ranks(int attempt, int workers, const std::vector<RankRow>& rows);
  // A line above the table (a rescale, a wait for hosts).
  void set_note(const QString& note);
  // A rank's step event: its phases, for the straggler column (shown
  // within 200 ms: the column is judged at most five times a second).
  void take_step(const StepEvent& step);
  // Forgets the phases (a new run).
  void reset_phases();

  // For tests: the table as shown.
  int row_count() const;
  QString cell(int row, int column) const;
  QString note() const;

 private:
  void show_stragglers();
  QLabel* note_ = nullptr;
  QTableWidget* table_ = nullptr;
  QTimer* lag_timer_ = nullptr;
  std::map<int, RankStepPhases> phases_;  // each rank's latest
};

}  // namespace baton::ui
