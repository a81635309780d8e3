// The NCCL stand-in's calls as they run on the streams (nccl_stand_in.h).
// Each rank's call waits on its communicator's clique for the others' call
// of the same number, reads their inputs (device memory is open while a
// stream runs work), computes its own output into host scratch, waits until
// every rank has read, then writes the output: so in-place calls (send ==
// recv) read every input before any is overwritten. Reductions go over the
// ranks in rank order, so every rank gets the same bits; bfloat16 is summed
// in float and rounded once; ncclAvg is the sum over the rank count.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "nccl_stand_in.h"

namespace baton::simt::ccl {
namespace {

template <class Acc>
Acc combine(ncclRedOp_t op, Acc a, Acc b) {
  switch (op) {
    case ncclProd:
      return a * b;
    case ncclMax:
      return std::max(a, b);
    case ncclMin:
      return std::min(a, b);
    default:  // ncclSum, ncclAvg
      return a + b;
  }
}

template <class T>
struct Arith {
  using Acc = T;
  static Acc load(const void* p, size_t i) { return static_cast<const T*>(p)[i]; }
  static void store(void* p, size_t i, Acc v) { static_cast<T*>(p)[i] = v; }
};
template <>
struct Arith<__nv_bfloat16> {
  using Acc = float;
  static Acc load(const void* p, size_t i) {
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
  static void store(void* p, size_t i, Acc v) {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v);
  }
};

// out[i] = the ranks' in[r][offset + i] reduced, for i < count. ncclAvg
// as NCCL computes it: floating inputs each scaled by 1/n, then summed;
// integers summed, then divided.
template <class T>
void reduce(ncclRedOp_t op, const std::vector<const void*>& inputs, size_t offset, size_t count,
            void* out) {
  using A = Arith<T>;
  using Acc = typename A::Acc;
  const size_t n = inputs.size();
  const bool premul = op == ncclAvg && std::is_floating_point_v<Acc>;
  const Acc inv = premul ? static_cast<Acc>(1) / static_cast<Acc>(n) : static_cast<Acc>(1);
  const auto in = [&](size_t r, size_t i) {
    const Acc v = A::load(inputs[r], offset + i);
    return premul ? v * inv : v;
  };
  for (size_t i = 0; i < count; ++i) {
    Acc acc = in(0, i);
    for (size_t r = 1; r < n; ++r) acc = combine(op, acc, in(r, i));
    if (op == ncclAvg && !premul) acc = acc / static_cast<Acc>(n);
    A::store(out, i, acc);
  }
}

template <class F>
void by_type(ncclDataType_t t, F f) {
  switch (t) {
    case ncclFloat32:
      return f(float{});
    case ncclFloat64:
      return f(double{});
    case ncclInt32:
      return f(int32_t{});
    case ncclInt64:
      return f(int64_t{});
    case ncclBfloat16:
      return f(__nv_bfloat16{});
    default:
      return;
  }
}

// This rank's output of collective `c` (calls: every rank's), or empty
// where this rank has none (a reduce's non-root).
std::vector<unsigned char> output_of(const Call& c, const std::vector<Call>& calls, int rank) {
  const size_t elem = type_bytes(c.type);
  const size_t n = calls.size();
  std::vector<const void*> inputs;
  for (const Call& k : calls) inputs.push_back(k.send);
  std::vector<unsigned char> out;
  switch (c.kind) {
    case Call::kAllReduce:
    case Call::kReduce:
      if (c.kind == Call::kReduce && rank != c.root) break;
      out.resize(c.count * elem);
      reduce_into(c.type, c.op, inputs, 0, c.count, out.data());
      break;
    case Call::kReduceScatter:
      out.resize(c.count * elem);
      reduce_into(c.type, c.op, inputs, static_cast<size_t>(rank) * c.count, c.count, out.data());
      break;
    case Call::kAllGather:
      out.resize(n * c.count * elem);
      for (size_t r = 0; r < n; ++r)
        std::memcpy(out.data() + r * c.count * elem, calls[r].send, c.count * elem);
      break;
    case Call::kBroadcast:
      out.resize(c.count * elem);
      std::memcpy(out.data(), calls[static_cast<size_t>(c.root)].send, c.count * elem);
      break;
    default:
      break;
  }
  return out;
}

}  // namespace

std::string mismatch(const std::vector<Call>& calls) {
  const Call& a = calls[0];
  for (size_t r = 1; r < calls.size(); ++r) {
    const Call& b = calls[r];
    if (a.kind != b.kind || a.count != b.count || a.type != b.type ||
        (a.kind != Call::kAllGather && a.kind != Call::kBroadcast && a.op != b.op) ||
        a.root != b.root) {
      return std::string("collective ") + std::to_string(a.seq) + " is " + a.name + " of " +
             std::to_string(a.count) + " on rank 0 but " + b.name + " of " +
             std::to_string(b.count) + " on rank " + std::to_string(r) +
             " (every rank must make the same collectives in the same order)";
    }
  }
  return {};
}

void reduce_into(ncclDataType_t type, ncclRedOp_t op, const std::vector<const void*>& inputs,
                 size_t offset, size_t count, void* out) {
  by_type(type, [&](auto tag) { reduce<decltype(tag)>(op, inputs, offset, count, out); });
}

size_t type_bytes(ncclDataType_t t) {
  switch (t) {
    case ncclFloat32:
    case ncclInt32:
      return 4;
    case ncclFloat64:
    case ncclInt64:
      return 8;
    case ncclBfloat16:
      return 2;
    default:
      return 0;
  }
}

void Member::set_error(ncclResult_t r, const std::string& what) {
  const std::lock_guard<std::mutex> lock(error_mu);
  if (async.load() != ncclSuccess && async.load() != ncclInProgress) return;  // the first stays
  error = what;
  async.store(r);
}

void run_calls(const std::shared_ptr<Member>& m, const std::vector<Call>& calls) {
  Clique& c = *m->clique;
  const int me = m->rank;
  std::unique_lock<std::mutex> lock(c.mu);
  const auto wait = [&](auto ready) {
    c.cv.wait(lock, [&] { return m->aborted.load() || ready(); });
    return !m->aborted.load();
  };
  // Aborted: this rank's messages not yet taken are withdrawn (their
  // buffers may go), and a collective it arrived at is marked broken and
  // left once nobody is reading its inputs.
  const auto leave = [&](Clique::Slot* slot) {
    for (const Call& k : calls) {
      if (k.kind != Call::kSend) continue;
      const auto it = c.posts.find({me, k.root, k.seq});
      if (it != c.posts.end() && !it->second.taken) c.posts.erase(it);
    }
    if (slot != nullptr) {
      slot->broken = true;
      c.cv.wait(lock, [&] { return slot->reading == 0; });
    }
  };
  if (m->aborted.load()) return leave(nullptr);
  for (const Call& k : calls) {
    if (k.kind == Call::kSend)
      c.posts[{me, k.root, k.seq}] = {k.send, k.count * type_bytes(k.type), false};
  }
  c.cv.notify_all();
  for (const Call& k : calls) {
    if (k.kind != Call::kRecv) continue;
    const std::tuple<int, int, uint64_t> key{k.root, me, k.seq};
    if (!wait([&] { return c.posts.count(key) != 0; })) return leave(nullptr);
    Clique::Post& p = c.posts[key];
    const size_t bytes = k.count * type_bytes(k.type);
    if (p.bytes != bytes) {
      m->set_error(ncclInvalidUsage, "ncclRecv of " + std::to_string(bytes) + " bytes from rank " +
                                         std::to_string(k.root) + ", which sent " +
                                         std::to_string(p.bytes));
    }
    std::memcpy(k.recv, p.data, std::min(p.bytes, bytes));  // under the lock: the post stays
    p.taken = true;
    c.cv.notify_all();
  }
  for (const Call& k : calls) {
    if (!k.collective()) continue;
    if (m->aborted.load()) return leave(nullptr);
    Clique::Slot& s = c.slots[k.seq];
    if (s.calls.empty()) s.calls.resize(static_cast<size_t>(c.nranks));
    s.calls[static_cast<size_t>(me)] = k;
    ++s.arrived;
    c.cv.notify_all();
    if (!wait([&] { return s.arrived == c.nranks; })) return leave(&s);
    const std::string bad = mismatch(s.calls);
    std::vector<unsigned char> out;
    if (!bad.empty()) {
      m->set_error(ncclInvalidUsage, bad);
    } else if (!s.broken) {
      ++s.reading;
      lock.unlock();
      out = output_of(k, s.calls, me);
      lock.lock();
      --s.reading;
      c.cv.notify_all();  // an aborted rank may be waiting for the reading to end
    }
    ++s.read;
    c.cv.notify_all();
    if (!wait([&] { return s.read == c.nranks; })) return leave(&s);
    if (!out.empty()) {
      lock.unlock();
      std::memcpy(k.recv, out.data(), out.size());
      lock.lock();
    }
    if (++s.left == c.nranks) c.slots.erase(k.seq);
  }
  for (const Call& k : calls) {
    if (k.kind != Call::kSend) continue;
    const std::tuple<int, int, uint64_t> key{me, k.root, k.seq};
    if (!wait([&] { return c.posts[key].taken; })) return leave(nullptr);
    c.posts.erase(key);
  }
}

}  // namespace baton::simt::ccl
