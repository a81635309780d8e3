#include <baton/core/timeline.h>

#include <algorithm>
#include <limits>

namespace baton {

Timeline::Timeline(size_t capacity) : base_(Clock::now()), slots_(capacity) {
  // The Unix time of base_: read next to it (a microsecond apart at most).
  base_unix_s_ =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void Timeline::record(const TimelineSpan& span) noexcept {
  // Relaxed: the slot index only has to be unique; the reader synchronises
  // with the writers by other means (see the header).
  const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
  if (i >= slots_.size()) return;
  slots_[i] = span;
  if (span.step < 0) slots_[i].step = step();
}

std::vector<TimelineSpan> Timeline::spans() const {
  const size_t n = std::min(next_.load(std::memory_order_acquire), slots_.size());
  return {slots_.begin(), slots_.begin() + static_cast<std::ptrdiff_t>(n)};
}

ClockOffset clock_offset_to_root(int rank, int size, int root, const ClockLink& link,
                                 const std::function<int64_t()>& now_ns, int rounds) {
  if (rank == root) {
    for (int peer = 0; peer < size; ++peer) {
      if (peer == root) continue;
      for (int k = 0; k < rounds; ++k) {
        (void)link.recv(peer);  // the ping
        link.send(peer, now_ns());
      }
    }
    return {};
  }
  int64_t best_rtt = std::numeric_limits<int64_t>::max(), offset = 0;
  for (int k = 0; k < rounds; ++k) {
    const int64_t sent = now_ns();
    link.send(root, sent);
    const int64_t root_time = link.recv(root);
    const int64_t received = now_ns();
    if (received - sent < best_rtt) {
      best_rtt = received - sent;
      offset = root_time - (sent + (received - sent) / 2);
    }
  }
  return {offset, best_rtt};
}

int64_t Timeline::dropped() const {
  const size_t n = next_.load(std::memory_order_acquire);
  return n > slots_.size() ? static_cast<int64_t>(n - slots_.size()) : 0;
}

}  // namespace baton
