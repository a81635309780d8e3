// The studio's event queue between the engine's threads and the GUI
// thread: producers push through their QueueSinks while a consumer drains,
// as the EventPump does on its timer. Every event arrives once, each
// producer's in the order it pushed them. Also built under ThreadSanitizer
// (test_event_queue_tsan): the queue and its sinks are Qt-free.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <variant>
#include <vector>

#include "common/event_queue.h"

namespace {

TEST(EventQueue, ProducersAndADrainingConsumerLoseAndRepeatNothing) {
  constexpr int kProducers = 4;
  constexpr int64_t kEach = 5000;
  auto queue = std::make_shared<baton::ui::EventQueue>();
  std::atomic<int> started{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([queue, p, &started] {
      baton::ui::QueueSink sink(queue);
      started.fetch_add(1);
      for (int64_t i = 0; i < kEach; ++i) {
        baton::StepEvent e;
        e.rank = p;
        e.step = i;
        sink.emit(e);
      }
    });
  }
  // The consumer drains while they push, until it has every event.
  std::vector<int64_t> next(kProducers, 0);
  int64_t seen = 0, drains = 0, out_of_order = 0, other = 0;
  while (seen < kProducers * kEach) {
    const std::vector<baton::Event> batch = queue->drain();
    ++drains;
    for (const baton::Event& e : batch) {
      const auto* step = std::get_if<baton::StepEvent>(&e);
      if (step == nullptr || step->rank < 0 || step->rank >= kProducers) {
        ++other;
        continue;
      }
      if (step->step != next[static_cast<size_t>(step->rank)]) ++out_of_order;
      next[static_cast<size_t>(step->rank)] = step->step + 1;
      ++seen;
    }
    if (batch.empty()) std::this_thread::yield();
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(started.load(), kProducers);
  EXPECT_EQ(other, 0);
  EXPECT_EQ(out_of_order, 0);
  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(next[static_cast<size_t>(p)], kEach) << p;
  EXPECT_TRUE(queue->drain().empty()) << "nothing beyond what was pushed";
  EXPECT_GT(drains, 1) << "the consumer drained while the producers pushed";
}

}  // namespace
