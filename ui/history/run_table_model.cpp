#include "history/run_table_model.h"

#include <QBrush>
#include <QColor>
#include <QDateTime>

namespace baton::ui {
namespace {

double metric(const RunRecord& r, const char* key) {
  const auto& m = r.final_metrics;
  if (!m.is_object()) return std::nan("");
  const auto it = m.find(key);
  return it != m.end() && it->is_number() ? it->get<double>() : std::nan("");
}

QString join(const std::vector<std::string>& items) {
  QStringList out;
  for (const auto& s : items) out << QString::fromStdString(s);
  return out.join(QStringLiteral(", "));
}

QString duration_text(double seconds) {
  if (!(seconds >= 0)) return {};
  const auto s = static_cast<qint64>(seconds + 0.5);
  if (s < 60) return QStringLiteral("%1 s").arg(s);
  if (s < 3600) return QStringLiteral("%1 min %2 s").arg(s / 60).arg(s % 60);
  return QStringLiteral("%1 h %2 min").arg(s / 3600).arg(s / 60 % 60);
}

}  // namespace

void RunTableModel::set_runs(std::vector<RunRecord> runs) {
  beginResetModel();
  runs_ = std::move(runs);
  endResetModel();
}

int RunTableModel::row_of(int64_t id) const {
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (runs_[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

int RunTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(runs_.size());
}

int RunTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant RunTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() < 0 || index.row() >= rowCount() || index.column() < 0 ||
      index.column() >= kColumnCount) {
    return {};
  }
  const RunRecord& r = runs_[static_cast<size_t>(index.row())];
  const double end =
      r.end_time > 0 ? r.end_time : static_cast<double>(QDateTime::currentSecsSinceEpoch());
  if (role == Qt::UserRole) {
    switch (index.column()) {
      case kId:
        return QVariant::fromValue<qlonglong>(r.id);
      case kReplicas:
        return r.replicas;
      case kStarted:
        return r.start_time;
      case kDuration:
        return end - r.start_time;
      case kLoss:
        return metric(r, "train_loss");
      case kValAccuracy:
        return metric(r, "val_accuracy");
      case kThroughput:
        return metric(r, "samples_per_s");
      default:
        return data(index, Qt::DisplayRole);
    }
  }
  if (role == Qt::ForegroundRole && index.column() == kStatus) {
    if (r.status == "failed") return QBrush(QColor(0xd0, 0x30, 0x30));
    if (r.status == "interrupted") return QBrush(QColor(0xc0, 0x80, 0x00));
    if (r.status == "running") return QBrush(QColor(0x20, 0x80, 0xd0));
    return {};
  }
  if (role == Qt::ToolTipRole && index.column() == kStatus && !r.error.empty()) {
    return QString::fromStdString(r.error);
  }
  if (role == Qt::TextAlignmentRole) {
    const int c = index.column();
    const bool number = c == kId || c == kReplicas || c == kLoss || c == kValAccuracy ||
                        c == kThroughput || c == kDuration;
    return QVariant::fromValue(number ? Qt::AlignRight | Qt::AlignVCenter
                                      : Qt::AlignLeft | Qt::AlignVCenter);
  }
  if (role != Qt::DisplayRole) return {};
  auto num = [](double v, int digits) {
    return std::isnan(v) ? QString() : QString::number(v, 'f', digits);
  };
  switch (index.column()) {
    case kId:
      return QString::number(r.id);
    case kName:
      return QString::fromStdString(r.name);
    case kStatus:
      return QString::fromStdString(r.status);
    case kStrategy:
      return QString::fromStdString(r.strategy);
    case kReplicas:
      return QString::number(r.replicas);
    case kStarted:
      return QDateTime::fromSecsSinceEpoch(static_cast<qint64>(r.start_time))
          .toString(QStringLiteral("yyyy-MM-dd HH:mm"));
    case kDuration:
      return duration_text(end - r.start_time);
    case kLoss:
      return num(metric(r, "train_loss"), 4);
    case kValAccuracy:
      return num(metric(r, "val_accuracy"), 4);
    case kThroughput:
      return num(metric(r, "samples_per_s"), 0);
    case kTags:
      return join(r.tags);
    default:
      return {};
  }
}

QVariant RunTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const kNames[] = {"ID",       "Name",      "Status",   "Strategy",
                                       "Replicas", "Started",   "Duration", "Final loss",
                                       "Val acc.", "Samples/s", "Tags"};
  return section >= 0 && section < kColumnCount ? tr(kNames[section]) : QVariant();
}

}  // namespace baton::ui
