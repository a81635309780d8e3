#include "ps_bind.h"

#include <arpa/inet.h>
#include <baton/comm/communicator.h>  // CommError
#include <baton/core/error.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace baton::ps_bind {
namespace {

std::string numeric(const sockaddr* a) {
  const socklen_t len = a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  char host[NI_MAXHOST] = "?";
  ::getnameinfo(a, len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST);
  return host;
}

bool same_address(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

bool is_loopback(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  }
  return a->sa_family == AF_INET6 &&
         IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
}

std::string joined(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s.empty() ? "none" : s;
}

void add_once(std::vector<std::string>& list, std::string s) {
  if (std::find(list.begin(), list.end(), s) == list.end()) list.push_back(std::move(s));
}

}  // namespace

const std::string& placed_host(const std::vector<std::string>& bind, int server, int servers,
                               const std::string& what) {
  if (bind.size() != 1 && static_cast<int>(bind.size()) != servers) {
    throw InputError(what + ": " + std::to_string(bind.size()) + " addresses for " +
                     std::to_string(servers) +
                     " server(s) (strategy.num_ps); expected one for every server, in server "
                     "order, or one for all");
  }
  return bind.size() == 1 ? bind.front() : bind[static_cast<size_t>(server)];
}

std::string local_address(const std::string& placed, const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(placed.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    throw InputError(what + ": the job places this server on \"" + placed +
                     "\", which does not resolve here (" + ::gai_strerror(rc) +
                     "); expected the host name or address its other hosts reach it by");
  }
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> hold_found(found, ::freeaddrinfo);
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) {
    throw CommError(std::string("getifaddrs: ") + std::strerror(errno));
  }
  const std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> hold_ifs(ifs, ::freeifaddrs);
  const auto is_mine = [&](const sockaddr* a) {
    // All of 127/8 is this host's (Linux routes it to lo: 127.0.1.1 for a
    // host name, 127.0.0.2 for a test's second "host").
    if (a->sa_family == AF_INET && is_loopback(a)) return true;
    for (const ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr != nullptr && same_address(i->ifa_addr, a)) return true;
    }
    return false;
  };
  std::vector<std::string> resolved;
  std::string chosen;
  bool chosen_loopback = false;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    std::string text = numeric(ai->ai_addr);
    add_once(resolved, text);
    if (!is_mine(ai->ai_addr)) continue;
    const bool loopback = is_loopback(ai->ai_addr);
    if (chosen.empty() || (chosen_loopback && !loopback)) {
      chosen = std::move(text);
      chosen_loopback = loopback;
    }
  }
  if (!chosen.empty()) return chosen;
  std::vector<std::string> mine;
  for (const ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6) {
      add_once(mine, numeric(i->ifa_addr));
    }
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  throw InputError(what + ": the job places this server on \"" + placed + "\" (" +
                   joined(resolved) + "), which is not an address of the host it runs on (" + host +
                   ": " + joined(mine) +
                   "); not listening anywhere else: the hostfile or TF_CONFIG must name each "
                   "host as the others reach it");
}

}  // namespace baton::ps_bind
