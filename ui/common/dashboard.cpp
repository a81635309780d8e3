#include "common/dashboard.h"

#include <baton/core/csv.h>
#include <baton/telemetry/lm_figures.h>
#include <qcustomplot.h>

#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QSlider>
#include <QVBoxLayout>
#include <cmath>

namespace baton::ui {
namespace {

// Colour-blind-friendly qualitative colours, one per run.
const QColor kRunColours[] = {QColor(0x1f, 0x77, 0xb4), QColor(0xff, 0x7f, 0x0e),
                              QColor(0x2c, 0xa0, 0x2c), QColor(0xd6, 0x27, 0x28),
                              QColor(0x94, 0x67, 0xbd), QColor(0x8c, 0x56, 0x4b),
                              QColor(0xe3, 0x77, 0xc2), QColor(0x17, 0xbe, 0xcf)};
// The step-time parts, stacked in this order.
const char* const kTimeParts[] = {"data", "compute", "comm", "optimizer"};
const QColor kTimeColours[] = {QColor(0x9e, 0xc9, 0xe2), QColor(0x3c, 0x7d, 0xc4),
                               QColor(0xf2, 0x8e, 0x2b), QColor(0x59, 0xa1, 0x4f)};

const char* plot_title(Dashboard::Plot p) {
  switch (p) {
    case Dashboard::Plot::kLoss:
      return "Loss";
    case Dashboard::Plot::kAccuracy:
      return "Accuracy";
    case Dashboard::Plot::kThroughput:
      return "Throughput (samples/s; tokens/s for language models)";
    case Dashboard::Plot::kStepTime:
      return "Step time (ms, stacked)";
    case Dashboard::Plot::kDevices:
      return "GPUs (% utilisation, % memory used)";
    default:
      return "Link bandwidth (GB/s)";
  }
}

// A series' name after its run's: "train", "val", "val perplexity", ...
QString part_name(const QString& key) {
  if (key.startsWith(QLatin1String("ppl/"))) return Dashboard::tr("val perplexity");
  return key.section(QLatin1Char('/'), 1);
}

}  // namespace

Dashboard::Dashboard(QWidget* parent) : QWidget(parent) {
  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("X axis:")));
  x_combo_ = new QComboBox;
  x_combo_->setObjectName(QStringLiteral("xAxis"));
  x_combo_->addItems({tr("Step"), tr("Relative time (s)"), tr("Wall clock")});
  controls->addWidget(x_combo_);
  controls->addSpacing(16);
  controls->addWidget(new QLabel(tr("Smoothing:")));
  smooth_slider_ = new QSlider(Qt::Horizontal);
  smooth_slider_->setObjectName(QStringLiteral("smoothing"));
  smooth_slider_->setRange(0, 99);
  smooth_slider_->setValue(static_cast<int>(smoothing_ * 100));
  smooth_slider_->setMaximumWidth(160);
  controls->addWidget(smooth_slider_);
  smooth_label_ = new QLabel(QString::number(smoothing_, 'f', 2));
  controls->addWidget(smooth_label_);
  controls->addSpacing(16);
  log_box_ = new QCheckBox(tr("Log-scale loss"));
  log_box_->setObjectName(QStringLiteral("logLoss"));
  controls->addWidget(log_box_);
  controls->addStretch(1);

  auto* grid = new QGridLayout;
  grid->setSpacing(4);
  const QPalette pal = palette();
  for (int i = 0; i < static_cast<int>(Plot::kCount); ++i) {
    auto* p = new QCustomPlot;
    p->setObjectName(QStringLiteral("plot%1").arg(i));
    p->setMinimumSize(280, 180);
    p->setBackground(pal.color(QPalette::Base));
    for (QCPAxis* axis : {p->xAxis, p->yAxis}) {
      axis->setBasePen(QPen(pal.color(QPalette::Text)));
      axis->setTickPen(QPen(pal.color(QPalette::Text)));
      axis->setSubTickPen(QPen(pal.color(QPalette::Mid)));
      axis->setTickLabelColor(pal.color(QPalette::Text));
      axis->setLabelColor(pal.color(QPalette::Text));
      axis->grid()->setPen(QPen(pal.color(QPalette::Midlight), 0, Qt::DotLine));
    }
    auto* title = new QCPTextElement(p, tr(plot_title(static_cast<Plot>(i))),
                                     QFont(font().family(), font().pointSize(), QFont::Bold));
    title->setTextColor(pal.color(QPalette::Text));
    p->plotLayout()->insertRow(0);
    p->plotLayout()->addElement(0, 0, title);
    p->legend->setVisible(false);  // shown once a series exists
    p->legend->setFont(QFont(font().family(), std::max(6, font().pointSize() - 2)));
    p->legend->setBrush(QBrush(pal.color(QPalette::Base)));
    p->legend->setTextColor(pal.color(QPalette::Text));
    p->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    p->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    plots_.push_back(p);
  }
  plot(Plot::kAccuracy)->yAxis->setRange(0, 1);
  grid->addWidget(plots_[0], 0, 0);
  grid->addWidget(plots_[1], 0, 1);
  grid->addWidget(plots_[2], 1, 0);
  grid->addWidget(plots_[3], 1, 1);
  grid->addWidget(plots_[4], 2, 0, 1, 2);
  grid->addWidget(plots_[5], 3, 0, 1, 2);
  plot(Plot::kDevices)->yAxis->setRange(0, 100);
  plot(Plot::kDevices)->hide();  // until a run on GPUs sends a device event

  samples_ = new QPlainTextEdit;
  samples_->setObjectName(QStringLiteral("samples"));
  samples_->setReadOnly(true);
  samples_->setMaximumBlockCount(2000);
  samples_->setPlaceholderText(tr("Samples"));
  samples_->setMaximumHeight(150);
  samples_->hide();

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(controls);
  layout->addLayout(grid, 1);
  layout->addWidget(samples_);
  apply_axis_labels();

  replot_timer_.setInterval(33);
  replot_timer_.setSingleShot(true);
  connect(&replot_timer_, &QTimer::timeout, this, [this] {
    if (dirty_) replot(QCustomPlot::rpQueuedReplot);
  });
  connect(x_combo_, &QComboBox::currentIndexChanged, this,
          [this](int i) { set_x_axis(static_cast<XAxis>(i)); });
  // A drag of the slider is many ticks: the label follows each, the
  // (bounded) rebuild runs once they pause.
  smoothing_timer_.setInterval(40);
  smoothing_timer_.setSingleShot(true);
  connect(&smoothing_timer_, &QTimer::timeout, this,
          [this] { set_smoothing(smooth_slider_->value() / 100.0); });
  connect(smooth_slider_, &QSlider::valueChanged, this, [this](int v) {
    smooth_label_->setText(QString::number(v / 100.0, 'f', 2));
    smoothing_timer_.start();
  });
  connect(log_box_, &QCheckBox::toggled, this, &Dashboard::set_log_loss);
}

void Dashboard::clear() {
  for (QCustomPlot* p : plots_) {
    p->clearGraphs();
    p->clearItems();
  }
  restarts_.clear();
  runs_.clear();
  plot(Plot::kDevices)->hide();
  samples_->clear();
  samples_->hide();
  samples_shown_ = 0;
  mark_dirty();
}

double Dashboard::start_unix_s(const QString& id) const {
  const auto r = runs_.find(id);
  return r == runs_.end() ? 0.0 : r->second.start_unix_s;
}

void Dashboard::begin_run(const QString& id, const QString& label, double start_unix_s) {
  Run& r = run_for(id.toStdString());
  r.label = label;
  r.start_unix_s = start_unix_s;
  for (auto& [key, s] : r.series) {
    if (s.graph) s.graph->setName(label + QLatin1Char(' ') + part_name(key));
  }
}

Dashboard::Run& Dashboard::run_for(const std::string& id) {
  const QString key = QString::fromStdString(id);
  auto it = runs_.find(key);
  if (it != runs_.end()) return it->second;
  Run r;
  r.label = key;
  r.index = static_cast<int>(runs_.size());
  r.color = kRunColours[static_cast<size_t>(r.index) % std::size(kRunColours)];
  r.start_unix_s = static_cast<double>(QDateTime::currentSecsSinceEpoch());
  Run& added = runs_.emplace(key, std::move(r)).first->second;
  if (runs_.size() == 2) restyle_for_compare();
  return added;
}

void Dashboard::restyle_for_compare() {
  for (auto& [id, run] : runs_) {
    for (auto& [key, s] : run.series) {
      if (!s.graph) continue;
      s.graph->setName(run.label + QLatin1Char(' ') + part_name(key));
      if (s.stacked) {
        // Translucent, one dash pattern a run: no run's fill hides another's.
        QBrush b = s.graph->brush();
        QColor c = b.color();
        c.setAlpha(60);
        s.graph->setBrush(c);
        QPen pen = s.graph->pen();
        pen.setStyle(static_cast<Qt::PenStyle>(1 + run.index % 4));
        s.graph->setPen(pen);
      }
    }
  }
}

QCPGraph* Dashboard::make_graph(Run& run, const QString& key, Plot p) {
  QCustomPlot* cp = plot(p);
  // A language model's validation perplexity: on the loss plot, against an
  // axis of its own on the right.
  const bool right = key.startsWith(QLatin1String("ppl/"));
  if (right) {
    cp->yAxis2->setVisible(true);
    cp->yAxis2->setLabel(tr("validation perplexity"));
    for (QCPAxis* a : {cp->yAxis2}) {
      a->setBasePen(cp->yAxis->basePen());
      a->setTickPen(cp->yAxis->tickPen());
      a->setTickLabelColor(cp->yAxis->tickLabelColor());
      a->setLabelColor(cp->yAxis->labelColor());
    }
  }
  QCPGraph* g = right ? cp->addGraph(cp->xAxis, cp->yAxis2) : cp->addGraph();
  const QString part = key.section(QLatin1Char('/'), 1);
  g->setName(runs_.size() > 1 || p == Plot::kLinks ? run.label + QLatin1Char(' ') + part : part);
  QPen pen(run.color, 1.6);
  if (p == Plot::kStepTime) {
    // Stacked: each part filled down to the part below it.
    for (int i = 0; i < 4; ++i) {
      if (part == QLatin1String(kTimeParts[i])) {
        pen.setColor(kTimeColours[i]);
        QColor fill = kTimeColours[i];
        fill.setAlpha(runs_.size() > 1 ? 60 : 140);
        g->setBrush(fill);
        const QString below = QStringLiteral("time/") + kTimeParts[i > 0 ? i - 1 : 0];
        if (i > 0 && run.series.count(below) && run.series[below].graph) {
          g->setChannelFillGraph(run.series[below].graph);
        }
      }
    }
    if (runs_.size() > 1)
      pen.setStyle(static_cast<Qt::PenStyle>(1 + run.index % 4));  // one dash pattern a run
  } else if (p == Plot::kLinks || p == Plot::kDevices) {
    const int n = static_cast<int>(cp->graphCount());
    pen.setColor(QColor::fromHsv((n * 67) % 360, 200, 200));
    if (key.contains(QLatin1String("(modelled)"))) pen.setStyle(Qt::DashLine);
    if (key.contains(QLatin1String("(eager"))) pen.setStyle(Qt::DotLine);
  } else if (right) {
    g->setName((runs_.size() > 1 ? run.label + QLatin1Char(' ') : QString()) +
               tr("val perplexity"));
    pen.setStyle(Qt::DotLine);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
  } else if (part == QLatin1String("val") || part == QLatin1String("replica")) {
    pen.setStyle(Qt::DashLine);
    // Validation comes once an epoch: marked, so even one point shows.
    if (part == QLatin1String("val"))
      g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 4));
  }
  g->setPen(pen);
  return g;
}

double Dashboard::shown(Series& s, double raw) {
  if (!s.smooth || smoothing_ <= 0) return raw;
  s.ema = smoothing_ * s.ema + (1 - smoothing_) * raw;
  s.ema_weight_sum = smoothing_ * s.ema_weight_sum + (1 - smoothing_);
  return s.ema / s.ema_weight_sum;
}

double Dashboard::shown_bucket(Series& s, double value, int64_t n) {
  if (!s.smooth || smoothing_ <= 0) return value;
  const double keep = std::pow(smoothing_, static_cast<double>(n));
  s.ema = keep * s.ema + (1 - keep) * value;
  s.ema_weight_sum = keep * s.ema_weight_sum + (1 - keep);
  return s.ema / s.ema_weight_sum;
}

double Dashboard::x_of(const Run& run, const Series& s, size_t i) const {
  switch (x_mode_) {
    case XAxis::kRelative:
      return s.pts[i].rel;
    case XAxis::kWall:
      return run.start_unix_s + s.pts[i].rel;
    default:
      return s.pts[i].step;
  }
}

void Dashboard::append(Run& run, const QString& run_id, const QString& key, Plot p, double step,
                       double rel, double value, bool smooth) {
  (void)run_id;
  Series& s = run.series[key];
  if (!s.graph) {
    s.smooth = smooth;
    s.stacked = p == Plot::kStepTime;
    s.graph = make_graph(run, key, p);
  }
  if (!s.pts.empty() && step < s.pts.back().step) s.ordered = false;
  // Into the last bucket while it has room, else a new one. Out of order
  // (a resumed run replayed), a point is a bucket of its own until the next
  // compaction: the graph's last point is then not the last bucket's.
  const bool merge = s.ordered && !s.pts.empty() && s.pts.back().n < s.per_bucket;
  if (merge) {
    Point& b = s.pts.back();
    b.step = step;
    b.rel = rel;
    b.value = value;
    b.lo = std::min(b.lo, value);
    b.hi = std::max(b.hi, value);
    ++b.n;
  } else {
    s.pts.push_back(Point{step, rel, value, value, value, 1});
  }
  if (static_cast<int>(s.pts.size()) > kMaxPoints) {
    // Full: neighbours merge in pairs, and the graph is drawn again.
    std::vector<Point> merged;
    merged.reserve(s.pts.size() / 2 + 1);
    for (size_t i = 0; i < s.pts.size(); i += 2) {
      Point b = s.pts[i];
      if (i + 1 < s.pts.size()) {
        const Point& c = s.pts[i + 1];
        b.step = c.step;
        b.rel = c.rel;
        b.value = c.value;
        b.lo = std::min(b.lo, c.lo);
        b.hi = std::max(b.hi, c.hi);
        b.n += c.n;
      }
      merged.push_back(b);
    }
    s.pts.swap(merged);
    s.per_bucket *= 2;
    rebuild_series(run, key, s);
    mark_dirty();
    return;
  }
  const size_t i = s.pts.size() - 1;
  double y = shown(s, value);
  if (s.stacked) {
    // Stack on the part below (its last point is at the same step).
    const QString k = key.section(QLatin1Char('/'), 1);
    for (int part = 1; part < 4; ++part) {
      if (k != QLatin1String(kTimeParts[part])) continue;
      const Series& below = run.series[QStringLiteral("time/") + kTimeParts[part - 1]];
      if (!below.graph || below.graph->dataCount() == 0) break;
      y += (below.graph->data()->end() - 1)->value;
      break;
    }
  }
  if (merge && s.graph->dataCount() > 0) {
    auto last = s.graph->data()->end() - 1;
    last->key = x_of(run, s, i);
    last->value = y;
  } else {
    s.graph->addData(x_of(run, s, i), y);
  }
}

void Dashboard::add_events(const std::vector<Event>& events) {
  for (const Event& ev : events) {
    if (const auto* e = std::get_if<RunStartEvent>(&ev)) {
      Run& r = run_for(e->run);
      // A later attempt of a run already shown (a replay's restarts): the
      // boundary is marked where the last attempt's steps ended, unless
      // the launcher marked it as it happened.
      if (r.attempts > 0 && !r.marked_since_start) {
        mark_attempt_end(QString::fromStdString(e->run), e->start_step, r.last_rel,
                         tr("resumed from step %1").arg(e->start_step));
      }
      ++r.attempts;
      r.marked_since_start = false;
      r.replicas = std::max(1, e->replicas);
      r.tokens_per_sample = e->tokens_per_sample;
      r.remote_updates = e->strategy == "parameter_server";
      if (r.label == QString::fromStdString(e->run) && !e->name.empty()) {
        r.label = QString::fromStdString(e->name);
      }
    } else if (const auto* e = std::get_if<StepEvent>(&ev)) {
      Run& r = run_for(e->run);
      const QString id = QString::fromStdString(e->run);
      const double st = static_cast<double>(e->step), t = e->wall_time_s;
      r.last_rel = t;
      // Under mpirun every rank reports its own rows' rate (one series per
      // rank when the job has several processes); rank 0's other figures
      // are the job's.
      // (Runs recorded before rank_samples_per_s: this rank's share.)
      // A language model's rates in tokens: samples times its window.
      const double unit = r.tokens_per_sample > 0 ? static_cast<double>(r.tokens_per_sample) : 1.0;
      const double own =
          unit * (e->rank_samples_per_s > 0 ? e->rank_samples_per_s
                                            : e->samples_per_s * e->local_replicas / r.replicas);
      r.rank_rate[e->rank] = own;
      if (e->local_replicas < r.replicas) {
        append(r, id, QStringLiteral("throughput/rank %1").arg(e->rank), Plot::kThroughput, st, t,
               own, false);
      }
      if (e->rank != 0) continue;
      append(r, id, QStringLiteral("loss/train"), Plot::kLoss, st, t, e->loss, true);
      append(r, id, QStringLiteral("accuracy/train"), Plot::kAccuracy, st, t, e->accuracy, true);
      // A parameter server's workers each count only their own rows: the
      // job's rate is their sum.
      double global = e->samples_per_s * unit;
      if (r.remote_updates) {
        global = 0;
        for (const auto& [rank, rate] : r.rank_rate) global += rate;
      }
      append(r, id, QStringLiteral("throughput/global"), Plot::kThroughput, st, t, global, false);
      append(r, id, QStringLiteral("throughput/replica"), Plot::kThroughput, st, t,
             own / std::max(1, e->local_replicas), false);
      const double parts[] = {e->data_ms, e->compute_ms, e->comm_ms, e->optimizer_ms};
      for (int i = 0; i < 4; ++i) {
        append(r, id, QStringLiteral("time/") + kTimeParts[i], Plot::kStepTime, st, t, parts[i],
               false);
      }
    } else if (const auto* e = std::get_if<EpochEvent>(&ev)) {
      if (!e->has_validation) continue;
      Run& r = run_for(e->run);
      const QString id = QString::fromStdString(e->run);
      const double st = static_cast<double>(e->step);
      append(r, id, QStringLiteral("loss/val"), Plot::kLoss, st, r.last_rel, e->val_loss, false);
      if (r.tokens_per_sample > 0) {
        // A language model's validation loss also as people read it.
        Series& v = r.series[QStringLiteral("loss/val")];
        if (v.graph) {
          v.graph->setName((runs_.size() > 1 ? r.label + QLatin1Char(' ') : QString()) +
                           tr("val (ppl %1, %2 bits/byte)")
                               .arg(perplexity(e->val_loss), 0, 'f', 2)
                               .arg(bits_per_byte(e->val_loss), 0, 'f', 3));
        }
        append(r, id, QStringLiteral("ppl/val"), Plot::kLoss, st, r.last_rel,
               perplexity(e->val_loss), false);
      }
      append(r, id, QStringLiteral("accuracy/val"), Plot::kAccuracy, st, r.last_rel,
             e->val_accuracy, false);
    } else if (const auto* e = std::get_if<SampleEvent>(&ev)) {
      const Run& r = run_for(e->run);
      samples_->show();
      samples_->appendPlainText(
          tr("%1 step %2:").arg(runs_.size() > 1 ? r.label : QString()).arg(e->step).trimmed());
      samples_->appendPlainText(QString::fromUtf8(e->prompt + e->text) + QLatin1Char('\n'));
      ++samples_shown_;
    } else if (const auto* e = std::get_if<LinkEvent>(&ev)) {
      Run& r = run_for(e->run);
      // A figure from a traffic model is its own series, drawn dashed and
      // named "≈ ... (modelled)": never shown as a measurement. Messages
      // under MPI's eager limit are their own series too, "(eager,
      // latency-bound)": a buffer copy's rate, not the link's bandwidth.
      const QString name =
          e->estimated ? QStringLiteral("link/%1->%2 \u2248 (modelled)").arg(e->src).arg(e->dst)
          : e->eager ? QStringLiteral("link/%1->%2 (eager, latency-bound)").arg(e->src).arg(e->dst)
                     : QStringLiteral("link/%1->%2").arg(e->src).arg(e->dst);
      append(r, QString::fromStdString(e->run), name, Plot::kLinks, static_cast<double>(e->step),
             r.last_rel, e->bandwidth_gbps, false);
    } else if (const auto* e = std::get_if<DeviceEvent>(&ev)) {
      Run& r = run_for(e->run);
      // An emulated GPU's figures are the emulator's: named so. Its
      // utilisation is not known (-1) and not drawn.
      const QString dev = QString::fromStdString(e->device) +
                          (e->emulated ? QStringLiteral(" (emulated)") : QString());
      const double st = static_cast<double>(e->step);
      const QString id = QString::fromStdString(e->run);
      plot(Plot::kDevices)->show();
      if (e->utilization_pct >= 0) {
        append(r, id, QStringLiteral("gpu/") + dev + QStringLiteral(" utilisation"), Plot::kDevices,
               st, r.last_rel, e->utilization_pct, false);
      }
      if (e->memory_used_mib >= 0 && e->memory_total_mib > 0) {
        append(r, id, QStringLiteral("gpu/") + dev + QStringLiteral(" memory"), Plot::kDevices, st,
               r.last_rel, 100.0 * e->memory_used_mib / e->memory_total_mib, false);
      }
    }
  }
  mark_dirty();
}

void Dashboard::rebuild_series(Run& run, const QString& key, Series& s) {
  if (!s.graph) return;
  s.ema = s.ema_weight_sum = 0;
  QVector<double> xs, ys;
  xs.reserve(static_cast<int>(s.pts.size()));
  ys.reserve(static_cast<int>(s.pts.size()));
  for (size_t i = 0; i < s.pts.size(); ++i) {
    xs.push_back(x_of(run, s, i));
    ys.push_back(shown_bucket(s, s.pts[i].value, s.pts[i].n));
  }
  if (s.stacked) {
    // Re-stack on the parts below, bucket by bucket (the parts arrive
    // together, so their buckets line up).
    const QString k = key.section(QLatin1Char('/'), 1);
    for (int part = 1; part < 4; ++part) {
      if (k != QLatin1String(kTimeParts[part])) continue;
      for (int below = 0; below < part; ++below) {
        const Series& b = run.series[QStringLiteral("time/") + kTimeParts[below]];
        for (int i = 0; i < ys.size() && i < static_cast<int>(b.pts.size()); ++i) {
          ys[i] += b.pts[static_cast<size_t>(i)].value;
        }
      }
    }
  }
  s.graph->setData(xs, ys, true);
}

void Dashboard::rebuild(bool smoothed_only) {
  for (auto& [id, run] : runs_) {
    for (auto& [key, s] : run.series) {
      if (smoothed_only && !s.smooth) continue;
      rebuild_series(run, key, s);
    }
  }
  mark_dirty();
}

void Dashboard::set_x_axis(XAxis mode) {
  if (x_combo_->currentIndex() != static_cast<int>(mode)) {
    x_combo_->setCurrentIndex(static_cast<int>(mode));  // comes back here
    return;
  }
  x_mode_ = mode;
  apply_axis_labels();
  rebuild();
  place_restart_markers();
}

void Dashboard::mark_restart(const QString& id, int64_t step, double rel_s, const QString& cause) {
  mark_attempt_end(id, step, rel_s, tr("restart: %1").arg(cause.left(60)));
}

void Dashboard::mark_attempt_end(const QString& id, int64_t step, double rel_s,
                                 const QString& label) {
  run_for(id.toStdString()).marked_since_start = true;
  RestartMarker m;
  m.run = id;
  m.step = static_cast<double>(std::max<int64_t>(0, step));
  m.rel = std::max(0.0, rel_s);
  QPen pen(QColor(200, 40, 40));
  pen.setStyle(Qt::DashLine);
  for (QCustomPlot* p : plots_) {
    auto* line = new QCPItemStraightLine(p);
    line->setPen(pen);
    line->setSelectable(false);
    m.lines.push_back(line);
  }
  QCustomPlot* loss = plot(Plot::kLoss);
  m.label = new QCPItemText(loss);
  m.label->setText(label.left(80));
  m.label->setColor(QColor(200, 40, 40));
  m.label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
  m.label->setClipToAxisRect(true);
  restarts_.push_back(std::move(m));
  place_restart_markers();
}

void Dashboard::place_restart_markers() {
  for (RestartMarker& m : restarts_) {
    const double x = restart_x(m);
    for (QCPItemStraightLine* line : m.lines) {
      line->point1->setCoords(x, 0);
      line->point2->setCoords(x, 1);
    }
    m.label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    m.label->position->setCoords(x, 0.02);
  }
  mark_dirty();
}

double Dashboard::restart_x(const RestartMarker& m) const {
  if (x_mode_ == XAxis::kStep) return m.step;
  if (x_mode_ == XAxis::kRelative) return m.rel;
  return m.rel + start_unix_s(m.run);
}

int Dashboard::restart_marker_count() const { return static_cast<int>(restarts_.size()); }

double Dashboard::restart_marker_x(int i) const {
  return restarts_.at(static_cast<size_t>(i)).lines.front()->point1->coords().x();
}

void Dashboard::apply_axis_labels() {
  for (QCustomPlot* p : plots_) {
    if (x_mode_ == XAxis::kWall) {
      auto ticker = QSharedPointer<QCPAxisTickerDateTime>::create();
      ticker->setDateTimeFormat(QStringLiteral("HH:mm:ss"));
      p->xAxis->setTicker(ticker);
      p->xAxis->setLabel(tr("time"));
    } else {
      p->xAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
      p->xAxis->setLabel(x_mode_ == XAxis::kStep ? tr("step") : tr("seconds"));
    }
  }
}

void Dashboard::set_smoothing(double weight) {
  smoothing_ = std::clamp(weight, 0.0, 0.99);
  smooth_label_->setText(QString::number(smoothing_, 'f', 2));
  if (smooth_slider_->value() != static_cast<int>(smoothing_ * 100 + 0.5)) {
    const QSignalBlocker quiet(smooth_slider_);
    smooth_slider_->setValue(static_cast<int>(smoothing_ * 100 + 0.5));
  }
  smoothing_timer_.stop();
  rebuild(/*smoothed_only=*/true);
}

void Dashboard::set_log_loss(bool on) {
  log_loss_ = on;
  if (log_box_->isChecked() != on) log_box_->setChecked(on);
  QCPAxis* y = plot(Plot::kLoss)->yAxis;
  y->setScaleType(on ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  if (on) {
    y->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
  } else {
    y->setTicker(QSharedPointer<QCPAxisTicker>::create());
  }
  mark_dirty();
}

void Dashboard::mark_dirty() {
  dirty_ = true;
  if (!replot_timer_.isActive()) replot_timer_.start();
}

void Dashboard::replot(int priority) {
  dirty_ = false;
  for (QCustomPlot* p : plots_) {
    p->legend->setVisible(p->graphCount() > 0);
    p->rescaleAxes(true);
    if (p == plot(Plot::kAccuracy)) p->yAxis->setRange(0, 1.0);
    if (p == plot(Plot::kDevices)) p->yAxis->setRange(0, 100.0);
    p->replot(static_cast<QCustomPlot::RefreshPriority>(priority));
  }
  ++replots_;
}

void Dashboard::replot_now() {
  replot_timer_.stop();
  replot(QCustomPlot::rpImmediateRefresh);
}

int Dashboard::point_count(const QString& run, const QString& series) const {
  const auto r = runs_.find(run);
  if (r == runs_.end()) return 0;
  const auto s = r->second.series.find(series);
  if (s == r->second.series.end()) return 0;
  int64_t n = 0;  // every point appended: the buckets' counts
  for (const Point& b : s->second.pts) n += b.n;
  return static_cast<int>(n);
}

int Dashboard::held_points(const QString& run, const QString& series) const {
  const auto r = runs_.find(run);
  if (r == runs_.end()) return 0;
  const auto s = r->second.series.find(series);
  return s == r->second.series.end() ? 0 : static_cast<int>(s->second.pts.size());
}

bool Dashboard::export_csv(const QString& path, QString* error) const {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate | QIODevice::Text)) {
    if (error) *error = tr("%1: cannot write (%2)").arg(path, f.errorString());
    return false;
  }
  // The engine's CSV writer (RFC 4180 quoting, 17 digits), as the CLI's.
  std::string line = "run,series,step,wall_time_s,value\n";
  bool ok =
      f.write(line.data(), static_cast<qint64>(line.size())) == static_cast<qint64>(line.size());
  for (const auto& [id, run] : runs_) {
    const std::string run_field = csv::field(id.toStdString());
    for (const auto& [key, s] : run.series) {
      const std::string key_field = csv::field(key.toStdString());
      for (size_t i = 0; i < s.pts.size() && ok; ++i) {
        const Point& b = s.pts[i];  // a bucket's last point, as drawn
        line = run_field + ',' + key_field + ',' + std::to_string(static_cast<int64_t>(b.step));
        csv::add_number(line, b.rel);
        csv::add_number(line, b.value);
        line += '\n';
        ok = f.write(line.data(), static_cast<qint64>(line.size())) ==
             static_cast<qint64>(line.size());
      }
    }
  }
  if (!ok || !f.flush()) {
    if (error) *error = tr("%1: write failed (%2)").arg(path, f.errorString());
    return false;
  }
  return true;
}

bool Dashboard::export_png(const QString& path, QString* error) {
  replot_now();
  if (!grab().save(path, "PNG")) {
    if (error) *error = tr("%1: cannot write the image").arg(path);
    return false;
  }
  return true;
}

}  // namespace baton::ui
