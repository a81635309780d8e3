#include "ps_tcp_server.h"

#include <baton/comm/communicator.h>
#include <baton/core/error.h>
#include <baton/core/timeline.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "ps_shard.h"
#include "ps_wire.h"

namespace baton {

namespace {

using Clock = std::chrono::steady_clock;

// Bytes read from one peer before the others get their turn.
constexpr size_t kReadTurnBytes = size_t{4} << 20;

struct Conn {
  Conn(tcp::Socket s, std::string addr, int64_t floats, int workers)
      : sock(std::move(s)), address(std::move(addr)), in(floats, workers) {}
  tcp::Socket sock;
  std::string address;  // the peer's "ip:port"
  PsInbox in;
  peer_auth::Nonce nonce{};  // this connection's challenge
  int worker = -1;           // after its hello
  int64_t generation = 0;
  Clock::time_point since;  // accepted (until joined), then: the message being read's start
  std::vector<char> out;    // the reply being written
  size_t out_sent = 0;
  Clock::time_point out_since;
  bool done = false;
  std::string drop;  // why it goes ("": it stays)
};

class Server {
 public:
  Server(const tcp::Socket& listener, PsShard& shard, const PsServeOptions& o,
         const std::function<float(int64_t)>& lr_of_update, StalenessStats& window,
         StalenessStats& total)
      : listener_(listener),
        shard_(shard),
        o_(o),
        lr_of_update_(lr_of_update),
        window_(window),
        total_(total),
        nw_(static_cast<size_t>(o.num_workers)),
        n_(shard.size()),
        deadline_(duration_of(o.deadline_s)),
        handshake_(std::min(deadline_, duration_of(o.handshake_s))),
        hold_(deadline_ / 2),
        next_step_(nw_, -1),
        read_of_(nw_, shard.version()),
        generation_(nw_, 0),
        live_(nw_, 0),
        slot_(nw_, std::vector<float>(static_cast<size_t>(n_))),
        who_("parameter server " + std::to_string(o.server)) {
    pending_.reserve(nw_);
    reads_.reserve(nw_);
  }

  int64_t run() {
    tcp::set_nonblocking(listener_);
    // Until the chief is done and every other worker that joined has
    // ended (a dead one not yet replaced is not waited for; a stranger
    // never holds the servers up).
    while (!chief_done_ || std::any_of(conns_.begin(), conns_.end(),
                                       [](const auto& c) { return c->worker >= 0 && !c->done; })) {
      const size_t count = conns_.size();
      polls_.resize(count + 1);
      polls_[0] = pollfd{listener_.fd(), POLLIN, 0};
      for (size_t i = 0; i < count; ++i) {
        const Conn& c = *conns_[i];
        // One message at a time: a peer's next is read once its reply is
        // gone (so a peer that never reads cannot pile up replies).
        const short events = c.out.empty() ? POLLIN : POLLOUT;
        polls_[i + 1] = pollfd{c.done ? -1 : c.sock.fd(), events, 0};
      }
      const int rc = ::poll(polls_.data(), polls_.size(), wait_ms());
      if (rc < 0) {
        if (errno == EINTR) continue;
        throw CommError(who_ + ": poll: " + std::strerror(errno));
      }
      for (size_t i = 0; i < count; ++i) {
        Conn& c = *conns_[i];
        const short re = polls_[i + 1].revents;
        if (polls_[i + 1].fd < 0 || re == 0 || !c.drop.empty()) continue;
        if (!c.out.empty()) {
          flush(c);
        } else {
          take_in(c);
        }
      }
      check_deadlines();
      drop_marked();
      if ((polls_[0].revents & POLLIN) != 0) accept_waiting();
    }
    return shard_.version();
  }

 private:
  void log(const std::string& line) const {
    if (o_.log) {
      o_.log(line);
    } else {
      std::fprintf(stderr, "baton: warning: %s\n", line.c_str());
    }
  }
  static Clock::duration duration_of(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }
  static std::string seconds_text(double s) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g s", s);
    return text;
  }
  static double seconds_of(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
  static std::string name_of(const Conn& c) {
    return c.address + (c.worker >= 0 ? " (worker " + std::to_string(c.worker) + ")" : "");
  }

  // Milliseconds to the nearest deadline (at most a second).
  int wait_ms() const {
    const auto now = Clock::now();
    auto until = now + std::chrono::seconds(1);
    for (const auto& c : conns_) {
      if (c->done) continue;
      if (!c->out.empty()) until = std::min(until, c->out_since + deadline_);
      if (c->worker < 0) until = std::min(until, c->since + handshake_);
      if (c->worker >= 0 && !c->in.idle()) until = std::min(until, c->since + deadline_);
    }
    for (const Pending& p : pending_) until = std::min(until, p.since + hold_);
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
    return static_cast<int>(std::clamp<int64_t>(ms, 0, 1000));
  }

  void accept_waiting() {
    for (;;) {
      std::string address;
      tcp::Socket s = tcp::accept_ready(listener_, &address);
      if (!s.valid()) return;
      const auto stranger = [](const auto& c) { return c->worker < 0; };
      const size_t strangers =
          static_cast<size_t>(std::count_if(conns_.begin(), conns_.end(), stranger));
      if (strangers >= kPsMaxStrangers) {
        // The oldest makes room (a flood of connects cannot take every
        // descriptor, nor keep a replacement worker out: it is let in, and
        // proves the secret in a round trip).
        auto oldest = conns_.end();
        for (auto it = conns_.begin(); it != conns_.end(); ++it) {
          if (stranger(*it) && (oldest == conns_.end() || (*it)->since < (*oldest)->since)) {
            oldest = it;
          }
        }
        log(who_ + ": dropped " + (*oldest)->address + ": the oldest of " +
            std::to_string(strangers) + " connections waiting to prove the job's secret, for " +
            address);
        conns_.erase(oldest);
      }
      auto c = std::make_unique<Conn>(std::move(s), address, n_, o_.num_workers);
      c->nonce = peer_auth::make_nonce();
      c->since = Clock::now();
      const PsWire challenge{kPsChallenge, kPsProtocol, 0, 0, 0, 0};
      queue(*c, challenge, c->nonce.data(), c->nonce.size());
      conns_.push_back(std::move(c));
      flush(*conns_.back());
    }
  }

  // A reply: its header and body go out as the peer takes them.
  void queue(Conn& c, const PsWire& h, const void* body, size_t n) {
    if (c.out.empty()) {
      c.out_sent = 0;
      c.out_since = Clock::now();
    }
    const char* hp = reinterpret_cast<const char*>(&h);
    c.out.insert(c.out.end(), hp, hp + sizeof(h));
    const char* bp = static_cast<const char*>(body);
    c.out.insert(c.out.end(), bp, bp + n);
  }

  void flush(Conn& c) {
    while (c.out_sent < c.out.size()) {
      const ssize_t k = ::send(c.sock.fd(), c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                               MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        c.drop = std::string("sending to it: ") + std::strerror(errno);
        return;
      }
      c.out_sent += static_cast<size_t>(k);
    }
    c.out.clear();  // keeps its capacity: the next reply allocates nothing
    c.out_sent = 0;
  }

  void take_in(Conn& c) {
    size_t taken = 0;
    while (c.drop.empty() && c.out.empty() && taken < kReadTurnBytes) {
      const bool was_idle = c.in.idle();
      const auto [at, want] = c.in.space();
      const ssize_t k = ::recv(c.sock.fd(), at, want, MSG_DONTWAIT);
      if (k == 0) {
        c.drop = was_idle ? "it closed the connection"
                          : "it closed the connection part-way through a message";
        return;
      }
      if (k < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        c.drop = std::string("receiving from it: ") + std::strerror(errno);
        return;
      }
      taken += static_cast<size_t>(k);
      // A joined worker's message has its deadline from its first byte; a
      // stranger's handshake from the connection's start.
      if (was_idle && c.worker >= 0) c.since = Clock::now();
      const PsInbox::Event e = c.in.filled(static_cast<size_t>(k));
      if (e == PsInbox::Event::kBad) {
        c.drop = c.in.why();
      } else if (e == PsInbox::Event::kMessage) {
        handle(c);
        c.in.next();
      }
    }
  }

  void check_deadlines() {
    const auto now = Clock::now();
    const std::string seconds = seconds_text(o_.deadline_s);
    for (const auto& p : conns_) {
      Conn& c = *p;
      if (c.done || !c.drop.empty()) continue;
      if (!c.out.empty() && now - c.out_since > deadline_) {
        c.drop = "it did not take its reply within " + seconds + " (" + std::to_string(c.out_sent) +
                 " of " + std::to_string(c.out.size()) + " bytes taken)";
      } else if (c.worker < 0 && now - c.since > handshake_) {
        c.drop = "no handshake within " + seconds_text(seconds_of(handshake_));
      } else if (!c.in.idle() && now - c.since > deadline_) {
        c.drop = "a message took longer than " + seconds + " (" + std::to_string(c.in.got()) +
                 " of " + std::to_string(c.in.total()) + " bytes came)";
      }
    }
    if (bounded()) check_held(now);
  }

  // Bounded: a push held back past hold_ waits for a worker that has not
  // pushed since its values' version (stopped after it took its reply, or
  // its host lost; a stopped process keeps its connection). The one with
  // the oldest values goes (its slot freed for a replacement), then the
  // next, until the held push is applied: else its worker's exchange
  // times out, and the launcher may lose that race to a job restart.
  void check_held(Clock::time_point now) {
    if (pending_.empty()) return;
    const Pending& held =
        *std::min_element(pending_.begin(), pending_.end(),
                          [](const Pending& a, const Pending& b) { return a.since < b.since; });
    if (now - held.since <= hold_) return;
    int blocker = -1;
    for (size_t w = 0; w < nw_; ++w) {
      const int iw = static_cast<int>(w);
      if (!live_[w] || iw == held.worker) continue;
      if (std::any_of(pending_.begin(), pending_.end(),
                      [&](const Pending& p) { return p.worker == iw; })) {
        continue;  // its own push waits: not what holds the others
      }
      if (blocker < 0 || read_of_[w] < read_of_[static_cast<size_t>(blocker)]) blocker = iw;
    }
    if (blocker < 0) return;
    // It holds the push only if its read is at or before the first one
    // that breaks the bound (else the held workers' own reads do).
    reads_.clear();
    for (size_t w = 0; w < nw_; ++w) {
      if (live_[w] && static_cast<int>(w) != held.worker) reads_.push_back(read_of_[w]);
    }
    std::sort(reads_.begin(), reads_.end());
    size_t first_over = 0;
    while (first_over < reads_.size() &&
           shard_.version() + 1 + static_cast<int64_t>(first_over) - reads_[first_over] <=
               o_.max_staleness) {
      ++first_over;
    }
    if (first_over == reads_.size() ||
        read_of_[static_cast<size_t>(blocker)] > reads_[first_over]) {
      return;
    }
    Conn* c = holder_of(blocker);
    if (c == nullptr) return;
    c->drop = "its values are from version " +
              std::to_string(read_of_[static_cast<size_t>(blocker)]) +
              " and it has not pushed since: worker " + std::to_string(held.worker) +
              "'s push waited " + seconds_text(seconds_of(now - held.since)) +
              " for it (max_staleness " + std::to_string(o_.max_staleness) +
              "; a held push waits at most half the " + seconds_text(o_.deadline_s) + " deadline)";
  }

  Conn* holder_of(int w) {
    for (const auto& c : conns_) {
      if (c->worker == w && c->drop.empty() && !c->done) return c.get();
    }
    return nullptr;
  }

  // A worker gone without its end (killed, stopped, its host lost): the
  // others go on; its slot waits for a replacement.
  void release(Conn& c) {
    if (c.worker < 0 || c.done) return;
    const auto uw = static_cast<size_t>(c.worker);
    live_[uw] = 0;
    std::erase_if(pending_, [&](const Pending& p) { return p.worker == c.worker; });
    c.worker = -1;
    if (bounded()) apply_held();
  }

  void drop_marked() {
    for (const auto& c : conns_) {
      if (c->drop.empty()) continue;
      log(who_ + ": dropped " + name_of(*c) + ": " + c->drop);
      release(*c);
    }
    std::erase_if(conns_, [](const auto& c) { return !c->drop.empty(); });
  }

  bool bounded() const { return o_.max_staleness >= 0; }

  void send_values(Conn& c, int64_t stale, int64_t start) {
    const PsWire h{kPsValues, shard_.version(), stale, start, 0, n_};
    queue(c, h, shard_.out(), sizeof(float) * static_cast<size_t>(n_));
    flush(c);
  }

  struct Pending {
    int worker;
    int64_t read;
    Clock::time_point since;  // when it came (bounded: held since)
  };

  void update_and_reply(const Pending& p) {
    const TimelineScope span(o_.timeline, "update", "optimizer",
                             timeline_lane(TimelineLane::kStepLoop), shard_.version(),
                             n_ * static_cast<int64_t>(sizeof(float)));
    shard_.apply(slot_[static_cast<size_t>(p.worker)].data(), lr_of_update_(shard_.version()));
    const int64_t stale = shard_.version() - 1 - p.read;
    window_.add(stale);
    total_.add(stale);
    read_of_[static_cast<size_t>(p.worker)] = shard_.version();
    if (Conn* c = holder_of(p.worker)) send_values(*c, stale, -1);
  }

  // Bounded: applies held pushes, oldest first, while the bound allows.
  void apply_held() {
    for (;;) {
      size_t pick = pending_.size();
      for (size_t k = 0; k < pending_.size(); ++k) {
        if (pick != pending_.size() && pending_[k].read >= pending_[pick].read) continue;
        reads_.clear();
        for (size_t w = 0; w < nw_; ++w) {
          if (live_[w] && static_cast<int>(w) != pending_[k].worker) reads_.push_back(read_of_[w]);
        }
        if (ps_keeps_bound(shard_.version(), reads_, o_.max_staleness)) pick = k;
      }
      if (pick == pending_.size()) return;
      const Pending p = pending_[pick];
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(pick));
      update_and_reply(p);
    }
  }

  void hello(Conn& c) {
    const PsWire& h = c.in.header();
    const PsHelloAuth& auth = c.in.hello();
    if (!peer_auth::same(auth.mac, ps_hello_mac(o_.secret, c.nonce, auth.nonce, h))) {
      c.drop = "its handshake does not prove the job's secret";
      return;
    }
    const int w = static_cast<int>(h.a);
    const auto uw = static_cast<size_t>(w);
    if (Conn* old = holder_of(w)) {
      // The slot's connection is a worker the launcher gave up on (stopped,
      // or dead and the kernel has not noticed): only its announced
      // replacement, of a later generation, takes over.
      if (h.d <= generation_[uw]) {
        c.drop = "worker " + std::to_string(w) + " is held by " + old->address + " (generation " +
                 std::to_string(generation_[uw]) +
                 ") and this is not its announced replacement (generation " + std::to_string(h.d) +
                 ")";
        return;
      }
      old->drop = "its slot was taken over by its replacement " + c.address + " (generation " +
                  std::to_string(h.d) + ")";
      release(*old);
    } else if (h.d < generation_[uw]) {
      c.drop = "worker " + std::to_string(w) + " of generation " + std::to_string(h.d) +
               " after its replacement of generation " + std::to_string(generation_[uw]);
      return;
    }
    c.worker = w;
    c.generation = h.d;
    generation_[uw] = h.d;
    live_[uw] = 1;
    read_of_[uw] = shard_.version();
    c.in.join(slot_[uw].data());
    if (w == 0 && h.b >= 0) base_step_ = h.b;
    const int64_t start =
        h.b >= 0 ? h.b : (next_step_[uw] >= 0 ? next_step_[uw] : std::max<int64_t>(0, base_step_));
    const peer_auth::Mac proof = ps_welcome_mac(o_.secret, c.nonce, auth.nonce);
    queue(c, PsWire{kPsWelcome, 0, 0, 0, 0, 0}, proof.data(), proof.size());
    send_values(c, 0, start);
  }

  void handle(Conn& c) {
    const PsWire& h = c.in.header();
    if (h.kind == kPsHello) {
      hello(c);
      return;
    }
    const auto uw = static_cast<size_t>(c.worker);
    if (h.kind == kPsPush) {
      next_step_[uw] = h.d + 1;
      const Pending p{c.worker, h.a, Clock::now()};
      if (!bounded()) {
        update_and_reply(p);
      } else {
        pending_.push_back(p);
        apply_held();
      }
    } else if (h.kind == kPsSnapshot) {
      shard_.pack_snapshot();
      const std::vector<float>& snap = shard_.snapshot();
      const PsWire reply{kPsSnap, shard_.version(), 0, 0, 0, static_cast<int64_t>(snap.size())};
      queue(c, reply, snap.data(), sizeof(float) * snap.size());
      flush(c);
    } else if (h.kind == kPsDone) {
      c.done = true;
      live_[uw] = 0;
      next_step_[uw] = h.a;
      if (c.worker == 0) chief_done_ = true;
      if (bounded()) apply_held();
    }
  }

  const tcp::Socket& listener_;
  PsShard& shard_;
  const PsServeOptions& o_;
  const std::function<float(int64_t)>& lr_of_update_;
  StalenessStats& window_;
  StalenessStats& total_;
  size_t nw_;
  int64_t n_;
  Clock::duration deadline_, handshake_;
  Clock::duration hold_;  // bounded: the longest a push is held back (check_held)
  // Per worker slot: the step its next push is (where a replacement goes
  // on), the version its values came from, the generation holding it,
  // whether a worker holds it, and its gradients as they come in.
  std::vector<int64_t> next_step_, read_of_, generation_;
  std::vector<char> live_;
  std::vector<std::vector<float>> slot_;
  std::vector<Pending> pending_;  // bounded: pushes held back
  std::vector<int64_t> reads_;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<pollfd> polls_;
  int64_t base_step_ = -1;  // where the chief started: a new worker's start
  bool chief_done_ = false;
  std::string who_;
};

}  // namespace

int64_t ps_serve_tcp(const tcp::Socket& listener, PsShard& shard, const PsServeOptions& options,
                     const std::function<float(int64_t)>& lr_of_update, StalenessStats& window,
                     StalenessStats& total) {
  return Server(listener, shard, options, lr_of_update, window, total).run();
}

}  // namespace baton
