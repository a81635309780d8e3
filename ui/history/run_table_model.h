// The runs of the history as a table: one row per run, newest first;
// Qt::DisplayRole gives text, Qt::UserRole the raw value to sort by (numbers
// as numbers). Filled from a list the History view loads off the GUI thread.
#pragma once

#include <baton/history/store.h>

#include <QAbstractTableModel>
#include <vector>

namespace baton::ui {

class RunTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column : int {
    kId = 0,
    kName,
    kStatus,
    kStrategy,
    kReplicas,
    kStarted,
    kDuration,
    kLoss,
    kValAccuracy,
    kThroughput,
    kTags,
    kColumnCount
  };
  using QAbstractTableModel::QAbstractTableModel;

  void set_runs(std::vector<RunRecord> runs);
  const RunRecord& run_at(int row) const { return runs_.at(static_cast<size_t>(row)); }
  // The row of the run with this row id, or -1.
  int row_of(int64_t id) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  std::vector<RunRecord> runs_;
};

}  // namespace baton::ui
