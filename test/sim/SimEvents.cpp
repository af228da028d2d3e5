//===- SimEvents.cpp - The simulated driver's events ----------------------===//
//
// Test-only, part of libcuda.so.1 of the device simulator (SimDriver.cpp has
// the banner): event creation, records (plain, fork points of a capture, or
// event record nodes of a graph), cross-stream waits and elapsed times.
//
//===----------------------------------------------------------------------===//

#include "SimDriverState.h"

#include <chrono>

using namespace kiln::sim::driver;

namespace {

// The capture a record on `s` goes into: its own, or the one it joined by
// a wait; null outside captures.
CUstream_st *captureOf(CUstream_st *s) {
  CUstream_st *origin = s->joinedTo && s->joinedTo->capturing ? s->joinedTo : s;
  return origin->capturing ? origin : nullptr;
}

// What a record does when its stream (or graph) runs it.
void stamp(CUevent e) {
  e->at = std::chrono::steady_clock::now();
  e->completed = true;
}

} // namespace

extern "C" {

// Events: a record is one more operation on the stream, which stamps the
// host clock when the stream runs it; the elapsed time between two is the
// host time of the operations between them (the simulator's timing, not a
// GPU's). Before its stream has run the record, an event is not ready.
CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  if (!phEvent || (Flags & ~unsigned(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING)))
    return CUDA_ERROR_INVALID_VALUE;
  auto *e = new CUevent_st;
  e->timing = !(Flags & CU_EVENT_DISABLE_TIMING);
  device().events.insert(e);
  *phEvent = e;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent) {
  if (!device().events.erase(hEvent))
    return CUDA_ERROR_INVALID_HANDLE;
  // A record still queued keeps writing into it: destroyed once run.
  hEvent->destroyed = true;
  if (hEvent->pending == 0)
    delete hEvent;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  if (!device().events.count(hEvent))
    return CUDA_ERROR_INVALID_HANDLE;
  CUstream_st *s = resolveStream(hStream);
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  CUevent e = hEvent;
  e->completed = false;
  e->capturedIn = captureOf(s);
  if (e->capturedIn)
    return enqueueOn(s, Operation{[] {}, "cuEventRecord (captured)"});
  ++e->pending;
  return enqueueOn(s, Operation{[e] {
                                  stamp(e);
                                  if (--e->pending == 0 && e->destroyed)
                                    delete e;
                                },
                                "cuEventRecord"});
}

// CU_EVENT_RECORD_EXTERNAL in a capture: an event record node, which stamps
// the event each time the graph runs (the runtime times its step graph by
// two of them); otherwise a plain record, as CUDA does.
CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  if (flags & ~unsigned(CU_EVENT_RECORD_EXTERNAL))
    return CUDA_ERROR_INVALID_VALUE;
  CUstream_st *s = resolveStream(hStream);
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!(flags & CU_EVENT_RECORD_EXTERNAL) || !captureOf(s))
    return cuEventRecord(hEvent, hStream);
  if (!device().events.count(hEvent))
    return CUDA_ERROR_INVALID_HANDLE;
  CUevent e = hEvent;
  e->completed = false;
  e->capturedIn = nullptr; // a record of the graph's runs, not a fork point
  return enqueueOn(s, Operation{[e] { stamp(e); }, "cuEventRecord (event record node)"});
}

// Cross-stream order. The simulator runs one stream's work at a time, so a
// wait on an event recorded in a capture joins the waiting stream to that
// capture (its work is recorded there, after everything issued so far: a
// valid order of the fork), and a wait outside captures runs every queued
// operation first, the event's record included.
CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int flags) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  CUstream_st *s = resolveStream(hStream);
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!device().events.count(hEvent) || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUstream_st *origin = hEvent->capturedIn; origin && origin->capturing) {
    if (s != origin && !s->capturing)
      s->joinedTo = origin;
    return CUDA_SUCCESS;
  }
  if (s->capturing || (s->joinedTo && s->joinedTo->capturing))
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION; // an event from outside the capture
  if (!hEvent->completed && hEvent->pending > 0) {
    Device &d = device();
    for (CUstream_st *other : d.streams)
      drain(*other);
    drain(d.legacy);
  }
  return device().sticky;
}

CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  Device &d = device();
  if (!pMilliseconds || !d.events.count(hStart) || !d.events.count(hEnd))
    return CUDA_ERROR_INVALID_HANDLE;
  if (!hStart->timing || !hEnd->timing)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!hStart->completed || !hEnd->completed)
    return CUDA_ERROR_NOT_READY;
  *pMilliseconds = std::chrono::duration<float, std::milli>(hEnd->at - hStart->at).count();
  return CUDA_SUCCESS;
}

} // extern "C"
