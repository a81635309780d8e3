// upload_async: host bytes to the device through pinned staging on a copy
// stream of the backend's own, so the next batch's upload overlaps the
// step that is computing. Two staging slots are used in turn; a slot is
// reused only after its previous copy has run (its event), and the compute
// stream waits for each copy's event before its next op.
#include <baton/core/error.h>

#include <cstring>
#include <string>

#include "gpu_backend.h"

namespace baton::gpu {

void GpuBackend::upload_async(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  if (copy_stream_ == nullptr) {
    check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking),
          "upload_async (cudaStreamCreate)");
  }
  StagingSlot& slot = staging_[next_slot_];
  next_slot_ = 1 - next_slot_;
  // The slot's last copy must have left it before the host overwrites it.
  if (slot.copied != nullptr) check(cudaEventSynchronize(slot.copied), "upload_async (wait)");
  if (slot.bytes < bytes) {
    if (slot.pinned != nullptr) check(cudaFreeHost(slot.pinned), "upload_async (cudaFreeHost)");
    slot.pinned = nullptr;
    slot.bytes = 0;
    check(cudaMallocHost(&slot.pinned, bytes), "upload_async (cudaMallocHost)");
    slot.bytes = bytes;
  }
  if (slot.copied == nullptr) {
    check(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming),
          "upload_async (cudaEventCreate)");
  }
  std::memcpy(slot.pinned, host_src, bytes);
  check(cudaMemcpyAsync(device_dst, slot.pinned, bytes, cudaMemcpyHostToDevice, copy_stream_),
        "upload_async (cudaMemcpyAsync)");
  check(cudaEventRecord(slot.copied, copy_stream_), "upload_async (cudaEventRecord)");
  check(cudaStreamWaitEvent(stream_, slot.copied, 0), "upload_async (cudaStreamWaitEvent)");
}

void GpuBackend::reserve_marks(int n) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  while (static_cast<int>(marks_.size()) < n) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "reserve_marks (cudaEventCreate)");
    marks_.push_back(e);
  }
}

void GpuBackend::mark(int i) {
  if (i < 0 || i >= static_cast<int>(marks_.size())) {
    throw RuntimeError("mark " + std::to_string(i) + ": " + std::to_string(marks_.size()) +
                       " reserved");
  }
  check(cudaEventRecord(marks_[static_cast<size_t>(i)], stream_), "mark (cudaEventRecord)");
}

void GpuBackend::wait_mark(int i) {
  if (i < 0 || i >= static_cast<int>(marks_.size())) {
    throw RuntimeError("wait_mark " + std::to_string(i) + ": " + std::to_string(marks_.size()) +
                       " reserved");
  }
  check(cudaEventSynchronize(marks_[static_cast<size_t>(i)]), "wait_mark (cudaEventSynchronize)");
}

void GpuBackend::release_staging() {
  for (cudaEvent_t e : marks_) (void)cudaEventDestroy(e);
  marks_.clear();
  if (copy_stream_ != nullptr) (void)cudaStreamSynchronize(copy_stream_);
  for (StagingSlot& slot : staging_) {
    if (slot.copied != nullptr) (void)cudaEventDestroy(slot.copied);
    if (slot.pinned != nullptr) (void)cudaFreeHost(slot.pinned);
    slot = StagingSlot{};
  }
  if (copy_stream_ != nullptr) (void)cudaStreamDestroy(copy_stream_);
  copy_stream_ = nullptr;
}

}  // namespace baton::gpu
