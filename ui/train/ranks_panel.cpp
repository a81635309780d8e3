#include "train/ranks_panel.h"

#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>

namespace baton::ui {

std::vector<RankRow> rank_rows_from_json(const nlohmann::json& ranks) {
  std::vector<RankRow> rows;
  if (!ranks.is_array()) return rows;
  for (const auto& r : ranks) {
    if (!r.is_object() || !r.contains("rank") || !r["rank"].is_number_integer()) continue;
    RankRow row;
    row.rank = r["rank"].get<int>();
    row.host = QString::fromStdString(r.value("host", std::string()));
    row.state = QString::fromStdString(r.value("state", std::string()));
    row.step = r.value("step", qint64{-1});
    row.beat_age_s = r.value("beat_age_s", -1.0);
    row.pid = r.value("pid", qint64{0});
    rows.push_back(std::move(row));
  }
  return rows;
}

namespace {

enum Column { kRank, kHost, kState, kStep, kBeat, kLags, kPid, kColumns };

QColor state_color(const QString& state) {
  if (state == QLatin1String("running") || state == QLatin1String("done")) return {30, 140, 60};
  if (state == QLatin1String("late")) return {200, 130, 0};
  if (state == QLatin1String("hung") || state == QLatin1String("dead")) return {200, 40, 40};
  if (state == QLatin1String("restarting")) return {40, 90, 200};
  return {120, 120, 120};  // starting, stopped
}

}  // namespace

RanksPanel::RanksPanel(QWidget* parent) : QWidget(parent) {
  lag_timer_ = new QTimer(this);
  lag_timer_->setSingleShot(true);
  lag_timer_->setInterval(200);
  connect(lag_timer_, &QTimer::timeout, this, &RanksPanel::show_stragglers);
  note_ = new QLabel;
  note_->setObjectName(QStringLiteral("ranks_note"));
  note_->setWordWrap(true);
  table_ = new QTableWidget(0, kColumns);
  table_->setObjectName(QStringLiteral("ranks"));
  table_->setHorizontalHeaderLabels(
      {tr("Rank"), tr("Host"), tr("State"), tr("Step"), tr("Last heartbeat"), tr("Lags in"),
       tr("PID")});
  table_->horizontalHeaderItem(kLags)->setToolTip(
      tr("A straggler: the phase of its own work (data, compute, optimizer) in its latest step "
         "that took more than 25% longer than the other ranks' median. Communication is not "
         "judged: in a synchronous step the fast ranks wait there for the slow one."));
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionMode(QAbstractItemView::NoSelection);
  table_->horizontalHeader()->setStretchLastSection(true);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(note_);
  layout->addWidget(table_, 1);
  clear(tr("No run yet."));
}

void RanksPanel::clear(const QString& why) {
  table_->setRowCount(0);
  note_->setText(why);
}

void RanksPanel::set_note(const QString& note) { note_->setText(note); }

void RanksPanel::set_ranks(int attempt, int workers, const std::vector<RankRow>& rows) {
  note_->setText(tr("Attempt %1: %2 rank(s)").arg(attempt).arg(workers));
  // Ranks an elastic job no longer has take no part in the medians.
  for (auto it = phases_.begin(); it != phases_.end();) {
    const bool listed = std::any_of(rows.begin(), rows.end(),
                                    [&](const RankRow& r) { return r.rank == it->first; });
    it = listed ? std::next(it) : phases_.erase(it);
  }
  table_->setRowCount(static_cast<int>(rows.size()));
  for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
    const RankRow& r = rows[static_cast<size_t>(i)];
    const auto put = [&](int col, const QString& text) {
      auto* item = table_->item(i, col);
      if (item == nullptr) {
        item = new QTableWidgetItem;
        table_->setItem(i, col, item);
      }
      item->setText(text);
      return item;
    };
    put(kRank, QString::number(r.rank));
    put(kHost, r.host);
    put(kState, r.state)->setForeground(state_color(r.state));
    put(kStep, r.step >= 0 ? QString::number(r.step) : tr("-"));
    put(kBeat, r.beat_age_s >= 0 ? tr("%1 s ago").arg(r.beat_age_s, 0, 'f', 1) : tr("none yet"));
    put(kPid, r.pid > 0 ? QString::number(r.pid) : QString());
  }
  show_stragglers();
}

void RanksPanel::take_step(const StepEvent& step) {
  RankStepPhases& p = phases_[step.rank];
  p.rank = step.rank;
  p.step = step.step;
  p.data_ms = step.data_ms;
  p.compute_ms = step.compute_ms;
  p.optimizer_ms = step.optimizer_ms;
  // The Lags column follows at most five times a second: judged per event,
  // a 64-rank run's 10,000 step events a second kept the GUI thread busy
  // with medians (studio_load: the event loop 0.6 s late at its p99).
  if (!lag_timer_->isActive()) lag_timer_->start();
}

void RanksPanel::reset_phases() {
  phases_.clear();
  lag_timer_->stop();
  show_stragglers();
}

void RanksPanel::show_stragglers() {
  std::vector<RankStepPhases> list;
  for (const auto& [rank, p] : phases_) list.push_back(p);
  const auto found = find_stragglers(list);
  for (int i = 0; i < table_->rowCount(); ++i) {
    const int rank = table_->item(i, kRank) ? table_->item(i, kRank)->text().toInt() : -1;
    QString text;
    for (const auto& f : found) {
      if (f.rank != rank) continue;
      text = tr("%1 +%2% (%3 ms vs %4)")
                 .arg(QString::fromStdString(f.phase))
                 .arg(100.0 * f.lag(), 0, 'f', 0)
                 .arg(f.ms, 0, 'f', 1)
                 .arg(f.others_median_ms, 0, 'f', 1);
    }
    auto* item = table_->item(i, kLags);
    if (item == nullptr) {
      item = new QTableWidgetItem;
      table_->setItem(i, kLags, item);
    }
    item->setText(text);
    item->setForeground(QColor(200, 130, 0));
  }
}

int RanksPanel::row_count() const { return table_->rowCount(); }

QString RanksPanel::cell(int row, int column) const {
  const auto* item = table_->item(row, column);
  return item == nullptr ? QString() : item->text();
}

QString RanksPanel::note() const { return note_->text(); }

}  // namespace baton::ui
