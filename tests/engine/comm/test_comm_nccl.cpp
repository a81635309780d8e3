// The nccl communicator. Two halves:
//  - NcclLoad: runs everywhere. Loading baton_cuda.so and resolving every
//    baton_nccl_* function (builds with CUDA and NCCL), the errors for a
//    missing or foreign library, the message when there is no driver or GPU,
//    and the refusal of the hierarchical algorithm.
//  - NcclGpu: every collective and algorithm on 1..4 GPUs of this process
//    (ncclCommInitAll, one thread per GPU), and the ncclCommInitRank path
//    over a thread bootstrap, checked against closed forms on the host.
//    Skipped, with the reason, without the library or a GPU; sizes above
//    the number of GPUs are skipped (NCCL runs one rank per GPU).
// Run twice: against baton_cuda.so (real GPUs, on the device check), and,
// as test_comm_nccl_emu.*, against the library BATON_TEST_NCCL_LIBRARY
// names, baton_cuda_emu.so, whose NCCL is the emulator's stand-in over 4
// emulated GPUs (in CI); the largest counts are smaller there (the
// emulator runs every GPU thread).
#include <baton/comm/local.h>
#include <baton/comm/nccl.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "comm_test_util.h"
#include "nccl_abi.h"  // engine/cuda: the library's C interface

namespace baton {
namespace {

// The emulator's library when BATON_TEST_NCCL_LIBRARY names it (with 4
// emulated GPUs unless BATON_SIMT_DEVICES says otherwise), else this
// build's baton_cuda.so.
const char* const kEmulatorLibrary = std::getenv("BATON_TEST_NCCL_LIBRARY");
const bool kEmulated = [] {
  if (kEmulatorLibrary == nullptr || *kEmulatorLibrary == '\0') return false;
  setenv("BATON_SIMT_DEVICES", "4", 0);
  return true;
}();
const std::string kLibrary = kEmulated ? kEmulatorLibrary : BATON_CUDA_LIBRARY;

// The largest count the collectives are checked at: several ring segments.
const int64_t kLargeCount = kEmulated ? 20003 : 1000003;

// The library, or a skip reason.
std::shared_ptr<NcclLibrary> load_or_reason(std::string& why) {
  if (kLibrary.empty()) {
    why = "built without CUDA (BATON_WITH_CUDA=OFF)";
    return nullptr;
  }
  if (!kEmulated && !BATON_TEST_HAS_NCCL) {
    why = "baton_cuda was built without NCCL (not found at configure time)";
    return nullptr;
  }
  return NcclLibrary::load(kLibrary);
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// ------------------------------------------------------------ everywhere

TEST(NcclLoad, BuildReasonMatchesTheBuild) {
  if (kEmulated) GTEST_SKIP() << "about baton_cuda.so's build; this run is the emulator's";
  const std::string why = nccl_build_unavailable_reason();
  if (kLibrary.empty()) {
    EXPECT_NE(why.find("this build has no CUDA"), std::string::npos) << why;
  } else if (BATON_TEST_HAS_NCCL) {
    EXPECT_EQ(why, "");
  } else {
    EXPECT_NE(why.find("no NCCL"), std::string::npos) << why;
  }
}

TEST(NcclLoad, MissingLibraryIsARuntimeErrorNamingThePath) {
  const std::string path = "/nonexistent/lib/baton/baton_cuda.so";
  EXPECT_THROW(NcclLibrary::load(path), RuntimeError);
  const std::string what = error_of([&] { NcclLibrary::load(path); });
  EXPECT_NE(what.find(path), std::string::npos) << what;
  EXPECT_NE(what.find("does not exist"), std::string::npos) << what;
}

TEST(NcclLoad, ALibraryWithoutTheFunctionsIsRefused) {
  // A real shared object that is not the CUDA backend: the mlp plugin.
  const std::string path = std::string(BATON_PLUGIN_DIR) + "/mlp.so";
  EXPECT_THROW(NcclLibrary::load(path), RuntimeError);
  const std::string what = error_of([&] { NcclLibrary::load(path); });
  EXPECT_NE(what.find("lacks baton_nccl_abi_version"), std::string::npos) << what;
}

TEST(NcclLoad, ResolvesEveryFunction) {
  std::string why;
  std::shared_ptr<NcclLibrary> lib;
  ASSERT_NO_THROW(lib = load_or_reason(why));
  if (lib == nullptr) GTEST_SKIP() << why;
  EXPECT_EQ(lib->path(), kLibrary);
  // ncclGetVersion needs no GPU.
  EXPECT_EQ(lib->nccl_version().rfind("2.", 0), 0u) << lib->nccl_version();
  std::printf("NCCL %s from %s\n", lib->nccl_version().c_str(), kLibrary.c_str());
}

TEST(NcclLoad, HierarchicalIsRefusedBeforeAnyGpuIsNeeded) {
  std::string why;
  auto lib = load_or_reason(why);
  if (lib == nullptr) GTEST_SKIP() << why;
  CommOptions o;
  o.algorithm = CommAlgorithm::kHierarchical;
  EXPECT_THROW(NcclGroup(lib, 1, o), InputError);
  EXPECT_NE(error_of([&] { NcclGroup(lib, 1, o); }).find("use native or ring"), std::string::npos);
}

TEST(NcclLoad, NoDriverOrGpuIsAClearRuntimeErrorOnEveryRank) {
  std::string why;
  auto lib = load_or_reason(why);
  if (lib == nullptr) GTEST_SKIP() << why;
  if (lib->device_count() > 0) GTEST_SKIP() << "a GPU is visible: the no-GPU message cannot show";
  const std::string what = error_of([&] { lib->require_devices(); });
  EXPECT_NE(what.find("no NVIDIA GPU/driver found"), std::string::npos) << what;
  EXPECT_THROW(NcclGroup(lib, 1), RuntimeError);
  EXPECT_NE(error_of([&] { NcclGroup(lib, 2); }).find("no NVIDIA GPU/driver found"),
            std::string::npos);
  // Over a bootstrap communicator every rank throws (none waits in NCCL for
  // the others).
  CommOptions bo;
  bo.timeout_ms = 20000;
  LocalGroup boot(2, bo);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back(
        [&, r] { errors[r] = error_of([&] { NcclCommunicator c(lib, boot.rank(r), r); }); });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("no NVIDIA GPU/driver found"), std::string::npos) << errors[r];
  }
}

// ------------------------------------------------------------ on GPUs

// The library and the number of GPUs, or a skip.
struct Gpus {
  std::shared_ptr<NcclLibrary> lib;
  int count = 0;
  std::string why;
};

Gpus find_gpus() {
  Gpus g;
  g.lib = load_or_reason(g.why);
  if (g.lib != nullptr) {
    g.count = g.lib->device_count(&g.why);
    if (g.count > 0) std::printf("NCCL %s, %d GPU(s)\n", g.lib->nccl_version().c_str(), g.count);
  }
  return g;
}

const Gpus& gpus() {
  static const Gpus g = find_gpus();
  return g;
}

#define REQUIRE_GPUS(n)                                                                         \
  do {                                                                                          \
    if (gpus().lib == nullptr || gpus().count == 0) GTEST_SKIP() << gpus().why;                 \
    if (gpus().count < (n)) {                                                                   \
      GTEST_SKIP() << "needs " << (n) << " GPUs (NCCL runs one rank per GPU), " << gpus().count \
                   << " visible";                                                               \
    }                                                                                           \
  } while (0)

// One thread per rank (comm_test_util.h).
void on_ranks(NcclGroup& g, const std::function<void(NcclCommunicator&)>& fn) {
  baton::on_ranks<NcclGroup, NcclCommunicator>(g, fn);
}

class NcclGpu : public ::testing::TestWithParam<std::tuple<int, CommAlgorithm>> {};

TEST_P(NcclGpu, AllreduceSumMeanMaxMin) {
  const auto [n, algo] = GetParam();
  REQUIRE_GPUS(n);
  CommOptions o;
  o.algorithm = algo;
  o.segment_bytes = 8000;  // several ring segments for the large count
  o.timeout_ms = 60000;
  NcclGroup g(gpus().lib, n, o);
  for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, kLargeCount}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
      std::vector<std::vector<float>> got(n);
      on_ranks(g, [&](NcclCommunicator& c) {
        std::vector<float> h(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i) h[i] = value(c.rank(), i);
        DeviceBuffer d = c.alloc(count);
        c.copy_to_device(d.data(), h.data(), count);
        c.allreduce(d.data(), count, op);
        got[c.rank()].resize(static_cast<size_t>(count));
        c.copy_to_host(got[c.rank()].data(), d.data(), count);
      });
      for (int r = 0; r < n; ++r) {
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < count; ++i) {
          const float base = static_cast<float>(i % 64) * 0.5f;
          double want = base;
          if (op == ReduceOp::kSum) want = n * base + n * (n - 1) / 2.0;
          if (op == ReduceOp::kMean) want = base + (n - 1) / 2.0;
          if (op == ReduceOp::kMax) want = base + (n - 1);
          if (std::fabs(got[r][i] - want) > 1e-5 * std::fabs(want) + 1e-6) {
            if (first < 0) first = i;
            ++bad;
          }
        }
        EXPECT_EQ(bad, 0) << "n=" << n << " count=" << count << " op " << static_cast<int>(op)
                          << " rank " << r << ": first wrong at " << first;
      }
    }
  }
}

TEST_P(NcclGpu, ReduceScatterAllgatherBroadcastSendRecv) {
  const auto [n, algo] = GetParam();
  REQUIRE_GPUS(n);
  CommOptions o;
  o.algorithm = algo;
  o.timeout_ms = 60000;
  NcclGroup g(gpus().lib, n, o);
  for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{13}, int64_t{65537}}) {
    std::vector<std::string> failures(n);
    on_ranks(g, [&](NcclCommunicator& c) {
      const int r = c.rank();
      auto fail = [&](const std::string& what) {
        if (failures[r].empty()) failures[r] = what;
      };
      std::vector<float> in(n * count);
      for (int64_t i = 0; i < n * count; ++i) in[i] = value(r, i);
      DeviceBuffer din = c.alloc(n * count), dout = c.alloc(count), dall = c.alloc(n * count);
      std::vector<float> out(count), all(n * count);
      c.copy_to_device(din.data(), in.data(), n * count);
      c.reduce_scatter(din.data(), dout.data(), count, ReduceOp::kSum);
      c.copy_to_host(out.data(), dout.data(), count);
      for (int64_t i = 0; i < count; ++i) {
        const float base = static_cast<float>((r * count + i) % 64) * 0.5f;
        if (out[i] != n * base + n * (n - 1) / 2.0f) fail("reduce_scatter at " + std::to_string(i));
      }
      std::vector<float> mine(count, static_cast<float>(r) + 0.25f);
      c.copy_to_device(dout.data(), mine.data(), count);
      c.allgather(dout.data(), dall.data(), count);
      c.copy_to_host(all.data(), dall.data(), n * count);
      for (int q = 0; q < n; ++q) {
        for (int64_t i = 0; i < count; ++i) {
          if (all[q * count + i] != q + 0.25f) fail("allgather block " + std::to_string(q));
        }
      }
      for (int root = 0; root < n; ++root) {
        std::vector<float> b(count, r == root ? 42.0f + root : -1.0f);
        c.copy_to_device(dout.data(), b.data(), count);
        c.broadcast(dout.data(), count, root);
        c.copy_to_host(b.data(), dout.data(), count);
        for (float v : b) {
          if (v != 42.0f + root) fail("broadcast from " + std::to_string(root));
        }
      }
      // A ring of sendrecv, then a send/recv pair.
      std::vector<float> send(count, static_cast<float>(r)), recv(count, -1.0f);
      c.copy_to_device(din.data(), send.data(), count);
      c.sendrecv(din.data(), count, (r + 1) % n, dout.data(), count, (r + n - 1) % n);
      c.copy_to_host(recv.data(), dout.data(), count);
      for (float v : recv) {
        if (v != static_cast<float>((r + n - 1) % n)) fail("sendrecv");
      }
      if (n > 1 && r == 0) c.send(din.data(), count, 1);
      if (n > 1 && r == 1) {
        c.recv(dout.data(), count, 0);
        c.copy_to_host(recv.data(), dout.data(), count);
        for (float v : recv) {
          if (v != 0.0f) fail("send/recv");
        }
      }
      c.barrier();
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(failures[r], "") << "n=" << n << " count=" << count << " rank " << r;
    }
  }
}

TEST_P(NcclGpu, LinkStatsAreRecorded) {
  const auto [n, algo] = GetParam();
  REQUIRE_GPUS(n);
  if (n == 1) GTEST_SKIP() << "one rank moves no data";
  CommOptions o;
  o.algorithm = algo;
  NcclGroup g(gpus().lib, n, o);
  on_ranks(g, [&](NcclCommunicator& c) {
    DeviceBuffer d = c.alloc(1000);
    std::vector<float> h(1000, 1.0f);
    c.copy_to_device(d.data(), h.data(), 1000);
    c.allreduce(d.data(), 1000, ReduceOp::kSum);
  });
  for (int r = 0; r < n; ++r) {
    auto links = g.rank(r).links().drain();
    ASSERT_FALSE(links.empty()) << "rank " << r;
    int64_t bytes = 0;
    for (const auto& l : links) {
      EXPECT_EQ(l.src, r);
      EXPECT_EQ(l.dst, (r + 1) % n);
      EXPECT_EQ(l.estimated, algo != CommAlgorithm::kRing);
      bytes += l.num_bytes;
    }
    EXPECT_NEAR(static_cast<double>(bytes), 2.0 * (n - 1) / n * 4000, 8.0 * n);
  }
}

INSTANTIATE_TEST_SUITE_P(Gpus, NcclGpu,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(CommAlgorithm::kNative,
                                                              CommAlgorithm::kRing)),
                         [](const auto& info) {  // "2gpus_ring"
                           return std::to_string(std::get<0>(info.param)) + "gpus_" +
                                  comm_algorithm_name(std::get<1>(info.param));
                         });

// ncclCommInitRank with the unique id sent over a bootstrap communicator
// (threads here; MPI ranks in tests/mpi/test_comm_nccl_mpi.cpp), on every
// GPU of this machine.
TEST(NcclGpuInitRank, OverAThreadBootstrap) {
  REQUIRE_GPUS(1);
  const int n = gpus().count;
  LocalGroup boot(n, CommOptions{});
  std::vector<std::vector<float>> got(n);
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        NcclCommunicator c(gpus().lib, boot.rank(r), r);
        EXPECT_EQ(c.rank(), r);
        EXPECT_EQ(c.size(), n);
        EXPECT_EQ(c.describe(), "nccl/native");
        const int64_t count = 100003;
        std::vector<float> h(count);
        for (int64_t i = 0; i < count; ++i) h[i] = value(r, i);
        DeviceBuffer d = c.alloc(count);
        c.copy_to_device(d.data(), h.data(), count);
        c.allreduce(d.data(), count, ReduceOp::kSum);
        got[r].resize(count);
        c.copy_to_host(got[r].data(), d.data(), count);
      } catch (...) {
        errors[r] = std::current_exception();
        boot.abort();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < static_cast<int64_t>(got[r].size()); ++i) {
      const float base = static_cast<float>(i % 64) * 0.5f;
      ASSERT_EQ(got[r][i], n * base + n * (n - 1) / 2.0f) << "rank " << r << " i " << i;
    }
  }
}

// The device kernels the ring algorithm uses, called through the C
// interface on one GPU (the ring itself needs two GPUs to run at all).
TEST(NcclGpuKernels, ReduceIntoAndScale) {
  REQUIRE_GPUS(1);
  void* so = dlopen(kLibrary.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(so, nullptr) << dlerror();
  auto sym = [&](const char* name) { return dlsym(so, name); };
  auto init_all = reinterpret_cast<decltype(&baton_nccl_init_all)>(sym("baton_nccl_init_all"));
  auto destroy = reinterpret_cast<decltype(&baton_nccl_destroy)>(sym("baton_nccl_destroy"));
  auto reduce_into =
      reinterpret_cast<decltype(&baton_nccl_reduce_into)>(sym("baton_nccl_reduce_into"));
  auto scale = reinterpret_cast<decltype(&baton_nccl_scale)>(sym("baton_nccl_scale"));
  auto sync = reinterpret_cast<decltype(&baton_nccl_synchronize)>(sym("baton_nccl_synchronize"));
  auto memcpy_ = reinterpret_cast<decltype(&baton_nccl_memcpy)>(sym("baton_nccl_memcpy"));
  auto last_error =
      reinterpret_cast<decltype(&baton_nccl_last_error)>(sym("baton_nccl_last_error"));
  BatonNcclComm* comm = nullptr;
  const int device = 0;
  ASSERT_EQ(init_all(&comm, 1, &device), BATON_NCCL_OK) << last_error();
  for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, kLargeCount}) {
    for (int op = 1; op <= 4; ++op) {
      std::vector<float> y(count), x(count), got(count);
      for (int64_t i = 0; i < count; ++i) {
        y[i] = value(0, i);
        x[i] = value(0, (i * 7) % 64);  // differs from y: max and min both pick
      }
      DeviceBuffer dy(gpus().lib, device, count), dx(gpus().lib, device, count);
      ASSERT_EQ(memcpy_(comm, dy.data(), y.data(), count * 4), BATON_NCCL_OK) << last_error();
      ASSERT_EQ(memcpy_(comm, dx.data(), x.data(), count * 4), BATON_NCCL_OK) << last_error();
      ASSERT_EQ(reduce_into(comm, dy.data(), dx.data(), count, op, nullptr), BATON_NCCL_OK);
      ASSERT_EQ(scale(comm, dy.data(), count, 0.5f, nullptr), BATON_NCCL_OK);
      ASSERT_EQ(sync(comm, nullptr, 10000, nullptr), BATON_NCCL_OK) << last_error();
      ASSERT_EQ(memcpy_(comm, got.data(), dy.data(), count * 4), BATON_NCCL_OK) << last_error();
      for (int64_t i = 0; i < count; ++i) {
        // Sum and mean add (the ring scales a mean once, at the end).
        const float r = op == 3   ? std::max(y[i], x[i])
                        : op == 4 ? std::min(y[i], x[i])
                                  : y[i] + x[i];
        ASSERT_EQ(got[i], r * 0.5f) << "op " << op << " count " << count << " i " << i;
      }
    }
  }
  EXPECT_EQ(reduce_into(comm, nullptr, nullptr, 1, 9, nullptr), BATON_NCCL_BAD_ARGUMENT);
  EXPECT_EQ(destroy(comm), BATON_NCCL_OK);
}

TEST(NcclGpuErrors, BadArgumentsAreCommErrors) {
  REQUIRE_GPUS(1);
  NcclGroup g(gpus().lib, 1);
  NcclCommunicator& c = g.rank(0);
  EXPECT_THROW(c.allreduce(nullptr, -1, ReduceOp::kSum), CommError);
  EXPECT_THROW(c.broadcast(nullptr, 1, 1), CommError);
  EXPECT_THROW(c.send(nullptr, 1, 5), CommError);
  EXPECT_THROW(c.allreduce(nullptr, 1, ReduceOp::kUnset), CommError);
  EXPECT_THROW(NcclGroup(gpus().lib, gpus().count + 1), RuntimeError);
}

TEST(NcclGpuErrors, AMissingPeerTimesOutAndAborts) {
  REQUIRE_GPUS(2);
  CommOptions o;
  o.timeout_ms = 300;
  NcclGroup g(gpus().lib, 2, o);
  DeviceBuffer d = g.rank(0).alloc(16);
  // Both ranks once first: NCCL connects peers on their first collective,
  // inside the call, where no timeout could end the wait.
  on_ranks(g, [&](NcclCommunicator& c) {
    DeviceBuffer w = c.alloc(16);
    c.allreduce(w.data(), 16, ReduceOp::kSum);
  });
  // Rank 1 never joins.
  const std::string what = error_of([&] { g.rank(0).allreduce(d.data(), 16, ReduceOp::kSum); });
  EXPECT_NE(what.find("timed out"), std::string::npos) << what;
  EXPECT_THROW(g.rank(0).allreduce(d.data(), 16, ReduceOp::kSum), CommError);  // aborted
  g.abort();  // rank 1 leaves NCCL too before the group is destroyed
  EXPECT_THROW(g.rank(1).barrier(), CommError);
}

// Communicators by rank are non-blocking (ncclCommInitRankConfig,
// blocking = 0) and their joining is polled: a rank whose peer never joins
// times out, or is cancelled, instead of waiting in NCCL for ever; no
// handle is left.
TEST(NcclGpuErrors, AMissingPeerAtInitTimesOutOrIsCancelled) {
  REQUIRE_GPUS(1);
  void* so = dlopen(kLibrary.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(so, nullptr) << dlerror();
  auto sym = [&](const char* name) { return dlsym(so, name); };
  auto unique_id =
      reinterpret_cast<decltype(&baton_nccl_get_unique_id)>(sym("baton_nccl_get_unique_id"));
  auto init_rank = reinterpret_cast<decltype(&baton_nccl_init_rank)>(sym("baton_nccl_init_rank"));
  auto last_error =
      reinterpret_cast<decltype(&baton_nccl_last_error)>(sym("baton_nccl_last_error"));
  char id[BATON_NCCL_UNIQUE_ID_BYTES];
  ASSERT_EQ(unique_id(id, sizeof id), BATON_NCCL_OK) << last_error();
  BatonNcclComm* comm = nullptr;
  // Rank 0 of 2; rank 1 never comes.
  EXPECT_EQ(init_rank(&comm, 2, id, sizeof id, 0, 0, 300, nullptr), BATON_NCCL_TIMEOUT);
  EXPECT_EQ(comm, nullptr);
  const std::string timed_out = last_error();
  EXPECT_NE(timed_out.find("timed out"), std::string::npos) << timed_out;
  EXPECT_NE(timed_out.find("join"), std::string::npos) << timed_out;
  ASSERT_EQ(unique_id(id, sizeof id), BATON_NCCL_OK) << last_error();
  const int cancel = 1;
  EXPECT_EQ(init_rank(&comm, 2, id, sizeof id, 0, 0, 0, &cancel), BATON_NCCL_CANCELLED);
  EXPECT_EQ(comm, nullptr);
}

TEST(NcclGpuErrors, AbortWakesAWaitingRank) {
  REQUIRE_GPUS(2);
  CommOptions o;
  o.timeout_ms = 60000;
  NcclGroup g(gpus().lib, 2, o);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(on_ranks(g,
                        [&](NcclCommunicator& c) {
                          DeviceBuffer w = c.alloc(16);  // connect first (as above)
                          c.allreduce(w.data(), 16, ReduceOp::kSum);
                          if (c.rank() == 1) {
                            std::this_thread::sleep_for(std::chrono::milliseconds(200));
                            throw RuntimeError("replica 1 failed");
                          }
                          DeviceBuffer d = c.alloc(16);
                          c.allreduce(d.data(), 16, ReduceOp::kSum);
                        }),
               RuntimeError);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
}

}  // namespace
}  // namespace baton
