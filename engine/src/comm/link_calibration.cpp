#include <baton/comm/link_calibration.h>
#include <baton/core/clock.h>
#include <baton/core/error.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
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

namespace {

using Clock = std::chrono::steady_clock;

// Runs `round` (which returns its own time) until ~20 ms have passed and at
// least 5 rounds ran, the same number on both ends (a's count decides);
// the best time.
template <class Round>
double best_of_rounds(Communicator& comm, bool is_a, int peer, Round round) {
  double best = 1e30;
  int rounds = 0;
  const auto t_size = Clock::now();
  while (true) {
    best = std::min(best, round());
    ++rounds;
    float more = rounds < 5 || (rounds < 2000 && seconds_since(t_size) < 0.02) ? 1.0f : 0.0f;
    if (is_a) {
      comm.send(&more, 1, peer);
    } else {
      comm.recv(&more, 1, peer);
    }
    if (more == 0.0f) return best;
  }
}

}  // namespace

LinkFit measure_link(Communicator& comm, int a, int b, int64_t max_bytes, int64_t segment_bytes) {
  if (segment_bytes < 4) {
    throw InputError("calibration: segment_bytes must be at least 4, got " +
                     std::to_string(segment_bytes));
  }
  const int64_t seg = segment_bytes / 4;
  LinkFit fit;
  const int me = comm.rank();
  if (me != a && me != b) return fit;
  const int peer = me == a ? b : a;
  const bool is_a = me == a;
  std::vector<float> buf(static_cast<size_t>(std::max<int64_t>(2, max_bytes / 4)), 1.0f);
  std::vector<float> back(buf.size(), 0.0f);
  // Both ways at once, as every step of a ring or of recursive doubling
  // moves its data (a link busy in one direction at a time can be twice
  // as fast as it is for an allreduce), in the ring's segments.
  auto exchange = [&](int64_t count) {
    const auto t0 = Clock::now();
    for (int64_t off = 0; off < count; off += seg) {
      const int64_t len = std::min(seg, count - off);
      comm.sendrecv(buf.data() + off, len, peer, back.data() + off, len, peer);
    }
    return seconds_since(t0);
  };
  std::vector<int64_t> sizes;
  for (int64_t bytes = 8; bytes <= max_bytes; bytes *= 4) sizes.push_back(bytes);
  // The bandwidth's two sizes: half a segment and a whole one, each one
  // message with the same protocol (over every eager limit), so their
  // difference is bytes alone - a larger pair differs by a message's
  // handshake too, and a delayed link would look like a slow one.
  const int64_t whole = seg * 4, half = whole / 2;
  const bool in_one_segment = half >= 128 << 10 && whole <= max_bytes;
  if (in_one_segment) {
    for (const int64_t extra : {half, whole}) {
      if (std::find(sizes.begin(), sizes.end(), extra) == sizes.end()) sizes.push_back(extra);
    }
    std::sort(sizes.begin(), sizes.end());
  }
  for (const int64_t bytes : sizes) {
    const int64_t count = std::max<int64_t>(1, bytes / 4);
    const double best = best_of_rounds(comm, is_a, peer, [&] { return exchange(count); });
    fit.points.push_back({count * 4, best});
  }
  fit.figures = fit_alpha_beta(fit.points);
  if (in_one_segment) {
    double t_half = 0, t_whole = 0;
    for (const auto& p : fit.points) {
      if (p.bytes == half) t_half = p.one_way_s;
      if (p.bytes == whole) t_whole = p.one_way_s;
    }
    if (t_whole > t_half) {
      fit.figures.bytes_per_s = static_cast<double>(whole - half) / (t_whole - t_half);
    }
  }
  // The latency: half the round trip of the smallest message, one way and
  // back (an exchange both ways at once times the later of two starts).
  const double rtt = best_of_rounds(comm, is_a, peer, [&] {
    const auto t0 = Clock::now();
    if (is_a) {
      comm.send(buf.data(), 2, peer);
      comm.recv(back.data(), 2, peer);
    } else {
      comm.recv(back.data(), 2, peer);
      comm.send(buf.data(), 2, peer);
    }
    return seconds_since(t0);
  });
  // a's round trip is the one that went there and back; b's started when
  // the message reached it. b takes a's.
  float half_rtt = static_cast<float>(rtt / 2);
  if (is_a) {
    comm.send(&half_rtt, 1, peer);
  } else {
    comm.recv(&half_rtt, 1, peer);
  }
  fit.figures.alpha_s = half_rtt;
  for (const auto& p : fit.points) {
    const double line = fit.figures.seconds(static_cast<double>(p.bytes));
    fit.worst_relative_error =
        std::max(fit.worst_relative_error, std::fabs(line - p.one_way_s) / p.one_way_s);
  }
  return fit;
}

HostPasses measure_host_passes(Communicator& together, int64_t max_bytes) {
  std::vector<int64_t> sizes;
  for (int64_t bytes = 64 << 10; bytes < max_bytes; bytes *= 4) sizes.push_back(bytes);
  sizes.push_back(std::max<int64_t>(max_bytes, 8));
  const auto n_max = static_cast<size_t>(sizes.back() / 4);
  std::vector<float> x(n_max, 1.0f), y(n_max, 0.5f), z(n_max, 0.25f);
  // The best of 8 rounds, each started with every rank at a barrier: the
  // ranks share the memory, and a rank that runs alone (its peer
  // descheduled) has the caches to itself and passes twice as fast -
  // measured here: 13 GB/s for a 16 MB copy alone, 6.6 with both ranks.
  auto best = [&together](auto&& pass) {
    double t_best = 1e30;
    for (int k = 0; k < 8; ++k) {
      together.barrier();
      const auto t0 = Clock::now();
      pass();
      t_best = std::min(t_best, seconds_since(t0));
    }
    return t_best;
  };
  HostPasses h;
  volatile float kept = 0;
  for (const int64_t bytes : sizes) {
    const int64_t n = bytes / 4;
    h.copy.push_back({n * 4, best([&] {
                        std::memcpy(y.data(), x.data(), static_cast<size_t>(n) * 4);
                        kept = y[static_cast<size_t>(n - 1)];  // the copy is used
                      })});
    h.reduce.push_back({n * 4, best([&] { reduce_into(z.data(), x.data(), n, ReduceOp::kSum); })});
    // z grows by 1 a round: small integers, exact in floats - no overflow,
    // no denormals.
    std::fill(z.begin(), z.begin() + n, 0.25f);
  }
  return h;
}

}  // namespace baton
