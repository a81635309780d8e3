// The Cluster view's Prediction tab: nothing predicted before the model is
// measured; then the summary (labelled modelled) follows the topology as
// hosts and devices change, the chart has a predicted point per size from
// 1 to 512 and the measured points it was given; parameter servers are
// said not to be modelled; and a real measurement of the digits config
// (off the GUI thread) arrives through measured().
#include <baton/core/config.h>

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "cluster/prediction_panel.h"
#include "cluster/topology_model.h"
#include "ui_test_support.h"

using namespace baton;
using namespace baton::ui;

namespace {

TopologyHostInfo cpu_host(const std::string& name, int cores) {
  TopologyHostInfo h;
  h.hostname = name;
  h.cores = h.threads = cores;
  h.packages = h.numa_nodes = 1;
  for (int i = 0; i < cores; ++i) {
    TopologyDevice d;
    d.name = "cpu:" + std::to_string(i);
    d.kind = "cpu";
    d.index = i;
    d.numa_node = 0;
    h.devices.push_back(d);
  }
  return h;
}

StepProbe probe() {
  StepProbe p;
  p.model = "test model";
  p.parameters = 1 << 20;
  p.cost.forward_s = 0.01;
  p.cost.backward_s = 0.02;
  p.cost.optimizer_s = 0.002;
  p.cost.gradient_bytes = 4 << 20;
  p.cost.per_device_batch = 32;
  return p;
}

}  // namespace

class PredictionPanelTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void follows_the_topology_once_measured() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    TopologyModel model;
    model.set_local_host(cpu_host("a", 4));
    PredictionPanel panel(ctx, model);
    QVERIFY2(panel.summary().contains(QLatin1String("measure the model first")),
             qPrintable(panel.summary()));
    QCOMPARE(panel.predicted_points(), 0);

    panel.set_measurement(probe(), {{"model", {{"type", "mlp"}}}}, {{2, 1500.0, "r1"}});
    QVERIFY2(panel.summary().contains(QLatin1String("modelled")), qPrintable(panel.summary()));
    QVERIFY2(panel.summary().contains(QLatin1String("4 device(s) on 1 host(s)")),
             qPrintable(panel.summary()));
    QCOMPARE(panel.predicted_points(), 10);  // 1, 2, 4, ..., 512
    QCOMPARE(panel.measured_points(), 1);
    const Topology one = panel.engine_topology();
    QCOMPARE(one.hosts, 1);
    QCOMPARE(one.devices_per_host, 4);
    QCOMPARE(one.intra_host, baton::LinkClass::kSharedMemory);

    // A second host of 4 under multi_worker_mirrored: the summary follows.
    model.add_host(model.make_host(QStringLiteral("b"), 4, 0, TaskRole::kWorker));
    model.set_strategy(QStringLiteral("multi_worker_mirrored"));
    QVERIFY2(panel.summary().contains(QLatin1String("8 device(s) on 2 host(s)")),
             qPrintable(panel.summary()));
    QCOMPARE(panel.engine_topology().hosts, 2);

    model.set_strategy(QStringLiteral("parameter_server"));
    QVERIFY2(panel.summary().contains(QLatin1String("not modelled")), qPrintable(panel.summary()));
  }

  void measures_the_config_off_the_gui_thread() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    TopologyModel model;
    model.set_local_host(cpu_host("a", 2));
    PredictionPanel panel(ctx, model);
    const QString path = QStringLiteral(BATON_SOURCE_DIR "/resources/examples/digits.json");
    const nlohmann::json cfg = read_json_file(path.toStdString());
    panel.set_config_source([cfg, path] { return std::make_pair(cfg, path); });
    QSignalSpy spy(&panel, &PredictionPanel::measured);
    panel.measure();
    QVERIFY(panel.measuring());
    QVERIFY(spy.wait(120000));
    QVERIFY(!panel.measuring());
    QVERIFY2(panel.summary().contains(QLatin1String("2 device(s) on 1 host(s)")),
             qPrintable(panel.summary()));
    QCOMPARE(panel.predicted_points(), 10);
    QCOMPARE(panel.measured_points(), 0);  // no past run in this history
  }
};

QTEST_MAIN(PredictionPanelTest)
#include "test_prediction_panel.moc"
