// The ring allreduce's schedule, the one every ring runs (ring.cpp's over
// a communicator's sendrecv on host memory, nccl.cpp's over device memory):
// n - 1 reduce-scatter steps, then n - 1 allgather steps, around members
// 0..n-1, member r sending to r + 1 and receiving from r - 1. The buffer's
// n chunks differ in size by at most one element; each step's chunk moves
// in pieces of at most `segment` elements.
#pragma once

#include <algorithm>
#include <cstdint>

namespace baton {

// One sendrecv of member r's schedule: send [send_offset, + send_count) to
// the next member while receiving recv_count elements from the previous
// one. `reduce` (reduce-scatter): the received elements go to scratch and
// are then reduced into [recv_offset, + recv_count); otherwise
// (allgather) they are received in place at recv_offset. A piece may send
// or receive nothing (count 0): the chunks' sizes differ by one.
struct RingPiece {
  bool reduce = false;
  int64_t send_offset = 0, send_count = 0;
  int64_t recv_offset = 0, recv_count = 0;
};

// Elements of scratch a reduce piece receives into, at most.
inline int64_t ring_scratch_count(int n, int64_t count, int64_t segment) {
  return std::min(std::max<int64_t>(1, segment), count / std::max(1, n) + 1);
}

// Calls piece(p) for every piece of member r's schedule (of n members, a
// buffer of `count` elements, pieces of at most `segment` >= 1), in order.
// Nothing for n == 1 or count == 0. A template, not a std::function: a
// step allocates nothing.
template <class Piece>
void for_each_ring_piece(int n, int r, int64_t count, int64_t segment, Piece&& piece) {
  if (n <= 1 || count <= 0) return;
  const int64_t seg = std::max<int64_t>(1, segment);
  // Chunk c covers [start(c), start(c + 1)).
  const auto start = [&](int c) { return count / n * c + std::min<int64_t>(c, count % n); };
  for (int phase = 0; phase < 2; ++phase) {
    for (int s = 0; s < n - 1; ++s) {
      // Reduce-scatter (phase 0): afterwards member r holds chunk (r + 1) % n
      // reduced. Allgather (phase 1): the finished chunks go round.
      const int send_c = phase == 0 ? (r - s + n) % n : (r + 1 - s + n) % n;
      const int recv_c = phase == 0 ? (r - s - 1 + 2 * n) % n : (r - s + n) % n;
      const int64_t send_len = start(send_c + 1) - start(send_c);
      const int64_t recv_len = start(recv_c + 1) - start(recv_c);
      for (int64_t off = 0; off < std::max(send_len, recv_len); off += seg) {
        RingPiece p;
        p.reduce = phase == 0;
        p.send_offset = start(send_c) + off;
        p.send_count = std::clamp<int64_t>(send_len - off, 0, seg);
        p.recv_offset = start(recv_c) + off;
        p.recv_count = std::clamp<int64_t>(recv_len - off, 0, seg);
        piece(p);
      }
    }
  }
}

}  // namespace baton
