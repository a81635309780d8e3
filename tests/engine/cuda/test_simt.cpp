// The GPU emulator's own tests: kernels written here in CUDA (through
// kernel_language.cuh, as the backend's are) run on the SIMT runtime.
// What a GPU does, the emulator does (barriers, shared memory, warp
// shuffles, streams and events); what a GPU refuses or a sanitizer
// reports, the emulator refuses or reports; what faults on a GPU (a host
// read of device memory, a kernel past its buffer) faults here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "kernel_language.cuh"
#include "launch.cuh"

namespace {

using baton::gpu::launch;

__global__ void block_sum(const float* x, float* out, int n) {
  __shared__ float partial[256];
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < static_cast<unsigned>(half))
      partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

__global__ void warp_sums(const int* x, int* out, unsigned* ballots) {
  const int lane = threadIdx.x % 32;
  int v = x[blockIdx.x * blockDim.x + threadIdx.x];
  const unsigned odd = __ballot_sync(0xffffffffu, v % 2 != 0);
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (lane == 0) {
    out[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = v;
    ballots[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = odd;
  }
}

__global__ void dynamic_reverse(const float* x, float* y, int n) {
  BATON_DYNAMIC_SHARED(float, tile);
  const int i = threadIdx.x;
  if (i < n) tile[i] = x[i];
  __syncthreads();
  if (i < n) y[i] = tile[n - 1 - i];
}

__global__ void barrier_after_exit(float* y) {
  if (threadIdx.x < 16) return;
  __syncthreads();
  y[threadIdx.x] = 1.0f;
}

__global__ void two_barriers(float* y) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  y[threadIdx.x] = 1.0f;
}

__global__ void shuffle_with_exited_lane(float* y) {
  if (threadIdx.x == 5) return;
  y[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 1);
}

// A half-warp's shuffle, then the whole warp's: lanes meet by mask.
__global__ void divergent_then_converged(int* out) {
  const int lane = threadIdx.x % 32;
  int v = lane;
  if (lane < 16) v += __shfl_xor_sync(0x0000ffffu, v, 8);
  v = __shfl_sync(0xffffffffu, v, 0);
  out[threadIdx.x] = v;
}

// Lanes naming masks that never meet.
__global__ void crossed_masks(int* out) {
  const int lane = threadIdx.x % 32;
  const unsigned mask = lane == 0 ? 0x3u : 0xffffffffu;
  out[threadIdx.x] = __shfl_sync(mask, lane, 0);
}

__global__ void write_past(float* y, int n) { y[n + threadIdx.x] = 1.0f; }

__global__ void fill_slowly(float* y, int n, float v) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = v;
}

__global__ void copy_kernel(const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = x[i];
}

// wmma: c = a b + c for one 16 x 16 x 16 tile (a row-major with ld lda, b
// row- or column-major with ld 16, c row-major), then every element of
// the result fragment doubled (an elementwise op on x[], layout-free).
namespace wmma = nvcuda::wmma;
template <class LayoutB>
__global__ void wmma_tile(const __nv_bfloat16* a, int lda, const __nv_bfloat16* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(fa, a, lda);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::load_matrix_sync(acc, c, 16, wmma::mem_row_major);
  wmma::mma_sync(acc, fa, fb, acc);
  for (int i = 0; i < acc.num_elements; ++i) acc.x[i] *= 2.0f;
  wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}

// Half the warp reaches a warp-collective call.
__global__ void wmma_in_divergent_code(float* c) {
  if (threadIdx.x % 32 >= 16) return;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 1.0f);
  wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}

// A pointer 8 bytes off the 256-bit alignment load_matrix_sync requires.
__global__ void wmma_misaligned(const __nv_bfloat16* a) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a + 4, 16);
}

std::string diagnostic() {
  char buf[1024];
  baton_simt_last_diagnostic(buf, sizeof buf);
  return buf;
}

class Simt : public ::testing::Test {
 protected:
  void TearDown() override {
    cudaDeviceReset();
    baton_simt_set_random_delays(0, 1);
  }
  template <class T>
  T* upload(const std::vector<T>& h) {
    T* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, h.size() * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    return d;
  }
  template <class T>
  std::vector<T> download(const T* d, size_t n) {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

TEST_F(Simt, BarriersAndSharedMemoryReduceABlock) {
  std::vector<float> x(1000);
  std::iota(x.begin(), x.end(), 1.0f);
  float* dx = upload(x);
  float* dout = upload(std::vector<float>(3, 0.0f));
  ASSERT_EQ(launch(block_sum, dim3(3), dim3(256), 0, nullptr, dx, dout, 1000), cudaSuccess);
  const auto out = download(dout, 3);
  for (float v : out) EXPECT_EQ(v, 500500.0f);  // every block sums all of x
  cudaFree(dx);
  cudaFree(dout);
}

TEST_F(Simt, WarpShufflesAndBallotsSeeTheirLanes) {
  std::vector<int> x(128);
  std::iota(x.begin(), x.end(), 0);
  int* dx = upload(x);
  int* dout = upload(std::vector<int>(4, 0));
  unsigned* dballots = upload(std::vector<unsigned>(4, 0));
  ASSERT_EQ(launch(warp_sums, dim3(2), dim3(64), 0, nullptr, dx, dout, dballots), cudaSuccess);
  const auto out = download(dout, 4);
  const auto ballots = download(dballots, 4);
  for (int w = 0; w < 4; ++w) {
    EXPECT_EQ(out[w], 32 * 32 * w + 31 * 32 / 2) << "warp " << w;
    EXPECT_EQ(ballots[w], 0xaaaaaaaau) << "warp " << w;  // the odd lanes
  }
}

TEST_F(Simt, DynamicSharedMemoryIsPerLaunchAndBoundedByTheOptIn) {
  const int n = 200;
  std::vector<float> x(n);
  std::iota(x.begin(), x.end(), 0.0f);
  float* dx = upload(x);
  float* dy = upload(std::vector<float>(n, 0.0f));
  ASSERT_EQ(launch(dynamic_reverse, dim3(1), dim3(256), n * sizeof(float), nullptr, dx, dy, n),
            cudaSuccess);
  const auto y = download(dy, n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], x[n - 1 - i]);
  // More than 48 KiB needs the kernel's opt-in, as on a GPU.
  EXPECT_EQ(launch(dynamic_reverse, dim3(1), dim3(32), 64 * 1024, nullptr, dx, dy, 32),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(
      cudaFuncSetAttribute(dynamic_reverse, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024),
      cudaSuccess);
  EXPECT_EQ(launch(dynamic_reverse, dim3(1), dim3(32), 64 * 1024, nullptr, dx, dy, 32),
            cudaSuccess);
  EXPECT_EQ(cudaFuncSetAttribute(dynamic_reverse, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 300 * 1024),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(Simt, LaunchesAGpuRefusesAreRefused) {
  float* dy = upload(std::vector<float>(32, 0.0f));
  EXPECT_EQ(launch(fill_slowly, dim3(1), dim3(1025), 0, nullptr, dy, 32, 1.0f),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(launch(fill_slowly, dim3(1), dim3(32, 32, 2), 0, nullptr, dy, 32, 1.0f),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(launch(fill_slowly, dim3(1), dim3(1, 1, 65), 0, nullptr, dy, 32, 1.0f),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(launch(fill_slowly, dim3(1, 65536), dim3(32), 0, nullptr, dy, 32, 1.0f),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(launch(fill_slowly, dim3(0), dim3(32), 0, nullptr, dy, 32, 1.0f),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not sticky: the device is fine
  EXPECT_EQ(launch(fill_slowly, dim3(1), dim3(1024), 0, nullptr, dy, 32, 1.0f), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(Simt, ABarrierThatExitedThreadsNeverReachIsReported) {
  float* dy = upload(std::vector<float>(64, 0.0f));
  ASSERT_EQ(launch(barrier_after_exit, dim3(1), dim3(64), 0, nullptr, dy), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  const std::string d = diagnostic();
  EXPECT_NE(d.find("test_simt.cpp:"), std::string::npos) << d;  // where the barrier is
  EXPECT_NE(d.find("reached by 48 of 64 threads"), std::string::npos) << d;
  // Sticky, as on a GPU, until the device is reset.
  EXPECT_EQ(cudaMemset(dy, 0, 4), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
  EXPECT_EQ(cudaMemset(dy, 0, 4), cudaSuccess);
}

TEST_F(Simt, ThreadsAtDifferentBarriersAreReported) {
  float* dy = upload(std::vector<float>(64, 0.0f));
  ASSERT_EQ(launch(two_barriers, dim3(1), dim3(64), 0, nullptr, dy), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(diagnostic().find("different __syncthreads()"), std::string::npos) << diagnostic();
}

TEST_F(Simt, AShuffleNamingAnExitedLaneIsReported) {
  float* dy = upload(std::vector<float>(32, 0.0f));
  ASSERT_EQ(launch(shuffle_with_exited_lane, dim3(1), dim3(32), 0, nullptr, dy), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(diagnostic().find("lane 5 named in the mask has exited"), std::string::npos)
      << diagnostic();
}

TEST_F(Simt, LanesMeetByMaskInDivergentCode) {
  int* out = upload(std::vector<int>(32, -1));
  ASSERT_EQ(launch(divergent_then_converged, dim3(1), dim3(32), 0, nullptr, out), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << diagnostic();
  for (int v : download(out, 32)) EXPECT_EQ(v, 8);  // lane 0: 0 + lane 8's 8
}

TEST_F(Simt, LanesWhoseMasksNeverMeetAreReported) {
  int* out = upload(std::vector<int>(32, -1));
  ASSERT_EQ(launch(crossed_masks, dim3(1), dim3(32), 0, nullptr, out), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(diagnostic().find("open warp meetings by mask: 0x00000003"), std::string::npos)
      << diagnostic();
}

// A host buffer handed to a kernel (a layer's std::vector where a device
// tensor belongs: the max pool's argmax was one, found on an H200): the
// GPU faults when the kernel runs, so the launch succeeds and the error is
// sticky; pinned host memory is fine.
TEST_F(Simt, AKernelGivenAHostBufferFaults) {
  const int n = 64;
  float* y = upload(std::vector<float>(n, 0.0f));
  std::vector<float> host(n, 1.0f);
  ASSERT_EQ(launch(copy_kernel, dim3(1), dim3(n), 0, nullptr,
                   static_cast<const float*>(host.data()), y, n),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  const std::string d = diagnostic();
  EXPECT_NE(d.find("argument 0"), std::string::npos) << d;
  EXPECT_NE(d.find("neither device memory nor pinned host memory"), std::string::npos) << d;
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);

  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), n * sizeof(float)), cudaSuccess);
  for (int i = 0; i < n; ++i) pinned[i] = 3.0f;
  y = upload(std::vector<float>(n, 0.0f));
  ASSERT_EQ(
      launch(copy_kernel, dim3(1), dim3(n), 0, nullptr, static_cast<const float*>(pinned), y, n),
      cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << diagnostic();
  EXPECT_EQ(download(y, n)[n - 1], 3.0f);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

// A stream and an event destroyed while work that refers to them is still
// queued: CUDA lets the work finish.
TEST_F(Simt, StreamsAndEventsMayGoWhileTheirWorkIsQueued) {
  baton_simt_set_random_delays(2000, 3);
  const int n = 1024;
  float* x = upload(std::vector<float>(n, 0.0f));
  float* y = upload(std::vector<float>(n, 0.0f));
  cudaStream_t a, c;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t filled;
  ASSERT_EQ(cudaEventCreate(&filled), cudaSuccess);
  launch(fill_slowly, dim3(2), dim3(64), 0, a, x, n, 5.0f);
  ASSERT_EQ(cudaEventRecord(filled, a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(c, filled, 0), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(a), cudaSuccess);
  ASSERT_EQ(cudaEventDestroy(filled), cudaSuccess);
  launch(copy_kernel, dim3(2), dim3(64), 0, c, static_cast<const float*>(x), y, n);
  ASSERT_EQ(cudaStreamSynchronize(c), cudaSuccess);
  EXPECT_EQ(download(y, n)[n - 1], 5.0f);
  cudaStreamDestroy(c);
  cudaEvent_t e;
  cudaEventCreate(&e);
  cudaEventRecord(e, nullptr);
  cudaEventSynchronize(e);
  float ms = -1.0f;
  EXPECT_EQ(cudaEventElapsedTime(&ms, e, e), cudaSuccess);  // one event twice: no deadlock
  EXPECT_EQ(ms, 0.0f);
  cudaEventDestroy(e);
}

using SimtDeathTest = Simt;

TEST_F(SimtDeathTest, TheHostReadingDeviceMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float* dy = upload(std::vector<float>(64, 2.0f));
  EXPECT_EQ(download(dy, 1)[0], 2.0f);  // through a copy: fine
  EXPECT_DEATH(
      {
        volatile float v = dy[0];
        (void)v;
      },
      "");
}

// Closed by mprotect (where the CPU has protection keys, asked for with
// BATON_SIMT_PROTECT, read at the first allocation of the death test's
// fresh process), device memory faults on the host's read as well.
TEST_F(SimtDeathTest, TheHostReadingDeviceMemoryClosedByMprotectFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("BATON_SIMT_PROTECT", "mprotect", 1);
  EXPECT_DEATH(
      {
        float* dy = upload(std::vector<float>(64, 2.0f));
        if (baton_simt_protected_by_key() != 0) _exit(0);  // not the way asked for: no death
        if (download(dy, 1)[0] != 2.0f) _exit(0);
        volatile float v = dy[0];
        (void)v;
      },
      "");
  unsetenv("BATON_SIMT_PROTECT");
}

std::atomic<int> g_kernel_state{0};  // 1: the kernel runs; 2: it may end

// Spins (up to 10 s) until the host lets it end: its stream is at work.
__global__ void wait_for_host() {
  g_kernel_state.store(1);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (g_kernel_state.load() != 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
}

// With protection keys a stream's window is its own thread's: the host
// touching device memory while a kernel runs faults too.
TEST_F(SimtDeathTest, TheHostReadingDeviceMemoryWhileAKernelRunsFaults) {
  if (baton_simt_protected_by_key() == 0) {
    GTEST_SKIP() << "no memory protection keys here (CPU or kernel without PKU, or "
                    "BATON_SIMT_PROTECT=mprotect): device memory is open to every thread "
                    "while a stream works";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float* dy = upload(std::vector<float>(64, 2.0f));
  EXPECT_DEATH(
      {
        float* d = upload(std::vector<float>(64, 2.0f));
        launch(wait_for_host, dim3(1), dim3(1), 0, nullptr);
        while (g_kernel_state.load() != 1) std::this_thread::yield();
        volatile float v = d[0];
        (void)v;
        g_kernel_state.store(2);
        cudaDeviceSynchronize();
      },
      "");
  // The same kernel, the host waiting: it ends, and the memory is whole.
  g_kernel_state.store(0);
  launch(wait_for_host, dim3(1), dim3(1), 0, nullptr);
  while (g_kernel_state.load() != 1) std::this_thread::yield();
  g_kernel_state.store(2);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(download(dy, 1)[0], 2.0f);
}

TEST_F(SimtDeathTest, AKernelWritingPastItsBufferFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        float* dy = nullptr;
        cudaMalloc(&dy, 64 * sizeof(float));  // 256 bytes: the guard page follows
        launch(write_past, dim3(1), dim3(32), 0, nullptr, dy, 64);
        cudaDeviceSynchronize();
      },
      "");
}

// Stream B copies what stream A fills. Without an event between them the
// copy may run first; with random delays it does in some of the trials, and
// with the event it never does.
int stale_copies(bool with_event, int trials) {
  const int n = 4096;
  cudaStream_t a, b;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  cudaEvent_t filled;
  cudaEventCreateWithFlags(&filled, cudaEventDisableTiming);
  float *x = nullptr, *y = nullptr;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  int stale = 0;
  for (int t = 0; t < trials; ++t) {
    cudaMemsetAsync(x, 0, n * sizeof(float), a);
    cudaStreamSynchronize(a);
    launch(fill_slowly, dim3(4), dim3(64), 0, a, x, n, 1.0f + t);
    if (with_event) {
      cudaEventRecord(filled, a);
      cudaStreamWaitEvent(b, filled, 0);
    }
    launch(copy_kernel, dim3(4), dim3(64), 0, b, static_cast<const float*>(x), y, n);
    std::vector<float> h(n);
    cudaMemcpyAsync(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost, b);
    cudaStreamSynchronize(b);
    cudaStreamSynchronize(a);
    stale += h[n - 1] != 1.0f + t;
  }
  cudaFree(x);
  cudaFree(y);
  cudaEventDestroy(filled);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  return stale;
}

TEST_F(Simt, RandomDelaysExposeAMissingStreamWait) {
  baton_simt_set_random_delays(3000, 7);
  EXPECT_GT(stale_copies(false, 12), 0) << "no trial ran the copy before the fill";
  EXPECT_EQ(stale_copies(true, 12), 0) << "the event did not order the streams";
}

TEST_F(Simt, EventsTimeTheirStream) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t start, end;
  cudaEventCreate(&start);
  cudaEventCreate(&end);
  float* dy = upload(std::vector<float>(1 << 12, 0.0f));
  cudaEventRecord(start, s);
  launch(fill_slowly, dim3(8), dim3(128), 0, s, dy, 1 << 12, 3.0f);
  cudaEventRecord(end, s);
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  float ms = -1.0f;
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(download(dy, 1 << 12).back(), 3.0f);
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  cudaStreamDestroy(s);
}

TEST_F(Simt, CopiesCheckTheirDirection) {
  float* dy = upload(std::vector<float>(8, 0.0f));
  std::vector<float> h(8, 1.0f);
  EXPECT_EQ(cudaMemcpy(h.data(), dy, 32, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(dy, h.data(), 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue)
      << "a copy past the allocation's end";
  EXPECT_EQ(cudaMemcpy(dy, h.data(), 32, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaFree(h.data()), cudaErrorInvalidValue);
}

// The warp matrix functions compute a b + c from the bf16 operands, read
// through either layout of b and a leading dimension wider than the tile.
TEST_F(Simt, WarpMatrixProductsMatchTheReference) {
  const int lda = 24;
  std::vector<__nv_bfloat16> a(16 * lda), b(256);
  std::vector<float> c0(256);
  for (int i = 0; i < 16 * lda; ++i) a[i] = __float2bfloat16(static_cast<float>(i % 7) - 3.0f);
  for (int i = 0; i < 256; ++i) {
    b[i] = __float2bfloat16(0.5f * static_cast<float>(i % 5) - 1.0f);
    c0[i] = static_cast<float>(i % 3);
  }
  for (int col = 0; col < 2; ++col) {
    SCOPED_TRACE(col ? "b column-major" : "b row-major");
    const __nv_bfloat16* da = upload(a);
    const __nv_bfloat16* db = upload(b);
    float* dc = upload(c0);
    ASSERT_EQ(
        col ? launch(wmma_tile<wmma::col_major>, dim3(1), dim3(32), 0, nullptr, da, lda, db, dc)
            : launch(wmma_tile<wmma::row_major>, dim3(1), dim3(32), 0, nullptr, da, lda, db, dc),
        cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << diagnostic();
    const auto got = download(dc, 256);
    int wrong = 0;
    for (int r = 0; r < 16; ++r)
      for (int n = 0; n < 16; ++n) {
        float want = c0[r * 16 + n];
        for (int k = 0; k < 16; ++k) {
          const float bk = __bfloat162float(col ? b[n * 16 + k] : b[k * 16 + n]);
          want += __bfloat162float(a[r * lda + k]) * bk;
        }
        wrong += got[r * 16 + n] != 2.0f * want;  // small integers and halves: exact
      }
    EXPECT_EQ(wrong, 0);
  }
}

TEST_F(Simt, AWarpMatrixCallInDivergentCodeIsReported) {
  float* dc = upload(std::vector<float>(256, 0.0f));
  ASSERT_EQ(launch(wmma_in_divergent_code, dim3(1), dim3(32), 0, nullptr, dc), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(diagnostic().find("wmma::fill_fragment"), std::string::npos) << diagnostic();
  EXPECT_NE(diagnostic().find("has exited"), std::string::npos) << diagnostic();
}

TEST_F(Simt, AMisalignedWarpMatrixPointerIsReported) {
  const __nv_bfloat16* da = upload(std::vector<__nv_bfloat16>(512, __float2bfloat16(1.0f)));
  ASSERT_EQ(launch(wmma_misaligned, dim3(1), dim3(32), 0, nullptr, da), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(diagnostic().find("not 256-bit aligned"), std::string::npos) << diagnostic();
}

}  // namespace
