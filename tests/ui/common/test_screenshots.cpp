// Renders each of the studio's three views, with data in them, to PNG files
// in the build tree (tests/ui/screenshots/): the Train view after a real
// embedded digits run, the Cluster view with this host and its links
// coloured by that run's bandwidth, the History view with the run overlaid.
// Each image must exist and not be blank.
#include <QDir>
#include <QImage>
#include <QSet>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTabWidget>
#include <QtTest>

#include "cluster/cluster_view.h"
#include "cluster/prediction_panel.h"
#include "cluster/topology_items.h"
#include "cluster/topology_model.h"
#include "cluster/topology_scene.h"
#include "common/dashboard.h"
#include "common/main_window.h"
#include "history/history_view.h"
#include "history/run_table_model.h"
#include "train/ranks_panel.h"
#include "train/run_form.h"
#include "train/train_view.h"
#include "ui_test_support.h"

namespace baton::ui {
namespace {

// Distinct colours in a coarse grid of samples: a blank grab has 1-2.
int colours(const QImage& img) {
  QSet<QRgb> seen;
  for (int y = 0; y < img.height(); y += 4) {
    for (int x = 0; x < img.width(); x += 4) seen.insert(img.pixel(x, y));
  }
  return static_cast<int>(seen.size());
}

void save_view(QWidget& w, const QString& name) {
  const QString dir = QStringLiteral(BATON_UI_TEST_OUTPUT "/screenshots");
  QVERIFY(QDir().mkpath(dir));
  const QString path = dir + QLatin1Char('/') + name;
  const QImage img = w.grab().toImage();
  QVERIFY2(img.save(path, "PNG"), qPrintable(path));
  QVERIFY(QFileInfo(path).size() > 5000);
  QVERIFY2(colours(img) > 30, qPrintable(name + ": looks blank"));
}

}  // namespace

class ScreenshotTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void renders_each_view_filled() {  // (a name ending in _data would be a QtTest data function)
    QTemporaryDir dir;
    MainWindow w(test_context(dir));
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));

    // Train: a short digits run, embedded, mirrored over this host's cores
    // (2 replicas or more: their links carry traffic the Cluster view shows).
    w.topology().set_strategy(QStringLiteral("mirrored"));
    if (w.topology().replica_count() < 2) QSKIP("mirrored needs 2 CPU cores here for a link");
    w.show_view(MainWindow::View::kTrain);
    // digits.json says one_device: the form asks, and the user picks the
    // Cluster view's mirrored.
    QVERIFY(w.train_view().form().strategy_conflict());
    w.train_view().form().use_cluster_strategy();
    w.train_view().form().epochs_spin()->setValue(4);
    // One replica per core: a many-core machine needs a global batch of
    // at least one row per replica (the form refuses less).
    const int replicas = w.topology().replica_count();
    if (replicas > 64) {
      QVERIFY(!w.train_view().form().valid());
      QVERIFY(w.train_view().form().errors().contains(QStringLiteral("batch")));
      w.train_view().form().batch_spin()->setValue(replicas);
    }
    QVERIFY2(w.train_view().form().valid(), qPrintable(w.train_view().form().first_error()));
    QSignalSpy finished(&w.train_view(), &TrainView::run_finished);
    w.train_view().start();
    QVERIFY2(finished.wait(120000), qPrintable(w.train_view().status_text()));
    QVERIFY2(finished.at(0).at(1).toString() == QStringLiteral("completed"),
             qPrintable(w.train_view().status_text()));
    save_view(w, QStringLiteral("train.png"));

    // The run's link events coloured the ring's first link.
    w.show_view(MainWindow::View::kCluster);
    const LinkItem* link = w.cluster_view().scene().link_item(0, 1);
    QVERIFY(link != nullptr);
    QVERIFY2(link->bandwidth_gbps() > 0.0, "the run's link events did not reach the canvas");
    save_view(w, QStringLiteral("cluster.png"));

    // History: the run lands there (run_finished refreshes it); overlay it.
    w.show_view(MainWindow::View::kHistory);
    HistoryView& h = w.history_view();
    QTRY_COMPARE_WITH_TIMEOUT(h.model().rowCount(), 1, 10000);
    h.select_runs({h.model().run_at(0).id});
    QSignalSpy loaded(&h, &HistoryView::overlay_loaded);
    h.overlay(h.selected_runs());
    QVERIFY(loaded.wait(10000));
    // The coalesced replot follows within ~33 ms.
    const int replots = h.dashboard().replot_count();
    QTRY_VERIFY(h.dashboard().replot_count() > replots);
    save_view(w, QStringLiteral("history.png"));

    // Cluster, Prediction tab: the model measured here, the topology's
    // prediction, and the run above as a measured point on the chart (the
    // same model at the same per-device batch).
    w.show_view(MainWindow::View::kCluster);
    w.cluster_view().show_prediction_tab();
    PredictionPanel& p = w.cluster_view().prediction();
    QSignalSpy measured(&p, &PredictionPanel::measured);
    p.measure();
    QVERIFY(measured.wait(120000));
    QVERIFY2(p.summary().contains(QLatin1String("modelled")), qPrintable(p.summary()));
    QCOMPARE(p.predicted_points(), 10);
    QCOMPARE(p.measured_points(), 1);
    QTest::qWait(100);  // the queued replot (rpQueuedReplot) before the grab
    save_view(w, QStringLiteral("prediction.png"));
  }

  // A run launched as 2 processes: the Ranks tab lists both, running, with
  // their hosts and steps; Stop ends it.
  void renders_a_launched_runs_ranks() {
    QTemporaryDir dir;
    MainWindow w(test_context(dir));
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.topology().set_strategy(QStringLiteral("multi_worker_mirrored"));
    QVERIFY(w.topology().multi_process());
    w.show_view(MainWindow::View::kTrain);
    TrainView& t = w.train_view();
    t.form().use_cluster_strategy();
    t.form().epochs_spin()->setValue(2000);
    QVERIFY2(t.form().valid(), qPrintable(t.form().first_error()));
    auto* tabs = t.findChild<QTabWidget*>(QStringLiteral("log_tabs"));
    QVERIFY(tabs != nullptr);
    tabs->setCurrentIndex(1);
    QSignalSpy finished(&t, &TrainView::run_finished);
    t.start();
    const int ranks = w.topology().process_count();
    QTRY_VERIFY_WITH_TIMEOUT(t.ranks().row_count() == ranks &&
                                 t.ranks().cell(ranks - 1, 2) == QLatin1String("running") &&
                                 t.ranks().cell(0, 3).toLongLong() > 50,
                             60000);
    QVERIFY(!t.ranks().cell(0, 1).isEmpty());  // the host
    save_view(w, QStringLiteral("ranks.png"));
    t.stop();
    QVERIFY(finished.wait(60000));
    QCOMPARE(finished.at(0).at(1).toString(), QStringLiteral("interrupted"));
    QTRY_VERIFY_WITH_TIMEOUT(t.ranks().cell(0, 2) == QLatin1String("stopped"), 10000);
  }
};

}  // namespace baton::ui

QTEST_MAIN(baton::ui::ScreenshotTest)
#include "test_screenshots.moc"
