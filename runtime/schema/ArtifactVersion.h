//===- ArtifactVersion.h - Format version of the .kart schema -------------===//
//
// Shared by the writer (codegen) and the reader (runtime/Artifact): codegen
// writes this into Artifact.version and the runtime refuses any other value.
// A header of its own, next to artifact.fbs, so codegen can include it
// without pulling in the runtime. Also the arena alignment both sides of the
// memory plan agree on. Bump it whenever a field of
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
// 4: the static memory plan (Buffer.offset, Artifact.arena_bytes and
//    memory_plan, Kernel.elementwise, since renamed in_place), GemmCall.tf32 and bf16 GEMM operands,
//    Buffer.logical_shape (padded dims), CUDA kernels (Kernel.launch,
//    Artifact.archs).
// 5: GemmCall.epilogue, bias, aux (a GEMM may read a bias / gelu input and
//    write a gelu input / bias gradient besides C).
// 6: KernelCall.cudnn_attention (cuDNN's fused attention may replace an
//    attention kernel).
// 7: GemmCall.accumulate (C += the product: the weight gradient summed over
//    the chunks of a fused linear cross-entropy).
// 8: CollectiveCall steps (all-reduce of gradient buckets between ranks)
//    and Artifact.mesh.
// 9: CudnnAttention.workspace (cuDNN's workspace reserved in the memory
//    plan).
// 10: CollectiveCall.kind (reduce-scatter, all-gather, local shard: ZeRO)
//     and overlap; Buffer.shard_axis, Buffer.whole_shape.
// 11: Buffer.shard_dim (tensor parallelism: a block of one dimension)
// 12: CudnnAttention.tokens_major (attention in layout bthd: an older
//     runtime would give cuDNN contiguous [B, H, T, D] strides).
// 13: a Gradient's Buffer.offset may lie outside the persistent region:
//     with grad_accum 1 a gradient no collective touches lives from its
//     first entry in "step" to the end of "update" (schema/Liveness.h), and
//     an older runtime's checker would call its sharing an overlap.
constexpr uint32_t kArtifactVersion = 13;

// Alignment of every Buffer.offset (and of the arena itself): a multiple of
// the 64-byte cache line and AVX-512 vector, and of what CUDA's allocator
// guarantees (256), so CPU and CUDA arenas can share one plan.
constexpr int64_t kArenaAlignment = 256;

} // namespace kiln::schema

#endif // KILN_RUNTIME_SCHEMA_ARTIFACTVERSION_H
