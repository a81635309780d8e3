// The main window: three views, switched by the side bar and by Ctrl+1/2/3.
#include <QListWidget>
#include <QSignalSpy>
#include <QtTest>

#include "common/main_window.h"
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
};

}  // namespace baton::ui

QTEST_MAIN(baton::ui::MainWindowTest)
#include "test_main_window.moc"
