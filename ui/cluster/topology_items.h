// The canvas items of the topology: a host box holding its device tiles, and
// the ring's links with their class and (live) bandwidth. They draw what the
// TopologyModel says; a drag of a host box is reported, not applied (the
// model moves the box, through an undoable command).
#pragma once

#include <QGraphicsItem>
#include <QGraphicsLineItem>
#include <QPen>
#include <functional>

#include "cluster/topology_model.h"

class QGraphicsSimpleTextItem;

namespace baton::ui {

class DeviceItem : public QGraphicsItem {
 public:
  static constexpr double kWidth = 68, kHeight = 30;
  DeviceItem(int host_id, const TopologyDevice& device, int replica_rank, QGraphicsItem* parent);
  QRectF boundingRect() const override;
  void paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget* widget) override;
  int host_id() const { return host_id_; }
  const QString& device() const { return name_; }
  int replica_rank() const { return rank_; }  // -1: not a replica
  // A running job's figures for this GPU (a device event): its utilisation
  // (%, < 0: not known, as on the emulator) and memory; drawn as a bar and
  // a line of text, "emulated" said where the emulator gave them.
  struct Figures {
    double utilization_pct = -1, memory_used_mib = 0, memory_total_mib = 0;
    bool emulated = false;
  };
  void set_figures(const Figures& f);
  bool has_figures() const { return has_figures_; }
  const Figures& figures() const { return figures_; }

 private:
  int host_id_;
  QString name_, kind_;
  int rank_;
  QString base_tip_;
  bool has_figures_ = false;
  Figures figures_;
};

class HostItem : public QGraphicsItem {
 public:
  // Called on every mouse move of a drag: (host id, from, to, first move
  // of this drag).
  using DragFn = std::function<void(int, QPointF, QPointF, bool)>;
  HostItem(const TopologyHost& host, const std::vector<Replica>& replicas, QStringList problems,
           DragFn on_drag);
  QRectF boundingRect() const override;
  void paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget* widget) override;
  int host_id() const { return id_; }
  bool local() const { return local_; }  // the machine the studio runs on
  const std::vector<DeviceItem*>& devices() const { return devices_; }
  const QStringList& problems() const { return problems_; }

 protected:
  void mousePressEvent(QGraphicsSceneMouseEvent* event) override;
  void mouseMoveEvent(QGraphicsSceneMouseEvent* event) override;

 private:
  int id_;
  bool local_ = false;
  QString title_, role_, summary_;
  QStringList problems_;
  QRectF rect_;
  std::vector<DeviceItem*> devices_;
  DragFn on_drag_;
  QPointF press_scene_, press_pos_;
  bool dragging_ = false;
};

class LinkItem : public QGraphicsLineItem {
 public:
  LinkItem(const TopologyLink& link, QGraphicsItem* a, QGraphicsItem* b, bool between_hosts);
  // Re-reads the two ends' positions (after a host moved).
  void update_geometry();
  // Colours and thickens the line by the bandwidth; a modelled figure
  // (estimated) is drawn dashed and labelled "\u2248 ... modelled"; an
  // eager one (messages under MPI's eager limit: a copy out of MPI's
  // buffer) is drawn dotted and its tooltip calls it latency-bound, not
  // the link's bandwidth. Cheap when called often.
  void set_bandwidth(double gbps, bool estimated = false, bool eager = false);
  double bandwidth_gbps() const { return gbps_; }
  bool bandwidth_estimated() const { return estimated_; }
  bool bandwidth_eager() const { return eager_; }
  const TopologyLink& link() const { return link_; }
  static QColor class_colour(LinkClass c);

 private:
  void update_label();

  TopologyLink link_;
  QGraphicsItem* a_;
  QGraphicsItem* b_;
  bool between_hosts_;
  double gbps_ = -1;  // < 0: no figure yet
  bool estimated_ = false;
  bool eager_ = false;
  QGraphicsSimpleTextItem* label_ = nullptr;
};

}  // namespace baton::ui
