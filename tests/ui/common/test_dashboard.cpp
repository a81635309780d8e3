// The dashboard: events become points in the right series; a burst of
// events costs one coalesced replot, not one per event; smoothing and the
// x axis rebuild the curves without losing points; CSV export holds every
// point.
#include <qcustomplot.h>

#include <QDir>
#include <QFile>
#include <QPlainTextEdit>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

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
    // Messages under MPI's eager limit: their own series, named latency-bound.
    LinkEvent eager = l;
    eager.eager = true;
    eager.bandwidth_gbps = 90;
    d.add_event(eager);
    QCOMPARE(d.point_count("r1", QStringLiteral("link/0->1 (eager, latency-bound)")), 1);
    bool dashed = false, dotted = false;
    for (int i = 0; i < d.plot(Dashboard::Plot::kLinks)->graphCount(); ++i) {
      QCPGraph* g = d.plot(Dashboard::Plot::kLinks)->graph(i);
      if (g->name().contains(QLatin1String("(modelled)"))) {
        dashed = g->pen().style() == Qt::DashLine;
      } else if (g->name().contains(QLatin1String("(eager"))) {
        dotted = g->pen().style() == Qt::DotLine;
      } else {
        QCOMPARE(g->pen().style(), Qt::SolidLine);
      }
    }
    QVERIFY(dashed);
    QVERIFY(dotted);
    QCOMPARE(d.point_count("r1", "loss/train"), 50);
    QCOMPARE(d.point_count("r1", "loss/val"), 1);
    QCOMPARE(d.point_count("r1", "throughput/replica"), 50);
    QCOMPARE(d.point_count("r1", "time/comm"), 50);
    QCOMPARE(d.point_count("r1", "link/0->1"), 1);
    QCOMPARE(d.point_count("r1", "nothing"), 0);
    // Not a language model: no perplexity, no right-hand axis.
    QCOMPARE(d.point_count("r1", "ppl/val"), 0);
    QVERIFY(!d.plot(Dashboard::Plot::kLoss)->yAxis2->visible());
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
    // Header + 50 * (2 loss/acc + 2 throughput + 4 time) + 2 val + 3 link (measured,
    // modelled, eager) + trailing "".
    QCOMPARE(lines.size(), 1 + 50 * 8 + 2 + 3 + 1);
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

  // A run on GPUs: each GPU's utilisation and memory (% of its total) on
  // the GPUs plot, which shows once a device event comes; an emulated
  // GPU's memory only (its utilisation is not known), named so.
  void gpus_show_their_utilisation_and_memory() {
    Dashboard d;
    d.begin_run(QStringLiteral("g"), QStringLiteral("g"), 1000);
    QVERIFY(d.plot(Dashboard::Plot::kDevices)->isHidden());
    for (int step = 0; step < 20; step += 5) {
      StepEvent s;
      s.run = "g";
      s.step = step;
      s.loss = 1.0 / (step + 1);
      d.add_event(s);
      DeviceEvent e{"g", step, "gpu:0", 40.0 + step, 20000, 80000, 300, 60, false};
      d.add_event(e);
      DeviceEvent emu{"g", step, "gpu_emulated:1", -1, 1024.0 + 100 * step, 4096, -1, -1, true};
      d.add_event(emu);
    }
    QVERIFY(!d.plot(Dashboard::Plot::kDevices)->isHidden());
    QCOMPARE(d.point_count("g", QStringLiteral("gpu/gpu:0 utilisation")), 4);
    QCOMPARE(d.point_count("g", QStringLiteral("gpu/gpu:0 memory")), 4);
    QCOMPARE(d.point_count("g", QStringLiteral("gpu/gpu_emulated:1 (emulated) memory")), 4);
    QCOMPARE(d.point_count("g", QStringLiteral("gpu/gpu_emulated:1 (emulated) utilisation")), 0);
    QCOMPARE(d.plot(Dashboard::Plot::kDevices)->graphCount(), 3);
    d.resize(1200, 900);
    d.replot_now();
    QCOMPARE(d.plot(Dashboard::Plot::kDevices)->yAxis->range().upper, 100.0);
    QDir().mkpath(QStringLiteral(BATON_UI_TEST_OUTPUT "/screenshots"));
    QVERIFY(d.grab().save(QStringLiteral(BATON_UI_TEST_OUTPUT "/screenshots/gpus.png")));
    d.clear();
    QVERIFY(d.plot(Dashboard::Plot::kDevices)->isHidden());
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

  // A language model: throughput in tokens/s (samples/s times its window),
  // the validation loss's legend with perplexity and bits per byte, and
  // its samples in the Samples panel (shown once one arrives).
  void a_language_model_shows_tokens_perplexity_and_samples() {
    Dashboard d;
    QVERIFY(d.samples_panel()->isHidden());
    RunStartEvent s;
    s.run = "lm";
    s.tokens_per_sample = 128;
    d.add_event(s);
    StepEvent e;
    e.run = "lm";
    e.step = 10;
    e.samples_per_s = e.rank_samples_per_s = 100;
    e.loss = 2.0;
    d.add_event(e);
    EpochEvent ep;
    ep.run = "lm";
    ep.step = 10;
    ep.has_validation = true;
    ep.val_loss = std::log(4.5);
    d.add_event(ep);
    SampleEvent sm;
    sm.run = "lm";
    sm.step = 10;
    sm.prompt = "And God";
    sm.text = " said, Let there be light";
    d.add_event(sm);
    QCPGraph* global = nullptr;
    QCPGraph* val = nullptr;
    QCPGraph* ppl = nullptr;
    for (QCustomPlot* p : {d.plot(Dashboard::Plot::kThroughput), d.plot(Dashboard::Plot::kLoss)}) {
      for (int i = 0; i < p->graphCount(); ++i) {
        if (p->graph(i)->name() == QLatin1String("global")) global = p->graph(i);
        if (p->graph(i)->name().startsWith(QLatin1String("val ("))) val = p->graph(i);
        if (p->graph(i)->name() == QLatin1String("val perplexity")) ppl = p->graph(i);
      }
    }
    QVERIFY(global != nullptr);
    QCOMPARE((global->data()->end() - 1)->value, 12800.0);
    QVERIFY(val != nullptr);
    QVERIFY2(val->name().contains(QLatin1String("ppl 4.50")), qPrintable(val->name()));
    // Perplexity is a plot too: on the loss plot's right-hand axis.
    QVERIFY(ppl != nullptr);
    QCustomPlot* loss = d.plot(Dashboard::Plot::kLoss);
    QCOMPARE(ppl->valueAxis(), loss->yAxis2);
    QVERIFY(loss->yAxis2->visible());
    QCOMPARE(ppl->data()->size(), 1);
    QCOMPARE(ppl->data()->begin()->value, 4.5);
    QVERIFY(!d.samples_panel()->isHidden());
    QCOMPARE(d.sample_count(), 1);
    QVERIFY2(d.samples_panel()->toPlainText().contains(QLatin1String("And God said, Let there")),
             qPrintable(d.samples_panel()->toPlainText()));
    d.clear();
    QVERIFY(d.samples_panel()->isHidden());
    QCOMPARE(d.sample_count(), 0);
  }

  // A restart the launcher reported: a marker on every plot at the step the
  // job had reached, moved with the x axis, gone with clear().
  void restarts_are_marked_on_every_plot() {
    Dashboard d;
    d.begin_run(QStringLiteral("r1"), QStringLiteral("demo"), 1000.0);
    for (int i = 1; i <= 200; ++i) {
      StepEvent e;
      e.run = "r1";
      e.step = i;
      e.loss = 2.0 / std::sqrt(static_cast<double>(i));
      e.accuracy = 0.5;
      e.samples_per_s = 1000;
      e.wall_time_s = 0.05 * i;
      d.add_event(e);
    }
    d.mark_restart(QStringLiteral("r1"), 120, 7.5, QStringLiteral("rank 1 was killed"));
    // For a look: the marker drawn (the build's ui test output folder).
    d.resize(1200, 800);
    d.replot_now();
    QDir().mkpath(QStringLiteral(BATON_UI_TEST_OUTPUT "/screenshots"));
    QVERIFY(d.grab().save(QStringLiteral(BATON_UI_TEST_OUTPUT "/screenshots/restart.png")));
    QCOMPARE(d.restart_marker_count(), 1);
    QCOMPARE(d.restart_marker_x(0), 120.0);
    for (int p = 0; p < static_cast<int>(Dashboard::Plot::kCount); ++p) {
      QCOMPARE(d.plot(static_cast<Dashboard::Plot>(p))->itemCount(), p == 0 ? 2 : 1);
    }
    d.set_x_axis(Dashboard::XAxis::kRelative);
    QCOMPARE(d.restart_marker_x(0), 7.5);
    d.set_x_axis(Dashboard::XAxis::kWall);
    QCOMPARE(d.restart_marker_x(0), 1007.5);
    d.clear();
    QCOMPARE(d.restart_marker_count(), 0);
    QCOMPARE(d.plot(Dashboard::Plot::kLoss)->itemCount(), 0);
  }

  // A replay's second run_start of a run (a restart recorded in the
  // history) marks the boundary where the first attempt's steps ended; a
  // restart the launcher already marked live is not marked twice.
  void a_replayed_restart_is_marked_once() {
    const auto steps = [](Dashboard& d, int from, int to) {
      for (int i = from; i <= to; ++i) {
        StepEvent e;
        e.run = "r1";
        e.step = i;
        e.loss = 1.0;
        e.samples_per_s = 100;
        e.wall_time_s = 0.1 * i;
        d.add_event(e);
      }
    };
    RunStartEvent first;
    first.run = "r1";
    RunStartEvent resumed = first;
    resumed.start_step = 100;
    {
      Dashboard d;
      d.add_event(first);
      steps(d, 1, 130);
      d.add_event(resumed);
      QCOMPARE(d.restart_marker_count(), 1);
      QCOMPARE(d.restart_marker_x(0), 100.0);
      d.set_x_axis(Dashboard::XAxis::kRelative);
      QCOMPARE(d.restart_marker_x(0), 13.0);  // the last step's time before it
    }
    {
      Dashboard d;
      d.add_event(first);
      steps(d, 1, 130);
      d.mark_restart(QStringLiteral("r1"), 130, 13.0, QStringLiteral("rank 1 was killed"));
      d.add_event(resumed);
      steps(d, 100, 150);
      QCOMPARE(d.restart_marker_count(), 1);
      d.add_event(resumed);  // a second restart, not marked live
      QCOMPARE(d.restart_marker_count(), 2);
    }
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

  // Compare: every run's entries carry its name, the first's too (it had
  // none once a second run came), and no run's step-time fill is opaque
  // over another's.
  void compared_runs_are_named_and_see_through() {
    Dashboard d;
    for (const char* id : {"first", "second"}) {
      d.begin_run(QString::fromLatin1(id), QString::fromLatin1(id), 1000);
      StepEvent e;
      e.run = id;
      e.step = 1;
      e.loss = 1;
      e.data_ms = e.compute_ms = e.comm_ms = e.optimizer_ms = 1;
      d.add_event(e);
    }
    int named = 0;
    for (int p = 0; p < static_cast<int>(Dashboard::Plot::kCount); ++p) {
      QCustomPlot* plot = d.plot(static_cast<Dashboard::Plot>(p));
      for (int i = 0; i < plot->graphCount(); ++i) {
        const QString name = plot->graph(i)->name();
        QVERIFY2(
            name.startsWith(QLatin1String("first ")) || name.startsWith(QLatin1String("second ")),
            qPrintable(name));
        if (name.startsWith(QLatin1String("first "))) ++named;
        if (p == static_cast<int>(Dashboard::Plot::kStepTime)) {
          QVERIFY2(plot->graph(i)->brush().color().alpha() <= 60, qPrintable(name));
        }
      }
    }
    QVERIFY(named >= 4);
  }

  // A run of a million steps: every series holds at most kMaxPoints buckets
  // (min/max/last, as the history's rollups), the count of what arrived is
  // exact, the newest value is drawn, and a smoothing change stays bounded.
  void a_long_run_is_decimated_to_a_bounded_size() {
    Dashboard d;
    std::vector<Event> batch;
    batch.reserve(10000);
    for (int64_t step = 1; step <= 1000000; ++step) {
      StepEvent e;
      e.run = "long";
      e.step = step;
      e.loss = 1.0 / static_cast<double>(step);
      e.samples_per_s = 100;
      e.data_ms = e.compute_ms = 1;
      e.wall_time_s = 0.001 * static_cast<double>(step);
      batch.push_back(e);
      if (batch.size() == 10000) {
        d.add_events(batch);
        batch.clear();
      }
    }
    QCOMPARE(d.point_count("long", "loss/train"), 1000000);
    for (const char* s : {"loss/train", "throughput/global", "time/data", "time/compute"}) {
      QVERIFY2(d.held_points("long", s) <= Dashboard::kMaxPoints, s);
      QVERIFY2(d.held_points("long", s) > Dashboard::kMaxPoints / 4, s);
    }
    d.set_smoothing(0);
    QCPGraph* loss = d.plot(Dashboard::Plot::kLoss)->graph(0);
    QVERIFY(loss->dataCount() <= Dashboard::kMaxPoints);
    QCOMPARE((loss->data()->end() - 1)->key, 1000000.0);
    QCOMPARE((loss->data()->end() - 1)->value, 1e-6);
    // Stacked parts still stack: compute sits on data.
    QCPGraph* compute = nullptr;
    for (int i = 0; i < d.plot(Dashboard::Plot::kStepTime)->graphCount(); ++i) {
      if (d.plot(Dashboard::Plot::kStepTime)->graph(i)->name() == QLatin1String("compute")) {
        compute = d.plot(Dashboard::Plot::kStepTime)->graph(i);
      }
    }
    QVERIFY(compute != nullptr);
    QCOMPARE((compute->data()->end() - 1)->value, 2.0);
  }
};

}  // namespace baton::ui

QTEST_MAIN(baton::ui::DashboardTest)
#include "test_dashboard.moc"
