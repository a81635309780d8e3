// The Ranks panel: a launcher's "ranks" event becomes a table row per rank
// (host, state, step, heartbeat age, pid); entries without a rank are
// left out; a run without ranks says why.
#include <QtTest/QtTest>

#include "train/ranks_panel.h"

using namespace baton::ui;

class RanksPanelTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void rows_come_from_the_launchers_event() {
    const auto rows = rank_rows_from_json(nlohmann::json::parse(R"([
      {"rank": 0, "host": "hostA", "state": "running", "step": 120, "beat_age_s": 0.4, "pid": 77},
      {"rank": 1, "host": "hostB", "state": "starting"},
      {"host": "no rank"}, 5
    ])"));
    QCOMPARE(rows.size(), size_t{2});
    QCOMPARE(rows[0].host, QStringLiteral("hostA"));
    QCOMPARE(rows[0].step, qint64{120});
    QCOMPARE(rows[1].beat_age_s, -1.0);
    QVERIFY(rank_rows_from_json(nlohmann::json::object()).empty());

    RanksPanel p;
    p.set_ranks(2, 2, rows);
    QCOMPARE(p.row_count(), 2);
    QCOMPARE(p.cell(0, 1), QStringLiteral("hostA"));
    QCOMPARE(p.cell(0, 2), QStringLiteral("running"));
    QCOMPARE(p.cell(0, 3), QStringLiteral("120"));
    QCOMPARE(p.cell(0, 4), QStringLiteral("0.4 s ago"));
    QCOMPARE(p.cell(0, 6), QStringLiteral("77"));
    QCOMPARE(p.cell(0, 5), QString());  // no step events yet: no straggler
    QCOMPARE(p.cell(1, 3), QStringLiteral("-"));
    QCOMPARE(p.cell(1, 4), QStringLiteral("none yet"));
    QVERIFY(p.note().contains(QLatin1String("Attempt 2")));
    // Fewer ranks in the next snapshot (an elastic job shrank): fewer rows.
    p.set_ranks(3, 1, {rows[0]});
    QCOMPARE(p.row_count(), 1);
    p.clear(QStringLiteral("threads: no ranks"));
    QCOMPARE(p.row_count(), 0);
    QCOMPARE(p.note(), QStringLiteral("threads: no ranks"));
  }

  void a_rank_whose_compute_lags_is_marked_with_the_phase() {
    const auto rows = rank_rows_from_json(nlohmann::json::parse(R"([
      {"rank": 0, "state": "running"}, {"rank": 1, "state": "running"},
      {"rank": 2, "state": "running"}])"));
    RanksPanel p;
    p.set_ranks(1, 3, rows);
    const auto step = [&](int rank, double data, double compute) {
      baton::StepEvent e;
      e.rank = rank;
      e.step = 10;
      e.data_ms = data;
      e.compute_ms = compute;
      e.comm_ms = 50;  // the others wait here: not judged
      p.take_step(e);
    };
    step(0, 1.0, 10.0);
    step(1, 1.0, 10.5);
    step(2, 1.1, 16.0);
    // The column follows within 200 ms (not per event).
    QTRY_VERIFY2(p.cell(2, 5).startsWith(QLatin1String("compute +")), qPrintable(p.cell(2, 5)));
    QCOMPARE(p.cell(0, 5), QString());
    QCOMPARE(p.cell(1, 5), QString());
    // It catches up: the mark goes.
    step(2, 1.0, 10.2);
    QTRY_COMPARE(p.cell(2, 5), QString());
    // Its data loading lags instead.
    step(1, 9.0, 10.0);
    QTRY_VERIFY2(p.cell(1, 5).startsWith(QLatin1String("data +")), qPrintable(p.cell(1, 5)));
    p.reset_phases();
    QCOMPARE(p.cell(1, 5), QString());
  }
};

QTEST_MAIN(RanksPanelTest)
#include "test_ranks_panel.moc"
