// The run form: the digits example by default, and each bad value caught as
// it is typed, with the message under its own field.
#include <baton/core/config.h>
#include <baton/train/memory_figures.h>
#include <baton/train/registry.h>

#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QSpinBox>
#include <QtTest>
#include <fstream>

#include "train/run_form.h"
#include "ui_test_support.h"

namespace baton::ui {

class RunFormTest : public QObject {
  Q_OBJECT
 private slots:
  void defaults_to_digits_and_is_valid() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    RunForm form(ctx);
    QVERIFY2(form.valid(), qPrintable(form.first_error()));
    QVERIFY(form.config_path().endsWith(QLatin1String("digits.json")));
    const auto doc = form.config();
    QCOMPARE(doc["model"]["layers"], nlohmann::json({64, 128, 128, 10}));
    QCOMPARE(doc["train"]["global_batch_size"].get<int>(), 64);
  }

  void messages_land_under_their_fields() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    RunForm form(ctx);
    QSignalSpy validity(&form, &RunForm::validity_changed);

    form.layers_edit()->setText(QStringLiteral("64, x, 10"));
    QVERIFY(!form.valid());
    QVERIFY(form.errors().contains(QStringLiteral("model")));
    QCOMPARE(validity.count(), 1);
    QCOMPARE(validity.at(0).at(0).toBool(), false);
    form.layers_edit()->setText(QStringLiteral("64, 32, 10"));
    QVERIFY2(form.valid(), qPrintable(form.first_error()));

    form.lr_edit()->setText(QStringLiteral("fast"));
    QVERIFY(form.errors().contains(QStringLiteral("lr")));
    // A negative rate is a number, but the engine's parser refuses it and
    // names optimizer.lr.
    form.lr_edit()->setText(QStringLiteral("-1"));
    QVERIFY(form.errors().contains(QStringLiteral("lr")));
    QVERIFY2(form.errors().value(QStringLiteral("lr")).contains(QLatin1String("optimizer.lr")),
             qPrintable(form.errors().value(QStringLiteral("lr"))));
    form.lr_edit()->setText(QStringLiteral("0.01"));
    QVERIFY(form.valid());

    form.epochs_spin()->setValue(0);
    QVERIFY(form.errors().contains(QStringLiteral("epochs")));
    form.epochs_spin()->setValue(2);
    QVERIFY(form.valid());
    QCOMPARE(validity.last().at(0).toBool(), true);
    QCOMPARE(form.config()["train"]["epochs"].get<int>(), 2);
  }

  // The form shows the file, the engine's defaults where it says nothing,
  // and writes no key the user did not touch (it wrote sgd / 0.01 where the
  // engine's default is adam / 0.001, turned activation "none" into relu,
  // and clamped batches above 2^20).
  void writes_only_what_the_user_changed() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    const QString path = dir.filePath(QStringLiteral("plain.json"));
    const nlohmann::json file = {
        {"model", {{"type", "mlp"}, {"layers", {12, 8, 5}}, {"activation", "none"}}},
        {"data",
         {{"train",
           {{"type", "synthetic_classification"},
            {"features", 12},
            {"classes", 5},
            {"samples", 4000000},
            {"seed", 1}}}}},
        {"train", {{"global_batch_size", 3000000}}}};
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(file.dump().c_str());
    f.close();
    RunForm form(ctx);
    QString error;
    QVERIFY2(form.load(path, &error), qPrintable(error));
    QCOMPARE(form.optimizer_combo()->currentText(), QStringLiteral("adam"));  // the engine's
    QCOMPARE(form.lr_edit()->text(), QStringLiteral("0.001"));
    QCOMPARE(form.batch_spin()->value(), 3000000);
    QCOMPARE(form.findChild<QComboBox*>(QStringLiteral("activation"))->currentText(),
             QStringLiteral("none"));
    // Untouched: the file, key for key (the strategy is the Cluster view's,
    // the file has none).
    nlohmann::json doc = form.config();
    QCOMPARE(doc.value("strategy", nlohmann::json()), nlohmann::json({{"type", "one_device"}}));
    doc.erase("strategy");
    QCOMPARE(doc, file);
    // Touched: that key alone.
    form.epochs_spin()->setValue(5);
    doc = form.config();
    QCOMPARE(doc["train"]["epochs"].get<int>(), 5);
    QVERIFY(!doc.contains("optimizer"));
    QVERIFY(!doc.contains("checkpoint"));
  }

  // An example names its strategy: that is what runs, and a Cluster view
  // that says otherwise is a question for the user, not a silent override
  // (the example's allreduce block was dropped).
  void the_configs_strategy_runs_unless_the_user_picks_the_cluster_views() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    RunForm form(ctx);
    QString error;
    QVERIFY2(
        form.load(QStringLiteral(BATON_SOURCE_DIR "/resources/examples/mirrored.json"), &error),
        qPrintable(error));
    form.set_strategy({{"type", "mirrored"}, {"replicas", 4}}, QStringLiteral("mirrored"), 4);
    QVERIFY(!form.strategy_conflict());
    QVERIFY(form.valid());
    const auto doc = form.config();
    QCOMPARE(doc["strategy"]["replicas"].get<int>(), 2);  // the file's
    QCOMPARE(doc["strategy"]["allreduce"]["bucket_mb"].get<int>(), 25);
    // The Cluster view changes to one_device: the form says so and waits.
    QSignalSpy adopted(&form, &RunForm::strategy_adopted);
    form.set_strategy({{"type", "one_device"}}, QStringLiteral("one_device"), 1);
    QVERIFY(form.strategy_conflict());
    QVERIFY(!form.valid());
    QVERIFY(form.errors().contains(QStringLiteral("strategy")));
    QVERIFY(form.findChild<QPushButton*>(QStringLiteral("useConfigStrategy"))->isVisibleTo(&form));
    // "Use the config's": the Cluster view is asked to take mirrored.
    form.use_config_strategy();
    QCOMPARE(adopted.count(), 1);
    QCOMPARE(adopted.at(0).at(0).toString(), QStringLiteral("mirrored"));
    form.set_strategy({{"type", "mirrored"}, {"replicas", 2}}, QStringLiteral("mirrored"), 2);
    QVERIFY(form.valid());
    // "Use the Cluster view's": its strategy replaces the file's.
    form.set_strategy({{"type", "one_device"}}, QStringLiteral("one_device"), 1);
    form.use_cluster_strategy();
    QVERIFY(form.valid());
    QCOMPARE(form.config()["strategy"], nlohmann::json({{"type", "one_device"}}));
  }

  // Every replica takes a row or more of the global batch: fewer rows than
  // replicas is the batch field's error before Start, not a failed run.
  void a_batch_smaller_than_the_replicas_is_the_batch_fields_error() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    RunForm form(ctx);
    QString error;
    QVERIFY2(form.load(QStringLiteral(BATON_SOURCE_DIR "/resources/examples/digits.json"), &error),
             qPrintable(error));
    form.set_strategy({{"type", "mirrored"}, {"replicas", 8}}, QStringLiteral("mirrored"), 8);
    form.use_cluster_strategy();
    form.batch_spin()->setValue(7);
    QVERIFY(!form.valid());
    QVERIFY2(form.errors().value(QStringLiteral("batch")).contains(QLatin1String("8 replicas")),
             qPrintable(form.first_error()));
    form.batch_spin()->setValue(8);
    QVERIFY2(form.valid(), qPrintable(form.first_error()));
  }

  // The model type picks its own fields; the parameter count and FLOPs
  // follow what is typed (worked out off the GUI thread).
  void a_gpt_config_shows_its_fields_and_figures() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    RunForm form(ctx);
    QString error;
    QSignalSpy figures(&form, &RunForm::figures_updated);
    QVERIFY2(
        form.load(QStringLiteral(BATON_SOURCE_DIR "/resources/examples/gpt_text.json"), &error),
        qPrintable(error));
    QCOMPARE(form.model_combo()->currentData().toString(), QStringLiteral("gpt"));
    QVERIFY(form.gpt_layers_spin()->isVisibleTo(&form));
    QVERIFY(!form.layers_edit()->isVisibleTo(&form));
    QCOMPARE(form.gpt_width_spin()->value(), 128);
    // It counts steps, not epochs: the length field is its steps.
    QVERIFY(form.steps_spin()->isVisibleTo(&form));
    QVERIFY(!form.epochs_spin()->isVisibleTo(&form));
    QCOMPARE(form.steps_spin()->value(), 1500);
    QVERIFY(figures.wait(20000));
    const QString params = QLocale().toString(842496);
    QVERIFY2(form.figures_label()->text().contains(params + QStringLiteral(" parameters")),
             qPrintable(form.figures_label()->text()));
    QVERIFY2(form.figures_label()->text().contains(QStringLiteral("GFLOP per step")),
             qPrintable(form.figures_label()->text()));
    // Its memory before Start: a replica's and the process's, modelled,
    // against what this machine has.
    QVERIFY2(form.figures_label()->text().contains(QRegularExpression(
                 QStringLiteral("memory [0-9.]+ MiB a replica, [0-9.]+ MiB this process "
                                "\\(modelled\\)"))),
             qPrintable(form.figures_label()->text()));
    // A narrower model: fewer parameters, and only that key is written.
    form.gpt_width_spin()->setValue(64);
    QVERIFY(figures.wait(20000));
    QVERIFY2(!form.figures_label()->text().contains(params),
             qPrintable(form.figures_label()->text()));
    form.steps_spin()->setValue(20);
    const auto doc = form.config();
    QCOMPARE(doc["train"]["steps"].get<int>(), 20);
    QCOMPARE(doc["model"]["d_model"].get<int>(), 64);
    QCOMPARE(doc["model"]["n_layer"].get<int>(), 4);  // the file's
    QCOMPARE(doc["model"].size(), 5u);                // the file's keys, no more
    // Heads that do not divide the width: the model plugin's message, on
    // the model field, once the background build has met it.
    QSignalSpy validity(&form, &RunForm::validity_changed);
    form.gpt_heads_spin()->setValue(5);
    QVERIFY(figures.wait(20000));
    QVERIFY(!form.valid());
    QCOMPARE(validity.count(), 1);
    QVERIFY2(form.errors().value(QStringLiteral("model")).contains(QLatin1String("n_head")),
             qPrintable(form.first_error()));
  }

  // Memory before Start: a layout that does not fit the memory the plan is
  // held against says so and offers the cheapest sharding that does (the
  // first of ZeRO's stages that fits); one click applies it, and the run's
  // config then has it. A GPT whose state outweighs its activations, on 4
  // mirrored replicas; the memory set between "none"'s plan and a sharded
  // one's (the test's, so it does not depend on this machine's).
  void a_layout_that_does_not_fit_offers_the_cheapest_that_does() {
    QTemporaryDir dir;
    StudioContext ctx = test_context(dir);
    nlohmann::json doc =
        baton::read_json_file(BATON_SOURCE_DIR "/resources/examples/gpt_text.json");
    doc["data"]["train"]["path"] = BATON_SOURCE_DIR "/resources/datasets/kjv.txt.gz";
    doc["data"]["train"]["context"] = 16;
    doc["model"]["n_layer"] = 4;
    doc["model"]["d_model"] = 256;
    doc["train"]["global_batch_size"] = 8;
    doc["strategy"] = {{"type", "mirrored"}, {"replicas", 4}, {"allreduce", {{"bucket_mb", 1}}}};
    const QString path = dir.filePath(QStringLiteral("big.json"));
    std::ofstream(path.toStdString()) << doc.dump();
    Registry registry;
    registry.load_plugin_dir(ctx.plugin_dir.toStdString());
    const RunPlan plan = plan_run(parse_run_config(doc, path.toStdString()), registry, 1);
    QCOMPARE(plan.modes.size(), size_t{4});
    QCOMPARE(plan.modes[0].sharding, std::string("none"));
    const int64_t none = plan.modes[0].per_process();
    const int64_t least = plan.modes[3].per_process();  // ZeRO-3's
    QVERIFY2(least < none * 7 / 10, qPrintable(QString::number(least)));
    ctx.memory_available_bytes = (none + least) / 2;
    std::string expected;
    for (const MemoryFigures& m : plan.modes) {
      if (expected.empty() && m.per_process() <= ctx.memory_available_bytes) expected = m.sharding;
    }
    QVERIFY(!expected.empty() && expected != "none");

    RunForm form(ctx);
    QSignalSpy figures(&form, &RunForm::figures_updated);
    QString error;
    QVERIFY2(form.load(path, &error), qPrintable(error));
    // The Cluster view as it matches the file's strategy.
    form.set_strategy({{"type", "mirrored"}, {"replicas", 4}}, QStringLiteral("mirrored"), 4);
    QVERIFY(figures.wait(20000));
    QVERIFY(form.sharding_combo()->isEnabled());
    QCOMPARE(form.sharding_combo()->currentData().toString(), QStringLiteral("none"));
    const QString said = form.figures_label()->text();
    QVERIFY2(said.contains(QStringLiteral("does not fit")), qPrintable(said));
    QVERIFY2(
        said.contains(
            QStringLiteral("strategy.sharding \"%1\" fits").arg(QString::fromStdString(expected))),
        qPrintable(said));
    QVERIFY(form.apply_sharding_button()->isVisibleTo(&form));
    QVERIFY2(form.apply_sharding_button()->text().contains(
                 QStringLiteral("\"%1\"").arg(QString::fromStdString(expected))),
             qPrintable(form.apply_sharding_button()->text()));
    QVERIFY(!form.config()["strategy"].contains("sharding"));  // nothing changed yet
    form.resize(760, form.sizeHint().height());
    QDir().mkpath(QStringLiteral(BATON_UI_TEST_OUTPUT "/screenshots"));
    QVERIFY(
        form.grab().save(QStringLiteral(BATON_UI_TEST_OUTPUT "/screenshots/run_form_memory.png")));
    form.apply_sharding_button()->click();
    QCOMPARE(form.sharding_combo()->currentData().toString(), QString::fromStdString(expected));
    QVERIFY2(form.valid(), qPrintable(form.first_error()));
    QVERIFY(figures.wait(20000));
    QVERIFY2(!form.figures_label()->text().contains(QStringLiteral("does not fit")),
             qPrintable(form.figures_label()->text()));
    QVERIFY(!form.apply_sharding_button()->isVisibleTo(&form));
    QCOMPARE(form.config()["strategy"]["sharding"].get<std::string>(), expected);
    QVERIFY(form.valid());
    // A strategy that does not shard: the choice is not offered.
    form.set_strategy({{"type", "one_device"}}, QStringLiteral("one device"), 1);
    form.use_cluster_strategy();
    QVERIFY(!form.sharding_combo()->isEnabled());
    QVERIFY(!form.config()["strategy"].contains("sharding"));
  }

  // An example that fails to load says why, on the form.
  void a_failed_example_shows_its_error() {
    QTemporaryDir dir;
    StudioContext ctx = test_context(dir);
    QDir(dir.path()).mkpath(QStringLiteral("examples"));
    ctx.examples_dir = dir.filePath(QStringLiteral("examples"));
    QFile f(dir.filePath(QStringLiteral("examples/broken.json")));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{\"model\": ");
    f.close();
    RunForm form(ctx);
    auto* examples = form.findChild<QComboBox*>(QStringLiteral("examples"));
    QVERIFY(examples != nullptr);
    const int i = examples->findText(QStringLiteral("broken"));
    QVERIFY(i >= 0);
    QMetaObject::invokeMethod(examples, "activated", Q_ARG(int, i));
    auto* label = form.findChild<QLabel*>(QStringLiteral("error_form"));
    QVERIFY(label != nullptr);
    QVERIFY(label->isVisibleTo(&form));
    QVERIFY2(label->text().contains(QLatin1String("broken.json")), qPrintable(label->text()));
  }

  void a_bad_config_file_is_refused_and_the_form_keeps_its_own() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    RunForm form(ctx);
    const QString bad = dir.filePath(QStringLiteral("bad.json"));
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"model": {"type": "mlp"}, "data": {"train": {"type": "csv"}}, "colour": 1})");
    f.close();
    QString error;
    QVERIFY(!form.load(bad, &error));
    QVERIFY2(error.contains(QLatin1String("colour")), qPrintable(error));
    QVERIFY(form.config_path().endsWith(QLatin1String("digits.json")));
    QVERIFY(form.valid());
  }
};

}  // namespace baton::ui

QTEST_MAIN(baton::ui::RunFormTest)
#include "test_run_form.moc"
