//===- MemoryPlanCheck.h - Verifying an artifact's static memory plan -----===//
//
// Part of the content checks (ArtifactVerifier.cpp runs it last): every
// Buffer.offset in bounds and aligned, aliases without offsets of their own,
// a breakdown that adds up to the arena, and no two simultaneously live
// buffers sharing bytes, with liveness recomputed here from the schedules
// rather than trusted from the compiler. Every artifact a test loads is
// checked this way.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_MEMORYPLANCHECK_H
#define KILN_RUNTIME_MEMORYPLANCHECK_H

#include "runtime/Artifact.h"

#include <vector>

namespace kiln::rt {

// Needs `infos` filled by the buffer checks (elements, bytes, storage) and
// schedules whose indices were checked; fills `infos[i].offset`.
Status checkMemoryPlan(const schema::Artifact &artifact,
                       std::vector<BufferInfo> &infos);

} // namespace kiln::rt

#endif // KILN_RUNTIME_MEMORYPLANCHECK_H
