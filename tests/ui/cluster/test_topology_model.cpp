// TopologyModel without any view: hosts and devices, undo/redo (merged
// drags), validation, replicas, the batch split, the ring, the run config's
// strategy, TF_CONFIG and hostfile exports, and the topology file.
#include <baton/core/config.h>
#include <baton/core/error.h>
#include <baton/train/run_config.h>

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QUndoStack>
#include <QtTest>

#include "cluster/topology_commands.h"
#include "cluster/topology_model.h"

// HostfileEntry::slots is read below: Qt's keyword macro is set aside
// (the test class says Q_SLOTS).
#undef slots

namespace baton::ui {
namespace {

TopologyHostInfo cpu_host(const std::string& name, int cores, int numa_nodes = 1) {
  TopologyHostInfo h;
  h.hostname = name;
  h.cpu_model = "test cpu";
  h.packages = numa_nodes;
  h.cores = h.threads = cores;
  h.numa_nodes = numa_nodes;
  h.memory_bytes = 1ULL << 30;
  for (int i = 0; i < cores; ++i) {
    TopologyDevice d;
    d.name = "cpu:" + std::to_string(i);
    d.kind = "cpu";
    d.index = i;
    d.numa_node = i * numa_nodes / cores;
    h.devices.push_back(d);
  }
  return h;
}

// Two hosts under multi_worker_mirrored: a (chief, 4 cores), b (worker, 2).
void two_hosts(TopologyModel& m) {
  m.set_local_host(cpu_host("a", 4));
  TopologyHost b = m.make_host(QStringLiteral("b"), 2, 0, TaskRole::kWorker);
  m.add_host(b);
  m.set_strategy(QStringLiteral("multi_worker_mirrored"));
}

int id_of(const TopologyModel& m, const QString& name) {
  for (const auto& h : m.hosts()) {
    if (h.name == name) return h.id;
  }
  return 0;
}

// A full run config (resources/examples/digits.json) with `strategy` in it.
RunConfig run_config_with(const nlohmann::json& strategy) {
  const std::string path = BATON_SOURCE_DIR "/resources/examples/digits.json";
  nlohmann::json doc = read_json_file(path);
  doc["strategy"] = strategy;
  return parse_run_config(doc, path);
}

}  // namespace

class TopologyModelTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void first_start_default_is_mirrored_on_this_host() {
    TopologyModel m;
    QCOMPARE(m.strategy(), QStringLiteral("mirrored"));
    QCOMPARE(m.hosts().size(), size_t{1});
    QVERIFY(m.replica_count() >= 1);
    QVERIFY2(m.problems().isEmpty(), qPrintable(m.problems().join('\n')));
    QVERIFY(m.pristine());
    m.set_local_host(cpu_host("here", 3));
    QCOMPARE(m.replica_count(), 3);
    QCOMPARE(m.process_count(), 1);
    QVERIFY(!m.multi_process());
    QCOMPARE(m.strategy_json(), (nlohmann::json{{"type", "mirrored"}, {"replicas", 3}}));
    QCOMPARE(run_config_with(m.strategy_json()).strategy.replicas, 3);
    QVERIFY(m.pristine());
  }

  void adds_and_removes_hosts_and_devices() {
    TopologyModel m;
    m.set_local_host(cpu_host("a", 2));
    QSignalSpy changed(&m, &TopologyModel::changed);
    const int b = m.add_host(m.make_host(QStringLiteral("b"), 1, 2, TaskRole::kWorker));
    QCOMPARE(m.hosts().size(), size_t{2});
    QVERIFY(m.host(b)->pos.x() > m.hosts()[0].pos.x());  // placed right of the others
    QCOMPARE(m.host(b)->info.gpu_count(), 2);
    QCOMPARE(m.add_device(b, QStringLiteral("cuda")), QStringLiteral("cuda:2"));
    QCOMPARE(m.host(b)->info.gpu_links.size(), size_t{3});
    QVERIFY(m.remove_device(b, QStringLiteral("cuda:0")));
    QCOMPARE(m.host(b)->info.gpu_count(), 2);
    QCOMPARE(m.host(b)->info.gpu_links.size(), size_t{2});
    QCOMPARE(m.host(b)->info.gpu_links[0].size(), size_t{2});
    QVERIFY(!m.remove_device(b, QStringLiteral("cuda:0")));
    QCOMPARE(m.add_device(b, QStringLiteral("tpu")), QString());
    QVERIFY(m.remove_host(b).has_value());
    QVERIFY(m.host(b) == nullptr);
    QVERIFY(!m.remove_host(b).has_value());
    QCOMPARE(changed.count(), 4);  // the two refused edits changed nothing
    QVERIFY(!m.pristine());
  }

  void undo_redo_of_every_edit() {
    TopologyModel m;
    m.set_local_host(cpu_host("a", 2));
    const TopologyModel::State start = m.state();
    QUndoStack stack;
    auto* add = new AddHostCommand(m, m.make_host(QStringLiteral("b"), 2, 0, TaskRole::kWorker));
    stack.push(add);
    const int b = add->host_id();
    QVERIFY(m.host(b) != nullptr);
    push_host_edit(stack, m, b, QStringLiteral("add"),
                   [](TopologyHost& h) { TopologyModel::add_device_to(h, QStringLiteral("cpu")); });
    QCOMPARE(m.host(b)->info.cpu_count(), 3);
    push_host_edit(stack, m, b, QStringLiteral("nothing"), [](TopologyHost&) {});
    QCOMPARE(stack.count(), 2);  // an edit that changes nothing is no step
    stack.push(
        new SetStrategyCommand(m, QStringLiteral("parameter_server"), QStringLiteral("sync")));
    push_host_edit(stack, m, b, QStringLiteral("role"),
                   [](TopologyHost& h) { h.role = TaskRole::kPs; });
    stack.push(new RemoveHostCommand(m, m.hosts()[0].id));
    QCOMPARE(m.hosts().size(), size_t{1});
    const TopologyModel::State end = m.state();

    stack.undo();  // the removed host comes back at its place
    QCOMPARE(m.hosts().size(), size_t{2});
    QCOMPARE(m.hosts()[0].name, QStringLiteral("a"));
    stack.undo();
    QCOMPARE(m.host(b)->role, TaskRole::kWorker);
    stack.undo();
    QCOMPARE(m.strategy(), QStringLiteral("mirrored"));
    QCOMPARE(m.ps_mode(), QStringLiteral("async"));
    stack.undo();
    stack.undo();
    QVERIFY(m.state() == start);
    while (stack.canRedo()) stack.redo();
    QVERIFY(m.state() == end);
    QCOMPARE(m.host(b)->id, b);  // the same id after undo + redo
  }

  void a_drag_is_one_step() {
    TopologyModel m;
    two_hosts(m);
    const int b = id_of(m, QStringLiteral("b"));
    const QPointF start = m.host(b)->pos;
    QUndoStack stack;
    QSignalSpy moved(&m, &TopologyModel::host_moved);
    QSignalSpy structure(&m, &TopologyModel::structure_changed);
    for (int i = 1; i <= 5; ++i)
      stack.push(new MoveHostCommand(m, b, start, start + QPointF(10 * i, 5 * i), 1));
    QCOMPARE(stack.count(), 1);
    QCOMPARE(m.host(b)->pos, start + QPointF(50, 25));
    QCOMPARE(moved.count(), 5);
    QCOMPARE(structure.count(), 0);  // moves do not rebuild the canvas
    // The next drag is its own step.
    const QPointF mid = m.host(b)->pos;
    stack.push(new MoveHostCommand(m, b, mid, mid + QPointF(1, 1), 2));
    stack.push(new MoveHostCommand(m, b, mid, mid + QPointF(2, 2), 2));
    QCOMPARE(stack.count(), 2);
    stack.undo();
    QCOMPARE(m.host(b)->pos, mid);
    stack.undo();
    QCOMPARE(m.host(b)->pos, start);
    stack.redo();
    QCOMPARE(m.host(b)->pos, mid);
    // A drag back to where it began leaves no step.
    stack.push(new MoveHostCommand(m, b, mid, mid + QPointF(3, 3), 3));
    stack.push(new MoveHostCommand(m, b, mid, mid, 3));
    QCOMPARE(stack.count(), 1);
    QCOMPARE(m.host(b)->pos, mid);
  }

  void validation_names_the_host() {
    TopologyModel m;
    two_hosts(m);
    QVERIFY2(m.problems().isEmpty(), qPrintable(m.problems().join('\n')));
    const int a = id_of(m, QStringLiteral("a"));
    const int b = id_of(m, QStringLiteral("b"));

    // multi_worker_mirrored over hosts with no chief.
    m.set_host_role(a, TaskRole::kWorker);
    QVERIFY(m.problems().join('\n').contains(QStringLiteral("no chief")));
    m.set_host_role(a, TaskRole::kChief);

    // The same host:port twice: the message is on the second box.
    TopologyHost dup = *m.host(b);
    dup.id = 0;
    const int d = m.add_host(dup);
    QCOMPARE(m.problems_of(d).size(), 1);
    QVERIFY(m.problems_of(d).front().contains(QStringLiteral("listed twice")));
    QVERIFY(m.problems_of(b).isEmpty());
    TopologyHost moved = *m.host(d);
    moved.port = 2223;  // two tasks on one machine are fine on two ports
    m.replace_host(moved);
    QVERIFY2(m.problems().isEmpty(), qPrintable(m.problems().join('\n')));
    m.remove_host(d);

    // parameter_server without a ps, then without a worker (the chief is
    // not one, as the engine's validate_for_strategy has it).
    m.set_strategy(QStringLiteral("parameter_server"));
    QVERIFY(m.problems().join('\n').contains(QStringLiteral("ps")));
    m.set_host_role(b, TaskRole::kPs);
    QVERIFY(m.problems().join('\n').contains(QStringLiteral("worker")));
    const int w = m.add_host(m.make_host(QStringLiteral("w"), 1, 0, TaskRole::kWorker));
    QVERIFY2(m.problems().isEmpty(), qPrintable(m.problems().join('\n')));
    m.remove_host(w);
    // A ps under multi_worker_mirrored: on the ps box.
    m.set_strategy(QStringLiteral("multi_worker_mirrored"));
    QVERIFY(m.problems_of(b).join('\n').contains(QStringLiteral("ps role")));
    m.set_host_role(b, TaskRole::kWorker);

    // A bad host name, a host without devices, a second chief.
    TopologyHost bad = m.make_host(QStringLiteral("bad host!"), 0, 0, TaskRole::kChief);
    const int x = m.add_host(bad);
    const QString px = m.problems_of(x).join('\n');
    QVERIFY2(px.contains(QStringLiteral("host name")), qPrintable(px));
    QVERIFY2(px.contains(QStringLiteral("no devices")), qPrintable(px));
    QVERIFY2(px.contains(QStringLiteral("second chief")), qPrintable(px));
    QVERIFY(m.problems().join('\n').contains(QStringLiteral("bad host!")));  // the list names it
    m.remove_host(x);

    // Single-process strategies run on one machine; TPU is refused.
    m.set_strategy(QStringLiteral("mirrored"));
    QVERIFY(m.problems().join('\n').contains(QStringLiteral("one machine")));
    m.set_strategy(QStringLiteral("tpu"));
    QVERIFY(m.problems().join('\n').contains(QStringLiteral("no TPU backend")));
    QCOMPARE(m.replica_count(), 0);
    m.set_strategy(QStringLiteral("multi_worker_mirrored"));
    QVERIFY(m.problems().isEmpty());
    // No hosts at all.
    m.set_state({});
    QVERIFY(!m.problems().isEmpty());
    QCOMPARE(m.hostfile(), std::string());
  }

  void replicas_batch_and_ring() {
    TopologyModel m;
    two_hosts(m);  // a: 4 cores, b: 2 cores -> 2 per worker
    QCOMPARE(m.replicas_per_worker(), 2);
    QCOMPARE(m.replica_count(), 4);
    QCOMPARE(m.process_count(), 2);
    QVERIFY(m.multi_process());
    QCOMPARE(m.ring_order(), (QStringList{"a/cpu:0", "a/cpu:1", "b/cpu:0", "b/cpu:1"}));
    // 10 over 4: 3, 3, 2, 2 (the first 10 % 4 get one more).
    QCOMPARE(m.per_replica_batch(10), (std::vector<int64_t>{3, 3, 2, 2}));
    QCOMPARE(m.per_replica_batch(8), (std::vector<int64_t>{2, 2, 2, 2}));
    QCOMPARE(m.per_replica_batch(3), (std::vector<int64_t>{1, 1, 1, 0}));
    const auto links = m.ring_links();
    QCOMPARE(links.size(), size_t{4});
    QCOMPARE(links[0].cls, LinkClass::kSharedMemory);  // a/cpu:0 -> a/cpu:1
    QCOMPARE(links[1].cls, LinkClass::kNetwork);       // a -> b
    QCOMPARE(links[3].cls, LinkClass::kNetwork);       // b -> a, closing the ring
    QCOMPARE(links[3].src, 3);
    QCOMPARE(links[3].dst, 0);

    // Rank order: the chief first, wherever its box is.
    const int a = id_of(m, QStringLiteral("a")), b = id_of(m, QStringLiteral("b"));
    m.set_host_role(a, TaskRole::kWorker);
    m.set_host_role(b, TaskRole::kChief);
    QCOMPARE(m.ring_order().front(), QStringLiteral("b/cpu:0"));

    // parameter_server: one replica per worker task, no ring.
    m.set_host_role(a, TaskRole::kPs);
    m.set_strategy(QStringLiteral("parameter_server"));
    QCOMPARE(m.replica_count(), 1);
    QCOMPARE(m.process_count(), 2);
    QVERIFY(m.ring_links().empty());

    // GPUs: the link classes of nvidia-smi topo -m.
    TopologyModel g;
    TopologyHostInfo info = cpu_host("g", 2, 2);
    for (int i = 0; i < 3; ++i) {
      TopologyDevice d;
      d.name = "cuda:" + std::to_string(i);
      d.kind = "cuda";
      d.index = i;
      info.devices.push_back(d);
    }
    info.gpu_links = {{{"X", 0, true}, {"NV4", 4, true}, {"SYS", 0, false}},
                      {{"NV4", 4, true}, {"X", 0, true}, {"PXB", 0, true}},
                      {{"SYS", 0, false}, {"PXB", 0, true}, {"X", 0, true}}};
    g.set_local_host(info);
    QCOMPARE(g.replica_count(), 3);  // the GPUs, not the cores
    const auto gl = g.ring_links();
    QCOMPARE(gl.size(), size_t{3});
    QCOMPARE(gl[0].cls, LinkClass::kNvLink);
    QCOMPARE(gl[0].detail, QStringLiteral("NV4"));
    QCOMPARE(gl[1].cls, LinkClass::kPcie);
    QCOMPARE(gl[2].cls, LinkClass::kCrossNuma);
    // CPU cores on two NUMA nodes.
    TopologyModel c;
    c.set_local_host(cpu_host("c", 2, 2));
    QCOMPARE(c.link_between(0, 1).cls, LinkClass::kCrossNuma);
  }

  void strategy_json_passes_the_run_config() {
    TopologyModel m;
    two_hosts(m);
    RunConfig rc = run_config_with(m.strategy_json());
    QCOMPARE(QString::fromStdString(rc.strategy.type), QStringLiteral("multi_worker_mirrored"));
    QCOMPARE(rc.strategy.replicas, 2);  // replicas_per_worker
    m.set_host_role(id_of(m, QStringLiteral("b")), TaskRole::kPs);
    m.set_strategy(QStringLiteral("parameter_server"));
    m.set_ps_mode(QStringLiteral("sync"));
    rc = run_config_with(m.strategy_json());
    QCOMPARE(rc.strategy.num_ps, 1);
    QCOMPARE(QString::fromStdString(rc.strategy.mode), QStringLiteral("sync"));
    m.remove_host(id_of(m, QStringLiteral("b")));
    for (const QString& s : {QStringLiteral("one_device"), QStringLiteral("mirrored"),
                             QStringLiteral("central_storage")}) {
      m.set_strategy(s);
      QVERIFY2(m.problems().isEmpty(), qPrintable(m.problems().join('\n')));
      rc = run_config_with(m.strategy_json());
      QCOMPARE(QString::fromStdString(rc.strategy.type), s);
      QCOMPARE(rc.strategy.type == "one_device" ? 1 : rc.strategy.replicas, m.replica_count());
    }
    m.set_strategy(QStringLiteral("tpu"));
    QVERIFY_THROWS_EXCEPTION(InputError, run_config_with(m.strategy_json()));
  }

  void tf_config_export_reads_back() {
    TopologyModel m;
    two_hosts(m);
    m.add_host(m.make_host(QStringLiteral("c"), 1, 0, TaskRole::kPs));
    m.set_strategy(QStringLiteral("parameter_server"));
    QVERIFY2(m.problems().isEmpty(), qPrintable(m.problems().join('\n')));
    const ClusterSpec spec = m.cluster_spec();
    QCOMPARE(spec.chief.size(), size_t{1});
    QCOMPARE(spec.worker.size(), size_t{1});
    QCOMPARE(spec.ps.size(), size_t{1});
    for (TaskRole role : {TaskRole::kChief, TaskRole::kWorker, TaskRole::kPs}) {
      const ClusterSpec back = parse_tf_config(m.tf_config(role, 0), "export");
      QCOMPARE(back.task_type, role);
      QCOMPARE(back.task_index, 0);
      QCOMPARE(back.chief, spec.chief);
      QCOMPARE(back.worker, spec.worker);
      QCOMPARE(back.ps, spec.ps);
    }
    QCOMPARE(parse_tf_config(m.tf_config(TaskRole::kWorker, 0), "x").worker.front(),
             (HostPort{"b", 2222}));
    QVERIFY_THROWS_EXCEPTION(InputError, m.tf_config(TaskRole::kWorker, 5));
  }

  void hostfile_export_reads_back() {
    TopologyModel m;
    two_hosts(m);
    TopologyHost second_b = m.make_host(QStringLiteral("b"), 2, 0, TaskRole::kWorker);
    second_b.port = 2223;  // a second task on b
    m.add_host(second_b);
    QVERIFY2(m.problems().isEmpty(), qPrintable(m.problems().join('\n')));
    const auto entries = parse_hostfile(m.hostfile(), "export");
    QCOMPARE(entries.size(), size_t{2});
    QCOMPARE(entries[0].host, std::string("a"));
    QCOMPARE(entries[0].slots, 1);
    QCOMPARE(entries[1].host, std::string("b"));
    QCOMPARE(entries[1].slots, 2);
    QCOMPARE(m.process_count(), 3);
    // Single process: this host, one slot.
    TopologyModel one;
    one.set_local_host(cpu_host("here", 2));
    QCOMPARE(parse_hostfile(one.hostfile(), "x"), (std::vector<HostfileEntry>{{"here", 1, 0}}));
  }

  void imports_hostfile_and_tf_config() {
    TopologyModel m;
    const auto hosts = m.hosts_from_hostfile("n1 slots=2\nn2\n", "hosts.txt");
    QCOMPARE(hosts.size(), size_t{3});
    QCOMPARE(hosts[0].role, TaskRole::kChief);
    QCOMPARE(hosts[1].name, QStringLiteral("n1"));
    QCOMPARE(hosts[1].port, 2223);
    QCOMPARE(hosts[2].role, TaskRole::kWorker);
    QVERIFY_THROWS_EXCEPTION(InputError, m.hosts_from_hostfile("n1 slots=0\n", "hosts.txt"));
    const auto tf = m.hosts_from_tf_config(
        R"({"cluster":{"chief":["c:2000"],"worker":["w:2001"],"ps":["p:2002"]},"task":{"type":"ps"}})",
        "TF_CONFIG");
    QCOMPARE(tf.size(), size_t{3});
    QCOMPARE(tf[2].role, TaskRole::kPs);
    QCOMPARE(tf[2].port, 2002);
    QVERIFY_THROWS_EXCEPTION(InputError, m.hosts_from_tf_config("{\"cluster\":{}}", "TF_CONFIG"));
  }

  void save_and_load_round_trip() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    TopologyModel m;
    two_hosts(m);
    m.add_device(id_of(m, QStringLiteral("b")), QStringLiteral("cuda"));
    m.move_host(id_of(m, QStringLiteral("b")), QPointF(500, 120));
    const QString path = dir.filePath(QStringLiteral("topo.json"));
    m.save_file(path);
    TopologyModel back;
    QSignalSpy reset(&back, &TopologyModel::reset);
    back.load_file(path);
    QCOMPARE(reset.count(), 1);
    QCOMPARE(back.hosts().size(), m.hosts().size());
    for (size_t i = 0; i < m.hosts().size(); ++i) {
      TopologyHost x = back.hosts()[i];
      x.id = m.hosts()[i].id;  // ids are the model's own, not in the file
      QVERIFY(x == m.hosts()[i]);
    }
    QCOMPARE(back.strategy(), m.strategy());
    QCOMPARE(back.ps_mode(), m.ps_mode());
    QCOMPARE(back.ring_order(), m.ring_order());
    QCOMPARE(back.strategy_json(), m.strategy_json());
  }

  void a_malformed_file_names_the_key_and_changes_nothing() {
    QTemporaryDir dir;
    TopologyModel m;
    two_hosts(m);
    const TopologyModel::State before = m.state();
    auto expect_error = [&](nlohmann::json doc, const QString& needle) {
      const QString path = dir.filePath(QStringLiteral("bad.json"));
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
      f.write(QByteArray::fromStdString(doc.dump()));
      f.close();
      QSignalSpy changed(&m, &TopologyModel::changed);
      try {
        m.load_file(path);
        QFAIL(qPrintable(QStringLiteral("no error for ") + needle));
      } catch (const InputError& e) {
        const QString msg = QString::fromUtf8(e.what());
        QVERIFY2(msg.contains(path), qPrintable(msg));
        QVERIFY2(msg.contains(needle), qPrintable(msg));
      }
      QCOMPARE(changed.count(), 0);
      QVERIFY(m.state() == before);
    };
    const nlohmann::json good = m.to_json();
    nlohmann::json doc = good;
    doc["hosts"][1]["role"] = "boss";
    expect_error(doc, QStringLiteral("hosts[1].role"));
    doc = good;
    doc["strategy"] = "mirored";
    expect_error(doc, QStringLiteral("strategy"));
    doc = good;
    doc["hosts"][0]["colour"] = "red";
    expect_error(doc, QStringLiteral("hosts[0].colour"));
    doc = good;
    doc["hosts"][0]["probe"].erase("devices");
    expect_error(doc, QStringLiteral("hosts[0].probe"));
    doc = good;
    doc["version"] = 7;
    expect_error(doc, QStringLiteral("version"));
    doc = good;
    doc["hosts"][1]["port"] = 70000;
    expect_error(doc, QStringLiteral("hosts[1].port"));
    // Not JSON at all.
    const QString path = dir.filePath(QStringLiteral("broken.json"));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{\"format\": ");
    f.close();
    QVERIFY_THROWS_EXCEPTION(InputError, m.load_file(path));
    QVERIFY(m.state() == before);
  }
};

}  // namespace baton::ui

QTEST_MAIN(baton::ui::TopologyModelTest)
#include "test_topology_model.moc"
