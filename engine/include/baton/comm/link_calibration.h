// Measures a link's alpha-beta figures (cluster/cost_model.h) between two
// ranks of a communicator: both send each other messages from 8 bytes to
// max_bytes at once (sendrecv, as each step of a ring allreduce does, and
// in the ring's segments), the best of several exchanges per size. The
// bandwidth (each way, both ways busy) is the slope between half a segment
// and a whole one - one message each, so a handshake per message does not
// count as bytes and a delayed link does not look slow - or, when
// max_bytes is under a segment, between the two largest sizes; the
// latency is half the best round trip of 8 bytes (a ping-pong). What
// `baton calibrate` stores.
#pragma once

#include <baton/cluster/cost_model.h>
#include <baton/comm/communicator.h>

#include <vector>

namespace baton {

struct LinkSamplePoint {
  int64_t bytes = 0;
  double one_way_s = 0;  // an exchange of `bytes` each way
};

struct LinkFit {
  AlphaBeta figures;
  std::vector<LinkSamplePoint> points;
  double worst_relative_error = 0;  // of the line at the measured points
};

// Collective over ranks `a` and `b` of `comm` (the others return at once
// with an empty fit); the fit is returned on both.
// A message larger than segment_bytes moves as the ring moves it: in
// sendrecvs of at most segment_bytes.
LinkFit measure_link(Communicator& comm, int a, int b, int64_t max_bytes = int64_t{16} << 20,
                     int64_t segment_bytes = CommOptions{}.segment_bytes);

// The host's passes over a bucket (cluster/cost_model.h HostPasses):
// memcpy of a buffer and baton's own reduce_into (y += x) over it, at
// sizes from 64 KiB up to max_bytes (x4; max_bytes itself last), the best
// of 8 rounds each. Collective over `together`: every rank measures at
// once, each round started at a barrier, as the ranks of a step run their
// passes side by side.
HostPasses measure_host_passes(Communicator& together, int64_t max_bytes = int64_t{16} << 20);

// Alpha from the smallest point, beta from the two largest (RuntimeError
// with fewer than 2 points or no positive slope).
AlphaBeta fit_alpha_beta(const std::vector<LinkSamplePoint>& points);

}  // namespace baton
