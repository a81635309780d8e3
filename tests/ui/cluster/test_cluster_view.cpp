// The Cluster view, offscreen: a two-host model drawn as boxes holding their
// devices and the ring's links; live bandwidth changes a link's pen; edits
// are undoable; a bad file is a message, not a crash; a PNG of the view.
#include <QAction>
#include <QComboBox>
#include <QElapsedTimer>
#include <QImage>
#include <QListWidget>
#include <QTemporaryDir>
#include <QUndoStack>
#include <QtTest>
#include <set>

#include "cluster/cluster_panel.h"
#include "cluster/cluster_view.h"
#include "cluster/topology_items.h"
#include "cluster/topology_model.h"
#include "cluster/topology_scene.h"
#include "ui_test_support.h"

namespace baton::ui {

class ClusterViewTest : public QObject {
  Q_OBJECT
 private slots:
  void draws_edits_and_renders() {
    QTemporaryDir dir;
    const StudioContext ctx = test_context(dir);
    TopologyModel model;
    // Two hosts, not this one (the view's probe of this host leaves them be).
    TopologyModel::State s;
    s.strategy = QStringLiteral("multi_worker_mirrored");
    s.hosts.push_back(model.make_host(QStringLiteral("alpha"), 4, 0, TaskRole::kChief));
    s.hosts.back().id = 1;
    s.hosts.back().pos = QPointF(0, 0);
    s.hosts.push_back(model.make_host(QStringLiteral("beta"), 2, 2, TaskRole::kWorker));
    s.hosts.back().id = 2;
    s.hosts.back().pos = QPointF(380, 40);
    s.hosts.back().info.gpu_links[0][1].type = "NV4";
    s.hosts.back().info.gpu_links[1][0].type = "NV4";
    model.set_state(s);
    QCOMPARE(model.replica_count(), 4);  // 2 per worker

    ClusterView view(ctx, model);
    view.resize(1400, 860);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    TopologyScene& scene = view.scene();
    QCOMPARE(scene.host_items().size(), size_t{2});
    QCOMPARE(scene.host_item(1)->devices().size(), size_t{4});
    QCOMPARE(scene.host_item(2)->devices().size(), size_t{4});
    QCOMPARE(scene.link_count(), 4);  // the ring 0 -> 1 -> 2 -> 3 -> 0
    QVERIFY(model.problems().isEmpty());
    QCOMPARE(view.panel().problem_list()->count(), 1);  // "ready to run"

    // Live bandwidth: the link's pen changes (colour and width).
    LinkItem* link = scene.link_item(1, 2);
    QVERIFY(link != nullptr);
    QCOMPARE(link->link().cls, LinkClass::kNetwork);
    const QPen before = link->pen();
    view.show_link_bandwidth(1, 2, 12.5);
    QCOMPARE(link->bandwidth_gbps(), 12.5);
    QVERIFY(link->pen().widthF() > before.widthF());
    QVERIFY(link->pen().color() != before.color());
    QCOMPARE(link->pen().style(), Qt::SolidLine);
    QVERIFY2(link->toolTip().contains(QLatin1String("12.50 GB/s measured")),
             qPrintable(link->toolTip()));
    // A modelled figure looks and reads as one: dashed, "\u2248", "modelled".
    view.show_link_bandwidth(1, 2, 8.0, /*estimated=*/true);
    QVERIFY(link->bandwidth_estimated());
    QCOMPARE(link->pen().style(), Qt::DashLine);
    QVERIFY2(link->toolTip().contains(QStringLiteral("\u2248 8.00 GB/s modelled")),
             qPrintable(link->toolTip()));
    QVERIFY2(!link->toolTip().contains(QLatin1String("measured")), qPrintable(link->toolTip()));
    // Messages under MPI's eager limit: a latency-bound rate, drawn dotted
    // and named so, never called the link's bandwidth.
    view.show_link_bandwidth(1, 2, 40.0, /*estimated=*/false, /*eager=*/true);
    QVERIFY(link->bandwidth_eager());
    QCOMPARE(link->pen().style(), Qt::DotLine);
    QVERIFY2(link->toolTip().contains(QLatin1String("40.00 GB/s latency-bound, not the link's "
                                                    "bandwidth")),
             qPrintable(link->toolTip()));
    QVERIFY2(!link->toolTip().contains(QLatin1String("measured")), qPrintable(link->toolTip()));
    view.show_link_bandwidth(1, 2, 12.5);
    QCOMPARE(link->pen().style(), Qt::SolidLine);
    QVERIFY(!link->bandwidth_eager());
    QVERIFY2(link->toolTip().contains(QLatin1String("measured, the link's bandwidth")),
             qPrintable(link->toolTip()));
    QCOMPARE(scene.link_item(2, 3)->link().cls, LinkClass::kNvLink);
    // A pair the ring does not draw gets its own line.
    view.show_link_bandwidth(0, 2, 3.0);
    QCOMPARE(scene.link_count(), 5);

    // A run's GPU figures (its device events) light the GPU's tile: no host
    // is this one here, so the first host with a cuda:N (beta). The
    // emulator's say so and show memory (no utilisation); NVML's show the
    // utilisation, measured.
    view.show_device_figures(QStringLiteral("gpu_emulated:1"), -1, 1024, 4096, true);
    DeviceItem* g1 = scene.device_item_for(QStringLiteral("gpu_emulated:1"));
    QVERIFY(g1 != nullptr);
    QCOMPARE(g1->device(), QStringLiteral("cuda:1"));
    QCOMPARE(g1->host_id(), 2);
    QVERIFY(g1->has_figures());
    QVERIFY2(g1->toolTip().contains(QLatin1String("emulated")), qPrintable(g1->toolTip()));
    QVERIFY2(g1->toolTip().contains(QLatin1String("memory 1.0 of 4.0 GiB")),
             qPrintable(g1->toolTip()));
    view.show_device_figures(QStringLiteral("gpu:0"), 93.5, 2048, 81559, false);
    DeviceItem* g0 = scene.device_item_for(QStringLiteral("gpu:0"));
    QVERIFY(g0 != nullptr && g0->has_figures());
    QVERIFY2(g0->toolTip().contains(QLatin1String("utilisation 94%")), qPrintable(g0->toolTip()));
    QVERIFY2(g0->toolTip().contains(QLatin1String("measured")), qPrintable(g0->toolTip()));
    QVERIFY(scene.device_item_for(QStringLiteral("gpu:7")) == nullptr);  // no such tile

    // An edit shows its validation message on the host box; undo takes it back.
    QComboBox* strategy = view.panel().strategy_box();
    strategy->setCurrentIndex(strategy->findData(QStringLiteral("mirrored")));
    QCOMPARE(model.strategy(), QStringLiteral("mirrored"));
    QVERIFY(!model.problems().isEmpty());  // mirrored runs on one machine
    view.undo_action()->trigger();
    QCOMPARE(model.strategy(), QStringLiteral("multi_worker_mirrored"));
    QCOMPARE(strategy->currentData().toString(), QStringLiteral("multi_worker_mirrored"));
    model.set_host_role(2, TaskRole::kPs);  // no ps under multi_worker_mirrored
    QTRY_VERIFY(scene.host_item(2) != nullptr && !scene.host_item(2)->problems().isEmpty());
    QVERIFY(scene.host_item(1)->problems().isEmpty());
    model.set_host_role(2, TaskRole::kWorker);
    QTRY_VERIFY(scene.host_item(2) != nullptr && scene.host_item(2)->problems().isEmpty());
    // An edit makes the last run's figures stale: the rebuilt links are plain.
    QVERIFY(scene.link_item(1, 2)->bandwidth_gbps() < 0);  // no figure
    QCOMPARE(scene.link_item(1, 2)->pen(), before);
    // The GPUs keep the run's last figures (its devices did not change)
    // until the next run starts.
    QVERIFY(scene.device_item_for(QStringLiteral("gpu:0"))->has_figures());
    // TPU is listed, not selectable, with the reason.
    const int tpu = strategy->findData(QStringLiteral("tpu"));
    QVERIFY(tpu >= 0);
    QVERIFY(strategy->itemData(tpu, Qt::ToolTipRole).toString().contains(QStringLiteral("TPU")));

    // A malformed topology file: a message naming it, the model unchanged.
    const QString bad = dir.filePath(QStringLiteral("bad.json"));
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"format": "baton-topology", "version": 1, "strategy": "mirrored", "hosts": [{}]})");
    f.close();
    const auto state = model.state();
    QVERIFY(!view.open_topology_file(bad));
    QVERIFY2(view.message().contains(bad) && view.message().contains(QStringLiteral("hosts[0]")),
             qPrintable(view.message()));
    QVERIFY(model.state() == state);
    // Save, then open it back as one undoable step.
    const QString good = dir.filePath(QStringLiteral("topo.json"));
    QVERIFY(view.save_topology_file(good));
    model.set_strategy(QStringLiteral("parameter_server"));
    QVERIFY(view.open_topology_file(good));
    QCOMPARE(model.strategy(), QStringLiteral("multi_worker_mirrored"));
    view.undo_stack().undo();
    QCOMPARE(model.strategy(), QStringLiteral("parameter_server"));
    view.undo_stack().redo();
    // Exports.
    QVERIFY(view.export_hostfile(dir.filePath(QStringLiteral("hostfile"))));
    QVERIFY(view.export_tf_configs(dir.path()));
    QVERIFY(QFile::exists(dir.filePath(QStringLiteral("tf_config_chief_0.json"))));
    QVERIFY(QFile::exists(dir.filePath(QStringLiteral("tf_config_worker_0.json"))));

    // A PNG of the view, and it is not blank.
    QTRY_COMPARE(scene.host_items().size(), size_t{2});
    view.show_link_bandwidth(1, 2, 12.5);
    const QString png = QStringLiteral(BATON_UI_TEST_OUTPUT "/cluster_view.png");
    QFile::remove(png);
    QVERIFY(view.grab().save(png));
    QImage img(png);
    QVERIFY(!img.isNull());
    QCOMPARE(img.size(), view.size() * view.devicePixelRatioF());
    std::set<QRgb> colours;
    for (int y = 0; y < img.height(); y += 7) {
      for (int x = 0; x < img.width(); x += 7) colours.insert(img.pixel(x, y));
    }
    QVERIFY2(colours.size() > 20, qPrintable(QString::number(colours.size())));
    // A new run starts without the last one's GPU figures.
    view.clear_device_figures();
    QTRY_VERIFY(scene.device_item_for(QStringLiteral("gpu:0")) != nullptr &&
                !scene.device_item_for(QStringLiteral("gpu:0"))->has_figures());
  }

  // A probe through mpirun can wait for minutes on an unreachable host: the
  // view passes a timeout to `baton probe` and Cancel stops it (and what it
  // started) at once. A stand-in for baton records its arguments and hangs.
  void a_hanging_probe_is_cancelled() {
    QTemporaryDir dir;
    StudioContext ctx = test_context(dir);
    ctx.probe_timeout_s = 12.5;
    const QString script = dir.filePath(QStringLiteral("fake-baton"));
    {
      QFile f(script);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QStringLiteral("#!/bin/sh\necho \"$@\" > %1/args\nexec sleep 60\n")
                  .arg(dir.path())
                  .toUtf8());
    }
    QFile::setPermissions(script, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    ctx.baton_exe = script;
    TopologyModel model;
    ClusterView view(ctx, model);
    view.show();  // the message line shows only in a shown view
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.start_mpirun_probe({QStringLiteral("far-away")});
    QVERIFY(view.probing());
    QVERIFY(view.cancel_probe_action()->isEnabled());
    QTRY_VERIFY(QFile::exists(dir.filePath(QStringLiteral("args"))));
    QFile args(dir.filePath(QStringLiteral("args")));
    QVERIFY(args.open(QIODevice::ReadOnly));
    QCOMPARE(QString::fromUtf8(args.readAll()).trimmed(),
             QStringLiteral("probe --json --hosts far-away --timeout 12.5"));
    QElapsedTimer t;
    t.start();
    view.cancel_probe();
    QTRY_VERIFY_WITH_TIMEOUT(!view.probing(), 5000);
    QVERIFY2(t.elapsed() < 5000, "Cancel did not stop the probe");
    QVERIFY2(view.message().contains(QLatin1String("cancelled")), qPrintable(view.message()));
    QVERIFY(!view.cancel_probe_action()->isEnabled());
  }
};

}  // namespace baton::ui

QTEST_MAIN(baton::ui::ClusterViewTest)
#include "test_cluster_view.moc"
