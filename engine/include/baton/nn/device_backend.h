// A Backend on a device whose memory the host cannot read (a GPU, or the
// GPU emulator): besides the ops, it owns the device's memory and moves
// bytes between host and device. Pointers given to its ops are device
// pointers from allocate().
//
// Thread rules (differ from Backend's): one instance per replica, called by
// one thread at a time. Its ops are queued in order on the instance's own
// stream and may still be running when a call returns; download() and
// synchronize() wait for them. A value an op returns to the host (a loss,
// a sum of squares) is a synchronisation point.
#pragma once

#include <baton/core/device_memory.h>
#include <baton/nn/backend.h>
#include <baton/nn/gpu_peak.h>

#include <cstddef>
#include <cstdint>

namespace baton {

class DeviceBackend : public Backend, public DeviceMemory {
 public:
  // Device memory (DeviceMemory's allocate/release/upload/download/...):
  // at least 256-byte aligned; allocate throws RuntimeError naming the size
  // when the device has no room. Counted: allocation_count() is how many
  // times this instance has called the device's allocator (a step calls it
  // never). Copies are in the stream's order; upload returns when the host
  // buffer may be reused, download when the bytes are in host memory.
  DeviceMemory* memory() const override { return const_cast<DeviceBackend*>(this); }
  virtual int64_t allocation_count() const = 0;
  // Bytes the device can still give (its free memory: on the emulator,
  // BATON_SIMT_MEMORY_MIB less what it holds): what a run's memory plan is
  // checked against before its buffers are made.
  virtual size_t free_memory_bytes() const = 0;
  virtual size_t total_memory_bytes() const = 0;  // the device's whole memory
  // The device's dense matrix peak at this backend's precision, modelled
  // (gpu_peak.h), with how; the emulator's is its advertised device's,
  // said so.
  virtual GpuPeak peak() const = 0;
  // Waits for every op queued so far; throws RuntimeError with the device's
  // error when one of them failed.
  virtual void synchronize() = 0;
  // Makes this backend's device the calling thread's current one (CUDA's
  // current device is per thread, and a kernel launched into a stream of
  // another device fails): a thread that drives this backend calls it
  // before its first op, as every replica thread does before each task.
  virtual void make_current() = 0;
  // Marks in this backend's stream, for another host thread to wait on
  // (a gradient bucket's allreduce waiting for the backward ops that
  // write it, while later ones still run): reserve_marks(n) makes n, at
  // plan time (a step makes none); mark(i) records in mark i what is
  // queued so far; wait_mark(i), from any thread, returns once that work
  // has run, and throws RuntimeError with the device's error when it
  // failed. A mark is recorded again only after its last wait.
  virtual void reserve_marks(int n) = 0;
  virtual void mark(int i) = 0;
  virtual void wait_mark(int i) = 0;

  // The device arena: one allocation of `bytes`, made once (at plan time,
  // when the sizes are known). While it exists allocate() carves 256-byte
  // aligned pieces out of it without calling the device's allocator (so
  // allocation_count() does not move), and release() of a piece does
  // nothing: the arena goes with the backend. A piece that does not fit
  // comes from the device's allocator as without an arena (counted, and
  // summed in arena_overflow_bytes(): the plan undercounted). At most once
  // per instance.
  virtual void reserve_arena(size_t bytes) = 0;
  virtual size_t arena_bytes() const = 0;
  virtual size_t arena_used() const = 0;
  virtual size_t arena_overflow_bytes() const = 0;
  // Makes the scratch products share at least `bytes` (a figure from
  // product_scratch_bytes) now, through allocate() (so from the arena when
  // there is one), so that no step allocates it. A product that needs more
  // grows it from the device's allocator, counted.
  virtual void reserve_product_scratch(size_t bytes) = 0;
  // An upload that overlaps compute (the next batch's, during this step):
  // the bytes are copied into pinned staging, which a copy stream of the
  // backend's own moves to the device. Returns once `host_src` may be
  // reused. Ops queued on this backend after the call wait for the copy;
  // ops queued before it run alongside, so they must not use `device_dst`:
  // the caller double-buffers (the step reads one batch buffer while the
  // next batch goes into the other).
  virtual void upload_async(void* device_dst, const void* host_src, size_t bytes) = 0;
};

}  // namespace baton
