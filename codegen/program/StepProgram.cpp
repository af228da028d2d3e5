//===- StepProgram.cpp - Queries and schedule decisions on the step -------===//
//
// What can be decided on the planned step without MLIR, once the lowering
// has made every buffer and schedule entry:
//  - which buffers an entry touches (accessOf), the one rule the memory
//    plan and the collective overlap both read;
//  - which collectives may overlap the entries after them (planOverlaps);
//  - the memory plan (MemoryPlan.cpp).
//
//===----------------------------------------------------------------------===//

#include "codegen/program/StepProgram.h"

#include "runtime/schema/DTypeBytes.h"

#include <algorithm>

namespace kiln {

uint32_t StepProgram::storageOf(uint32_t index) const {
  while (buffers[index].aliasOf >= 0)
    index = static_cast<uint32_t>(buffers[index].aliasOf);
  return index;
}

int64_t StepProgram::elementsOf(uint32_t index) const {
  int64_t elements = 1;
  for (int64_t d : buffers[index].shape)
    elements *= d;
  return elements;
}

int64_t StepProgram::bytesOf(uint32_t index) const {
  return schema::dtypeBytes(buffers[index].dtype) * elementsOf(index);
}

bool StepProgram::isTransient(schema::BufferRole role) {
  return role == schema::BufferRole_Activation ||
         role == schema::BufferRole_Workspace;
}

StepAccess StepProgram::accessOf(const PlannedStep &step) const {
  StepAccess access;
  if (step.gemm) {
    // Read: a, b (c when accumulating) and the epilogue's bias / aux
    // inputs; written: c and the epilogue's aux / bias outputs.
    const PlannedGemm &g = *step.gemm;
    access.buffers = {g.a, g.b};
    if (g.accumulate) // C += P reads C
      access.buffers.push_back(g.c);
    if (g.bias >= 0 && !g.biasWritten)
      access.buffers.push_back(g.bias);
    if (g.aux >= 0 && !g.auxWritten)
      access.buffers.push_back(g.aux);
    access.numInputs = access.buffers.size();
    access.buffers.push_back(g.c);
    if (g.aux >= 0 && g.auxWritten)
      access.buffers.push_back(g.aux);
    if (g.bias >= 0 && g.biasWritten)
      access.buffers.push_back(g.bias);
    return access;
  }
  access.buffers = step.buffers;
  access.numInputs = step.numInputs;
  // cuDNN's reserved workspace is live at this entry, like scratch.
  if (step.cudnnAttention && step.cudnnAttention->workspace >= 0)
    access.buffers.push_back(
        static_cast<uint32_t>(step.cudnnAttention->workspace));
  access.inPlace = !step.collective && kernels[step.kernel].inPlace;
  return access;
}

void StepProgram::planOverlaps() {
  auto persistent = [&](uint32_t b) { return !isTransient(buffers[b].role); };
  auto contains = [](const std::vector<uint32_t> &list, uint32_t b) {
    return std::find(list.begin(), list.end(), b) != list.end();
  };
  for (PlannedProgram &program : programs) {
    std::vector<PlannedStep> &schedule = program.schedule;
    // The storage each entry touches.
    std::vector<std::vector<uint32_t>> touched;
    touched.reserve(schedule.size());
    for (const PlannedStep &step : schedule) {
      touched.push_back(accessOf(step).buffers);
      for (uint32_t &b : touched.back())
        b = storageOf(b);
    }
    for (size_t i = 0; i < schedule.size(); ++i) {
      std::optional<PlannedCollective> &c = schedule[i].collective;
      if (!c)
        continue;
      const std::vector<uint32_t> &mine = touched[i];
      // The first later entry that touches its buffers.
      size_t until = schedule.size();
      for (size_t j = i + 1; until == schedule.size() && j < schedule.size();
           ++j)
        for (uint32_t b : touched[j])
          if (contains(mine, b))
            until = j;
      if (c->kind == schema::CollectiveKind_AllReduce) {
        // Reduced in place: only what nothing reads later, and not
        // activations (their bytes may be given to others after the call).
        c->overlap = until == schedule.size() &&
                     std::all_of(mine.begin(), mine.end(), persistent);
      } else if (c->kind == schema::CollectiveKind_AllGather) {
        // Its input lives on (a parameter slice); its output is live from
        // this entry on, so the entries before `until` cannot touch it.
        c->overlap = persistent(mine.front()) && until > i + 1;
        if (c->overlap && until < schedule.size())
          c->overlapUntil = static_cast<int32_t>(until);
      }
    }
  }
}

void StepProgram::planMemory() { memory = planArena(*this); }

} // namespace kiln
