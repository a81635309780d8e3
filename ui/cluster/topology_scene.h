// The topology canvas: a QGraphicsScene that observes a TopologyModel. It
// rebuilds its items when the structure changes (coalesced, after the
// current event), follows host moves at once, and colours the ring's links
// by live bandwidth.
#pragma once

#include <QGraphicsScene>
#include <QHash>
#include <vector>

#include "cluster/topology_model.h"

namespace baton::ui {

class DeviceItem;
class HostItem;
class LinkItem;

class TopologyScene : public QGraphicsScene {
  Q_OBJECT
 public:
  explicit TopologyScene(TopologyModel& model, QObject* parent = nullptr);

  // Builds the items now (otherwise done after the current event).
  void rebuild();
  // The selected host (or the host of the selected device); 0 = none.
  int selected_host() const;
  QString selected_device() const;
  void select_host(int id);

  const std::vector<HostItem*>& host_items() const { return hosts_; }
  HostItem* host_item(int id) const;
  // The drawn link src -> dst (either direction); nullptr when none.
  LinkItem* link_item(int src, int dst) const;
  int link_count() const { return static_cast<int>(links_.size()); }

 public slots:
  // src, dst: global replica ranks; gbps: GB/s. Cheap (a hash look-up and a
  // pen); a pair the ring does not draw gets its own line once.
  void show_link_bandwidth(int src, int dst, double gbps, bool estimated = false,
                           bool eager = false);
  void clear_link_bandwidth();
  // A running job's device event: `device` is the run's name for the GPU
  // ("gpu:N" or "gpu_emulated:N"), lighting the tile cuda:N of this host
  // (the studio's runs are its own), or of the first host that has one
  // when none is this host. Kept until clear_device_figures (a new run),
  // across rebuilds.
  void show_device_figures(const QString& device, double utilization_pct, double memory_used_mib,
                           double memory_total_mib, bool emulated);
  void clear_device_figures();
  // The tile the run's `device` lights, or nullptr.
  DeviceItem* device_item_for(const QString& device) const;

 signals:
  // A host box was dragged: from -> to, `drag_id` the same for every move
  // of one drag.
  void host_dragged(int host_id, QPointF from, QPointF to, int drag_id);
  void context_menu_requested(int host_id, const QString& device, QPoint screen_pos);

 protected:
  void contextMenuEvent(QGraphicsSceneContextMenuEvent* event) override;

 private:
  void schedule_rebuild();
  void on_host_moved(int id);
  LinkItem* add_link(const TopologyLink& link);
  static quint64 key(int src, int dst) {
    return (static_cast<quint64>(static_cast<quint32>(src)) << 32) | static_cast<quint32>(dst);
  }

  TopologyModel& model_;
  std::vector<HostItem*> hosts_;
  std::vector<DeviceItem*> replica_items_;  // by global replica rank
  std::vector<LinkItem*> links_;
  QHash<quint64, LinkItem*> link_by_ranks_;
  // The last figure per link (and whether modelled), re-applied after a rebuild.
  struct Shown {
    double gbps = 0;
    bool estimated = false, eager = false;
  };
  QHash<quint64, Shown> bandwidth_;
  // The last figures per GPU tile ("cuda:N"), re-applied after a rebuild.
  QHash<QString, std::vector<double>> device_figures_;
  bool rebuild_pending_ = false;
  int drag_counter_ = 0;
};

}  // namespace baton::ui
