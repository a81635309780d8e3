// Telemetry events from engine threads to the GUI thread. The engine side
// pushes (any thread, never blocks on the GUI); an EventPump on the GUI
// thread drains the queue on a timer and hands the batch on. Batching is
// what keeps the window responsive when a run streams thousands of events
// a second: one queued hop per tick, not one per event.
#pragma once

#include <baton/telemetry/telemetry.h>

#include <QObject>
#include <QTimer>
#include <memory>
#include <mutex>
#include <vector>

namespace baton::ui {

class EventQueue {
 public:
  void push(const Event& e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(e);
  }
  // Everything queued so far, in order.
  std::vector<Event> drain() {
    std::vector<Event> out;
    std::lock_guard<std::mutex> lock(mu_);
    out.swap(events_);
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<Event> events_;
};

// A sink that feeds an EventQueue (shared, so it outlives whichever side
// lets go first).
class QueueSink final : public TelemetrySink {
 public:
  explicit QueueSink(std::shared_ptr<EventQueue> q) : q_(std::move(q)) {}
  void emit(const Event& e) override { q_->push(e); }

 private:
  std::shared_ptr<EventQueue> q_;
};

class EventPump : public QObject {
  Q_OBJECT
 public:
  explicit EventPump(std::shared_ptr<EventQueue> queue, int interval_ms = 30,
                     QObject* parent = nullptr)
      : QObject(parent), queue_(std::move(queue)) {
    timer_.setInterval(interval_ms);
    connect(&timer_, &QTimer::timeout, this, &EventPump::pump);
  }
  void start() { timer_.start(); }
  void stop() { timer_.stop(); }
  // Delivers what is queued now (also called by the timer).
  void pump() {
    std::vector<Event> batch = queue_->drain();
    if (!batch.empty()) Q_EMIT events(batch);
  }
  EventQueue& queue() { return *queue_; }

 signals:
  void events(const std::vector<baton::Event>& batch);

 private:
  std::shared_ptr<EventQueue> queue_;
  QTimer timer_;
};

}  // namespace baton::ui
