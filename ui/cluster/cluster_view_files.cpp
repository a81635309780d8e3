// ClusterView's file and probe work: importing a hostfile or a TF_CONFIG,
// reading `baton probe --hosts` output (the probe itself is a QProcess),
// opening and saving the topology, exporting TF_CONFIG per task and the
// hostfile. Errors become the view's message, never an exception out of it.
#include <baton/core/error.h>
#include <baton/discovery/discovery.h>
#include <unistd.h>

#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QInputDialog>
#include <QLineEdit>
#include <QProcess>
#include <QSaveFile>
#include <QUndoStack>
#include <csignal>

#include "cluster/cluster_view.h"
#include "cluster/topology_commands.h"
#include "cluster/topology_model.h"

namespace baton::ui {
namespace {

void write_text(const QString& path, const std::string& text) {
  QSaveFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
      f.write(text.data(), static_cast<qint64>(text.size())) < 0 || !f.commit()) {
    throw RuntimeError(path.toStdString() + ": cannot write: " + f.errorString().toStdString());
  }
}

std::string read_text(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) {
    throw InputError(path.toStdString() + ": cannot open: " + f.errorString().toStdString());
  }
  return f.readAll().toStdString();
}

}  // namespace

bool ClusterView::import_hostfile(const QString& path) {
  try {
    const auto hosts = model_.hosts_from_hostfile(read_text(path), path.toStdString());
    TopologyModel::State s = model_.state();
    s.hosts.clear();  // the hostfile is the cluster; this host is kept when it is in it
    for (auto h : hosts) {
      for (const auto& old : model_.hosts()) {
        if (old.local &&
            canonical_host(old.name.toStdString()) == canonical_host(h.name.toStdString()))
          h = TopologyHost{0, h.name, h.port, h.role, old.info, old.probed, true, h.pos};
      }
      h.id = 0;
      s.hosts.push_back(std::move(h));
    }
    int id = 1;
    for (auto& h : s.hosts) h.id = id++;
    if (s.hosts.size() > 1 && !model_.multi_process())
      s.strategy = QStringLiteral("multi_worker_mirrored");
    undo_stack_->push(new SetTopologyCommand(model_, std::move(s), tr("import hostfile")));
    show_message(tr("Imported %1 task(s) from %2").arg(hosts.size()).arg(path), false);
    return true;
  } catch (const std::exception& e) {
    show_message(QString::fromUtf8(e.what()), true);
    return false;
  }
}

bool ClusterView::import_tf_config(const QString& path) {
  try {
    const auto hosts = model_.hosts_from_tf_config(read_text(path), path.toStdString());
    TopologyModel::State s = model_.state();
    s.hosts = hosts;
    int id = 1;
    for (auto& h : s.hosts) h.id = id++;
    bool has_ps = false;
    for (const auto& h : hosts) has_ps = has_ps || h.role == TaskRole::kPs;
    s.strategy = has_ps ? QStringLiteral("parameter_server")
                        : (hosts.size() > 1 ? QStringLiteral("multi_worker_mirrored") : s.strategy);
    undo_stack_->push(new SetTopologyCommand(model_, std::move(s), tr("import TF_CONFIG")));
    show_message(tr("Imported %1 task(s) from %2").arg(hosts.size()).arg(path), false);
    return true;
  } catch (const std::exception& e) {
    show_message(QString::fromUtf8(e.what()), true);
    return false;
  }
}

void ClusterView::import_hostfile_dialog() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Import an MPI hostfile"));
  if (!path.isEmpty()) import_hostfile(path);
}

void ClusterView::import_tf_config_dialog() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Import a TF_CONFIG"), QString(),
                                                    tr("JSON (*.json);;All files (*)"));
  if (!path.isEmpty()) import_tf_config(path);
}

// ---- probing through mpirun ----

void ClusterView::probe_hosts_dialog() {
  QStringList names;
  for (const auto& h : model_.hosts()) {
    if (!h.local && !names.contains(h.name)) names << h.name;
  }
  bool ok = false;
  const QString text = QInputDialog::getText(
      this, tr("Probe hosts through mpirun"),
      tr("Hosts, separated by commas (baton must be installed at the same path on each):"),
      QLineEdit::Normal, names.join(QLatin1Char(',')), &ok);
  if (!ok) return;
  QStringList hosts;
  for (const QString& h : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) hosts << h.trimmed();
  if (hosts.isEmpty()) return;
  start_mpirun_probe(hosts);
}

void ClusterView::start_mpirun_probe(const QStringList& hosts) {
  if (probe_process_) {
    show_message(tr("A probe is already running"), true);
    return;
  }
  auto* proc = new QProcess(this);
  probe_process_ = proc;
  probe_hosts_->setEnabled(false);
  cancel_probe_->setEnabled(true);
  show_message(tr("Probing %1 through mpirun...").arg(hosts.join(QStringLiteral(", "))), false);
  connect(proc, &QProcess::finished, this, [this, proc, hosts](int code, QProcess::ExitStatus st) {
    proc->deleteLater();
    probe_process_ = nullptr;
    probe_hosts_->setEnabled(true);
    cancel_probe_->setEnabled(false);
    if (proc->property("cancelled").toBool()) {
      show_message(tr("Probe of %1 cancelled").arg(hosts.join(QStringLiteral(", "))), false);
      return;
    }
    if (st != QProcess::NormalExit || code != 0) {
      const QString why = QString::fromUtf8(proc->readAllStandardError()).trimmed();
      show_message(tr("baton probe --hosts failed (exit %1): %2").arg(code).arg(why), true);
      return;
    }
    add_probed_hosts(proc->readAllStandardOutput(), hosts);
  });
  connect(proc, &QProcess::errorOccurred, this, [this, proc](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart) return;
    proc->deleteLater();
    probe_process_ = nullptr;
    probe_hosts_->setEnabled(true);
    cancel_probe_->setEnabled(false);
    show_message(tr("Cannot start %1: %2").arg(ctx_.baton_exe, proc->errorString()), true);
  });
  // An argument list, never a shell line: host names go through untouched.
  // A process group of its own, so Cancel stops `baton probe` and the
  // mpirun it started together.
  proc->setChildProcessModifier([] { ::setpgid(0, 0); });
  // The CLI checks the names (RFC 1123, IPv4/IPv6) before mpirun sees them
  // and stops mpirun after the timeout.
  proc->start(ctx_.baton_exe, {QStringLiteral("probe"), QStringLiteral("--json"),
                               QStringLiteral("--hosts"), hosts.join(QLatin1Char(',')),
                               QStringLiteral("--timeout"), QString::number(ctx_.probe_timeout_s)});
}

bool ClusterView::probing() const { return !probe_process_.isNull(); }

void ClusterView::cancel_probe() {
  if (!probe_process_) return;
  probe_process_->setProperty("cancelled", true);
  // The whole group: baton probe and its mpirun (its finished() then
  // re-enables the actions).
  const auto pid = static_cast<pid_t>(probe_process_->processId());
  if (pid > 0) ::kill(-pid, SIGKILL);
  probe_process_->kill();
}

bool ClusterView::add_probed_hosts(const QByteArray& json, const QStringList& requested) {
  try {
    const nlohmann::json doc = nlohmann::json::parse(json.toStdString());
    if (!doc.is_object() || !doc.contains("hosts") || !doc["hosts"].is_array())
      throw RuntimeError("baton probe --hosts: expected {\"hosts\": [...]}");
    TopologyModel::State s = model_.state();
    TopologyModel layout;
    layout.set_state(s);
    const auto& list = doc["hosts"];
    for (size_t i = 0; i < list.size(); ++i) {
      const TopologyHostInfo info = from_host_info(host_info_from_json(list[i]));
      // Ranks follow the -H list: answer i is about requested name i.
      const QString name = i < static_cast<size_t>(requested.size())
                               ? requested[static_cast<int>(i)]
                               : QString::fromStdString(info.hostname);
      bool found = false;
      for (auto& h : s.hosts) {
        if (canonical_host(h.name.toStdString()) != canonical_host(name.toStdString())) continue;
        h.info = info;
        h.probed = true;
        found = true;
      }
      if (!found) {
        TopologyHost h = layout.make_host(name, 0, 0, TaskRole::kWorker);
        h.info = info;
        h.probed = true;
        h.id = layout.add_host(h);
        s.hosts.push_back(h);
      }
    }
    undo_stack_->push(new SetTopologyCommand(model_, std::move(s), tr("probe hosts")));
    show_message(tr("Probed %1 host(s)").arg(list.size()), false);
    return true;
  } catch (const std::exception& e) {
    show_message(tr("Reading the probe failed: %1").arg(QString::fromUtf8(e.what())), true);
    return false;
  }
}

// ---- files ----

bool ClusterView::open_topology_file(const QString& path) {
  try {
    TopologyModel scratch;  // read fully first: the model changes only when it all reads
    scratch.load_file(path);
    undo_stack_->push(new SetTopologyCommand(model_, scratch.state(), tr("open topology")));
    show_message(tr("Opened %1").arg(path), false);
    return true;
  } catch (const std::exception& e) {
    show_message(QString::fromUtf8(e.what()), true);
    return false;
  }
}

bool ClusterView::save_topology_file(const QString& path) {
  try {
    model_.save_file(path);
    show_message(tr("Saved %1").arg(path), false);
    return true;
  } catch (const std::exception& e) {
    show_message(QString::fromUtf8(e.what()), true);
    return false;
  }
}

bool ClusterView::export_hostfile(const QString& path) {
  const std::string text = model_.hostfile();
  if (text.empty()) {
    show_message(tr("No hostfile: %1").arg(model_.problems().join(QStringLiteral("; "))), true);
    return false;
  }
  try {
    write_text(path, text);
    show_message(tr("Wrote %1").arg(path), false);
    return true;
  } catch (const std::exception& e) {
    show_message(QString::fromUtf8(e.what()), true);
    return false;
  }
}

bool ClusterView::export_tf_configs(const QString& dir) {
  try {
    const ClusterSpec spec = model_.cluster_spec();
    int written = 0;
    for (TaskRole role : {TaskRole::kChief, TaskRole::kWorker, TaskRole::kPs}) {
      for (int i = 0; i < static_cast<int>(spec.tasks(role).size()); ++i) {
        const QString file =
            QDir(dir).filePath(QStringLiteral("tf_config_%1_%2.json")
                                   .arg(QString::fromLatin1(baton::to_string(role)))
                                   .arg(i));
        write_text(file, model_.tf_config(role, i) + "\n");
        ++written;
      }
    }
    show_message(tr("Wrote %1 TF_CONFIG file(s) to %2").arg(written).arg(dir), false);
    return true;
  } catch (const std::exception& e) {
    show_message(QString::fromUtf8(e.what()), true);
    return false;
  }
}

}  // namespace baton::ui
