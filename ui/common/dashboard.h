// The run dashboard: loss (train, validation), accuracy, throughput (global
// and per replica), step-time breakdown (data / compute / communication /
// optimizer) and per-link bandwidth, as QCustomPlot plots fed with telemetry
// events. Live runs, replays and overlays of several recorded runs all go
// through add_events(): a run's events carry its id, and each run gets its
// own colour.
//
// Redraws are coalesced: add_events() only appends data and marks the
// plots dirty; a timer replots at most every 33 ms (~30 per second),
// queued, so a stream of thousands of events a second costs a few replots.
//
// Long runs: a series holds at most kMaxPoints buckets. When it has more,
// neighbouring buckets merge in pairs (as the history's rollups: each keeps
// its count, min, max and last; the plot draws the last, the smoothing runs
// over them), so memory stays bounded however many steps a run has, and a
// redraw or a smoothing change touches a few thousand points per series.
#pragma once

#include <baton/telemetry/telemetry.h>

#include <QHash>
#include <QTimer>
#include <QWidget>
#include <map>
#include <vector>

class QCustomPlot;
class QCPGraph;
class QCPItemStraightLine;
class QCPItemText;
class QComboBox;
class QSlider;
class QCheckBox;
class QLabel;
class QPlainTextEdit;

namespace baton::ui {

class Dashboard : public QWidget {
  Q_OBJECT
 public:
  // kDevices: each GPU's utilisation and memory (device events), shown
  // once a run on GPUs sends one.
  enum class Plot : int { kLoss = 0, kAccuracy, kThroughput, kStepTime, kLinks, kDevices, kCount };
  enum class XAxis : int { kStep = 0, kRelative, kWall };

  explicit Dashboard(QWidget* parent = nullptr);

  // Forgets every run and clears the plots.
  void clear();
  // Names a run and when it started (seconds since the Unix epoch, for the
  // wall-clock axis) before its events come; a run_start event does the
  // same for runs not named first.
  void begin_run(const QString& id, const QString& label, double start_unix_s);
  // When run `id` started (Unix seconds; what the wall-clock axis adds), 0
  // for a run not shown.
  double start_unix_s(const QString& id) const;
  void add_events(const std::vector<Event>& events);
  void add_event(const Event& e) { add_events({e}); }

  void set_x_axis(XAxis mode);
  XAxis x_axis() const { return x_mode_; }
  // EMA weight 0 (raw) .. 0.99 on the training loss and accuracy, as
  // TensorBoard's smoothing (debiased).
  void set_smoothing(double weight);
  void set_log_loss(bool on);

  QCustomPlot* plot(Plot p) const { return plots_[static_cast<int>(p)]; }
  // A failed attempt of run `id` that the launcher restarted from (or gave
  // up after): a dashed vertical line on every plot at the step the job
  // had reached, `rel_s` seconds into the run (for the time axes), with
  // the cause as its tooltip-like label on the loss plot.
  void mark_restart(const QString& id, int64_t step, double rel_s, const QString& cause);
  // The same marker for another end of an attempt (an elastic rescale):
  // `label` is shown as given.
  void mark_attempt_end(const QString& id, int64_t step, double rel_s, const QString& label);
  // The markers of every run (tests).
  int restart_marker_count() const;
  // Where marker `i` stands on the current x axis (tests).
  double restart_marker_x(int i) const;
  // Text language-model runs generated (sample events), newest last;
  // hidden until a sample arrives.
  QPlainTextEdit* samples_panel() const { return samples_; }
  int sample_count() const { return samples_shown_; }
  // Points held for one series of one run ("loss/train", "loss/val",
  // "accuracy/train", "accuracy/val", "throughput/global",
  // "throughput/replica", "time/data", "time/compute", "time/comm",
  // "time/optimizer", "link/<src>-><dst>"); 0 when absent.
  int point_count(const QString& run, const QString& series) const;
  // Buckets held (and drawn) for the series: point_count() up to
  // kMaxPoints, never more.
  int held_points(const QString& run, const QString& series) const;
  static constexpr int kMaxPoints = 4096;
  int replot_count() const { return replots_; }
  // Replots now (tests, exports).
  void replot_now();
  // Every series of every run as CSV: run,series,step,wall_time_s,value.
  bool export_csv(const QString& path, QString* error) const;
  // The whole dashboard as a PNG.
  bool export_png(const QString& path, QString* error);

 private:
  // A bucket of consecutive points: the last one's step, time and value,
  // and the min and max of all of them.
  struct Point {
    double step = 0, rel = 0, value = 0, lo = 0, hi = 0;
    int64_t n = 1;
  };
  struct Series {
    std::vector<Point> pts;
    int64_t per_bucket = 1;              // points a full bucket holds (doubles at each compaction)
    double ema = 0, ema_weight_sum = 0;  // running debiased EMA state
    bool smooth = false;
    bool stacked = false;
    bool ordered = true;  // steps only grew (a resumed run's go back: no merging then)
    QCPGraph* graph = nullptr;
  };
  struct Run {
    QString label;
    int index = 0;  // order of arrival: colour and dash pattern
    QColor color;
    double start_unix_s = 0;
    int replicas = 1;
    int64_t tokens_per_sample = 0;    // a language model's (throughput in tokens/s)
    bool remote_updates = false;      // parameter_server: each worker reports its own rows
    std::map<int, double> rank_rate;  // every rank's latest own samples/s
    double last_rel = 0;              // wall time of the last step, for epoch events
    int attempts = 0;                 // run_start events seen
    bool marked_since_start = false;  // an attempt's end marked since the last one
    std::map<QString, Series> series;
  };

  Run& run_for(const std::string& id);
  void append(Run& run, const QString& run_id, const QString& key, Plot plot, double step,
              double rel, double value, bool smooth);
  QCPGraph* make_graph(Run& run, const QString& key, Plot plot);
  double x_of(const Run& run, const Series& s, size_t i) const;
  double shown(Series& s, double raw);
  // The same for a bucket of n points taken as n equal values: the EMA a
  // rebuild runs, close to the one the live points ran.
  double shown_bucket(Series& s, double value, int64_t n);
  // Recomputes the graphs from the buckets (all series, or the smoothed
  // ones only).
  void rebuild(bool smoothed_only = false);
  void rebuild_series(Run& run, const QString& key, Series& s);
  // Two runs or more: every run's graphs are named by their run and the
  // step-time fills see through.
  void restyle_for_compare();
  void replot(int priority);
  void mark_dirty();
  void apply_axis_labels();
  // Puts the restart markers where the current x axis has them.
  void place_restart_markers();
  struct RestartMarker {
    QString run;
    double step = 0, rel = 0;
    std::vector<QCPItemStraightLine*> lines;  // one per plot
    QCPItemText* label = nullptr;             // on the loss plot
  };
  std::vector<RestartMarker> restarts_;
  double restart_x(const RestartMarker& m) const;

  std::vector<QCustomPlot*> plots_;
  std::map<QString, Run> runs_;
  QHash<QString, QColor> palette_;
  XAxis x_mode_ = XAxis::kStep;
  double smoothing_ = 0.6;
  bool log_loss_ = false;
  bool dirty_ = false;
  int replots_ = 0;
  QTimer replot_timer_;
  QTimer smoothing_timer_;  // the slider's ticks, coalesced into one rebuild
  QPlainTextEdit* samples_ = nullptr;
  int samples_shown_ = 0;
  QComboBox* x_combo_ = nullptr;
  QSlider* smooth_slider_ = nullptr;
  QLabel* smooth_label_ = nullptr;
  QCheckBox* log_box_ = nullptr;
};

}  // namespace baton::ui
