//===- ArtifactVersion.h - Format version of the .kart schema -------------===//
//
// Shared by the writer (codegen) and the reader (runtime/Artifact): codegen
// writes this into Artifact.version and the runtime refuses any other value.
// A header of its own, next to artifact.fbs, so codegen can include it
// without pulling in the runtime. Bump it whenever a field of
// artifact.fbs changes meaning.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SCHEMA_ARTIFACTVERSION_H
#define KILN_RUNTIME_SCHEMA_ARTIFACTVERSION_H

#include <cstdint>

namespace kiln::schema {

// 2: Kernel.args (the buffer signature every KernelCall is checked against).
// 3: programs ("step" run grad_accum times, "update", "eval") instead of one
//    schedule; optimizer/metric roles; TrainConfig grad_accum, clip, settings.
// 4: CUDA artifacts: Kernel.launch (grid, block, shared bytes), Artifact.archs.
constexpr uint32_t kArtifactVersion = 4;

} // namespace kiln::schema

#endif // KILN_RUNTIME_SCHEMA_ARTIFACTVERSION_H
