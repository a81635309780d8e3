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
    QCOMPARE(p.cell(0, 5), QStringLiteral("77"));
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
};

QTEST_MAIN(RanksPanelTest)
#include "test_ranks_panel.moc"
