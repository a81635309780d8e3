#include "cluster/topology_scene.h"

#include <QGraphicsSceneContextMenuEvent>
#include <QTimer>

#include "cluster/topology_items.h"

namespace baton::ui {

TopologyScene::TopologyScene(TopologyModel& model, QObject* parent)
    : QGraphicsScene(parent), model_(model) {
  // Deferred: an edit may come from an item's own event handler (a context
  // menu), and that item must outlive its handler.
  // An edit makes the last run's figures stale (another ring, other hosts):
  // they go with the rebuild.
  connect(&model_, &TopologyModel::structure_changed, this, [this] { bandwidth_.clear(); });
  connect(&model_, &TopologyModel::structure_changed, this, &TopologyScene::schedule_rebuild);
  connect(&model_, &TopologyModel::host_moved, this, &TopologyScene::on_host_moved);
  rebuild();
}

void TopologyScene::schedule_rebuild() {
  if (rebuild_pending_) return;
  rebuild_pending_ = true;
  QTimer::singleShot(0, this, [this] {
    if (rebuild_pending_) rebuild();
  });
}

void TopologyScene::rebuild() {
  rebuild_pending_ = false;
  const int keep_host = selected_host();
  const QString keep_device = selected_device();
  clear();
  hosts_.clear();
  links_.clear();
  link_by_ranks_.clear();

  const auto replicas = model_.replicas();
  replica_items_.assign(replicas.size(), nullptr);
  const auto problems = model_.problem_list();
  for (const TopologyHost& h : model_.hosts()) {
    QStringList mine;
    for (const auto& p : problems) {
      if (p.host_id == h.id) mine << p.text;
    }
    auto* item =
        new HostItem(h, replicas, mine, [this](int id, QPointF from, QPointF to, bool first) {
          if (first) ++drag_counter_;
          Q_EMIT host_dragged(id, from, to, drag_counter_);
        });
    addItem(item);
    hosts_.push_back(item);
    for (DeviceItem* d : item->devices()) {
      if (d->replica_rank() >= 0) replica_items_[static_cast<size_t>(d->replica_rank())] = d;
      if (h.id == keep_host && d->device() == keep_device) d->setSelected(true);
    }
    if (h.id == keep_host && keep_device.isEmpty()) item->setSelected(true);
  }
  for (const TopologyLink& l : model_.ring_links()) add_link(l);
  for (auto it = bandwidth_.cbegin(); it != bandwidth_.cend(); ++it) {
    const int src = static_cast<int>(it.key() >> 32),
              dst = static_cast<int>(it.key() & 0xffffffffU);
    if (LinkItem* l = link_item(src, dst)) {
      l->set_bandwidth(it.value().gbps, it.value().estimated, it.value().eager);
    }
  }
  for (auto it = device_figures_.cbegin(); it != device_figures_.cend(); ++it) {
    const auto& v = it.value();
    if (DeviceItem* d = device_item_for(it.key())) d->set_figures({v[0], v[1], v[2], v[3] != 0});
  }
  setSceneRect(itemsBoundingRect().adjusted(-40, -40, 40, 40));
}

DeviceItem* TopologyScene::device_item_for(const QString& device) const {
  const int colon = device.indexOf(QLatin1Char(':'));
  if (colon < 0) return nullptr;
  const QString tile = QStringLiteral("cuda") + device.mid(colon);
  DeviceItem* first = nullptr;
  for (HostItem* h : hosts_) {
    for (DeviceItem* d : h->devices()) {
      if (d->device() != tile) continue;
      if (h->local()) return d;
      if (first == nullptr) first = d;
    }
  }
  return first;
}

void TopologyScene::show_device_figures(const QString& device, double utilization_pct,
                                        double memory_used_mib, double memory_total_mib,
                                        bool emulated) {
  device_figures_.insert(
      device, {utilization_pct, memory_used_mib, memory_total_mib, emulated ? 1.0 : 0.0});
  if (DeviceItem* d = device_item_for(device)) {
    d->set_figures({utilization_pct, memory_used_mib, memory_total_mib, emulated});
  }
}

void TopologyScene::clear_device_figures() {
  device_figures_.clear();
  schedule_rebuild();
}

LinkItem* TopologyScene::add_link(const TopologyLink& l) {
  const auto n = static_cast<int>(replica_items_.size());
  if (l.src < 0 || l.dst < 0 || l.src >= n || l.dst >= n) return nullptr;
  DeviceItem* a = replica_items_[static_cast<size_t>(l.src)];
  DeviceItem* b = replica_items_[static_cast<size_t>(l.dst)];
  if (a == nullptr || b == nullptr) return nullptr;
  auto* item = new LinkItem(l, a, b, a->host_id() != b->host_id());
  addItem(item);
  links_.push_back(item);
  link_by_ranks_.insert(key(l.src, l.dst), item);
  return item;
}

LinkItem* TopologyScene::link_item(int src, int dst) const {
  if (LinkItem* l = link_by_ranks_.value(key(src, dst))) return l;
  return link_by_ranks_.value(key(dst, src));
}

HostItem* TopologyScene::host_item(int id) const {
  for (HostItem* h : hosts_) {
    if (h->host_id() == id) return h;
  }
  return nullptr;
}

void TopologyScene::show_link_bandwidth(int src, int dst, double gbps, bool estimated, bool eager) {
  bandwidth_.insert(key(src, dst), {gbps, estimated, eager});
  LinkItem* l = link_item(src, dst);
  if (l == nullptr && src != dst) l = add_link(model_.link_between(src, dst));
  if (l != nullptr) l->set_bandwidth(gbps, estimated, eager);
}

void TopologyScene::clear_link_bandwidth() {
  bandwidth_.clear();
  schedule_rebuild();
}

void TopologyScene::on_host_moved(int id) {
  const TopologyHost* h = model_.host(id);
  HostItem* item = host_item(id);
  if (h == nullptr || item == nullptr) return;
  item->setPos(h->pos);
  for (LinkItem* l : links_) l->update_geometry();
}

int TopologyScene::selected_host() const {
  for (QGraphicsItem* i : selectedItems()) {
    if (auto* h = dynamic_cast<HostItem*>(i)) return h->host_id();
    if (auto* d = dynamic_cast<DeviceItem*>(i)) return d->host_id();
  }
  return 0;
}

QString TopologyScene::selected_device() const {
  for (QGraphicsItem* i : selectedItems()) {
    if (auto* d = dynamic_cast<DeviceItem*>(i)) return d->device();
  }
  return {};
}

void TopologyScene::select_host(int id) {
  clearSelection();
  if (HostItem* h = host_item(id)) h->setSelected(true);
}

void TopologyScene::contextMenuEvent(QGraphicsSceneContextMenuEvent* event) {
  for (QGraphicsItem* i : items(event->scenePos())) {
    if (auto* d = dynamic_cast<DeviceItem*>(i)) {
      clearSelection();
      d->setSelected(true);
      Q_EMIT context_menu_requested(d->host_id(), d->device(), event->screenPos());
      return;
    }
    if (auto* h = dynamic_cast<HostItem*>(i)) {
      select_host(h->host_id());
      Q_EMIT context_menu_requested(h->host_id(), QString(), event->screenPos());
      return;
    }
  }
  Q_EMIT context_menu_requested(0, QString(), event->screenPos());
}

}  // namespace baton::ui
