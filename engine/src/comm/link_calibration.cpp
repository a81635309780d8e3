#include <baton/comm/link_calibration.h>
#include <baton/core/error.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

namespace baton {

AlphaBeta fit_alpha_beta(const std::vector<LinkSamplePoint>& points) {
  if (points.size() < 2) throw RuntimeError("calibration: fewer than 2 message sizes measured");
  // The classic two ends rather than a least-squares line: the latency is
  // the smallest message's time, the bandwidth the slope between the two
  // largest. A line through every point is pulled off by what lies between
  // (protocol switches; a shaped link's burst that small messages pass at
  // full speed while a training step's traffic runs at the sustained rate).
  std::vector<LinkSamplePoint> p = points;
  std::sort(p.begin(), p.end(),
            [](const LinkSamplePoint& a, const LinkSamplePoint& b) { return a.bytes < b.bytes; });
  const LinkSamplePoint& big = p.back();
  const LinkSamplePoint& before = p[p.size() - 2];
  AlphaBeta ab;
  ab.alpha_s = p.front().one_way_s;
  double slope = (big.one_way_s - before.one_way_s) / static_cast<double>(big.bytes - before.bytes);
  if (!(slope > 0)) slope = (big.one_way_s - ab.alpha_s) / static_cast<double>(big.bytes);
  if (!(slope > 0))
    throw RuntimeError("calibration: the time does not grow with the message size up to " +
                       std::to_string(big.bytes) +
                       " bytes (the link's noise is larger than its transfer time): measure "
                       "larger messages (baton calibrate --max-bytes)");
  ab.bytes_per_s = 1.0 / slope;
  return ab;
}

LinkFit measure_link(Communicator& comm, int a, int b, int64_t max_bytes,
                     int64_t segment_bytes) {
  if (segment_bytes < 4) {
    throw InputError("calibration: segment_bytes must be at least 4, got " +
                     std::to_string(segment_bytes));
  }
  const int64_t seg = segment_bytes / 4;
  LinkFit fit;
  const int me = comm.rank();
  if (me != a && me != b) return fit;
  const int peer = me == a ? b : a;
  using Clock = std::chrono::steady_clock;
  std::vector<float> buf(static_cast<size_t>(std::max<int64_t>(2, max_bytes / 4)), 1.0f);
  std::vector<float> back(buf.size(), 0.0f);
  for (int64_t bytes = 8; bytes <= max_bytes; bytes *= 4) {
    const int64_t count = std::max<int64_t>(1, bytes / 4);
    // Enough round trips for ~20 ms per size, at least 5; the best one.
    double best = 1e30;
    int rounds = 0;
    const auto t_size = Clock::now();
    while (true) {
      // Both ways at once, as every step of a ring or of recursive
      // doubling moves its data (a link busy in one direction at a time
      // can be twice as fast as it is for an allreduce).
      const auto t0 = Clock::now();
      for (int64_t off = 0; off < count; off += seg) {
        const int64_t len = std::min(seg, count - off);
        comm.sendrecv(buf.data() + off, len, peer, back.data() + off, len, peer);
      }
      best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
      ++rounds;
      // Both sides run the same number of rounds: a's count decides.
      float more = rounds < 5 || (rounds < 2000 &&
                                  std::chrono::duration<double>(Clock::now() - t_size).count() <
                                      0.02)
                       ? 1.0f
                       : 0.0f;
      if (me == a) {
        comm.send(&more, 1, peer);
      } else {
        comm.recv(&more, 1, peer);
      }
      if (more == 0.0f) break;
    }
    fit.points.push_back({count * 4, best});
  }
  // Both ends measured the same exchanges; a's figures are the fit's.
  fit.figures = fit_alpha_beta(fit.points);
  for (const auto& p : fit.points) {
    const double line = fit.figures.seconds(static_cast<double>(p.bytes));
    fit.worst_relative_error =
        std::max(fit.worst_relative_error, std::fabs(line - p.one_way_s) / p.one_way_s);
  }
  return fit;
}

}  // namespace baton
