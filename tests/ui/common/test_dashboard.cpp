// The dashboard: events become points in the right series; a burst of
// events costs one coalesced replot, not one per event; smoothing and the
// x axis rebuild the curves without losing points; CSV export holds every
// point.
#include <qcustomplot.h>

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include "common/dashboard.h"

namespace baton::ui {

class DashboardTest : public QObject {
  Q_OBJECT
 private slots:
  void events_become_series() {
    Dashboard d;
    RunStartEvent s;
    s.run = "r1";
    s.name = "demo";
    s.replicas = 2;
    d.add_event(s);
    for (int i = 1; i <= 50; ++i) {
      StepEvent e;
      e.run = "r1";
      e.step = i;
      e.loss = 1.0 / i;
      e.accuracy = 0.5;
      e.samples_per_s = 1000;
      e.rank_samples_per_s = 1000;  // one process holds both replicas
      e.local_replicas = 2;
      e.compute_ms = 2;
      e.comm_ms = 1;
      e.wall_time_s = 0.1 * i;
      d.add_event(e);
    }
    EpochEvent ep;
    ep.run = "r1";
    ep.step = 50;
    ep.has_validation = true;
    ep.val_loss = 0.1;
    d.add_event(ep);
    LinkEvent l;
    l.run = "r1";
    l.src = 0;
    l.dst = 1;
    l.bandwidth_gbps = 3;
    d.add_event(l);
    // A traffic model's figure: its own series, dashed, named as modelled.
    LinkEvent m = l;
    m.estimated = true;
    d.add_event(m);
    QCOMPARE(d.point_count("r1", QStringLiteral("link/0->1 \u2248 (modelled)")), 1);
    bool dashed = false;
    for (int i = 0; i < d.plot(Dashboard::Plot::kLinks)->graphCount(); ++i) {
      QCPGraph* g = d.plot(Dashboard::Plot::kLinks)->graph(i);
      if (g->name().contains(QLatin1String("(modelled)")))
        dashed = g->pen().style() == Qt::DashLine;
      if (!g->name().contains(QLatin1String("(modelled)")))
        QCOMPARE(g->pen().style(), Qt::SolidLine);
    }
    QVERIFY(dashed);
    QCOMPARE(d.point_count("r1", "loss/train"), 50);
    QCOMPARE(d.point_count("r1", "loss/val"), 1);
    QCOMPARE(d.point_count("r1", "throughput/replica"), 50);
    QCOMPARE(d.point_count("r1", "time/comm"), 50);
    QCOMPARE(d.point_count("r1", "link/0->1"), 1);
    QCOMPARE(d.point_count("r1", "nothing"), 0);
    // Per replica = global / replicas.
    QCPGraph* g = nullptr;
    for (int i = 0; i < d.plot(Dashboard::Plot::kThroughput)->graphCount(); ++i) {
      if (d.plot(Dashboard::Plot::kThroughput)->graph(i)->name() == QLatin1String("replica")) {
        g = d.plot(Dashboard::Plot::kThroughput)->graph(i);
      }
    }
    QVERIFY(g != nullptr);
    QCOMPARE((g->data()->end() - 1)->value, 500.0);
    // Stacked step time: comm sits on data + compute.
    d.set_x_axis(Dashboard::XAxis::kRelative);
    d.set_smoothing(0.9);
    QCOMPARE(d.point_count("r1", "loss/train"), 50);
    QTemporaryDir dir;
    QString error;
    const QString csv = dir.filePath("d.csv");
    QVERIFY2(d.export_csv(csv, &error), qPrintable(error));
    QFile f(csv);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QList<QByteArray> lines = f.readAll().split('\n');
    // Header + 50 * (2 loss/acc + 2 throughput + 4 time) + 2 val + 2 link + trailing "".
    QCOMPARE(lines.size(), 1 + 50 * 8 + 2 + 2 + 1);
    // RFC 4180: a run id with a comma and a quote is one quoted field; the
    // values have 17 significant digits (the CLI's writer).
    {
      Dashboard q;
      RunStartEvent qs;
      qs.run = "a,b\"c";
      q.add_event(qs);
      StepEvent qe;
      qe.run = qs.run;
      qe.step = 1;
      qe.loss = 0.1 + 0.2;
      q.add_event(qe);
      const QString qcsv = dir.filePath("q.csv");
      QVERIFY2(q.export_csv(qcsv, &error), qPrintable(error));
      QFile qf(qcsv);
      QVERIFY(qf.open(QIODevice::ReadOnly));
      const QByteArray text = qf.readAll();
      QVERIFY2(text.contains("\n\"a,b\"\"c\",loss/train,1,"), text.constData());
      QVERIFY2(text.contains(",0.30000000000000004\n"), text.constData());
    }
    QVERIFY(d.export_png(dir.filePath("d.png"), &error));
    QVERIFY(QFileInfo(dir.filePath("d.png")).size() > 1000);
  }

  // parameter_server: each worker reports its own rows; the job's rate is
  // their sum, and every worker (rank 0 too) has its own series.
  void parameter_server_throughput_is_the_workers_sum() {
    Dashboard d;
    RunStartEvent s;
    s.run = "ps";
    s.strategy = "parameter_server";
    s.replicas = 2;
    d.add_event(s);
    for (int step = 1; step <= 3; ++step) {
      for (int rank : {1, 0}) {
        StepEvent e;
        e.run = "ps";
        e.step = step;
        e.rank = rank;
        e.replica = rank;
        e.local_replicas = 1;
        e.samples_per_s = e.rank_samples_per_s = rank == 0 ? 300 : 500;
        d.add_event(e);
      }
    }
    QCOMPARE(d.point_count("ps", "throughput/global"), 3);
    QCOMPARE(d.point_count("ps", "throughput/rank 0"), 3);
    QCOMPARE(d.point_count("ps", "throughput/rank 1"), 3);
    QCPGraph* global = nullptr;
    QCustomPlot* plot = d.plot(Dashboard::Plot::kThroughput);
    for (int i = 0; i < plot->graphCount(); ++i) {
      if (plot->graph(i)->name() == QLatin1String("global")) global = plot->graph(i);
    }
    QVERIFY(global != nullptr);
    QCOMPARE((global->data()->end() - 1)->value, 800.0);
  }

  void a_burst_costs_one_replot() {
    Dashboard d;
    d.show();
    const int before = d.replot_count();
    for (int i = 1; i <= 1000; ++i) {
      StepEvent e;
      e.run = "burst";
      e.step = i;
      e.loss = 1;
      d.add_event(e);
    }
    // The coalescing timer fires once, 33 ms after the first event.
    QTRY_VERIFY(d.replot_count() > before);
    QCOMPARE(d.replot_count(), before + 1);
    QCOMPARE(d.point_count("burst", "loss/train"), 1000);
  }
};

}  // namespace baton::ui

QTEST_MAIN(baton::ui::DashboardTest)
#include "test_dashboard.moc"
