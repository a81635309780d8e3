// The CUDA backend's memory: the device arena (one allocation, pieces
// carved from it, nothing allocated after) and uploads that overlap
// compute through pinned staging on a copy stream, which the compute
// stream still waits for (checked under the emulator's random delays).
#include "cuda/gpu_test_backend.h"

#include <baton/core/error.h>

#include <numeric>

namespace baton::test {
namespace {

class GpuBackendMemory : public GpuBackendTest {
 protected:
  void TearDown() override {
    if (set_delays_) set_delays_(0, 1);
    GpuBackendTest::TearDown();
  }
  // The emulator's random delays (a no-op against a real GPU's library).
  void random_delays(int max_us) {
    set_delays_ = reinterpret_cast<void (*)(int, unsigned)>(
        dlsym(lib_, "baton_simt_set_random_delays"));
    if (set_delays_) set_delays_(max_us, 11);
  }
  void (*set_delays_)(int, unsigned) = nullptr;
};

TEST_F(GpuBackendMemory, TheArenaIsOneAllocationAndItsPiecesAreCarvedFromIt) {
  const int64_t before = be_->allocation_count();
  be_->reserve_arena(1 << 20);
  EXPECT_EQ(be_->allocation_count(), before + 1);
  std::vector<float*> pieces;
  for (int i = 0; i < 40; ++i) pieces.push_back(static_cast<float*>(be_->allocate(1000 + i % 24)));
  EXPECT_EQ(be_->allocation_count(), before + 1) << "a piece called the device allocator";
  {
    std::vector<float> fresh(8, 0.0f);
    be_->download(fresh.data(), pieces[0], sizeof(float) * 8);
    for (float v : fresh) EXPECT_TRUE(std::isnan(v)) << "an arena piece reads as " << v;
  }
  EXPECT_EQ(be_->arena_used(), 40u * 1024u);  // each rounded to 256 bytes
  for (size_t i = 1; i < pieces.size(); ++i)
    EXPECT_GE(reinterpret_cast<char*>(pieces[i]) - reinterpret_cast<char*>(pieces[i - 1]), 1000);
  // The pieces are device memory the ops use.
  std::vector<float> host(250);
  std::iota(host.begin(), host.end(), 0.0f);
  be_->upload(pieces[3], host.data(), host.size() * sizeof(float));
  be_->scale(pieces[3], 250, 2.0f);
  be_->copy(pieces[3], pieces[4], 250);
  std::vector<float> back(250);
  be_->download(back.data(), pieces[4], back.size() * sizeof(float));
  for (int i = 0; i < 250; ++i) ASSERT_EQ(back[i], 2.0f * i);
  EXPECT_EQ(be_->allocation_count(), before + 1);
  for (float* p : pieces) be_->release(p);  // no-ops: the arena keeps them
  EXPECT_EQ(be_->arena_bytes(), size_t{1} << 20);
  EXPECT_EQ(be_->arena_overflow_bytes(), 0u);
  {
    // A piece the arena cannot hold comes from the allocator, counted.
    void* big = be_->allocate(2 << 20);
    EXPECT_EQ(be_->allocation_count(), before + 2);
    EXPECT_EQ(be_->arena_overflow_bytes(), size_t{2} << 20);
    EXPECT_EQ(be_->arena_used(), 40u * 1024u);
    be_->fill(static_cast<float*>(big), (2 << 20) / 4, 1.0f);
    be_->release(big);
  }
  EXPECT_THROW(be_->reserve_arena(1024), RuntimeError);
}

TEST_F(GpuBackendMemory, AnAsyncUploadIsWaitedForByTheOpsAfterIt) {
  random_delays(2000);
  const int64_t n = 4096;
  float* x = dev_zeros<float>(n);
  std::vector<float> host(n);
  for (int trial = 1; trial <= 12; ++trial) {
    std::fill(host.begin(), host.end(), static_cast<float>(trial));
    be_->upload_async(x, host.data(), n * sizeof(float));
    // The host buffer is the caller's again at once.
    std::fill(host.begin(), host.end(), -1.0f);
    const double sum = be_->sum_squares(x, n);
    ASSERT_EQ(sum, static_cast<double>(n) * trial * trial) << "trial " << trial;
  }
}

// The pattern the step uses: the next batch goes into one buffer while the
// ops queued before read the other.
TEST_F(GpuBackendMemory, DoubleBufferedUploadsOverlapTheOpsOnTheOtherBuffer) {
  random_delays(2000);
  const int64_t n = 2048;
  float* buffers[2] = {dev_zeros<float>(n), dev_zeros<float>(n)};
  float* copies[2] = {dev_zeros<float>(n), dev_zeros<float>(n)};
  std::vector<float> host(n);
  std::fill(host.begin(), host.end(), 1.0f);
  be_->upload_async(buffers[0], host.data(), n * sizeof(float));
  for (int step = 1; step <= 8; ++step) {
    float* current = buffers[(step - 1) % 2];
    be_->copy(current, copies[(step - 1) % 2], n);  // queued before the next upload
    std::fill(host.begin(), host.end(), static_cast<float>(step + 1));
    be_->upload_async(buffers[step % 2], host.data(), n * sizeof(float));
    const double sum = be_->sum_squares(copies[(step - 1) % 2], n);
    ASSERT_EQ(sum, static_cast<double>(n) * step * step) << "step " << step;
  }
}

}  // namespace
}  // namespace baton::test
