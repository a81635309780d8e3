// The one header every kernel source includes. Under nvcc it is CUDA itself;
// under the host compiler (the emulation build, baton_cuda_emu.so) it maps
// the kernel language onto the SIMT emulator in simt/: threadIdx and
// friends read the running fiber's coordinates, __syncthreads() is a real
// barrier over the block's fibers, the warp intrinsics synchronise exactly
// the lanes their mask names, nvcuda::wmma's warp matrix functions are
// simt_wmma.h's, and __shared__ is storage per block. Kernel
// sources are written once, in CUDA, and compiled both ways; the only
// spelling that differs is dynamic shared memory (BATON_DYNAMIC_SHARED)
// and launching (baton::gpu::launch in launch.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#if defined(__CUDACC__)

#include <mma.h>  // nvcuda::wmma: the tensor cores' warp matrix functions

// extern __shared__ T name[]: the launch's dynamic shared memory.
#define BATON_DYNAMIC_SHARED(T, name) extern __shared__ T name[]

#else  // the emulator

#include "simt/simt_device.h"
#include "simt/simt_wmma.h"

#undef __global__
#define __global__
#undef __launch_bounds__
#define __launch_bounds__(...)
// One instance per OS thread: the fibers of a block run on one thread, one
// block after another, so every block sees its own storage (uninitialised
// from its point of view, as on a GPU).
#undef __shared__
#define __shared__ static thread_local
#define threadIdx (::baton::simt::thread_index())
#define blockIdx (::baton::simt::block_index())
#define blockDim (::baton::simt::block_dim())
#define gridDim (::baton::simt::grid_dim())
#define warpSize 32
#define __syncthreads() ::baton::simt::syncthreads(__FILE__, __LINE__)
#define __syncwarp(...) ::baton::simt::syncwarp(__FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__)
#define BATON_DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(::baton::simt::dynamic_shared())

#endif
