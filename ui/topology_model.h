// The cluster topology the user composes: hosts, their devices, roles and
// the distribution strategy. A plain model (no scene, no widgets): the
// Cluster view observes it, the Train view reads the strategy from it.
#pragma once

#include <QObject>
#include <QStringList>
#include <nlohmann/json.hpp>
#include <string>

namespace baton::ui {

class TopologyModel : public QObject {
  Q_OBJECT
 public:
  explicit TopologyModel(QObject* parent = nullptr);

  // "one_device", "mirrored", "central_storage", "multi_worker_mirrored",
  // "parameter_server" ("tpu" is shown, unavailable).
  QString strategy() const { return strategy_; }
  void set_strategy(const QString& s);
  // Replicas in sync (workers for parameter_server).
  int replica_count() const { return replicas_; }
  void set_replica_count(int n);
  // MPI ranks to start: 1 for the single-process strategies.
  int process_count() const;
  bool multi_process() const;
  // The run config's "strategy" object for this topology.
  nlohmann::json strategy_json() const;
  // An OpenMPI hostfile for the multi-process strategies.
  std::string hostfile() const;
  // Validation messages; empty when the topology can run.
  QStringList problems() const;

 signals:
  void changed();

 private:
  QString strategy_ = QStringLiteral("mirrored");
  int replicas_ = 2;
};

}  // namespace baton::ui
