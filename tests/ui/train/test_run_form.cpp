// The run form: the digits example by default, and each bad value caught as
// it is typed, with the message under its own field.
#include <QComboBox>
#include <QLineEdit>
#include <QSignalSpy>
#include <QSpinBox>
#include <QtTest>

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
