#include "cluster/topology_items.h"

#include <QApplication>
#include <QFontMetricsF>
#include <QGraphicsScene>
#include <QGraphicsSceneMouseEvent>
#include <QGraphicsSimpleTextItem>
#include <QPainter>
#include <QStyleOptionGraphicsItem>
#include <algorithm>
#include <cmath>

namespace baton::ui {
namespace {

constexpr double kGap = 8, kHeader = 52, kLine = 16, kPad = 10;
constexpr int kColumns = 4;

QPalette palette_of(const QGraphicsItem* item) {
  return item->scene() != nullptr ? item->scene()->palette() : QApplication::palette();
}

// Problems are semantic: the same red on light and dark palettes.
QColor problem_colour() { return QColor(0xd0, 0x30, 0x30); }

// Where the segment from inside `r` to `to` leaves `r` (r's centre when it
// does not).
QPointF exit_point(const QRectF& r, const QLineF& line) {
  const QLineF edges[4] = {{r.topLeft(), r.topRight()},
                           {r.topRight(), r.bottomRight()},
                           {r.bottomRight(), r.bottomLeft()},
                           {r.bottomLeft(), r.topLeft()}};
  for (const QLineF& e : edges) {
    QPointF at;
    if (line.intersects(e, &at) == QLineF::BoundedIntersection) return at;
  }
  return line.p1();
}

QString role_name(TaskRole r) { return QString::fromLatin1(baton::to_string(r)); }

// A link's words on a plate of the base colour, readable over lines.
class LinkLabel : public QGraphicsSimpleTextItem {
 public:
  using QGraphicsSimpleTextItem::QGraphicsSimpleTextItem;
  QRectF boundingRect() const override {
    return QGraphicsSimpleTextItem::boundingRect().adjusted(-3, -1, 3, 1);
  }
  void paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget* widget) override {
    if (text().isEmpty()) return;
    QColor plate = palette_of(this).color(QPalette::Base);
    plate.setAlpha(225);
    p->setPen(Qt::NoPen);
    p->setBrush(plate);
    p->drawRoundedRect(boundingRect(), 3, 3);
    QGraphicsSimpleTextItem::paint(p, option, widget);
  }
};

}  // namespace

// ---- DeviceItem ----

DeviceItem::DeviceItem(int host_id, const TopologyDevice& device, int replica_rank,
                       QGraphicsItem* parent)
    : QGraphicsItem(parent),
      host_id_(host_id),
      name_(QString::fromStdString(device.name)),
      kind_(QString::fromStdString(device.kind)),
      rank_(replica_rank) {
  setFlag(ItemIsSelectable);
  QString tip = name_;
  if (!device.model.empty()) tip += QStringLiteral("\n") + QString::fromStdString(device.model);
  if (device.numa_node >= 0) tip += QObject::tr("\nNUMA node %1").arg(device.numa_node);
  tip += rank_ >= 0 ? QObject::tr("\nreplica %1 of the ring").arg(rank_)
                    : QObject::tr("\nnot used by this strategy");
  base_tip_ = tip;
  setToolTip(tip);
}

void DeviceItem::set_figures(const Figures& f) {
  figures_ = f;
  has_figures_ = true;
  QString tip = base_tip_ + QObject::tr("\nthe run: ");
  if (f.utilization_pct >= 0)
    tip += QObject::tr("utilisation %1%, ").arg(f.utilization_pct, 0, 'f', 0);
  if (f.memory_total_mib > 0) {
    tip += QObject::tr("memory %1 of %2 GiB")
               .arg(std::max(0.0, f.memory_used_mib) / 1024, 0, 'f', 1)
               .arg(f.memory_total_mib / 1024, 0, 'f', 1);
  }
  tip += f.emulated ? QObject::tr(" (emulated: the GPU emulator's memory; no utilisation)")
                    : QObject::tr(" (measured, NVML)");
  setToolTip(tip);
  update();
}

QRectF DeviceItem::boundingRect() const { return {0, 0, kWidth, kHeight}; }

void DeviceItem::paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget*) {
  const QPalette pal = palette_of(this);
  const bool gpu = kind_ == QLatin1String("cuda");
  QColor fill = gpu ? QColor(0x76, 0xb9, 0x00) : pal.color(QPalette::Button);  // NVIDIA green
  if (gpu) fill.setAlpha(rank_ >= 0 ? 150 : 60);
  QColor text = gpu ? pal.color(QPalette::Text) : pal.color(QPalette::ButtonText);
  if (rank_ < 0) text = pal.color(QPalette::Disabled, QPalette::Text);
  const bool selected = option->state & QStyle::State_Selected;
  p->setPen(QPen(selected ? pal.color(QPalette::Highlight) : pal.color(QPalette::Mid),
                 selected ? 2.5 : 1));
  p->setBrush(fill);
  p->drawRoundedRect(boundingRect().adjusted(0.5, 0.5, -0.5, -0.5), 4, 4);
  p->setPen(text);
  QFont f = p->font();
  f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.85));
  p->setFont(f);
  p->drawText(boundingRect().adjusted(4, 1, -4, rank_ >= 0 ? -11 : -1), Qt::AlignCenter, name_);
  if (has_figures_) {
    // The run's figure as a bar along the bottom: utilisation, or memory
    // where utilisation is not known (the emulator).
    const double total = std::max(1.0, figures_.memory_total_mib);
    const double share = figures_.utilization_pct >= 0
                             ? figures_.utilization_pct / 100
                             : std::max(0.0, figures_.memory_used_mib) / total;
    const QRectF bar(3, kHeight - 5, (kWidth - 6) * std::clamp(share, 0.0, 1.0), 3);
    p->setPen(Qt::NoPen);
    p->setBrush(QColor(0xd3, 0x54, 0x00));
    p->drawRect(bar);
    p->setPen(text);
    f.setPointSizeF(std::max(5.5, f.pointSizeF() * 0.85));
    p->setFont(f);
    const QString line =
        figures_.utilization_pct >= 0
            ? QObject::tr("%1% busy").arg(figures_.utilization_pct, 0, 'f', 0)
            : QObject::tr("%1% mem").arg(100 * std::max(0.0, figures_.memory_used_mib) / total, 0,
                                         'f', 0);
    p->drawText(boundingRect().adjusted(4, 13, -4, -4), Qt::AlignCenter, line);
    if (figures_.emulated) {
      // The emulator's figures: the tile outlined dashed (the tooltip says
      // emulated).
      p->setPen(QPen(text, 1, Qt::DashLine));
      p->setBrush(Qt::NoBrush);
      p->drawRoundedRect(boundingRect().adjusted(2, 2, -2, -2), 3, 3);
    }
  } else if (rank_ >= 0) {
    f.setPointSizeF(std::max(5.5, f.pointSizeF() * 0.85));
    p->setFont(f);
    p->drawText(boundingRect().adjusted(4, 14, -4, -1), Qt::AlignCenter,
                QObject::tr("replica %1").arg(rank_));
  }
}

// ---- HostItem ----

HostItem::HostItem(const TopologyHost& host, const std::vector<Replica>& replicas,
                   QStringList problems, DragFn on_drag)
    : id_(host.id),
      local_(host.local),
      problems_(std::move(problems)),
      on_drag_(std::move(on_drag)) {
  setFlag(ItemIsSelectable);
  setPos(host.pos);
  title_ = QStringLiteral("%1:%2").arg(host.name).arg(host.port);
  role_ = role_name(host.role);
  const int cpus = host.info.cpu_count(), gpus = host.info.gpu_count();
  summary_ = QObject::tr("%1 CPU core(s), %2 GPU(s)").arg(cpus).arg(gpus);
  summary_ += host.probed ? QObject::tr(" - probed") : QObject::tr(" - not probed");
  if (host.local) summary_ += QObject::tr(", this host");
  QString tip = QString::fromStdString(host.info.hostname);
  if (host.info.cpu_model != "unknown")
    tip += QStringLiteral("\n") + QString::fromStdString(host.info.cpu_model);
  if (!host.info.gpu_note.empty())
    tip += QStringLiteral("\n") + QString::fromStdString(host.info.gpu_note);
  setToolTip(tip);

  const auto n = static_cast<int>(host.info.devices.size());
  const int cols = std::clamp(n, 1, kColumns);
  const int rows = (n + cols - 1) / cols;
  const double width = std::max(300.0, cols * (DeviceItem::kWidth + kGap) - kGap + 2 * kPad);
  const double height = kHeader + rows * (DeviceItem::kHeight + kGap) + kPad +
                        static_cast<double>(problems_.size()) * kLine;
  rect_ = QRectF(0, 0, width, height);
  for (int i = 0; i < n; ++i) {
    const TopologyDevice& d = host.info.devices[static_cast<size_t>(i)];
    int rank = -1;
    for (size_t r = 0; r < replicas.size(); ++r) {
      if (replicas[r].host_id == host.id && replicas[r].device.toStdString() == d.name) {
        rank = static_cast<int>(r);
      }
    }
    auto* item = new DeviceItem(host.id, d, rank, this);
    // Rows snake (left to right, then right to left) so that ring
    // neighbours are tile neighbours.
    const int row = i / cols;
    const int col = row % 2 == 0 ? i % cols : cols - 1 - i % cols;
    item->setPos(kPad + col * (DeviceItem::kWidth + kGap),
                 kHeader + row * (DeviceItem::kHeight + kGap));
    devices_.push_back(item);
  }
}

QRectF HostItem::boundingRect() const { return rect_.adjusted(-2, -2, 2, 2); }

void HostItem::paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget*) {
  const QPalette pal = palette_of(this);
  const bool selected = option->state & QStyle::State_Selected;
  QPen border(problems_.isEmpty() ? pal.color(QPalette::Mid) : problem_colour(), 1.5);
  if (selected) border = QPen(pal.color(QPalette::Highlight), 3);
  p->setPen(border);
  p->setBrush(pal.color(QPalette::Base));
  p->drawRoundedRect(rect_, 8, 8);

  QFont f = p->font();
  f.setBold(true);
  p->setFont(f);
  p->setPen(pal.color(QPalette::Text));
  const QRectF title_box(kPad, 6, rect_.width() - 2 * kPad, 18);
  p->drawText(title_box, Qt::AlignLeft | Qt::AlignVCenter, title_);
  // The role as a badge at the right.
  const QFontMetricsF fm(f);
  const double w = fm.horizontalAdvance(role_) + 12;
  const QRectF badge(rect_.width() - kPad - w, 6, w, 18);
  p->setBrush(pal.color(QPalette::Highlight));
  p->setPen(Qt::NoPen);
  p->drawRoundedRect(badge, 9, 9);
  p->setPen(pal.color(QPalette::HighlightedText));
  p->drawText(badge, Qt::AlignCenter, role_);

  f.setBold(false);
  f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.9));
  p->setFont(f);
  p->setPen(pal.color(QPalette::PlaceholderText));
  const QRectF summary_box(kPad, 26, rect_.width() - 2 * kPad, 18);
  p->drawText(summary_box, Qt::AlignLeft | Qt::AlignVCenter,
              QFontMetricsF(f).elidedText(summary_, Qt::ElideRight, summary_box.width()));

  // Validation messages, next to what they are about.
  p->setPen(problem_colour());
  double y = rect_.height() - kPad / 2 - static_cast<double>(problems_.size()) * kLine;
  for (const QString& msg : problems_) {
    const QRectF line(kPad, y, rect_.width() - 2 * kPad, kLine);
    p->drawText(
        line, Qt::AlignLeft | Qt::AlignVCenter,
        QFontMetricsF(f).elidedText(QStringLiteral("\u26a0 ") + msg, Qt::ElideRight, line.width()));
    y += kLine;
  }
}

void HostItem::mousePressEvent(QGraphicsSceneMouseEvent* event) {
  QGraphicsItem::mousePressEvent(event);  // selection
  if (event->button() != Qt::LeftButton) return;
  press_scene_ = event->scenePos();
  press_pos_ = pos();
  dragging_ = false;
  event->accept();
}

void HostItem::mouseMoveEvent(QGraphicsSceneMouseEvent* event) {
  if (!(event->buttons() & Qt::LeftButton) || !on_drag_) return;
  const QPointF to = press_pos_ + (event->scenePos() - press_scene_);
  // The model moves the box (one undo step per drag); this item follows it.
  on_drag_(id_, press_pos_, to, !dragging_);
  dragging_ = true;
}

// ---- LinkItem ----

QColor LinkItem::class_colour(LinkClass c) {
  switch (c) {
    case LinkClass::kNvLink:
      return QColor(0x76, 0xb9, 0x00);
    case LinkClass::kPcie:
      return QColor(0x2f, 0x80, 0xed);
    case LinkClass::kCrossNuma:
      return QColor(0xe6, 0x7e, 0x22);
    case LinkClass::kNetwork:
      return QColor(0x8e, 0x44, 0xad);
    case LinkClass::kSharedMemory:
    case LinkClass::kUnknown:
      break;
  }
  return QColor(0x80, 0x80, 0x80);
}

LinkItem::LinkItem(const TopologyLink& link, QGraphicsItem* a, QGraphicsItem* b, bool between_hosts)
    : link_(link), a_(a), b_(b), between_hosts_(between_hosts) {
  setZValue(1);
  QPen pen(class_colour(link.cls), between_hosts ? 2.5 : 2);
  if (link.cls == LinkClass::kNetwork) pen.setStyle(Qt::DashLine);
  if (link.cls == LinkClass::kUnknown) pen.setStyle(Qt::DotLine);
  pen.setCapStyle(Qt::RoundCap);
  setPen(pen);
  label_ = new LinkLabel(this);
  QFont f = label_->font();
  f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.8));
  label_->setFont(f);
  label_->setZValue(2);
  update_label();
  update_geometry();
}

void LinkItem::update_geometry() {
  const QPointF ca = a_->sceneBoundingRect().center(), cb = b_->sceneBoundingRect().center();
  // Between hosts the line runs from box edge to box edge (aimed at the two
  // devices), inside a host from tile edge to tile edge.
  const QGraphicsItem* ea = between_hosts_ && a_->parentItem() ? a_->parentItem() : a_;
  const QGraphicsItem* eb = between_hosts_ && b_->parentItem() ? b_->parentItem() : b_;
  const QPointF p1 = exit_point(ea->sceneBoundingRect(), QLineF(ca, cb));
  const QPointF p2 = exit_point(eb->sceneBoundingRect(), QLineF(cb, ca));
  setLine(QLineF(p1, p2));
  const QRectF lr = label_->boundingRect();
  // Between hosts the two directions of a ring often run side by side: one
  // label above its line, the other below.
  const bool below = between_hosts_ && link_.src > link_.dst;
  label_->setPos(QLineF(p1, p2).center() -
                 QPointF(lr.width() / 2, below ? -3.0 : lr.height() + 3.0));
}

void LinkItem::update_label() {
  QString text;
  const bool quiet = link_.cls == LinkClass::kSharedMemory;  // many, short: no words
  if (!quiet) {
    text = to_string(link_.cls);
    if (link_.cls == LinkClass::kNvLink && link_.detail.size() > 2) {
      text += QStringLiteral(" \u00d7") + link_.detail.mid(2);  // NV4: four NVLinks
    } else if (!link_.detail.isEmpty() && link_.cls != LinkClass::kCrossNuma) {
      text += QStringLiteral(" ") + link_.detail;
    }
  }
  if (gbps_ >= 0) {
    text += (text.isEmpty() ? QString() : QStringLiteral(" \u00b7 ")) +
            (estimated_ ? QStringLiteral("\u2248") : QString()) +
            QStringLiteral("%1 GB/s").arg(gbps_, 0, 'f', gbps_ < 10 ? 2 : 1);
  }
  label_->setText(text);
  label_->setBrush(palette_of(this).color(QPalette::Text));
  setToolTip(
      QObject::tr("replica %1 \u2192 %2: %3%4%5")
          .arg(link_.src)
          .arg(link_.dst)
          .arg(to_string(link_.cls))
          .arg(link_.detail.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(link_.detail))
          .arg(gbps_ < 0    ? QObject::tr(", bandwidth not measured yet")
               : estimated_ ? QObject::tr(", \u2248 %1 GB/s modelled (a traffic model's figure: "
                                          "this collective does not expose its traffic)")
                                  .arg(gbps_, 0, 'f', 2)
               : eager_ ? QObject::tr(", %1 GB/s latency-bound, not the link's bandwidth "
                                      "(messages under MPI's eager limit: a copy out of MPI's "
                                      "buffer)")
                              .arg(gbps_, 0, 'f', 2)
                        : QObject::tr(", %1 GB/s measured, the link's bandwidth (bytes over "
                                      "transfer time)")
                              .arg(gbps_, 0, 'f', 2)));
}

void LinkItem::set_bandwidth(double gbps, bool estimated, bool eager) {
  if (gbps < 0 || (estimated == estimated_ && eager == eager_ &&
                   std::abs(gbps - gbps_) < 1e-3 * std::max(1.0, gbps))) {
    return;
  }
  gbps_ = gbps;
  estimated_ = estimated;
  eager_ = eager;
  // 0.1 GB/s (red, thin) .. 100 GB/s (green, thick), on a log scale.
  const double t = std::clamp((std::log10(std::max(gbps, 1e-3)) + 1.0) / 3.0, 0.0, 1.0);
  QPen p = pen();
  p.setColor(QColor::fromHsvF(static_cast<float>(t / 3.0), 0.85F, 0.85F));
  p.setWidthF(2.0 + 7.0 * t);
  p.setStyle(estimated ? Qt::DashLine : eager ? Qt::DotLine : Qt::SolidLine);
  setPen(p);
  update_label();
  update_geometry();
}

}  // namespace baton::ui
