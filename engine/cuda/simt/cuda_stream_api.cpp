// The CUDA runtime API's streams and events on the SIMT emulator (the real
// header's signatures): a stream is an in-order queue on its own thread
// (simt_streams.cpp); an event is a point of one stream that others wait
// for. Both may be destroyed with work still queued that refers to them.
#include <chrono>
#include <memory>
#include <mutex>

#include "simt_host.h"
#include "simt_internal.h"
#include "simt_streams.h"

using namespace baton::simt;

extern "C" {

// ---- streams and events

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  auto* st = new CUstream_st(flags, false);
  register_stream(st);
  *s = st;
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) {
  return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread)
    return record(cudaErrorInvalidResourceHandle);
  // As CUDA: returns at once; the queued work still runs, and waits on the
  // stream's progress (events, other streams) stay valid.
  unregister_stream(s);
  s->destroy();
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return record(stream_synchronize(s)); }
cudaError_t cudaStreamQuery(cudaStream_t s) {
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return e;
  CUstream_st* st = resolve_stream(s);
  return st->progress->reached(st->last()) ? cudaSuccess : cudaErrorNotReady;
}

namespace {
std::shared_ptr<RecordPoint> record_of(cudaEvent_t e) {
  std::lock_guard<std::mutex> lock(e->mu);
  return e->record;
}
}  // namespace

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  *e = new CUevent_st;
  (*e)->flags = flags;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;  // its records live on in the work and the waits that hold them
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!e) return record(cudaErrorInvalidResourceHandle);
  if (cudaError_t err = sticky_error(); err != cudaSuccess) return record(err);
  CUstream_st* st = resolve_stream(s);
  auto point = std::make_shared<RecordPoint>();
  const uint64_t position = st->push(implicit_waits(st), [point] {
    point->when_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count());
  });
  // The record is the push itself: its position, not a later count.
  point->point = StreamPoint(st->progress, position);
  std::lock_guard<std::mutex> lock(e->mu);
  e->record = point;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (auto r = record_of(e)) r->point.first->wait_until(r->point.second);
  return record(sticky_error());
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (cudaError_t err = sticky_error(); err != cudaSuccess) return err;
  auto r = record_of(e);
  if (!r) return cudaSuccess;
  return r->point.first->reached(r->point.second) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  auto r = record_of(e);
  if (!r) return cudaSuccess;  // never recorded: nothing to wait for
  return record(stream_enqueue(s, [r] { r->point.first->wait_until(r->point.second); }));
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if ((start->flags | end->flags) & cudaEventDisableTiming)
    return record(cudaErrorInvalidResourceHandle);
  // Each event's record taken under its own lock, one after the other.
  auto a = record_of(start);
  auto b = record_of(end);
  if (!a || !b) return record(cudaErrorInvalidResourceHandle);
  const int64_t ta = a->when_ns.load(), tb = b->when_ns.load();
  if (ta < 0 || tb < 0) return cudaErrorNotReady;
  *ms = static_cast<float>(static_cast<double>(tb - ta) / 1e6);
  return cudaSuccess;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* data) {
  return record(stream_enqueue(s, [fn, data] { fn(data); }));
}

}  // extern "C"
