//===- ArtifactMemory.cpp - The planned artifact's buffers in the arena ---===//
//
// The last stages of ArtifactWriter::plan, after every buffer and schedule
// entry exists:
//  4. Parameters pad-dims padded (kiln.true_shape) give their true shape to
//     their Parameter, Gradient and optimizer-state buffers (logical_shape).
//  5. The memory plan (MemoryPlan.cpp) over the final buffers and
//     schedules: kernel calls read their inputs and write their outputs,
//     GEMMs read a, b (and an epilogue's bias / aux input) and write c (and
//     an epilogue's aux / bias output), collectives read and write their
//     buffers in place.
//
//===----------------------------------------------------------------------===//

#include "codegen/ArtifactWriter.h"

#include "runtime/schema/DTypeBytes.h"

namespace kiln {

void ArtifactWriter::planMemory() {
  memoryBuffers.clear();
  for (const PlannedBuffer &b : buffers) {
    int64_t bytes = schema::dtypeBytes(b.dtype);
    for (int64_t d : b.shape)
      bytes *= d;
    memoryBuffers.push_back({b.name, b.role, bytes, b.aliasOf});
  }
  memoryPrograms.clear();
  for (const PlannedProgram &program : programs) {
    MemoryPlanProgram &planned = memoryPrograms.emplace_back();
    planned.name = program.name;
    for (const PlannedStep &step : program.schedule) {
      MemoryPlanCall call;
      call.location = step.location;
      if (step.gemm) {
        // Read: a, b and the epilogue's bias / aux inputs; written: c and
        // the epilogue's aux / bias outputs (all live at this call).
        const PlannedGemm &g = *step.gemm;
        call.buffers = {g.a, g.b};
        if (g.accumulate) // C += P reads C
          call.buffers.push_back(g.c);
        if (g.bias >= 0 && !g.biasWritten)
          call.buffers.push_back(g.bias);
        if (g.aux >= 0 && !g.auxWritten)
          call.buffers.push_back(g.aux);
        call.numInputs = call.buffers.size();
        call.buffers.push_back(g.c);
        if (g.aux >= 0 && g.auxWritten)
          call.buffers.push_back(g.aux);
        if (g.bias >= 0 && g.biasWritten)
          call.buffers.push_back(g.bias);
      } else {
        call.buffers = step.buffers;
        call.numInputs = step.numInputs;
        // cuDNN's reserved workspace is live at this entry, like scratch.
        if (step.cudnnAttention && step.cudnnAttention->workspace >= 0)
          call.buffers.push_back(static_cast<uint32_t>(step.cudnnAttention->workspace));
        call.elementwise =
            !step.collective && kernelList[step.kernel].elementwise;
      }
      planned.schedule.push_back(std::move(call));
    }
  }
  memory = MemoryPlanner(memoryBuffers, memoryPrograms).plan();
}

// A padded parameter's gradient and optimizer state are padded the same way
// (they have its type): all of them carry its true shape.
void ArtifactWriter::planLogicalShapes() {
  for (PlannedBuffer &buffer : buffers) {
    switch (buffer.role) {
    case schema::BufferRole_Parameter:
    case schema::BufferRole_Gradient:
    case schema::BufferRole_AdamM:
    case schema::BufferRole_AdamV:
    case schema::BufferRole_Momentum:
      break;
    default:
      continue;
    }
    // A ZeRO shard's logical shape is the user's region of its whole shape.
    const std::vector<int64_t> &shape =
        buffer.shardAxis.empty() ? buffer.shape : buffer.wholeShape;
    auto it = trueShapes.find(buffer.name);
    if (it != trueShapes.end() && it->second.size() == shape.size())
      buffer.logicalShape = it->second;
  }
}

} // namespace kiln
