// Runs from the Train view, as a user starts them: an embedded digits run
// that fills the plots and ends completed; a config whose dataset is
// missing, shown as a message; a multi-worker run launched through mpirun
// whose ranks' JSON lines reach the dashboard; a launcher that is not
// installed, shown as a message.
#include <baton/core/config.h>
#include <baton/history/store.h>

#include <QLabel>
#include <QSignalSpy>
#include <QSpinBox>
#include <QtTest>
#include <set>

#include "cluster/topology_model.h"
#include "common/dashboard.h"
#include "train/run_controller.h"
#include "train/run_form.h"
#include "train/train_view.h"
#include "ui_test_support.h"

namespace baton::ui {

class TrainViewTest : public QObject {
  Q_OBJECT
 private slots:
  void embedded_digits_run_fills_the_plots() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    TopologyModel topo;
    topo.set_strategy(QStringLiteral("mirrored"));
    TrainView view(ctx, topo);
    view.form().epochs_spin()->setValue(3);
    QSignalSpy started(&view, &TrainView::run_started);
    QSignalSpy finished(&view, &TrainView::run_finished);
    QSignalSpy links(&view, &TrainView::link_bandwidth);
    view.start();
    QVERIFY(view.running());
    QVERIFY(finished.wait(120000));
    QCOMPARE(finished.at(0).at(1).toString(), QStringLiteral("completed"));
    QCOMPARE(started.count(), 1);
    const QString run = view.current_run();
    QVERIFY(!run.isEmpty());
    // 3 epochs of 23 steps, a step event every 10 steps and at the end.
    QCOMPARE(view.dashboard().point_count(run, "loss/train"), 7);
    QCOMPARE(view.dashboard().point_count(run, "accuracy/val"), 3);
    QVERIFY(links.count() > 0);  // mirrored: replicas talk
    QVERIFY2(view.status_text().contains(QLatin1String("completed")),
             qPrintable(view.status_text()));
    QVERIFY(QFileInfo::exists(dir.filePath("runs/" + run + "/events.jsonl")));
    // Recorded in the history, completed, with its topology.
    const HistoryStore store(ctx.history_db.toStdString(), HistoryStore::Open::kExisting);
    const RunRecord rec = store.run(store.resolve(run.toStdString()));
    QCOMPARE(QString::fromStdString(rec.status), QStringLiteral("completed"));
    QCOMPARE(rec.strategy, std::string("mirrored"));
    QVERIFY(rec.topology.contains("cluster"));
  }

  void a_missing_dataset_is_a_message_not_a_crash() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    const QString cfg = dir.filePath("missing.json");
    QFile f(cfg);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"model": {"type": "mlp", "layers": [4, 3]},
                "data": {"train": {"type": "csv", "path": "nowhere.csv"}}})");
    f.close();
    TopologyModel topo;
    topo.set_strategy(QStringLiteral("one_device"));
    TrainView view(ctx, topo);
    QString error;
    QVERIFY2(view.form().load(cfg, &error), qPrintable(error));
    QSignalSpy finished(&view, &TrainView::run_finished);
    view.start();
    QVERIFY(finished.wait(60000));
    QCOMPARE(finished.at(0).at(1).toString(), QStringLiteral("failed"));
    QVERIFY2(view.status_text().contains(QLatin1String("nowhere.csv")),
             qPrintable(view.status_text()));
    // Nothing was recorded for a run that never started.
    QVERIFY(!QDir(dir.filePath("runs")).exists() || QDir(dir.filePath("runs")).isEmpty());
  }

  void launched_multi_worker_run_streams_every_rank() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    nlohmann::json cfg = baton::read_json_file(BATON_SOURCE_DIR "/resources/examples/digits.json");
    cfg["train"]["epochs"] = 2;
    cfg["strategy"] = {{"type", "multi_worker_mirrored"}};
    LaunchedRun run(
        ctx,
        RunRequest{cfg, QStringLiteral(BATON_SOURCE_DIR "/resources/examples/digits.json"), {}}, 2,
        "");
    const QStringList args = run.arguments();
    QCOMPARE(args.mid(0, 2), (QStringList{"-n", "2"}));
    QVERIFY(args.contains(QStringLiteral("--events")));
    std::set<int> ranks;
    int steps = 0;
    QObject::connect(&run, &RunController::events, [&](const std::vector<Event>& batch) {
      for (const Event& e : batch) {
        if (const auto* s = std::get_if<StepEvent>(&e)) {
          ranks.insert(s->rank);
          ++steps;
        }
      }
    });
    QSignalSpy finished(&run, &RunController::finished);
    run.start();
    QVERIFY(finished.wait(120000));
    QCOMPARE(finished.at(0).at(0).toString(), QStringLiteral("completed"));
    QVERIFY(steps > 0);
    QCOMPARE(ranks, (std::set<int>{0, 1}));
  }

  void stopping_a_launched_run_stops_every_rank_with_a_checkpoint() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    nlohmann::json cfg = baton::read_json_file(BATON_SOURCE_DIR "/resources/examples/digits.json");
    cfg["train"]["epochs"] = 100000;
    cfg["strategy"] = {{"type", "multi_worker_mirrored"}};
    LaunchedRun run(
        ctx,
        RunRequest{cfg, QStringLiteral(BATON_SOURCE_DIR "/resources/examples/digits.json"), {}}, 2,
        "");
    std::vector<RunEndEvent> ends;
    bool asked = false;
    QObject::connect(&run, &RunController::events, [&](const std::vector<Event>& batch) {
      for (const Event& e : batch) {
        if (const auto* s = std::get_if<StepEvent>(&e)) {
          if (s->step >= 20 && !asked) {
            asked = true;  // once: a second Stop terminates mpirun
            run.stop();
          }
        }
        if (const auto* end = std::get_if<RunEndEvent>(&e)) ends.push_back(*end);
      }
    });
    QSignalSpy finished(&run, &RunController::finished);
    run.start();
    QVERIFY(finished.wait(120000));
    QCOMPARE(finished.at(0).at(0).toString(), QStringLiteral("interrupted"));
    // Both ranks ended interrupted, at the same step.
    QCOMPARE(ends.size(), size_t{2});
    QCOMPARE(ends[0].status, std::string("interrupted"));
    QCOMPARE(ends[1].status, std::string("interrupted"));
    QCOMPARE(ends[0].step, ends[1].step);
    // Recorded by the chief as interrupted.
    const HistoryStore store(ctx.history_db.toStdString(), HistoryStore::Open::kExisting);
    const auto runs = store.list_runs();
    QCOMPARE(runs.size(), size_t{1});
    QCOMPARE(runs[0].status, std::string("interrupted"));
  }

  void a_missing_launcher_is_a_message() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    nlohmann::json cfg = baton::read_json_file(BATON_SOURCE_DIR "/resources/examples/digits.json");
    LaunchedRun run(
        ctx,
        RunRequest{cfg, QStringLiteral(BATON_SOURCE_DIR "/resources/examples/digits.json"), {}}, 2,
        "");
    run.set_program(QStringLiteral("/nonexistent/mpirun"));
    QSignalSpy finished(&run, &RunController::finished);
    run.start();
    QVERIFY(finished.wait(10000));
    QCOMPARE(finished.at(0).at(0).toString(), QStringLiteral("failed"));
    QVERIFY(finished.at(0).at(1).toString().contains(QLatin1String("openmpi")));
  }
};

}  // namespace baton::ui

QTEST_MAIN(baton::ui::TrainViewTest)
#include "test_train_view.moc"
