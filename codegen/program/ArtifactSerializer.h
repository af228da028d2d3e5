//===- ArtifactSerializer.h - A StepProgram as a .kart flatbuffer ---------===//
//
// The last stage of codegen, free of MLIR: the step program (StepProgram.h)
// and the header read from the module (StepLowering.h's readArtifactHeader)
// written as the flatbuffer of runtime/schema/artifact.fbs, then the
// integrity trailer.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_ARTIFACTSERIALIZER_H
#define KILN_CODEGEN_ARTIFACTSERIALIZER_H

#include "codegen/program/StepProgram.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

// What the artifact says besides its program.
struct ArtifactHeader {
  std::string model;  // Artifact.model
  std::string target; // "cpu" or "cuda"
  std::vector<std::string> cudaArchs; // cuda only
  std::string prelude; // compiled before every kernel
  // TrainConfig
  int64_t batch = 0, seq = 0;
  std::string optimizer;
  int64_t vocabSize = 0; // largest token id + 1 the data may hold (0: none)
  int64_t gradAccum = 1;
  float clip = 0.0f;
  std::string settingsJson; // every kiln.train setting
  // Artifact.mesh: axis name and size, in order (empty: one process).
  std::vector<std::pair<std::string, uint32_t>> mesh;
};

// The .kart bytes of `program` (lowered, its memory planned).
std::string serializeArtifact(const StepProgram &program,
                              const ArtifactHeader &header);

} // namespace kiln

#endif // KILN_CODEGEN_ARTIFACTSERIALIZER_H
