// The Cluster view's Prediction tab: what the composed topology would give
// the current model, from the engine's cost model (cluster/cost_model.h) -
// the predicted step time, throughput, efficiency, the allreduce it would
// pick and what bounds the step, updated as hosts, devices and links are
// edited - and a scaling chart from 1 to 512 devices with the measured
// points of past runs of the same model at the same per-device batch.
// Every predicted figure is labelled modelled.
//
// The model's step is measured once ("Measure the model": a short run on
// one device here, off the GUI thread; a newer request drops an older
// result); the links come from `baton calibrate`'s file when there is one,
// nominal figures otherwise.
#pragma once

#include <baton/cluster/cost_model.h>
#include <baton/train/step_probe.h>

#include <QPointer>
#include <QString>
#include <QWidget>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "common/studio_context.h"

class QCustomPlot;
class QLabel;
class QPushButton;

namespace baton::ui {

class TopologyModel;

// A past run's measured throughput (history: its last logged step
// window's samples/s, the chief's).
struct MeasuredPoint {
  int devices = 0;
  double samples_per_s = 0;
  QString run;
};

class PredictionPanel : public QWidget {
  Q_OBJECT
 public:
  PredictionPanel(const StudioContext& ctx, TopologyModel& model, QWidget* parent = nullptr);

  // The run config to predict for and its file (for relative paths): the
  // Train view's form.
  using ConfigSource = std::function<std::pair<nlohmann::json, QString>()>;
  void set_config_source(ConfigSource source) { source_ = std::move(source); }

  // Measures the model's step off the GUI thread, then predicts.
  void measure();
  bool measuring() const { return job_running_; }
  // A measurement given directly (tests), with the config it was made of
  // and the history's points.
  void set_measurement(const StepProbe& probe, const nlohmann::json& config,
                       std::vector<MeasuredPoint> measured);

  // The engine's topology for the composed one: its hosts with replicas,
  // the most replicas a host holds, the link inside a host.
  Topology engine_topology() const;

  // For tests and the screenshot.
  QString summary() const;
  QCustomPlot& chart() const { return *chart_; }
  int predicted_points() const;
  int measured_points() const;

 Q_SIGNALS:
  void measured();  // a measurement arrived (or failed: summary() says why)

 private:
  void update_prediction();
  void show_chart(int64_t batch);

  StudioContext ctx_;
  TopologyModel& model_;
  ConfigSource source_;
  LinkCosts links_;
  QString links_note_;
  std::optional<StepProbe> probe_;
  nlohmann::json config_;
  std::vector<MeasuredPoint> history_;
  QLabel* summary_ = nullptr;
  QLabel* compute_ = nullptr;
  QPushButton* measure_ = nullptr;
  QCustomPlot* chart_ = nullptr;
  int job_ = 0;  // the newest measurement's number: older results are dropped
  bool job_running_ = false;
};

}  // namespace baton::ui
