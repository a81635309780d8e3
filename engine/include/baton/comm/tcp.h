// Plain TCP between processes that are not one MPI job: what the
// asynchronous parameter servers and their workers use under `baton
// launch`, so a worker that dies takes nobody else with it (OpenMPI ends
// the whole job when one of its ranks dies). Blocking calls; exchange()
// sends and receives on several connections at once, so no two peers
// ever wait on each other's full socket buffers. Errors throw CommError
// naming the peer ("host:port").
#pragma once

#include <cstddef>
#include <string>
#include <vector>

struct pollfd;

namespace baton::tcp {

// An owned socket descriptor (closed on destruction).
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

 private:
  int fd_ = -1;
};

// A listening socket on every address of this host, on a port the kernel
// picks (*port receives it).
Socket listen_any(int* port);
// The same on one numeric address only ("127.0.0.1", "::1", "10.0.0.2");
// "" is every address (listen_any). InputError naming `what` for a
// malformed address, CommError when it cannot be bound.
Socket listen_on(const std::string& address, int* port, const std::string& what);
// O_NONBLOCK on: calls on `s` return EAGAIN instead of waiting.
void set_nonblocking(const Socket& s);
// The next connection waiting on `listener` (blocking).
Socket accept_one(const Socket& listener);
// A connection waiting on `listener` now (a non-blocking listener: see
// set_nonblocking), non-blocking itself, with its peer's "address:port" in
// *peer; an invalid Socket when none waits.
Socket accept_ready(const Socket& listener, std::string* peer);

// "host:port" (or "[v6]:port") split; InputError naming `what` when it is
// not one.
void split_address(const std::string& address, std::string* host, int* port,
                   const std::string& what);
// Connects to host:port, retrying a refused or unreachable connection
// until timeout_s has passed (the peer may not listen yet). TCP_NODELAY on.
Socket connect_to(const std::string& host, int port, double timeout_s);

// Writes or reads exactly n bytes. recv_all returns false when the peer
// closed the connection before the first byte; a close part-way, or an
// error, throws CommError naming `peer`.
void send_all(const Socket& s, const void* data, size_t n, const std::string& peer);
bool recv_all(const Socket& s, void* data, size_t n, const std::string& peer);

// One connection's part of an exchange: the bytes to send (in up to two
// pieces: a header and a payload), then the bytes to receive (likewise).
struct Transfer {
  const Socket* socket = nullptr;
  std::string peer;
  const void* send[2] = {nullptr, nullptr};
  size_t send_n[2] = {0, 0};
  void* recv[2] = {nullptr, nullptr};
  size_t recv_n[2] = {0, 0};
};
// Sends and receives every transfer's bytes at once (poll over all of
// them). timeout_s > 0: CommError when no byte moves for that long. A
// peer that closes its connection first: CommError naming it. `polls` is
// scratch space, grown once to the transfers' count: a steady exchange
// allocates nothing.
void exchange(std::vector<Transfer>& transfers, std::vector<pollfd>& polls, double timeout_s);

}  // namespace baton::tcp
