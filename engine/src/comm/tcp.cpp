#include <arpa/inet.h>
#include <baton/comm/communicator.h>
#include <baton/comm/tcp.h>
#include <baton/core/error.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace baton::tcp {

namespace {

std::string errno_text(int e) { return std::strerror(e); }

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

Socket::~Socket() { close(); }

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket listen_any(int* port) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) throw CommError("tcp: socket: " + errno_text(errno));
  const int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = 0;
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    throw CommError("tcp: bind: " + errno_text(errno));
  }
  if (::listen(s.fd(), 64) != 0) throw CommError("tcp: listen: " + errno_text(errno));
  socklen_t len = sizeof(a);
  if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    throw CommError("tcp: getsockname: " + errno_text(errno));
  }
  *port = ntohs(a.sin_port);
  return s;
}

Socket listen_on(const std::string& address, int* port, const std::string& what) {
  if (address.empty()) return listen_any(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  addrinfo* found = nullptr;
  if (::getaddrinfo(address.c_str(), "0", &hints, &found) != 0 || found == nullptr) {
    throw InputError(what + ": \"" + address +
                     "\" is not a numeric address (expected e.g. 127.0.0.1 or ::1)");
  }
  Socket s(::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol));
  if (!s.valid()) {
    ::freeaddrinfo(found);
    throw CommError("tcp: socket: " + errno_text(errno));
  }
  const int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const int rc = ::bind(s.fd(), found->ai_addr, found->ai_addrlen);
  const int bind_errno = errno;
  ::freeaddrinfo(found);
  if (rc != 0) throw CommError("tcp: bind " + address + ": " + errno_text(bind_errno));
  if (::listen(s.fd(), 64) != 0) throw CommError("tcp: listen: " + errno_text(errno));
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    throw CommError("tcp: getsockname: " + errno_text(errno));
  }
  *port = a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port)
                                  : ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  return s;
}

void set_nonblocking(const Socket& s) {
  const int flags = ::fcntl(s.fd(), F_GETFL);
  if (flags < 0 || ::fcntl(s.fd(), F_SETFL, flags | O_NONBLOCK) != 0) {
    throw CommError("tcp: fcntl O_NONBLOCK: " + errno_text(errno));
  }
}

Socket accept_ready(const Socket& listener, std::string* peer) {
  for (;;) {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    const int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&a), &len,
                             SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Socket();
      throw CommError("tcp: accept: " + errno_text(errno));
    }
    set_nodelay(fd);
    char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
    ::getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof(host), serv, sizeof(serv),
                  NI_NUMERICHOST | NI_NUMERICSERV);
    *peer = a.ss_family == AF_INET6 ? "[" + std::string(host) + "]:" + serv
                                    : std::string(host) + ":" + serv;
    return Socket(fd);
  }
}

Socket accept_one(const Socket& listener) {
  for (;;) {
    const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      set_nodelay(fd);
      return Socket(fd);
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    throw CommError("tcp: accept: " + errno_text(errno));
  }
}

void split_address(const std::string& address, std::string* host, int* port,
                   const std::string& what) {
  const size_t colon = address.rfind(':');
  std::string h = colon == std::string::npos ? std::string() : address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  const std::string p = colon == std::string::npos ? std::string() : address.substr(colon + 1);
  int n = 0;
  bool ok = !h.empty() && !p.empty() && p.size() <= 5 &&
            p.find_first_not_of("0123456789") == std::string::npos;
  if (ok) {
    n = std::stoi(p);
    ok = n >= 1 && n <= 65535;
  }
  if (!ok) {
    throw InputError(what + ": \"" + address + "\" is not an address; expected HOST:PORT");
  }
  *host = h;
  *port = n;
}

Socket connect_to(const std::string& host, int port, double timeout_s) {
  const std::string peer = host + ":" + std::to_string(port);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::string last;
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
    if (rc != 0) {
      last = std::string("cannot resolve the host: ") + ::gai_strerror(rc);
    } else {
      for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
        Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
        if (!s.valid()) continue;
        if (::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) == 0) {
          ::freeaddrinfo(found);
          set_nodelay(s.fd());
          return s;
        }
        last = errno_text(errno);
      }
      ::freeaddrinfo(found);
    }
    if (std::chrono::steady_clock::now() >= until) {
      throw CommError("tcp: cannot connect to " + peer + ": " + last);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void send_all(const Socket& s, const void* data, size_t n, const std::string& peer) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(s.fd(), p, n, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      throw CommError("tcp: sending to " + peer + ": " + errno_text(errno));
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

bool recv_all(const Socket& s, void* data, size_t n, const std::string& peer) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < n) {
    const ssize_t k = ::recv(s.fd(), p + got, n - got, 0);
    if (k == 0) {
      if (got == 0) return false;
      throw CommError("tcp: " + peer + " closed the connection part-way through a message");
    }
    if (k < 0) {
      if (errno == EINTR) continue;
      if (got == 0 && errno == ECONNRESET) return false;
      throw CommError("tcp: receiving from " + peer + ": " + errno_text(errno));
    }
    got += static_cast<size_t>(k);
  }
  return true;
}

namespace {

// The next piece with bytes left (sent or received), or -1.
int next_piece(const size_t n[2], const size_t done[2]) {
  for (int i = 0; i < 2; ++i) {
    if (done[i] < n[i]) return i;
  }
  return -1;
}

}  // namespace

void exchange(std::vector<Transfer>& transfers, std::vector<pollfd>& polls, double timeout_s) {
  const size_t count = transfers.size();
  if (polls.size() < count) polls.resize(count);
  // Progress per transfer: bytes sent and received of each piece.
  struct Progress {
    size_t sent[2] = {0, 0}, got[2] = {0, 0};
  };
  constexpr size_t kMaxOnStack = 64;
  Progress stack_progress[kMaxOnStack];
  std::vector<Progress> heap_progress;
  Progress* prog = stack_progress;
  if (count > kMaxOnStack) {
    heap_progress.resize(count);
    prog = heap_progress.data();
  }
  const int wait_ms = timeout_s > 0 ? static_cast<int>(timeout_s * 1000.0) : -1;
  for (;;) {
    size_t active = 0;
    for (size_t i = 0; i < count; ++i) {
      const Transfer& t = transfers[i];
      short events = 0;
      if (next_piece(t.send_n, prog[i].sent) >= 0) events |= POLLOUT;
      if (next_piece(t.recv_n, prog[i].got) >= 0) events |= POLLIN;
      polls[i] = pollfd{events != 0 ? t.socket->fd() : -1, events, 0};
      if (events != 0) ++active;
    }
    if (active == 0) return;
    const int rc = ::poll(polls.data(), count, wait_ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw CommError(std::string("tcp: poll: ") + errno_text(errno));
    }
    if (rc == 0) {
      for (size_t i = 0; i < count; ++i) {
        if (polls[i].fd >= 0) {
          throw CommError("tcp: no reply from " + transfers[i].peer + " for " +
                          std::to_string(timeout_s) + " s");
        }
      }
    }
    for (size_t i = 0; i < count; ++i) {
      Transfer& t = transfers[i];
      const short re = polls[i].revents;
      if (polls[i].fd < 0 || re == 0) continue;
      if ((re & POLLIN) != 0 || (re & (POLLHUP | POLLERR)) != 0) {
        const int piece = next_piece(t.recv_n, prog[i].got);
        if (piece >= 0) {
          char* at = static_cast<char*>(t.recv[piece]) + prog[i].got[piece];
          const ssize_t k =
              ::recv(t.socket->fd(), at, t.recv_n[piece] - prog[i].got[piece], MSG_DONTWAIT);
          if (k == 0) throw CommError("tcp: " + t.peer + " closed the connection");
          if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            throw CommError("tcp: receiving from " + t.peer + ": " + errno_text(errno));
          }
          if (k > 0) prog[i].got[piece] += static_cast<size_t>(k);
        } else if ((re & (POLLHUP | POLLERR)) != 0) {
          throw CommError("tcp: " + t.peer + " closed the connection");
        }
      }
      if ((re & POLLOUT) != 0) {
        const int piece = next_piece(t.send_n, prog[i].sent);
        if (piece >= 0) {
          const char* at = static_cast<const char*>(t.send[piece]) + prog[i].sent[piece];
          const ssize_t k = ::send(t.socket->fd(), at, t.send_n[piece] - prog[i].sent[piece],
                                   MSG_DONTWAIT | MSG_NOSIGNAL);
          if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            throw CommError("tcp: sending to " + t.peer + ": " + errno_text(errno));
          }
          if (k > 0) prog[i].sent[piece] += static_cast<size_t>(k);
        }
      }
    }
  }
}

}  // namespace baton::tcp
