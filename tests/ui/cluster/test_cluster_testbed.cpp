// The studio on the multi-host test bed (tests/multihost/testbed.sh): the
// Cluster view imports the hosts from a hostfile of two namespace hosts,
// the Train view launches a multi_worker_mirrored run across them (4
// ranks, Baton's ring; bt-s2's link shaped to 200 Mbit/s), and the links
// between the hosts are coloured by their measured bandwidth while it runs:
// the shaped rate, where the links inside a host show shared memory's. A PNG of the view mid-run
// goes to tests/ui/screenshots/. Needs root and `ip netns`: exit 77 (ctest's skip) with the reason
// where they are missing.
#include <baton/core/child_process.h>
#include <baton/core/config.h>
#include <baton/history/store.h>
#include <unistd.h>

#include <QApplication>
#include <QDir>
#include <QFile>
#include <QGraphicsView>
#include <QSignalSpy>
#include <QtTest>
#include <cstdio>
#include <fstream>
#include <set>

#include "cluster/cluster_view.h"
#include "cluster/topology_items.h"
#include "cluster/topology_model.h"
#include "cluster/topology_scene.h"
#include "common/main_window.h"
#include "train/run_form.h"
#include "train/train_view.h"
#include "ui_test_support.h"

namespace baton::ui {
namespace {

const char* kPrefix = "bt-s";  // the hosts: bt-s1, bt-s2
const std::string kTestbed = BATON_SOURCE_DIR "/tests/multihost/testbed.sh";

}  // namespace

class ClusterTestbedTest : public QObject {
  Q_OBJECT
 private slots:
  void imports_the_hosts_and_colours_the_links_of_a_run_across_them() {
    QTemporaryDir dir;
    const QString hostfile = dir.filePath("hosts");
    std::ofstream(hostfile.toStdString()) << "bt-s1 slots=2\nbt-s2 slots=2\n";
    const QString agent = dir.filePath("agent.sh");
    std::ofstream(agent.toStdString()) << "#!/bin/sh\nexec " << kTestbed << " agent \"$@\"\n";
    QFile::setPermissions(agent, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    // mpirun (under `baton launch`, under the studio) reaches the hosts
    // through the test bed's agent, over the test bed's network only.
    qputenv("OMPI_ALLOW_RUN_AS_ROOT", "1");
    qputenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    qputenv("OMPI_MCA_plm_rsh_agent", agent.toUtf8());
    qputenv("OMPI_MCA_oob_tcp_if_include", "10.77.0.0/24");
    qputenv("OMPI_MCA_btl_tcp_if_include", "10.77.0.0/24");
    qputenv("OMPI_MCA_rtc_hwloc_vmhole", "none");

    MainWindow w(test_context(dir));
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.show_view(MainWindow::View::kCluster);
    QVERIFY2(w.cluster_view().import_hostfile(hostfile), qPrintable(w.cluster_view().message()));
    TopologyModel& topo = w.topology();
    // A task box per slot (as TF_CONFIG has a task per process).
    std::multiset<QString> names;
    for (const auto& h : topo.hosts()) names.insert(h.name);
    QCOMPARE(names, (std::multiset<QString>{"bt-s1", "bt-s1", "bt-s2", "bt-s2"}));
    topo.set_strategy(QStringLiteral("multi_worker_mirrored"));
    QCOMPARE(topo.process_count(), 4);
    TopologyScene& scene = w.cluster_view().scene();
    QTRY_COMPARE(scene.host_items().size(), size_t{4});
    // Two tasks of one host share its memory; tasks of two hosts, the network.
    QVERIFY(scene.link_item(0, 1) != nullptr && scene.link_item(1, 2) != nullptr);
    QCOMPARE(scene.link_item(0, 1)->link().cls, LinkClass::kSharedMemory);
    QCOMPARE(scene.link_item(1, 2)->link().cls, LinkClass::kNetwork);

    nlohmann::json cfg = read_json_file(BATON_SOURCE_DIR "/resources/examples/digits.json");
    cfg["data"]["train"]["path"] = BATON_SOURCE_DIR "/resources/datasets/digits.csv.gz";
    // 4.3 MB of gradients a step: the ring's pieces (256 KiB) are over
    // MPI's eager limit, so the receiver measures the link, not the copy
    // out of MPI's buffer.
    cfg["model"]["layers"] = {64, 1024, 1024, 10};
    cfg["train"] = {{"steps", 40}, {"global_batch_size", 64}, {"log_every_steps", 5}};
    cfg["strategy"] = {{"type", "multi_worker_mirrored"}, {"allreduce", {{"algorithm", "ring"}}}};
    cfg["checkpoint"] = {{"every_steps", 0}, {"every_epoch", false}};
    const QString cfg_path = dir.filePath("run.json");
    std::ofstream(cfg_path.toStdString()) << cfg.dump();
    QString error;
    QVERIFY2(w.train_view().form().load(cfg_path, &error), qPrintable(error));
    QVERIFY(!w.train_view().form().strategy_conflict());

    // The cross-host links of the ring 0 -> 1 -> 2 -> 3 -> 0 (ranks 0, 1
    // on bt-s1): the chief reports what it receives, 3 -> 0, measured.
    LinkItem* cross = scene.link_item(3, 0);
    QVERIFY(cross != nullptr);
    QCOMPARE(cross->link().cls, LinkClass::kNetwork);
    const double rate_gbps = 200e6 / 8 / 1e9;
    QVERIFY(exited_ok(
        run_child(kTestbed, {"testbed.sh", "shape", "bt-s2", "200mbit", "-"}, {}, 30).status));
    QSignalSpy finished(&w.train_view(), &TrainView::run_finished);
    w.train_view().start();
    QVERIFY(w.train_view().running());
    QTRY_VERIFY_WITH_TIMEOUT(
        finished.count() > 0 ||
            (scene.link_item(3, 0) != nullptr && scene.link_item(3, 0)->bandwidth_gbps() > 0 &&
             !scene.link_item(3, 0)->bandwidth_estimated()),
        180000);
    QVERIFY2(finished.count() == 0,
             qPrintable("the run ended before the link 3 -> 0 was coloured: " +
                        w.train_view().status_text()));
    // The next figure: the first may cover the run's start.
    QTest::qWait(1500);
    const double gbps = scene.link_item(3, 0)->bandwidth_gbps();
    std::printf("link bt-s2 (rank 3) -> bt-s1 (rank 0) shaped to %.4f GB/s: drawn at %.4f GB/s\n",
                rate_gbps, gbps);
    QVERIFY2(gbps > 0.8 * rate_gbps && gbps < 1.2 * rate_gbps,
             "the link between the hosts is not drawn at its shaped rate");
    w.cluster_view().canvas().fitInView(scene.itemsBoundingRect().adjusted(-20, -20, 20, 20),
                                        Qt::KeepAspectRatio);
    const QString shots = QStringLiteral(BATON_UI_TEST_OUTPUT "/screenshots");
    QDir().mkpath(shots);
    QVERIFY(w.grab().save(shots + "/cluster_testbed.png"));
    QVERIFY(finished.wait(240000));
    run_child(kTestbed, {"testbed.sh", "shape", "bt-s2", "-", "-"}, {}, 30);
    QCOMPARE(finished.at(0).at(1).toString(), QStringLiteral("completed"));
    // The history names both hosts.
    const HistoryStore store(test_context(dir).history_db.toStdString(),
                             HistoryStore::Open::kExisting);
    const QString run = finished.at(0).at(0).toString();
    const RunRecord rec = store.run(store.resolve(run.toStdString()));
    QCOMPARE(std::set<std::string>(rec.hosts.begin(), rec.hosts.end()),
             (std::set<std::string>{"bt-s1", "bt-s2"}));
  }
};

}  // namespace baton::ui

// The test bed is made before the tests and removed after them (and
// before, in case an earlier run left it).
int main(int argc, char** argv) {
  QApplication app(argc, argv);
  if (::geteuid() != 0) {
    std::printf("SKIP: the test bed needs root (ip netns, veth, a bridge)\n");
    return 77;
  }
  if (baton::find_on_path("ip").empty() || baton::find_on_path("mpirun").empty()) {
    std::printf("SKIP: ip (iproute2) or mpirun is not on PATH\n");
    return 77;
  }
  baton::run_child(baton::ui::kTestbed, {"testbed.sh", "down", baton::ui::kPrefix}, {}, 60);
  const baton::ChildResult up =
      baton::run_child(baton::ui::kTestbed, {"testbed.sh", "up", "2", baton::ui::kPrefix}, {}, 60);
  if (!baton::exited_ok(up.status)) {
    std::printf("SKIP: network namespaces cannot be made here: %s\n", up.err.c_str());
    baton::run_child(baton::ui::kTestbed, {"testbed.sh", "down", baton::ui::kPrefix}, {}, 60);
    return 77;
  }
  baton::ui::ClusterTestbedTest test;
  const int rc = QTest::qExec(&test, argc, argv);
  baton::run_child(baton::ui::kTestbed, {"testbed.sh", "down", baton::ui::kPrefix}, {}, 60);
  return rc;
}

#include "test_cluster_testbed.moc"
