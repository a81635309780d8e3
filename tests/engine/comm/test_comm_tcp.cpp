// The TCP helpers the asynchronous parameter servers use (comm/tcp.h):
// exchange() moves more than the socket buffers hold both ways at once
// without the two ends waiting on each other, a peer that goes away is a
// CommError naming it, and a malformed address is an InputError naming
// the option.
#include <baton/comm/communicator.h>
#include <baton/comm/tcp.h>
#include <baton/core/error.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace baton {
namespace {

// 4 MiB each way: far more than a socket buffer, so blocking sends on
// both ends would deadlock.
constexpr size_t kFloats = size_t{1} << 20;

TEST(Tcp, ExchangeMovesLargeMessagesBothWaysAtOnce) {
  int port = 0;
  tcp::Socket listener = tcp::listen_any(&port);
  ASSERT_GT(port, 0);
  std::vector<float> a_out(kFloats), b_out(kFloats), a_in(kFloats, -1), b_in(kFloats, -1);
  std::iota(a_out.begin(), a_out.end(), 0.0f);
  std::iota(b_out.begin(), b_out.end(), 7.0f);
  const auto run = [](const tcp::Socket& s, std::vector<float>& out, std::vector<float>& in) {
    std::vector<tcp::Transfer> t(1);
    t[0].socket = &s;
    t[0].peer = "peer";
    t[0].send[0] = out.data();
    t[0].send_n[0] = out.size() * sizeof(float);
    t[0].recv[0] = in.data();
    t[0].recv_n[0] = in.size() * sizeof(float);
    std::vector<pollfd> polls;
    tcp::exchange(t, polls, 30.0);
  };
  std::thread other([&] {
    const tcp::Socket b = tcp::accept_one(listener);
    run(b, b_out, b_in);
  });
  const tcp::Socket a = tcp::connect_to("127.0.0.1", port, 10.0);
  run(a, a_out, a_in);
  other.join();
  EXPECT_EQ(a_in, b_out);
  EXPECT_EQ(b_in, a_out);
}

TEST(Tcp, APeerThatClosesIsAnErrorNamingIt) {
  int port = 0;
  tcp::Socket listener = tcp::listen_any(&port);
  std::thread other([&] {
    tcp::Socket b = tcp::accept_one(listener);
    b.close();  // a worker killed mid-exchange
  });
  const tcp::Socket a = tcp::connect_to("127.0.0.1", port, 10.0);
  other.join();
  float in[4] = {};
  std::vector<tcp::Transfer> t(1);
  t[0].socket = &a;
  t[0].peer = "server 127.0.0.1:" + std::to_string(port);
  t[0].recv[0] = in;
  t[0].recv_n[0] = sizeof(in);
  std::vector<pollfd> polls;
  try {
    tcp::exchange(t, polls, 10.0);
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find(t[0].peer), std::string::npos) << e.what();
  }
  // recv_all says a clean close before a message as false, not an error.
  int port2 = 0;
  tcp::Socket l2 = tcp::listen_any(&port2);
  std::thread closer([&] { tcp::accept_one(l2).close(); });
  const tcp::Socket c = tcp::connect_to("127.0.0.1", port2, 10.0);
  closer.join();
  EXPECT_FALSE(tcp::recv_all(c, in, sizeof(in), "x"));
}

TEST(Tcp, ASilentPeerTimesOut) {
  int port = 0;
  tcp::Socket listener = tcp::listen_any(&port);
  const tcp::Socket a = tcp::connect_to("127.0.0.1", port, 10.0);
  const tcp::Socket b = tcp::accept_one(listener);  // accepted, never answers
  float in[1] = {};
  std::vector<tcp::Transfer> t(1);
  t[0].socket = &a;
  t[0].peer = "the silent one";
  t[0].recv[0] = in;
  t[0].recv_n[0] = sizeof(in);
  std::vector<pollfd> polls;
  EXPECT_THROW(tcp::exchange(t, polls, 0.2), CommError);
}

TEST(Tcp, AddressesAreHostColonPort) {
  std::string host;
  int port = 0;
  tcp::split_address("node7:4100", &host, &port, "--ps-servers");
  EXPECT_EQ(host, "node7");
  EXPECT_EQ(port, 4100);
  tcp::split_address("[::1]:80", &host, &port, "--ps-servers");
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 80);
  for (const char* bad : {"node7", "node7:", ":80", "node7:http", "node7:70000", "node7:0"}) {
    try {
      tcp::split_address(bad, &host, &port, "--ps-servers");
      ADD_FAILURE() << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--ps-servers"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(Tcp, ConnectingWhereNobodyListensFailsAfterTheTimeout) {
  int port = 0;
  {
    tcp::Socket gone = tcp::listen_any(&port);  // a port that was just free
  }
  EXPECT_THROW(tcp::connect_to("127.0.0.1", port, 0.3), CommError);
}

}  // namespace
}  // namespace baton
