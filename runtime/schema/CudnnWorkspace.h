//===- CudnnWorkspace.h - Device scratch of one cuDNN attention call ------===//
//
// Shared by codegen, which reserves a cuDNN attention call's workspace in
// the memory plan (a Workspace buffer of its schedule entry, named by
// CudnnAttention.workspace), and the CUDA runtime, which lays the workspace
// out (runtime/cuda/Cudnn.cpp: the engine's part first, then Kiln's own
// scratch) and binds it to that buffer when cuDNN asks no more than was
// reserved. A header of its own next to artifact.fbs, like
// ArtifactVersion.h, so codegen includes it without the runtime.
//
// What is known exactly: Kiln's scratch of a backward (the f32 softmax_sum
// [B, H, T] and dQ accumulator [B, H, T, D] that cudnn-frontend's SDPA
// backward keeps in the workspace, each 256-byte aligned). What is not: the
// engine's part is cuDNN's choice, made when the plan is built on the GPU.
// kilnc reserves what cuDNN 9.14's engines asked on an H100
// (tools/bench/RESULTS.md, 2026-11-26): for a grouped-query backward, dK and
// dV of every query head in bf16 before the sum over each group
// (B * H * S * (D + Dv) * 2 bytes) and one 256-byte unit; otherwise one
// unit. A call whose engine asks more gets its workspace outside the plan
// (the runtime says so: the plan's peak is then short by that much).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SCHEMA_CUDNNWORKSPACE_H
#define KILN_RUNTIME_SCHEMA_CUDNNWORKSPACE_H

#include <cstdint>

namespace kiln::schema {

// The unit every part of the workspace is rounded up to.
constexpr int64_t kCudnnWorkspaceAlignment = 256;

constexpr int64_t cudnnAligned(int64_t bytes) {
  return (bytes + kCudnnWorkspaceAlignment - 1) / kCudnnWorkspaceAlignment *
         kCudnnWorkspaceAlignment;
}

// The shape of one SDPA call, as CudnnAttention (artifact.fbs) gives it.
struct CudnnSdpaShape {
  bool backward = false;
  int64_t batch = 0, heads = 0, kvHeads = 0, qLen = 0, kvLen = 0;
  int64_t headDim = 0, valueDim = 0;
};

// Kiln's own scratch after the engine's part: a backward's softmax_sum and
// f32 dQ accumulator; 0 for a forward.
constexpr int64_t cudnnSdpaScratchBytes(const CudnnSdpaShape &s) {
  if (!s.backward)
    return 0;
  const int64_t rows = s.batch * s.heads * s.qLen;
  return cudnnAligned(rows * 4) + cudnnAligned(rows * s.headDim * 4);
}

// The engine's part kilnc expects (see the header comment).
constexpr int64_t cudnnSdpaExpectedEngineBytes(const CudnnSdpaShape &s) {
  int64_t bytes = kCudnnWorkspaceAlignment;
  if (s.backward && s.kvHeads != s.heads)
    bytes += cudnnAligned(s.batch * s.heads * s.kvLen * (s.headDim + s.valueDim) * 2);
  return bytes;
}

// The bytes codegen reserves for the call: the expected engine part, then
// Kiln's scratch.
constexpr int64_t cudnnSdpaReservedBytes(const CudnnSdpaShape &s) {
  return cudnnSdpaExpectedEngineBytes(s) + cudnnSdpaScratchBytes(s);
}

} // namespace kiln::schema

#endif // KILN_RUNTIME_SCHEMA_CUDNNWORKSPACE_H
