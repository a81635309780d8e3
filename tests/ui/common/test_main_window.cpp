// The main window: three views, switched by the side bar and by Ctrl+1/2/3.
#include <QListWidget>
#include <QSignalSpy>
#include <QtTest>

#include "cluster/cluster_view.h"
#include "cluster/topology_items.h"
#include "cluster/topology_scene.h"
#include "common/main_window.h"
#include "train/train_view.h"
#include "ui_test_support.h"

namespace baton::ui {

class MainWindowTest : public QObject {
  Q_OBJECT
 private slots:
  void switches_views() {
    QTemporaryDir dir;
    MainWindow w(test_context(dir));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.show_view(MainWindow::View::kHistory);
    QCOMPARE(w.current_view(), MainWindow::View::kHistory);
    QTest::keyClick(&w, Qt::Key_1, Qt::ControlModifier);
    QCOMPARE(w.current_view(), MainWindow::View::kCluster);
    QTest::keyClick(&w, Qt::Key_2, Qt::ControlModifier);
    QCOMPARE(w.current_view(), MainWindow::View::kTrain);
  }

  // A run's link colours are cleared when it ends (they stayed on the
  // canvas after it, and after edits).
  void link_colours_end_with_the_run() {
    QTemporaryDir dir;
    MainWindow w(test_context(dir));
    TopologyScene& scene = w.cluster_view().scene();
    const int src = 0, dst = 1;  // drawn for the figure when the ring has no such link
    Q_EMIT w.train_view().link_bandwidth(src, dst, 7.5, false, false);
    QVERIFY(scene.link_item(src, dst) != nullptr);
    QCOMPARE(scene.link_item(src, dst)->bandwidth_gbps(), 7.5);
    Q_EMIT w.train_view().run_finished(QStringLiteral("r"), QStringLiteral("completed"));
    QTRY_VERIFY(scene.link_item(src, dst) == nullptr ||
                scene.link_item(src, dst)->bandwidth_gbps() < 0);
  }
};

}  // namespace baton::ui

QTEST_MAIN(baton::ui::MainWindowTest)
#include "test_main_window.moc"
