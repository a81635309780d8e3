// baton-studio: the desktop studio. Wiring only: finds the plugins, the CLI
// and the examples next to this executable (the same layout in the build
// tree and when installed) and opens the main window.
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QIcon>
#include <QTimer>
#include <cstdio>

#include "common/main_window.h"
#include "train/run_form.h"
#include "train/train_view.h"

namespace {

// The first of `candidates` (relative to the executable's directory) that
// exists.
QString beside_exe(const QStringList& candidates) {
  const QDir bin(QCoreApplication::applicationDirPath());
  for (const QString& c : candidates) {
    const QString p = QDir::cleanPath(bin.filePath(c));
    if (QFileInfo::exists(p)) return p;
  }
  return QDir::cleanPath(bin.filePath(candidates.front()));
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QCoreApplication::setOrganizationName(QStringLiteral("Baton"));
  QCoreApplication::setApplicationName(QStringLiteral("baton-studio"));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/baton/icons/baton.png")));

  QCommandLineParser cli;
  cli.setApplicationDescription(
      QStringLiteral("Baton Studio: compose, train and compare distributed runs"));
  cli.addHelpOption();
  QCommandLineOption db({QStringLiteral("db")}, QStringLiteral("The run history database."),
                        QStringLiteral("PATH"));
  QCommandLineOption runs({QStringLiteral("runs-dir")}, QStringLiteral("Where run directories go."),
                          QStringLiteral("DIR"));
  QCommandLineOption run({QStringLiteral("run")},
                         QStringLiteral("Open this run config in the Train view and start it."),
                         QStringLiteral("CONFIG"));
  cli.addOption(db);
  cli.addOption(runs);
  cli.addOption(run);
  cli.process(app);

  baton::ui::StudioContext ctx;
  ctx.plugin_dir = beside_exe({QStringLiteral("../lib/baton/plugins")});
  ctx.baton_exe = beside_exe({QStringLiteral("baton")});
  ctx.examples_dir = beside_exe({QStringLiteral("../share/baton/examples"),
                                 QStringLiteral(BATON_SOURCE_RESOURCES "/examples")});
  ctx.history_db = cli.value(db);
  ctx.runs_dir = cli.value(runs);

  baton::ui::MainWindow window(ctx);
  if (cli.isSet(run)) {
    QString error;
    if (!window.train_view().form().load(cli.value(run), &error)) {
      std::fprintf(stderr, "baton-studio: --run %s: %s\n", qPrintable(cli.value(run)),
                   qPrintable(error));
      return 2;
    }
    window.show_view(baton::ui::MainWindow::View::kTrain);
    // Started from the event loop, as the Start button would.
    QTimer::singleShot(0, &window.train_view(), &baton::ui::TrainView::start);
  }
  window.show();
  return QApplication::exec();
}
