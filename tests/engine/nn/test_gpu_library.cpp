// Which library serves GPU devices (pick_gpu_library) and opening a backend
// through it: the emulator when asked for, the CPU with the reason when
// there is neither a GPU nor the emulator.
#include <baton/core/error.h>
#include <baton/nn/gpu_library.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace baton {
namespace {

const std::string kLibDir = BATON_GPU_LIBRARY_DIR;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(GpuLibrary, TheEmulatorServesGpuDevicesWhenAskedFor) {
  if (!std::filesystem::exists(kLibDir + "/baton_cuda_emu.so"))
    GTEST_SKIP() << "built without the GPU emulator (no CUDA toolkit headers)";
  const GpuPick pick = pick_gpu_library(kLibDir, true);
  ASSERT_FALSE(pick.library.empty()) << pick.why;
  EXPECT_TRUE(pick.emulated);
  EXPECT_EQ(pick.devices, 1);
  EXPECT_TRUE(has(pick.why, "emulated")) << pick.why;
  GpuLibrary lib(pick.library);
  std::shared_ptr<DeviceBackend> be = lib.open(0, "fp32");
  EXPECT_TRUE(has(be->describe(), "emulator")) << be->describe();
  std::vector<float> host = {1, 2, 3, 4}, back(4);
  float* d = static_cast<float*>(be->allocate(sizeof(float) * 4));
  be->upload(d, host.data(), sizeof(float) * 4);
  be->scale(d, 4, 3.0f);
  be->download(back.data(), d, sizeof(float) * 4);
  be->release(d);
  EXPECT_EQ(back, (std::vector<float>{3, 6, 9, 12}));
}

TEST(GpuLibrary, WithoutAGpuOrTheEmulatorTheCpuIsChosenWithTheReason) {
  const GpuPick pick = pick_gpu_library(kLibDir, false);
  if (pick.devices > 0) {
    EXPECT_TRUE(has(pick.library, "baton_cuda.so")) << pick.why;
    return;  // a GPU machine: the real library serves them
  }
  EXPECT_TRUE(pick.library.empty());
  EXPECT_FALSE(pick.why.empty());
  EXPECT_TRUE(has(pick.why, "no NVIDIA GPU") || has(pick.why, "no NVIDIA driver") ||
              has(pick.why, "no CUDA backend") ||
              has(pick.why, "cannot load"))
      << pick.why;
}

TEST(GpuLibrary, AMissingLibraryIsNamed) {
  const GpuPick pick = pick_gpu_library("/nonexistent/lib", true);
  EXPECT_TRUE(pick.library.empty());
  EXPECT_TRUE(has(pick.why, "/nonexistent/lib/baton_cuda_emu.so")) << pick.why;
  try {
    GpuLibrary lib("/nonexistent/lib/baton_cuda.so");
    FAIL() << "a missing library opened";
  } catch (const RuntimeError& e) {
    EXPECT_TRUE(has(e.what(), "/nonexistent/lib/baton_cuda.so")) << e.what();
  }
}

TEST(GpuLibrary, AnUnknownPrecisionIsRefusedWithTheChoices) {
  if (!std::filesystem::exists(kLibDir + "/baton_cuda_emu.so"))
    GTEST_SKIP() << "built without the GPU emulator (no CUDA toolkit headers)";
  GpuLibrary lib(kLibDir + "/baton_cuda_emu.so");
  try {
    lib.open(0, "fp16");
    FAIL() << "fp16 opened";
  } catch (const RuntimeError& e) {
    EXPECT_TRUE(has(e.what(), "fp32, tf32, bf16")) << e.what();
  }
  EXPECT_THROW(lib.open(3, "fp32"), RuntimeError);  // the emulator has one device
}

}  // namespace
}  // namespace baton
