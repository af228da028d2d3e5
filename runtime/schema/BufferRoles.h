//===- BufferRoles.h - Which buffer roles follow a parameter's layout -----===//
//
// Shared by codegen (logical shapes of padded parameters) and the runtime
// (the verifier's logical_shape and ZeRO-shard checks), so both sides agree
// on which buffers have a parameter's shape and are padded, split and
// checkpointed with it. A header next to artifact.fbs, like DTypeBytes.h,
// so codegen includes it without the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SCHEMA_BUFFERROLES_H
#define KILN_RUNTIME_SCHEMA_BUFFERROLES_H

#include "runtime/schema/artifact_generated.h"

namespace kiln::schema {

// A gradient or optimizer state: one per parameter, of its type.
constexpr bool isPerParameterRole(BufferRole role) {
  return role == BufferRole_Gradient || role == BufferRole_AdamM ||
         role == BufferRole_AdamV || role == BufferRole_Momentum;
}

// A parameter or one of its per-parameter buffers.
constexpr bool hasParameterLayout(BufferRole role) {
  return role == BufferRole_Parameter || isPerParameterRole(role);
}

} // namespace kiln::schema

#endif // KILN_RUNTIME_SCHEMA_BUFFERROLES_H
