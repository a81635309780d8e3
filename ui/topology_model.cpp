#include "ui/topology_model.h"

namespace baton::ui {

TopologyModel::TopologyModel(QObject* parent) : QObject(parent) {}

void TopologyModel::set_strategy(const QString& s) {
  strategy_ = s;
  Q_EMIT changed();
}

void TopologyModel::set_replica_count(int n) {
  replicas_ = n;
  Q_EMIT changed();
}

bool TopologyModel::multi_process() const {
  return strategy_ == QLatin1String("multi_worker_mirrored") ||
         strategy_ == QLatin1String("parameter_server");
}

int TopologyModel::process_count() const {
  if (strategy_ == QLatin1String("parameter_server")) return replicas_ + 1;
  return multi_process() ? replicas_ : 1;
}

nlohmann::json TopologyModel::strategy_json() const {
  nlohmann::json s = {{"type", strategy_.toStdString()}};
  if (strategy_ == QLatin1String("mirrored") || strategy_ == QLatin1String("central_storage")) {
    s["replicas"] = replicas_;
  }
  return s;
}

std::string TopologyModel::hostfile() const {
  return "localhost slots=" + std::to_string(process_count()) + "\n";
}

QStringList TopologyModel::problems() const {
  if (strategy_ == QLatin1String("tpu")) return {tr("TPU: Baton has no TPU backend")};
  return {};
}

}  // namespace baton::ui
