#include "history/history_view.h"

#include <baton/history/store.h>

#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPointer>
#include <QPushButton>
#include <QShortcut>
#include <QSlider>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <filesystem>

#include "common/dashboard.h"
#include "history/replay_controller.h"
#include "history/run_loader.h"
#include "history/run_table_model.h"

namespace baton::ui {
namespace {

struct ListResult {
  std::vector<RunRecord> runs;
  QString error;
  QString note;  // the interrupted rule could not be stored (the list is fine)
};

struct OverlayResult {
  std::vector<LoadedRun> runs;
  QString error;
};

QString json_text(const nlohmann::json& j) {
  return j.is_null() ? QStringLiteral("(absent)") : QString::fromStdString(j.dump());
}

// The key-by-key differences of two runs' configs (throws what the store
// throws); any thread.
QStringList config_diff(const std::string& db, int64_t a, int64_t b) {
  QStringList lines;
  const HistoryStore store(db, HistoryStore::Open::kReadOnly);
  const RunRecord ra = store.run(a), rb = store.run(b);
  for (const ConfigChange& c : diff_configs(ra.config, rb.config)) {
    const QString key = QString::fromStdString(c.key);
    switch (c.kind) {
      case ConfigChange::Kind::kAdded:
        lines << QStringLiteral("+ %1: %2").arg(key, json_text(c.after));
        break;
      case ConfigChange::Kind::kRemoved:
        lines << QStringLiteral("- %1: %2").arg(key, json_text(c.before));
        break;
      default:
        lines << QStringLiteral("~ %1: %2 -> %3").arg(key, json_text(c.before), json_text(c.after));
    }
  }
  return lines;
}

struct Work {
  QString error;
  QStringList lines;
};

}  // namespace

HistoryView::HistoryView(const StudioContext& ctx, QWidget* parent) : QWidget(parent), ctx_(ctx) {
  model_ = new RunTableModel(this);
  proxy_ = new QSortFilterProxyModel(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(Qt::UserRole);
  proxy_->setFilterKeyColumn(-1);
  proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);

  filter_ = new QLineEdit;
  filter_->setObjectName(QStringLiteral("filter"));
  filter_->setPlaceholderText(tr("Filter runs: name, status, strategy, tag..."));
  filter_->setClearButtonEnabled(true);
  connect(filter_, &QLineEdit::textChanged, proxy_, &QSortFilterProxyModel::setFilterFixedString);

  table_ = new QTableView;
  table_->setObjectName(QStringLiteral("runs"));
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(RunTableModel::kId, Qt::DescendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setAlternatingRowColors(true);
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          &HistoryView::on_selection);

  dashboard_ = new Dashboard;
  replay_ = new ReplayController(*dashboard_, this);
  message_ = new QLabel;
  message_->setObjectName(QStringLiteral("message"));
  message_->setWordWrap(true);

  build_actions();

  auto* top = new QWidget;
  auto* tl = new QVBoxLayout(top);
  tl->setContentsMargins(0, 0, 0, 0);
  auto* bar = new QHBoxLayout;
  bar->addWidget(filter_, 1);
  for (QPushButton* b : {compare_, diff_, tag_, note_, delete_}) bar->addWidget(b);
  tl->addLayout(bar);
  tl->addWidget(table_, 1);
  tl->addWidget(message_);

  auto* replay_bar = new QHBoxLayout;
  replay_bar->addWidget(replay_button_);
  replay_bar->addWidget(pause_);
  replay_bar->addWidget(speed_);
  replay_bar->addWidget(scrubber_, 1);
  replay_bar->addWidget(position_);
  replay_bar->addWidget(export_png_);
  replay_bar->addWidget(export_csv_);
  auto* bottom = new QWidget;
  auto* bl = new QVBoxLayout(bottom);
  bl->setContentsMargins(0, 0, 0, 0);
  bl->addLayout(replay_bar);
  bl->addWidget(dashboard_, 1);

  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(top);
  split->addWidget(bottom);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(split);

  connect(replay_, &ReplayController::position_changed, this, [this](qint64 step) {
    scrubber_->blockSignals(true);
    scrubber_->setValue(static_cast<int>(step));
    scrubber_->blockSignals(false);
    position_->setText(tr("step %1 / %2").arg(step).arg(replay_->last_step()));
  });
  connect(replay_, &ReplayController::opened, this, [this](qint64 last) {
    scrubber_->setRange(0, static_cast<int>(last));
    pause_->setText(tr("Pause"));
    show_message(tr("Replaying at %1x").arg(speed_->currentData().toDouble()));
    Q_EMIT replay_requested();
  });
  connect(replay_, &ReplayController::failed, this,
          [this](const QString& message) { show_message(message, true); });
  connect(replay_, &ReplayController::ended, this, [this] {
    pause_->setText(tr("Play"));
    show_message(tr("Replay finished"));
  });
  new QShortcut(QKeySequence::Refresh, this, this, &HistoryView::refresh);
  on_selection();
  refresh();
}

HistoryView::~HistoryView() = default;

QString HistoryView::db_path() const {
  return ctx_.history_db.isEmpty() ? QString::fromStdString(default_history_db_path())
                                   : ctx_.history_db;
}

QString HistoryView::message() const { return message_->text(); }

void HistoryView::show_message(const QString& text, bool error) {
  message_->setText(text);
  QPalette p = message_->palette();
  p.setColor(QPalette::WindowText,
             error ? QColor(0xd0, 0x30, 0x30) : palette().color(QPalette::WindowText));
  message_->setPalette(p);
}

void HistoryView::build_actions() {
  auto button = [this](const QString& text, const char* name, const QString& tip) {
    auto* b = new QPushButton(text);
    b->setObjectName(QString::fromLatin1(name));
    b->setToolTip(tip);
    return b;
  };
  compare_ = button(tr("Compare"), "compare", tr("Overlay the selected runs' curves"));
  diff_ = button(tr("Diff configs"), "diff", tr("Key-by-key config differences of two runs"));
  tag_ = button(tr("Tag..."), "tag", tr("Add a tag to the selected runs"));
  note_ = button(tr("Note..."), "note", tr("Set the selected run's note"));
  delete_ = button(tr("Delete"), "delete", tr("Delete the selected runs and their records"));
  replay_button_ = button(tr("Replay"), "replay", tr("Play the selected run back"));
  pause_ = button(tr("Pause"), "pause", tr("Pause or continue the replay"));
  speed_ = new QComboBox;
  speed_->setObjectName(QStringLiteral("speed"));
  for (int s : {1, 2, 5, 10, 25, 50, 100}) speed_->addItem(QStringLiteral("%1x").arg(s), s);
  speed_->setCurrentIndex(3);
  scrubber_ = new QSlider(Qt::Horizontal);
  scrubber_->setObjectName(QStringLiteral("scrubber"));
  scrubber_->setTracking(false);
  position_ = new QLabel;
  auto* export_png = new QPushButton(tr("Export PNG..."));
  auto* export_csv = new QPushButton(tr("Export CSV..."));

  connect(compare_, &QPushButton::clicked, this, [this] { overlay(selected_runs()); });
  connect(diff_, &QPushButton::clicked, this, [this] {
    const auto ids = selected_runs();
    if (ids.size() != 2) return;
    // Read off the GUI thread; the dialog when the lines are there.
    const std::string db = db_path().toStdString();
    const int64_t a = ids[0], b = ids[1];
    run_off_gui([db, a, b](QStringList* lines) { *lines = config_diff(db, a, b); },
                [this, a, b](const QString& error, const QStringList& lines) {
                  if (!error.isEmpty()) return show_message(error, true);
                  show_diff(a, b, lines);
                });
  });
  connect(tag_, &QPushButton::clicked, this, [this] {
    bool ok = false;
    const QString tag =
        QInputDialog::getText(this, tr("Tag runs"), tr("Tag:"), QLineEdit::Normal, {}, &ok)
            .trimmed();
    if (!ok || tag.isEmpty()) return;
    tag_runs(selected_runs(), tag);
  });
  connect(note_, &QPushButton::clicked, this, [this] {
    const auto ids = selected_runs();
    if (ids.size() != 1) return;
    bool ok = false;
    const QString note = QInputDialog::getMultiLineText(this, tr("Run note"), tr("Note:"), {}, &ok);
    if (!ok) return;
    note_run(ids[0], note);
  });
  connect(delete_, &QPushButton::clicked, this, [this] {
    const auto ids = selected_runs();
    if (ids.empty()) return;
    if (QMessageBox::question(this, tr("Delete runs"),
                              tr("Delete %n run(s) and everything recorded for them?", nullptr,
                                 static_cast<int>(ids.size()))) != QMessageBox::Yes) {
      return;
    }
    delete_runs(ids);
  });
  connect(replay_button_, &QPushButton::clicked, this, [this] {
    const auto ids = selected_runs();
    if (ids.size() != 1) return;
    replay_run(ids[0], speed_->currentData().toDouble());
  });
  connect(pause_, &QPushButton::clicked, this, [this] {
    if (replay_->playing()) {
      replay_->pause();
      pause_->setText(tr("Play"));
    } else {
      replay_->resume();
      pause_->setText(tr("Pause"));
    }
  });
  connect(speed_, &QComboBox::currentIndexChanged, this,
          [this] { replay_->set_speed(speed_->currentData().toDouble()); });
  connect(scrubber_, &QSlider::valueChanged, this, [this](int step) { replay_->seek(step); });
  connect(export_png, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getSaveFileName(
        this, tr("Export the plots"), QStringLiteral("runs.png"), tr("PNG images (*.png)"));
    QString error;
    if (!f.isEmpty() && !dashboard_->export_png(f, &error)) show_message(error, true);
  });
  connect(export_csv, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getSaveFileName(
        this, tr("Export the plotted data"), QStringLiteral("runs.csv"), tr("CSV files (*.csv)"));
    QString error;
    if (!f.isEmpty() && !dashboard_->export_csv(f, &error)) show_message(error, true);
  });
  export_png_ = export_png;
  export_csv_ = export_csv;
  position_->setMinimumWidth(120);
}

void HistoryView::on_selection() {
  const size_t n = selected_runs().size();
  compare_->setEnabled(n >= 1);
  diff_->setEnabled(n == 2);
  tag_->setEnabled(n >= 1);
  note_->setEnabled(n == 1);
  delete_->setEnabled(n >= 1);
  replay_button_->setEnabled(n == 1);
}

std::vector<int64_t> HistoryView::selected_runs() const {
  std::vector<int64_t> ids;
  for (const QModelIndex& idx : table_->selectionModel()->selectedRows()) {
    ids.push_back(model_->run_at(proxy_->mapToSource(idx).row()).id);
  }
  return ids;
}

void HistoryView::select_runs(const std::vector<int64_t>& ids) {
  table_->clearSelection();
  for (int64_t id : ids) {
    const int row = model_->row_of(id);
    if (row < 0) continue;
    const QModelIndex idx = proxy_->mapFromSource(model_->index(row, 0));
    table_->selectionModel()->select(idx, QItemSelectionModel::Select | QItemSelectionModel::Rows);
  }
}

void HistoryView::refresh() {
  const quint64 job = ++list_job_;
  const std::string db = db_path().toStdString();
  auto* watcher = new QFutureWatcher<ListResult>(this);
  connect(watcher, &QFutureWatcher<ListResult>::finished, this, [this, watcher, job] {
    watcher->deleteLater();
    if (job != list_job_) return;  // a newer refresh is on its way
    ListResult r = watcher->result();
    if (!r.error.isEmpty()) {
      show_message(r.error, true);
      return;
    }
    if (!r.note.isEmpty()) show_message(r.note, false);
    const auto keep = selected_runs();
    const int n = static_cast<int>(r.runs.size());
    model_->set_runs(std::move(r.runs));
    select_runs(keep);
    Q_EMIT refreshed(n);
  });
  // The first list of this studio's life stores the interrupted rule: a
  // run whose recorder died (a studio killed during its run) is marked
  // interrupted on the next start, not only shown so.
  const bool first = !marked_interrupted_;
  marked_interrupted_ = true;
  watcher->setFuture(QtConcurrent::run([db, first]() -> ListResult {
    ListResult r;
    if (first) {
      try {
        mark_interrupted_runs(db);
      } catch (const std::exception& e) {
        r.note = QStringLiteral("Runs whose process is gone could not be marked interrupted: %1")
                     .arg(QString::fromUtf8(e.what()));
      }
    }
    try {
      // Read-only once the file is there (a list never writes it); made
      // when absent, as the studio's runs are recorded in it.
      std::error_code ec;
      const HistoryStore store(db, std::filesystem::exists(db, ec) ? HistoryStore::Open::kReadOnly
                                                                   : HistoryStore::Open::kCreate);
      r.runs = store.list_runs();
    } catch (const std::exception& e) {
      r.error = QString::fromUtf8(e.what());
    }
    return r;
  }));
}

void HistoryView::overlay(const std::vector<int64_t>& ids) {
  replay_->stop();
  const quint64 job = ++overlay_job_;
  const std::string db = db_path().toStdString();
  auto* watcher = new QFutureWatcher<OverlayResult>(this);
  connect(watcher, &QFutureWatcher<OverlayResult>::finished, this, [this, watcher, job] {
    watcher->deleteLater();
    if (job != overlay_job_) return;
    const OverlayResult r = watcher->result();
    if (!r.error.isEmpty()) {
      show_message(r.error, true);
      return;
    }
    dashboard_->clear();
    for (const LoadedRun& run : r.runs) {
      dashboard_->begin_run(QString::fromStdString(run.uid), QString::fromStdString(run.name),
                            run.start_unix_s);
      dashboard_->add_events(run.events);
    }
    show_message(tr("Showing %n run(s)", nullptr, static_cast<int>(r.runs.size())));
    Q_EMIT overlay_loaded(static_cast<int>(r.runs.size()));
  });
  watcher->setFuture(QtConcurrent::run([db, ids]() -> OverlayResult {
    OverlayResult r;
    try {
      for (int64_t id : ids) r.runs.push_back(load_run_events(db, id));
    } catch (const std::exception& e) {
      r.error = QString::fromUtf8(e.what());
    }
    return r;
  }));
}


void HistoryView::run_off_gui(std::function<void(QStringList*)> work,
                              std::function<void(const QString&, const QStringList&)> done) {
  auto* watcher = new QFutureWatcher<Work>(this);
  connect(watcher, &QFutureWatcher<Work>::finished, this, [watcher, done = std::move(done)] {
    watcher->deleteLater();
    const Work w = watcher->result();
    done(w.error, w.lines);
  });
  watcher->setFuture(QtConcurrent::run([work = std::move(work)]() -> Work {
    Work w;
    try {
      work(&w.lines);
    } catch (const std::exception& e) {
      w.error = QString::fromUtf8(e.what());
    }
    return w;
  }));
}

QStringList HistoryView::diff(int64_t a, int64_t b, QString* error) const {
  try {
    return config_diff(db_path().toStdString(), a, b);
  } catch (const std::exception& e) {
    *error = QString::fromUtf8(e.what());
  }
  return {};
}

void HistoryView::show_diff(int64_t a, int64_t b, const QStringList& lines) {
  QDialog dlg(this);
  dlg.setWindowTitle(tr("Config diff: run %1 vs run %2").arg(a).arg(b));
  auto* text =
      new QPlainTextEdit(lines.isEmpty() ? tr("The configs are the same.") : lines.join('\n'));
  text->setReadOnly(true);
  auto* box = new QDialogButtonBox(QDialogButtonBox::Close);
  connect(box, &QDialogButtonBox::rejected, &dlg, &QDialog::reject);
  auto* l = new QVBoxLayout(&dlg);
  l->addWidget(text);
  l->addWidget(box);
  dlg.resize(640, 400);
  dlg.exec();
}

void HistoryView::tag_runs(const std::vector<int64_t>& ids, const QString& tag) {
  const std::string db = db_path().toStdString(), t = tag.toStdString();
  run_off_gui(
      [db, ids, t](QStringList*) {
        HistoryStore store(db, HistoryStore::Open::kExisting);
        for (int64_t id : ids) store.add_tag(id, t);
      },
      [this](const QString& error, const QStringList&) {
        if (!error.isEmpty()) show_message(error, true);
        refresh();
      });
}

void HistoryView::note_run(int64_t id, const QString& note) {
  const std::string db = db_path().toStdString(), text = note.toStdString();
  run_off_gui(
      [db, id, text](QStringList*) {
        HistoryStore store(db, HistoryStore::Open::kExisting);
        store.set_note(id, text);
      },
      [this](const QString& error, const QStringList&) {
        if (!error.isEmpty()) show_message(error, true);
        refresh();
      });
}

void HistoryView::delete_runs(const std::vector<int64_t>& ids) {
  // A run being replayed is let go first (its player reads it).
  replay_->stop();
  const std::string db = db_path().toStdString();
  show_message(tr("Deleting %n run(s)...", nullptr, static_cast<int>(ids.size())));
  run_off_gui(
      [db, ids](QStringList*) {
        HistoryStore store(db, HistoryStore::Open::kExisting);
        for (int64_t id : ids) store.remove_run(id);  // small transactions
      },
      [this, n = static_cast<int>(ids.size())](const QString& error, const QStringList&) {
        if (error.isEmpty()) {
          show_message(tr("Deleted %n run(s)", nullptr, n));
        } else {
          show_message(error, true);
        }
        refresh();
      });
}

void HistoryView::replay_run(int64_t id, double speed) {
  replay_->open(db_path(), QString::number(id), speed);
}

}  // namespace baton::ui
