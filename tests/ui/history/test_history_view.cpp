// The History view over a real store: the table model passes
// QAbstractItemModelTester, sorts and filters; selected runs overlay on the
// dashboard; two configs diff key by key; a run replays through the live
// dashboard path to the same points it recorded, and the scrubber seeks.
#include <baton/history/sink.h>
#include <baton/history/store.h>

#include <QAbstractItemModelTester>
#include <QLineEdit>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QtTest>

#include "common/dashboard.h"
#include "history/history_view.h"
#include "history/replay_controller.h"
#include "history/run_table_model.h"
#include "ui_test_support.h"

namespace baton::ui {
namespace {

// Records a run of `steps` step events (every step), a validation epoch at
// the end and a link sample.
void record(const std::string& db, const std::string& uid, const std::string& strategy, double lr,
            int steps) {
  HistorySink sink(db);
  RunStartEvent s;
  s.run = uid;
  s.name = "demo";
  s.strategy = strategy;
  s.replicas = 2;
  s.total_steps = steps;
  s.config = {{"name", "demo"}, {"optimizer", {{"type", "adam"}, {"lr", lr}}}};
  sink.emit(s);
  for (int i = 1; i <= steps; ++i) {
    StepEvent e;
    e.run = uid;
    e.step = i;
    e.loss = 2.0 / i;
    e.accuracy = 1.0 - 1.0 / (i + 1);
    e.samples_per_s = 1000;
    e.wall_time_s = 0.01 * i;
    sink.emit(e);
  }
  EpochEvent ep;
  ep.run = uid;
  ep.step = steps;
  ep.has_validation = true;
  ep.val_loss = 0.3;
  ep.val_accuracy = 0.9;
  sink.emit(ep);
  LinkEvent l;
  l.run = uid;
  l.step = steps;
  l.src = 0;
  l.dst = 1;
  l.num_bytes = 1 << 20;
  l.seconds = 0.001;
  l.bandwidth_gbps = 1.048576;
  sink.emit(l);
  RunEndEvent end;
  end.run = uid;
  end.status = "completed";
  end.step = steps;
  end.train_loss = 2.0 / steps;
  end.has_validation = true;
  end.val_accuracy = 0.9;
  end.samples_per_s = 1000;
  sink.emit(end);
  sink.close();
}

}  // namespace

class HistoryViewTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void lists_overlays_diffs_and_replays() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    const std::string db = ctx.history_db.toStdString();
    record(db, "run-a", "mirrored", 0.01, 40);
    record(db, "run-b", "one_device", 0.001, 60);

    HistoryView view(ctx);
    QAbstractItemModelTester tester(&view.model(),
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy refreshed(&view, &HistoryView::refreshed);
    if (view.model().rowCount() == 0) QVERIFY(refreshed.wait(10000));
    QCOMPARE(view.model().rowCount(), 2);

    // Sorting by a number column sorts numbers; the filter matches any column.
    view.table().sortByColumn(RunTableModel::kLoss, Qt::AscendingOrder);
    auto* proxy = qobject_cast<QSortFilterProxyModel*>(view.table().model());
    QVERIFY(proxy != nullptr);
    QCOMPARE(proxy->index(0, RunTableModel::kStrategy).data().toString(),
             QStringLiteral("one_device"));
    view.findChild<QLineEdit*>(QStringLiteral("filter"))->setText(QStringLiteral("mirrored"));
    QCOMPARE(proxy->rowCount(), 1);
    view.findChild<QLineEdit*>(QStringLiteral("filter"))->clear();
    QCOMPARE(proxy->rowCount(), 2);

    // Overlay both.
    const int64_t a = view.model().run_at(view.model().row_of(1)).id;
    const int64_t b = view.model().run_at(view.model().row_of(2)).id;
    view.select_runs({a, b});
    QCOMPARE(view.selected_runs().size(), size_t{2});
    QSignalSpy loaded(&view, &HistoryView::overlay_loaded);
    view.overlay(view.selected_runs());
    QVERIFY(loaded.wait(10000));
    QCOMPARE(loaded.at(0).at(0).toInt(), 2);
    QCOMPARE(view.dashboard().point_count("run-a", "loss/train"), 40);
    QCOMPARE(view.dashboard().point_count("run-b", "loss/train"), 60);
    QCOMPARE(view.dashboard().point_count("run-b", "accuracy/val"), 1);
    QCOMPARE(view.dashboard().point_count("run-a", "link/0->1"), 1);
    // One process with 2 replicas: no per-rank series (it had one, as if
    // each rank held 1 of 2 replicas).
    QCOMPARE(view.dashboard().point_count("run-a", "throughput/rank 0"), 0);

    // The configs differ in the learning rate only.
    QString error;
    const QStringList lines = view.diff(a, b, &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(lines.size(), 1);
    QVERIFY2(lines[0].contains(QLatin1String("optimizer.lr")), qPrintable(lines[0]));

    // Replay at full speed: the same points as recorded. The run opens off
    // the GUI thread (opened), and the wall-clock axis is the run's own.
    QSignalSpy opened(&view.replay(), &ReplayController::opened);
    QSignalSpy failed(&view.replay(), &ReplayController::failed);
    QSignalSpy ended(&view.replay(), &ReplayController::ended);
    view.replay_run(b, 0);
    QVERIFY(view.replay().opening());
    QVERIFY(opened.wait(10000));
    QCOMPARE(opened.at(0).at(0).toLongLong(), 60);
    QTRY_COMPARE_WITH_TIMEOUT(ended.count(), 1, 10000);
    QCOMPARE(view.dashboard().point_count("run-b", "loss/train"), 60);
    QCOMPARE(view.replay().last_step(), 60);
    {
      const HistoryStore store(db, HistoryStore::Open::kReadOnly);
      QCOMPARE(view.dashboard().start_unix_s("run-b"), store.run(b).start_time);  // not today
    }
    // Scrub back to step 30 (paused): the run up to there, read off the GUI
    // thread, then it stays there.
    view.replay().seek(30);
    QTRY_COMPARE_WITH_TIMEOUT(view.dashboard().point_count("run-b", "loss/train"), 29, 10000);
    QTest::qWait(100);
    QCOMPARE(view.dashboard().point_count("run-b", "loss/train"), 29);
    // Play from there: exactly the rest, once (every recorded point, none
    // twice, none skipped).
    ended.clear();
    view.replay().resume();
    QTRY_COMPARE_WITH_TIMEOUT(ended.count(), 1, 10000);
    QCOMPARE(view.dashboard().point_count("run-b", "loss/train"), 60);
    QCOMPARE(view.dashboard().point_count("run-b", "accuracy/val"), 1);
    QCOMPARE(failed.count(), 0);

    // An unknown run is a message, not a crash.
    view.replay_run(999, 1);
    QVERIFY(failed.wait(10000));
    QVERIFY2(failed.at(0).at(0).toString().contains(QLatin1String("999")),
             qPrintable(failed.at(0).at(0).toString()));
    QVERIFY2(view.message().contains(QLatin1String("999")), qPrintable(view.message()));

    // Deleting a run (off the GUI thread, while it is being replayed and
    // paused) removes it from the table; nothing throws out of a slot.
    opened.clear();
    view.replay_run(a, 1);
    QVERIFY(opened.wait(10000));
    view.replay().pause();
    refreshed.clear();
    view.delete_runs({a});
    QVERIFY(refreshed.wait(10000));
    QCOMPARE(view.model().rowCount(), 1);
    view.replay().resume();  // the replay was let go: nothing to resume
    QVERIFY(!view.replay().playing());
    // Tag and note, off the GUI thread too.
    refreshed.clear();
    view.tag_runs({b}, QStringLiteral("kept"));
    QVERIFY(refreshed.wait(10000));
    QCOMPARE(view.model().run_at(0).tags, std::vector<std::string>{"kept"});
  }

  void a_foreign_database_is_a_message() {
    QTemporaryDir dir;
    StudioContext ctx = test_context(dir);
    ctx.history_db = dir.filePath("not-a-db.txt");
    QFile f(ctx.history_db);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("hello, this is not SQLite\n");
    f.close();
    HistoryView view(ctx);
    QTRY_VERIFY_WITH_TIMEOUT(!view.message().isEmpty(), 10000);
    QVERIFY2(view.message().contains(QLatin1String("not-a-db.txt")), qPrintable(view.message()));
    QCOMPARE(view.model().rowCount(), 0);
    QFile again(ctx.history_db);
    QVERIFY(again.open(QIODevice::ReadOnly));
    QCOMPARE(again.readAll(), QByteArray("hello, this is not SQLite\n"));
  }
};

}  // namespace baton::ui

QTEST_MAIN(baton::ui::HistoryViewTest)
#include "test_history_view.moc"
