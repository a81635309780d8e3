// The NCCL stand-in across processes (nccl_wire.h): the shared segment, the
// join, and a group's calls over it.
#include "nccl_wire.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>

namespace baton::simt::ccl {
namespace {

constexpr char kWireTag[8] = {'b', 't', 'n', 'w', 'i', 'r', 'e', '1'};
constexpr int kNameBytes = 16;                     // random bytes naming the segment
constexpr int kMaxRanks = 64;                      // a host's GPUs, with room
constexpr size_t kChunkBytes = size_t{256} << 10;  // a collective's piece per rank
constexpr size_t kBoxBytes = size_t{64} << 10;     // a pair's mailbox
constexpr uint64_t kReady = 0x626174776972656cull;

// A collective as the segment holds it (no pointers: they mean nothing in
// another process).
struct WireCall {
  int32_t kind = 0, type = 0, op = 0, root = 0;
  uint64_t count = 0, seq = 0;
};

struct Header {
  std::atomic<uint64_t> ready;  // kReady once the creator has set the rest up
  int32_t nranks;
  int32_t joined;
  pthread_mutex_t mu;  // process-shared, robust; guards everything below
  pthread_cond_t cv;   // process-shared, on CLOCK_MONOTONIC
  uint64_t epoch;      // bumped by every change a waiter may wait for
  int32_t arrived;     // the barrier's count and generation
  uint64_t generation;
  struct Rank {
    int32_t device, pid, joined;
    WireCall call;  // its current collective
  } ranks[kMaxRanks];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the flag crosses processes");

struct Box {            // a ring of bytes from one rank to another
  uint64_t head, tail;  // written and read, in bytes since the start
  unsigned char data[kBoxBytes];
};

size_t header_bytes() { return (sizeof(Header) + 4095) / 4096 * 4096; }
size_t segment_bytes(int n) {
  return header_bytes() + static_cast<size_t>(n) * kChunkBytes +
         static_cast<size_t>(n) * static_cast<size_t>(n) * sizeof(Box);
}

std::string segment_name(const ncclUniqueId& id) {
  static const char* hex = "0123456789abcdef";
  std::string name = "/baton-nccl-";
  for (int i = 0; i < kNameBytes; ++i) {
    const auto b = static_cast<unsigned char>(id.internal[sizeof kWireTag + i]);
    name += hex[b >> 4];
    name += hex[b & 15];
  }
  return name;
}

}  // namespace

struct Wire {
  std::string name;
  int fd = -1;
  void* base = nullptr;
  size_t bytes = 0;
  bool complete = false;  // seen complete once: stays so
  ~Wire() {
    if (base != nullptr) munmap(base, bytes);
    if (fd >= 0) close(fd);
  }
  Header& h() const { return *static_cast<Header*>(base); }
  unsigned char* chunk(int r) const {
    return static_cast<unsigned char*>(base) + header_bytes() +
           static_cast<size_t>(r) * kChunkBytes;
  }
  Box& box(int from, int to) const {
    auto* first = reinterpret_cast<Box*>(static_cast<unsigned char*>(base) + header_bytes() +
                                         static_cast<size_t>(h().nranks) * kChunkBytes);
    return first[from * h().nranks + to];
  }
};

namespace {

// The segment's mutex, held; a process that died holding it leaves it
// usable (its ranks are found dead by the waits).
class Held {
 public:
  explicit Held(Header& h) : h_(h) { lock(); }
  ~Held() { pthread_mutex_unlock(&h_.mu); }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;
  void lock() {
    if (pthread_mutex_lock(&h_.mu) == EOWNERDEAD) pthread_mutex_consistent(&h_.mu);
  }
  // Waits up to 20 ms for a change (the mutex held again on return).
  void wait_a_little() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec += 20'000'000;
    if (t.tv_nsec >= 1'000'000'000) {
      t.tv_nsec -= 1'000'000'000;
      ++t.tv_sec;
    }
    if (pthread_cond_timedwait(&h_.cv, &h_.mu, &t) == EOWNERDEAD) pthread_mutex_consistent(&h_.mu);
  }

 private:
  Header& h_;
};

void changed(Header& h) {
  ++h.epoch;
  pthread_cond_broadcast(&h.cv);
}

bool process_gone(int pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

// One wait of a member on the wire, the mutex held: false when it must give
// up - it was aborted, or a peer's process has exited (its asynchronous
// error then says which).
bool wait_on(Wire& w, Held& held, Member& m) {
  held.wait_a_little();
  if (m.aborted.load()) return false;
  const Header& h = w.h();
  for (int r = 0; r < h.nranks; ++r) {
    if (h.ranks[r].joined != 0 && process_gone(h.ranks[r].pid)) {
      m.set_error(ncclRemoteError, "rank " + std::to_string(r) + "'s process (" +
                                       std::to_string(h.ranks[r].pid) +
                                       ") exited: remote process exited or there was a network "
                                       "error");
      return false;
    }
  }
  return true;
}

// Every rank meets here; false when the member gave up waiting.
bool barrier(Wire& w, Member& m) {
  Header& h = w.h();
  Held held(h);
  const uint64_t g = h.generation;
  if (++h.arrived == h.nranks) {
    h.arrived = 0;
    ++h.generation;
    changed(h);
    return true;
  }
  while (h.generation == g) {
    if (!wait_on(w, held, m)) return false;
  }
  return true;
}

WireCall to_wire(const Call& c) {
  WireCall w;
  w.kind = c.kind;
  w.type = c.type;
  w.op = c.op;
  w.root = c.root;
  w.count = c.count;
  w.seq = c.seq;
  return w;
}

Call from_wire(const WireCall& w) {
  static const char* names[] = {"ncclAllReduce", "ncclReduce", "ncclReduceScatter", "ncclAllGather",
                                "ncclBroadcast", "ncclSend",   "ncclRecv"};
  Call c;
  c.kind = static_cast<Call::Kind>(w.kind);
  c.name = names[std::clamp(w.kind, 0, 6)];
  c.type = static_cast<ncclDataType_t>(w.type);
  c.op = static_cast<ncclRedOp_t>(w.op);
  c.root = w.root;
  c.count = w.count;
  c.seq = w.seq;
  return c;
}

// One collective, piece by piece through the chunks. False: give up.
bool collective(Wire& w, Member& m, const Call& k) {
  const int n = w.h().nranks, me = m.rank;
  const size_t elem = type_bytes(k.type);
  const size_t in_elems = k.count * (k.kind == Call::kReduceScatter ? static_cast<size_t>(n) : 1);
  const size_t piece = kChunkBytes / elem;
  const bool contributes = !(k.kind == Call::kBroadcast && me != k.root);
  {
    Held held(w.h());
    w.h().ranks[me].call = to_wire(k);
  }
  std::vector<const void*> inputs(static_cast<size_t>(n));
  for (size_t lo = 0;; lo += piece) {
    const size_t len = std::min(piece, in_elems - lo);
    if (contributes && len > 0)
      std::memcpy(w.chunk(me), static_cast<const unsigned char*>(k.send) + lo * elem, len * elem);
    if (!barrier(w, m)) return false;
    if (lo == 0) {
      std::vector<Call> calls;
      {
        Held held(w.h());
        for (int r = 0; r < n; ++r) calls.push_back(from_wire(w.h().ranks[r].call));
      }
      const std::string bad = mismatch(calls);
      if (!bad.empty()) {
        // Every rank reads the same calls and stops here, once all have
        // read them.
        m.set_error(ncclInvalidUsage, bad);
        barrier(w, m);
        return false;
      }
    }
    for (int r = 0; r < n; ++r) inputs[static_cast<size_t>(r)] = w.chunk(r);
    auto* out = static_cast<unsigned char*>(k.recv);
    switch (k.kind) {
      case Call::kAllReduce:
      case Call::kReduce:
        if (k.kind == Call::kAllReduce || me == k.root)
          reduce_into(k.type, k.op, inputs, 0, len, out + lo * elem);
        break;
      case Call::kReduceScatter: {
        // The part of this piece that is this rank's block.
        const size_t first = std::max(lo, static_cast<size_t>(me) * k.count);
        const size_t last = std::min(lo + len, static_cast<size_t>(me + 1) * k.count);
        if (first < last) {
          reduce_into(k.type, k.op, inputs, first - lo, last - first,
                      out + (first - static_cast<size_t>(me) * k.count) * elem);
        }
        break;
      }
      case Call::kAllGather:
        for (int r = 0; r < n; ++r)
          std::memcpy(out + (static_cast<size_t>(r) * k.count + lo) * elem, w.chunk(r), len * elem);
        break;
      case Call::kBroadcast:
        std::memcpy(out + lo * elem, w.chunk(k.root), len * elem);
        break;
      default:
        break;
    }
    if (!barrier(w, m)) return false;  // every rank has read the chunks
    if (lo + len >= in_elems) return true;
  }
}

// A group's sends and receives, progressing together through the pairs'
// mailboxes; each message is its byte count, then its bytes. False: give up.
bool point_to_point(Wire& w, Member& m, const std::vector<Call>& calls) {
  struct Transfer {
    const Call* call;
    size_t bytes = 0;     // this side's
    size_t expected = 0;  // a receive: the sender's count, once read
    size_t done = 0;
    bool counted = false;  // the byte count is through
  };
  std::vector<Transfer> xs;
  for (const Call& k : calls) {
    if (!k.collective()) xs.push_back({&k, k.count * type_bytes(k.type)});
  }
  if (xs.empty()) return true;
  const int me = m.rank;
  Header& h = w.h();
  Held held(h);
  for (;;) {
    bool moved = false, all_done = true;
    for (Transfer& x : xs) {
      const bool send = x.call->kind == Call::kSend;
      Box& b = send ? w.box(me, x.call->root) : w.box(x.call->root, me);
      if (send) {
        if (!x.counted && kBoxBytes - (b.head - b.tail) >= sizeof(uint64_t)) {
          const uint64_t count = x.bytes;
          for (size_t i = 0; i < sizeof count; ++i)
            b.data[(b.head + i) % kBoxBytes] = reinterpret_cast<const unsigned char*>(&count)[i];
          b.head += sizeof count;
          x.counted = moved = true;
        }
        while (x.counted && x.done < x.bytes && b.head - b.tail < kBoxBytes) {
          const size_t at = b.head % kBoxBytes;
          const size_t room = std::min(kBoxBytes - at, kBoxBytes - (b.head - b.tail));
          const size_t n = std::min(room, x.bytes - x.done);
          std::memcpy(b.data + at, static_cast<const unsigned char*>(x.call->send) + x.done, n);
          b.head += n;
          x.done += n;
          moved = true;
        }
        all_done = all_done && x.counted && x.done == x.bytes;
      } else {
        if (!x.counted && b.head - b.tail >= sizeof(uint64_t)) {
          uint64_t count = 0;
          for (size_t i = 0; i < sizeof count; ++i)
            reinterpret_cast<unsigned char*>(&count)[i] = b.data[(b.tail + i) % kBoxBytes];
          b.tail += sizeof count;
          x.expected = count;
          x.counted = moved = true;
          if (count != x.bytes) {
            m.set_error(ncclInvalidUsage, "ncclRecv of " + std::to_string(x.bytes) +
                                              " bytes from rank " + std::to_string(x.call->root) +
                                              ", which sent " + std::to_string(count));
          }
        }
        while (x.counted && x.done < x.expected && b.head != b.tail) {
          const size_t at = b.tail % kBoxBytes;
          const size_t n =
              std::min({kBoxBytes - at, static_cast<size_t>(b.head - b.tail), x.expected - x.done});
          // All of the sender's bytes are taken from the box; as many as
          // fit land in the receive buffer.
          if (x.done < x.bytes) {
            std::memcpy(static_cast<unsigned char*>(x.call->recv) + x.done, b.data + at,
                        std::min(n, x.bytes - x.done));
          }
          b.tail += n;
          x.done += n;
          moved = true;
        }
        all_done = all_done && x.counted && x.done == x.expected;
      }
    }
    if (moved) changed(h);
    if (all_done) return true;
    if (!moved && !wait_on(w, held, m)) return false;
  }
}

}  // namespace

void make_wire_id(ncclUniqueId* id) {
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, kWireTag, sizeof kWireTag);
  std::random_device rd;  // the kernel's random source
  for (int i = 0; i < kNameBytes; i += 4) {
    const uint32_t v = rd();
    std::memcpy(id->internal + sizeof kWireTag + i, &v, 4);
  }
}

bool is_wire_id(const ncclUniqueId& id) {
  return std::memcmp(id.internal, kWireTag, sizeof kWireTag) == 0;
}

std::shared_ptr<Wire> join_wire(const ncclUniqueId& id, int nranks, int rank, int device,
                                ncclResult_t* code, std::string* why) {
  const auto fail = [&](ncclResult_t c, const std::string& what) {
    *code = c;
    *why = what;
    return std::shared_ptr<Wire>();
  };
  if (nranks > kMaxRanks)
    return fail(ncclInvalidArgument, "the NCCL stand-in connects at most " +
                                         std::to_string(kMaxRanks) + " ranks, not " +
                                         std::to_string(nranks));
  auto w = std::make_shared<Wire>();
  w->name = segment_name(id);
  bool creator = true;
  w->fd = shm_open(w->name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (w->fd < 0 && errno == EEXIST) {
    creator = false;
    w->fd = shm_open(w->name.c_str(), O_RDWR, 0600);
  }
  if (w->fd < 0) {
    if (errno == ENOENT)
      return fail(ncclInvalidUsage, "rank " + std::to_string(rank) +
                                        ": every rank of this unique id has already joined");
    return fail(ncclSystemError, "shm_open " + w->name + ": " + std::strerror(errno));
  }
  if (creator) {
    w->bytes = segment_bytes(nranks);
    if (ftruncate(w->fd, static_cast<off_t>(w->bytes)) != 0) {
      const int e = errno;
      shm_unlink(w->name.c_str());
      return fail(ncclSystemError, "ftruncate " + w->name + ": " + std::strerror(e));
    }
    w->base = mmap(nullptr, w->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, 0);
    if (w->base == MAP_FAILED) {
      w->base = nullptr;
      shm_unlink(w->name.c_str());
      return fail(ncclSystemError, "mmap " + w->name + ": " + std::strerror(errno));
    }
    Header& h = w->h();
    h.nranks = nranks;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&h.mu, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h.cv, &ca);
    pthread_condattr_destroy(&ca);
    h.ready.store(kReady, std::memory_order_release);
  } else {
    // The creator may still be setting the segment up: wait for its size,
    // then for its flag (a creator that died half-way is given 10 s).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      struct stat st {};
      if (fstat(w->fd, &st) == 0 && static_cast<size_t>(st.st_size) >= header_bytes()) {
        if (w->base == nullptr) {
          w->bytes = static_cast<size_t>(st.st_size);
          w->base = mmap(nullptr, w->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, 0);
          if (w->base == MAP_FAILED) {
            w->base = nullptr;
            return fail(ncclSystemError, "mmap " + w->name + ": " + std::strerror(errno));
          }
        }
        if (w->h().ready.load(std::memory_order_acquire) == kReady) break;
      }
      if (std::chrono::steady_clock::now() > give_up)
        return fail(ncclSystemError, "the segment " + w->name + " was never set up");
      std::this_thread::yield();
    }
    if (w->bytes != segment_bytes(w->h().nranks))
      return fail(ncclSystemError, "the segment " + w->name + " has an unexpected size");
  }
  Header& h = w->h();
  Held held(h);
  if (h.nranks != nranks)
    return fail(ncclInvalidUsage, "rank " + std::to_string(rank) + " says " +
                                      std::to_string(nranks) + " ranks, another said " +
                                      std::to_string(h.nranks));
  if (h.ranks[rank].joined != 0)
    return fail(ncclInvalidUsage, "rank " + std::to_string(rank) + " joined twice");
  for (int other = 0; other < nranks; ++other) {
    if (h.ranks[other].joined != 0 && h.ranks[other].device == device)
      return fail(ncclInvalidUsage, "Duplicate GPU detected: rank " + std::to_string(rank) +
                                        " and rank " + std::to_string(other) +
                                        " both on CUDA device " + std::to_string(device));
  }
  h.ranks[rank].device = device;
  h.ranks[rank].pid = static_cast<int32_t>(getpid());
  h.ranks[rank].joined = 1;
  if (++h.joined == nranks) shm_unlink(w->name.c_str());  // complete: nobody else may join
  changed(h);
  return w;
}

bool wire_complete(Wire& w) {
  if (w.complete) return true;
  Held held(w.h());
  w.complete = w.h().joined == w.h().nranks;
  return w.complete;
}

void wait_wire_complete(Wire& w) {
  Held held(w.h());
  while (w.h().joined != w.h().nranks) held.wait_a_little();
  w.complete = true;
}

int wire_ranks(const Wire& w) { return w.h().nranks; }

void wire_abort(Wire& w) {
  Held held(w.h());
  if (w.h().joined != w.h().nranks) shm_unlink(w.name.c_str());
  changed(w.h());
}

void run_wire_calls(const std::shared_ptr<Member>& m, const std::vector<Call>& calls) {
  Wire& w = *m->wire;
  if (m->aborted.load() || !point_to_point(w, *m, calls)) return;
  for (const Call& k : calls) {
    if (k.collective() && (m->aborted.load() || !collective(w, *m, k))) return;
  }
}

}  // namespace baton::simt::ccl
