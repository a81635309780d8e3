#include "cluster/prediction_panel.h"

#include <baton/core/config.h>
#include <baton/core/error.h>
#include <baton/history/store.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <qcustomplot.h>

#include <QFutureWatcher>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrent>
#include <algorithm>
#include <filesystem>
#include <map>
#include <thread>

#include "cluster/topology_model.h"

namespace baton::ui {

namespace {

struct MeasureResult {
  std::optional<StepProbe> probe;
  std::vector<MeasuredPoint> history;
  QString error;
};

baton::LinkClass engine_class(ui::LinkClass c) {
  switch (c) {
    case ui::LinkClass::kNvLink:
      return baton::LinkClass::kNvlink;
    case ui::LinkClass::kPcie:
      return baton::LinkClass::kPcie;
    case ui::LinkClass::kNetwork:
      return baton::LinkClass::kNetwork;
    default:
      return baton::LinkClass::kSharedMemory;
  }
}

int64_t global_batch_of(const nlohmann::json& cfg) {
  const auto train = cfg.find("train");
  if (train == cfg.end() || !train->is_object()) return 32;
  return train->value("global_batch_size", int64_t{32});
}

// Past runs of the same model at the same per-device batch, with the
// throughput they measured.
std::vector<MeasuredPoint> history_points(const std::string& db, const nlohmann::json& cfg,
                                          int64_t per_device_batch) {
  std::vector<MeasuredPoint> out;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(db, ec)) return out;
  const HistoryStore store(db, HistoryStore::Open::kReadOnly);
  RunFilter f;
  f.status = "completed";
  for (const RunRecord& listed : store.list_runs(f)) {
    if (listed.replicas < 1) continue;
    const RunRecord r = store.run(listed.id);  // with its config
    if (!r.config.is_object() ||
        r.config.value("model", nlohmann::json()) != cfg.value("model", nlohmann::json())) {
      continue;
    }
    if (global_batch_of(r.config) / r.replicas != per_device_batch) continue;
    // The steps' own throughput (its last logged window, the chief's), as
    // the prediction is: not the run's average, which holds validation.
    double sps = 0;
    for (const MetricSummary& m : store.metric_summary(r.id)) {
      if (m.metric == "samples_per_s" && m.rank == 0) sps = m.last;
    }
    if (sps > 0) out.push_back({r.replicas, sps, QString::fromStdString(r.uid)});
  }
  return out;
}

QString ms(double s) { return QString::number(s * 1e3, 'f', s < 0.01 ? 3 : 2); }

}  // namespace

PredictionPanel::PredictionPanel(const StudioContext& ctx, TopologyModel& model, QWidget* parent)
    : QWidget(parent), ctx_(ctx), model_(model), links_(LinkCosts::nominal()) {
  const std::string cal = default_calibration_path();
  std::error_code ec;
  if (std::filesystem::is_regular_file(cal, ec)) {
    try {
      links_.merge_json(read_json_file(cal), cal);
      links_note_ = tr("links from %1").arg(QString::fromStdString(cal));
    } catch (const std::exception& e) {
      links_note_ = tr("nominal links (%1)").arg(QString::fromUtf8(e.what()));
    }
  } else {
    links_note_ = tr("nominal links (run baton calibrate to measure yours)");
  }
  compute_ = new QLabel(tr("The model's step is not measured yet."));
  compute_->setObjectName(QStringLiteral("prediction_compute"));
  compute_->setWordWrap(true);
  measure_ = new QPushButton(tr("Measure the model"));
  measure_->setObjectName(QStringLiteral("prediction_measure"));
  measure_->setToolTip(
      tr("A short run of the Train view's config on one device here (as many copies at once as a "
         "CPU host of the topology has devices), off the window's thread"));
  connect(measure_, &QPushButton::clicked, this, &PredictionPanel::measure);
  summary_ = new QLabel;
  summary_->setObjectName(QStringLiteral("prediction_summary"));
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::RichText);
  chart_ = new QCustomPlot;
  chart_->setObjectName(QStringLiteral("prediction_chart"));
  chart_->setMinimumHeight(160);
  chart_->xAxis->setScaleType(QCPAxis::stLogarithmic);
  auto ticker = QSharedPointer<QCPAxisTickerLog>::create();
  ticker->setLogBase(2);
  chart_->xAxis->setTicker(ticker);
  chart_->xAxis->setLabel(tr("devices"));
  chart_->xAxis->setRange(0.8, 640);
  chart_->yAxis->setScaleType(QCPAxis::stLogarithmic);
  chart_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
  chart_->yAxis->setLabel(tr("samples/s"));
  chart_->legend->setVisible(true);
  chart_->legend->setFont(QFont(font().family(), std::max(6, font().pointSize() - 2)));
  QCPGraph* predicted = chart_->addGraph();
  predicted->setName(tr("predicted (modelled)"));
  predicted->setPen(QPen(QColor(40, 90, 200), 2));
  predicted->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
  QCPGraph* ideal = chart_->addGraph();
  ideal->setName(tr("linear (ideal)"));
  ideal->setPen(QPen(QColor(150, 150, 150), 1, Qt::DashLine));
  QCPGraph* measured = chart_->addGraph();
  measured->setName(tr("measured (past runs)"));
  measured->setLineStyle(QCPGraph::lsNone);
  measured->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, QColor(200, 60, 40), 8));

  auto* col = new QVBoxLayout(this);
  auto* top = new QHBoxLayout;
  top->addWidget(compute_, 1);
  top->addWidget(measure_);
  col->addLayout(top);
  col->addWidget(summary_);
  col->addWidget(chart_, 1);
  connect(&model_, &TopologyModel::changed, this, &PredictionPanel::update_prediction);
  update_prediction();
}

Topology PredictionPanel::engine_topology() const {
  Topology t;
  const std::vector<Replica> reps = model_.replicas();
  std::map<int, int> per_host;
  bool gpu = false;
  for (const Replica& r : reps) {
    ++per_host[r.host_id];
    gpu = gpu || r.device.startsWith(QLatin1String("cuda"));
  }
  t.hosts = std::max<int>(1, static_cast<int>(per_host.size()));
  t.devices_per_host = 1;
  for (const auto& [host, n] : per_host) t.devices_per_host = std::max(t.devices_per_host, n);
  t.device = gpu ? "gpu" : "cpu";
  t.intra_host = gpu ? baton::LinkClass::kPcie : baton::LinkClass::kSharedMemory;
  // The link between two replicas of one host, as the canvas classes it.
  for (size_t i = 0; i + 1 < reps.size(); ++i) {
    if (reps[i].host_id != reps[i + 1].host_id) continue;
    const auto cls = model_.link_between(static_cast<int>(i), static_cast<int>(i + 1)).cls;
    if (cls != ui::LinkClass::kUnknown) t.intra_host = engine_class(cls);
    break;
  }
  return t;
}

void PredictionPanel::measure() {
  if (!source_) return;
  auto [cfg, path] = source_();
  const int replicas = std::max(1, model_.replica_count());
  const int64_t batch = std::max<int64_t>(1, global_batch_of(cfg) / replicas);
  const Topology t = engine_topology();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int copies = t.device == "cpu" ? std::clamp(t.devices_per_host, 1, cores) : 1;
  const int job = ++job_;
  job_running_ = true;
  measure_->setEnabled(false);
  compute_->setText(tr("Measuring the model's step here (%1 step(s) at batch %2, %3 at once)...")
                        .arg(kStepProbeWarmup + 20)
                        .arg(batch)
                        .arg(copies));
  const std::string plugins = ctx_.plugin_dir.toStdString();
  const std::string db =
      ctx_.history_db.isEmpty() ? default_history_db_path() : ctx_.history_db.toStdString();
  const std::string file = path.toStdString();
  QPointer<PredictionPanel> self(this);
  auto* watcher = new QFutureWatcher<MeasureResult>(this);
  connect(watcher, &QFutureWatcher<MeasureResult>::finished, this, [self, watcher, job, cfg] {
    watcher->deleteLater();
    if (!self || job != self->job_) return;  // a newer request, or the panel is gone
    const MeasureResult r = watcher->result();
    self->job_running_ = false;
    self->measure_->setEnabled(true);
    if (!r.probe) {
      self->compute_->setText(tr("Could not measure the model: %1").arg(r.error));
      Q_EMIT self->measured();
      return;
    }
    self->set_measurement(*r.probe, cfg, r.history);
    Q_EMIT self->measured();
  });
  watcher->setFuture(QtConcurrent::run([cfg, file, plugins, db, batch, copies]() {
    MeasureResult r;
    try {
      nlohmann::json doc = cfg;
      for (const std::string& o : step_probe_overrides(batch, 20)) apply_override(doc, o);
      const RunConfig rc = parse_run_config(doc, file.empty() ? "(the Train view's config)" : file);
      Registry registry;
      registry.load_plugin_dir(plugins);
      r.probe = measure_step(rc, registry, copies);
      try {
        r.history = history_points(db, cfg, batch);
      } catch (const std::exception&) {
        // No readable history: the chart has no measured points.
      }
    } catch (const std::exception& e) {
      r.error = QString::fromUtf8(e.what());
    }
    return r;
  }));
}

void PredictionPanel::set_measurement(const StepProbe& probe, const nlohmann::json& config,
                                      std::vector<MeasuredPoint> measured) {
  probe_ = probe;
  config_ = config;
  history_ = std::move(measured);
  compute_->setText(
      tr("%1: %2 parameters. Its step measured here: %3 ms at batch %4 (%5 at once; data %6, "
         "forward+backward %7 taken 1:2, optimizer %8 ms).")
          .arg(QString::fromStdString(probe.model))
          .arg(probe.parameters)
          .arg(ms(probe.cost.compute_s()))
          .arg(probe.cost.per_device_batch)
          .arg(probe.copies)
          .arg(ms(probe.cost.data_s))
          .arg(ms(probe.cost.forward_s + probe.cost.backward_s))
          .arg(ms(probe.cost.optimizer_s)));
  update_prediction();
}

void PredictionPanel::update_prediction() {
  if (!probe_) {
    summary_->setText(tr("<b>Predicted (modelled)</b>: measure the model first - the step time, "
                         "throughput and efficiency of this topology follow from it and the "
                         "links (%1).")
                          .arg(links_note_.toHtmlEscaped()));
    show_chart(0);
    return;
  }
  if (model_.strategy() == QLatin1String("parameter_server")) {
    summary_->setText(tr("<b>Predicted (modelled)</b>: parameter servers are not modelled; the "
                         "predictor models the allreduce strategies."));
    show_chart(0);
    return;
  }
  const Topology t = engine_topology();
  const int n = std::max(1, model_.replica_count());
  const nlohmann::json strategy = model_.strategy_json();
  const nlohmann::json allreduce = strategy.value("allreduce", nlohmann::json::object());
  const std::string alg = allreduce.is_object() ? allreduce.value("algorithm", "native") : "native";
  const double bucket_mb = allreduce.is_object() ? allreduce.value("bucket_mb", 25.0) : 25.0;
  const StepPrediction best = autotune(t, links_, probe_->cost, n);
  const StepPrediction conf = predict_step(t, links_, probe_->cost, n, algorithm_from_name(alg),
                                           static_cast<int64_t>(bucket_mb * (1 << 20)));
  summary_->setText(
      tr("<b>Predicted (modelled, not measured)</b> for %1 device(s) on %2 host(s): step "
         "<b>%3 ms</b>, <b>%4 samples/s</b>, efficiency <b>%5%</b>; bound by %6. Best allreduce: "
         "%7 in %8 KB buckets (%9 ms); as configured, %10: %11 ms. %12.")
          .arg(n)
          .arg(best.hosts)
          .arg(ms(best.step_s))
          .arg(best.samples_per_s, 0, 'f', 0)
          .arg(100.0 * best.efficiency, 0, 'f', 1)
          .arg(QString::fromStdString(best.bound))
          .arg(QString::fromUtf8(to_string(best.algorithm)))
          .arg(best.bucket_bytes / 1024)
          .arg(ms(best.step_s))
          .arg(QString::fromStdString(alg))
          .arg(ms(conf.step_s))
          .arg(links_note_.toHtmlEscaped()));
  show_chart(probe_->cost.per_device_batch);
}

void PredictionPanel::show_chart(int64_t batch) {
  QVector<double> x, y, ideal, mx, my;
  if (probe_ && batch > 0) {
    const Topology t = engine_topology();
    double one = 0;
    for (int n = 1; n <= 512; n *= 2) {
      const StepPrediction p = autotune(t, links_, probe_->cost, n);
      if (n == 1) one = p.samples_per_s;
      x.push_back(n);
      y.push_back(p.samples_per_s);
      ideal.push_back(one * n);
    }
    for (const MeasuredPoint& m : history_) {
      mx.push_back(m.devices);
      my.push_back(m.samples_per_s);
    }
  }
  chart_->graph(0)->setData(x, y);
  chart_->graph(1)->setData(x, ideal);
  chart_->graph(2)->setData(mx, my);
  if (!y.isEmpty()) {
    double lo = y.front(), hi = ideal.back();
    for (double v : my) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    chart_->yAxis->setRange(lo / 2, hi * 2);
  }
  chart_->replot(QCustomPlot::rpQueuedReplot);
}

QString PredictionPanel::summary() const { return summary_->text(); }

int PredictionPanel::predicted_points() const { return chart_->graph(0)->dataCount(); }

int PredictionPanel::measured_points() const { return chart_->graph(2)->dataCount(); }

}  // namespace baton::ui
