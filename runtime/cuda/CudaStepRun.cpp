//===- CudaStepRun.cpp - How the CUDA backend runs its programs -----------===//
//
// The CUDA backend's programs as they run: captured once as CUDA graphs and
// replayed (each program, and the whole training step as one graph), or
// launched one by one where a graph is not wanted -- timed with CUDA events
// (--profile, --trace), eagerly (KILN_CUDA_EAGER=1), or at a program's first
// run while its attention calls are decided (CudaAttentionDispatch.cpp).
// CudaBackend.cpp sets the device, memory, kernels and calls up.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBackendImpl.h"
#include "runtime/metrics/Nvtx.h"
#include "runtime/metrics/Trace.h"

#include <cstring>

namespace kiln::rt::cuda {

Status CudaBackend::Impl::capture(DeviceProgram &program) {
  const CudaDriver &d = *driver;
  KILN_RETURN_IF_ERROR(d.check(
      d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      "cuStreamBeginCapture", detail::concat(" for '", program.name, "'")));
  Status launched = launchAll(program);
  // End the capture on every path, or the stream stays unusable.
  CUresult ended = d.cuStreamEndCapture(stream, &program.graph);
  KILN_RETURN_IF_ERROR(launched.withPrefix(
      detail::concat("capturing '", program.name, "' as a CUDA graph: ")));
  KILN_RETURN_IF_ERROR(d.check(ended, "cuStreamEndCapture",
                               detail::concat(" for '", program.name, "'")));
  return d.check(d.cuGraphInstantiate(&program.exec, program.graph, 0),
                 "cuGraphInstantiateWithFlags",
                 detail::concat(" for '", program.name, "'"));
}

Status CudaBackend::Impl::launchAll(const DeviceProgram &program) const {
  const CudaDriver &d = *driver;
  std::vector<const DeviceCall *> forked;
  Status status = okStatus();
  for (size_t i = 0; i < program.calls.size() && status.ok(); ++i) {
    const DeviceCall &call = program.calls[i];
    // Join the collectives this entry waits for (it touches their buffers),
    // and all of them before a collective on the step's stream: NCCL's
    // kernels of one communicator must not run concurrently on two streams.
    const bool inPlaceCollective = !call.collective.empty() && !call.overlap;
    for (auto it = forked.begin(); it != forked.end() && status.ok();) {
      if (inPlaceCollective || (*it)->overlapUntil == static_cast<int64_t>(i)) {
        status = d.check(d.cuStreamWaitEvent(stream, (*it)->done, 0), "cuStreamWaitEvent",
                         " after " + (*it)->where);
        it = forked.erase(it);
      } else {
        ++it;
      }
    }
    if (!status.ok())
      break;
    if (!call.overlap) {
      status = launch(call);
    } else {
      // Fork: the collective waits for what the step's stream has done so
      // far (its gradients are final), then runs beside what follows.
      status = d.check(d.cuEventRecord(call.ready, stream), "cuEventRecord",
                       " before " + call.where);
      if (status.ok())
        status = d.check(d.cuStreamWaitEvent(commStream, call.ready, 0),
                         "cuStreamWaitEvent", " for " + call.where);
      if (status.ok())
        status = runCollective(call, commStream);
      if (status.ok())
        status = d.check(d.cuEventRecord(call.done, commStream), "cuEventRecord",
                         " after " + call.where);
      if (status.ok())
        forked.push_back(&call);
    }
  }
  // Join on every path: the program ends when its collectives have, and a
  // capture must end with every stream it forked joined back.
  for (const DeviceCall *call : forked) {
    Status joined = d.check(d.cuStreamWaitEvent(stream, call->done, 0),
                            "cuStreamWaitEvent", " after " + call->where);
    if (status.ok())
      status = joined;
  }
  return status;
}

void CudaBackend::Impl::releaseStepGraph() {
  if (stepGraph.exec)
    driver->cuGraphExecDestroy(stepGraph.exec);
  if (stepGraph.graph)
    driver->cuGraphDestroy(stepGraph.graph);
  stepGraph.exec = nullptr;
  stepGraph.graph = nullptr;
  stepGraph.key.clear();
}

Status CudaBackend::Impl::captureStep(const TrainingStepPlan &plan,
                                      std::vector<int64_t> key) {
  const CudaDriver &d = *driver;
  releaseStepGraph();
  // Each write's place in the pinned staging, 16-byte aligned.
  stepGraph.offsets.clear();
  size_t total = 0;
  auto place = [&](const BufferWrite &w) {
    stepGraph.offsets.push_back(total);
    total += (w.bytes + 15) / 16 * 16;
  };
  for (const std::vector<BufferWrite> &batch : plan.microBatches)
    for (const BufferWrite &w : batch)
      place(w);
  for (const BufferWrite &w : plan.updateWrites)
    place(w);
  if (total > stepGraph.pinnedBytes) {
    if (stepGraph.pinned)
      KILN_RETURN_IF_ERROR(d.check(d.cuMemFreeHost(stepGraph.pinned), "cuMemFreeHost"));
    stepGraph.pinned = nullptr;
    stepGraph.pinnedBytes = 0;
    void *pinned = nullptr;
    KILN_RETURN_IF_ERROR(d.check(d.cuMemAllocHost(&pinned, total), "cuMemAllocHost",
                                 detail::concat(" (", total, " bytes of step inputs)")));
    stepGraph.pinned = static_cast<uint8_t *>(pinned);
    stepGraph.pinnedBytes = total;
  }

  for (CUevent *e : {&stepGraph.start, &stepGraph.end})
    if (!*e)
      KILN_RETURN_IF_ERROR(d.check(d.cuEventCreate(e, CU_EVENT_DEFAULT), "cuEventCreate"));
  KILN_RETURN_IF_ERROR(d.check(
      d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      "cuStreamBeginCapture", " for the training step"));
  // The graph's first and last nodes stamp stepGraph.start and .end at
  // every replay: the device's time for the step, its launch left out.
  auto stamp = [&](CUevent e) {
    return d.check(d.cuEventRecordWithFlags(e, stream, CU_EVENT_RECORD_EXTERNAL),
                   "cuEventRecordWithFlags", " in the training step's graph");
  };
  auto record = [&]() -> Status {
    KILN_RETURN_IF_ERROR(stamp(stepGraph.start));
    for (uint32_t b : plan.zeroed)
      KILN_RETURN_IF_ERROR(d.check(d.cuMemsetD8Async(devicePointer(b), 0, bytes(b), stream),
                                   "cuMemsetD8Async", " for " + artifact.describeBuffer(b)));
    size_t i = 0;
    auto copy = [&](const std::vector<BufferWrite> &writes) -> Status {
      for (const BufferWrite &w : writes)
        KILN_RETURN_IF_ERROR(d.check(
            d.cuMemcpyHtoDAsync(devicePointer(w.buffer), stepGraph.pinned + stepGraph.offsets[i++],
                                w.bytes, stream),
            "cuMemcpyHtoDAsync", " for " + artifact.describeBuffer(w.buffer)));
      return okStatus();
    };
    auto runProgram = [&](ProgramKind kind) -> Status {
      return launchAll(programs[static_cast<int>(kind)]);
    };
    for (const std::vector<BufferWrite> &batch : plan.microBatches) {
      KILN_RETURN_IF_ERROR(copy(batch));
      KILN_RETURN_IF_ERROR(runProgram(ProgramKind::kStep));
    }
    KILN_RETURN_IF_ERROR(copy(plan.updateWrites));
    KILN_RETURN_IF_ERROR(runProgram(ProgramKind::kUpdate));
    return stamp(stepGraph.end);
  };
  Status recorded = record();
  // End the capture on every path, or the stream stays unusable.
  CUresult ended = d.cuStreamEndCapture(stream, &stepGraph.graph);
  KILN_RETURN_IF_ERROR(recorded.withPrefix("capturing the training step as a CUDA graph: "));
  KILN_RETURN_IF_ERROR(d.check(ended, "cuStreamEndCapture", " for the training step"));
  KILN_RETURN_IF_ERROR(d.check(d.cuGraphInstantiate(&stepGraph.exec, stepGraph.graph, 0),
                               "cuGraphInstantiateWithFlags", " for the training step"));
  stepGraph.key = std::move(key);
  return okStatus();
}

Status CudaBackend::Impl::runProfiled(ProgramKind kind) {
  const CudaDriver &d = *driver;
  const DeviceProgram &program = programs[static_cast<int>(kind)];
  while (events.size() < program.calls.size() + 1) {
    CUevent e = nullptr;
    KILN_RETURN_IF_ERROR(d.check(d.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate"));
    events.push_back(e);
  }
  // The stream is idle here (every run ends synchronized), so event 0 runs
  // when it is recorded: the trace places the events after this host time.
  TraceRecorder *traced = trace && trace->active() ? trace : nullptr;
  double hostStart = traced ? traced->now() : 0;
  KILN_RETURN_IF_ERROR(d.check(d.cuEventRecord(events[0], stream), "cuEventRecord"));
  for (size_t i = 0; i < program.calls.size(); ++i) {
    nvtx::ScopedRange range(program.rangeNames[i]);
    KILN_RETURN_IF_ERROR(launch(program.calls[i]));
    KILN_RETURN_IF_ERROR(d.check(d.cuEventRecord(events[i + 1], stream), "cuEventRecord",
                                 " after " + program.calls[i].where));
  }
  KILN_RETURN_IF_ERROR(d.check(d.cuStreamSynchronize(stream), "cuStreamSynchronize",
                               detail::concat(" after the profiled '", program.name,
                                              "' (rerun with KILN_CUDA_EAGER=1 to name the "
                                              "failing kernel)")));
  ScheduleTiming &timing = this->timing[static_cast<int>(kind)];
  std::vector<double> &total = timing.seconds;
  if (profiling) {
    total.resize(program.calls.size(), 0.0);
    ++timing.runs;
  }
  double at = hostStart; // the end of entry i - 1 on the trace's clock
  for (size_t i = 0; i < program.calls.size(); ++i) {
    float ms = 0;
    KILN_RETURN_IF_ERROR(d.check(d.cuEventElapsedTime(&ms, events[i], events[i + 1]),
                                 "cuEventElapsedTime", " for " + program.calls[i].where));
    if (profiling)
      total[i] += ms * 1e-3;
    if (traced)
      traced->entry(kind, i, at, at + ms * 1e-3);
    at += ms * 1e-3;
  }
  if (traced)
    traced->program(kind, hostStart, at);
  return okStatus();
}

Status CudaBackend::Impl::runEagerly(const DeviceProgram &program) {
  for (size_t i = 0; i < program.calls.size(); ++i) {
    const DeviceCall &call = program.calls[i];
    nvtx::ScopedRange range(program.rangeNames[i]);
    KILN_RETURN_IF_ERROR(launch(call));
    KILN_RETURN_IF_ERROR(driver->check(driver->cuStreamSynchronize(stream),
                                       "cuStreamSynchronize", " after " + call.where));
  }
  return okStatus();
}

Status CudaBackend::run(ProgramKind kind) {
  Impl &m = *impl_;
  const DeviceProgram &program = m.programs[static_cast<int>(kind)];
  if (!program.present)
    return failedPrecondition("the artifact has no '", program.name, "' program");
  nvtx::ScopedRange range(program.name);
  if (program.undecided) {
    KILN_RETURN_IF_ERROR(m.decideCalls(kind));
  } else if (m.timed()) {
    KILN_RETURN_IF_ERROR(m.runProfiled(kind));
  } else if (m.eager) {
    KILN_RETURN_IF_ERROR(m.runEagerly(program));
  } else {
    KILN_RETURN_IF_ERROR(m.driver->check(
        m.driver->cuGraphLaunch(program.exec, m.stream), "cuGraphLaunch",
        detail::concat(" for '", program.name, "'")));
    KILN_RETURN_IF_ERROR(m.driver->check(
        m.driver->cuStreamSynchronize(m.stream), "running the CUDA graph of",
        detail::concat(" '", program.name, "' (rerun with KILN_CUDA_EAGER=1 to "
                       "name the failing kernel and its model line)")));
  }
  return m.readScalars();
}

Status CudaBackend::runTrainingStep(const TrainingStepPlan &plan) {
  Impl &m = *impl_;
  const DeviceProgram &step = m.programs[static_cast<int>(ProgramKind::kStep)];
  const DeviceProgram &update = m.programs[static_cast<int>(ProgramKind::kUpdate)];
  // Launch by launch where a graph is not wanted (KILN_CUDA_EAGER, per-entry
  // timing) or not yet possible (an attention call is decided at its
  // program's first run).
  m.stepGraph.lastSeconds.reset();
  if (m.eager || m.timed() || !step.present || !update.present || step.undecided ||
      update.undecided)
    return Backend::runTrainingStep(plan);
  // The plan's shape: what the graph's memsets and copies were recorded for.
  std::vector<int64_t> key(plan.zeroed.begin(), plan.zeroed.end());
  auto shape = [&](const std::vector<BufferWrite> &writes) {
    key.push_back(-1);
    for (const BufferWrite &w : writes) {
      key.push_back(w.buffer);
      key.push_back(static_cast<int64_t>(w.bytes));
    }
  };
  for (const std::vector<BufferWrite> &batch : plan.microBatches)
    shape(batch);
  shape(plan.updateWrites);
  if (key != m.stepGraph.key)
    KILN_RETURN_IF_ERROR(m.captureStep(plan, key));
  // The bytes the graph's copies read at replay: the previous replay has
  // finished (run waits), so they may be rewritten.
  size_t i = 0;
  auto stage = [&](const std::vector<BufferWrite> &writes) {
    for (const BufferWrite &w : writes)
      std::memcpy(m.stepGraph.pinned + m.stepGraph.offsets[i++], w.data, w.bytes);
  };
  for (const std::vector<BufferWrite> &batch : plan.microBatches)
    stage(batch);
  stage(plan.updateWrites);
  const CudaDriver &d = *m.driver;
  nvtx::ScopedRange range("step and update (one CUDA graph)");
  KILN_RETURN_IF_ERROR(d.check(d.cuGraphLaunch(m.stepGraph.exec, m.stream), "cuGraphLaunch",
                               " for the training step"));
  KILN_RETURN_IF_ERROR(d.check(
      d.cuStreamSynchronize(m.stream), "running the CUDA graph of",
      " the training step (rerun with KILN_CUDA_EAGER=1 to name the failing kernel "
      "and its model line)"));
  float ms = 0;
  KILN_RETURN_IF_ERROR(d.check(d.cuEventElapsedTime(&ms, m.stepGraph.start, m.stepGraph.end),
                               "cuEventElapsedTime", " for the training step"));
  m.stepGraph.lastSeconds = ms * 1e-3;
  return m.readScalars();
}

} // namespace kiln::rt::cuda
