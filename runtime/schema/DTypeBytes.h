//===- DTypeBytes.h - Bytes of one element of each artifact dtype ---------===//
//
// Shared by codegen (buffer sizes in the memory plan) and the runtime
// (Artifact's buffer infos, the memory plan's checker), so both sides size a
// buffer the same way. A header of its own next to artifact.fbs, like
// ArtifactVersion.h, so codegen includes it without the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SCHEMA_DTYPEBYTES_H
#define KILN_RUNTIME_SCHEMA_DTYPEBYTES_H

#include "runtime/schema/artifact_generated.h"

#include <cstdint>

namespace kiln::schema {

// 0 for a value outside the enum (a corrupt artifact; the loader refuses it).
constexpr int64_t dtypeBytes(DType dtype) {
  switch (dtype) {
  case DType_F32:
  case DType_I32:
    return 4;
  case DType_BF16:
  case DType_F16:
    return 2;
  case DType_I64:
    return 8;
  case DType_Bool:
    return 1;
  }
  return 0;
}

} // namespace kiln::schema

#endif // KILN_RUNTIME_SCHEMA_DTYPEBYTES_H
